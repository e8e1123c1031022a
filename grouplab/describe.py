"""`grouplab describe`: groups as `kafka-consumer-groups --describe` shows them, plus what grouplab
knows beyond it (generation and leader of a classic group; group epoch, target epoch, assignor and
each member's epoch, state and target of a consumer-protocol group, KIP-848), and, as its
COORDINATOR (ID) column does, the broker that coordinates the group (FindCoordinator, one request
for all the groups asked for, as Kafka's Admin client batches it: with one broker, broker 0).

As Kafka 4's Admin client does, each group is asked for with ConsumerGroupDescribe first; a group
that is not a consumer-protocol group (GROUP_ID_NOT_FOUND) is then asked for with DescribeGroups.
The command's body lives here, not in cli.py (docs/design.md: one command per module as cli.py is
split); cli.py prints what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from grouplab.admin import AdminClient
from grouplab.protocol.consumer_protocol import PROTOCOL_TYPE, decode_assignment
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import ConsumerGroupDescribedGroup, DescribedGroup, FindCoordinatorRequest
from grouplab.protocol.types import TopicPartition


@dataclass(frozen=True)
class Coordinator:
    """The broker that coordinates a group, as FindCoordinator names it."""

    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port} ({self.node_id})"  # kafka-consumer-groups' COORDINATOR (ID) cell

    def as_json(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "host": self.host, "port": self.port}


@dataclass
class ClassicGroupAt(DescribedGroup):
    """A DescribedGroup with the broker that described it (the tables name it in their titles)."""

    coordinator: Coordinator | None = None


@dataclass
class ConsumerGroupAt(ConsumerGroupDescribedGroup):
    """A ConsumerGroupDescribedGroup with the broker that described it."""

    coordinator: Coordinator | None = None


@dataclass
class Described:
    """What the coordinator said of the groups asked for, in the order asked."""

    groups: list[DescribedGroup | ConsumerGroupDescribedGroup] = field(default_factory=list)
    coordinators: dict[str, Coordinator] = field(default_factory=dict)  # group id -> its coordinator
    offsets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # group id -> offsets rows
    missing: list[str] = field(default_factory=list)  # groups the coordinator does not have
    failed: list[tuple[str, int]] = field(default_factory=list)  # (group id, error code)


async def coordinators(admin: AdminClient, group_ids: list[str]) -> dict[str, Coordinator]:
    """Each group's coordinator, from one FindCoordinator of all of them (v4's coordinator_keys);
    a group whose partition has no live leader is left out."""
    found = await admin.request("FindCoordinator", FindCoordinatorRequest(key=group_ids[0], coordinator_keys=group_ids))
    keyed = found.coordinators or [found]
    return {getattr(f, "key", group_ids[0]): Coordinator(f.node_id, f.host, f.port) for f in keyed
            if not f.error_code and f.node_id >= 0}


def _at(group: DescribedGroup | ConsumerGroupDescribedGroup,
        coordinator: Coordinator | None) -> DescribedGroup | ConsumerGroupDescribedGroup:
    values = {f.name: getattr(group, f.name) for f in fields(group)}
    if isinstance(group, ConsumerGroupDescribedGroup):
        return ConsumerGroupAt(**values, coordinator=coordinator)
    return ClassicGroupAt(**values, coordinator=coordinator)


async def describe(admin: AdminClient, group_ids: list[str]) -> Described:
    result = Described()
    result.coordinators = await coordinators(admin, group_ids)
    consumer = {g.group_id: g for g in await admin.describe_consumer_groups(group_ids)}
    classic_ids = [gid for gid in group_ids if consumer[gid].error_code == ErrorCode.GROUP_ID_NOT_FOUND]
    classic = {g.group_id: g for g in await admin.describe_groups(classic_ids)} if classic_ids else {}
    for gid in group_ids:
        group: DescribedGroup | ConsumerGroupDescribedGroup = classic.get(gid) or consumer[gid]
        # Like kafka-consumer-groups: a group the coordinator does not have is an error, not "Dead".
        if isinstance(group, DescribedGroup) and group.group_state == "Dead" and not group.members:
            result.missing.append(gid)
        elif group.error_code:
            result.failed.append((gid, group.error_code))
        else:
            result.groups.append(_at(group, result.coordinators.get(gid)))
            result.offsets[gid] = await group_offsets(admin, gid, owners(group))
    return result


def owners(group: DescribedGroup | ConsumerGroupDescribedGroup) -> dict[TopicPartition, Any]:
    """Each assigned partition's member: a consumer-protocol member's current assignment, or a
    classic consumer group's member assignments (none for other protocol types)."""
    owner: dict[TopicPartition, Any] = {}
    if isinstance(group, ConsumerGroupDescribedGroup):
        for cm in group.members:
            for topic, ps in cm.assignment.items():
                for p in ps:
                    owner[TopicPartition(topic, p)] = cm
        return owner
    if group.protocol_type != PROTOCOL_TYPE:
        return owner
    for m in group.members:
        try:
            parts = decode_assignment(m.member_assignment).partitions if m.member_assignment else []
        except Exception:
            parts = []
        for tp in parts:
            owner[TopicPartition(tp.topic, tp.partition)] = m
    return owner


async def group_offsets(admin: AdminClient, group_id: str, owner: dict[TopicPartition, Any]) -> list[dict[str, Any]]:
    """Like kafka-consumer-groups --describe: for every partition assigned to a member or with a
    committed offset, the committed offset (OffsetFetch), the log end offset (ListOffsets latest)
    and the lag between them; None where a value is unknown (no commit yet, no partition log)."""
    committed = await admin.fetch_offsets(group_id)
    partitions = sorted(set(owner) | set(committed))
    ends = await admin.log_end_offsets(partitions)
    rows = []
    for tp in partitions:
        offset = committed.get(tp, -1)
        current = offset if offset >= 0 else None
        end = ends.get(tp)
        m = owner.get(tp)
        rows.append({"topic": tp.topic, "partition": tp.partition, "committed_offset": current, "log_end_offset": end,
                     "lag": end - current if end is not None and current is not None else None,
                     "member_id": m.member_id if m else None, "client_id": m.client_id if m else None,
                     "host": m.client_host if m else None})
    return rows


def as_json(described: Described) -> list[dict[str, Any]]:
    """`--format json`: one object per group, its `type` saying which protocol it speaks."""
    out: list[dict[str, Any]] = []
    for g in described.groups:
        if isinstance(g, ConsumerGroupDescribedGroup):
            out.append({
                "group_id": g.group_id, "type": "consumer", "coordinator": _coordinator(described, g.group_id),
                "state": g.group_state, "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch, "assignor": g.assignor_name,
                "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                             "client_host": m.client_host, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                             "member_state": m.member_state, "subscribed_topic_names": m.subscribed_topic_names,
                             "subscribed_topic_regex": m.subscribed_topic_regex,
                             "assignment": _pairs(m.assignment), "target_assignment": _pairs(m.target_assignment)}
                            for m in g.members],
                "offsets": described.offsets[g.group_id]})
            continue
        out.append({
            "group_id": g.group_id, "type": "classic", "coordinator": _coordinator(described, g.group_id),
            "state": g.group_state, "generation_id": g.generation_id,
            "protocol_type": g.protocol_type, "protocol": g.protocol_data, "leader": g.leader,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                         "client_host": m.client_host,
                         "assignment": [list(tp) for tp in decode_assignment(m.member_assignment).partitions]}
                        for m in g.members],
            "offsets": described.offsets[g.group_id]})
    return out


def _coordinator(described: Described, group_id: str) -> dict[str, Any] | None:
    found = described.coordinators.get(group_id)
    return found.as_json() if found is not None else None


def _pairs(assignment: dict[str, list[int]]) -> list[list[object]]:
    return [[t, p] for t in sorted(assignment) for p in sorted(assignment[t])]
