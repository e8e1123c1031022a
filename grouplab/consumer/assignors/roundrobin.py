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
        if all(len(s) == len(all_topics) for s in topic_sets.values()):
            return _sliced(result, members, all_topics, partitions_per_topic)
        return _dealt(result, members, topic_sets, all_topics, partitions_per_topic)


def _dealt(result: AssignmentMap, members: list[str], topic_sets: dict[str, set[str]], all_topics: list[str],
           partitions_per_topic: Mapping[str, int]) -> AssignmentMap:
    """The deal, one partition at a time, skipping members not subscribed to its topic."""
    cursor = 0
    for topic in all_topics:
        for tp in partitions_of(topic, partitions_per_topic.get(topic) or 0):
            while topic not in topic_sets[members[cursor]]:
                cursor = (cursor + 1) % len(members)
            result[members[cursor]].append(tp)
            cursor = (cursor + 1) % len(members)
    return result


def _sliced(result: AssignmentMap, members: list[str], all_topics: list[str],
            partitions_per_topic: Mapping[str, int]) -> AssignmentMap:
    """The same deal when everyone subscribes to every topic (the usual group): it skips nobody,
    so member i gets every M-th partition from the i-th on, taken as slices in C (issue 26)."""
    dealt = [tp for topic in all_topics for tp in partitions_of(topic, partitions_per_topic.get(topic) or 0)]
    for i, member in enumerate(members):
        result[member] = dealt[i::len(members)]
    return result
