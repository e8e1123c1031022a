"""The coordinator protocol's side of `grouplab compare`: per change of the script, its Figures,
read from the same two streams whether the run was simulated or over sockets — the event log
(coordinator, members, and the run's or simulator's own lines) and the coordinator's message
trace (docs/events.md §7).

Nothing is worked out twice: which partitions are consumed, assigned but not consumed (their
owner stopped) or unowned is the cost fold's (grouplab/costs.py), and completed rebalances and who
took part in them are the rebalance tracker's it feeds (grouplab/rebalances.py). The probe only
cuts them at the changes and says when each change settled: a rebalance completed since the
change, its members exactly the live consumers, and every partition of the group consumed.

A consumer-protocol group (KIP-848) has no rebalances: its change has "rebalanced" once a new
target was computed since the change and every member reached it (stable at the target's epoch;
one heartbeat can do it all, the group never leaving Stable), a member's "rebalances" are the
times its assignment changed, and a
ConsumerGroupHeartbeat that carries nothing but the member's epoch counts as a heartbeat.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from grouplab.compare.script import Figures
from grouplab.costs import CONSUMED, CostTracker
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent


@dataclass
class _Window:
    start_ms: int
    live: set[str]
    idle_at_start: int
    requests: Counter[str] = field(default_factory=Counter)
    rebalances: Counter[str] = field(default_factory=Counter)
    rebalanced: bool = False  # a rebalance completed since the change (every change of the script needs one)
    targeted: bool = False  # a consumer-protocol group: a target assignment was computed since the change
    members: set[str] = field(default_factory=set)  # the consumers of the last one
    settled_ms: int | None = None
    idle_ms: int | None = None
    noticed_ms: int | None = None  # a classic leader saw changed metadata (the partitions added)
    idle_at_notice: int = 0


class CoordinatorProbe:
    """Feed it every event (`feed`) and trace line (`trace`) in order. A change begins with
    `begin(at_ms, live)` when it happens (over sockets), or at a time given in advance
    (`expect`: the simulator's schedule), before any input stamped at or after it."""

    def __init__(self, group_id: str, consumers: set[str]) -> None:
        self.costs = CostTracker()
        self.group_id = group_id
        self.consumers = set(consumers)  # requests from others (an admin's) are not the group's
        self.windows: list[_Window] = []
        self._expected: list[tuple[int, set[str]]] = []
        self._clients: dict[str, str] = {}  # a consumer-protocol group's member id -> client id
        self._holding: dict[str, list[list[object]]] = {}  # and what each member was last given
        self._reached: dict[str, tuple[int, str]] = {}  # and its last (member epoch, member state)
        self._target_epoch = 0

    # ------------------------------------------------------------------ changes

    def expect(self, at_ms: int, live: set[str]) -> None:
        self._expected.append((at_ms, set(live)))
        self._expected.sort(key=lambda e: e[0])

    def begin(self, at_ms: int, live: set[str]) -> None:
        self._close(at_ms)
        self.windows.append(_Window(at_ms, set(live), self._idle(at_ms)))

    def _roll(self, ts_ms: int) -> None:
        while self._expected and self._expected[0][0] <= ts_ms:
            at, live = self._expected.pop(0)
            self.begin(at, live)

    def _close(self, at_ms: int) -> None:
        if self.windows and self.windows[-1].idle_ms is None:
            w = self.windows[-1]
            w.idle_ms = self._idle(at_ms) - w.idle_at_start

    def finish(self, end_ms: int) -> list[Figures]:
        self._roll(end_ms)
        self._close(end_ms)
        return [Figures(settle_ms=None if w.settled_ms is None else w.settled_ms - w.start_ms,
                        messages={api: n for api, n in sorted(w.requests.items()) if api != "Heartbeat"},
                        offsets=w.requests["OffsetCommit"] + w.requests["OffsetFetch"],
                        heartbeats=w.requests["Heartbeat"], idle_ms=w.idle_ms or 0,
                        rebalances=dict(sorted(w.rebalances.items())), failed=None, gave_up=None,
                        metadata_wait_ms=None if w.noticed_ms is None else w.noticed_ms - w.start_ms,
                        metadata_wait_idle_ms=w.idle_at_notice)
                for w in self.windows]

    @property
    def settled(self) -> bool:
        """The change under way has settled."""
        return bool(self.windows) and self.windows[-1].settled_ms is not None

    # ------------------------------------------------------------------ inputs

    def feed(self, node: str, ev: LogEvent) -> None:
        self._roll(ev.ts_ms)
        rebalance = self.costs.feed(node, ev)
        w = self._open()
        if rebalance is not None and rebalance.group_id == self.group_id and w is not None:
            w.rebalances.update(rebalance.clients.values())
            w.rebalanced, w.members = True, set(rebalance.clients.values())
        p = ev.payload
        if isinstance(p, events.MetadataChanged) and node in self.consumers and w is not None and w.noticed_ms is None:
            # The new partitions had no consumer from the change on; the cost fold counts them only
            # once the group hands them out, so they are added here.
            added = sum(new - old for old, new in p.changed.values() if new > old)
            w.noticed_ms = ev.ts_ms
            w.idle_at_notice = self._idle(ev.ts_ms) - w.idle_at_start + added * (ev.ts_ms - w.start_ms)
        if node == "coordinator" and isinstance(p, events.ConsumerGroupEvent) and p.group_id == self.group_id:
            self._consumer_group(p, w)
        self._check(ev.ts_ms)

    def _consumer_group(self, p: events.ConsumerGroupEvent, w: _Window | None) -> None:
        if isinstance(p, events.ConsumerMemberJoined):
            self._clients[p.member_id] = p.client_id
        elif isinstance(p, events.ConsumerStaticMemberReplaced):
            self._clients[p.member_id] = self._clients.pop(p.old_member_id, p.instance_id)
        elif isinstance(p, events.ConsumerMemberRemoved):
            self._clients.pop(p.member_id, None)
            self._holding.pop(p.member_id, None)
            self._reached.pop(p.member_id, None)
        elif isinstance(p, events.TargetAssignmentComputed):
            self._target_epoch = p.assignment_epoch
            if w is not None:
                w.targeted = True
        elif isinstance(p, events.ConsumerMemberReconciled):
            if self._holding.get(p.member_id, []) != p.assigned and w is not None:
                w.rebalances[self._clients.get(p.member_id, p.member_id)] += 1
            self._holding[p.member_id] = p.assigned
            self._reached[p.member_id] = (p.member_epoch, p.member_state.value)
        at_target = all(self._reached.get(m) == (self._target_epoch, "stable") for m in self._clients)
        if w is not None and w.targeted and self._clients and at_target:
            w.rebalanced, w.members = True, set(self._clients.values())

    def trace(self, line: dict[str, Any]) -> None:
        self._roll(int(line.get("ts_ms", 0)))
        w = self._open()
        if w is not None and line.get("kind") == "request" and line.get("client_id") in self.consumers:
            api = str(line.get("api"))
            w.requests["Heartbeat" if api == "ConsumerGroupHeartbeat" and _plain(line.get("body")) else api] += 1

    # ------------------------------------------------------------------ settling

    def _open(self) -> _Window | None:
        """The change under way, while it has not settled (what comes after is not its cost)."""
        w = self.windows[-1] if self.windows else None
        return w if w is not None and w.settled_ms is None else None

    def _idle(self, now_ms: int) -> int:
        """Partition-ms without a consumer so far: assigned but not consumed, and unowned."""
        t = self.costs.totals(now_ms, self.group_id)
        return t.assigned_not_consumed_ms + t.unowned_ms

    def _check(self, ts_ms: int) -> None:
        w = self._open()
        if w is None or not w.rebalanced or w.members != w.live:
            return
        segments = [seg for seg in self.costs.open_segments(ts_ms) if seg.group_id == self.group_id]
        if segments and all(seg.state == CONSUMED for seg in segments):
            w.settled_ms = ts_ms
            w.idle_ms = self._idle(ts_ms) - w.idle_at_start


def _plain(body: Any) -> bool:
    """A ConsumerGroupHeartbeat that says only "still here, at my epoch": no join or leave, and no
    subscription, assignor, rebalance timeout or owned partitions (they are sent only when they change)."""
    if not isinstance(body, dict) or int(body.get("member_epoch", 0)) <= 0:
        return False
    return (body.get("subscribed_topic_names") is None and body.get("subscribed_topic_regex") is None
            and body.get("topic_partitions") is None and body.get("server_assignor") is None
            and body.get("rebalance_timeout_ms", -1) == -1)
