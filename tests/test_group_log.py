"""The durable group log: record encoding, framing and recovery of torn or corrupt frames,
compaction, Broker.restore, the Persist outputs of the pure machines, and coordinator restarts end
to end over real sockets (a NEW CoordinatorServer on the same port and data directory)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Iterable

import msgpack
import pytest

from grouplab.consumer.client import GroupMemberClient
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import MemberState
from grouplab.coordinator.broker import EXPIRY_TIMER, Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig, ConfigError
from grouplab.coordinator.group import GroupState
from grouplab.coordinator.group_log import (
    LOG_FILE_NAME,
    ConsumerGroupRecord,
    ConsumerMemberRecord,
    ConsumerMemberTombstone,
    GroupLog,
    GroupMetadataRecord,
    GroupTombstone,
    LogLockedError,
    MemberMetadata,
    Persist,
    RecordError,
    TopicRecord,
    decode_frames,
    decode_record,
    encode_frame,
    encode_record,
    latest,
    live,
)
from grouplab.coordinator.topics import new_topic_id
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.protocol.effects import ArmTimer, LogEvent, Reply, wall_clock_ms
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    MetadataRequest,
    MetadataRequestTopic,
)
from grouplab.protocol.types import TopicPartition
from tests.helpers_group import (
    GROUP,
    SESSION,
    MemberIds,
    assignment_of,
    config,
    form_generation,
    form_stable,
    hb_req,
    join_key,
    join_req,
    leave_req,
    make_group,
    protos,
    require_id,
    session_key,
    sync_req,
)

from conftest import EventRecorder

# ============================================================================ records and frames


def member(mid: str, instance: str | None = None, assignment: bytes = b"A") -> MemberMetadata:
    return MemberMetadata(mid, instance, f"client-{mid}", "/10.0.0.1", 10_000, 30_000,
                          [("range", b"r:" + mid.encode()), ("roundrobin", b"rr")], assignment)


def stable_record(gen: int = 3, members: Iterable[MemberMetadata] | None = None, group_id: str = "g",
                  ts: int = 1000) -> GroupMetadataRecord:
    ms = list(members) if members is not None else [member("m0"), member("m1", "i1", b"B")]
    return GroupMetadataRecord(group_id, gen, "Stable", "consumer", "range", ms[0].member_id, ms, ts)


def empty_record(gen: int = 4, group_id: str = "g", ts: int = 2000) -> GroupMetadataRecord:
    return GroupMetadataRecord(group_id, gen, "Empty", None, None, None, [], ts)


def consumer_group_record(epoch: int = 3, group_id: str = "cg") -> ConsumerGroupRecord:
    return ConsumerGroupRecord(group_id, epoch, epoch, "uniform", {"t": 3}, 1000 + epoch)


def consumer_member_record(member_id: str = "m1", group_id: str = "cg") -> ConsumerMemberRecord:
    return ConsumerMemberRecord(group_id, member_id, "i1", None, "c", "/127.0.0.1", 30_000, ["t"], None, "uniform",
                                "unrevoked_partitions", 3, 2, {"t": [0]}, {"t": [1, 2]}, {"t": [0]})


@pytest.mark.parametrize("record", [stable_record(), empty_record(), TopicRecord("t0", 6, 5), consumer_group_record(),
                                    consumer_member_record(), ConsumerMemberTombstone("cg", "m1", 7),
                                    dataclasses.replace(consumer_member_record(), classic_session_timeout_ms=10_000,
                                                        classic_protocols=[("range", b"r"), ("roundrobin", b"")])],
                         ids=["stable", "empty", "topic", "consumer_group", "consumer_member", "consumer_member_tombstone",
                              "classic_member_in_a_consumer_group"])
def test_records_round_trip(record):
    payload = encode_record(record)
    assert decode_record(payload) == record
    assert isinstance(msgpack.unpackb(payload), dict)  # a msgpack map, as documented
    frame = encode_frame(record)
    assert int.from_bytes(frame[:4], "big") == len(payload) and frame[4:-4] == payload
    assert int.from_bytes(frame[-4:], "big") == zlib.crc32(payload)


def test_a_group_record_keeps_every_field_documented():
    body = msgpack.unpackb(encode_record(stable_record()))
    assert body["type"] == "group_metadata" and body["version"] == 0
    assert set(body) == {"type", "version", "group_id", "generation_id", "state", "protocol_type", "protocol_name",
                         "leader", "members", "ts_ms"}
    assert set(body["members"][0]) == {"member_id", "group_instance_id", "client_id", "client_host",
                                       "session_timeout_ms", "rebalance_timeout_ms", "protocols", "assignment"}
    assert body["members"][0]["protocols"] == [["range", b"r:m0"], ["roundrobin", b"rr"]]  # preference order


@pytest.mark.parametrize("change, why", [
    ({"version": 1}, "version"),
    ({"type": "no_such_record"}, "unknown record type"),
    ({"generation_id": "3"}, "generation_id"),
    ({"state": "PreparingRebalance"}, "state"),
    ({"leader": "nobody"}, "leader"),
    ({"protocol_name": "sticky"}, "support"),
    ({"state": "Empty"}, "has members"),
])
def test_invalid_records_are_refused(change, why):
    body = msgpack.unpackb(encode_record(stable_record()))
    body.update(change)
    with pytest.raises(RecordError, match=why):
        decode_record(msgpack.packb(body, use_bin_type=True))
    body = msgpack.unpackb(encode_record(stable_record()))
    del body["members"][0]["assignment"]
    with pytest.raises(RecordError, match="assignment"):
        decode_record(msgpack.packb(body, use_bin_type=True))


def test_torn_tail_is_ignored_and_counted():
    records = [stable_record(1), TopicRecord("t0", 3, 1), stable_record(2)]
    data = b"".join(encode_frame(r) for r in records)
    last = encode_frame(TopicRecord("t1", 2, 9))
    for cut in (1, 3, 4, 10, len(last) - 1):  # inside the length, the payload, the CRC
        got, stats = decode_frames(data + last[:cut])
        assert got == records
        assert (stats.records, stats.torn_tail_bytes, stats.corrupt_records, stats.bytes) == (3, cut, 0, len(data) + cut)
    got, stats = decode_frames(data + last)
    assert got == records + [TopicRecord("t1", 2, 9)] and stats.torn_tail_bytes == 0


def test_crc_mismatch_skips_that_frame_only_and_is_counted():
    frames = [encode_frame(r) for r in (stable_record(1), stable_record(2), TopicRecord("t0", 3, 1))]
    bad = bytearray(frames[1])
    bad[10] ^= 0xFF  # a flipped bit in the payload
    got, stats = decode_frames(frames[0] + bytes(bad) + frames[2])
    assert got == [stable_record(1), TopicRecord("t0", 3, 1)]
    assert (stats.corrupt_records, stats.torn_tail_bytes) == (1, 0) and "CRC" in stats.errors[0]


def test_a_valid_frame_that_is_not_a_record_is_skipped_and_counted():
    payload = msgpack.packb({"type": "group_metadata", "version": 0})
    frame = len(payload).to_bytes(4, "big") + payload + zlib.crc32(payload).to_bytes(4, "big")
    got, stats = decode_frames(frame + encode_frame(TopicRecord("t0", 1, 0)))
    assert got == [TopicRecord("t0", 1, 0)] and stats.corrupt_records == 1


def test_a_garbage_length_makes_the_rest_a_torn_tail():
    good = encode_frame(TopicRecord("t0", 1, 0))
    got, stats = decode_frames(good + b"\xff\xff\xff\xff" + b"x" * 100)
    assert got == [TopicRecord("t0", 1, 0)] and stats.torn_tail_bytes == 104


def test_latest_keeps_the_last_record_per_group_and_topic_in_order():
    records = [TopicRecord("t0", 1, 0), stable_record(1), stable_record(1, group_id="h"), TopicRecord("t0", 4, 5),
               stable_record(2), empty_record(3, group_id="h")]
    assert latest(records) == [TopicRecord("t0", 4, 5), stable_record(2), empty_record(3, group_id="h")]


# ============================================================================ the log file


def test_append_then_replay(tmp_path: Path):
    log = GroupLog.in_dir(tmp_path, fsync=True)
    assert log.replay() == [] and log.stats.bytes == 0
    records = [TopicRecord("t0", 3, 1), stable_record(1), empty_record(2)]
    for r in records:
        log.append(r)
    log.close()
    again = GroupLog(tmp_path / LOG_FILE_NAME, fsync=False)
    assert again.replay() == records
    assert again.stats.records == 3 and again.stats.bytes == (tmp_path / LOG_FILE_NAME).stat().st_size
    again.close()


def test_a_torn_write_on_disk_is_dropped_at_recovery_and_appends_continue(tmp_path: Path):
    path = tmp_path / LOG_FILE_NAME
    with GroupLog(path) as log:
        log.append(stable_record(1))
        log.append(stable_record(2))
    size = path.stat().st_size
    with open(path, "ab") as f:  # the coordinator died in the middle of writing generation 3
        f.write(encode_frame(stable_record(3))[:-7])
    with GroupLog(path) as log:
        assert log.recover() == [stable_record(1), stable_record(2)]
        assert log.stats.torn_tail_bytes == len(encode_frame(stable_record(3))) - 7
        log.append(stable_record(4))
    with GroupLog(path) as log:
        assert log.replay() == [stable_record(2), stable_record(4)]  # compacted, then appended
        assert log.stats.torn_tail_bytes == 0 and log.stats.corrupt_records == 0
    assert path.stat().st_size < size + len(encode_frame(stable_record(4)))


@pytest.mark.parametrize("fails", ["write", "fsync"])
def test_a_failed_append_leaves_no_torn_frame_so_later_records_replay(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch, fails: str):
    """A write cut short (a full disk) is cut back off, so it is not a torn frame in the middle of
    the log that would hide the records appended after it. A failed sync leaves its whole frame:
    the coordinator carries on from memory as if it were written (docs/durability.md), so the
    record is kept for as long as the OS keeps it."""
    import grouplab.coordinator.group_log as gl

    log = GroupLog(tmp_path / LOG_FILE_NAME, fsync=True)
    log.append(stable_record(1))
    real_write, real_fsync = gl._write_all, os.fsync

    def half_then_fail(fd: int, data: bytes) -> None:
        os.write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    def fail(fd: int) -> None:
        raise OSError(5, "Input/output error")

    if fails == "write":
        monkeypatch.setattr(gl, "_write_all", half_then_fail)
    else:
        monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError):
        log.append(stable_record(2))
    monkeypatch.setattr(gl, "_write_all", real_write)
    monkeypatch.setattr(os, "fsync", real_fsync)
    log.append(stable_record(3))
    log.close()
    with GroupLog(tmp_path / LOG_FILE_NAME) as again:
        kept = [stable_record(1)] + ([stable_record(2)] if fails == "fsync" else []) + [stable_record(3)]
        assert again.replay() == kept
        assert again.stats.corrupt_records == 0 and again.stats.torn_tail_bytes == 0


@pytest.mark.parametrize("record, change, why", [
    (consumer_group_record(), {"subscription_metadata": {"t": 0}}, "partition count"),
    (consumer_member_record(), {"state": "lost"}, "state must be one of"),
    (consumer_member_record(), {"assigned": {"t": [-1]}}, "assigned"),
    (consumer_member_record(), {"subscribed_topic_names": [1]}, "subscribed_topic_names"),
])
def test_invalid_consumer_group_records_are_refused(record, change, why):
    body = msgpack.unpackb(encode_record(record))
    body.update(change)
    with pytest.raises(RecordError, match=why):
        decode_record(msgpack.packb(body, use_bin_type=True))


def test_a_consumer_groups_members_do_not_outlive_the_group_in_compaction():
    """A member record counts only while its group's latest record is a consumer group's: deleted
    (a tombstone) or turned classic, the group's members are dropped; a member tombstone drops one."""
    records = [consumer_group_record(1, "a"), consumer_member_record("m1", "a"), consumer_member_record("m2", "a"),
               ConsumerMemberTombstone("a", "m2", 5),
               consumer_group_record(1, "b"), consumer_member_record("m1", "b"), GroupTombstone("b", 9),
               consumer_group_record(1, "c"), consumer_member_record("m1", "c"), empty_record(group_id="c")]
    assert live(records) == [consumer_group_record(1, "a"), consumer_member_record("m1", "a"), empty_record(group_id="c")]


def test_compaction_keeps_only_the_latest_record_per_group_and_topic(tmp_path: Path):
    path = tmp_path / LOG_FILE_NAME
    with GroupLog(path) as log:
        for gen in range(1, 51):
            log.append(stable_record(gen))
            log.append(stable_record(gen, group_id="h"))
            log.append(TopicRecord("t0", gen, gen))
        log.append(empty_record(51, group_id="h"))
        log.append(TopicRecord("t1", 2, 0))
    before = path.stat().st_size
    with GroupLog(path) as log:
        records = log.replay()
        assert len(records) == 152
        size = log.compact(records)
    assert size == path.stat().st_size < before / 40
    assert not list(tmp_path.glob("*.compacting"))
    with GroupLog(path) as log:
        assert log.replay() == [stable_record(50), TopicRecord("t0", 50, 50), empty_record(51, group_id="h"),
                                TopicRecord("t1", 2, 0)]


def test_one_coordinator_per_data_dir(tmp_path: Path):
    first = GroupLog.in_dir(tmp_path)
    first.replay()
    second = GroupLog.in_dir(tmp_path)
    with pytest.raises(LogLockedError):
        second.replay()
    first.close()
    assert second.replay() == []
    second.close()


def test_fsync_policy_config():
    assert BrokerConfig().log_fsync == "always"
    assert BrokerConfig().with_overrides(["grouplab.log.fsync=never"]).log_fsync == "never"
    assert BrokerConfig().as_kafka_names()["grouplab.log.fsync"] == "always"
    with pytest.raises(ConfigError, match="grouplab.log.fsync"):
        BrokerConfig().with_overrides(["grouplab.log.fsync=sometimes"])


# ============================================================================ Persist outputs


def persisted(outputs: list) -> list:
    return [o.record for o in outputs if isinstance(o, Persist)]


def test_the_leaders_sync_persists_the_stable_generation_before_any_reply():
    g = make_group()
    (a, b, c), _, t = form_generation(g, ["c0", "c1", ("c2", {"instance": "i2"})])
    assert not persisted(g.handle_sync(sync_req(b, 1), "c1/s", t))  # a follower parks: nothing yet
    out = g.handle_sync(sync_req(a, 1, {m: assignment_of(m) for m in (a, b, c)}), "c0/s", t + 5)
    [record] = persisted(out)
    kinds = [type(o) for o in out if not isinstance(o, LogEvent)]
    assert kinds.index(Persist) < kinds.index(Reply)  # durable before anyone hears of it
    assert record == GroupMetadataRecord(GROUP, 1, "Stable", "consumer", "range", a, [
        MemberMetadata(a, None, "c0", "", SESSION, 30_000, protos("c0"), assignment_of(a)),
        MemberMetadata(b, None, "c1", "", SESSION, 30_000, protos("c1"), assignment_of(b)),
        MemberMetadata(c, "i2", "c2", "", SESSION, 30_000, protos("c2"), assignment_of(c)),
    ], t + 5)
    # Heartbeats, a late follower's sync and a retried join persist nothing.
    assert not persisted(g.handle_sync(sync_req(c, 1, instance="i2"), "c2/s", t + 6))
    assert not persisted(g.handle_heartbeat(hb_req(b, 1), "hb", t + 7))
    assert not persisted(g.handle_join(join_req(b, protos("c1")), "c1/j2", t + 8, "c1"))


def test_a_generation_that_completes_empty_is_persisted():
    g = make_group()
    (a, b), t = form_stable(g, ["c0", "c1"])
    assert not persisted(g.handle_leave(leave_req(a), "l1", t + 10))  # PreparingRebalance: not persisted
    out = g.handle_leave(leave_req(b), "l2", t + 20)
    # The protocol type stays (Kafka sets it at the first join and never clears it); protocol and leader go.
    assert persisted(out) == [GroupMetadataRecord(GROUP, 2, "Empty", "consumer", None, None, [], t + 20)]
    assert g.state is GroupState.EMPTY


def test_a_static_member_replaced_without_a_rebalance_is_persisted():
    g = make_group()
    (a, s), t = form_stable(g, ["c0", ("c1", {"instance": "i1"})])
    out = g.handle_join(join_req("", protos("c1"), instance="i1"), "c1/restart", t + 50, "c1")
    [record] = persisted(out)
    new_id = g.static_members["i1"]
    assert new_id != s and g.state is GroupState.STABLE
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in record.members] == [
        (a, None, assignment_of(a)), (new_id, "i1", assignment_of(s))]
    assert record.generation_id == 1


def test_broker_persists_topics_it_creates_or_grows():
    broker = Broker(config(num_partitions=2), MemberIds())
    ctx = RequestContext("r")
    out = broker.handle("CreateTopics", CreateTopicsRequest([CreatableTopic("t0", 3), CreatableTopic("bad/name", 1)]), ctx, 10)
    t0 = new_topic_id("t0", 10)  # made at 10: its id, kept when it grows
    assert persisted(out) == [TopicRecord("t0", 3, 10, t0)]
    assert isinstance(out[0], Persist) and any(isinstance(o, Reply) for o in out[1:])
    assert persisted(broker.handle("CreateTopics", CreateTopicsRequest([CreatableTopic("t9", 3)], validate_only=True), ctx, 11)) == []
    out = broker.handle("CreatePartitions", CreatePartitionsRequest([CreatePartitionsTopic("t0", 5)]), ctx, 20)
    assert persisted(out) == [TopicRecord("t0", 5, 20, t0)]
    out = broker.handle("Metadata", MetadataRequest(topics=[MetadataRequestTopic("auto")]), ctx, 30)
    assert persisted(out) == [TopicRecord("auto", 2, 30, new_topic_id("auto", 30))]
    assert persisted(broker.handle("Metadata", MetadataRequest(topics=None), ctx, 40)) == []


# ============================================================================ Broker.restore


def test_restore_brings_a_stable_group_back_with_its_generation_and_fresh_session_deadlines():
    g = make_group()
    (a, b, c), t = form_stable(g, ["c0", "c1", ("c2", {"instance": "i2"})])
    records = [TopicRecord("t0", 3, 0)]
    # the last Stable record, as the leader's sync wrote it
    records += persisted(g.handle_join(join_req("", protos("c2"), instance="i2"), "c2/r", t + 1, "c2"))
    c = g.static_members["i2"]

    broker = Broker(config(), MemberIds())
    now = 1_000_000
    out = broker.restore(records, now)
    r = broker.groups[GROUP]
    assert (r.state, r.generation_id, r.leader_id, r.protocol_type, r.protocol_name) == \
        (GroupState.STABLE, 1, a, "consumer", "range")
    assert list(r.members) == [a, b, c] and r.static_members == {"i2": c}
    for mid in (a, b, c):
        m, o = r.members[mid], g.members[mid]
        assert (m.assignment, m.protocols, m.client_id, m.session_timeout_ms, m.rebalance_timeout_ms, m.group_instance_id) == \
            (o.assignment, o.protocols, o.client_id, o.session_timeout_ms, o.rebalance_timeout_ms, o.group_instance_id)
        assert m.last_heartbeat_ms == now and m.join_reply is None and m.sync_reply is None
    assert [o for o in out if isinstance(o, ArmTimer)] == [ArmTimer(session_key(m), now + SESSION) for m in (a, b, c)]
    [loaded] = [o for o in out if isinstance(o, LogEvent)]
    assert loaded.event == "group_loaded" and loaded.fields["members"] == [a, b, c]
    assert loaded.fields["state"] == "Stable" and loaded.fields["generation_id"] == 1
    assert broker.topics.partitions == {"t0": 3}

    # Members that heartbeat their generation carry on; a stale generation is told so.
    [hb] = broker.handle("Heartbeat", hb_req(a, 1), RequestContext("hb1"), now + 10)
    assert hb.body.error_code == 0
    [hb] = broker.handle("Heartbeat", hb_req(b, 0), RequestContext("hb2"), now + 10)
    assert hb.body.error_code == ErrorCode.ILLEGAL_GENERATION
    [sync] = [o for o in broker.handle("SyncGroup", sync_req(b, 1), RequestContext("s"), now + 10) if isinstance(o, Reply)]
    assert sync.body.assignment == assignment_of(b)  # a member that was syncing gets its assignment
    # A member that never comes back expires after its session and the group rebalances.
    broker.handle("Heartbeat", hb_req(b, 1), RequestContext("hb3"), now + SESSION - 1)
    broker.handle("Heartbeat", hb_req(c, 1, instance="i2"), RequestContext("hb4"), now + SESSION - 1)
    broker.on_timer(session_key(a), now + 10 + SESSION)  # a's last heartbeat was at now + 10
    assert a not in r.members and r.state is GroupState.PREPARING_REBALANCE


def test_restore_brings_an_empty_group_back_empty_with_its_generation():
    broker = Broker(config(group_initial_rebalance_delay_ms=0), MemberIds())
    out = broker.restore([stable_record(3), empty_record(4)], 500)
    r = broker.groups["g"]
    assert (r.state, r.generation_id, r.members, r.leader_id, r.protocol_type) == (GroupState.EMPTY, 4, {}, None, None)
    # No member's session timer; only the retention check, which looks at Empty groups.
    assert [o.key for o in out if isinstance(o, ArmTimer)] == [EXPIRY_TIMER]
    # The next generation follows on from the restored one.
    mid = require_id(r, "c0", 600)
    r.handle_join(join_req(mid, protos("c0"), group_id="g"), "j", 600, "c0")
    r.on_timer(join_key("g"), 600)
    assert r.generation_id == 5 and r.state is GroupState.COMPLETING_REBALANCE


def test_restore_takes_the_latest_record_of_each_group_and_topic():
    broker = Broker(config(), MemberIds())
    broker.restore([TopicRecord("t0", 1, 0), stable_record(1), TopicRecord("t0", 6, 1), stable_record(2, group_id="h"),
                    stable_record(7)], 0)
    assert broker.groups["g"].generation_id == 7 and broker.groups["h"].generation_id == 2
    assert broker.topics.partitions == {"t0": 6}


# ============================================================================ end to end: restarts

HOST = "127.0.0.1"
TOPICS = {"t0": 3, "t1": 3}
ALL = {TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n)}
BROKER = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100"]
CONSUMER = ["session.timeout.ms=1000", "heartbeat.interval.ms=100", "retry.backoff.ms=20"]


class Restartable:
    """A coordinator that can be stopped and replaced by a new CoordinatorServer on the same port
    and data directory, and consumers pointed at that port."""

    def __init__(self, recorder: EventRecorder, cleanup: contextlib.AsyncExitStack, data_dir: Path) -> None:
        self.recorder = recorder
        self.cleanup = cleanup
        self.data_dir = data_dir
        self.port = 0
        self.server: CoordinatorServer | None = None
        self.clients: list[GroupMemberClient] = []

    async def start_server(self) -> CoordinatorServer:
        config = BrokerConfig().with_overrides(BROKER)
        server = CoordinatorServer(config, HOST, self.port, events=self.recorder.log("coordinator"), data_dir=self.data_dir)
        await server.start()
        self.cleanup.push_async_callback(server.stop)
        self.server, self.port = server, server.port
        return server

    async def consumer(self, name: str) -> GroupMemberClient:
        config = ConsumerConfig(group_id="g", topics=sorted(TOPICS), client_id=name).with_overrides(CONSUMER)
        client = GroupMemberClient(config, HOST, self.port, events=self.recorder.log(name))
        self.cleanup.push_async_callback(client.close, False)
        self.clients.append(client)
        return await client.start()

    def group(self):
        assert self.server is not None
        return self.server.broker.groups.get("g")

    def stable(self, clients: list[GroupMemberClient]) -> bool:
        g = self.group()
        return (g is not None and g.state is GroupState.STABLE and set(g.members) == {c.member_id for c in clients}
                and all(c.state is MemberState.STABLE and c.generation_id == g.generation_id for c in clients))

    async def wait_stable(self, clients: list[GroupMemberClient], after_generation: int = -1):
        await self.recorder.wait_until(lambda: self.stable(clients) and self.group().generation_id > after_generation,
                                       what=f"stable after generation {after_generation}")
        return self.group()


@pytest.fixture
def cluster(recorder: EventRecorder, cleanup: contextlib.AsyncExitStack, tmp_path: Path) -> Restartable:
    return Restartable(recorder, cleanup, tmp_path / "data")


def view(g) -> tuple:
    return (g.state, g.generation_id, g.leader_id, g.protocol_type, g.protocol_name,
            [(mid, m.group_instance_id, m.client_id, m.protocols, m.assignment) for mid, m in g.members.items()])


async def test_restart_keeps_the_generation_members_and_assignments_without_a_rebalance(
        cluster: Restartable, recorder: EventRecorder) -> None:
    first = await cluster.start_server()
    async with AdminClient(HOST, first.port) as admin:
        await admin.create_topics(TOPICS)
    clients = [await cluster.consumer(f"c{i}") for i in range(3)]
    g = await cluster.wait_stable(clients)
    before = view(g)
    owned = {c.member_id: sorted(c.assignment) for c in clients}
    assert sorted(tp for ps in owned.values() for tp in ps) == sorted(ALL)

    await first.stop()
    restarted_at = wall_clock_ms()
    second = await cluster.start_server()
    assert second is not first and second.port == first.port

    empty, recovered = recorder.events("log_recovered")
    assert empty.fields["records"] == 0 and recovered.fields["records"] >= 3  # two topics and the group
    assert recovered.fields["groups"] == 1 and recovered.fields["topics"] == 2
    assert recovered.fields["torn_tail_bytes"] == 0 and recovered.fields["corrupt_records"] == 0
    [loaded] = recorder.events("group_loaded")
    assert loaded.fields["generation_id"] == g.generation_id and loaded.fields["state"] == "Stable"
    restored = cluster.group()
    assert view(restored) == before  # generation, leader, protocol, members and assignments

    # Every member reconnects and has a heartbeat answered by the new coordinator.
    await recorder.wait_until(
        lambda: all(c.reconnects >= 1 and c.machine.last_heartbeat_ack_ms > restarted_at for c in clients),
        what="a successful heartbeat from every member after the restart")
    assert cluster.stable(clients) and view(cluster.group()) == before
    assert {c.member_id: sorted(c.assignment) for c in clients} == owned
    assert all(c.generation_id == g.generation_id for c in clients)
    # No rebalance: nobody rejoined, the new coordinator started none, nothing was revoked.
    assert not [ev for ev in recorder.events("join_sent") if ev.ts_ms >= restarted_at]
    assert not [ev for ev in recorder.events("partitions_revoked") + recorder.events("partitions_lost")
                if ev.ts_ms >= restarted_at]
    assert not [ev for ev in recorder.events("rebalance_started", node="coordinator") if ev.ts_ms >= restarted_at]
    # Topics survived too.
    async with AdminClient(HOST, second.port) as admin:
        assert await admin.topics() == TOPICS


async def test_a_member_that_dies_while_the_coordinator_is_down_expires_after_the_restart(
        cluster: Restartable, recorder: EventRecorder) -> None:
    first = await cluster.start_server()
    async with AdminClient(HOST, first.port) as admin:
        await admin.create_topics(TOPICS)
    clients = [await cluster.consumer(f"c{i}") for i in range(3)]
    gen = (await cluster.wait_stable(clients)).generation_id
    victim, survivors = clients[1], [clients[0], clients[2]]
    victim_id = victim.member_id

    await first.stop()
    await victim.close(leave=False)  # no LeaveGroup: it just dies while there is no coordinator
    second = await cluster.start_server()
    loaded_at = recorder.events("group_loaded")[0].ts_ms
    assert victim_id in cluster.group().members  # the restored group still counts it

    g = await cluster.wait_stable(survivors, after_generation=gen)
    assert g.generation_id == gen + 1 and victim_id not in g.members
    assert sorted(tp for c in survivors for tp in c.assignment) == sorted(ALL)
    [removed] = recorder.events("member_removed", node="coordinator", member_id=victim_id)
    assert removed.fields["reason"] == "session_timeout"
    assert removed.ts_ms >= loaded_at + 1000  # a full session after the group was loaded
    # The survivors kept their generation until then: their first rejoin came from the rebalance.
    for c in survivors:
        rejoins = [ev for ev in recorder.events("join_sent", node=c.config.client_id) if ev.ts_ms >= loaded_at]
        assert rejoins and "REBALANCE_IN_PROGRESS" in rejoins[0].fields["reason"]
    # And the new generation is durable: a third coordinator has it.
    await second.stop()
    await cluster.start_server()
    assert cluster.group().generation_id == gen + 1 and set(cluster.group().members) == {c.member_id for c in survivors}


async def test_a_restart_after_a_torn_write_recovers_what_was_whole(recorder: EventRecorder, tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = CoordinatorServer(BrokerConfig(), HOST, 0, events=recorder.log("coordinator"), data_dir=data)
    await server.start()
    async with AdminClient(HOST, server.port) as admin:
        await admin.create_topics({"t0": 2})
        await admin.create_partitions("t0", 5)
    await server.stop()
    torn = encode_frame(TopicRecord("t1", 9, 0))[:-3]
    with open(data / LOG_FILE_NAME, "ab") as f:
        f.write(torn)
    again = CoordinatorServer(BrokerConfig(), HOST, 0, events=recorder.log("coordinator"), data_dir=data)
    await again.start()
    try:
        recovered = recorder.events("log_recovered")[-1].fields
        assert (recovered["records"], recovered["torn_tail_bytes"], recovered["corrupt_records"]) == (2, len(torn), 0)
        assert recovered["compacted_bytes"] < (recovered["bytes"] - len(torn)) / 1.5  # one record of two
        async with AdminClient(HOST, again.port) as admin:
            assert await admin.topics() == {"t0": 5}
    finally:
        await again.stop()


async def test_a_commit_the_log_refuses_is_answered_not_coordinator_and_its_retry_is_durable(
        recorder: EventRecorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk under the group log: the OffsetCommit is not acknowledged (it was, before: an
    acknowledged commit that a restart lost). Every partition says NOT_COORDINATOR, as Kafka's
    coordinator answers a storage error; the client's retry, once the disk has room, is written."""
    from grouplab.replay import replay
    from grouplab.tracefile import TraceFile, trace_path

    data, run_dir = tmp_path / "data", tmp_path / "run"
    trace = TraceFile(trace_path(run_dir))
    server = CoordinatorServer(BrokerConfig(), HOST, 0, events=recorder.log("coordinator"), data_dir=data, trace=trace)
    await server.start()
    tp0, tp1 = TopicPartition("t0", 0), TopicPartition("t0", 1)
    try:
        async with AdminClient(HOST, server.port) as admin:
            await admin.create_topics({"t0": 2})
            assert server.group_log is not None
            real = server.group_log.append_many

            def full(_records: object) -> None:
                raise OSError(28, "No space left on device")

            monkeypatch.setattr(server.group_log, "append_many", full)
            assert await admin.commit_offsets("g", {tp0: 5, tp1: 7}) == {tp0: ErrorCode.NOT_COORDINATOR,
                                                                         tp1: ErrorCode.NOT_COORDINATOR}
            assert len(recorder.events("log_write_failed")) == 2
            monkeypatch.setattr(server.group_log, "append_many", real)
            assert await admin.commit_offsets("g", {tp0: 5, tp1: 7}) == {tp0: 0, tp1: 0}
    finally:
        await server.stop()
        trace.close()
    # The trace keeps the state machine's own answers: replaying it gives the same ones.
    assert replay(run_dir).identical
    again = CoordinatorServer(BrokerConfig(), HOST, 0, events=recorder.log("coordinator"), data_dir=data)
    await again.start()
    try:
        async with AdminClient(HOST, again.port) as admin:
            assert await admin.fetch_offsets("g", [tp0, tp1]) == {tp0: 5, tp1: 7}
    finally:
        await again.stop()


def test_with_error_marks_every_answer_in_the_reply() -> None:
    from grouplab.coordinator.driver import with_error
    from grouplab.protocol.messages import OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic

    body = OffsetCommitResponse(topics=[OffsetCommitResponseTopic("t", [
        OffsetCommitResponsePartition(0), OffsetCommitResponsePartition(1, ErrorCode.OFFSET_METADATA_TOO_LARGE)])])
    got = with_error(body, ErrorCode.NOT_COORDINATOR, "why")
    assert [p.error_code for p in got.topics[0].partitions] == [ErrorCode.NOT_COORDINATOR,
                                                                ErrorCode.OFFSET_METADATA_TOO_LARGE]
    assert got.error_code == ErrorCode.NOT_COORDINATOR and body.topics[0].partitions[0].error_code == 0


async def test_without_a_data_dir_nothing_is_kept(recorder: EventRecorder, tmp_path: Path) -> None:
    server = CoordinatorServer(BrokerConfig(), HOST, 0, events=recorder.log("coordinator"))
    await server.start()
    async with AdminClient(HOST, server.port) as admin:
        await admin.create_topics({"t0": 1})
    await server.stop()
    assert server.group_log is None and not recorder.events("log_recovered")
    again = CoordinatorServer(BrokerConfig(), HOST, 0)
    await again.start()
    assert again.broker.topics.partitions == {}
    await again.stop()


# ============================================================================ the CLI


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def grouplab(*args: str) -> list[str]:
    return [sys.executable, "-m", "grouplab.cli", *args]


def test_cli_coordinator_data_dir_keeps_topics_across_restarts(tmp_path: Path) -> None:
    port = free_port()
    bootstrap = f"{HOST}:{port}"
    for round_ in range(2):
        proc = subprocess.Popen(grouplab("coordinator", "--port", str(port), "--kafka-port", "off", "--data-dir", str(tmp_path / "data"),
                                         "--config", "grouplab.log.fsync=never"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "COLUMNS": "1000"})
        try:
            line = ""
            while "listening" not in line:
                line = proc.stderr.readline()
                assert line or proc.poll() is None, "the coordinator exited"
            if round_ == 0:
                assert "restored 0 groups and 0 topics" in line
                subprocess.run(grouplab("topics", "create", "kept", "--partitions", "4", "--bootstrap-server", bootstrap),
                               check=True, capture_output=True, timeout=30)
            else:
                assert "restored 0 groups and 1 topic " in line
                out = subprocess.run(grouplab("topics", "list", "--bootstrap-server", bootstrap),
                                     check=True, capture_output=True, text=True, timeout=30).stdout
                assert re.search(r"^kept\s+4$", out, re.M), out
        finally:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
        assert proc.returncode in (0, 130)
    assert (tmp_path / "data" / LOG_FILE_NAME).exists()
