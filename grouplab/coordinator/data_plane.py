"""The broker's data plane, pure apart from the log store it calls: Produce, Fetch, ListOffsets and
InitProducerId for a plain idempotent producer (docs/protocol.md §3.11-3.14).

Each handler takes the broker as a `DataPlaneHost` (its `topics`, `logs` and `txn`: a Protocol, so
this module does not import the broker that imports it), a decoded request, the shell's reply
token and `now_ms`, and returns outputs like every other handler. The partition logs
(coordinator/partition_log.py) hold the rules of appending (offsets, idempotent sequences,
transactions); this module maps requests onto them and their answers onto Kafka's responses.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, TypeVar

from grouplab.coordinator.partition_log import (
    INT64_MAX,
    READ_COMMITTED,
    LogError,
    LogStore,
    OffsetOutOfRange,
    PartitionLog,
    batch_size,
    fetched_size,
)
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.topics import TopicStore
from grouplab.coordinator.transactions import TransactionCoordinator
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent, Output, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.types import TopicPartition
from grouplab.protocol.messages import (
    AbortedTransaction,
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
    FetchedBatch,
    FetchPartition,
    FetchedRecord,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
    RecordBatch,
    RecordHeader,
)
from grouplab.protocol.schema import array_header_size, bin_size, int_size, keys_size, packed_size

ACKS = (-1, 0, 1)
ISOLATION_LEVELS = (0, 1)


class DataPlaneHost(Protocol):
    """What the data plane reads of the broker. Read at every request, not held: a shell may hand
    the broker another log store after it is built (CoordinatorServer's recovery does)."""

    @property
    def topics(self) -> TopicStore: ...

    @property
    def logs(self) -> LogStore: ...

    @property
    def txn(self) -> TransactionCoordinator: ...

    @property
    def config(self) -> BrokerConfig: ...


def _exists(broker: DataPlaneHost, topic: str, partition: int) -> bool:
    count = broker.topics.partitions.get(topic)
    return count is not None and 0 <= partition < count


def _unknown(topic: str, partition: int) -> str:
    return f"{topic}-{partition} does not exist"


# ----------------------------------------------------------------------------- Produce


def handle_produce(broker: DataPlaneHost, req: ProduceRequest, reply_to: Any, now_ms: int) -> list[Output]:
    """Append each partition's batch. acks=0 gets no response at all (not even on error)."""
    out: list[Output] = []
    responses = []
    bad_acks = req.acks not in ACKS
    for topic_data in req.topic_data:
        name = topic_data.name
        parts = []
        for pd in topic_data.partition_data:
            index = pd.index
            if bad_acks:
                parts.append(ProducePartitionResponse(index, ErrorCode.INVALID_REQUEST,
                                                      error_message=f"acks must be -1, 0 or 1, got {req.acks}"))
                continue
            if not _exists(broker, name, index):
                parts.append(ProducePartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                      error_message=_unknown(name, index)))
                continue
            log = broker.logs.log(name, index)
            batch = pd.records
            refused = _producer_refusal(broker, batch, log, TopicPartition(name, index))
            if refused is not None:
                code, message = refused
                if not batch.is_transactional:  # (the transaction coordinator's refusals are not logged)
                    out.append(LogEvent(now_ms, events.ProduceRejected(
                        name, index, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                        records=len(batch.records), error=code.name, message=message)))
                parts.append(ProducePartitionResponse(index, code, error_message=message))
                continue
            try:
                result = log.append(batch, now_ms)
            except OSError as exc:  # the disk refused: nothing was appended (the store undid any part)
                out.append(LogEvent(now_ms, events.PartitionWriteFailed(name, index, error=repr(exc))))
                parts.append(ProducePartitionResponse(index, ErrorCode.KAFKA_STORAGE_ERROR,
                                                      log_start_offset=log.log_start_offset,
                                                      error_message=f"writing the log failed: {exc!r}"))
                continue
            if result.error_code:
                out.append(LogEvent(now_ms, events.ProduceRejected(
                    name, index, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                    records=len(batch.records), error=ErrorCode.from_code(result.error_code).name,
                    message=result.error_message)))
            elif result.duplicate:
                out.append(LogEvent(now_ms, events.DuplicateBatchAcked(
                    name, index, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                    records=len(batch.records), base_offset=result.base_offset)))
            parts.append(ProducePartitionResponse(index, result.error_code, result.base_offset,
                                                  result.log_append_time_ms, log.log_start_offset,
                                                  result.error_message))
        responses.append(ProduceTopicResponse(name, parts))
    if req.acks != 0:
        response = ProduceResponse(responses=responses)
        if bad_acks:
            response.error_code = ErrorCode.INVALID_REQUEST
            response.error_message = f"acks must be -1, 0 or 1, got {req.acks}"
        out.insert(0, Reply(reply_to, response))
    return out


def _producer_refusal(broker: DataPlaneHost, batch: RecordBatch, log: PartitionLog,
                      tp: TopicPartition) -> tuple[ErrorCode, str] | None:
    """Who may write with this batch's producer id, checked before the log sees it (so a refused
    batch changes nothing, not even the partition's producer state). None when the log may judge it.

    A transactional producer id's epoch belongs to its transaction coordinator: only InitProducerId,
    a transaction timeout or a restart moves it, and its markers carry it. A batch that could move
    it on a partition (a higher epoch, a non-transactional batch) would make the coordinator's next
    marker look stale there, and the transaction could then never end. So:

    - A transactional batch must come from the current epoch of an Ongoing transaction that added
      this partition (`TransactionCoordinator.in_transaction`): an older epoch is PRODUCER_FENCED
      (90), an epoch the coordinator never gave INVALID_PRODUCER_EPOCH (47), a producer id no
      transactional id owns INVALID_PRODUCER_ID_MAPPING (49), otherwise INVALID_TXN_STATE (48).
    - A non-transactional batch whose producer id a transactional id owns is refused whatever its
      epoch. If that producer has a transaction open on this partition, with INVALID_TXN_STATE
      (48): Kafka's ProducerStateManager answers exactly that ("Expected transactional write from
      producer ...") when a non-transactional batch comes while the producer's transaction is open.
      Otherwise with INVALID_PRODUCER_ID_MAPPING (49): the id is mapped to a transactional id and
      this request does not come from it (where Kafka would append and let the epoch move).
    - A producer id this cluster never handed out (InitProducerId allocates them, in order, never
      twice) is refused with INVALID_PRODUCER_ID_MAPPING (49), transactional or not: accepted, it
      would give a partition an epoch for an id the coordinator may hand to a transactional id
      later, whose batches and markers would then look stale there.

    Ids that are not 64-bit non-negative numbers (-1: no producer) are left to the log, which
    appends without idempotence or refuses the batch as CORRUPT_MESSAGE."""
    pid = batch.producer_id
    if batch.is_transactional:
        refusal = broker.txn.in_transaction(pid, batch.producer_epoch, tp)
        return None if refusal is None else (refusal, f"transactional batch refused: {refusal.name}")
    if not 0 <= pid <= INT64_MAX:
        return None
    if not broker.logs.is_allocated(pid):
        return (ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                f"producer id {pid} was never allocated: InitProducerId hands out producer ids")
    if broker.txn.owner(pid) is not None:
        if pid in log.open_txns:
            return (ErrorCode.INVALID_TXN_STATE, f"producer {pid} has a transaction open on {tp.topic}-{tp.partition}: "
                                                 f"expected a transactional batch")
        return (ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                f"producer id {pid} belongs to a transactional id: only its transactional batches are accepted")
    return None


# ----------------------------------------------------------------------------- Fetch


class FetchRead(NamedTuple):
    """What a Fetch returns, read from the logs (`read_fetch`)."""

    responses: list[FetchTopicResponse]
    size: int  # the records' (or batches') bytes as max_bytes counts them
    error: bool  # some partition answers with an error


def handle_fetch(broker: DataPlaneHost, req: FetchRequest, reply_to: Any, now_ms: int) -> list[Output]:
    """Answer at once from the logs (no long poll: max_wait_ms and min_bytes are ignored; the
    Kafka-wire listener parks a Fetch before it hands it over, kafka_wire/purgatory.py)."""
    if req.isolation_level not in ISOLATION_LEVELS:
        return [Reply(reply_to, FetchResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=(
            f"isolation_level must be 0 (read_uncommitted) or 1 (read_committed), got {req.isolation_level}")))]
    # `view`: a partition with no log yet answers as an empty one and none is created (a Fetch
    # over 20,000 partitions must not leave 20,000 logs behind).
    return [Reply(reply_to, FetchResponse(responses=read_fetch(broker, req, broker.logs.view).responses))]


def read_fetch(broker: DataPlaneHost, req: FetchRequest,
               log_of: Callable[[str, int], PartitionLog]) -> FetchRead:
    """The answer of a Fetch (its isolation level valid), from the logs `log_of` gives (Broker's
    `logs.view`: a partition that has no log reads as an empty one, and none is created).

    Each partition is answered once: a partition listed again replaces the earlier entry's
    fetch_offset and partition_max_bytes but keeps its place (Kafka's fetch map). Sizes, as
    Kafka: records (or whole batches, with as_batches) fill min(partition_max_bytes, what is left
    of max_bytes), in request order; only the first partition that has data returns some even
    over both limits (so a consumer always progresses), every later one returns only what fits.
    grouplab's own third limit: the records of one answer take at most half of
    grouplab.response.max.bytes on the wire (the rest is the partitions' room), so that no answer
    a consumer needs is too large to send."""
    wanted: dict[str, dict[int, FetchPartition]] = {}
    for ft in req.topics:
        by_index = wanted.setdefault(ft.topic, {})
        for fp in ft.partitions:
            by_index[fp.partition] = fp  # a repeat replaces the entry, in the first one's place
    remaining = max(req.max_bytes, 0)
    wire_left = broker.config.response_max_bytes // 2  # the records' bytes in the encoded answer
    min_one = True  # until a partition has returned data
    gathered = 0
    error = False
    topics = []
    for topic, by_index in wanted.items():
        parts = []
        for index, fp in by_index.items():
            if not _exists(broker, topic, index):
                error = True
                parts.append(FetchPartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                    error_message=_unknown(topic, index)))
                continue
            if fp.partition_max_bytes < 0:
                error = True
                parts.append(FetchPartitionResponse(index, ErrorCode.INVALID_FETCH_SIZE, error_message=(
                    f"partition_max_bytes must be >= 0, got {fp.partition_max_bytes}")))
                continue
            log = log_of(topic, index)
            resp = FetchPartitionResponse(index, high_watermark=log.high_watermark,
                                          last_stable_offset=log.last_stable_offset,
                                          log_start_offset=log.log_start_offset)
            # A record's encoding is never smaller than its size as max_bytes counts it, so
            # wire_left bounds the read as well.
            limit = min(fp.partition_max_bytes, remaining, wire_left)
            try:
                if req.as_batches:
                    size, wire = _read_batches(log, fp.fetch_offset, limit, req.isolation_level, wire_left, min_one,
                                               resp)
                else:
                    size, wire = _read_records(log, fp.fetch_offset, limit, req.isolation_level, wire_left, min_one,
                                               resp)
            except OffsetOutOfRange as exc:
                error = True
                resp.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                resp.error_message = exc.message
            else:
                if resp.records or resp.batches:
                    min_one = False
                    gathered += size
                    remaining = max(remaining - size, 0)
                    wire_left = max(wire_left - wire, 0)
            parts.append(resp)
        topics.append(FetchTopicResponse(topic, parts))
    return FetchRead(topics, gathered, error)


def _read_records(log: PartitionLog, offset: int, limit: int, isolation_level: int, wire_left: int, min_one: bool,
                  resp: FetchPartitionResponse) -> tuple[int, int]:
    """grouplab's answer: the records from `offset` on (markers and, read_committed, aborted
    records left out) and where to fetch next. Returns their size and wire size."""
    read = log.read_records(offset, limit, isolation_level, min_one=min_one)
    records, wire = _within(read.records, record_wire_size, wire_left, min_one)
    resp.records = records
    if len(records) == len(read.records):
        resp.next_offset = read.next_offset
        return read.size, wire
    resp.next_offset = records[-1].offset + 1 if records else offset
    return sum(fetched_size(r) for r in records), wire


def _read_batches(log: PartitionLog, offset: int, limit: int, isolation_level: int, wire_left: int, min_one: bool,
                  resp: FetchPartitionResponse) -> tuple[int, int]:
    """Kafka's answer: the stored batches, whole, markers included, and under read_committed
    the aborted transactions that overlap them. Returns their size and wire size."""
    read = log.read_batches(offset, limit, isolation_level, min_one=min_one)
    batches, wire = _within(read.batches, batch_wire_size, wire_left, min_one)
    resp.batches = batches
    resp.next_offset = read.next_offset if len(batches) == len(read.batches) else (
        batches[-1].records[-1].offset + 1 if batches else offset)
    if isolation_level == READ_COMMITTED:
        resp.aborted_transactions = [AbortedTransaction(a.producer_id, a.first_offset)
                                     for a in log.aborted_transactions(offset, resp.next_offset)]
    size = read.size if len(batches) == len(read.batches) else sum(batch_size(b) for b in batches)
    return size, wire


_RECORD_KEYS = keys_size(FetchedRecord)
_HEADER_KEYS = keys_size(RecordHeader)
_BATCH_KEYS = keys_size(FetchedBatch)


def record_wire_size(r: FetchedRecord) -> int:
    """The bytes `r` takes in an encoded Fetch answer, exactly: packed_size's parts called for the
    record's field types directly, since every record a Fetch returns is sized (the generic calls
    were a tenth of a delivery simulation's time)."""
    value, key, headers = r.value, r.key, r.headers
    size = (_RECORD_KEYS + int_size(r.offset) + int_size(r.timestamp) + int_size(r.producer_id)
            + (1 if value is None else bin_size(len(value))) + (1 if key is None else bin_size(len(key))))
    if not headers:
        return size + 1  # an empty array
    size += array_header_size(len(headers))
    for h in headers:
        size += _HEADER_KEYS + packed_size(h.key) + packed_size(h.value)
    return size


def batch_wire_size(b: FetchedBatch) -> int:
    """The bytes `b` takes in an encoded Fetch answer, exactly."""
    return (_BATCH_KEYS + packed_size(b.base_offset) + array_header_size(len(b.records))
            + sum(record_wire_size(r) for r in b.records) + packed_size(b.producer_id)
            + packed_size(b.producer_epoch) + packed_size(b.base_sequence) + 2)  # the two booleans


_Item = TypeVar("_Item")


def _within(items: list[_Item], size_of: Callable[[_Item], int], wire_left: int,
            min_one: bool) -> tuple[list[_Item], int]:
    """The records (or batches) that fit in `wire_left` encoded bytes, each `size_of` it (the
    first one anyway with `min_one`), and their encoded size."""
    used = 0
    for i, item in enumerate(items):
        size = size_of(item)
        if used + size > wire_left and (i or not min_one):
            return items[:i], used
        used += size
    return items, used


# ----------------------------------------------------------------------------- ListOffsets


def handle_offset_for_leader_epoch(broker: DataPlaneHost, req: OffsetForLeaderEpochRequest, reply_to: Any,
                                   leader_epoch: Callable[[str, int], int]) -> list[Output]:
    """KIP-320's OffsetForLeaderEpoch, as a consumer sends it after its partition changed leader.
    `current_leader_epoch` is checked as Kafka does (older: FENCED_LEADER_EPOCH, newer:
    UNKNOWN_LEADER_EPOCH). The answer for an epoch at or below the partition's is that epoch and
    the log end offset: grouplab's brokers share one store, so no leader change ever truncates a
    log, and no consumer position is ever past the end of the epoch it was read in (Kafka's answer
    would name where the next epoch began; a client concludes the same either way: no divergence).
    An epoch above the partition's: Kafka's undefined answer, -1 and -1."""
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if not _exists(broker, t.topic, p.partition):
                parts.append(EpochEndOffset(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            epoch = leader_epoch(t.topic, p.partition)
            if 0 <= p.current_leader_epoch < epoch:
                parts.append(EpochEndOffset(p.partition, ErrorCode.FENCED_LEADER_EPOCH))
            elif p.current_leader_epoch > epoch:
                parts.append(EpochEndOffset(p.partition, ErrorCode.UNKNOWN_LEADER_EPOCH))
            elif p.leader_epoch > epoch:
                parts.append(EpochEndOffset(p.partition, 0, -1, -1))
            else:
                end = broker.logs.log(t.topic, p.partition).log_end_offset
                parts.append(EpochEndOffset(p.partition, 0, max(p.leader_epoch, 0), end))
        topics.append(OffsetForLeaderTopicResult(t.topic, parts))
    return [Reply(reply_to, OffsetForLeaderEpochResponse(topics=topics))]


def handle_list_offsets(broker: DataPlaneHost, req: ListOffsetsRequest, reply_to: Any, now_ms: int) -> list[Output]:
    if req.isolation_level not in ISOLATION_LEVELS:
        return [Reply(reply_to, ListOffsetsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=(
            f"isolation_level must be 0 (read_uncommitted) or 1 (read_committed), got {req.isolation_level}")))]
    committed = req.isolation_level == READ_COMMITTED
    wanted: dict[str, dict[int, ListOffsetsPartition | None]] = {}  # None: listed more than once
    for lt in req.topics:
        by_index = wanted.setdefault(lt.name, {})
        for lp in lt.partitions:
            by_index[lp.partition_index] = None if lp.partition_index in by_index else lp
    topics = []
    for name, by_index in wanted.items():
        parts = []
        for index, entry in by_index.items():
            if entry is None:  # Kafka: INVALID_REQUEST for a duplicated partition (answered once here)
                parts.append(ListOffsetsPartitionResponse(index, ErrorCode.INVALID_REQUEST))
                continue
            lp = entry
            if not _exists(broker, name, index):
                parts.append(ListOffsetsPartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            log = broker.logs.log(name, index)
            try:
                found = log.offset_for(lp.timestamp)
            except LogError as exc:
                parts.append(ListOffsetsPartitionResponse(index, exc.code))
                continue
            offset, timestamp = found
            if committed:
                lso = log.last_stable_offset
                if lp.timestamp == -1:
                    offset = lso
                elif lp.timestamp != -2 and offset >= lso:
                    # a timestamp lookup (max timestamp included) finds only what read_committed
                    # consumers can see, as Kafka's (its last fetchable offset); EARLIEST is the log
                    # start offset under either isolation level (an empty log: 0, not -1)
                    offset, timestamp = -1, -1
            parts.append(ListOffsetsPartitionResponse(index, 0, timestamp, offset))
        topics.append(ListOffsetsTopicResponse(name, parts))
    return [Reply(reply_to, ListOffsetsResponse(topics=topics))]


# ----------------------------------------------------------------------------- InitProducerId


def handle_init_producer_id(broker: DataPlaneHost, req: InitProducerIdRequest, reply_to: Any,
                            now_ms: int) -> list[Output]:
    """A plain idempotent producer (transactional_id nil): always a new producer id, epoch 0, as
    Kafka does; producer_id/producer_epoch in the request are ignored. The transactional case is
    routed elsewhere by Broker._on_InitProducerId."""
    assert req.transactional_id is None
    pid = broker.logs.allocate_producer_id()
    return [Reply(reply_to, InitProducerIdResponse(producer_id=pid, producer_epoch=0)),
            LogEvent(now_ms, events.ProducerIdAllocated(pid, producer_epoch=0, transactional_id=None))]
