"""Produce, Fetch, ListOffsets and InitProducerId: the broker's handlers (pure, through
Broker.handle), then end to end over real loopback sockets, including restarts of a coordinator
with a data directory, stopped cleanly and killed with SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.protocol.effects import LogEvent, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    InitProducerIdRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    Record,
    RecordBatch,
)

HOST = "127.0.0.1"
T0 = 1_700_000_000_000


# ============================================================================ the handlers, pure


def broker(**overrides: object) -> Broker:
    b = Broker(BrokerConfig().with_overrides(f"{k}={v}" for k, v in overrides.items()))
    b.topics.partitions.update({"t": 2, "u": 1})
    return b


def open_transaction(b: Broker, producer_id: int, *tps: tuple[str, int]) -> None:
    """Register an Ongoing transaction of `producer_id` (epoch 0) on these partitions, as
    InitProducerId + AddPartitionsToTxn would, so its transactional batches are accepted."""
    from grouplab.coordinator.transactions import TxnMetadata, TxnState
    from grouplab.protocol.types import TopicPartition

    b.txn.txns[f"tx-{producer_id}"] = TxnMetadata(f"tx-{producer_id}", producer_id, 0, 60_000, TxnState.ONGOING,
                                                  {TopicPartition(t, p) for t, p in tps}, set(), 0)


def call(b: Broker, api: str, body: object, now: int = T0) -> tuple[object | None, list[LogEvent]]:
    out = b.handle(api, body, RequestContext("client"), now)
    replies = [o.body for o in out if isinstance(o, Reply)]
    assert len(replies) <= 1
    return (replies[0] if replies else None), [o for o in out if isinstance(o, LogEvent)]


def produce(b: Broker, parts: dict[tuple[str, int], RecordBatch], acks: int = -1):
    topics: dict[str, list[ProducePartitionData]] = {}
    for (topic, p), rb in parts.items():
        topics.setdefault(topic, []).append(ProducePartitionData(p, rb))
    return call(b, "Produce", ProduceRequest([ProduceTopicData(t, ps) for t, ps in topics.items()], acks))


def recs(*values: bytes, **kw: int) -> RecordBatch:
    return RecordBatch([Record(value=v) for v in values], **kw)


def fetch(b: Broker, parts: dict[tuple[str, int], int], max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20,
          isolation_level: int = 0):
    topics: dict[str, list[FetchPartition]] = {}
    for (topic, p), offset in parts.items():
        topics.setdefault(topic, []).append(FetchPartition(p, offset, partition_max_bytes))
    resp, _ = call(b, "Fetch", FetchRequest([FetchTopic(t, ps) for t, ps in topics.items()], max_bytes=max_bytes,
                                            isolation_level=isolation_level))
    return resp


def test_produce_answers_each_partition_with_its_base_offset() -> None:
    b = broker()
    resp, events = produce(b, {("t", 0): recs(b"a", b"b"), ("t", 1): recs(b"c"), ("u", 0): recs(b"d")})
    got = {(t.name, p.index): (p.error_code, p.base_offset, p.log_start_offset) for t in resp.responses
           for p in t.partition_responses}
    assert got == {("t", 0): (0, 0, 0), ("t", 1): (0, 0, 0), ("u", 0): (0, 0, 0)}
    resp, _ = produce(b, {("t", 0): recs(b"e")})
    assert resp.responses[0].partition_responses[0].base_offset == 2
    assert events == []  # a successful produce writes no event


def test_produce_to_an_unknown_topic_or_partition_appends_nothing() -> None:
    b = broker()
    resp, events = produce(b, {("t", 2): recs(b"a"), ("nope", 0): recs(b"b"), ("t", 0): recs(b"ok")})
    codes = {(t.name, p.index): p.error_code for t in resp.responses for p in t.partition_responses}
    assert codes == {("t", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ("t", 0): 0}
    assert b.logs.existing("nope", 0) is None and b.logs.existing("t", 2) is None
    assert events == []


def test_produce_errors_are_per_partition_and_logged() -> None:
    b = broker(**{"message.max.bytes": 200})
    resp, events = produce(b, {("t", 0): RecordBatch([]), ("t", 1): recs(b"x" * 500), ("u", 0): recs(b"ok")})
    codes = [p.error_code for t in resp.responses for p in t.partition_responses]
    assert codes == [ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE, 0]
    assert [(e.event, e.fields["error"]) for e in events] == [("produce_rejected", "CORRUPT_MESSAGE"),
                                                              ("produce_rejected", "MESSAGE_TOO_LARGE")]
    assert all(p.error_message for p in resp.responses[0].partition_responses)


def test_produce_with_acks_zero_gets_no_response_but_appends() -> None:
    b = broker()
    resp, _ = produce(b, {("t", 0): recs(b"a")}, acks=0)
    assert resp is None
    assert b.logs.log("t", 0).log_end_offset == 1
    pid = call(b, "InitProducerId", InitProducerIdRequest())[0].producer_id
    resp, events = produce(b, {("t", 0): recs(b"a", producer_id=pid, producer_epoch=0, base_sequence=3)}, acks=0)
    assert resp is None and events[0].event == "produce_rejected"  # no answer even on error (logged)


def test_produce_with_invalid_acks_is_refused_everywhere() -> None:
    b = broker()
    resp, _ = produce(b, {("t", 0): recs(b"a")}, acks=2)
    assert resp.error_code == ErrorCode.INVALID_REQUEST
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUEST
    assert b.logs.log("t", 0).log_end_offset == 0


def test_a_duplicate_batch_is_acknowledged_with_the_original_offset_and_logged() -> None:
    b = broker()
    produce(b, {("t", 0): recs(b"x")})
    pid = call(b, "InitProducerId", InitProducerIdRequest())[0].producer_id
    first, _ = produce(b, {("t", 0): recs(b"a", b"b", producer_id=pid, producer_epoch=0, base_sequence=0)})
    again, events = produce(b, {("t", 0): recs(b"a", b"b", producer_id=pid, producer_epoch=0, base_sequence=0)})
    assert first.responses[0].partition_responses[0].base_offset == 1
    assert again.responses[0].partition_responses[0].base_offset == 1
    assert again.responses[0].partition_responses[0].error_code == 0
    assert [e.event for e in events] == ["duplicate_batch_acked"] and events[0].fields["base_offset"] == 1
    assert b.logs.log("t", 0).log_end_offset == 3


def test_fetch_reports_offsets_and_per_partition_errors() -> None:
    b = broker()
    produce(b, {("t", 0): recs(b"a", b"b", b"c")})
    resp = fetch(b, {("t", 0): 1, ("t", 1): 0, ("t", 5): 0, ("u", 0): 3})
    parts = {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}
    p = parts[("t", 0)]
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (0, 3, 3, 0)
    assert [(r.offset, r.value) for r in p.records] == [(1, b"b"), (2, b"c")]
    assert (parts[("t", 1)].error_code, parts[("t", 1)].records, parts[("t", 1)].high_watermark) == (0, [], 0)
    assert parts[("t", 5)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    u = parts[("u", 0)]
    assert (u.error_code, u.high_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, 0) and u.error_message


def test_fetch_limits_share_max_bytes_and_only_the_first_partition_with_data_exceeds_them() -> None:
    b = broker()
    produce(b, {("t", 0): recs(*[b"x" * 100] * 10), ("t", 1): recs(*[b"y" * 100] * 10)})
    size = 116  # 16 + 100 value bytes
    resp = fetch(b, {("t", 0): 0, ("t", 1): 0}, max_bytes=3 * size, partition_max_bytes=2 * size)
    counts = [len(p.records) for t in resp.responses for p in t.partitions]
    assert counts == [2, 1]  # 2 fit in t-0's limit; one record's budget is left for t-1
    resp = fetch(b, {("t", 0): 0, ("t", 1): 0}, max_bytes=0, partition_max_bytes=0)
    assert [len(p.records) for t in resp.responses for p in t.partitions] == [1, 0]  # Kafka: the first only
    resp = fetch(b, {("t", 0): 0}, partition_max_bytes=-1)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.INVALID_FETCH_SIZE


def test_fetch_read_committed_stops_at_the_last_stable_offset() -> None:
    b = broker()
    log = b.logs.log("t", 0)
    open_transaction(b, 9, ("t", 0))
    produce(b, {("t", 0): recs(b"a")})
    produce(b, {("t", 0): RecordBatch([Record(b"t1")], 9, 0, 0, True)})
    produce(b, {("t", 0): recs(b"b")})
    p = fetch(b, {("t", 0): 0}, isolation_level=1).responses[0].partitions[0]
    assert ([r.value for r in p.records], p.high_watermark, p.last_stable_offset) == ([b"a"], 3, 1)
    log.append_marker(9, 0, False, T0)
    p = fetch(b, {("t", 0): 0}, isolation_level=1).responses[0].partitions[0]
    assert ([r.value for r in p.records], p.last_stable_offset) == ([b"a", b"b"], 4)
    p = fetch(b, {("t", 0): 0}).responses[0].partitions[0]
    assert [r.value for r in p.records] == [b"a", b"t1", b"b"]
    resp = fetch(b, {("t", 0): 0}, isolation_level=3)
    assert resp.error_code == ErrorCode.INVALID_REQUEST


def test_list_offsets_earliest_latest_timestamp_and_read_committed() -> None:
    b = broker()
    open_transaction(b, 9, ("t", 0))
    produce(b, {("t", 0): RecordBatch([Record(b"a", timestamp=100), Record(b"b", timestamp=200)])})
    produce(b, {("t", 0): RecordBatch([Record(b"t1", timestamp=300)], 9, 0, 0, True)})

    def offsets(ts: int, isolation: int = 0, partition: int = 0, topic: str = "t"):
        resp, _ = call(b, "ListOffsets", ListOffsetsRequest([ListOffsetsTopic(topic, [ListOffsetsPartition(partition, ts)])],
                                                            isolation))
        p = resp.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    assert offsets(-2) == (0, 0, -1)
    assert offsets(-2, 1) == (0, 0, -1)  # earliest is the log start under read_committed too (the open txn at 2)
    assert offsets(-1) == (0, 3, -1)
    assert offsets(-1, 1) == (0, 2, -1)  # read_committed: the last stable offset
    assert offsets(150) == (0, 1, 200)
    assert offsets(250) == (0, 2, 300)
    assert offsets(250, 1) == (0, -1, -1)  # beyond what read_committed may see
    assert offsets(999) == (0, -1, -1)
    assert offsets(-3) == (0, 2, 300)  # the largest timestamp (KIP-734)
    assert offsets(-3, 1) == (0, -1, -1)  # ... is in the open transaction: read_committed sees none
    assert offsets(-3, partition=1) == (0, -1, -1)  # an empty partition has none
    assert offsets(-7)[0] == ErrorCode.INVALID_REQUEST
    assert offsets(-1, partition=9)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert offsets(-2, 1, partition=1) == (0, 0, -1)  # an empty partition: 0 (librdkafka resets to it)
    assert offsets(-1, topic="nope")[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert offsets(-1, partition=1) == (0, 0, -1)


def test_init_producer_id_without_a_transactional_id_gives_new_ids() -> None:
    b = broker()
    first, events = call(b, "InitProducerId", InitProducerIdRequest())
    second, _ = call(b, "InitProducerId", InitProducerIdRequest(producer_id=first.producer_id, producer_epoch=0))
    assert (first.error_code, first.producer_id, first.producer_epoch) == (0, 0, 0)
    assert (second.producer_id, second.producer_epoch) == (1, 0)  # always a new id, as Kafka
    assert events[0].event == "producer_id_allocated" and events[0].fields["transactional_id"] is None


# ============================================================================ over real sockets


async def server(tmp_path: Path | None = None, port: int = 0, **overrides: object) -> CoordinatorServer:
    cfg = BrokerConfig().with_overrides(f"{k}={v}" for k, v in overrides.items())
    return await CoordinatorServer(cfg, port=port, data_dir=tmp_path).start()


async def test_idempotent_and_transactional_producers_never_share_an_id_with_a_data_dir(tmp_path: Path,
                                                                                         cleanup) -> None:
    """Both kinds of id come from the one durable allocator the server's recovery installs."""
    srv = await server(tmp_path)
    cleanup.push_async_callback(srv.stop)
    async with AdminClient(HOST, srv.port) as admin:
        ids = [(await admin.request("InitProducerId", InitProducerIdRequest(tid))).producer_id
               for tid in (None, "tx-a", None, "tx-b")]
    assert ids == [0, 1, 2, 3]


async def test_produce_fetch_and_list_offsets_over_sockets(cleanup) -> None:
    srv = await server()
    cleanup.push_async_callback(srv.stop)
    async with AdminClient(HOST, srv.port) as admin:
        await admin.create_topics({"t": 2})
        r = await admin.produce("t", 1, [b"a", Record(b"b", key=b"k", timestamp=5)])
        assert (r.error_code, r.base_offset) == (0, 0)
        assert (await admin.produce("t", 1, [b"c"])).base_offset == 2
        p = await admin.fetch("t", 1, 0)
        assert [(x.offset, x.value, x.key) for x in p.records] == [(0, b"a", None), (1, b"b", b"k"), (2, b"c", None)]
        assert p.records[1].timestamp == 5 and p.high_watermark == 3
        assert (await admin.list_offsets("t", 1, -1)).offset == 3
        assert (await admin.list_offsets("t", 1, -2)).offset == 0
        assert (await admin.produce("t", 7, [b"x"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (await admin.fetch("t", 1, 4)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        versions = await admin.request("ApiVersions", {})
        names = {k.api_key for k in versions.api_keys}
        assert {"Produce", "Fetch", "ListOffsets", "InitProducerId"} <= names


async def test_an_idempotent_retry_over_sockets_appends_once(cleanup) -> None:
    srv = await server()
    cleanup.push_async_callback(srv.stop)
    async with AdminClient(HOST, srv.port) as admin:
        await admin.create_topics({"t": 1})
        pid, epoch = await admin.init_producer_id()
        kw = dict(producer_id=pid, producer_epoch=epoch)
        first = await admin.produce("t", 0, [b"a", b"b"], base_sequence=0, **kw)
        retry = await admin.produce("t", 0, [b"a", b"b"], base_sequence=0, **kw)  # the ack was "lost"
        assert (first.base_offset, retry.base_offset, retry.error_code) == (0, 0, 0)
        gap = await admin.produce("t", 0, [b"d"], base_sequence=3, **kw)
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert (await admin.produce("t", 0, [b"c"], base_sequence=2, **kw)).base_offset == 2
        assert [r.value for r in (await admin.fetch("t", 0, 0)).records] == [b"a", b"b", b"c"]


async def test_acks_zero_gets_no_answer_over_sockets(cleanup) -> None:
    srv = await server()
    cleanup.push_async_callback(srv.stop)
    async with AdminClient(HOST, srv.port) as admin:
        await admin.create_topics({"t": 1})
        assert await admin.produce("t", 0, [b"fire"], acks=0) is None
        assert await admin.produce("t", 0, [b"and forget"], acks=0) is None
        # The next answer on the connection is the fetch's own (request() would skip a stray one,
        # so read the raw stream: nothing may be waiting before it).
        p = await admin.fetch("t", 0, 0)
        assert [r.value for r in p.records] == [b"fire", b"and forget"]
        assert admin._reader._buffer == b""  # type: ignore[union-attr]


@pytest.mark.parametrize("body, field", [
    ({"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": {"records": "nope"}}]}]},
     "body.topic_data[0].partition_data[0].records.records"),
    ({"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": {"records": [{"value": "str"}]}}]}]},
     "body.topic_data[0].partition_data[0].records.records[0].value"),
    ({"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": {"records": [{"key": b"k"}]}}]}]},
     "body.topic_data[0].partition_data[0].records.records[0].value"),
    ({"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": {"records": [{"value": b"v"}],
                                                                                "producer_id": True}}]}]},
     "body.topic_data[0].partition_data[0].records.producer_id"),
    ({"topic_data": [{"name": "t", "partition_data": [{"index": 0}]}]},
     "body.topic_data[0].partition_data[0].records"),
])
async def test_a_malformed_produce_gets_a_clear_error_and_changes_nothing(cleanup, body: dict, field: str) -> None:
    srv = await server()
    cleanup.push_async_callback(srv.stop)
    async with AdminClient(HOST, srv.port) as admin:
        await admin.create_topics({"t": 1})
        await admin.produce("t", 0, [b"before"])
        resp = await admin.request("Produce", body)
        assert resp.error_code == ErrorCode.INVALID_REQUEST and field in resp.error_message
        assert srv.bad_frames == 1
        p = await admin.fetch("t", 0, 0)
        assert [r.value for r in p.records] == [b"before"] and p.high_watermark == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


async def produce_numbered(admin: AdminClient, topic: str, partition: int, pid: int, start: int, batches: int,
                           size: int = 10) -> dict[int, bytes]:
    """Idempotent batches of `size` records valued `p-offsetguess`; returns {offset: value} acked."""
    acked = {}
    for i in range(start, start + batches):
        vals = [f"{partition}-{i}-{j}".encode() for j in range(size)]
        r = await admin.produce(topic, partition, vals, producer_id=pid, producer_epoch=0, base_sequence=i * size)
        assert r.error_code == 0, r
        acked.update({r.base_offset + j: v for j, v in enumerate(vals)})
    return acked


async def test_a_restarted_server_with_a_data_dir_has_every_acknowledged_record(tmp_path: Path, cleanup) -> None:
    port = free_port()
    srv = await server(tmp_path, port, **{"log.segment.bytes": 500})
    async with AdminClient(HOST, port) as admin:
        await admin.create_topics({"t": 3})
        pid, _ = await admin.init_producer_id()
        acked = {p: await produce_numbered(admin, "t", p, pid, 0, 8) for p in range(3)}
        await admin.produce("t", 0, [b"plain"])
        acked[0][80] = b"plain"
    await srv.stop()
    assert len(list((tmp_path / "logs" / "t-0").glob("*.log"))) > 1  # several segments
    srv = await server(tmp_path, port, **{"log.segment.bytes": 500})
    cleanup.push_async_callback(srv.stop)
    assert srv.log_store is not None and srv.log_store.recovery.partitions == 3
    async with AdminClient(HOST, port) as admin:
        for p in range(3):
            got = {r.offset: r.value for r in (await admin.fetch("t", p, 0, max_bytes=1 << 20)).records}
            assert got == acked[p]
        retry = await admin.produce("t", 1, [f"1-7-{j}".encode() for j in range(10)], producer_id=pid,
                                    producer_epoch=0, base_sequence=70)
        assert (retry.error_code, retry.base_offset) == (0, 70)  # recognised after the restart
        assert (await admin.list_offsets("t", 1)).offset == 80
        new_pid, _ = await admin.init_producer_id()
        assert new_pid > pid


def grouplab(*args: str) -> list[str]:
    return [sys.executable, "-m", "grouplab.cli", *args]


def start_coordinator(port: int, data_dir: Path, run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen(grouplab("coordinator", "--port", str(port), "--kafka-port", "off", "--data-dir", str(data_dir), "--run-dir",
                                     str(run_dir), "--config", "grouplab.log.fsync=never"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "1000"})
    line = ""
    while "listening" not in line:
        line = proc.stderr.readline()
        assert line or proc.poll() is None, "the coordinator exited"
    return proc


async def test_a_killed_coordinator_process_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    """SIGKILL while a producer has many batches in flight: whatever was acknowledged before the
    kill is in the log after the restart, at the offset it was acknowledged with."""
    port = free_port()
    data, run = tmp_path / "data", tmp_path / "run"
    proc = start_coordinator(port, data, run)
    acked: dict[int, bytes] = {}
    try:
        async with AdminClient(HOST, port) as admin:
            await admin.create_topics({"k": 1})
            pid, _ = await admin.init_producer_id()
            acked = await produce_numbered(admin, "k", 0, pid, 0, 20)
        # Now pipeline more, and kill the process in the middle of the stream.
        reader, writer = await asyncio.open_connection(HOST, port)
        from grouplab.protocol.framing import encode_request, read_response
        from grouplab.protocol.messages import RequestHeader
        pending: dict[int, list[bytes]] = {}
        for i in range(20, 220):
            vals = [f"0-{i}-{j}".encode() for j in range(10)]
            req = ProduceRequest([ProduceTopicData("k", [ProducePartitionData(0, RecordBatch(
                [Record(v) for v in vals], pid, 0, i * 10))])])
            writer.write(encode_request(RequestHeader("Produce", 0, i, "t"), req))
            pending[i] = vals
        await writer.drain()
        answers = 0
        while answers < 30:
            size = int.from_bytes(await reader.readexactly(4), "big")
            cid, body = read_response(await reader.readexactly(size))
            part = body["responses"][0]["partition_responses"][0]
            assert part["error_code"] == 0
            acked.update({part["base_offset"] + j: v for j, v in enumerate(pending[cid])})
            answers += 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        writer.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    proc = start_coordinator(port, data, run)
    try:
        async with AdminClient(HOST, port) as admin:
            records, offset = {}, 0
            while True:
                p = await admin.fetch("k", 0, offset)
                if not p.records:
                    break
                records.update({r.offset: r.value for r in p.records})
                offset = p.records[-1].offset + 1
            assert len(acked) >= 500
            assert all(records.get(o) == v for o, v in acked.items())  # every acknowledged record, in place
            assert sorted(records) == list(range(len(records)))  # and no hole
            end = len(records)
            nxt = end // 10
            r = await admin.produce("k", 0, [b"next"], producer_id=pid, producer_epoch=0, base_sequence=nxt * 10)
            assert (r.error_code, r.base_offset) == (0, end)  # the producer carries on in sequence
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


async def test_a_restart_reports_its_recovery_and_truncates_a_torn_tail(tmp_path: Path, recorder, cleanup) -> None:
    port = free_port()
    srv = await server(tmp_path, port)
    async with AdminClient(HOST, port) as admin:
        await admin.create_topics({"t": 1})
        await admin.produce("t", 0, [b"a", b"b"])
    await srv.stop()
    seg = tmp_path / "logs" / "t-0" / "00000000000000000000.log"
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x40torn")  # a batch cut short by a crash
    cfg = BrokerConfig()
    srv = await CoordinatorServer(cfg, port=port, data_dir=tmp_path, events=recorder.log("coordinator")).start()
    cleanup.push_async_callback(srv.stop)
    (rec,) = recorder.events("partition_logs_recovered")
    assert {k: rec.fields[k] for k in ("partitions", "segments", "batches", "truncated_bytes")} == \
           {"partitions": 1, "segments": 1, "batches": 1, "truncated_bytes": 8}
    (cut,) = recorder.events("partition_log_truncated")
    assert (cut.fields["topic"], cut.fields["partition"], cut.fields["bytes"]) == ("t", 0, 8)
    names = [ev.event for _, ev in recorder.records]
    assert names.index("log_recovered") < names.index("partition_logs_recovered") < names.index("partition_log_truncated")
    async with AdminClient(HOST, port) as admin:
        assert [r.value for r in (await admin.fetch("t", 0, 0)).records] == [b"a", b"b"]
        assert (await admin.produce("t", 0, [b"c"])).base_offset == 2


async def test_log_flush_interval_ms_syncs_idle_logs_in_the_background(tmp_path: Path, cleanup) -> None:
    srv = await server(tmp_path, **{"log.flush.interval.ms": 30})
    cleanup.push_async_callback(srv.stop)
    async with AdminClient(HOST, srv.port) as admin:
        await admin.create_topics({"t": 1})
        await admin.produce("t", 0, [b"a"])
        storage = srv.broker.logs.log("t", 0)._storage
        assert storage.unflushed_messages == 1  # written, not yet synced
        for _ in range(100):
            if storage.flushes:
                break
            await asyncio.sleep(0.01)
        assert storage.flushes == 1 and storage.unflushed_messages == 0


def test_a_transactional_batch_outside_its_transaction_is_refused() -> None:
    b = broker()
    resp, _ = call(b, "Produce", ProduceRequest([ProduceTopicData("t", [ProducePartitionData(
        0, RecordBatch([Record(b"x")], 9, 0, 0, True))])]))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    open_transaction(b, 9, ("t", 1))
    resp, _ = call(b, "Produce", ProduceRequest([ProduceTopicData("t", [ProducePartitionData(
        0, RecordBatch([Record(b"x")], 9, 0, 0, True))])]))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TXN_STATE  # not added
    assert b.logs.log("t", 0).log_end_offset == 0


def test_a_batch_the_disk_refuses_answers_kafka_storage_error_and_appends_nothing(monkeypatch) -> None:
    b = broker()
    log = b.logs.log("t", 0)
    real = log.append

    def refuse(*_a: object, **_k: object) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log, "append", refuse)
    resp, events = produce(b, {("t", 0): recs(b"a"), ("t", 1): recs(b"b")})
    codes = [(p.index, p.error_code) for p in resp.responses[0].partition_responses]
    assert codes == [(0, ErrorCode.KAFKA_STORAGE_ERROR), (1, 0)]
    assert ErrorCode.KAFKA_STORAGE_ERROR.retriable
    assert [e.event for e in events] == ["partition_write_failed"] and log.log_end_offset == 0
    monkeypatch.setattr(log, "append", real)  # the disk has room again: the retry is written once
    resp, _ = produce(b, {("t", 0): recs(b"a")})
    assert resp.responses[0].partition_responses[0].base_offset == 0 and log.log_end_offset == 1
