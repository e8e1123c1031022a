"""What a Kafka client's Fetch gets around transactions, on hand-made logs, pure: the Broker's
answer to a Fetch with `as_batches` (what the Kafka-wire listener sends), translated and encoded
at each advertised version as the listener does, then decoded with kafka-python's `kafka.protocol`
and `kafka.record` as a client decodes it. Facts from Kafka (FetchResponse.json, KIP-98, its
EndTransactionMarker and ControlRecordType): stored batches come back whole with their producer
id, epoch, base sequence and transactional flag; a marker is a control batch of one record, key
version 0 + type (0 abort, 1 commit), value version 0 + coordinator epoch; read_committed returns
up to the last stable offset, aborted batches included, with the aborted transactions (producer
id, first offset) that overlap what it returns; read_uncommitted answers that list null.

Also grouplab's own record answers: `next_offset` moves a consumer past markers and aborted
records."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.protocol.consumer.fetch import FetchRequest as KafkaFetchRequest
from kafka.protocol.consumer.fetch import FetchResponse as KafkaFetchResponse
from kafka.record.memory_records import MemoryRecords

from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.kafka_wire.apis import APIS
from grouplab.coordinator.kafka_wire.purgatory import fetch_ready
from grouplab.coordinator.kafka_wire.translate import View, to_grouplab, to_kafka
from grouplab.protocol.effects import Reply
from grouplab.protocol.messages import FetchPartition, FetchRequest, FetchTopic, Record, RecordBatch

T0 = 1_700_000_000_000
COMMIT, ABORT = 1, 0
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
VERSIONS = list(range(4, 13))  # every version advertised: 4 brought transactions, 5 log start offset, 12 flexible


def broker() -> Broker:
    b = Broker(BrokerConfig())
    b.topics.partitions.update({"t": 2})
    return b


def txn(pid: int, seq: int, *values: str) -> RecordBatch:
    return RecordBatch([Record(v.encode(), timestamp=T0) for v in values], pid, 0, seq, True)


def plain(*values: str) -> RecordBatch:
    return RecordBatch([Record(v.encode(), timestamp=T0) for v in values])


def mixed_log(b: Broker) -> None:
    """t-0, offset by offset:
        0 p0          plain
        1-2 c0 c1     producer 1, committed (marker at 3)
        3             COMMIT marker of producer 1
        4 a0          producer 2, aborted (marker at 6)
        5 p1          plain, inside producer 2's transaction
        6             ABORT marker of producer 2
        7 o0          producer 3, still open: the last stable offset is 7
        8 p2          plain, after the open transaction"""
    log = b.logs.log("t", 0)
    log.append(plain("p0"), T0)
    log.append(txn(1, 0, "c0", "c1"), T0)
    log.append_marker(1, 0, True, T0 + 1)
    log.append(txn(2, 0, "a0"), T0)
    log.append(plain("p1"), T0)
    log.append_marker(2, 0, False, T0 + 2)
    log.append(txn(3, 0, "o0"), T0)
    log.append(plain("p2"), T0)
    assert (log.last_stable_offset, log.log_end_offset) == (7, 9)


def kafka_fetch(b: Broker, version: int, offset: int, isolation_level: int, max_bytes: int = 1 << 20,
                partition_max_bytes: int = 1 << 20, partition: int = 0) -> Any:
    """A client's Fetch at `version`, through the listener's translation and the Broker, its
    answer encoded at `version` and decoded as the client decodes it; the partition's data."""
    api = APIS[1]
    T = KafkaFetchRequest[version].FetchTopic
    request = KafkaFetchRequest[version](
        replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=max_bytes, isolation_level=isolation_level,
        session_id=0, session_epoch=-1, rack_id="",
        topics=[T(topic="t", partitions=[T.FetchPartition(partition=partition, fetch_offset=offset,
                                                          partition_max_bytes=partition_max_bytes,
                                                          current_leader_epoch=-1, log_start_offset=-1)])],
        forgotten_topics_data=[])
    view = View("127.0.0.1", 9092)
    body = to_grouplab(api, version, KafkaFetchRequest[version].decode(request.encode(), version=version), view)
    assert isinstance(body, FetchRequest) and body.as_batches
    (reply,) = [o for o in b.handle("Fetch", body, RequestContext("c"), T0) if isinstance(o, Reply)]
    encoded = to_kafka(api, version, reply.body, view).encode()
    response = KafkaFetchResponse[version].decode(encoded, version=version)
    return response.responses[0].partitions[0]


def batches(part: Any) -> list[dict[str, Any]]:
    """Every batch of a partition's record set, as kafka.record reads it (CRCs checked)."""
    records = MemoryRecords(bytes(part.records or b""))
    out = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        out.append({"base": batch.base_offset, "pid": batch.producer_id, "epoch": batch.producer_epoch,
                    "seq": batch.base_sequence, "txn": batch.is_transactional, "control": batch.is_control_batch,
                    "records": [(r.offset, r.key, r.value) for r in batch]})
    return out


def control(kind: int) -> tuple[bytes, bytes]:
    """A marker's control record key and value, as Kafka writes them (coordinator epoch 0)."""
    return struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 0)


def marker(offset: int, pid: int, kind: int) -> dict[str, Any]:
    key, value = control(kind)
    return {"base": offset, "pid": pid, "epoch": 0, "seq": -1, "txn": True, "control": True,
            "records": [(offset, key, value)]}


def data(offset: int, pid: int, *values: str) -> dict[str, Any]:
    txn_batch = pid >= 0
    return {"base": offset, "pid": pid, "epoch": 0 if txn_batch else -1, "seq": 0 if txn_batch else -1,
            "txn": txn_batch, "control": False,
            "records": [(offset + i, None, v.encode()) for i, v in enumerate(values)]}


# ----------------------------------------------------------------------------- the batches


@pytest.mark.parametrize("version", VERSIONS)
def test_read_uncommitted_gets_every_stored_batch_markers_included_and_no_aborted_list(version: int) -> None:
    b = broker()
    mixed_log(b)
    part = kafka_fetch(b, version, 0, READ_UNCOMMITTED)
    assert part.error_code == 0 and (part.high_watermark, part.last_stable_offset) == (9, 7)
    assert part.aborted_transactions is None  # Kafka: null under read_uncommitted
    if version >= 5:
        assert part.log_start_offset == 0
    assert batches(part) == [data(0, -1, "p0"), data(1, 1, "c0", "c1"), marker(3, 1, COMMIT), data(4, 2, "a0"),
                             data(5, -1, "p1"), marker(6, 2, ABORT), data(7, 3, "o0"), data(8, -1, "p2")]


@pytest.mark.parametrize("version", VERSIONS)
def test_read_committed_stops_at_the_open_transaction_and_lists_the_aborted_one(version: int) -> None:
    b = broker()
    mixed_log(b)
    part = kafka_fetch(b, version, 0, READ_COMMITTED)
    assert (part.high_watermark, part.last_stable_offset) == (9, 7)
    # Aborted data is returned with the list; the client skips it (KIP-98). Nothing at or past
    # the last stable offset (7, producer 3's open transaction) comes back.
    assert batches(part) == [data(0, -1, "p0"), data(1, 1, "c0", "c1"), marker(3, 1, COMMIT), data(4, 2, "a0"),
                             data(5, -1, "p1"), marker(6, 2, ABORT)]
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(2, 4)]


def test_a_fetch_starting_mid_way_gets_whole_batches_and_the_transactions_it_is_inside() -> None:
    b = broker()
    mixed_log(b)
    # Offset 2 is inside producer 1's batch (1-2): the batch comes back whole, as Kafka returns it
    # (the client drops the records before its fetch offset).
    assert batches(kafka_fetch(b, 12, 2, READ_COMMITTED))[0] == data(1, 1, "c0", "c1")
    # From offset 5, inside producer 2's aborted transaction (4..6): it is still listed.
    part = kafka_fetch(b, 12, 5, READ_COMMITTED)
    assert batches(part) == [data(5, -1, "p1"), marker(6, 2, ABORT)]
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(2, 4)]
    # Past the abort marker: no aborted transaction overlaps what is returned.
    part = kafka_fetch(b, 12, 7, READ_UNCOMMITTED)
    assert batches(part) == [data(7, 3, "o0"), data(8, -1, "p2")]
    assert kafka_fetch(b, 12, 7, READ_COMMITTED).aborted_transactions == []
    assert batches(kafka_fetch(b, 12, 7, READ_COMMITTED)) == []


def test_a_fetch_at_a_marker_returns_the_control_batch() -> None:
    """What lets a client's position reach the log end after a transaction: the last offset is a
    marker, and fetching it returns it (before, nothing came back and the client stayed there)."""
    b = broker()
    log = b.logs.log("t", 1)
    log.append(txn(1, 0, "x"), T0)
    log.append_marker(1, 0, True, T0)
    for isolation in (READ_UNCOMMITTED, READ_COMMITTED):
        part = kafka_fetch(b, 12, 1, isolation, partition=1)
        assert batches(part) == [marker(1, 1, COMMIT)]


def test_max_bytes_counts_whole_batches_and_returns_the_first_one_anyway() -> None:
    b = broker()
    log = b.logs.log("t", 0)
    log.append(plain("a" * 100, "b" * 100), T0)  # 61 + 2 * 116 = 293 bytes
    log.append(plain("c" * 100), T0)  # 177
    assert [x["base"] for x in batches(kafka_fetch(b, 12, 0, 0, partition_max_bytes=1))] == [0]
    assert [x["base"] for x in batches(kafka_fetch(b, 12, 0, 0, partition_max_bytes=293 + 176))] == [0]
    assert [x["base"] for x in batches(kafka_fetch(b, 12, 0, 0, partition_max_bytes=293 + 177))] == [0, 2]


def test_an_error_partition_has_no_records_and_no_aborted_list() -> None:
    b = broker()
    mixed_log(b)
    part = kafka_fetch(b, 12, 42, READ_COMMITTED)
    assert part.error_code == 1 and batches(part) == [] and part.aborted_transactions is None


# ----------------------------------------------------------------------------- the long poll


def batch_request(offset: int, isolation_level: int, partition: int = 0) -> FetchRequest:
    return FetchRequest([FetchTopic("t", [FetchPartition(partition, offset)])], max_wait_ms=30_000, min_bytes=1,
                        isolation_level=isolation_level, as_batches=True)


def test_a_fetch_positioned_at_a_marker_is_ready_at_once_and_one_at_the_end_waits() -> None:
    b = broker()
    log = b.logs.log("t", 0)
    log.append(txn(1, 0, "x"), T0)
    log.append_marker(1, 0, False, T0)
    for isolation in (READ_UNCOMMITTED, READ_COMMITTED):
        assert fetch_ready(b, batch_request(1, isolation))  # the abort marker is data to return
        assert not fetch_ready(b, batch_request(2, isolation))  # the log end: nothing yet
    assert b.logs.existing("t", 1) is None
    assert not fetch_ready(b, batch_request(0, READ_UNCOMMITTED, partition=1))
    assert b.logs.existing("t", 1) is None  # looking created no log


def test_read_committed_waits_at_an_open_transaction_until_its_marker() -> None:
    b = broker()
    log = b.logs.log("t", 0)
    log.append(txn(1, 0, "x"), T0)
    assert fetch_ready(b, batch_request(0, READ_UNCOMMITTED))
    assert not fetch_ready(b, batch_request(0, READ_COMMITTED))  # the last stable offset is 0
    log.append_marker(1, 0, True, T0)
    assert fetch_ready(b, batch_request(0, READ_COMMITTED))


# ----------------------------------------------------------------------------- grouplab's own answers


def own_fetch(b: Broker, offset: int, isolation_level: int, partition_max_bytes: int = 1 << 20) -> Any:
    req = FetchRequest([FetchTopic("t", [FetchPartition(0, offset, partition_max_bytes)])],
                       isolation_level=isolation_level)
    (reply,) = [o for o in b.handle("Fetch", req, RequestContext("c"), T0) if isinstance(o, Reply)]
    return reply.body.responses[0].partitions[0]


def test_grouplab_records_say_where_to_fetch_next_past_markers_and_aborted_records() -> None:
    b = broker()
    mixed_log(b)
    p = own_fetch(b, 0, READ_COMMITTED)
    assert [r.value for r in p.records] == [b"p0", b"c0", b"c1", b"p1"] and p.next_offset == 7
    assert p.batches == [] and p.aborted_transactions is None  # records, not batches
    p = own_fetch(b, 0, READ_UNCOMMITTED)
    assert [r.offset for r in p.records] == [0, 1, 2, 4, 5, 7, 8] and p.next_offset == 9
    p = own_fetch(b, 4, READ_COMMITTED)
    assert ([r.value for r in p.records], p.next_offset) == ([b"p1"], 7)
    p = own_fetch(b, 6, READ_COMMITTED)  # the abort marker, then the last stable offset
    assert (p.records, p.next_offset) == ([], 7)
    # A read cut short by max_bytes goes on from the first record it did not return.
    p = own_fetch(b, 0, READ_UNCOMMITTED, partition_max_bytes=2 * 18)
    assert ([r.offset for r in p.records], p.next_offset) == ([0, 1], 2)
    assert own_fetch(b, 7, READ_COMMITTED).next_offset == 7  # at the last stable offset: stay


def test_grouplab_records_lead_past_a_log_that_ends_in_markers() -> None:
    """Only a marker, or aborted records and their marker, left before the end: no records, and
    the offset past them (a consumer that moves there has no lag)."""
    b = broker()
    log = b.logs.log("t", 0)
    log.append(txn(1, 0, "x"), T0)
    log.append_marker(1, 0, True, T0)
    log.append(txn(1, 1, "y", "z"), T0)
    log.append_marker(1, 0, False, T0)
    p = own_fetch(b, 1, READ_UNCOMMITTED)
    assert ([r.value for r in p.records], p.next_offset) == ([b"y", b"z"], 5)
    p = own_fetch(b, 4, READ_UNCOMMITTED)
    assert (p.records, p.next_offset) == ([], 5)
    p = own_fetch(b, 1, READ_COMMITTED)
    assert (p.records, p.next_offset) == ([], 5)
