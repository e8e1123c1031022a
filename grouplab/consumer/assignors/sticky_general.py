"""Sticky assignment when members subscribe to different topics (Kafka's general assignment),
step for step as Kafka does it, with bookkeeping that makes each step cheap.

Kafka's steps (docs/assignors.md "Different subscriptions"):

1. Every member keeps the claims it won, of topics it still subscribes to.
2. The other partitions, topics with the fewest subscribers first (then by name), each go to the
   least loaded subscriber (fewest partitions, then member id).
3. Topics with one subscriber, and members that hold everything they could and nothing anybody
   else could take, are left out of balancing.
4. Balancing: walk the partitions (first only those handed out in 2, unless a member dropped a
   topic; then all), and while the assignment is not balanced, move a partition whose owner has
   at least two more than some other subscriber: back to its owner of an earlier generation if
   that one has at least two fewer, else to the least loaded subscriber. A move that would undo an
   earlier move of the same topic between the same two members takes that partition back instead.
   Repeat the walk while it moved something.
5. If balancing moved anything but did not lower the sum of count differences over all pairs of
   members, it is undone (unless nobody owned anything before).

Kafka re-checks "balanced" by scanning every partition of every member before each step of 4 and
finds the least loaded subscriber by scanning members in order; here both are kept up to date per
topic (per-topic histograms of counts give the smallest subscriber count and the largest owner
count; a topic is unbalanced when the second exceeds the first by more than one), so each step of
the walk costs O(1) and each move O(topics of the two members).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from dataclasses import dataclass, field
from itertools import chain, filterfalse
from typing import Mapping

from grouplab.consumer.assignors.java_order import hashset_first, java_key, partition_hash, string_hash
from grouplab.protocol.types import TopicPartition

Pair = tuple[str, str]  # (from, to)


@dataclass
class _MoveSet:
    """One of Kafka's PartitionMovements sets: partitions of a topic moved from one member to another."""

    entries: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)  # -> (hashCode, insertion seq)
    max_size: int = 0


class _Balancer:
    """The state of steps 3-5: who owns what, counts, and the per-topic summaries."""

    def __init__(self, members: list[str], topics_of: Mapping[str, frozenset[str]],
                 assigned: dict[str, set[TopicPartition]], owner: dict[TopicPartition, str],
                 live: set[str], participants: list[str]) -> None:
        self.members = members
        self.rank = {m: i for i, m in enumerate(members)}
        self.topics_of = topics_of
        self.assigned = assigned
        self.owner = owner
        self.count = {m: len(assigned[m]) for m in members}
        self.participants = set(participants)
        self.live_topics_of = {m: [t for t in topics_of[m] if t in live] for m in participants}
        self.owns: dict[str, dict[str, int]] = {m: {} for m in participants}
        self.sub_hist: dict[str, dict[int, int]] = {t: {} for t in live}
        self.owner_hist: dict[str, dict[int, int]] = {t: {} for t in live}
        self.buckets: dict[int, list[int]] = {}
        for m in participants:
            c = self.count[m]
            owns = self.owns[m]
            for tp in assigned[m]:
                if tp.topic in live:
                    owns[tp.topic] = owns.get(tp.topic, 0) + 1
            for t in self.live_topics_of[m]:
                h = self.sub_hist[t]
                h[c] = h.get(c, 0) + 1
            for t in owns:
                h = self.owner_hist[t]
                h[c] = h.get(c, 0) + 1
            self.buckets.setdefault(c, []).append(self.rank[m])
        for b in self.buckets.values():
            b.sort()
        self.min_sub = {t: min(c for c, n in h.items() if n) for t, h in self.sub_hist.items() if h}
        self.max_owner = {t: max((c for c, n in h.items() if n), default=-1) for t, h in self.owner_hist.items()}
        self.violating = {t for t in self.min_sub if self.max_owner[t] > self.min_sub[t] + 1}
        self.moved: dict[TopicPartition, Pair] = {}
        self.moves_by_topic: dict[str, dict[Pair, _MoveSet]] = {}
        self.topic_hash: dict[str, int] = {}
        self.seq = 0
        self.log: list[tuple[TopicPartition, str, str]] = []

    # ------------------------------------------------------------------ queries

    def least_loaded(self, topic: str) -> str:
        """The first subscriber of `topic` in (count, member id) order."""
        for r in self.buckets[self.min_sub[topic]]:
            m = self.members[r]
            if topic in self.topics_of[m]:
                return m
        raise AssertionError(f"no subscriber of {topic} at its minimum count")  # the histograms disagree

    def score(self) -> int:
        """Kafka's balance score: the sum of |count(a) - count(b)| over all pairs of participants."""
        counts = sorted(self.count[m] for m in self.participants)
        n = len(counts)
        return sum(c * (2 * i - n + 1) for i, c in enumerate(counts))

    # ------------------------------------------------------------------ moves

    def reassign(self, tp: TopicPartition, new: str) -> None:
        """Kafka's reassignPartition: move `tp` to `new`, or take back a partition of the same topic
        that earlier moved from `new` to the member `tp` came from."""
        src = self.owner[tp]
        earlier = self.moved.get(tp)
        if earlier is not None:
            src = earlier[0]
        actual = tp
        sets = self.moves_by_topic.get(tp.topic)
        if sets:
            reverse = sets.get((new, src))
            if reverse is not None:
                actual = hashset_first(reverse.entries, reverse.max_size)
        self.move(actual, new)

    def _forget(self, tp: TopicPartition, pair: Pair) -> None:
        sets = self.moves_by_topic[tp.topic]
        s = sets[pair]
        del s.entries[tp]
        if not s.entries:
            del sets[pair]
            if not sets:
                del self.moves_by_topic[tp.topic]

    def _record(self, tp: TopicPartition, pair: Pair) -> None:
        h = self.topic_hash.get(tp.topic)
        if h is None:
            h = self.topic_hash[tp.topic] = string_hash(tp.topic)
        s = self.moves_by_topic.setdefault(tp.topic, {}).setdefault(pair, _MoveSet())
        self.seq += 1
        s.entries[tp] = (partition_hash(h, tp.partition), self.seq)
        s.max_size = max(s.max_size, len(s.entries))
        self.moved[tp] = pair

    def move(self, tp: TopicPartition, new: str) -> None:
        old = self.owner[tp]
        earlier = self.moved.pop(tp, None)
        if earlier is not None:
            self._forget(tp, earlier)
            if earlier[0] != new:
                self._record(tp, (earlier[0], new))
        else:
            self._record(tp, (old, new))
        self.assigned[old].discard(tp)
        self.assigned[new].add(tp)
        self.owner[tp] = new
        self.log.append((tp, old, new))
        topic = tp.topic
        self._own(old, topic, -1)
        self._own(new, topic, +1)
        self._recount(old, -1)
        self._recount(new, +1)

    def _own(self, m: str, topic: str, d: int) -> None:
        owns = self.owns[m]
        before = owns.get(topic, 0)
        owns[topic] = before + d
        c = self.count[m]
        h = self.owner_hist[topic]
        if before == 0:  # m starts owning the topic
            h[c] = h.get(c, 0) + 1
            if c > self.max_owner[topic]:
                self.max_owner[topic] = c
        elif before == 1 and d < 0:  # m stops owning it
            h[c] -= 1
            if c == self.max_owner[topic] and not h[c]:
                self.max_owner[topic] = max((k for k, n in h.items() if n), default=-1)
        self._check(topic)

    def _recount(self, m: str, d: int) -> None:
        k = self.count[m]
        k2 = k + d
        self.count[m] = k2
        r = self.rank[m]
        b = self.buckets[k]
        del b[bisect_left(b, r)]
        insort(self.buckets.setdefault(k2, []), r)
        owns = self.owns[m]
        min_sub, max_owner, violating = self.min_sub, self.max_owner, self.violating
        for t in self.live_topics_of[m]:
            h = self.sub_hist[t]
            h[k] -= 1
            h[k2] = h.get(k2, 0) + 1
            if d > 0:
                if k == min_sub[t] and not h[k]:
                    min_sub[t] = k2
            elif k2 < min_sub[t]:
                min_sub[t] = k2
            if owns.get(t):
                oh = self.owner_hist[t]
                oh[k] -= 1
                oh[k2] = oh.get(k2, 0) + 1
                if d > 0:
                    if k2 > max_owner[t]:
                        max_owner[t] = k2
                elif k == max_owner[t] and not oh[k]:
                    max_owner[t] = k2
            if max_owner[t] > min_sub[t] + 1:
                violating.add(t)
            else:
                violating.discard(t)

    def _check(self, topic: str) -> None:
        if self.max_owner[topic] > self.min_sub[topic] + 1:
            self.violating.add(topic)
        else:
            self.violating.discard(topic)

    def undo(self) -> None:
        """Back to the assignment before balancing (Kafka's revert when the score did not improve)."""
        for tp, old, new in reversed(self.log):
            self.assigned[new].discard(tp)
            self.assigned[old].add(tp)
            self.owner[tp] = old

    # ------------------------------------------------------------------ step 4

    def perform(self, partitions: list[TopicPartition], previous: Mapping[TopicPartition, str],
                max_walks: int) -> bool:
        """Kafka's performReassignments. True if anything moved."""
        performed = False
        count, owner, min_sub = self.count, self.owner, self.min_sub
        for _ in range(max_walks):
            modified = False
            for tp in partitions:
                if not self.violating:
                    break
                c = owner[tp]
                prev = previous.get(tp)
                if (prev is not None and prev in self.participants and tp.topic in self.topics_of[prev]
                        and count[c] > count[prev] + 1):
                    self.reassign(tp, prev)
                    performed = modified = True
                    continue
                if count[c] > min_sub[tp.topic] + 1:
                    self.reassign(tp, self.least_loaded(tp.topic))
                    performed = modified = True
            if not modified:
                break
        return performed


def general_assign(partitions: Mapping[str, list[TopicPartition]], topics_of: Mapping[str, frozenset[str]],
                   owned: Mapping[str, set[TopicPartition]],
                   previous: Mapping[TopicPartition, str]) -> dict[str, list[TopicPartition]]:
    """Every member's partitions. `partitions`: each subscribed topic's partitions; `topics_of`:
    each member's subscribed topics that exist; `owned`: the claims each member won; `previous`:
    owners from earlier generations."""
    members = sorted(topics_of, key=java_key)
    rank = {m: i for i, m in enumerate(members)}
    subscribers: dict[str, list[str]] = {t: [] for t in partitions}
    for m in members:
        for t in topics_of[m]:
            subscribers[t].append(m)

    assigned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    owner: dict[TopicPartition, str] = {}
    revocation_required = False
    for m in members:
        mine, topics = assigned[m], topics_of[m]
        for tp in owned.get(m, ()):
            if tp.topic in topics:
                mine.add(tp)
                owner[tp] = m
            else:
                revocation_required = True  # m dropped the topic: it must revoke tp
    initializing = not owner

    sorted_topics = sorted(subscribers, key=lambda t: (len(subscribers[t]), java_key(t)))
    all_partitions = list(chain.from_iterable(partitions[t] for t in sorted_topics))
    unassigned = list(filterfalse(owner.__contains__, all_partitions)) if owner else all_partitions

    # Step 2: each free partition to the least loaded subscriber. Topics come one after another,
    # so a heap per topic, built when its turn comes, is never stale.
    count = {m: len(assigned[m]) for m in members}
    i = 0
    while i < len(unassigned):
        topic = unassigned[i].topic
        heap = [(count[m], rank[m]) for m in subscribers[topic]]
        if not heap:
            while i < len(unassigned) and unassigned[i].topic == topic:
                i += 1
            continue
        heapq.heapify(heap)
        while i < len(unassigned) and unassigned[i].topic == topic:
            c, r = heap[0]
            m = members[r]
            tp = unassigned[i]
            assigned[m].add(tp)
            owner[tp] = m
            count[m] = c + 1
            heapq.heapreplace(heap, (c + 1, r))
            i += 1

    # Step 3: only topics with two or more subscribers, and members that could gain or lose, take part.
    live = {t for t, subs in subscribers.items() if len(subs) >= 2 and partitions[t]}
    capacity = {m: sum(len(partitions[t]) for t in topics_of[m]) for m in members}
    participants = [m for m in members
                    if count[m] < capacity[m] or any(tp.topic in live for tp in assigned[m])]
    balancer = _Balancer(members, topics_of, assigned, owner, live, participants)
    if balancer.violating:
        before = balancer.score()
        walks = 1 + len(all_partitions)  # Kafka walks until nothing moves; a bound for safety
        performed = False
        if not revocation_required:
            performed = balancer.perform([tp for tp in unassigned if tp.topic in live], previous, walks)
        performed = balancer.perform([tp for tp in all_partitions if tp.topic in live], previous, walks) or performed
        if not initializing and performed and balancer.score() >= before:
            balancer.undo()
    return {m: sorted(assigned[m]) for m in members}
