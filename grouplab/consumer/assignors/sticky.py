"""The sticky assignors: `sticky` (eager) and `cooperative-sticky` (KIP-429), with Kafka's results.

Goals, in order (Kafka's StickyAssignor contract):
1. Balance. With identical subscriptions every member's count differs by at most one. With
   different subscriptions, no partition could move from its owner X to another subscriber Y with
   |X| > |Y| + 1 (moving it would make the assignment more balanced).
2. Stickiness. A partition stays with its previous owner unless balance requires moving it.

How, in Kafka's order and with Kafka's tie-breaks (docs/assignors.md):
- sticky_claims.py: which claimed partitions each member keeps (user data for `sticky`, owned
  partitions and generation for `cooperative-sticky`; conflicts settled by generation);
- sticky_constrained.py: everyone subscribes to the same topics (quotas, round-robin dealing);
- sticky_general.py: different subscriptions (greedy placement, then balancing moves).

`cooperative-sticky` then withholds every partition that changes hands while a member still
owns it (and, with equal subscriptions, every partition two members claimed in one generation):
the owner revokes it and rejoins, and the follow-up rebalance hands it on.

Members are ordered by `String.compareTo` of their ids, as Kafka's sticky assignors do (they do
not put static members first, unlike range and roundrobin); where Kafka iterates a HashMap the
order is Java's (java_order.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Callable, Mapping

from grouplab.consumer.assignors.base import AssignmentMap, Assignor, RebalanceProtocol, partitions_of
from grouplab.consumer.assignors.java_order import java_sorted
from grouplab.consumer.assignors.sticky_claims import (
    NO_GENERATION,
    Claims,
    MemberData,
    cooperative_member_data,
    decode_user_data,
    eager_member_data,
    encode_user_data,
    previous_generation_owners,
    resolve_claims,
)
from grouplab.consumer.assignors.sticky_constrained import constrained_assign
from grouplab.consumer.assignors.sticky_general import general_assign
from grouplab.consumer.assignors.sticky_shapes import UserDataReader
from grouplab.protocol.memory import gc_paused
from grouplab.protocol.types import Subscription, TopicPartition

__all__ = ["NO_GENERATION", "CooperativeStickyAssignor", "MemberData", "StickyAssignor", "StickyResult",
           "decode_user_data", "encode_user_data", "is_balanced", "sticky_assign"]


@dataclass
class StickyResult:
    """The eager target, and (equal subscriptions only) the partitions Kafka marks as changing
    owner: partition -> its new owner. None when Kafka leaves that to the cooperative assignor."""

    assignment: AssignmentMap
    transferring: dict[TopicPartition, str] | None
    claims: Claims


def sticky_assign(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                  member_data: Callable[[Subscription], MemberData]) -> StickyResult:
    """Kafka's AbstractStickyAssignor.assign: claims first, then the constrained or general path."""
    subscribed = set().union(*[s.topics for s in subscriptions.values()]).intersection(partitions_per_topic)
    by_topic = {t: partitions_of(t, partitions_per_topic[t]) for t in subscribed}
    data = {m: member_data(s) for m, s in subscriptions.items()}
    valid: set[TopicPartition] = set()
    if any(d.partitions for d in data.values()):
        valid = set(chain.from_iterable(by_topic.values()))
    claims = resolve_claims(valid, subscriptions, data)
    if claims.all_equal:
        everything = list(chain.from_iterable(by_topic[t] for t in java_sorted(by_topic)))
        target, transferring = constrained_assign(everything, claims.members, claims.hashmap_order, claims.owned,
                                                  claims.doubly)
        return StickyResult({m: sorted(target[m]) for m in subscriptions}, transferring, claims)
    topics_of = {m: frozenset(t for t in s.topics if t in by_topic) for m, s in subscriptions.items()}
    target = general_assign(by_topic, topics_of, claims.owned, previous_generation_owners(claims, valid))
    return StickyResult({m: target[m] for m in subscriptions}, None, claims)


def transferring_by_ownership(subscriptions: Mapping[str, Subscription], target: AssignmentMap) -> dict[TopicPartition, str]:
    """Kafka's CooperativeStickyAssignor, different subscriptions: a partition given to a member that
    did not list it as owned, while some member that listed it does not keep it."""
    revoked: set[TopicPartition] = set()
    for m, sub in subscriptions.items():
        if sub.owned_partitions:
            mine = set(target[m])
            revoked.update(tp for tp in sub.owned_partitions if tp not in mine)
    if not revoked:
        return {}
    out: dict[TopicPartition, str] = {}
    for m, parts in target.items():
        listed = set(subscriptions[m].owned_partitions)
        for tp in parts:
            if tp in revoked and tp not in listed:
                out[tp] = m
    return out


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
    """Eager sticky: members revoke everything before rejoining, so their previous assignment and
    generation travel in `user_data`, and only there (Kafka's StickyAssignor ignores owned_partitions)."""

    name = "sticky"
    rebalance_protocol = RebalanceProtocol.EAGER

    def subscription_user_data(self, previous: list[TopicPartition], generation_id: int) -> bytes | None:
        return encode_user_data(previous, generation_id)

    def member_data(self, subscription: Subscription) -> MemberData:
        return eager_member_data(subscription)

    def members_reader(self) -> Callable[[Subscription], MemberData]:
        """member_data for the members of one assignment: their user data read by a reader that
        learns its repeated shapes (sticky_shapes.py), with the same results."""
        read = UserDataReader()
        return lambda subscription: eager_member_data(subscription, read)

    def compute(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> StickyResult:
        """The assignment with Kafka's bookkeeping (for tests and explanations)."""
        with gc_paused():
            return sticky_assign(partitions_per_topic, subscriptions, self.members_reader())

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> AssignmentMap:
        if not subscriptions:
            return {}
        return self.compute(partitions_per_topic, subscriptions).assignment


class CooperativeStickyAssignor(StickyAssignor):
    """KIP-429: the sticky target, minus the partitions whose previous owner must revoke them first."""

    name = "cooperative-sticky"
    rebalance_protocol = RebalanceProtocol.COOPERATIVE

    def subscription_user_data(self, previous: list[TopicPartition], generation_id: int) -> bytes | None:
        return None  # owned_partitions and generation_id in the subscription say it all

    def member_data(self, subscription: Subscription) -> MemberData:
        return cooperative_member_data(subscription)

    def members_reader(self) -> Callable[[Subscription], MemberData]:
        return self.member_data  # no user data to read

    def withheld(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                 result: StickyResult) -> dict[TopicPartition, str]:
        """partition -> the member it is headed for once its owner has revoked it."""
        if result.transferring is not None:
            return result.transferring
        return transferring_by_ownership(subscriptions, result.assignment)

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> AssignmentMap:
        if not subscriptions:
            return {}
        with gc_paused():
            result = sticky_assign(partitions_per_topic, subscriptions, self.members_reader())
            withheld = self.withheld(partitions_per_topic, subscriptions, result)
            if not withheld:
                return result.assignment
            return {m: [tp for tp in parts if withheld.get(tp) != m] for m, parts in result.assignment.items()}
