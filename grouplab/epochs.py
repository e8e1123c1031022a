"""One fold over a consumer-protocol group's events (KIP-848, docs/events.md §4.1c): its group
epochs and their causes, the partitions that moved from one member to another, and each
*convergence*, from the epoch move that unsettled a Stable group until it is Stable again.

What `RebalanceTracker` (grouplab/rebalances.py) is to a classic group: a classic group counts
generations and rebalances; a consumer-protocol group has none. Its group epoch moves on every
join, leave, removal, subscription or metadata change, and the members converge on the target
assignment one heartbeat at a time, so "how long was the group unsettled" is the time from the
first epoch move after Stable to the next Stable, however many moves came in between (as one
classic rebalance absorbs every join that arrives during it).

A partition *moved* when the coordinator gave it (`consumer_member_reconciled.assigned`) to a
member other than its last holder: revoked by another member, or freed by another's removal. A
static member's replacement (same group.instance.id, new member id) takes its partitions over
without a move.

The group's state rides on every event (C's `state`); `consumer_group_state_changed` is written at
the end of the step that changed it. A step that moves the epoch and leaves the group Stable (one
member, given the same partitions again) writes no state change: the next event of another
instant that still says Stable ends that convergence at the step's time.

Pure: (node, LogEvent) in, records out, no clock.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.states import ConsumerGroupState
from grouplab.protocol.types import TopicPartition
from grouplab.rebalances import Move, Removal

STABLE = ConsumerGroupState.STABLE


@dataclass(frozen=True, slots=True)
class Convergence:
    """A consumer-protocol group unsettled by `causes` (one per epoch move, in order) from
    `started_ms` until Stable again at `ended_ms`, at group epoch `epoch`."""

    group_id: str
    epoch: int  # the group epoch it settled at
    started_ms: int  # the first epoch move after the group was last Stable
    ended_ms: int  # Stable again
    causes: tuple[str, ...]  # group_epoch_bumped.cause of each move
    moved: tuple[Move, ...]  # partitions the coordinator gave to another member meanwhile
    removed: tuple[Removal, ...]  # members it removed meanwhile
    assignor: str | None  # the server-side assignor of the target it settled on
    assignment: dict[str, list[TopicPartition]]  # that target: member id -> partitions

    @property
    def duration_ms(self) -> int:
        return self.ended_ms - self.started_ms


@dataclass
class _Group:
    group_id: str
    epoch: int = 0
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    owners: dict[TopicPartition, str] = field(default_factory=dict)  # partition -> its last holder
    started_ms: int | None = None  # an open convergence: its first epoch move
    step_ms: int = 0  # the time of the group's latest event (its latest step)
    causes: list[str] = field(default_factory=list)
    moved: list[Move] = field(default_factory=list)
    removed: list[Removal] = field(default_factory=list)
    assignor: str | None = None
    target: dict[str, list[TopicPartition]] = field(default_factory=dict)


class EpochTracker:
    """The fold; `feed` returns the convergence an event completed, if any."""

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}
        self.epochs = 0  # group epoch moves, all groups
        self.causes: Counter[str] = Counter()
        self.moves = 0  # partitions moved, all groups (as they happen: a run may end unsettled)
        self.completed: list[Convergence] = []

    def group(self, group_id: str) -> _Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = _Group(group_id)
        return g

    def feed(self, node: str, ev: LogEvent) -> Convergence | None:
        payload = ev.payload
        if node != "coordinator" or not isinstance(payload, events.ConsumerGroupEvent):
            return None
        g = self.group(payload.group_id)
        ts = ev.ts_ms
        done = None
        if (g.started_ms is not None and ts > g.step_ms and payload.state is STABLE
                and type(payload) is not events.ConsumerGroupStateChanged):
            done = self._settle(g, g.step_ms)  # a step that left the group Stable: no state change said so
        g.step_ms, g.epoch = ts, payload.group_epoch
        if isinstance(payload, events.GroupEpochBumped):
            if g.started_ms is None:
                g.started_ms = ts
            g.causes.append(payload.cause.value)
            self.epochs += 1
            self.causes[payload.cause.value] += 1
        elif isinstance(payload, events.TargetAssignmentComputed):
            g.assignor = payload.assignor
            g.target = {m: [TopicPartition(t, p) for t, p in parts] for m, parts in payload.assignment.items()}
        elif isinstance(payload, events.ConsumerMemberReconciled):
            self._reconciled(g, payload)
        elif isinstance(payload, events.ConsumerMemberRemoved):
            g.removed.append(Removal(payload.member_id, payload.reason.value, ts))
        elif isinstance(payload, events.ConsumerStaticMemberReplaced):
            for tp, owner in g.owners.items():
                if owner == payload.old_member_id:
                    g.owners[tp] = payload.member_id
        elif isinstance(payload, events.ConsumerGroupStateChanged):
            if payload.to_state is STABLE and g.started_ms is not None:
                done = self._settle(g, ts)
            elif payload.to_state is ConsumerGroupState.EMPTY:
                self._reset(g)  # everyone left: nothing converges; the next join starts afresh
        g.state = payload.state
        return done

    def _reconciled(self, g: _Group, ev: events.ConsumerMemberReconciled) -> None:
        for t, p in ev.assigned:
            tp = TopicPartition(t, p)
            last = g.owners.get(tp)
            if last != ev.member_id:
                if last is not None:
                    g.moved.append(Move(tp, last, ev.member_id))
                    self.moves += 1
                g.owners[tp] = ev.member_id

    def _settle(self, g: _Group, ended_ms: int) -> Convergence:
        assert g.started_ms is not None
        done = Convergence(g.group_id, g.epoch, g.started_ms, ended_ms, tuple(g.causes), tuple(g.moved),
                           tuple(g.removed), g.assignor, dict(g.target))
        self.completed.append(done)
        self._reset(g)
        return done

    @staticmethod
    def _reset(g: _Group) -> None:
        g.started_ms = None
        g.causes, g.moved, g.removed = [], [], []
