"""`uniform` when members subscribe to different topics (Kafka's
UniformHeterogeneousAssignmentBuilder; GeneralUniformAssignmentBuilder before it).

1. Each member keeps its current partitions of the topics it still subscribes to.
2. The unassigned partitions go out topic by topic — topics ordered by partitions per subscriber
   (descending), then subscriber count (ascending), then name — each partition to the topic's
   least loaded subscriber (fewest partitions in total, then member order).
3. Balance: topic by topic (same order, only topics with 2+ subscribers), move partitions from the
   topic's most loaded subscribers (their highest-numbered partitions of the topic first) to its
   least loaded ones until the two differ by at most one; repeat over the topics until a whole
   round moves nothing, at most 16 rounds.

Balance is among each topic's subscribers: with overlapping subscriptions the totals can differ by
more than one (Kafka's own example: 9, 10, 11). Members are numbered in member-id order (Kafka:
its hash-map order; its tests sort them).
"""

from __future__ import annotations

from typing import Mapping

from grouplab.coordinator.server_assignors.spec import MemberSpec, TargetAssignment, by_topic

MAX_ROUNDS = 16  # Kafka's MAX_ITERATION_COUNT


class Levels:
    """The least and most loaded ranges over one topic's subscribers, sorted by (load, index):
    partitions go to the least loaded range a member at a time (the range widens as its level
    rises) and come from the most loaded range the same way from the other end."""

    def __init__(self, loads: list[int], subscribers: list[int]) -> None:
        self.loads = loads
        self.order = sorted(subscribers, key=lambda m: (loads[m], m))
        n = len(self.order)
        self.least_end = 0
        self.least_level = loads[self.order[0]] - 1
        self.next_least = 0
        self.most_start = n
        self.most_end = n
        self.most_level = loads[self.order[-1]] + 1
        self.next_most = n - 1
        self.spread = loads[self.order[-1]] - loads[self.order[0]]

    def take_least(self) -> int:
        """The member to give the next partition to (counted as given)."""
        order, loads = self.order, self.loads
        if self.next_least >= self.least_end:
            self.least_level += 1
            while self.least_end < len(order) and loads[order[self.least_end]] == self.least_level:
                self.least_end += 1
            self.next_least = 0
        member = order[self.next_least]
        self.next_least += 1
        return member

    def take_most(self) -> int:
        """The member to take the next partition from (counted as taken), or -1 if none is left."""
        order, loads = self.order, self.loads
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_level = loads[order[self.most_start - 1]]  # range emptied by skips
            else:
                self.most_level -= 1
            while self.most_start > 0 and loads[order[self.most_start - 1]] == self.most_level:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = order[self.next_most]
        self.next_most -= 1
        return member

    def skip_most(self) -> None:
        """Drop the member take_most just returned from the most loaded range (it has nothing of
        this topic to give)."""
        i = self.next_most + 1
        last = self.most_end - 1
        self.order[i], self.order[last] = self.order[last], self.order[i]
        self.most_end -= 1

    def balanced(self) -> bool:
        return self.most_level - self.least_level <= 1


class Heterogeneous:
    def __init__(self, members: Mapping[str, MemberSpec], partitions_per_topic: Mapping[str, int]) -> None:
        self.member_ids = sorted(members)
        self.members = members
        self.counts = partitions_per_topic
        self.subscribers: dict[str, list[int]] = {}
        for index, member_id in enumerate(self.member_ids):
            for topic in members[member_id].subscribed_topics:
                if topic in partitions_per_topic:
                    self.subscribers.setdefault(topic, []).append(index)
        self.owners = {t: [-1] * partitions_per_topic[t] for t in self.subscribers}
        self.loads = [0] * len(self.member_ids)

    def topic_order(self, topics: list[str]) -> list[str]:
        def key(topic: str) -> tuple[float, int, str]:
            subs = len(self.subscribers[topic])
            return (-(self.counts[topic] / subs), subs, topic)
        return sorted(topics, key=key)

    def move(self, topic: str, partition: int, member: int) -> None:
        owners = self.owners[topic]
        old = owners[partition]
        if old >= 0:
            self.loads[old] -= 1
        owners[partition] = member
        self.loads[member] += 1

    def build(self) -> TargetAssignment:
        self.keep_current()
        unassigned = {t: [p for p, o in enumerate(owners) if o < 0] for t, owners in self.owners.items()}
        for topic in self.topic_order([t for t, ps in unassigned.items() if ps]):
            levels = Levels(self.loads, self.subscribers[topic])
            for partition in unassigned[topic]:
                self.move(topic, partition, levels.take_least())
        self.balance()
        return by_topic(self.owners, self.member_ids)

    def keep_current(self) -> None:
        for index, member_id in enumerate(self.member_ids):
            spec = self.members[member_id]
            for topic, partitions in spec.assignment.items():
                if topic not in spec.subscribed_topics or topic not in self.owners:
                    continue
                owners = self.owners[topic]
                for p in partitions:
                    if 0 <= p < len(owners) and owners[p] < 0:  # first claim wins
                        owners[p] = index
                        self.loads[index] += 1

    def balance(self) -> None:
        topics = self.topic_order([t for t, subs in self.subscribers.items() if len(subs) >= 2])
        last_moved = -1
        for _ in range(MAX_ROUNDS):
            for i, topic in enumerate(topics):
                if i == last_moved:
                    return  # a whole round since the last move: nothing more to gain
                if self.balance_topic(topic) > 0 or last_moved == -1:
                    last_moved = i

    def balance_topic(self, topic: str) -> int:
        levels = Levels(self.loads, self.subscribers[topic])
        if levels.spread <= 1:
            return 0
        owners = self.owners[topic]
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1
        moved = 0
        while not levels.balanced():
            giver = levels.take_most()
            while giver >= 0 and end.get(giver, 0) - start.get(giver, 0) <= 0:
                levels.skip_most()
                giver = levels.take_most()
            if giver < 0:
                break
            end[giver] -= 1
            partition = partitions[end[giver]]
            taker = levels.take_least()
            if levels.balanced():
                break
            self.move(topic, partition, taker)
            moved += 1
        return moved


def assign_heterogeneous(members: Mapping[str, MemberSpec],
                         partitions_per_topic: Mapping[str, int]) -> TargetAssignment:
    return Heterogeneous(members, partitions_per_topic).build()
