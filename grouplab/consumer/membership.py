"""The ConsumerMembership: one group member's side of the consumer rebalance protocol (KIP-848,
`group.protocol=consumer`), pure: Kafka's client ConsumerMembershipManager and its heartbeat
request manager, as facts, in the shape of consumer/coordinator.py.

Inputs: `start`, `on_response`, `on_timer`, `on_disconnect`, `poll`, `close`, each with `now_ms`.
Outputs: the same as a ConsumerCoordinator's (consumer/member.py): `Send` (ConsumerGroupHeartbeat
only), `ArmTimer`/`CancelTimer`, `PartitionsRevoked`/`PartitionsAssigned`/`PartitionsLost`,
`Reconnect`, `LogEvent`.

    UNSUBSCRIBED ──start──▶ JOINING ──answer: reconcile──▶ ACKNOWLEDGING ──answer──▶ STABLE
                  epoch 0, full  ▲   (revoke, then assign)   owned partitions sent    │
                                 │            ▲                                       │ a new assignment
                                 │            └───────────────────────────────────────┘
        FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: partitions lost, rejoin at epoch 0 at once
        poll timeout: partitions lost, leave (-1, static -2) ──▶ STALE ──next poll──▶ JOINING
        close: revoke everything, leave (-1, static -2) ──▶ CLOSED;  fatal errors ──▶ FATAL

There is no JoinGroup, SyncGroup or leader: the coordinator computes the assignment (its server
assignor, `group.remote.assignor` asks for one) and hands each member what it may own now. The
member revokes what it no longer has, then takes the new, and acknowledges by sending what it owns
in its next heartbeat, at once. Heartbeats go every `heartbeat_interval_ms` the coordinator answers
with (not the client's heartbeat.interval.ms), one at a time; after the first, a heartbeat carries
only what changed (rebalance timeout, subscription, assignor, owned partitions), and everything
again after an error or a lost connection. The member epoch is what the member's events write as
`generation_id`, and what its offset commits carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grouplab.consumer.backoff import ExponentialBackoff
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import ConsumerCoordinator
from grouplab.consumer.member import (COORDINATOR_GONE, FIND_COORDINATOR_TIMER, MemberSteps, PartitionsAssigned,
                                      Reconnect, tps)
from grouplab.protocol import events
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    FindCoordinatorResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
)
from grouplab.protocol.states import MembershipState
from grouplab.protocol.types import TopicPartition

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# The coordinator moved or is busy: ask again after retry.backoff.ms, doubling up to
# retry.backoff.max.ms while it stays busy (Kafka's retriable errors, KIP-580's backoff).
_RETRIABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
# The member's epoch or id is gone: its partitions are lost, it rejoins at epoch 0 at once.
_FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
# Every other error is fatal, as in Kafka's client (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
# GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR, INVALID_REQUEST, GROUP_AUTHORIZATION_FAILED, and
# errors it does not expect, GROUP_ID_NOT_FOUND among them).

_IN_GROUP = frozenset({MembershipState.JOINING, MembershipState.ACKNOWLEDGING, MembershipState.STABLE})

_TIMER_HEARTBEAT = ("heartbeat",)
_TIMER_POLL = ("poll",)
_TIMER_REQUEST = ("request",)


@dataclass(frozen=True, slots=True)
class LocalAssignment:
    """What the member owns and the member epoch it reconciled at (Kafka's LocalAssignment): a new
    one is reported in the next heartbeat, even when only the epoch differs."""

    epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(slots=True)
class SentFields:
    """What the heartbeats since the last full one told the coordinator (Kafka's SentFields); None:
    not sent yet, so the next heartbeat carries it."""

    rebalance_timeout_ms: int | None = None
    subscribed_topic_names: list[str] | None = None
    server_assignor: str | None = None
    local: LocalAssignment | None = None


@dataclass
class ConsumerMembership(MemberSteps):
    config: ConsumerConfig
    state: MembershipState = MembershipState.UNSUBSCRIBED
    member_id: str = ""  # "" until the coordinator gives one (kept across fencing, as Kafka's client)
    member_epoch: int = JOIN_EPOCH
    owned: list[TopicPartition] = field(default_factory=list)
    fatal_error: ErrorCode | None = None
    # The coordinator's group.consumer.heartbeat.interval.ms, from its last answer.
    heartbeat_interval_ms: int = 0
    last_poll_ms: int = 0
    log_events: bool = True
    rejoin_reason: str = "starting"

    def __post_init__(self) -> None:
        self.heartbeat_interval_ms = self.config.heartbeat_interval_ms
        self._local = LocalAssignment(JOIN_EPOCH, ())
        self._sent = SentFields()
        self._next_cid = 0
        self._inflight: dict[int, str] = {}
        self._heartbeat_cid: int | None = None  # the heartbeat in flight
        self._heartbeat_sent_ms = 0
        self._heartbeat_due = False  # its timer fired (or an ack was wanted) while one was in flight
        self._out: list[Any] = []
        self._now = 0
        # Kafka's HeartbeatRequestState: a retriable error (COORDINATOR_LOAD_IN_PROGRESS while a new
        # coordinator loads the group) backs off 100, 200, 400, 800, 1000 ms; an answer starts over.
        self._retry = ExponentialBackoff(self.config.retry_backoff_ms, self.config.retry_backoff_max_ms)

    @property
    def generation_id(self) -> int:
        """The member epoch: what a consumer-protocol member's commits carry in the generation's place."""
        return self.member_epoch

    @property
    def working(self) -> bool:
        """Its partitions may be fetched and committed: it is in the group and not rejoining."""
        return self.state in (MembershipState.ACKNOWLEDGING, MembershipState.STABLE)

    # ------------------------------------------------------------------ inputs

    def start(self, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        if self.state is MembershipState.UNSUBSCRIBED:
            self.last_poll_ms = now_ms
            self._arm(_TIMER_POLL, now_ms + self.config.max_poll_interval_ms)
            self._join("starting")
        return self._end()

    def poll(self, now_ms: int) -> list[Any]:
        """The application called poll(): it is alive. A member that left on a poll timeout rejoins."""
        self._begin(now_ms)
        self.last_poll_ms = now_ms
        if self.state is MembershipState.STALE:
            self._arm(_TIMER_POLL, now_ms + self.config.max_poll_interval_ms)
            self._join("poll timeout")
        return self._end()

    def close(self, now_ms: int) -> list[Any]:
        """Revoke everything (the application may commit), then leave: epoch -1, or -2 for a static
        member, whose place the coordinator keeps for its session timeout."""
        self._begin(now_ms)
        if self.state not in (MembershipState.CLOSED, MembershipState.FATAL):
            self._revoke_all("closing")
            if self.state in _IN_GROUP and self.member_id:
                self._leave("the consumer is closing")
            self.state = MembershipState.CLOSED
            self._stop_timers()
        return self._end()

    def on_disconnect(self, now_ms: int, node: int | None = None) -> list[Any]:
        """The connection dropped: the heartbeat in flight is lost. The member keeps its epoch and
        partitions and heartbeats in full once reconnected (the coordinator still knows it, or
        answers with an error that makes it rejoin). In a cluster, `node` is the broker whose
        connection dropped: the coordinator's makes the member find it again."""
        self._begin(now_ms)
        if self.in_cluster:
            was_coordinator = node == self.coordinator_node
            if not self._lost_node(node) or not was_coordinator:
                if self._heartbeat_cid is not None and self._heartbeat_cid not in self._inflight:
                    self._heartbeat_cid = None
                return self._end()
        else:
            self._inflight.clear()
        self._heartbeat_cid = None
        if self.state in _IN_GROUP:
            self._log(events.CoordinatorDisconnected, previous_state=self.state)
            self._sent = SentFields()
            self._cancel(_TIMER_REQUEST)
            self._arm(_TIMER_HEARTBEAT, now_ms + self.config.retry_backoff_ms)
        return self._end()

    def on_timer(self, key: tuple, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        if key == FIND_COORDINATOR_TIMER:
            if self.state not in (MembershipState.CLOSED, MembershipState.FATAL):
                self._on_lookup_timer()
        elif key == _TIMER_HEARTBEAT and self.state in _IN_GROUP:
            self._heartbeat()
        elif key == _TIMER_POLL:
            self._on_poll_deadline()
        elif key == _TIMER_REQUEST and self.state in _IN_GROUP and self._heartbeat_cid is not None:
            # No answer within request.timeout.ms: Kafka fails the request and finds its
            # coordinator again; the next heartbeat says everything.
            self._log(events.MemberRequestTimedOut, waiting_in=self.state)
            self._inflight.pop(self._heartbeat_cid, None)
            self._heartbeat_cid = None
            self._sent = SentFields()
            if self.in_cluster:
                self._mark_coordinator_unknown("no ConsumerGroupHeartbeat answer within request.timeout.ms",
                                               reconnect=True)
            else:
                self._out.append(Reconnect("no ConsumerGroupHeartbeat answer within request.timeout.ms"))
            self._arm(_TIMER_HEARTBEAT, now_ms + self.config.retry_backoff_ms)
        return self._end()

    def on_response(self, correlation_id: int, body: Any, now_ms: int) -> list[Any]:
        self._begin(now_ms)
        purpose = self._inflight.pop(correlation_id, None)
        if self._sent_to is not None:
            self._sent_to.pop(correlation_id, None)
        if purpose is not None and isinstance(body, FindCoordinatorResponse):
            if self.state not in (MembershipState.CLOSED, MembershipState.FATAL):
                self._on_lookup_response(correlation_id, body)
        elif purpose == "heartbeat" and correlation_id == self._heartbeat_cid:
            self._heartbeat_cid = None
            self._cancel(_TIMER_REQUEST)
            if isinstance(body, ConsumerGroupHeartbeatResponse) and self.state in _IN_GROUP:
                self._on_heartbeat_response(body)
        return self._end()  # a leave's answer, or a stale one: nothing to do

    # ------------------------------------------------------------------ heartbeats

    def _join(self, reason: str) -> None:
        """Heartbeat with epoch 0 and the full subscription; owned partitions: none."""
        self.rejoin_reason = reason
        self.state = MembershipState.JOINING
        self.member_epoch = JOIN_EPOCH
        self._local = LocalAssignment(JOIN_EPOCH, ())
        self._sent = SentFields()
        self._log(events.ConsumerJoinSent, reason=reason, subscribed_topic_names=sorted(self.config.topics),
                  server_assignor=self.config.group_remote_assignor,
                  rebalance_timeout_ms=self.config.max_poll_interval_ms)
        self._heartbeat()

    def _heartbeat(self) -> None:
        """Send a heartbeat now, or as soon as the one in flight is answered."""
        if self._heartbeat_cid is not None:
            self._heartbeat_due = True
            return
        if self._coordinator_missing():
            self._heartbeat_due = True  # sent once the coordinator is found (_coordinator_ready)
            return
        self._heartbeat_due = False
        self._heartbeat_cid = self._send(self._request(), "ConsumerGroupHeartbeat", "heartbeat")
        self._heartbeat_sent_ms = self._now
        self._arm(_TIMER_REQUEST, self._now + self.config.request_timeout_ms)
        self._arm(_TIMER_HEARTBEAT, self._now + self.heartbeat_interval_ms)

    def _request(self) -> ConsumerGroupHeartbeatRequest:
        """Kafka's HeartbeatState: group, member id, epoch and instance id always; the rest when
        joining, after an error, or when it changed since it was last sent."""
        cfg, sent = self.config, self._sent
        req = ConsumerGroupHeartbeatRequest(cfg.group_id, self.member_id, self.member_epoch,
                                            instance_id=cfg.group_instance_id)
        if sent.rebalance_timeout_ms != cfg.max_poll_interval_ms:
            req.rebalance_timeout_ms = sent.rebalance_timeout_ms = cfg.max_poll_interval_ms
        topics = sorted(set(cfg.topics))
        if sent.subscribed_topic_names != topics:
            req.subscribed_topic_names = sent.subscribed_topic_names = topics
        if cfg.group_remote_assignor is not None and sent.server_assignor != cfg.group_remote_assignor:
            req.server_assignor = sent.server_assignor = cfg.group_remote_assignor
        if sent.local != self._local:
            req.topic_partitions = _by_topic(self._local.partitions)
            sent.local = self._local
        return req

    def _on_heartbeat_response(self, resp: ConsumerGroupHeartbeatResponse) -> None:
        code = ErrorCode.from_code(resp.error_code)
        if code is not ErrorCode.NONE:
            self._on_error(code, resp.error_message)
            return
        self._retry.reset()
        if resp.heartbeat_interval_ms > 0 and resp.heartbeat_interval_ms != self.heartbeat_interval_ms:
            self.heartbeat_interval_ms = resp.heartbeat_interval_ms
            self._arm(_TIMER_HEARTBEAT, self._heartbeat_sent_ms + self.heartbeat_interval_ms)
        if resp.member_id:
            self.member_id = resp.member_id
        joining = self.state is MembershipState.JOINING
        self.member_epoch = resp.member_epoch
        if resp.assignment is not None:
            self._reconcile(_partitions(resp.assignment), joining)
        if self._sent.local != self._local:
            self.state = MembershipState.ACKNOWLEDGING
            self._heartbeat()  # the acknowledgement goes at once
        else:
            acknowledged = self.state is MembershipState.ACKNOWLEDGING
            self.state = MembershipState.STABLE
            if acknowledged:
                self._log(events.AssignmentAcknowledged, owned=tps(self.owned))
            if self._heartbeat_due:
                self._heartbeat()

    def _reconcile(self, target: list[TopicPartition], joining: bool) -> None:
        """Revoke what the assignment no longer holds, then take what it adds (Kafka's order)."""
        held = set(self.owned)
        revoking = sorted(held - set(target))
        adding = sorted(set(target) - held)
        if revoking or adding or joining:
            self._log(events.AssignmentReceived, assignment=tps(target), revoking=tps(revoking), adding=tps(adding))
        self._revoke(revoking, f"not in the assignment of member epoch {self.member_epoch}")
        self.owned = sorted(target)
        if adding or joining:
            self._out.append(PartitionsAssigned(adding))
            self._log(events.PartitionsAssigned, partitions=tps(adding), owned=tps(self.owned))
        self._local = LocalAssignment(self.member_epoch, tuple(self.owned))

    # ------------------------------------------------------------------ errors, leaving, liveness

    def _on_error(self, code: ErrorCode, message: str | None) -> None:
        self._sent = SentFields()  # the next heartbeat says everything again
        if code in COORDINATOR_GONE and self.in_cluster:
            # Kafka's heartbeat request manager: coordinator unknown, look it up, heartbeat there.
            self._log(events.GroupError, api="ConsumerGroupHeartbeat", error=code.name, message=message)
            self._mark_coordinator_unknown(f"ConsumerGroupHeartbeat: {code.name}")
            self._heartbeat_due = True
            self._retry.reset()  # Kafka skips the backoff: the next heartbeat goes once it is found
        elif code in _RETRIABLE:
            self._log(events.GroupError, api="ConsumerGroupHeartbeat", error=code.name, message=message)
            self._arm(_TIMER_HEARTBEAT, self._now + self._retry.failed())
        elif code in _FENCED:
            self._log(events.MemberFenced, error=code.name, message=message, fenced_epoch=self.member_epoch)
            self._lose_all(code.name)
            self._join(f"ConsumerGroupHeartbeat: {code.name}")
        else:
            self._log(events.GroupError, api="ConsumerGroupHeartbeat", error=code.name, message=message)
            self._lose_all(code.name)
            self.fatal_error = code
            self.state = MembershipState.FATAL
            self._stop_timers()
            self._log(events.FatalError, error=code.name, message=message)

    def _on_poll_deadline(self) -> None:
        if self.state in (MembershipState.CLOSED, MembershipState.FATAL, MembershipState.STALE):
            return
        if not self._poll_overdue(_TIMER_POLL, self.last_poll_ms):
            return
        # Kafka's client leaves on its own so that the others need not wait for it, and rejoins on
        # the next poll; what it owned is lost (it cannot commit what it did not poll).
        self._lose_all("poll timeout")
        if self.member_id:
            self._leave("consumer poll timeout has expired")
        self.state = MembershipState.STALE
        self.member_epoch = JOIN_EPOCH
        self._inflight.clear()
        self._heartbeat_cid = None
        self._cancel(_TIMER_HEARTBEAT)
        self._cancel(_TIMER_REQUEST)

    def _leave(self, reason: str) -> None:
        if self.in_cluster and self.coordinator_node is None:
            return  # nowhere to send it while the coordinator is looked up: the session ends it
        static = self.config.group_instance_id is not None
        epoch = STATIC_LEAVE_EPOCH if static else LEAVE_EPOCH
        req = ConsumerGroupHeartbeatRequest(self.config.group_id, self.member_id, epoch,
                                            instance_id=self.config.group_instance_id)
        self._send(req, "ConsumerGroupHeartbeat", "leave")
        self.member_epoch = epoch
        self._log(events.ConsumerLeaveSent, leave_epoch=epoch, reason=reason)

    def _stop_timers(self) -> None:
        for key in (_TIMER_HEARTBEAT, _TIMER_POLL, _TIMER_REQUEST):
            self._cancel(key)
        if self.in_cluster:
            self._cancel(FIND_COORDINATOR_TIMER)

    def _coordinator_ready(self) -> None:
        """Found: a member in the group heartbeats there at once, in full."""
        self._sent = SentFields()
        if self.state in _IN_GROUP:
            self._heartbeat()

    def _logged_generation(self) -> int:
        return self.member_epoch

    def _logged_state(self) -> MembershipState:
        return self.state


def _partitions(assignment: dict[str, list[int]]) -> list[TopicPartition]:
    return sorted(TopicPartition(t, p) for t, ps in assignment.items() for p in ps)


def _by_topic(partitions: tuple[TopicPartition, ...]) -> list[ConsumerGroupHeartbeatTopicPartitions]:
    topics: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [ConsumerGroupHeartbeatTopicPartitions(t, ps) for t, ps in topics.items()]


def member_machine(config: ConsumerConfig, log_events: bool = True) -> ConsumerCoordinator | ConsumerMembership:
    """The member machine `group.protocol` names: classic (JoinGroup/SyncGroup) or consumer (KIP-848)."""
    if config.consumer_protocol:
        return ConsumerMembership(config, log_events=log_events)
    return ConsumerCoordinator(config, log_events=log_events)
