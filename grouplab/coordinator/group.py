"""One consumer group's state machine (the classic protocol), pure: requests and timer firings in,
`outputs` out. No sockets, no clock, no randomness: `now_ms` comes with every input and new member
ids come from the injected `new_member_id`.

States (docs/design.md §4):

    Empty ──join──▶ PreparingRebalance ──all rejoined / rebalance timeout──▶ CompletingRebalance
      ▲                  ▲    │ (no members left)                               │ leader's SyncGroup
      └──────────────────┼────┘                                                 ▼
                         └──── join of leader / changed member, leave, expiry ── Stable

A `Group.absent` stand-in for a group that does not exist is Dead, generation 0 (what
`offset_commit_rejected` writes for a missing group, docs/events.md). Offset requests to a missing
group run on one, and storing offsets makes it Empty: a simple consumer's group, which the broker
then keeps. An Empty group becomes Dead when it is deleted (`delete`, for DeleteGroups) or expires
(`expire_offsets`, the retention check: docs/protocol.md §4.15); the broker then drops it.

Every public `handle_*` / `on_*` method validates first and returns an error reply without
touching state when the input is not acceptable; state changes happen only after validation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Concatenate, Iterable, Mapping

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group_log import GroupMetadataRecord, GroupTombstone, MemberMetadata, OffsetCommitRecord, Persist
from grouplab.coordinator.offsets import CommitTriage, OffsetStore, delete_offsets, fetch_response, partition_pairs
from grouplab.protocol.effects import ArmTimer, CancelTimer, Output, StepOutputs
from grouplab.protocol import consumer_protocol, events
from grouplab.protocol.errors import ErrorCode, ProtocolError
from grouplab.protocol.messages import (
    DescribedGroup,
    DescribedGroupMember,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveGroupResponseMember,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
)
from grouplab.protocol.states import GroupState, RebalanceCause, RemovalReason
from grouplab.protocol.types import TopicPartition


# A removal that starts a rebalance (a rebalance_timeout removal happens while one completes).
# The states and codes the steps compare against, as module constants: on Python 3.11 reading
# `GroupState.STABLE` goes through EnumType's __getattr__ hook each time (an unspecialized lookup,
# several times a global's cost), and every request and timer reads a few.
_EMPTY, _PREPARING_REBALANCE, _COMPLETING_REBALANCE, _STABLE, _DEAD = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)
_NO_ERROR, _MEMBER_ID_REQUIRED, _UNKNOWN_MEMBER_ID, _ILLEGAL_GENERATION, _REBALANCE_IN_PROGRESS = (
    ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.REBALANCE_IN_PROGRESS)

REMOVAL_CAUSE = {
    RemovalReason.LEFT: RebalanceCause.MEMBER_LEFT,
    RemovalReason.SESSION_TIMEOUT: RebalanceCause.SESSION_TIMEOUT,
    RemovalReason.SYNC_TIMEOUT: RebalanceCause.SYNC_TIMEOUT,
}


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # preference order
    assignment: bytes = b""
    join_reply: Any = None  # parked JoinGroup, answered when the join phase completes
    sync_reply: Any = None  # parked SyncGroup, answered when the leader's assignment arrives
    last_heartbeat_ms: int = 0

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass
class Timers:
    """Timer keys of one group. A fired timer carries its key back; stale ones are recognised."""

    group_id: str

    def join(self) -> tuple:
        return ("join", self.group_id)

    def sync(self, generation_id: int) -> tuple:
        return ("sync", self.group_id, generation_id)

    def session(self, member_id: str) -> tuple:
        return ("session", self.group_id, member_id)

    def pending(self, member_id: str) -> tuple:
        return ("pending", self.group_id, member_id)


@dataclass
class Group(StepOutputs):
    group_id: str
    config: BrokerConfig
    new_member_id: Callable[[str], str]
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion order = join order
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> session timeout
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_sync: set[str] = field(default_factory=set)
    # Reply token of each JoinGroup that came without a member id -> the id it was given, so that
    # a duplicated copy of that request is recognised (see _answer_duplicate_first_join).
    first_joins: dict[Any, str] = field(default_factory=dict)
    # Its index by member id (the tokens each id was handed out on): forgetting a member's is then
    # one lookup, not a scan of every token (10,000 members leaving made that quadratic, issue 26).
    _first_join_tokens: dict[str, list[Any]] = field(default_factory=dict)
    # The initial rebalance delay (group.initial.rebalance.delay.ms) of an Empty group.
    initial_delay_active: bool = False
    initial_delay_remaining_ms: int = 0
    new_member_added: bool = False
    rebalance_trigger: str = ""
    # When the group last became Empty (KIP-211's current state timestamp): its offsets' retention
    # counts from here. None for a group that has not been Empty since it had members (a simple
    # consumer's): each offset's retention counts from its commit.
    empty_since_ms: int | None = None
    # The members' metadata of the chosen consumer protocol when the last generation completed (or
    # the group was restored): what Kafka's ClassicGroup computes its subscribed topics from, for
    # OffsetDelete ([] after a generation without members). None: not known (no generation yet,
    # another protocol type).
    subscriptions: list[bytes] | None = None

    def __post_init__(self) -> None:
        self.timers = Timers(self.group_id)
        self._out: list[Output] = []
        self._now = 0
        # How many members support each protocol: the vote and the join check read it instead of
        # intersecting every member's list (which made forming a 1,000-member group quadratic).
        self._support: Counter[str] = Counter()
        # Committed offsets live with the group's metadata, as in Kafka (coordinator/offsets.py).
        self.offsets = OffsetStore(self.group_id)

    @classmethod
    def absent(cls, group_id: str, config: BrokerConfig, new_member_id: Callable[[str], str]) -> "Group":
        """A stand-in for a group that does not exist, for the offset inputs: Dead, generation 0.
        Keep it only if it is no longer Dead (it stored offsets)."""
        return cls(group_id, config, new_member_id, state=_DEAD)

    # ------------------------------------------------------------------ public inputs

    def handle_join(self, req: JoinGroupRequest, reply_to: Any, now_ms: int, client_id: str = "", client_host: str = "") -> list[Output]:
        self._begin(now_ms)
        error = self._validate_join(req, client_id)
        if error is not None:
            code, message = error
            self._reply(reply_to, JoinGroupResponse(error_code=code, member_id=req.member_id, error_message=message))
            self._log(events.JoinRejected, member_id=req.member_id, error=code.name, reason=message)
            return self._end()
        if req.member_id == "" and reply_to in self.first_joins:
            self._answer_duplicate_first_join(self.first_joins[reply_to], reply_to)
        elif req.member_id == "":
            if req.group_instance_id is not None:
                self._join_static_unknown(req, reply_to, client_id, client_host)
            else:
                self._join_new_dynamic(req, reply_to, client_id)
        elif req.member_id in self.pending_members:
            del self.pending_members[req.member_id]
            self._out.append(CancelTimer(self.timers.pending(req.member_id)))
            member = self._new_member(req, req.member_id, client_id, client_host)
            self._add_member_and_rebalance(member, reply_to, f"member {req.member_id} joined", RebalanceCause.MEMBER_JOINED)
        else:
            self._join_existing(self.members[req.member_id], req, reply_to)
        return self._end()

    def handle_sync(self, req: SyncGroupRequest, reply_to: Any, now_ms: int) -> list[Output]:
        self._begin(now_ms)
        code = self._validate_member(req.member_id, req.group_instance_id, req.generation_id)
        if code is None and (
            (req.protocol_type is not None and req.protocol_type != self.protocol_type)
            or (req.protocol_name is not None and req.protocol_name != self.protocol_name)
        ):
            code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if code is None and self.state is _PREPARING_REBALANCE:
            code = _REBALANCE_IN_PROGRESS
        if code is not None:
            self._reply(reply_to, SyncGroupResponse(error_code=code))
            return self._end()
        member = self.members[req.member_id]
        member.last_heartbeat_ms = now_ms
        was_pending = member.member_id in self.pending_sync
        self.pending_sync.discard(member.member_id)
        if self.state is _STABLE:
            self._reply(reply_to, self._sync_response(member))
            if was_pending:
                self._maybe_cancel_sync_timer()
            return self._end()
        # CompletingRebalance: park until the leader's assignment arrives.
        self._supersede(member.sync_reply, reply_to, SyncGroupResponse(error_code=_REBALANCE_IN_PROGRESS))
        member.sync_reply = reply_to
        if member.member_id == self.leader_id:
            given = {a.member_id: a.assignment for a in req.assignments}
            for m in self.members.values():
                m.assignment = given.get(m.member_id, b"")
            self._transition(_STABLE)
            self._persist()
            self._log_stable()
            for m in self.members.values():
                if m.sync_reply is not None:
                    self._answer_sync(m, self._sync_response(m))
            self._maybe_cancel_sync_timer()
        return self._end()

    def handle_heartbeat(self, req: HeartbeatRequest, reply_to: Any, now_ms: int) -> list[Output]:
        self._begin(now_ms)
        code = self._validate_member(req.member_id, req.group_instance_id, req.generation_id)
        if code is None:
            self.members[req.member_id].last_heartbeat_ms = now_ms
            if self.state is _PREPARING_REBALANCE:
                code = _REBALANCE_IN_PROGRESS
        self._reply(reply_to, HeartbeatResponse(error_code=code or _NO_ERROR))
        return self._end()

    def handle_leave(self, req: LeaveGroupRequest, reply_to: Any, now_ms: int) -> list[Output]:
        self._begin(now_ms)
        results = []
        for who in req.members:
            member_id = who.member_id
            if not member_id and who.group_instance_id is not None:
                member_id = self.static_members.get(who.group_instance_id, "")
            code = _NO_ERROR
            if who.group_instance_id is not None and self.static_members.get(who.group_instance_id) not in (None, member_id):
                code = ErrorCode.FENCED_INSTANCE_ID
            elif member_id in self.pending_members:
                # Kafka: a member that got its id but never joined may leave too.
                del self.pending_members[member_id]
                self._forget_first_join(member_id)
                self._out.append(CancelTimer(self.timers.pending(member_id)))
                self._log(events.PendingMemberLeft, member_id=member_id)
                results.append(LeaveGroupResponseMember(member_id=member_id, group_instance_id=who.group_instance_id))
                self._try_complete_join()
                continue
            elif member_id not in self.members:
                code = _UNKNOWN_MEMBER_ID
            results.append(LeaveGroupResponseMember(member_id=member_id, group_instance_id=who.group_instance_id, error_code=code))
            if code is _NO_ERROR:
                reason = who.reason or "member left the group"
                self._remove_member(self.members[member_id], RemovalReason.LEFT, f"{member_id} left ({reason})")
        self._reply(reply_to, LeaveGroupResponse(members=results))
        return self._end()

    def on_timer(self, key: tuple, now_ms: int) -> list[Output]:
        """A timer armed earlier has fired. Timers that no longer apply change nothing."""
        self._begin(now_ms)
        kind = key[0]
        if kind == "join" and self.state is _PREPARING_REBALANCE:
            self._on_join_deadline()
        elif kind == "sync" and key[2] == self.generation_id and self.pending_sync:
            self._on_sync_deadline()
        elif kind == "session" and key[2] in self.members:
            self._on_session_deadline(self.members[key[2]])
        elif kind == "pending" and key[2] in self.pending_members:
            del self.pending_members[key[2]]
            self._forget_first_join(key[2])
            self._log(events.PendingMemberExpired, member_id=key[2])
            if self.state is _PREPARING_REBALANCE:
                self._try_complete_join()
        return self._end()

    def describe(self) -> DescribedGroup:
        stable = self.state is _STABLE
        return DescribedGroup(
            group_id=self.group_id,
            group_state=self.state.value,
            protocol_type=self.current_protocol_type or "",
            protocol_data=(self.protocol_name or "") if stable else "",
            members=[
                DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(self.protocol_name) if stable and self.protocol_name else b"",
                    member_assignment=m.assignment if stable else b"",
                )
                for m in self.members.values()
            ],
            generation_id=self.generation_id,
            leader=self.leader_id or "",
        )

    def restore(self, record: GroupMetadataRecord, now_ms: int) -> list[Output]:
        """Load this new group from its latest persisted record, as Kafka loads a group from
        __consumer_offsets: Stable with the record's generation, protocol, leader, members and
        assignments (or Empty), every member's session deadline reset to now + its session
        timeout. Members that keep heartbeating their generation carry on; the others expire."""
        self._begin(now_ms)
        assert not self.members and record.group_id == self.group_id
        self.generation_id = record.generation_id
        self.protocol_type, self.protocol_name = record.protocol_type, record.protocol_name
        self.leader_id = record.leader
        for m in record.members:
            member = Member(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                            client_host=m.client_host, session_timeout_ms=m.session_timeout_ms,
                            rebalance_timeout_ms=m.rebalance_timeout_ms, protocol_type=record.protocol_type or "",
                            protocols=list(m.protocols), assignment=m.assignment, last_heartbeat_ms=now_ms)
            self.members[m.member_id] = member
            self._track(member, +1)
            if m.group_instance_id is not None:
                self.static_members[m.group_instance_id] = m.member_id
            self._arm_session(member)
        self.state = _STABLE if self.members else _EMPTY
        if not self.members:
            self.empty_since_ms = record.ts_ms  # an Empty record is written as the group becomes Empty
        self._snapshot_subscriptions()
        self._log(events.GroupLoaded, leader=self.leader_id, protocol_name=self.protocol_name, members=list(self.members),
                  written_ms=record.ts_ms)
        return self._end()

    # ------------------------------------------------------------------ online migration (consumer_classic.py)

    def hand_over(self, now_ms: int) -> list[Output]:
        """The members move into the consumer group this group converts to (Kafka's online upgrade):
        parked JoinGroups and SyncGroups are answered REBALANCE_IN_PROGRESS (they rejoin, now into
        the consumer group), pending member ids are forgotten, timers cancelled. The group stays,
        Empty with its offsets, as the consumer group's offset store; its Empty record supersedes
        the one with members (Kafka writes the classic group's tombstone)."""
        self._begin(now_ms)
        for m in self.members.values():
            self._supersede(m.join_reply, None, JoinGroupResponse(error_code=_REBALANCE_IN_PROGRESS,
                                                                  member_id=m.member_id))
            self._supersede(m.sync_reply, None, SyncGroupResponse(error_code=_REBALANCE_IN_PROGRESS))
            self._out.append(CancelTimer(self.timers.session(m.member_id)))
        for mid in self.pending_members:
            self._out.append(CancelTimer(self.timers.pending(mid)))
        self._out.append(CancelTimer(self.timers.join()))
        self._out.append(CancelTimer(self.timers.sync(self.generation_id)))
        for collection in (self.members, self.pending_members, self.static_members, self.first_joins,
                           self._first_join_tokens, self._support):
            collection.clear()
        self.pending_sync.clear()
        self.leader_id, self.protocol_name, self.initial_delay_active = None, None, False
        self._transition(_EMPTY)
        self._snapshot_subscriptions()
        self._persist()
        return self._end()

    def adopt(self, members: list[Member], generation_id: int, trigger: str, cause: RebalanceCause | None,
              now_ms: int) -> list[Output]:
        """Become the classic group a consumer group converts back to (Kafka's
        ClassicGroup.fromConsumerGroup and convertToClassicGroup): Stable at `generation_id` with
        `members` (their assignments given), the first the leader, the protocol by vote, persisted;
        then a rebalance (unless `cause` is None), so that each member rejoins and the leader assigns."""
        self._begin(now_ms)
        assert not self.members and not self.pending_members and members
        self.generation_id, self.protocol_type = generation_id, members[0].protocol_type
        for m in members:
            self.members[m.member_id] = m
            self._track(m, +1)
            if m.group_instance_id is not None:
                self.static_members[m.group_instance_id] = m.member_id
            self._arm_session(m)
        self.leader_id = members[0].member_id
        self.protocol_name = self._select_protocol()
        self._transition(_STABLE)
        self._snapshot_subscriptions()
        self._persist()
        if cause is not None:
            self._prepare_rebalance(trigger, cause)
        return self._end()

    # ------------------------------------------------------------------ offsets (docs/protocol.md §3.15, §3.16)

    def handle_offset_commit(self, req: OffsetCommitRequest, reply_to: Any, now_ms: int,
                             partitions: Mapping[str, int], precheck: ErrorCode | None = None) -> list[Output]:
        """OffsetCommit, in Kafka's order. `partitions` (topic -> partition count) are the topics
        that exist: a partition of any other gets UNKNOWN_TOPIC_OR_PARTITION, and if none is left
        the group is not touched. Then `validate_commit`: a refusal answers every remaining
        partition (and the top-level `error_code`) with the error and changes nothing. Then
        metadata longer than offset.metadata.max.bytes gets OFFSET_METADATA_TOO_LARGE; the rest is
        stored and persisted (Persist outputs before the reply). An accepted commit from a member
        of a Stable or PreparingRebalance group counts as its heartbeat. `precheck`, if given, is the
        broker's refusal (a new group it will not make), answered like `validate_commit`'s."""
        return self._commit_offsets(req, reply_to, now_ms, partitions, None, precheck)

    def handle_txn_offset_commit(self, req: TxnOffsetCommitRequest, reply_to: Any, now_ms: int,
                                 partitions: Mapping[str, int], precheck: ErrorCode | None) -> list[Output]:
        """TxnOffsetCommit's group part: as OffsetCommit, with `precheck` the transaction
        coordinator's verdict on the producer (checked before the group), Kafka's transactional
        member checks, and the accepted offsets staged for the producer's transaction instead of
        committed (`on_txn_completed` ends them)."""
        return self._commit_offsets(req, reply_to, now_ms, partitions, req.producer_id, precheck)

    def handle_offset_fetch(self, req: OffsetFetchRequest, reply_to: Any, now_ms: int) -> list[Output]:
        """OffsetFetch: the committed offsets, whatever the state. On an absent group every
        offset is -1 (and `topics` nil gives no topics), as in Kafka: not an error. Raises
        AnswerTooLarge, before anything else, when the answer cannot fit in
        grouplab.response.max.bytes (the broker answers that)."""
        response = fetch_response(self.offsets, req, self.config.response_max_bytes)
        self._begin(now_ms)
        self._reply(reply_to, response)
        return self._end()

    def handle_offset_delete(self, req: OffsetDeleteRequest, reply_to: Any, now_ms: int,
                             partitions: Mapping[str, int],
                             subscribed: Callable[[str], bool] | None = None) -> list[Output]:
        """OffsetDelete, Kafka's (ClassicGroup.validateOffsetDelete, then
        OffsetMetadataManager.deleteOffsets): a group that does not exist is GROUP_ID_NOT_FOUND; one
        with members whose protocol type is not "consumer" is NON_EMPTY_GROUP; either refusal has no
        partitions and changes nothing. Otherwise each partition is answered on its own
        (offsets.delete_offsets): those of topics the members subscribe to are
        GROUP_SUBSCRIBED_TO_TOPIC, the others are deleted, tombstones persisted before the answer and
        `offsets_deleted` logged. An Empty group left with no offsets stays until the retention
        check deletes it, as in Kafka. `subscribed`: whose subscriptions count, when this group
        only keeps a consumer-protocol group's offsets (the broker's; default: its own members')."""
        self._begin(now_ms)
        refusal = self._offset_delete_refusal()
        if refusal is not None:
            self._reply(reply_to, OffsetDeleteResponse(error_code=refusal))
            return self._end()
        response, gone, tombstones = delete_offsets(self.offsets, req, partitions, subscribed or self.is_subscribed,
                                                    now_ms)
        self._out += [Persist(t) for t in tombstones]
        self._reply(reply_to, response)
        if gone:
            self._log(events.OffsetsDeleted, partitions=partition_pairs(gone))
        return self._end()

    @property
    def current_protocol_type(self) -> str | None:
        """Kafka's protocol type of the group (what DescribeGroups and ListGroups show): its members'
        (they all share one), else the last one it had, which an Empty group keeps; None for a group
        that never had members (a simple consumer's). Kafka's ClassicGroup takes it from the first
        member that joins an empty group; grouplab's `protocol_type` is set when a generation completes."""
        if self.members:
            return next(iter(self.members.values())).protocol_type
        return self.protocol_type

    def is_subscribed(self, topic: str) -> bool:
        """Kafka's ClassicGroup.isSubscribedToTopic, for OffsetDelete: does a member consume `topic`,
        by the subscriptions of the last completed generation (none if it had no members)? An Empty
        group subscribes to nothing; where they are not known (the group's first generation is still
        forming, or the metadata cannot be read), every topic counts as subscribed in a group of the
        consumer protocol."""
        if self.state is _EMPTY:
            return False
        topics = self._subscribed_topics()
        return topic in topics if topics is not None else self.current_protocol_type == consumer_protocol.PROTOCOL_TYPE

    def on_txn_completed(self, producer_id: int, commit: bool, now_ms: int) -> list[Output]:
        """The transaction coordinator ended `producer_id`'s transaction: its staged offsets become
        committed (a Persist each, for the shell to write before the EndTxn reply) and are logged as
        `offsets_committed` with the producer id, or are dropped (`txn_offsets_aborted`)."""
        self._begin(now_ms)
        staged = sorted(self.offsets.pending.get(producer_id, {}))
        records = self.offsets.complete_txn(producer_id, commit)
        self._out += [Persist(r) for r in records]
        if commit and records:
            tps = [TopicPartition(r.topic, r.partition) for r in records]
            order = sorted(range(len(tps)), key=lambda i: tps[i])
            self._log(events.OffsetsCommitted, member_id="", partitions=partition_pairs(tps[i] for i in order),
                      offsets=[records[i].offset for i in order], producer_id=producer_id)
        elif not commit and staged:
            self._log(events.TxnOffsetsAborted, producer_id=producer_id, partitions=partition_pairs(staged))
        return self._end()

    def restore_offsets(self, records: Iterable[OffsetCommitRecord], now_ms: int) -> list[Output]:
        """Load this group's persisted offsets (in log order: a later record replaces), after the
        group's own record if it has one; logs `offsets_loaded`."""
        self._begin(now_ms)
        for record in records:
            self.offsets.restore(record)
        self._log(events.OffsetsLoaded, committed_partitions=len(self.offsets.committed))
        return self._end()

    # ------------------------------------------------------------------ expiry and deletion (docs/protocol.md §4.15)

    @property
    def dead(self) -> bool:
        """Deleted or expired (or an `absent` stand-in): the broker does not keep it."""
        return self.state is _DEAD

    @property
    def deletable(self) -> bool:
        """Empty with nothing left to keep: no pending member id, no offset committed or staged."""
        return (self.state is _EMPTY and not self.pending_members and not self.offsets.committed
                and not self.offsets.pending)

    def expire_offsets(self, now_ms: int, retention_ms: int) -> list[Output]:
        """The retention check (offsets.retention.check.interval.ms), Kafka's since KIP-211. Only
        an Empty group's offsets expire: `retention_ms` after it became Empty, or, for a group that
        has had no members since (a simple consumer's, committing with generation -1), after each
        offset's commit. Expired offsets get tombstones (`offsets_expired`); then a group left with
        nothing (`deletable`) is deleted like DeleteGroups deletes it (`group_deleted`, Dead)."""
        self._begin(now_ms)
        if self.state is not _EMPTY:
            return self._end()
        expired = self.offsets.expired(now_ms, retention_ms, self.empty_since_ms)
        if expired:
            self._out += [Persist(t) for t in self.offsets.remove(expired, now_ms)]
            self._log(events.OffsetsExpired, partitions=partition_pairs(expired), empty_since_ms=self.empty_since_ms)
        if self.deletable:
            self._delete("expired")
        return self._end()

    def expire_unsubscribed_offsets(self, now_ms: int, retention_ms: int, subscribed: frozenset[str]) -> list[Output]:
        """The retention check for the offset store of a consumer-protocol group (KIP-848): the
        offsets of every topic no member subscribes to (all of them, once the group is Empty) expire
        `retention_ms` after their commit, whether or not the group has members (Kafka's
        ConsumerGroup.offsetExpirationCondition). The broker decides whether the group goes."""
        self._begin(now_ms)
        expired = [tp for tp in self.offsets.expired(now_ms, retention_ms, None) if tp.topic not in subscribed]
        if expired:
            self._out += [Persist(t) for t in self.offsets.remove(expired, now_ms)]
            self._log(events.OffsetsExpired, partitions=partition_pairs(expired), empty_since_ms=None)
        return self._end()

    def delete_topic_offsets(self, topic: str, now_ms: int) -> list[Output]:
        """The topic was deleted (DeleteTopics): its partitions' committed offsets go, with a
        tombstone each, and so do offsets a transaction staged for them (it can no longer commit
        them), as Kafka's coordinator does on partition deletion; `topic_offsets_deleted` if there
        were any. The group itself stays, whatever its state: an Empty group left with nothing is
        deleted by the next retention check, as in Kafka."""
        self._begin(now_ms)
        tombstones, staged = self.offsets.remove_topic(topic, now_ms)
        self._out += [Persist(t) for t in tombstones]
        if tombstones or staged:
            committed = [TopicPartition(t.topic, t.partition) for t in tombstones]
            self._log(events.TopicOffsetsDeleted, topic=topic, partitions=partition_pairs(committed),
                      staged_partitions=partition_pairs(staged))
        return self._end()

    def delete(self, now_ms: int) -> list[Output]:
        """DeleteGroups of this Empty group (the broker checked the state): its offsets, staged
        ones included, and pending member ids go, tombstones are persisted, and it is Dead."""
        self._begin(now_ms)
        assert self.state is _EMPTY, self.state
        self._delete("delete_groups")
        return self._end()

    def _delete(self, reason: str) -> None:
        tombstones = self.offsets.remove(sorted(self.offsets.committed), self._now)
        self._out += [Persist(t) for t in tombstones]
        self._out.append(Persist(GroupTombstone(self.group_id, self._now)))
        self.offsets.pending.clear()  # a transaction that later ends finds no group: nothing to do
        for member_id in self.pending_members:
            self._out.append(CancelTimer(self.timers.pending(member_id)))
        self.pending_members.clear()
        self.first_joins.clear()
        self._first_join_tokens.clear()
        self.state = _DEAD
        self._log(events.GroupDeleted, reason=reason, offsets_deleted=len(tombstones))

    def validate_commit(self, member_id: str, group_instance_id: str | None, generation_id: int,
                        transactional: bool = False) -> ErrorCode | None:
        """Kafka's rules for who may commit to this group (ClassicGroup.validateOffsetCommit, and
        handleCommitOffsets for a group that does not exist). None: accepted.

        - No such group (an `absent` stand-in): generation < 0 is a simple consumer (accepted; the
          group is created Empty when something is stored); generation >= 0 is ILLEGAL_GENERATION
          (a member of a generation the coordinator no longer knows). Transactional: accepted.
        - Empty group and generation < 0: accepted, whatever member id (a simple consumer).
        - Otherwise, if a generation >= 0, a member id or an instance id is given: the instance id,
          if given, must belong to this member id (unknown instance: UNKNOWN_MEMBER_ID; another
          member's: FENCED_INSTANCE_ID), the member must be in the group (UNKNOWN_MEMBER_ID), and
          the generation must be the group's (ILLEGAL_GENERATION). Generation -1 with a known
          member is therefore ILLEGAL_GENERATION.
        - Generation < 0 and member id "" on a non-Empty group: UNKNOWN_MEMBER_ID (only members
          may commit to a group that has members). Not for transactional commits.
        - CompletingRebalance: REBALANCE_IN_PROGRESS even for a valid member and generation (the
          member has its new generation but not yet its assignment). Not for transactional
          commits. PreparingRebalance is accepted: members commit in their revocation callbacks
          before rejoining.
        """
        if self.state is _DEAD:
            return _ILLEGAL_GENERATION if generation_id >= 0 and not transactional else None
        if generation_id < 0 and self.state is _EMPTY:
            return None
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group_instance_id is not None:
                owner = self.static_members.get(group_instance_id)
                if owner is None:
                    return _UNKNOWN_MEMBER_ID
                if owner != member_id:
                    return ErrorCode.FENCED_INSTANCE_ID
            if member_id not in self.members:
                return _UNKNOWN_MEMBER_ID
            if generation_id != self.generation_id:
                return _ILLEGAL_GENERATION
        elif not transactional and self.state is not _EMPTY:
            return _UNKNOWN_MEMBER_ID
        if not transactional and self.state is _COMPLETING_REBALANCE:
            return _REBALANCE_IN_PROGRESS
        return None

    def _commit_offsets(self, req: OffsetCommitRequest | TxnOffsetCommitRequest, reply_to: Any, now_ms: int,
                        partitions: Mapping[str, int], producer_id: int | None,
                        precheck: ErrorCode | None) -> list[Output]:
        self._begin(now_ms)
        triage = CommitTriage.of(req, partitions)
        if not triage.candidates:
            self._reply(reply_to, triage.response())
            return self._end()
        error = precheck or self.validate_commit(req.member_id, req.group_instance_id, req.generation_id,
                                                 transactional=producer_id is not None)
        if error is not None:
            triage.refuse(error)
            self._reply(reply_to, triage.response())
            self._log(events.OffsetCommitRejected, member_id=req.member_id, request_generation_id=req.generation_id,
                      error=error.name, partitions=partition_pairs(triage.candidate_partitions()))
            return self._end()
        member = self.members.get(req.member_id)
        if member is not None and self.state in (_STABLE, _PREPARING_REBALANCE):
            member.last_heartbeat_ms = now_ms  # the commit completes the heartbeat, as in Kafka
        accepted = triage.accept(self.config.offset_metadata_max_bytes, now_ms)
        if not accepted:
            self._reply(reply_to, triage.response())
            return self._end()
        if self.state is _DEAD:
            self.state = _EMPTY  # a simple consumer's group comes to exist (not logged as a transition)
        tps = sorted(accepted)
        offsets = [accepted[tp].offset for tp in tps]
        if producer_id is None:
            self._out += [Persist(r) for r in self.offsets.commit(accepted)]
            self._reply(reply_to, triage.response())
            self._log(events.OffsetsCommitted, member_id=req.member_id, partitions=partition_pairs(tps), offsets=offsets,
                      producer_id=None)
        else:
            self.offsets.stage_txn(producer_id, accepted, now_ms)
            self._reply(reply_to, triage.response())
            self._log(events.TxnOffsetsStaged, member_id=req.member_id, partitions=partition_pairs(tps), offsets=offsets,
                      producer_id=producer_id)
        return self._end()

    # ------------------------------------------------------------------ joins

    def _validate_join(self, req: JoinGroupRequest, client_id: str) -> tuple[ErrorCode, str] | None:
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return ErrorCode.INVALID_SESSION_TIMEOUT, (
                f"session.timeout.ms {req.session_timeout_ms} is outside "
                f"[{cfg.group_min_session_timeout_ms}, {cfg.group_max_session_timeout_ms}]"
            )
        if req.rebalance_timeout_ms <= 0:
            return ErrorCode.INVALID_REQUEST, "rebalance_timeout_ms must be positive"
        if len(req.protocols) > cfg.max_protocols_per_member:
            return ErrorCode.INVALID_REQUEST, (f"{len(req.protocols)} protocols exceed "
                                               f"grouplab.max.protocols.per.member={cfg.max_protocols_per_member}")
        if len(client_id) > cfg.max_id_length:
            return ErrorCode.INVALID_REQUEST, (f"client id of {len(client_id)} characters exceeds "
                                               f"grouplab.max.id.length={cfg.max_id_length}")
        if req.group_instance_id is not None and (problem := instance_id_problem(req.group_instance_id)):
            return ErrorCode.INVALID_REQUEST, problem
        names = [p.name for p in req.protocols]
        if not req.protocol_type or not names or len(set(names)) != len(names):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "protocol_type and a list of distinct protocols are required"
        known = req.member_id in self.members or req.member_id in self.pending_members
        if req.member_id and not known:
            if req.group_instance_id is not None and req.group_instance_id in self.static_members:
                return ErrorCode.FENCED_INSTANCE_ID, f"instance {req.group_instance_id} is owned by another member id"
            return _UNKNOWN_MEMBER_ID, f"member {req.member_id} is not in group {self.group_id}"
        if req.member_id in self.members and self._is_fenced(req.member_id, req.group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID, f"instance {req.group_instance_id} is owned by another member id"
        others_type = next((m.protocol_type for m in self.members.values() if m.member_id != req.member_id), None)
        if others_type is not None:
            shared = self._candidates(excluding=req.member_id)
            if req.protocol_type != others_type or shared.isdisjoint(names):
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, (
                    f"protocols {names} share none with the group's {sorted(shared)} (protocol_type {others_type!r})"
                )
        is_new = not known and not (req.group_instance_id is not None and req.group_instance_id in self.static_members)
        if is_new and len(self.members) + len(self.pending_members) >= cfg.group_max_size:
            return ErrorCode.GROUP_MAX_SIZE_REACHED, f"group {self.group_id} has reached group.max.size={cfg.group_max_size}"
        if req.member_id in self.pending_members and len(self.members) >= cfg.group_max_size:
            return ErrorCode.GROUP_MAX_SIZE_REACHED, f"group {self.group_id} has reached group.max.size={cfg.group_max_size}"
        return None

    def _answer_duplicate_first_join(self, member_id: str, reply_to: Any) -> None:
        """The same JoinGroup (same connection and correlation id) arrived again: a duplicated
        message, not a new process. Minting another id would fence or strand the real one."""
        if member_id in self.pending_members:
            self._reply(reply_to, JoinGroupResponse(error_code=_MEMBER_ID_REQUIRED, member_id=member_id))
        elif member_id in self.members and self.members[member_id].join_reply is None:
            member = self.members[member_id]
            self._reply(reply_to, self._join_response(member, skip_assignment=self.state is _STABLE))
        self._log(events.DuplicateJoinIgnored, member_id=member_id)

    def _join_new_dynamic(self, req: JoinGroupRequest, reply_to: Any, client_id: str) -> None:
        """KIP-394: hand out a member id first; the member joins for real with it."""
        member_id = self.new_member_id(client_id or "consumer")
        self._remember_first_join(reply_to, member_id)
        self.pending_members[member_id] = req.session_timeout_ms
        self._out.append(ArmTimer(self.timers.pending(member_id), self._now + req.session_timeout_ms))
        self._reply(reply_to, JoinGroupResponse(error_code=_MEMBER_ID_REQUIRED, member_id=member_id))
        self._log(events.MemberIdAssigned, member_id=member_id)

    def _join_static_unknown(self, req: JoinGroupRequest, reply_to: Any, client_id: str, client_host: str) -> None:
        instance = req.group_instance_id
        assert instance is not None
        member_id = self.new_member_id(client_id or instance)
        self._remember_first_join(reply_to, member_id)
        old_id = self.static_members.get(instance)
        if old_id is None:
            member = self._new_member(req, member_id, client_id, client_host)
            self._add_member_and_rebalance(member, reply_to, f"static member {instance} joined",
                                           RebalanceCause.STATIC_MEMBER_JOINED)
            return
        # KIP-345: a known instance comes back under a new member id and takes the old one's place.
        old = self.members[old_id]
        self._forget_first_join(old_id)
        self._supersede(old.join_reply, reply_to, JoinGroupResponse(error_code=ErrorCode.FENCED_INSTANCE_ID))
        self._supersede(old.sync_reply, None, SyncGroupResponse(error_code=ErrorCode.FENCED_INSTANCE_ID))
        self._out.append(CancelTimer(self.timers.session(old_id)))
        member = self._new_member(req, member_id, client_id, client_host)
        member.assignment = old.assignment
        member.last_heartbeat_ms = self._now
        # The new id takes the old one's place in join order (leader choice and vote tie-breaks use it).
        self.members = {(member_id if mid == old_id else mid): (member if mid == old_id else m) for mid, m in self.members.items()}
        self._track(old, -1)
        self._track(member, +1)
        self.static_members[instance] = member_id
        if self.leader_id == old_id:
            self.leader_id = member_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(member_id)
        self._log(events.StaticMemberReplaced, member_id=member_id, old_member_id=old_id, group_instance_id=instance)
        unchanged = old.protocol_type == member.protocol_type and old.protocols == member.protocols
        if self.state is _STABLE and unchanged:
            self._arm_session(member)
            self._persist()
            self._reply(reply_to, self._join_response(member, skip_assignment=True))
        elif self.state is _PREPARING_REBALANCE:
            member.join_reply = reply_to
            self._try_complete_join()
        else:
            member.join_reply = reply_to
            self._prepare_rebalance(f"static member {instance} rejoined as {member_id}", RebalanceCause.STATIC_MEMBER_REJOINED)

    def _join_existing(self, member: Member, req: JoinGroupRequest, reply_to: Any) -> None:
        changed = member.protocol_type != req.protocol_type or member.protocols != [(p.name, p.metadata) for p in req.protocols]
        if self.state is _PREPARING_REBALANCE:
            self._update_member(member, req, reply_to)
            self._try_complete_join()
        elif self.state is _COMPLETING_REBALANCE and not changed:
            # A retried JoinGroup (lost response): answer with the generation already formed.
            self._reply(reply_to, self._join_response(member))
        elif self.state is _STABLE and not changed and member.member_id != self.leader_id:
            self._reply(reply_to, self._join_response(member))
        else:
            self._update_member(member, req, reply_to)
            why, cause = (("leader rejoined", RebalanceCause.LEADER_REJOINED) if not changed
                          else ("member metadata changed", RebalanceCause.MEMBER_METADATA_CHANGED))
            said = f": {req.reason}" if req.reason else ""
            self._prepare_rebalance(f"{why} ({member.member_id}{said})", cause)

    def _new_member(self, req: JoinGroupRequest, member_id: str, client_id: str, client_host: str) -> Member:
        return Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=[(p.name, p.metadata) for p in req.protocols],
            last_heartbeat_ms=self._now,
        )

    def _update_member(self, member: Member, req: JoinGroupRequest, reply_to: Any) -> None:
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.protocol_type = req.protocol_type
        protocols = [(p.name, p.metadata) for p in req.protocols]
        if protocols != member.protocols:  # (a rejoin mostly repeats them)
            self._track(member, -1)
            member.protocols = protocols
            self._track(member, +1)
        if member.join_reply is not None:  # (the answer built only when there is a parked join)
            self._supersede(member.join_reply, reply_to,
                            JoinGroupResponse(error_code=_REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.join_reply = reply_to

    def _add_member_and_rebalance(self, member: Member, reply_to: Any, why: str, cause: RebalanceCause) -> None:
        self.members[member.member_id] = member
        self._track(member, +1)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join_reply = reply_to
        self._log(events.MemberJoined, member_id=member.member_id, group_instance_id=member.group_instance_id,
                  client_id=member.client_id, protocols=member.protocol_names)
        if self.state is _PREPARING_REBALANCE:
            if self.initial_delay_active:
                self.new_member_added = True
            self._try_complete_join()
        else:
            self._prepare_rebalance(why, cause)

    # ------------------------------------------------------------------ rebalance

    def _prepare_rebalance(self, trigger: str, cause: RebalanceCause) -> None:
        if self.state is _COMPLETING_REBALANCE:
            # The assignment being formed is void: tell parked followers to rejoin.
            for m in self.members.values():
                m.assignment = b""
                if m.sync_reply is not None:
                    self._answer_sync(m, SyncGroupResponse(error_code=_REBALANCE_IN_PROGRESS))
        if self.pending_sync:
            self.pending_sync.clear()
            self._out.append(CancelTimer(self.timers.sync(self.generation_id)))
        was_empty = self.state is _EMPTY
        self.rebalance_trigger = trigger
        self._transition(_PREPARING_REBALANCE)
        self._log(events.RebalanceStarted, trigger=trigger, cause=cause, members=list(self.members))
        if was_empty:
            delay = self.config.group_initial_rebalance_delay_ms
            self.initial_delay_active = True
            # new_member_added is not cleared here: Kafka clears it only when it extends the delay
            # (tryCompleteInitialRebalanceElseSchedule), so a delay that ran out of rebalance time
            # with a member added in its last window leaves it set for the group's next initial delay.
            self.initial_delay_remaining_ms = max(self._rebalance_timeout_ms() - delay, 0)
            self._out.append(ArmTimer(self.timers.join(), self._now + delay))
        else:
            self._out.append(ArmTimer(self.timers.join(), self._now + self._rebalance_timeout_ms()))
            self._try_complete_join()

    def _try_complete_join(self) -> None:
        if self.state is not _PREPARING_REBALANCE or self.initial_delay_active:
            return
        if self.pending_members:
            return
        if all(m.join_reply is not None for m in self.members.values()):
            self._out.append(CancelTimer(self.timers.join()))
            self._complete_join()

    def _on_join_deadline(self) -> None:
        if self.initial_delay_active:
            if self.new_member_added and self.initial_delay_remaining_ms > 0:
                delay = min(self.config.group_initial_rebalance_delay_ms, self.initial_delay_remaining_ms)
                self.initial_delay_remaining_ms -= delay
                self.new_member_added = False
                self._out.append(ArmTimer(self.timers.join(), self._now + delay))
                return
            self.initial_delay_active = False
        self._complete_join()

    def _complete_join(self) -> None:
        for m in [m for m in self.members.values() if m.join_reply is None]:
            self._remove_member(m, RemovalReason.REBALANCE_TIMEOUT, "did not rejoin within the rebalance timeout", update=False)
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members), None)
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None  # the type stays, as Kafka's ClassicGroup keeps it (ListGroups shows it)
            self._snapshot_subscriptions()
            self._transition(_EMPTY)
            self._persist()
            self._log(events.GenerationCompleted, protocol_name=None, leader=None, members=[], trigger=self.rebalance_trigger)
            return
        self.protocol_type = next(iter(self.members.values())).protocol_type
        self.protocol_name = self._select_protocol()
        self._snapshot_subscriptions()
        self._transition(_COMPLETING_REBALANCE)
        self._log(events.GenerationCompleted, protocol_name=self.protocol_name, leader=self.leader_id,
                  members=list(self.members), trigger=self.rebalance_trigger)
        self.pending_sync = set(self.members)
        self._out.append(ArmTimer(self.timers.sync(self.generation_id), self._now + self._rebalance_timeout_ms()))
        for m in self.members.values():
            self._reply(m.join_reply, self._join_response(m))
            m.join_reply = None
            m.last_heartbeat_ms = self._now
            self._arm_session(m)

    def _select_protocol(self) -> str:
        """Kafka's vote: candidates are the protocols every member supports; each member votes for
        its most preferred candidate; most votes wins. Ties (Kafka leaves them to hash order) go to
        the candidate the earliest-joined member prefers most."""
        members = list(self.members.values())
        candidates = self._candidates()
        votes = Counter(m.vote(candidates) for m in members)
        first_pref = [name for name in members[0].protocol_names if name in candidates]
        return max(first_pref, key=lambda name: (votes[name], -first_pref.index(name)))

    def _on_sync_deadline(self) -> None:
        late = [self.members[mid] for mid in self.members if mid in self.pending_sync]
        self.pending_sync.clear()
        for m in late:
            self._remove_member(m, RemovalReason.SYNC_TIMEOUT, "did not send SyncGroup within the rebalance timeout", update=False)
        self._prepare_rebalance(f"{', '.join(m.member_id for m in late)} removed: {RemovalReason.SYNC_TIMEOUT.value}",
                                RebalanceCause.SYNC_TIMEOUT)

    def _maybe_cancel_sync_timer(self) -> None:
        if not self.pending_sync:
            self._out.append(CancelTimer(self.timers.sync(self.generation_id)))

    # ------------------------------------------------------------------ liveness

    def _arm_session(self, member: Member) -> None:
        self._out.append(ArmTimer(self.timers.session(member.member_id), member.last_heartbeat_ms + member.session_timeout_ms))

    def _answer_sync(self, member: Member, response: SyncGroupResponse) -> None:
        """Answer a parked SyncGroup (its assignment, or an error) and restart the member's session
        from now, as Kafka's propagateAssignment does: while it waited on us its session could not
        expire, and it needs a whole session to send its next heartbeat or JoinGroup."""
        self._reply(member.sync_reply, response)
        member.sync_reply = None
        member.last_heartbeat_ms = self._now
        self._arm_session(member)

    def _on_session_deadline(self, member: Member) -> None:
        if member.join_reply is not None or member.sync_reply is not None:
            member.last_heartbeat_ms = self._now  # waiting on us counts as alive
            self._arm_session(member)
            return
        deadline = member.last_heartbeat_ms + member.session_timeout_ms
        if self._now < deadline:
            self._out.append(ArmTimer(self.timers.session(member.member_id), deadline))
            return
        self._remove_member(member, RemovalReason.SESSION_TIMEOUT, f"no heartbeat for {member.session_timeout_ms} ms")

    def _remove_member(self, member: Member, reason: RemovalReason, detail: str, update: bool = True) -> None:
        mid = member.member_id
        del self.members[mid]
        self._track(member, -1)
        self._forget_first_join(mid)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == mid:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(mid)
        self._supersede(member.join_reply, None, JoinGroupResponse(error_code=_UNKNOWN_MEMBER_ID, member_id=mid))
        self._supersede(member.sync_reply, None, SyncGroupResponse(error_code=_UNKNOWN_MEMBER_ID))
        self._out.append(CancelTimer(self.timers.session(mid)))
        if self.leader_id == mid:
            self.leader_id = next(iter(self.members), None)
        self._log(events.MemberRemoved, member_id=mid, reason=reason, detail=detail)
        if not update:
            return
        if self.state in (_STABLE, _COMPLETING_REBALANCE):
            self._prepare_rebalance(f"{mid} removed: {reason.value}", REMOVAL_CAUSE[reason])
        elif self.state is _PREPARING_REBALANCE:
            self._try_complete_join()

    # ------------------------------------------------------------------ helpers

    def _validate_member(self, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode | None:
        if member_id not in self.members:
            if instance_id is not None and instance_id in self.static_members:
                return ErrorCode.FENCED_INSTANCE_ID
            return _UNKNOWN_MEMBER_ID
        if self._is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id != self.generation_id:
            return _ILLEGAL_GENERATION
        return None

    def _offset_delete_refusal(self) -> ErrorCode | None:
        if self.state is _DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if self.state is not _EMPTY and self.current_protocol_type != consumer_protocol.PROTOCOL_TYPE:
            return ErrorCode.NON_EMPTY_GROUP
        return None

    def _snapshot_subscriptions(self) -> None:
        """Kafka's ClassicGroup.computeSubscribedTopics, run where it runs (a generation completes,
        the group is loaded), kept as the metadata to decode only if OffsetDelete asks: not known
        unless the protocol type is "consumer"; none for a group without members; else each
        member's subscription in the chosen protocol."""
        self.subscriptions = None
        if self.protocol_type != consumer_protocol.PROTOCOL_TYPE:
            return
        if not self.members:
            self.subscriptions = []
        elif self.protocol_name is not None:
            try:
                self.subscriptions = [m.metadata(self.protocol_name) for m in self.members.values()]
            except KeyError:  # a restored member without the group's protocol: not known
                pass

    def _subscribed_topics(self) -> set[str] | None:
        if self.subscriptions is None:
            return None
        topics: set[str] = set()
        try:
            for metadata in self.subscriptions:
                topics.update(consumer_protocol.decode_subscription(metadata).topics)
        except ProtocolError:
            return None  # Kafka: "not aware of the subscribed topics"
        return topics

    def _remember_first_join(self, reply_to: Any, member_id: str) -> None:
        self.first_joins[reply_to] = member_id
        self._first_join_tokens.setdefault(member_id, []).append(reply_to)

    def _forget_first_join(self, member_id: str) -> None:
        for token in self._first_join_tokens.pop(member_id, ()):
            if self.first_joins.get(token) == member_id:
                del self.first_joins[token]

    def _is_fenced(self, member_id: str, instance_id: str | None) -> bool:
        return instance_id is not None and self.static_members.get(instance_id, member_id) != member_id

    def _track(self, member: Member, sign: int) -> None:
        for name, _ in member.protocols:
            self._support[name] += sign
            if not self._support[name]:
                del self._support[name]

    def _candidates(self, excluding: str | None = None) -> set[str]:
        """The protocols every member supports (every member but `excluding`, if given)."""
        left_out = self.members.get(excluding) if excluding is not None else None
        n = len(self.members) - (left_out is not None)
        mine = set(left_out.protocol_names) if left_out is not None else set()
        return {name for name, count in self._support.items() if n and count - (name in mine) == n}

    def _rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _join_response(self, member: Member, skip_assignment: bool = False) -> JoinGroupResponse:
        is_leader = member.member_id == self.leader_id
        members = []
        if is_leader:
            assert self.protocol_name is not None  # chosen when the join phase completed
            members = [
                JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                        metadata=m.metadata(self.protocol_name))
                for m in self.members.values()
            ]
        return JoinGroupResponse(
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            member_id=member.member_id,
            members=members,
            skip_assignment=skip_assignment and is_leader,
        )

    def _sync_response(self, member: Member) -> SyncGroupResponse:
        return SyncGroupResponse(protocol_type=self.protocol_type, protocol_name=self.protocol_name, assignment=member.assignment)

    def _supersede(self, old: Any, new: Any, answer: Any) -> None:
        """Answer a parked request that a newer one replaces (a duplicate of the same request is kept)."""
        if old is not None and old != new:
            self._reply(old, answer)

    def _transition(self, to: GroupState) -> None:
        if to is not self.state:
            from_state, self.state = self.state, to
            if to is _EMPTY:
                self.empty_since_ms = self._now
            self._log(events.StateChanged, from_state=from_state, to_state=to)

    def _persist(self) -> None:
        """Make the group's current metadata durable (the shell appends it to its log, if any,
        before sending the replies that follow). Called where Kafka writes the group to
        __consumer_offsets: a generation becomes Stable, a generation completes Empty, a static
        member is replaced without a rebalance."""
        members = [MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                                  m.rebalance_timeout_ms, list(m.protocols), m.assignment)
                   for m in self.members.values()]
        self._out.append(Persist(GroupMetadataRecord(self.group_id, self.generation_id, self.state.value,
                                                     self.protocol_type, self.protocol_name, self.leader_id,
                                                     members, self._now)))

    def _log_stable(self) -> None:
        if not self.log_events:
            return
        assert self.leader_id is not None and self.protocol_name is not None  # Stable: the leader has synced
        assignments: dict[str, Any] = {}
        for m in self.members.values():
            assignments[m.member_id] = _decode_for_log(self.protocol_type, m.assignment)
        clients = {m.member_id: m.client_id for m in self.members.values()}
        self._log(events.GroupStable, leader=self.leader_id, protocol_name=self.protocol_name, assignments=assignments,
                  clients=clients)

    def _log(self, event: Callable[Concatenate[str, int, GroupState, events.Fields], events.GroupEvent], /,
             *args: events.Fields.args, **fields: events.Fields.kwargs) -> None:
        """Log `event` with the group's G fields first (docs/events.md §4.1)."""
        if self.log_events:
            self._emit_log(event(self.group_id, self.generation_id, self.state, *args, **fields))


INSTANCE_ID_MAX_LENGTH = 249  # Kafka's (JoinGroupRequest.validateGroupInstanceId), as for topic names
_INSTANCE_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def instance_id_problem(instance_id: str) -> str | None:
    """Kafka's rule for a group.instance.id, or None if it keeps it: 1 to 249 characters of ASCII
    letters, digits, '.', '_' and '-'. (Kafka's client enforces it; grouplab's coordinator does,
    since it stores the id.)"""
    if not instance_id:
        return "group.instance.id must not be empty"
    if len(instance_id) > INSTANCE_ID_MAX_LENGTH:
        return f"group.instance.id of {len(instance_id)} characters exceeds {INSTANCE_ID_MAX_LENGTH}"
    if not _INSTANCE_ID_CHARS.issuperset(instance_id):
        return f"group.instance.id {instance_id[:40]!r} has a character other than ASCII letters, digits, '.', '_' and '-'"
    return None


def _decode_for_log(protocol_type: str | None, data: bytes) -> Any:
    """Consumer-protocol assignments are decoded for the event log only; the coordinator itself
    treats them as opaque bytes, as Kafka's does."""
    if protocol_type != consumer_protocol.PROTOCOL_TYPE:
        return {"bytes": len(data)}
    try:
        return [[tp.topic, tp.partition] for tp in consumer_protocol.decode_assignment(data).partitions]
    except Exception:
        return {"undecodable_bytes": len(data)}
