"""Partition logs: one append-only log of record batches per topic-partition, the storage engine
behind Produce, Fetch and ListOffsets (docs/protocol.md §10 "Partition logs").

The group and transaction protocol logic stays pure; this is the one storage component the broker
calls synchronously, like a database. It takes no clock: every timestamp comes from a `now_ms`
argument. Two stores share one implementation of the log's rules and differ only in where the
bytes go:

- `MemoryLogStore`: batches kept in memory (the simulator's; deterministic, no files).
- `FileLogStore(data_dir, config)`: segment files under `data_dir/<topic>-<partition>/`, recovered
  on start-up from their batch headers (CRC-checked, torn tail truncated).

Interface (other modules code against these names):

    store.log(topic, partition) -> PartitionLog        (created on first use)
    store.allocate_producer_id() -> int                 (never reused, also across restarts)
    store.is_allocated(producer_id) -> bool              (could it have been handed out?)
    store.delete_topic(topic) -> int                     (DeleteTopics: its partition logs go)
    store.take_changes() -> LogChanges                   (what appends, markers and deletions changed since)
    log.log_start_offset / log.log_end_offset / log.last_stable_offset
    log.append(batch, now_ms) -> AppendResult(error_code, base_offset, duplicate, ...)
    log.append_marker(producer_id, producer_epoch, commit, now_ms, authoritative=False) -> offset of the marker
    log.read(offset, max_bytes, isolation_level) -> [FetchedRecord]
    log.read_records(offset, max_bytes, isolation_level) -> RecordRead(records, next_offset, size)
    log.read_batches(offset, max_bytes, isolation_level) -> BatchRead(batches, next_offset, size)
    log.offset_for(timestamp) -> TimestampOffset(offset, timestamp)

Each batch is stored as one frame: a fixed 44-byte header (`HEADER`) and the msgpack payload of its
records. The producer state (idempotence) and the transaction state (open transactions, aborted
ranges) are rebuilt from the headers alone, in append and in recovery by the same code (`_apply`).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import mmap
import os
import re
import shutil
import struct
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import msgpack

from grouplab.coordinator.group_log import _fsync_dir, _write_all, lock_directory, make_dirs
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchedBatch,
    FetchedRecord,
    RecordBatch,
    RecordHeader,
)

# ----------------------------------------------------------------------------- the batch frame

# length (bytes after this field), CRC-32 of everything after the CRC field, base_offset,
# record_count, producer_id, producer_epoch, base_sequence, magic, flags, max_timestamp.
HEADER = struct.Struct(">IIqiqhiBBq")
HEADER_SIZE = HEADER.size  # 44
_AFTER_LENGTH = struct.Struct(">IqiqhiBBq")  # the header from the CRC on: what recovery unpacks
_AFTER_CRC = struct.Struct(">qiqhiBBq")
_LENGTH_CRC = struct.Struct(">II")
MAGIC = 0
FLAG_TRANSACTIONAL = 0x01
FLAG_CONTROL = 0x02
FLAG_COMMIT = 0x04  # on a control batch: commit (set) or abort (clear)
_KNOWN_FLAGS = FLAG_TRANSACTIONAL | FLAG_CONTROL | FLAG_COMMIT
CONTROL_PAYLOAD = msgpack.packb([])  # a marker's payload: no records, one offset
# What a Fetch returns for a marker, as Kafka stores it: a control record whose key is Kafka's
# ControlRecordType (version int16 0, type int16: 0 abort, 1 commit) and whose value is its
# EndTxnMarker (version int16 0, coordinator epoch int32). grouplab's one transaction coordinator
# has epoch 0 (Kafka's is the leader epoch of its __transaction_state partition).
CONTROL_KEY = struct.Struct(">hh")
END_TXN_MARKER = struct.Struct(">hi")
COORDINATOR_EPOCH = 0

INT16_MAX = 2**15 - 1
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
PRODUCER_BATCHES_KEPT = 5  # Kafka keeps the metadata of a producer's last 5 batches per partition
RECORD_OVERHEAD_BYTES = 16  # a record's size for fetch limits: 16 + key + value + header bytes
BATCH_OVERHEAD_BYTES = 61  # a batch's, for batch reads: Kafka's batch v2 header, plus its records'
PRODUCER_ID_BLOCK_SIZE = 1000  # ids handed out per durable allocation, as Kafka's ProducerIdManager
READ_COMMITTED = 1

_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
PRODUCER_ID_BLOCK_FILE = "producer-id-block"
DELETED_SUFFIX = "-delete"  # a deleted topic's partition directory, renamed until it is removed (as Kafka's)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


class BatchInfo(NamedTuple):
    """A batch header, as kept in memory and as rebuilt by recovery."""

    base_offset: int
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    flags: int
    max_timestamp: int
    size: int  # the whole frame, header included

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1


def encode_batch(base_offset: int, record_count: int, producer_id: int, producer_epoch: int,
                 base_sequence: int, flags: int, max_timestamp: int, payload: bytes) -> bytes:
    """One frame: the 44-byte header, then the payload; the CRC covers everything after itself."""
    rest = _AFTER_CRC.pack(base_offset, record_count, producer_id, producer_epoch, base_sequence, MAGIC, flags,
                           max_timestamp) + payload
    return _LENGTH_CRC.pack(len(rest) + 4, zlib.crc32(rest)) + rest


def decode_payload(payload: bytes | memoryview) -> list[tuple]:
    """The records of a payload: (timestamp, key, value, headers) each, headers as (key, value) pairs."""
    return msgpack.unpackb(payload, use_list=False)


class LogError(Exception):
    """A log operation refused; `code` is the Kafka error to answer with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class OffsetOutOfRange(LogError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)


@dataclass(slots=True)
class AppendResult:
    error_code: int
    base_offset: int = -1
    duplicate: bool = False  # a retry of a batch already in the log: nothing was appended
    log_append_time_ms: int = -1  # now_ms when the broker stamped the records' timestamps, else -1
    error_message: str | None = None


class TimestampOffset(NamedTuple):
    offset: int  # -1: no such record
    timestamp: int  # -1 for earliest/latest, like Kafka


@dataclass(slots=True)
class ProducerState:
    """What a partition knows of one producer id: its epoch and its last batches' sequences."""

    epoch: int
    last_seq: int = -1
    # (first sequence, last sequence, base offset) of the last PRODUCER_BATCHES_KEPT batches
    batches: deque = field(default_factory=lambda: deque(maxlen=PRODUCER_BATCHES_KEPT))


class RecordRead(NamedTuple):
    records: list[FetchedRecord]
    next_offset: int  # every offset in [fetch offset, next_offset) was returned or is a marker or skipped
    size: int  # the records' bytes as max_bytes counts them (fetched_size)


class BatchRead(NamedTuple):
    batches: list[FetchedBatch]
    next_offset: int  # the end of the last batch returned (the fetch offset if none)
    size: int  # the batches' bytes as max_bytes counts them (batch_size)


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class LogChanges(NamedTuple):
    """What changed in a store since it was last asked (`LogStore.take_changes`): the partitions
    appended to (records or a transaction marker: their high watermark or last stable offset moved)
    and the topics deleted. A shell that parks Fetches wakes only those watching these."""

    partitions: set[tuple[str, int]]
    topics: set[str]

    def __bool__(self) -> bool:
        return bool(self.partitions or self.topics)


@dataclass
class RecoveryStats:
    """What recovering one partition (or, summed, a store) found."""

    partitions: int = 0
    segments: int = 0
    batches: int = 0
    bytes: int = 0  # valid bytes scanned
    truncated_bytes: int = 0  # bytes cut off: a torn tail, a corrupt batch and everything after it
    ms: float = 0.0
    truncations: list[dict] = field(default_factory=list)  # {topic, partition, segment, position, bytes, reason}

    def add(self, other: "RecoveryStats") -> None:
        self.partitions += other.partitions
        self.segments += other.segments
        self.batches += other.batches
        self.bytes += other.bytes
        self.truncated_bytes += other.truncated_bytes
        self.truncations += other.truncations


# ----------------------------------------------------------------------------- the log


def _record_size(key: bytes | None, value: bytes | None, headers: tuple) -> int:
    size = RECORD_OVERHEAD_BYTES + (len(key) if key else 0) + (len(value) if value else 0)
    for hk, hv in headers:
        size += len(hk) + (len(hv) if hv else 0)
    return size


def fetched_size(r: FetchedRecord) -> int:
    """A fetched record's size as `read` counts it against max_bytes."""
    size = RECORD_OVERHEAD_BYTES + (len(r.key) if r.key else 0) + (len(r.value) if r.value else 0)
    for h in r.headers:
        size += len(h.key) + (len(h.value) if h.value else 0)
    return size


def batch_size(batch: FetchedBatch) -> int:
    """A fetched batch's size as `read_batches` counts it against max_bytes: a batch v2 header
    plus its records' sizes (`fetched_size`)."""
    return BATCH_OVERHEAD_BYTES + sum(fetched_size(r) for r in batch.records)


def control_record(info: BatchInfo) -> FetchedRecord:
    """The one record of a marker's control batch, as Kafka writes it (CONTROL_KEY, END_TXN_MARKER)."""
    kind = 1 if info.flags & FLAG_COMMIT else 0
    return FetchedRecord(info.base_offset, info.max_timestamp, END_TXN_MARKER.pack(0, COORDINATOR_EPOCH),
                         CONTROL_KEY.pack(0, kind), [], info.producer_id)


class PartitionLog:
    """One partition's log and the rules of appending to it. Storage is a `_MemoryStorage` or a
    `_FileStorage`; everything else (offsets, idempotence, transactions, reads) is here, once."""

    def __init__(self, topic: str, partition: int, storage: "_Storage", max_message_bytes: int) -> None:
        self.topic = topic
        self.partition = partition
        self._storage = storage
        self.max_message_bytes = max_message_bytes
        self.log_start_offset = storage.start_offset
        self.log_end_offset = storage.start_offset
        self.producers: dict[int, ProducerState] = {}
        self.open_txns: dict[int, int] = {}  # producer id -> first offset; insertion order = offset order
        self.aborted: list[AbortedTxn] = []  # in marker order
        self._aborted_last: list[int] = []  # their last offsets, for bisect
        self.max_producer_id = -1
        # The store's set of changed partitions (LogStore.take_changes), or None: not told.
        self.changes: set[tuple[str, int]] | None = None
        self.key = (topic, partition)

    # ------------------------------------------------------------------ offsets

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset  # one replica: everything appended is replicated

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the log end offset."""
        for first in self.open_txns.values():
            return first
        return self.log_end_offset

    # ------------------------------------------------------------------ appends

    def append(self, batch: RecordBatch, now_ms: int) -> AppendResult:
        records = batch.records
        n = len(records)
        if n == 0:
            return _refuse(ErrorCode.CORRUPT_MESSAGE, "a record batch must hold at least one record")
        pid = batch.producer_id
        flags = 0
        if pid >= 0:
            epoch, seq = batch.producer_epoch, batch.base_sequence
            if pid > INT64_MAX:
                return _refuse(ErrorCode.CORRUPT_MESSAGE, f"producer_id must fit in 64 bits (-1 or 0..{INT64_MAX}), "
                                                          f"got {pid}")
            if not 0 <= epoch <= INT16_MAX or not 0 <= seq <= INT32_MAX:
                return _refuse(ErrorCode.CORRUPT_MESSAGE, f"an idempotent batch needs producer_epoch 0..{INT16_MAX} and "
                                                          f"base_sequence 0..{INT32_MAX}, got {epoch} and {seq}")
            if batch.is_transactional:
                flags = FLAG_TRANSACTIONAL
        elif pid != -1:
            return _refuse(ErrorCode.CORRUPT_MESSAGE, f"producer_id must be -1 (none) or >= 0, got {pid}")
        elif batch.is_transactional:
            return _refuse(ErrorCode.CORRUPT_MESSAGE, "a transactional batch needs a producer id")
        else:
            epoch = seq = -1
        rows: list[tuple[int, Any, Any, Any]] = []
        stamped = False
        max_ts = -1
        append_row = rows.append
        for r in records:
            ts = r.timestamp
            if ts < 0:
                if ts != -1:
                    return _refuse(ErrorCode.CORRUPT_MESSAGE, f"a record timestamp must be -1 or >= 0, got {ts}")
                ts = now_ms
                stamped = True
            if ts > max_ts:
                max_ts = ts
            hs = r.headers
            append_row((ts, r.key, r.value, [(h.key, h.value) for h in hs] if hs else ()))
        if max_ts > INT64_MAX:
            return _refuse(ErrorCode.CORRUPT_MESSAGE, f"a record timestamp must fit in 64 bits, got {max_ts}")
        base = self.log_end_offset
        frame = encode_batch(base, n, pid, epoch, seq, flags, max_ts, msgpack.packb(rows))
        if len(frame) > self.max_message_bytes:
            return _refuse(ErrorCode.MESSAGE_TOO_LARGE, f"the batch is {len(frame)} bytes stored, over "
                                                        f"message.max.bytes = {self.max_message_bytes}")
        if pid >= 0:  # the batch is valid; now the producer's sequence rules (Kafka's order too)
            refused = self._check_sequence(pid, epoch, seq, n)
            if refused is not None:
                return refused
        info = BatchInfo(base, n, pid, epoch, seq, flags, max_ts, len(frame))
        self._storage.write(info, frame, now_ms)  # raises OSError with nothing changed
        self._apply(info)
        self._note_change()
        return AppendResult(0, base, False, now_ms if stamped else -1)

    def _check_sequence(self, pid: int, epoch: int, seq: int, n: int) -> AppendResult | None:
        """Kafka's idempotence rules for one batch; None when it may be appended."""
        st = self.producers.get(pid)
        if st is None or epoch > st.epoch:
            if seq != 0:
                what = "a producer new to this partition" if st is None else f"the new epoch {epoch} (was {st.epoch})"
                return _refuse(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                               f"producer {pid}: {what} must start at sequence 0, got {seq}")
            return None
        if epoch < st.epoch:
            return _refuse(ErrorCode.INVALID_PRODUCER_EPOCH,
                           f"producer {pid}: epoch {epoch} is older than the current epoch {st.epoch}")
        last = (seq + n - 1) & INT32_MAX
        for first_seq, last_seq, base_offset in st.batches:
            if first_seq == seq and last_seq == last:
                return AppendResult(0, base_offset, True)
        if seq != (st.last_seq + 1) & INT32_MAX:
            if st.last_seq >= 0 and seq <= st.last_seq:
                why = (f"is not one of the last {PRODUCER_BATCHES_KEPT} batches (retries of older batches cannot be "
                       f"recognised)")
            else:
                why = "leaves a gap"
            return _refuse(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                           f"producer {pid} epoch {epoch}: expected sequence {(st.last_seq + 1) & INT32_MAX}, got "
                           f"{seq}..{last}, which {why}")
        return None

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, now_ms: int,
                      authoritative: bool = False) -> int:
        """Write a control batch ending `producer_id`'s transaction on this partition (commit or
        abort). It takes one offset, is never among `read_records`' records and is a control batch
        to `read_batches`. Returns its offset. A marker with an older epoch than the producer's
        raises LogError(INVALID_PRODUCER_EPOCH); a newer epoch becomes the producer's (its next
        batch must start at sequence 0).

        `authoritative`: the transaction coordinator's own marker (Kafka's WriteTxnMarkers, which
        carry the coordinator's epoch and win over the partition's view of the producer). It is
        written whatever epoch the partition last saw for this producer, and its epoch becomes the
        producer's: the coordinator owns a transactional producer id's epoch, so a partition that
        saw another epoch (a log written before Produce refused forged epochs) cannot keep a
        transaction open for ever."""
        if not 0 <= producer_id <= INT64_MAX or not 0 <= producer_epoch <= INT16_MAX:
            raise LogError(ErrorCode.INVALID_REQUEST, f"a marker needs producer_id >= 0 and producer_epoch "
                                                      f"0..{INT16_MAX}, got {producer_id} and {producer_epoch}")
        st = self.producers.get(producer_id)
        if st is not None and producer_epoch < st.epoch and not authoritative:
            raise LogError(ErrorCode.INVALID_PRODUCER_EPOCH, f"producer {producer_id}: marker epoch {producer_epoch} "
                                                             f"is older than the current epoch {st.epoch}")
        flags = FLAG_TRANSACTIONAL | FLAG_CONTROL | (FLAG_COMMIT if commit else 0)
        base = self.log_end_offset
        frame = encode_batch(base, 1, producer_id, producer_epoch, -1, flags, now_ms, CONTROL_PAYLOAD)
        info = BatchInfo(base, 1, producer_id, producer_epoch, -1, flags, now_ms, len(frame))
        self._storage.write(info, frame, now_ms)
        self._apply(info)
        self._note_change()
        return base

    def _note_change(self) -> None:
        if self.changes is not None:
            self.changes.add(self.key)

    def _apply(self, info: BatchInfo) -> None:
        """The state a batch header implies; run after every append and for every batch recovered,
        so a recovered log has exactly the state of the log that wrote it."""
        base, count, pid, epoch, seq, flags, _, _ = info
        if pid >= 0:
            if pid > self.max_producer_id:
                self.max_producer_id = pid
            st = self.producers.get(pid)
            if st is None:
                st = self.producers[pid] = ProducerState(epoch)
            elif epoch != st.epoch:
                st.epoch = epoch
                st.last_seq = -1
                st.batches.clear()
            if flags & FLAG_CONTROL:
                first = self.open_txns.pop(pid, None)
                if first is not None and not flags & FLAG_COMMIT:
                    self.aborted.append(AbortedTxn(pid, first, base))
                    self._aborted_last.append(base)
            else:
                last = (seq + count - 1) & INT32_MAX
                st.last_seq = last
                st.batches.append((seq, last, base))
                if flags & FLAG_TRANSACTIONAL and pid not in self.open_txns:
                    self.open_txns[pid] = base
        self.log_end_offset = base + count

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, max_bytes: int, isolation_level: int = 0, min_one: bool = True) -> list[FetchedRecord]:
        """The records of `read_records` (grouplab's own Fetch, the simulator's ledger)."""
        return self.read_records(offset, max_bytes, isolation_level, min_one).records

    def read_records(self, offset: int, max_bytes: int, isolation_level: int = 0, min_one: bool = True) -> RecordRead:
        """Records from `offset` on, up to `max_bytes` (a record counts 16 bytes plus its key, value
        and header bytes), but at least one if there is one and `min_one`. Transaction markers are
        never returned. read_committed (isolation_level 1) stops at the last stable offset and
        leaves out the records of aborted transactions. `next_offset` is where reading stopped:
        past the markers and skipped records read after the last record returned, so a consumer
        that moves there reaches the end of the log. Raises OffsetOutOfRange outside
        [log_start_offset, log_end_offset]."""
        upper, aborted = self._bounds(offset, isolation_level)
        out: list[FetchedRecord] = []
        if offset >= upper:
            return RecordRead(out, offset, 0)
        used = 0
        next_offset = offset
        for info, load in self._storage.scan(offset):
            base = info.base_offset
            if base >= upper:
                break
            end = base + info.record_count
            flags = info.flags
            pid = info.producer_id
            if flags & FLAG_CONTROL or (
                    aborted and flags & FLAG_TRANSACTIONAL and pid in aborted and _in_ranges(aborted[pid], base)):
                next_offset = end
                continue
            skip = offset - base
            for i, (ts, key, value, headers) in enumerate(decode_payload(load())):
                if i < skip:
                    continue
                off = base + i
                size = _record_size(key, value, headers)
                if used + size > max_bytes and (out or not min_one):
                    return RecordRead(out, off, used)
                used += size
                out.append(FetchedRecord(off, ts, value, key,
                                         [RecordHeader(k, v) for k, v in headers] if headers else [], pid))
            next_offset = end
        return RecordRead(out, next_offset, used)

    def read_batches(self, offset: int, max_bytes: int, isolation_level: int = 0, min_one: bool = True) -> BatchRead:
        """The stored batches from the one holding `offset` on, whole, as Kafka's Fetch returns
        them: markers as control batches, and under read_committed every batch below the last
        stable offset, aborted ones included (the reader skips them by the aborted transactions
        of `aborted_transactions(offset, next_offset)`). They fill `max_bytes` as `batch_size`
        counts them; the first is returned even over it with `min_one`. Raises OffsetOutOfRange
        as `read_records`."""
        upper, _ = self._bounds(offset, isolation_level, with_aborted=False)
        out: list[FetchedBatch] = []
        used = 0
        next_offset = offset
        if offset >= upper:
            return BatchRead(out, next_offset, used)
        for info, load in self._storage.scan(offset):
            base = info.base_offset
            if base >= upper:
                break
            pid = info.producer_id
            if info.flags & FLAG_CONTROL:
                records = [control_record(info)]
            else:
                records = [FetchedRecord(base + i, ts, value, key,
                                         [RecordHeader(k, v) for k, v in headers] if headers else [], pid)
                           for i, (ts, key, value, headers) in enumerate(decode_payload(load()))]
            batch = FetchedBatch(base, records, pid, info.producer_epoch, info.base_sequence,
                                 bool(info.flags & FLAG_TRANSACTIONAL), bool(info.flags & FLAG_CONTROL))
            size = batch_size(batch)
            if used + size > max_bytes and (out or not min_one):
                break
            used += size
            out.append(batch)
            next_offset = base + info.record_count
        return BatchRead(out, next_offset, used)

    def _bounds(self, offset: int, isolation_level: int,
                with_aborted: bool = True) -> tuple[int, dict[int, list[tuple[int, int]]] | None]:
        """The read's upper bound (the last stable offset under read_committed, else the log end
        offset) and, under read_committed, the aborted transactions in between. Raises
        OffsetOutOfRange outside [log_start_offset, log_end_offset]."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}] "
                                   f"of {self.topic}-{self.partition}")
        committed = isolation_level == READ_COMMITTED
        upper = self.last_stable_offset if committed else self.log_end_offset
        aborted = self._aborted_between(offset, upper) if with_aborted and committed and self.aborted else None
        return upper, aborted

    def _aborted_between(self, lo: int, hi: int) -> dict[int, list[tuple[int, int]]]:
        """Aborted transactions overlapping [lo, hi), by producer id."""
        found: dict[int, list[tuple[int, int]]] = {}
        for a in self.aborted[bisect.bisect_left(self._aborted_last, lo):]:
            if a.first_offset < hi:
                found.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
        return found

    def aborted_transactions(self, lo: int = 0, hi: int | None = None) -> list[AbortedTxn]:
        """The aborted transactions overlapping [lo, hi) (Kafka's FetchResponse aborted_transactions)."""
        hi = self.log_end_offset if hi is None else hi
        return [a for a in self.aborted[bisect.bisect_left(self._aborted_last, lo):] if a.first_offset < hi]

    def offset_for(self, timestamp: int) -> TimestampOffset:
        """ListOffsets: -2 the log start offset, -1 the log end offset (timestamp -1 for both, as
        Kafka), -3 the record with the largest timestamp (KIP-734: the first one that has it, and
        that timestamp), otherwise the first record whose timestamp is >= `timestamp` (Kafka's
        search: the first batch whose largest timestamp reaches it, then its first such record).
        Offset and timestamp -1 when there is no such record. Markers are not records."""
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampOffset(self.log_start_offset, -1)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampOffset(self.log_end_offset, -1)
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp()
        if timestamp < 0:
            raise LogError(ErrorCode.INVALID_REQUEST, f"timestamp must be -3 (max timestamp), -2 (earliest), "
                                                      f"-1 (latest) or >= 0, got {timestamp}")
        for info, load in self._storage.scan(self.log_start_offset):
            if info.flags & FLAG_CONTROL or info.max_timestamp < timestamp:
                continue
            for i, row in enumerate(decode_payload(load())):
                if row[0] >= timestamp:
                    return TimestampOffset(info.base_offset + i, row[0])
        return TimestampOffset(-1, -1)

    def _max_timestamp(self) -> TimestampOffset:
        """The first record holding the log's largest timestamp: the batch from the headers (their
        max_timestamp; the first batch that has the largest), then its records, read in a second
        scan from that batch (a loader is valid only while its scan is on its batch)."""
        best: BatchInfo | None = None
        for info, _ in self._storage.scan(self.log_start_offset):
            if not info.flags & FLAG_CONTROL and (best is None or info.max_timestamp > best.max_timestamp):
                best = info
        if best is None:
            return TimestampOffset(-1, -1)
        for info, load in self._storage.scan(best.base_offset):
            for i, row in enumerate(decode_payload(load())):
                if row[0] == best.max_timestamp:
                    return TimestampOffset(best.base_offset + i, row[0])
            break
        return TimestampOffset(-1, -1)  # pragma: no cover - a batch's max_timestamp is one of its records'

    def batches(self) -> Iterator[BatchInfo]:
        """Every batch header in order (markers included): for tests and tools."""
        for info, _ in self._storage.scan(self.log_start_offset):
            yield info

    def flush(self) -> None:
        self._storage.flush()

    def close(self) -> None:
        self._storage.close()


def _refuse(code: ErrorCode, message: str) -> AppendResult:
    return AppendResult(int(code), -1, False, -1, message)


def _in_ranges(ranges: list[tuple[int, int]], offset: int) -> bool:
    for first, last in ranges:
        if first <= offset <= last:
            return True
    return False


# ----------------------------------------------------------------------------- storage: memory


class _Storage:
    start_offset = 0

    def write(self, info: BatchInfo, frame: bytes, now_ms: int) -> None:
        raise NotImplementedError

    def scan(self, offset: int) -> Iterator[tuple[BatchInfo, Callable[[], bytes | memoryview]]]:
        """(header, payload loader) of every batch that ends at or after `offset`, in order."""
        raise NotImplementedError

    def flush(self) -> None:
        pass

    def flush_if_due(self, now_ms: int) -> None:
        pass

    def close(self) -> None:
        pass


def _payload_view(frame: bytes) -> memoryview:
    return memoryview(frame)[HEADER_SIZE:]


class _MemoryStorage(_Storage):
    def __init__(self) -> None:
        self._ends: list[int] = []  # last offset + 1 of each batch, for bisect
        self._batches: list[tuple[BatchInfo, bytes]] = []

    def write(self, info: BatchInfo, frame: bytes, now_ms: int) -> None:
        self._batches.append((info, frame))
        self._ends.append(info.base_offset + info.record_count)

    def scan(self, offset: int) -> Iterator[tuple[BatchInfo, Callable[[], bytes | memoryview]]]:
        for i in range(bisect.bisect_right(self._ends, offset), len(self._batches)):
            info, frame = self._batches[i]
            yield info, functools.partial(_payload_view, frame)


# ----------------------------------------------------------------------------- storage: files


class _Segment:
    __slots__ = ("base_offset", "path", "size", "end_offset", "index_offsets", "index_positions",
                 "since_index", "fd")

    def __init__(self, base_offset: int, path: Path) -> None:
        self.base_offset = base_offset
        self.path = path
        self.size = 0
        self.end_offset = base_offset  # last offset + 1
        self.index_offsets: list[int] = []  # the sparse index: batch base offset ...
        self.index_positions: list[int] = []  # ... -> file position
        self.since_index = 0  # bytes written since the last index entry
        self.fd: int | None = None  # read descriptor, opened on first read

    def index(self, base_offset: int, position: int, size: int, interval: int) -> None:
        if not self.index_offsets or self.since_index >= interval:
            self.index_offsets.append(base_offset)
            self.index_positions.append(position)
            self.since_index = 0
        self.since_index += size

    def read_fd(self) -> int:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY)
        return self.fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _FileStorage(_Storage):
    """Segment files `<20-digit base offset>.log` in one partition directory. The active (last)
    segment takes the appends; it rolls at log.segment.bytes. Every append is written to the OS
    before it returns (it survives a crash of this process); fsync per the flush settings."""

    def __init__(self, directory: Path, segment_bytes: int, index_interval_bytes: int, flush_messages: int,
                 flush_ms: int) -> None:
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.index_interval = index_interval_bytes
        self.flush_messages = flush_messages
        self.flush_ms = flush_ms
        self.segments: list[_Segment] = []
        self._bases: list[int] = []
        self._wfd: int | None = None
        self.unflushed_messages = 0
        self.last_flush_ms: int | None = None  # None: not known yet (set by the first append)
        self.flushes = 0

    # ------------------------------------------------------------------ recovery

    def recover(self, apply: Callable[[BatchInfo], None], stats: RecoveryStats, topic: str, partition: int) -> None:
        """Scan every segment's headers in order, checking lengths, CRCs, magic and offsets, and
        feed each valid batch to `apply`. The first invalid batch ends the log: its segment is
        truncated there and later segments are deleted (as Kafka's recovery does)."""
        names = sorted((int(m.group(1)), p) for p in self.dir.iterdir() if (m := _SEGMENT_NAME.match(p.name)))
        expected: int | None = None
        cut: tuple[int, int, str] | None = None  # (segment index, position, reason)
        for i, (base, path) in enumerate(names):
            if expected is not None and base != expected:
                cut = (i - 1, self.segments[-1].size, f"segment {path.name} does not start at offset {expected}")
                break
            seg = _Segment(base, path)
            self.segments.append(seg)
            self._bases.append(base)
            position, reason = self._scan_segment(seg, apply, stats)
            expected = seg.end_offset
            if reason is not None:
                cut = (i, position, reason)
                break
        stats.segments += len(self.segments)
        if cut is not None:
            i, position, reason = cut
            seg = self.segments[i]
            cut_bytes = seg.path.stat().st_size - position
            os.truncate(seg.path, position)
            seg.size = position
            for _, path in names[i + 1:]:
                cut_bytes += path.stat().st_size
                path.unlink()
            del self.segments[i + 1:]
            del self._bases[i + 1:]
            stats.truncated_bytes += cut_bytes
            stats.truncations.append({"topic": topic, "partition": partition, "segment": seg.path.name,
                                      "position": position, "bytes": cut_bytes, "reason": reason})
            _fsync_path(seg.path)
            _fsync_dir(self.dir)

    def _scan_segment(self, seg: _Segment, apply: Callable[[BatchInfo], None],
                      stats: RecoveryStats) -> tuple[int, str | None]:
        """(position of the end of the last valid batch, why scanning stopped early or None)."""
        size = seg.path.stat().st_size
        if size == 0:
            return 0, None
        fd = os.open(seg.path, os.O_RDONLY)
        try:
            mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        with contextlib.suppress(AttributeError, OSError):
            mm.madvise(mmap.MADV_SEQUENTIAL)
        view = memoryview(mm)
        pos, reason = 0, None
        expected = seg.base_offset
        unpack = _AFTER_LENGTH.unpack_from
        crc32 = zlib.crc32
        batches = 0
        try:
            while pos < size:
                if size - pos < HEADER_SIZE:
                    reason = f"torn tail: {size - pos} bytes, less than a batch header"
                    break
                length = int.from_bytes(view[pos:pos + 4], "big")
                end = pos + 4 + length
                if length < HEADER_SIZE - 4:
                    reason = f"batch at position {pos}: length {length} is shorter than a header"
                    break
                if end > size:
                    reason = f"torn tail: the batch at position {pos} needs {length + 4} bytes, {size - pos} are there"
                    break
                crc, base, count, pid, epoch, seq, magic, flags, max_ts = unpack(view, pos + 4)
                if crc32(view[pos + 8:end]) != crc:
                    reason = f"batch at position {pos}: CRC mismatch"
                    break
                if magic != MAGIC or flags & ~_KNOWN_FLAGS or count < 1:
                    reason = f"batch at position {pos}: magic {magic}, flags {flags:#x}, {count} records: not a batch"
                    break
                if base != expected:
                    reason = f"batch at position {pos}: base offset {base}, expected {expected}"
                    break
                info = BatchInfo(base, count, pid, epoch, seq, flags, max_ts, length + 4)
                apply(info)
                seg.index(base, pos, length + 4, self.index_interval)
                expected = base + count
                pos = end
                batches += 1
        finally:
            view.release()
            mm.close()
        seg.size = pos
        seg.end_offset = expected
        stats.batches += batches
        stats.bytes += pos
        return pos, reason

    @property
    def start_offset(self) -> int:  # type: ignore[override]
        return self.segments[0].base_offset if self.segments else 0

    # ------------------------------------------------------------------ appends

    def write(self, info: BatchInfo, frame: bytes, now_ms: int) -> None:
        seg = self.segments[-1] if self.segments else None
        if seg is None or (seg.size > 0 and seg.size + len(frame) > self.segment_bytes):
            seg = self._roll(info.base_offset)
        fd = self._wfd
        if fd is None:
            fd = self._wfd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        since = self.last_flush_ms if self.last_flush_ms is not None else now_ms
        sync = self.unflushed_messages + info.record_count >= self.flush_messages or now_ms - since >= self.flush_ms
        try:
            _write_all(fd, frame)
            if sync:
                os.fsync(fd)
        except OSError:
            # Cut back to the previous end, also when only the sync failed: the caller applies
            # nothing, so a batch left in the file would sit under offsets handed out again.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, seg.size)
            raise
        seg.index(info.base_offset, seg.size, len(frame), self.index_interval)
        seg.size += len(frame)
        seg.end_offset = info.base_offset + info.record_count
        self.unflushed_messages += info.record_count
        self.last_flush_ms = since
        if sync:
            self.flushes += 1
            self.unflushed_messages = 0
            self.last_flush_ms = now_ms

    def _roll(self, base_offset: int) -> _Segment:
        if self._wfd is not None:
            os.fsync(self._wfd)  # Kafka flushes a segment when it rolls
            os.close(self._wfd)
            self._wfd = None
            if self.unflushed_messages:
                self.flushes += 1
            self.unflushed_messages = 0
        if self.segments:
            self.segments[-1].close()  # its cached read descriptor: no longer the active segment
        make_dirs(self.dir)  # its name in logs/ synced, as the segment's name in it below
        seg = _Segment(base_offset, self.dir / segment_name(base_offset))
        self._wfd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _fsync_dir(self.dir)
        self.segments.append(seg)
        self._bases.append(base_offset)
        return seg

    def _flush(self, now_ms: int | None) -> None:
        if self._wfd is not None and self.unflushed_messages:
            os.fsync(self._wfd)
            self.flushes += 1
        self.unflushed_messages = 0
        if now_ms is not None:
            self.last_flush_ms = now_ms

    def flush(self) -> None:
        self._flush(None)

    def flush_if_due(self, now_ms: int) -> None:
        if self.unflushed_messages and self.last_flush_ms is not None and now_ms - self.last_flush_ms >= self.flush_ms:
            self._flush(now_ms)

    # ------------------------------------------------------------------ reads

    def scan(self, offset: int) -> Iterator[tuple[BatchInfo, Callable[[], bytes | memoryview]]]:
        if not self.segments:
            return
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        active = self.segments[-1]
        for seg in self.segments[i:]:
            if seg.end_offset <= offset:
                continue
            j = bisect.bisect_right(seg.index_offsets, offset) - 1
            pos = seg.index_positions[j] if j >= 0 else 0
            # The active segment keeps its read descriptor (consumers read the tail); older ones are
            # opened for the scan only, so thousands of segments do not hold thousands of fds.
            fd = seg.read_fd() if seg is active else os.open(seg.path, os.O_RDONLY)
            try:
                size = seg.size
                while pos < size:
                    head = os.pread(fd, HEADER_SIZE, pos)
                    length, _, base, count, pid, epoch, seq, _, flags, max_ts = HEADER.unpack(head)
                    end = pos + 4 + length
                    if base + count > offset:
                        info = BatchInfo(base, count, pid, epoch, seq, flags, max_ts, length + 4)
                        # the loader must be called before the scan goes on (read and offset_for do)
                        yield info, functools.partial(os.pread, fd, length + 4 - HEADER_SIZE, pos + HEADER_SIZE)
                    pos = end
            finally:
                if seg is not active:
                    os.close(fd)

    def close(self) -> None:
        if self._wfd is not None:
            with contextlib.suppress(OSError):
                if self.unflushed_messages:
                    os.fsync(self._wfd)  # a clean shutdown flushes, as Kafka's does
            os.close(self._wfd)
            self._wfd = None
        self.unflushed_messages = 0
        for seg in self.segments:
            seg.close()


# ----------------------------------------------------------------------------- stores


def _config_value(config: object, attr: str, default: int) -> int:
    return int(getattr(config, attr, default))


def check_log_name(topic: str, partition: int) -> None:
    if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
        raise ValueError(f"illegal topic name {topic!r}")
    if partition < 0:
        raise ValueError(f"partition must be >= 0, got {partition}")


class LogStore:
    """The logs of every partition, created on first use, and the producer id allocator."""

    def __init__(self, config: object = None) -> None:
        self.config = config
        self.max_message_bytes = _config_value(config, "message_max_bytes", 1048588)
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._next_producer_id = 0
        self._changed: set[tuple[str, int]] = set()
        self._deleted: set[str] = set()

    def log(self, topic: str, partition: int) -> PartitionLog:
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            check_log_name(topic, partition)
            log = self._logs[key] = PartitionLog(topic, partition, self._new_storage(topic, partition),
                                                 self.max_message_bytes)
            log.changes = self._changed
        return log

    def take_changes(self) -> LogChanges:
        """The partitions appended to and the topics deleted since the last call (recovery is not a
        change); each call starts a new set. Bounded by the partitions and topic names in use."""
        changes = LogChanges(set(self._changed), set(self._deleted))
        self._changed.clear()
        self._deleted.clear()
        return changes

    def existing(self, topic: str, partition: int) -> PartitionLog | None:
        """The log if it has been created (by an append or by recovery), without creating it."""
        return self._logs.get((topic, partition))

    def view(self, topic: str, partition: int) -> PartitionLog:
        """The log to read, without creating it: the existing one, else an empty log that is not
        kept (what `log` would create), so a read-only look changes nothing."""
        log = self._logs.get((topic, partition))
        return log if log is not None else PartitionLog(topic, partition, _MemoryStorage(), self.max_message_bytes)

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    def delete_topic(self, topic: str) -> int:
        """DeleteTopics: every partition log of `topic` goes (its records, producer and transaction
        state); the next use of the name starts new logs at offset 0. Returns how many there were.
        Raises OSError with nothing deleted when a file store cannot move them out of the way."""
        keys = sorted(key for key in self._logs if key[0] == topic)
        self._discard([self._logs[key] for key in keys])
        for key in keys:
            self._logs.pop(key).changes = None
            self._changed.discard(key)
        self._deleted.add(topic)
        return len(keys)

    def _discard(self, logs: list[PartitionLog]) -> None:
        for log in logs:
            log.close()

    def allocate_producer_id(self) -> int:
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid

    def is_allocated(self, producer_id: int) -> bool:
        """Could `producer_id` have been handed out by this store (now or before a restart)? Ids
        are allocated in increasing order and never reused, so every id below the next one counts."""
        return 0 <= producer_id < self._next_producer_id

    def flush_if_due(self, now_ms: int) -> None:
        for log in self._logs.values():
            log._storage.flush_if_due(now_ms)

    def flush(self) -> None:
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        for log in self._logs.values():
            log.close()

    def _new_storage(self, topic: str, partition: int) -> _Storage:
        raise NotImplementedError


class MemoryLogStore(LogStore):
    """Every batch in memory: what the simulator and a coordinator without a data directory use."""

    def _new_storage(self, topic: str, partition: int) -> _Storage:
        return _MemoryStorage()

    def recovered(self) -> "MemoryLogStore":
        """A new store over the same batches with every log's state rebuilt from their headers, as
        FileLogStore's recovery rebuilds it: what a restarted coordinator finds on its disk (the
        simulator's coordinator restarts). Producer ids continue where they were."""
        new = MemoryLogStore(self.config)
        new._next_producer_id = self._next_producer_id
        for (topic, partition), log in self._logs.items():
            fresh = PartitionLog(topic, partition, log._storage, self.max_message_bytes)
            for info, _ in log._storage.scan(log.log_start_offset):
                fresh._apply(info)
            fresh.changes = new._changed
            new._logs[(topic, partition)] = fresh
        return new


class FileLogStore(LogStore):
    """Segment files under `root/<topic>-<partition>/`; recovers every partition found there at
    construction (`self.recovery` says what it found). One process per directory (a lock file)."""

    def __init__(self, root: str | Path, config: object = None) -> None:
        super().__init__(config)
        self.root = Path(root)
        self.segment_bytes = _config_value(config, "log_segment_bytes", 1 << 30)
        self.index_interval_bytes = _config_value(config, "log_index_interval_bytes", 4096)
        self.flush_messages = _config_value(config, "log_flush_interval_messages", INT64_MAX)
        self.flush_ms = _config_value(config, "log_flush_interval_ms", INT64_MAX)
        make_dirs(self.root)
        self._lock_fd: int | None = None
        self._lock()
        self._block_end = 0
        try:
            self.recovery = self._recover()
        except BaseException:
            self.close()
            raise

    def _new_storage(self, topic: str, partition: int) -> _FileStorage:
        return _FileStorage(self.root / f"{topic}-{partition}", self.segment_bytes, self.index_interval_bytes,
                            self.flush_messages, self.flush_ms)

    def _discard(self, logs: list[PartitionLog]) -> None:
        """Rename each partition directory to `<dir>.<id>-delete` (a name recovery does not read as a
        partition, so a crash part-way leaves no half-deleted log), then remove them; what a
        removal leaves behind goes at the next start. A rename that fails undoes the others."""
        moved: list[tuple[Path, Path]] = []
        try:
            for log in logs:
                log.close()
                directory = self.root / f"{log.topic}-{log.partition}"
                if directory.exists():
                    trash = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETED_SUFFIX}")
                    os.rename(directory, trash)
                    moved.append((directory, trash))
        except OSError:
            for directory, trash in reversed(moved):
                with contextlib.suppress(OSError):
                    os.rename(trash, directory)
            raise
        _fsync_dir(self.root)
        for _, trash in moved:
            shutil.rmtree(trash, ignore_errors=True)

    def _recover(self) -> RecoveryStats:
        started = time.perf_counter()
        total = RecoveryStats()
        found = []
        for path in self.root.iterdir():
            if path.is_dir() and path.name.endswith(DELETED_SUFFIX):  # a deleted topic's, not yet removed
                shutil.rmtree(path, ignore_errors=True)
                continue
            m = _PARTITION_DIR.match(path.name)
            if path.is_dir() and m and _LEGAL_TOPIC.match(m.group(1)):
                found.append((m.group(1), int(m.group(2))))
        for topic, partition in sorted(found):
            storage = self._new_storage(topic, partition)
            log = PartitionLog(topic, partition, storage, self.max_message_bytes)
            stats = RecoveryStats(partitions=1)
            storage.recover(log._apply, stats, topic, partition)
            log.log_start_offset = storage.start_offset
            log.log_end_offset = storage.segments[-1].end_offset if storage.segments else log.log_start_offset
            log.changes = self._changed
            self._logs[(topic, partition)] = log
            total.add(stats)
        max_pid = max((log.max_producer_id for log in self._logs.values()), default=-1)
        self._block_end = self._read_block_end()
        self._next_producer_id = max(self._block_end, max_pid + 1)
        total.ms = (time.perf_counter() - started) * 1000
        return total

    # ------------------------------------------------------------------ producer ids

    def allocate_producer_id(self) -> int:
        """Ids come from blocks of 1000 whose end is made durable before the first id of the block
        is handed out (Kafka's ProducerIdManager): after a restart, allocation resumes after the
        last block, so no id is handed out twice even if its producer never wrote a batch."""
        if self._next_producer_id >= self._block_end:
            self._write_block_end(self._next_producer_id + PRODUCER_ID_BLOCK_SIZE)
        return super().allocate_producer_id()

    def _read_block_end(self) -> int:
        try:
            text = (self.root / PRODUCER_ID_BLOCK_FILE).read_text()
        except FileNotFoundError:
            return 0
        m = re.match(r"^next_block_start=(\d+)\n$", text)
        return int(m.group(1)) if m else 0

    def _write_block_end(self, end: int) -> None:
        path = self.root / PRODUCER_ID_BLOCK_FILE
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, f"next_block_start={end}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(self.root)
        self._block_end = end

    # ------------------------------------------------------------------ lifecycle

    def _lock(self) -> None:
        self._lock_fd = lock_directory(self.root, "another process")

    def close(self) -> None:
        super().close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "FileLogStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
