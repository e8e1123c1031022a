"""The consumer protocol: what grouplab consumers put inside JoinGroup metadata and SyncGroup
assignments. The coordinator treats both as opaque bytes, as Kafka's does.

Encoding (msgpack maps, documented in docs/protocol.md):
  subscription: {"version": 0, "topics": [str], "user_data": bytes|nil,
                 "owned_partitions": [{"topic": str, "partitions": [int]}],
                 "generation_id": int, "rack": str|nil}
  assignment:   {"version": 0, "partitions": [{"topic": str, "partitions": [int]}], "user_data": bytes|nil}
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgpack

from protocol import schema
from protocol.errors import ErrorCode, ProtocolError
from protocol.types import Assignment, Subscription, TopicPartition, group_by_topic

PROTOCOL_TYPE = "consumer"
VERSION = 0


@dataclass
class _TopicPartitions:
    topic: str
    partitions: list[int]


@dataclass
class _WireSubscription:
    topics: list[str]
    version: int = VERSION
    user_data: bytes | None = None
    owned_partitions: list[_TopicPartitions] = field(default_factory=list)
    generation_id: int = -1
    rack: str | None = None


@dataclass
class _WireAssignment:
    partitions: list[_TopicPartitions]
    version: int = VERSION
    user_data: bytes | None = None


def _to_wire(partitions: list[TopicPartition]) -> list[_TopicPartitions]:
    return [_TopicPartitions(t, ps) for t, ps in group_by_topic(partitions).items()]


def _from_wire(items: list[_TopicPartitions]) -> list[TopicPartition]:
    return [TopicPartition(i.topic, p) for i in items for p in i.partitions]


def _unpack(data: bytes, what: str) -> object:
    try:
        return msgpack.unpackb(data, raw=False)
    except Exception as exc:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"{what} is not valid msgpack: {exc}") from None


def encode_subscription(sub: Subscription) -> bytes:
    wire = _WireSubscription(
        topics=sorted(sub.topics),
        user_data=sub.user_data,
        owned_partitions=_to_wire(sub.owned_partitions),
        generation_id=sub.generation_id,
        rack=sub.rack,
    )
    return msgpack.packb(schema.encode(wire), use_bin_type=True)


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    try:
        wire = schema.decode(_WireSubscription, _unpack(data, "subscription"), "subscription")
    except ProtocolError as exc:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, exc.message) from None
    return Subscription(
        topics=list(wire.topics),
        user_data=wire.user_data,
        owned_partitions=_from_wire(wire.owned_partitions),
        generation_id=wire.generation_id,
        rack=wire.rack,
        group_instance_id=group_instance_id,
    )


def encode_assignment(assignment: Assignment) -> bytes:
    wire = _WireAssignment(partitions=_to_wire(assignment.partitions), user_data=assignment.user_data)
    return msgpack.packb(schema.encode(wire), use_bin_type=True)


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment(partitions=[])  # Kafka: an empty assignment buffer means no partitions
    try:
        wire = schema.decode(_WireAssignment, _unpack(data, "assignment"), "assignment")
    except ProtocolError as exc:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, exc.message) from None
    return Assignment(partitions=_from_wire(wire.partitions), user_data=wire.user_data)
