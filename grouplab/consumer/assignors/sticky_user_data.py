"""The eager `sticky` assignor's user data in Kafka's StickyAssignor format (version 1, version 0
without a generation), and grouplab's earlier msgpack form, read back. Split from the claims
(sticky_claims.py): this is the codec, the claims are the rules."""

from __future__ import annotations

import operator
import struct
import sys
from array import array
from itertools import chain, repeat
from typing import Callable, Iterable, Iterator

import msgpack

from grouplab.consumer.assignors.base import as_partitions
from grouplab.protocol.types import TopicPartition


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
    """Kafka's format: first as a layout already seen at this length (one unpack), else read
    topic by topic, and the layout kept for the next member."""
    for layout in _LAYOUTS.get(len(data), ()):
        decoded = layout.decode(data)
        if decoded is not None:
            return decoded
    return _read_kafka(data)


def _read_kafka(data: bytes) -> tuple[list[TopicPartition], int | None] | None:
    unpack_int32, unpack_int16 = _INT32.unpack_from, _INT16.unpack_from
    skeleton: list[tuple[bytes, int]] = []  # (name as sent, count) per topic, for _Layout
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
            (count,) = unpack_int32(data, pos + length)
            if length < 0 or count < 0:
                return None
            skeleton.append((data[pos:pos + length], count))
            pos += length + 4
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
    if skeleton and len(data) - pos in (0, 4):  # nothing after the generation: a layout to keep
        _remember(_Layout(skeleton, [tp[0] for tp in parts], has_generation=len(data) > pos))
    return parts, generation


class _Layout:
    """One shape of Kafka's user data: which topics, with how many partitions each, and whether a
    generation follows. In a group with equal subscriptions most members' user data share a few
    shapes (the same topics, one or two partition counts), so after the first member of a shape the
    rest are read by one struct call and checked (names, lengths and counts as expected) in C:
    ~3x faster than topic by topic, which was half of `sticky`'s round 2 at 1,000 x 10,000."""

    def __init__(self, skeleton: list[tuple[bytes, int]], topic_of_each: list[str], has_generation: bool) -> None:
        fmt = [">i"]
        fixed: list[int] = [0]  # indices of the fields that must match: the topic count, then each topic's
        expected: list[object] = [len(skeleton)]
        numbers: list[int] = []
        index = 1
        for name, count in skeleton:
            fmt.append(f"h{len(name)}si{count}i")
            fixed += [index, index + 1, index + 2]
            expected += [len(name), name, count]
            numbers += range(index + 3, index + 3 + count)
            index += 3 + count
        if has_generation:
            fmt.append("i")
        self.unpack = struct.Struct("".join(fmt)).unpack
        self.fixed = _getter(fixed)
        self.expected = tuple(expected)
        self.numbers = _getter(numbers)
        self.generation = index if has_generation else None
        self.topic_of_each = topic_of_each
        self.size = struct.calcsize("".join(fmt))

    def decode(self, data: bytes) -> tuple[list[TopicPartition], int | None] | None:
        fields = self.unpack(data)
        if self.fixed(fields) != self.expected:
            return None
        parts = list(map(_new_tuple, repeat(TopicPartition), zip(self.topic_of_each, self.numbers(fields))))
        return parts, None if self.generation is None else fields[self.generation]


def _getter(indices: list[int]) -> Callable[[tuple], tuple]:
    """operator.itemgetter that gives a tuple for any number of indices."""
    if len(indices) == 1:
        (only,) = indices
        return lambda fields: (fields[only],)
    if not indices:
        return lambda fields: ()
    return operator.itemgetter(*indices)


_LAYOUTS: dict[int, list[_Layout]] = {}
_LAYOUTS_MAX = 256  # shapes kept (a few per group); past it, they are forgotten and learnt again


def _remember(layout: _Layout) -> None:
    if sum(map(len, _LAYOUTS.values())) >= _LAYOUTS_MAX:
        _LAYOUTS.clear()
    _LAYOUTS.setdefault(layout.size, []).insert(0, layout)


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
