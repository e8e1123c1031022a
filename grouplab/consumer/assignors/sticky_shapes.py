"""Reading many members' sticky user data in one leader's call: a repeated shape in one unpack.

Why: decoding 900 members' user data topic by topic was half of the eager `sticky` assignor's
round 2 at 1,000 × 10,000 (issue 26). In a group with equal subscriptions most members send user
data of one shape (the same topics with the same partition counts); once a shape is known, a member
of it is read by one struct call whose fixed fields (topic count, name lengths, names, counts) are
checked in C against the shape's, and only its partition numbers and generation taken.

An earlier layout cache (reverted, da79c45) was module-wide and learnt every shape it met: on a
group of varied shapes it tried dozens of layouts per member and built one per member, 4x slower
than reading topic by topic. This reader lives for one assignment, keeps at most SHAPES_PER_LENGTH
shapes per byte length (most recently used first), and stops trying and learning once misses
outnumber hits (MISSES_ALLOWED, then one hit in HITS_PER_MISS): a group of varied shapes pays for a
few misses, then reads topic by topic exactly as before.

Whatever it returns equals `sticky_claims.decode_user_data`'s answer for the same bytes (a shape
only accepts bytes whose every fixed field is the one it was learnt from, at exactly its length);
tests/test_sticky_shapes.py holds the two to each other on random user data.
"""

from __future__ import annotations

import operator
import struct
from itertools import groupby, repeat
from typing import Callable

from grouplab.consumer.assignors.sticky_claims import decode_user_data
from grouplab.protocol.types import TopicPartition

Decoded = tuple[list[TopicPartition], "int | None"]

SHAPES_PER_LENGTH = 4
MISSES_ALLOWED = 8  # misses before the reader asks for hits in return
HITS_PER_MISS = 4  # past MISSES_ALLOWED, it gives up unless hits are at least this many per miss

_new_tuple = tuple.__new__
_topic = operator.itemgetter(0)


class _Shape:
    """One shape of Kafka's StickyAssignor user data: its topics in wire order, each with its
    count, and whether a generation follows; read by one Struct of exactly its size."""

    __slots__ = ("unpack", "fixed", "expected", "numbers", "generation", "topic_of_each", "size")

    def __init__(self, runs: list[tuple[str, int]], has_generation: bool) -> None:
        fmt = [">i"]
        fixed: list[int] = [0]  # indices of the fields that must match: the topic count, then each topic's
        expected: list[object] = [len(runs)]
        numbers: list[int] = []
        topic_of_each: list[str] = []
        index = 1
        for name, count in runs:
            raw = name.encode("utf-8")
            fmt.append(f"h{len(raw)}si{count}i")
            fixed += [index, index + 1, index + 2]
            expected += [len(raw), raw, count]
            numbers += range(index + 3, index + 3 + count)
            topic_of_each += [name] * count
            index += 3 + count
        if has_generation:
            fmt.append("i")
        layout = struct.Struct("".join(fmt))
        self.unpack = layout.unpack
        self.size = layout.size
        self.fixed = operator.itemgetter(*fixed, 0)  # the extra 0: always a tuple, however few
        self.expected = (*expected, len(runs))
        self.numbers = _getter(numbers)
        self.generation = index if has_generation else None
        self.topic_of_each = topic_of_each

    def read(self, data: bytes) -> Decoded | None:
        fields = self.unpack(data)
        if self.fixed(fields) != self.expected:
            return None
        parts = list(map(_new_tuple, repeat(TopicPartition), zip(self.topic_of_each, self.numbers(fields))))
        return parts, None if self.generation is None else fields[self.generation]


def _getter(indices: list[int]) -> Callable[[tuple[object, ...]], tuple[object, ...]]:
    """operator.itemgetter that gives a tuple for any number of indices."""
    if len(indices) == 1:
        (only,) = indices
        return lambda fields: (fields[only],)
    if not indices:
        return lambda fields: ()
    return operator.itemgetter(*indices)


def _wire_size(runs: list[tuple[str, int]]) -> int:
    """Bytes of the topic entries (and the topic count) before the generation."""
    return 4 + sum(6 + len(name.encode("utf-8")) + 4 * count for name, count in runs)


class UserDataReader:
    """`decode_user_data` for the members of one assignment, learning their repeated shapes."""

    def __init__(self) -> None:
        self.shapes: dict[int, list[_Shape]] = {}
        self.hits = 0
        self.misses = 0
        self.learning = True

    def __call__(self, data: bytes) -> Decoded | None:
        if self.learning:
            for shape in self.shapes.get(len(data), ()):
                decoded = shape.read(data)
                if decoded is not None:
                    self.hits += 1
                    return decoded
            self.misses += 1
            if self.misses > MISSES_ALLOWED and self.misses * HITS_PER_MISS > self.hits:
                self.learning = False
                self.shapes.clear()
        decoded = decode_user_data(data)
        if self.learning and decoded is not None and decoded[0]:
            self._learn(data, decoded)
        return decoded

    def _learn(self, data: bytes, decoded: Decoded) -> None:
        """Keep the shape of bytes just read topic by topic, if they are Kafka's format with nothing
        after the generation (what a shape reads back exactly); msgpack or trailing bytes: not kept."""
        parts, generation = decoded
        runs = [(name, sum(1 for _ in group)) for name, group in groupby(parts, key=_topic)]
        size = _wire_size(runs)
        has_generation = generation is not None
        if len(data) != size + (4 if has_generation else 0):
            return
        shape = _Shape(runs, has_generation)
        if shape.read(data) != decoded:  # another encoding of the same partitions (a topic split in two)
            return
        kept = self.shapes.setdefault(len(data), [])
        kept.insert(0, shape)
        del kept[SHAPES_PER_LENGTH:]
