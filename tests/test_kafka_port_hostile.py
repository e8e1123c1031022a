"""No client hurts another on the Kafka port (issue 22, cases 3-5): a produced batch is checked
against message.max.bytes and an inflation budget before any record is built; a connection that
never reads its answers is muted, its queued bytes bounded; a malformed frame is refused cheaply.
Unit tests of the bounded decode here; end-to-end tests, with a protected group of kafka-python
consumers and a bystander heartbeating beside the hostile client, below them. The msgpack port's
own hostile-input tests: tests/test_answer_limits.py, tests/test_server_queues.py."""

from __future__ import annotations

import gzip
from typing import Any

import pytest

from grouplab.coordinator.kafka_wire import records as records_module
from grouplab.coordinator.kafka_wire.records import BadRecords, decode_batch, inflate_budget
from grouplab.protocol.errors import ErrorCode

from hostile_kafka import empty_records, one_record, raw_batch

LIMIT = 100_000  # message.max.bytes in the unit tests


class _Spy:
    """Counts the records decode_batch builds and the bytes the gzip inflater hands back."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.records = 0
        self.inflated = 0
        real_record = records_module.Record
        real_gunzip = records_module._INFLATERS[1]

        def record(*args: Any, **kwargs: Any) -> Any:
            self.records += 1
            return real_record(*args, **kwargs)

        def gunzip(payload: Any, limit: int) -> bytes:
            out = real_gunzip[2](payload, limit)
            self.inflated += len(out)
            return out

        monkeypatch.setattr(records_module, "Record", record)
        monkeypatch.setitem(records_module._INFLATERS, 1, (real_gunzip[0], real_gunzip[1], gunzip))


def _refused(data: bytes, limit: int = LIMIT) -> BadRecords:
    with pytest.raises(BadRecords) as refused:
        decode_batch(data, limit)
    return refused.value


def test_a_header_count_that_cannot_fit_is_refused_before_inflating(monkeypatch: pytest.MonkeyPatch) -> None:
    """Case 3a in small: many empty records compress to almost nothing; their count alone says the
    stored batch would pass message.max.bytes, so nothing is inflated and no record is built."""
    spy = _Spy(monkeypatch)
    count = LIMIT // records_module.MIN_STORED_RECORD_BYTES + 1
    data = raw_batch(empty_records(count), count, codec=1)
    assert len(data) < LIMIT // 2
    refused = _refused(data)
    assert refused.code == ErrorCode.MESSAGE_TOO_LARGE and f"{count} records" in refused.message
    assert spy.inflated == 0 and spy.records == 0


def test_a_record_that_inflates_past_the_budget_is_refused_after_at_most_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Case 3b in small: one record of 20 MB of zeros (about 20 KB gzipped): inflating stops one
    byte past the budget, and no record is built."""
    spy = _Spy(monkeypatch)
    data = raw_batch(one_record(bytes(20_000_000)), 1, codec=1)
    assert len(data) < LIMIT
    refused = _refused(data)
    assert refused.code == ErrorCode.MESSAGE_TOO_LARGE
    assert spy.inflated == inflate_budget(1, LIMIT) + 1 and spy.records == 0


def test_a_legal_compressed_batch_is_accepted_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Spy(monkeypatch)
    values = [bytes([i]) * 100 for i in range(50)]
    records = b"".join(one_record(v) for v in values)  # offset deltas all 0: kafka-python does not check them
    batch = decode_batch(raw_batch(records, len(values), codec=1), LIMIT)
    assert [r.value for r in batch.records] == values
    assert spy.records == len(values) and spy.inflated == len(records)


def test_a_batch_just_within_the_budget_is_inflated() -> None:
    value = bytes(LIMIT - 100)
    batch = decode_batch(raw_batch(one_record(value), 1, codec=1), LIMIT)
    assert batch.records[0].value == value


def test_concatenated_gzip_members_are_read_as_one_stream() -> None:
    """Java's GZIPInputStream reads concatenated members; so does the bounded inflater."""
    first, second = one_record(b"a" * 10), one_record(b"b" * 10)
    payload = gzip.compress(first) + gzip.compress(second)
    assert records_module.inflate(1, payload, 10_000) == first + second


def test_a_torn_gzip_stream_is_corrupt_message() -> None:
    whole = raw_batch(one_record(b"x" * 1000), 1, codec=1)
    payload = whole[61:-8]  # the gzip trailer and part of the stream cut off
    with pytest.raises(BadRecords) as refused:
        records_module.inflate(1, payload, 10_000)
    assert refused.value.code == ErrorCode.CORRUPT_MESSAGE


def test_garbage_that_is_not_gzip_is_corrupt_message() -> None:
    with pytest.raises(BadRecords) as refused:
        records_module.inflate(1, b"not gzip at all" * 10, 10_000)
    assert refused.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("count", [0, -1])
def test_a_record_count_below_one_is_invalid_record_as_kafka(count: int) -> None:
    """Kafka's LogValidator.validateBatch: 'Invalid reported count for record batch'."""
    assert _refused(raw_batch(b"", count)).code == ErrorCode.INVALID_RECORD


def test_a_batch_over_message_max_bytes_as_sent_is_message_too_large() -> None:
    """Kafka checks the batch as sent (compressed or not) against max.message.bytes."""
    data = raw_batch(one_record(bytes(2000)), 1)
    assert _refused(data, limit=len(data) - 1).code == ErrorCode.MESSAGE_TOO_LARGE
    assert decode_batch(data, len(data)) is not None


def test_more_records_than_the_header_says_is_corrupt() -> None:
    assert _refused(raw_batch(empty_records(3), 2, codec=1)).code == ErrorCode.CORRUPT_MESSAGE
    assert _refused(raw_batch(empty_records(2), 3, codec=1)).code == ErrorCode.CORRUPT_MESSAGE


def test_heavy_batches_are_the_compressed_and_the_large() -> None:
    assert records_module.is_heavy(raw_batch(one_record(b"x"), 1, codec=1))
    assert not records_module.is_heavy(raw_batch(one_record(b"x"), 1))
    assert records_module.is_heavy(raw_batch(one_record(bytes(records_module.HEAVY_BATCH_BYTES)), 1))
    assert not records_module.is_heavy(None) and not records_module.is_heavy(b"short")


# ----------------------------------------------------------------------------- end to end

import asyncio  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

from kafka.protocol.consumer.group import (  # noqa: E402
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, SyncGroupRequest, SyncGroupResponse)
from kafka.protocol.producer.produce import ProduceResponse  # noqa: E402

from grouplab.admin import AdminClient  # noqa: E402
from grouplab.coordinator.server import CoordinatorServer  # noqa: E402

from test_kafka_wire import Raw, batch, fetch, produce, server  # noqa: E402,F401 - the fixture too

# What the bystander must never suffer: a wait that would cost it its membership (its session is
# 10 s). Tighter figures (well under 1 s on a quiet machine) are the probes' to measure
# (scripts/probe_kafka_hostile.py, docs/benchmarks.md): a test on a loaded 2-core machine keeps no
# timing margin. The code before issue 22 held it 5-50 s at these sizes.
BYSTANDER_BOUND_S = 8.0


class Bystander:
    """A group member heartbeating every 100 ms from a thread of its own, over a blocking socket
    (the test shares the server's event loop, so a loop task would stall with it and not see the
    stall): the worst round trip is how long the hostile client held everyone else; any error
    would mean it lost its membership."""

    def __init__(self, port: int, member_id: str, generation: int) -> None:
        self.port, self.member_id, self.generation = port, member_id, generation
        self.worst_s = 0.0
        self.errors: list[int] = []
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    @classmethod
    async def join(cls, port: int, group: str = "protected") -> "Bystander":
        raw = await Raw.open(port)
        member_id = ""
        for _ in range(2):  # the first JoinGroup gets MEMBER_ID_REQUIRED and the id to use
            raw.send(JoinGroupRequest[5](group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                         member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                         protocols=[JoinGroupRequest[5].JoinGroupRequestProtocol(
                                             name="range", metadata=b"")]))
            joined = await raw.read(JoinGroupResponse, 5, timeout=30)
            member_id = joined.member_id
        assert joined.error_code == 0, joined
        raw.send(SyncGroupRequest[3](group_id=group, generation_id=joined.generation_id, member_id=member_id,
                                     group_instance_id=None, assignments=[]))
        synced = await raw.read(SyncGroupResponse, 3, timeout=30)
        assert synced.error_code == 0, synced
        raw.close()
        return cls(port, member_id, joined.generation_id)

    def start(self) -> None:
        self._thread.start()

    def _beat(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=60) as sock:
            correlation_id = 0
            while not self._stop.is_set():
                correlation_id += 1
                request = HeartbeatRequest[4](group_id="protected", generation_id=self.generation,
                                              member_id=self.member_id, group_instance_id=None)
                request.with_header(correlation_id=correlation_id, client_id="bystander")
                started = time.monotonic()
                sock.sendall(bytes(request.encode(header=True, framed=True)))
                size = struct.unpack(">i", _read_exactly(sock, 4))[0]
                answer = HeartbeatResponse.decode(_read_exactly(sock, size), version=4, header=True)
                self.worst_s = max(self.worst_s, time.monotonic() - started)
                self.beats += 1
                if answer.error_code:
                    self.errors.append(answer.error_code)
                self._stop.wait(0.1)

    async def stop(self) -> None:
        beats = self.beats
        deadline = time.monotonic() + 60
        while self.beats < beats + 3 and time.monotonic() < deadline:  # it still answers, after the storm
            await asyncio.sleep(0.05)
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 60)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the server closed the bystander's connection")
        out += chunk
    return out


async def test_case_3_a_produce_of_many_compressed_empty_records_is_refused_without_holding_the_loop(
        server: CoordinatorServer) -> None:
    count = 600_000  # about 6 MB inflated, 60 KB sent; main built every record on the loop (~10 s)
    many = raw_batch(empty_records(count), count, codec=1)  # built before the bystander starts: the
    inflating = raw_batch(one_record(bytes(50_000_000)), 1, codec=1)  # test shares the server's loop
    bystander = await Bystander.join(server.kafka_port)
    bystander.start()
    hostile = await Raw.open(server.kafka_port)
    hostile.send(produce(9, many))
    answer = await hostile.read(ProduceResponse, 9, timeout=120)
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
    hostile.send(produce(9, inflating))  # 50 MB of zeros in one record
    answer = await hostile.read(ProduceResponse, 9, timeout=120)
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
    await bystander.stop()
    assert bystander.errors == [] and bystander.worst_s < BYSTANDER_BOUND_S, (bystander.worst_s, bystander.errors)
    log = server.broker.logs.existing("t", 0)
    assert log is None or log.log_end_offset == 0  # nothing appended
    hostile.close()


async def test_case_3_a_legal_gzip_batch_decoded_off_the_loop_is_appended(server: CoordinatorServer) -> None:
    raw = await Raw.open(server.kafka_port)
    raw.send(produce(9, batch(*[b"v%d" % i for i in range(1000)], codec=1)))
    answer = await raw.read(ProduceResponse, 9, timeout=60)
    assert answer.responses[0].partition_responses[0].error_code == 0
    assert server.broker.logs.existing("t", 0).log_end_offset == 1000
    raw.close()


async def test_case_4_a_client_that_never_reads_holds_a_bounded_amount(server: CoordinatorServer) -> None:
    """300 Fetches for about 1 MiB answers, never read: the server stops taking the connection's
    requests once its answers pass the write buffer's high-water mark, so what it holds for the
    connection stays near one answer, not 300 of them."""
    producer = await Raw.open(server.kafka_port)
    for _ in range(4):
        producer.send(produce(9, batch(bytes(250_000))))
        assert (await producer.read(ProduceResponse, 9, timeout=60)).responses[0].partition_responses[0].error_code == 0
    bystander = await Bystander.join(server.kafka_port)
    bystander.start()
    hostile = await Raw.open(server.kafka_port)
    hostile.writer.transport.set_write_buffer_limits(high=64 << 20)  # the test's side keeps sending
    for _ in range(300):
        hostile.send(fetch(12, 0, max_wait_ms=0))
    await hostile.writer.drain()
    await asyncio.sleep(1)  # give the server every chance to buffer what it would
    await bystander.stop()
    assert server.kafka is not None
    peak = server.kafka.peak_buffered_bytes
    assert peak < 8 << 20, f"one connection made the server hold {peak} bytes"
    assert bystander.errors == [] and bystander.worst_s < BYSTANDER_BOUND_S, (bystander.worst_s, bystander.errors)
    hostile.close()
    producer.close()


async def test_case_5_a_storm_of_malformed_frames_leaves_others_their_heartbeats(server: CoordinatorServer) -> None:
    bystander = await Bystander.join(server.kafka_port)
    bystander.start()
    bad_before = server.bad_frames
    for i in range(2000):  # each on a new connection, as the storm: JoinGroup v5 with a bad group id
        reader, writer = await asyncio.open_connection("127.0.0.1", server.kafka_port)
        writer.write(struct.pack(">i", 12) + struct.pack(">hhih", 11, 5, i, 2) + b"\xff\xff")
        assert await asyncio.wait_for(reader.read(1), 30) == b""  # Kafka's answer: a closed connection
        writer.close()
    await bystander.stop()
    assert server.bad_frames - bad_before == 2000
    assert bystander.errors == [] and bystander.worst_s < BYSTANDER_BOUND_S, (bystander.worst_s, bystander.errors)


async def test_case_5_wide_answers_asked_from_many_connections_leave_others_their_heartbeats(
        server: CoordinatorServer) -> None:
    """What made the issue's storm of mutated frames cost ~9 ms each: the ones still naming the
    20,000-partition topic are Metadata requests, each answered with ~520 KB that took ~150 ms to
    build and encode on the loop, and several connections asking at once held it for seconds.
    Heavy answers are encoded on a thread, so the bystander's heartbeats keep their time."""
    from kafka.protocol.metadata.metadata import MetadataRequest  # noqa: PLC0415

    async with AdminClient("127.0.0.1", server.port) as admin:
        await admin.create_topics({"wide": 30_000})
    bystander = await Bystander.join(server.kafka_port)
    bystander.start()
    M = MetadataRequest[12]
    wide = M(topics=[M.MetadataRequestTopic(name="wide", topic_id=None)], allow_auto_topic_creation=False,
             include_topic_authorized_operations=False)
    hostile = [await Raw.open(server.kafka_port) for _ in range(16)]

    async def ask(raw: Raw, times: int) -> int:
        sizes = 0
        for _ in range(times):
            raw.send(wide)
            size = struct.unpack(">i", await asyncio.wait_for(raw.reader.readexactly(4), 120))[0]
            await asyncio.wait_for(raw.reader.readexactly(size), 120)
            sizes += size
        return sizes

    sizes = await asyncio.gather(*(ask(raw, 3) for raw in hostile))
    await bystander.stop()
    assert min(sizes) > 3 * 500_000  # each answer names every partition
    assert bystander.errors == [] and bystander.worst_s < BYSTANDER_BOUND_S, (bystander.worst_s, bystander.errors)
    for raw in hostile:
        raw.close()


def test_heavy_answers_are_told_by_their_entries_within_a_bounded_walk() -> None:
    from grouplab.coordinator.kafka_wire.listener import HEAVY_ANSWER_ENTRIES, heavy_answer  # noqa: PLC0415
    from grouplab.protocol.messages import (  # noqa: PLC0415
        FetchedRecord, MetadataResponse, MetadataResponsePartition, MetadataResponseTopic)

    def metadata(partitions: int) -> MetadataResponse:
        return MetadataResponse(topics=[MetadataResponseTopic(
            "t", partitions=[MetadataResponsePartition(i, 0) for i in range(partitions)])])

    assert not heavy_answer(metadata(10))
    assert heavy_answer(metadata(HEAVY_ANSWER_ENTRIES + 1))
    assert heavy_answer([FetchedRecord(0, 0, bytes(1 << 20))])  # one record of 1 MiB
    assert not heavy_answer([FetchedRecord(0, 0, b"x" * 100)])


def test_a_metadata_of_many_partitions_is_a_heavy_step() -> None:
    """Its step waits for a turn of its own: more than 2,000 partitions named, or all topics'."""
    from grouplab.coordinator.broker import Broker  # noqa: PLC0415
    from grouplab.coordinator.config import BrokerConfig as Config  # noqa: PLC0415
    from grouplab.coordinator.kafka_wire.listener import heavy_step  # noqa: PLC0415
    from grouplab.protocol.messages import MetadataRequest  # noqa: PLC0415
    from grouplab.protocol.messages import MetadataRequestTopic as T  # noqa: PLC0415

    broker = Broker(Config())
    broker.topics.partitions.update({"wide": 1500, "wider": 1500})
    assert not heavy_step(MetadataRequest([T("wide")]), broker)
    assert not heavy_step(MetadataRequest([T("wide"), T("wide"), T("nope")]), broker)  # a repeat counts once
    assert heavy_step(MetadataRequest([T("wide"), T("wider")]), broker)
    assert heavy_step(MetadataRequest(None), broker)  # every topic
    assert not heavy_step(object(), broker)  # only a Metadata is a heavy step
