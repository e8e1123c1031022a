"""What the dashboard shows, as a pure fold over a run's event-log lines and the coordinator's
message trace (docs/ui.md §2). No clock, no I/O: every input carries its `ts_ms`, and
`snapshot(now_ms)` is asked for a time. So the same model could show a recorded run directory,
and its tests feed it lines by hand.

Inputs:
- `event(node, name, ts_ms, fields)`: an event-log line. The coordinator's group events give the
  group's state, generation, leader, protocol, members and each stable generation's assignment;
  every event also feeds the one cost fold (grouplab/costs.py's CostTracker, which keeps the
  RebalanceTracker): the members' own `partitions_assigned/revoked/lost` and `app_crashed` and the
  run's `member_fault` / `member_fault_over` (grouplab/cluster.py) say who holds what and who
  stopped consuming. The run's `member_crashed` / `member_fault` give the timeouts of a countdown.
- `trace(line)`: a message-trace line. JoinGroup requests give each member's session timeout and
  subscription, Heartbeat / JoinGroup / SyncGroup requests when the coordinator last heard from it.

The free texts the page shows as they are (a rebalance's trigger) are said in the model's language
(`say_trigger`); the page's own words come with the page (grouplab/ui/texts.py).

The honest costs (issue 12, docs/events.md §6) are the CostTracker's, read at `now_ms`: which
partitions are assigned but not consumed and to which stop, what each stop cost, the group's
totals, and the stopped members not removed yet (`waiting`), whose countdown the page shows. The
model adds only what the page needs beside them: the group as the coordinator sees it, and the
sessions from the trace.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

from grouplab.costs import ASSIGNED_NOT_CONSUMED, CONSUMED, CostTracker, Segment, Stall
from grouplab.rebalances import Rebalance
from grouplab.ui.brokers import BrokersView
from grouplab.protocol.consumer_protocol import decode_subscription
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.errors import ErrorCode, ProtocolError
from grouplab.protocol.types import TopicPartition
from grouplab.teach.catalog import Catalog
from grouplab.teach.reasons import say_text

TP = TopicPartition

# Requests that restart a member's session at the coordinator (a SyncGroup answer does too).
SESSION_APIS = frozenset({"Heartbeat", "JoinGroup", "SyncGroup", "ConsumerGroupHeartbeat"})
# How each fault is noticed: by the session timeout, or by the consumer's own poll timer.
POLL_TIMEOUT_FAULTS = frozenset({"slow"})
MAX_REBALANCES = 50
# A consumer-protocol group's events whose names do not start with "consumer_" (docs/events.md §4.1c).
CONSUMER_GROUP_EVENTS = frozenset({"group_epoch_bumped", "target_assignment_computed"})


def error_name(code: Any) -> str | None:
    """A Kafka error code's name, None for 0 (no error)."""
    if not isinstance(code, int) or code == 0:
        return None
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def subscribed_topics(protocols: Any) -> list[str] | None:
    """The topics of a traced JoinGroup's first protocol's subscription, if it decodes."""
    try:
        meta = protocols[0]["metadata"]
        raw = base64.b64decode(meta["$bytes"]) if isinstance(meta, dict) else bytes(meta)
        return list(decode_subscription(raw).topics)
    except (KeyError, IndexError, TypeError, ValueError, ProtocolError):
        return None


DEPARTED_SHOWN = 8  # removed members the grid keeps a column for
# The member a consumer-protocol group's epoch move names first (coordinator/consumer_group.py's
# details: "member M joined", "M, N removed: ...").
_FIRST_MEMBER = re.compile(r"(?:member )?([^\s,]+)")


def say_trigger(text: str | None, cause: str | None, c: Catalog) -> str | None:
    """A rebalance's trigger in the catalogue's language: the coordinator's texts as `explain` says
    them; a consumer-protocol group's epoch move that none of them matches by its cause (English:
    the text as it came)."""
    if text is None:
        return None
    said = say_text(text, c)
    key = f"cg.cause.{cause}"
    if said != text or c.lang == "en" or cause is None or not c.has(key):
        return said
    first = _FIRST_MEMBER.match(text)
    detail = text.partition(" now ")[2] or text  # metadata_changed: "subscribed topics now {...}"
    return c.t(key, member=first.group(1) if first else "?", detail=detail)



@dataclass
class MemberView:
    """One member of the group, as the coordinator knows it."""

    member_id: str
    client_id: str
    session_timeout_ms: int | None = None
    protocols: list[str] = field(default_factory=list)  # its assignor preference
    topics: list[str] | None = None  # its subscription
    last_heartbeat_ms: int | None = None  # its last Heartbeat request
    last_session_ms: int | None = None  # the last time its session was restarted
    heartbeat_error: str | None = None  # the last Heartbeat answer's error, if it had one
    heartbeats: int = 0


@dataclass
class GroupView:
    group_id: str
    state: str = "Empty"
    # "classic", or "consumer" (KIP-848): then `generation` is the group epoch, `protocol` the
    # coordinator's assignor, there is no leader, and `assigned` holds each member's epoch.
    type: str = "classic"
    generation: int = 0
    leader: str | None = None
    protocol: str | None = None
    members: dict[str, MemberView] = field(default_factory=dict)
    # partition -> (member id, generation): the last stable generation's assignment, less the
    # partitions of members removed since.
    assigned: dict[TP, tuple[str, int]] = field(default_factory=dict)
    rebalance_started_ms: int | None = None
    rebalance_trigger: str | None = None
    rebalance_cause: str | None = None  # its enumeration (RebalanceCause, GroupEpochCause)
    rebalances: list[dict[str, Any]] = field(default_factory=list)
    # Members the coordinator removed (newest last, at most DEPARTED_SHOWN): the grid keeps a greyed
    # column for each, so a class sees who left, when and why.
    departed: list[dict[str, Any]] = field(default_factory=list)


class DashboardModel:
    """The fold. `snapshot(now_ms)` is what the page renders (docs/ui.md §4)."""

    def __init__(self, group_id: str, lang: str = "en") -> None:
        self.group_id = group_id
        self.c = Catalog(lang)
        self.group = GroupView(group_id)
        self.costs = CostTracker()
        self.topics: dict[str, int] = {}
        # client id -> (session.timeout.ms, max.poll.interval.ms) from its last fault's run line
        self.timeouts: dict[str, tuple[int | None, int | None]] = {}
        self.coordinator_up = False
        self.durable = False
        self.consumer_session_ms: int | None = None  # group.consumer.session.timeout.ms, from coordinator_started
        self.clock_ms = 0
        self.brokers = BrokersView(group_id)  # a cluster's brokers (ui/brokers.py); one broker shows none
        self._requests: dict[tuple[str, int], tuple[str, str]] = {}  # (conn, correlation id) -> (api, member)

    # ------------------------------------------------------------------ inputs

    def feed(self, node: str, ev: LogEvent) -> None:
        """An event as an EventLog listener gets it."""
        rebalance = self.costs.feed(node, ev)
        self.event(node, ev.event, ev.ts_ms, ev.fields)
        if rebalance is not None and rebalance.group_id == self.group_id:
            self._rebalanced(rebalance)

    def event(self, node: str, name: str, ts_ms: int, f: dict[str, Any]) -> None:
        """One event-log line's fields, for the group's view (the costs come from `feed`)."""
        self.clock_ms = max(self.clock_ms, ts_ms)
        if node == "coordinator":
            self._coordinator_event(name, ts_ms, f)
            self.brokers.event(name, ts_ms, f)
        elif node == "run" and name in ("member_crashed", "member_fault"):
            self.timeouts[str(f.get("client_id", ""))] = (f.get("session_timeout_ms"), f.get("max_poll_interval_ms"))

    def trace(self, line: dict[str, Any]) -> None:
        ts = int(line.get("ts_ms", self.clock_ms))
        self.clock_ms = max(self.clock_ms, ts)
        kind = line.get("kind")
        if kind == "start":
            self.brokers.start(line)
        elif kind == "request":
            self._request(ts, line)
        elif kind == "response":
            self._response(ts, line)

    # ------------------------------------------------------------------ costs

    def stalls(self) -> list[Stall]:
        """The group's stops, in order: the page's fault rows (id: index + 1)."""
        return [s for s in self.costs.stalls if s.group_id == self.group_id]

    def subscribed(self) -> list[TP]:
        """Every partition of the topics the members subscribe to (all topics before anyone joined)."""
        topics: set[str] = set()
        for m in self.group.members.values():
            topics.update(m.topics or [])
        names = sorted(topics or self.topics)
        return [TP(t, p) for t in names for p in range(self.topics.get(t, 0))]

    def partition_states(self, now_ms: int) -> dict[TP, dict[str, Any]]:
        """Per subscribed partition: `state` (consumed, not_consumed, assigned, unowned), the member
        the group assigns it to, that assignment's generation and the fault charged, if any. The
        cost fold says whether it is consumed or assigned but not consumed (and to which stop);
        the rest is the group's view: `assigned` is handed out but not taken yet (or revoked for a
        rebalance), `unowned` assigned to nobody."""
        now: dict[TP, Segment] = {seg.partition: seg for seg in self.costs.open_segments(now_ms)
                                  if seg.group_id == self.group_id}
        clients = {m.member_id: m.client_id for m in self.group.members.values()}
        out: dict[TP, dict[str, Any]] = {}
        for tp in self.subscribed():
            member: str | None
            generation: int | None
            member, generation = self.group.assigned.get(tp, (None, None))
            client = clients.get(member) if member is not None else None
            seg, fault = now.get(tp), None
            if seg is not None and seg.state == ASSIGNED_NOT_CONSUMED:
                state, member, client, generation = "not_consumed", seg.member_id, seg.client_id, seg.generation
                fault = None if seg.stall is None else seg.stall + 1
            elif seg is not None and seg.state == CONSUMED:
                state = "consumed"
                if seg.client_id != client:  # held by a live consumer the group has not (yet) assigned it to
                    member, generation, client = None, None, seg.client_id
            else:
                state = "assigned" if member is not None else "unowned"
            out[tp] = {"state": state, "member": member, "client": client, "generation": generation, "fault": fault}
        return out

    # ------------------------------------------------------------------ coordinator events

    def _coordinator_event(self, name: str, ts: int, f: dict[str, Any]) -> None:
        g = self.group
        if name == "coordinator_started":
            self.coordinator_up = True
            self.durable = f.get("data_dir") is not None
            session = (f.get("config") or {}).get("group.consumer.session.timeout.ms")
            self.consumer_session_ms = int(session) if session is not None else None
            if not self.durable:  # a fresh Broker: no group until the members join again
                self._reset_group()
            return
        if name == "coordinator_stopped":
            self.coordinator_up = False
            return
        if name in ("topic_created", "partitions_created"):
            self.topics[str(f["topic"])] = int(f["partition_count"])
            return
        if name == "topic_deleted":
            self.topics.pop(str(f["topic"]), None)
            return
        if f.get("group_id") != self.group_id:
            return
        if "state" in f:
            g.state = str(f["state"])
        if name.startswith("consumer_") or name in CONSUMER_GROUP_EVENTS:
            self._consumer_group_event(name, ts, f)
            return
        if name == "member_joined":
            member = g.members.get(f["member_id"])
            if member is None:
                member = g.members[f["member_id"]] = MemberView(f["member_id"], f.get("client_id") or "")
            member.protocols = list(f.get("protocols") or [])
        elif name == "static_member_replaced":
            old = g.members.pop(f["old_member_id"], None)
            if old is not None:
                old.member_id = f["member_id"]
                g.members[old.member_id] = old
            g.assigned = {tp: (f["member_id"] if m == f["old_member_id"] else m, gen) for tp, (m, gen) in g.assigned.items()}
        elif name == "member_removed":
            self._departed(f["member_id"], ts, str(f.get("reason") or ""))
            self._removed(f["member_id"])
        elif name == "rebalance_started":
            if g.rebalance_started_ms is None:
                g.rebalance_started_ms, g.rebalance_trigger, g.rebalance_cause = ts, f.get("trigger"), f.get("cause")
        elif name == "generation_completed":
            g.generation, g.leader, g.protocol = int(f["generation_id"]), f.get("leader"), f.get("protocol_name")
        elif name == "group_loaded":
            g.generation, g.leader, g.protocol = int(f["generation_id"]), f.get("leader"), f.get("protocol_name")
            for member_id in f.get("members") or []:
                g.members.setdefault(member_id, MemberView(member_id, ""))
        elif name == "group_stable":
            gen = int(f["generation_id"])
            g.generation, g.leader, g.protocol = gen, f.get("leader"), f.get("protocol_name")
            clients: dict[str, str] = f.get("clients") or {}
            assignments: dict[str, Any] = f.get("assignments") or {}
            for member_id in [m for m in g.members if m not in assignments]:
                del g.members[member_id]
            for member_id in assignments:
                member = g.members.setdefault(member_id, MemberView(member_id, clients.get(member_id, "")))
                member.client_id = clients.get(member_id, member.client_id)
            g.assigned = {TP(t, p): (m, gen) for m, parts in assignments.items() if isinstance(parts, list)
                          for t, p in parts}
            g.rebalance_started_ms = g.rebalance_trigger = None

    def _consumer_group_event(self, name: str, ts: int, f: dict[str, Any]) -> None:
        """A consumer-protocol group's event (KIP-848, docs/events.md §4.1c): the group epoch stands
        where a generation would, each member's reconciled assignment is what it holds."""
        g = self.group
        g.type, g.leader = "consumer", None
        g.generation = int(f.get("group_epoch", g.generation))
        member_id = str(f.get("member_id") or "")
        if name == "consumer_member_joined":
            member = g.members.setdefault(member_id, MemberView(member_id, str(f.get("client_id") or "")))
            member.topics = list(f.get("subscribed_topic_names") or []) or member.topics
            member.session_timeout_ms = self.consumer_session_ms
        elif name == "group_epoch_bumped":
            if g.rebalance_started_ms is None:
                g.rebalance_started_ms, g.rebalance_trigger, g.rebalance_cause = ts, f.get("detail"), f.get("cause")
        elif name == "target_assignment_computed":
            g.protocol = f.get("assignor")
        elif name == "consumer_member_reconciled":
            epoch = int(f.get("member_epoch", 0))
            g.assigned = {tp: a for tp, a in g.assigned.items() if a[0] != member_id}
            g.assigned.update({TP(str(t), int(p)): (member_id, epoch) for t, p in f.get("assigned") or []})
        elif name == "consumer_member_removed":
            self._departed(member_id, ts, str(f.get("reason") or ""))
            self._removed(member_id)
        elif name == "consumer_static_member_replaced":
            old = g.members.pop(str(f["old_member_id"]), None)
            if old is not None:
                old.member_id = member_id
                g.members[member_id] = old
            g.assigned = {tp: (member_id if m == f["old_member_id"] else m, e) for tp, (m, e) in g.assigned.items()}
        elif name == "consumer_group_loaded":
            for loaded in f.get("members") or []:
                g.members.setdefault(str(loaded), MemberView(str(loaded), ""))
        if f.get("state") == "Stable":
            g.rebalance_started_ms = g.rebalance_trigger = None

    def _reset_group(self) -> None:
        g = self.group
        g.state, g.generation, g.leader, g.protocol, g.type = "Empty", 0, None, None, "classic"
        for member_id in list(g.members):
            self._removed(member_id)
        g.rebalance_started_ms = g.rebalance_trigger = None

    def _departed(self, member_id: str, ts: int, reason: str) -> None:
        member = self.group.members.get(member_id)
        if member is None:
            return
        departed = self.group.departed
        departed.append({"member_id": member_id, "client_id": member.client_id, "removed_ms": ts, "reason": reason})
        del departed[:-DEPARTED_SHOWN]

    def _removed(self, member_id: str) -> None:
        g = self.group
        g.members.pop(member_id, None)
        g.assigned = {tp: a for tp, a in g.assigned.items() if a[0] != member_id}

    def _rebalanced(self, r: Rebalance) -> None:
        summary = {"generation": r.generation, "protocol": r.protocol, "leader": r.leader,
                   "members": len(r.members), "started_ms": r.started_ms, "ended_ms": r.ended_ms,
                   "duration_ms": r.duration_ms, "moved": len(r.moved),
                   "trigger": say_trigger(r.trigger, r.cause, self.c),
                   "removed": [[x.member_id, x.reason] for x in r.removed]}
        self.group.rebalances = (self.group.rebalances + [summary])[-MAX_REBALANCES:]

    # ------------------------------------------------------------------ trace

    def _request(self, ts: int, line: dict[str, Any]) -> None:
        api, body = line.get("api"), line.get("body") or {}
        if api not in SESSION_APIS or body.get("group_id") != self.group_id:
            return
        member_id = body.get("member_id") or ""
        self._requests[(line.get("conn", ""), int(line.get("correlation_id", -1)))] = (api, member_id)
        member = self.group.members.get(member_id)
        if api == "JoinGroup":
            if member is None and member_id:
                member = self.group.members[member_id] = MemberView(member_id, str(line.get("client_id", "")))
            if member is not None:
                member.session_timeout_ms = body.get("session_timeout_ms")
                member.topics = subscribed_topics(body.get("protocols")) or member.topics
        if member is None:
            return
        member.last_session_ms = ts
        if api in ("Heartbeat", "ConsumerGroupHeartbeat"):
            member.last_heartbeat_ms = ts
            member.heartbeats += 1

    def _response(self, ts: int, line: dict[str, Any]) -> None:
        asked = self._requests.pop((line.get("conn", ""), int(line.get("correlation_id", -1))), None)
        if asked is None:
            return
        api, member_id = asked
        member = self.group.members.get(member_id)
        if member is None:
            return
        error = error_name((line.get("body") or {}).get("error_code"))
        if api in ("Heartbeat", "ConsumerGroupHeartbeat"):
            member.heartbeat_error = error
        elif api == "SyncGroup":
            member.last_session_ms = ts  # an answered SyncGroup restarts the session
            if error is None:
                member.heartbeat_error = None  # the rebalance its heartbeats were told of is over

    # ------------------------------------------------------------------ output

    def snapshot(self, now_ms: int) -> dict[str, Any]:
        """Everything the page shows, JSON-able. Costs and countdowns are computed for `now_ms`."""
        g = self.group
        cells = self.partition_states(now_ms)
        waiting = {s.client_id: s for s in self.costs.waiting(now_ms) if s.group_id == self.group_id}
        members = []
        for m in sorted(g.members.values(), key=lambda m: (m.client_id, m.member_id)):
            stall = waiting.get(m.client_id)
            owned = sorted(tp for tp, c in cells.items() if c["member"] == m.member_id)
            members.append({
                "member_id": m.member_id, "client_id": m.client_id, "leader": m.member_id == g.leader,
                "protocols": m.protocols, "session_timeout_ms": m.session_timeout_ms,
                "heartbeat_age_ms": None if m.last_heartbeat_ms is None else now_ms - m.last_heartbeat_ms,
                "heartbeat_error": m.heartbeat_error, "heartbeats": m.heartbeats,
                "partitions": [[tp.topic, tp.partition] for tp in owned],
                "fault": None if stall is None else fault_kind(stall),
                "removal": None if stall is None else self._countdown(m, stall, now_ms),
            })
        totals = self.costs.totals(now_ms, group_id=self.group_id)
        return {
            "now_ms": now_ms, "group_id": g.group_id, "state": g.state, "type": g.type, "generation": g.generation,
            "leader": g.leader, "protocol": g.protocol, "coordinator_up": self.coordinator_up, "durable": self.durable,
            "rebalancing_ms": None if g.rebalance_started_ms is None else now_ms - g.rebalance_started_ms,
            "rebalance_trigger": say_trigger(g.rebalance_trigger, g.rebalance_cause, self.c),
            "topics": dict(self.topics), "members": members,
            # The removed members whose client has not joined again (those are members again).
            "departed": [d for d in g.departed if d["client_id"] not in {m["client_id"] for m in members}],
            "partitions": [{"topic": tp.topic, "partition": tp.partition, **cell} for tp, cell in cells.items()],
            "faults": [{"id": s.index + 1, "client_id": s.client_id, "kind": fault_kind(s), "member_id": s.member_id,
                        "started_ms": s.since_ms, "ended_ms": s.resumed_ms, "removed_ms": s.removed_ms,
                        "removal_reason": s.removal_reason, "not_consumed_ms": self.costs.stall_cost(s, now_ms)[0]}
                       for s in self.stalls()],
            "costs": {"not_consumed_ms": totals.assigned_not_consumed_ms, "unowned_ms": totals.unowned_ms},
            "rebalances": g.rebalances[-10:],
            "brokers": self.brokers.snapshot(self.topics, now_ms),
        }

    def _countdown(self, m: MemberView, stall: Stall, now_ms: int) -> dict[str, Any] | None:
        """When the coordinator will remove a member that stopped (one the cost fold is waiting
        on): a session after it was last heard from, or (a stalled poll loop) max.poll.interval.ms
        after it stalled, when the consumer leaves by itself."""
        session, max_poll = self.timeouts.get(m.client_id, (None, None))
        if stall.fault in POLL_TIMEOUT_FAULTS:
            if max_poll is None:
                return None
            return {"in_ms": max(0, stall.since_ms + max_poll - now_ms), "by": "max.poll.interval.ms"}
        timeout = m.session_timeout_ms or session
        if timeout is None:
            return None
        last = m.last_session_ms if m.last_session_ms is not None else stall.since_ms
        by = "group.consumer.session.timeout.ms" if self.group.type == "consumer" else "session.timeout.ms"
        return {"in_ms": max(0, last + timeout - now_ms), "by": by}


def fault_kind(stall: Stall) -> str:
    """The page's name of a stop: crash, hang, slow, partition."""
    return "crash" if stall.fault in ("app_crashed", "process_crashed", "crash") else stall.fault
