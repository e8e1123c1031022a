"""The sticky assignors: `sticky` (eager) and `cooperative-sticky` (KIP-429).

Goals, in order (Kafka's StickyAssignor contract):
1. Balance. With identical subscriptions every member's count differs by at most one. With
   different subscriptions, no partition could move from its owner X to another subscriber Y with
   |X| > |Y| + 1 (moving it would make the assignment more balanced).
2. Stickiness. A partition stays with its previous owner unless balance requires moving it.

Previous ownership comes from each member's subscription: `owned_partitions` and `generation_id`
(what cooperative members send), or, for the eager `sticky` assignor whose members revoke
everything before rejoining, the previous assignment and generation encoded in `user_data`. When
two members claim one partition, the claim with the higher generation wins; two claims from the
same generation cancel out (neither keeps it), as Kafka does.

`cooperative-sticky` computes the same target and then withholds every partition that would change
hands while its previous owner is still in the group: the owner gives it up (revokes) and rejoins,
and the follow-up rebalance hands it to its new owner. So no partition is ever owned twice.

Everything is deterministic: members are taken in Kafka's member order (static members first),
partitions in (topic, partition) order.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import msgpack

from consumer.assignors.base import AssignmentMap, Assignor, RebalanceProtocol, member_order, partitions_of
from protocol.types import Subscription, TopicPartition

NO_GENERATION = -1


# ----------------------------------------------------------------------------- user data


def encode_user_data(previous: Iterable[TopicPartition], generation_id: int) -> bytes:
    """The eager sticky assignor's memory across a revoke-everything rejoin."""
    return msgpack.packb({"partitions": [[tp.topic, tp.partition] for tp in sorted(previous)],
                          "generation": generation_id}, use_bin_type=True)


def decode_user_data(data: bytes) -> tuple[list[TopicPartition], int] | None:
    try:
        raw = msgpack.unpackb(data, raw=False)
        items, generation = raw["partitions"], raw["generation"]
    except Exception:
        return None  # not ours (another assignor's user data): treat as no history
    if not isinstance(items, list) or type(generation) is not int:
        return None
    if not all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str) and type(i[1]) is int for i in items):
        return None
    return [TopicPartition(t, p) for t, p in items], generation


@dataclass(frozen=True)
class Claim:
    partitions: list[TopicPartition]
    generation_id: int


def claim_of(sub: Subscription, use_user_data: bool) -> Claim:
    if use_user_data and sub.user_data:
        decoded = decode_user_data(sub.user_data)
        if decoded is not None:
            return Claim(*decoded)
    return Claim(list(sub.owned_partitions), sub.generation_id)


def resolve_claims(claims: Mapping[str, Claim], exists: Mapping[str, int]) -> dict[TopicPartition, str]:
    """partition -> previous owner, for partitions that still exist. Higher generation wins; equal
    generations from different members cancel out."""
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    for member, claim in claims.items():
        for tp in set(claim.partitions):
            if not 0 <= tp.partition < exists.get(tp.topic, 0):
                continue
            current = best.get(tp)
            if current is None or claim.generation_id > current[0]:
                best[tp] = (claim.generation_id, member)
            elif claim.generation_id == current[0] and current[1] != member:
                best[tp] = (claim.generation_id, None)  # a same-generation conflict: nobody keeps it
    return {tp: owner for tp, (_, owner) in best.items() if owner is not None}


# ----------------------------------------------------------------------------- the core


def sticky_assign(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                  previous_owner: Mapping[TopicPartition, str]) -> AssignmentMap:
    members = member_order(subscriptions)
    topic_sets = {m: frozenset(t for t in subscriptions[m].topics if partitions_per_topic.get(t)) for m in members}
    if members and len(set(topic_sets.values())) == 1:
        return _assign_identical(partitions_per_topic, members, topic_sets[members[0]], previous_owner)
    return _assign_general(partitions_per_topic, members, topic_sets, previous_owner)


def _owned_by(members: list[str], previous_owner: Mapping[TopicPartition, str],
              allowed: Callable[[str, TopicPartition], bool]) -> dict[str, list[TopicPartition]]:
    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp, m in previous_owner.items():
        if m in owned and allowed(m, tp):
            owned[m].append(tp)
    for parts in owned.values():
        parts.sort()
    return owned


def _assign_identical(partitions_per_topic: Mapping[str, int], members: list[str], topics: frozenset[str],
                      previous_owner: Mapping[TopicPartition, str]) -> AssignmentMap:
    """Everyone subscribes to the same topics: quotas are exact, so this is linear in partitions."""
    total = sum(partitions_per_topic[t] for t in topics)
    min_quota, extra = divmod(total, len(members))
    max_quota = min_quota + (1 if extra else 0)
    owned = _owned_by(members, previous_owner, lambda m, tp: tp.topic in topics)
    assignment: AssignmentMap = {}
    taken: set[TopicPartition] = set()
    max_slots = extra  # how many members may end with max_quota
    for m in members:
        mine = owned[m]
        if len(mine) <= min_quota:
            keep = mine
        elif max_slots > 0:
            keep = mine[:max_quota]
            max_slots -= 1
        else:
            keep = mine[:min_quota]
        assignment[m] = list(keep)
        taken.update(keep)
    free = [tp for t in sorted(topics) for tp in partitions_of(t, partitions_per_topic[t]) if tp not in taken]
    free.reverse()  # pop() from the end hands them out in ascending order
    for m in members:
        need = min_quota - len(assignment[m])
        for _ in range(max(need, 0)):
            assignment[m].append(free.pop())
    for m in members:
        if not free:
            break
        if len(assignment[m]) == min_quota and max_slots > 0:
            assignment[m].append(free.pop())
            max_slots -= 1
    assert not free, "quota arithmetic left partitions unassigned"
    return {m: sorted(ps) for m, ps in assignment.items()}


def _assign_general(partitions_per_topic: Mapping[str, int], members: list[str],
                    topic_sets: Mapping[str, frozenset[str]],
                    previous_owner: Mapping[TopicPartition, str]) -> AssignmentMap:
    """Different subscriptions: keep valid ownership, give each free partition (scarcest
    subscribers first) to its least loaded subscriber, then move partitions from a member to a
    subscriber with at least two fewer until none can move. Each move lowers the sum of squared
    counts, so the loop ends; when it does, the assignment is balanced by definition."""
    order = {m: i for i, m in enumerate(members)}
    subscribers: dict[str, list[str]] = {}
    for m in members:
        for t in topic_sets[m]:
            subscribers.setdefault(t, []).append(m)
    owned = _owned_by(members, previous_owner, lambda m, tp: tp.topic in topic_sets[m])
    assignment: dict[str, set[TopicPartition]] = {m: set(ps) for m, ps in owned.items()}
    sticky: set[TopicPartition] = {tp for ps in owned.values() for tp in ps}
    count = Counter({m: len(ps) for m, ps in assignment.items()})

    heaps: dict[str, list[tuple[int, int, str]]] = {t: [(count[m], order[m], m) for m in ms] for t, ms in subscribers.items()}
    for h in heaps.values():
        heapq.heapify(h)

    def least_loaded(topic: str) -> str:
        h = heaps[topic]
        while True:
            c, _, m = h[0]
            if c == count[m]:
                return m
            heapq.heapreplace(h, (count[m], order[m], m))  # stale entry: refresh it

    def bump(m: str, by: int) -> None:
        count[m] += by
        for t in topic_sets[m]:
            heapq.heappush(heaps[t], (count[m], order[m], m))

    free = [tp for t in subscribers for tp in partitions_of(t, partitions_per_topic[t]) if tp not in sticky]
    free.sort(key=lambda tp: (len(subscribers[tp.topic]), tp))
    for tp in free:
        m = least_loaded(tp.topic)
        assignment[m].add(tp)
        bump(m, 1)

    moved = True
    while moved:
        moved = False
        for x in sorted(members, key=lambda m: (-count[m], order[m])):
            # Partitions that were not x's before move first: moving them costs no stickiness.
            for tp in sorted(assignment[x], key=lambda tp: (tp in sticky and previous_owner.get(tp) == x, tp)):
                # The least loaded subscriber; if that is x itself, nobody is two below x.
                y = least_loaded(tp.topic)
                if y != x and count[x] > count[y] + 1:
                    assignment[x].discard(tp)
                    assignment[y].add(tp)
                    bump(x, -1)
                    bump(y, 1)
                    moved = True
    return {m: sorted(assignment[m]) for m in members}


def is_balanced(assignment: Mapping[str, list[TopicPartition]], subscriptions: Mapping[str, Subscription]) -> bool:
    """The balance definition above, for tests and for `grouplab assign`."""
    count = {m: len(ps) for m, ps in assignment.items()}
    subscribers: dict[str, list[str]] = {}
    for m, sub in subscriptions.items():
        for t in set(sub.topics):
            subscribers.setdefault(t, []).append(m)
    for x, parts in assignment.items():
        for tp in parts:
            if any(count[x] > count[y] + 1 for y in subscribers.get(tp.topic, ()) if y != x):
                return False
    return True


# ----------------------------------------------------------------------------- the assignors


class StickyAssignor(Assignor):
    """Eager sticky: members revoke everything before rejoining, so their previous assignment
    travels in `user_data` (falling back to owned_partitions when there is none)."""

    name = "sticky"
    rebalance_protocol = RebalanceProtocol.EAGER
    _use_user_data = True

    def subscription_user_data(self, previous: list[TopicPartition], generation_id: int) -> bytes | None:
        return encode_user_data(previous, generation_id)

    def previous_owners(self, partitions_per_topic: Mapping[str, int],
                        subscriptions: Mapping[str, Subscription]) -> dict[TopicPartition, str]:
        claims = {m: claim_of(s, self._use_user_data) for m, s in subscriptions.items()}
        return resolve_claims(claims, partitions_per_topic)

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> AssignmentMap:
        if not subscriptions:
            return {}
        owners = self.previous_owners(partitions_per_topic, subscriptions)
        return sticky_assign(partitions_per_topic, subscriptions, owners)


class CooperativeStickyAssignor(StickyAssignor):
    """KIP-429: the sticky target, minus the partitions whose previous owner must revoke them first."""

    name = "cooperative-sticky"
    rebalance_protocol = RebalanceProtocol.COOPERATIVE
    _use_user_data = False

    def subscription_user_data(self, previous: list[TopicPartition], generation_id: int) -> bytes | None:
        return None  # owned_partitions and generation_id in the subscription say it all

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> AssignmentMap:
        target = super().assign(partitions_per_topic, subscriptions)
        return withhold_transfers(target, self.previous_owners(partitions_per_topic, subscriptions))


def withhold_transfers(target: AssignmentMap, previous_owner: Mapping[TopicPartition, str]) -> AssignmentMap:
    """Drop every partition headed to a new owner while its previous owner is still a member."""
    return {
        m: [tp for tp in parts if previous_owner.get(tp, m) == m or previous_owner[tp] not in target]
        for m, parts in target.items()
    }
