"""Kafka 4's server-side `range` assignor (group-coordinator `RangeAssignor`).

Per topic, the members subscribed to it in one fixed order — static members first, by
group.instance.id, then the others by member id (Java string order) — take contiguous ranges:
with P partitions and N subscribers each gets P // N and the first P % N one more; a member whose
range is empty gets nothing of that topic. Topics of equal partition count that the same members
subscribe to line up (co-partitioned: member k gets the same partition numbers of each).

Unlike the client-side range it orders static members by instance id, so a static member that
rejoins under a new member id gets its range back. It reads no current assignment: stickiness is
only that fixed order (a member keeps its range while membership and partition counts stay).
Kafka fails the assignment when a member subscribes to a topic that does not exist; here such a
topic is skipped (the caller resolves subscriptions against metadata).
"""

from __future__ import annotations

from typing import Mapping

from grouplab.coordinator.server_assignors.spec import MemberSpec, TargetAssignment, java_order


def member_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """Static members first by instance id, then the rest by member id (RangeAssignor.sortMemberIds)."""
    def key(member_id: str) -> tuple[int, bytes, bytes]:
        instance = members[member_id].instance_id
        mine = java_order(member_id)  # instance ids are unique in a group; member id breaks a tie anyway
        return (0, java_order(instance), mine) if instance is not None else (1, mine, mine)
    return sorted(members, key=key)


class RangeAssignor:
    name = "range"

    def assign(self, members: Mapping[str, MemberSpec],
               partitions_per_topic: Mapping[str, int]) -> TargetAssignment:
        ordered = member_order(members)
        subscribers: dict[str, list[str]] = {}
        for member_id in ordered:
            for topic in members[member_id].subscribed_topics:
                if topic in partitions_per_topic:
                    subscribers.setdefault(topic, []).append(member_id)
        result: TargetAssignment = {member_id: {} for member_id in ordered}
        for topic in sorted(subscribers):
            subs = subscribers[topic]
            count = partitions_per_topic[topic]
            quota, extra = divmod(count, len(subs))
            start = 0
            for k, member_id in enumerate(subs):
                end = min(start + quota + (k < extra), count)
                if start < end:
                    result[member_id][topic] = frozenset(range(start, end))
                start = end
        return result
