"""RoundRobinAssignor: all partitions of all subscribed topics, sorted by topic then partition,
dealt one at a time to members in member order, skipping a member not subscribed to the
partition's topic (the next subscriber in the circle gets it).

With identical subscriptions member counts differ by at most one; with different subscriptions
the result can be unbalanced (seed example: c2 ends up with four partitions, c0 with one).
"""

from __future__ import annotations

from typing import Mapping

from grouplab.consumer.assignors.base import AssignmentMap, Assignor, empty_assignment, member_order, partitions_of
from grouplab.protocol.types import Subscription


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> AssignmentMap:
        result = empty_assignment(subscriptions)
        members = member_order(subscriptions)
        if not members:
            return result
        topic_sets = {m: set(subscriptions[m].topics) for m in members}
        all_topics = sorted(set().union(*topic_sets.values()))
        cursor = 0
        for topic in all_topics:
            for tp in partitions_of(topic, partitions_per_topic.get(topic) or 0):
                while topic not in topic_sets[members[cursor]]:
                    cursor = (cursor + 1) % len(members)
                result[members[cursor]].append(tp)
                cursor = (cursor + 1) % len(members)
        return result
