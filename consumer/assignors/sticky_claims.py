"""What each member says it owned, and which of those claims the sticky assignors honour.

Kafka's rules (AbstractStickyAssignor, docs/assignors.md "Claims"):

- The eager `sticky` assignor reads a member's previous partitions and generation from its
  subscription's user data only (an eager member has revoked everything before it rejoins);
  `cooperative-sticky` reads the subscription's owned partitions and generation.
- Claims are met member by member in the leader's HashMap order. A partition claimed by a member
  whose generation is higher than the claimant met before moves to it; a lower one is ignored; an
  equal one invalidates the partition for both ("doubly claimed": nobody keeps it, and
  cooperative-sticky hands it to nobody in this rebalance). The earlier claimant's generation is
  the one in its *subscription*, as in Kafka.
- Claims of topics that nobody subscribes to any more, or that no longer exist, are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

import msgpack

from consumer.assignors.java_order import hashmap_order
from protocol.types import Subscription, TopicPartition

NO_GENERATION = -1


@dataclass(frozen=True)
class MemberData:
    """A member's previous partitions and generation, as its assignor reads them."""

    partitions: list[TopicPartition]
    generation: int | None  # None: the member sent none (Kafka's Optional.empty())


# ----------------------------------------------------------------------------- user data


def encode_user_data(previous: Iterable[TopicPartition], generation_id: int) -> bytes:
    """The eager sticky assignor's memory across a revoke-everything rejoin."""
    return msgpack.packb({"partitions": [[tp.topic, tp.partition] for tp in sorted(previous)],
                          "generation": generation_id}, use_bin_type=True)


def decode_user_data(data: bytes) -> tuple[list[TopicPartition], int | None] | None:
    """(partitions, generation) from user data; generation None for the old form without one
    (Kafka's version-0 schema); None when the bytes are not ours at all."""
    try:
        raw = msgpack.unpackb(data, raw=False)
        items = raw["partitions"]
        generation = raw.get("generation")
        has_generation = "generation" in raw
    except Exception:
        return None  # not ours (another assignor's user data): treat as no history
    if not isinstance(items, list) or (has_generation and type(generation) is not int):
        return None
    if not all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str) and type(i[1]) is int for i in items):
        return None
    return [TopicPartition(t, p) for t, p in items], generation


def eager_member_data(sub: Subscription) -> MemberData:
    """Kafka's StickyAssignor: always the user data, never owned_partitions."""
    decoded = decode_user_data(sub.user_data) if sub.user_data else None
    if decoded is None:
        return MemberData([], None)
    return MemberData(*decoded)


def cooperative_member_data(sub: Subscription) -> MemberData:
    """Kafka's CooperativeStickyAssignor: the subscription's own fields."""
    return MemberData(list(sub.owned_partitions), None if sub.generation_id == NO_GENERATION else sub.generation_id)


# ----------------------------------------------------------------------------- resolution


@dataclass
class Claims:
    """The outcome of reading every member's claims.

    owned: member -> the claims it keeps, in the order met (partitions that exist, of topics
    someone subscribes to; possibly of topics the member itself dropped).
    doubly: partitions claimed by two members of one generation.
    max_generation: the highest generation any member sent (-1 if none).
    all_equal: whether every member subscribes to the same set of topics.
    order: members in the leader's HashMap order (the order claims were met)."""

    owned: dict[str, list[TopicPartition]]
    doubly: set[TopicPartition]
    max_generation: int
    all_equal: bool
    order: list[str]
    data: dict[str, MemberData] = field(default_factory=dict)


def resolve_claims(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                   data: Mapping[str, MemberData]) -> Claims:
    """Kafka's first pass over the subscriptions (allSubscriptionsEqual): who keeps what."""
    order = hashmap_order(subscriptions)
    first_topics: frozenset[str] | None = None
    all_equal = True
    owner_of: dict[TopicPartition, str] = {}
    owned: dict[str, dict[TopicPartition, None]] = {m: {} for m in order}
    doubly: set[TopicPartition] = set()
    max_generation = NO_GENERATION
    for member in order:
        topics = frozenset(subscriptions[member].topics)
        if first_topics is None:
            first_topics = topics
        elif topics != first_topics:
            all_equal = False
        md = data[member]
        generation = NO_GENERATION if md.generation is None else md.generation
        max_generation = max(max_generation, generation)
        mine = owned[member]
        for tp in dict.fromkeys(md.partitions):
            if not 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                continue
            other = owner_of.get(tp)
            if other is None:
                mine[tp] = None
            else:
                other_generation = subscriptions[other].generation_id
                if generation == other_generation:
                    doubly.add(tp)
                    owned[other].pop(tp, None)
                elif generation > other_generation:
                    mine[tp] = None
                    owned[other].pop(tp, None)
                else:
                    continue
            owner_of[tp] = member
    return Claims({m: list(ps) for m, ps in owned.items()}, doubly, max_generation, all_equal, order, dict(data))


def previous_generation_owners(claims: Claims, partitions_per_topic: Mapping[str, int]) -> dict[TopicPartition, str]:
    """Kafka's prevAssignment: for each partition, the member of the highest generation *below*
    the current maximum that claimed it (the first met wins a tie). The general assignment gives a
    partition back to it when its current owner is overloaded."""
    best: dict[TopicPartition, tuple[str, int]] = {}
    for member in claims.order:
        md = claims.data[member]
        generation = NO_GENERATION if md.generation is None else md.generation
        if generation >= claims.max_generation:
            continue
        for tp in md.partitions:
            if not 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                continue
            current = best.get(tp)
            if current is None or generation > current[1]:
                best[tp] = (member, generation)
    return {tp: m for tp, (m, _) in best.items()}
