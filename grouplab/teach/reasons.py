"""Why a consumer rejoins, in words: the member machine's rejoin reasons (consumer/coordinator.py,
`_request_rejoin` and the `join_sent`/`partitions_revoked` events' `reason`) mapped to catalogue
sentences. A reason `API: ERROR` (the coordinator answered API with ERROR) reads as the same
sentence `explain` gives for that answer; the member's own reasons have keys of their own.
tests/test_readable.py holds this table to the reasons the member machine writes."""

from __future__ import annotations

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
