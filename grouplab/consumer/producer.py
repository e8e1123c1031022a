"""The producer, pure: the idempotent producer's sequence numbers and retries (KIP-98), and the
transactional producer's calls (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn).

One batch in flight per partition (max.in.flight.requests.per.connection = 1), so batches reach a
partition in order. A batch that gets no answer within `request.timeout.ms` is sent again with the
same producer id, epoch and sequence: if the first copy was written, the broker acknowledges the
retry with the original offset instead of writing it twice. That is the whole point of
idempotence, and what a lost acknowledgement tests.

Inputs carry `now_ms`; outputs are `Send` (from consumer.coordinator), timers, log events, and the
reports below.

In a cluster (`ProducerConfig.bootstrap_nodes`), requests go where Kafka's producer sends them
(docs/protocol.md §12.1): a batch to its partition's leader, learned from Metadata
(consumer/leaders.py); a transaction's requests to the transaction coordinator FindCoordinator
(key type 1) names; a TxnOffsetCommit to the group's coordinator (key type 0). A request whose
broker is unknown waits for the lookup (`_parked`). NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, a request timing out or the broker's connection closing make that broker
unknown, and the request is sent again after `retry.backoff.ms` wherever the lookup then says; a
batch keeps its sequence, so a retry is written once and none is skipped. With one broker no Send
names a node, as before.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Concatenate

from grouplab.consumer.coordinator import Send
from grouplab.consumer.leaders import METADATA_TIMER, PartitionLeaders
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, StepOutputs
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataResponse,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    Record,
    RecordBatch,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from grouplab.protocol.states import ProducerState
from grouplab.protocol.types import TopicPartition


@dataclass(slots=True)
class Acked:
    """A batch is durable at `base_offset` (`retried`: it took more than one attempt; if an
    earlier attempt had been written, the broker answered with that attempt's offset)."""

    tp: TopicPartition
    batch_id: int
    base_offset: int
    count: int
    retried: bool = False


@dataclass(slots=True)
class ProduceFailed:
    tp: TopicPartition
    batch_id: int
    error: ErrorCode


@dataclass(slots=True)
class ProducerReady:
    producer_id: int
    producer_epoch: int


@dataclass(slots=True)
class TxnDone:
    committed: bool
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class ProducerFenced:
    error: ErrorCode


@dataclass
class ProducerConfig:
    client_id: str = "producer"
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    # A cluster's brokers (node ids) to ask Metadata and FindCoordinator: set, every request names
    # its broker (Send.node); empty (one broker), none does. Not a Kafka name: bootstrap.servers.
    bootstrap_nodes: tuple[int, ...] = ()


@dataclass
class _Batch:
    batch_id: int
    tp: TopicPartition
    records: list[Record]
    sequence: int = -1
    attempts: int = 0


_RETRIABLE = {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
              ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS,
              ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.KAFKA_STORAGE_ERROR}
_FENCED = {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH}
# The broker asked is not (or no longer) the one: look it up again, then retry there.
_NOT_COORDINATOR = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
_NOT_LEADER = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE}
TXN_KEY, GROUP_KEY = 1, 0  # FindCoordinator key types
# The coordinator no longer knows this transaction as ours (e.g. it aborted it at a restart):
# nothing to retry; like a fencing, the application starts over with a new producer.
_FATAL_TXN = _FENCED | {ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_ID_MAPPING}


@dataclass
class ProducerMachine(StepOutputs):
    config: ProducerConfig
    state: ProducerState = ProducerState.INIT
    producer_id: int = -1
    producer_epoch: int = -1
    log_events: bool = True

    def __post_init__(self) -> None:
        self._cid = 0
        self._batch_ids = 0
        self._inflight: dict[int, tuple[str, Any]] = {}  # correlation id -> (purpose, detail)
        self._queues: dict[TopicPartition, deque[_Batch]] = {}
        self._sending: dict[TopicPartition, _Batch] = {}  # the one batch in flight per partition
        self._next_seq: dict[TopicPartition, int] = {}
        self._txn_partitions: set[TopicPartition] = set()
        self._pending_add: set[TopicPartition] = set()
        self._txn_offsets: list[tuple[dict[TopicPartition, int], str, int, str]] = []
        self._end_requested: bool | None = None
        self._retry_after: dict[tuple, tuple[str, Any]] = {}  # retry timer key -> what to retry
        self._retry_seq = 0
        self._out: list[Any] = []
        self._now = 0
        # A cluster (config.bootstrap_nodes): where requests go, and those waiting to know.
        self._leaders = PartitionLeaders(self.config.bootstrap_nodes, self.config.retry_backoff_ms)
        self._coordinators: dict[tuple[int, str], int] = {}  # (key type, key) -> node
        self._lookups: dict[tuple[int, str], int] = {}  # (key type, key) -> FindCoordinator in flight
        self._lookup_turn = 0
        self._parked: list[tuple[str, Any]] = []  # requests (purpose, detail) with no broker known yet
        self._sent_to: dict[int, int] = {}  # correlation id -> node

    @property
    def in_cluster(self) -> bool:
        return bool(self.config.bootstrap_nodes)

    @property
    def transactional(self) -> bool:
        return self.config.transactional_id is not None

    @property
    def _txn_id(self) -> str:
        """The transactional id, for the requests only a transactional producer sends."""
        txn_id = self.config.transactional_id
        assert txn_id is not None, "a transaction API on an idempotent producer"
        return txn_id

    # ------------------------------------------------------------------ inputs

    def start(self, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        self._init_producer_id()
        return self._end()

    def send(self, tp: TopicPartition, records: list[Record], now_ms: int) -> tuple[int, list[Any]]:
        """Queue a batch; returns its id (reported back in Acked/ProduceFailed) and the outputs."""
        self._begin(now_ms)
        assert self.state in (ProducerState.READY, ProducerState.IN_TXN, ProducerState.INIT), self.state
        if self.transactional and self.state is not ProducerState.IN_TXN:
            raise RuntimeError("a transactional producer sends inside begin_transaction()")
        self._batch_ids += 1
        batch = _Batch(self._batch_ids, tp, records)
        self._queues.setdefault(tp, deque()).append(batch)
        if self.transactional and tp not in self._txn_partitions:
            self._add_partition(tp)
        self._pump(tp)
        return batch.batch_id, self._end()

    def begin_transaction(self) -> None:
        assert self.transactional and self.state is ProducerState.READY, self.state
        self.state = ProducerState.IN_TXN
        self._txn_partitions = set()
        self._txn_offsets = []

    def send_offsets_to_transaction(self, offsets: dict[TopicPartition, int], group_id: str, generation_id: int,
                                    member_id: str, now_ms: int) -> list[Any]:
        """KIP-447: the consumer's group metadata travels with the offsets, so a stale
        generation's commit is refused."""
        self._begin(now_ms)
        assert self.state is ProducerState.IN_TXN
        self._txn_offsets.append((dict(offsets), group_id, generation_id, member_id))
        self._send(AddOffsetsToTxnRequest(self._txn_id, self.producer_id, self.producer_epoch, group_id),
                   "AddOffsetsToTxn", ("add_offsets", len(self._txn_offsets) - 1))
        return self._end()

    def commit_transaction(self, now_ms: int) -> list[Any]:
        return self._request_end(True, now_ms)

    def abort_transaction(self, now_ms: int) -> list[Any]:
        return self._request_end(False, now_ms)

    def idle(self) -> bool:
        """Nothing queued or in flight (for a transaction: nothing left before EndTxn)."""
        return not self._sending and not any(self._queues.values()) and not self._pending_add and not self._inflight \
            and not self._parked

    def on_disconnect(self, now_ms: int, node: int | None = None) -> list[Any]:
        """In-flight requests are lost with the connection: resend what needs resending. In a
        cluster, `node`'s connection: what went there is lost, and what it led or coordinated is
        looked up again; the lost requests go again after `retry.backoff.ms`."""
        self._begin(now_ms)
        if node is not None and self.in_cluster:
            lost = []
            for cid in [cid for cid, n in self._sent_to.items() if n == node]:
                del self._sent_to[cid]
                entry = self._inflight.pop(cid, None)
                self._out.append(CancelTimer(("request", cid)))
                if entry is not None:
                    lost.append(entry)
            self._node_unknown(node)
            for purpose, detail in lost:
                self._lost(purpose, detail, backoff=True)
            self._refresh()
            return self._end()
        lost = list(self._inflight.values())
        self._inflight.clear()
        self._sent_to.clear()
        for purpose, detail in lost:
            self._retry(purpose, detail)
        return self._end()

    def on_timer(self, key: tuple, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        if key[0] == "request" and key[1] in self._inflight:
            purpose, detail = self._inflight.pop(key[1])
            node = self._sent_to.pop(key[1], None)
            if purpose not in ("metadata", "lookup"):
                self._log(events.ProducerRequestTimedOut, purpose=purpose)
            if node is not None:
                # Kafka's NetworkClient drops a connection whose request timed out: what that
                # broker led or coordinated is looked up again.
                self._node_unknown(node)
            self._lost(purpose, detail, backoff=False)
            self._refresh()
        elif key[0] == "retry" and key in self._retry_after:
            purpose, detail = self._retry_after.pop(key)
            self._retry(purpose, detail)
        elif key == METADATA_TIMER:
            self._refresh()
        return self._end()

    def on_response(self, correlation_id: int, body: Any, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        entry = self._inflight.pop(correlation_id, None)
        self._sent_to.pop(correlation_id, None)
        if entry is None or self.state is ProducerState.FENCED:
            return self._end()
        self._out.append(CancelTimer(("request", correlation_id)))
        purpose, detail = entry
        if isinstance(body, MetadataResponse) and purpose == "metadata":
            if self._leaders.answered(correlation_id, body):
                self._unpark()
                self._refresh()
        elif isinstance(body, FindCoordinatorResponse) and purpose == "lookup":
            self._on_lookup(detail, correlation_id, body)
        elif isinstance(body, InitProducerIdResponse) and purpose == "init":
            self._on_init(body)
        elif isinstance(body, ProduceResponse) and purpose == "produce":
            self._on_produce(detail, body)
        elif isinstance(body, AddPartitionsToTxnResponse) and purpose == "add_partitions":
            self._on_add_partitions(detail, body)
        elif isinstance(body, AddOffsetsToTxnResponse) and purpose == "add_offsets":
            self._on_add_offsets(detail, body)
        elif isinstance(body, TxnOffsetCommitResponse) and purpose == "txn_offsets":
            self._on_txn_offsets(detail, body)
        elif isinstance(body, EndTxnResponse) and purpose == "end_txn":
            self._on_end_txn(detail, body)
        return self._end()

    # ------------------------------------------------------------------ producing

    def _pump(self, tp: TopicPartition) -> None:
        if self.state in (ProducerState.INIT, ProducerState.FENCED) or tp in self._sending:
            return
        if self.transactional and tp not in self._txn_partitions:
            return  # AddPartitionsToTxn first
        queue = self._queues.get(tp)
        if not queue:
            return
        batch = queue.popleft()
        batch.sequence = self._next_seq.get(tp, 0)
        self._next_seq[tp] = batch.sequence + len(batch.records)
        self._sending[tp] = batch
        self._send_batch(batch)

    def _send_batch(self, batch: _Batch) -> None:
        batch.attempts += 1
        rb = RecordBatch(records=batch.records, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                         base_sequence=batch.sequence, is_transactional=self.transactional)
        req = ProduceRequest(topic_data=[ProduceTopicData(batch.tp.topic, [ProducePartitionData(batch.tp.partition, rb)])],
                             acks=-1, timeout_ms=self.config.request_timeout_ms,
                             transactional_id=self.config.transactional_id)
        self._send(req, "Produce", ("produce", batch))

    def _on_produce(self, batch: _Batch, resp: ProduceResponse) -> None:
        if self._sending.get(batch.tp) is not batch:
            return  # an answer for a batch given up on (its transaction aborted)
        part = resp.responses[0].partition_responses[0] if resp.responses and resp.responses[0].partition_responses else None
        code = ErrorCode.from_code(part.error_code if part is not None else resp.error_code)
        if code is ErrorCode.NONE and part is not None:
            del self._sending[batch.tp]
            self._out.append(Acked(batch.tp, batch.batch_id, part.base_offset, len(batch.records), batch.attempts > 1))
            self._log(events.BatchAcked, partitions=[[batch.tp.topic, batch.tp.partition]], base_offset=part.base_offset,
                      count=len(batch.records), sequence=batch.sequence, attempts=batch.attempts)
            self._pump(batch.tp)
            self._maybe_end()
        elif code in _FENCED:
            self._fenced(code)
        elif code in _RETRIABLE:
            if code in _NOT_LEADER and self.in_cluster:
                self._leaders.not_leader(batch.tp)
                self._refresh()
            self._arm_retry("produce", batch)
        else:
            del self._sending[batch.tp]
            self._out.append(ProduceFailed(batch.tp, batch.batch_id, code))
            self._log(events.BatchFailed, partitions=[[batch.tp.topic, batch.tp.partition]], error=code.name)
            if self.transactional and self.state is ProducerState.IN_TXN:
                self._end_requested = False  # a transaction with a failed write can only abort
            self._pump(batch.tp)
            self._maybe_end()

    # ------------------------------------------------------------------ transactions

    def _init_producer_id(self) -> None:
        self._send(InitProducerIdRequest(self.config.transactional_id, self.config.transaction_timeout_ms), "InitProducerId", ("init", None))

    def _on_init(self, resp: InitProducerIdResponse) -> None:
        code = ErrorCode.from_code(resp.error_code)
        if code is not ErrorCode.NONE:
            if code in _NOT_COORDINATOR and self.transactional:
                self._forget_coordinator(TXN_KEY, self._txn_id)
            self._arm_retry("init", None) if code in _RETRIABLE else self._fenced(code)
            return
        self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
        self.state = ProducerState.READY
        self._next_seq.clear()  # a new epoch starts every partition at sequence 0
        self._out.append(ProducerReady(self.producer_id, self.producer_epoch))
        self._log(events.ProducerReady)
        for tp in list(self._queues):
            self._pump(tp)

    def _add_partition(self, tp: TopicPartition) -> None:
        if tp in self._pending_add:
            return
        self._pending_add.add(tp)
        req = AddPartitionsToTxnRequest(self._txn_id, self.producer_id, self.producer_epoch,
                                        [AddPartitionsToTxnTopic(tp.topic, [tp.partition])])
        self._send(req, "AddPartitionsToTxn", ("add_partitions", tp))

    def _on_add_partitions(self, tp: TopicPartition, resp: AddPartitionsToTxnResponse) -> None:
        codes = [r.error_code for t in resp.results for r in t.results] or [resp.error_code]
        code = ErrorCode.from_code(max(codes, key=lambda c: c != 0))
        if code is ErrorCode.NONE:
            self._pending_add.discard(tp)
            self._txn_partitions.add(tp)
            self._pump(tp)
            self._maybe_end()
        elif code in _FATAL_TXN:
            self._fenced(code)
        else:
            self._txn_coordinator_refused(code)
            self._arm_retry("add_partitions", tp)

    def _on_add_offsets(self, index: int, resp: AddOffsetsToTxnResponse) -> None:
        if self.state is not ProducerState.IN_TXN or index >= len(self._txn_offsets):
            return  # an answer from a transaction that already ended
        code = ErrorCode.from_code(resp.error_code)
        if code is ErrorCode.NONE:
            offsets, group_id, generation, member_id = self._txn_offsets[index]
            topics: dict[str, list[OffsetCommitRequestPartition]] = {}
            for tp, offset in sorted(offsets.items()):
                topics.setdefault(tp.topic, []).append(OffsetCommitRequestPartition(tp.partition, offset))
            req = TxnOffsetCommitRequest(self._txn_id, group_id, self.producer_id, self.producer_epoch,
                                         [OffsetCommitRequestTopic(t, ps) for t, ps in topics.items()],
                                         generation_id=generation, member_id=member_id)
            self._send(req, "TxnOffsetCommit", ("txn_offsets", index))
        elif code in _FATAL_TXN:
            self._fenced(code)
        else:
            self._txn_coordinator_refused(code)
            self._arm_retry("add_offsets", index)

    def _on_txn_offsets(self, index: int, resp: TxnOffsetCommitResponse) -> None:
        if self.state is not ProducerState.IN_TXN or index >= len(self._txn_offsets):
            return
        codes = [p.error_code for t in resp.topics for p in t.partitions] or [resp.error_code]
        code = ErrorCode.from_code(max(codes, key=lambda c: c != 0))
        if code is ErrorCode.NONE:
            self._txn_offsets[index] = ({}, "", -1, "")  # done
            self._maybe_end()
        elif code in _FENCED:
            self._fenced(code)
        elif code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID,
                      ErrorCode.REBALANCE_IN_PROGRESS):
            # KIP-447: the group moved on; this transaction must abort.
            self._log(events.TxnOffsetsRefused, error=code.name)
            self._txn_offsets[index] = ({}, "", -1, "")
            self._end_requested = False
            self._maybe_end(force_abort=True)
        else:
            if code in _NOT_COORDINATOR:
                self._forget_coordinator(GROUP_KEY, self._txn_offsets[index][1])
            self._arm_retry("add_offsets", index)

    def _request_end(self, commit: bool, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        assert self.state is ProducerState.IN_TXN, self.state
        self._end_requested = commit if self._end_requested is None else (self._end_requested and commit)
        self._maybe_end()
        return self._end()

    def _maybe_end(self, force_abort: bool = False) -> None:
        if self._end_requested is None or self.state is not ProducerState.IN_TXN:
            return
        commit = self._end_requested and not force_abort
        busy = self._sending or any(self._queues.values()) or self._pending_add or any(
            o for o, *_ in self._txn_offsets)
        if commit and busy:
            return  # EndTxn(commit) only once every batch and offset commit is acknowledged
        if not self._txn_partitions and not self._txn_offsets:
            self.state = ProducerState.READY  # nothing was written: nothing to end (Kafka does the same)
            self._end_requested = None
            self._out.append(TxnDone(commit))
            return
        self.state = ProducerState.COMMITTING if commit else ProducerState.ABORTING
        if not commit:
            self._queues.clear()  # unsent batches of an aborted transaction are dropped
        self._send(EndTxnRequest(self._txn_id, self.producer_id, self.producer_epoch, commit),
                   "EndTxn", ("end_txn", commit))

    def _on_end_txn(self, commit: bool, resp: EndTxnResponse) -> None:
        code = ErrorCode.from_code(resp.error_code)
        if code is ErrorCode.NONE:
            self.state = ProducerState.READY
            self._end_requested = None
            self._sending.clear()
            self._txn_partitions = set()
            self._txn_offsets = []
            self._log(events.TransactionEnded, committed=commit)
            if not commit:
                # KIP-360: batches of the aborted transaction may have been refused or never sent,
                # leaving holes in the sequence numbers; a new epoch starts every partition at 0.
                self.state = ProducerState.INIT
                self._next_seq.clear()
                self._init_producer_id()
            self._out.append(TxnDone(commit))
        elif code in _FATAL_TXN:
            self._fenced(code)
        else:
            self._txn_coordinator_refused(code)
            self._arm_retry("end_txn", commit)

    def _fenced(self, code: ErrorCode) -> None:
        self.state = ProducerState.FENCED
        self._queues.clear()
        self._sending.clear()
        self._parked.clear()
        self._out.append(ProducerFenced(code))
        self._log(events.ProducerFenced, error=code.name)

    # ------------------------------------------------------------------ plumbing

    def _retry(self, purpose: str, detail: Any) -> None:
        if self.state is ProducerState.FENCED:
            return
        if purpose == "lookup":
            if detail not in self._coordinators and any(self._key_of(e) == detail for e in self._parked):
                self._lookup(detail)
        elif purpose == "produce":
            batch = self._sending.get(detail.tp)
            if batch is not None and batch is detail:
                self._send_batch(batch)  # same sequence: the broker recognises a duplicate
            # else: the batch belonged to a transaction that has ended (aborted): never resend it
        elif purpose == "init":
            self._init_producer_id()
        elif purpose == "add_partitions":
            self._pending_add.discard(detail)
            if self.state is ProducerState.IN_TXN:
                self._add_partition(detail)
        elif purpose == "add_offsets":
            if self.state is not ProducerState.IN_TXN or detail >= len(self._txn_offsets):
                return
            offsets, group_id, _, _ = self._txn_offsets[detail]
            if offsets:
                self._send(AddOffsetsToTxnRequest(self._txn_id, self.producer_id, self.producer_epoch,
                                                  group_id), "AddOffsetsToTxn", ("add_offsets", detail))
        elif purpose == "txn_offsets":
            self._on_add_offsets(detail, AddOffsetsToTxnResponse())
        elif purpose == "end_txn":
            if self.state not in (ProducerState.COMMITTING, ProducerState.ABORTING):
                return
            self._send(EndTxnRequest(self._txn_id, self.producer_id, self.producer_epoch, detail),
                       "EndTxn", ("end_txn", detail))

    def _arm_retry(self, purpose: str, detail: Any) -> None:
        self._retry_seq += 1
        key = ("retry", self._retry_seq)
        self._retry_after[key] = (purpose, detail)
        self._out.append(ArmTimer(key, self._now + self.config.retry_backoff_ms))

    def _send(self, body: Any, api: str, entry: tuple[str, Any]) -> None:
        node = None
        if self.in_cluster:
            node = self._node_for(entry)
            if node is None:
                self._parked.append(entry)  # sent again (rebuilt) once its broker is known
                self._refresh()
                return
        self._send_to(node, body, api, entry)

    def _send_to(self, node: int | None, body: Any, api: str, entry: tuple[str, Any]) -> int:
        self._cid += 1
        self._inflight[self._cid] = entry
        if node is not None:
            self._sent_to[self._cid] = node
        self._out.append(Send(self._cid, api, body, node))
        self._out.append(ArmTimer(("request", self._cid), self._now + self.config.request_timeout_ms))
        return self._cid

    # ------------------------------------------------------------------ a cluster: where requests go

    def _key_of(self, entry: tuple[str, Any]) -> tuple[int, str] | None:
        """The coordinator a request goes to, as FindCoordinator's (key type, key); None: not a coordinator's."""
        purpose, detail = entry
        if purpose in ("add_partitions", "add_offsets", "end_txn") or (purpose == "init" and self.transactional):
            return TXN_KEY, self._txn_id
        if purpose == "txn_offsets" and detail < len(self._txn_offsets):
            return GROUP_KEY, self._txn_offsets[detail][1]
        return None

    def _node_for(self, entry: tuple[str, Any]) -> int | None:
        """The broker `entry`'s request goes to, or None (unknown: a lookup or refresh is asked for)."""
        purpose, detail = entry
        if purpose == "produce":
            return self._leaders.leader(detail.tp)
        key = self._key_of(entry)
        if key is None:  # an idempotent InitProducerId: any broker
            return self._next_bootstrap()
        node = self._coordinators.get(key)
        if node is None:
            self._lookup(key)
        return node

    def _next_bootstrap(self) -> int:
        nodes = self.config.bootstrap_nodes
        node = nodes[self._lookup_turn % len(nodes)]
        self._lookup_turn += 1
        return node

    def _lookup(self, key: tuple[int, str]) -> None:
        """FindCoordinator for `key` (once at a time), to the bootstrap brokers in turn."""
        if key in self._lookups:
            return
        key_type, name = key
        self._lookups[key] = self._send_to(self._next_bootstrap(), FindCoordinatorRequest(name, key_type),
                                           "FindCoordinator", ("lookup", key))

    def _on_lookup(self, key: tuple[int, str], correlation_id: int, resp: FindCoordinatorResponse) -> None:
        if self._lookups.get(key) != correlation_id:
            return
        del self._lookups[key]
        if resp.error_code or resp.node_id < 0:
            self._arm_retry("lookup", key)
            return
        self._coordinators[key] = resp.node_id
        self._unpark()

    def _forget_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)

    def _txn_coordinator_refused(self, code: ErrorCode) -> None:
        if code in _NOT_COORDINATOR and self.transactional:
            self._forget_coordinator(TXN_KEY, self._txn_id)

    def _node_unknown(self, node: int) -> None:
        """`node` stopped answering: it no longer leads or coordinates anything we know of."""
        for key in [k for k, n in self._coordinators.items() if n == node]:
            del self._coordinators[key]
        self._leaders.node_lost(node)

    def _lost(self, purpose: str, detail: Any, backoff: bool) -> None:
        """A request got no answer (its connection closed, or it timed out): ask again."""
        if purpose == "metadata":
            self._leaders.unanswered()
        elif purpose == "lookup":
            self._lookups.pop(detail, None)
            self._arm_retry("lookup", detail)
        elif backoff:
            self._arm_retry(purpose, detail)
        else:
            self._retry(purpose, detail)

    def _unpark(self) -> None:
        """Brokers became known: send again what waited for them (what still has none waits on)."""
        parked, self._parked = self._parked, []
        for purpose, detail in parked:
            self._retry(purpose, detail)

    def _refresh(self) -> None:
        """A Metadata refresh if one is wanted: now, or when its back-off ends (METADATA_TIMER)."""
        if not self.in_cluster:
            return
        due = self._leaders.due_at(self._now)
        if due is None:
            return
        if due > self._now:
            self._out.append(ArmTimer(METADATA_TIMER, due))
            return
        node, req = self._leaders.request(self._now)
        self._leaders.sent(self._send_to(node, req, "Metadata", ("metadata", None)))

    def _log(self, event: Callable[Concatenate[str, str | None, int, int, ProducerState, events.Fields], events.ProducerEvent],
             /, *args: events.Fields.args, **fields: events.Fields.kwargs) -> None:
        """Log `event` with the producer's P fields first (docs/events.md §4.5a)."""
        if self.log_events:
            self._emit_log(event(self.config.client_id, self.config.transactional_id, self.producer_id,
                                 self.producer_epoch, self.state, *args, **fields))
