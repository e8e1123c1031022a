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
        # Members with the same subscription share one pass over its topics (a group usually has
        # one or a few distinct subscriptions).
        by_subscription: dict[frozenset[str], list[str]] = {}
        for member_id in ordered:
            by_subscription.setdefault(members[member_id].subscribed_topics, []).append(member_id)
        sharing: dict[str, list[list[str]]] = {}
        for topics, same in by_subscription.items():
            for topic in topics:
                if topic in partitions_per_topic:
                    sharing.setdefault(topic, []).append(same)
        position = {member_id: k for k, member_id in enumerate(ordered)}
        subscribers = {topic: lists[0] if len(lists) == 1 else sorted((m for same in lists for m in same),
                                                                      key=position.__getitem__)
                       for topic, lists in sharing.items()}
        result: TargetAssignment = {member_id: {} for member_id in ordered}
        ranges: dict[tuple[int, int], frozenset[int]] = {}  # co-partitioned topics share their ranges
        for topic in sorted(subscribers):
            subs = subscribers[topic]
            count = partitions_per_topic[topic]
            quota, extra = divmod(count, len(subs))
            # With fewer partitions than subscribers only the first `extra` get one: skip the rest.
            for k in range(len(subs) if quota else extra):
                start = k * quota + min(k, extra)
                bounds = (start, start + quota + (k < extra))
                got = ranges.get(bounds)
                if got is None:
                    got = ranges[bounds] = frozenset(range(*bounds))
                result[subs[k]][topic] = got
        return result
