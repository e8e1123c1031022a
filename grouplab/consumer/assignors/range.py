"""RangeAssignor: topic by topic, contiguous ranges over the topic's subscribers in member order.

For a topic with P partitions and C subscribers, n = P // C and r = P % C; the member at index i
gets partitions starting at n*i + min(i, r), n + 1 of them if i < r else n. So the first r
members get one more, for every topic: with many topics those members carry the surplus of each.
"""

from __future__ import annotations

from typing import Mapping

from grouplab.consumer.assignors.base import AssignmentMap, Assignor, empty_assignment, member_order, partitions_of
from grouplab.protocol.types import Subscription


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> AssignmentMap:
        result = empty_assignment(subscriptions)
        subscribers: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            for topic in set(sub.topics):
                subscribers.setdefault(topic, []).append(member)
        for topic in sorted(subscribers):
            count = partitions_per_topic.get(topic)
            if not count:
                continue
            members = member_order(subscriptions, subscribers[topic])
            per_member, extra = divmod(count, len(members))
            partitions = partitions_of(topic, count)
            for i, member in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                result[member].extend(partitions[start : start + length])
        return result
