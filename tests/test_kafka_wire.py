"""The Kafka-wire listener over loopback sockets with hand-made Kafka frames (kafka-python's message
classes build them): versions and their fallback, one request at a time, the long poll, what bad
input gets (a closed connection or the API's error, never a state change), and that the event log,
the message trace and replay see Kafka clients' requests (docs/kafka-wire.md). Real clients:
tests/test_kafka_clients.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest, SyncGroupResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.kafka_wire.apis import APIS
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.eventlog import run_dir_log
from grouplab.replay import replay
from grouplab.coordinator.kafka_wire import kip848
from grouplab.tracefile import TraceFile, trace_path
from grouplab.protocol.consumer_protocol import encode_assignment
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.types import Assignment, TopicPartition

from conftest import EventRecorder

pytestmark = pytest.mark.e2e
HOST = "127.0.0.1"
CONFIG = ["group.initial.rebalance.delay.ms=0"]


class Raw:
    """One Kafka connection that sends requests and reads responses frame by frame."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    @classmethod
    async def open(cls, port: int) -> "Raw":
        return cls(*await asyncio.open_connection(HOST, port))

    def send(self, request: Any, client_id: str = "raw") -> int:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id=client_id)
        self.writer.write(bytes(request.encode(header=True, framed=True)))
        return self.correlation_id

    def send_bytes(self, payload: bytes) -> None:
        self.writer.write(struct.pack(">i", len(payload)) + payload)

    async def read(self, response_class: Any, version: int, timeout: float = 10) -> Any:
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))[0]
        payload = await asyncio.wait_for(self.reader.readexactly(size), timeout)
        return response_class.decode(payload, version=version, header=True)

    async def closed(self, timeout: float = 5) -> bool:
        return await asyncio.wait_for(self.reader.read(1), timeout) == b""

    def close(self) -> None:
        self.writer.close()


@pytest.fixture
async def server(recorder: EventRecorder) -> Any:
    srv = CoordinatorServer(BrokerConfig().with_overrides(CONFIG), HOST, 0, events=recorder.log("coordinator"),
                            kafka_port=0)
    await srv.start()
    async with AdminClient(HOST, srv.port) as admin:
        await admin.create_topics({"t": 2})
    yield srv
    await srv.stop()


def batch(*values: bytes, codec: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=v, headers=[])
    return bytes(b.build())


def produce(version: int, records: bytes, partition: int = 0, acks: int = -1) -> Any:
    c = ProduceRequest
    return c[version](transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[c.TopicProduceData(
        name="t", partition_data=[c.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def fetch(version: int, offset: int, max_wait_ms: int, session_id: int = 0, session_epoch: int = -1,
          min_bytes: int = 1) -> Any:
    c = FetchRequest
    return c[version](replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
                      session_id=session_id, session_epoch=session_epoch, rack_id="", forgotten_topics_data=[],
                      topics=[c.FetchTopic(topic="t", partitions=[c.FetchTopic.FetchPartition(
                          partition=0, fetch_offset=offset, log_start_offset=-1, partition_max_bytes=1 << 20,
                          current_leader_epoch=-1, last_fetched_epoch=-1)])])


def records_of(response: Any) -> list[bytes]:
    """The values of the data records of the first partition's batches (one per stored batch)."""
    records = MemoryRecords(bytes(response.responses[0].partitions[0].records or b""))
    values = []
    while (b := records.next_batch()) is not None:
        if not b.is_control_batch:
            values += [r.value for r in b]
    return values


# ----------------------------------------------------------------------------- versions


async def test_api_versions_lists_the_supported_ranges_with_header_v0(server: CoordinatorServer) -> None:
    raw = await Raw.open(server.kafka_port)
    raw.send(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    resp = await raw.read(ApiVersionsResponse, 3)
    assert resp.error_code == 0
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got == {a.key: (a.min_version, a.max_version) for a in APIS.values()}
    raw.close()


async def test_api_versions_too_new_gets_unsupported_version_at_v0(server: CoordinatorServer) -> None:
    """KIP-511: the client learns the supported range from a v0 answer and asks again."""
    raw = await Raw.open(server.kafka_port)
    # ApiVersions v9 (a future version): the header is v2; the body is unknown to us.
    raw.send_bytes(struct.pack(">hhih", 18, 9, 7, 1) + b"x" + b"\x00" + b"\x00\x00")
    resp = await raw.read(ApiVersionsResponse, 0)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION and resp.header.correlation_id == 7
    assert {k.api_key for k in resp.api_keys} == set(APIS)
    raw.send(ApiVersionsRequest[0]())  # the same connection carries on
    assert (await raw.read(ApiVersionsResponse, 0)).error_code == 0
    raw.close()


@pytest.mark.parametrize("version", [8, 10, 12])
async def test_authorized_operations_asked_for_are_all_a_resource_supports(server: CoordinatorServer,
                                                                           version: int) -> None:
    """As a Kafka broker without an authorizer: every operation of the topic (and, v8-10, of the
    cluster) when the request asks; not asked, Kafka's INT32_MIN (None)."""
    raw = await Raw.open(server.kafka_port)
    for asked in (True, False):
        raw.send(MetadataRequest[version](topics=[MetadataRequest.MetadataRequestTopic(name="t")],
                                          allow_auto_topic_creation=False, include_topic_authorized_operations=asked,
                                          include_cluster_authorized_operations=asked))
        meta = await raw.read(MetadataResponse, version)
        (topic,) = meta.topics
        assert topic.authorized_operations == ({3, 4, 5, 6, 7, 8, 10, 11} if asked else None)
        if version <= 10:
            assert meta.authorized_operations == ({5, 7, 8, 9, 10, 11, 12} if asked else None)
    raw.close()


async def test_metadata_v12_answers_topics_asked_for_by_id(server: CoordinatorServer) -> None:
    """librdkafka resolves a KIP-848 assignment (topic ids) so: a topic by id alone, its name null."""
    raw = await Raw.open(server.kafka_port)
    T = MetadataRequest.MetadataRequestTopic
    raw.send(MetadataRequest[12](topics=[T(name="t")], allow_auto_topic_creation=False))
    (named,) = (await raw.read(MetadataResponse, 12)).topics
    unknown = uuid.UUID(int=1)
    raw.send(MetadataRequest[12](topics=[T(name=None, topic_id=named.topic_id), T(name=None, topic_id=unknown)],
                                 allow_auto_topic_creation=True))
    by_id = (await raw.read(MetadataResponse, 12)).topics
    assert [(t.name, t.topic_id, t.error_code, len(t.partitions)) for t in by_id] == [
        ("t", named.topic_id, 0, 2), (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID, 0)]
    raw.close()


@pytest.mark.parametrize("version", [1, 9, 12])
async def test_metadata_and_find_coordinator_advertise_the_kafka_port(server: CoordinatorServer, version: int) -> None:
    raw = await Raw.open(server.kafka_port)
    topics = [MetadataRequest.MetadataRequestTopic(name="t")]
    raw.send(MetadataRequest[version](topics=topics, allow_auto_topic_creation=False))
    meta = await raw.read(MetadataResponse, version)
    assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [(0, HOST, server.kafka_port)]
    assert [(t.name, len(t.partitions)) for t in meta.topics] == [("t", 2)]
    for fc_version in (1, 4):
        if fc_version >= 4:
            raw.send(FindCoordinatorRequest[fc_version](key_type=0, coordinator_keys=["g"]))
            fc = (await raw.read(FindCoordinatorResponse, fc_version)).coordinators[0]
        else:
            raw.send(FindCoordinatorRequest[fc_version](key="g", key_type=0))
            fc = await raw.read(FindCoordinatorResponse, fc_version)
        assert (fc.error_code, fc.host, fc.port) == (0, HOST, server.kafka_port)
    raw.close()


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("payload", [
    b"\x00",                                              # shorter than a header
    struct.pack(">hhi", 999, 0, 1) + b"\x00\x00",         # an unknown API key
    struct.pack(">hhi", 11, 2, 1) + b"\x00\x00",          # JoinGroup v2: below the supported range
    struct.pack(">hhi", 11, 9, 1) + b"\x00\x00\x00\x05",  # JoinGroup v9 whose body does not decode
    struct.pack(">hhi", 1, 12, 1) + b"\xff" * 40,         # Fetch v12: garbage
    struct.pack(">hhih", 10, 1, 1, 30) + b"short",        # a client id longer than the frame
    struct.pack(">hhih", 11, 9, 1, -1) + b"\x01\x00\x09",  # a header tagged field longer than the frame
])
async def test_a_request_that_cannot_be_read_closes_the_connection_and_changes_nothing(
        server: CoordinatorServer, recorder: EventRecorder, payload: bytes) -> None:
    raw = await Raw.open(server.kafka_port)
    raw.send_bytes(payload)
    assert await raw.closed()
    assert not server.broker.groups and recorder.events("bad_request")
    raw = await Raw.open(server.kafka_port)  # the listener carries on
    raw.send(ApiVersionsRequest[0]())
    assert (await raw.read(ApiVersionsResponse, 0)).error_code == 0
    raw.close()


async def test_a_frame_over_the_limit_closes_the_connection(server: CoordinatorServer) -> None:
    raw = await Raw.open(server.kafka_port)
    raw.writer.write(struct.pack(">i", server.config.socket_request_max_bytes + 1) + b"\x00" * 100)
    assert await raw.closed()


async def test_a_produce_with_a_bad_crc_is_refused_and_nothing_is_appended(server: CoordinatorServer) -> None:
    raw = await Raw.open(server.kafka_port)
    good = batch(b"a", b"b")
    bad = good[:-1] + bytes([good[-1] ^ 1])
    raw.send(produce(9, bad))
    resp = await raw.read(ProduceResponse, 9)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    two = good + good  # two batches for one partition: Kafka wants exactly one
    raw.send(produce(9, two))
    resp = await raw.read(ProduceResponse, 9)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    assert server.broker.logs.existing("t", 0) is None or server.broker.logs.existing("t", 0).log_end_offset == 0
    raw.close()


@pytest.mark.parametrize("codec,name,library", [(2, "snappy", "has_snappy"), (3, "lz4", "has_lz4"),
                                                  (4, "zstd", "has_zstd")])
def test_a_codec_whose_library_is_missing_is_unsupported_compression_type(
        codec: int, name: str, library: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """UNSUPPORTED_COMPRESSION_TYPE (76), as docs/kafka-wire.md §3 says, not CORRUPT_MESSAGE: kafka.record
    raises UnsupportedCodecError for a codec whose library is not installed."""
    from kafka.record.util import calc_crc32c

    from grouplab.coordinator.kafka_wire.records import BadRecords, decode_batch

    monkeypatch.setattr(f"kafka.codec.{library}", lambda: False)
    data = bytearray(batch(b"x" * 100))
    (attributes,) = struct.unpack_from(">h", data, 21)  # after base offset, length, epoch, magic, CRC
    struct.pack_into(">h", data, 21, (attributes & ~7) | codec)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))  # the CRC covers attributes onwards
    with pytest.raises(BadRecords) as refused:
        decode_batch(bytes(data))
    assert refused.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE and name in refused.value.message.lower()


async def test_an_incremental_fetch_session_is_refused_so_the_client_fetches_in_full(server: CoordinatorServer) -> None:
    raw = await Raw.open(server.kafka_port)
    raw.send(fetch(11, 0, 0, session_id=77, session_epoch=3))
    resp = await raw.read(FetchResponse, 11)
    assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    raw.send(fetch(11, 0, 0))  # a full fetch: answered, and no session is created (session id 0)
    resp = await raw.read(FetchResponse, 11)
    assert (resp.error_code, resp.session_id) == (0, 0)
    raw.close()


# ----------------------------------------------------------------------------- produce, fetch, long poll


@pytest.mark.parametrize("codec", [0, 1])  # none, gzip
async def test_a_produced_batch_is_fetched_back(server: CoordinatorServer, codec: int) -> None:
    raw = await Raw.open(server.kafka_port)
    raw.send(produce(9, batch(b"x" * 300, b"y" * 300, codec=codec)))
    part = (await raw.read(ProduceResponse, 9)).responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (0, 0)
    raw.send(fetch(12, 0, 0))
    assert records_of(await raw.read(FetchResponse, 12)) == [b"x" * 300, b"y" * 300]
    raw.close()


async def test_a_fetch_waits_for_data_and_holds_back_the_next_request(server: CoordinatorServer) -> None:
    """Kafka's long poll, and one request at a time per connection: the Metadata sent after a
    parked Fetch is answered after it."""
    consumer = await Raw.open(server.kafka_port)
    producer = await Raw.open(server.kafka_port)
    consumer.send(fetch(12, 0, max_wait_ms=30_000))
    consumer.send(MetadataRequest[9](topics=None, allow_auto_topic_creation=False))
    await asyncio.sleep(0.2)
    assert len(server.kafka.parked) == 1  # nothing to read: parked, not answered
    producer.send(produce(9, batch(b"hello")))
    await producer.read(ProduceResponse, 9)
    started = time.monotonic()
    resp = await consumer.read(FetchResponse, 12)
    assert records_of(resp) == [b"hello"] and time.monotonic() - started < 20
    meta = await consumer.read(MetadataResponse, 9)
    assert meta.header.correlation_id == 2
    consumer.close()
    producer.close()


async def test_a_fetch_with_nothing_to_read_is_answered_after_max_wait(server: CoordinatorServer) -> None:
    raw = await Raw.open(server.kafka_port)
    raw.send(fetch(12, 0, max_wait_ms=200))
    resp = await raw.read(FetchResponse, 12)
    assert resp.error_code == 0 and records_of(resp) == []
    assert not server.kafka.parked
    raw.close()


async def test_a_fetch_waits_until_min_bytes_of_records_are_there(server: CoordinatorServer) -> None:
    """min_bytes counts bytes (a batch's 61-byte header, and 16 per record plus its key, value and
    headers, as max_bytes does), not records: one batch of a 100-byte record (177 bytes) does not
    answer a Fetch for 500 bytes, nor do two; the third does, and the answer carries all three."""
    consumer = await Raw.open(server.kafka_port)
    producer = await Raw.open(server.kafka_port)
    consumer.send(fetch(12, 0, max_wait_ms=30_000, min_bytes=500))
    for n, value in enumerate((b"a" * 100, b"b" * 100)):
        producer.send(produce(9, batch(value)))
        await producer.read(ProduceResponse, 9)
        await asyncio.sleep(0.2)
        assert len(server.kafka.parked) == 1, f"answered after {n + 1} batch(es) of 177 bytes, min_bytes is 500"
    producer.send(produce(9, batch(b"c" * 100)))
    await producer.read(ProduceResponse, 9)
    resp = await consumer.read(FetchResponse, 12)
    assert records_of(resp) == [b"a" * 100, b"b" * 100, b"c" * 100]
    consumer.close()
    producer.close()


async def test_min_bytes_not_reached_is_answered_with_what_there_is_after_max_wait(server: CoordinatorServer) -> None:
    raw = await Raw.open(server.kafka_port)
    raw.send(produce(9, batch(b"small")))
    await raw.read(ProduceResponse, 9)
    started = time.monotonic()
    raw.send(fetch(12, 0, max_wait_ms=400, min_bytes=10_000))
    resp = await raw.read(FetchResponse, 12)
    assert records_of(resp) == [b"small"] and time.monotonic() - started >= 0.35
    raw.send(fetch(12, 0, max_wait_ms=30_000, min_bytes=1))  # one record is enough for min_bytes=1: at once
    assert records_of(await raw.read(FetchResponse, 12, timeout=5)) == [b"small"]
    raw.close()

def test_headers_are_read_and_written_as_kafka_python_does() -> None:
    """The codec reads the request header and writes the response header itself: the same bytes and
    values as kafka-python's (header v1/v2 requests, v0/v1 responses, ApiVersions always v0)."""
    from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse

    from grouplab.coordinator.kafka_wire.codec import api_versions_response, decode_request, encode_response

    for version in (0, 4):  # header v1 and v2
        req = HeartbeatRequest[version](group_id="g", generation_id=3, member_id="m")
        req.with_header(correlation_id=41, client_id="c-1")
        got = decode_request(bytes(req.encode(header=True)))
        assert (got.correlation_id, got.client_id, got.body.group_id, got.body.generation_id) == (41, "c-1", "g", 3)
    # a null client id and an unknown tagged field in a v2 header
    body = HeartbeatRequest[4](group_id="g", generation_id=3, member_id="m").encode()
    got = decode_request(struct.pack(">hhih", 12, 4, 7, -1) + b"\x01\x05\x02ab" + bytes(body))
    assert (got.client_id, got.body.member_id) == ("", "m")
    for response in [HeartbeatResponse[0](error_code=27), HeartbeatResponse[4](throttle_time_ms=0, error_code=27),
                     api_versions_response(3), api_versions_response(0)]:
        response.with_header(correlation_id=9)
        expected = bytes(response.encode(header=True, framed=True))
        assert encode_response(response, 9) == expected


def test_reused_answer_bodies_encode_as_a_fresh_encoding_would() -> None:
    """Heartbeat and OffsetCommit answers are encoded once per distinct content and framed with each
    request's correlation id: byte for byte what encoding each answer afresh gives."""
    from grouplab.coordinator.kafka_wire.codec import KafkaRequest, encode_response
    from grouplab.coordinator.kafka_wire.listener import KafkaConnection, KafkaReplyTo
    from grouplab.coordinator.kafka_wire.translate import View, to_kafka
    from grouplab.protocol import messages as m

    view = View("127.0.0.1", 9092)
    commit = m.OffsetCommitResponse(topics=[m.OffsetCommitResponseTopic("t", [
        m.OffsetCommitResponsePartition(0), m.OffsetCommitResponsePartition(3, ErrorCode.OFFSET_METADATA_TOO_LARGE)])])
    refused = m.OffsetCommitResponse(error_code=ErrorCode.ILLEGAL_GENERATION,
                                     topics=[m.OffsetCommitResponseTopic("t", [m.OffsetCommitResponsePartition(0)])])
    cases = [(APIS[12], m.HeartbeatResponse()), (APIS[12], m.HeartbeatResponse(ErrorCode.REBALANCE_IN_PROGRESS)),
             (APIS[8], commit), (APIS[8], refused),
             (APIS[8], m.ErrorResponse(ErrorCode.UNKNOWN_SERVER_ERROR, "x"))]
    for api, body in cases:
        for version in range(api.min_version, api.max_version + 1):
            for cid in (1, 2, 1 << 30):
                token = KafkaReplyTo(None, KafkaRequest(api, version, cid, "c", None), view)  # type: ignore[arg-type]
                fresh = encode_response(to_kafka(api, version, body, view), cid)
                assert KafkaConnection._encode(token, body, cid) == fresh, (api.name, version, body)


# ----------------------------------------------------------------------------- the trace and replay


async def test_a_kafka_clients_run_is_traced_and_replays_identically(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    events = run_dir_log(run_dir, "coordinator")
    trace = TraceFile(trace_path(run_dir))
    srv = CoordinatorServer(BrokerConfig().with_overrides(CONFIG), HOST, 0, events=events, trace=trace, kafka_port=0)
    await srv.start()
    raw = await Raw.open(srv.kafka_port)
    c = JoinGroupRequest
    join = c[9](group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                group_instance_id=None, protocol_type="consumer", reason=None,
                protocols=[c.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff")])
    raw.send(join)
    first = await raw.read(JoinGroupResponse, 9)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    join.member_id = first.member_id
    raw.send(join)
    second = await raw.read(JoinGroupResponse, 9)
    assert (second.error_code, second.generation_id, second.leader) == (0, 1, first.member_id)
    raw.send(produce(9, batch(b"r")))
    await raw.read(ProduceResponse, 9)
    raw.close()
    await srv.stop()
    events.close()
    trace.close()
    result = replay(run_dir)
    assert result.identical, result.difference
    assert result.requests >= 3


async def test_a_consumer_protocol_run_is_traced_and_replays_identically(tmp_path: Path) -> None:
    """KIP-848 on the Kafka wire: a v0 join (the coordinator gives the member id, which the trace
    records and the replay hands out again), a heartbeat owning the assignment by topic id, a leave."""
    run_dir = tmp_path / "run"
    events = run_dir_log(run_dir, "coordinator")
    trace = TraceFile(trace_path(run_dir))
    srv = CoordinatorServer(BrokerConfig().with_overrides([*CONFIG, "num.partitions=2"]), HOST, 0, events=events,
                            trace=trace, kafka_port=0)
    await srv.start()
    assert srv.kafka_port is not None
    raw = await Raw.open(srv.kafka_port)
    raw.send(MetadataRequest[9](topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True,
                                include_topic_authorized_operations=False))
    await raw.read(MetadataResponse, 9)
    H: Any = kip848.ConsumerGroupHeartbeatRequest  # indexed by version (kafka-python's metaclass)
    R: Any = kip848.ConsumerGroupHeartbeatResponse
    raw.send(H[0](group_id="cg", member_id="", member_epoch=0, rebalance_timeout_ms=10_000,
                  subscribed_topic_names=["t"], topic_partitions=[]))
    joined = await raw.read(R, 0)
    assert joined.error_code == 0 and joined.member_id and joined.member_epoch == 1
    owned = joined.assignment.topic_partitions
    assert [sorted(tp.partitions) for tp in owned] == [[0, 1]]
    raw.send(H[0](group_id="cg", member_id=joined.member_id, member_epoch=1,
                  topic_partitions=[H.TopicPartitions(topic_id=owned[0].topic_id, partitions=[0, 1])]))
    beat = await raw.read(R, 0)
    assert (beat.error_code, beat.member_epoch) == (0, 1)
    raw.send(H[0](group_id="cg", member_id=joined.member_id, member_epoch=-1))
    left = await raw.read(R, 0)
    assert (left.error_code, left.member_epoch) == (0, -1)
    raw.close()
    await srv.stop()
    events.close()
    trace.close()
    result = replay(run_dir)
    assert result.identical, result.difference
    assert result.member_ids == 1


async def test_a_kafka_client_on_the_msgpack_port_is_told_where_to_go(server: CoordinatorServer,
                                                                     recorder: EventRecorder) -> None:
    raw = await Raw.open(server.port)  # grouplab's own port, not the Kafka one
    raw.send(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    assert await raw.closed()
    said = [ev.fields["error"] for ev in recorder.events("bad_request")]
    assert any(f"port {server.kafka_port}" in text for text in said), said


async def test_delete_groups_over_the_kafka_wire(server: CoordinatorServer) -> None:
    """An Empty group (a simple consumer's commit made it) is deleted; an unknown one is
    GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP."""
    from kafka.protocol.admin.groups import DeleteGroupsRequest, DeleteGroupsResponse
    from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

    raw = await Raw.open(server.kafka_port)
    c = OffsetCommitRequest
    raw.send(c[8](group_id="simple", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                  topics=[c.OffsetCommitRequestTopic(name="t", partitions=[
                      c.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                          partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])]))
    commit = await raw.read(OffsetCommitResponse, 8)
    assert commit.topics[0].partitions[0].error_code == 0
    j = JoinGroupRequest
    member = await Raw.open(server.kafka_port)
    join = j[9](group_id="busy", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                group_instance_id="i", protocol_type="consumer", reason=None,
                protocols=[j.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff")])
    member.send(join)
    assert (await member.read(JoinGroupResponse, 9)).error_code == 0
    raw.send(DeleteGroupsRequest[2](groups_names=["simple", "nosuch", "busy"]))
    resp = await raw.read(DeleteGroupsResponse, 2)
    got = {r.group_id: r.error_code for r in resp.results}
    assert got == {"simple": 0, "nosuch": ErrorCode.GROUP_ID_NOT_FOUND, "busy": ErrorCode.NON_EMPTY_GROUP}
    assert "simple" not in server.broker.groups and "busy" in server.broker.groups
    raw.close()
    member.close()


# ----------------------------------------------------------------------------- topic and cluster admin


async def test_delete_topics_by_name_id_both_or_neither_at_v6(server: CoordinatorServer) -> None:
    """v6 names a topic by name or by id: a name is deleted; grouplab's topics have no ids, so an
    id is UNKNOWN_TOPIC_ID; both or neither INVALID_REQUEST, as Kafka answers."""
    from kafka.protocol.admin.topics import DeleteTopicsRequest, DeleteTopicsResponse

    raw = await Raw.open(server.kafka_port)
    an_id, another_id = uuid.uuid4(), uuid.uuid4()
    state = DeleteTopicsRequest.DeleteTopicState
    raw.send(DeleteTopicsRequest[6](timeout_ms=1000, topics=[
        state(name="t", topic_id=None), state(name=None, topic_id=an_id), state(name="t", topic_id=another_id),
        state(name=None, topic_id=None), state(name="nope", topic_id=None)]))
    resp = await raw.read(DeleteTopicsResponse, 6)
    got = {(r.name, r.topic_id): r.error_code for r in resp.responses}  # (Kafka answers them in any order)
    assert got == {("t", None): 0, ("nope", None): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   (None, an_id): ErrorCode.UNKNOWN_TOPIC_ID, ("t", another_id): ErrorCode.INVALID_REQUEST,
                   (None, None): ErrorCode.INVALID_REQUEST}
    assert "t" not in server.broker.topics.partitions
    raw.close()


@pytest.mark.parametrize("version, code", [(2, ErrorCode.INVALID_REQUEST), (3, ErrorCode.TOPIC_DELETION_DISABLED),
                                           (5, ErrorCode.TOPIC_DELETION_DISABLED)])
async def test_delete_topics_while_disabled_is_refused_as_kafka_refuses_it_at_that_version(
        version: int, code: ErrorCode) -> None:
    from kafka.protocol.admin.topics import DeleteTopicsRequest, DeleteTopicsResponse

    config = BrokerConfig().with_overrides(CONFIG + ["delete.topic.enable=false"])
    async with CoordinatorServer(config, HOST, 0, kafka_port=0) as srv:
        async with AdminClient(HOST, srv.port) as admin:
            await admin.create_topics({"t": 1})
        raw = await Raw.open(srv.kafka_port)
        raw.send(DeleteTopicsRequest[version](topic_names=["t"], timeout_ms=1000))
        resp = await raw.read(DeleteTopicsResponse, version)
        assert [(r.name, r.error_code) for r in resp.responses] == [("t", code)]
        assert srv.broker.topics.partitions == {"t": 1}
        raw.close()


async def test_a_fetch_parked_on_a_topic_that_is_deleted_is_answered_at_once(server: CoordinatorServer) -> None:
    """Kafka completes a delayed fetch whose partition is gone; so does the listener: the Fetch
    answers UNKNOWN_TOPIC_OR_PARTITION right after the deletion, long before its max_wait_ms."""
    consumer = await Raw.open(server.kafka_port)
    consumer.send(fetch(12, 0, max_wait_ms=60_000))
    while not server.kafka.parked:
        await asyncio.sleep(0.01)
    started = time.monotonic()
    async with AdminClient(HOST, server.port) as admin:
        assert await admin.delete_topics(["t"]) == {"t": (0, None)}
    resp = await consumer.read(FetchResponse, 12, timeout=30)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert time.monotonic() - started < 30 and not server.kafka.parked
    consumer.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_describe_configs_at_each_version(server: CoordinatorServer, version: int) -> None:
    """Sources and synonyms from v1, types and documentation from v3; another broker id is
    Kafka's INVALID_REQUEST for that resource alone."""
    from kafka.protocol.admin.configs import DescribeConfigsRequest, DescribeConfigsResponse

    raw = await Raw.open(server.kafka_port)
    res = DescribeConfigsRequest.DescribeConfigsResource
    raw.send(DescribeConfigsRequest[version](include_synonyms=True, include_documentation=True, resources=[
        res(resource_type=4, resource_name="0", configuration_keys=["group.initial.rebalance.delay.ms"]),
        res(resource_type=4, resource_name="3", configuration_keys=None),
        res(resource_type=2, resource_name="t", configuration_keys=["retention.ms"])]))
    resp = await raw.read(DescribeConfigsResponse, version)
    broker, other, topic = resp.results
    (delay,) = broker.configs
    assert (broker.error_code, delay.name, delay.value, delay.read_only, delay.config_source) == (
        0, "group.initial.rebalance.delay.ms", "0", True, 4)
    assert [(s.name, s.value, s.source) for s in delay.synonyms] == [
        ("group.initial.rebalance.delay.ms", "0", 4), ("group.initial.rebalance.delay.ms", "3000", 5)]
    assert (other.error_code, other.configs) == (ErrorCode.INVALID_REQUEST, [])
    assert other.error_message == "Unexpected broker id, expected 0 or empty string, but received 3"
    assert [(c.name, c.value, c.config_source) for c in topic.configs] == [("retention.ms", "-1", 5)]
    if version >= 3:
        assert (delay.config_type, bool(delay.documentation)) == (3, True)
    raw.close()


async def test_describe_cluster_advertises_the_kafka_port_and_refuses_controllers(server: CoordinatorServer) -> None:
    from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse

    raw = await Raw.open(server.kafka_port)
    for version in (0, 1, 2):
        raw.send(DescribeClusterRequest[version](include_cluster_authorized_operations=True, endpoint_type=1,
                                                 include_fenced_brokers=True))
        resp = await raw.read(DescribeClusterResponse, version)
        assert (resp.error_code, resp.cluster_id, resp.controller_id) == (0, "grouplab", 0)
        assert [(b.broker_id, b.host, b.port) for b in resp.brokers] == [(0, HOST, server.kafka_port)]
        assert resp.authorized_operations == {5, 7, 8, 9, 10, 11, 12}  # asked: every cluster operation
    raw.send(DescribeClusterRequest[0](include_cluster_authorized_operations=False))
    assert (await raw.read(DescribeClusterResponse, 0)).authorized_operations is None  # not asked: INT32_MIN
    for endpoint, code in ((2, ErrorCode.MISMATCHED_ENDPOINT_TYPE), (7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)):
        raw.send(DescribeClusterRequest[1](include_cluster_authorized_operations=False, endpoint_type=endpoint))
        resp = await raw.read(DescribeClusterResponse, 1)
        assert (resp.error_code, resp.brokers) == (code, [])
    raw.close()


# ----------------------------------------------------------------------------- what a Kafka client holds


def test_wire_holdings_follow_sync_join_and_leave() -> None:
    """The member lines the listener writes for a Kafka client (holdings.py): a SyncGroup answer
    assigns what is new and revokes what is gone; a JoinGroup revokes what its subscription does
    not list as owned (all, for an eager client); a LeaveGroup revokes the rest."""
    from grouplab.coordinator.kafka_wire.holdings import WireHoldings, client_node
    from grouplab.protocol.consumer_protocol import encode_assignment, encode_subscription
    from grouplab.protocol.messages import (JoinGroupRequest, JoinGroupRequestProtocol, LeaveGroupRequest,
                                   LeaveGroupRequestMember, SyncGroupRequest, SyncGroupResponse)
    from grouplab.protocol.types import Assignment, Subscription, TopicPartition

    def tps(*ps: int) -> list[TopicPartition]:
        return [TopicPartition("t", p) for p in ps]

    def sync(generation: int, *ps: int, error: int = 0) -> list[Any]:
        return h.synced(SyncGroupRequest("g", generation, "m"),
                        SyncGroupResponse(error_code=error, assignment=encode_assignment(Assignment(tps(*ps)))))

    def join(*owned: int) -> list[Any]:
        meta = encode_subscription(Subscription(topics=["t"], owned_partitions=tps(*owned)))
        return h.joining(JoinGroupRequest("g", 6000, 6000, "m", "consumer", [JoinGroupRequestProtocol("range", meta)]))

    def lines(out: list[Any]) -> list[tuple[str, list[list[Any]], str | None]]:
        return [(e.NAME, e.partitions, getattr(e, "reason", None)) for e in out]

    h = WireHoldings()
    assert lines(sync(1, 0, 1)) == [("partitions_assigned", [["t", 0], ["t", 1]], None)]
    assert lines(sync(2, 1, 2)) == [("partitions_revoked", [["t", 0]], "reassigned"),
                                    ("partitions_assigned", [["t", 2]], None)]
    assert sync(3, 5, error=27) == []  # an error answer assigns nothing
    assert lines(join(1)) == [("partitions_revoked", [["t", 2]], "rejoining")]  # cooperative: keeps what it owns
    assert lines(join()) == [("partitions_revoked", [["t", 1]], "rejoining")]  # eager: owns nothing when it asks
    assert join() == []
    sync(4, 3)
    assert lines(h.leaving(LeaveGroupRequest("g", [LeaveGroupRequestMember("m")]))) == [
        ("partitions_revoked", [["t", 3]], "closing")]
    assert h.leaving(LeaveGroupRequest("g", [LeaveGroupRequestMember("m")])) == []
    assert h.synced(SyncGroupRequest("g", 5, "m"), SyncGroupResponse(assignment=b"\xff\x00junk")) == []
    assert (client_node("real-1"), client_node(""), client_node("coordinator")) == (
        "real-1", "kafka-client-anonymous", "kafka-client-coordinator")


async def test_grouplab_coordinator_with_a_run_dir_keeps_each_kafka_clients_holdings(tmp_path: Path) -> None:
    """`grouplab coordinator --kafka-port --run-dir` writes a Kafka client's node as `grouplab run`
    does (it wrote none before): here a lone member that leads and assigns itself both partitions."""
    root = Path(__file__).resolve().parent.parent
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "grouplab.cli", "coordinator", "--port", "0", "--kafka-port", "0",
                             "--run-dir", str(run_dir), "--config", CONFIG[0], "--config", "num.partitions=2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=root,
                            env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"})  # one line
    try:
        assert proc.stderr is not None
        said: list[str] = []
        while not said or "Kafka clients on " not in said[-1]:
            said.append(await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 30))
            assert said[-1], f"the coordinator ended: {said}"
        kafka_port = int(said[-1].split("Kafka clients on ")[1].split()[0].rsplit(":", 1)[1])
        raw = await Raw.open(kafka_port)
        raw.send(MetadataRequest[9](topics=[MetadataRequest.MetadataRequestTopic(name="t")],
                                    allow_auto_topic_creation=True, include_topic_authorized_operations=False),
                 client_id="real-1")
        await raw.read(MetadataResponse, 9)  # t is created, with num.partitions=2
        c = JoinGroupRequest
        join = c[9](group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                    group_instance_id=None, protocol_type="consumer", reason=None,
                    protocols=[c.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x01\x00\x01t"
                                                          b"\xff\xff\xff\xff")])
        raw.send(join, client_id="real-1")
        join.member_id = (await raw.read(JoinGroupResponse, 9)).member_id
        raw.send(join, client_id="real-1")
        joined = await raw.read(JoinGroupResponse, 9)
        assert joined.error_code == 0 and joined.leader == join.member_id
        s = SyncGroupRequest
        mine = encode_assignment(Assignment([TopicPartition("t", 0), TopicPartition("t", 1)]))
        raw.send(s[5](group_id="g", generation_id=joined.generation_id, member_id=join.member_id,
                      group_instance_id=None, protocol_type="consumer", protocol_name="range",
                      assignments=[s.SyncGroupRequestAssignment(member_id=join.member_id, assignment=mine)]),
                 client_id="real-1")
        assert (await raw.read(SyncGroupResponse, 5)).error_code == 0
        raw.close()
        proc.send_signal(signal.SIGINT)
        assert await asyncio.to_thread(proc.wait, 10) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [json.loads(x) for x in (run_dir / "real-1.jsonl").read_text().splitlines()]
    assigned = [x for x in lines if x.get("event") == "partitions_assigned"]
    assert assigned and assigned[0]["partitions"] == [["t", 0], ["t", 1]], lines
