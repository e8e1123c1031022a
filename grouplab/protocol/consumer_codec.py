"""Kafka's ConsumerProtocol Subscription and Assignment (docs/protocol.md §5.2-5.3), written and
read directly with `struct`, for the common shapes only.

Why: the simulator's members encode a subscription on every JoinGroup and decode an assignment
on every SyncGroup answer, and a leader decodes every member's subscription on each rebalance;
through kafka-python's generic schema classes that was a quarter of a 1,000-member run
(issue 26). The bytes are exactly kafka-python's (Kafka's schemas, non-flexible versions 0-3:
int16 version, then int32-counted arrays, int16-length strings, int32-length nullable bytes).

Every function returns None where it does not take the shape on (a version outside 0-3, a value
of an unexpected type or out of range, a null array, a malformed or truncated buffer): the caller
(grouplab/protocol/consumer_protocol.py) then goes through kafka-python's classes, which give
the same result or raise the same error as before. tests/test_consumer_codec.py holds the two to
each other, value for value and byte for byte.
"""

from __future__ import annotations

import struct
from typing import Any

from grouplab.protocol.types import TopicPartition

# (topics, user_data, owned_partitions, generation_id, rack): a Subscription's wire fields.
DecodedSubscription = tuple[tuple[str, ...], bytes | None, tuple[TopicPartition, ...], int, str | None]
# (partitions, user_data): an Assignment's.
DecodedAssignment = tuple[tuple[TopicPartition, ...], bytes | None]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT16_MAX = 0x7FFF
_NULL_BYTES = _INT32.pack(-1)
_NULL_STRING = _INT16.pack(-1)
_BYTES_TYPES = (bytes, bytearray, memoryview)
_new_tp = tuple.__new__  # TopicPartition(topic, partition) without its generated __new__


class _Unsupported(Exception):
    """A shape left to kafka-python's classes."""


def _string(value: Any, out: list[bytes]) -> None:
    if type(value) is not str:
        raise _Unsupported
    raw = value.encode("utf-8")
    if len(raw) > _INT16_MAX:
        raise _Unsupported
    out.append(_INT16.pack(len(raw)))
    out.append(raw)


def _nullable_bytes(value: Any, out: list[bytes]) -> None:
    if value is None:
        out.append(_NULL_BYTES)
    elif isinstance(value, _BYTES_TYPES):
        out.append(_INT32.pack(len(value)))
        out.append(bytes(value))
    else:
        raise _Unsupported


def _topic_partitions(grouped: dict[str, list[int]], out: list[bytes]) -> None:
    out.append(_INT32.pack(len(grouped)))
    for topic, partitions in grouped.items():
        _string(topic, out)
        out.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))


def encode_subscription(topics: list[str], user_data: bytes | None, owned: dict[str, list[int]],
                        generation_id: int, rack: str | None, version: int) -> bytes | None:
    """Subscription `version` (0-3) of these fields, as kafka-python writes it; None: not taken on."""
    if not 0 <= version <= 3:
        return None
    out: list[bytes] = [_INT16.pack(version), _INT32.pack(len(topics))]
    try:
        for topic in topics:
            _string(topic, out)
        _nullable_bytes(user_data, out)
        if version >= 1:
            _topic_partitions(owned, out)
        if version >= 2:
            out.append(_INT32.pack(generation_id))
        if version >= 3:
            if rack is None:
                out.append(_NULL_STRING)
            else:
                _string(rack, out)
    except (_Unsupported, struct.error, UnicodeEncodeError):
        return None
    return b"".join(out)


def encode_assignment(grouped: dict[str, list[int]], user_data: bytes | None, version: int,
                      newest: int) -> bytes | None:
    """Assignment `version` (0..`newest`) of these fields, as kafka-python writes it; None: not taken on."""
    if not 0 <= version <= newest:
        return None
    out: list[bytes] = [_INT16.pack(version)]
    try:
        _topic_partitions(grouped, out)
        _nullable_bytes(user_data, out)
    except (_Unsupported, struct.error, UnicodeEncodeError):
        return None
    return b"".join(out)


class _Reader:
    """A cursor over a buffer; every read past its end, or of a null where the fast path takes
    none, raises (struct.error or _Unsupported)."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data)

    def int32(self) -> int:
        value: int = _INT32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return value

    def count(self) -> int:
        n = self.int32()
        if n < 0:
            raise _Unsupported  # a null array
        return n

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise _Unsupported  # a null where Kafka's schema has a plain string
        return value

    def nullable_string(self) -> str | None:
        n: int = _INT16.unpack_from(self.data, self.pos)[0]
        start = self.pos + 2
        if n < 0:
            self.pos = start
            return None
        stop = start + n
        if stop > self.end:
            raise _Unsupported
        self.pos = stop
        return self.data[start:stop].decode("utf-8")

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            return None
        start, stop = self.pos, self.pos + n
        if stop > self.end:
            raise _Unsupported
        self.pos = stop
        return self.data[start:stop]

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string()
            k = self.count()
            if self.pos + 4 * k > self.end:
                raise _Unsupported
            partitions = struct.unpack_from(f">{k}i", self.data, self.pos)
            self.pos += 4 * k
            out.extend([_new_tp(TopicPartition, (topic, p)) for p in partitions])
        return tuple(out)


def _version(data: bytes, newest: int) -> int:
    version: int = _INT16.unpack_from(data, 0)[0]
    if version < 0:
        raise _Unsupported
    return min(version, newest)  # a newer version's known prefix, as Kafka's readers do


def decode_subscription(data: bytes, newest: int) -> DecodedSubscription | None:
    """The fields of Subscription bytes, as kafka-python reads them (a version past `newest` read as
    `newest`); None: not taken on."""
    if type(data) is not bytes:
        data = bytes(data)
    try:
        version = _version(data, newest)
        r = _Reader(data, 2)
        topics = tuple([r.string() for _ in range(r.count())])
        user_data = r.nullable_bytes()
        owned = r.topic_partitions() if version >= 1 else ()
        generation_id = r.int32() if version >= 2 else -1
        rack = r.nullable_string() if version >= 3 else None
    except (_Unsupported, struct.error, UnicodeDecodeError):
        return None
    return topics, user_data, owned, generation_id, rack


def decode_assignment(data: bytes, newest: int) -> DecodedAssignment | None:
    """The fields of Assignment bytes, as kafka-python reads them; None: not taken on."""
    if type(data) is not bytes:
        data = bytes(data)
    try:
        _version(data, newest)
        r = _Reader(data, 2)
        partitions = r.topic_partitions()
        user_data = r.nullable_bytes()
    except (_Unsupported, struct.error, UnicodeDecodeError):
        return None
    return partitions, user_data
