"""What a test sees of a group: immutable snapshots taken inside the cluster's event loop, so a
test can keep them, compare two of them and print them without racing the coordinator.

`GroupView` is the coordinator's own group (what DescribeGroups answers, with assignments and
subscriptions decoded), `RebalanceView` one completed rebalance as the rebalance tracker and the
cost fold (grouplab/rebalances.py, grouplab/costs.py) computed it: what `grouplab run` and the
dashboard show. Pure: built from the machines' state and the trackers' records, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from grouplab.coordinator.group import Group
from grouplab.protocol.consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription
from grouplab.protocol.errors import ProtocolError
from grouplab.protocol.states import GroupState
from grouplab.protocol.types import TopicPartition, format_partitions
from grouplab.rebalances import Move, Rebalance, Removal


class WaitTimeout(AssertionError):
    """A wait whose condition did not hold in time. An AssertionError, so that pytest reports it
    as a failed assertion; the message shows what the group looked like instead and its recent
    history, not just "timeout"."""


@dataclass(frozen=True)
class MemberView:
    """One member as the coordinator knows it."""

    member_id: str
    client_id: str
    group_instance_id: str | None
    host: str
    # Decoded from the consumer protocol; empty for another protocol type or undecodable bytes.
    topics: tuple[str, ...]
    partitions: tuple[TopicPartition, ...]

    def __str__(self) -> str:
        static = f", instance {self.group_instance_id}" if self.group_instance_id else ""
        return f"{self.member_id} (client {self.client_id}{static}): {format_partitions(list(self.partitions)) or '-'}"


@dataclass(frozen=True)
class GroupView:
    """A group at one moment. `state` is Kafka's name (`Stable`, `PreparingRebalance`,
    `CompletingRebalance`, `Empty`, `Dead` for a group the coordinator does not have)."""

    group_id: str
    state: str
    generation: int
    protocol_type: str | None
    protocol: str | None  # the assignor the group chose, e.g. "range"
    leader: str | None  # the leader's member id
    members: tuple[MemberView, ...]
    pending: tuple[str, ...] = ()  # member ids given out (MEMBER_ID_REQUIRED) that have not joined yet
    subscribed: dict[str, int] = field(default_factory=dict)  # topic -> partitions, the members' topics

    @property
    def assignments(self) -> dict[str, list[TopicPartition]]:
        """member id -> its partitions, as the leader assigned them in this generation."""
        return {m.member_id: list(m.partitions) for m in self.members}

    @property
    def is_stable(self) -> bool:
        return self.state == GroupState.STABLE.value

    @property
    def unassigned(self) -> list[TopicPartition]:
        """Partitions of the members' topics that no member has: non-empty in a stable generation
        of a cooperative rebalance that withholds what is still to be revoked."""
        owned = {tp for m in self.members for tp in m.partitions}
        return [TopicPartition(t, p) for t, n in sorted(self.subscribed.items()) for p in range(n)
                if TopicPartition(t, p) not in owned]

    def member(self, client_id: str) -> MemberView:
        """The member whose client id (or member id) is `client_id`; an error if none or several."""
        found = [m for m in self.members if client_id in (m.client_id, m.member_id)]
        if len(found) != 1:
            known = ", ".join(sorted(m.client_id for m in self.members)) or "none"
            what = "no member" if not found else f"{len(found)} members"
            raise LookupError(f"{what} with client id {client_id!r} in group {self.group_id!r} (members' client ids: {known})")
        return found[0]

    def partitions_of(self, client_id: str) -> list[TopicPartition]:
        return list(self.member(client_id).partitions)

    @property
    def clients(self) -> dict[str, list[TopicPartition]]:
        """client id -> its partitions; members sharing a client id are merged."""
        out: dict[str, list[TopicPartition]] = {}
        for m in self.members:
            out.setdefault(m.client_id, []).extend(m.partitions)
        return {c: sorted(ps) for c, ps in out.items()}

    def describe(self) -> str:
        """The group in a few lines, for failure messages and logs."""
        head = f"group {self.group_id!r}: {self.state}, generation {self.generation}"
        if self.protocol:
            head += f", protocol {self.protocol}"
        lines = [head + f", {len(self.members)} member{'s' if len(self.members) != 1 else ''}"]
        for m in self.members:
            lines.append(f"  {'* ' if m.member_id == self.leader else '  '}{m}")
        if self.pending:
            lines.append(f"  pending (asked to join again with their new id): {', '.join(self.pending)}")
        missing = self.unassigned
        if self.members and missing:
            lines.append(f"  not assigned to anyone: {format_partitions(missing)}")
        return "\n".join(lines)


def group_view(group: Group | None, group_id: str, topics: dict[str, int]) -> GroupView:
    """Snapshot of the coordinator's group (None: the coordinator has no such group: `Dead`)."""
    if group is None:
        return GroupView(group_id, GroupState.DEAD.value, 0, None, None, None, ())
    consumer = group.protocol_type == PROTOCOL_TYPE and group.protocol_name is not None
    members = []
    subscribed: dict[str, int] = {}
    for m in group.members.values():
        member_topics: list[str] = []
        partitions: list[TopicPartition] = []
        if consumer:
            assert group.protocol_name is not None
            try:
                member_topics = decode_subscription(m.metadata(group.protocol_name)).topics
                partitions = decode_assignment(m.assignment).partitions if m.assignment else []
            except (ProtocolError, KeyError):
                pass
        for t in member_topics:
            subscribed[t] = topics.get(t, 0)
        members.append(MemberView(m.member_id, m.client_id, m.group_instance_id, m.client_host,
                                  tuple(member_topics), tuple(sorted(partitions))))
    return GroupView(group_id, group.state.value, group.generation_id, group.protocol_type, group.protocol_name,
                     group.leader_id, tuple(members), tuple(group.pending_members), subscribed)


@dataclass(frozen=True)
class RebalanceView:
    """One completed rebalance: from its first `rebalance_started` to the generation's
    `group_stable`, with what it cost. `assigned_not_consumed_ms` is partition-milliseconds
    that members which had stopped (crashed, cut off) still held before this rebalance took their
    partitions away: the time the group did not notice (grouplab/costs.py)."""

    group_id: str
    generation: int
    trigger: str | None  # in words, e.g. "member consumer-2-... left the group"
    cause: str | None  # a RebalanceCause value, e.g. "member_left", "session_timeout", "member_joined"
    started_ms: int | None
    ended_ms: int
    protocol: str | None
    leader: str | None
    members: tuple[str, ...]
    clients: dict[str, str]  # member id -> client id
    assignments: dict[str, list[TopicPartition]]
    moved: tuple[Move, ...]
    removed: tuple[Removal, ...]
    assigned_not_consumed_ms: int = 0
    # member id -> client id of the removed members, which `clients` (this generation's) lacks
    removed_client_ids: dict[str, str] = field(default_factory=dict)

    @property
    def duration_ms(self) -> int | None:
        return None if self.started_ms is None else self.ended_ms - self.started_ms

    @property
    def partitions_moved(self) -> int:
        return len(self.moved)

    def client_of(self, member_id: str) -> str:
        """The client id of a member of this generation or of one it removed (the member id if
        the coordinator never saw that member stable)."""
        return self.clients.get(member_id) or self.removed_client_ids.get(member_id) or member_id

    @property
    def removed_clients(self) -> list[tuple[str, str]]:
        """(client id, reason) of each member removed, in order: `[("app-2", "session_timeout")]`."""
        return [(self.client_of(r.member_id), r.reason) for r in self.removed]

    def describe(self) -> str:
        took = f"{self.duration_ms / 1000:.2f} s" if self.duration_ms is not None else "?"
        line = f"generation {self.generation}: {took}, {self.partitions_moved} moved"
        if self.assigned_not_consumed_ms:
            line += f", {self.assigned_not_consumed_ms / 1000:.1f} partition-s assigned but not consumed"
        if self.removed:
            line += "; removed " + ", ".join(f"{client} ({reason})" for client, reason in self.removed_clients)
        return line + (f"; trigger: {self.trigger}" if self.trigger else "")


def rebalance_view(r: Rebalance, assigned_not_consumed_ms: int = 0,
                   known_clients: dict[str, str] | None = None) -> RebalanceView:
    """`known_clients`: member id -> client id of every member the group has had stable (the
    rebalance tracker's), for the members this rebalance removed."""
    known = known_clients or {}
    removed_clients = {x.member_id: known[x.member_id] for x in r.removed if x.member_id in known}
    return RebalanceView(r.group_id, r.generation, r.trigger, r.cause, r.started_ms, r.ended_ms, r.protocol, r.leader,
                         r.members, dict(r.clients), {m: list(ps) for m, ps in r.assignments.items()}, r.moved,
                         r.removed, assigned_not_consumed_ms, removed_clients)


def describe_history(rebalances: Iterable[RebalanceView], last: int = 5) -> str:
    shown = list(rebalances)[-last:]
    return "\n".join(f"  {r.describe()}" for r in shown) if shown else "  (none completed)"
