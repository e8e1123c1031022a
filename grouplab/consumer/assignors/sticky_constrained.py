"""Sticky assignment when every member subscribes to the same topics (Kafka's constrained
assignment): linear in partitions, with Kafka's quotas and Kafka's dealing order.

With P partitions and M members, every member ends with min = floor(P/M) or max = ceil(P/M)
partitions, and exactly P mod M members get max. In Kafka's order (docs/assignors.md "Equal
subscriptions"):

1. Members are met in the leader's HashMap order. Each keeps its claims, sorted by partition number
   then topic (so what it keeps spreads over topics): all of them if fewer than min; max of them
   while members at max are still wanted; else min. Claims beyond that are revoked.
2. The partitions nobody kept, sorted by topic then number, are dealt round-robin to the members
   still under min (sorted by member id), one each per round, so each member also gets an even
   share of each topic; a member leaves the round when it reaches min.
3. What is left goes, one each, to members at exactly min (sorted by member id, then in the order
   they reached min) until the P mod M max places are taken.

A partition dealt in 2 or 3 that a member revoked in 1, or that two members claimed in one
generation, is "transferring ownership": cooperative-sticky withholds it until the follow-up
rebalance.
"""

from __future__ import annotations

from collections import deque
from itertools import filterfalse
from typing import Callable, Mapping

from grouplab.consumer.assignors.java_order import java_key, java_sorted
from grouplab.protocol.types import TopicPartition


class QuotaError(RuntimeError):
    """Kafka's IllegalStateException: the quota arithmetic did not come out (a bug, never input)."""


def partition_then_topic(tp: TopicPartition) -> tuple[int, bytes]:
    return (tp.partition, java_key(tp.topic))


def constrained_assign(all_partitions: list[TopicPartition], members: list[str],
                       hashmap_order: Callable[[], list[str]],
                       owned: Mapping[str, set[TopicPartition]], doubly: set[TopicPartition],
                       ) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
    """(assignment, partitions transferring ownership -> their new owner).

    `all_partitions`: every partition of the subscribed topics, topics in `compareTo` order;
    `members`: every member; `hashmap_order()`: the members in the leader's HashMap order;
    `owned`: each member's honoured claims."""
    total = len(all_partitions)
    min_quota, expected_over = divmod(total, len(members))
    max_quota = min_quota + (1 if expected_over else 0)
    # The order members are met in decides only who gets the max places when more members could
    # fill one than there are places (the other lists are sorted before use); else any order will do.
    mine_of = {m: owned[m] - doubly if doubly else owned[m] for m in members}
    candidates = sum(1 for m in members if len(mine_of[m]) >= max_quota) if expected_over else 0
    order = hashmap_order() if candidates > expected_over else members
    current_over = 0
    assignment: dict[str, list[TopicPartition]] = {}
    under: list[str] = []  # fewer than min_quota
    at_min: list[str] = []  # exactly min_quota, and a max place may still be free
    revoked: set[TopicPartition] = set()
    for member in order:
        mine = mine_of[member]
        if len(mine) < min_quota:
            assignment[member] = list(mine)
            under.append(member)
            continue
        if len(mine) >= max_quota and current_over < expected_over:
            current_over += 1
            if current_over == expected_over:
                at_min.clear()
            keep = max_quota
        else:
            keep = min_quota
            if current_over < expected_over:
                at_min.append(member)
        if len(mine) > keep:
            ordered = sorted(mine, key=partition_then_topic)
            revoked.update(ordered[keep:])
            assignment[member] = ordered[:keep]
        else:
            assignment[member] = list(mine)

    kept_count = {m: len(ps) for m, ps in assignment.items()}
    kept: set[TopicPartition] = set().union(*assignment.values())
    free = list(filterfalse(kept.__contains__, all_partitions)) if kept else all_partitions
    under = java_sorted(under)
    at_min = java_sorted(at_min)
    waiting = deque(at_min)
    taken = 0  # free[:taken] are dealt

    # Round-robin over the members under min_quota. Full rounds go in bulk: r rounds give the
    # member at position j of the round free[taken + j], free[taken + j + L], ... (L members).
    while under and taken < len(free):
        width = len(under)
        rounds = min(min(min_quota - len(assignment[m]) for m in under), (len(free) - taken) // width)
        if rounds:
            stop = taken + rounds * width
            for j, member in enumerate(under):
                assignment[member].extend(free[taken + j:stop:width])
            taken = stop
            still = []
            for member in under:
                if len(assignment[member]) == min_quota:
                    waiting.append(member)
                else:
                    still.append(member)
            under = still
            continue
        # Fewer partitions left than members in the round: deal them one by one, in order.
        still = []
        for member in under:
            if taken < len(free):
                assignment[member].append(free[taken])
                taken += 1
                if len(assignment[member]) == min_quota:
                    waiting.append(member)
                    continue
            still.append(member)
        under = still

    # The rest: one each to members at min_quota, in order, taking the max places.
    while taken < len(free):
        if not waiting:
            raise QuotaError("no more unfilled consumers to be assigned")
        member = waiting.popleft()
        assignment[member].append(free[taken])
        taken += 1
        if len(assignment[member]) == max_quota:
            current_over += 1

    if under and (current_over != expected_over or any(len(assignment[m]) != min_quota for m in under)):
        raise QuotaError("a consumer did not reach min quota and no partitions are left")

    transferring: dict[TopicPartition, str] = {}
    if revoked or doubly:
        for member, parts in assignment.items():
            for tp in parts[kept_count[member]:]:  # dealt in this rebalance, even back to a claimant
                if tp in revoked or tp in doubly:
                    transferring[tp] = member
    return assignment, transferring
