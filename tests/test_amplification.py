"""Issue 11: a small request must not make a huge answer. A topic, group or partition repeated
in one request is answered once (or refused once), so the answer's encoded size follows the
distinct entries, not the repeats; Fetch's max_bytes holds over the whole response, and only the
first partition with data may exceed the limits (docs/protocol.md §3.2, §3.9, §3.12, §3.13, §3.16).
Sizes are measured on the wire encoding (protocol.framing), with generous bounds."""

from __future__ import annotations

from typing import Any

from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig
from grouplab.protocol.effects import Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.framing import encode_response
from grouplab.protocol.messages import (
    DescribeGroupsRequest,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    MetadataRequest,
    MetadataRequestTopic,
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
)

T0 = 1_700_000_000_000
N = 20_000  # repeats per request


def broker() -> Broker:
    b = Broker(BrokerConfig())
    b.topics.partitions.update({"t": 4, "u": 1})
    return b


def call(b: Broker, api: str, body: object) -> Any:
    replies = [o.body for o in b.handle(api, body, RequestContext("client", client_id="c1", client_host="127.0.0.1"), T0)
               if isinstance(o, Reply)]
    assert len(replies) == 1
    return replies[0]


def wire_size(body: object) -> int:
    return len(encode_response(1, body))


def produce(b: Broker, topic: str, partition: int, *values: bytes) -> None:
    batch = RecordBatch([Record(value=v) for v in values])
    resp = call(b, "Produce", ProduceRequest([ProduceTopicData(topic, [ProducePartitionData(partition, batch)])], -1))
    assert resp.responses[0].partition_responses[0].error_code == 0


# ---------------------------------------------------------------------------- Metadata


def test_metadata_answers_a_repeated_topic_once() -> None:
    b = broker()
    once = call(b, "Metadata", MetadataRequest([MetadataRequestTopic("t")]))
    resp = call(b, "Metadata", MetadataRequest([MetadataRequestTopic(n) for n in ["t", "u", "bad name", "t"] * N]))
    assert [t.name for t in resp.topics] == ["t", "u", "bad name"]  # a set, in first-seen order
    assert [t.error_code for t in resp.topics] == [0, 0, ErrorCode.INVALID_TOPIC_EXCEPTION]
    assert wire_size(resp) < 4 * wire_size(once)


def test_metadata_auto_creates_a_repeated_topic_once() -> None:
    b = broker()
    out = b.handle("Metadata", MetadataRequest([MetadataRequestTopic("new")] * 1000), RequestContext("client"), T0)
    (resp,) = [o.body for o in out if isinstance(o, Reply)]
    assert [t.name for t in resp.topics] == ["new"]
    assert sum(type(o).__name__ == "LogEvent" for o in out) == 1  # one topic_created


# ---------------------------------------------------------------------------- DescribeGroups


def test_describe_groups_answers_a_repeated_id_once() -> None:
    b = broker()
    join = JoinGroupRequest("g1", 10_000, 30_000, "", "consumer", [JoinGroupRequestProtocol("range", b"m" * 200)])
    b.handle("JoinGroup", join, RequestContext("client", client_id="c1", client_host="127.0.0.1"), T0)
    once = call(b, "DescribeGroups", DescribeGroupsRequest(["g1", "nope"]))
    resp = call(b, "DescribeGroups", DescribeGroupsRequest(["g1", "nope"] * N))
    assert [(g.group_id, g.group_state) for g in resp.groups] == [(g.group_id, g.group_state) for g in once.groups]
    assert [g.group_id for g in resp.groups] == ["g1", "nope"]
    assert wire_size(resp) == wire_size(once)


# ---------------------------------------------------------------------------- OffsetFetch


def test_offset_fetch_answers_a_repeated_partition_and_topic_once() -> None:
    b = broker()
    commit = OffsetCommitRequest("g", [OffsetCommitRequestTopic("t", [
        OffsetCommitRequestPartition(0, 42, -1, "m"), OffsetCommitRequestPartition(1, 7, -1, None)])])
    assert all(p.error_code == 0 for t in call(b, "OffsetCommit", commit).topics for p in t.partitions)
    once = call(b, "OffsetFetch", OffsetFetchRequest("g", [OffsetFetchRequestTopic("t", [1, 0, 9])]))
    resp = call(b, "OffsetFetch", OffsetFetchRequest("g", [OffsetFetchRequestTopic("t", [1, 0] * N),
                                                             OffsetFetchRequestTopic("t", [0, 9] * N)] * 5))
    got = [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in resp.topics]
    assert got == [("t", [(1, 7), (0, 42), (9, -1)])]  # one topic; partitions once, first-seen order
    assert wire_size(resp) == wire_size(once)
    resp = call(b, "OffsetFetch", OffsetFetchRequest("nobody", [OffsetFetchRequestTopic("t", [0] * N)]))
    assert [(p.partition_index, p.committed_offset) for t in resp.topics for p in t.partitions] == [(0, -1)]


# ---------------------------------------------------------------------------- Fetch


def fetch(b: Broker, topics: list[tuple[str, list[tuple[int, int, int]]]], max_bytes: int = 50 << 20) -> Any:
    return call(b, "Fetch", FetchRequest([FetchTopic(t, [FetchPartition(p, o, m) for p, o, m in ps]) for t, ps in topics],
                                         max_bytes=max_bytes))


def records(resp: Any) -> list[tuple[str, int, list[int]]]:
    return [(t.topic, p.partition_index, [r.offset for r in p.records]) for t in resp.responses for p in t.partitions]


def test_fetch_answers_a_repeated_partition_once_and_the_later_entry_wins() -> None:
    b = broker()
    produce(b, "t", 0, *[b"x" * 1000] * 50)
    produce(b, "t", 1, b"a", b"b")
    resp = fetch(b, [("t", [(0, 0, 1 << 20)] * 200)], max_bytes=1)  # the harness's 180 MB request
    assert records(resp) == [("t", 0, [0])]
    assert wire_size(resp) < 5_000
    resp = fetch(b, [("t", [(0, 0, 1 << 20), (1, 0, 1 << 20)]), ("u", [(0, 0, 100)]),
                     ("t", [(0, 48, 1 << 20)] * N)])
    assert records(resp) == [("t", 0, [48, 49]), ("t", 1, [0, 1]), ("u", 0, [])]  # t-0 keeps its place


def test_fetch_max_bytes_holds_over_the_whole_response() -> None:
    b = broker()
    for p in range(4):
        produce(b, "t", p, *[b"v" * 100] * 5)
    produce(b, "u", 0, *[b"w" * 100] * 5)
    parts = [(p, 0, 1 << 20) for p in range(4)]
    resp = fetch(b, [("t", parts), ("u", [(0, 0, 1 << 20)])], max_bytes=1)
    assert records(resp) == [("t", 0, [0]), ("t", 1, []), ("t", 2, []), ("t", 3, []), ("u", 0, [])]
    assert [p.high_watermark for t in resp.responses for p in t.partitions] == [5] * 5  # still reported
    size = 116  # a record: 16 bytes + 100 value bytes
    resp = fetch(b, [("t", parts)], max_bytes=7 * size)
    assert [len(r) for _, _, r in records(resp)] == [5, 2, 0, 0]
    resp = fetch(b, [("t", parts)], max_bytes=7 * size - 1)
    assert [len(r) for _, _, r in records(resp)] == [5, 1, 0, 0]


def test_fetch_partition_max_bytes_and_the_first_record_rule() -> None:
    b = broker()
    produce(b, "t", 0, *[b"v" * 100] * 5)
    produce(b, "t", 1, *[b"v" * 100] * 5)
    size = 116
    # the first partition with data gets one record even over partition_max_bytes; the next does not
    resp = fetch(b, [("t", [(2, 0, 0), (0, 0, 10), (1, 0, 10)])])
    assert records(resp) == [("t", 2, []), ("t", 0, [0]), ("t", 1, [])]
    resp = fetch(b, [("t", [(0, 0, 2 * size), (1, 0, 3 * size + 1)])])
    assert [len(r) for _, _, r in records(resp)] == [2, 3]
    # a partition at its end, or out of range, does not use up the first-record allowance
    resp = fetch(b, [("t", [(0, 5, 1 << 20), (3, 7, 1 << 20), (1, 0, 10)])], max_bytes=1)
    assert records(resp)[-1] == ("t", 1, [0])
    assert resp.responses[0].partitions[1].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_fetch_of_many_partitions_with_max_bytes_1_returns_one_record_in_total() -> None:
    b = broker()
    b.topics.partitions["big"] = 200
    for p in range(200):
        produce(b, "big", p, b"z" * 500)
    resp = fetch(b, [("big", [(p, 0, 1 << 20) for p in range(200)])], max_bytes=1)
    assert sum(len(r) for _, _, r in records(resp)) == 1
    assert wire_size(resp) < 40_000  # offsets per partition and one 500-byte value, not 200 of them


# ---------------------------------------------------------------------------- ListOffsets


def test_list_offsets_refuses_a_repeated_partition_once() -> None:
    b = broker()
    produce(b, "t", 0, b"a", b"b")
    req = ListOffsetsRequest([ListOffsetsTopic("t", [ListOffsetsPartition(0, -1), ListOffsetsPartition(1, -1)]),
                              ListOffsetsTopic("u", [ListOffsetsPartition(0, -2)]),
                              ListOffsetsTopic("t", [ListOffsetsPartition(0, -2)] * N)])
    resp = call(b, "ListOffsets", req)
    got = [(t.name, [(p.partition_index, p.error_code, p.offset) for p in t.partitions]) for t in resp.topics]
    assert got == [("t", [(0, ErrorCode.INVALID_REQUEST, -1), (1, 0, 0)]), ("u", [(0, 0, 0)])]
    assert wire_size(resp) < 500
