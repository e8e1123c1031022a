"""Issue 11: no answer holds the coordinator for long.

- Every answer is encoded within grouplab.response.max.bytes or not sent: the request is answered
  INVALID_REQUEST with an error giving the size, the limit and what to ask for instead, and a
  `response_too_large` event. Metadata, DescribeGroups, ListGroups and OffsetFetch refuse before
  building an answer whose floor is already over the limit (and change nothing); the shell
  refuses any other answer once encoding shows it too large, having done at most about the
  limit's worth of work (protocol.schema.packing_hook).
- The issue's amplifying requests, and their worst cases with distinct entries, each just under
  socket.request.max.bytes, are answered within the limit or refused so.
- A failure while encoding an answer (MemoryError included) answers that request
  UNKNOWN_SERVER_ERROR and keeps the connection, the other outputs of the step and the server.
- Over loopback, a group with a 6 s session heartbeats through a replay of those requests.

Sizes are measured on the wire encoding; the one timing (a heartbeat's wait) has a generous bound."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import struct
import threading
import time
import typing
from typing import Any, Callable

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.consumer.client import GroupMemberClient
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import MemberState
from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig, ConfigError
from grouplab.coordinator.data_plane import batch_wire_size, record_wire_size
from grouplab.coordinator.server import CoordinatorServer
from grouplab.coordinator.topics import MAX_AUTO_CREATED_TOPICS
from grouplab.admin import AdminClient, AdminError
from grouplab.eventlog import EventLog
from grouplab.protocol import events, messages, schema
from grouplab.protocol.effects import LogEvent, Persist, Reply
from grouplab.protocol.errors import AnswerTooLarge, ErrorCode
from grouplab.protocol.framing import encode_request, encode_response, read_response
from grouplab.protocol.messages import (
    API,
    ApiVersionsRequest,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ErrorResponse,
    FetchedBatch,
    FetchedRecord,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    ListGroupsRequest,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    Record,
    RecordBatch,
    RecordHeader,
    RequestHeader,
)

T0 = 1_700_000_000_000
LIMIT = BrokerConfig().response_max_bytes
REQUEST_LIMIT = BrokerConfig().socket_request_max_bytes


# ----------------------------------------------------------------------------- helpers


def old_encoding(correlation_id: int, body: Any) -> bytes:
    """The frames as they were made before the packing hook: schema.encode, then packb."""
    payload = msgpack.packb(schema.encode({"correlation_id": correlation_id, "body": body}), use_bin_type=True)
    return struct.pack(">I", len(payload)) + payload


def just_under_the_request_limit(api: str, make: Callable[[int], Any]) -> Any:
    """make(n) for the largest n whose request frame fits socket.request.max.bytes (entries of
    one size, so two encodings past msgpack's largest array header tell the size of one)."""
    def size(n: int) -> int:
        return len(encode_request(RequestHeader(api, 0, 1, "amplifier"), make(n))) - 4

    base = 1 << 16
    one = size(base + 1) - size(base)
    n = base + (REQUEST_LIMIT - size(base)) // one
    assert size(n) <= REQUEST_LIMIT < size(n + 1)
    return make(n)


def broker(*overrides: str) -> Broker:
    b = Broker(BrokerConfig().with_overrides(overrides))
    b.topics.partitions.update({"t": 4, "big": 1_000_000})
    return b


def handle(b: Broker, api: str, body: Any) -> tuple[Any, list]:
    out = b.handle(api, body, RequestContext("client", client_id="amplifier", client_host="127.0.0.1"), T0)
    [reply] = [o.body for o in out if isinstance(o, Reply)]
    return reply, out


def answered(b: Broker, api: str, body: Any) -> tuple[Any, int | AnswerTooLarge, list]:
    """The reply, the size of its frame as the server would send it (or the AnswerTooLarge the
    server's encoding raises), and the step's outputs."""
    reply, out = handle(b, api, body)
    try:
        return reply, len(encode_response(1, reply, b.config.response_max_bytes)), out
    except AnswerTooLarge as exc:
        return reply, exc, out


def too_large_events(out: list) -> list[events.ResponseTooLarge]:
    return [o.payload for o in out if isinstance(o, LogEvent) and isinstance(o.payload, events.ResponseTooLarge)]


def produce(b: Broker, topic: str, partition: int, *records: Record) -> None:
    reply, _ = handle(b, "Produce", ProduceRequest([ProduceTopicData(topic, [
        ProducePartitionData(partition, RecordBatch(list(records)))])], -1))
    assert reply.responses[0].partition_responses[0].error_code == 0


def assert_refused(reply: Any, api: str, limit: int = LIMIT) -> None:
    assert isinstance(reply, ErrorResponse) and reply.error_code == ErrorCode.INVALID_REQUEST == 42
    assert reply.error_message is not None
    assert reply.error_message.startswith(f"{api}: the answer would take")
    assert f"over the limit of {limit} bytes (grouplab.response.max.bytes)" in reply.error_message


# ----------------------------------------------------------------------------- the encoder


BODIES: list[Any] = [spec.response() for spec in API.values()] + [
    ErrorResponse(42, "x"),
    DescribeGroupsResponse(groups=[DescribedGroup(group_id="g", group_state="Stable", members=[
        messages.DescribedGroupMember("m", None, "c", "h", b"x" * 300, b"y")])]),
    messages.FetchResponse(responses=[messages.FetchTopicResponse("t", [messages.FetchPartitionResponse(
        0, records=[FetchedRecord(1, 2, b"v", None, [RecordHeader("k", None), RecordHeader("ü", b"\x00" * 70_000)])])])]),
    MetadataResponse(topics=[MetadataResponseTopic("t", partitions=[MetadataResponsePartition(p, 0) for p in range(300)])]),
]


@pytest.mark.parametrize("body", BODIES, ids=lambda b: type(b).__name__)
def test_the_packing_hook_writes_the_same_bytes_as_before(body: Any) -> None:
    assert encode_response(7, body) == old_encoding(7, body)
    assert encode_response(7, body, LIMIT) == old_encoding(7, body)


MESSAGE_CLASSES = sorted((cls for cls in vars(messages).values() if isinstance(cls, type) and dataclasses.is_dataclass(cls)),
                         key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", MESSAGE_CLASSES, ids=lambda c: c.__name__)
def test_a_floor_is_never_more_than_the_smallest_encoding(cls: type) -> None:
    """Every field at its smallest value; a nested message (nil here, one byte) counts its own
    floor, as the packing hook counts it, so it is left out."""
    smallest: dict[Any, Any] = {int: 0, str: "", bytes: b"", bool: False, float: 0.0}
    values: dict[str, Any] = {}
    nested = 0
    for f in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[f.name]
        if hint in smallest:
            values[f.name] = smallest[hint]
        elif typing.get_origin(hint) is list:
            values[f.name] = []
        else:
            values[f.name] = None
            nested += isinstance(hint, type) and dataclasses.is_dataclass(hint)
    packed = msgpack.packb(cls(**values), default=schema.packing_hook(), use_bin_type=True)
    assert schema.floor_bytes(cls) <= len(packed) - nested


def test_an_answer_over_the_limit_is_refused_exactly_or_as_soon_as_it_is_certain() -> None:
    body = MetadataResponse(topics=[MetadataResponseTopic("t", partitions=[MetadataResponsePartition(p, 0) for p in range(100)])])
    size = len(encode_response(1, body)) - 4
    assert len(encode_response(1, body, size)) == size + 4
    with pytest.raises(AnswerTooLarge) as exact:
        encode_response(1, body, size - 1)
    assert (exact.value.size, exact.value.limit, exact.value.exact) == (size, size - 1, True)
    huge = MetadataResponse(topics=[MetadataResponseTopic("t", partitions=[MetadataResponsePartition(p, 0) for p in range(1_000_000)])])
    with pytest.raises(AnswerTooLarge) as early:
        encode_response(1, huge, 10_000)
    # packing stopped once 10,000 bytes were certain, long before the 45 MB were written
    assert not early.value.exact and 10_000 < early.value.size < 10_000 + schema.floor_bytes(MetadataResponsePartition) + 200
    assert "Metadata: the answer would take at least" in early.value.message_for("Metadata")


def test_bytes_count_toward_the_floor_so_big_values_stop_packing_early() -> None:
    body = DescribeGroupsResponse(groups=[DescribedGroup(group_id="g", group_state="Stable", members=[
        messages.DescribedGroupMember(f"m{i}", None, "c", "h", b"x" * 100_000, b"") for i in range(1000)])])
    with pytest.raises(AnswerTooLarge) as exc:
        encode_response(1, body, 1_000_000)
    assert not exc.value.exact and exc.value.size < 1_200_000


records = st.builds(
    FetchedRecord,
    offset=st.integers(0, 2**63 - 1), timestamp=st.integers(-1, 2**63 - 1),
    value=st.none() | st.binary(max_size=70_000), key=st.none() | st.binary(max_size=300),
    headers=st.lists(st.builds(RecordHeader, st.text(max_size=40), st.none() | st.binary(max_size=300)), max_size=20),
    producer_id=st.integers(-1, 2**63 - 1))


@settings(max_examples=200, deadline=None)
@given(records)
def test_a_records_wire_size_is_exact(record: FetchedRecord) -> None:
    assert record_wire_size(record) == len(msgpack.packb(schema.encode(record), use_bin_type=True))


batches = st.builds(
    FetchedBatch, base_offset=st.integers(0, 2**63 - 1), records=st.lists(records, max_size=3),
    producer_id=st.integers(-1, 2**63 - 1), producer_epoch=st.integers(-1, 2**15 - 1),
    base_sequence=st.integers(-1, 2**31 - 1), is_transactional=st.booleans(), is_control=st.booleans())


@settings(max_examples=100, deadline=None)
@given(batches)
def test_a_batchs_wire_size_is_exact(batch: FetchedBatch) -> None:
    assert batch_wire_size(batch) == len(msgpack.packb(schema.encode(batch), use_bin_type=True))


# ----------------------------------------------------------------------------- the setting


def test_the_setting_is_validated_and_reported() -> None:
    assert BrokerConfig().as_kafka_names()["grouplab.response.max.bytes"] == 4 * 1024 * 1024
    assert BrokerConfig().with_overrides(["grouplab.response.max.bytes=1024"]).response_max_bytes == 1024
    with pytest.raises(ConfigError, match="grouplab.response.max.bytes must be >= 1024"):
        BrokerConfig().with_overrides(["grouplab.response.max.bytes=1023"])


# ----------------------------------------------------------------------------- the requests, at the request limit


def test_metadata_naming_one_topic_again_and_again_is_a_small_answer() -> None:
    b = broker()
    req = just_under_the_request_limit("Metadata", lambda n: MetadataRequest([MetadataRequestTopic("t")] * n))
    assert len(req.topics) > 80_505  # the request, and more
    reply, size, _ = answered(b, "Metadata", req)
    assert [t.name for t in reply.topics] == ["t"] and isinstance(size, int) and size < 1000


def test_metadata_naming_distinct_new_topics_creates_a_bounded_number() -> None:
    b = broker()
    req = just_under_the_request_limit("Metadata", lambda n: MetadataRequest(
        [MetadataRequestTopic(f"u{i:07d}") for i in range(n)]))
    reply, size, out = answered(b, "Metadata", req)
    assert isinstance(size, int) and size <= LIMIT
    codes = [t.error_code for t in reply.topics]
    assert len(codes) == len(req.topics) > 60_000
    assert codes[:MAX_AUTO_CREATED_TOPICS] == [0] * MAX_AUTO_CREATED_TOPICS  # the first ones named
    assert set(codes[MAX_AUTO_CREATED_TOPICS:]) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert sum(isinstance(o, Persist) for o in out) == MAX_AUTO_CREATED_TOPICS == len(b.topics.partitions) - 2
    # the next request creates the next ones (a client retrying gets there)
    reply, _, _ = answered(b, "Metadata", req)
    assert [t.error_code for t in reply.topics].count(0) == 2 * MAX_AUTO_CREATED_TOPICS


def test_metadata_without_auto_creation_answers_every_distinct_unknown_topic() -> None:
    b = broker()
    req = just_under_the_request_limit("Metadata", lambda n: MetadataRequest(
        [MetadataRequestTopic(f"u{i:07d}") for i in range(n)], allow_auto_topic_creation=False))
    reply, size, _ = answered(b, "Metadata", req)
    assert isinstance(size, int) and size <= LIMIT and len(reply.topics) == len(req.topics)


def test_metadata_whose_answer_cannot_fit_is_refused_before_anything_is_created() -> None:
    b = broker("num.partitions=100000")
    before = dict(b.topics.partitions)
    reply, _ = handle(b, "Metadata", MetadataRequest([MetadataRequestTopic(f"new{i}") for i in range(10)]))
    assert_refused(reply, "Metadata")
    assert b.topics.partitions == before
    reply, out = handle(b, "Metadata", MetadataRequest([MetadataRequestTopic("big")]))  # 1,000,000 partitions
    assert_refused(reply, "Metadata")
    [ev] = too_large_events(out)
    assert (ev.api, ev.client_id, ev.limit, ev.exact) == ("Metadata", "amplifier", LIMIT, False)
    assert ev.bytes >= 1_000_000 * schema.floor_bytes(MetadataResponsePartition)
    assert "name fewer topics" in reply.error_message
    reply, _ = handle(b, "Metadata", MetadataRequest(None))  # every topic: big among them
    assert_refused(reply, "Metadata")


def test_describe_groups_repeated_is_small_and_distinct_is_refused_unbuilt() -> None:
    b = broker()
    req = just_under_the_request_limit("DescribeGroups", lambda n: DescribeGroupsRequest(["g"] * n))
    assert len(req.groups) > 100_000
    reply, size, _ = answered(b, "DescribeGroups", req)
    assert [g.group_id for g in reply.groups] == ["g"] and isinstance(size, int) and size < 1000
    req = just_under_the_request_limit("DescribeGroups", lambda n: DescribeGroupsRequest([f"{i:07d}" for i in range(n)]))
    assert len(req.groups) > 100_000
    reply, out = handle(b, "DescribeGroups", req)
    assert_refused(reply, "DescribeGroups")
    assert "describe fewer groups per request" in reply.error_message
    [ev] = too_large_events(out)
    assert ev.bytes >= len(req.groups) * schema.floor_bytes(DescribedGroup) > LIMIT
    assert not b.groups


def test_offset_fetch_repeated_is_small_and_distinct_is_refused_unbuilt() -> None:
    b = broker()
    req = just_under_the_request_limit("OffsetFetch", lambda n: OffsetFetchRequest("g", [OffsetFetchRequestTopic("t", [0] * n)]))
    assert len(req.topics[0].partition_indexes) > 100_000
    reply, size, _ = answered(b, "OffsetFetch", req)
    assert isinstance(size, int) and size < 1000
    req = just_under_the_request_limit("OffsetFetch", lambda n: OffsetFetchRequest(
        "g", [OffsetFetchRequestTopic("t", list(range(1 << 16, (1 << 16) + n)))]))
    reply, out = handle(b, "OffsetFetch", req)
    assert_refused(reply, "OffsetFetch")
    assert len(too_large_events(out)) == 1


def test_offset_fetch_counts_the_committed_metadata_it_would_return() -> None:
    b = broker("grouplab.response.max.bytes=100000", "offset.metadata.max.bytes=4096")
    parts = [OffsetCommitRequestPartition(p, 1, committed_metadata="m" * 4096) for p in range(4)]
    reply, _ = handle(b, "OffsetCommit", OffsetCommitRequest("g", [OffsetCommitRequestTopic("t", parts)]))
    assert all(p.error_code == 0 for t in reply.topics for p in t.partitions)
    b.topics.partitions["t"] = 40
    for start in range(4, 40, 4):
        parts = [OffsetCommitRequestPartition(p, 1, committed_metadata="m" * 4096) for p in range(start, start + 4)]
        handle(b, "OffsetCommit", OffsetCommitRequest("g", [OffsetCommitRequestTopic("t", parts)]))
    for topics in (None, [OffsetFetchRequestTopic("t", list(range(40)))]):
        reply, _ = handle(b, "OffsetFetch", OffsetFetchRequest("g", topics))
        assert_refused(reply, "OffsetFetch", 100_000)  # 40 * 4096 bytes of metadata
    reply, size, _ = answered(b, "OffsetFetch", OffsetFetchRequest("g", [OffsetFetchRequestTopic("t", list(range(20)))]))
    assert isinstance(size, int) and 20 * 4096 < size <= 100_000


def test_fetch_of_one_partition_again_and_again_with_max_bytes_1_is_small() -> None:
    b = broker()
    for _ in range(10):
        produce(b, "t", 0, *[Record(b"x" * 1000)] * 90)  # ~900 KB in the partition
    req = just_under_the_request_limit("Fetch", lambda n: FetchRequest([FetchTopic("t", [FetchPartition(0, 0)] * n)], max_bytes=1))
    reply, size, _ = answered(b, "Fetch", req)
    assert isinstance(size, int) and size < 5000
    assert [len(p.records) for t in reply.responses for p in t.partitions] == [1]


def test_fetch_of_distinct_unknown_partitions_is_refused_once_encoded() -> None:
    b = broker()
    req = just_under_the_request_limit("Fetch", lambda n: FetchRequest([FetchTopic("x" * 249, [
        FetchPartition(p, 0, 0) for p in range(1 << 16, (1 << 16) + n)])], max_bytes=1))
    reply, size, _ = answered(b, "Fetch", req)
    assert isinstance(size, AnswerTooLarge) and size.exact and size.size > LIMIT
    assert "fetch fewer partitions" in size.message_for("Fetch")


@pytest.mark.parametrize("api, make", [
    ("ListOffsets", lambda n: messages.ListOffsetsRequest([messages.ListOffsetsTopic("t", [
        messages.ListOffsetsPartition(p) for p in range(1 << 16, (1 << 16) + n)])])),
    ("Produce", lambda n: ProduceRequest([ProduceTopicData("x" * 249, [
        ProducePartitionData(p, RecordBatch([Record(None)])) for p in range(1 << 16, (1 << 16) + n)])])),
    ("LeaveGroup", lambda n: LeaveGroupRequest("g", [LeaveGroupRequestMember(f"{i:07d}") for i in range(n)])),
    ("CreateTopics", lambda n: messages.CreateTopicsRequest([messages.CreatableTopic(f"{i:07d}", 0) for i in range(n)])),
    ("OffsetCommit", lambda n: OffsetCommitRequest("g", [OffsetCommitRequestTopic("x" * 249, [
        OffsetCommitRequestPartition(p, 0) for p in range(1 << 16, (1 << 16) + n)])])),
])
def test_other_requests_of_distinct_entries_are_answered_within_the_limit_or_refused(api: str, make: Any) -> None:
    b = broker()
    reply, size, _ = answered(b, api, just_under_the_request_limit(api, make))
    assert isinstance(size, AnswerTooLarge) or size <= LIMIT


def test_list_groups_over_the_limit_is_refused_unbuilt() -> None:
    b = broker("grouplab.response.max.bytes=1024")
    for i in range(40):
        handle(b, "OffsetCommit", OffsetCommitRequest(f"group-{i}", [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 1)])]))
    reply, out = handle(b, "ListGroups", ListGroupsRequest())
    assert_refused(reply, "ListGroups", 1024)
    assert "states_filter" in reply.error_message and too_large_events(out)
    reply, _ = handle(b, "ListGroups", ListGroupsRequest(["stable"]))  # none is Stable
    assert reply.error_code == 0 and reply.groups == []


# ----------------------------------------------------------------------------- Fetch keeps within the limit


def test_fetch_records_take_at_most_half_the_limit_and_the_next_fetch_goes_on() -> None:
    limit = 65_536
    b = broker(f"grouplab.response.max.bytes={limit}")
    for p in range(3):
        produce(b, "t", p, *[Record(b"v" * 100, headers=[RecordHeader("", None)] * 3)] * 300)
    offsets = {p: 0 for p in range(3)}
    seen = {p: 0 for p in range(3)}
    while any(o < 300 for o in offsets.values()):
        req = FetchRequest([FetchTopic("t", [FetchPartition(p, offsets[p]) for p in range(3)])])
        reply, size, _ = answered(b, "Fetch", req)
        assert isinstance(size, int) and size <= limit
        got = [(p.partition_index, [r.offset for r in p.records]) for t in reply.responses for p in t.partitions]
        assert sum(record_wire_size(r) for t in reply.responses for p in t.partitions for r in p.records) <= limit // 2
        assert any(rs for _, rs in got)
        for p, rs in got:
            assert rs == list(range(offsets[p], offsets[p] + len(rs)))  # in order, no gap
            offsets[p] += len(rs)
            seen[p] += len(rs)
    assert seen == {0: 300, 1: 300, 2: 300}


def test_fetch_still_returns_a_first_record_larger_than_half_the_limit() -> None:
    limit = 65_536
    b = broker(f"grouplab.response.max.bytes={limit}")
    produce(b, "t", 1, Record(b"x" * 40_000), Record(b"y"))
    reply, size, _ = answered(b, "Fetch", FetchRequest([FetchTopic("t", [FetchPartition(0, 0), FetchPartition(1, 0)])]))
    assert isinstance(size, int) and size <= limit
    assert [[r.offset for r in p.records] for p in reply.responses[0].partitions] == [[], [0]]


# ----------------------------------------------------------------------------- over a socket


async def start_server(cleanup: contextlib.AsyncExitStack, log: list[LogEvent], *overrides: str) -> CoordinatorServer:
    events_log = EventLog("coordinator")
    events_log.listeners.append(lambda node, ev: log.append(ev))
    server = CoordinatorServer(BrokerConfig().with_overrides(["group.initial.rebalance.delay.ms=0", *overrides]),
                               port=0, events=events_log)
    await server.start()
    cleanup.push_async_callback(server.stop)
    return server


async def raw_call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api: str, cid: int, body: Any) -> tuple[int, dict]:
    writer.write(encode_request(RequestHeader(api, 0, cid, "raw"), body))
    await writer.drain()
    (size,) = struct.unpack(">I", await asyncio.wait_for(reader.readexactly(4), 10))
    return read_response(await asyncio.wait_for(reader.readexactly(size), 10))


async def test_the_size_error_over_a_socket(cleanup: contextlib.AsyncExitStack) -> None:
    log: list[LogEvent] = []
    server = await start_server(cleanup, log, "grouplab.response.max.bytes=4096")
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    cleanup.callback(writer.close)
    # refused before it is built (the broker's floor)...
    cid, body = await raw_call(reader, writer, "DescribeGroups", 5, DescribeGroupsRequest([f"g{i}" for i in range(100)]))
    assert cid == 5 and body["error_code"] == 42 and set(body) == {"error_code", "error_message"}
    assert "DescribeGroups: the answer would take at least" in body["error_message"]
    assert "4096" in body["error_message"] and "describe fewer groups" in body["error_message"]
    # ... or once encoded (the shell): its exact size (the long member ids, not its floor, pass the limit)
    cid, body = await raw_call(reader, writer, "LeaveGroup", 6, LeaveGroupRequest("nobody", [
        LeaveGroupRequestMember(f"member-{i:03d}-" + "x" * 300) for i in range(20)]))
    assert cid == 6 and body["error_code"] == 42 and "LeaveGroup: the answer would take" in body["error_message"]
    assert "at least" not in body["error_message"]
    # the connection goes on
    cid, body = await raw_call(reader, writer, "ApiVersions", 7, ApiVersionsRequest())
    assert cid == 7 and body["error_code"] == 0
    too_large = [ev.payload for ev in log if isinstance(ev.payload, events.ResponseTooLarge)]
    assert [(e.api, e.client_id, e.limit, e.exact) for e in too_large] == [
        ("DescribeGroups", "raw", 4096, False), ("LeaveGroup", "raw", 4096, True)]
    assert too_large[1].bytes > 4096
    # the admin client reads the error as the API's answer and says it in one line
    async with AdminClient("127.0.0.1", server.port) as admin:
        with pytest.raises(AdminError, match=r"INVALID_REQUEST \(42\): DescribeGroups: the answer would take"):
            await admin.describe_groups([f"g{i}" for i in range(100)])


async def test_an_encoding_failure_answers_the_request_and_keeps_everything_else(
        cleanup: contextlib.AsyncExitStack, monkeypatch: pytest.MonkeyPatch) -> None:
    import grouplab.coordinator.server as server_module

    real = server_module.encode_response
    failures = {"DescribeGroupsResponse": 1, "SyncGroupResponse": 1}

    def failing(correlation_id: int, body: Any, max_bytes: int | None = None) -> bytes:
        name = type(body).__name__
        if failures.get(name, 0) > 0:
            failures[name] -= 1
            raise MemoryError()
        return real(correlation_id, body, max_bytes)

    monkeypatch.setattr(server_module, "encode_response", failing)
    log: list[LogEvent] = []
    server = await start_server(cleanup, log, "group.min.session.timeout.ms=1000")
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    cleanup.callback(writer.close)
    cid, body = await raw_call(reader, writer, "DescribeGroups", 41, DescribeGroupsRequest(["g"]))
    assert cid == 41 and body == {"error_code": -1, "error_message": "DescribeGroups: the answer could not be encoded: MemoryError()"}
    cid, body = await raw_call(reader, writer, "DescribeGroups", 42, DescribeGroupsRequest(["g"]))
    assert cid == 42 and body["error_code"] == 0 and body["groups"][0]["group_state"] == "Dead"

    # A SyncGroup answer that cannot be encoded: that member hears UNKNOWN_SERVER_ERROR; the other
    # answers of the same step still go out, and the group settles.
    config = dict(group_id="g", topics=["t"], session_timeout_ms=6000, heartbeat_interval_ms=200)
    clients = [GroupMemberClient(ConsumerConfig(client_id=f"c{i}", **config), port=server.port) for i in range(3)]
    for c in clients:
        cleanup.push_async_callback(c.close, False)
    await asyncio.gather(*(c.start() for c in clients))
    await asyncio.gather(*(c.wait_for(lambda c: c.state is MemberState.STABLE and c.generation_id == server.broker.groups["g"].generation_id
                                      and server.broker.groups["g"].state.value == "Stable", 20) for c in clients))
    failed = [ev.payload for ev in log if isinstance(ev.payload, events.ResponseEncodeFailed)]
    assert [(e.api, e.error) for e in failed] == [("DescribeGroups", "MemoryError()"), ("SyncGroup", "MemoryError()")]
    assert not [ev for ev in log if ev.event == "internal_error"]
    assert len(server.broker.groups["g"].members) == 3


# ----------------------------------------------------------------------------- heartbeats through a storm


class CoordinatorThread:
    """A CoordinatorServer on its own thread and event loop, so that the consumers (on the test's
    loop) measure how long it takes to answer their heartbeats while it handles big requests."""

    def __init__(self, *overrides: str) -> None:
        self.config = BrokerConfig().with_overrides(["group.initial.rebalance.delay.ms=0", *overrides])
        self.log: list[LogEvent] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: CoordinatorServer | None = None
        self._thread = threading.Thread(target=self._run, name="coordinator", daemon=True)

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        events_log = EventLog("coordinator")
        events_log.listeners.append(lambda node, ev: self.log.append(ev))
        self._server = CoordinatorServer(self.config, port=0, events=events_log)
        loop.run_until_complete(self._server.start())
        self.port = self._server.port
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._server.stop())
        loop.close()

    def __enter__(self) -> "CoordinatorThread":
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


class HeartbeatWaits:
    """How long each member's heartbeats waited for their answer (sent → answered), read at the
    client's driver: its transport's sends and its responses."""

    def __init__(self) -> None:
        self.sent: dict[tuple[int, int], float] = {}
        self.waits: list[float] = []

    def watch(self, client: GroupMemberClient) -> None:
        driver, shell, waits = client.driver, client.driver.transport, self

        class Tap:
            def send(self, epoch: int, request: Any) -> None:
                if request.api == "Heartbeat":
                    waits.sent[(id(client), request.correlation_id)] = time.perf_counter()
                shell.send(epoch, request)

            def disconnect(self) -> None:
                shell.disconnect()

            def connect(self, done: Any) -> None:
                shell.connect(done)

        driver.transport = Tap()
        on_response = driver.on_response

        def answered(correlation_id: int, body: Any) -> None:
            sent = waits.sent.pop((id(client), correlation_id), None)
            if sent is not None:
                waits.waits.append(time.perf_counter() - sent)
            on_response(correlation_id, body)

        driver.on_response = answered  # type: ignore[method-assign]

    def longest(self) -> float:
        now = time.perf_counter()
        return max([*self.waits, *(now - t for t in self.sent.values()), 0.0])


@pytest.mark.e2e
async def test_a_group_keeps_heartbeating_while_the_big_requests_are_replayed(cleanup: contextlib.AsyncExitStack) -> None:
    big_requests = [
        ("Metadata", MetadataRequest([MetadataRequestTopic("t")] * 131_000)),
        ("Metadata", MetadataRequest([MetadataRequestTopic(f"u{i:07d}") for i in range(69_000)])),
        ("Metadata", MetadataRequest([MetadataRequestTopic("big")])),
        ("DescribeGroups", DescribeGroupsRequest(["g"] * 500_000)),
        ("DescribeGroups", DescribeGroupsRequest([f"{i:07d}" for i in range(130_000)])),
        ("OffsetFetch", OffsetFetchRequest("other", [OffsetFetchRequestTopic("t", [0] * 1_000_000)])),
        ("OffsetFetch", OffsetFetchRequest("other", [OffsetFetchRequestTopic("t", list(range(1 << 16, (1 << 16) + 200_000)))])),
        ("Fetch", FetchRequest([FetchTopic("t", [FetchPartition(0, 0)] * 20_000)], max_bytes=1)),
        ("Fetch", FetchRequest([FetchTopic("x" * 249, [FetchPartition(p, 0, 0) for p in range(1 << 16, (1 << 16) + 20_000)])])),
    ]
    frames = [encode_request(RequestHeader(api, 0, cid, "amplifier"), body) for cid, (api, body) in enumerate(big_requests, 1)]
    assert all(len(f) - 4 <= REQUEST_LIMIT for f in frames)
    with CoordinatorThread() as coordinator:
        async with AdminClient("127.0.0.1", coordinator.port) as admin:
            await admin.create_topics({"t": 3, "big": 65_536})  # the most the answer limit can describe
            await admin.produce("t", 0, [b"x" * 1000] * 900)
        config = dict(group_id="g", topics=["t"], session_timeout_ms=6000, heartbeat_interval_ms=500)
        clients = [GroupMemberClient(ConsumerConfig(client_id=f"c{i}", **config), port=coordinator.port) for i in range(3)]
        waits = HeartbeatWaits()
        for c in clients:
            waits.watch(c)
            cleanup.push_async_callback(c.close, False)
        await asyncio.gather(*(c.start() for c in clients))
        await asyncio.gather(*(c.wait_for(lambda c: c.state is MemberState.STABLE, 20) for c in clients))
        generation = clients[0].generation_id
        await asyncio.sleep(1.5)  # heartbeats going
        reader, writer = await asyncio.open_connection("127.0.0.1", coordinator.port, limit=64 << 20)
        try:
            for cid, data in enumerate(frames, 1):
                writer.write(data)
                await writer.drain()
                (size,) = struct.unpack(">I", await asyncio.wait_for(reader.readexactly(4), 60))
                got, _ = read_response(await asyncio.wait_for(reader.readexactly(size), 60))
                assert got == cid and size <= coordinator.config.response_max_bytes + 4
        finally:
            writer.close()
        await asyncio.sleep(1.0)  # the heartbeats sent last are answered
        assert waits.waits, "no heartbeat was answered"
        assert waits.longest() < 5.0, f"a heartbeat waited {waits.longest():.1f} s"
        assert all(c.state is MemberState.STABLE and c.generation_id == generation for c in clients)
        removed = [ev for ev in coordinator.log if ev.event in ("member_removed", "rebalance_started")
                   and ev.fields.get("group_id") == "g" and ev.fields.get("generation_id", 0) >= generation]
        assert not removed


# ----------------------------------------------------------------------------- a burst on one connection


@pytest.mark.e2e
async def test_a_burst_of_large_answers_on_one_connection_lets_other_connections_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten pipelined requests, each answered with megabytes, are handled a turn at a time: a
    request on another connection, sent once the first answer comes, is handled before the last."""
    handled: list[str] = []
    real = CoordinatorServer.on_frame

    def recording(self: CoordinatorServer, conn: Any, frame: bytes) -> None:
        handled.append(conn.peer)
        real(self, conn, frame)

    monkeypatch.setattr(CoordinatorServer, "on_frame", recording)
    burst = 10
    with CoordinatorThread() as coordinator:
        async with AdminClient("127.0.0.1", coordinator.port) as admin:
            await admin.create_topics({"wide": 50_000})
        a_reader, a_writer = await asyncio.open_connection("127.0.0.1", coordinator.port, limit=64 << 20)
        b_reader, b_writer = await asyncio.open_connection("127.0.0.1", coordinator.port)
        try:
            a_port, b_port = a_writer.get_extra_info("sockname")[1], b_writer.get_extra_info("sockname")[1]
            handled.clear()
            a_writer.write(b"".join(encode_request(RequestHeader("Metadata", 0, cid, "burst"),
                                                   MetadataRequest([MetadataRequestTopic("wide")])) for cid in range(burst)))
            await a_reader.readexactly(4)  # the first answer is coming
            cid, body = await raw_call(b_reader, b_writer, "ApiVersions", 99, ApiVersionsRequest())
            assert cid == 99 and body["error_code"] == 0
        finally:
            a_writer.close()
            b_writer.close()
    peers = [int(p.rsplit(":", 1)[1]) for p in handled]
    assert peers.count(a_port) >= 1 and peers.count(b_port) == 1
    assert peers.index(b_port) < burst, f"the probe waited for the whole burst: {peers}"
    assert a_port in peers[peers.index(b_port):], "some of the burst was still to come"


async def test_a_client_that_does_not_read_holds_only_its_own_requests(cleanup: contextlib.AsyncExitStack) -> None:
    log: list[LogEvent] = []
    server = await start_server(cleanup, log)
    async with AdminClient("127.0.0.1", server.port) as admin:
        await admin.create_topics({"wide": 50_000})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, limit=64 << 20)
    cleanup.callback(writer.close)
    requests = 30
    writer.write(b"".join(encode_request(RequestHeader("Metadata", 0, cid, "slow-reader"),
                                         MetadataRequest([MetadataRequestTopic("wide")])) for cid in range(requests)))
    await writer.drain()
    [conn] = [c for c in server.connections if c.peer.endswith(f":{writer.get_extra_info('sockname')[1]}")]
    deadline = time.monotonic() + 30
    while not (conn.writing_paused and conn.frames) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert conn.writing_paused and conn.frames, "the server should stop handling the frames of a client that does not read"
    answer = len(encode_response(0, MetadataResponse(topics=[MetadataResponseTopic("wide", partitions=[
        MetadataResponsePartition(p, 0) for p in range(50_000)])])))
    assert conn.transport is not None and conn.transport.get_write_buffer_size() < 2 * answer  # not 30 answers
    async with AdminClient("127.0.0.1", server.port) as admin:  # others are served meanwhile
        assert (await admin.topics())["wide"] == 50_000
    for _ in range(requests):  # reading, the client gets every answer
        (size,) = struct.unpack(">I", await asyncio.wait_for(reader.readexactly(4), 30))
        await asyncio.wait_for(reader.readexactly(size), 30)
