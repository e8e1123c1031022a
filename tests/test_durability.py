"""What an acknowledged write survives (docs/durability.md): the power-cut model itself (so it can
fail), what a modelled cut leaves of acknowledged records and commits under each setting, and one
crash round over a real coordinator process, checked both after kill -9 and after the modelled cut.
The SIGKILL test of records alone is tests/test_produce_fetch.py's."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Awaitable, Callable

import pytest

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.durability.load import Ledger, Losses, commit_loop, verify
from grouplab.durability.powercut import SyncTracker
from grouplab.durability.rounds import PROFILES, crash_round
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, EndTxnRequest, InitProducerIdRequest
from grouplab.protocol.types import TopicPartition

HOST = "127.0.0.1"
TPS = [TopicPartition("t", 0), TopicPartition("t", 1)]


# ============================================================================ the model


def sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_the_model_keeps_synced_bytes_under_synced_names_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with SyncTracker() as tracker:
        (root / "a").write_bytes(b"synced")
        sync(root / "a")
        sync(root)  # "a" is named on the disk from here
        with open(root / "a", "ab") as f:
            f.write(b" and not")
        (root / "b").write_bytes(b"synced, but its name is not")
        sync(root / "b")
        (root / "sub").mkdir()
        sync(root / "sub")
    report = tracker.cut(root, tmp_path / "cut")
    assert sorted(p.name for p in (tmp_path / "cut").iterdir()) == ["a"]
    assert (tmp_path / "cut" / "a").read_bytes() == b"synced"
    assert sorted(Path(n).name for n in report.dropped_names) == ["b", "sub"]
    assert report.dropped_bytes == len(b" and not") + len(b"synced, but its name is not")
    assert not report.unmodelled


def test_the_model_reads_back_a_journal_and_flags_what_it_cannot_rebuild(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    tracker = SyncTracker().install(tmp_path / "journal")
    try:
        (root / "log").write_bytes(b"old")
        sync(root / "log")
        sync(root)
        (root / "log.new").write_bytes(b"new")
        sync(root / "log.new")
        os.replace(root / "log.new", root / "log")  # the rename is not synced: the old file is what the disk names
    finally:
        tracker.uninstall()
    read = SyncTracker.from_journal(tmp_path / "journal")
    assert (read.files, read.dirs) == (tracker.files, tracker.dirs)
    report = read.cut(root, tmp_path / "cut")
    assert report.unmodelled == [str(root / "log")]  # its old contents are gone: not guessed


# ============================================================================ a modelled cut, in process


async def acknowledge_then_cut(tmp_path: Path, overrides: list[str], torn: random.Random | None = None,
                               after: Callable[[AdminClient, int], Awaitable[None]] | None = None) -> Losses:
    """Produce and commit until acknowledged, cut the power (model), restart on what the cut left
    (and run `after` with a client of the restarted coordinator and the producer id)."""
    cfg = BrokerConfig().with_overrides(overrides)
    data, ledger = tmp_path / "data", Ledger()
    with SyncTracker() as tracker:
        srv = await CoordinatorServer(cfg, port=0, data_dir=data).start()
        try:
            async with AdminClient(HOST, srv.port) as admin:
                await admin.create_topics({"t": 2})
                pid, epoch = await admin.init_producer_id()
                for i in range(6):
                    tp = TPS[i % 2]
                    values = [f"{i}-{j}".encode() for j in range(10)]
                    part = await admin.produce(tp.topic, tp.partition, values, producer_id=pid, producer_epoch=epoch,
                                               base_sequence=i // 2 * 10, acks=-1 if i < 4 else 1)
                    assert part is not None and part.error_code == 0
                    ledger.records.setdefault(tp, {}).update({part.base_offset + j: v for j, v in enumerate(values)})
            await commit_loop(HOST, srv.port, ledger, "g", TPS, count=5)
            assert ledger.commit_requests == 5
            tracker.cut(data, tmp_path / "cut", torn)
        finally:
            await srv.stop()
    srv = await CoordinatorServer(cfg, port=0, data_dir=tmp_path / "cut").start()
    try:
        losses = await verify(HOST, srv.port, ledger)
        if after is not None:
            async with AdminClient(HOST, srv.port) as admin:
                await after(admin, pid)
    finally:
        await srv.stop()
    assert (losses.records_checked, losses.commit_keys_checked, losses.commits_phantom) == (60, 2, 0)
    return losses


@pytest.mark.parametrize("torn", [None, 7], ids=["synced-bytes-only", "torn-unsynced-tails"])
async def test_with_log_flush_interval_messages_1_every_acknowledged_record_survives_a_modelled_cut(
        tmp_path: Path, torn: int | None) -> None:
    losses = await acknowledge_then_cut(tmp_path, ["log.flush.interval.messages=1"],
                                        None if torn is None else random.Random(torn))
    assert (losses.records_lost, losses.commits_lost, losses.errors) == (0, 0, [])


async def test_with_the_defaults_a_modelled_cut_loses_acknowledged_records_but_no_commit(tmp_path: Path) -> None:
    """Partition logs are never forced (Kafka's default): the model must lose them, or it proves
    nothing. The group log is synced per append (grouplab.log.fsync=always): commits stay."""
    async def carry_on(admin: AdminClient, pid: int) -> None:
        """The producer's next batch: the partition no longer knows the producer, so it is refused."""
        part = await admin.produce("t", 0, [b"next"], producer_id=pid, producer_epoch=0, base_sequence=30)
        assert part is not None and part.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    losses = await acknowledge_then_cut(tmp_path, [], after=carry_on)
    assert losses.records_lost > 0
    assert losses.commits_lost == 0


async def test_with_grouplab_log_fsync_never_a_modelled_cut_loses_acknowledged_commits(tmp_path: Path) -> None:
    losses = await acknowledge_then_cut(tmp_path, ["grouplab.log.fsync=never", "log.flush.interval.messages=1"])
    assert losses.commits_lost == 2
    assert losses.records_lost == 60  # synced, but the topic's record was not: the partitions are unknown


# ============================================================================ a real process


async def test_a_crash_round_keeps_every_acknowledged_record_and_commit_after_kill_9_and_a_modelled_cut(
        tmp_path: Path) -> None:
    """A coordinator process under load is stopped at a random moment; a restart on its own
    directory (kill -9) and one on the power-cut copy (log.flush.interval.messages=1) lose nothing."""
    result = await crash_round(PROFILES["flush-messages-1"], tmp_path, random.Random(11), crash_window=(0.3, 0.5))
    assert result.ledger.record_count() > 0 and result.ledger.commit_requests > 0
    assert result.killed.records_checked == result.ledger.record_count()
    assert result.powercut is not None and result.cut is not None and not result.cut.unmodelled
    for losses in (result.killed, result.powercut):
        assert (losses.records_lost, losses.commits_lost, losses.commits_phantom, losses.errors) == (0, 0, 0, [])


# ============================================================================ a marker lost in a power cut


async def test_a_transaction_committed_before_a_modelled_cut_is_readable_committed_after_it(tmp_path: Path) -> None:
    """log.flush.interval.messages=2: the transaction's 2-record batch is synced, its commit marker
    (1 record) is not, while the group log (fsync=always) records the transaction CompleteCommit.
    After the cut the partition holds the batch as an open transaction; the restart sweep sees that
    its transactional id completed it and writes the commit marker again, so read_committed readers
    get the records (before the sweep, they stopped there for good)."""
    cfg = BrokerConfig().with_overrides(["log.flush.interval.messages=2"])
    with SyncTracker() as tracker:
        srv = await CoordinatorServer(cfg, port=0, data_dir=tmp_path / "data").start()
        try:
            async with AdminClient(HOST, srv.port) as admin:
                await admin.create_topics({"t": 1})
                init = await admin.request("InitProducerId", InitProducerIdRequest("tx", 60_000))
                pid, epoch = init.producer_id, init.producer_epoch
                added = await admin.request("AddPartitionsToTxn", AddPartitionsToTxnRequest(
                    "tx", pid, epoch, [AddPartitionsToTxnTopic("t", [0])]))
                assert added.error_code == 0
                part = await admin.produce("t", 0, [b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                           is_transactional=True, transactional_id="tx")
                assert part is not None and part.error_code == 0
                assert (await admin.request("EndTxn", EndTxnRequest("tx", pid, epoch, True))).error_code == 0
            tracker.cut(tmp_path / "data", tmp_path / "cut")
        finally:
            await srv.stop()
    srv = await CoordinatorServer(cfg, port=0, data_dir=tmp_path / "cut").start()
    try:
        async with AdminClient(HOST, srv.port) as admin:
            assert (await admin.list_offsets("t", 0)).offset == 3  # the batch survived, its marker was written again
            committed = await admin.fetch("t", 0, 0, isolation_level=1)
            assert [r.value for r in committed.records] == [b"a", b"b"]
    finally:
        await srv.stop()
