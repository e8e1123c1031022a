"""Committed offsets, pure: each group's offset store, and the OffsetCommit / OffsetFetch /
OffsetDelete requests mapped onto it partition by partition. Who may commit or delete is the
group's to say: the requests are inputs of the group machine (`Group.handle_offset_commit`,
`handle_txn_offset_commit`, `handle_offset_fetch`, `handle_offset_delete` in coordinator/group.py),
which validates the member (or the group's state), refreshes its heartbeat and uses this module
for the rest. Nothing here knows the group or the broker.

Kafka keeps a group's committed offsets with the group's metadata (in `__consumer_offsets`); so
does grouplab: every `Group` has an `OffsetStore` (`group.offsets`), and a group that only stores
offsets (a "simple" consumer that assigns itself partitions and commits with generation -1) is an
Empty group with no members.

What the store keeps per topic-partition: the committed offset, its metadata string, the leader
epoch the client sent, and the commit timestamp. A commit may lower an offset (a consumer that
seeks back and commits): Kafka allows it and so does the store. "Committed offsets never go
backwards" is a property of well-behaved consumer applications, not a rule of the store.

Transactional offsets (KIP-98, KIP-447): `stage_txn(producer_id, offsets)` holds offsets a
transaction committed with TxnOffsetCommit; they are invisible to OffsetFetch until
`complete_txn(producer_id, commit=True)` makes them committed (or `commit=False` drops them).
While one is pending, an OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT (88)
for that partition. As in Kafka, whichever of a staged and a plain commit was *written* later wins
when the transaction commits (a plain commit after the TxnOffsetCommit is not overwritten).

Fencing of OffsetCommit is Kafka's (`Group.validate_commit`: the classic group coordinator's
`validateOffsetCommit` and `handleCommitOffsets`); docs/protocol.md §3.15 and §3.16 list every error.

Durability: every stored offset is an `OffsetCommitRecord` in the group log (coordinator/
group_log.py), emitted as a `Persist` output before the reply, restored by `Group.restore_offsets`;
an offset that expires, is deleted (OffsetDelete) or goes with its deleted group gets an
`OffsetTombstone`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from grouplab.coordinator.group_log import OffsetCommitRecord, OffsetTombstone
from grouplab.protocol.errors import AnswerTooLarge, ErrorCode
from grouplab.protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from grouplab.protocol.schema import floor_bytes
from grouplab.protocol.types import TopicPartition

NO_OFFSET = -1  # OffsetFetch's answer for a partition with no committed offset (Kafka's INVALID_OFFSET)


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    metadata: str = ""
    commit_timestamp_ms: int = -1
    leader_epoch: int = -1


class OffsetStore:
    """One group's committed and staged (transactional) offsets. Pure data: no outputs; the
    mutating methods return the records that must be made durable."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}  # producer id -> staged
        # Write order of every entry (Kafka compares positions in __consumer_offsets): a staged
        # offset replaces a committed one at commit time only if it was written after it.
        self._position: dict[TopicPartition, int] = {}
        self._pending_position: dict[int, dict[TopicPartition, int]] = {}
        self._next_position = 0

    # ------------------------------------------------------------------ plain commits

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> list[OffsetCommitRecord]:
        """Store `offsets` (a lower offset than the current one is allowed, as in Kafka). Returns
        one record per partition, to persist before the commit is acknowledged."""
        records = []
        for tp, om in offsets.items():
            self.committed[tp] = om
            self._position[tp] = self._advance()
            records.append(self.record_of(tp, om))
        return records

    def fetch(self, partitions: Iterable[TopicPartition] | None = None,
              require_stable: bool = False) -> list[tuple[TopicPartition, OffsetAndMetadata | None, ErrorCode]]:
        """(partition, committed offset or None, error) for each requested partition, in request
        order; `None` asks for every committed partition, sorted. With `require_stable`, a
        partition a transaction holds a pending offset for answers UNSTABLE_OFFSET_COMMIT."""
        wanted = sorted(self.committed) if partitions is None else list(partitions)
        out: list[tuple[TopicPartition, OffsetAndMetadata | None, ErrorCode]] = []
        for tp in wanted:
            if require_stable and self.has_pending(tp):
                out.append((tp, None, ErrorCode.UNSTABLE_OFFSET_COMMIT))
            else:
                out.append((tp, self.committed.get(tp), ErrorCode.NONE))
        return out

    def get(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self.committed.get(tp)

    # ------------------------------------------------------------------ transactional offsets

    def stage_txn(self, producer_id: int,
                  offsets: Mapping[TopicPartition, "tuple[int, str | None] | OffsetAndMetadata"],
                  now_ms: int = -1) -> None:
        """Hold offsets a transaction committed (TxnOffsetCommit): invisible to OffsetFetch until
        `complete_txn`. Values are `(offset, metadata)` pairs (metadata None is "") or
        OffsetAndMetadata; `now_ms` is their commit timestamp. Staging a partition again in the
        same transaction replaces the staged offset."""
        staged = self.pending.setdefault(producer_id, {})
        positions = self._pending_position.setdefault(producer_id, {})
        for tp, value in offsets.items():
            if isinstance(value, OffsetAndMetadata):
                om = value
            else:
                offset, metadata = value
                om = OffsetAndMetadata(offset, metadata or "", now_ms)
            staged[tp] = om
            positions[tp] = self._advance()

    def complete_txn(self, producer_id: int, commit: bool) -> list[OffsetCommitRecord]:
        """End the producer's transaction for this group: on commit its staged offsets become
        committed (each unless a plain commit of that partition was written after it was staged),
        on abort they are dropped. Returns the records of the offsets that became committed; the
        caller must persist them (`Persist(record)`) before acknowledging the transaction's end.
        A producer with nothing staged is a no-op."""
        staged = self.pending.pop(producer_id, {})
        positions = self._pending_position.pop(producer_id, {})
        if not commit:
            return []
        records = []
        for tp, om in staged.items():
            if self._position.get(tp, -1) < positions[tp]:
                self.committed[tp] = om
                self._position[tp] = positions[tp]
                records.append(self.record_of(tp, om))
        return records

    def staged_entries(self) -> list[tuple[int, TopicPartition, OffsetAndMetadata, bool]]:
        """Every staged offset as (producer id, partition, offset, staged after the partition's
        plain commit): what a cluster's coordinator move carries to the next coordinator, as
        Kafka's transactional records in `__consumer_offsets` do until their marker."""
        return [(pid, tp, om, self._position.get(tp, -1) < self._pending_position[pid][tp])
                for pid, staged in sorted(self.pending.items()) for tp, om in staged.items()]

    def restage(self, entries: Iterable[tuple[int, TopicPartition, OffsetAndMetadata, bool]]) -> None:
        """Stage `entries` (from `staged_entries`) again after a load, each in the same order
        relative to the partition's plain commit as before the move."""
        for pid, tp, om, later in entries:
            self.pending.setdefault(pid, {})[tp] = om
            self._pending_position.setdefault(pid, {})[tp] = self._advance() if later else -1

    def has_pending(self, tp: TopicPartition) -> bool:
        return any(tp in staged for staged in self.pending.values())

    def drop_staged(self, tp: TopicPartition) -> bool:
        """Forget every transaction's staged offset of `tp` (OffsetDelete: Kafka's tombstone removes
        the pending offsets too, so the transaction's commit does not bring it back). True if any was."""
        dropped = False
        for producer_id, staged in self.pending.items():
            if staged.pop(tp, None) is not None:
                self._pending_position[producer_id].pop(tp, None)
                dropped = True
        return dropped

    # ------------------------------------------------------------------ expiry and deletion

    def expired(self, now_ms: int, retention_ms: int, since_ms: int | None) -> list[TopicPartition]:
        """The committed partitions whose retention has passed at `now_ms`, sorted: counted from
        `since_ms` (when the group became Empty, KIP-211) or, if None, from each commit."""
        return sorted(tp for tp, om in self.committed.items()
                      if now_ms - (since_ms if since_ms is not None else om.commit_timestamp_ms) >= retention_ms)

    def remove(self, partitions: Iterable[TopicPartition], now_ms: int) -> list[OffsetTombstone]:
        """Forget the committed offsets of `partitions`; returns a tombstone each, to persist so
        that a restart does not bring them back."""
        tombstones = []
        for tp in partitions:
            if self.committed.pop(tp, None) is not None:
                self._position.pop(tp, None)
                tombstones.append(OffsetTombstone(self.group_id, tp.topic, tp.partition, now_ms))
        return tombstones

    def remove_topic(self, topic: str, now_ms: int) -> tuple[list[OffsetTombstone], list[TopicPartition]]:
        """Forget everything of a deleted topic: its committed offsets (a tombstone each, returned)
        and the offsets transactions staged for it (returned, sorted: they were never durable)."""
        tombstones = self.remove(sorted(tp for tp in self.committed if tp.topic == topic), now_ms)
        staged: set[TopicPartition] = set()
        for producer_id, offsets in self.pending.items():
            for tp in [tp for tp in offsets if tp.topic == topic]:
                del offsets[tp]
                self._pending_position[producer_id].pop(tp, None)
                staged.add(tp)
        return tombstones, sorted(staged)

    # ------------------------------------------------------------------ durability

    def restore(self, record: OffsetCommitRecord) -> None:
        """Load one persisted offset (records come in log order; a later one replaces)."""
        tp = TopicPartition(record.topic, record.partition)
        self.committed[tp] = OffsetAndMetadata(record.offset, record.metadata, record.commit_timestamp_ms,
                                               record.leader_epoch)
        self._position[tp] = self._advance()

    def record_of(self, tp: TopicPartition, om: OffsetAndMetadata) -> OffsetCommitRecord:
        return OffsetCommitRecord(self.group_id, tp.topic, tp.partition, om.offset, om.leader_epoch, om.metadata,
                                  om.commit_timestamp_ms)

    def _advance(self) -> int:
        self._next_position += 1
        return self._next_position


# ----------------------------------------------------------------------------- requests, partition by partition


@dataclass
class CommitTriage:
    """One OffsetCommit's (or TxnOffsetCommit's) per-partition answers as Kafka's checks go
    (docs/protocol.md §3.15): `of` answers the partitions of unknown topics and leaves the others
    as `candidates`; the group then `refuse`s them all or the store takes what `accept` returns."""

    request: OffsetCommitRequest | TxnOffsetCommitRequest
    codes: list[list[ErrorCode]]  # per topic, per partition, in request order
    candidates: list[tuple[int, int]]  # (topic index, partition index) that passed the topic check
    error_code: ErrorCode = ErrorCode.NONE  # the group's refusal, if any
    accepted: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)

    @classmethod
    def of(cls, req: OffsetCommitRequest | TxnOffsetCommitRequest, partitions: Mapping[str, int]) -> "CommitTriage":
        """Check 1: a partition of a topic that does not exist, or out of its range, gets
        UNKNOWN_TOPIC_OR_PARTITION and takes no further part. `partitions`: topic -> count."""
        codes: list[list[ErrorCode]] = []
        candidates: list[tuple[int, int]] = []
        for ti, topic in enumerate(req.topics):
            count = partitions.get(topic.name, 0)
            row = []
            for pi, p in enumerate(topic.partitions):
                if 0 <= p.partition_index < count:
                    row.append(ErrorCode.NONE)
                    candidates.append((ti, pi))
                else:
                    row.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            codes.append(row)
        return cls(req, codes, candidates)

    def candidate_partitions(self) -> list[TopicPartition]:
        """The candidates as topic-partitions, sorted, each once."""
        topics = self.request.topics
        return sorted({TopicPartition(topics[ti].name, topics[ti].partitions[pi].partition_index)
                       for ti, pi in self.candidates})

    def refuse(self, error: ErrorCode) -> None:
        """Check 2 failed: every candidate, and the response, answer `error`."""
        self.error_code = error
        for ti, pi in self.candidates:
            self.codes[ti][pi] = error

    def accept(self, metadata_max_bytes: int, now_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        """Check 3: metadata longer than offset.metadata.max.bytes gets OFFSET_METADATA_TOO_LARGE;
        the other candidates are returned (and kept in `accepted`) as the offsets to store."""
        for ti, pi in self.candidates:
            p = self.request.topics[ti].partitions[pi]
            metadata = p.committed_metadata or ""
            if len(metadata) > metadata_max_bytes:
                self.codes[ti][pi] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            self.accepted[TopicPartition(self.request.topics[ti].name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, metadata, now_ms, p.committed_leader_epoch)
        return self.accepted

    def response(self) -> OffsetCommitResponse | TxnOffsetCommitResponse:
        """Every requested topic and partition with its code, in request order."""
        transactional = isinstance(self.request, TxnOffsetCommitRequest)
        response_type = TxnOffsetCommitResponse if transactional else OffsetCommitResponse
        return response_type(
            error_code=self.error_code,
            topics=[OffsetCommitResponseTopic(t.name, [OffsetCommitResponsePartition(p.partition_index, self.codes[ti][pi])
                                                       for pi, p in enumerate(t.partitions)])
                    for ti, t in enumerate(self.request.topics)])


def fetch_response(store: OffsetStore, req: OffsetFetchRequest, max_answer_bytes: int | None = None) -> OffsetFetchResponse:
    """OffsetFetch from `store`: the committed offset of each requested partition (`topics` nil:
    every committed partition, by topic and partition), -1 where there is none. Raises
    AnswerTooLarge before building it when its partitions alone, at their floor on the wire and
    their committed metadata counted, cannot fit in `max_answer_bytes`."""
    if req.topics is None:
        _check_floor(len(store.committed), sum(len(om.metadata) for om in store.committed.values()), max_answer_bytes)
        by_topic: dict[str, list[OffsetFetchResponsePartition]] = defaultdict(list)
        for tp, om, code in store.fetch(None, req.require_stable):
            by_topic[tp.topic].append(_fetched(tp.partition, om, code))
        return OffsetFetchResponse(topics=[OffsetFetchResponseTopic(name, parts) for name, parts in by_topic.items()])
    wanted: dict[str, dict[int, None]] = {}  # each topic and partition once, first-seen order
    for t in req.topics:
        wanted.setdefault(t.name, {}).update(dict.fromkeys(t.partition_indexes))
    count = sum(map(len, wanted.values()))
    _check_floor(count, 0, max_answer_bytes)  # first without the metadata: no lookups for a huge request
    if max_answer_bytes is not None and store.committed:
        committed = store.committed
        chars = sum(len(om.metadata) for name, parts in wanted.items() for p in parts
                    if (om := committed.get(TopicPartition(name, p))) is not None)
        _check_floor(count, chars, max_answer_bytes)
    topics = []
    for name, partitions in wanted.items():
        results = store.fetch([TopicPartition(name, p) for p in partitions], req.require_stable)
        topics.append(OffsetFetchResponseTopic(name, [_fetched(tp.partition, om, code) for tp, om, code in results]))
    return OffsetFetchResponse(topics=topics)


def delete_offsets(store: OffsetStore, req: OffsetDeleteRequest, partitions: Mapping[str, int],
                   subscribed: Callable[[str], bool], now_ms: int,
                   ) -> tuple[OffsetDeleteResponse, list[TopicPartition], list[OffsetTombstone]]:
    """OffsetDelete's partitions, once the group accepted the request (Kafka's KafkaApis, then
    OffsetMetadataManager.deleteOffsets): each distinct partition once, in the order first named;
    one of a topic that does not exist, or outside its `partitions` count, is
    UNKNOWN_TOPIC_OR_PARTITION; one of a topic the group's members subscribe to (`subscribed`) is
    GROUP_SUBSCRIBED_TO_TOPIC; any other is NONE, and its committed offset and any transaction's
    staged one are gone. Returns the answer, the partitions whose offset went (sorted) and the
    tombstones of the committed ones, to persist before the answer."""
    wanted: dict[str, dict[int, None]] = {}
    for t in req.topics:
        wanted.setdefault(t.name, {}).update(dict.fromkeys(p.partition_index for p in t.partitions))
    topics: list[OffsetDeleteResponseTopic] = []
    gone: list[TopicPartition] = []
    for name, indexes in wanted.items():
        count = partitions.get(name, 0)
        results = []
        for index in indexes:
            if not 0 <= index < count:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif subscribed(name):
                code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                code = ErrorCode.NONE
                tp = TopicPartition(name, index)
                if store.drop_staged(tp) or tp in store.committed:
                    gone.append(tp)
            results.append(OffsetDeleteResponsePartition(index, code))
        topics.append(OffsetDeleteResponseTopic(name, results))
    tombstones = store.remove(gone, now_ms)
    return OffsetDeleteResponse(topics=topics), sorted(gone), tombstones


def _check_floor(partitions: int, metadata_chars: int, max_answer_bytes: int | None) -> None:
    if max_answer_bytes is None:
        return
    floor = partitions * floor_bytes(OffsetFetchResponsePartition) + metadata_chars
    if floor > max_answer_bytes:
        raise AnswerTooLarge(floor, max_answer_bytes, exact=False)


def _fetched(partition: int, om: OffsetAndMetadata | None, code: ErrorCode) -> OffsetFetchResponsePartition:
    if om is None:
        return OffsetFetchResponsePartition(partition, NO_OFFSET, -1, "", code)
    return OffsetFetchResponsePartition(partition, om.offset, om.leader_epoch, om.metadata, code)


def partition_pairs(tps: Iterable[TopicPartition]) -> list[list]:
    """Partitions as the event log writes them: `[topic, partition]` pairs."""
    return [[tp.topic, tp.partition] for tp in tps]
