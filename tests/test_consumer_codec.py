"""The direct ConsumerProtocol codec (grouplab/protocol/consumer_codec.py) against kafka-python's
schema classes, its reference: the same bytes for every value it encodes, the same values for every
buffer it decodes, and None (so the caller falls back to kafka-python) for everything else."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.protocol import consumer_codec, consumer_protocol
from grouplab.protocol.consumer_protocol import (VERSION, kafka_decode_assignment, kafka_decode_subscription,
                                                 kafka_encode_assignment, kafka_encode_subscription)
from grouplab.protocol.errors import ProtocolError
from grouplab.protocol.types import Assignment, Subscription, TopicPartition, group_by_topic

names = st.text(min_size=0, max_size=12)
int32 = st.integers(min_value=-(2 ** 31), max_value=2 ** 31 - 1)
partition_lists = st.lists(st.tuples(names, st.integers(min_value=0, max_value=2 ** 31 - 1)), max_size=20) \
    .map(lambda items: [TopicPartition(t, p) for t, p in items])
user_data = st.none() | st.binary(max_size=40)
racks = st.none() | names


@settings(max_examples=150, deadline=None)
@given(topics=st.lists(names, max_size=8), data=user_data, owned=partition_lists, generation=int32, rack=racks,
       version=st.integers(min_value=0, max_value=3))
def test_a_subscription_encodes_to_kafka_pythons_bytes(topics: list[str], data: bytes | None,
                                                         owned: list[TopicPartition], generation: int,
                                                         rack: str | None, version: int) -> None:
    grouped = group_by_topic(owned)
    fast = consumer_codec.encode_subscription(topics, data, grouped, generation, rack, version)
    assert fast == kafka_encode_subscription(topics, data, grouped, generation, rack, version)


@settings(max_examples=150, deadline=None)
@given(owned=partition_lists, data=user_data, version=st.integers(min_value=0, max_value=3))
def test_an_assignment_encodes_to_kafka_pythons_bytes(owned: list[TopicPartition], data: bytes | None,
                                                        version: int) -> None:
    grouped = group_by_topic(owned)
    fast = consumer_codec.encode_assignment(grouped, data, version, VERSION)
    assert fast == kafka_encode_assignment(grouped, data, version)


@settings(max_examples=150, deadline=None)
@given(topics=st.lists(names, max_size=8), data=user_data, owned=partition_lists, generation=int32, rack=racks,
       version=st.integers(min_value=0, max_value=3), trailing=st.binary(max_size=4))
def test_a_subscription_decodes_to_kafka_pythons_values_in_every_version(
        topics: list[str], data: bytes | None, owned: list[TopicPartition], generation: int, rack: str | None,
        version: int, trailing: bytes) -> None:
    raw = kafka_encode_subscription(topics, data, group_by_topic(owned), generation, rack, version) + trailing
    fast = consumer_codec.decode_subscription(raw, VERSION)
    assert fast is not None
    assert fast == kafka_decode_subscription(raw)


@settings(max_examples=150, deadline=None)
@given(owned=partition_lists, data=user_data, version=st.integers(min_value=0, max_value=3),
       trailing=st.binary(max_size=4))
def test_an_assignment_decodes_to_kafka_pythons_values(owned: list[TopicPartition], data: bytes | None,
                                                        version: int, trailing: bytes) -> None:
    raw = kafka_encode_assignment(group_by_topic(owned), data, version) + trailing
    fast = consumer_codec.decode_assignment(raw, VERSION)
    assert fast is not None
    assert fast == kafka_decode_assignment(raw)


def _slow_or_error(decode, raw: bytes) -> object:  # type: ignore[no-untyped-def]
    try:
        return decode(raw)
    except Exception as exc:  # the fast path must never answer where kafka-python's refuses
        return exc


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=60) | st.builds(lambda head, rest: head + rest,
                                              st.sampled_from([b"\x00\x00", b"\x00\x01", b"\x00\x03", b"\x00\x07"]),
                                              st.binary(max_size=60)))
def test_any_buffer_decodes_as_kafka_python_does_or_is_left_to_it(raw: bytes) -> None:
    for fast_decode, slow_decode in ((consumer_codec.decode_subscription, kafka_decode_subscription),
                                     (consumer_codec.decode_assignment, kafka_decode_assignment)):
        fast = fast_decode(raw, VERSION)
        if fast is not None:
            assert fast == _slow_or_error(slow_decode, raw)


def test_a_newer_version_is_read_as_its_known_prefix() -> None:
    v3 = kafka_encode_subscription(["a", "b"], b"u", {"a": [1, 2]}, 7, "r1", 3)
    v9 = struct.pack(">h", 9) + v3[2:] + b"\x00\x00\x00\x05 future fields"
    assert consumer_codec.decode_subscription(v9, VERSION) == kafka_decode_subscription(v9) \
        == (("a", "b"), b"u", (TopicPartition("a", 1), TopicPartition("a", 2)), 7, "r1")


def test_what_the_fast_path_does_not_take_on_it_leaves_to_kafka_python() -> None:
    assert consumer_codec.encode_subscription([None], None, {}, -1, None, 3) is None  # type: ignore[list-item]
    assert consumer_codec.encode_subscription(["t"], None, {"t": [2 ** 31]}, -1, None, 3) is None
    assert consumer_codec.encode_subscription(["x" * 40_000], None, {}, -1, None, 3) is None
    assert consumer_codec.encode_assignment({}, None, 4, VERSION) is None
    assert consumer_codec.decode_subscription(b"\xff\xff", VERSION) is None  # a negative version
    assert consumer_codec.decode_assignment(b"\x00\x00\xff\xff\xff\xff", VERSION) is None  # a null array
    assert consumer_codec.decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x05ab", VERSION) is None  # truncated


def test_the_public_functions_round_trip_and_refuse_as_before() -> None:
    sub = Subscription(topics=["t1", "t0"], user_data=b"\x01", owned_partitions=[TopicPartition("t1", 3),
                       TopicPartition("t0", 2)], generation_id=5, rack="r", group_instance_id="i")
    raw = consumer_protocol.encode_subscription(sub)
    assert raw == kafka_encode_subscription(["t0", "t1"], b"\x01", {"t0": [2], "t1": [3]}, 5, "r", VERSION)
    back = consumer_protocol.decode_subscription(raw, "i")
    assert back == Subscription(topics=["t0", "t1"], user_data=b"\x01",
                                owned_partitions=[TopicPartition("t0", 2), TopicPartition("t1", 3)],
                                generation_id=5, rack="r", group_instance_id="i")
    assert type(back.topics) is list and type(back.owned_partitions) is list
    assignment = Assignment([TopicPartition("t", 1), TopicPartition("t", 0)], b"x")
    assert consumer_protocol.decode_assignment(consumer_protocol.encode_assignment(assignment, 0)) == \
        Assignment([TopicPartition("t", 0), TopicPartition("t", 1)], b"x")
    for bad in (b"\x00\x00\x00\x00\x00\x01\x00\x05ab", b"\x00"):
        for decode in (consumer_protocol.decode_subscription, consumer_protocol.decode_assignment):
            try:
                decode(bad)
            except ProtocolError as exc:
                assert "not Kafka's ConsumerProtocol encoding" in exc.message
            else:
                raise AssertionError(f"{decode.__name__} took {bad!r}")


def test_kept_decodings_are_the_fresh_ones_and_hand_out_their_own_lists() -> None:
    raw = kafka_encode_subscription(["t"], None, {"t": [0, 1]}, 3, None, VERSION)
    consumer_protocol._subscriptions_read.clear()
    first = consumer_protocol.decode_subscription(raw, "a")
    assert raw in consumer_protocol._subscriptions_read
    first.topics.append("mutated")
    first.owned_partitions.clear()
    again = consumer_protocol.decode_subscription(raw, "b")
    assert again == Subscription(topics=["t"], owned_partitions=[TopicPartition("t", 0), TopicPartition("t", 1)],
                                 generation_id=3, group_instance_id="b")
    assignment = kafka_encode_assignment({"t": [2]}, b"u", VERSION)
    mine = consumer_protocol.decode_assignment(assignment)
    mine.partitions.append(TopicPartition("x", 9))
    assert consumer_protocol.decode_assignment(assignment) == Assignment([TopicPartition("t", 2)], b"u")


def test_kept_encodings_are_the_fresh_ones() -> None:
    consumer_protocol._subscriptions_written.clear()
    consumer_protocol._assignments_written.clear()
    sub = Subscription(topics=["b", "a"], owned_partitions=[TopicPartition("a", 1)], generation_id=4)
    for _ in range(2):
        assert consumer_protocol.encode_subscription(sub) == \
            kafka_encode_subscription(["a", "b"], None, {"a": [1]}, 4, None, VERSION)
    assert len(consumer_protocol._subscriptions_written) == 1
    # The same fields in another generation, or another version of an assignment, are other bytes.
    sub.generation_id = 5
    assert consumer_protocol.encode_subscription(sub) == \
        kafka_encode_subscription(["a", "b"], None, {"a": [1]}, 5, None, VERSION)
    empty = Assignment([])
    assert [consumer_protocol.encode_assignment(empty, v) for v in (0, 3, 0)] == \
        [kafka_encode_assignment({}, None, 0), kafka_encode_assignment({}, None, 3), kafka_encode_assignment({}, None, 0)]
    # A bytearray's user data may change under the key: such encodings are not kept.
    mutable = bytearray(b"x")
    consumer_protocol.encode_assignment(Assignment([], mutable))  # type: ignore[arg-type]
    mutable[0] = ord("y")
    assert consumer_protocol.encode_assignment(Assignment([], mutable)) == \
        kafka_encode_assignment({}, b"y", VERSION)  # type: ignore[arg-type]


def test_the_memo_is_bounded_and_keeps_no_long_metadata() -> None:
    memo = consumer_protocol._subscriptions_read
    memo.clear()
    long = kafka_encode_subscription(["t"], b"x" * 5000, {}, -1, None, VERSION)
    consumer_protocol.decode_subscription(long)
    assert long not in memo
    for n in range(consumer_protocol._Memo.LIMIT + 5):
        consumer_protocol.decode_subscription(kafka_encode_subscription([f"t{n}"], None, {}, -1, None, VERSION))
    assert len(memo) <= consumer_protocol._Memo.LIMIT
