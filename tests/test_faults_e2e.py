"""Faults on real sockets: a FaultProxy between the consumers and the coordinator, and member-level
faults done to the asyncio shells (crash, hang, slow processing).

As in test_e2e.py, nothing sleeps to order events: every wait is on a condition with a timeout
(re-checked on every event-log line). The one sleep left is the hold test's check that nothing
moves while a frame is held, which needs time to pass by definition.

After every test (and on every event during it) one invariant is checked: no partition is owned
by two members that are both Stable in the same generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

import msgpack
import pytest

from grouplab.consumer.app import SimulatedConsumerApp
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import ConsumerCoordinator, MemberState, Send
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group import GroupState
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.faults import FaultProxy, FaultSpecError, Rule, crash, hang, parse_spec, slow_processing
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.framing import encode_request, read_response
from grouplab.protocol.consumer_protocol import encode_assignment
from grouplab.protocol.messages import ApiVersionsRequest, JoinGroupResponse, RequestHeader, SyncGroupResponse
from grouplab.protocol.types import Assignment, TopicPartition

from conftest import EventRecorder

pytestmark = pytest.mark.e2e

HOST = "127.0.0.1"
GROUP = "g"
TOPICS = {"t0": 3, "t1": 3}
ALL_PARTITIONS = {TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n)}
BROKER = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100"]
SESSION_MS = 1000
CONSUMER = [f"session.timeout.ms={SESSION_MS}", "heartbeat.interval.ms=100", "retry.backoff.ms=20"]
TIMEOUT_S = 10.0


# ----------------------------------------------------------------------------- harness


class FaultEnv:
    """A coordinator, optionally a FaultProxy in front of it, and SimulatedConsumerApps (polling
    every 50 ms) connected through the proxy when there is one."""

    def __init__(self, recorder: EventRecorder, cleanup: contextlib.AsyncExitStack, fault_proxy: Any) -> None:
        self.recorder = recorder
        self.cleanup = cleanup
        self.fault_proxy = fault_proxy
        self.server: CoordinatorServer | None = None
        self.proxy: FaultProxy | None = None
        self.apps: list[SimulatedConsumerApp] = []  # every app ever started, for the invariant
        self.violations: list[str] = []
        self.trace: list[dict[str, Any]] = []  # the coordinator's message trace, with start(trace=True)

    async def start(self, *overrides: str, proxy: bool = True, seed: int = 0, trace: bool = False) -> CoordinatorServer:
        config = BrokerConfig().with_overrides([*BROKER, *overrides])
        log = self.recorder.log("coordinator")
        log.listeners.append(lambda _n, _e: self.check_ownership())
        self.server = await CoordinatorServer(config, HOST, 0, events=log,
                                              trace=self.trace.append if trace else None).start()
        self.cleanup.push_async_callback(self.server.stop)
        async with AdminClient(HOST, self.server.port) as admin:
            await admin.create_topics(TOPICS)
        if proxy:
            self.proxy = await self.fault_proxy(self.server.port, seed=seed)
        return self.server

    async def consumer(self, name: str, overrides: Iterable[str] = (), direct: bool = False) -> SimulatedConsumerApp:
        assert self.server is not None
        port = self.server.port if direct or self.proxy is None else self.proxy.port
        config = ConsumerConfig(group_id=GROUP, topics=sorted(TOPICS), client_id=name).with_overrides([*CONSUMER, *overrides])
        log = self.recorder.log(name)
        log.listeners.append(lambda _n, _e: self.check_ownership())
        app = SimulatedConsumerApp(config, HOST, port, events=log, poll_interval_ms=50)
        self.cleanup.push_async_callback(app.stop, False)
        self.apps.append(app)
        return await app.start()

    async def consumers(self, n: int, overrides: Iterable[str] = ()) -> list[SimulatedConsumerApp]:
        return [await self.consumer(f"c{i}", overrides) for i in range(n)]

    def group(self) -> Any:
        assert self.server is not None
        return self.server.broker.groups.get(GROUP)

    def stable(self, apps: list[SimulatedConsumerApp]) -> bool:
        """Stable with exactly these members, each Stable in the group's generation, and every
        partition owned once."""
        g = self.group()
        clients = [a.client for a in apps]
        if g is None or g.state is not GroupState.STABLE or set(g.members) != {c.member_id for c in clients}:
            return False
        if not all(c.state is MemberState.STABLE and c.generation_id == g.generation_id for c in clients):
            return False
        owned = [tp for c in clients for tp in c.assignment]
        return len(owned) == len(set(owned)) and set(owned) == ALL_PARTITIONS

    async def wait_stable(self, apps: list[SimulatedConsumerApp], after_generation: int = -1,
                          timeout_s: float = TIMEOUT_S) -> Any:
        names = [a.client.config.client_id for a in apps]
        await self.recorder.wait_until(lambda: self.stable(apps) and self.group().generation_id > after_generation,
                                       timeout_s, f"{names} stable after generation {after_generation}")
        return self.group()

    def events(self, event: str, node: str | None = None, **fields: Any) -> list:
        return self.recorder.events(event, node=node, **fields)

    def requests_from(self, client_id: str) -> list[dict[str, Any]]:
        """The requests of `client_id` the coordinator took (start(trace=True))."""
        return [line for line in self.trace if line["kind"] == "request" and line["client_id"] == client_id]

    def check_ownership(self) -> None:
        """No partition owned by two members that are both Stable in the same generation."""
        owners: dict[int, dict[TopicPartition, str]] = defaultdict(dict)
        for app in self.apps:
            c = app.client
            if c.state is not MemberState.STABLE:
                continue
            for tp in c.assignment:
                other = owners[c.generation_id].setdefault(tp, c.config.client_id)
                if other != c.config.client_id:
                    self.violations.append(f"{tp} owned by {other} and {c.config.client_id} in generation {c.generation_id}")


@pytest.fixture
async def env(recorder: EventRecorder, cleanup: contextlib.AsyncExitStack, fault_proxy: Any):
    e = FaultEnv(recorder, cleanup, fault_proxy)
    yield e
    e.check_ownership()  # the clients are still up here: the cleanup stack unwinds after this
    assert not e.violations, e.violations[:5]


def app_named(apps: list[SimulatedConsumerApp], member_id: str) -> SimulatedConsumerApp:
    [app] = [a for a in apps if a.client.member_id == member_id]
    return app


# ----------------------------------------------------------------------------- crash, hang, slow


async def test_crashed_member_behind_the_proxy_is_removed_after_its_session_timeout(env: FaultEnv) -> None:
    await env.start()
    apps = await env.consumers(3)
    before = (await env.wait_stable(apps)).generation_id
    victim, survivors = apps[1], [apps[0], apps[2]]
    victim_id = victim.client.member_id
    last_heartbeat = env.group().members[victim_id].last_heartbeat_ms

    await crash(victim)  # the socket goes, no LeaveGroup; the proxy closes the upstream side too

    g = await env.wait_stable(survivors, after_generation=before)
    assert victim_id not in g.members
    removed = env.events("member_removed", node="coordinator", member_id=victim_id)
    assert [ev.fields["reason"] for ev in removed] == ["session_timeout"]
    assert removed[0].ts_ms >= last_heartbeat + SESSION_MS
    assert not env.events("leave_sent", node="c1")


async def test_hung_member_keeps_its_socket_open_is_removed_and_rejoins_when_it_wakes(env: FaultEnv) -> None:
    server = await env.start(proxy=False)
    apps = await env.consumers(3)
    before = (await env.wait_stable(apps)).generation_id
    victim, survivors = apps[1], [apps[0], apps[2]]
    victim_id = victim.client.member_id

    stall = hang(victim)
    g = await env.wait_stable(survivors, after_generation=before)
    assert victim_id not in g.members
    removed = env.events("member_removed", node="coordinator", member_id=victim_id)
    assert [ev.fields["reason"] for ev in removed] == ["session_timeout"]
    # The hung process never closed its connection, nor did anything: still Stable in its own view.
    transport = victim.client._wire.transport
    assert transport is not None and not transport.is_closing()
    assert len(server.connections) == 3
    assert victim.client.state is MemberState.STABLE and victim.client.generation_id == before
    assert not env.events("leave_sent", node="c1") and stall.deferred_timers

    stall.resume()  # overdue timers fire: no heartbeat answer for a session, so it rejoins
    g = await env.wait_stable(apps, after_generation=g.generation_id)
    assert victim.client.member_id != victim_id
    errors = [ev.fields["error"] for ev in env.events("group_error", node="c1")]
    assert "UNKNOWN_MEMBER_ID" in errors


async def test_slow_processing_beyond_max_poll_interval_leaves_proactively(env: FaultEnv) -> None:
    await env.start()
    apps = [await env.consumer("c0"), await env.consumer("c1", ["max.poll.interval.ms=600"]), await env.consumer("c2")]
    before = (await env.wait_stable(apps)).generation_id
    slow, survivors = apps[1], [apps[0], apps[2]]
    slow_id = slow.client.member_id

    stall = slow_processing(slow)  # no more poll(); heartbeats go on
    g = await env.wait_stable(survivors, after_generation=before)
    assert slow_id not in g.members
    [leave] = env.events("leave_sent", node="c1")
    assert leave.fields["reason"] == "consumer poll timeout has expired"
    assert env.events("poll_timeout", node="c1")
    assert env.events("partitions_lost", node="c1", reason="poll timeout")
    removed = env.events("member_removed", node="coordinator", member_id=slow_id)
    assert [ev.fields["reason"] for ev in removed] == ["left"]  # it left; no session timeout needed

    stall.resume()  # the next poll() rejoins
    await env.wait_stable(apps, after_generation=g.generation_id)


# ----------------------------------------------------------------------------- proxy faults


async def test_every_request_delayed_100_to_300_ms_still_forms_a_stable_group(env: FaultEnv) -> None:
    await env.start()
    rule = env.proxy.delay("*", (100, 300))
    apps = await env.consumers(3)
    await env.wait_stable(apps)
    assert rule.fired >= 9  # at least each member's two JoinGroups and a SyncGroup
    assert not env.events("member_removed")


async def test_half_the_heartbeats_dropped_keeps_the_group_stable(env: FaultEnv) -> None:
    await env.start(seed=1)
    # A heartbeat unanswered for request.timeout.ms is given up, so the next tick sends another.
    apps = await env.consumers(2, ["request.timeout.ms=50"])
    g = await env.wait_stable(apps)
    generation = g.generation_id
    rule = env.proxy.drop("Heartbeat", p=0.5)

    # Some heartbeats get through, so no session expires: wait until many were dropped.
    await env.recorder.wait_until(lambda: rule.fired >= 15, what="15 heartbeats dropped")
    assert rule.matched - rule.fired >= 5, "some heartbeats must get through"
    assert env.stable(apps) and env.group().generation_id == generation
    assert not env.events("member_removed")
    assert not env.events("heartbeat_session_expired") and not env.events("coordinator_disconnected")


def test_an_unanswered_heartbeat_is_given_up_after_request_timeout() -> None:
    """The client-side fix the drop test needs: at most one heartbeat in flight, but not forever."""
    config = ConsumerConfig(group_id=GROUP, topics=["t0"], client_id="m").with_overrides(
        ["session.timeout.ms=1000", "heartbeat.interval.ms=100", "request.timeout.ms=250"])
    c = ConsumerCoordinator(config)
    c.start(0)
    c.on_response(1, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m1"), 0)
    c.on_response(2, JoinGroupResponse(generation_id=1, protocol_type="consumer", protocol_name="range",
                                       leader="m0", member_id="m1"), 0)
    c.on_response(3, SyncGroupResponse(assignment=encode_assignment(Assignment([TopicPartition("t0", 0)]))), 0)
    assert c.state is MemberState.STABLE

    def heartbeats(now_ms: int) -> int:
        return sum(1 for out in c.on_timer(("heartbeat",), now_ms) if isinstance(out, Send) and out.api == "Heartbeat")

    assert [heartbeats(t) for t in (100, 200, 300, 400, 500)] == [1, 0, 0, 1, 0]  # lost at 100: resent at 400


async def test_partitioned_member_is_removed_and_rejoins_after_heal(env: FaultEnv) -> None:
    await env.start()
    # The victim's max.poll.interval.ms bounds how long a JoinGroup lost in the partition is waited for.
    apps = [await env.consumer("c0"), await env.consumer("c1", ["max.poll.interval.ms=1000"]), await env.consumer("c2")]
    await env.wait_stable(apps)
    victim = apps[1]
    old_id = victim.client.member_id
    events_before = len(env.recorder.records)

    env.proxy.partition("c1")  # both directions blackholed, its connection kept open
    await env.recorder.wait_until(lambda: env.events("member_removed", member_id=old_id), what="c1 removed")
    env.proxy.heal()

    await env.wait_stable(apps)
    [removed] = env.events("member_removed", member_id=old_id)
    assert removed.fields["reason"] == "session_timeout"
    later = env.recorder.records[events_before:]
    assert any(ev.event == "rebalance_started" and f"{old_id} removed" in ev.fields["trigger"] for _, ev in later)
    for name in ("c0", "c2"):  # the others rebalanced
        assert any(n == name and ev.event == "join_sent" for n, ev in later)
    # The partitioned member learned it was out, lost (eager: revoked) its partitions and rejoined.
    assert victim.client.member_id != old_id
    errors = {ev.fields["error"] for n, ev in later if n == "c1" and ev.event == "group_error"}
    assert errors & {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"}, errors
    assert any(n == "c1" and ev.event in ("partitions_revoked", "partitions_lost") for n, ev in later)
    assert env.proxy.partition_dropped > 0


async def test_duplicated_join_and_sync_requests_do_not_break_the_group(env: FaultEnv) -> None:
    await env.start()
    joins, syncs = env.proxy.duplicate("JoinGroup"), env.proxy.duplicate("SyncGroup")
    apps = await env.consumers(3)
    g = await env.wait_stable(apps)
    assert joins.fired >= 6 and syncs.fired >= 3
    # The second answers of duplicated requests arrive and are ignored.
    assert env.events("unexpected_response")

    leaver = apps.pop(0)  # one more rebalance, with duplicates of the rejoins
    await leaver.stop(leave=True)
    await env.wait_stable(apps, after_generation=g.generation_id)
    assert {ev.fields["reason"] for ev in env.events("member_removed", node="coordinator")} <= {"left"}


async def test_injected_rebalance_in_progress_heartbeat_error_makes_the_member_rejoin(env: FaultEnv) -> None:
    await env.start()
    apps = await env.consumers(3)
    await env.wait_stable(apps)
    rule = env.proxy.error("Heartbeat", ErrorCode.REBALANCE_IN_PROGRESS, link="c2", limit=1)

    await env.recorder.wait_until(lambda: env.events("join_sent", node="c2", reason="Heartbeat: REBALANCE_IN_PROGRESS"),
                                  what="c2 to rejoin")
    await env.wait_stable(apps)
    assert rule.fired == 1
    assert [ev.fields["error"] for ev in env.events("heartbeat_failed", node="c2")] == ["REBALANCE_IN_PROGRESS"]
    assert not env.events("member_removed")


async def test_holding_the_leaders_sync_keeps_the_followers_parked_until_released(env: FaultEnv) -> None:
    await env.start()
    apps = await env.consumers(3)
    g = await env.wait_stable(apps)
    leader = app_named(apps, g.leader_id)
    rule = env.proxy.hold("SyncGroup", link=leader.client.config.client_id)

    apps.append(await env.consumer("c3"))  # a rebalance
    followers = [a for a in apps if a is not leader]

    def parked() -> bool:
        g = env.group()
        return (g.state is GroupState.COMPLETING_REBALANCE and len(env.proxy.held_frames("SyncGroup")) == 1
                and all(a.client.state is MemberState.SYNCING for a in followers)
                and all(g.members[a.client.member_id].sync_reply is not None for a in followers if a.client.member_id in g.members))

    await env.recorder.wait_until(parked, what="the leader's SyncGroup held and the followers parked")
    generation = env.group().generation_id
    await asyncio.sleep(0.3)  # nothing may move while the leader's SyncGroup is held
    assert parked() and env.group().generation_id == generation
    assert leader.client.state is MemberState.SYNCING

    env.proxy.remove(rule)
    assert env.proxy.release(api="SyncGroup") == 1
    g = await env.wait_stable(apps)
    assert g.generation_id == generation and rule.fired == 1


@pytest.mark.parametrize("direction", ["request", "response"])
async def test_a_disconnect_rule_resets_the_members_connection_once_and_the_group_carries_on(
        env: FaultEnv, direction: str) -> None:
    """`Heartbeat:disconnect:link=c1:limit=1`: c1's first heartbeat (or the coordinator's answer to
    it) resets its link. c1 hears its connection is gone, reconnects with its back-off well within
    its session and heartbeats on in the same generation: no one is removed, no rebalance."""
    await env.start(trace=True)
    apps = await env.consumers(3)
    g = await env.wait_stable(apps)
    generation, c1 = g.generation_id, apps[1]
    member_id = c1.client.member_id
    spec = "Heartbeat:disconnect" + (":dir=response" if direction == "response" else "") + ":link=c1:limit=1"
    rule = env.proxy.add_spec(spec)

    await env.recorder.wait_until(lambda: env.events("link_closed", node="proxy", link="c1#1"), what="c1#1 reset")
    [injected] = env.events("fault_injected", node="proxy")
    assert (injected.fields["action"], injected.fields["api"], injected.fields["direction"], injected.fields["link"],
            injected.fields["rule"]) == ("disconnect", "Heartbeat", direction, "c1#1", spec)
    [closed] = env.events("link_closed", node="proxy", link="c1#1")
    assert closed.fields["why"] == f"reset by fault rule {spec}"
    reset_at = injected.ts_ms
    heartbeats_before = len(env.requests_from("c1"))

    def heartbeating_again() -> bool:
        member = env.group().members.get(member_id)
        return (bool(env.proxy.find_links("c1#2")) and member is not None and member.last_heartbeat_ms > reset_at
                and len(env.requests_from("c1")) > heartbeats_before)

    await env.recorder.wait_until(heartbeating_again, what="c1 to reconnect and heartbeat on")
    await env.wait_stable(apps)
    assert rule.fired == 1 and env.group().generation_id == generation and c1.client.member_id == member_id
    assert env.events("coordinator_disconnected", node="c1", previous_state="stable")
    assert not env.events("member_removed")
    assert not [ev for ev in env.events("rebalance_started", node="coordinator") if ev.ts_ms >= reset_at]
    assert {l.name for l in env.proxy.links} == {"c0#1", "c1#2", "c2#1"}
    # The heartbeat a request rule caught never reached the coordinator; one a response rule caught
    # did (its answer was lost). A member's correlation ids are unique across its connections.
    taken = [line for line in env.requests_from("c1") if line["correlation_id"] == injected.fields["correlation_id"]]
    assert [line["api"] for line in taken] == (["Heartbeat"] if direction == "response" else [])


async def test_an_isolated_member_is_removed_its_reconnects_refused_and_heal_lets_it_rejoin(env: FaultEnv) -> None:
    """isolate("c1"): to the group a crash without LeaveGroup. Its link is reset, every link it
    opens again is reset on its first frame, nothing of it reaches the coordinator, and it is
    removed after its session timeout; after heal it reconnects and joins again."""
    await env.start(trace=True)
    apps = await env.consumers(3)
    g = await env.wait_stable(apps)
    c1, survivors = apps[1], [apps[0], apps[2]]
    old_id = c1.client.member_id

    assert env.proxy.isolate("c1") == 1
    assert env.proxy.is_isolated("c1") and not env.proxy.is_isolated("c0")
    [isolated] = env.events("client_isolated", node="proxy")
    assert isolated.fields == {"links": ["c1"], "affected": ["c1#1"]}

    g = await env.wait_stable(survivors, after_generation=g.generation_id)
    [removed] = env.events("member_removed", node="coordinator", member_id=old_id)
    assert removed.fields["reason"] == "session_timeout" and not env.events("leave_sent", node="c1")
    seen = len(env.requests_from("c1"))
    refused_before = len(env.events("link_opened", node="proxy", client_id="c1", isolated=True))
    await env.recorder.wait_until(
        lambda: len(env.events("link_opened", node="proxy", client_id="c1", isolated=True)) >= refused_before + 2,
        what="c1 to be refused twice more")
    assert len(env.requests_from("c1")) == seen  # nothing of an isolated client is forwarded
    for opened in env.events("link_opened", node="proxy", client_id="c1", isolated=True):
        [closed] = env.events("link_closed", node="proxy", link=opened.fields["link"])
        assert closed.fields["why"] == "isolated"
    assert env.stable(survivors) and env.group().generation_id == g.generation_id

    env.proxy.heal("c1")
    assert not env.proxy.is_isolated("c1")
    assert [ev.fields for ev in env.events("client_healed", node="proxy")] == [{"links": ["c1"]}]
    assert not env.events("network_healed", node="proxy")  # no partition was healed
    await env.wait_stable(apps, after_generation=g.generation_id)
    assert c1.client.member_id != old_id
    assert len(env.requests_from("c1")) > seen


# ----------------------------------------------------------------------------- proxy mechanics, raw frames


def api_versions(cid: int, client_id: str = "raw") -> bytes:
    return encode_request(RequestHeader("ApiVersions", 0, cid, client_id), ApiVersionsRequest())


async def read_frame(reader: asyncio.StreamReader, timeout_s: float = 5.0) -> tuple[int, Any]:
    (size,) = struct.unpack(">I", await asyncio.wait_for(reader.readexactly(4), timeout_s))
    return read_response(await asyncio.wait_for(reader.readexactly(size), timeout_s))


@contextlib.asynccontextmanager
async def raw_connection(port: int):
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_proxy_reorders_delays_in_order_duplicates_and_answers_errors(env: FaultEnv) -> None:
    await env.start(proxy=True, seed=3)
    proxy = env.proxy
    async with raw_connection(proxy.port) as (reader, writer):
        # reorder: the first request goes after the second.
        rule = proxy.reorder("ApiVersions", limit=1)
        writer.write(api_versions(1) + api_versions(2) + api_versions(3))
        assert [(await read_frame(reader))[0] for _ in range(3)] == [2, 1, 3]
        proxy.remove(rule)

        # delay: random per frame, yet the order on a link is kept.
        proxy.delay("*", (0, 60))
        writer.write(b"".join(api_versions(cid) for cid in range(10, 30)))
        assert [(await read_frame(reader))[0] for _ in range(20)] == list(range(10, 30))
        proxy.clear()

        # duplicate a response; error in place of a request; error over a response.
        proxy.duplicate("ApiVersions", direction="response", limit=1)
        writer.write(api_versions(40))
        assert [(await read_frame(reader))[0] for _ in range(2)] == [40, 40]
        proxy.error("ApiVersions", 15, limit=1)
        writer.write(api_versions(41))
        cid, body = await read_frame(reader)
        assert cid == 41 and body["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE and body["api_keys"] == []
        proxy.error("ApiVersions", "NOT_COORDINATOR", direction="response", limit=1)
        writer.write(api_versions(42))
        cid, body = await read_frame(reader)
        assert cid == 42 and body["error_code"] == ErrorCode.NOT_COORDINATOR

        # drop with a probability: what passes is answered, in order.
        drop = proxy.drop("ApiVersions", p=0.5)
        writer.write(b"".join(api_versions(cid) for cid in range(100, 140)))
        writer.write(struct.pack(">I", 3) + b"\xc1\xc1\xc1")  # unparseable: passed through, no rule applies
        answered = []
        while True:
            cid, body = await read_frame(reader)
            if cid == -1:
                assert body["error_code"] == ErrorCode.INVALID_REQUEST
                break
            answered.append(cid)
        assert answered == sorted(answered) and len(answered) == 40 - drop.fired and 5 < drop.fired < 35
        assert drop.matched == 40
    [link_opened] = env.events("link_opened", node="proxy")
    assert link_opened.fields["link"] == "raw#1"


async def test_proxy_passes_through_frames_it_cannot_parse_and_a_too_large_one(env: FaultEnv) -> None:
    await env.start("socket.request.max.bytes=4096", proxy=True)
    env.proxy.delay("*", 5)
    async with raw_connection(env.proxy.port) as (reader, writer):
        payload = msgpack.packb({"api": "Frobnicate", "version": 0, "correlation_id": 7, "client_id": "raw", "body": {}})
        writer.write(struct.pack(">I", len(payload)) + payload)
        cid, body = await read_frame(reader)
        assert cid == 7 and "unknown api" in body["error_message"]
        # A declared length beyond the proxy's own limit: raw pass-through from there on; the
        # coordinator answers and closes, and the proxy closes the client side.
        writer.write(api_versions(8) + struct.pack(">I", 100 * 1024 * 1024) + b"\x00" * 64)
        assert (await read_frame(reader))[0] == 8
        cid, body = await read_frame(reader)
        assert cid == -1 and "4096" in body["error_message"]
        assert await asyncio.wait_for(reader.read(), 5.0) == b""
    await env.recorder.wait_until(lambda: not env.proxy.links, what="the link to close")
    assert env.server.bad_frames == 2


async def test_disconnect_pause_and_resume(env: FaultEnv) -> None:
    await env.start()
    apps = await env.consumers(2)
    g = await env.wait_stable(apps)

    assert env.proxy.disconnect("c0") == 1  # a reset connection: c0 reconnects
    await env.recorder.wait_until(lambda: env.proxy.find_links("c0#2") and env.stable(apps), what="c0 back")
    assert {l.name for l in env.proxy.links} == {"c0#2", "c1#1"}

    env.proxy.pause()  # a hung coordinator, from the clients' view; a short one here
    async with raw_connection(env.proxy.port) as (reader, writer):
        writer.write(api_versions(1, "probe"))
        await env.recorder.wait_until(lambda: any(l.pipes["request"].parked for l in env.proxy.links),
                                      what="a request parked")
        env.proxy.resume()
        assert (await read_frame(reader))[0] == 1
    await env.wait_stable(apps)


async def read_closed(reader: asyncio.StreamReader, timeout_s: float = 5.0) -> bytes:
    """What arrives before the proxy closes the connection (a reset may surface as an error)."""
    try:
        return await asyncio.wait_for(reader.read(), timeout_s)
    except ConnectionResetError:
        return b""


async def test_disconnect_on_resets_the_link_a_selected_frame_came_on_and_nothing_else(env: FaultEnv) -> None:
    await env.start(proxy=True, trace=True)
    proxy = env.proxy
    rule = proxy.disconnect_on("ApiVersions", link="raw", limit=1)
    assert rule.spec() == "ApiVersions:disconnect:link=raw:limit=1"
    async with raw_connection(proxy.port) as (reader, writer):
        writer.write(api_versions(1) + api_versions(2))  # the second frame goes with the reset link
        assert await read_closed(reader) == b""
    assert not env.requests_from("raw") and (rule.matched, rule.fired) == (1, 1)
    async with raw_connection(proxy.port) as (reader, writer):  # limit=1: the reconnect goes through
        writer.write(api_versions(3))
        assert (await read_frame(reader))[0] == 3
    await env.recorder.wait_until(lambda: len(env.events("link_closed", node="proxy")) == 2, what="both links closed")
    assert [ev.fields["why"] for ev in env.events("link_closed", node="proxy", link="raw#1")] == [
        "reset by fault rule ApiVersions:disconnect:link=raw:limit=1"]
    assert [ev.fields["correlation_id"] for ev in env.events("fault_injected", node="proxy", action="disconnect")] == [1]

    # On a response: the coordinator took the request; its answer is lost with the connection.
    proxy.disconnect_on("ApiVersions", direction="response", limit=1)
    async with raw_connection(proxy.port) as (reader, writer):
        writer.write(api_versions(4, "raw2"))
        assert await read_closed(reader) == b""
    assert [line["correlation_id"] for line in env.requests_from("raw2")] == [4]


async def test_isolate_refuses_a_client_until_heal_and_bad_globs_change_nothing(env: FaultEnv) -> None:
    await env.start(proxy=True, trace=True)
    proxy = env.proxy
    for bad in ("", [], ["raw", ""], None, 7, ["raw", 7]):
        with pytest.raises(FaultSpecError, match="isolate needs client id globs"):
            proxy.isolate(bad)
    assert not env.events("client_isolated") and not proxy.is_isolated("raw")

    assert proxy.isolate(["raw", "other-*"]) == 0
    async with raw_connection(proxy.port) as (reader, writer):
        writer.write(api_versions(1))
        assert await read_closed(reader) == b""
    proxy.pause()  # reset at once even while paused: the frame that named it is never forwarded
    async with raw_connection(proxy.port) as (reader, writer):
        writer.write(api_versions(2))
        assert await read_closed(reader) == b""
    proxy.resume()
    async with raw_connection(proxy.port) as (reader, writer):  # another client id goes through
        writer.write(api_versions(3, "bystander"))
        assert (await read_frame(reader))[0] == 3
    assert not env.requests_from("raw")

    proxy.heal()  # None: every partition and isolation ends
    assert [ev.fields for ev in env.events("client_healed", node="proxy")] == [{"links": ["raw", "other-*"]}]
    async with raw_connection(proxy.port) as (reader, writer):
        writer.write(api_versions(4))
        assert (await read_frame(reader))[0] == 4
    assert [line["correlation_id"] for line in env.requests_from("raw")] == [4]
    await env.recorder.wait_until(lambda: not proxy.links, what="every link closed")
    whys = {ev.fields["link"]: ev.fields["why"] for ev in env.events("link_closed", node="proxy")}
    assert whys["raw#1"] == whys["raw#2"] == "isolated" and whys["raw#3"] != "isolated"
    assert [ev.fields["isolated"] for ev in env.events("link_opened", node="proxy", client_id="raw")] == [True, True, False]


# ----------------------------------------------------------------------------- SPEC


def test_fault_specs_parse_and_bad_ones_say_why() -> None:
    assert parse_spec("Heartbeat:drop:0.2").spec() == "Heartbeat:drop:0.2"
    r = parse_spec("JoinGroup:delay:200-500")
    assert (r.api, r.action, r.delay_ms) == ("JoinGroup", "delay", (200, 500))
    assert parse_spec("*:delay:50").delay_ms == (50, 50)
    assert parse_spec("SyncGroup:duplicate").action == "duplicate"
    assert parse_spec("Heartbeat:error:27").error_code == 27
    r = parse_spec("Heartbeat:error:REBALANCE_IN_PROGRESS:link=consumer-2:limit=1:dir=response:p=0.5")
    assert (r.error_code, r.link, r.limit, r.direction, r.p) == (27, "consumer-2", 1, "response", 0.5)
    assert parse_spec(r.spec()).spec() == r.spec()
    assert parse_spec("Heartbeat:drop").p == 1.0 and parse_spec("*:reorder:200").wait_ms == 200
    for bad, why in [("Heartbeat", "API:ACTION"), ("Hearbeat:drop", "unknown API"), ("Heartbeat:explode", "unknown action"),
                     ("Heartbeat:drop:1.5", "0..1"), ("JoinGroup:delay", "delay needs"), ("*:delay:500-200", "MIN <= MAX"),
                     ("Heartbeat:error:999", "unknown Kafka error code"), ("Heartbeat:error", "error code"),
                     ("SyncGroup:hold", "no command-line form"), ("Heartbeat:drop:0.5:p=0.1", "twice"),
                     ("Heartbeat:drop:colour=red", "unknown option"), ("SyncGroup:duplicate:3", "takes no argument"),
                     ("Heartbeat:drop:dir=sideways", "direction")]:
        with pytest.raises(FaultSpecError, match=why):
            parse_spec(bad)
    assert parse_spec("SyncGroup:hold", allow_hold=True).action == "hold"
    with pytest.raises(ValueError, match="unknown API"):
        Rule("drop", api="Nope")


def test_grouplab_run_with_faults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grouplab.cli import main

    assert main(["run", "--faults", "Heartbeat:explode"]) == 2
    assert "unknown action 'explode'" in capsys.readouterr().err

    rc = main(["run", "--consumers", "2", "--topics", "t0:2", "--hold", "0", "--timeout", "20",
               "--config", "group.initial.rebalance.delay.ms=0", "--config", "group.min.session.timeout.ms=100",
               "--consumer-config", "heartbeat.interval.ms=100", "--consumer-config", "session.timeout.ms=2000",
               "--faults", "*:delay:10-30", "--faults", "Heartbeat:drop:0.2", "--fault-seed", "5",
               "--run-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "fault proxy" in out and "Heartbeat:drop:0.2" in out
    proxy_log = (tmp_path / "proxy.jsonl").read_text()
    assert '"rule_added"' in proxy_log and '"link_opened"' in proxy_log


def test_grouplab_run_with_a_disconnect_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line takes the action: consumer-2's first heartbeat resets its connection once,
    it reconnects through the proxy, and the run's script (stop one, add one) completes."""
    from grouplab.cli import main

    spec = "Heartbeat:disconnect:link=consumer-2:limit=1"
    rc = main(["run", "--consumers", "2", "--topics", "t0:2", "--hold", "0.5", "--timeout", "20",
               "--config", "group.initial.rebalance.delay.ms=0", "--config", "group.min.session.timeout.ms=100",
               "--consumer-config", "heartbeat.interval.ms=100", "--consumer-config", "session.timeout.ms=2000",
               "--faults", spec, "--run-dir", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0, out
    assert f"{spec} ×1" in out
    lines = [json.loads(line) for line in (tmp_path / "proxy.jsonl").read_text().splitlines()]
    [fired] = [line for line in lines if line["event"] == "fault_injected"]
    assert (fired["action"], fired["link"], fired["rule"]) == ("disconnect", "consumer-2#1", spec)
    assert [line["why"] for line in lines if line["event"] == "link_closed" and line["link"] == "consumer-2#1"] == [
        f"reset by fault rule {spec}"]
    assert any(line["event"] == "link_opened" and line["link"] == "consumer-2#2" for line in lines)
