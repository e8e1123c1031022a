"""One consumer-protocol group's state machine (KIP-848, Kafka 4's `group.protocol=consumer`), pure:
ConsumerGroupHeartbeats and timer firings in, `outputs` out. No sockets, no clock, no randomness:
`now_ms` comes with every input, new member ids from the injected `new_member_id`, the topics'
partition counts with each heartbeat, and the server-side assignors are given.

There is no join phase and no barrier. Three epochs move the group:

    member joins/leaves/is removed, a subscription, assignor or subscribed topic's
    partition count changes ──▶ group epoch + 1
    group epoch > target assignment epoch ──▶ the assignor computes a new target (epoch = group epoch)
    each member, on its own heartbeats, moves toward its target (consumer_reconcile.py):
    it revokes first, and is given a partition only once its previous holder has let it go.

Group states (Kafka's ConsumerGroup):

    Empty ──first join──▶ Reconciling ──every member STABLE at the target epoch──▶ Stable
      ▲                     ▲   │                                                   │
      │                     │   └── join / leave / subscription / metadata change ◀─┘
      └── last member gone  └── Assigning: group epoch ahead of the target (a removal by a
                                timer: the next heartbeat computes the target)

Member states: STABLE, UNREVOKED_PARTITIONS (must give partitions up; its epoch waits; its
rebalance timeout runs), UNRELEASED_PARTITIONS (at the target epoch, waiting for partitions others
still hold). Leaving: member epoch -1 (removed), -2 (a static member's temporary leave: it keeps
its assignment until its session times out, and a join with the same instance id takes it over).

Every input validates first and answers with Kafka's error without touching state; state changes
only after validation (tests/test_consumer_group.py checks it).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Concatenate, Mapping

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group import REMOVAL_CAUSE
from grouplab.coordinator.consumer_checks import (
    LEAVE_EPOCH,
    Downgrade,
    STATIC_LEAVE_EPOCH,
    Refusal,
    check_member_epoch,
    validate_heartbeat,
)
from grouplab.coordinator.consumer_member import ConsumerMember, as_lists
from grouplab.coordinator.group_log import ConsumerGroupRecord, ConsumerMemberRecord, ConsumerMemberTombstone, Persist
from grouplab.coordinator.consumer_reconcile import (
    Assignment,
    MemberAssignment,
    normalized,
    pairs,
    reconcile,
    unreleased,
)
from grouplab.coordinator.server_assignors import MemberSpec, ServerAssignor
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, Output, StepOutputs
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    ConsumerGroupDescribedGroup,
    ConsumerGroupDescribedMember,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from grouplab.protocol.states import ConsumerGroupState, ConsumerMemberState, GroupEpochCause, RebalanceCause, RemovalReason


def resolve_regex(regex: str | None, topics: Mapping[str, int]) -> frozenset[str]:
    """The topics a subscription regex names: Python `re`, matched against the whole name (Kafka
    uses RE2/J with `matches()`: the same for the patterns clients send, RE2 has no backreferences)."""
    if not regex:
        return frozenset()
    pattern = re.compile(regex)
    return frozenset(t for t in topics if pattern.fullmatch(t))


@dataclass
class ConsumerTimers:
    group_id: str

    def session(self, member_id: str) -> tuple:
        return ("consumer-session", self.group_id, member_id)

    def rebalance(self, member_id: str) -> tuple:
        return ("consumer-rebalance", self.group_id, member_id)

    def join(self, member_id: str) -> tuple:
        """A classic member told to rejoin must within its rebalance timeout (Kafka's join timeout)."""
        return ("consumer-join", self.group_id, member_id)

    def sync(self, member_id: str) -> tuple:
        """A classic member that joined must send SyncGroup within its rebalance timeout."""
        return ("consumer-sync", self.group_id, member_id)


TIMER_KINDS = frozenset({"consumer-session", "consumer-rebalance", "consumer-join", "consumer-sync"})


@dataclass
class ConsumerGroup(StepOutputs):
    group_id: str
    config: BrokerConfig
    assignors: Mapping[str, ServerAssignor]
    new_member_id: Callable[[str], str]  # from the client id, as the classic Group's (Kafka: a random UUID)
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    group_epoch: int = 0
    assignment_epoch: int = 0  # the target assignment's epoch
    assignor_name: str = ""  # the assignor of the last target assignment
    members: dict[str, ConsumerMember] = field(default_factory=dict)  # join order
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)  # member id -> target
    # topic -> partition count of the subscribed topics, as the group epoch last saw them.
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    # (topic, partition) -> the member holding it (assigned, or pending its revocation).
    holders: dict[tuple[str, int], str] = field(default_factory=dict)
    # When the member's rebalance timer was armed: the epoch it must move from.
    revoking_since_epoch: dict[str, int] = field(default_factory=dict)
    # Classic members told to rejoin (REBALANCE_IN_PROGRESS), and those that joined and owe a
    # SyncGroup: each within its rebalance timeout (consumer_classic.py).
    awaiting_rejoin: set[str] = field(default_factory=set)
    awaiting_sync: set[str] = field(default_factory=set)
    # Set by a step that leaves only classic members when the policy allows the downgrade (Kafka's
    # validateOnlineDowngradeWithFencedMembers / WithReplacedMember). The Broker then turns the
    # group into a classic one (consumer_classic.classic_members, Group.adopt).
    downgrade: Downgrade | None = None

    def __post_init__(self) -> None:
        self.timers = ConsumerTimers(self.group_id)
        if not self._supported_assignors():
            raise ValueError(f"none of group.consumer.assignors ({self.config.consumer_assignors}) is given")
        self._out: list[Output] = []
        self._now = 0
        # Durability: the members a step touched, and what the group log holds of the group and of
        # each member, so a step writes only what changed (`_end`).
        self._touched: set[str] = set()
        self._persisted: ConsumerGroupRecord | None = None
        self._persisted_members: dict[str, ConsumerMemberRecord] = {}

    # ------------------------------------------------------------------ public inputs

    def heartbeat(self, req: ConsumerGroupHeartbeatRequest, reply_to: Any, client_id: str, client_host: str,
                  now_ms: int, partitions_per_topic: Mapping[str, int]) -> list[Output]:
        """A ConsumerGroupHeartbeat: join (epoch 0), heartbeat (the member's epoch), leave (-1,
        -2). `partitions_per_topic`: every topic that exists, with its partition count."""
        self._begin(now_ms)
        try:
            validate_heartbeat(req, self._supported_assignors(), self.config.max_id_length)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                self._leave(req)
            else:
                self._heartbeat(req, client_id, client_host, partitions_per_topic, reply_to)
                return self._end()
        except Refusal as refusal:
            self._reply(reply_to, ConsumerGroupHeartbeatResponse(error_code=refusal.code, error_message=refusal.message))
            self._log(events.ConsumerHeartbeatRejected, member_id=req.member_id, member_epoch=req.member_epoch,
                      error=refusal.code.name, reason=refusal.message)
            return self._end()
        self._reply(reply_to, ConsumerGroupHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch,
                                                             heartbeat_interval_ms=self._heartbeat_interval_ms()))
        return self._end()

    def timer(self, key: tuple, now_ms: int) -> list[Output]:
        """A timer armed earlier fired. One that no longer applies changes nothing."""
        self._begin(now_ms)
        kind, member = key[0], self.members.get(key[2])
        if member is None:
            return self._end()
        if kind == "consumer-session":
            deadline = member.last_heartbeat_ms + self.session_timeout_ms(member)
            if now_ms < deadline:
                self._out.append(ArmTimer(key, deadline))
            else:
                self._remove(member, RemovalReason.SESSION_TIMEOUT, GroupEpochCause.SESSION_TIMEOUT,
                             f"no heartbeat for {self.session_timeout_ms(member)} ms")
        elif kind == "consumer-join" and member.member_id in self.awaiting_rejoin:
            self._remove(member, RemovalReason.REBALANCE_TIMEOUT, GroupEpochCause.REBALANCE_TIMEOUT,
                         f"did not rejoin within its rebalance timeout of {member.rebalance_timeout_ms} ms")
        elif kind == "consumer-sync" and member.member_id in self.awaiting_sync:
            self._remove(member, RemovalReason.SYNC_TIMEOUT, GroupEpochCause.REBALANCE_TIMEOUT,
                         f"did not send SyncGroup within its rebalance timeout of {member.rebalance_timeout_ms} ms")
        elif kind == "consumer-rebalance" and self._still_revoking(member):
            self._remove(member, RemovalReason.REBALANCE_TIMEOUT, GroupEpochCause.REBALANCE_TIMEOUT,
                         f"did not revoke {pairs(member.progress.pending_revocation)} within its rebalance timeout "
                         f"of {member.rebalance_timeout_ms} ms")
        return self._end()

    def restore(self, record: ConsumerGroupRecord, members: list[ConsumerMemberRecord], now_ms: int,
                partitions_per_topic: Mapping[str, int]) -> list[Output]:
        """Load this new group from its latest records, as Kafka's coordinator loads a consumer group
        from __consumer_offsets: epochs, target and every member's assignment as written; each
        member gets a new session from now (and a member that was revoking, a new rebalance timeout),
        its regex resolved against the topics of now. Members that go on heartbeating their epoch
        carry on; the others expire."""
        self._begin(now_ms)
        assert not self.members and record.group_id == self.group_id
        self.group_epoch, self.assignment_epoch = record.group_epoch, record.assignment_epoch
        self.assignor_name = record.assignor_name
        self.subscription_metadata = dict(record.subscription_metadata)
        for r in members:
            member = ConsumerMember.from_record(r)
            member.regex_topics = resolve_regex(member.subscribed_topic_regex, partitions_per_topic)
            member.last_heartbeat_ms = now_ms
            self.members[member.member_id] = member
            if member.instance_id is not None:
                self.static_members[member.instance_id] = member.member_id
            self.target[member.member_id] = normalized(r.target)
            progress, member.progress = member.progress, MemberAssignment()
            self._set_progress(member, progress)
            self._out.append(ArmTimer(self.timers.session(member.member_id), now_ms + self.session_timeout_ms(member)))
            if progress.state is ConsumerMemberState.UNREVOKED_PARTITIONS and progress.member_epoch != STATIC_LEAVE_EPOCH:
                self.revoking_since_epoch[member.member_id] = progress.member_epoch
                self._out.append(ArmTimer(self.timers.rebalance(member.member_id), now_ms + member.rebalance_timeout_ms))
            self._persisted_members[member.member_id] = r
        self._persisted = record
        self._touched.clear()
        self.state = self._current_state()
        self._log(events.ConsumerGroupLoaded, members=list(self.members), assignment_epoch=self.assignment_epoch,
                  written_ms=record.ts_ms)
        return self._end()

    def describe(self) -> ConsumerGroupDescribedGroup:
        return ConsumerGroupDescribedGroup(
            group_id=self.group_id, group_state=self.state.value, group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch, assignor_name=self.assignor_name or self._preferred_assignor(),
            members=[ConsumerGroupDescribedMember(
                member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
                client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex, assignment=as_lists(m.progress.assigned),
                target_assignment=as_lists(self.target.get(m.member_id, {})), member_state=m.progress.state.value,
                member_type=0 if m.classic is not None else 1)
                for m in self.members.values()])

    # ------------------------------------------------------------------ classic members (consumer_classic.py)

    def step(self, now_ms: int, body: Callable[[], None]) -> list[Output]:
        """Run `body` as one step of this group (its outputs, and the records it changed, out):
        how consumer_classic.py serves a classic member's request, which this module does not know."""
        self._begin(now_ms)
        body()
        return self._end()

    def session_timeout_ms(self, member: ConsumerMember) -> int:
        """A classic member's own (its JoinGroup's), else the group's group.consumer.session.timeout.ms."""
        return member.classic.session_timeout_ms if member.classic is not None else self.config.consumer_session_timeout_ms

    def validate_offset_commit(self, member_id: str, member_epoch: int, instance_id: str | None = None,
                               transactional: bool = False) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit for OffsetCommit v9+, TxnOffsetCommit (and
        OffsetFetch with a member epoch): an admin's commit (epoch < 0) only to a group without
        members; a transactional one that names no member (no member id, epoch -1, no instance id)
        always, as TxnOffsetCommit does not require them; else the member must exist and send its
        current epoch."""
        if member_epoch < 0 and not self.members:
            return None
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch == member.member_epoch:
            return None
        # Kafka's validateMemberEpoch: a classic member's generation is its member epoch.
        return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH

    # ------------------------------------------------------------------ checks (no state changes)

    def _member_for(self, req: ConsumerGroupHeartbeatRequest) -> ConsumerMember | None:
        """Kafka's getOrMaybeSubscribe(Dynamic|Static)ConsumerGroupMember, checks only: the member
        the heartbeat is from, or None for a member that joins now (or takes a static member's
        place). Raises a Refusal for an unknown, fenced or unreleased member."""
        owned = _owned(req)
        member: ConsumerMember | None
        if req.instance_id is not None:
            holder_id = self.static_members.get(req.instance_id)
            if req.member_epoch == 0:
                if holder_id is None or holder_id == req.member_id:
                    member = self.members.get(req.member_id) if req.member_id else None
                    return member
                if self.members[holder_id].member_epoch != STATIC_LEAVE_EPOCH:
                    raise Refusal(ErrorCode.UNRELEASED_INSTANCE_ID,
                                  f"Static member {req.member_id or '(new)'} with instance id {req.instance_id} cannot "
                                  f"join the group because the instance id is owned by {holder_id} member.")
                return None
            member = self._static_holder(req, holder_id)
        else:
            member = self.members.get(req.member_id) if req.member_id else None
            if req.member_epoch == 0:
                return member
            if member is None:
                raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                                           f"{self.group_id}.")
        check_member_epoch(member.progress, req.member_epoch, owned)
        return member

    def _static_holder(self, req: ConsumerGroupHeartbeatRequest, holder_id: str | None) -> ConsumerMember:
        """The static member a heartbeat (not a join) speaks for: its instance id must be held, and by
        the member id it gives (Kafka's throwIfStaticMemberIsUnknown / throwIfInstanceIdIsFenced)."""
        if holder_id is None:
            raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if holder_id != req.member_id:
            raise Refusal(ErrorCode.FENCED_INSTANCE_ID,
                          f"The static member {req.member_id} with instance id {req.instance_id} is fenced by "
                          f"existing member {holder_id}.")
        return self.members[holder_id]

    # ------------------------------------------------------------------ heartbeat and leave

    def _heartbeat(self, req: ConsumerGroupHeartbeatRequest, client_id: str, client_host: str,
                   topics: Mapping[str, int], reply_to: Any) -> None:
        member = self._member_for(req)
        replaced = None
        if member is None and req.instance_id is not None and req.instance_id in self.static_members:
            replaced = self.members[self.static_members[req.instance_id]]
        elif member is None and len(self.members) >= self.config.consumer_max_size:
            raise Refusal(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of "
                                                            f"{self.config.consumer_max_size} members.")
        # ---- validated: from here on, state changes.
        cause: tuple[GroupEpochCause, str] | None = None
        if replaced is not None:
            member = self._replace_static(replaced, req.member_id or self.new_member_id(client_id))
        elif member is None:
            member = self._add(req, client_id, client_host)
            cause = (GroupEpochCause.MEMBER_JOINED, f"member {member.member_id} joined")
        if req.instance_id is not None and member.instance_id != req.instance_id:
            if member.instance_id is not None:
                self.static_members.pop(member.instance_id, None)
            member.instance_id = req.instance_id
            self.static_members[req.instance_id] = member.member_id
            self._touched.add(member.member_id)
        cause = cause or self._update_member(member, req, client_id, client_host)
        cause = cause or self._refresh_metadata(topics)
        if cause is not None:
            self._bump(*cause)
            self._refresh_metadata(topics)
        if self.group_epoch > self.assignment_epoch:
            self._compute_target(topics)
        before = member.progress
        self._reconcile(member, _owned(req))
        member.last_heartbeat_ms = self._now
        self._out.append(ArmTimer(self.timers.session(member.member_id), self._now + self.config.consumer_session_timeout_ms))
        self._update_state()
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1 and req.topic_partitions is not None and (
            req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        changed = before.assigned != member.progress.assigned
        self._reply(reply_to, ConsumerGroupHeartbeatResponse(
            member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=self._heartbeat_interval_ms(),
            assignment=as_lists(member.progress.assigned) if full or changed else None))

    def _leave(self, req: ConsumerGroupHeartbeatRequest) -> None:
        """Kafka's consumerGroupLeave: -1 removes the member (a static one for good), -2 keeps a
        static member's assignment (what it was revoking is released) until its session expires."""
        if req.instance_id is None:
            member = self.members.get(req.member_id)
            if member is None:
                raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                                           f"{self.group_id}.")
        else:
            holder_id = self.static_members.get(req.instance_id)
            member = self._static_holder(req, holder_id)
        if req.member_epoch == LEAVE_EPOCH:
            self._remove(member, RemovalReason.LEFT, GroupEpochCause.MEMBER_LEFT, f"{member.member_id} left")
            return
        assert member.instance_id is not None
        p = member.progress
        self._set_progress(member, MemberAssignment(p.state, STATIC_LEAVE_EPOCH, p.previous_member_epoch, p.assigned, {}))
        self._out.append(CancelTimer(self.timers.rebalance(member.member_id)))
        self.revoking_since_epoch.pop(member.member_id, None)
        member.last_heartbeat_ms = self._now  # its assignment is kept for one session timeout from now
        self._out.append(ArmTimer(self.timers.session(member.member_id), self._now + self.config.consumer_session_timeout_ms))
        self._log(events.ConsumerStaticMemberLeft, member_id=member.member_id, instance_id=member.instance_id)
        self._update_state()

    # ------------------------------------------------------------------ members

    def _add(self, req: ConsumerGroupHeartbeatRequest, client_id: str, client_host: str) -> ConsumerMember:
        member = ConsumerMember(member_id=req.member_id or self.new_member_id(client_id), instance_id=None, rack_id=req.rack_id,
                                client_id=client_id, client_host=client_host, rebalance_timeout_ms=req.rebalance_timeout_ms,
                                subscribed_topic_names=sorted(set(req.subscribed_topic_names or [])),
                                subscribed_topic_regex=req.subscribed_topic_regex or None,
                                server_assignor=req.server_assignor)
        self.members[member.member_id] = member
        self._touched.add(member.member_id)
        self._log(events.ConsumerMemberJoined, member_id=member.member_id, instance_id=req.instance_id,
                  client_id=client_id, subscribed_topic_names=list(member.subscribed_topic_names),
                  subscribed_topic_regex=member.subscribed_topic_regex)
        return member

    def _replace_static(self, old: ConsumerMember, member_id: str) -> ConsumerMember:
        """A static member rejoins under a new member id after its -2 leave: the new member takes
        the old one's subscription, assignment and target, at epoch 0 (no group epoch bump)."""
        assert old.instance_id is not None
        p = old.progress
        new = ConsumerMember(member_id=member_id, instance_id=old.instance_id, rack_id=old.rack_id,
                             client_id=old.client_id, client_host=old.client_host,
                             rebalance_timeout_ms=old.rebalance_timeout_ms,
                             subscribed_topic_names=list(old.subscribed_topic_names),
                             subscribed_topic_regex=old.subscribed_topic_regex, server_assignor=old.server_assignor,
                             regex_topics=old.regex_topics, progress=MemberAssignment(p.state, 0, 0, p.assigned, {}))
        self._drop(old)
        self.members[member_id] = new
        self.static_members[old.instance_id] = member_id
        self._set_progress(new, new.progress)
        if old.member_id in self.target:
            self.target[member_id] = self.target.pop(old.member_id)
        self._log(events.ConsumerStaticMemberReplaced, member_id=member_id, old_member_id=old.member_id,
                  instance_id=old.instance_id)
        return new

    def _update_member(self, member: ConsumerMember, req: ConsumerGroupHeartbeatRequest, client_id: str,
                       client_host: str) -> tuple[GroupEpochCause, str] | None:
        """Take what the heartbeat changed (None fields: unchanged); the group epoch's cause if the
        subscription or the assignor changed."""
        member.client_id, member.client_host = client_id, client_host
        self._touched.add(member.member_id)
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        cause = None
        if req.subscribed_topic_names is not None and sorted(set(req.subscribed_topic_names)) != member.subscribed_topic_names:
            member.subscribed_topic_names = sorted(set(req.subscribed_topic_names))
            cause = (GroupEpochCause.SUBSCRIPTION_CHANGED, f"member {member.member_id} subscribes to "
                                                           f"{member.subscribed_topic_names}")
        if req.subscribed_topic_regex is not None and (req.subscribed_topic_regex or None) != member.subscribed_topic_regex:
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
            cause = cause or (GroupEpochCause.SUBSCRIPTION_CHANGED, f"member {member.member_id} subscribes to "
                                                                    f"regex {member.subscribed_topic_regex!r}")
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            cause = cause or (GroupEpochCause.ASSIGNOR_CHANGED, f"member {member.member_id} asks for assignor "
                                                                f"{req.server_assignor}")
        return cause

    def _remove(self, member: ConsumerMember, reason: RemovalReason, cause: GroupEpochCause, detail: str) -> None:
        self._remove_members([member], reason, cause, detail)

    def _remove_members(self, gone: list[ConsumerMember], reason: RemovalReason, cause: GroupEpochCause,
                        detail: str) -> None:
        """Kafka's consumerGroupFenceMembers: the members and their targets go, their partitions are
        free, the group epoch moves once; the next heartbeat computes the new target (the group is
        Assigning). Unless only classic members remain and the policy allows a downgrade: then the
        epoch stays and `downgrade` asks the Broker to make the group classic."""
        downgrade = self._may_downgrade({m.member_id for m in gone})
        for member in gone:
            held = pairs(member.progress.held())
            self._drop(member)
            self.target.pop(member.member_id, None)
            self._log(events.ConsumerMemberRemoved, member_id=member.member_id, reason=reason, detail=detail,
                      partitions=held)
        if downgrade:
            self.downgrade = Downgrade(f"Downgrade group {self.group_id} from consumer to classic for member leaving "
                                       f"({detail}).", REMOVAL_CAUSE.get(reason, RebalanceCause.MEMBER_LEFT))
            self._log(events.GroupConverted, from_type="consumer", to_type="classic", members=list(self.members),
                      detail=f"only classic members remain after {', '.join(m.member_id for m in gone)} removed: {detail}")
            return
        subscribed = set().union(*(m.subscribed_topics() for m in self.members.values()))
        self.subscription_metadata = {t: n for t, n in self.subscription_metadata.items() if t in subscribed}
        self._bump(cause, f"{', '.join(m.member_id for m in gone)} removed: {detail}")
        self._update_state()

    def _may_downgrade(self, leaving: set[str]) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMembers: members remain, all of them classic, the
        policy allows a downgrade, and they fit in a classic group (group.max.size)."""
        remaining = [m for mid, m in self.members.items() if mid not in leaving]
        return (bool(remaining) and all(m.classic is not None for m in remaining) and self.config.downgrade_enabled
                and len(remaining) <= self.config.group_max_size)

    def _drop(self, member: ConsumerMember) -> None:
        self._set_progress(member, MemberAssignment())
        del self.members[member.member_id]
        self._touched.add(member.member_id)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member.member_id:
            del self.static_members[member.instance_id]
        self.revoking_since_epoch.pop(member.member_id, None)
        self._out.append(CancelTimer(self.timers.session(member.member_id)))
        self._out.append(CancelTimer(self.timers.rebalance(member.member_id)))
        if member.classic is not None:
            self.awaiting_rejoin.discard(member.member_id)
            self.awaiting_sync.discard(member.member_id)
            self._out.append(CancelTimer(self.timers.join(member.member_id)))
            self._out.append(CancelTimer(self.timers.sync(member.member_id)))

    # ------------------------------------------------------------------ epochs, target, reconciliation

    def _refresh_metadata(self, topics: Mapping[str, int]) -> tuple[GroupEpochCause, str] | None:
        """Resolve the regexes and take the subscribed topics' partition counts; the group epoch's
        cause if either moved since the group last looked."""
        moved = []
        for m in self.members.values():
            resolved = resolve_regex(m.subscribed_topic_regex, topics)
            if resolved != m.regex_topics:
                m.regex_topics = resolved
                moved.append(m.member_id)
        subscribed = set().union(*(m.subscribed_topics() for m in self.members.values()))
        metadata = {t: topics[t] for t in sorted(subscribed) if t in topics}
        if metadata == self.subscription_metadata and not moved:
            return None
        self.subscription_metadata = metadata
        return GroupEpochCause.METADATA_CHANGED, f"subscribed topics now {metadata}"

    def _bump(self, cause: GroupEpochCause, detail: str) -> None:
        self.group_epoch += 1
        self._log(events.GroupEpochBumped, cause=cause, detail=detail)

    def _compute_target(self, topics: Mapping[str, int]) -> None:
        name = self._preferred_assignor()
        specs = {mid: MemberSpec(subscribed_topics=frozenset(t for t in m.subscribed_topics() if t in topics),
                                 assignment=self.target.get(mid, {}), instance_id=m.instance_id, rack=m.rack_id)
                 for mid, m in self.members.items()}
        result = self.assignors[name].assign(specs, {t: n for t, n in topics.items() if t in self.subscription_metadata})
        self.target = {mid: normalized(result.get(mid, {})) for mid in self.members}
        self._touched.update(self.members)
        self.assignment_epoch, self.assignor_name = self.group_epoch, name
        self._log(events.TargetAssignmentComputed, assignment_epoch=self.assignment_epoch, assignor=name,
                  assignment={mid: pairs(a) for mid, a in self.target.items()})

    def _reconcile(self, member: ConsumerMember, owned: Assignment | None) -> None:
        target = self.target.get(member.member_id, {})
        held_by_other = self._held_by_other(member.member_id)
        before = member.progress
        after = reconcile(before, self.assignment_epoch, target, owned, held_by_other)
        if after == before:
            return
        self._set_progress(member, after)
        if after.state is ConsumerMemberState.UNREVOKED_PARTITIONS:
            self.revoking_since_epoch[member.member_id] = after.member_epoch
            self._out.append(ArmTimer(self.timers.rebalance(member.member_id), self._now + member.rebalance_timeout_ms))
        elif before.state is ConsumerMemberState.UNREVOKED_PARTITIONS:
            self.revoking_since_epoch.pop(member.member_id, None)
            self._out.append(CancelTimer(self.timers.rebalance(member.member_id)))
        if (after.state, after.member_epoch, after.assigned, after.pending_revocation) == (
                before.state, before.member_epoch, before.assigned, before.pending_revocation):
            return  # only the previous epoch moved (Kafka's updateMemberEpoch): nothing to report
        self._log(events.ConsumerMemberReconciled, member_id=member.member_id, member_epoch=after.member_epoch,
                  previous_member_epoch=after.previous_member_epoch, member_state=after.state,
                  assigned=pairs(after.assigned), pending_revocation=pairs(after.pending_revocation),
                  unreleased=pairs(unreleased(after, target, held_by_other)))

    def _set_progress(self, member: ConsumerMember, progress: MemberAssignment) -> None:
        """The one place holders change: a partition has at most one holder, always."""
        for topic, ps in member.progress.held().items():
            for p in ps:
                if self.holders.get((topic, p)) == member.member_id:
                    del self.holders[(topic, p)]
        for topic, ps in progress.held().items():
            for p in ps:
                holder = self.holders.setdefault((topic, p), member.member_id)
                assert holder == member.member_id, f"{topic}-{p} given to {member.member_id} while {holder} holds it"
        member.progress = progress
        self._touched.add(member.member_id)

    def _held_by_other(self, member_id: str) -> Callable[[str, int], bool]:
        return lambda topic, p: self.holders.get((topic, p), member_id) != member_id

    def _still_revoking(self, member: ConsumerMember) -> bool:
        return (member.progress.state is ConsumerMemberState.UNREVOKED_PARTITIONS
                and self.revoking_since_epoch.get(member.member_id) == member.member_epoch)

    # ------------------------------------------------------------------ durability

    def _end(self) -> list[Output]:
        """The step's outputs, led by a Persist of each record that changed: the group's (epochs,
        target epoch, subscribed topics) and each touched member's (or its tombstone), so the
        driver writes them before any reply of the step goes out."""
        records: list[Output] = []
        group = ConsumerGroupRecord(self.group_id, self.group_epoch, self.assignment_epoch, self.assignor_name,
                                    dict(self.subscription_metadata), self._now)
        if (self.members or self._persisted is not None) and (  # a refused first join leaves nothing
                self._persisted is None or replace(self._persisted, ts_ms=self._now) != group):
            self._persisted = group
            records.append(Persist(group))
        for member_id in sorted(self._touched, key=lambda m: (m in self.members, m)):  # the gone first
            member = self.members.get(member_id)
            if member is None:
                if self._persisted_members.pop(member_id, None) is not None:
                    records.append(Persist(ConsumerMemberTombstone(self.group_id, member_id, self._now)))
                continue
            record = member.record(self.group_id, self.target.get(member_id, {}))
            if self._persisted_members.get(member_id) != record:
                self._persisted_members[member_id] = record
                records.append(Persist(record))
        self._touched.clear()
        if records:
            self._out[:0] = records
        return super()._end()

    # ------------------------------------------------------------------ helpers

    def _current_state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup.maybeUpdateGroupState: the state the members and epochs make."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if all(m.member_epoch == self.assignment_epoch and m.progress.state is ConsumerMemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def _update_state(self) -> None:
        new = self._current_state()
        if new is not self.state:
            old, self.state = self.state, new
            self._log(events.ConsumerGroupStateChanged, from_state=old, to_state=new)

    def _supported_assignors(self) -> list[str]:
        return [n for n in self.config.consumer_assignor_names if n in self.assignors]

    def _preferred_assignor(self) -> str:
        """Kafka's computePreferredServerAssignor: the assignor most members ask for (ties: the
        first in group.consumer.assignors), else the first configured."""
        supported = self._supported_assignors()
        asked = Counter(m.server_assignor for m in self.members.values() if m.server_assignor in supported)
        if not asked:
            return supported[0]
        return max(supported, key=lambda n: (asked[n], -supported.index(n)))

    def _heartbeat_interval_ms(self) -> int:
        return self.config.consumer_heartbeat_interval_ms

    def _log(self, event: Callable[Concatenate[str, int, ConsumerGroupState, events.Fields], events.ConsumerGroupEvent], /,
             *args: events.Fields.args, **fields: events.Fields.kwargs) -> None:
        """Log `event` with the group's C fields first (docs/events.md §4.1c)."""
        if self.log_events:
            self._emit_log(event(self.group_id, self.group_epoch, self.state, *args, **fields))


def _owned(req: ConsumerGroupHeartbeatRequest) -> Assignment | None:
    if req.topic_partitions is None:
        return None
    owned: dict[str, set[int]] = {}
    for tp in req.topic_partitions:
        owned.setdefault(tp.topic, set()).update(tp.partitions)
    return normalized(owned)
