"""The transaction coordinator's rules, step by step (KIP-98): producer ids and epochs, fencing,
the partitions and groups of a transaction, markers and offsets at the end, timeouts."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from coordinator.broker import Broker, RequestContext
from coordinator.config import BrokerConfig
from coordinator.partition_log import INT16_MAX, INT32_MAX, INT64_MAX
from coordinator.transactions import TransactionCoordinator, TxnState, timer_key
from protocol.effects import ArmTimer, CancelTimer, LogEvent, Reply
from protocol.errors import ErrorCode
from protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    EndTxnRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    Record,
    RecordBatch,
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


# ============================================================================ through the Broker: nobody wedges a transaction

T0 = 1_700_000_000_000
PARTS = [("out", 0), ("out", 1), ("side", 0)]


def txn_broker() -> Broker:
    b = Broker(BrokerConfig())
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
    interleaved with forged requests from anyone, timeouts included. After every step: no answer is
    UNKNOWN_SERVER_ERROR, a refused forged request changed nothing, and no partition holds an open
    transaction the coordinator considers ended (its markers were written). At the end, with every
    transaction ended by timeouts, every partition's last stable offset is its log end offset."""

    @initialize()
    def setup(self) -> None:
        self.b = txn_broker()
        self.now = T0
        self.timers: dict[tuple, int] = {}
        self.producer: dict[str, tuple[int, int]] = {}  # tid -> (pid, epoch) as last answered
        self.seq: dict[tuple[int, int, tuple[str, int]], int] = {}  # (pid, epoch, tp) -> next sequence
        self.idempotent: list[int] = []

    def run(self, api: str, body: object) -> object:
        out = self.b.handle(api, body, RequestContext("r"), self.now)
        self.absorb(out)
        reply = only_reply(out)
        assert ErrorCode.UNKNOWN_SERVER_ERROR not in error_codes(reply), (api, body, reply)
        return reply

    def absorb(self, out: list) -> None:
        for o in out:
            if isinstance(o, ArmTimer):
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
        assert isinstance(r, InitProducerIdResponse) and r.error_code == 0
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
            assert code == 0
            self.seq[(pid, 0, tp)] = seq + n

    @rule(tid=st.sampled_from(TIDS), commit=st.booleans())
    def end_txn(self, tid: str, commit: bool) -> None:
        if tid in self.producer:
            pid, epoch = self.producer[tid]
            self.run("EndTxn", EndTxnRequest(tid, pid, epoch, commit))

    @rule(ms=st.sampled_from([1, 30, 100, 2_000, 70_000]))
    def tick(self, ms: int) -> None:
        self.advance(ms)

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
            for pid in log.open_txns:
                owner = owner_of(self.b, pid)
                assert owner is not None and owner.state is TxnState.ONGOING, (topic, partition, pid)
                assert TopicPartition(topic, partition) in owner.partitions
            if all(t.state is not TxnState.ONGOING for t in self.b.txn.txns.values()):
                assert log.last_stable_offset == log.log_end_offset, (topic, partition)

    def teardown(self) -> None:
        if hasattr(self, "b"):
            self.advance(self.b.config.transaction_max_timeout_ms + 1)  # every open transaction times out
            assert all(t.state is not TxnState.ONGOING for t in self.b.txn.txns.values())
            for key, log in self.b.logs.logs().items():
                assert log.last_stable_offset == log.log_end_offset, key


TestTxnInterleavings = TxnMachine.TestCase
TestTxnInterleavings.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
