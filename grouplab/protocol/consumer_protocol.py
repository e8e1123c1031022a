"""The consumer protocol: what consumers put inside JoinGroup metadata and SyncGroup assignments.
The coordinator treats both as opaque bytes, as Kafka's does; only the members (and the event log,
`describe` and `explain`, which read them) decode them.

grouplab's consumers write Kafka's own binary ConsumerProtocol (docs/protocol.md §5.2-5.3: Subscription
v3 — topics, user_data, owned_partitions (KIP-429), generation_id, rack (KIP-881); Assignment v3 —
partitions, user_data), so a group can mix grouplab's consumers with real Kafka clients
(kafka-python, aiokafka, librdkafka, Java) and whichever member leads reads everyone's metadata
(docs/kafka-wire.md §4). The bytes are kafka-python's, generated from Kafka's schemas: written and
read by grouplab/protocol/consumer_codec.py (a direct struct codec, the simulator's hot path),
which hands anything unusual (an unknown version, a malformed buffer) to kafka-python's classes,
and is held to them byte for byte by tests/test_consumer_codec.py.

Readers also take the msgpack maps grouplab consumers wrote before (traces of older runs):
  subscription: {"version": 0, "topics": [str], "user_data": bytes|nil,
                 "owned_partitions": [{"topic": str, "partitions": [int]}],
                 "generation_id": int, "rack": str|nil}
  assignment:   {"version": 0, "partitions": [{"topic": str, "partitions": [int]}], "user_data": bytes|nil}
The two cannot be confused: Kafka's start with the int16 version (first byte 0x00), a msgpack map
with a fixmap/map16/map32 byte (0x80-0x8f, 0xde, 0xdf).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as _KafkaAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as _KafkaSubscription

from grouplab.protocol import consumer_codec, schema
from grouplab.protocol.errors import ErrorCode, ProtocolError
from grouplab.protocol.types import Assignment, Subscription, TopicPartition, group_by_topic

PROTOCOL_TYPE = "consumer"
VERSION = 3  # the Subscription and Assignment version written (Kafka's newest: rack_id)


@dataclass
class _TopicPartitions:
    topic: str
    partitions: list[int]


@dataclass
class _WireSubscription:
    topics: list[str]
    version: int = 0
    user_data: bytes | None = None
    owned_partitions: list[_TopicPartitions] = field(default_factory=list)
    generation_id: int = -1
    rack: str | None = None


@dataclass
class _WireAssignment:
    partitions: list[_TopicPartitions]
    version: int = 0
    user_data: bytes | None = None


class _Memo(dict[Any, Any]):
    """A pure function's recent results, by argument: a subscription's or an assignment's bytes do
    not change between rebalances for most members (and a leader reads every member's subscription
    twice a rebalance). Bounded: it empties when full; keys (and so values) are small, or not kept."""

    LIMIT = 4096
    KEY_BYTES = 4096  # longer metadata (a sticky assignor's user data) is not kept

    def keep(self, key: Any, value: Any) -> Any:
        if len(self) >= self.LIMIT:
            self.clear()
        self[key] = value
        return value


_subscriptions_read = _Memo()
_assignments_read = _Memo()
_subscriptions_written = _Memo()
_assignments_written = _Memo()


def _from_wire(items: list[_TopicPartitions]) -> list[TopicPartition]:
    return [TopicPartition(i.topic, p) for i in items for p in i.partitions]


def is_msgpack(data: bytes) -> bool:
    """grouplab's older msgpack encoding (a map), not Kafka's binary one (an int16 version first)."""
    return bool(data) and (0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF))


def _unpack(data: bytes, what: str) -> object:
    try:
        return msgpack.unpackb(data, raw=False)
    except Exception as exc:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"{what} is not valid msgpack: {exc}") from None


def _kafka_decode(cls: Any, data: bytes, what: str) -> Any:
    """Kafka's reader: any version from 0 on; a newer one's known prefix (Kafka readers do the same)."""
    try:
        return cls.decode(bytes(data))
    except Exception as exc:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"{what} is not Kafka's ConsumerProtocol encoding: {exc!r}") from None


def encode_subscription(sub: Subscription) -> bytes:
    """Kafka's Subscription v3 bytes (consumer_codec writes them; kafka-python's classes where it
    cannot, with the same result)."""
    key = _written_key(sub.user_data, tuple(sub.topics), tuple(sub.owned_partitions), sub.generation_id, sub.rack)
    done = _subscriptions_written.get(key) if key is not None else None
    if done is not None:
        return done
    owned = group_by_topic(sub.owned_partitions)
    topics = sorted(sub.topics)
    data = (consumer_codec.encode_subscription(topics, sub.user_data, owned, sub.generation_id, sub.rack, VERSION)
            or kafka_encode_subscription(topics, sub.user_data, owned, sub.generation_id, sub.rack, VERSION))
    if key is not None and len(data) <= _Memo.KEY_BYTES:
        _subscriptions_written.keep(key, data)
    return data


def _written_key(user_data: object, *fields: object) -> tuple | None:
    """What an encoding is kept under: the fields it is made of, if they are all of the plain types
    the codec's output depends on only by value (None: not kept)."""
    if user_data is not None and type(user_data) is not bytes:
        return None
    key = (user_data, *fields)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def kafka_encode_subscription(topics: list[str], user_data: bytes | None, owned: dict[str, list[int]],
                              generation_id: int, rack: str | None, version: int) -> bytes:
    """kafka-python's encoding: the reference the fast one is held to (tests), and its fallback."""
    wire = _KafkaSubscription(topics=topics, user_data=user_data,
                              owned_partitions=[_KafkaSubscription.TopicPartition(topic=t, partitions=ps)
                                                for t, ps in owned.items()],
                              generation_id=generation_id, rack_id=rack, version=version)
    return bytes(wire.encode())


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    if is_msgpack(data):
        try:
            old = schema.decode(_WireSubscription, _unpack(data, "subscription"), "subscription")
        except ProtocolError as exc:
            raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, exc.message) from None
        return Subscription(topics=list(old.topics), user_data=old.user_data,
                            owned_partitions=_from_wire(old.owned_partitions), generation_id=old.generation_id,
                            rack=old.rack, group_instance_id=group_instance_id)
    if type(data) is not bytes:
        data = bytes(data)
    fast = _subscriptions_read.get(data)
    if fast is None:
        fast = consumer_codec.decode_subscription(data, VERSION) or kafka_decode_subscription(data)
        if len(data) <= _Memo.KEY_BYTES:
            _subscriptions_read.keep(data, fast)
    topics, user_data, owned, generation_id, rack = fast
    return Subscription(topics=list(topics), user_data=user_data, owned_partitions=list(owned),
                        generation_id=generation_id, rack=rack, group_instance_id=group_instance_id)


def kafka_decode_subscription(data: bytes) -> consumer_codec.DecodedSubscription:
    """kafka-python's reading (any version from 0 on; a newer one's known prefix): the reference the
    fast one is held to (tests), and its fallback, which raises the errors."""
    wire = _kafka_decode(_KafkaSubscription, data, "subscription")
    version = wire.version or 0
    return (tuple(wire.topics or []),
            _bytes_or_none(wire.user_data),
            tuple(TopicPartition(tp.topic, p) for tp in (wire.owned_partitions or []) for p in tp.partitions)
            if version >= 1 else (),
            wire.generation_id if version >= 2 else -1,
            wire.rack_id if version >= 3 else None)


def encode_assignment(assignment: Assignment, version: int = VERSION) -> bytes:
    key = _written_key(assignment.user_data, tuple(assignment.partitions), version)
    done = _assignments_written.get(key) if key is not None else None
    if done is not None:
        return done
    grouped = group_by_topic(assignment.partitions)
    data = (consumer_codec.encode_assignment(grouped, assignment.user_data, version, VERSION)
            or kafka_encode_assignment(grouped, assignment.user_data, version))
    if key is not None and len(data) <= _Memo.KEY_BYTES:
        _assignments_written.keep(key, data)
    return data


def kafka_encode_assignment(grouped: dict[str, list[int]], user_data: bytes | None, version: int) -> bytes:
    """kafka-python's encoding: the reference the fast one is held to (tests), and its fallback."""
    parts = [_KafkaAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in grouped.items()]
    return bytes(_KafkaAssignment(assigned_partitions=parts, user_data=user_data, version=version).encode())


def subscription_version(metadata: bytes) -> int:
    """The version a member wrote its subscription in (Kafka's ConsumerProtocol.deserializeVersion),
    capped at the newest this module writes: the coordinator answers a member's assignment in it,
    as Kafka's does for a classic member of a consumer group. grouplab's older msgpack: VERSION."""
    if len(metadata) < 2 or is_msgpack(metadata):
        return VERSION
    return max(0, min(int.from_bytes(metadata[:2], "big", signed=True), VERSION))


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment(partitions=[])  # Kafka: an empty assignment buffer means no partitions
    if is_msgpack(data):
        try:
            old = schema.decode(_WireAssignment, _unpack(data, "assignment"), "assignment")
        except ProtocolError as exc:
            raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, exc.message) from None
        return Assignment(partitions=_from_wire(old.partitions), user_data=old.user_data)
    if type(data) is not bytes:
        data = bytes(data)
    fast = _assignments_read.get(data)
    if fast is None:
        fast = consumer_codec.decode_assignment(data, VERSION) or kafka_decode_assignment(data)
        if len(data) <= _Memo.KEY_BYTES:
            _assignments_read.keep(data, fast)
    partitions, user_data = fast
    return Assignment(partitions=list(partitions), user_data=user_data)


def kafka_decode_assignment(data: bytes) -> consumer_codec.DecodedAssignment:
    """kafka-python's reading: the reference the fast one is held to (tests), and its fallback,
    which raises the errors."""
    wire = _kafka_decode(_KafkaAssignment, data, "assignment")
    return (tuple(TopicPartition(tp.topic, p) for tp in (wire.assigned_partitions or []) for p in tp.partitions),
            _bytes_or_none(wire.user_data))


def _bytes_or_none(value: object) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"user_data is {type(value).__name__}, not bytes")
