"""OffsetCommit v2-v9 read straight from its frame into grouplab's request, for the common shapes.

Why: a consumer committing asynchronously sends OffsetCommits back to back, and for each the
listener built kafka-python's request objects (header and body, through its generic schema
decoder) only to translate them into grouplab's dataclasses: a fifth of the server's time per
commit under a commit flood (issue 26, async commits per second). Here the header and body are
read with `struct` and the few fields grouplab keeps go straight into `OffsetCommitRequest`.

`decode_offset_commit(frame)` returns None for anything it does not take on: another API, a
version outside 2-9, a null where Kafka's schema has a plain string or an array, a tagged field
(header or body), bytes left over or missing, a string that is not UTF-8. The listener then goes
the general way (codec.decode_request, translate.to_grouplab), which answers as it always did.
tests/test_kafka_commit_decoder.py holds the two to each other on random requests and bent bytes.

The layout (Kafka's OffsetCommitRequest.json): group_id, generation_id_or_member_epoch, member_id,
group_instance_id (v7+), retention_time_ms (v2-4, dropped), topics [name, partitions
[partition_index, committed_offset, committed_leader_epoch (v6+), committed_metadata (nullable)]].
v8+ is flexible: compact strings and arrays (unsigned varint length + 1), a tagged-field section
after each struct; header v2 (client_id stays a plain nullable string, then tagged fields).
"""

from __future__ import annotations

import struct

from grouplab.coordinator.kafka_wire.apis import APIS, KafkaApi
from grouplab.coordinator.kafka_wire.codec import KafkaRequest, _uvarint
from grouplab.protocol.messages import OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic

OFFSET_COMMIT_KEY = 8
MIN_VERSION, MAX_VERSION = 2, 9
FIRST_FLEXIBLE = 8

_API: KafkaApi = APIS[OFFSET_COMMIT_KEY]
_PREFIX = struct.Struct(">hhi")  # api key, version, correlation id
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_PARTITION_V6 = struct.Struct(">iqi")  # partition_index, committed_offset, committed_leader_epoch
_PARTITION_V2 = struct.Struct(">iq")  # before v6: no leader epoch


class _Unsupported(Exception):
    """A shape left to the general decoder."""


class _Reader:
    """A cursor over one frame; every read past its end, of a null where the fast path takes none,
    or of a tagged field raises (struct.error, IndexError or _Unsupported)."""

    __slots__ = ("data", "pos", "flexible")

    def __init__(self, data: bytes, pos: int, flexible: bool) -> None:
        self.data = data
        self.pos = pos
        self.flexible = flexible

    def uvarint(self) -> int:
        data, pos = self.data, self.pos
        value = data[pos]
        if value < 0x80:  # one byte: every length and count of a commit
            self.pos = pos + 1
            return value
        try:  # longer: the general reader's varint
            value, self.pos = _uvarint(data, pos)
        except ValueError:
            raise _Unsupported from None
        return value

    def int32(self) -> int:
        (value,) = _INT32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def count(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise _Unsupported  # a null array
        return n

    def nullable_string(self) -> str | None:
        data = self.data
        if self.flexible:
            n = self.uvarint() - 1
            start = self.pos
        else:
            (n,) = _INT16.unpack_from(data, self.pos)
            start = self.pos + 2
            self.pos = start
        if n < 0:
            if n != -1:
                raise _Unsupported  # a length no writer sends
            return None
        stop = start + n
        if stop > len(data):
            raise _Unsupported
        self.pos = stop
        return data[start:stop].decode("utf-8")

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise _Unsupported  # a null where Kafka's schema has a plain string
        return value

    def no_tags(self) -> None:
        if self.flexible:
            if self.data[self.pos]:
                raise _Unsupported  # a tagged field: the general decoder knows what to do with it
            self.pos += 1


def decode_offset_commit(frame: bytes) -> tuple[KafkaRequest, OffsetCommitRequest] | None:
    """The Kafka request (its body left None: nothing reads it) and grouplab's OffsetCommit from
    a whole request frame; None when the frame is not one this reader takes on."""
    if len(frame) < _PREFIX.size + 2:
        return None
    key, version, correlation_id = _PREFIX.unpack_from(frame)
    if key != OFFSET_COMMIT_KEY or not MIN_VERSION <= version <= MAX_VERSION:
        return None
    try:
        if version >= FIRST_FLEXIBLE:
            try:
                quick = _flexible(frame, version, correlation_id)
            except _Unsupported:
                quick = None  # a long string: the reader below takes it
            if quick is not None:
                return quick
        r = _Reader(frame, _PREFIX.size, False)
        client_id = r.nullable_string() or ""  # header: always a plain nullable string
        r.flexible = version >= FIRST_FLEXIBLE
        r.no_tags()
        body = _body(r, version)
        if r.pos != len(frame):
            return None  # bytes left over
    except (_Unsupported, struct.error, IndexError, UnicodeDecodeError):
        return None
    return KafkaRequest(_API, version, correlation_id, client_id, None), body


def _body(r: _Reader, version: int) -> OffsetCommitRequest:
    group_id = r.string()
    generation_id = r.int32()
    member_id = r.string()
    group_instance_id = r.nullable_string() if version >= 7 else None
    if version <= 4:
        r.pos += _INT64.size  # retention_time_ms: Kafka ignores it since 2.1, and so does grouplab
    partition = _PARTITION_V6 if version >= 6 else _PARTITION_V2
    data = r.data
    topics = []
    for _ in range(r.count()):
        name = r.string()
        partitions = []
        for _ in range(r.count()):
            fields = partition.unpack_from(data, r.pos)
            r.pos += partition.size
            epoch = fields[2] if version >= 6 else -1
            partitions.append(OffsetCommitRequestPartition(fields[0], fields[1], epoch, r.nullable_string()))
            r.no_tags()
        topics.append(OffsetCommitRequestTopic(name, partitions))
        r.no_tags()
    r.no_tags()
    return OffsetCommitRequest(group_id=group_id, topics=topics, generation_id=generation_id, member_id=member_id,
                               group_instance_id=group_instance_id)


def _compact_string(data: bytes, pos: int) -> tuple[str | None, int]:
    """A compact nullable string whose length fits one varint byte (any other: _Unsupported)."""
    n = data[pos] - 1
    if n < 0 or n >= 0x7F:
        if n == -1:
            return None, pos + 1
        raise _Unsupported  # a length of two or more varint bytes: the general reader
    start = pos + 1
    stop = start + n
    if stop > len(data):
        raise _Unsupported
    return data[start:stop].decode("utf-8"), stop


def _flexible(data: bytes, version: int, correlation_id: int) -> tuple[KafkaRequest, OffsetCommitRequest] | None:
    """v8-v9 as a client writes them (every length and count in one varint byte, no tagged
    field), in one function: the reader's method calls were most of its time. None: anything
    else, for the general reader."""
    (n,) = _INT16.unpack_from(data, _PREFIX.size)
    pos = _PREFIX.size + 2
    if n >= 0:
        if pos + n > len(data):
            return None
        client_id = data[pos:pos + n].decode("utf-8")
        pos += n
    elif n == -1:
        client_id = ""
    else:
        return None
    if data[pos]:
        return None  # header tagged fields
    group_id, pos = _compact_string(data, pos + 1)
    (generation_id,) = _INT32.unpack_from(data, pos)
    member_id, pos = _compact_string(data, pos + 4)
    group_instance_id = None
    if version >= 7:
        group_instance_id, pos = _compact_string(data, pos)
    if group_id is None or member_id is None:
        return None
    topic_count = data[pos] - 1
    pos += 1
    if not 0 <= topic_count < 0x7F:
        return None
    unpack_partition = _PARTITION_V6.unpack_from
    topics = []
    for _ in range(topic_count):
        name, pos = _compact_string(data, pos)
        count = data[pos] - 1
        pos += 1
        if name is None or not 0 <= count < 0x7F:
            return None
        partitions = []
        for _ in range(count):
            index, offset, epoch = unpack_partition(data, pos)
            metadata, pos = _compact_string(data, pos + 16)
            if data[pos]:
                return None  # tagged fields
            pos += 1
            partitions.append(OffsetCommitRequestPartition(index, offset, epoch, metadata))
        if data[pos]:
            return None
        pos += 1
        topics.append(OffsetCommitRequestTopic(name, partitions))
    if data[pos] or pos + 1 != len(data):
        return None  # tagged fields, or bytes left over
    request = KafkaRequest(_API, version, correlation_id, client_id, None)
    return request, OffsetCommitRequest(group_id=group_id, topics=topics, generation_id=int(generation_id),
                                        member_id=member_id, group_instance_id=group_instance_id)
