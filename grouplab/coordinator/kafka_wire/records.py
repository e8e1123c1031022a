"""Kafka's record batches (magic v2) to and from grouplab's records, over kafka-python's
`kafka.record` (CRC32C, gzip/snappy/lz4/zstd when their libraries are installed).

grouplab's partition logs keep their own batch frames (coordinator/partition_log.py); the Kafka-wire
listener decodes a producer's batch into a `RecordBatch` before the Broker sees it, and builds one
batch v2 per partition from the records a Fetch returns. Nothing here touches I/O or state.
"""

from __future__ import annotations

import struct

from kafka.errors import UnsupportedCodecError
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import FetchedRecord, Record, RecordBatch, RecordHeader

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


def encode_records(records: list[FetchedRecord]) -> bytes:
    """The records one Fetch partition returns as a single uncompressed batch v2 (offset deltas
    may skip: markers and aborted records are not returned). b"" for none."""
    if not records:
        return b""
    base = records[0].offset
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    for r in records:
        builder.append(r.offset - base, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=[(h.key, h.value) for h in r.headers])
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base)  # the base offset is outside the CRC
    return bytes(buf)
