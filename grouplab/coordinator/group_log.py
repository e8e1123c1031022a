"""Durable coordinator metadata, like the group metadata records Kafka keeps in `__consumer_offsets`
(and the topic records of its metadata log): the record types, their on-disk framing, and an
append-only log file with replay and compaction.

The pure state machines never touch the file. They emit `Persist(record)`; the server shell appends
the record with `GroupLog.append`, and on start-up feeds `GroupLog.replay()` to `Broker.restore`.

On disk each record is one frame (docs/protocol.md "Durability and restart"):

    4-byte big-endian payload length N | N bytes of msgpack (a map) | 4-byte big-endian CRC32 of the payload

A torn tail (a frame cut short by a crash during the write) is detected by its length and ignored;
a frame whose CRC does not match, or whose map is not a valid record, is skipped and counted.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import msgpack

from grouplab.protocol.effects import Persist as Persist  # the output that asks for a record here; defined beside Output

LOG_FILE_NAME = "group-metadata.log"
LOCK_FILE_NAME = ".lock"
RECORD_VERSION = 0
# A record larger than this cannot be real (a group of thousands of members is far smaller): its
# length prefix is garbage, so nothing after it can be framed.
MAX_RECORD_BYTES = 64 * 1024 * 1024

_U32 = struct.Struct(">I")


class RecordError(ValueError):
    """A frame's payload is not a valid record (its CRC matched, so this is a writer defect or a
    record from a newer, incompatible version)."""


class LogLockedError(RuntimeError):
    """Another coordinator process has this data directory open."""


def lock_directory(directory: Path, holder: str) -> int:
    """An exclusive flock on `directory/.lock` (the returned fd holds it until closed), so two
    processes never write one data directory. LogLockedError names the likely `holder`."""
    fd = os.open(Path(directory) / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise LogLockedError(f"{directory} is in use by {holder}") from None
    return fd


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class MemberMetadata:
    """One member of a GroupMetadata record: what Kafka's GroupMetadataValue keeps per member,
    plus every protocol (not only the chosen one) so a restored group can vote again."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]  # preference order
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataRecord:
    """A group's persisted state: written when a generation becomes Stable (the leader's SyncGroup),
    when a generation completes with no members (Empty), and when a static member is replaced
    without a rebalance. The latest record of a group supersedes all earlier ones."""

    group_id: str
    generation_id: int
    state: str  # "Stable" or "Empty"
    protocol_type: str | None
    protocol_name: str | None
    leader: str | None
    members: list[MemberMetadata]
    ts_ms: int

    @property
    def key(self) -> tuple[str, str]:
        return ("group", self.group_id)


@dataclass(frozen=True)
class TopicRecord:
    """A topic and its partition count after CreateTopics, CreatePartitions or auto-creation."""

    name: str
    partition_count: int
    ts_ms: int
    topic_id: str | None = None  # None in the records of a grouplab before topic ids: one from the name

    @property
    def key(self) -> tuple[str, str]:
        return ("topic", self.name)


@dataclass(frozen=True)
class TopicTombstone:
    """The topic is gone (DeleteTopics), like the RemoveTopicRecord of Kafka's metadata log: its
    TopicRecord no longer counts, and a restart does not bring it back."""

    name: str
    ts_ms: int

    @property
    def key(self) -> tuple[str, str]:
        return ("topic", self.name)


@dataclass(frozen=True)
class OffsetCommitRecord:
    """One committed offset of one group and partition (Kafka's OffsetCommit key/value in
    `__consumer_offsets`): written for every partition an OffsetCommit stores, and for every staged
    transactional offset that a committed transaction makes visible (coordinator/offsets.py). The
    latest record of a (group, topic, partition) supersedes all earlier ones."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return ("offset", self.group_id, self.topic, self.partition)


@dataclass(frozen=True)
class TxnRecord:
    """A transactional id's state (Kafka's `__transaction_state` value), written by the
    transaction coordinator (coordinator/transactions.py) whenever it changes."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str
    partitions: list[tuple[str, int]]
    groups: list[str]
    started_ms: int

    @property
    def key(self) -> tuple[str, str]:
        return ("txn", self.transactional_id)


@dataclass(frozen=True)
class GroupTombstone:
    """The group is gone (DeleteGroups, or expired: docs/protocol.md §4.15), like Kafka's null
    value for the group's key: its GroupMetadata record no longer counts, and a restart does not
    bring it back. Written after an OffsetTombstone for each offset the group still had."""

    group_id: str
    ts_ms: int

    @property
    def key(self) -> tuple[str, str]:
        return ("group", self.group_id)


@dataclass(frozen=True)
class OffsetTombstone:
    """A committed offset is gone (expired, or its group deleted): supersedes the partition's
    OffsetCommit records, like Kafka's null value for the offset's key."""

    group_id: str
    topic: str
    partition: int
    ts_ms: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return ("offset", self.group_id, self.topic, self.partition)


@dataclass(frozen=True)
class ConsumerGroupRecord:
    """A consumer-protocol group's own state (KIP-848; Kafka keeps it as the ConsumerGroupMetadata,
    ConsumerGroupPartitionMetadata and ConsumerGroupTargetAssignmentMetadata records): its group
    epoch, its target assignment's epoch and assignor, and the subscribed topics' partition counts
    as the group epoch last saw them. Written whenever one of them changes. It shares its key with
    GroupMetadataRecord and GroupTombstone: the latest says which type the group is, or that it is gone."""

    group_id: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    subscription_metadata: dict[str, int]
    ts_ms: int

    @property
    def key(self) -> tuple[str, str]:
        return ("group", self.group_id)


@dataclass(frozen=True)
class ConsumerMemberRecord:
    """One member of a consumer-protocol group: its subscription (Kafka's
    ConsumerGroupMemberMetadata), its current assignment and epochs (ConsumerGroupCurrentMemberAssignment)
    and its target (ConsumerGroupTargetAssignmentMember), in one record. Written whenever any of
    them changes; the latest record of a (group, member) supersedes the earlier ones."""

    group_id: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    state: str  # a ConsumerMemberState value
    member_epoch: int
    previous_member_epoch: int
    assigned: dict[str, list[int]]
    pending_revocation: dict[str, list[int]]
    target: dict[str, list[int]]
    # A classic member inside the group (online migration): its JoinGroup's session timeout and
    # protocols (name, metadata), preferred first; None for a consumer-protocol member.
    classic_session_timeout_ms: int | None = None
    classic_protocols: list[tuple[str, bytes]] | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return ("consumer-member", self.group_id, self.member_id)


@dataclass(frozen=True)
class ConsumerMemberTombstone:
    """The member left or was removed: its ConsumerMemberRecord no longer counts."""

    group_id: str
    member_id: str
    ts_ms: int

    @property
    def key(self) -> tuple[str, str, str]:
        return ("consumer-member", self.group_id, self.member_id)


Record = (GroupMetadataRecord | TopicRecord | OffsetCommitRecord | TxnRecord | GroupTombstone | OffsetTombstone
          | TopicTombstone | ConsumerGroupRecord | ConsumerMemberRecord | ConsumerMemberTombstone)
TOMBSTONES = (GroupTombstone, OffsetTombstone, TopicTombstone, ConsumerMemberTombstone)


# ----------------------------------------------------------------------------- encoding


def encode_record(record: Record) -> bytes:
    """The msgpack payload of one record."""
    if isinstance(record, GroupMetadataRecord):
        body: dict[str, Any] = {
            "type": "group_metadata", "version": RECORD_VERSION,
            "group_id": record.group_id, "generation_id": record.generation_id, "state": record.state,
            "protocol_type": record.protocol_type, "protocol_name": record.protocol_name, "leader": record.leader,
            "members": [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "session_timeout_ms": m.session_timeout_ms,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "protocols": [[name, meta] for name, meta in m.protocols], "assignment": m.assignment,
            } for m in record.members],
            "ts_ms": record.ts_ms,
        }
    elif isinstance(record, TopicRecord):
        body = {"type": "topic", "version": RECORD_VERSION, "name": record.name,
                "partition_count": record.partition_count, "ts_ms": record.ts_ms}
        if record.topic_id is not None:
            body["topic_id"] = record.topic_id
    elif isinstance(record, OffsetCommitRecord):
        body = {"type": "offset_commit", "version": RECORD_VERSION, "group_id": record.group_id,
                "topic": record.topic, "partition": record.partition, "offset": record.offset,
                "leader_epoch": record.leader_epoch, "metadata": record.metadata,
                "commit_timestamp_ms": record.commit_timestamp_ms}
    elif isinstance(record, TxnRecord):
        body = {"type": "transaction", "version": RECORD_VERSION, "transactional_id": record.transactional_id,
                "producer_id": record.producer_id, "producer_epoch": record.producer_epoch,
                "timeout_ms": record.timeout_ms, "state": record.state,
                "partitions": [[t, p] for t, p in record.partitions], "groups": list(record.groups),
                "started_ms": record.started_ms}
    elif isinstance(record, GroupTombstone):
        body = {"type": "group_tombstone", "version": RECORD_VERSION, "group_id": record.group_id, "ts_ms": record.ts_ms}
    elif isinstance(record, TopicTombstone):
        body = {"type": "topic_tombstone", "version": RECORD_VERSION, "name": record.name, "ts_ms": record.ts_ms}
    elif isinstance(record, OffsetTombstone):
        body = {"type": "offset_tombstone", "version": RECORD_VERSION, "group_id": record.group_id,
                "topic": record.topic, "partition": record.partition, "ts_ms": record.ts_ms}
    elif isinstance(record, ConsumerGroupRecord):
        body = {"type": "consumer_group", "version": RECORD_VERSION, "group_id": record.group_id,
                "group_epoch": record.group_epoch, "assignment_epoch": record.assignment_epoch,
                "assignor_name": record.assignor_name, "subscription_metadata": dict(record.subscription_metadata),
                "ts_ms": record.ts_ms}
    elif isinstance(record, ConsumerMemberRecord):
        body = {"type": "consumer_member", "version": RECORD_VERSION, "group_id": record.group_id,
                "member_id": record.member_id, "instance_id": record.instance_id, "rack_id": record.rack_id,
                "client_id": record.client_id, "client_host": record.client_host,
                "rebalance_timeout_ms": record.rebalance_timeout_ms,
                "subscribed_topic_names": list(record.subscribed_topic_names),
                "subscribed_topic_regex": record.subscribed_topic_regex, "server_assignor": record.server_assignor,
                "state": record.state, "member_epoch": record.member_epoch,
                "previous_member_epoch": record.previous_member_epoch, "assigned": record.assigned,
                "pending_revocation": record.pending_revocation, "target": record.target}
        if record.classic_session_timeout_ms is not None:
            body["classic"] = {"session_timeout_ms": record.classic_session_timeout_ms,
                               "protocols": [[n, m] for n, m in record.classic_protocols or []]}
    elif isinstance(record, ConsumerMemberTombstone):
        body = {"type": "consumer_member_tombstone", "version": RECORD_VERSION, "group_id": record.group_id,
                "member_id": record.member_id, "ts_ms": record.ts_ms}
    else:
        raise TypeError(f"not a record: {record!r}")
    return msgpack.packb(body, use_bin_type=True)


def decode_record(payload: bytes) -> Record:
    """Parse and validate one payload; RecordError says what is wrong."""
    try:
        m = msgpack.unpackb(payload, raw=False)
    except Exception as exc:
        raise RecordError(f"not msgpack: {exc}") from None
    if not isinstance(m, dict):
        raise RecordError("a record must be a map")
    version = _get(m, "version", int)
    if version != RECORD_VERSION:
        raise RecordError(f"unsupported record version {version}")
    kind = m.get("type")
    if kind == "topic":
        count = _get(m, "partition_count", int)
        if count < 1:
            raise RecordError(f"partition_count must be >= 1, got {count}")
        topic_id = _get(m, "topic_id", str, optional=True) if "topic_id" in m else None
        return TopicRecord(_get(m, "name", str), count, _get(m, "ts_ms", int), topic_id)
    if kind == "offset_commit":
        partition = _get(m, "partition", int)
        if partition < 0:
            raise RecordError(f"partition must be >= 0, got {partition}")
        return OffsetCommitRecord(_get(m, "group_id", str), _get(m, "topic", str), partition, _get(m, "offset", int),
                                  _get(m, "leader_epoch", int), _get(m, "metadata", str),
                                  _get(m, "commit_timestamp_ms", int))
    if kind == "topic_tombstone":
        return TopicTombstone(_get(m, "name", str), _get(m, "ts_ms", int))
    if kind == "group_tombstone":
        return GroupTombstone(_get(m, "group_id", str), _get(m, "ts_ms", int))
    if kind == "offset_tombstone":
        partition = _get(m, "partition", int)
        if partition < 0:
            raise RecordError(f"partition must be >= 0, got {partition}")
        return OffsetTombstone(_get(m, "group_id", str), _get(m, "topic", str), partition, _get(m, "ts_ms", int))
    if kind == "transaction":
        parts = _get(m, "partitions", list)
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and type(p[1]) is int for p in parts):
            raise RecordError("partitions: expected [topic, partition] pairs")
        groups = _get(m, "groups", list)
        if not all(isinstance(g, str) for g in groups):
            raise RecordError("groups: expected strings")
        return TxnRecord(_get(m, "transactional_id", str), _get(m, "producer_id", int), _get(m, "producer_epoch", int),
                         _get(m, "timeout_ms", int), _get(m, "state", str), [(t, p) for t, p in parts], groups,
                         _get(m, "started_ms", int))
    if kind in ("consumer_group", "consumer_member", "consumer_member_tombstone"):
        return _decode_consumer(kind, m)
    if kind != "group_metadata":
        raise RecordError(f"unknown record type {kind!r}")
    members = []
    for i, mm in enumerate(_get(m, "members", list)):
        if not isinstance(mm, dict):
            raise RecordError(f"members[{i}] must be a map")
        protocols = []
        for p in _get(mm, "protocols", list):
            if not (isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], bytes)):
                raise RecordError(f"members[{i}].protocols: expected [name, metadata bytes], got {p!r}")
            protocols.append((p[0], p[1]))
        members.append(MemberMetadata(
            member_id=_get(mm, "member_id", str), group_instance_id=_get(mm, "group_instance_id", str, True),
            client_id=_get(mm, "client_id", str), client_host=_get(mm, "client_host", str),
            session_timeout_ms=_get(mm, "session_timeout_ms", int),
            rebalance_timeout_ms=_get(mm, "rebalance_timeout_ms", int),
            protocols=protocols, assignment=_get(mm, "assignment", bytes)))
    record = GroupMetadataRecord(
        group_id=_get(m, "group_id", str), generation_id=_get(m, "generation_id", int), state=_get(m, "state", str),
        protocol_type=_get(m, "protocol_type", str, True), protocol_name=_get(m, "protocol_name", str, True),
        leader=_get(m, "leader", str, True), members=members, ts_ms=_get(m, "ts_ms", int))
    _check_group(record)
    return record


CONSUMER_MEMBER_STATES = ("stable", "unrevoked_partitions", "unreleased_partitions")


def _decode_consumer(kind: str, m: dict) -> Record:
    """The three KIP-848 records (a consumer group, a member, a member gone)."""
    if kind == "consumer_member_tombstone":
        return ConsumerMemberTombstone(_get(m, "group_id", str), _get(m, "member_id", str), _get(m, "ts_ms", int))
    if kind == "consumer_group":
        metadata = _get(m, "subscription_metadata", dict)
        if not all(isinstance(t, str) and type(n) is int and n >= 1 for t, n in metadata.items()):
            raise RecordError("subscription_metadata: expected topic -> partition count >= 1")
        return ConsumerGroupRecord(_get(m, "group_id", str), _get(m, "group_epoch", int),
                                   _get(m, "assignment_epoch", int), _get(m, "assignor_name", str), metadata,
                                   _get(m, "ts_ms", int))
    names = _get(m, "subscribed_topic_names", list)
    if not all(isinstance(t, str) for t in names):
        raise RecordError("subscribed_topic_names: expected strings")
    state = _get(m, "state", str)
    if state not in CONSUMER_MEMBER_STATES:
        raise RecordError(f"state must be one of {', '.join(CONSUMER_MEMBER_STATES)}, got {state!r}")
    return ConsumerMemberRecord(
        group_id=_get(m, "group_id", str), member_id=_get(m, "member_id", str),
        instance_id=_get(m, "instance_id", str, True), rack_id=_get(m, "rack_id", str, True),
        client_id=_get(m, "client_id", str), client_host=_get(m, "client_host", str),
        rebalance_timeout_ms=_get(m, "rebalance_timeout_ms", int), subscribed_topic_names=names,
        subscribed_topic_regex=_get(m, "subscribed_topic_regex", str, True),
        server_assignor=_get(m, "server_assignor", str, True), state=state,
        member_epoch=_get(m, "member_epoch", int), previous_member_epoch=_get(m, "previous_member_epoch", int),
        assigned=_partitions(m, "assigned"), pending_revocation=_partitions(m, "pending_revocation"),
        target=_partitions(m, "target"), **_classic(m))


def _classic(m: dict) -> dict[str, Any]:
    """A classic member's session timeout and protocols, if the record has them."""
    if m.get("classic") is None:
        return {}
    classic = _get(m, "classic", dict)
    protocols = _get(classic, "protocols", list)
    if not protocols or not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                and isinstance(p[1], bytes) for p in protocols):
        raise RecordError("classic.protocols: expected [name, metadata bytes] pairs, at least one")
    return {"classic_session_timeout_ms": _get(classic, "session_timeout_ms", int),
            "classic_protocols": [(p[0], p[1]) for p in protocols]}


def _partitions(m: dict, key: str) -> dict[str, list[int]]:
    value = _get(m, key, dict)
    if not all(isinstance(t, str) and isinstance(ps, list) and all(type(p) is int and p >= 0 for p in ps)
               for t, ps in value.items()):
        raise RecordError(f"{key}: expected topic -> [partition >= 0]")
    return value


def _get(m: dict, key: str, kind: type, optional: bool = False) -> Any:
    if key not in m:
        raise RecordError(f"field {key} is missing")
    value = m[key]
    if value is None and optional:
        return None
    if type(value) is not kind:
        raise RecordError(f"field {key}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _check_group(r: GroupMetadataRecord) -> None:
    """A record a Group could have written: Stable with members that all support the chosen
    protocol and a leader among them, or Empty with none."""
    if r.state == "Empty":
        if r.members:
            raise RecordError(f"group {r.group_id}: an Empty group record has members")
        return
    if r.state != "Stable":
        raise RecordError(f"group {r.group_id}: state must be Stable or Empty, got {r.state!r}")
    ids = [m.member_id for m in r.members]
    if not ids or len(set(ids)) != len(ids):
        raise RecordError(f"group {r.group_id}: a Stable record needs distinct members")
    if r.leader not in ids or not r.protocol_type or not r.protocol_name:
        raise RecordError(f"group {r.group_id}: a Stable record needs a leader among its members and a protocol")
    if any(r.protocol_name not in [name for name, _ in m.protocols] for m in r.members):
        raise RecordError(f"group {r.group_id}: a member does not support protocol {r.protocol_name!r}")
    instances = [m.group_instance_id for m in r.members if m.group_instance_id is not None]
    if len(set(instances)) != len(instances):
        raise RecordError(f"group {r.group_id}: a group.instance.id appears twice")


def encode_frame(record: Record) -> bytes:
    payload = encode_record(record)
    return _U32.pack(len(payload)) + payload + _U32.pack(zlib.crc32(payload))


@dataclass
class ReplayStats:
    records: int = 0  # valid records read
    bytes: int = 0  # size of the log read
    torn_tail_bytes: int = 0  # bytes at the end that do not make a whole frame (ignored)
    corrupt_records: int = 0  # whole frames skipped: CRC mismatch or not a valid record
    ms: float = 0.0  # wall time of the replay
    errors: list[str] = field(default_factory=list)  # why frames were skipped (the first few)


def decode_frames(data: bytes) -> tuple[list[Record], ReplayStats]:
    """Every valid record in `data`, in order, and what was skipped. Pure."""
    stats = ReplayStats(bytes=len(data))
    records: list[Record] = []
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < _U32.size:
            stats.torn_tail_bytes = n - pos
            break
        (size,) = _U32.unpack_from(data, pos)
        end = pos + _U32.size + size + _U32.size
        if size > MAX_RECORD_BYTES or end > n:
            # Cut short by a crash mid-write (or a garbage length): nothing after it can be framed.
            stats.torn_tail_bytes = n - pos
            break
        payload = data[pos + _U32.size: pos + _U32.size + size]
        (crc,) = _U32.unpack_from(data, end - _U32.size)
        if zlib.crc32(payload) != crc:
            stats.corrupt_records += 1
            _note(stats, f"offset {pos}: CRC mismatch")
        else:
            try:
                records.append(decode_record(payload))
            except RecordError as exc:
                stats.corrupt_records += 1
                _note(stats, f"offset {pos}: {exc}")
        pos = end
    stats.records = len(records)
    return records, stats


def _note(stats: ReplayStats, error: str) -> None:
    if len(stats.errors) < 10:
        stats.errors.append(error)


def latest(records: Iterable[Record]) -> list[Record]:
    """Only the last record of each key (each group, each topic, each committed offset's group,
    topic and partition), in the order of those last records: all that restoring needs. A key
    whose last record is a tombstone has nothing left to restore."""
    last: dict[tuple, Record] = {}
    for r in records:
        last.pop(r.key, None)
        last[r.key] = r
    return list(last.values())


def live(records: Iterable[Record]) -> list[Record]:
    """What compaction keeps: `latest` without the tombstones. The rewritten log holds nothing a
    tombstone superseded, so the tombstone itself has nothing left to hide. A consumer group's
    member records count only while the group's latest record is its ConsumerGroupRecord (a group
    deleted or turned classic has no members of the consumer protocol left)."""
    kept = latest(records)
    consumer_groups = {r.group_id for r in kept if isinstance(r, ConsumerGroupRecord)}
    return [r for r in kept if not isinstance(r, TOMBSTONES)
            and not (isinstance(r, ConsumerMemberRecord) and r.group_id not in consumer_groups)]


# ----------------------------------------------------------------------------- the log file


class GroupLog:
    """An append-only file of framed records in a data directory's `group-metadata.log`.

    `fsync=True` (grouplab.log.fsync=always) syncs every append before it returns, so a record the
    coordinator acted on survives a machine crash; `fsync=False` (never) still writes every record
    to the OS before returning, which survives a crash of the coordinator process but not of the
    machine. Compaction always syncs. One process at a time: a lock file guards the directory.
    """

    def __init__(self, path: str | Path, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.stats = ReplayStats()
        self.appended = 0
        self._fd: int | None = None
        self._lock_fd: int | None = None

    @classmethod
    def in_dir(cls, data_dir: str | Path, fsync: bool = True) -> "GroupLog":
        return cls(Path(data_dir) / LOG_FILE_NAME, fsync)

    def replay(self) -> list[Record]:
        """Read every valid record; `stats` says what was read and what was skipped."""
        self._lock()
        started = time.perf_counter()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        records, self.stats = decode_frames(data)
        self.stats.ms = (time.perf_counter() - started) * 1000
        return records

    def compact(self, records: Iterable[Record]) -> int:
        """Rewrite the log with only the latest record per group and per topic, tombstones and what
        they deleted dropped (a temporary file, synced, then renamed over the log, and the
        directory synced). Returns the new size."""
        self._lock()
        self._close_fd()
        kept = b"".join(encode_frame(r) for r in live(records))
        tmp = self.path.with_name(self.path.name + ".compacting")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, kept)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        return len(kept)

    def recover(self) -> list[Record]:
        """Start-up: replay, then compact what was replayed. Returns the replayed records."""
        records = self.replay()
        self.compact(records)
        return records

    def append(self, record: Record) -> None:
        self.append_many([record])

    def append_many(self, records: list[Record]) -> None:
        """Append records with one write and (with fsync) one sync, as Kafka appends the offsets
        of one OffsetCommit as one batch."""
        if not records:
            return
        if self._fd is None:
            self._lock()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            _write_all(self._fd, b"".join(encode_frame(r) for r in records))
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, end)  # a frame cut short here would hide every later one
            raise
        if self.fsync:
            os.fsync(self._fd)
        self.appended += len(records)

    def close(self) -> None:
        self._close_fd()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _lock(self) -> None:
        if self._lock_fd is not None:
            return
        make_dirs(self.path.parent)
        self._lock_fd = lock_directory(self.path.parent, "another coordinator")

    def __enter__(self) -> "GroupLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def make_dirs(path: Path) -> None:
    """Create `path` and its missing parents, syncing the parent of each one created: POSIX keeps
    a new name through a machine crash only once its directory is synced, so without this a crash
    could take a new directory, and every synced file in it, away."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        _fsync_dir(directory.parent)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
