"""The transaction coordinator's rules, step by step (KIP-98): producer ids and epochs, fencing,
the partitions and groups of a transaction, markers and offsets at the end, timeouts."""

from __future__ import annotations

import itertools

import pytest

from coordinator.transactions import TransactionCoordinator, TxnState, timer_key
from protocol.effects import ArmTimer, CancelTimer, Reply
from protocol.errors import ErrorCode
from protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    EndTxnRequest,
    InitProducerIdRequest,
)
from protocol.types import TopicPartition

TP0, TP1 = TopicPartition("out", 0), TopicPartition("out", 1)


class Fixture:
    def __init__(self) -> None:
        ids = itertools.count(1000)
        self.markers: list[tuple] = []
        self.offsets: list[tuple] = []
        self.tc = TransactionCoordinator(
            allocate_producer_id=lambda: next(ids),
            write_marker=lambda tp, pid, epoch, commit, now: self.markers.append((tp, pid, epoch, commit)),
            complete_offsets=lambda group, pid, commit, now: self.offsets.append((group, pid, commit)),
            partition_exists=lambda tp: tp.topic == "out" and tp.partition < 2,
        )

    def reply(self, outputs: list) -> object:
        replies = [o.body for o in outputs if isinstance(o, Reply)]
        assert len(replies) == 1
        return replies[0]

    def init(self, tid: str = "app", now: int = 0, timeout: int = 10_000) -> tuple[int, int]:
        r = self.reply(self.tc.init_producer_id(InitProducerIdRequest(tid, timeout), "r", now))
        assert r.error_code == 0
        return r.producer_id, r.producer_epoch

    def add(self, pid: int, epoch: int, *tps: TopicPartition, tid: str = "app", now: int = 0) -> list:
        topics = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        return self.tc.add_partitions(AddPartitionsToTxnRequest(tid, pid, epoch, [AddPartitionsToTxnTopic(t, ps) for t, ps in topics.items()]), "r", now)

    def end(self, pid: int, epoch: int, commit: bool, tid: str = "app", now: int = 0) -> int:
        return self.reply(self.tc.end_txn(EndTxnRequest(tid, pid, epoch, commit), "r", now)).error_code


def test_a_transactional_id_keeps_its_producer_id_and_each_init_bumps_the_epoch() -> None:
    f = Fixture()
    assert f.init() == (1000, 0)
    assert f.init() == (1000, 1)
    assert f.init("other") == (1001, 0)


def test_commit_writes_a_marker_per_partition_and_commits_the_staged_offsets() -> None:
    f = Fixture()
    pid, epoch = f.init()
    out = f.add(pid, epoch, TP0, TP1, now=5)
    assert ArmTimer(timer_key("app"), 5 + 10_000) in out
    assert f.tc.txns["app"].state is TxnState.ONGOING
    assert f.reply(f.tc.add_offsets(AddOffsetsToTxnRequest("app", pid, epoch, "g"), "r", 6)).error_code == 0
    assert f.end(pid, epoch, True, now=7) == 0
    assert f.markers == [(TP0, pid, epoch, True), (TP1, pid, epoch, True)]
    assert f.offsets == [("g", pid, True)]
    txn = f.tc.txns["app"]
    assert txn.state is TxnState.COMPLETE_COMMIT and not txn.partitions and not txn.groups
    # A retried EndTxn(commit) succeeds again without writing anything; abort now is refused.
    assert f.end(pid, epoch, True) == 0 and len(f.markers) == 2
    assert f.end(pid, epoch, False) == ErrorCode.INVALID_TXN_STATE


def test_abort_writes_abort_markers_and_drops_the_offsets() -> None:
    f = Fixture()
    pid, epoch = f.init()
    f.add(pid, epoch, TP0)
    f.tc.add_offsets(AddOffsetsToTxnRequest("app", pid, epoch, "g"), "r", 1)
    out = f.tc.end_txn(EndTxnRequest("app", pid, epoch, False), "r", 2)
    assert CancelTimer(timer_key("app")) in out
    assert f.markers == [(TP0, pid, epoch, False)] and f.offsets == [("g", pid, False)]


def test_a_new_instance_fences_the_zombie_and_aborts_its_transaction() -> None:
    f = Fixture()
    pid, old = f.init()
    f.add(pid, old, TP0)
    _, new = f.init()
    assert new == old + 1
    assert f.markers == [(TP0, pid, old, False)]  # the zombie's open transaction was aborted
    # Everything the zombie tries now is refused as fenced.
    assert f.add(pid, old, TP1)[-1].body.results[0].results[0].error_code == ErrorCode.PRODUCER_FENCED
    assert f.end(pid, old, True) == ErrorCode.PRODUCER_FENCED
    assert f.tc.check_producer("app", pid, old) == ErrorCode.PRODUCER_FENCED
    assert f.tc.in_transaction(pid, old, TP0) == ErrorCode.PRODUCER_FENCED


def test_refusals_change_nothing() -> None:
    f = Fixture()
    pid, epoch = f.init()
    before = (f.tc.txns["app"].state, set(f.tc.txns["app"].partitions))
    out = f.add(pid, epoch, TopicPartition("nope", 0), TP0)
    assert {r.error_code for t in out[-1].body.results for r in t.results} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert f.add(pid + 1, epoch, TP0)[-1].body.results[0].results[0].error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert f.add(pid, epoch + 1, TP0)[-1].body.results[0].results[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert f.end(pid, epoch, True) == ErrorCode.INVALID_TXN_STATE  # nothing open
    assert (f.tc.txns["app"].state, set(f.tc.txns["app"].partitions)) == before
    assert f.markers == [] and f.offsets == []


def test_invalid_transaction_timeout() -> None:
    f = Fixture()
    r = f.reply(f.tc.init_producer_id(InitProducerIdRequest("app", 10_000_000), "r", 0))
    assert r.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT and "app" not in f.tc.txns


def test_an_abandoned_transaction_times_out_aborts_and_fences_its_producer() -> None:
    f = Fixture()
    pid, epoch = f.init(timeout=1000)
    f.add(pid, epoch, TP0, now=100)
    assert f.tc.on_timer(timer_key("app"), 500) == []  # early or stale firings do nothing
    f.tc.on_timer(timer_key("app"), 1100)
    assert f.markers == [(TP0, pid, epoch, False)]
    assert f.tc.txns["app"].state is TxnState.COMPLETE_ABORT
    assert f.tc.check_producer("app", pid, epoch) == ErrorCode.PRODUCER_FENCED


def test_transactional_batches_only_to_added_partitions() -> None:
    f = Fixture()
    pid, epoch = f.init()
    assert f.tc.in_transaction(pid, epoch, TP0) == ErrorCode.INVALID_TXN_STATE  # no transaction yet
    f.add(pid, epoch, TP0)
    assert f.tc.in_transaction(pid, epoch, TP0) is None
    assert f.tc.in_transaction(pid, epoch, TP1) == ErrorCode.INVALID_TXN_STATE
    assert f.tc.in_transaction(4242, 0, TP0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_an_open_transaction_is_aborted_and_fenced_at_restart() -> None:
    """Its staged offsets lived only in memory: committing it after a restart would publish the
    output without the input offsets, so the restored coordinator aborts it and fences."""
    f = Fixture()
    pid, epoch = f.init()
    f.add(pid, epoch, TP0, now=10)
    record = f.tc.record_of(f.tc.txns["app"])
    g = Fixture()
    g.tc.restore(record, 50)
    assert g.markers == [(TP0, pid, epoch, False)]
    assert g.tc.txns["app"].state is TxnState.COMPLETE_ABORT and g.tc.txns["app"].producer_epoch == epoch + 1
    assert g.end(pid, epoch, True) == ErrorCode.PRODUCER_FENCED


def test_a_completed_transaction_survives_a_restart_through_its_record() -> None:
    f = Fixture()
    pid, epoch = f.init()
    f.add(pid, epoch, TP0, now=10)
    assert f.end(pid, epoch, True) == 0
    g = Fixture()
    assert g.tc.restore(f.tc.record_of(f.tc.txns["app"]), 50) == []
    assert g.tc.txns["app"].state is TxnState.COMPLETE_COMMIT and g.markers == []
    assert g.end(pid, epoch, True) == 0  # a retried EndTxn(commit) still answers success


@pytest.mark.parametrize("epochs", [32765, 32766])
def test_epoch_exhaustion_allocates_a_new_producer_id(epochs: int) -> None:
    f = Fixture()
    f.init()
    f.tc.txns["app"].producer_epoch = epochs
    pid, epoch = f.init()
    assert (pid, epoch) == ((1000, 32766) if epochs == 32765 else (1001, 0))
