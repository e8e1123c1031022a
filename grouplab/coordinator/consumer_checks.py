"""The checks of a ConsumerGroupHeartbeat that need no group (Kafka's
throwIfConsumerGroupHeartbeatRequestIsInvalid) and of a member's epoch (throwIfMemberEpochIsInvalid),
with Kafka's messages: a failed check raises a Refusal, answered with its code, nothing changed."""

from __future__ import annotations

import re
from dataclasses import dataclass

from grouplab.coordinator.consumer_reconcile import Assignment, MemberAssignment, is_subset
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import ConsumerGroupHeartbeatRequest
from grouplab.protocol.states import RebalanceCause

LEAVE_EPOCH = -1  # Kafka's LEAVE_GROUP_MEMBER_EPOCH
STATIC_LEAVE_EPOCH = -2  # Kafka's LEAVE_GROUP_STATIC_MEMBER_EPOCH


class Refusal(Exception):
    """A heartbeat the group does not accept: answered with `code`, nothing changed."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_heartbeat(req: ConsumerGroupHeartbeatRequest, supported_assignors: list[str], max_id_length: int) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, with its messages. A member id
    may be empty only when joining (v0: the coordinator gives one; v1 clients send their own)."""
    def invalid(message: str) -> Refusal:
        return Refusal(ErrorCode.INVALID_REQUEST, message)

    if req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
        if not req.member_id.strip():
            raise invalid("MemberId can't be empty.")
    if not req.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id.strip():
        raise invalid("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in supported_assignors:
        raise Refusal(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                                                      f"Supported assignors: {', '.join(supported_assignors)}.")
    if req.subscribed_topic_regex:
        try:
            re.compile(req.subscribed_topic_regex)
        except re.error as exc:
            raise invalid(f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                          f"expression: {exc}.") from None
    # grouplab's bound on what a client makes the coordinator keep (docs/protocol.md §4.12).
    for what, value in (("MemberId", req.member_id), ("InstanceId", req.instance_id), ("RackId", req.rack_id)):
        if value is not None and len(value) > max_id_length:
            raise invalid(f"{what} of {len(value)} characters exceeds grouplab.max.id.length "
                          f"({max_id_length}).")
    if req.topic_partitions is not None and any(p < 0 for tp in req.topic_partitions for p in tp.partitions):
        raise invalid("TopicPartitions has a negative partition.")


def check_member_epoch(member: MemberAssignment, received: int, owned: Assignment | None) -> None:
    """Kafka's throwIfMemberEpochIsInvalid: an epoch ahead is fenced; one behind only if it is the
    previous epoch and the member owns no more than it is assigned (the answer moving it on was lost)."""
    current = member.member_epoch
    if received > current:
        raise Refusal(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                                                     f"({received}) than the one known by the group coordinator "
                                                     f"({current}). The member must abandon all its partitions and rejoin.")
    if received < current and (received != member.previous_member_epoch
                               or not is_subset(owned, member.assigned)):
        raise Refusal(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                                                     f"({received}) than the one known by the group coordinator "
                                                     f"({current}). The member must abandon all its partitions and rejoin.")


@dataclass(frozen=True)
class Downgrade:
    """A consumer group's request to become classic (ConsumerGroup.downgrade, carried out by the
    Broker): the classic rebalance that follows, or none (`cause` None: a static member replaced
    with the same subscription, as Kafka)."""

    trigger: str
    cause: RebalanceCause | None
