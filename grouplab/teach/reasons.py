"""Why a consumer rejoins, in words: the member machine's rejoin reasons (consumer/coordinator.py,
`_request_rejoin` and the `join_sent`/`partitions_revoked` events' `reason`) mapped to catalogue
sentences. A reason `API: ERROR` (the coordinator answered API with ERROR) reads as the same
sentence `explain` gives for that answer; the member's own reasons have keys of their own.
tests/test_readable.py holds this table to the reasons the member machine writes."""

from __future__ import annotations

import re

from grouplab.teach.catalog import Catalog

# The member machine's own reasons (not an error answer) -> catalogue key.
OWN_REASONS = {
    "starting": "why.member.starting",
    "coordinator connection lost": "why.member.connection_lost",
    "request timed out": "why.member.request_timed_out",
    "coordinator unresponsive": "why.member.coordinator_unresponsive",
    "poll timeout": "why.member.poll_timeout",
    "partitions were revoked (cooperative follow-up rebalance)": "why.member.cooperative_followup",
    "undecodable subscription": "why.member.undecodable",
    "undecodable assignment": "why.member.undecodable",
}


# Reasons grouplab's machines write in a request (KIP-800's JoinGroup/LeaveGroup reason) or an event
# (a transaction's end) -> catalogue key, so that they read in the chosen language. A reason that
# starts with one of PREFIXED and a colon keeps what follows (`partition count changed: {...}`).
SAID_REASONS = {
    "starting": "reason.starting",
    "coordinator connection lost": "reason.connection_lost",
    "request timed out": "reason.request_timed_out",
    "coordinator unresponsive": "reason.coordinator_unresponsive",
    "poll timeout": "reason.poll_timeout",
    "partitions were revoked (cooperative follow-up rebalance)": "reason.cooperative_followup",
    "undecodable subscription": "reason.undecodable_subscription",
    "undecodable assignment": "reason.undecodable_assignment",
    "the consumer is closing": "reason.closing",
    "consumer poll timeout has expired": "reason.poll_timeout_expired",
    "a new producer instance initialised": "reason.txn_new_instance",
    "EndTxn": "reason.txn_end",
    "the coordinator restarted (staged offsets are not durable)": "reason.txn_coordinator_restarted",
}
PREFIXED = {"partition count changed": "reason.partition_count_changed"}


# The coordinator's own texts (a rebalance's trigger, a removal's detail, a refusal's message:
# coordinator/group.py) -> catalogue key; the en templates say them exactly as written.
SAID_TEXTS = [
    (re.compile(r"member (?P<member>\S+) joined"), "text.member_joined"),
    (re.compile(r"member (?P<member>\S+) is not in group (?P<group>\S+)"), "text.not_in_group"),
    (re.compile(r"no heartbeat for (?P<ms>\d+) ms"), "text.no_heartbeat"),
    (re.compile(r"static member (?P<instance>\S+) rejoined as (?P<member>\S+)"), "text.static_rejoined"),
    (re.compile(r"static member (?P<instance>\S+) joined"), "text.static_joined"),
    (re.compile(r"(?P<members>\S+(?:, \S+)*) removed: (?P<reason>\w+)"), "text.removed"),
    (re.compile(r"leader rejoined \((?P<member>[^:()]+)\)"), "text.leader_rejoined"),
    (re.compile(r"leader rejoined \((?P<member>[^:()]+): (?P<reason>.*)\)"), "text.leader_rejoined.reason"),
    (re.compile(r"member metadata changed \((?P<member>[^:()]+)\)"), "text.metadata_changed"),
    (re.compile(r"member metadata changed \((?P<member>[^:()]+): (?P<reason>.*)\)"), "text.metadata_changed.reason"),
    (re.compile(r"(?P<member>\S+) left \((?P<reason>.*)\)"), "text.left"),
    (re.compile(r"did not rejoin within the rebalance timeout"), "text.no_rejoin"),
    (re.compile(r"did not send SyncGroup within the rebalance timeout"), "text.no_sync"),
]


def say_text(text: str, c: Catalog) -> str:
    """One of the coordinator's texts in the catalogue's language (a reason inside it too); any
    other text as it came."""
    for pattern, key in SAID_TEXTS:
        m = pattern.fullmatch(text)
        if m is not None and c.has(key):
            fields = m.groupdict()
            if "reason" in fields:
                fields["reason"] = say_reason(fields["reason"], c)
            return c.t(key, **fields)
    return text


def say_reason(reason: str, c: Catalog) -> str:
    """A reason as the catalogue says it; one grouplab did not write (a real client's own text,
    `API: ERROR`) as it came."""
    key = SAID_REASONS.get(reason)
    if key is not None and c.has(key):
        return c.t(key)
    head, sep, rest = reason.partition(": ")
    key = PREFIXED.get(head) if sep else None
    if key is not None and c.has(key):
        return c.t(key, detail=rest)
    return reason


def why_rejoin(reason: str, c: Catalog) -> str | None:
    """The sentence for a rejoin reason, or None when the catalogue has none."""
    key = OWN_REASONS.get(reason)
    if key is not None:
        return c.t(key)
    api, sep, error = reason.partition(": ")
    if sep:
        for candidate in (f"why.{api}.{error}", f"why.error.{error}"):
            if c.has(candidate):
                return c.t(candidate, request_generation="?")
    return None
