"""Tests of the wire layer: frames, request/response envelopes, body validation, the consumer
protocol carried inside JoinGroup metadata and SyncGroup assignments, and TopicPartition parsing."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.protocol import consumer_protocol, framing, messages
from grouplab.protocol.errors import ErrorCode, FrameTooLarge, ProtocolError
from grouplab.protocol.framing import BadRequest, FrameReader, decode_request, decode_response, encode_request, encode_response
from grouplab.protocol.messages import API, JoinGroupRequest, JoinGroupRequestProtocol, RequestHeader
from grouplab.protocol.types import Assignment, Subscription, TopicPartition


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def payload_of(data: bytes) -> bytes:
    """The single frame payload in `data` (asserting there is exactly one)."""
    frames = FrameReader().feed(data)
    assert len(frames) == 1
    return frames[0]


def raw_request(**envelope) -> bytes:
    """A request payload (no length prefix) built from a plain map, for malformed requests."""
    return msgpack.packb(envelope, use_bin_type=True)


def join_body(**overrides) -> dict:
    body = {
        "group_id": "g",
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 30000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x80"}],
    }
    body.update(overrides)
    return body


def join_request(body: dict, correlation_id: int = 7, api: str = "JoinGroup", version: int = 0) -> bytes:
    return raw_request(api=api, version=version, correlation_id=correlation_id, client_id="c", body=body)


# ----------------------------------------------------------------------------- FrameReader


def test_frame_reader_splits_several_frames_in_one_chunk():
    payloads = [b"one", b"", b"three" * 10, b"\x00\x01\x02"]
    reader = FrameReader()
    assert reader.feed(b"".join(frame(p) for p in payloads)) == payloads
    assert reader.buffered == 0


def test_frame_reader_keeps_a_partial_tail_for_the_next_feed():
    reader = FrameReader()
    data = frame(b"abc") + frame(b"defg")
    assert reader.feed(data[:9]) == [b"abc"]
    assert reader.buffered == 2
    assert reader.feed(data[9:]) == [b"defg"]
    assert reader.buffered == 0


def test_frame_reader_reassembles_one_byte_at_a_time():
    payload = b"hello, frames" * 3
    data = frame(payload) + frame(b"x")
    reader = FrameReader()
    out: list[bytes] = []
    for i in range(len(data)):
        out.extend(reader.feed(data[i : i + 1]))
        if i < len(frame(payload)) - 1:
            assert out == []
    assert out == [payload, b"x"]
    assert reader.buffered == 0


def test_frame_too_large_raised_on_the_header_alone():
    reader = FrameReader(max_frame_bytes=16)
    # Only the 4-byte length is fed: the error comes before any of the body is buffered.
    with pytest.raises(FrameTooLarge) as info:
        reader.feed(struct.pack(">I", 17))
    assert info.value.size == 17
    assert info.value.limit == 16
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert isinstance(info.value, ProtocolError)
    assert reader.buffered <= 4


def test_frame_too_large_for_a_huge_declared_length():
    reader = FrameReader()
    with pytest.raises(FrameTooLarge):
        reader.feed(struct.pack(">I", 0xFFFFFFFF) + b"abc")


def test_frame_exactly_at_the_limit_is_accepted():
    reader = FrameReader(max_frame_bytes=16)
    payload = bytes(range(16))
    assert reader.feed(frame(payload)) == [payload]


# ----------------------------------------------------------------------------- decode_request


def test_join_group_round_trip():
    body = JoinGroupRequest(
        group_id="g1",
        session_timeout_ms=10000,
        rebalance_timeout_ms=60000,
        member_id="m-1",
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"\x01\x02"), JoinGroupRequestProtocol("roundrobin", b"")],
        group_instance_id="inst-1",
        reason="starting",
    )
    header = RequestHeader(api="JoinGroup", version=0, correlation_id=42, client_id="cli")
    decoded = decode_request(payload_of(encode_request(header, body)))
    assert decoded.header == header
    assert isinstance(decoded.body, JoinGroupRequest)
    assert decoded.body == body
    assert all(isinstance(p, JoinGroupRequestProtocol) for p in decoded.body.protocols)


def test_optional_fields_default_when_absent():
    decoded = decode_request(join_request(join_body()))
    assert decoded.body.group_instance_id is None
    assert decoded.body.reason is None


@pytest.mark.parametrize("garbage", [b"\xc1", b"\xc1garbage", b"\x92\x01", b"", b"\x81\xa1a"])
def test_garbage_bytes_are_a_bad_request(garbage: bytes):
    with pytest.raises(BadRequest) as info:
        decode_request(garbage)
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.correlation_id == -1


@pytest.mark.parametrize("value", [[1, 2], "a string", 5, None, b"bytes"])
def test_msgpack_non_map_is_a_bad_request(value):
    with pytest.raises(BadRequest) as info:
        decode_request(msgpack.packb(value, use_bin_type=True))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.correlation_id == -1
    assert "map" in info.value.message


def test_missing_correlation_id():
    with pytest.raises(BadRequest) as info:
        decode_request(raw_request(api="JoinGroup", version=0, body=join_body()))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.correlation_id == -1
    assert "correlation_id" in info.value.message
    assert "required field is missing" in info.value.message


def test_missing_api_keeps_correlation_id():
    with pytest.raises(BadRequest) as info:
        decode_request(raw_request(version=0, correlation_id=9, body=join_body()))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.correlation_id == 9
    assert "api" in info.value.message
    assert "required field is missing" in info.value.message


@pytest.mark.parametrize("cid", ["7", True, 1.5, None])
def test_bad_correlation_id_type(cid):
    with pytest.raises(BadRequest) as info:
        decode_request(join_request(join_body(), correlation_id=cid))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.correlation_id == -1
    assert "correlation_id" in info.value.message


def test_unknown_api():
    with pytest.raises(BadRequest) as info:
        decode_request(join_request({}, correlation_id=11, api="FetchEverything"))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.correlation_id == 11
    assert info.value.api == "FetchEverything"
    assert "FetchEverything" in info.value.message


def test_unsupported_version():
    with pytest.raises(BadRequest) as info:
        decode_request(join_request(join_body(), correlation_id=12, version=3))
    assert info.value.code is ErrorCode.UNSUPPORTED_VERSION
    assert info.value.correlation_id == 12
    assert info.value.api == "JoinGroup"
    assert "3" in info.value.message


def test_negative_version_is_unsupported():
    with pytest.raises(BadRequest) as info:
        decode_request(join_request(join_body(), version=-1))
    assert info.value.code is ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize(
    "overrides, path",
    [
        ({"group_id": 3}, "body.group_id"),
        ({"group_id": None}, "body.group_id"),
        ({"session_timeout_ms": "x"}, "body.session_timeout_ms"),
        ({"session_timeout_ms": True}, "body.session_timeout_ms"),
        ({"rebalance_timeout_ms": 1.5}, "body.rebalance_timeout_ms"),
        ({"protocols": "range"}, "body.protocols"),
        ({"protocols": {"name": "range"}}, "body.protocols"),
        ({"protocols": ["range"]}, "body.protocols[0]"),
        ({"protocols": [{"name": "range", "metadata": "not bytes"}]}, "body.protocols[0].metadata"),
        ({"protocols": [{"name": "range", "metadata": b""}, {"name": 1, "metadata": b""}]}, "body.protocols[1].name"),
        ({"group_instance_id": 5}, "body.group_instance_id"),
    ],
)
def test_body_field_of_wrong_type_names_the_field(overrides: dict, path: str):
    with pytest.raises(BadRequest) as info:
        decode_request(join_request(join_body(**overrides), correlation_id=13))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.correlation_id == 13
    assert info.value.api == "JoinGroup"
    assert f"field {path}:" in info.value.message


def test_body_not_a_map():
    with pytest.raises(BadRequest) as info:
        decode_request(join_request([1, 2], correlation_id=14))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.correlation_id == 14
    assert "body" in info.value.message


@pytest.mark.parametrize("missing", ["group_id", "session_timeout_ms", "member_id", "protocols"])
def test_missing_required_body_field(missing: str):
    body = join_body()
    del body[missing]
    with pytest.raises(BadRequest) as info:
        decode_request(join_request(body, correlation_id=15))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.correlation_id == 15
    assert f"body.{missing}" in info.value.message
    assert "required field is missing" in info.value.message


def test_missing_required_nested_field():
    with pytest.raises(BadRequest) as info:
        decode_request(join_request(join_body(protocols=[{"name": "range"}])))
    assert "body.protocols[0].metadata" in info.value.message
    assert "required field is missing" in info.value.message


def test_unknown_extra_keys_are_ignored():
    body = join_body(future_field=[1, 2, 3], protocols=[{"name": "range", "metadata": b"", "extra": True}])
    payload = raw_request(api="JoinGroup", version=0, correlation_id=16, client_id="c", body=body, tagged={"x": 1})
    decoded = decode_request(payload)
    assert decoded.header.correlation_id == 16
    assert decoded.body.protocols == [JoinGroupRequestProtocol("range", b"")]
    assert not hasattr(decoded.body, "future_field")


MINIMAL_BODIES = {
    "ApiVersions": messages.ApiVersionsRequest(),
    "Metadata": messages.MetadataRequest(),
    "FindCoordinator": messages.FindCoordinatorRequest(key="g"),
    "OffsetForLeaderEpoch": messages.OffsetForLeaderEpochRequest(
        topics=[messages.OffsetForLeaderTopic("t", [messages.OffsetForLeaderPartition(0, -1, 0)])]),
    "CreateTopics": messages.CreateTopicsRequest(topics=[messages.CreatableTopic(name="t")]),
    "CreatePartitions": messages.CreatePartitionsRequest(topics=[messages.CreatePartitionsTopic(name="t", count=2)]),
    "JoinGroup": messages.JoinGroupRequest(
        group_id="g",
        session_timeout_ms=1,
        rebalance_timeout_ms=1,
        member_id="",
        protocol_type="consumer",
        protocols=[],
    ),
    "SyncGroup": messages.SyncGroupRequest(group_id="g", generation_id=1, member_id="m"),
    "Heartbeat": messages.HeartbeatRequest(group_id="g", generation_id=1, member_id="m"),
    "LeaveGroup": messages.LeaveGroupRequest(group_id="g", members=[messages.LeaveGroupRequestMember(member_id="m")]),
    "DescribeGroups": messages.DescribeGroupsRequest(groups=["g"]),
    "ListGroups": messages.ListGroupsRequest(),
    "DeleteGroups": messages.DeleteGroupsRequest(groups_names=["g"]),
    "DeleteTopics": messages.DeleteTopicsRequest(topic_names=["t"]),
    "DescribeConfigs": messages.DescribeConfigsRequest(resources=[messages.DescribeConfigsResource(4, "0")]),
    "DescribeCluster": messages.DescribeClusterRequest(),
    "Produce": messages.ProduceRequest(topic_data=[messages.ProduceTopicData("t", [messages.ProducePartitionData(
        0, messages.RecordBatch([messages.Record(b"v", key=b"k", headers=[messages.RecordHeader("h", None)])]))])]),
    "Fetch": messages.FetchRequest(topics=[messages.FetchTopic("t", [messages.FetchPartition(0, 0)])]),
    "ListOffsets": messages.ListOffsetsRequest(topics=[messages.ListOffsetsTopic("t", [messages.ListOffsetsPartition(0)])]),
    "InitProducerId": messages.InitProducerIdRequest(),
    "OffsetCommit": messages.OffsetCommitRequest(group_id="g", topics=[]),
    "OffsetFetch": messages.OffsetFetchRequest(group_id="g"),
    "OffsetDelete": messages.OffsetDeleteRequest(group_id="g", topics=[messages.OffsetDeleteRequestTopic(
        "t", [messages.OffsetDeleteRequestPartition(0)])]),
    "AddPartitionsToTxn": messages.AddPartitionsToTxnRequest("tx", 1, 0, [messages.AddPartitionsToTxnTopic("t", [0])]),
    "AddOffsetsToTxn": messages.AddOffsetsToTxnRequest("tx", 1, 0, "g"),
    "TxnOffsetCommit": messages.TxnOffsetCommitRequest("tx", "g", 1, 0, topics=[]),
    "EndTxn": messages.EndTxnRequest("tx", 1, 0, committed=True),
    "ConsumerGroupHeartbeat": messages.ConsumerGroupHeartbeatRequest(group_id="g", member_id="", member_epoch=0),
    "ConsumerGroupDescribe": messages.ConsumerGroupDescribeRequest(group_ids=["g"]),
}


def test_minimal_bodies_cover_every_api():
    assert set(MINIMAL_BODIES) == set(API)


@pytest.mark.parametrize("api", sorted(API))
def test_every_api_round_trips(api: str):
    spec = API[api]
    body = MINIMAL_BODIES[api]
    assert isinstance(body, spec.request)
    header = RequestHeader(api=api, version=spec.max_version, correlation_id=100, client_id="x")
    decoded = decode_request(payload_of(encode_request(header, body)))
    assert decoded.header == header
    assert type(decoded.body) is spec.request
    assert decoded.body == body
    assert messages.REQUEST_API[spec.request] == api


@pytest.mark.parametrize("api", sorted(API))
def test_every_api_with_an_empty_body(api: str):
    """An empty body either decodes (all fields optional) or names a required field."""
    spec = API[api]
    try:
        decoded = decode_request(join_request({}, api=api))
    except BadRequest as exc:
        assert exc.code is ErrorCode.INVALID_REQUEST
        assert "required field is missing" in exc.message
    else:
        assert decoded.body == spec.request()


def test_sync_group_assignments_round_trip():
    body = messages.SyncGroupRequest(
        group_id="g",
        generation_id=3,
        member_id="m1",
        protocol_type="consumer",
        protocol_name="range",
        assignments=[messages.SyncGroupRequestAssignment("m1", b"\x01"), messages.SyncGroupRequestAssignment("m2", b"")],
    )
    header = RequestHeader(api="SyncGroup", version=0, correlation_id=1)
    assert decode_request(payload_of(encode_request(header, body))).body == body


# ----------------------------------------------------------------------------- responses


def test_response_round_trip():
    body = messages.JoinGroupResponse(
        error_code=0,
        generation_id=5,
        protocol_type="consumer",
        protocol_name="range",
        leader="m1",
        member_id="m2",
        members=[messages.JoinGroupResponseMember("m1", b"\x01", "i1"), messages.JoinGroupResponseMember("m2", b"")],
    )
    cid, decoded = decode_response(payload_of(encode_response(77, body)), messages.JoinGroupResponse)
    assert cid == 77
    assert decoded == body


def test_nested_response_round_trip():
    body = messages.DescribeGroupsResponse(
        groups=[
            messages.DescribedGroup(
                group_id="g",
                group_state="Stable",
                members=[messages.DescribedGroupMember(member_id="m", member_assignment=b"\x00")],
                generation_id=2,
                leader="m",
            )
        ]
    )
    cid, decoded = decode_response(payload_of(encode_response(1, body)), messages.DescribeGroupsResponse)
    assert (cid, decoded) == (1, body)


def test_error_code_is_an_int_on_the_wire():
    body = messages.HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS, error_message="rebalancing")
    payload = payload_of(encode_response(3, body))
    raw = msgpack.unpackb(payload, raw=False)
    assert raw["body"]["error_code"] == 27
    assert type(raw["body"]["error_code"]) is int
    cid, decoded = decode_response(payload, messages.HeartbeatResponse)
    assert cid == 3
    assert type(decoded.error_code) is int
    assert decoded.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert ErrorCode.from_code(decoded.error_code) is ErrorCode.REBALANCE_IN_PROGRESS


def test_error_response_decodes():
    cid, decoded = decode_response(
        payload_of(encode_response(-1, messages.ErrorResponse(error_code=ErrorCode.INVALID_REQUEST, error_message="x"))),
        messages.ErrorResponse,
    )
    assert cid == -1
    assert decoded == messages.ErrorResponse(error_code=42, error_message="x")


@pytest.mark.parametrize("payload", [b"\xc1", msgpack.packb([1]), msgpack.packb({"body": {}})])
def test_malformed_response_raises_protocol_error(payload: bytes):
    with pytest.raises(ProtocolError):
        decode_response(payload, messages.HeartbeatResponse)


# ----------------------------------------------------------------------------- consumer protocol


def test_subscription_round_trip():
    sub = Subscription(
        topics=["a", "b"],
        user_data=b"\x00\xff",
        owned_partitions=[TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1)],
        generation_id=4,
        rack="rack-1",
    )
    decoded = consumer_protocol.decode_subscription(consumer_protocol.encode_subscription(sub))
    assert decoded == sub


def test_subscription_round_trip_normalises_order_and_takes_instance_id():
    sub = Subscription(
        topics=["b", "a"],
        owned_partitions=[TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)],
        group_instance_id="ignored-on-the-wire",
    )
    decoded = consumer_protocol.decode_subscription(consumer_protocol.encode_subscription(sub), group_instance_id="i-1")
    assert decoded.topics == ["a", "b"]
    assert decoded.owned_partitions == [TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1)]
    assert decoded.group_instance_id == "i-1"
    assert decoded.user_data is None
    assert decoded.generation_id == -1
    assert decoded.rack is None


def test_assignment_round_trip():
    assignment = Assignment(
        partitions=[TopicPartition("t0", 0), TopicPartition("t0", 1), TopicPartition("t1", 5)], user_data=b"ud"
    )
    decoded = consumer_protocol.decode_assignment(consumer_protocol.encode_assignment(assignment))
    assert decoded == assignment


def test_empty_assignment_round_trip():
    decoded = consumer_protocol.decode_assignment(consumer_protocol.encode_assignment(Assignment(partitions=[])))
    assert decoded == Assignment(partitions=[])


def test_empty_assignment_bytes_decode_to_no_partitions():
    assert consumer_protocol.decode_assignment(b"") == Assignment(partitions=[])


@pytest.mark.parametrize("garbage", [b"\xc1", b"\x92\x01", msgpack.packb(5), msgpack.packb({"partitions": "x"})])
def test_garbage_assignment_raises_protocol_error(garbage: bytes):
    with pytest.raises(ProtocolError) as info:
        consumer_protocol.decode_assignment(garbage)
    assert info.value.code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("garbage", [b"", b"\xc1", b"\x92\x01", msgpack.packb([1]), msgpack.packb({"topics": [1]})])
def test_garbage_subscription_raises_protocol_error(garbage: bytes):
    with pytest.raises(ProtocolError) as info:
        consumer_protocol.decode_subscription(garbage)
    assert info.value.code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


# ----------------------------------------------------------------------------- TopicPartition.parse


@pytest.mark.parametrize(
    "text, expected",
    [
        ("t0:1", TopicPartition("t0", 1)),
        ("my-topic-2", TopicPartition("my-topic", 2)),
        ("my-topic:12", TopicPartition("my-topic", 12)),
        ("t0-0", TopicPartition("t0", 0)),
    ],
)
def test_topic_partition_parse(text: str, expected: TopicPartition):
    assert TopicPartition.parse(text) == expected


@pytest.mark.parametrize("text", ["t0", "", ":1", "-1", "t0:", "t0:x", "my-topic"])
def test_topic_partition_parse_rejects(text: str):
    with pytest.raises(ValueError):
        TopicPartition.parse(text)


def test_topic_partition_str_parses_back():
    tp = TopicPartition("my-topic", 3)
    assert str(tp) == "my-topic-3"
    assert TopicPartition.parse(str(tp)) == tp


# ----------------------------------------------------------------------------- property

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.text(max_size=30)

join_requests = st.builds(
    JoinGroupRequest,
    group_id=TEXT,
    session_timeout_ms=INT64,
    rebalance_timeout_ms=INT64,
    member_id=TEXT,
    protocol_type=TEXT,
    protocols=st.lists(st.builds(JoinGroupRequestProtocol, name=TEXT, metadata=st.binary(max_size=64)), max_size=5),
    group_instance_id=st.none() | TEXT,
    reason=st.none() | TEXT,
)


@settings(max_examples=200, deadline=None)
@given(body=join_requests, correlation_id=INT64, client_id=TEXT, chunk=st.integers(min_value=1, max_value=64))
def test_property_join_group_round_trip(body: JoinGroupRequest, correlation_id: int, client_id: str, chunk: int):
    header = RequestHeader(api="JoinGroup", version=0, correlation_id=correlation_id, client_id=client_id)
    data = encode_request(header, body) * 2
    reader = FrameReader()
    frames: list[bytes] = []
    for i in range(0, len(data), chunk):
        frames.extend(reader.feed(data[i : i + chunk]))
    assert reader.buffered == 0
    assert len(frames) == 2
    for payload in frames:
        decoded = decode_request(payload)
        assert decoded.header == header
        assert decoded.body == body


def test_module_exports_used_here_exist():
    # Guard against the names these tests rely on moving silently.
    assert framing.DEFAULT_MAX_FRAME_BYTES == FrameReader().max_frame_bytes
