"""The event log's vocabulary: one class per kind of line in docs/events.md (§4).

The machines and shells build these instead of dicts with string names, so a reader can ask
`isinstance(ev.payload, GroupStable)` and read `ev.payload.assignments`: renaming a field breaks the
type check (and tests/test_events_doc.py, which holds this module and the page to each other)
instead of silently switching a check off. `NAME` is the `event` a line carries; the fields, base
class first, are the line's other keys in the order they are written. Values are the logged ones
(partitions as `[topic, partition]` pairs, error names as str), except that an enumeration the
emitter holds as an Enum stays one here and is written as its value (`log_fields`).

Plain slotted dataclasses, not frozen: the simulator builds one per coordinator event.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, ParamSpec

from grouplab.protocol.states import (
    ConsumerGroupState,
    ConsumerMemberState,
    GroupEpochCause,
    GroupState,
    MembershipState,
    MemberState,
    ProducerState,
    RebalanceCause,
    RemovalReason,
    TxnState,
)

# The enumerations above, as annotations name them: a field of one of these types is written as its value.
_ENUM_TYPES = frozenset(e.__name__ for e in (MemberState, ProducerState, GroupState, RebalanceCause, RemovalReason, TxnState,
                                             ConsumerGroupState, ConsumerMemberState, GroupEpochCause, MembershipState))
# A member's state: a classic member's (consumer/coordinator.py) or a consumer-protocol member's (consumer/membership.py).
AnyMemberState = MemberState | MembershipState

# `[[topic, partition], ...]`, sorted by topic then partition: how every partition list is logged.
PartitionPairs = list[list[Any]]

# An event class's own fields, after its base's: what an emitter's `_log(EventClass, **fields)`
# takes, the base fields being the emitter's own state (typed as Callable[Concatenate[..., Fields], ...]).
Fields = ParamSpec("Fields")


@dataclass(slots=True)
class Event:
    """Base of every event. `FIELDS` (set below for each concrete class) are the field names in log
    order, `ENUM_FIELDS` those holding an enumeration."""

    NAME: ClassVar[str]
    FIELDS: ClassVar[tuple[str, ...]]
    ENUM_FIELDS: ClassVar[tuple[str, ...]]

    def log_fields(self) -> dict[str, Any]:
        """The line's fields as written: in log order, enumerations as their values."""
        values = {name: getattr(self, name) for name in self.FIELDS}
        for name in self.ENUM_FIELDS:
            values[name] = values[name].value
        return values


@dataclass(slots=True)
class FreeFormEvent:
    """A line outside docs/events.md's contract, named and shaped by its emitter: the fault
    proxy's (docs/faults.md §1.3), whose fields may still change."""

    NAME: str
    values: dict[str, Any]

    def log_fields(self) -> dict[str, Any]:
        return self.values


# ----------------------------------------------------------------------------- coordinator: groups (§4.1, §4.1a)


@dataclass(slots=True)
class GroupEvent(Event):
    """G: the group as it is when the event is written (coordinator/group.py, coordinator/offsets.py)."""

    group_id: str
    generation_id: int
    state: GroupState


@dataclass(slots=True)
class MemberIdAssigned(GroupEvent):
    NAME = "member_id_assigned"
    member_id: str


@dataclass(slots=True)
class MemberJoined(GroupEvent):
    NAME = "member_joined"
    member_id: str
    group_instance_id: str | None
    client_id: str
    protocols: list[str]


@dataclass(slots=True)
class StaticMemberReplaced(GroupEvent):
    NAME = "static_member_replaced"
    member_id: str
    old_member_id: str
    group_instance_id: str


@dataclass(slots=True)
class JoinRejected(GroupEvent):
    NAME = "join_rejected"
    member_id: str
    error: str
    reason: str


@dataclass(slots=True)
class PendingMemberExpired(GroupEvent):
    NAME = "pending_member_expired"
    member_id: str


@dataclass(slots=True)
class PendingMemberLeft(GroupEvent):
    NAME = "pending_member_left"
    member_id: str


@dataclass(slots=True)
class RebalanceStarted(GroupEvent):
    NAME = "rebalance_started"
    trigger: str
    cause: RebalanceCause
    members: list[str]


@dataclass(slots=True)
class StateChanged(GroupEvent):
    NAME = "state_changed"
    from_state: GroupState
    to_state: GroupState


@dataclass(slots=True)
class GenerationCompleted(GroupEvent):
    NAME = "generation_completed"
    protocol_name: str | None
    leader: str | None
    members: list[str]
    trigger: str


@dataclass(slots=True)
class GroupStable(GroupEvent):
    NAME = "group_stable"
    leader: str
    protocol_name: str
    # member id -> PartitionPairs, or {"bytes": n} / {"undecodable_bytes": n} (docs/events.md)
    assignments: dict[str, Any]
    clients: dict[str, str]


@dataclass(slots=True)
class MemberRemoved(GroupEvent):
    NAME = "member_removed"
    member_id: str
    reason: RemovalReason
    detail: str


@dataclass(slots=True)
class GroupLoaded(GroupEvent):
    NAME = "group_loaded"
    leader: str | None
    protocol_name: str | None
    members: list[str]
    written_ms: int


@dataclass(slots=True)
class DuplicateJoinIgnored(GroupEvent):
    NAME = "duplicate_join_ignored"
    member_id: str


@dataclass(slots=True)
class OffsetsCommitted(GroupEvent):
    NAME = "offsets_committed"
    member_id: str
    partitions: PartitionPairs
    offsets: list[int]
    producer_id: int | None


@dataclass(slots=True)
class OffsetCommitRejected(GroupEvent):
    NAME = "offset_commit_rejected"
    member_id: str
    request_generation_id: int
    error: str
    partitions: PartitionPairs


@dataclass(slots=True)
class TxnOffsetsStaged(GroupEvent):
    NAME = "txn_offsets_staged"
    member_id: str
    partitions: PartitionPairs
    offsets: list[int]
    producer_id: int


@dataclass(slots=True)
class TxnOffsetsAborted(GroupEvent):
    NAME = "txn_offsets_aborted"
    producer_id: int
    partitions: PartitionPairs


@dataclass(slots=True)
class OffsetsLoaded(GroupEvent):
    NAME = "offsets_loaded"
    committed_partitions: int


@dataclass(slots=True)
class OffsetsExpired(GroupEvent):
    NAME = "offsets_expired"
    partitions: PartitionPairs
    empty_since_ms: int | None


@dataclass(slots=True)
class OffsetsDeleted(GroupEvent):
    NAME = "offsets_deleted"
    partitions: PartitionPairs


@dataclass(slots=True)
class GroupDeleted(GroupEvent):
    NAME = "group_deleted"
    reason: str  # "expired" or "delete_groups" (docs/events.md)
    offsets_deleted: int


@dataclass(slots=True)
class TopicOffsetsDeleted(GroupEvent):
    NAME = "topic_offsets_deleted"
    topic: str
    partitions: PartitionPairs
    staged_partitions: PartitionPairs


# ----------------------------------------------------------------------------- coordinator: consumer-protocol groups (§4.1c)


@dataclass(slots=True)
class ConsumerGroupEvent(Event):
    """C: a consumer-protocol group (KIP-848) as it is when the event is written (coordinator/consumer_group.py)."""

    group_id: str
    group_epoch: int
    state: ConsumerGroupState


@dataclass(slots=True)
class ConsumerMemberJoined(ConsumerGroupEvent):
    NAME = "consumer_member_joined"
    member_id: str
    instance_id: str | None
    client_id: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None


@dataclass(slots=True)
class ConsumerStaticMemberReplaced(ConsumerGroupEvent):
    NAME = "consumer_static_member_replaced"
    member_id: str
    old_member_id: str
    instance_id: str


@dataclass(slots=True)
class ConsumerStaticMemberLeft(ConsumerGroupEvent):
    NAME = "consumer_static_member_left"
    member_id: str
    instance_id: str


@dataclass(slots=True)
class ConsumerMemberRemoved(ConsumerGroupEvent):
    NAME = "consumer_member_removed"
    member_id: str
    reason: RemovalReason
    detail: str
    partitions: PartitionPairs  # what it held (assigned and pending revocation), now free


@dataclass(slots=True)
class ConsumerHeartbeatRejected(ConsumerGroupEvent):
    NAME = "consumer_heartbeat_rejected"
    member_id: str
    member_epoch: int
    error: str
    reason: str


@dataclass(slots=True)
class GroupEpochBumped(ConsumerGroupEvent):
    NAME = "group_epoch_bumped"
    cause: GroupEpochCause
    detail: str


@dataclass(slots=True)
class TargetAssignmentComputed(ConsumerGroupEvent):
    NAME = "target_assignment_computed"
    assignment_epoch: int
    assignor: str
    assignment: dict[str, PartitionPairs]


@dataclass(slots=True)
class ConsumerMemberReconciled(ConsumerGroupEvent):
    NAME = "consumer_member_reconciled"
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    member_state: ConsumerMemberState
    assigned: PartitionPairs
    pending_revocation: PartitionPairs
    unreleased: PartitionPairs  # in its target, still held by another member


@dataclass(slots=True)
class ConsumerGroupLoaded(ConsumerGroupEvent):
    """A restarted coordinator loaded the group from its log (consumer_group.py `restore`)."""

    NAME = "consumer_group_loaded"
    members: list[str]
    assignment_epoch: int
    written_ms: int


@dataclass(slots=True)
class ConsumerGroupStateChanged(ConsumerGroupEvent):
    NAME = "consumer_group_state_changed"
    from_state: ConsumerGroupState
    to_state: ConsumerGroupState


@dataclass(slots=True)
class ConsumerClassicMemberJoined(ConsumerGroupEvent):
    """A member speaking the classic protocol (JoinGroup) joined the consumer group (online migration)."""

    NAME = "consumer_classic_member_joined"
    member_id: str
    instance_id: str | None
    client_id: str
    subscribed_topic_names: list[str]
    protocols: list[str]  # its JoinGroup's protocol names, preferred first
    session_timeout_ms: int
    rebalance_timeout_ms: int


@dataclass(slots=True)
class GroupConverted(ConsumerGroupEvent):
    """The group changed type (online migration): classic -> consumer on a ConsumerGroupHeartbeat
    join (C fields: the consumer group it became), consumer -> classic when only classic members
    remain (C fields: the consumer group it was)."""

    NAME = "group_converted"
    from_type: str  # "classic" or "consumer"
    to_type: str
    members: list[str]  # the members it keeps
    detail: str


# ----------------------------------------------------------------------------- coordinator: transactions (§4.1b)


@dataclass(slots=True)
class TxnEvent(Event):
    """T: the transactional id after the change the event reports (coordinator/transactions.py)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_state: TxnState


@dataclass(slots=True)
class ProducerIdAssigned(TxnEvent):
    NAME = "producer_id_assigned"
    new: bool


@dataclass(slots=True)
class ProducerEpochBumped(TxnEvent):
    NAME = "producer_epoch_bumped"
    reason: str


@dataclass(slots=True)
class TransactionStarted(TxnEvent):
    NAME = "transaction_started"


@dataclass(slots=True)
class PartitionsAddedToTxn(TxnEvent):
    NAME = "partitions_added_to_txn"
    partitions: PartitionPairs


@dataclass(slots=True)
class TransactionCommitted(TxnEvent):
    NAME = "transaction_committed"
    reason: str
    partitions: PartitionPairs
    groups: list[str]


@dataclass(slots=True)
class TransactionAborted(TxnEvent):
    NAME = "transaction_aborted"
    reason: str
    partitions: PartitionPairs
    groups: list[str]


@dataclass(slots=True)
class MarkerWriteFailed(TxnEvent):
    NAME = "marker_write_failed"
    topic: str
    partition: int
    error: str
    attempt: int
    retry_backoff_ms: int


# ----------------------------------------------------------------------------- coordinator: topics and partition logs (§4.2, §4.2a)


@dataclass(slots=True)
class TopicCreated(Event):
    NAME = "topic_created"
    topic: str
    partition_count: int
    auto: bool


@dataclass(slots=True)
class PartitionsCreated(Event):
    NAME = "partitions_created"
    topic: str
    partition_count: int


@dataclass(slots=True)
class TopicDeleted(Event):
    NAME = "topic_deleted"
    topic: str
    partition_count: int
    partition_logs: int


@dataclass(slots=True)
class ProduceRejected(Event):
    NAME = "produce_rejected"
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: int
    error: str
    message: str | None


@dataclass(slots=True)
class DuplicateBatchAcked(Event):
    NAME = "duplicate_batch_acked"
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: int
    base_offset: int


@dataclass(slots=True)
class ProducerIdAllocated(Event):
    NAME = "producer_id_allocated"
    producer_id: int
    producer_epoch: int
    transactional_id: None  # always: a transactional producer's id comes from the transaction coordinator


@dataclass(slots=True)
class PartitionWriteFailed(Event):
    NAME = "partition_write_failed"
    topic: str
    partition: int
    error: str


@dataclass(slots=True)
class PartitionLogsRecovered(Event):
    NAME = "partition_logs_recovered"
    path: str
    partitions: int
    segments: int
    batches: int
    bytes: int
    truncated_bytes: int
    ms: float


@dataclass(slots=True)
class PartitionLogTruncated(Event):
    NAME = "partition_log_truncated"
    topic: str
    partition: int
    segment: str
    position: int
    bytes: int
    reason: str


@dataclass(slots=True)
class PartitionFlushFailed(Event):
    NAME = "partition_flush_failed"
    error: str


# ----------------------------------------------------------------------------- coordinator: server (§4.3)


@dataclass(slots=True)
class CoordinatorStarted(Event):
    NAME = "coordinator_started"
    host: str
    port: int
    config: dict[str, Any]
    data_dir: str | None
    kafka_port: int | None = None


@dataclass(slots=True)
class CoordinatorStopped(Event):
    NAME = "coordinator_stopped"


# ----------------------------------------------------------------------------- coordinator: a cluster of brokers (§4.3a)


@dataclass(slots=True)
class BrokerStopped(Event):
    """A broker of a cluster stopped (killed or shut down): its partitions' leadership moved."""

    NAME = "broker_stopped"
    node_id: int
    live: list[int]
    how: str


@dataclass(slots=True)
class BrokerStarted(Event):
    NAME = "broker_started"
    node_id: int
    live: list[int]


@dataclass(slots=True)
class LeadersMoved(Event):
    """Partitions of users' topics (and `__transaction_state`) with a new leader: `[topic,
    partition, old, new, leader_epoch]` each, old or new -1 for none."""

    NAME = "leaders_moved"
    cause: str
    partitions: list[list[Any]]


@dataclass(slots=True)
class CoordinatorMoved(Event):
    """A `__consumer_offsets` partition has a new leader: its groups' coordinator moved from
    `from_node` to `to_node` (-1: none), which loads them for `load_ms`."""

    NAME = "coordinator_moved"
    partition: int
    from_node: int
    to_node: int
    groups: list[str]
    load_ms: int
    cause: str


@dataclass(slots=True)
class CoordinatorLoaded(Event):
    """The new coordinator loaded a `__consumer_offsets` partition's groups from the group log."""

    NAME = "coordinator_loaded"
    partition: int
    node_id: int
    groups: list[str]


@dataclass(slots=True)
class LogRecovered(Event):
    NAME = "log_recovered"
    path: str
    records: int
    bytes: int
    torn_tail_bytes: int
    corrupt_records: int
    groups: int
    topics: int
    compacted_bytes: int
    ms: float


@dataclass(slots=True)
class LogWriteFailed(Event):
    NAME = "log_write_failed"
    record: str
    key: list[Any]
    error: str


@dataclass(slots=True)
class BadRequest(Event):
    NAME = "bad_request"
    peer: str
    error: str


@dataclass(slots=True)
class InternalError(Event):
    NAME = "internal_error"
    error: str


@dataclass(slots=True)
class ResponseTooLarge(Event):
    NAME = "response_too_large"
    api: str
    client_id: str
    bytes: int
    limit: int
    exact: bool


@dataclass(slots=True)
class ResponseEncodeFailed(Event):
    NAME = "response_encode_failed"
    api: str
    client_id: str
    error: str


# ----------------------------------------------------------------------------- member state machine and delivery application (§4.4, §4.5b)


@dataclass(slots=True)
class MemberEvent(Event):
    """M: the member as it is when the event is written (consumer/coordinator.py, consumer/delivery.py;
    consumer/membership.py writes its member epoch as `generation_id` and its MembershipState)."""

    group_id: str
    member_id: str
    generation_id: int
    state: AnyMemberState


@dataclass(slots=True)
class JoinSent(MemberEvent):
    NAME = "join_sent"
    reason: str
    protocols: list[str]
    owned: PartitionPairs


@dataclass(slots=True)
class MemberIdReceived(MemberEvent):
    NAME = "member_id_received"


@dataclass(slots=True)
class Joined(MemberEvent):
    NAME = "joined"
    leader: str
    protocol_name: str | None
    is_leader: bool
    members: list[str]


@dataclass(slots=True)
class AssignmentComputed(MemberEvent):
    NAME = "assignment_computed"
    assignor: str
    partitions_per_topic: dict[str, int]
    assignments: dict[str, PartitionPairs]


@dataclass(slots=True)
class SyncCompleted(MemberEvent):
    NAME = "sync_completed"
    partitions: PartitionPairs
    added: PartitionPairs
    revoked: PartitionPairs


@dataclass(slots=True)
class PartitionsAssigned(MemberEvent):
    NAME = "partitions_assigned"
    partitions: PartitionPairs
    owned: PartitionPairs


@dataclass(slots=True)
class PartitionsRevoked(MemberEvent):
    NAME = "partitions_revoked"
    partitions: PartitionPairs
    reason: str


@dataclass(slots=True)
class PartitionsLost(MemberEvent):
    NAME = "partitions_lost"
    partitions: PartitionPairs
    reason: str


@dataclass(slots=True)
class HeartbeatFailed(MemberEvent):
    NAME = "heartbeat_failed"
    error: str


@dataclass(slots=True)
class HeartbeatSessionExpired(MemberEvent):
    NAME = "heartbeat_session_expired"
    since_ms: int


@dataclass(slots=True)
class GroupError(MemberEvent):
    NAME = "group_error"
    api: str
    error: str
    message: str | None


@dataclass(slots=True)
class FatalError(MemberEvent):
    NAME = "fatal_error"
    error: str
    message: str | None


@dataclass(slots=True)
class MetadataChanged(MemberEvent):
    NAME = "metadata_changed"
    changed: dict[str, list[int]]  # topic -> [old count, new count]


@dataclass(slots=True)
class PollTimeout(MemberEvent):
    NAME = "poll_timeout"
    since_last_poll_ms: int
    max_poll_interval_ms: int


@dataclass(slots=True)
class LeaveSent(MemberEvent):
    NAME = "leave_sent"
    reason: str


@dataclass(slots=True)
class CoordinatorDisconnected(MemberEvent):
    NAME = "coordinator_disconnected"
    previous_state: AnyMemberState


@dataclass(slots=True)
class CoordinatorUnknown(MemberEvent):
    """In a cluster, the member no longer knows its group's coordinator (Kafka's
    markCoordinatorUnknown): it asks FindCoordinator again."""

    NAME = "coordinator_unknown"
    node_id: int | None
    reason: str


@dataclass(slots=True)
class CoordinatorFound(MemberEvent):
    """In a cluster, FindCoordinator named the group's coordinator."""

    NAME = "coordinator_found"
    node_id: int
    took_ms: int


@dataclass(slots=True)
class MemberRequestTimedOut(MemberEvent):
    """The member's JoinGroup or SyncGroup went unanswered (the producer's is ProducerRequestTimedOut)."""

    NAME = "request_timed_out"
    waiting_in: AnyMemberState


@dataclass(slots=True)
class SubscriptionUndecodable(MemberEvent):
    NAME = "subscription_undecodable"
    error: str


@dataclass(slots=True)
class AssignmentUndecodable(MemberEvent):
    NAME = "assignment_undecodable"
    error: str


@dataclass(slots=True)
class BatchProcessed(MemberEvent):
    NAME = "batch_processed"
    partitions: PartitionPairs
    records: int
    first_offsets: list[int]
    last_offsets: list[int]


@dataclass(slots=True)
class OutputFailed(MemberEvent):
    NAME = "output_failed"
    error: str


@dataclass(slots=True)
class AppProducerFenced(MemberEvent):
    """The delivery application saw its producer fenced (the producer's own line is ProducerFenced)."""

    NAME = "producer_fenced"
    error: str


# ----------------------------------------------------------------------------- consumer-protocol member (§4.4a)


@dataclass(slots=True)
class ConsumerJoinSent(MemberEvent):
    """A ConsumerGroupHeartbeat with member epoch 0 went out (consumer/membership.py)."""

    NAME = "consumer_join_sent"
    reason: str
    subscribed_topic_names: list[str]
    server_assignor: str | None
    rebalance_timeout_ms: int


@dataclass(slots=True)
class AssignmentReceived(MemberEvent):
    NAME = "assignment_received"
    assignment: PartitionPairs
    revoking: PartitionPairs
    adding: PartitionPairs


@dataclass(slots=True)
class AssignmentAcknowledged(MemberEvent):
    NAME = "assignment_acknowledged"
    owned: PartitionPairs


@dataclass(slots=True)
class MemberFenced(MemberEvent):
    NAME = "member_fenced"
    error: str
    message: str | None
    fenced_epoch: int


@dataclass(slots=True)
class ConsumerLeaveSent(MemberEvent):
    NAME = "consumer_leave_sent"
    leave_epoch: int
    reason: str


# ----------------------------------------------------------------------------- member shells (§4.5)


@dataclass(slots=True)
class MemberShellEvent(Event):
    """The consumer's socket shell and application (consumer/client.py, consumer/app.py), and the simulator in their place."""

    group_id: str
    member_id: str


@dataclass(slots=True)
class CoordinatorConnected(MemberShellEvent):
    NAME = "coordinator_connected"


@dataclass(slots=True)
class UnexpectedResponse(MemberShellEvent):
    NAME = "unexpected_response"
    correlation_id: int
    body: str


@dataclass(slots=True)
class BadResponse(MemberShellEvent):
    NAME = "bad_response"
    error: str


@dataclass(slots=True)
class AppStopping(MemberShellEvent):
    NAME = "app_stopping"


@dataclass(slots=True)
class AppCrashed(MemberShellEvent):
    """The application was killed without a goodbye: readers charge its partitions' idle time to it."""

    NAME = "app_crashed"


# ----------------------------------------------------------------------------- producer (§4.5a)


@dataclass(slots=True)
class ProducerEvent(Event):
    """P: the producer of a delivery application (consumer/producer.py)."""

    client_id: str
    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    producer_state: ProducerState


@dataclass(slots=True)
class ProducerReady(ProducerEvent):
    NAME = "producer_ready"


@dataclass(slots=True)
class BatchAcked(ProducerEvent):
    NAME = "batch_acked"
    partitions: PartitionPairs
    base_offset: int
    count: int
    sequence: int
    attempts: int


@dataclass(slots=True)
class BatchFailed(ProducerEvent):
    NAME = "batch_failed"
    partitions: PartitionPairs
    error: str


@dataclass(slots=True)
class TransactionEnded(ProducerEvent):
    NAME = "transaction_ended"
    committed: bool


@dataclass(slots=True)
class ProducerFenced(ProducerEvent):
    NAME = "producer_fenced"
    error: str


@dataclass(slots=True)
class TxnOffsetsRefused(ProducerEvent):
    NAME = "txn_offsets_refused"
    error: str


@dataclass(slots=True)
class ProducerRequestTimedOut(ProducerEvent):
    NAME = "request_timed_out"
    purpose: str


# ----------------------------------------------------------------------------- simulator (§4.6) and run account (§4.7)


@dataclass(slots=True)
class SimulatorEvent(Event):
    """What the simulator did to a run (grouplab/sim/), node `simulator`."""

    group_id: str
    seed: int


@dataclass(slots=True)
class ProcessStarted(SimulatorEvent):
    NAME = "process_started"
    member: str
    incarnation: int


@dataclass(slots=True)
class FaultInjected(SimulatorEvent):
    NAME = "fault_injected"
    fault: str
    members: list[str]
    duration_ms: int
    topic: str | None


@dataclass(slots=True)
class RuleFaultInjected(FaultInjected):
    """A scenario's [[faults]] rule fired on one message (grouplab/sim/fault_rules.py)."""

    NAME = "fault_injected"
    rule: str
    api: str | None
    direction: str


@dataclass(slots=True)
class DelayFaultInjected(FaultInjected):
    """A ZooKeeper-era simulator fault that delays what a consumer hears or sends for a while
    (grouplab/zk/sim.py: delay_watches, slow_release): by how much."""

    NAME = "fault_injected"
    delay_ms: int


@dataclass(slots=True)
class CoordinatorCrashed(SimulatorEvent):
    NAME = "coordinator_crashed"
    down_ms: int


@dataclass(slots=True)
class CoordinatorRestarted(SimulatorEvent):
    NAME = "coordinator_restarted"
    records: int


@dataclass(slots=True)
class ProcessExited(SimulatorEvent):
    NAME = "process_exited"
    member: str
    error: str


@dataclass(slots=True)
class ProcessCrashed(SimulatorEvent):
    NAME = "process_crashed"
    member: str
    point: str


@dataclass(slots=True)
class FaultsOver(SimulatorEvent):
    NAME = "faults_over"


@dataclass(slots=True)
class Settled(SimulatorEvent):
    NAME = "settled"
    quiet_at_ms: int


@dataclass(slots=True)
class SimDeliveryRecords(SimulatorEvent):
    NAME = "delivery_records"
    mode: str
    topic: str
    partition: int
    produced: int
    committed_offset: int
    isolation: str
    output_counts: list[int]


@dataclass(slots=True)
class SimDeliveryAccount(SimulatorEvent):
    NAME = "delivery_account"
    mode: str
    produced: int
    processed: int
    committed: int
    lost: int
    duplicated: int


@dataclass(slots=True)
class RunDeliveryRecords(Event):
    """§4.7: a real-socket delivery run's account (grouplab/cluster.py), node `run`."""

    NAME = "delivery_records"
    mode: str
    topic: str
    partition: int
    produced: int
    committed_offset: int
    isolation: str
    output_counts: list[int]


@dataclass(slots=True)
class RunDeliveryAccount(Event):
    NAME = "delivery_account"
    mode: str
    produced: int
    committed: int
    lost: int
    duplicated: int


# ----------------------------------------------------------------------------- the ZooKeeper era (§4.8, §4.9)


@dataclass(slots=True)
class RegistryEvent(Event):
    """The embedded registry (coordinator/registry.py), node `registry`."""

    session_id: int


@dataclass(slots=True)
class RegistrySessionOpened(RegistryEvent):
    NAME = "registry_session_opened"
    timeout_ms: int


@dataclass(slots=True)
class RegistrySessionClosed(RegistryEvent):
    NAME = "registry_session_closed"


@dataclass(slots=True)
class RegistrySessionExpired(RegistryEvent):
    NAME = "registry_session_expired"
    timeout_ms: int


@dataclass(slots=True)
class LegacyEvent(Event):
    """Z: the ZooKeeper-era consumer (consumer/legacy/connector.py), node = its consumer id."""

    group_id: str
    consumer_id: str


@dataclass(slots=True)
class ZkRegistered(LegacyEvent):
    NAME = "zk_registered"
    session_id: int
    subscription: dict[str, int]


@dataclass(slots=True)
class ZkWatchFired(LegacyEvent):
    NAME = "zk_watch_fired"
    watch: str
    path: str


@dataclass(slots=True)
class ZkSessionExpired(LegacyEvent):
    NAME = "zk_session_expired"
    session_id: int
    fetching: PartitionPairs  # what its fetchers still read: they run on until the next rebalance (Kafka 0.8)


@dataclass(slots=True)
class ZkRebalanceBegun(LegacyEvent):
    NAME = "zk_rebalance_begun"
    attempt: int
    trigger: str


@dataclass(slots=True)
class ZkFetchersStopped(LegacyEvent):
    NAME = "zk_fetchers_stopped"
    partitions: PartitionPairs


@dataclass(slots=True)
class ZkOffsetsCommitted(LegacyEvent):
    NAME = "zk_offsets_committed"
    offsets: list[list[Any]]


@dataclass(slots=True)
class ZkOwnershipReleased(LegacyEvent):
    NAME = "zk_ownership_released"
    partitions: PartitionPairs


@dataclass(slots=True)
class ZkAssignmentComputed(LegacyEvent):
    NAME = "zk_assignment_computed"
    attempt: int
    consumers: list[str]
    assignment: dict[str, PartitionPairs]


@dataclass(slots=True)
class ZkClaimConflict(LegacyEvent):
    NAME = "zk_claim_conflict"
    attempt: int
    partitions: PartitionPairs


@dataclass(slots=True)
class ZkOwnershipClaimed(LegacyEvent):
    NAME = "zk_ownership_claimed"
    attempt: int
    partitions: PartitionPairs


@dataclass(slots=True)
class ZkOffsetsReset(LegacyEvent):
    NAME = "zk_offsets_reset"
    policy: str  # auto.offset.reset: smallest or largest
    offsets: list[list[Any]]  # [topic, partition, offset] where each fetcher starts for want of a committed offset


@dataclass(slots=True)
class ZkFetchersStarted(LegacyEvent):
    NAME = "zk_fetchers_started"
    offsets: list[list[Any]]


@dataclass(slots=True)
class ZkRebalanceDone(LegacyEvent):
    NAME = "zk_rebalance_done"
    attempt: int
    partitions: PartitionPairs
    reads: int
    writes: int


@dataclass(slots=True)
class ZkRebalanceAttemptFailed(LegacyEvent):
    NAME = "zk_rebalance_attempt_failed"
    attempt: int
    reason: str
    backoff_ms: int


@dataclass(slots=True)
class ZkRebalanceFailed(LegacyEvent):
    NAME = "zk_rebalance_failed"
    attempts: int
    reason: str


# Every kind of line docs/events.md documents, in the order above (two kinds may share a NAME: tell
# them apart by FIELDS). Read from this module, not from Event.__subclasses__(), which still holds
# the classes @dataclass(slots=True) replaced until they are garbage-collected.
EVENT_TYPES: tuple[type[Event], ...] = tuple(
    cls for cls in list(globals().values()) if isinstance(cls, type) and issubclass(cls, Event) and "NAME" in cls.__dict__)
for _cls in EVENT_TYPES:
    _cls.FIELDS = tuple(f.name for f in fields(_cls))
    _cls.ENUM_FIELDS = tuple(f.name for f in fields(_cls) if f.type in _ENUM_TYPES or f.type == "AnyMemberState")
