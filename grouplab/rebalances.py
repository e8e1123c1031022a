"""One fold over the coordinator's group events: per group, its generations, leaders, assignments
and ownership, and each completed rebalance as a typed record (docs/events.md §6, "Joining the
logs"). The simulator's invariants and timeline, `grouplab run`'s display and the Spark
pipeline's tests all read rebalances from here instead of each working them out again.

Pure: it takes (node, LogEvent) one at a time and never imports the simulator, asyncio or Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.types import TopicPartition

Assignment = dict[str, list[TopicPartition]]


class Move(NamedTuple):
    """A partition a stable generation gave to another member id than the one the last stable
    generation that assigned it had (a static member's new id counts as another member)."""

    partition: TopicPartition
    from_member: str
    to_member: str


class Removal(NamedTuple):
    """A member the coordinator removed. (Tuples: one is made per removal, on the simulator's
    hot path, and a frozen dataclass costs three times as much to build.)"""

    member_id: str
    reason: str  # member_removed.reason: left, session_timeout, rebalance_timeout, sync_timeout
    ts_ms: int


@dataclass(frozen=True, slots=True)
class Rebalance:
    """A completed rebalance: from the first `rebalance_started` after the previous stable
    generation to this generation's `group_stable`. A rebalance interrupted (a generation formed
    but never stable, a coordinator restart) is part of the one that finally completes."""

    group_id: str
    generation: int
    started_ms: int | None  # None: the log holds no `rebalance_started` for it
    formed_ms: int | None  # this generation's `generation_completed`: the end of the join phase
    ended_ms: int  # `group_stable`
    trigger: str | None  # free text, of the first `rebalance_started`
    cause: str | None  # enumeration, of the first `rebalance_started`
    protocol: str | None
    leader: str | None
    members: tuple[str, ...]  # every member of the generation, in `group_stable` order
    # Decoded partition lists; a member whose assignment is not one ({"bytes": n} for other
    # protocol types, undecodable bytes) is in `members` but not here.
    assignments: Assignment
    clients: dict[str, str]  # member id -> client id, this generation's
    owners: dict[TopicPartition, str]  # partition -> member, this generation's
    previous_owners: dict[TopicPartition, str]  # the previous stable generation's owners
    moved: tuple[Move, ...]
    removed: tuple[Removal, ...]  # members the coordinator removed since the previous stable generation

    @property
    def duration_ms(self) -> int | None:
        return None if self.started_ms is None else self.ended_ms - self.started_ms

    @property
    def kept(self) -> int:
        """Partitions that stayed with the member that owned them before."""
        owners = self.owners
        return sum(1 for tp, m in self.previous_owners.items() if owners.get(tp) == m)

    @property
    def unowned(self) -> list[TopicPartition]:
        """Partitions owned before that nobody owns in this generation: cooperative rebalancing
        withholds them until their owner has revoked them, for the follow-up rebalance."""
        owners = self.owners
        return [tp for tp in self.previous_owners if tp not in owners]


@dataclass
class GroupHistory:
    """What the coordinator's events say about one group so far."""

    group_id: str
    generation: int = 0
    leader: str | None = None
    protocol: str | None = None
    leaders: dict[int, str] = field(default_factory=dict)  # generation -> its leader, as formed
    assignments: dict[int, Assignment] = field(default_factory=dict)  # generation -> the leader's assignment
    owners: dict[TopicPartition, str] = field(default_factory=dict)  # who owns what now, replacements applied
    clients: dict[str, str] = field(default_factory=dict)  # every member id seen stable -> client id
    replaced: dict[str, str] = field(default_factory=dict)  # static member's new id -> the id it replaced
    # Ids a static replacement fenced (KIP-345): a zombie may still run under one of them.
    fenced: set[str] = field(default_factory=set)
    # What a completed rebalance is compared with: the last stable generation's owners as it
    # assigned them, and the member id each partition was last assigned to (moves count from it).
    _stable_owners: dict[TopicPartition, str] = field(default_factory=dict, init=False, repr=False)
    _last_assigned: dict[TopicPartition, str] = field(default_factory=dict, init=False, repr=False)
    # The rebalance in progress: from its first `rebalance_started`.
    _started: tuple[int, events.RebalanceStarted] | None = field(default=None, init=False, repr=False)
    _formed_ms: int | None = field(default=None, init=False, repr=False)
    _removed: list[Removal] = field(default_factory=list, init=False, repr=False)

    def assignment_of(self, generation: int, member_id: str) -> list[TopicPartition] | None:
        """What the leader of `generation` assigned to `member_id`, or to the static member it
        replaced; None if that generation's assignment or the member is unknown."""
        by_leader = self.assignments.get(generation)
        if by_leader is None:
            return None
        while member_id not in by_leader and member_id in self.replaced:
            member_id = self.replaced[member_id]
        return by_leader.get(member_id)

    # ------------------------------------------------------------------ one method per event

    def _rebalance_started(self, ts_ms: int, ev: events.RebalanceStarted) -> None:
        if self._started is None:
            self._started = (ts_ms, ev)

    def _generation_completed(self, ts_ms: int, ev: events.GenerationCompleted) -> None:
        self.generation = ev.generation_id
        self.leader, self.protocol = ev.leader, ev.protocol_name
        if self.leader is not None:
            self.leaders[self.generation] = self.leader
        self._formed_ms = ts_ms

    def _member_removed(self, ts_ms: int, ev: events.MemberRemoved) -> None:
        self._removed.append(Removal(ev.member_id, ev.reason.value, ts_ms))

    def _static_member_replaced(self, ts_ms: int, ev: events.StaticMemberReplaced) -> None:
        new, old = ev.member_id, ev.old_member_id
        self.replaced[new] = old
        self.fenced.add(old)
        # The new id keeps the old one's assignment and leadership (docs/events.md §4.1).
        if old in self.owners.values():
            self.owners = {tp: new if m == old else m for tp, m in self.owners.items()}
        if self.leader == old:
            self.leader = new

    def _group_loaded(self, ts_ms: int, ev: events.GroupLoaded) -> None:
        """A restarted coordinator continues the generation it loaded; generations the old one
        formed but never persisted are gone. A rebalance it cut short stays open: its start
        counts until the next stable generation."""
        self.generation = gen = ev.generation_id
        self.leader, self.protocol = ev.leader, ev.protocol_name
        for lost in [g for g in self.leaders if g > gen]:
            del self.leaders[lost]
        for lost in [g for g in self.assignments if g > gen]:
            del self.assignments[lost]

    def _group_deleted(self, ts_ms: int, ev: events.GroupDeleted) -> None:
        """The group is gone (DeleteGroups, or expired): a group later made under the same id
        starts from generation 0 with nothing of this one's history, so forget it all in place
        (readers may hold this object)."""
        self.__init__(self.group_id)  # type: ignore[misc]

    def _topic_deleted(self, ts_ms: int, ev: events.TopicDeleted) -> None:
        """A deleted partition stops existing: nobody owns it now, the next rebalance neither
        revokes nor withholds it, and one made again under the name is a new partition, not a
        move from its last owner. New dicts: completed rebalances hold the old ones."""
        topic = ev.topic
        if any(tp.topic == topic for tp in self._last_assigned):
            self._last_assigned = {tp: m for tp, m in self._last_assigned.items() if tp.topic != topic}
        if any(tp.topic == topic for tp in self._stable_owners):
            self._stable_owners = {tp: m for tp, m in self._stable_owners.items() if tp.topic != topic}
        if any(tp.topic == topic for tp in self.owners):
            self.owners = {tp: m for tp, m in self.owners.items() if tp.topic != topic}

    def _group_stable(self, ts_ms: int, ev: events.GroupStable) -> Rebalance:
        gen = ev.generation_id
        raw: dict[str, Any] = ev.assignments
        assignments = {m: [TopicPartition(t, p) for t, p in ps] for m, ps in raw.items() if isinstance(ps, list)}
        owners = {tp: m for m, ps in assignments.items() for tp in ps}
        last = self._last_assigned
        moved = tuple(Move(tp, last[tp], m) for tp, m in owners.items() if last.get(tp) not in (None, m))
        last.update(owners)
        clients = ev.clients
        self.clients.update(clients)
        self.generation, self.leader, self.protocol = gen, ev.leader, ev.protocol_name
        self.assignments[gen] = assignments
        started = self._started
        record = Rebalance(
            group_id=self.group_id, generation=gen, started_ms=None if started is None else started[0],
            formed_ms=self._formed_ms, ended_ms=ts_ms,
            trigger=None if started is None else started[1].trigger,
            cause=None if started is None else started[1].cause.value,
            protocol=self.protocol, leader=self.leader, members=tuple(raw), assignments=assignments, clients=clients,
            owners=owners, previous_owners=self._stable_owners, moved=moved, removed=tuple(self._removed))
        self.owners = self._stable_owners = owners
        self._started, self._formed_ms = None, None
        self._removed = []
        return record


_HANDLERS: dict[type, Callable[[GroupHistory, int, Any], Rebalance | None]] = {
    events.RebalanceStarted: GroupHistory._rebalance_started,
    events.GenerationCompleted: GroupHistory._generation_completed,
    events.MemberRemoved: GroupHistory._member_removed,
    events.StaticMemberReplaced: GroupHistory._static_member_replaced,
    events.GroupLoaded: GroupHistory._group_loaded,
    events.GroupStable: GroupHistory._group_stable,
    events.GroupDeleted: GroupHistory._group_deleted,
}
# The coordinator events the tracker reads: a reader may hand it only these.
TRACKED_EVENTS: frozenset[str] = frozenset(
    {cls.NAME for cls in _HANDLERS} | {events.TopicDeleted.NAME})  # type: ignore[attr-defined]


class RebalanceTracker:
    """Feed it every event of a run in order; `feed` returns each rebalance as it completes."""

    def __init__(self) -> None:
        self.groups: dict[str, GroupHistory] = {}

    def group(self, group_id: str) -> GroupHistory:
        history = self.groups.get(group_id)
        if history is None:
            history = self.groups[group_id] = GroupHistory(group_id)
        return history

    def feed(self, node: str, ev: LogEvent) -> Rebalance | None:
        payload = ev.payload
        handler = _HANDLERS.get(type(payload))
        if handler is None or node != "coordinator":
            if type(payload) is events.TopicDeleted and node == "coordinator":  # the broker's: every group's
                for history in self.groups.values():
                    history._topic_deleted(ev.ts_ms, payload)
            return None
        return handler(self.group(payload.group_id), ev.ts_ms, payload)  # type: ignore[union-attr]
