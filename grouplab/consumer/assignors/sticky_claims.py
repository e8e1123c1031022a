"""What each member says it owned, and which of those claims the sticky assignors honour.

Kafka's rules (AbstractStickyAssignor, docs/assignors.md "Claims"):

- The eager `sticky` assignor reads a member's previous partitions and generation from its
  subscription's user data only, in Kafka's format (an eager member has revoked everything
  before it rejoins);
  `cooperative-sticky` reads the subscription's owned partitions and generation.
- Claims are met member by member in the leader's HashMap order. A partition claimed by a member
  whose generation is higher than the claimant met before moves to it; a lower one is ignored; an
  equal one invalidates the partition for both ("doubly claimed": nobody keeps it, and
  cooperative-sticky hands it to nobody in this rebalance). The earlier claimant's generation is
  the one in its *subscription*, as in Kafka since 3.5 (KAFKA-14639): an eager member whose
  subscription has no generation (v0/v1) counts as -1 there, so a later claim with a user-data
  generation takes its partition rather than voiding it (Kafka before 3.5 compared user data only).
- Claims of topics that nobody subscribes to any more, or that no longer exist, are dropped.
"""

from __future__ import annotations

import operator
import struct
import sys
from array import array
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Callable, Iterable, Iterator, Mapping

import msgpack

from grouplab.consumer.assignors.base import as_partitions
from grouplab.consumer.assignors.java_order import hashmap_order, java_sorted
from grouplab.protocol.types import Subscription, TopicPartition

NO_GENERATION = -1


@dataclass(frozen=True)
class MemberData:
    """A member's previous partitions and generation, as its assignor reads them."""

    partitions: list[TopicPartition]
    generation: int | None  # None: the member sent none (Kafka's Optional.empty())


def generation_of(md: MemberData) -> int:
    """Kafka's generation.orElse(DEFAULT_GENERATION)."""
    return NO_GENERATION if md.generation is None else md.generation


# ----------------------------------------------------------------------------- user data


def encode_user_data(previous: Iterable[TopicPartition], generation_id: int) -> bytes:
    """The eager sticky assignor's memory across a revoke-everything rejoin, in Kafka's
    StickyAssignor user-data format (version 1), so a Kafka leader reads it as grouplab's does:
    an int32 count of topics, each an int16-length UTF-8 name with an int32 count of int32
    partition numbers, then the int32 generation; big-endian."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(previous):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [struct.pack(">i", len(by_topic))]
    for topic, numbers in by_topic.items():
        name = topic.encode("utf-8")
        out.append(struct.pack(f">h{len(name)}si{len(numbers)}i", len(name), name, len(numbers), *numbers))
    out.append(struct.pack(">i", generation_id))
    return b"".join(out)


def decode_user_data(data: bytes) -> tuple[list[TopicPartition], int | None] | None:
    """(partitions, generation) from user data: Kafka's format (version 1, or version 0 without a
    generation, as Kafka tries them), else grouplab's earlier msgpack form; None when the bytes are
    neither (another assignor's user data: no history)."""
    decoded = _decode_kafka(data)
    return decoded if decoded is not None else _decode_msgpack(data)


def _decode_kafka(data: bytes) -> tuple[list[TopicPartition], int | None] | None:
    unpack_int32, unpack_int16 = _INT32.unpack_from, _INT16.unpack_from
    names: list[Iterator[str]] = []
    chunks: list[bytes] = []
    try:
        (topics,) = unpack_int32(data, 0)
        if topics < 0:
            return None
        pos = 4
        for _ in range(topics):
            (length,) = unpack_int16(data, pos)
            pos += 2
            name = data[pos:pos + length].decode("utf-8")
            pos += length
            (count,) = unpack_int32(data, pos)
            if length < 0 or count < 0:
                return None
            pos += 4
            names.append(repeat(name, count))
            chunks.append(data[pos:pos + 4 * count])
            pos += 4 * count
    except (struct.error, UnicodeDecodeError):
        return None
    if pos > len(data):
        return None
    # Every topic's partition numbers in one array (big-endian on the wire), then one pass.
    numbers = array("i", b"".join(chunks))
    if _SWAP:
        numbers.byteswap()
    parts = list(map(_new_tuple, repeat(TopicPartition), zip(chain.from_iterable(names), numbers)))
    generation = unpack_int32(data, pos)[0] if len(data) - pos >= 4 else None
    return parts, generation


UserDataDecoder = Callable[[bytes], "tuple[list[TopicPartition], int | None] | None"]
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_SWAP = sys.byteorder == "little"
_new_tuple = tuple.__new__
assert array("i").itemsize == 4


def _decode_msgpack(data: bytes) -> tuple[list[TopicPartition], int | None] | None:
    """grouplab's user data before it spoke Kafka's format: {"partitions": [[topic, n]...], "generation": g}."""
    try:
        raw = msgpack.unpackb(data, raw=False)
        items = raw["partitions"]
        generation = raw.get("generation")
        has_generation = "generation" in raw
    except Exception:
        return None
    if not isinstance(items, list) or (has_generation and type(generation) is not int):
        return None
    # Checked in bulk (a member may have thousands of partitions): [str, int] pairs only.
    if items and (set(map(type, items)) != {list} or set(map(len, items)) != {2}):
        return None
    parts = as_partitions(items)
    if parts and (set(map(type, map(_topic, parts))) != {str} or set(map(type, map(_number, parts))) != {int}):
        return None
    return parts, generation


_topic = operator.itemgetter(0)
_number = operator.itemgetter(1)


def eager_member_data(sub: Subscription, read: UserDataDecoder | None = None) -> MemberData:
    """Kafka's StickyAssignor: always the user data, never owned_partitions. `read`: a decoder
    equal to decode_user_data (sticky_shapes.UserDataReader, for the members of one assignment)."""
    decoded = (read or decode_user_data)(sub.user_data) if sub.user_data else None
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

    owned: member -> the claims it keeps (partitions that exist, of topics someone subscribes to;
    possibly of topics the member itself dropped).
    doubly: partitions claimed by two members of one generation.
    max_generation: the highest generation any member sent (-1 if none).
    all_equal: whether every member subscribes to the same set of topics.
    members: every member, in member-id order.
    contested: whether two members claimed one partition (only then does the order in which
    claims are met matter; hashmap_order() gives it)."""

    owned: dict[str, set[TopicPartition]]
    doubly: set[TopicPartition]
    max_generation: int
    all_equal: bool
    members: list[str]
    contested: bool
    data: dict[str, MemberData] = field(default_factory=dict)
    _order: list[str] | None = None

    def hashmap_order(self) -> list[str]:
        """The members in the leader's HashMap order (hashing every member id: done when needed)."""
        if self._order is None:
            self._order = hashmap_order(self.members)
        return self._order


def resolve_claims(valid: set[TopicPartition], subscriptions: Mapping[str, Subscription],
                   data: Mapping[str, MemberData]) -> Claims:
    """Kafka's first pass over the subscriptions (allSubscriptionsEqual): who keeps what.
    `valid`: every partition of the subscribed topics.

    A partition claimed by one member only is simply kept; Kafka's member-by-member walk matters
    only for partitions claimed more than once, so only those are walked."""
    order = java_sorted(subscriptions)
    topic_lists = [subscriptions[m].topics for m in order]
    # The same topic list everywhere (the usual case) is found by list equality in C.
    all_equal = not topic_lists or topic_lists.count(topic_lists[0]) == len(topic_lists) or len(
        {frozenset(topics) for topics in topic_lists}) == 1
    generation = {m: generation_of(data[m]) for m in order}
    max_generation = max(generation.values(), default=NO_GENERATION)
    claimed = {m: set(data[m].partitions) for m in order if data[m].partitions}
    everything_claimed: set[TopicPartition] = set().union(*claimed.values())
    if not everything_claimed <= valid:  # claims of topics nobody subscribes to, or past a topic's end
        claimed = {m: parts & valid for m, parts in claimed.items()}
        everything_claimed &= valid
    owned: dict[str, set[TopicPartition]] = {m: claimed.get(m, set()) for m in order}
    doubly: set[TopicPartition] = set()
    contested = sum(map(len, claimed.values())) != len(everything_claimed)
    result = Claims(owned, doubly, max_generation, all_equal, order, contested, dict(data))
    if contested:
        seen: set[TopicPartition] = set()
        disputed: set[TopicPartition] = set()
        for parts in claimed.values():
            disputed |= parts & seen
            seen |= parts
        claimants: dict[TopicPartition, list[str]] = {}
        for m in result.hashmap_order():
            if m in claimed:
                owned[m] = claimed[m] - disputed
                for tp in claimed[m] & disputed:
                    claimants.setdefault(tp, []).append(m)
        for tp, members in claimants.items():
            holder = members[0]
            owned[holder].add(tp)
            for m in members[1:]:
                other_generation = subscriptions[holder].generation_id  # Kafka reads the subscription's here
                if generation[m] == other_generation:
                    doubly.add(tp)
                    owned[holder].discard(tp)
                elif generation[m] > other_generation:
                    owned[m].add(tp)
                    owned[holder].discard(tp)
                else:
                    continue
                holder = m
    return result


def previous_generation_owners(claims: Claims, valid: set[TopicPartition]) -> dict[TopicPartition, str]:
    """Kafka's prevAssignment: for each partition, the member of the highest generation *below*
    the current maximum that claimed it (the first met wins a tie). The general assignment gives a
    partition back to it when its current owner is overloaded."""
    best: dict[TopicPartition, tuple[str, int]] = {}
    # A partition with one claimant has no tie to break: the HashMap order matters only if contested.
    for member in claims.hashmap_order() if claims.contested else claims.members:
        md = claims.data[member]
        generation = generation_of(md)
        if generation >= claims.max_generation or not md.partitions:
            continue
        for tp in md.partitions:
            if tp not in valid:
                continue
            current = best.get(tp)
            if current is None or generation > current[1]:
                best[tp] = (member, generation)
    return {tp: m for tp, (m, _) in best.items()}
