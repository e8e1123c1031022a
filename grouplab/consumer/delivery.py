"""A consumer application with a delivery guarantee, pure: it reads an input topic as a group
member, "processes" each record by writing it to an output topic, and commits its offsets in one
of three ways (seed notes on delivery semantics):

- at-most-once: commit first, then process. A crash after the commit loses the batch; nothing is
  ever processed twice.
- at-least-once: process, then commit (and commit on revoke). A crash before the commit processes
  the batch again; nothing is lost.
- exactly-once: read-process-write in one transaction: the output records and the input offsets
  commit together (KIP-98, KIP-447), so the read_committed output has every record exactly once.

It composes the member's ConsumerCoordinator and a ProducerMachine over one connection: it
renumbers their requests and routes the answers back, and prefixes the producer's and its own
timer keys. The ConsumerCoordinator's timers keep their keys.

`crash_at` lets a fault land exactly where it matters: "processed" (after processing, before
the commit) or "committed" (after the commit, before processing); the app then emits `CrashNow`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Concatenate, Iterable

from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import (
    ConsumerCoordinator,
    PartitionsAssigned,
    PartitionsLost,
    PartitionsRevoked,
    Send,
)
from grouplab.consumer.membership import ConsumerMembership, member_machine
from grouplab.consumer.producer import (
    Acked,
    ProduceFailed,
    ProducerConfig,
    ProducerFenced,
    ProducerMachine,
    ProducerReady,
    ProducerState,
    TxnDone,
)
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, StepOutputs
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    Record,
)
from grouplab.protocol.types import TopicPartition


class DeliveryMode(Enum):
    AT_MOST_ONCE = "at-most-once"
    AT_LEAST_ONCE = "at-least-once"
    EXACTLY_ONCE = "exactly-once"


@dataclass(slots=True)
class Processed:
    """The application processed (wrote to the output) `records` input records of tp, from
    `first_offset` to `last_offset` (offsets between may be transaction markers or aborted records)."""

    tp: TopicPartition
    first_offset: int
    last_offset: int
    records: int


@dataclass(slots=True)
class Committed:
    tp: TopicPartition
    offset: int  # the next offset to read


@dataclass(slots=True)
class CrashNow:
    point: str


AppOutput = Processed | Committed | CrashNow
"""What a DeliveryApp asks of its driver beyond a ConsumerCoordinator's MemberOutput: reports for
the application's owner, and a crash where a fault wanted one."""


class Phase(Enum):
    IDLE = "idle"  # nothing in hand; may fetch
    FETCHING = "fetching"
    WORKING = "working"  # the fetched batch is being worked on (processing_ms) before anything is written
    COMMITTING_FIRST = "committing_first"  # at-most-once: commit before processing
    PROCESSING = "processing"  # output batches in flight (or a transaction)
    COMMITTING = "committing"  # at-least-once: commit after processing


def input_value(topic: str, partition: int, offset: int) -> bytes:
    """The value of input record `offset` of `partition`: it names itself, so that the output can be
    checked record by record (the input is written at offsets 0, 1, ... of a new topic)."""
    return f"{topic}-{partition}-{offset}".encode()


@dataclass
class OutputLedger:
    """How many times each input record appears in the output topic, as a reader sees it: the
    account of a delivery run (docs/delivery.md), per record and in total."""

    input_topic: str
    records: int  # input records per partition
    counts: dict[int, list[int]] = field(default_factory=dict)  # input partition -> count per input offset

    @classmethod
    def from_output(cls, input_topic: str, partitions: int, records: int, output_values: Iterable[bytes | None]) -> "OutputLedger":
        seen: Counter[bytes | None] = Counter(output_values)
        counts = {p: [seen[input_value(input_topic, p, i)] for i in range(records)] for p in range(partitions)}
        return cls(input_topic, records, counts)

    @property
    def produced(self) -> int:
        return self.records * len(self.counts)

    @property
    def lost(self) -> int:
        return sum(1 for c in self.counts.values() for n in c if n == 0)

    @property
    def duplicated(self) -> int:
        return sum(n - 1 for c in self.counts.values() for n in c if n > 1)

    def record_events(self, mode: str, isolation: str, committed: dict[int, int]) -> list[dict[str, Any]]:
        """The fields of one `delivery_records` event per input partition (docs/events.md)."""
        return [{"mode": mode, "topic": self.input_topic, "partition": p, "produced": self.records,
                 "committed_offset": committed.get(p, 0), "isolation": isolation, "output_counts": c}
                for p, c in sorted(self.counts.items())]


@dataclass
class DeliveryConfig:
    mode: DeliveryMode
    output_topic: str
    fetch_interval_ms: int = 100  # how often an idle app fetches again
    max_records: int = 50  # per fetch and partition
    processing_ms: int = 0  # how long processing a fetched batch takes


@dataclass
class DeliveryApp(StepOutputs):
    consumer: ConsumerConfig
    delivery: DeliveryConfig
    log_events: bool = True
    crash_at: str | None = None  # "processed" or "committed": see the module docstring

    def __post_init__(self) -> None:
        # group.protocol picks the member machine: classic or consumer (KIP-848).
        self.group: ConsumerCoordinator | ConsumerMembership = member_machine(self.consumer, self.log_events)
        txn_id = f"{self.consumer.group_instance_id or self.consumer.client_id}-txn" \
            if self.delivery.mode is DeliveryMode.EXACTLY_ONCE else None
        self.producer = ProducerMachine(ProducerConfig(client_id=self.consumer.client_id, transactional_id=txn_id,
                                                       request_timeout_ms=min(self.consumer.request_timeout_ms, 5_000)),
                                        log_events=self.log_events)
        self.phase = Phase.IDLE
        self.positions: dict[TopicPartition, int] = {}  # next offset to read, once known
        self.committed: dict[TopicPartition, int] = {}
        self.batch: dict[TopicPartition, list[Any]] = {}  # records in hand
        # Where each partition's position goes once the batch is done, and what is committed for
        # it: past its last record and past the transaction markers and aborted records the Fetch
        # read after it (its next_offset); also partitions that returned only those.
        self.batch_end: dict[TopicPartition, int] = {}
        self._cid = 0
        self._routes: dict[int, tuple[str, int]] = {}  # our correlation id -> (machine, its id)
        self._nodes: dict[int, int] = {}  # our correlation id -> the cluster's broker it went to
        self._app_inflight: dict[int, tuple[str, Any]] = {}  # our own requests
        self._outstanding: set[int] = set()  # output batch ids not yet acknowledged
        self._fetched_generation = -1
        self._commit_epoch = -1  # the generation (member epoch) the commit in flight carries
        self._out: list[Any] = []
        self._now = 0

    # ------------------------------------------------------------------ what the shells read

    @property
    def state(self) -> events.AnyMemberState:
        return self.group.state

    @property
    def member_id(self) -> str:
        return self.group.member_id

    @property
    def working(self) -> bool:
        return self.group.working

    @property
    def generation_id(self) -> int:
        return self.group.generation_id

    @property
    def owned(self) -> list[TopicPartition]:
        return self.group.owned

    @property
    def fatal_error(self) -> ErrorCode | None:
        return self.group.fatal_error

    # ------------------------------------------------------------------ inputs

    def start(self, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        self._from_producer(self.producer.start(now_ms))
        self._from_group(self.group.start(now_ms))
        self._arm(("app", "fetch"), now_ms + self.delivery.fetch_interval_ms)
        return self._end()

    def poll(self, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        self._from_group(self.group.poll(now_ms))
        return self._end()

    def close(self, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        self._from_group(self.group.close(now_ms))
        return self._end()

    def on_disconnect(self, now_ms: int, node: int | None = None) -> list[Any]:
        self._begin(now_ms)
        if node is not None:
            # A cluster's broker: only what went to it is lost (the machines forget their own).
            gone = [cid for cid, n in self._nodes.items() if n == node]
            lost = []
            for cid in gone:
                del self._nodes[cid]
                self._routes.pop(cid, None)
                entry = self._app_inflight.pop(cid, None)
                if entry is not None:
                    self._out.append(CancelTimer(("app-timeout", cid)))
                    lost.append(entry)
            self._from_group(self.group.on_disconnect(now_ms, node))
            for purpose, _ in lost:
                self._abandon(purpose)
            return self._end()
        self._routes.clear()
        lost = list(self._app_inflight.values())
        self._app_inflight.clear()
        self._from_group(self.group.on_disconnect(now_ms))
        self._from_producer(self.producer.on_disconnect(now_ms))
        for purpose, _ in lost:
            self._abandon(purpose)
        return self._end()

    def on_timer(self, key: tuple, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        if key and key[0] == "producer":
            self._from_producer(self.producer.on_timer(key[1], now_ms))
        elif key == ("app", "fetch"):
            self._arm(("app", "fetch"), now_ms + self.delivery.fetch_interval_ms)
            self._from_group(self.group.poll(now_ms))  # fetching is polling
            self._maybe_fetch()
        elif key == ("app", "work"):
            if self.phase is Phase.WORKING and self.batch and self._fetched_generation == self.group.generation_id:
                self._start_batch()
            elif self.phase is Phase.WORKING:
                self._clear_batch()
                self.phase = Phase.IDLE
        elif key and key[0] == "app-timeout":
            entry = self._app_inflight.pop(key[1], None)
            if entry is not None:
                self._abandon(entry[0])
        else:
            self._from_group(self.group.on_timer(key, now_ms))
        return self._end()

    def on_response(self, correlation_id: int, body: Any, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        route = self._routes.pop(correlation_id, None)
        self._nodes.pop(correlation_id, None)
        if route is not None:
            machine, cid = route
            if machine == "group":
                self._from_group(self.group.on_response(cid, body, now_ms))
            else:
                self._from_producer(self.producer.on_response(cid, body, now_ms))
            return self._end()
        entry = self._app_inflight.pop(correlation_id, None)
        if entry is not None:
            self._out.append(CancelTimer(("app-timeout", correlation_id)))
            purpose, detail = entry
            if purpose == "offset_fetch" and isinstance(body, OffsetFetchResponse):
                self._on_offset_fetch(detail, body)
            elif purpose == "fetch" and isinstance(body, FetchResponse):
                self._on_fetch(detail, body)
            elif purpose.startswith("commit") and isinstance(body, OffsetCommitResponse):
                self._on_commit(purpose, detail, body)
        return self._end()

    # ------------------------------------------------------------------ the machines' outputs

    def _from_group(self, outputs: list[Any]) -> None:
        for out in outputs:
            kind = type(out)
            if kind is Send:
                self._route("group", out)
            elif kind is PartitionsRevoked:
                self._on_revoked(out.partitions)
                self._out.append(out)
            elif kind is PartitionsLost:
                self._on_lost(out.partitions)
                self._out.append(out)
            elif kind is PartitionsAssigned:
                self._out.append(out)
                self._on_assigned(out.partitions)
            else:
                self._out.append(out)

    def _from_producer(self, outputs: list[Any]) -> None:
        for out in outputs:
            kind = type(out)
            if kind is Send:
                self._route("producer", out)
            elif kind is ArmTimer:
                self._out.append(ArmTimer(("producer", out.key), out.deadline_ms))
            elif kind is CancelTimer:
                self._out.append(CancelTimer(("producer", out.key)))
            elif kind is Acked:
                self._outstanding.discard(out.batch_id)
                self._maybe_processed()
            elif kind is ProduceFailed:
                self._outstanding.discard(out.batch_id)
                self._log(events.OutputFailed, error=out.error.name)
                self._maybe_processed()
            elif kind is TxnDone:
                self._on_txn_done(out.committed)
            elif kind is ProducerFenced:
                # Kafka: a fenced producer cannot recover; the application closes and, if it is
                # not itself the zombie, is started again (a new instance re-initialises).
                self._log(events.AppProducerFenced, error=out.error.name)
                self._clear_batch()
                self.phase = Phase.IDLE
                self._out.append(CrashNow("producer_fenced"))
            elif kind is ProducerReady:
                pass  # nothing waits for it: fetching looks at producer.state (_maybe_fetch)
            else:
                self._out.append(out)  # its LogEvents

    def _route(self, machine: str, send: Send) -> None:
        self._cid += 1
        self._routes[self._cid] = (machine, send.correlation_id)
        if send.node is not None:
            self._nodes[self._cid] = send.node
        self._out.append(Send(self._cid, send.api, send.body, send.node))

    # ------------------------------------------------------------------ the application

    def _on_assigned(self, partitions: list[TopicPartition]) -> None:
        if not partitions:
            self._maybe_fetch()
            return
        exactly_once = self.delivery.mode is DeliveryMode.EXACTLY_ONCE
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        req = OffsetFetchRequest(self.consumer.group_id, [OffsetFetchRequestTopic(t, ps) for t, ps in topics.items()],
                                 require_stable=exactly_once)
        self._send(req, "OffsetFetch", ("offset_fetch", list(partitions)))

    def _on_offset_fetch(self, partitions: list[TopicPartition], resp: OffsetFetchResponse) -> None:
        retry = []
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if tp not in self.group.owned:
                    continue
                if p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                    retry.append(tp)  # a transaction still holds this partition's offset
                    continue
                offset = max(p.committed_offset, 0)  # auto.offset.reset=earliest
                self.positions[tp] = offset
                self.committed[tp] = p.committed_offset
        if retry:
            self._on_assigned(retry)
        self._maybe_fetch()

    def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        # At-least-once commits after every processed batch, and a commit still in flight goes out
        # before the JoinGroup; output not yet acknowledged is never committed for (that could
        # lose it), so the next owner processes it again: a duplicate, which this mode allows.
        if self.delivery.mode is DeliveryMode.EXACTLY_ONCE and self.producer.state is ProducerState.IN_TXN:
            self._from_producer(self.producer.abort_transaction(self._now))
        self._drop(partitions)

    def _on_lost(self, partitions: list[TopicPartition]) -> None:
        if self.delivery.mode is DeliveryMode.EXACTLY_ONCE and self.producer.state is ProducerState.IN_TXN:
            self._from_producer(self.producer.abort_transaction(self._now))
        self._drop(partitions)

    def _drop(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.positions.pop(tp, None)
            self.committed.pop(tp, None)
            self.batch.pop(tp, None)
            self.batch_end.pop(tp, None)
        if not self.batch_end and self.phase is not Phase.IDLE and not self._outstanding:
            self.phase = Phase.IDLE

    def _maybe_fetch(self) -> None:
        if self.phase is not Phase.IDLE or not self.group.working:
            return
        if self.producer.state not in (ProducerState.READY,):
            return
        ready = [tp for tp in sorted(self.group.owned) if tp in self.positions]
        if not ready:
            return
        topics: dict[str, list[FetchPartition]] = {}
        for tp in ready:
            topics.setdefault(tp.topic, []).append(FetchPartition(tp.partition, self.positions[tp], 64 * 1024))
        isolation = 1 if self.delivery.mode is DeliveryMode.EXACTLY_ONCE else 0
        self.phase = Phase.FETCHING
        self._send(FetchRequest([FetchTopic(t, ps) for t, ps in topics.items()], isolation_level=isolation), "Fetch",
                   ("fetch", self.group.generation_id))

    def _on_fetch(self, generation: int, resp: FetchResponse) -> None:
        if self.phase is not Phase.FETCHING:
            return
        self.phase = Phase.IDLE
        batch: dict[TopicPartition, list[Any]] = {}
        ends: dict[TopicPartition, int] = {}
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                if p.error_code or tp not in self.positions:
                    continue
                position = self.positions[tp]
                fetched = [r for r in p.records if r.offset >= position]
                records = fetched[: self.delivery.max_records]
                if records:
                    batch[tp] = records
                    after = records[-1].offset + 1
                    # Past the markers read after the last record, unless max_records left some.
                    ends[tp] = max(after, p.next_offset) if len(records) == len(fetched) else after
                elif p.next_offset > position:
                    ends[tp] = p.next_offset  # only markers or aborted records: nothing to process
        if not ends or generation != self.group.generation_id:
            return
        self.batch, self.batch_end = batch, ends
        self._fetched_generation = generation
        if not batch:
            # Nothing to process, only offsets to step over: commit them, so the lag reaches 0.
            self.phase = Phase.COMMITTING
            self._commit(dict(ends), "commit")
            return
        if self.delivery.processing_ms:
            self.phase = Phase.WORKING
            self._arm(("app", "work"), self._now + self.delivery.processing_ms)
            return
        self._start_batch()

    def _start_batch(self) -> None:
        mode = self.delivery.mode
        if mode is DeliveryMode.AT_MOST_ONCE:
            self.phase = Phase.COMMITTING_FIRST
            self._commit(dict(self.batch_end), "commit_first")
        elif mode is DeliveryMode.AT_LEAST_ONCE:
            self._process()
        else:
            self.producer.begin_transaction()
            self._process()

    def _process(self) -> None:
        self.phase = Phase.PROCESSING
        out_tp_count = 0
        for tp, records in sorted(self.batch.items()):
            outputs = [Record(value=r.value, key=r.key) for r in records]
            out_tp = TopicPartition(self.delivery.output_topic, tp.partition)
            batch_id, outs = self.producer.send(out_tp, outputs, self._now)
            self._outstanding.add(batch_id)
            self._from_producer(outs)
            self._out.append(Processed(tp, records[0].offset, records[-1].offset, len(records)))
            out_tp_count += 1
        in_order = sorted(self.batch)
        self._log(events.BatchProcessed, partitions=[[tp.topic, tp.partition] for tp in in_order],
                  records=sum(len(r) for r in self.batch.values()),
                  first_offsets=[self.batch[tp][0].offset for tp in in_order],
                  last_offsets=[self.batch[tp][-1].offset for tp in in_order])
        if self.delivery.mode is DeliveryMode.EXACTLY_ONCE:
            offsets = dict(self.batch_end)
            self._from_producer(self.producer.send_offsets_to_transaction(
                offsets, self.consumer.group_id, self.group.generation_id, self.group.member_id, self._now))
            if self._crash("processed"):
                return
            self._from_producer(self.producer.commit_transaction(self._now))
        else:
            self._maybe_processed()

    def _maybe_processed(self) -> None:
        """All output of the batch is acknowledged: at-least-once commits now."""
        if self.phase is not Phase.PROCESSING or self._outstanding or self.delivery.mode is DeliveryMode.EXACTLY_ONCE:
            return
        if self.delivery.mode is DeliveryMode.AT_MOST_ONCE:
            self._advance()
            return
        if self._crash("processed"):
            return
        self.phase = Phase.COMMITTING
        self._commit(dict(self.batch_end), "commit")

    def _commit(self, offsets: dict[TopicPartition, int], purpose: str) -> None:
        topics: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, offset in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(OffsetCommitRequestPartition(tp.partition, offset))
        req = OffsetCommitRequest(self.consumer.group_id, [OffsetCommitRequestTopic(t, ps) for t, ps in topics.items()],
                                  generation_id=self.group.generation_id, member_id=self.group.member_id,
                                  group_instance_id=self.consumer.group_instance_id)
        self._commit_epoch = self.group.generation_id  # one commit is out at a time (the phases)
        self._send(req, "OffsetCommit", (purpose, offsets))

    def _on_commit(self, purpose: str, offsets: dict[TopicPartition, int], resp: OffsetCommitResponse) -> None:
        codes = {p.error_code for t in resp.topics for p in t.partitions} or {resp.error_code}
        if codes == {ErrorCode.STALE_MEMBER_EPOCH.value} and self.group.working \
                and self._commit_epoch != self.group.generation_id and all(tp in self.group.owned for tp in offsets):
            # A consumer-protocol member's epoch moved on while the commit was out (its partitions
            # did not): commit again with the epoch it has now, as Kafka's client does.
            self._commit(offsets, purpose)
            return
        ok = codes == {0}
        if ok:
            for tp, offset in offsets.items():
                self.committed[tp] = offset
                self._out.append(Committed(tp, offset))
        if purpose == "commit_first":
            if not ok:
                self._clear_batch()  # not committed: re-read them later, nothing processed yet
                self.phase = Phase.IDLE
                return
            if self._crash("committed"):
                return
            self._process()
        elif purpose == "commit":
            if ok:
                self._advance()
            else:
                self._clear_batch()  # the group moved on; the new owner re-reads from the last commit
                self.phase = Phase.IDLE

    def _on_txn_done(self, committed: bool) -> None:
        if committed:
            for tp, offset in self.batch_end.items():
                self.committed[tp] = offset
                self._out.append(Committed(tp, offset))
            self._advance()
        else:
            # Aborted: the output is invisible to read_committed readers; read the batch again
            # from the last committed offsets.
            for tp in list(self.batch_end):
                if tp in self.committed:
                    self.positions[tp] = max(self.committed[tp], 0)
            self._clear_batch()
            self.phase = Phase.IDLE
            self._outstanding.clear()

    def _advance(self) -> None:
        for tp, offset in self.batch_end.items():
            if tp in self.positions:
                self.positions[tp] = offset
        self._clear_batch()
        self._outstanding.clear()
        self.phase = Phase.IDLE
        self._maybe_fetch()

    def _abandon(self, purpose: str) -> None:
        """A request of ours got no answer: forget the batch in hand; reading resumes from the
        positions (at-least-once re-reads, at-most-once already committed)."""
        if purpose in ("fetch", "commit", "commit_first"):
            if purpose in ("commit", "commit_first"):
                self._clear_batch()
            self.phase = Phase.IDLE if not self._outstanding else self.phase
        elif purpose == "offset_fetch":
            missing = [tp for tp in self.group.owned if tp not in self.positions]
            if missing:
                self._on_assigned(missing)

    def _clear_batch(self) -> None:
        self.batch.clear()
        self.batch_end.clear()

    def _crash(self, point: str) -> bool:
        if self.crash_at == point:
            self.crash_at = None
            self._out.append(CrashNow(point))
            return True
        return False

    # ------------------------------------------------------------------ plumbing

    def _send(self, body: Any, api: str, entry: tuple[str, Any]) -> None:
        self._cid += 1
        self._app_inflight[self._cid] = entry
        self._out.append(Send(self._cid, api, body))
        self._arm(("app-timeout", self._cid), self._now + self.consumer.request_timeout_ms)

    def _arm(self, key: tuple, deadline_ms: int) -> None:
        self._out.append(ArmTimer(key, deadline_ms))

    def _log(self, event: Callable[Concatenate[str, str, int, events.AnyMemberState, events.Fields], events.MemberEvent], /,
             *args: events.Fields.args, **fields: events.Fields.kwargs) -> None:
        """Log `event` with its consumer's M fields first (docs/events.md §4.5b)."""
        if self.log_events:
            self._emit_log(event(self.consumer.group_id, self.group.member_id, self.group.generation_id,
                                 self.group.state, *args, **fields))
