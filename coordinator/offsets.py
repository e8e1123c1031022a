"""Committed offsets, pure: each group's offset store and the OffsetCommit / OffsetFetch handlers.

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

Fencing of OffsetCommit is Kafka's (`validate_commit`: the classic group coordinator's
`validateOffsetCommit` and `handleCommitOffsets`); docs/protocol.md §3.15 and §3.16 list every error.

Durability: every stored offset is an `OffsetCommitRecord` in the group log (coordinator/
group_log.py), emitted as a `Persist` output before the reply, restored by `restore_offsets`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Concatenate, Iterable, Mapping

from coordinator.group_log import OffsetCommitRecord, Persist
from protocol import events
from protocol.effects import LogEvent, Output, Reply
from protocol.errors import ErrorCode
from protocol.messages import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    TxnOffsetCommitResponse,
)
from protocol.types import TopicPartition

if TYPE_CHECKING:  # runtime imports would be circular: group.py imports this module
    from coordinator.broker import Broker
    from coordinator.group import Group, GroupState

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
        out = []
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

    def has_pending(self, tp: TopicPartition) -> bool:
        return any(tp in staged for staged in self.pending.values())

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


# ----------------------------------------------------------------------------- fencing


def validate_commit(group: "Group | None", member_id: str, group_instance_id: str | None, generation_id: int,
                    transactional: bool = False) -> ErrorCode | None:
    """Kafka's rules for who may commit to a group (ClassicGroup.validateOffsetCommit, and
    handleCommitOffsets for a group that does not exist). None: accepted.

    - No such group: generation < 0 is a simple consumer (accepted; the group is created Empty
      when something is stored); generation >= 0 is ILLEGAL_GENERATION (a member of a generation
      the coordinator no longer knows).
    - Empty group and generation < 0: accepted, whatever member id (a simple consumer).
    - Otherwise, if a generation >= 0, a member id or an instance id is given: the instance id, if
      given, must belong to this member id (unknown instance: UNKNOWN_MEMBER_ID; another member's:
      FENCED_INSTANCE_ID), the member must be in the group (UNKNOWN_MEMBER_ID), and the generation
      must be the group's (ILLEGAL_GENERATION). Generation -1 with a known member is therefore
      ILLEGAL_GENERATION.
    - Generation < 0 and member id "" on a non-Empty group: UNKNOWN_MEMBER_ID (only members may
      commit to a group that has members). Not for transactional commits.
    - CompletingRebalance: REBALANCE_IN_PROGRESS even for a valid member and generation (the member
      has its new generation but not yet its assignment). Not for transactional commits.
      PreparingRebalance is accepted: members commit in their revocation callbacks before rejoining.
    """
    if group is None:
        return ErrorCode.ILLEGAL_GENERATION if generation_id >= 0 and not transactional else None
    state = group.state.value
    if generation_id < 0 and state == "Empty":
        return None
    if generation_id >= 0 or member_id or group_instance_id is not None:
        if group_instance_id is not None:
            owner = group.static_members.get(group_instance_id)
            if owner is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if owner != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
    elif not transactional and state != "Empty":
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not transactional and state == "CompletingRebalance":
        return ErrorCode.REBALANCE_IN_PROGRESS
    return None


# ----------------------------------------------------------------------------- request handlers


def handle_offset_commit(broker: "Broker", req: Any, reply_to: Any, now_ms: int,
                         txn_producer_id: int | None = None, precheck: ErrorCode | None = None) -> list[Output]:
    """OffsetCommit, in Kafka's order: partitions of unknown topics (or out of range) get
    UNKNOWN_TOPIC_OR_PARTITION and take no further part; if none is left the group is not touched.
    Then the group-level check (`validate_commit`): a refusal answers every remaining partition
    with the error (also the top-level `error_code`) and changes nothing. Then per partition:
    metadata longer than offset.metadata.max.bytes gets OFFSET_METADATA_TOO_LARGE; the rest are
    stored and persisted (Persist outputs before the reply). An accepted commit from a member
    counts as its heartbeat.

    TxnOffsetCommit goes the same way with `txn_producer_id` set: `precheck` is the transaction
    coordinator's verdict on the producer, the group check is Kafka's transactional one, and the
    accepted offsets are staged for the producer's transaction instead of committed."""
    known = broker.topics.partitions
    codes: list[list[ErrorCode]] = []
    candidates: list[tuple[int, int]] = []  # (topic index, partition index) in the request
    for ti, topic in enumerate(req.topics):
        count = known.get(topic.name, 0)
        row = []
        for pi, p in enumerate(topic.partitions):
            if 0 <= p.partition_index < count:
                row.append(ErrorCode.NONE)
                candidates.append((ti, pi))
            else:
                row.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        codes.append(row)

    out: list[Output] = []
    logs: list[Output] = []
    top = ErrorCode.NONE
    group = broker.groups.get(req.group_id)
    if candidates:
        error = precheck or validate_commit(group, req.member_id, req.group_instance_id, req.generation_id,
                                            transactional=txn_producer_id is not None)
        if error is not None:
            top = error
            for ti, pi in candidates:
                codes[ti][pi] = error
            logs.append(_event(group, req.group_id, now_ms, events.OffsetCommitRejected, member_id=req.member_id,
                               request_generation_id=req.generation_id, error=error.name,
                               partitions=_pairs(sorted({TopicPartition(req.topics[ti].name,
                                                                        req.topics[ti].partitions[pi].partition_index)
                                                         for ti, pi in candidates}))))
        else:
            if group is not None and req.member_id in group.members and group.state.value in ("Stable", "PreparingRebalance"):
                group.members[req.member_id].last_heartbeat_ms = now_ms  # completes the heartbeat
            limit = broker.config.offset_metadata_max_bytes
            accepted: dict[TopicPartition, OffsetAndMetadata] = {}
            for ti, pi in candidates:
                p = req.topics[ti].partitions[pi]
                metadata = p.committed_metadata or ""
                if len(metadata) > limit:
                    codes[ti][pi] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    continue
                accepted[TopicPartition(req.topics[ti].name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, metadata, now_ms, p.committed_leader_epoch)
            if accepted:
                if group is None:
                    group = broker.group(req.group_id)  # a simple consumer's group: Empty, offsets only
                tps = sorted(accepted)
                if txn_producer_id is None:
                    out += [Persist(r) for r in group.offsets.commit(accepted)]
                    logs.append(_event(group, req.group_id, now_ms, events.OffsetsCommitted, member_id=req.member_id,
                                       partitions=_pairs(tps), offsets=[accepted[tp].offset for tp in tps],
                                       producer_id=None))
                else:
                    group.offsets.stage_txn(txn_producer_id, accepted, now_ms)
                    logs.append(_event(group, req.group_id, now_ms, events.TxnOffsetsStaged, member_id=req.member_id,
                                       partitions=_pairs(tps), offsets=[accepted[tp].offset for tp in tps],
                                       producer_id=txn_producer_id))

    response_type = OffsetCommitResponse if txn_producer_id is None else TxnOffsetCommitResponse
    response = response_type(
        error_code=top,
        topics=[OffsetCommitResponseTopic(t.name, [OffsetCommitResponsePartition(p.partition_index, codes[ti][pi])
                                                   for pi, p in enumerate(t.partitions)])
                for ti, t in enumerate(req.topics)])
    out.append(Reply(reply_to, response))
    return out + logs


def handle_offset_fetch(broker: "Broker", req: OffsetFetchRequest, reply_to: Any, now_ms: int) -> list[Output]:
    """OffsetFetch: the committed offset of each requested partition (`topics` nil: every
    committed partition, by topic and partition), -1 where there is none. An unknown group is not
    an error: every offset is -1 (and `topics` nil gives no topics), as in Kafka."""
    group = broker.groups.get(req.group_id)
    store = group.offsets if group is not None else OffsetStore(req.group_id)
    if req.topics is None:
        results = store.fetch(None, req.require_stable)
        by_topic: dict[str, list] = defaultdict(list)
        for tp, om, code in results:
            by_topic[tp.topic].append(_fetched(tp.partition, om, code))
        topics = [OffsetFetchResponseTopic(name, parts) for name, parts in by_topic.items()]
    else:
        topics = []
        for t in req.topics:
            results = store.fetch([TopicPartition(t.name, p) for p in t.partition_indexes], req.require_stable)
            topics.append(OffsetFetchResponseTopic(t.name, [_fetched(tp.partition, om, code) for tp, om, code in results]))
    return [Reply(reply_to, OffsetFetchResponse(topics=topics))]


def _fetched(partition: int, om: OffsetAndMetadata | None, code: ErrorCode) -> OffsetFetchResponsePartition:
    if om is None:
        return OffsetFetchResponsePartition(partition, NO_OFFSET, -1, "", code)
    return OffsetFetchResponsePartition(partition, om.offset, om.leader_epoch, om.metadata, code)


# ----------------------------------------------------------------------------- transactions and restore


def complete_txn_outputs(group: "Group", producer_id: int, commit: bool, now_ms: int) -> list[Output]:
    """For the transaction coordinator's shell: `group.offsets.complete_txn` plus the outputs that
    go with it: a Persist per offset that became committed (place them before the EndTxn reply)
    and an `offsets_committed` (producer_id set) or `txn_offsets_aborted` event."""
    staged = sorted(group.offsets.pending.get(producer_id, {}))
    records = group.offsets.complete_txn(producer_id, commit)
    out: list[Output] = [Persist(r) for r in records]
    if commit and records:
        tps = [TopicPartition(r.topic, r.partition) for r in records]
        order = sorted(range(len(tps)), key=lambda i: tps[i])
        out.append(_event(group, group.group_id, now_ms, events.OffsetsCommitted, member_id="",
                          partitions=_pairs(tps[i] for i in order), offsets=[records[i].offset for i in order],
                          producer_id=producer_id))
    elif not commit and staged:
        out.append(_event(group, group.group_id, now_ms, events.TxnOffsetsAborted, producer_id=producer_id,
                          partitions=_pairs(staged)))
    return out


def restore_offsets(broker: "Broker", records: Iterable[OffsetCommitRecord], now_ms: int) -> list[Output]:
    """Load persisted offsets into their groups (a group that has none yet is created Empty: a
    simple consumer's group). Call after the groups' own records are restored. One
    `offsets_loaded` event per group."""
    loaded: dict[str, int] = {}
    for record in records:
        broker.group(record.group_id).offsets.restore(record)
        loaded[record.group_id] = loaded.get(record.group_id, 0) + 1
    return [_event(broker.groups[gid], gid, now_ms, events.OffsetsLoaded, committed_partitions=len(broker.groups[gid].offsets.committed))
            for gid in loaded]


# ----------------------------------------------------------------------------- helpers


def _pairs(tps: Iterable[TopicPartition]) -> list[list]:
    return [[tp.topic, tp.partition] for tp in tps]


def _event(group: "Group | None", group_id: str, now_ms: int,
           event: Callable[Concatenate[str, int, GroupState, events.Fields], events.GroupEvent], /,
           *args: events.Fields.args, **fields: events.Fields.kwargs) -> LogEvent:
    """A coordinator group event (the G fields first). A group that does not exist is `Dead`,
    generation 0, as DescribeGroups shows it."""
    if group is not None:
        return LogEvent(now_ms, event(group_id, group.generation_id, group.state, *args, **fields))
    from coordinator.group import GroupState  # here, not at the top: coordinator.group imports this module
    return LogEvent(now_ms, event(group_id, 0, GroupState.DEAD, *args, **fields))
