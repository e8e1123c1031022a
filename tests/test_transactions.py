"""The transaction coordinator's rules, step by step (KIP-98): producer ids and epochs, fencing,
the partitions and groups of a transaction, markers and offsets at the end, timeouts."""

from __future__ import annotations

import errno
import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from grouplab.coordinator import partition_log as pl
from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group_log import TxnRecord
from grouplab.coordinator.partition_log import INT16_MAX, INT32_MAX, INT64_MAX, FileLogStore
from grouplab.coordinator.server import CoordinatorServer
from grouplab.coordinator.transactions import (
    PREPARING,
    TransactionCoordinator,
    TxnState,
    marker_backoff_ms,
    marker_timer_key,
    timer_key,
)
from grouplab.admin import AdminClient
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Persist, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    EndTxnRequest,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    Record,
    RecordBatch,
)
from grouplab.protocol.types import TopicPartition

TP0, TP1 = TopicPartition("out", 0), TopicPartition("out", 1)
OPEN = PREPARING | {TxnState.ONGOING}  # a transaction not ended yet
HOST = "127.0.0.1"


class Fixture:
    """A coordinator whose markers go to a list, with a disk that refuses the markers of the
    partitions in `failing`, and whose records are kept in `records`."""

    def __init__(self) -> None:
        ids = itertools.count(1000)
        self.markers: list[tuple] = []
        self.offsets: list[tuple] = []
        self.records: list[TxnRecord] = []
        self.failing: set[TopicPartition] = set()
        self.tc = TransactionCoordinator(
            allocate_producer_id=lambda: next(ids),
            write_marker=self.write_marker,
            complete_offsets=lambda group, pid, commit, now: self.offsets.append((group, pid, commit)),
            partition_exists=lambda tp: tp.topic == "out" and tp.partition < 2,
            persist=lambda record: self.records.append(record),
        )

    def write_marker(self, tp: TopicPartition, pid: int, epoch: int, commit: bool, now: int) -> None:
        if tp in self.failing:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.markers.append((tp, pid, epoch, commit))

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


# ============================================================================ a disk that refuses markers


def events_of(outputs: list, name: str) -> list[dict]:
    return [o.fields for o in outputs if isinstance(o, LogEvent) and o.event == name]


def open_txn(f: Fixture, group: str | None = "g", now: int = 0) -> tuple[int, int]:
    pid, epoch = f.init(now=now)
    f.add(pid, epoch, TP0, TP1, now=now)
    if group is not None:
        assert f.reply(f.tc.add_offsets(AddOffsetsToTxnRequest("app", pid, epoch, group), "r", now)).error_code == 0
    return pid, epoch


def test_endtxn_is_answered_once_decided_and_the_marker_the_disk_refused_is_retried_until_written() -> None:
    f = Fixture()
    pid, epoch = open_txn(f)
    f.failing = {TP1}
    out = f.tc.end_txn(EndTxnRequest("app", pid, epoch, True), "r", 1000)
    assert f.reply(out).error_code == 0
    txn = f.tc.txns["app"]
    assert txn.state is TxnState.PREPARE_COMMIT and txn.unmarked == {TP1}
    assert f.markers == [(TP0, pid, epoch, True)] and f.offsets == [("g", pid, True)]  # offsets: once, now
    assert f.records[-1].state == "PrepareCommit" and f.records[-1].partitions == [("out", 0), ("out", 1)]
    [failed] = events_of(out, "marker_write_failed")
    assert failed == {"transactional_id": "app", "producer_id": pid, "producer_epoch": epoch,
                      "txn_state": "PrepareCommit", "topic": "out", "partition": 1,
                      "error": "OSError(28, 'No space left on device')", "attempt": 1, "retry_backoff_ms": 100}
    assert ArmTimer(marker_timer_key("app"), 1100) in out and CancelTimer(timer_key("app")) in out
    assert not events_of(out, "transaction_committed")

    # Meanwhile the producer is told to wait (51, retriable); nothing it sends changes anything.
    before = (txn.state, set(txn.partitions), set(txn.groups), txn.producer_epoch, len(f.records))
    assert f.end(pid, epoch, True) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert f.end(pid, epoch, False) == ErrorCode.INVALID_TXN_STATE
    assert {r.error_code for t in f.add(pid, epoch, TP0)[-1].body.results for r in t.results} == {
        ErrorCode.CONCURRENT_TRANSACTIONS}
    assert f.reply(f.tc.add_offsets(AddOffsetsToTxnRequest("app", pid, epoch, "h"), "r", 1001)).error_code == \
        ErrorCode.CONCURRENT_TRANSACTIONS
    init = f.reply(f.tc.init_producer_id(InitProducerIdRequest("app", 10_000), "r", 1001))
    assert init.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert f.tc.check_producer("app", pid, epoch) == ErrorCode.INVALID_TXN_STATE
    assert f.tc.in_transaction(pid, epoch, TP1) == ErrorCode.INVALID_TXN_STATE
    assert (txn.state, set(txn.partitions), set(txn.groups), txn.producer_epoch, len(f.records)) == before

    # The retries back off (100 ms doubling to 1 s) while the disk still refuses ...
    now = 1100
    for attempt, backoff in [(2, 200), (3, 400), (4, 800), (5, 1000), (6, 1000)]:
        out = f.tc.on_timer(marker_timer_key("app"), now)
        failures = events_of(out, "marker_write_failed")
        assert [(e["attempt"], e["retry_backoff_ms"]) for e in failures] == [(attempt, backoff)]
        assert out[-1] == ArmTimer(marker_timer_key("app"), now + backoff)
        now += backoff
    assert [marker_backoff_ms(n) for n in (1, 2, 3, 4, 5, 40)] == [100, 200, 400, 800, 1000, 1000]
    # ... and the one after the disk recovers completes the transaction, nothing written twice.
    f.failing = set()
    out = f.tc.on_timer(marker_timer_key("app"), now)
    assert f.markers == [(TP0, pid, epoch, True), (TP1, pid, epoch, True)] and f.offsets == [("g", pid, True)]
    [done] = events_of(out, "transaction_committed")
    assert done["reason"] == "EndTxn" and done["partitions"] == [["out", 0], ["out", 1]] and done["groups"] == ["g"]
    assert txn.state is TxnState.COMPLETE_COMMIT and f.records[-1].state == "CompleteCommit"
    assert f.end(pid, epoch, True) == 0  # the producer's retry now succeeds
    assert f.tc.on_timer(marker_timer_key("app"), now + 5000) == []  # a stale retry does nothing


def test_an_abort_whose_markers_fail_fences_at_once_and_ends_later() -> None:
    """The timeout abort: the producer is fenced when the abort is decided; the markers still
    missing carry the bumped epoch (Kafka's markers after a timeout do too)."""
    f = Fixture()
    pid, epoch = f.init(timeout=1000)
    f.add(pid, epoch, TP0, TP1, now=100)
    f.failing = {TP0, TP1}
    out = f.tc.on_timer(timer_key("app"), 1100)
    assert not [o for o in out if isinstance(o, Reply)]
    txn = f.tc.txns["app"]
    assert txn.state is TxnState.PREPARE_ABORT and txn.producer_epoch == epoch + 1
    assert len(events_of(out, "marker_write_failed")) == 2 and f.records[-1].state == "PrepareAbort"
    assert f.end(pid, epoch, True) == ErrorCode.PRODUCER_FENCED
    assert f.tc.check_producer("app", pid, epoch) == ErrorCode.PRODUCER_FENCED
    f.failing = {TP1}
    out = f.tc.on_timer(marker_timer_key("app"), 1200)
    assert f.markers == [(TP0, pid, epoch + 1, False)] and txn.unmarked == {TP1}
    f.failing = set()
    out = f.tc.on_timer(marker_timer_key("app"), 1400)
    [done] = events_of(out, "transaction_aborted")
    assert done["reason"] == "transaction.timeout.ms (1000 ms) expired" and done["producer_epoch"] == epoch + 1
    assert txn.state is TxnState.COMPLETE_ABORT and txn.producer_epoch == epoch + 1  # no second bump
    assert f.init() == (pid, epoch + 2)


def test_a_new_instance_waits_for_the_abort_of_the_old_ones_transaction() -> None:
    f = Fixture()
    pid, old = open_txn(f, group=None)
    f.failing = {TP0}
    out = f.tc.init_producer_id(InitProducerIdRequest("app", 10_000), "r", 50)
    assert f.reply(out).error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    [bumped] = events_of(out, "producer_epoch_bumped")
    assert (bumped["producer_epoch"], bumped["txn_state"]) == (old + 1, "PrepareAbort")  # the zombie is fenced now
    assert f.end(pid, old, False) == ErrorCode.PRODUCER_FENCED
    assert f.reply(f.tc.init_producer_id(InitProducerIdRequest("app", 10_000), "r", 60)).error_code == \
        ErrorCode.CONCURRENT_TRANSACTIONS
    f.failing = set()
    f.tc.on_timer(marker_timer_key("app"), 150)
    assert f.tc.txns["app"].state is TxnState.COMPLETE_ABORT
    assert f.init() == (pid, old + 2)


def test_a_transaction_restored_in_prepare_gets_only_the_markers_it_lacks() -> None:
    """The restart sweep: the outcome was decided (and answered) before the restart; partitions
    whose log no longer holds the transaction open have their marker already."""
    f = Fixture()
    pid, epoch = open_txn(f)
    f.failing = {TP1}
    assert f.end(pid, epoch, True) == 0
    record = f.records[-1]
    assert record.state == "PrepareCommit"
    g = Fixture()
    g.tc.txn_open = lambda tp, producer_id: tp == TP1 and producer_id == pid
    out = g.tc.restore(record, 5000)
    assert g.markers == [(TP1, pid, epoch, True)] and g.offsets == []  # offsets were done before
    [done] = events_of(out, "transaction_committed")
    assert done["reason"] == "the coordinator restarted while its markers were pending"
    assert g.tc.txns["app"].state is TxnState.COMPLETE_COMMIT and g.records[-1].state == "CompleteCommit"
    assert g.end(pid, epoch, True) == 0
    # Restored while the disk still refuses: retried like any other.
    h = Fixture()
    h.failing = {TP1}
    out = h.tc.restore(record, 5000)
    assert [e["partition"] for e in events_of(out, "marker_write_failed")] == [1]
    assert h.tc.txns["app"].state is TxnState.PREPARE_COMMIT and h.tc.txns["app"].unmarked == {TP1}
    assert ArmTimer(marker_timer_key("app"), 5100) in out


def test_an_ongoing_transaction_restored_with_a_failing_disk_is_aborted_later() -> None:
    f = Fixture()
    pid, epoch = open_txn(f, group=None)
    g = Fixture()
    g.failing = {TP0}
    out = g.tc.restore(f.records[-1], 50)
    txn = g.tc.txns["app"]
    assert txn.state is TxnState.PREPARE_ABORT and txn.producer_epoch == epoch + 1
    assert [e["reason"] for e in events_of(out, "producer_epoch_bumped")] == [
        "its transaction was aborted at restart"]
    assert g.records[-1].state == "PrepareAbort" and g.records[-1].producer_epoch == epoch + 1
    g.failing = set()
    g.tc.on_timer(marker_timer_key("app"), 150)
    assert txn.state is TxnState.COMPLETE_ABORT
    assert g.markers == [(TP1, pid, epoch, False), (TP0, pid, epoch + 1, False)]  # the retried one: bumped epoch


# ============================================================================ through the Broker: nobody wedges a transaction

T0 = 1_700_000_000_000
PARTS = [("out", 0), ("out", 1), ("side", 0)]


def txn_broker(logs: pl.LogStore | None = None) -> Broker:
    b = Broker(BrokerConfig(), logs=logs)
    b.topics.partitions.update({"out": 2, "side": 1})
    return b


def only_reply(out: list) -> object:
    replies = [o.body for o in out if isinstance(o, Reply)]
    assert len(replies) == 1
    return replies[0]


def produce_one(b: Broker, tp: tuple[str, int], batch: RecordBatch, now: int = T0) -> tuple[int, str | None]:
    body = only_reply(b.handle("Produce", ProduceRequest([ProduceTopicData(tp[0], [ProducePartitionData(tp[1], batch)])]),
                               RequestContext("r"), now))
    part = body.responses[0].partition_responses[0]
    return part.error_code, part.error_message


def state_of(b: Broker) -> tuple:
    """Everything a refused request must leave as it was: the logs' ends, producer and transaction
    state on every partition, and the coordinator's transactions."""
    logs = {key: (log.log_end_offset, {pid: (s.epoch, s.last_seq) for pid, s in log.producers.items()},
                  dict(log.open_txns)) for key, log in b.logs.logs().items()
            if log.log_end_offset or log.producers}  # (an empty log is created by the first Produce to it)
    txns = {tid: (t.producer_id, t.producer_epoch, t.state, frozenset(t.partitions), frozenset(t.groups))
            for tid, t in b.txn.txns.items()}
    return logs, txns


def owner_of(b: Broker, pid: int) -> object:
    return next((t for t in b.txn.txns.values() if t.producer_id == pid), None)


def open_app_tx(b: Broker, now: int = T0) -> tuple[int, int]:
    """Issue 11's setup: InitProducerId for app-tx, AddPartitionsToTxn out-0 and out-1, a
    transactional batch to each."""
    init = only_reply(b.handle("InitProducerId", InitProducerIdRequest("app-tx", 60_000), RequestContext("r"), now))
    pid, epoch = init.producer_id, init.producer_epoch
    added = only_reply(b.handle("AddPartitionsToTxn", AddPartitionsToTxnRequest(
        "app-tx", pid, epoch, [AddPartitionsToTxnTopic("out", [0, 1])]), RequestContext("r"), now))
    assert all(p.error_code == 0 for t in added.results for p in t.results)
    for p in (0, 1):
        assert produce_one(b, ("out", p), RecordBatch([Record(b"t")], pid, epoch, 0, True), now)[0] == 0
    return pid, epoch


def test_a_forged_non_transactional_produce_cannot_wedge_an_open_transaction() -> None:
    """Issue 11: another connection's non-transactional batch with app-tx's producer id and a higher
    epoch used to be appended; the markers then looked stale and the transaction never ended."""
    b = txn_broker()
    pid, epoch = open_app_tx(b)
    before = state_of(b)
    code, message = produce_one(b, ("out", 0), RecordBatch([Record(b"x")], pid, 5, 0))
    assert code == ErrorCode.INVALID_TXN_STATE and "transaction open on out-0" in message
    assert state_of(b) == before
    # On a partition the transaction has not written to, the id is still not the forger's to use.
    code, _ = produce_one(b, ("side", 0), RecordBatch([Record(b"x")], pid, 5, 0))
    assert code == ErrorCode.INVALID_PRODUCER_ID_MAPPING and state_of(b) == before
    # A transactional batch with an epoch the coordinator never gave is refused too.
    assert produce_one(b, ("out", 0), RecordBatch([Record(b"x")], pid, 5, 0, True))[0] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert state_of(b) == before
    end = only_reply(b.handle("EndTxn", EndTxnRequest("app-tx", pid, epoch, True), RequestContext("r"), T0 + 1))
    assert end.error_code == 0
    for p in (0, 1):
        log = b.logs.log("out", p)
        assert log.last_stable_offset == log.log_end_offset == 2


def test_producer_ids_never_allocated_are_refused_and_a_huge_one_says_why() -> None:
    b = txn_broker()
    code, message = produce_one(b, ("out", 0), RecordBatch([Record(b"x")], 0, 0, 0))
    assert code == ErrorCode.INVALID_PRODUCER_ID_MAPPING and "never allocated" in message
    code, message = produce_one(b, ("out", 0), RecordBatch([Record(b"x")], 2**63, 0, 0))
    assert code == ErrorCode.CORRUPT_MESSAGE
    assert message == f"producer_id must fit in 64 bits (-1 or 0..{INT64_MAX}), got {2**63}"
    assert b.logs.logs()[("out", 0)].log_end_offset == 0
    pid = only_reply(b.handle("InitProducerId", InitProducerIdRequest(), RequestContext("r"), T0)).producer_id
    assert produce_one(b, ("out", 0), RecordBatch([Record(b"x")], pid, 0, 0))[0] == 0


def test_a_marker_ends_the_transaction_even_if_the_partition_saw_a_newer_epoch() -> None:
    """A partition whose producer state got ahead of the coordinator (a log written before the
    refusals above) cannot keep a transaction open: the coordinator's marker is authoritative."""
    b = txn_broker()
    pid, epoch = open_app_tx(b)
    b.logs.log("out", 0).producers[pid].epoch = 5  # as the forged batch of issue 11 left it
    out = b.on_timer(timer_key("app-tx"), T0 + 60_000)  # the timeout abort
    assert not [o for o in out if isinstance(o, Reply)]
    assert b.txn.txns["app-tx"].state is TxnState.COMPLETE_ABORT
    for p in (0, 1):
        log = b.logs.log("out", p)
        assert log.last_stable_offset == log.log_end_offset == 2 and log.producers[pid].epoch == epoch
    init = only_reply(b.handle("InitProducerId", InitProducerIdRequest("app-tx", 60_000), RequestContext("r"), T0))
    assert (init.error_code, init.producer_epoch) == (0, epoch + 2)


# ---------------------------------------------------------------------------- over partition log files, on a failing disk


@pytest.fixture
def disk(monkeypatch) -> set[str]:
    """The partition directories (`out-1`, ...) whose files refuse every write, as a full disk does."""
    failing: set[str] = set()
    real = pl._FileStorage.write

    def write(storage: pl._FileStorage, info: pl.BatchInfo, frame: bytes, now_ms: int) -> None:
        if storage.dir.name in failing:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(storage, info, frame, now_ms)

    monkeypatch.setattr(pl._FileStorage, "write", write)
    return failing


def file_broker(tmp_path: Path) -> Broker:
    b = Broker(BrokerConfig(), logs=FileLogStore(tmp_path / "logs", BrokerConfig()))
    b.topics.partitions.update({"out": 2, "side": 1})
    return b


def lso_and_leo(b: Broker, p: int) -> tuple[int, int]:
    log = b.logs.log("out", p)
    return log.last_stable_offset, log.log_end_offset


def test_endtxn_on_a_failing_disk_answers_none_and_the_lso_advances_once_the_disk_recovers(
        tmp_path: Path, disk: set[str]) -> None:
    b = file_broker(tmp_path)
    pid, epoch = open_app_tx(b)
    disk.add("out-1")
    out = b.handle("EndTxn", EndTxnRequest("app-tx", pid, epoch, True), RequestContext("r"), T0 + 10)
    assert only_reply(out).error_code == 0
    assert [(e["topic"], e["partition"], e["txn_state"]) for e in events_of(out, "marker_write_failed")] == [
        ("out", 1, "PrepareCommit")]
    assert [o.record.state for o in out if isinstance(o, Persist) and isinstance(o.record, TxnRecord)] == ["PrepareCommit"]
    assert lso_and_leo(b, 0) == (2, 2) and lso_and_leo(b, 1) == (0, 1)  # out-1's transaction still open
    fetched = only_reply(b.handle("Fetch", FetchRequest([FetchTopic("out", [FetchPartition(1, 0, 1 << 20)])],
                                                        isolation_level=1), RequestContext("r"), T0 + 20))
    assert fetched.responses[0].partitions[0].records == []
    added = only_reply(b.handle("AddPartitionsToTxn", AddPartitionsToTxnRequest(
        "app-tx", pid, epoch, [AddPartitionsToTxnTopic("out", [0])]), RequestContext("r"), T0 + 20))
    assert added.results[0].results[0].error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert only_reply(b.handle("EndTxn", EndTxnRequest("app-tx", pid, epoch, True), RequestContext("r"),
                               T0 + 20)).error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    out = b.on_timer(marker_timer_key("app-tx"), T0 + 110)
    assert [e["attempt"] for e in events_of(out, "marker_write_failed")] == [2] and lso_and_leo(b, 1) == (0, 1)
    disk.clear()
    out = b.on_timer(marker_timer_key("app-tx"), T0 + 310)
    assert events_of(out, "transaction_committed") and b.txn.txns["app-tx"].state is TxnState.COMPLETE_COMMIT
    assert lso_and_leo(b, 0) == lso_and_leo(b, 1) == (2, 2)
    assert [info.flags & pl.FLAG_CONTROL for info in b.logs.log("out", 1).batches()] == [0, pl.FLAG_CONTROL]
    fetched = only_reply(b.handle("Fetch", FetchRequest([FetchTopic("out", [FetchPartition(1, 0, 1 << 20)])],
                                                        isolation_level=1), RequestContext("r"), T0 + 320))
    assert [r.value for r in fetched.responses[0].partitions[0].records] == [b"t"]
    assert only_reply(b.handle("EndTxn", EndTxnRequest("app-tx", pid, epoch, True), RequestContext("r"),
                               T0 + 330)).error_code == 0
    b.logs.close()


def test_the_timeout_abort_on_a_failing_disk_ends_the_transaction_once_the_disk_recovers(
        tmp_path: Path, disk: set[str]) -> None:
    b = file_broker(tmp_path)
    pid, epoch = open_app_tx(b)
    disk.update({"out-0", "out-1"})
    out = b.on_timer(timer_key("app-tx"), T0 + 60_000)
    assert not [o for o in out if isinstance(o, Reply)] and len(events_of(out, "marker_write_failed")) == 2
    assert b.txn.txns["app-tx"].state is TxnState.PREPARE_ABORT
    assert produce_one(b, ("out", 0), RecordBatch([Record(b"z")], pid, epoch, 1, True), T0 + 60_001)[0] == \
        ErrorCode.PRODUCER_FENCED  # fenced while the abort is still pending
    disk.clear()
    b.on_timer(marker_timer_key("app-tx"), T0 + 60_100)
    assert b.txn.txns["app-tx"].state is TxnState.COMPLETE_ABORT
    assert lso_and_leo(b, 0) == lso_and_leo(b, 1) == (2, 2)
    for p in (0, 1):
        assert b.logs.log("out", p).aborted_transactions() == [(pid, 0, 1)]
    b.logs.close()


async def test_a_restart_with_markers_pending_writes_only_the_missing_ones(
        tmp_path: Path, disk: set[str], recorder, cleanup) -> None:
    """Over a real --data-dir: EndTxn(commit) is answered while out-1 refuses its marker; the
    coordinator stops with the transaction PrepareCommit; the restarted one finds the record, sees
    out-0's marker in its log and writes out-1's alone."""
    data = tmp_path / "data"
    first = await CoordinatorServer(BrokerConfig(), HOST, 0, events=recorder.log("coordinator"), data_dir=data).start()
    async with AdminClient(HOST, first.port) as admin:
        await admin.create_topics({"out": 2})
        init = await admin.request("InitProducerId", InitProducerIdRequest("app-tx", 60_000))
        pid, epoch = init.producer_id, init.producer_epoch
        await admin.request("AddPartitionsToTxn", AddPartitionsToTxnRequest(
            "app-tx", pid, epoch, [AddPartitionsToTxnTopic("out", [0, 1])]))
        for p in (0, 1):
            r = await admin.produce("out", p, [b"v"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                    is_transactional=True, transactional_id="app-tx")
            assert r is not None and r.error_code == 0
        disk.add("out-1")
        end = await admin.request("EndTxn", EndTxnRequest("app-tx", pid, epoch, True))
        assert end.error_code == 0
        assert (await admin.list_offsets("out", 1, isolation_level=1)).offset == 0  # still open
    assert recorder.events("marker_write_failed", partition=1)
    await first.stop()
    disk.clear()
    second = await CoordinatorServer(BrokerConfig(), HOST, 0, events=recorder.log("coordinator"), data_dir=data).start()
    cleanup.push_async_callback(second.stop)
    [done] = recorder.events("transaction_committed", reason="the coordinator restarted while its markers were pending")
    assert done.fields["partitions"] == [["out", 0], ["out", 1]]
    async with AdminClient(HOST, second.port) as admin:
        for p in (0, 1):
            assert (await admin.list_offsets("out", p, isolation_level=1)).offset == 2
            assert [r.value for r in (await admin.fetch("out", p, 0, isolation_level=1)).records] == [b"v"]
        again = await admin.request("EndTxn", EndTxnRequest("app-tx", pid, epoch, True))
        assert again.error_code == 0
    for p in (0, 1):  # one marker each: out-0's was not written again
        assert [info.flags & pl.FLAG_CONTROL for info in second.broker.logs.log("out", p).batches()] == [
            0, pl.FLAG_CONTROL]


class FlakyDisk(pl.MemoryLogStore):
    """Memory logs on a disk that refuses every write to the partitions in `failing`."""

    def __init__(self, config: BrokerConfig) -> None:
        super().__init__(config)
        self.failing: set[tuple[str, int]] = set()

    def _new_storage(self, topic: str, partition: int) -> pl._Storage:
        return _FlakyStorage(self, (topic, partition))

    def recovered(self) -> "FlakyDisk":
        """What a restarted coordinator finds: the same batches on the same (failing) disk."""
        plain = super().recovered()
        new = FlakyDisk(self.config)
        new.failing, new._logs, new._next_producer_id = self.failing, plain._logs, plain._next_producer_id
        return new


class _FlakyStorage(pl._MemoryStorage):
    def __init__(self, disk: FlakyDisk, key: tuple[str, int]) -> None:
        super().__init__()
        self.disk, self.key = disk, key

    def write(self, info: pl.BatchInfo, frame: bytes, now_ms: int) -> None:
        if self.key in self.disk.failing:
            raise OSError(errno.EIO, "Input/output error")
        super().write(info, frame, now_ms)


TIDS = ["app-tx", "b-tx"]
pids = st.one_of(st.integers(0, 6), st.sampled_from([-1, -2, INT64_MAX, 2**63]), st.integers(-2**64, 2**64))
epochs = st.one_of(st.integers(0, 6), st.sampled_from([-1, INT16_MAX, INT16_MAX + 1]), st.integers(-2**16, 2**16))
sequences = st.one_of(st.integers(0, 8), st.sampled_from([-1, INT32_MAX, INT32_MAX + 1]))


def error_codes(body: object) -> list[int]:
    """Every error_code in a response, nested ones included."""
    found = []
    code = getattr(body, "error_code", None)
    if code is not None:
        found.append(code)
    for value in vars(body).values() if hasattr(body, "__dict__") else ():
        for item in value if isinstance(value, list) else [value]:
            if hasattr(item, "__dataclass_fields__"):
                found += error_codes(item)
    return found


class TxnMachine(RuleBasedStateMachine):
    """Honest transactional producers (their epochs and sequences as the coordinator answered them)
    interleaved with forged requests from anyone, timeouts included, on a disk that fails and
    recovers partition by partition. After every step: no answer is UNKNOWN_SERVER_ERROR (but a
    Produce to a partition whose disk fails), a refused request changed nothing, no partition holds
    an open transaction the coordinator considers ended (or has a marker pending for), and a
    transaction with markers pending has their retry armed. At the end, with the disk working and
    every transaction ended by timeouts and retries, every partition's last stable offset is its
    log end offset."""

    @initialize()
    def setup(self) -> None:
        self.disk = FlakyDisk(BrokerConfig())
        self.b = txn_broker(self.disk)
        self.now = T0
        self.timers: dict[tuple, int] = {}
        self.producer: dict[str, tuple[int, int]] = {}  # tid -> (pid, epoch) as last answered
        self.seq: dict[tuple[int, int, tuple[str, int]], int] = {}  # (pid, epoch, tp) -> next sequence
        self.idempotent: list[int] = []
        self.hijacked: set[int] = set()  # idempotent ids a forged batch was accepted with: their sequences moved
        self.records: list = []  # everything persisted, in order: the group log

    def run(self, api: str, body: object) -> object:
        out = self.b.handle(api, body, RequestContext("r"), self.now)
        self.absorb(out)
        reply = only_reply(out)
        if not (api == "Produce" and self.disk.failing):  # a Produce the disk refused answers -1 (§3.11)
            assert ErrorCode.UNKNOWN_SERVER_ERROR not in error_codes(reply), (api, body, reply)
        return reply

    def absorb(self, out: list) -> None:
        for o in out:
            if isinstance(o, Persist):
                self.records.append(o.record)
            elif isinstance(o, ArmTimer):
                self.timers[o.key] = o.deadline_ms
            elif isinstance(o, CancelTimer):
                self.timers.pop(o.key, None)
            elif isinstance(o, LogEvent):
                assert o.event.fields.get("error") != "UNKNOWN_SERVER_ERROR" if hasattr(o.event, "fields") else True

    def advance(self, ms: int) -> None:
        self.now += ms
        while True:
            due = sorted((deadline, key) for key, deadline in self.timers.items() if deadline <= self.now)
            if not due:
                return
            deadline, key = due[0]
            del self.timers[key]
            out = self.b.on_timer(key, max(deadline, self.now))
            assert not [o for o in out if isinstance(o, Reply)]
            self.absorb(out)

    # ---------------------------------------------------------------- honest clients

    @rule(tid=st.sampled_from(TIDS), timeout=st.sampled_from([50, 1_000, 60_000]))
    def init(self, tid: str, timeout: int) -> None:
        r = self.run("InitProducerId", InitProducerIdRequest(tid, timeout))
        assert isinstance(r, InitProducerIdResponse)
        if r.error_code == ErrorCode.CONCURRENT_TRANSACTIONS:  # an abort's markers are pending: later
            assert self.b.txn.txns[tid].state in PREPARING
            return
        assert r.error_code == 0
        self.producer[tid] = (r.producer_id, r.producer_epoch)

    @rule()
    def init_idempotent(self) -> None:
        r = self.run("InitProducerId", InitProducerIdRequest())
        self.idempotent.append(r.producer_id)

    @rule(tid=st.sampled_from(TIDS), tps=st.lists(st.sampled_from(PARTS), min_size=1, max_size=3, unique=True))
    def add_partitions(self, tid: str, tps: list) -> None:
        if tid in self.producer:
            pid, epoch = self.producer[tid]
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            self.run("AddPartitionsToTxn", AddPartitionsToTxnRequest(
                tid, pid, epoch, [AddPartitionsToTxnTopic(t, ps) for t, ps in topics.items()]))

    @rule(tid=st.sampled_from(TIDS), tps=st.lists(st.sampled_from(PARTS), min_size=1, max_size=3, unique=True))
    def begin(self, tid: str, tps: list) -> None:
        """What a client does most: (initialise,) add partitions and write to each of them."""
        if tid not in self.producer:
            self.init(tid, 60_000)
        self.add_partitions(tid, tps)
        for tp in tps:
            self.txn_produce(tid, tp, 1)

    @rule(tid=st.sampled_from(TIDS), group=st.sampled_from(["g", "h"]))
    def add_offsets(self, tid: str, group: str) -> None:
        if tid in self.producer:
            pid, epoch = self.producer[tid]
            self.run("AddOffsetsToTxn", AddOffsetsToTxnRequest(tid, pid, epoch, group))

    @rule(tid=st.sampled_from(TIDS), tp=st.sampled_from(PARTS), n=st.integers(1, 3))
    def txn_produce(self, tid: str, tp: tuple[str, int], n: int) -> None:
        if tid in self.producer:
            pid, epoch = self.producer[tid]
            seq = self.seq.get((pid, epoch, tp), 0)
            code, _ = self.produce(tp, RecordBatch([Record(b"v")] * n, pid, epoch, seq, True))
            if code == 0:
                self.seq[(pid, epoch, tp)] = seq + n

    @rule(tp=st.sampled_from(PARTS), n=st.integers(1, 3))
    def idempotent_produce(self, tp: tuple[str, int], n: int) -> None:
        if self.idempotent:
            pid = self.idempotent[-1]
            seq = self.seq.get((pid, 0, tp), 0)
            code, _ = self.produce(tp, RecordBatch([Record(b"i")] * n, pid, 0, seq))
            refused_by_disk = code == ErrorCode.KAFKA_STORAGE_ERROR and tp in self.disk.failing
            assert code == 0 or pid in self.hijacked or refused_by_disk
            if code == 0:
                self.seq[(pid, 0, tp)] = seq + n

    @rule(tid=st.sampled_from(TIDS), commit=st.booleans())
    def end_txn(self, tid: str, commit: bool) -> None:
        if tid in self.producer:
            pid, epoch = self.producer[tid]
            self.run("EndTxn", EndTxnRequest(tid, pid, epoch, commit))

    @rule(ms=st.sampled_from([1, 30, 100, 2_000, 70_000]))
    def tick(self, ms: int) -> None:
        self.advance(ms)

    # ---------------------------------------------------------------- the disk

    @rule(tps=st.sets(st.sampled_from(PARTS), min_size=1))
    def disk_fails(self, tps: set) -> None:
        self.disk.failing |= tps

    @rule()
    def disk_recovers(self) -> None:
        self.disk.failing.clear()

    @rule()
    def coordinator_restarts(self) -> None:
        """A new coordinator over the same partition logs and group log; the old one's timers die
        with it. Transactions found Ongoing are aborted, those in Prepare* get their missing markers."""
        self.disk = self.disk.recovered()
        self.b = txn_broker(self.disk)
        self.timers = {}
        self.absorb(self.b.restore(list(self.records), self.now))

    # ---------------------------------------------------------------- forged requests

    def produce(self, tp: tuple[str, int], batch: RecordBatch) -> tuple[int, str | None]:
        body = self.run("Produce", ProduceRequest([ProduceTopicData(tp[0], [ProducePartitionData(tp[1], batch)])]))
        part = body.responses[0].partition_responses[0]
        return part.error_code, part.error_message

    @rule(tp=st.sampled_from(PARTS), pid=pids, epoch=epochs, seq=sequences, transactional=st.booleans(),
          steal=st.sampled_from([None, "app-tx", "b-tx"]), epoch_delta=st.integers(-1, 3))
    def forged_produce(self, tp: tuple[str, int], pid: int, epoch: int, seq: int, transactional: bool,
                       steal: str | None, epoch_delta: int) -> None:
        """A batch from anyone: arbitrary ids, or a transactional producer's id with a nearby epoch."""
        if steal is not None and steal in self.producer:  # (sequence 0: what a new epoch must start at)
            pid, epoch, seq = self.producer[steal][0], max(0, self.producer[steal][1] + epoch_delta), 0
        before = state_of(self.b)
        code, _ = self.produce(tp, RecordBatch([Record(b"f")], pid, epoch, seq, transactional))
        if code != 0:
            assert state_of(self.b) == before, "a refused Produce changed something"
        elif transactional:  # accepted: only as the current epoch of an Ongoing transaction that added tp
            assert self.b.txn.in_transaction(pid, epoch, TopicPartition(*tp)) is None
        elif pid >= 0:
            assert owner_of(self.b, pid) is None
            self.hijacked.add(pid)

    @rule(tid=st.sampled_from(TIDS + ["nobody"]), pid=pids, epoch=epochs, commit=st.booleans(),
          steal=st.booleans(), epoch_delta=st.integers(-2, 2))
    def forged_end_txn(self, tid: str, pid: int, epoch: int, commit: bool, steal: bool, epoch_delta: int) -> None:
        if steal and tid in self.producer:
            pid, epoch = self.producer[tid][0], self.producer[tid][1] + epoch_delta
        before = state_of(self.b)
        r = self.run("EndTxn", EndTxnRequest(tid, pid, epoch, commit))
        if r.error_code != 0:
            assert state_of(self.b) == before, "a refused EndTxn changed something"

    # ---------------------------------------------------------------- invariants

    @invariant()
    def ended_transactions_have_their_markers(self) -> None:
        if not hasattr(self, "b"):
            return
        for (topic, partition), log in self.b.logs.logs().items():
            tp = TopicPartition(topic, partition)
            for pid in log.open_txns:
                owner = owner_of(self.b, pid)
                assert owner is not None, (topic, partition, pid)
                assert owner.state is TxnState.ONGOING or (owner.state in PREPARING and tp in owner.unmarked), (
                    topic, partition, pid, owner.state)
                assert tp in owner.partitions
            if all(t.state not in OPEN for t in self.b.txn.txns.values()):
                assert log.last_stable_offset == log.log_end_offset, (topic, partition)
        for tid, t in self.b.txn.txns.items():  # nothing waits for ever: pending markers have their retry
            assert (t.state in PREPARING) == (marker_timer_key(tid) in self.timers), (tid, t.state)

    def teardown(self) -> None:
        if hasattr(self, "b"):
            self.disk.failing.clear()
            self.advance(self.b.config.transaction_max_timeout_ms + 1)  # every open transaction times out
            assert all(t.state not in OPEN for t in self.b.txn.txns.values())
            for key, log in self.b.logs.logs().items():
                assert log.last_stable_offset == log.log_end_offset, key


TestTxnInterleavings = TxnMachine.TestCase
TestTxnInterleavings.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
