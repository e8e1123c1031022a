"""Partition logs (coordinator/partition_log.py): appends, reads and offsets, segments and their
recovery (torn tails, CRC mismatches, the index), the idempotent producer's sequence rules, and
transaction markers with read_committed. Every rule runs on both stores where both apply."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grouplab.coordinator import partition_log as pl
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group_log import LogLockedError
from grouplab.coordinator.partition_log import (
    HEADER_SIZE,
    FileLogStore,
    LogError,
    MemoryLogStore,
    OffsetOutOfRange,
    PartitionLog,
    TimestampOffset,
)
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import Record, RecordBatch, RecordHeader

T0 = 1_700_000_000_000
UNCOMMITTED, COMMITTED = 0, 1


def cfg(**overrides: object) -> BrokerConfig:
    return BrokerConfig().with_overrides(f"{k}={v}" for k, v in overrides.items())


def batch(*values: bytes | str, pid: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False,
          ts: int = -1) -> RecordBatch:
    return RecordBatch([Record(value=v.encode() if isinstance(v, str) else v, timestamp=ts) for v in values],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)


def values(log: PartitionLog, offset: int = 0, isolation: int = UNCOMMITTED) -> list[bytes | None]:
    return [r.value for r in log.read(offset, 1 << 30, isolation)]


class Stores:
    """Opens stores of either kind; file stores live in a temporary directory and can be reopened."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.root = root
        self.open_stores: list = []

    def open(self, config: BrokerConfig | None = None):
        config = config or cfg()
        store = MemoryLogStore(config) if self.kind == "memory" else FileLogStore(self.root, config)
        self.open_stores.append(store)
        return store

    def reopen(self, store, config: BrokerConfig | None = None):
        """What a restarted coordinator finds: recovery from the files, or from the batch headers."""
        if self.kind == "memory":
            return store.recovered()
        store.close()
        return self.open(config)

    def close(self) -> None:
        for s in self.open_stores:
            s.close()


@pytest.fixture(params=["memory", "file"])
def stores(request, tmp_path: Path):
    s = Stores(request.param, tmp_path / "logs")
    yield s
    s.close()


@pytest.fixture
def files(tmp_path: Path):
    s = Stores("file", tmp_path / "logs")
    yield s
    s.close()


# ============================================================================ appends, reads, offsets


def test_appends_get_consecutive_offsets_and_read_back(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.last_stable_offset) == (0, 0, 0, 0)
    assert log.append(batch("a", "b"), T0).base_offset == 0
    assert log.append(batch("c"), T0).base_offset == 2
    assert log.append(batch("d", "e", "f"), T0).base_offset == 3
    assert (log.log_end_offset, log.high_watermark, log.last_stable_offset) == (6, 6, 6)
    assert values(log) == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert [r.offset for r in log.read(0, 1 << 20)] == list(range(6))
    assert values(log, 4) == [b"e", b"f"]  # from the middle of a batch
    assert log.read(6, 1 << 20) == []  # the log end: nothing yet, no error
    with pytest.raises(OffsetOutOfRange):
        log.read(7, 1 << 20)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 1 << 20)


def test_keys_headers_timestamps_and_producer_ids_round_trip(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    rec = Record(value=None, key=b"k", headers=[RecordHeader("h1", b"x"), RecordHeader("h2", None)], timestamp=42)
    log.append(RecordBatch([rec, Record(value=b"v")], producer_id=3, producer_epoch=0, base_sequence=0), T0)
    first, second = log.read(0, 1 << 20)
    assert (first.offset, first.timestamp, first.value, first.key, first.producer_id) == (0, 42, None, b"k", 3)
    assert first.headers == [RecordHeader("h1", b"x"), RecordHeader("h2", None)]
    assert (second.timestamp, second.key, second.headers) == (T0, None, [])  # -1: stamped with now_ms


def test_the_broker_stamps_timestamps_of_minus_one_and_says_so(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    assert log.append(batch("a"), T0).log_append_time_ms == T0
    assert log.append(batch("b", ts=5), T0).log_append_time_ms == -1


def test_max_bytes_limits_a_read_but_one_record_always_comes(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    log.append(batch(*[b"x" * 100] * 10), T0)
    one = pl.RECORD_OVERHEAD_BYTES + 100
    assert len(log.read(0, 0)) == 1  # at least one, whatever the limit
    assert len(log.read(0, one)) == 1
    assert len(log.read(0, 3 * one)) == 3
    assert len(log.read(0, 3 * one - 1)) == 2
    assert log.read(0, 0, min_one=False) == []


def test_offset_for_earliest_latest_and_timestamps(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    assert log.offset_for(-2) == TimestampOffset(0, -1) and log.offset_for(-1) == TimestampOffset(0, -1)
    log.append(batch("a", "b", ts=100), T0)
    log.append(batch("c", ts=200), T0)
    log.append(batch("d", ts=150), T0)  # timestamps need not grow
    assert log.offset_for(-2) == TimestampOffset(0, -1)
    assert log.offset_for(-1) == TimestampOffset(4, -1)
    assert log.offset_for(0) == TimestampOffset(0, 100)
    assert log.offset_for(101) == TimestampOffset(2, 200)
    assert log.offset_for(200) == TimestampOffset(2, 200)
    assert log.offset_for(201) == TimestampOffset(-1, -1)
    with pytest.raises(LogError) as exc:
        log.offset_for(-4)
    assert exc.value.code is ErrorCode.INVALID_REQUEST


def test_offset_for_max_timestamp_is_the_first_record_with_the_largest(stores: Stores) -> None:
    """-3 (KIP-734): the record with the largest timestamp, the first one if several have it;
    markers are not records; an empty log has none."""
    store = stores.open(cfg(**{"log.segment.bytes": 200}))  # several segments: the lookup crosses them
    log = store.log("t", 0)
    assert log.offset_for(-3) == TimestampOffset(-1, -1)
    log.append(batch("a", "b", ts=100), T0)
    assert log.offset_for(-3) == TimestampOffset(0, 100)  # a tie inside a batch: the first
    log.append(batch("c", "d", "e", ts=50), T0)
    log.append(RecordBatch([Record(b"f", timestamp=90), Record(b"g", timestamp=300), Record(b"h", timestamp=300)]), T0)
    log.append(batch("i", ts=300), T0)  # the same largest timestamp later: not this one
    log.append(batch("j", ts=120), T0)
    assert log.offset_for(-3) == TimestampOffset(6, 300)
    log.append_marker(7, 0, False, T0 + 10_000)  # a marker's timestamp is larger, but it is no record
    assert log.offset_for(-3) == TimestampOffset(6, 300)
    if stores.kind == "file":
        assert len(list(store.root.glob("t-0/*.log"))) > 1
        store.close()
        assert stores.open(cfg(**{"log.segment.bytes": 200})).log("t", 0).offset_for(-3) == TimestampOffset(6, 300)


@pytest.mark.parametrize("bad, code", [
    (RecordBatch([]), ErrorCode.CORRUPT_MESSAGE),
    (batch("a", pid=-2), ErrorCode.CORRUPT_MESSAGE),
    (batch("a", pid=1, epoch=-1, seq=0), ErrorCode.CORRUPT_MESSAGE),
    (batch("a", pid=1, epoch=0, seq=-1), ErrorCode.CORRUPT_MESSAGE),
    (batch("a", pid=1, epoch=40000, seq=0), ErrorCode.CORRUPT_MESSAGE),
    (batch("a", txn=True), ErrorCode.CORRUPT_MESSAGE),
    (batch("a", ts=-5), ErrorCode.CORRUPT_MESSAGE),
    (batch(b"x" * 2000), ErrorCode.MESSAGE_TOO_LARGE),
])
def test_a_malformed_batch_is_refused_with_a_clear_error_and_changes_nothing(stores: Stores, bad: RecordBatch,
                                                                            code: ErrorCode) -> None:
    log = stores.open(cfg(**{"message.max.bytes": 1000})).log("t", 0)
    log.append(batch("before"), T0)
    result = log.append(bad, T0)
    assert (result.error_code, result.base_offset, result.duplicate) == (code, -1, False)
    assert result.error_message
    assert log.log_end_offset == 1 and values(log) == [b"before"] and not log.producers
    assert log.append(batch("after"), T0).base_offset == 1


def test_logs_are_created_on_first_use_for_legal_names_only() -> None:
    store = MemoryLogStore()
    assert store.existing("t", 0) is None
    assert store.log("t", 0) is store.log("t", 0)
    assert store.existing("t", 0) is not None
    for topic, partition in [("../x", 0), ("a b", 0), ("t", -1), (".", 0)]:
        with pytest.raises(ValueError):
            store.log(topic, partition)


# ============================================================================ segments and recovery


def test_segments_roll_at_log_segment_bytes_and_reads_cross_them(files: Stores) -> None:
    store = files.open(cfg(**{"log.segment.bytes": 400}))
    log = store.log("t", 0)
    for i in range(20):
        log.append(batch(f"v{i:02d}-" + "x" * 60, f"w{i:02d}"), T0)
    names = sorted(p.name for p in (files.root / "t-0").glob("*.log"))
    assert len(names) > 3
    assert names[0] == "00000000000000000000.log"
    bases = [int(n[:-4]) for n in names]
    assert bases == sorted(bases) and all(b % 2 == 0 for b in bases)  # a segment starts at a batch
    assert all(os.path.getsize(files.root / "t-0" / n) <= 400 for n in names)
    assert len(values(log)) == 40
    assert [r.offset for r in log.read(bases[2] + 1, 1 << 20)][:2] == [bases[2] + 1, bases[2] + 2]
    again = files.reopen(store, cfg(**{"log.segment.bytes": 400})).log("t", 0)
    assert values(again) == values(log) and again.log_end_offset == 40
    assert again.append(batch("more"), T0).base_offset == 40


def test_a_batch_larger_than_a_segment_gets_a_segment_of_its_own(files: Stores) -> None:
    log = files.open(cfg(**{"log.segment.bytes": 100})).log("t", 0)
    for i in range(3):
        log.append(batch(b"x" * 300), T0)
    assert len(list((files.root / "t-0").glob("*.log"))) == 3
    assert len(values(log)) == 3


def test_the_sparse_index_is_rebuilt_on_recovery_as_appends_built_it(files: Stores) -> None:
    config = cfg(**{"log.segment.bytes": 5000, "log.index.interval.bytes": 300})
    store = files.open(config)
    log = store.log("t", 0)
    for i in range(60):
        log.append(batch(*[f"{i}-{j}" * 10 for j in range(1 + i % 3)]), T0)
    built = [(s.base_offset, s.index_offsets, s.index_positions) for s in log._storage.segments]
    assert any(len(offsets) > 3 for _, offsets, _ in built)  # sparse, but more than one entry
    assert all(len(offsets) < 30 for _, offsets, _ in built)  # and not one per batch
    again = files.reopen(store, config).log("t", 0)
    assert [(s.base_offset, s.index_offsets, s.index_positions) for s in again._storage.segments] == built
    for offset in range(0, again.log_end_offset, 7):
        assert again.read(offset, 1)[0].offset == offset


def test_a_torn_tail_is_truncated_on_recovery_and_appends_continue(files: Stores) -> None:
    store = files.open()
    log = store.log("t", 0)
    log.append(batch("a", "b"), T0)
    log.append(batch("c"), T0)
    store.close()
    seg = files.root / "t-0" / "00000000000000000000.log"
    whole = seg.stat().st_size
    with open(seg, "ab") as f:  # a third batch, cut short by a crash in the middle of its write
        f.write(pl.encode_batch(3, 1, -1, -1, -1, 0, T0, pl.msgpack.packb([(T0, None, b"d", ())]))[:30])
    store = files.open()
    log = store.log("t", 0)
    assert values(log) == [b"a", b"b", b"c"] and log.log_end_offset == 3
    assert seg.stat().st_size == whole
    assert store.recovery.truncated_bytes == 30
    (cut,) = store.recovery.truncations
    assert cut["reason"].startswith("torn tail") and cut["position"] == whole and cut["segment"] == seg.name
    assert log.append(batch("d"), T0).base_offset == 3
    assert values(files.reopen(store).log("t", 0)) == [b"a", b"b", b"c", b"d"]


def test_a_partial_header_at_the_tail_is_truncated(files: Stores) -> None:
    store = files.open()
    store.log("t", 0).append(batch("a"), T0)
    store.close()
    seg = files.root / "t-0" / "00000000000000000000.log"
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x01")
    store = files.open()
    assert values(store.log("t", 0)) == [b"a"] and store.recovery.truncated_bytes == 3


def test_a_crc_mismatch_ends_the_log_there_and_later_segments_go(files: Stores) -> None:
    config = cfg(**{"log.segment.bytes": 300})
    store = files.open(config)
    log = store.log("t", 0)
    for i in range(12):
        log.append(batch(f"{i:02d}" * 20), T0)
    segs = sorted((files.root / "t-0").glob("*.log"))
    assert len(segs) >= 3
    store.close()
    victim = segs[1]
    data = bytearray(victim.read_bytes())
    first_len = int.from_bytes(data[:4], "big") + 4
    data[first_len + HEADER_SIZE + 3] ^= 0xFF  # a flipped bit in the payload of its second batch
    victim.write_bytes(bytes(data))
    store = files.open(config)
    log = store.log("t", 0)
    base = int(victim.name[:-4])
    assert log.log_end_offset == base + 1  # everything from the corrupt batch on is gone
    assert values(log) == [f"{i:02d}".encode() * 20 for i in range(base + 1)]
    assert sorted((files.root / "t-0").glob("*.log")) == segs[:2]
    assert victim.stat().st_size == first_len
    (cut,) = store.recovery.truncations
    assert "CRC mismatch" in cut["reason"] and cut["segment"] == victim.name and cut["position"] == first_len
    assert log.append(batch("next"), T0).base_offset == base + 1


def test_a_header_whose_offsets_do_not_follow_is_corruption(files: Stores) -> None:
    store = files.open()
    store.log("t", 0).append(batch("a"), T0)
    store.close()
    seg = files.root / "t-0" / "00000000000000000000.log"
    with open(seg, "ab") as f:  # a well-formed batch with the wrong base offset
        f.write(pl.encode_batch(5, 1, -1, -1, -1, 0, T0, pl.msgpack.packb([(T0, None, b"x", ())])))
    store = files.open()
    assert values(store.log("t", 0)) == [b"a"]
    assert "expected 1" in store.recovery.truncations[0]["reason"]


def test_recovery_finds_every_partition_and_nothing_else(files: Stores) -> None:
    store = files.open()
    store.log("a", 0).append(batch("a0"), T0)
    store.log("a-b", 3).append(batch("ab3", "x"), T0)
    store.close()
    (files.root / "stray").mkdir()
    (files.root / "a-0" / "notes.txt").write_text("not a segment")
    store = files.open()
    assert sorted(store.logs()) == [("a", 0), ("a-b", 3)]
    assert store.recovery.partitions == 2 and store.recovery.batches == 2
    assert values(store.log("a-b", 3)) == [b"ab3", b"x"]


def test_one_process_per_log_directory(files: Stores) -> None:
    files.open()
    with pytest.raises(LogLockedError):
        FileLogStore(files.root, cfg())


def test_a_failed_write_leaves_no_half_batch_and_changes_nothing(files: Stores, monkeypatch) -> None:
    log = files.open().log("t", 0)
    log.append(batch("a"), T0)
    real = pl._write_all

    def half_then_fail(fd: int, data: bytes) -> None:
        os.write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl, "_write_all", half_then_fail)
    with pytest.raises(OSError):
        log.append(batch("b"), T0)
    monkeypatch.setattr(pl, "_write_all", real)
    assert log.log_end_offset == 1
    assert log.append(batch("c"), T0).base_offset == 1
    assert values(log) == [b"a", b"c"]
    store2 = files.reopen(files.open_stores[-1])
    assert values(store2.log("t", 0)) == [b"a", b"c"] and store2.recovery.truncated_bytes == 0


def test_a_failed_sync_cuts_the_write_back_too_so_a_retry_is_not_written_twice(files: Stores, monkeypatch) -> None:
    """With log.flush.interval.messages=1 the append's sync is part of the write: if it fails the
    batch (here a marker, which the transaction coordinator retries) must leave the file, or the
    retry would sit after it under the same offset and recovery would cut the log there."""
    log = files.open(cfg(**{"log.flush.interval.messages": 1})).log("t", 0)
    log.append(batch("a", pid=0, epoch=0, seq=0, txn=True), T0)
    real = os.fsync

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(pl.os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        log.append_marker(0, 0, True, T0)
    monkeypatch.setattr(pl.os, "fsync", real)
    assert (log.log_end_offset, log.last_stable_offset) == (1, 0)
    assert log.append_marker(0, 0, True, T0) == 1 and log.last_stable_offset == 2
    store2 = files.reopen(files.open_stores[-1], cfg(**{"log.flush.interval.messages": 1}))
    again = store2.log("t", 0)
    assert [b.base_offset for b in again.batches()] == [0, 1] and store2.recovery.truncated_bytes == 0
    assert again.last_stable_offset == again.log_end_offset == 2


def test_a_failed_sync_takes_its_batch_back_so_a_retry_and_later_batches_survive_a_restart(files: Stores,
                                                                                          monkeypatch) -> None:
    """log.flush.interval.messages=1: the batch whose fsync fails is answered with an error, so it
    must not stay in the file behind the log's back: a retry at the same offset would follow it,
    and recovery would cut the log there, taking every later acknowledged batch with it."""
    log = files.open(cfg(**{"log.flush.interval.messages": 1})).log("t", 0)
    log.append(batch("a"), T0)
    real = os.fsync

    def fail(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError):
        log.append(batch("b"), T0)
    monkeypatch.setattr(os, "fsync", real)
    assert log.log_end_offset == 1
    assert log.append(batch("b"), T0).base_offset == 1  # the retry
    assert log.append(batch("c"), T0).base_offset == 2
    assert values(log) == [b"a", b"b", b"c"]
    store2 = files.reopen(files.open_stores[-1])
    assert values(store2.log("t", 0)) == [b"a", b"b", b"c"] and store2.recovery.truncated_bytes == 0


# ============================================================================ flush policy


def test_by_default_appends_are_never_synced_only_written(files: Stores) -> None:
    log = files.open().log("t", 0)
    for _ in range(50):
        log.append(batch("a"), T0)
    assert log._storage.flushes == 0


def test_log_flush_interval_messages_syncs_after_that_many_records(files: Stores) -> None:
    log = files.open(cfg(**{"log.flush.interval.messages": 3})).log("t", 0)
    log.append(batch("a", "b"), T0)
    assert log._storage.flushes == 0
    log.append(batch("c"), T0)
    assert log._storage.flushes == 1
    log.append(batch("d", "e", "f", "g"), T0)
    assert log._storage.flushes == 2


def test_log_flush_interval_ms_syncs_on_append_or_when_checked(files: Stores) -> None:
    store = files.open(cfg(**{"log.flush.interval.ms": 1000}))
    log = store.log("t", 0)
    log.append(batch("a"), T0)
    log.append(batch("b"), T0 + 999)
    assert log._storage.flushes == 0
    log.append(batch("c"), T0 + 1000)
    assert log._storage.flushes == 1
    log.append(batch("d"), T0 + 1500)
    store.flush_if_due(T0 + 1999)
    assert log._storage.flushes == 1
    store.flush_if_due(T0 + 2000)
    assert log._storage.flushes == 2
    store.flush_if_due(T0 + 9000)  # nothing new to sync
    assert log._storage.flushes == 2


# ============================================================================ the idempotent producer


def test_a_retried_batch_is_acknowledged_once_with_its_original_offset(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    log.append(batch("x"), T0)
    first = log.append(batch("a", "b", pid=7, epoch=0, seq=0), T0)
    assert (first.error_code, first.base_offset, first.duplicate) == (0, 1, False)
    log.append(batch("c", pid=7, epoch=0, seq=2), T0)
    retry = log.append(batch("a", "b", pid=7, epoch=0, seq=0), T0)
    assert (retry.error_code, retry.base_offset, retry.duplicate) == (0, 1, True)
    assert values(log) == [b"x", b"a", b"b", b"c"]
    assert log.append(batch("d", pid=7, epoch=0, seq=3), T0).base_offset == 4


def test_the_last_five_batches_are_recognised_older_retries_are_out_of_order(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    for i in range(6):
        assert log.append(batch(f"b{i}", pid=1, epoch=0, seq=i), T0).base_offset == i
    for i in range(1, 6):
        r = log.append(batch(f"b{i}", pid=1, epoch=0, seq=i), T0)
        assert (r.error_code, r.base_offset, r.duplicate) == (0, i, True)
    r = log.append(batch("b0", pid=1, epoch=0, seq=0), T0)
    assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and "last 5 batches" in r.error_message
    assert log.log_end_offset == 6


def test_a_retry_with_other_batch_boundaries_is_not_a_duplicate(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    log.append(batch("a", "b", pid=1, epoch=0, seq=0), T0)
    r = log.append(batch("a", pid=1, epoch=0, seq=0), T0)
    assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and log.log_end_offset == 2


def test_a_gap_in_sequences_is_refused_and_nothing_is_appended(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    log.append(batch("a", pid=1, epoch=0, seq=0), T0)
    r = log.append(batch("c", pid=1, epoch=0, seq=2), T0)
    assert (r.error_code, r.base_offset) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert "expected sequence 1" in r.error_message
    assert log.log_end_offset == 1
    assert log.append(batch("b", pid=1, epoch=0, seq=1), T0).error_code == 0


def test_a_new_producer_and_a_new_epoch_start_at_sequence_zero(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    r = log.append(batch("a", pid=1, epoch=0, seq=5), T0)
    assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and log.log_end_offset == 0
    log.append(batch("a", "b", pid=1, epoch=0, seq=0), T0)
    r = log.append(batch("c", pid=1, epoch=1, seq=2), T0)
    assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and "new epoch 1" in r.error_message
    assert log.append(batch("c", pid=1, epoch=1, seq=0), T0).base_offset == 2
    assert log.producers[1].epoch == 1 and log.producers[1].last_seq == 0


def test_a_stale_epoch_is_invalid_producer_epoch(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    log.append(batch("a", pid=1, epoch=3, seq=0), T0)
    r = log.append(batch("b", pid=1, epoch=2, seq=1), T0)
    assert (r.error_code, r.base_offset) == (ErrorCode.INVALID_PRODUCER_EPOCH, -1)
    r = log.append(batch("a", pid=1, epoch=2, seq=0), T0)  # even a "retry" from the old epoch
    assert r.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 1


def test_producers_are_independent_and_so_are_partitions(stores: Stores) -> None:
    store = stores.open()
    a, b = store.log("t", 0), store.log("t", 1)
    a.append(batch("1", pid=1, epoch=0, seq=0), T0)
    a.append(batch("2", pid=2, epoch=0, seq=0), T0)
    b.append(batch("3", pid=1, epoch=0, seq=0), T0)  # sequences are per partition
    assert a.append(batch("4", pid=1, epoch=0, seq=1), T0).base_offset == 2
    assert b.append(batch("5", pid=1, epoch=0, seq=1), T0).base_offset == 1


def test_sequences_wrap_after_int32_max(stores: Stores) -> None:
    log = stores.open().log("t", 0)
    log.append(batch("a", pid=1, epoch=0, seq=0), T0)
    log.producers[1].last_seq = pl.INT32_MAX - 1  # fast-forward (2**31 batches would take a while)
    log.producers[1].batches.clear()
    assert log.append(batch("b", "c", pid=1, epoch=0, seq=pl.INT32_MAX), T0).error_code == 0
    assert log.producers[1].last_seq == 0
    assert log.append(batch("d", pid=1, epoch=0, seq=1), T0).error_code == 0


def test_producer_state_is_recovered_from_the_batch_headers(stores: Stores) -> None:
    store = stores.open()
    log = store.log("t", 0)
    log.append(batch("x"), T0)
    log.append(batch("a", "b", pid=4, epoch=2, seq=0), T0)
    log.append(batch("c", pid=4, epoch=2, seq=2), T0)
    log.append(batch("z", pid=9, epoch=0, seq=0), T0)
    again = stores.reopen(store).log("t", 0)
    assert again.producers[4].epoch == 2 and again.producers[4].last_seq == 2
    retry = again.append(batch("a", "b", pid=4, epoch=2, seq=0), T0)
    assert (retry.base_offset, retry.duplicate) == (1, True)
    assert again.append(batch("c2", pid=4, epoch=2, seq=4), T0).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert again.append(batch("y", pid=4, epoch=1, seq=3), T0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert again.append(batch("d", pid=4, epoch=2, seq=3), T0).base_offset == 5


def test_producer_ids_are_never_handed_out_twice_across_restarts(stores: Stores) -> None:
    store = stores.open()
    assert [store.allocate_producer_id() for _ in range(3)] == [0, 1, 2]
    again = stores.reopen(store)
    later = again.allocate_producer_id()
    assert later >= 3
    if stores.kind == "file":
        assert later == pl.PRODUCER_ID_BLOCK_SIZE  # the rest of the durable block is skipped, as Kafka's
        assert (stores.root / pl.PRODUCER_ID_BLOCK_FILE).read_text() == f"next_block_start={2 * pl.PRODUCER_ID_BLOCK_SIZE}\n"


def test_producer_ids_seen_in_the_logs_are_never_handed_out(files: Stores) -> None:
    store = files.open()
    store.log("t", 0).append(batch("a", pid=4321, epoch=0, seq=0), T0)
    store.close()
    (files.root / pl.PRODUCER_ID_BLOCK_FILE).unlink(missing_ok=True)
    assert files.open().allocate_producer_id() == 4322


# ============================================================================ transactions


def txn_log(stores: Stores):
    store = stores.open()
    return store, store.log("t", 0)


def test_an_open_transaction_holds_the_last_stable_offset(stores: Stores) -> None:
    _, log = txn_log(stores)
    log.append(batch("plain"), T0)
    log.append(batch("t1", "t2", pid=1, epoch=0, seq=0, txn=True), T0)
    log.append(batch("after"), T0)
    assert (log.last_stable_offset, log.high_watermark) == (1, 4)
    assert values(log, 0, COMMITTED) == [b"plain"]
    assert values(log, 0, UNCOMMITTED) == [b"plain", b"t1", b"t2", b"after"]
    assert log.read(1, 1 << 20, COMMITTED) == []
    marker = log.append_marker(1, 0, True, T0)
    assert marker == 4 and log.last_stable_offset == 5 == log.log_end_offset
    assert values(log, 0, COMMITTED) == [b"plain", b"t1", b"t2", b"after"]
    assert [r.offset for r in log.read(0, 1 << 20)] == [0, 1, 2, 3]  # the marker is never returned


def test_aborted_records_are_left_out_of_read_committed_only(stores: Stores) -> None:
    _, log = txn_log(stores)
    log.append(batch("a1", pid=1, epoch=0, seq=0, txn=True), T0)
    log.append(batch("b1", pid=2, epoch=0, seq=0, txn=True), T0)
    log.append(batch("a2", pid=1, epoch=0, seq=1, txn=True), T0)
    assert log.last_stable_offset == 0
    log.append_marker(1, 0, False, T0)  # producer 1 aborts (offset 3)
    assert log.last_stable_offset == 1  # producer 2 still open at 1
    log.append_marker(2, 0, True, T0)  # producer 2 commits (offset 4)
    log.append(batch("a3", pid=1, epoch=0, seq=2, txn=True), T0)  # producer 1's next transaction
    log.append_marker(1, 0, True, T0)
    assert values(log, 0, COMMITTED) == [b"b1", b"a3"]
    assert values(log, 0, UNCOMMITTED) == [b"a1", b"b1", b"a2", b"a3"]
    assert values(log, 2, COMMITTED) == [b"a3"]
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in log.aborted_transactions()] == [(1, 0, 3)]
    assert log.aborted_transactions(4) == []


def test_read_committed_skips_aborted_batches_when_counting_bytes(stores: Stores) -> None:
    _, log = txn_log(stores)
    log.append(batch(b"x" * 500, pid=1, epoch=0, seq=0, txn=True), T0)
    log.append_marker(1, 0, False, T0)
    log.append(batch("ok"), T0)
    assert values(log, 0, COMMITTED) == [b"ok"]
    assert [r.value for r in log.read(0, 1, COMMITTED)] == [b"ok"]


def test_a_marker_with_a_stale_epoch_is_refused_and_a_newer_one_fences(stores: Stores) -> None:
    _, log = txn_log(stores)
    log.append(batch("a", pid=1, epoch=3, seq=0, txn=True), T0)
    with pytest.raises(LogError) as exc:
        log.append_marker(1, 2, False, T0)
    assert exc.value.code is ErrorCode.INVALID_PRODUCER_EPOCH and log.log_end_offset == 1
    log.append_marker(1, 4, False, T0)  # the coordinator aborted with a bumped epoch
    assert log.append(batch("z", pid=1, epoch=3, seq=1, txn=True), T0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.append(batch("b", pid=1, epoch=4, seq=1, txn=True), T0).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(batch("b", pid=1, epoch=4, seq=0, txn=True), T0).base_offset == 2
    assert log.last_stable_offset == 2 and values(log, 0, COMMITTED) == []


def test_a_marker_without_a_transaction_takes_an_offset_and_changes_nothing_else(stores: Stores) -> None:
    _, log = txn_log(stores)
    log.append(batch("a"), T0)
    assert log.append_marker(5, 0, False, T0) == 1
    assert log.aborted_transactions() == [] and log.log_end_offset == log.last_stable_offset == 2
    assert values(log, 0, COMMITTED) == [b"a"]
    assert log.append(batch("b", pid=5, epoch=0, seq=0), T0).base_offset == 2
    with pytest.raises(LogError):
        log.append_marker(-1, 0, True, T0)


def test_transaction_state_is_recovered_from_batches_and_markers(stores: Stores) -> None:
    store, log = txn_log(stores)
    log.append(batch("a1", pid=1, epoch=0, seq=0, txn=True), T0)
    log.append(batch("b1", pid=2, epoch=0, seq=0, txn=True), T0)
    log.append_marker(1, 0, False, T0)
    log.append(batch("c1", pid=3, epoch=0, seq=0, txn=True), T0)
    log.append_marker(3, 0, True, T0)
    before = (log.last_stable_offset, log.open_txns, log.aborted_transactions(), values(log, 0, COMMITTED))
    again = stores.reopen(store).log("t", 0)
    assert (again.last_stable_offset, again.open_txns, again.aborted_transactions(),
            values(again, 0, COMMITTED)) == before
    assert before[0] == 1 and before[1] == {2: 1}
    again.append_marker(2, 0, True, T0)
    assert values(again, 0, COMMITTED) == [b"b1", b"c1"]


# ============================================================================ property: appends against a model


PRODUCERS = 3
op = st.one_of(
    st.tuples(st.just("plain"), st.integers(1, 3)),
    st.tuples(st.just("next"), st.integers(0, PRODUCERS - 1), st.integers(1, 3)),
    st.tuples(st.just("retry"), st.integers(0, PRODUCERS - 1), st.integers(0, 7)),
    st.tuples(st.just("gap"), st.integers(0, PRODUCERS - 1), st.integers(1, 3)),
    st.tuples(st.just("bump"), st.integers(0, PRODUCERS - 1)),
)


class Model:
    """What the log must hold: records in order, and per producer its epoch and sent batches."""

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.epoch = [0] * PRODUCERS  # the producer's epoch
        self.log_epoch = [-1] * PRODUCERS  # the epoch the log last saw from it
        self.next_seq = [0] * PRODUCERS
        self.sent: list[list[tuple[int, int, list[bytes], int]]] = [[] for _ in range(PRODUCERS)]  # (epoch, seq, values, offset)

    def values(self, n: int) -> list[bytes]:
        return [f"r{len(self.records) + i}".encode() for i in range(n)]


def run_ops(log: PartitionLog, ops: list, model: Model) -> None:
    for o in ops:
        kind = o[0]
        if kind == "plain":
            vals = model.values(o[1])
            r = log.append(RecordBatch([Record(value=v) for v in vals]), T0)
            assert (r.error_code, r.base_offset) == (0, len(model.records))
            model.records += vals
        elif kind == "next":
            p, n = o[1], o[2]
            vals = model.values(n)
            r = log.append(RecordBatch([Record(value=v) for v in vals], p, model.epoch[p], model.next_seq[p]), T0)
            assert (r.error_code, r.base_offset, r.duplicate) == (0, len(model.records), False)
            model.sent[p].append((model.epoch[p], model.next_seq[p], vals, len(model.records)))
            model.log_epoch[p] = model.epoch[p]
            model.next_seq[p] += n
            model.records += vals
        elif kind == "retry":
            p, back = o[1], o[2]
            if not model.sent[p] or back >= len(model.sent[p]):
                continue
            epoch, seq, vals, offset = model.sent[p][-1 - back]
            r = log.append(RecordBatch([Record(value=v) for v in vals], p, epoch, seq), T0)
            current = [s for s in model.sent[p] if s[0] == model.log_epoch[p]]
            if epoch < model.log_epoch[p]:
                assert r.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
            elif (epoch, seq, vals, offset) in current[-pl.PRODUCER_BATCHES_KEPT:]:
                assert (r.error_code, r.base_offset, r.duplicate) == (0, offset, True)
            else:
                assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        elif kind == "gap":
            p, skip = o[1], o[2]
            r = log.append(RecordBatch([Record(value=b"never")], p, model.epoch[p], model.next_seq[p] + skip), T0)
            assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        elif kind == "bump":
            model.epoch[o[1]] += 1
            model.next_seq[o[1]] = 0
        assert log.log_end_offset == len(model.records)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=40), kind=st.sampled_from(["memory", "file"]), segment_bytes=st.sampled_from([200, 1 << 30]))
def test_random_appends_with_retries_read_back_as_the_model(ops: list, kind: str, segment_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = Stores(kind, Path(tmp) / "logs")
        try:
            config = cfg(**{"log.segment.bytes": segment_bytes})
            store = stores.open(config)
            log = store.log("t", 0)
            model = Model()
            run_ops(log, ops, model)
            assert values(log) == model.records
            again = stores.reopen(store, config).log("t", 0)
            assert values(again) == model.records
            assert {p: (s.epoch, s.last_seq, list(s.batches)) for p, s in again.producers.items()} == \
                   {p: (s.epoch, s.last_seq, list(s.batches)) for p, s in log.producers.items()}
            more = ops[-5:]  # carrying on after the restart behaves the same
            run_ops(again, more, model)
            assert values(again) == model.records
        finally:
            stores.close()
