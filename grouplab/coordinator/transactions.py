"""The transaction coordinator, pure: transactional ids, producer epochs, fencing, and the
two-phase end of a transaction (KIP-98).

A transactional id maps to one producer id for good. `InitProducerId` bumps its epoch, which
fences every older instance (a zombie) and aborts whatever transaction the old instance left
open. While a transaction is Ongoing the coordinator knows which partitions it wrote to and which
groups it committed offsets for. Ending it (EndTxn, the timeout, a new instance, a restart) is
Kafka's two phases:

    Ongoing --end--> PrepareCommit/PrepareAbort --every marker written--> CompleteCommit/CompleteAbort

Prepare: the outcome is decided, the groups' staged offsets are committed or dropped, and a COMMIT
or ABORT marker is written into each partition. Usually every marker is written in that step and
the transaction is complete before the step ends. A marker the disk refuses (OSError) is logged
(`marker_write_failed`) and retried on a timer (100 ms, doubling to 1 s: Kafka's retry.backoff.ms
and retry.backoff.max.ms) until it is written; meanwhile the transaction stays Prepare*, durable
as such, and its producer's next requests are answered CONCURRENT_TRANSACTIONS. A coordinator that
restarts with a Prepare* record writes the markers still missing (the restart sweep). So no end
of a transaction fails, and every transaction ends. A transaction left open longer than its
timeout is aborted and the epoch bumped, so its producer is fenced too.

The markers and the offsets live elsewhere (the partition logs, each group's offset store): the
coordinator reaches them through the functions it is given, `write_marker`, `complete_offsets`
and `txn_open`, the way Kafka's transaction coordinator sends WriteTxnMarkers to the partition
leaders. Time comes as `now_ms`; timers and replies are outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Concatenate, Iterable

from grouplab.coordinator.group_log import TxnRecord
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, Output, Persist, StepOutputs
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from grouplab.protocol.states import TxnState
from grouplab.protocol.types import TopicPartition

MAX_EPOCH = 32767  # Kafka's producer epoch is an int16
MARKER_RETRY_BACKOFF_MS = 100  # Kafka's retry.backoff.ms: the first retry of a marker the disk refused
MARKER_RETRY_BACKOFF_MAX_MS = 1000  # Kafka's retry.backoff.max.ms (KIP-580): where the doubling stops
PREPARE = {True: TxnState.PREPARE_COMMIT, False: TxnState.PREPARE_ABORT}
COMPLETE = {True: TxnState.COMPLETE_COMMIT, False: TxnState.COMPLETE_ABORT}
PREPARING = frozenset(PREPARE.values())


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    started_ms: int = -1
    # While Prepare*: the partitions still without their marker, why the transaction is ending
    # (for its transaction_committed/aborted), and how many rounds of markers have failed.
    unmarked: set[TopicPartition] = field(default_factory=set)
    end_reason: str = ""
    failed_rounds: int = 0


def timer_key(transactional_id: str) -> tuple:
    """The transaction's timeout."""
    return ("txn", transactional_id)


def marker_timer_key(transactional_id: str) -> tuple:
    """The next try of the markers a Prepare* transaction still lacks."""
    return ("txn", transactional_id, "markers")


def marker_backoff_ms(failed_rounds: int) -> int:
    """Kafka's exponential retry back-off without its jitter (the machines draw no random numbers)."""
    return min(MARKER_RETRY_BACKOFF_MS << min(failed_rounds - 1, 16), MARKER_RETRY_BACKOFF_MAX_MS)


class TransactionCoordinator(StepOutputs):
    """`write_marker(tp, producer_id, epoch, commit, now_ms)` ends the transaction on one partition
    (an OSError: the disk refused it, nothing was written, try again later);
    `complete_offsets(group_id, producer_id, commit, now_ms)` makes a group's staged offsets visible
    or drops them, and returns the outputs that go with it (Persist records, events);
    `txn_open(tp, producer_id)` says whether the producer still has a transaction open on the
    partition (after a restart: does it still need its marker?); `allocate_producer_id()` hands out
    producer ids (shared with idempotent producers); `partition_exists(tp)` checks metadata;
    `persist(record)` returns the output that makes a record durable (or None without durability)."""

    def __init__(
        self,
        allocate_producer_id: Callable[[], int],
        write_marker: Callable[[TopicPartition, int, int, bool, int], Any],
        complete_offsets: Callable[[str, int, bool, int], list[Output] | None],
        partition_exists: Callable[[TopicPartition], bool],
        persist: Callable[[TxnRecord], Output | None] = lambda record: None,
        max_timeout_ms: int = 900_000,
        txn_open: Callable[[TopicPartition, int], bool] = lambda tp, producer_id: True,
    ) -> None:
        self.allocate_producer_id = allocate_producer_id
        self.write_marker = write_marker
        self.complete_offsets = complete_offsets
        self.partition_exists = partition_exists
        self.persist = persist
        self.max_timeout_ms = max_timeout_ms
        self.txn_open = txn_open
        self.txns: dict[str, TxnMetadata] = {}
        self._out: list[Output] = []
        self._held: list[Output] = []  # the groups' offset records, written with the transaction's (_persist)
        self._now = 0

    def _begin(self, now_ms: int) -> None:
        super()._begin(now_ms)
        self._held = []

    # ------------------------------------------------------------------ requests

    def init_producer_id(self, req: InitProducerIdRequest, reply_to: Any, now_ms: int) -> list[Output]:
        self._begin(now_ms)
        tid = req.transactional_id
        assert tid is not None, "non-transactional InitProducerId is the data plane's"
        if not 0 < req.transaction_timeout_ms <= self.max_timeout_ms:
            self._reply(reply_to, InitProducerIdResponse(
                error_code=ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                error_message=f"transaction.timeout.ms must be in (0, {self.max_timeout_ms}] "
                              f"(transaction.max.timeout.ms), got {req.transaction_timeout_ms}"))
            return self._end()
        txn = self.txns.get(tid)
        if txn is not None and txn.state in PREPARING:
            # Kafka: the last transaction is still writing its markers; try again later.
            self._reply(reply_to, InitProducerIdResponse(error_code=ErrorCode.CONCURRENT_TRANSACTIONS))
            return self._end()
        if txn is None:
            txn = self.txns[tid] = TxnMetadata(tid, self.allocate_producer_id(), 0, req.transaction_timeout_ms)
            self._log(events.ProducerIdAssigned, txn, new=True)
        else:
            # The new instance's arrival ends the old one's transaction: abort it.
            if txn.state is TxnState.ONGOING and not self._end_transaction(
                    txn, commit=False, why="a new producer instance initialised"):
                # Markers pending: the old instance is fenced now, the new one asks again once
                # the abort is complete (and gets an epoch of its own then), as in Kafka.
                self._fence(txn)
                self._log(events.ProducerEpochBumped, txn, reason="InitProducerId (older instances are fenced)")
                self._persist(txn)
                self._reply(reply_to, InitProducerIdResponse(error_code=ErrorCode.CONCURRENT_TRANSACTIONS))
                return self._end()
            self._bump_epoch(txn)
            txn.timeout_ms = req.transaction_timeout_ms
            txn.state = TxnState.EMPTY
            self._log(events.ProducerEpochBumped, txn, reason="InitProducerId (older instances are fenced)")
        self._persist(txn)
        self._reply(reply_to, InitProducerIdResponse(producer_id=txn.producer_id, producer_epoch=txn.producer_epoch))
        return self._end()

    def add_partitions(self, req: AddPartitionsToTxnRequest, reply_to: Any, now_ms: int) -> list[Output]:
        self._begin(now_ms)
        txn, code = self._validate(req.transactional_id, req.producer_id, req.producer_epoch)
        tps = [TopicPartition(t.name, p) for t in req.topics for p in t.partitions]
        per_partition: dict[TopicPartition, int] = {}
        if code is None:
            unknown = [tp for tp in tps if not self.partition_exists(tp)]
            for tp in tps:
                per_partition[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.NONE
            if unknown:
                # Kafka: the whole request fails; the good partitions answer OPERATION_NOT_ATTEMPTED
                # (grouplab has no such code: they get the same error so nothing is half-added).
                per_partition = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in tps}
            elif txn is not None and txn.state in PREPARING:
                per_partition = {tp: ErrorCode.CONCURRENT_TRANSACTIONS for tp in tps}
            else:
                assert txn is not None
                self._begin_if_needed(txn)
                new = set(tps) - txn.partitions
                txn.partitions |= set(tps)
                if new:
                    self._persist(txn)
                    self._log(events.PartitionsAddedToTxn, txn, partitions=sorted([tp.topic, tp.partition] for tp in new))
        else:
            per_partition = {tp: code for tp in tps}
        results: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
        for tp in tps:
            results.setdefault(tp.topic, []).append(AddPartitionsToTxnPartitionResult(tp.partition, per_partition[tp]))
        self._reply(reply_to, AddPartitionsToTxnResponse(
            results=[AddPartitionsToTxnTopicResult(name, parts) for name, parts in results.items()]))
        return self._end()

    def add_offsets(self, req: AddOffsetsToTxnRequest, reply_to: Any, now_ms: int) -> list[Output]:
        self._begin(now_ms)
        txn, code = self._validate(req.transactional_id, req.producer_id, req.producer_epoch)
        if code is None and txn is not None and txn.state in PREPARING:
            code = ErrorCode.CONCURRENT_TRANSACTIONS
        if code is None:
            assert txn is not None
            self._begin_if_needed(txn)
            if req.group_id not in txn.groups:
                txn.groups.add(req.group_id)
                self._persist(txn)
        self._reply(reply_to, AddOffsetsToTxnResponse(error_code=code or ErrorCode.NONE))
        return self._end()

    def end_txn(self, req: EndTxnRequest, reply_to: Any, now_ms: int) -> list[Output]:
        self._begin(now_ms)
        txn, code = self._validate(req.transactional_id, req.producer_id, req.producer_epoch)
        if code is None:
            assert txn is not None
            if txn.state is TxnState.ONGOING:
                # Answered NONE once the outcome is durable, even with markers still pending.
                self._end_transaction(txn, req.committed, why="EndTxn")
                self._persist(txn)
            elif txn.state is PREPARE[req.committed]:
                code = ErrorCode.CONCURRENT_TRANSACTIONS  # a retry while its markers are pending (Kafka)
            elif txn.state is not COMPLETE[req.committed]:
                # Kafka: EndTxn with no transaction, or the opposite outcome of the one decided.
                code = ErrorCode.INVALID_TXN_STATE
            # else: a retry of the EndTxn that completed the transaction: answer success again.
        self._reply(reply_to, EndTxnResponse(error_code=code or ErrorCode.NONE))
        return self._end()

    def check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        """For TxnOffsetCommit and transactional produce: is this producer the current one of an
        Ongoing transaction? None if so, else the error to answer."""
        txn, code = self._validate(transactional_id, producer_id, producer_epoch)
        if code is None and txn is not None and txn.state is not TxnState.ONGOING:
            return ErrorCode.INVALID_TXN_STATE
        return code

    def in_transaction(self, producer_id: int, producer_epoch: int, tp: TopicPartition) -> ErrorCode | None:
        """A transactional batch may only go to a partition added to the producer's Ongoing
        transaction, with the epoch the coordinator gave it last: an older one is a fenced instance
        (PRODUCER_FENCED), a newer one was never given (INVALID_PRODUCER_EPOCH), and a producer id
        no transactional id owns gets INVALID_PRODUCER_ID_MAPPING. So a transactional batch never
        moves a partition's producer epoch away from the coordinator's."""
        txn = self.owner(producer_id)
        if txn is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch < txn.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if producer_epoch > txn.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if txn.state is not TxnState.ONGOING or tp not in txn.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return None

    def owner(self, producer_id: int) -> TxnMetadata | None:
        """The transactional id that owns `producer_id` now, if one does. Its epoch is the
        coordinator's to move (InitProducerId, a timeout, a restart): the data plane refuses any
        batch that would move it on a partition (coordinator/data_plane.py)."""
        for txn in self.txns.values():
            if txn.producer_id == producer_id:
                return txn
        return None

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's partitions leave every transaction, so no marker is ever written to
        them (Kafka's coordinator drops from a transaction a partition whose topic is gone). Not
        persisted: a restart writes markers only where a log holds the transaction open."""
        for txn in self.txns.values():
            txn.partitions = {tp for tp in txn.partitions if tp.topic != topic}
            txn.unmarked = {tp for tp in txn.unmarked if tp.topic != topic}

    def on_timer(self, key: tuple, now_ms: int) -> list[Output]:
        self._begin(now_ms)
        txn = self.txns.get(key[1])
        if txn is not None and key == marker_timer_key(txn.transactional_id):
            if txn.state in PREPARING and self._write_markers(txn):
                self._persist(txn)  # now complete
        elif txn is not None and txn.state is TxnState.ONGOING and now_ms >= txn.started_ms + txn.timeout_ms:
            done = self._end_transaction(txn, commit=False, why=f"transaction.timeout.ms ({txn.timeout_ms} ms) expired")
            self._fence_after_abort(txn, done)  # Kafka fences the timed-out producer
            self._persist(txn)
        return self._end()

    # ------------------------------------------------------------------ durability

    def record_of(self, txn: TxnMetadata) -> TxnRecord:
        return TxnRecord(txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.timeout_ms, txn.state.value,
                         sorted((tp.topic, tp.partition) for tp in txn.partitions), sorted(txn.groups), txn.started_ms)

    def restore(self, record: TxnRecord, now_ms: int) -> list[Output]:
        """Load a transactional id's state. A transaction that was Ongoing when the coordinator
        stopped is aborted now and its producer fenced: the offsets it staged lived only in memory,
        so committing it later would publish its output without its input offsets. The producer's
        application restarts, re-initialises and redoes the work from the committed offsets. One
        found in PrepareCommit/PrepareAbort has its outcome decided (and answered): its missing
        markers are written now, or retried like any others."""
        self._begin(now_ms)
        txn = self.txns[record.transactional_id] = TxnMetadata(
            record.transactional_id, record.producer_id, record.producer_epoch, record.timeout_ms,
            TxnState(record.state), {TopicPartition(t, p) for t, p in record.partitions}, set(record.groups),
            record.started_ms)
        if txn.state is TxnState.ONGOING:
            done = self._end_transaction(txn, commit=False,
                                         why="the coordinator restarted (staged offsets are not durable)")
            self._fence_after_abort(txn, done)
            self._log(events.ProducerEpochBumped, txn, reason="its transaction was aborted at restart")
            self._persist(txn)
        elif txn.state in PREPARING:
            # The restart sweep: its offsets were written with the Prepare record; what may be
            # missing are markers. A partition where the producer has no transaction open has its
            # marker already (or never had a record of this transaction): none is written twice.
            txn.end_reason = "the coordinator restarted while its markers were pending"
            txn.unmarked = {tp for tp in txn.partitions if self.txn_open(tp, txn.producer_id)}
            if self._write_markers(txn):
                self._persist(txn)
        return self._end()

    def end_dangling(self, open_txns: Iterable[tuple[TopicPartition, int]], now_ms: int) -> list[Output]:
        """The restart sweep's second half, after every record is restored: a partition log that
        holds an open transaction of a producer whose transactional id has *completed* it lost that
        marker (it was appended but not synced before a power cut, docs/durability.md), and nothing
        else would ever end it: read_committed readers would stop there for good. The outcome is
        the durable one; the transaction goes back to Prepare* for those partitions only and its
        markers are written (or retried) as any others. Its offsets were published already."""
        self._begin(now_ms)
        dangling: dict[str, set[TopicPartition]] = {}
        for tp, producer_id in open_txns:
            txn = self.owner(producer_id)
            if txn is not None and txn.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                dangling.setdefault(txn.transactional_id, set()).add(tp)
        for tid, partitions in sorted(dangling.items()):
            txn = self.txns[tid]
            commit = txn.state is TxnState.COMPLETE_COMMIT
            txn.state = PREPARE[commit]
            txn.partitions, txn.unmarked, txn.groups = set(partitions), set(partitions), set()
            txn.end_reason = "its marker was not on disk after the restart (lost before it was synced): written again"
            self._persist(txn)
            if self._write_markers(txn):
                self._persist(txn)
        return self._end()

    # ------------------------------------------------------------------ helpers

    def _validate(self, tid: str, producer_id: int, epoch: int) -> tuple[TxnMetadata | None, ErrorCode | None]:
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != producer_id:
            return txn, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch < txn.producer_epoch:
            return txn, ErrorCode.PRODUCER_FENCED
        if epoch > txn.producer_epoch:
            return txn, ErrorCode.INVALID_PRODUCER_EPOCH
        return txn, None

    def _begin_if_needed(self, txn: TxnMetadata) -> None:
        if txn.state is not TxnState.ONGOING:
            txn.state = TxnState.ONGOING
            txn.started_ms = self._now
            txn.partitions.clear()
            txn.groups.clear()
            self._out.append(ArmTimer(timer_key(txn.transactional_id), self._now + txn.timeout_ms))
            self._log(events.TransactionStarted, txn)

    def _end_transaction(self, txn: TxnMetadata, commit: bool, why: str) -> bool:
        """Ongoing -> Prepare*: the groups' staged offsets committed or dropped (their records held
        for `_persist`), the timeout cancelled, a marker tried on every partition. True when every
        marker was written and the transaction is complete."""
        txn.state = PREPARE[commit]
        txn.end_reason = why
        txn.unmarked = set(txn.partitions)
        txn.failed_rounds = 0
        for group_id in sorted(txn.groups):
            for out in self.complete_offsets(group_id, txn.producer_id, commit, self._now) or []:
                (self._held if isinstance(out, Persist) else self._out).append(out)
        self._out.append(CancelTimer(timer_key(txn.transactional_id)))
        return self._write_markers(txn)

    def _write_markers(self, txn: TxnMetadata) -> bool:
        """Try the marker of every partition that lacks one; complete the transaction if none is
        left, else log each failure and arm the retry. True when complete."""
        commit = txn.state is TxnState.PREPARE_COMMIT
        failed: list[tuple[TopicPartition, OSError]] = []
        for tp in sorted(txn.unmarked):
            try:
                self.write_marker(tp, txn.producer_id, txn.producer_epoch, commit, self._now)
            except OSError as exc:  # the disk refused it: nothing was written (coordinator/partition_log.py)
                failed.append((tp, exc))
            else:
                txn.unmarked.discard(tp)
        if not failed:
            self._complete(txn)
            return True
        txn.failed_rounds += 1
        backoff = marker_backoff_ms(txn.failed_rounds)
        for tp, error in failed:
            self._log(events.MarkerWriteFailed, txn, topic=tp.topic, partition=tp.partition, error=repr(error),
                      attempt=txn.failed_rounds, retry_backoff_ms=backoff)
        self._out.append(ArmTimer(marker_timer_key(txn.transactional_id), self._now + backoff))
        return False

    def _complete(self, txn: TxnMetadata) -> None:
        commit = txn.state is TxnState.PREPARE_COMMIT
        txn.state = COMPLETE[commit]
        self._log(events.TransactionCommitted if commit else events.TransactionAborted, txn, reason=txn.end_reason,
                  partitions=sorted([tp.topic, tp.partition] for tp in txn.partitions), groups=sorted(txn.groups))
        txn.partitions = set()
        txn.groups = set()
        txn.end_reason = ""
        txn.failed_rounds = 0

    def _fence_after_abort(self, txn: TxnMetadata, complete: bool) -> None:
        """The bump that fences the producer of a transaction the coordinator aborted: the usual
        one once the abort is complete, `_fence` while its markers are pending."""
        if complete:
            self._bump_epoch(txn)
        else:
            self._fence(txn)

    def _fence(self, txn: TxnMetadata) -> None:
        """The epoch bump of an abort whose markers are pending: the old instance is fenced at
        once. Never a new producer id, which the pending markers must still carry (every epoch
        handed out is at most MAX_EPOCH - 1, so this one fits; the next InitProducerId rotates)."""
        if txn.producer_epoch < MAX_EPOCH:
            txn.producer_epoch += 1

    def _bump_epoch(self, txn: TxnMetadata) -> None:
        if txn.producer_epoch >= MAX_EPOCH - 1:
            txn.producer_id, txn.producer_epoch = self.allocate_producer_id(), 0  # Kafka: a fresh id
        else:
            txn.producer_epoch += 1

    def _persist(self, txn: TxnMetadata) -> None:
        """The transaction's record with the offset records its end produced, as one batch of
        consecutive Persists. A Prepare* record goes first: if only a prefix became durable, the
        restart sweep still completes the decided outcome (offsets lost at worst: reprocessed, never
        skipped). A complete one goes last, as the offsets' records did before: its markers are
        all written, and a restart that finds the transaction Ongoing instead only adds markers to
        partitions that have theirs already."""
        held, self._held = self._held, []
        out = self.persist(self.record_of(txn))
        record = [out] if out is not None else []
        self._out += [*record, *held] if txn.state in PREPARING else [*held, *record]

    def _log(self, event: Callable[Concatenate[str, int, int, TxnState, events.Fields], events.TxnEvent],
             txn: TxnMetadata, /, *args: events.Fields.args, **fields: events.Fields.kwargs) -> None:
        """Log `event` with `txn`'s T fields first (docs/events.md §4.1b)."""
        if self.log_events:
            self._emit_log(event(txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.state, *args, **fields))
