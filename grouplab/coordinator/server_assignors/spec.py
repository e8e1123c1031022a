"""What a server-side (KIP-848) assignor takes and returns.

The coordinator computes a consumer-protocol group's target assignment itself (there is no leader):
it hands the assignor every member's subscription and current target assignment, and the partition
count of each topic; the assignor answers member id -> topic -> partitions. Kafka's interface is
`ConsumerGroupPartitionAssignor.assign(GroupSpec, SubscribedTopicDescriber)`; this is the same, with
topic names where Kafka has topic ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol


@dataclass(frozen=True)
class MemberSpec:
    subscribed_topics: frozenset[str]  # resolved names (regex already resolved by the caller)
    assignment: Mapping[str, frozenset[int]] = field(default_factory=dict)  # current target (stickiness)
    instance_id: str | None = None  # group.instance.id, if static
    rack: str | None = None


TargetAssignment = dict[str, dict[str, frozenset[int]]]  # member id -> topic -> partitions


class ServerAssignor(Protocol):
    name: str

    def assign(self, members: Mapping[str, MemberSpec],
               partitions_per_topic: Mapping[str, int]) -> TargetAssignment: ...


class UnknownServerAssignor(KeyError):
    """A name that is not one of the server-side assignors (Kafka answers UNSUPPORTED_ASSIGNOR)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown server-side assignor"


def java_order(text: str) -> bytes:
    """A sort key that orders strings as Java's String.compareTo does (by UTF-16 code unit), which
    differs from Python's code-point order only for characters beyond U+FFFF."""
    return text.encode("utf-16-be", "surrogatepass")


def by_topic(owners: Mapping[str, list[int]], member_ids: list[str]) -> TargetAssignment:
    """Turn per-topic owner arrays (member index per partition, -1 for none) into the answer,
    every member present; topics and partitions in ascending order."""
    collected: list[dict[str, list[int]]] = [{} for _ in member_ids]
    for topic in sorted(owners):
        for partition, owner in enumerate(owners[topic]):
            if owner >= 0:
                collected[owner].setdefault(topic, []).append(partition)
    return {member: {t: frozenset(ps) for t, ps in got.items()} for member, got in zip(member_ids, collected)}
