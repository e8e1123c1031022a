"""Kafka's record batches (magic v2) to and from grouplab's records, over kafka-python's
`kafka.record` (CRC32C, gzip/snappy/lz4/zstd when their libraries are installed).

grouplab's partition logs keep their own batch frames (coordinator/partition_log.py); the Kafka-wire
listener decodes a producer's batch into a `RecordBatch` before the Broker sees it, and encodes the
batches a Fetch returns (`FetchedBatch`, one per stored batch, markers included) as batch v2.
Nothing here touches I/O or state.
"""

from __future__ import annotations

import struct

from kafka.errors import UnsupportedCodecError
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import FetchedBatch, Record, RecordBatch, RecordHeader

MAGIC_OFFSET = 16  # base offset (8), batch length (4), partition leader epoch (4), then the magic byte
BATCH_OVERHEAD = 61  # a batch v2 header: the smallest batch there is


class BadRecords(Exception):
    """A produced `records` field Kafka would refuse; `code` is the partition's error."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def decode_batch(data: bytes | None) -> RecordBatch:
    """The one record batch of a Produce partition (Kafka requires exactly one for v3+), with its
    CRC checked and its records decompressed. Raises BadRecords with Kafka's error for: no or
    several batches, a batch shorter than its length (CORRUPT_MESSAGE), magic other than 2 or a
    control batch from a client (INVALID_RECORD), a bad CRC (CORRUPT_MESSAGE), a codec whose
    library is missing (UNSUPPORTED_COMPRESSION_TYPE)."""
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
    batch = DefaultRecordBatch(bytes(data))
    if not batch.validate_crc():
        raise BadRecords(ErrorCode.CORRUPT_MESSAGE, "record batch CRC32C does not match")
    if batch.is_control_batch:
        raise BadRecords(ErrorCode.INVALID_RECORD, "clients may not write control batches")
    try:
        records = [Record(value=_opt_bytes(r.value), key=_opt_bytes(r.key),
                          headers=[RecordHeader(k, _opt_bytes(v)) for k, v in r.headers], timestamp=r.timestamp)
                   for r in batch]
    except (UnsupportedCodecError, AssertionError) as exc:  # the codec's library is not installed
        raise BadRecords(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc) or "compression codec not available") from None
    except Exception as exc:  # noqa: BLE001 - a malformed batch: a varint past the end, bad UTF-8, bad gzip
        raise BadRecords(ErrorCode.CORRUPT_MESSAGE, f"record batch is malformed: {exc!r}") from None
    if len(records) != batch.records_count:
        raise BadRecords(ErrorCode.CORRUPT_MESSAGE, "record batch holds fewer records than its header says")
    return RecordBatch(records=records, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                       base_sequence=batch.base_sequence, is_transactional=batch.is_transactional)


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
