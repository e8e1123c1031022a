"""End-to-end tests: a real CoordinatorServer and real GroupMemberClients over loopback TCP.

Nothing here sleeps to order events: every wait is on a condition (re-checked on each event-log
line any node emits) with a timeout, so a failure fails fast instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from typing import Any, Iterable

import msgpack
import pytest

from grouplab.consumer.client import GroupMemberClient
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import MemberState
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group import GroupState
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.cluster import LocalCluster
from grouplab.replay import replay
from grouplab.protocol import consumer_protocol
from grouplab.protocol.effects import wall_clock_ms
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.framing import encode_request, read_response
from grouplab.protocol.messages import (
    ApiVersionsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    RequestHeader,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from grouplab.protocol.types import Assignment, Subscription, TopicPartition

from conftest import DEFAULT_TIMEOUT_S, EventRecorder

pytestmark = pytest.mark.e2e

HOST = "127.0.0.1"
GROUP = "g"
TOPICS = {"t0": 3, "t1": 3}
ALL_PARTITIONS = {TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n)}
# Fast group formation: no initial delay, and short session timeouts allowed.
BROKER = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100"]
# Heartbeats every 100 ms so that members learn of a rebalance quickly.
CONSUMER = ["session.timeout.ms=3000", "heartbeat.interval.ms=100", "retry.backoff.ms=20"]


# ----------------------------------------------------------------------------- harness


class Env:
    """One test's servers and clients; everything is stopped by the `cleanup` stack (clients first)."""

    def __init__(self, recorder: EventRecorder, cleanup: contextlib.AsyncExitStack) -> None:
        self.recorder = recorder
        self.cleanup = cleanup
        self.server: CoordinatorServer | None = None

    async def start_server(self, *overrides: str, topics: dict[str, int] | None = TOPICS) -> CoordinatorServer:
        config = BrokerConfig().with_overrides([*BROKER, *overrides])
        server = CoordinatorServer(config, HOST, port=0, events=self.recorder.log("coordinator"))
        await server.start()
        self.cleanup.push_async_callback(server.stop)
        self.server = server
        if topics:
            async with AdminClient(HOST, server.port) as admin:
                await admin.create_topics(topics)
        return server

    async def consumer(self, name: str, topics: Iterable[str] = TOPICS, assignors: Iterable[str] = ("range",),
                       overrides: Iterable[str] = (), group: str = GROUP,
                       instance: str | None = None, listener: Any = None) -> GroupMemberClient:
        assert self.server is not None
        config = ConsumerConfig(group_id=group, topics=sorted(topics), client_id=name, group_instance_id=instance,
                                assignors=list(assignors)).with_overrides([*CONSUMER, *overrides])
        client = GroupMemberClient(config, HOST, self.server.port, listener=listener, events=self.recorder.log(name))
        self.cleanup.push_async_callback(client.close, False)
        return await client.start()

    def group(self, group_id: str = GROUP) -> Any:
        assert self.server is not None
        return self.server.broker.groups.get(group_id)

    def stable(self, clients: list[GroupMemberClient], group_id: str = GROUP) -> bool:
        """The group is Stable with exactly these members, each Stable in the group's generation."""
        g = self.group(group_id)
        return (g is not None and g.state is GroupState.STABLE
                and set(g.members) == {c.member_id for c in clients}
                and all(c.state is MemberState.STABLE and c.generation_id == g.generation_id for c in clients))

    async def wait_stable(self, clients: list[GroupMemberClient], after_generation: int = -1,
                          group_id: str = GROUP, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
        await self.recorder.wait_until(
            lambda: self.stable(clients, group_id) and self.group(group_id).generation_id > after_generation,
            timeout_s, f"{[c.config.client_id for c in clients]} stable after generation {after_generation}")
        return self.group(group_id)

    def snapshot(self, group_id: str = GROUP) -> tuple:
        g = self.group(group_id)
        return (g.state, g.generation_id, g.leader_id, g.protocol_name,
                {mid: m.assignment for mid, m in g.members.items()})


@pytest.fixture
def env(recorder: EventRecorder, cleanup: contextlib.AsyncExitStack) -> Env:
    return Env(recorder, cleanup)


def assert_partitioned(clients: list[GroupMemberClient], expected: set[TopicPartition]) -> None:
    """Assignments are pairwise disjoint and together cover exactly `expected`."""
    seen: list[TopicPartition] = [tp for c in clients for tp in c.assignment]
    assert len(seen) == len(set(seen)), f"a partition is owned twice: {[c.assignment for c in clients]}"
    assert set(seen) == expected


# ----------------------------------------------------------------------------- raw frames


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def raw_request(api: str, correlation_id: int, body: Any, version: int = 0) -> bytes:
    return frame(msgpack.packb({"api": api, "version": version, "correlation_id": correlation_id,
                                "client_id": "raw", "body": body}, use_bin_type=True))


def api_versions(correlation_id: int) -> bytes:
    return encode_request(RequestHeader("ApiVersions", 0, correlation_id, "raw"), ApiVersionsRequest())


async def read_frame(reader: asyncio.StreamReader, timeout_s: float = 5.0) -> tuple[int, dict]:
    (size,) = struct.unpack(">I", await asyncio.wait_for(reader.readexactly(4), timeout_s))
    return read_response(await asyncio.wait_for(reader.readexactly(size), timeout_s))


async def assert_api_versions_answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cid: int) -> None:
    writer.write(api_versions(cid))
    await writer.drain()
    got, body = await read_frame(reader)
    assert got == cid and body["error_code"] == 0
    assert "JoinGroup" in {k["api_key"] for k in body["api_keys"]}


async def close_writer(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


def valid_join_body(**changes: Any) -> dict:
    body = {"group_id": "raw-g", "session_timeout_ms": 1000, "rebalance_timeout_ms": 1000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"x"}]}
    body.update(changes)
    return body


# ----------------------------------------------------------------------------- 1. one generation, one leader


async def test_three_consumers_join_one_generation_with_one_leader(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    clients = [await env.consumer(f"c{i}") for i in range(3)]
    g = await env.wait_stable(clients)

    ids = {c.member_id for c in clients}
    assert len(ids) == 3 and g.leader_id in ids
    assert {c.generation_id for c in clients} == {g.generation_id}
    assert all(c.machine.leader_id == g.leader_id for c in clients)

    # The JoinGroup responses of the final generation, as each member logged them.
    joined = {}
    for c in clients:
        evs = recorder.events("joined", node=c.config.client_id, generation_id=g.generation_id)
        assert evs, f"{c.config.client_id} logged no join for generation {g.generation_id}"
        joined[c.member_id] = evs[-1].fields
    leaders = [mid for mid, f in joined.items() if f["is_leader"]]
    assert leaders == [g.leader_id]
    assert sorted(joined[g.leader_id]["members"]) == sorted(ids)
    assert all(f["members"] == [] for mid, f in joined.items() if mid != g.leader_id)

    assert_partitioned(clients, ALL_PARTITIONS)
    for c in clients:  # range: one partition of each topic per member
        assert sorted(tp.topic for tp in c.assignment) == ["t0", "t1"]
    # The coordinator stored the same assignments it handed out.
    for c in clients:
        stored = consumer_protocol.decode_assignment(g.members[c.member_id].assignment).partitions
        assert sorted(stored) == sorted(c.assignment)


# ----------------------------------------------------------------------------- 2. leave


async def test_an_event_log_given_after_construction_gets_the_events(env: Env, recorder: EventRecorder) -> None:
    """`client.events` may be set after the client is built (scripts/bench_rebalance.py does): the
    driver reads it when an event comes, not once at construction."""
    await env.start_server()
    config = ConsumerConfig(group_id=GROUP, topics=sorted(TOPICS), client_id="late").with_overrides(CONSUMER)
    client = GroupMemberClient(config, HOST, env.server.port)
    client.events = recorder.log("late")
    env.cleanup.push_async_callback(client.close, False)
    await client.start()
    await env.wait_stable([client])
    assert recorder.events("coordinator_connected", node="late") and recorder.events("sync_completed", node="late")


async def test_consumer_leaves_and_the_rest_rebalance(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    clients = [await env.consumer(f"c{i}") for i in range(3)]
    before = (await env.wait_stable(clients)).generation_id

    leaver, survivors = clients[0], clients[1:]
    leaver_id = leaver.member_id
    await leaver.close(leave=True)
    assert leaver.state is MemberState.CLOSED and leaver.assignment == []

    g = await env.wait_stable(survivors, after_generation=before)
    assert leaver_id not in g.members
    assert_partitioned(survivors, ALL_PARTITIONS)
    # range works topic by topic: of each topic's 3 partitions the first member in order gets 2.
    assert sorted(len(c.assignment) for c in survivors) == [2, 4]
    removed = recorder.events("member_removed", node="coordinator", member_id=leaver_id)
    assert [ev.fields["reason"] for ev in removed] == ["left"]


async def test_static_member_restarts_without_a_rebalance_and_its_old_id_is_fenced(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    clients = [await env.consumer(f"c{i}", instance=f"i{i}") for i in range(3)]
    g = await env.wait_stable(clients)
    generation, before = g.generation_id, {c.config.group_instance_id: sorted(c.assignment) for c in clients}

    old = clients[1]
    old_id = old.member_id
    await old.close(leave=True)  # a static member sends no LeaveGroup (KIP-345)
    assert not recorder.events("leave_sent", node="c1")
    restarted = await env.consumer("c1", instance="i1")
    clients[1] = restarted
    await env.wait_stable(clients)
    g = env.group()
    assert g.generation_id == generation, "a static restart within the session timeout must not rebalance"
    assert restarted.member_id != old_id and old_id not in g.members
    assert {c.config.group_instance_id: sorted(c.assignment) for c in clients} == before
    assert recorder.events("static_member_replaced", node="coordinator", old_member_id=old_id)

    async with AdminClient(HOST, env.server.port) as admin:
        hb = await admin.request("Heartbeat", HeartbeatRequest(GROUP, generation, old_id, "i1"))
    assert hb.error_code == ErrorCode.FENCED_INSTANCE_ID


# ----------------------------------------------------------------------------- 3. session timeout


async def test_crashed_consumer_is_removed_after_session_timeout(env: Env, recorder: EventRecorder) -> None:
    await env.start_server("group.min.session.timeout.ms=100")
    fast = ["session.timeout.ms=600", "heartbeat.interval.ms=100"]
    clients = [await env.consumer(f"c{i}", overrides=fast) for i in range(3)]
    before = (await env.wait_stable(clients)).generation_id

    victim, survivors = clients[1], [clients[0], clients[2]]
    victim_id = victim.member_id
    last_heartbeat = env.group().members[victim_id].last_heartbeat_ms
    await victim.close(leave=False)  # no LeaveGroup: the coordinator must notice by itself

    g = await env.wait_stable(survivors, after_generation=before)
    assert victim_id not in g.members
    assert_partitioned(survivors, ALL_PARTITIONS)
    removed = recorder.events("member_removed", node="coordinator", member_id=victim_id)
    assert [ev.fields["reason"] for ev in removed] == ["session_timeout"]
    # It was the session timer, not something sooner: a full session after the last heartbeat.
    assert removed[0].ts_ms >= last_heartbeat + 600
    assert not recorder.events("leave_sent", node=victim.config.client_id)


async def test_consumers_rejoin_after_losing_their_connection_mid_rebalance(env: Env, recorder: EventRecorder) -> None:
    """Regression: the backed-off rejoin (retry.backoff.ms=20) fires before the reconnect (50 ms),
    so its JoinGroup goes into no connection; the member must still rejoin once reconnected
    rather than wait in JOINING for max.poll.interval.ms + 5 s."""
    server = await env.start_server("group.initial.rebalance.delay.ms=1000")
    clients = [await env.consumer(f"c{i}") for i in range(2)]
    # Both JoinGroups are parked in the initial delay: the members are JOINING.
    await recorder.wait_until(lambda: env.group() is not None and len(env.group().members) == 2
                              and all(m.join_reply is not None for m in env.group().members.values()),
                              what="both joins parked")
    assert all(c.state is MemberState.JOINING for c in clients)

    for conn in list(server.connections):
        conn.transport.abort()
    await recorder.wait_until(lambda: all(c.reconnects >= 1 for c in clients), what="both to reconnect")
    await env.wait_stable(clients)
    assert_partitioned(clients, ALL_PARTITIONS)
    assert all(c.reconnects == 1 for c in clients)


async def test_stable_consumers_keep_their_generation_after_losing_their_connection(env: Env, recorder: EventRecorder) -> None:
    """A stable member that loses its connection keeps its generation and partitions and heartbeats
    again once reconnected (as Kafka's does): no rebalance."""
    server = await env.start_server()
    clients = [await env.consumer(f"c{i}") for i in range(2)]
    g = await env.wait_stable(clients)
    before, rebalances = env.snapshot(), len(recorder.events("rebalance_started"))
    owned = {c.member_id: sorted(c.assignment) for c in clients}

    cut = wall_clock_ms()
    for conn in list(server.connections):
        conn.transport.abort()
    await recorder.wait_until(lambda: all(c.reconnects >= 1 and c.machine.last_heartbeat_ack_ms > cut for c in clients),
                              what="both to reconnect and have a heartbeat answered")
    assert env.snapshot() == before and env.stable(clients) and env.group() is g
    assert {c.member_id: sorted(c.assignment) for c in clients} == owned
    assert len(recorder.events("rebalance_started")) == rebalances
    assert all(c.reconnects == 1 for c in clients)


# ----------------------------------------------------------------------------- 4. protocol vote


async def test_members_with_different_preferences_end_on_the_voted_protocol(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    # The first member (whose preference breaks ties) prefers range; the other two outvote it.
    clients = [await env.consumer("c0", assignors=["range", "roundrobin"]),
               await env.consumer("c1", assignors=["roundrobin", "range"]),
               await env.consumer("c2", assignors=["roundrobin", "range"])]
    g = await env.wait_stable(clients)
    assert g.protocol_name == "roundrobin"
    assert all(c.machine.protocol_name == "roundrobin" for c in clients)
    computed = recorder.events("assignment_computed", generation_id=g.generation_id)
    assert [ev.fields["assignor"] for ev in computed] == ["roundrobin"]
    assert_partitioned(clients, ALL_PARTITIONS)


# ----------------------------------------------------------------------------- 5. inconsistent protocol


async def test_member_with_no_common_protocol_is_refused(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    clients = [await env.consumer(f"c{i}", assignors=["range"]) for i in range(2)]
    await env.wait_stable(clients)
    before = env.snapshot()

    odd = await env.consumer("odd", assignors=["roundrobin"])
    await odd.wait_for(lambda c: c.state is MemberState.FAILED, DEFAULT_TIMEOUT_S)
    assert odd.machine.fatal_error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert ErrorCode.INCONSISTENT_GROUP_PROTOCOL == 23
    assert odd.member_id == "" and odd.assignment == []
    rejected = recorder.events("join_rejected", node="coordinator")
    assert [ev.fields["error"] for ev in rejected] == ["INCONSISTENT_GROUP_PROTOCOL"]

    # The group did not notice: same generation, members, assignments; a round trip later still so.
    assert env.snapshot() == before and env.stable(clients)
    async with AdminClient(HOST, env.server.port) as admin:
        [described] = await admin.describe_groups([GROUP])
    assert described.group_state == "Stable" and described.generation_id == before[1]
    assert env.snapshot() == before and env.stable(clients)


# ----------------------------------------------------------------------------- 6. stale generation


async def test_stale_generation_and_unknown_member_are_refused(env: Env) -> None:
    await env.start_server()
    clients = [await env.consumer(f"c{i}") for i in range(2)]
    g = await env.wait_stable(clients)
    before = env.snapshot()
    gen, leader = g.generation_id, g.leader_id
    follower = next(c.member_id for c in clients if c.member_id != leader)
    # A stale "assignment" that would give the leader everything, were it accepted.
    grab = consumer_protocol.encode_assignment(Assignment(sorted(ALL_PARTITIONS)))
    stale_sync = dict(protocol_type="consumer", protocol_name="range",
                      assignments=[SyncGroupRequestAssignment(leader, grab), SyncGroupRequestAssignment(follower, b"")])

    async with AdminClient(HOST, env.server.port) as admin:
        for mid in (leader, follower):
            r = await admin.request("Heartbeat", HeartbeatRequest(GROUP, gen - 1, mid))
            assert r.error_code == ErrorCode.ILLEGAL_GENERATION == 22
            r = await admin.request("SyncGroup", SyncGroupRequest(GROUP, gen - 1, mid, **stale_sync))
            assert r.error_code == ErrorCode.ILLEGAL_GENERATION
            assert r.assignment == b""
        r = await admin.request("Heartbeat", HeartbeatRequest(GROUP, gen, "nobody-1234"))
        assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID == 25
        r = await admin.request("SyncGroup", SyncGroupRequest(GROUP, gen, "nobody-1234", **stale_sync))
        assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        r = await admin.request("Heartbeat", HeartbeatRequest("no-such-group", gen, leader))
        assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # The real members are still in good standing.
        r = await admin.request("Heartbeat", HeartbeatRequest(GROUP, gen, follower))
        assert r.error_code == 0

    assert env.snapshot() == before and env.stable(clients)
    assert_partitioned(clients, ALL_PARTITIONS)


# ----------------------------------------------------------------------------- 7. partitions added


async def test_adding_partitions_triggers_a_rebalance(env: Env, recorder: EventRecorder) -> None:
    server = await env.start_server()
    clients = [await env.consumer(f"c{i}", overrides=["metadata.max.age.ms=200"]) for i in range(2)]
    before = (await env.wait_stable(clients)).generation_id

    async with AdminClient(HOST, server.port) as admin:
        await admin.create_partitions("t0", 6)
        assert (await admin.topics())["t0"] == 6

    grown = {TopicPartition("t0", p) for p in range(6)} | {TopicPartition("t1", p) for p in range(3)}
    await recorder.wait_until(lambda: env.stable(clients) and env.group().generation_id > before
                              and {tp for c in clients for tp in c.assignment} == grown,
                              what="a generation that assigns the 6 partitions of t0")
    assert_partitioned(clients, grown)
    changed = recorder.events("metadata_changed")
    assert changed and changed[0].fields["changed"] == {"t0": [3, 6]}
    assert recorder.events("partitions_created", node="coordinator", topic="t0", partition_count=6)


# ----------------------------------------------------------------------------- 8. bad frames


async def test_bad_frames_get_errors_and_other_clients_keep_going(env: Env, recorder: EventRecorder) -> None:
    server = await env.start_server("socket.request.max.bytes=4096")
    clients = [await env.consumer(f"c{i}") for i in range(3)]
    await env.wait_stable(clients)
    before = env.snapshot()

    async def group_unaffected() -> None:
        assert env.snapshot() == before and env.stable(clients)
        async with AdminClient(HOST, server.port) as admin:
            [d] = await admin.describe_groups([GROUP])
        assert (d.group_state, d.generation_id) == ("Stable", before[1])
        assert {m.member_id for m in d.members} == set(before[4])

    reader, writer = await asyncio.open_connection(HOST, server.port)
    try:
        # (a) not msgpack at all: answered with correlation id -1; the connection stays usable.
        writer.write(frame(b"\xc1\xc1 this is not msgpack"))
        cid, body = await read_frame(reader)
        assert cid == -1 and body["error_code"] == ErrorCode.INVALID_REQUEST == 42
        await assert_api_versions_answered(reader, writer, 1)
        await group_unaffected()

        # (b) a well-formed envelope naming an unknown api: answered with its correlation id.
        writer.write(raw_request("Frobnicate", 7, {}))
        cid, body = await read_frame(reader)
        assert cid == 7 and body["error_code"] == 42 and "unknown api" in body["error_message"]
        await assert_api_versions_answered(reader, writer, 2)

        # (c) wrong field types: the error names the field.
        writer.write(raw_request("JoinGroup", 8, valid_join_body(session_timeout_ms="soon")))
        cid, body = await read_frame(reader)
        assert cid == 8 and body["error_code"] == 42 and "session_timeout_ms" in body["error_message"]
        writer.write(raw_request("JoinGroup", 9, valid_join_body(protocols=[{"name": "range", "metadata": 5}])))
        cid, body = await read_frame(reader)
        assert cid == 9 and body["error_code"] == 42 and "protocols[0].metadata" in body["error_message"]
        writer.write(raw_request("Heartbeat", 10, {"group_id": GROUP, "generation_id": before[1]}))
        cid, body = await read_frame(reader)
        assert cid == 10 and body["error_code"] == 42 and "member_id" in body["error_message"]
        # ... and an unsupported version of a known api.
        writer.write(raw_request("ApiVersions", 11, {}, version=9))
        cid, body = await read_frame(reader)
        assert cid == 11 and body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        await assert_api_versions_answered(reader, writer, 3)
        assert "raw-g" not in server.broker.groups  # the refused JoinGroups created nothing
        await group_unaffected()
    finally:
        await close_writer(writer)

    # (d) a declared length over socket.request.max.bytes: the valid frame before it is answered,
    # then an error frame, then the server closes the connection.
    reader, writer = await asyncio.open_connection(HOST, server.port)
    try:
        writer.write(api_versions(21) + struct.pack(">I", 5000) + b"\x00" * 100)
        cid, body = await read_frame(reader)
        assert cid == 21 and body["error_code"] == 0
        cid, body = await read_frame(reader)
        assert cid == -1 and body["error_code"] == 42 and "4096" in body["error_message"]
        assert await asyncio.wait_for(reader.read(), 5.0) == b"", "the server should close the connection"
    finally:
        await close_writer(writer)
    await group_unaffected()

    # (e) a truncated frame: 10 of 100 announced bytes, then the client goes away.
    reader, writer = await asyncio.open_connection(HOST, server.port)
    writer.write(struct.pack(">I", 100) + b"0123456789")
    await writer.drain()
    await group_unaffected()  # while the half frame sits in the server's buffer
    await close_writer(writer)
    await recorder.wait_until(lambda: len(server.connections) == len(clients), what="the truncated connection to go")
    await group_unaffected()

    assert server.bad_frames == 7
    assert len(recorder.events("bad_request", node="coordinator")) == 7

    # The consumers' heartbeats were served throughout, and still are.
    since = wall_clock_ms()
    g = env.group()
    await recorder.wait_until(lambda: all(m.last_heartbeat_ms > since for m in g.members.values()),
                              what="a heartbeat from every member")
    await group_unaffected()
    assert not recorder.events("heartbeat_failed") and not recorder.events("internal_error")


# ----------------------------------------------------------------------------- 9. join refusals


async def test_join_with_session_timeout_below_the_minimum_is_refused(env: Env, recorder: EventRecorder) -> None:
    server = await env.start_server("group.min.session.timeout.ms=500")
    async with AdminClient(HOST, server.port) as admin:
        r = await admin.request("JoinGroup", JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=499, rebalance_timeout_ms=1000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequestProtocol("range", b"")]))
    assert r.error_code == ErrorCode.INVALID_SESSION_TIMEOUT == 26
    assert "499" in r.error_message

    client = await env.consumer("c0", overrides=["session.timeout.ms=300", "heartbeat.interval.ms=100"])
    await client.wait_for(lambda c: c.state is MemberState.FAILED, DEFAULT_TIMEOUT_S)
    assert client.machine.fatal_error is ErrorCode.INVALID_SESSION_TIMEOUT
    g = env.group()  # a refused join leaves no member behind (nor, perhaps, any group at all)
    assert g is None or (not g.members and not g.pending_members and g.generation_id == 0)


async def test_group_max_size_refuses_the_extra_member(env: Env, recorder: EventRecorder) -> None:
    await env.start_server("group.max.size=2")
    clients = await asyncio.gather(*(env.consumer(f"c{i}") for i in range(3)))

    def settled() -> bool:
        failed = [c for c in clients if c.state is MemberState.FAILED]
        return len(failed) == 1 and env.stable([c for c in clients if c not in failed])

    await recorder.wait_until(settled, what="one member refused and two stable")
    [refused] = [c for c in clients if c.state is MemberState.FAILED]
    members = [c for c in clients if c is not refused]
    assert refused.machine.fatal_error is ErrorCode.GROUP_MAX_SIZE_REACHED == 81
    assert len(env.group().members) == 2
    assert_partitioned(members, ALL_PARTITIONS)
    rejected = recorder.events("join_rejected", node="coordinator")
    assert [ev.fields["error"] for ev in rejected] == ["GROUP_MAX_SIZE_REACHED"]


# ----------------------------------------------------------------------------- 10. LocalCluster


async def test_local_cluster_script_and_run_dir(tmp_path, recorder: EventRecorder) -> None:
    cluster = LocalCluster(
        TOPICS, group_id="grouplab", assignors=["range"],
        broker_config=BrokerConfig().with_overrides(BROKER),
        consumer_overrides=CONSUMER, run_dir=tmp_path, listeners=[recorder.record])
    try:
        await cluster.start()
        for _ in range(3):
            await cluster.add_consumer()
        await cluster.wait_stable(DEFAULT_TIMEOUT_S)
        victim = cluster.apps[0]
        await cluster.stop_consumer(victim)
        await cluster.wait_stable(DEFAULT_TIMEOUT_S)
        assert victim.client.member_id not in cluster.group_state().members
        await cluster.add_consumer()
        await cluster.wait_stable(DEFAULT_TIMEOUT_S)
        group = cluster.group_state()
        assert group.generation_id >= 3 and len(group.members) == 3
        assert_partitioned([app.client for app in cluster.apps], ALL_PARTITIONS)
        names = [app.client.config.client_id for app in cluster.apps + cluster.stopped]
    finally:
        await cluster.close()

    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["coordinator.jsonl", "trace"] + [f"{n}.jsonl" for n in names])
    for path in tmp_path.glob("*.jsonl"):
        lines = path.read_text().splitlines()
        assert lines, f"{path.name} is empty"
        for line in lines:
            obj = json.loads(line)
            assert isinstance(obj["ts_ms"], int) and isinstance(obj["event"], str)
            assert obj["node"] == path.stem
    coordinator = [json.loads(line) for line in (tmp_path / "coordinator.jsonl").read_text().splitlines()]
    assert any(e["event"] == "member_removed" and e["reason"] == "left" for e in coordinator)
    assert coordinator[-1]["event"] == "coordinator_stopped"
    # The message trace of a run over real sockets replays to the same answers and events.
    replayed = replay(tmp_path)
    assert replayed.identical, replayed.difference
    assert replayed.requests > 20 and replayed.responses > 20 and replayed.member_ids >= 4 and replayed.events > 10


# ----------------------------------------------------------------------------- 11. DescribeGroups


async def test_describe_groups_over_the_wire(env: Env) -> None:
    server = await env.start_server()
    clients = [await env.consumer(f"c{i}") for i in range(3)]
    g = await env.wait_stable(clients)

    async with AdminClient(HOST, server.port) as admin:
        resp = await admin.request("DescribeGroups", DescribeGroupsRequest([GROUP, "unknown-group"]))
    assert resp.error_code == 0
    described, unknown = resp.groups
    assert (described.group_id, described.error_code, described.group_state) == (GROUP, 0, "Stable")
    assert (described.protocol_type, described.protocol_data) == ("consumer", "range")
    assert (described.generation_id, described.leader) == (g.generation_id, g.leader_id)
    by_id = {c.member_id: c for c in clients}
    assert {m.member_id for m in described.members} == set(by_id)
    for m in described.members:
        client = by_id[m.member_id]
        assert m.client_id == client.config.client_id and m.client_host == HOST
        assert sorted(consumer_protocol.decode_assignment(m.member_assignment).partitions) == sorted(client.assignment)
        sub: Subscription = consumer_protocol.decode_subscription(m.member_metadata)
        assert sub.topics == ["t0", "t1"]
    assert (unknown.group_id, unknown.group_state, unknown.members) == ("unknown-group", "Dead", [])


# ----------------------------------------------------------------------------- 12. CLI admin commands


class LoopThread:
    """An event loop in a background thread, so that the CLI's main() (asyncio.run, and signal
    handlers, which only the main thread may install) can run on the test's main thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="e2e-server-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def test_cli_admin_commands_against_a_running_server(capsys: pytest.CaptureFixture[str]) -> None:
    from grouplab.cli import main

    bg = LoopThread()
    recorder = EventRecorder()
    clients: list[GroupMemberClient] = []
    server = CoordinatorServer(BrokerConfig().with_overrides(BROKER), HOST, 0, events=recorder.log("coordinator"))

    async def start_members(n: int) -> None:
        for i in range(n):
            config = ConsumerConfig(group_id="cli-g", topics=["x"], client_id=f"m{i}").with_overrides(CONSUMER)
            clients.append(await GroupMemberClient(config, HOST, server.port, events=recorder.log(f"m{i}")).start())
        group = lambda: server.broker.groups.get("cli-g")  # noqa: E731
        await recorder.wait_until(lambda: group() is not None and group().state is GroupState.STABLE
                                  and set(group().members) == {c.member_id for c in clients}
                                  and all(c.state is MemberState.STABLE for c in clients), what="cli-g stable")

    async def stop_all() -> None:
        for c in clients:
            await c.close(leave=False)
        await server.stop()

    def cli(*argv: str, server_arg: bool = True) -> tuple[int, str, str]:
        capsys.readouterr()
        rc = main([*argv, "--bootstrap-server", bootstrap] if server_arg else list(argv))
        out, err = capsys.readouterr()
        return rc, out, err

    try:
        bg.run(server.start())
        bootstrap = f"{HOST}:{server.port}"

        rc, out, _ = cli("topics", "create", "x", "--partitions", "2")
        assert rc == 0 and "created topic x" in out
        assert server.broker.topics.partitions["x"] == 2
        rc, _, err = cli("topics", "create", "x", "--partitions", "2")
        assert rc == 1 and "TOPIC_ALREADY_EXISTS" in err
        rc, _, _ = cli("topics", "add-partitions", "x", "--partitions", "3")
        assert rc == 0 and server.broker.topics.partitions["x"] == 3
        rc, _, err = cli("topics", "add-partitions", "x", "--partitions", "2")
        assert rc == 1 and "INVALID_PARTITIONS" in err
        rc, out, _ = cli("topics", "list")
        assert rc == 0 and out.split() == ["x", "3"]

        bg.run(start_members(2))
        generation = server.broker.groups["cli-g"].generation_id
        # Like kafka-consumer-groups: the groups that exist are described, a missing one is an error.
        rc, out, err = cli("describe", "--group", "cli-g", "--group", "missing", "--format", "json")
        assert rc == 1 and "group 'missing' does not exist" in err and len(err.strip().splitlines()) == 1
        (described,) = json.loads(out)
        assert (described["group_id"], described["state"], described["protocol"]) == ("cli-g", "Stable", "range")
        assert described["generation_id"] == generation and described["protocol_type"] == "consumer"
        assert described["leader"] in {c.member_id for c in clients}
        assert sorted(m["client_id"] for m in described["members"]) == ["m0", "m1"]
        owned = sorted(tp for m in described["members"] for tp in m["assignment"])
        assert owned == [["x", 0], ["x", 1], ["x", 2]]

        rc, out, _ = cli("describe", "--all-groups", "--format", "json")
        assert rc == 0 and [g["group_id"] for g in json.loads(out)] == ["cli-g"]
        rc, out, _ = cli("describe", "--group", "cli-g")
        assert rc == 0 and out.strip()
        rc, _, err = cli("describe")
        assert rc == 2 and "--group" in err

        rc, out, _ = cli("assign", "--assignor", "range", "--topics", "t0:3", "--member", "c0=t0",
                         "--member", "c1=t0", "--format", "json", server_arg=False)
        assert rc == 0 and json.loads(out) == {"c0": [["t0", 0], ["t0", 1]], "c1": [["t0", 2]]}
    finally:
        try:
            bg.run(stop_all())
        finally:
            bg.close()

    # Nothing listens on a port that was just freed: the CLI says so with exit code 1.
    with socket.socket() as s:
        s.bind((HOST, 0))
        free_port = s.getsockname()[1]
    capsys.readouterr()
    assert main(["topics", "list", "--bootstrap-server", f"{HOST}:{free_port}"]) == 1
    assert "cannot connect" in capsys.readouterr().err
