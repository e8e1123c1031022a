"""Kafka's record batches (magic v2) to and from grouplab's records, over kafka-python's
`kafka.record` (CRC32C, gzip/snappy/lz4/zstd when their libraries are installed).

grouplab's partition logs keep their own batch frames (coordinator/partition_log.py); the Kafka-wire
listener decodes a producer's batch into a `RecordBatch` before the Broker sees it, and encodes the
batches a Fetch returns (`FetchedBatch`, one per stored batch, markers included) as batch v2.
Nothing here touches I/O or state.
"""

from __future__ import annotations

import struct
import zlib
from typing import Callable

import kafka.codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import FetchedBatch, Record, RecordBatch, RecordHeader

MAGIC_OFFSET = 16  # base offset (8), batch length (4), partition leader epoch (4), then the magic byte
BATCH_OVERHEAD = 61  # a batch v2 header: the smallest batch there is
ATTRIBUTES_OFFSET = 21  # after the magic byte (16) and the CRC (4): an int16, codec in the low 3 bits
CODEC_MASK = 0x07
DEFAULT_MESSAGE_MAX_BYTES = 1_048_588  # Kafka's message.max.bytes default (coordinator/config.py)
# The most a record's Kafka encoding takes beyond its key, value and header bytes: its fixed fields
# at their widest varints (length 5, attributes 1, timestamp delta 10, offset delta 5, key and
# value lengths 5 each, header count 5); each header's lengths take no more than grouplab stores.
MAX_RECORD_OVERHEAD = 36
# The fewest bytes grouplab stores a record in (partition_log.py: a msgpack row [ts, key, value,
# headers], each at least one byte, in a one-byte array header).
MIN_STORED_RECORD_BYTES = 5
HEAVY_BATCH_BYTES = 64 * 1024  # an uncompressed batch this big takes tens of ms to build records from


class BadRecords(Exception):
    """A produced `records` field Kafka would refuse; `code` is the partition's error."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def decode_batch(data: bytes | None, max_message_bytes: int = DEFAULT_MESSAGE_MAX_BYTES) -> RecordBatch:
    """The one record batch of a Produce partition (Kafka requires exactly one for v3+), with its
    CRC checked and its records decompressed. Raises BadRecords with Kafka's error for: no or
    several batches, a batch shorter than its length (CORRUPT_MESSAGE), magic other than 2 or a
    control batch from a client (INVALID_RECORD), a bad CRC (CORRUPT_MESSAGE), a codec whose
    library is missing (UNSUPPORTED_COMPRESSION_TYPE), a record count <= 0 (INVALID_RECORD, as
    Kafka's LogValidator), a batch over `max_message_bytes` as sent (MESSAGE_TOO_LARGE, as Kafka).

    The work is bounded before any record is built (`check_size`, `inflate`): grouplab stores
    records uncompressed, so a batch whose record count or inflated size means its stored batch
    must exceed `max_message_bytes` is refused MESSAGE_TOO_LARGE, the answer the partition log
    would give it, after at most that many bytes inflated."""
    batch = _checked_header(data, max_message_bytes)
    assert data is not None  # _checked_header refused None
    codec = batch.compression_type
    if codec != 0:
        inflated = inflate(codec, memoryview(data)[BATCH_OVERHEAD:],
                           inflate_budget(batch.records_count, max_message_bytes))
        header = bytearray(data[:BATCH_OVERHEAD])
        struct.pack_into(">h", header, ATTRIBUTES_OFFSET, batch.attributes & ~CODEC_MASK)
        batch = DefaultRecordBatch(bytes(header) + inflated)  # the same batch, its records as inflated
    try:
        records = [Record(value=_opt_bytes(r.value), key=_opt_bytes(r.key),
                          headers=[RecordHeader(k, _opt_bytes(v)) for k, v in r.headers], timestamp=r.timestamp)
                   for r in batch]
    except Exception as exc:  # noqa: BLE001 - a malformed batch: a varint past the end, bad UTF-8
        raise BadRecords(ErrorCode.CORRUPT_MESSAGE, f"record batch is malformed: {exc!r}") from None
    if len(records) != batch.records_count:
        raise BadRecords(ErrorCode.CORRUPT_MESSAGE, "record batch holds fewer records than its header says")
    return RecordBatch(records=records, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                       base_sequence=batch.base_sequence, is_transactional=batch.is_transactional)


def _checked_header(data: bytes | None, max_message_bytes: int) -> DefaultRecordBatch:
    """Everything decode_batch checks before it inflates or reads a record: the framing, magic,
    size as sent, CRC, control flag, record count and codec."""
    if not data or len(data) < BATCH_OVERHEAD:
        raise BadRecords(ErrorCode.INVALID_RECORD, "a produce request needs exactly one record batch")
    magic = data[MAGIC_OFFSET]
    if magic != 2:
        raise BadRecords(ErrorCode.INVALID_RECORD, f"record batches must be magic v2, got v{magic}")
    (length,) = struct.unpack_from(">i", data, 8)
    if length + 12 != len(data):
        code = ErrorCode.CORRUPT_MESSAGE if length + 12 > len(data) else ErrorCode.INVALID_RECORD
        raise BadRecords(code, f"the record batch says {length + 12} bytes, the partition has {len(data)}: "
                               "exactly one whole batch is required")
    if len(data) > max_message_bytes:
        raise BadRecords(ErrorCode.MESSAGE_TOO_LARGE, f"the record batch is {len(data)} bytes, over "
                                                      f"message.max.bytes = {max_message_bytes}")
    batch = DefaultRecordBatch(bytes(data))
    if not batch.validate_crc():
        raise BadRecords(ErrorCode.CORRUPT_MESSAGE, "record batch CRC32C does not match")
    if batch.is_control_batch:
        raise BadRecords(ErrorCode.INVALID_RECORD, "clients may not write control batches")
    count = batch.records_count
    if count <= 0:
        raise BadRecords(ErrorCode.INVALID_RECORD, f"invalid reported count for record batch: {count}")
    if count * MIN_STORED_RECORD_BYTES > max_message_bytes:
        raise BadRecords(ErrorCode.MESSAGE_TOO_LARGE,
                         f"a batch of {count} records is at least {count * MIN_STORED_RECORD_BYTES} bytes stored, "
                         f"over message.max.bytes = {max_message_bytes}")
    codec = batch.compression_type
    if codec not in _INFLATERS or not _INFLATERS[codec][0]():
        name = _INFLATERS[codec][1] if codec in _INFLATERS else f"codec {codec}"
        raise BadRecords(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                         f"the {name} compression codec is not available on this broker")
    return batch


def inflate_budget(records_count: int, max_message_bytes: int) -> int:
    """The most inflated bytes a batch of `records_count` records may have and still be stored
    within `max_message_bytes`: a record's Kafka encoding is at most MAX_RECORD_OVERHEAD bytes
    more than its key, value and header bytes, which grouplab stores whole."""
    return max_message_bytes + records_count * MAX_RECORD_OVERHEAD


def inflate(codec: int, payload: bytes | memoryview, budget: int) -> bytes:
    """The records section of a compressed batch, inflated; BadRecords MESSAGE_TOO_LARGE as soon
    as more than `budget` bytes come out (never more than budget + 1 are held), CORRUPT_MESSAGE
    for data the codec cannot read."""
    try:
        out = _INFLATERS[codec][2](payload, budget + 1)
    except BadRecords:
        raise
    except Exception as exc:  # noqa: BLE001 - zlib.error, a codec library's own errors
        raise BadRecords(ErrorCode.CORRUPT_MESSAGE, f"record batch does not decompress: {exc!r}") from None
    if len(out) > budget:
        raise BadRecords(ErrorCode.MESSAGE_TOO_LARGE, f"the records inflate past {budget} bytes, more than a batch "
                                                      f"within message.max.bytes can hold")
    return out


def _gunzip(payload: bytes | memoryview, limit: int) -> bytes:
    """gzip (concatenated members too, as Java's GZIPInputStream reads them), at most `limit`
    bytes out: zlib's max_length stops inflating there, whatever the input would make."""
    out = bytearray()
    rest = bytes(payload)
    while rest and len(out) < limit:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += inflater.decompress(rest, limit - len(out))
        if not inflater.eof:
            if inflater.unconsumed_tail or len(out) >= limit:
                break  # the limit stopped it: the caller refuses the batch
            raise ValueError("gzip stream ends early")
        rest = inflater.unused_data
    return bytes(out)


def _whole(decoder: str) -> Callable[[bytes | memoryview, int], bytes]:
    """A codec kafka-python decodes in one call (snappy, lz4, zstd, when their libraries are
    installed): inflated whole, then held to the limit (not bounded while inflating)."""
    return lambda payload, limit: getattr(kafka_codec, decoder)(bytes(payload))


def _installed(check: str) -> Callable[[], bool]:
    return lambda: bool(getattr(kafka_codec, check)())


# codec id (the attributes' low 3 bits) -> (is its library installed?, name, inflate(payload, limit))
_INFLATERS: dict[int, tuple[Callable[[], bool], str, Callable[[bytes | memoryview, int], bytes]]] = {
    0: (lambda: True, "none", lambda payload, limit: bytes(payload)),
    1: (_installed("has_gzip"), "gzip", _gunzip),
    2: (_installed("has_snappy"), "snappy", _whole("snappy_decode")),
    3: (_installed("has_lz4"), "lz4", _whole("lz4_decode")),
    4: (_installed("has_zstd"), "zstd", _whole("zstd_decode")),
}


def is_heavy(data: bytes | None) -> bool:
    """Would decoding this batch take long enough to hold the event loop (a compressed batch, whose
    records may inflate up to the budget, or a large one)? The listener decodes those off the loop."""
    if not data or len(data) < BATCH_OVERHEAD:
        return False
    return len(data) >= HEAVY_BATCH_BYTES or bool(data[ATTRIBUTES_OFFSET + 1] & CODEC_MASK)


def _opt_bytes(value: object) -> bytes | None:
    return None if value is None else bytes(value)  # type: ignore[call-overload]


class _ControlBatchBuilder(DefaultRecordBatchBuilder):
    """kafka.record's batch builder with the control flag set. Its builder writes producer id,
    epoch, base sequence and the transactional flag as given, but never the control flag
    (only a broker writes control batches, so kafka-python has no need to): this one line of glue
    sets it in the attributes that build() writes under the CRC."""

    __slots__ = ()

    def _get_attributes(self, include_compression_type: bool = True) -> int:
        return super()._get_attributes(include_compression_type) | self.CONTROL_MASK


def encode_batches(batches: list[FetchedBatch]) -> bytes:
    """The batches one Fetch partition returns, each as the batch v2 Kafka stores: its base
    offset, producer id, epoch, base sequence, transactional and control flags, and its records
    at their offset deltas, uncompressed. b"" for none."""
    return b"".join(_encode_batch(b) for b in batches)


def _encode_batch(batch: FetchedBatch) -> bytes:
    builder_class = _ControlBatchBuilder if batch.is_control else DefaultRecordBatchBuilder
    builder = builder_class(magic=2, compression_type=0, is_transactional=batch.is_transactional,
                            producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                            base_sequence=batch.base_sequence, batch_size=2**31 - 1)
    base = batch.base_offset
    for r in batch.records:
        builder.append(r.offset - base, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=[(h.key, h.value) for h in r.headers])
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base)  # the base offset is outside the CRC
    return bytes(buf)
