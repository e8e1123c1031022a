"""Classic members inside a consumer-protocol group, and the conversions between the two kinds of
group: Kafka 4's online migration (KIP-848), as its GroupMetadataManager does it
(classicGroupJoin/Sync/Heartbeat/LeaveToConsumerGroup, validateOnlineUpgrade with
ConsumerGroup.fromClassicGroup, validateOnlineDowngrade with ClassicGroup.fromConsumerGroup).
Pure, as consumer_group.py: each function runs inside one step of a ConsumerGroup; a failed check
raises a Refusal, answered with its code, nothing changed.

A classic member of a consumer group:

    JoinGroup  its subscription (from its protocol metadata) joins or updates the group (group
               epoch, target), it reconciles with the partitions its metadata says it owns, and is
               answered at once: generation = its member epoch, no leader, no member list. The
               first JoinGroup without a member id gets MEMBER_ID_REQUIRED and a new id.
    SyncGroup  its assigned partitions, encoded as a ConsumerProtocolAssignment (in the version
               of its subscription); REBALANCE_IN_PROGRESS if the group epoch moved past it.
    Heartbeat  REBALANCE_IN_PROGRESS while it must rejoin: the group epoch moved past its epoch,
               it must revoke partitions, or a partition it waited for is free; else NONE.
    LeaveGroup removes it, as a consumer member's leave.

    Its session timeout is its own (JoinGroup's); after REBALANCE_IN_PROGRESS it must rejoin,
    and after a JoinGroup send SyncGroup, each within its rebalance timeout, or it is removed.

Upgrade: a ConsumerGroupHeartbeat join for a classic group with members (policy upgrade or
bidirectional, protocol type "consumer", no more members than group.consumer.max.size) turns each
classic member into a member of a new consumer group, Stable at epoch = the classic generation
with its last assignment as current and target assignment; the joining member then bumps the epoch.
Downgrade: when a removal leaves only classic members (policy downgrade or bidirectional, no more
than group.max.size), or a classic static member takes the last consumer member's place, they
become the members of a classic group, Stable at generation = the group epoch with their target
assignments, which then rebalances (not after a replacement with the same subscription).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from grouplab.coordinator.consumer_checks import Downgrade, Refusal
from grouplab.coordinator.consumer_member import ClassicMemberMetadata, ConsumerMember
from grouplab.coordinator.consumer_reconcile import Assignment, MemberAssignment, normalized, unreleased
from grouplab.coordinator.group import Group, Member, instance_id_problem
from grouplab.protocol import consumer_protocol, events
from grouplab.protocol.effects import ArmTimer, CancelTimer, Output
from grouplab.protocol.errors import ErrorCode, ProtocolError
from grouplab.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveGroupResponseMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from grouplab.protocol.states import ConsumerMemberState, GroupEpochCause, RebalanceCause, RemovalReason
from grouplab.protocol.types import Assignment as ProtocolAssignment
from grouplab.protocol.types import TopicPartition

if TYPE_CHECKING:
    from grouplab.coordinator.config import BrokerConfig
    from grouplab.coordinator.consumer_group import ConsumerGroup

PROTOCOL_TYPE = consumer_protocol.PROTOCOL_TYPE


# ---------------------------------------------------------------------------------------- upgrade


def handle_join(g: ConsumerGroup, req: JoinGroupRequest, reply_to: Any, client_id: str, client_host: str, now_ms: int,
                topics: Mapping[str, int]) -> list[Output]:
    """A JoinGroup from a classic member, as one step of the consumer group (Kafka's
    classicGroupJoinToConsumerGroup)."""
    return _step(g, now_ms, reply_to, req, lambda: join(g, req, reply_to, client_id, client_host, topics))


def handle_sync(g: ConsumerGroup, req: SyncGroupRequest, reply_to: Any, now_ms: int) -> list[Output]:
    return _step(g, now_ms, reply_to, req, lambda: sync(g, req, reply_to))


def handle_heartbeat(g: ConsumerGroup, req: HeartbeatRequest, reply_to: Any, now_ms: int) -> list[Output]:
    return _step(g, now_ms, reply_to, req, lambda: heartbeat(g, req, reply_to))


def handle_leave(g: ConsumerGroup, req: LeaveGroupRequest, reply_to: Any, now_ms: int) -> list[Output]:
    return _step(g, now_ms, reply_to, req, lambda: leave(g, req, reply_to))


def adopt_members(g: ConsumerGroup, members: list[ConsumerMember], epoch: int, topics: Mapping[str, int],
                  now_ms: int) -> list[Output]:
    """The new consumer group a classic group converts to takes its members (Kafka's
    ConsumerGroup.fromClassicGroup): each Stable at epoch = the classic generation with its last
    assignment as its target, their sessions running from now."""
    return g.step(now_ms, lambda: adopt(g, members, epoch, topics))


def _step(g: ConsumerGroup, now_ms: int, reply_to: Any, req: Any, serve: Callable[[], None]) -> list[Output]:
    """One classic request, served; a Refusal is answered in the request's own response type."""
    def body() -> None:
        try:
            serve()
        except Refusal as refusal:
            g._reply(reply_to, refusal_response(req, refusal))

    return g.step(now_ms, body)


def upgrade_refusal(classic: Group, config: BrokerConfig) -> str | None:
    """Kafka's validateOnlineUpgrade: why the classic group may not become a consumer group (its
    GROUP_ID_NOT_FOUND message), or None."""
    gid = classic.group_id
    if not config.upgrade_enabled:
        return f"Cannot upgrade classic group {gid} to consumer group because online upgrade is disabled."
    if classic.current_protocol_type != PROTOCOL_TYPE:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group does not use the "
                f"consumer embedded protocol.")
    if len(classic.members) > config.consumer_max_size:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group size exceeds the "
                f"consumer group maximum size.")
    return None


def members_from_classic(classic: Group, now_ms: int) -> list[ConsumerMember]:
    """Kafka's ConsumerGroup.fromClassicGroup, the members: each classic member with its subscription
    (its metadata for the group's protocol), its last assignment (none if it never synced), Stable
    at epoch = the generation. Raises a Refusal (GROUP_ID_NOT_FOUND) for metadata it cannot read or
    an assignment with user data (a custom assignor's, which the consumer group would lose)."""

    gid, generation = classic.group_id, classic.generation_id
    members = []
    for m in classic.members.values():
        name = classic.protocol_name if classic.protocol_name in m.protocol_names else m.protocol_names[0]
        try:
            subscription = consumer_protocol.decode_subscription(m.metadata(name))
            given = consumer_protocol.decode_assignment(m.assignment)
        except ProtocolError:
            raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group because "
                                                        f"the embedded consumer protocol is malformed.") from None
        if given.user_data:
            raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group because an "
                                                        f"unsupported custom assignor is in use. Please refer to the "
                                                        f"documentation or switch to a default assignor before "
                                                        f"re-attempting the upgrade.")
        assigned: dict[str, set[int]] = {}
        for tp in given.partitions:
            assigned.setdefault(tp.topic, set()).add(tp.partition)
        members.append(ConsumerMember(
            member_id=m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=sorted(set(subscription.topics)),
            progress=MemberAssignment(ConsumerMemberState.STABLE, generation, generation, normalized(assigned), {}),
            last_heartbeat_ms=now_ms, classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols))))
    return members


def adopt(g: ConsumerGroup, members: list[ConsumerMember], epoch: int, topics: Mapping[str, int]) -> None:
    """Fill an empty new group with the converted members (ConsumerGroup.adopt)."""
    assert not g.members
    g.group_epoch = g.assignment_epoch = epoch
    for member in members:
        # A partition two members claim (a classic group caught mid-rebalance): the first keeps it.
        free = {t: frozenset(p for p in ps if (t, p) not in g.holders) for t, ps in member.progress.assigned.items()}
        p = member.progress
        member.progress = MemberAssignment()
        g.members[member.member_id] = member
        if member.instance_id is not None:
            g.static_members[member.instance_id] = member.member_id
        g._set_progress(member, MemberAssignment(p.state, p.member_epoch, p.previous_member_epoch, normalized(free), {}))
        g.target[member.member_id] = dict(member.progress.assigned)
        g._out.append(ArmTimer(g.timers.session(member.member_id), g._now + g.session_timeout_ms(member)))
    subscribed = set().union(*(m.subscribed_topics() for m in g.members.values()))
    g.subscription_metadata = {t: topics[t] for t in sorted(subscribed) if t in topics}
    g._update_state()
    g._log(events.GroupConverted, from_type="classic", to_type="consumer", members=list(g.members),
           detail=f"a ConsumerGroupHeartbeat joined the classic group at generation {epoch}")


# ---------------------------------------------------------------------------------------- downgrade


def classic_members(g: ConsumerGroup, now_ms: int) -> list[Member]:
    """Kafka's ClassicGroup.fromConsumerGroup, the members: each (classic) member with its
    protocols, session and rebalance timeouts, and its target assignment as its assignment."""
    out = []
    for m in g.members.values():
        assert m.classic is not None, "only classic members remain in a group that downgrades"
        out.append(Member(member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                          client_host=m.client_host, session_timeout_ms=m.classic.session_timeout_ms,
                          rebalance_timeout_ms=m.rebalance_timeout_ms, protocol_type=PROTOCOL_TYPE,
                          protocols=list(m.classic.protocols),
                          assignment=m.classic.assignment(g.target.get(m.member_id, {})), last_heartbeat_ms=now_ms))
    return out


# ---------------------------------------------------------------------------------------- the classic APIs


def join(g: ConsumerGroup, req: JoinGroupRequest, reply_to: Any, client_id: str, client_host: str,
         topics: Mapping[str, int]) -> None:
    """Kafka's classicGroupJoinToConsumerGroup."""
    _check_join(g, req, client_id)
    instance = req.group_instance_id
    member = g.members.get(req.member_id) if req.member_id else None
    holder = g.static_members.get(instance) if instance is not None else None
    replaced = g.members[holder] if holder is not None and holder != req.member_id else None
    if member is None and replaced is None and len(g.members) >= g.config.consumer_max_size:
        raise Refusal(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of "
                                                        f"{g.config.consumer_max_size} members.")
    names = [p.name for p in req.protocols]
    if not _supports(g, req.protocol_type, names, req.member_id):
        raise Refusal(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {req.member_id or '(new)'}'s protocols are not supported.")
    if not req.member_id and instance is None:
        # KIP-394, as Kafka answers it here: an id first; the member joins for real with it.
        g._reply(reply_to, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED,
                                             member_id=g.new_member_id(client_id or "consumer")))
        return
    if replaced is not None and req.member_id:
        raise Refusal(ErrorCode.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id {instance} "
                                                    f"was fenced by member {holder}.")
    try:
        subscription = consumer_protocol.decode_subscription(req.protocols[0].metadata)
    except ProtocolError:
        raise Refusal(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                      "Malformed embedded consumer protocol in subscription deserialization.") from None
    # ---- validated: from here on, state changes.
    cause: tuple[GroupEpochCause, str] | None = None
    metadata = ClassicMemberMetadata(req.session_timeout_ms, tuple((p.name, p.metadata) for p in req.protocols))
    topics_before = member.subscribed_topic_names if member is not None else None
    if replaced is not None:
        member = g._replace_static(replaced, g.new_member_id(client_id or instance or "consumer"))
        topics_before = member.subscribed_topic_names
    elif member is None:
        member = ConsumerMember(member_id=req.member_id or g.new_member_id(client_id or instance or "consumer"),
                                instance_id=instance, rack_id=subscription.rack,
                                client_id=client_id, client_host=client_host, rebalance_timeout_ms=req.rebalance_timeout_ms)
        g.members[member.member_id] = member
        if instance is not None:
            g.static_members[instance] = member.member_id
        cause = (GroupEpochCause.MEMBER_JOINED, f"classic member {member.member_id} joined")
        g._log(events.ConsumerClassicMemberJoined, member_id=member.member_id, instance_id=instance, client_id=client_id,
               subscribed_topic_names=sorted(set(subscription.topics)), protocols=names,
               session_timeout_ms=req.session_timeout_ms, rebalance_timeout_ms=req.rebalance_timeout_ms)
    member.client_id, member.client_host = client_id, client_host
    member.rack_id = subscription.rack if subscription.rack is not None else member.rack_id
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    member.server_assignor = None
    member.classic = metadata
    member.subscribed_topic_names = sorted(set(subscription.topics))
    g._touched.add(member.member_id)  # its record changes with its JoinGroup (consumer_group.py `_end`)
    if cause is None and topics_before != member.subscribed_topic_names:
        cause = (GroupEpochCause.SUBSCRIPTION_CHANGED, f"member {member.member_id} subscribes to "
                                                       f"{member.subscribed_topic_names}")
    cause = cause or g._refresh_metadata(topics)
    if cause is not None:
        g._bump(*cause)
        g._refresh_metadata(topics)
    if g.group_epoch > g.assignment_epoch:
        g._compute_target(topics)
    owned: dict[str, set[int]] = {}
    for tp in subscription.owned_partitions:
        owned.setdefault(tp.topic, set()).add(tp.partition)
    g._reconcile(member, normalized(owned))
    member.last_heartbeat_ms = g._now
    g.awaiting_rejoin.discard(member.member_id)
    g.awaiting_sync.add(member.member_id)
    g._out.append(CancelTimer(g.timers.join(member.member_id)))
    g._out.append(ArmTimer(g.timers.session(member.member_id), g._now + req.session_timeout_ms))
    g._out.append(ArmTimer(g.timers.sync(member.member_id), g._now + req.rebalance_timeout_ms))
    g._update_state()
    if replaced is not None and replaced.classic is None and g._may_downgrade(set()):
        # Kafka's validateOnlineDowngradeWithReplacedMember: the last consumer-protocol member was
        # a static one, and a classic member took its place.
        what = f"classic static member {member.member_id} took the place of {replaced.member_id}"
        changed = topics_before != member.subscribed_topic_names
        g.downgrade = Downgrade(f"Downgrade group {g.group_id} from consumer to classic for static member replacement"
                                + (" with different subscription." if changed else "."),
                                RebalanceCause.STATIC_MEMBER_REJOINED if changed else None)
        g._log(events.GroupConverted, from_type="consumer", to_type="classic", members=list(g.members),
               detail=f"only classic members remain: {what}")
    g._reply(reply_to, JoinGroupResponse(generation_id=member.member_epoch, protocol_type=PROTOCOL_TYPE,
                                         protocol_name=metadata.protocol_name, leader="", member_id=member.member_id))


def sync(g: ConsumerGroup, req: SyncGroupRequest, reply_to: Any) -> None:
    """Kafka's classicGroupSyncToConsumerGroup: the member's assigned partitions (not what it is
    still revoking: it gave those up before rejoining, or gives them up on seeing them gone)."""
    member = _classic_member(g, req.member_id, req.group_instance_id)
    assert member.classic is not None
    _check_generation(member, req.generation_id)
    if req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE:
        raise Refusal(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                      f"The protocol type {req.protocol_type} from member {member.member_id} request is not equal to "
                      f"the group protocol type {PROTOCOL_TYPE}.")
    if req.protocol_name is not None and req.protocol_name != member.classic.protocol_name:
        raise Refusal(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                      f"The protocol name {req.protocol_name} from member {member.member_id} request is not equal to "
                      f"the protocol name {member.classic.protocol_name} returned in the join response.")
    if g.group_epoch > member.member_epoch and member.progress.state is not ConsumerMemberState.UNREVOKED_PARTITIONS:
        _must_rejoin(g, member)
        raise Refusal(ErrorCode.REBALANCE_IN_PROGRESS, f"A new rebalance is triggered in group {g.group_id} and member "
                                                       f"{member.member_id} should rejoin to catch up.")
    g.awaiting_sync.discard(member.member_id)
    g._out.append(CancelTimer(g.timers.sync(member.member_id)))
    _alive(g, member)
    g._reply(reply_to, SyncGroupResponse(protocol_type=PROTOCOL_TYPE, protocol_name=member.classic.protocol_name,
                                         assignment=member.classic.assignment(member.progress.assigned)))


def heartbeat(g: ConsumerGroup, req: HeartbeatRequest, reply_to: Any) -> None:
    """Kafka's classicGroupHeartbeatToConsumerGroup."""
    member = _classic_member(g, req.member_id, req.group_instance_id)
    _check_generation(member, req.generation_id)
    _alive(g, member)
    p = member.progress
    if (member.member_epoch < g.group_epoch or p.state is ConsumerMemberState.UNREVOKED_PARTITIONS
            or (p.state is ConsumerMemberState.UNRELEASED_PARTITIONS
                and not unreleased(p, g.target.get(member.member_id, {}), g._held_by_other(member.member_id)))):
        _must_rejoin(g, member)
        g._reply(reply_to, HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        return
    g._reply(reply_to, HeartbeatResponse())


def leave(g: ConsumerGroup, req: LeaveGroupRequest, reply_to: Any) -> None:
    """Kafka's classicGroupLeaveToConsumerGroup: each member checked on its own (an error answers
    that one); those that may leave go together (one group epoch, or the downgrade)."""
    results, leaving = [], []
    for who in req.members:
        try:
            if who.group_instance_id is None:
                member = _classic_member(g, who.member_id, None)
            else:
                holder = g.static_members.get(who.group_instance_id)
                if holder is None:
                    raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {who.group_instance_id} is unknown.")
                member = g.members[holder]
                if who.member_id:  # an admin may name the instance only
                    member = _classic_member(g, who.member_id, who.group_instance_id)
            results.append(LeaveGroupResponseMember(member.member_id, who.group_instance_id))
            if member not in leaving:
                leaving.append(member)
        except Refusal as refusal:
            results.append(LeaveGroupResponseMember(who.member_id, who.group_instance_id, refusal.code))
    if leaving:
        reasons = {who.reason for who in req.members if who.reason}
        detail = f"left the group ({'; '.join(sorted(reasons)) or 'member left the group'})"
        g._remove_members(leaving, RemovalReason.LEFT, GroupEpochCause.MEMBER_LEFT, detail)
    g._reply(reply_to, LeaveGroupResponse(members=results))


def refusal_response(req: Any, refusal: Refusal) -> Any:
    """A refused classic request's answer, of its API's type."""
    if isinstance(req, JoinGroupRequest):
        return JoinGroupResponse(error_code=refusal.code, member_id=req.member_id, error_message=refusal.message)
    if isinstance(req, SyncGroupRequest):
        return SyncGroupResponse(error_code=refusal.code, error_message=refusal.message)
    if isinstance(req, HeartbeatRequest):
        return HeartbeatResponse(error_code=refusal.code, error_message=refusal.message)
    return LeaveGroupResponse(error_code=refusal.code)


# ---------------------------------------------------------------------------------------- helpers


def _check_join(g: ConsumerGroup, req: JoinGroupRequest, client_id: str) -> None:
    """What the coordinator checks of any JoinGroup before it looks at the group (the classic
    Group's `_validate_join`, first part): session timeout bounds, protocols, grouplab's limits."""
    cfg = g.config
    if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
        raise Refusal(ErrorCode.INVALID_SESSION_TIMEOUT, f"session.timeout.ms {req.session_timeout_ms} is outside "
                                                         f"[{cfg.group_min_session_timeout_ms}, {cfg.group_max_session_timeout_ms}]")
    if req.rebalance_timeout_ms <= 0:
        raise Refusal(ErrorCode.INVALID_REQUEST, "rebalance_timeout_ms must be positive")
    if len(req.protocols) > cfg.max_protocols_per_member:
        raise Refusal(ErrorCode.INVALID_REQUEST, f"{len(req.protocols)} protocols exceed "
                                                 f"grouplab.max.protocols.per.member={cfg.max_protocols_per_member}")
    for what, value in (("client id", client_id), ("member id", req.member_id)):
        if len(value) > cfg.max_id_length:
            raise Refusal(ErrorCode.INVALID_REQUEST, f"{what} of {len(value)} characters exceeds "
                                                     f"grouplab.max.id.length={cfg.max_id_length}")
    if req.group_instance_id is not None and (problem := instance_id_problem(req.group_instance_id)):
        raise Refusal(ErrorCode.INVALID_REQUEST, problem)
    names = [p.name for p in req.protocols]
    if not names or len(set(names)) != len(names):
        raise Refusal(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "protocol_type and a list of distinct protocols are required")


def _supports(g: ConsumerGroup, protocol_type: str, names: list[str], member_id: str) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer protocol type, and a protocol
    every other classic member supports too."""
    if protocol_type != PROTOCOL_TYPE or not names:
        return False
    others = [m.classic for mid, m in g.members.items() if m.classic is not None and mid != member_id]
    return any(all(n in {name for name, _ in c.protocols} for c in others) for n in names)


def _classic_member(g: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """Kafka's validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = g.members.get(member_id)
        if member is None:
            raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {g.group_id}.")
    else:
        holder = g.static_members.get(instance_id)
        if holder is None:
            raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a member of "
                                                       f"group {g.group_id}.")
        if holder != member_id:
            raise Refusal(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                                                        f"was fenced by member {holder}.")
        member = g.members[holder]
    if member.classic is None:
        raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
    return member


def _check_generation(member: ConsumerMember, generation_id: int) -> None:
    if generation_id != member.member_epoch:
        raise Refusal(ErrorCode.ILLEGAL_GENERATION, f"The request generation id {generation_id} is not equal to the "
                                                    f"member epoch {member.member_epoch} of member {member.member_id}.")


def _alive(g: ConsumerGroup, member: ConsumerMember) -> None:
    member.last_heartbeat_ms = g._now
    g._out.append(ArmTimer(g.timers.session(member.member_id), g._now + g.session_timeout_ms(member)))


def _must_rejoin(g: ConsumerGroup, member: ConsumerMember) -> None:
    """Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent: it has its rebalance timeout to rejoin."""
    if member.member_id not in g.awaiting_rejoin:
        g.awaiting_rejoin.add(member.member_id)
        g._out.append(ArmTimer(g.timers.join(member.member_id), g._now + member.rebalance_timeout_ms))

