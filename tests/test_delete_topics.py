"""DeleteTopics (Kafka's API key 20; docs/protocol.md §3.23) and `grouplab topics delete`, like
`kafka-topics --delete`: a topic's partition logs go (on disk too), every group's committed and
staged offsets of it go with tombstones, open transactions forget its partitions, and a restart
does not bring it back; a name given twice is INVALID_REQUEST, an unknown one
UNKNOWN_TOPIC_OR_PARTITION, every name TOPIC_DELETION_DISABLED under delete.topic.enable=false. A
refusal changes nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from grouplab.admin import AdminClient
from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group_log import GroupLog, OffsetTombstone, TopicRecord, TopicTombstone, decode_record, encode_record
from grouplab.coordinator.partition_log import FileLogStore
from grouplab.coordinator.server import CoordinatorServer
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent, Persist, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    EndTxnRequest,
    InitProducerIdRequest,
    MetadataRequest,
    MetadataRequestTopic,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    Record,
    RecordBatch,
)
from grouplab.protocol.types import TopicPartition
from tests.cli_subprocess import grouplab, one_line

T0 = 1_700_000_000_000


def broker(**overrides: Any) -> Broker:
    b = Broker(BrokerConfig(group_initial_rebalance_delay_ms=0, **overrides), SequentialMemberIds())
    b.topics.partitions.update({"t": 2, "u": 1})
    return b


def handle(b: Broker, api: str, body: Any, now: int = T0) -> tuple[Any, list]:
    out = b.handle(api, body, RequestContext("r", client_id="c"), now)
    replies = [o.body for o in out if isinstance(o, Reply)]
    assert len(replies) == 1
    return replies[0], out


def delete(b: Broker, *names: str) -> tuple[list[tuple[str, int]], list]:
    reply, out = handle(b, "DeleteTopics", DeleteTopicsRequest(list(names)))
    assert isinstance(reply, DeleteTopicsResponse) and reply.error_code == 0
    return [(r.name, r.error_code) for r in reply.responses], out


def produce(b: Broker, topic: str, partition: int, *values: bytes, **batch: Any) -> int:
    reply, _ = handle(b, "Produce", ProduceRequest([ProduceTopicData(topic, [ProducePartitionData(
        partition, RecordBatch([Record(v) for v in values], **batch))])]))
    part = reply.responses[0].partition_responses[0]
    assert part.error_code == 0, part
    return part.base_offset


def commit(b: Broker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, p), offset in offsets.items():
        by_topic.setdefault(topic, []).append(OffsetCommitRequestPartition(p, offset))
    reply, _ = handle(b, "OffsetCommit", OffsetCommitRequest(group, [OffsetCommitRequestTopic(t, ps)
                                                                     for t, ps in by_topic.items()]))
    assert all(p.error_code == 0 for t in reply.topics for p in t.partitions)


def state(b: Broker) -> tuple:
    return (dict(b.topics.partitions), sorted(b.logs.logs()),
            {gid: dict(g.offsets.committed) for gid, g in b.groups.items()})


def test_a_topic_goes_with_its_logs_and_every_groups_offsets_tombstones_before_the_answer() -> None:
    b = broker()
    produce(b, "t", 0, b"a", b"b")
    produce(b, "u", 0, b"c")
    commit(b, "g", {("t", 0): 2, ("t", 1): 0, ("u", 0): 1})
    commit(b, "h", {("u", 0): 1})
    results, out = delete(b, "t")
    assert results == [("t", ErrorCode.NONE)]
    assert b.topics.partitions == {"u": 1} and sorted(b.logs.logs()) == [("u", 0)]
    assert [type(o) for o in out] == [Persist, Persist, Persist, Reply, LogEvent, LogEvent]
    assert [o.record for o in out if isinstance(o, Persist)] == [
        TopicTombstone("t", T0), OffsetTombstone("g", "t", 0, T0), OffsetTombstone("g", "t", 1, T0)]
    deleted, offsets = [o.payload for o in out if isinstance(o, LogEvent)]
    assert deleted == events.TopicDeleted("t", 2, 1)  # partition 1 never had a log
    assert isinstance(offsets, events.TopicOffsetsDeleted)
    assert (offsets.group_id, offsets.topic, offsets.partitions, offsets.staged_partitions) == (
        "g", "t", [["t", 0], ["t", 1]], [])
    assert b.groups["g"].offsets.committed == {TopicPartition("u", 0): b.groups["g"].offsets.committed[
        TopicPartition("u", 0)]}
    fetched, _ = handle(b, "OffsetFetch", OffsetFetchRequest("g"))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in fetched.topics] == [("u", [0])]
    metadata, _ = handle(b, "Metadata", MetadataRequest([MetadataRequestTopic("t")], allow_auto_topic_creation=False))
    assert metadata.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_topic_made_again_under_the_name_starts_at_offset_zero() -> None:
    b = broker()
    produce(b, "t", 0, b"a", b"b", b"c")
    delete(b, "t")
    metadata, _ = handle(b, "Metadata", MetadataRequest([MetadataRequestTopic("t")]))  # auto-created again
    assert metadata.topics[0].error_code == 0 and b.topics.partitions["t"] == 1
    assert produce(b, "t", 0, b"new") == 0


def test_every_refusal_is_answered_per_name_once_and_changes_nothing() -> None:
    b = broker()
    produce(b, "t", 0, b"a")
    commit(b, "g", {("t", 0): 1})
    before = state(b)
    results, out = delete(b, "t", "nosuch", "t", "bad name", "twice", "twice")
    assert results == [("t", ErrorCode.INVALID_REQUEST), ("nosuch", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                       ("bad name", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("twice", ErrorCode.INVALID_REQUEST)]
    assert [type(o) for o in out] == [Reply] and state(b) == before
    assert delete(b)[0] == []


def test_a_request_whose_answer_cannot_fit_is_refused_before_anything_is_deleted() -> None:
    from grouplab.protocol.messages import ErrorResponse

    b = broker(response_max_bytes=2048)
    b.topics.partitions.update({f"topic-{i:03d}": 1 for i in range(100)})
    before = state(b)
    out = b.handle("DeleteTopics", DeleteTopicsRequest(sorted(b.topics.partitions)), RequestContext("r"), T0)
    [reply] = [o.body for o in out if isinstance(o, Reply)]
    assert isinstance(reply, ErrorResponse) and reply.error_code == ErrorCode.INVALID_REQUEST
    assert "delete fewer topics per request" in reply.error_message
    assert state(b) == before


def test_delete_topic_enable_false_refuses_every_name() -> None:
    b = broker(delete_topic_enable=False)
    before = state(b)
    results, out = delete(b, "t", "nosuch")
    assert results == [("t", ErrorCode.TOPIC_DELETION_DISABLED), ("nosuch", ErrorCode.TOPIC_DELETION_DISABLED)]
    assert [type(o) for o in out] == [Reply] and state(b) == before
    assert BrokerConfig().with_overrides(["delete.topic.enable=false"]).delete_topic_enable is False


def test_staged_offsets_of_the_topic_are_dropped_and_its_transaction_ends_without_a_marker_there() -> None:
    """A transaction that wrote to the topic and staged offsets for it: after the deletion its
    commit writes markers only where topics remain, makes no log for the deleted one, and commits
    only the offsets of the partitions that remain."""
    b = broker()
    init, _ = handle(b, "InitProducerId", InitProducerIdRequest("tx"))
    pid = init.producer_id
    reply, _ = handle(b, "AddPartitionsToTxn", AddPartitionsToTxnRequest("tx", pid, 0, [
        AddPartitionsToTxnTopic("t", [0]), AddPartitionsToTxnTopic("u", [0])]))
    produce(b, "t", 0, b"x", producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
    produce(b, "u", 0, b"y", producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)
    commit(b, "g", {("u", 0): 0})  # the group exists (a simple consumer's) before the transaction stages offsets
    b.groups["g"].offsets.stage_txn(pid, {TopicPartition("t", 0): (1, None), TopicPartition("u", 0): (1, None)}, T0)
    results, out = delete(b, "t")
    assert results == [("t", 0)]
    [ev] = [o.payload for o in out if isinstance(o, LogEvent) and isinstance(o.payload, events.TopicOffsetsDeleted)]
    assert ev.partitions == [] and ev.staged_partitions == [["t", 0]]
    assert b.txn.txns["tx"].partitions == {TopicPartition("u", 0)}
    b.txn.txns["tx"].groups.add("g")
    ended, out = handle(b, "EndTxn", EndTxnRequest("tx", pid, 0, True))
    assert ended.error_code == 0
    assert sorted(b.logs.logs()) == [("u", 0)]  # no marker, and no log, for the deleted topic
    assert b.groups["g"].offsets.committed[TopicPartition("u", 0)].offset == 1
    assert TopicPartition("t", 0) not in b.groups["g"].offsets.committed
    [done] = [o.payload for o in out if isinstance(o, LogEvent) and isinstance(o.payload, events.TransactionCommitted)]
    assert done.partitions == [["u", 0]]


def test_the_topic_tombstone_round_trips_and_supersedes_the_topic_record() -> None:
    from grouplab.coordinator.group_log import live

    tombstone = TopicTombstone("t", T0)
    assert decode_record(encode_record(tombstone)) == tombstone
    assert live([TopicRecord("t", 2, T0), TopicRecord("u", 1, T0), tombstone]) == [TopicRecord("u", 1, T0)]
    assert live([TopicRecord("t", 2, T0), tombstone, TopicRecord("t", 3, T0 + 1)]) == [TopicRecord("t", 3, T0 + 1)]


# ----------------------------------------------------------------------------- the file store


def test_the_file_store_removes_the_directories_and_a_leftover_goes_at_the_next_start(tmp_path: Path) -> None:
    from grouplab.coordinator.partition_log import DELETED_SUFFIX

    with FileLogStore(tmp_path, BrokerConfig()) as store:
        for p in (0, 1):
            store.log("t", p).append(RecordBatch([Record(b"a")]), T0)
        store.log("u", 0).append(RecordBatch([Record(b"b")]), T0)
        assert store.delete_topic("t") == 2
        assert sorted(store.logs()) == [("u", 0)]
        assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["u-0"]
        store.log("t", 0).append(RecordBatch([Record(b"new")]), T0)
        assert store.log("t", 0).log_end_offset == 1
    leftover = tmp_path / f"t-1.0123{DELETED_SUFFIX}"  # a crash part-way through a removal
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x" * 100)
    with FileLogStore(tmp_path, BrokerConfig()) as store:
        assert sorted(store.logs()) == [("t", 0), ("u", 0)]
        assert not leftover.exists()


def test_a_disk_that_refuses_the_rename_answers_kafka_storage_error_and_deletes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = broker()
    b.logs = FileLogStore(tmp_path, b.config)
    try:
        produce(b, "t", 0, b"a")
        produce(b, "t", 1, b"b")
        commit(b, "g", {("t", 0): 1})
        before = state(b)
        real_rename = os.rename
        calls = []

        def second_fails(src: Any, dst: Any) -> None:
            calls.append(src)
            if len(calls) == 2:
                raise OSError(5, "Input/output error")
            real_rename(src, dst)

        monkeypatch.setattr(os, "rename", second_fails)
        results, out = delete(b, "t")
        monkeypatch.setattr(os, "rename", real_rename)
        assert results == [("t", ErrorCode.KAFKA_STORAGE_ERROR)] and [type(o) for o in out] == [Reply]
        assert state(b) == before
        assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["t-0", "t-1"]  # the first moved back
        assert [r.value for r in b.logs.log("t", 0).read(0, 1 << 20)] == [b"a"]
    finally:
        b.logs.close()


# ----------------------------------------------------------------------------- over sockets, with a data directory


async def test_a_deleted_topic_stays_deleted_after_a_restart(tmp_path: Path) -> None:
    async def start() -> CoordinatorServer:
        return await CoordinatorServer(BrokerConfig(), "127.0.0.1", 0, data_dir=tmp_path).start()

    server = await start()
    try:
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"t": 2, "u": 1})
            for p in (0, 1):
                assert (await admin.produce("t", p, [b"x"])).error_code == 0
            await admin.commit_offsets("g", {TopicPartition("t", 0): 1, TopicPartition("u", 0): 0})
            assert await admin.delete_topics(["t", "nosuch"]) == {
                "t": (0, None), "nosuch": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "topic 'nosuch' does not exist")}
    finally:
        await server.stop()
    assert sorted(p.name for p in (tmp_path / "logs").iterdir() if p.is_dir()) == []
    server = await start()
    try:
        assert server.broker.topics.partitions == {"u": 1}
        async with AdminClient("127.0.0.1", server.port) as admin:
            assert await admin.topics() == {"u": 1}
            assert await admin.fetch_offsets("g") == {TopicPartition("u", 0): 0}
            await admin.create_topics({"t": 1})
            assert (await admin.produce("t", 0, [b"new"])).base_offset == 0
    finally:
        await server.stop()
    with GroupLog.in_dir(tmp_path) as log:  # compacted at the second start: the tombstones did their work
        assert not [r for r in log.replay() if isinstance(r, (TopicTombstone, OffsetTombstone))]


# ----------------------------------------------------------------------------- grouplab topics delete


async def test_grouplab_topics_delete() -> None:
    server = await CoordinatorServer(BrokerConfig(), "127.0.0.1", 0).start()
    try:
        bootstrap = f"127.0.0.1:{server.port}"
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"a": 1, "b": 2, "c": 1})
        code, out, err = await grouplab("topics", "delete", "a", "--bootstrap-server", bootstrap)
        assert (code, err, out) == (0, "", "deleted topic a\n")
        code, out, err = await grouplab("topics", "delete", "a", "--bootstrap-server", bootstrap)
        assert code == 1 and out == ""
        one_line(err, "'a' does not exist", "grouplab topics list")
        code, out, err = await grouplab("topics", "delete", "b", "nosuch", "c", "--bootstrap-server", bootstrap)
        assert code == 1 and out == "deleted topics b, c\n"
        one_line(err, "'nosuch' does not exist")
        assert server.broker.topics.partitions == {}
        code, out, err = await grouplab("topics", "delete", "--bootstrap-server", bootstrap)
        assert code == 2
        one_line(err, "topic")
    finally:
        await server.stop()
    server = await CoordinatorServer(BrokerConfig(delete_topic_enable=False), "127.0.0.1", 0).start()
    try:
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"a": 1})
        code, out, err = await grouplab("topics", "delete", "a", "--bootstrap-server", f"127.0.0.1:{server.port}")
        assert code == 1 and out == ""
        one_line(err, "delete.topic.enable=false", "TOPIC_DELETION_DISABLED")
    finally:
        await server.stop()
    code, out, err = await grouplab("topics", "delete", "a", "--bootstrap-server", "127.0.0.1:1")
    assert code == 1
    one_line(err, "cannot connect")


async def test_a_run_with_topic_admin_replays_identically(tmp_path: Path) -> None:
    """DeleteTopics, DescribeConfigs (whose sources depend on which configs were given: the trace
    names them) and DescribeCluster are in the trace, and `grouplab replay` answers them alike."""
    from grouplab.eventlog import run_dir_log
    from grouplab.protocol.messages import RESOURCE_BROKER, RESOURCE_TOPIC, DescribeConfigsResource
    from grouplab.replay import replay
    from grouplab.tracefile import TraceFile, trace_path

    run_dir = tmp_path / "run"
    events, trace = run_dir_log(run_dir, "coordinator"), TraceFile(trace_path(run_dir))
    config = BrokerConfig().with_overrides(["num.partitions=1", "log.segment.bytes=4096"])
    server = await CoordinatorServer(config, "127.0.0.1", 0, events=events, trace=trace).start()
    try:
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"t": 2, "u": 1})
            await admin.produce("t", 0, [b"x"])
            await admin.commit_offsets("g", {TopicPartition("t", 0): 1})
            (broker, topic) = await admin.describe_configs([DescribeConfigsResource(RESOURCE_BROKER, "0"),
                                                            DescribeConfigsResource(RESOURCE_TOPIC, "t")], synonyms=True)
            assert {e.name: e.config_source for e in broker.configs}["num.partitions"] == 4
            await admin.describe_cluster()
            await admin.delete_topics(["t", "nosuch"])
    finally:
        await server.stop()
        events.close()
        trace.close()
    result = replay(run_dir)
    assert result.identical, result.difference
    assert result.requests == 6
