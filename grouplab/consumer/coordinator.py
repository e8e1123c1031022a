"""The ConsumerCoordinator: one group member's side of the rebalance protocol, pure.

Inputs: `start`, `on_response`, `on_timer`, `on_disconnect`, `poll`, `close`, each with `now_ms`.
Outputs: requests to send (`Send`), timers (`ArmTimer`/`CancelTimer`), rebalance-listener calls
(`PartitionsRevoked`/`PartitionsAssigned`/`PartitionsLost`), `Reconnect` and `LogEvent`.

    UNJOINED ──JoinGroup──▶ JOINING ──(leader: Metadata, assign)──SyncGroup──▶ SYNCING ──▶ STABLE
        ▲  MEMBER_ID_REQUIRED: join again with the id ┘                                    │
        └──────── REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / ────────┘
                  leader sees a partition count change / poll timeout (leave, rejoin on poll)

Eager protocols revoke everything before rejoining; a cooperative assignor keeps what it owns and
gives up only what the new assignment takes away (KIP-429), then rejoins if it gave anything up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grouplab.consumer.assignors import RebalanceProtocol, get_assignor
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.member import (
    COORDINATOR_GONE,
    FIND_COORDINATOR_TIMER,
    MemberSteps,
    PartitionsAssigned,
    PartitionsLost,
    PartitionsRevoked,
    Reconnect,
    Send,
    tps as _tps,
)
from grouplab.protocol import consumer_protocol, events
from grouplab.protocol.consumer_protocol import PROTOCOL_TYPE
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    LeaveGroupResponse,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from grouplab.protocol.states import MemberState
from grouplab.protocol.types import Assignment, Subscription, TopicPartition

NO_GENERATION = -1
# Kafka adds this much to the rebalance timeout when waiting for a JoinGroup response.
JOIN_GRACE_MS = 5_000


MemberOutput = Send | ArmTimer | CancelTimer | LogEvent | PartitionsRevoked | PartitionsAssigned | PartitionsLost | Reconnect
"""Everything a member machine (a ConsumerCoordinator, or a consumer-protocol ConsumerMembership)
may ask of its driver (consumer/driver.py): a closed union."""


_FATAL_JOIN_ERRORS = {
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
    ErrorCode.INVALID_SESSION_TIMEOUT,
    ErrorCode.GROUP_MAX_SIZE_REACHED,
    ErrorCode.FENCED_INSTANCE_ID,
    ErrorCode.INVALID_GROUP_ID,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.INVALID_REQUEST,
}

# The states and codes every step compares against, as module constants: on Python 3.11 reading
# `MemberState.STABLE` goes through EnumType's __getattr__ hook each time (an unspecialized lookup,
# several times a global's cost), and each response, timer and request reads a few.
_UNJOINED, _JOINING, _SYNCING, _STABLE, _CLOSED, _FAILED = (MemberState.UNJOINED, MemberState.JOINING, MemberState.SYNCING,
                                                          MemberState.STABLE, MemberState.CLOSED, MemberState.FAILED)
_NO_ERROR, _MEMBER_ID_REQUIRED, _UNKNOWN_MEMBER_ID, _ILLEGAL_GENERATION, _REBALANCE_IN_PROGRESS = (
    ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.REBALANCE_IN_PROGRESS)
_EAGER = RebalanceProtocol.EAGER
_from_code = ErrorCode.from_code

_REBALANCE_STEPS = frozenset({"join", "assign", "sync"})

_TIMER_HEARTBEAT = ("heartbeat",)
_TIMER_REJOIN = ("rejoin",)
_TIMER_METADATA = ("metadata",)
_TIMER_POLL = ("poll",)
_TIMER_REQUEST = ("request",)


@dataclass
class ConsumerCoordinator(MemberSteps):
    config: ConsumerConfig
    state: MemberState = MemberState.UNJOINED
    member_id: str = ""
    generation_id: int = NO_GENERATION
    protocol_name: str | None = None
    leader_id: str = ""
    owned: list[TopicPartition] = field(default_factory=list)
    fatal_error: ErrorCode | None = None
    rejoin_reason: str = "starting"
    # The leader's view of the topics it assigned from, to notice partition count changes.
    assigned_metadata: dict[str, int] = field(default_factory=dict)
    group_subscription: set[str] = field(default_factory=set)
    last_poll_ms: int = 0
    # A shell with no event log (the simulator running many seeds) may turn LogEvents off; they
    # are only ever reports, never decisions.
    log_events: bool = True
    # The last assignment received (kept through an eager revoke) and its generation.
    last_assignment: list[TopicPartition] = field(default_factory=list)
    last_assignment_generation: int = NO_GENERATION
    last_heartbeat_ack_ms: int = 0

    def __post_init__(self) -> None:
        self.assignors = [get_assignor(name) for name in self.config.assignors]
        # Cooperative only if every configured assignor supports it (Kafka's rule); read at every join.
        self._rebalance_protocol = (RebalanceProtocol.COOPERATIVE if all(
            a.rebalance_protocol is RebalanceProtocol.COOPERATIVE for a in self.assignors) else RebalanceProtocol.EAGER)
        self._next_cid = 0
        self._inflight: dict[int, str] = {}  # correlation id -> what the request was for
        # The leader's reading of its generation's subscriptions (JoinGroup's answer), kept for the
        # assignment its Metadata answer completes (decoded once, not twice, a rebalance).
        self._join_subscriptions: dict[str, Subscription] = {}
        self._skip_assignment = False
        self._out: list[Any] = []
        self._now = 0
        self._heartbeat_inflight = False
        self._heartbeat_sent_ms = 0
        # Two of MemberSteps' class defaults on the instance, as every request and response reads
        # them: on Python 3.11 a read that falls back to the class is never specialized. (Not all
        # five: more than 30 attributes would end the instances' shared keys, dearer still.)
        self.coordinator_node = None
        self._sent_to = None

    @property
    def working(self) -> bool:
        """Its partitions may be fetched and committed: it is stable in its generation."""
        return self.state is _STABLE

    # ------------------------------------------------------------------ inputs

    def start(self, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        self.last_poll_ms = now_ms
        self._arm(_TIMER_POLL, now_ms + self.config.max_poll_interval_ms)
        self._send_join()  # in a cluster: once FindCoordinator named the coordinator
        return self._end()

    def poll(self, now_ms: int) -> list[Any]:
        """The application called poll(): it is alive. After a poll timeout this rejoins."""
        self._begin(now_ms)
        self.last_poll_ms = now_ms
        if self.state is _UNJOINED and self.rejoin_reason == "poll timeout":
            self._send_join()
        return self._end()

    def close(self, now_ms: int) -> list[Any]:
        """Leave the group cleanly (revoking first), as KafkaConsumer.close() does."""
        self._begin(now_ms)
        if self.state not in (_CLOSED, _FAILED):
            self._revoke_all("closing")
            self._leave("the consumer is closing")
            self._set_state(_CLOSED)
            self._cancel_all_timers()
        return self._end()

    def on_disconnect(self, now_ms: int, node: int | None = None) -> list[Any]:
        """The connection dropped: in-flight requests are gone. A stable member keeps its
        generation and heartbeats on once reconnected, as Kafka's does when it loses its
        coordinator (the coordinator, restarted or not, still knows the generation, or answers
        the heartbeat with an error that makes it rejoin). A joining or syncing member rejoins
        with its member id after the backoff. In a cluster, `node` is the broker whose
        connection dropped: if it was the coordinator's, the member finds it again and a joining
        or syncing member joins again there (Kafka's markCoordinatorUnknown)."""
        self._begin(now_ms)
        if self.in_cluster:
            self._on_node_lost(node)
            return self._end()
        watching = "watch" in self._inflight.values()
        self._inflight.clear()
        self._heartbeat_inflight = False
        if self.state is _STABLE:
            self._log(events.CoordinatorDisconnected, previous_state=self.state)
            if watching:  # the leader's metadata watch lost its request: ask again after the backoff
                self._arm(_TIMER_METADATA, now_ms + self.config.retry_backoff_ms)
        elif self.state in (_JOINING, _SYNCING):
            self._log(events.CoordinatorDisconnected, previous_state=self.state)
            self._request_rejoin("coordinator connection lost", backoff=True)
        return self._end()

    def refresh_metadata(self, now_ms: int) -> list[Any]:
        """The application asks for fresh metadata now rather than at the next metadata.max.age.ms
        (Kafka's Metadata.requestUpdate): a stable leader fetches it at once and, if a partition
        count changed, rejoins as its periodic refresh would. Others ignore it (only the leader
        compares metadata with its assignment). `grouplab compare`'s default gives every design
        the news of added partitions when they are created (docs/legacy.md §7)."""
        return self.on_timer(_TIMER_METADATA, now_ms)

    def on_timer(self, key: tuple, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        if key == _TIMER_HEARTBEAT:  # (the commonest first; the keys are distinct)
            if self.state is _STABLE:
                self._on_heartbeat_due()
        elif key == FIND_COORDINATOR_TIMER:
            if self.state not in (_CLOSED, _FAILED):
                self._on_lookup_timer()
        elif key == _TIMER_REJOIN and self.state is _UNJOINED:
            self._send_join()
        elif key == _TIMER_METADATA and self.state is _STABLE and self._is_leader():
            if self._coordinator_missing():
                self._arm(_TIMER_METADATA, now_ms + self.config.retry_backoff_ms)
                return self._end()
            topics = [MetadataRequestTopic(t) for t in sorted(self.group_subscription)]
            req = MetadataRequest(topics=topics, allow_auto_topic_creation=self.config.allow_auto_create_topics)
            self._send(req, "Metadata", "watch")
        elif key == _TIMER_POLL:
            self._on_poll_deadline()
        elif key == _TIMER_REQUEST and self.state in (_JOINING, _SYNCING):
            self._log(events.MemberRequestTimedOut, waiting_in=self.state)
            self._inflight.clear()
            self._heartbeat_inflight = False
            if self.in_cluster:
                self._mark_coordinator_unknown(f"no answer while {self.state.value}", reconnect=True)
            else:
                self._out.append(Reconnect(f"no answer while {self.state.value}"))
            self._request_rejoin("request timed out", backoff=True)
        return self._end()

    def on_response(self, correlation_id: int, body: Any, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        purpose = self._inflight.pop(correlation_id, None)
        if self._sent_to is not None:
            self._sent_to.pop(correlation_id, None)
        if purpose is None or self.state in (_CLOSED, _FAILED):
            return self._end()  # stale: an answer to a request we no longer wait for
        # (The response types are distinct classes: the commonest first.)
        if isinstance(body, HeartbeatResponse):
            if purpose.startswith("heartbeat"):
                self._heartbeat_inflight = False
                if self.state is _STABLE and purpose == f"heartbeat:{self.generation_id}":
                    self._on_heartbeat_response(body)
        elif isinstance(body, JoinGroupResponse):
            if purpose == "join" and self.state is _JOINING:
                self._on_join_response(body)
        elif isinstance(body, SyncGroupResponse):
            if purpose == "sync" and self.state is _SYNCING:
                self._on_sync_response(body)
        elif isinstance(body, FindCoordinatorResponse):
            self._on_lookup_response(correlation_id, body)
        elif isinstance(body, MetadataResponse) and purpose == "assign" and self.state is _JOINING:
            self._on_assignment_metadata(body)
        elif isinstance(body, MetadataResponse) and purpose == "watch" and self.state is _STABLE:
            self._on_watch_metadata(body)
        elif isinstance(body, LeaveGroupResponse):
            pass
        return self._end()

    # ------------------------------------------------------------------ join and sync

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        """Cooperative only if every configured assignor supports it (Kafka's rule)."""
        return self._rebalance_protocol

    def _send_join(self) -> None:
        if self._rebalance_protocol is _EAGER:
            self._revoke_all(self.rejoin_reason)
        if self._coordinator_missing():
            # JOINING until the coordinator is found; _coordinator_ready sends the JoinGroup.
            self._set_state(_JOINING)
            self._cancel(_TIMER_HEARTBEAT)
            self._cancel(_TIMER_METADATA)
            self._cancel(_TIMER_REQUEST)
            return
        protocols = []
        for a in self.assignors:
            subscription = Subscription(
                topics=sorted(self.config.topics),
                # An eager sticky assignor remembers the last assignment here, since an eager
                # member owns nothing by the time it rejoins.
                user_data=a.subscription_user_data(self.last_assignment, self.last_assignment_generation),
                owned_partitions=sorted(self.owned),
                generation_id=self.generation_id,
            )
            protocols.append(JoinGroupRequestProtocol(a.name, consumer_protocol.encode_subscription(subscription)))
        req = JoinGroupRequest(
            group_id=self.config.group_id,
            session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=self.config.max_poll_interval_ms,
            member_id=self.member_id,
            group_instance_id=self.config.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=protocols,
            reason=self.rejoin_reason,
        )
        self._set_state(_JOINING)
        self._cancel(_TIMER_HEARTBEAT)
        self._cancel(_TIMER_METADATA)
        self._send(req, "JoinGroup", "join")
        self._arm(_TIMER_REQUEST, self._now + self.config.max_poll_interval_ms + JOIN_GRACE_MS)
        if self.log_events:  # (_log checks it too, after its arguments are built: a sorted copy here)
            self._log(events.JoinSent, reason=self.rejoin_reason, protocols=self.config.assignors, owned=_tps(self.owned))

    def _on_join_response(self, resp: JoinGroupResponse) -> None:
        code = _from_code(resp.error_code)
        if code is _MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            self._log(events.MemberIdReceived)
            self._send_join()
            return
        if code is not _NO_ERROR:
            self._on_group_error(code, "JoinGroup", resp.error_message)
            return
        self.member_id = resp.member_id
        self.generation_id = resp.generation_id
        self.protocol_name = resp.protocol_name
        self.leader_id = resp.leader
        is_leader = resp.leader == resp.member_id
        if self.log_events:
            self._log(events.Joined, leader=resp.leader, protocol_name=resp.protocol_name, is_leader=is_leader,
                      members=[m.member_id for m in resp.members])
        if is_leader:
            # KIP-814: with skip_assignment the leader keeps the current assignment but still
            # learns the group's subscriptions, to watch their partition counts.
            self._skip_assignment = resp.skip_assignment
            subs = self._decode_subscriptions(resp.members)
            if subs is None:
                return
            self._join_subscriptions = subs
            self.group_subscription = {t for s in subs.values() for t in s.topics}
            topics = [MetadataRequestTopic(t) for t in sorted(self.group_subscription)]
            self._send(MetadataRequest(topics=topics, allow_auto_topic_creation=self.config.allow_auto_create_topics), "Metadata", "assign")
        else:
            self._send_sync([])

    def _decode_subscriptions(self, members: list[Any]) -> dict[str, Subscription] | None:
        try:
            return {
                m.member_id: consumer_protocol.decode_subscription(m.metadata, m.group_instance_id)
                for m in members
            }
        except Exception as exc:  # a member sent metadata we cannot read: Kafka fails the rebalance
            self._log(events.SubscriptionUndecodable, error=str(exc))
            self._request_rejoin("undecodable subscription", backoff=True)
            return None

    def _on_assignment_metadata(self, resp: MetadataResponse) -> None:
        subs = self._join_subscriptions
        partitions_per_topic = {t.name: len(t.partitions) for t in resp.topics if t.error_code == 0 and t.partitions}
        self.assigned_metadata = {t: partitions_per_topic.get(t, 0) for t in self.group_subscription}
        if self._skip_assignment:
            self._send_sync([])
            return
        assignor = next(a for a in self.assignors if a.name == self.protocol_name)
        result = assignor.assign(partitions_per_topic, subs)
        if self.log_events:  # (_log checks it too, after its arguments are built: a sorted copy per member)
            self._log(events.AssignmentComputed, assignor=assignor.name, partitions_per_topic=partitions_per_topic,
                      assignments={m: _tps(ps) for m, ps in result.items()})
        assignments = [
            SyncGroupRequestAssignment(member_id=m, assignment=consumer_protocol.encode_assignment(Assignment(sorted(ps))))
            for m, ps in result.items()
        ]
        self._send_sync(assignments)

    def _send_sync(self, assignments: list[SyncGroupRequestAssignment]) -> None:
        if self._coordinator_missing():
            self._set_state(_JOINING)  # joins again once found, as Kafka after a failed sync
            return
        req = SyncGroupRequest(
            group_id=self.config.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.config.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol_name,
            assignments=assignments,
        )
        self._set_state(_SYNCING)
        self._send(req, "SyncGroup", "sync")
        self._arm(_TIMER_REQUEST, self._now + self.config.max_poll_interval_ms + JOIN_GRACE_MS)

    def _on_sync_response(self, resp: SyncGroupResponse) -> None:
        code = _from_code(resp.error_code)
        if code is not _NO_ERROR:
            self._on_group_error(code, "SyncGroup", resp.error_message)
            return
        self._cancel(_TIMER_REQUEST)
        try:
            assignment = consumer_protocol.decode_assignment(resp.assignment)
        except Exception as exc:
            self._log(events.AssignmentUndecodable, error=str(exc))
            self._request_rejoin("undecodable assignment", backoff=True)
            return
        new = sorted(set(assignment.partitions))
        old = set(self.owned)
        revoked = sorted(old - set(new))
        added = sorted(set(new) - old)
        self._set_state(_STABLE)
        self.last_heartbeat_ack_ms = self._now
        log = self.log_events  # (the events' arguments are sorted copies: built only for a log)
        if log:
            self._log(events.SyncCompleted, partitions=_tps(new), added=_tps(added), revoked=_tps(revoked))
        # Only a cooperative member still owns partitions here (an eager one revoked them all).
        self._revoke(revoked, "reassigned")
        self.owned = new
        self.last_assignment, self.last_assignment_generation = new, self.generation_id
        self._out.append(PartitionsAssigned(added))
        if log:
            self._log(events.PartitionsAssigned, partitions=_tps(added), owned=_tps(new))
        self._arm(_TIMER_HEARTBEAT, self._now + self.config.heartbeat_interval_ms)
        if self._is_leader():
            self._arm(_TIMER_METADATA, self._now + self.config.metadata_max_age_ms)
        if revoked:
            self._request_rejoin("partitions were revoked (cooperative follow-up rebalance)")

    # ------------------------------------------------------------------ heartbeats and liveness

    def _on_heartbeat_due(self) -> None:
        if self._now - self.last_heartbeat_ack_ms >= self.config.session_timeout_ms:
            self._log(events.HeartbeatSessionExpired, since_ms=self._now - self.last_heartbeat_ack_ms)
            self._inflight.clear()
            self._heartbeat_inflight = False
            if self.in_cluster:
                self._mark_coordinator_unknown("no heartbeat answer within session.timeout.ms", reconnect=True)
            else:
                self._out.append(Reconnect("no heartbeat answer within session.timeout.ms"))
            self._request_rejoin("coordinator unresponsive", backoff=True)
            return
        # At most one heartbeat in flight; but one unanswered for request.timeout.ms is given up (as
        # Kafka fails any request after request.timeout.ms), or a single lost answer would silence
        # the member until its session expired.
        if self._coordinator_missing():
            pass  # Kafka's heartbeat thread looks the coordinator up instead; the session keeps counting
        elif not self._heartbeat_inflight or self._now - self._heartbeat_sent_ms >= self.config.request_timeout_ms:
            req = HeartbeatRequest(self.config.group_id, self.generation_id, self.member_id, self.config.group_instance_id)
            self._send(req, "Heartbeat", f"heartbeat:{self.generation_id}")
            self._heartbeat_inflight = True
            self._heartbeat_sent_ms = self._now
        self._arm(_TIMER_HEARTBEAT, self._now + self.config.heartbeat_interval_ms)

    def _on_heartbeat_response(self, resp: HeartbeatResponse) -> None:
        code = _from_code(resp.error_code)
        if code is _NO_ERROR:
            self.last_heartbeat_ack_ms = self._now
            return
        if self.log_events:  # (_log checks it too, after its arguments are built)
            self._log(events.HeartbeatFailed, error=code.name)
        self._on_group_error(code, "Heartbeat", resp.error_message)

    def _on_watch_metadata(self, resp: MetadataResponse) -> None:
        counts = {t.name: len(t.partitions) for t in resp.topics if t.error_code == 0}
        current = {t: counts.get(t, 0) for t in self.group_subscription}
        if current != self.assigned_metadata:
            changed = {t: [self.assigned_metadata.get(t, 0), n] for t, n in current.items() if n != self.assigned_metadata.get(t, 0)}
            self._log(events.MetadataChanged, changed=changed)
            self._request_rejoin(f"partition count changed: {changed}")
        else:
            self._arm(_TIMER_METADATA, self._now + self.config.metadata_max_age_ms)

    def _on_poll_deadline(self) -> None:
        if self.state in (_CLOSED, _FAILED):
            return
        if not self._poll_overdue(_TIMER_POLL, self.last_poll_ms):
            return
        # Kafka's consumer leaves the group itself so the others need not wait for it.
        if self.state is not _UNJOINED or self.member_id:
            self._lose_all("poll timeout")
            self._leave("consumer poll timeout has expired")
        self._reset_member()
        self._set_state(_UNJOINED)
        self.rejoin_reason = "poll timeout"
        self._cancel(_TIMER_HEARTBEAT)
        self._cancel(_TIMER_METADATA)
        self._cancel(_TIMER_REQUEST)
        self._cancel(_TIMER_REJOIN)
        self._arm(_TIMER_POLL, self._now + self.config.max_poll_interval_ms)

    # ------------------------------------------------------------------ errors and rejoining

    def _on_group_error(self, code: ErrorCode, api: str, message: str | None) -> None:
        if self.log_events:
            self._log(events.GroupError, api=api, error=code.name, message=message)
        if code in _FATAL_JOIN_ERRORS:
            self._lose_all(code.name)
            self.fatal_error = code
            self._set_state(_FAILED)
            self._cancel_all_timers()
            self._log(events.FatalError, error=code.name, message=message)
            return
        if code in COORDINATOR_GONE and self.in_cluster:
            # Kafka: markCoordinatorUnknown, then the join (or, after a sync, a join again) is
            # retried at the coordinator FindCoordinator names; a heartbeat goes on at its interval.
            self._heartbeat_inflight = False
            self._mark_coordinator_unknown(f"{api}: {code.name}")
            if api in ("JoinGroup", "SyncGroup"):
                self.rejoin_reason = f"{api}: {code.name}"
                self._send_join()
        elif code is _UNKNOWN_MEMBER_ID:
            self._lose_all(code.name)
            self._reset_member()
            self._request_rejoin(f"{api}: {code.name}")
        elif code is _ILLEGAL_GENERATION:
            self._lose_all(code.name)
            self.generation_id = NO_GENERATION
            self._request_rejoin(f"{api}: {code.name}")
        elif code is _REBALANCE_IN_PROGRESS:
            self._request_rejoin(f"{api}: {code.name}")
        else:
            self._request_rejoin(f"{api}: {code.name}", backoff=True)

    def _request_rejoin(self, reason: str, backoff: bool = False) -> None:
        self.rejoin_reason = reason
        self._cancel(_TIMER_HEARTBEAT)
        self._cancel(_TIMER_METADATA)
        self._cancel(_TIMER_REQUEST)
        if backoff:
            self._set_state(_UNJOINED)
            self._arm(_TIMER_REJOIN, self._now + self.config.retry_backoff_ms)
        else:
            self._send_join()

    def _reset_member(self) -> None:
        self.member_id = ""
        self.generation_id = NO_GENERATION

    def _leave(self, reason: str) -> None:
        # KIP-345: a static member does not leave on close or poll timeout, so that a restart within
        # session.timeout.ms takes its old place without a rebalance. With no coordinator known
        # (a cluster's, being looked up) there is nowhere to send it: the session ends it.
        if self.in_cluster and self.coordinator_node is None:
            return
        if self.member_id and self.config.group_instance_id is None:
            member = LeaveGroupRequestMember(self.member_id, self.config.group_instance_id, reason)
            self._send(LeaveGroupRequest(self.config.group_id, [member]), "LeaveGroup", "leave")
            self._log(events.LeaveSent, reason=reason)

    # ------------------------------------------------------------------ plumbing

    def _is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    def _send(self, body: Any, api: str, purpose: str, node: int | None = None) -> int:
        if purpose in _REBALANCE_STEPS:
            # At most one rebalance step in flight: an older one's answer must be ignored.
            for cid in [c for c, p in self._inflight.items() if p in _REBALANCE_STEPS]:
                del self._inflight[cid]
        return MemberSteps._send(self, body, api, purpose, node)  # (super()'s, without building a super object per request)

    def _cancel_all_timers(self) -> None:
        for key in (_TIMER_HEARTBEAT, _TIMER_REJOIN, _TIMER_METADATA, _TIMER_POLL, _TIMER_REQUEST):
            self._cancel(key)
        if self.in_cluster:
            self._cancel(FIND_COORDINATOR_TIMER)

    # ------------------------------------------------------------------ a cluster's coordinator

    def _coordinator_ready(self) -> None:
        """Found: a member that was joining or syncing joins (again) there; a stable one
        heartbeats at its next interval."""
        if self.state in (_JOINING, _SYNCING):
            self._send_join()

    def _on_node_lost(self, node: int | None) -> None:
        purposes = set(self._inflight.values())
        was_coordinator = node == self.coordinator_node
        if not self._lost_node(node):
            return  # another broker's connection (a lookup's): _lost_node asked again
        self._heartbeat_inflight = False
        if self.state in (_STABLE, _JOINING, _SYNCING) and was_coordinator:
            self._log(events.CoordinatorDisconnected, previous_state=self.state)
        if self.state is _STABLE and "watch" in purposes:
            self._arm(_TIMER_METADATA, self._now + self.config.retry_backoff_ms)
        elif self.state in (_JOINING, _SYNCING):
            self._set_state(_JOINING)  # joins again once the coordinator is found

    def _set_state(self, state: MemberState) -> None:
        self.state = state

    def _logged_generation(self) -> int:
        return self.generation_id

    def _logged_state(self) -> MemberState:
        return self.state
