"""Real Kafka clients on grouplab (issue 14): kafka-python, aiokafka and confluent-kafka
(librdkafka), each in its own process (tests/kafka_client_worker.py), in groups on the Kafka-wire
listener, beside grouplab's own consumers on the msgpack port. Every wait is on a condition with a
timeout; nothing asserts a timing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest

from grouplab.consumer.client import GroupMemberClient
from grouplab.consumer.config import ConsumerConfig
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group import GroupState
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.faults.proxy import FaultProxy
from grouplab.protocol.consumer_protocol import decode_assignment
from grouplab.protocol.types import TopicPartition

from conftest import EventRecorder

pytestmark = pytest.mark.e2e
HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "kafka_client_worker.py"
TOPIC = "t"
PARTITIONS = 6
BROKER = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"]
TIMEOUT_S = 60.0
ASSIGNORS = {"kafka-python": ["range", "roundrobin", "cooperative-sticky"],
             "aiokafka": ["range", "roundrobin", "sticky"],
             "confluent-kafka": ["range", "roundrobin", "cooperative-sticky"]}


class Worker:
    """One real consumer process and what it said: its assignment, its records, its revocations."""

    def __init__(self, proc: asyncio.subprocess.Process, changed: asyncio.Event, name: str) -> None:
        self.proc = proc
        self.name = name
        self.assigned: set[TopicPartition] | None = None
        self.records: list[tuple[int, int, str]] = []
        self.revoked: list[set[TopicPartition]] = []
        self.closed = False
        self._changed = changed
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            msg = json.loads(line)
            if "assigned" in msg:
                self.assigned = {TopicPartition(t, p) for t, p in msg["assigned"]}
            if "records" in msg:
                self.records += [(p, o, v) for _t, p, o, v in msg["records"]]
            if "revoked" in msg:
                self.revoked.append({TopicPartition(t, p) for t, p in msg["revoked"]})
            if "closed" in msg:
                self.closed = True
            self._changed.set()

    async def stop(self) -> None:
        """Close cleanly (a LeaveGroup, unless static) and wait for the process to end."""
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(ConnectionError):
                self.proc.stdin.write(b"stop\n")
                await self.proc.stdin.drain()
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        await self._reader

    async def kill(self) -> None:
        """A crash: no LeaveGroup, the sockets just close."""
        self.proc.kill()
        await self.proc.wait()
        await self._reader


class Env:
    def __init__(self, recorder: EventRecorder, tmp_path: Path, stack: contextlib.AsyncExitStack) -> None:
        self.recorder = recorder
        self.tmp_path = tmp_path
        self.stack = stack
        self.server: CoordinatorServer | None = None
        self.workers: list[Worker] = []
        self.changed = asyncio.Event()
        self.bootstrap_port: int | None = None  # a fault proxy's, when clients go through one

    async def start_server(self, data_dir: Path | None = None, topics: bool = True) -> CoordinatorServer:
        self.server = CoordinatorServer(BrokerConfig().with_overrides(BROKER), HOST, 0, kafka_port=0,
                                        events=self.recorder.log("coordinator"), data_dir=data_dir)
        await self.server.start()
        if topics:
            async with AdminClient(HOST, self.server.port) as admin:
                await admin.create_topics({TOPIC: PARTITIONS})
        return self.server

    @property
    def bootstrap(self) -> str:
        assert self.server is not None
        return f"{HOST}:{self.bootstrap_port or self.server.kafka_port}"

    async def worker(self, client: str, group: str = "g", assignor: str = "range", **options: Any) -> Worker:
        n = len(self.workers)
        spec = {"client": client, "bootstrap": self.bootstrap, "group": group, "topic": TOPIC,
                "assignor": assignor, "client_id": options.pop("client_id", f"{client}-{n}"), "debug": bool(os.environ.get("KAFKA_WORKER_DEBUG")),
                **options}
        stderr = open(self.tmp_path / f"worker-{n}.err", "ab")  # noqa: SIM115 - closed with the process
        self.stack.callback(stderr.close)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(WORKER), json.dumps(spec), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=stderr, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        w = Worker(proc, self.changed, spec["client_id"])
        self.workers.append(w)
        return w

    async def wait_until(self, predicate: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
        async def loop() -> None:
            while not predicate():
                self.changed.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), 0.1)
        try:
            await asyncio.wait_for(loop(), timeout_s)
        except asyncio.TimeoutError:
            states = {w.name: (sorted(p for _t, p in w.assigned or []), len(w.records)) for w in self.workers}
            log = self.tmp_path / "coordinator-events.txt"
            log.write_text("".join(f"{ev.ts_ms} {ev.event} {ev.fields}\n" for _n, ev in self.recorder.records))
            groups = self.server.broker.groups if self.server is not None else {}
            states = {**states, **{f"group {g.group_id}": (g.state.value, g.generation_id, sorted(g.members))
                                   for g in groups.values()}}
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; (partitions, records) per "
                                 f"consumer: {states}; the coordinator's events are in {log}") from None

    def group(self, group_id: str = "g") -> Any:
        assert self.server is not None
        return self.server.broker.groups.get(group_id)

    def converged(self, workers: list[Worker], group_id: str = "g", extra: int = 0,
                  extra_assigned: Callable[[], set[TopicPartition]] = set) -> bool:
        """The group is Stable with these members (and `extra` others), and their assignments
        split the topic's partitions: each partition owned by exactly one."""
        g = self.group(group_id)
        if g is None or g.state is not GroupState.STABLE or len(g.members) != len(workers) + extra:
            return False
        given = {m.client_id: set(decode_assignment(m.assignment).partitions) for m in g.members.values()}
        if any(w.assigned != given.get(w.name) for w in workers):
            return False  # a client has not yet taken up what this generation gave it
        owned: list[TopicPartition] = [tp for w in workers for tp in (w.assigned or set())]
        owned += list(extra_assigned())
        return sorted(owned) == [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

    async def produce(self, count: int, start: int = 0) -> set[str]:
        assert self.server is not None
        values = set()
        async with AdminClient(HOST, self.server.port) as admin:
            for p in range(PARTITIONS):
                batch = [f"r{i}".encode() for i in range(start, start + count) if i % PARTITIONS == p]
                values |= {b.decode() for b in batch}
                await admin.produce(TOPIC, p, batch)
        return values

    async def close(self) -> None:
        for w in self.workers:
            if w.proc.returncode is None:
                w.proc.kill()
                await w.proc.wait()
        if self.server is not None:
            await self.server.stop()


@pytest.fixture
async def env(recorder: EventRecorder, tmp_path: Path) -> AsyncIterator[Env]:
    async with contextlib.AsyncExitStack() as stack:
        e = Env(recorder, tmp_path, stack)
        try:
            yield e
        finally:
            await e.close()


def consumed(workers: list[Worker]) -> list[str]:
    return [v for w in workers for _p, _o, v in w.records]


@pytest.mark.parametrize("client, assignor", [(c, a) for c, names in ASSIGNORS.items() for a in names])
async def test_three_consumers_of_one_library_consume_every_record_once(env: Env, client: str, assignor: str) -> None:
    """The library's own assignor leads (the group's protocol is its name), the three share the
    partitions, and every record produced is consumed exactly once."""
    await env.start_server()
    workers = []
    for _ in range(3):  # one after another: each join is a rebalance the others go through
        workers.append(await env.worker(client, assignor=assignor))
        await env.wait_until(lambda: env.converged(workers), f"{len(workers)} {client} consumers to share the topic")
    assert env.group().protocol_name == assignor
    values = await env.produce(60)
    await env.wait_until(lambda: len(consumed(workers)) >= 60, "every record to be consumed")
    await asyncio.sleep(0.3)  # a duplicate, if any, would show now
    assert sorted(consumed(workers)) == sorted(values)
    for w in workers:
        await w.stop()
    await env.wait_until(lambda: env.group().state is GroupState.EMPTY, "the group to be empty after they leave")


async def test_committed_offsets_survive_a_coordinator_restart(env: Env, tmp_path: Path) -> None:
    data = tmp_path / "data"
    await env.start_server(data_dir=data)
    first = await env.worker("confluent-kafka")
    await env.wait_until(lambda: env.converged([first]), "the consumer to own the topic")
    await env.produce(30)
    await env.wait_until(lambda: len(first.records) == 30, "the first 30 records")
    await first.stop()
    assert env.server is not None
    await env.server.stop()
    await env.start_server(data_dir=data, topics=False)
    later = await env.produce(12, start=30)
    second = await env.worker("kafka-python")
    await env.wait_until(lambda: len(second.records) >= 12, "the records after the commit")
    await asyncio.sleep(0.3)
    assert sorted(v for _p, _o, v in second.records) == sorted(later)  # nothing before the committed offsets


async def test_a_killed_member_is_removed_after_its_session_timeout(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    survivor = await env.worker("aiokafka", session_ms=3000)
    victim = await env.worker("confluent-kafka", session_ms=3000)
    await env.wait_until(lambda: env.converged([survivor, victim]), "the two to share the topic")
    victim_id = next(m for m, member in env.group().members.items() if member.client_id == victim.name)
    await victim.kill()
    await env.wait_until(lambda: bool(recorder.events("member_removed", member_id=victim_id)),
                         "the coordinator to remove the killed member")
    removed = recorder.events("member_removed", member_id=victim_id)[0]
    assert "session" in json.dumps(removed.fields)
    await env.wait_until(lambda: env.converged([survivor]), "its partitions to move to the survivor")


async def test_a_mixed_group_of_every_library_and_grouplab_converges(env: Env) -> None:
    """kafka-python, aiokafka and librdkafka on the Kafka port and grouplab's own consumer on the
    msgpack port, in one group: every leader reads every member's Kafka ConsumerProtocol metadata."""
    server = await env.start_server()
    config = ConsumerConfig(group_id="g", topics=[TOPIC], client_id="grouplab-0", assignors=["range"]).with_overrides(
        ["session.timeout.ms=6000", "heartbeat.interval.ms=300"])
    own = GroupMemberClient(config, HOST, server.port)
    await own.start()
    try:
        workers = [await env.worker(c) for c in ("kafka-python", "aiokafka", "confluent-kafka")]

        def own_assigned() -> set[TopicPartition]:
            return set(own.assignment) if own.generation_id == env.group().generation_id else set()

        await env.wait_until(lambda: env.converged(workers, extra=1, extra_assigned=own_assigned),
                             "the mixed group to converge")
        async with AdminClient(HOST, server.port) as admin:
            (described,) = await admin.describe_groups(["g"])
        clients = {m.client_id for m in described.members}
        assert clients == {"grouplab-0", "kafka-python-0", "aiokafka-1", "confluent-kafka-2"}
        cover = sorted(tp for m in described.members for tp in decode_assignment(m.member_assignment).partitions)
        assert cover == [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    finally:
        await own.close()


async def test_librdkafka_cooperative_sticky_keeps_its_partitions_through_a_join(env: Env) -> None:
    await env.start_server()
    first = await env.worker("confluent-kafka", assignor="cooperative-sticky")
    await env.wait_until(lambda: env.converged([first]), "the first consumer to own the topic")
    second = await env.worker("confluent-kafka", assignor="cooperative-sticky")
    await env.wait_until(lambda: env.converged([first, second]), "the two to share the topic")
    assert first.assigned and second.assigned
    # Incremental: only what moved to the newcomer was revoked; the rest stayed owned all along.
    assert first.revoked and set().union(*first.revoked) == second.assigned


async def test_a_static_member_restarts_without_a_rebalance(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    a = await env.worker("confluent-kafka", instance_id="a", session_ms=10000)
    b = await env.worker("confluent-kafka", instance_id="b", session_ms=10000)
    await env.wait_until(lambda: env.converged([a, b]), "the two static members to share the topic")
    generation, owned = env.group().generation_id, a.assigned
    await a.stop()  # a static member does not leave
    again = await env.worker("confluent-kafka", instance_id="a", session_ms=10000)
    await env.wait_until(lambda: again.assigned == owned and env.converged([again, b]),
                         "the restarted member to take its old place")
    assert env.group().generation_id == generation
    assert recorder.events("static_member_replaced", group_instance_id="a")


# A short rebalance timeout (max.poll.interval) and request timeout, in each library's own names, so
# that a lost SyncGroup costs seconds, not the defaults' minutes.
QUICK = {"kafka-python": {"max_poll_interval_ms": 6000, "request_timeout_ms": 8000},
         "aiokafka": {"max_poll_interval_ms": 6000, "rebalance_timeout_ms": 6000, "request_timeout_ms": 8000},
         "confluent-kafka": {"max.poll.interval.ms": 6000, "socket.timeout.ms": 8000}}


async def test_every_client_recovers_when_the_leaders_sync_group_is_dropped(env: Env, recorder: EventRecorder) -> None:
    """The Kafka-wire fault proxy (it reads Kafka's frames, and keeps clients on itself by
    rewriting the broker address in Metadata and FindCoordinator) drops the leader's SyncGroup once:
    the followers wait, the coordinator removes the leader after the rebalance timeout, and every
    client — the leader too, after its request times out — rejoins and the group converges."""
    server = await env.start_server()
    proxy = FaultProxy(HOST, server.kafka_port, HOST, 0, seed=1, events=recorder.log("kafka-proxy"), wire="kafka")
    await proxy.start()
    env.stack.push_async_callback(proxy.stop)
    env.bootstrap_port = proxy.port
    leader = await env.worker("kafka-python", client_id="leader", options=QUICK["kafka-python"], session_ms=6000)
    await env.wait_until(lambda: env.converged([leader]), "the leader to own the topic")
    proxy.add_spec("SyncGroup:drop:link=leader:limit=1")
    others = [await env.worker(c, options=QUICK[c], session_ms=6000) for c in ("aiokafka", "confluent-kafka")]
    await env.wait_until(lambda: bool(recorder.events("fault_injected", node="kafka-proxy")), "the SyncGroup drop")
    await env.wait_until(lambda: env.converged([leader, *others]), "every client to recover", timeout_s=90)
    assert all(link.client_id for link in proxy.links)  # every connection went through the proxy, identified


async def test_a_client_joins_when_its_first_find_coordinator_and_api_versions_answers_fail(
        env: Env, recorder: EventRecorder) -> None:
    """Rules on the Kafka-wire proxy pick the two APIs the listener answers itself: the first
    ApiVersions is answered UNSUPPORTED_VERSION (at v0, as KIP-511's fallback) and the first
    FindCoordinator answer is lost; kafka-python asks again and joins the group."""
    server = await env.start_server()
    proxy = FaultProxy(HOST, server.kafka_port, HOST, 0, seed=1, events=recorder.log("kafka-proxy"), wire="kafka")
    await proxy.start()
    env.stack.push_async_callback(proxy.stop)
    env.bootstrap_port = proxy.port
    versions = proxy.add_spec("ApiVersions:error:UNSUPPORTED_VERSION:limit=1")
    lookup = proxy.add_spec("FindCoordinator:drop:dir=response:limit=1")
    client = await env.worker("kafka-python", options={"request_timeout_ms": 4000}, session_ms=6000)
    await env.wait_until(lambda: env.converged([client]), "the client to own the topic through the faults")
    assert (versions.fired, lookup.fired) == (1, 1)
    assert proxy.forwarded[("FindCoordinator", "response")] >= 1  # it asked again after the lost answer
    assert proxy.forwarded[("ApiVersions", "response")] >= 1
    injected = {e.fields["rule"] for e in recorder.events("fault_injected", node="kafka-proxy")}
    assert injected == {"ApiVersions:error:35:limit=1", "FindCoordinator:drop:dir=response:limit=1"}


async def through_kafka_proxy(env: Env, recorder: EventRecorder) -> FaultProxy:
    """A Kafka-wire fault proxy in front of the server's Kafka listener, the clients' bootstrap."""
    assert env.server is not None and env.server.kafka_port is not None
    proxy = FaultProxy(HOST, env.server.kafka_port, HOST, 0, seed=1, events=recorder.log("kafka-proxy"), wire="kafka")
    await proxy.start()
    env.stack.push_async_callback(proxy.stop)
    env.bootstrap_port = proxy.port
    return proxy


def member_of(env: Env, client_id: str) -> str | None:
    group = env.group()
    return next((m for m, member in group.members.items() if member.client_id == client_id), None) if group else None


async def test_a_disconnect_rule_resets_a_kafka_clients_connection_once_and_it_heartbeats_on(
        env: Env, recorder: EventRecorder) -> None:
    """`Heartbeat:disconnect:link=kp:limit=1` on the Kafka-wire proxy: kafka-python's next heartbeat
    resets the connection it came on. The client finds its coordinator again, reconnects and
    heartbeats on in the same generation, well within its session: no one is removed."""
    await env.start_server()
    proxy = await through_kafka_proxy(env, recorder)
    kp = await env.worker("kafka-python", client_id="kp", session_ms=6000)
    other = await env.worker("kafka-python", client_id="other", session_ms=6000)
    await env.wait_until(lambda: env.converged([kp, other]), "the two to share the topic")
    generation, member_id = env.group().generation_id, member_of(env, "kp")
    rule = proxy.add_spec("Heartbeat:disconnect:link=kp:limit=1")

    await env.wait_until(lambda: bool(recorder.events("fault_injected", node="kafka-proxy")), "the heartbeat's reset")
    [injected] = recorder.events("fault_injected", node="kafka-proxy")
    assert (injected.fields["action"], injected.fields["api"], injected.fields["client_id"]) == ("disconnect", "Heartbeat", "kp")
    link, reset_at = injected.fields["link"], injected.ts_ms
    await env.wait_until(lambda: bool(recorder.events("link_closed", node="kafka-proxy", link=link)), "its link closed")
    [closed] = recorder.events("link_closed", node="kafka-proxy", link=link)
    assert closed.fields["why"] == "reset by fault rule Heartbeat:disconnect:link=kp:limit=1"

    def heartbeating_again() -> bool:
        member = env.group().members.get(member_id) if member_id is not None else None
        return member is not None and member.last_heartbeat_ms > reset_at and env.converged([kp, other])

    await env.wait_until(heartbeating_again, "kp to reconnect and heartbeat on")
    assert rule.fired == 1 and env.group().generation_id == generation
    assert not recorder.events("member_removed")
    assert any(l.client_id == "kp" and l.name != link for l in proxy.links)  # a new connection, through the proxy


async def test_a_client_joins_when_its_first_api_versions_and_find_coordinator_reset_the_connection(
        env: Env, recorder: EventRecorder) -> None:
    """`disconnect` needs no answer body, so it is allowed on the two APIs the Kafka listener
    answers itself: kafka-python's first ApiVersions and its first FindCoordinator each reset their
    connection; it connects again, asks again and joins the group."""
    await env.start_server()
    proxy = await through_kafka_proxy(env, recorder)
    versions = proxy.add_spec("ApiVersions:disconnect:limit=1")
    lookup = proxy.add_spec("FindCoordinator:disconnect:limit=1")
    client = await env.worker("kafka-python", client_id="kp", session_ms=6000)
    await env.wait_until(lambda: env.converged([client]), "the client to own the topic through the resets")
    assert (versions.fired, lookup.fired) == (1, 1)
    assert proxy.forwarded[("FindCoordinator", "response")] >= 1 and proxy.forwarded[("ApiVersions", "response")] >= 1
    whys = [e.fields["why"] for e in recorder.events("link_closed", node="kafka-proxy")]
    assert sorted(why for why in whys if why.startswith("reset")) == ["reset by fault rule ApiVersions:disconnect:limit=1",
                            "reset by fault rule FindCoordinator:disconnect:limit=1"]


async def test_an_isolated_kafka_client_is_removed_refused_and_rejoins_after_heal(env: Env, recorder: EventRecorder) -> None:
    """isolate("kp"): kafka-python's connections are reset and every reconnect is reset on its first
    frame, so the coordinator removes it after its session timeout (a crash, no LeaveGroup) and
    the other member takes the topic; after heal it connects again and rejoins."""
    await env.start_server()
    proxy = await through_kafka_proxy(env, recorder)
    kp = await env.worker("kafka-python", client_id="kp", session_ms=3000)
    other = await env.worker("kafka-python", client_id="other", session_ms=3000)
    await env.wait_until(lambda: env.converged([kp, other]), "the two to share the topic")
    old_id = member_of(env, "kp")

    assert proxy.isolate("kp") >= 1
    await env.wait_until(lambda: bool(recorder.events("member_removed", member_id=old_id)), "kp to be removed")
    [removed] = recorder.events("member_removed", member_id=old_id)
    assert removed.fields["reason"] == "session_timeout"
    await env.wait_until(lambda: env.converged([other]), "the other member to take the topic")
    refused = len(recorder.events("link_opened", node="kafka-proxy", client_id="kp", isolated=True))
    await env.wait_until(
        lambda: len(recorder.events("link_opened", node="kafka-proxy", client_id="kp", isolated=True)) > refused,
        "kp to try again and be refused")
    assert member_of(env, "kp") is None

    proxy.heal("kp")
    await env.wait_until(lambda: env.converged([kp, other]), "kp to rejoin after heal")
    assert member_of(env, "kp") not in (None, old_id)
    assert [e.fields for e in recorder.events("client_healed", node="kafka-proxy")] == [{"links": ["kp"]}]


async def test_grouplab_run_with_a_kafka_port_takes_real_clients_into_its_group(env: Env, tmp_path: Path,
                                                                               spark: Any) -> None:
    """`grouplab run --kafka-port`: the run's simulated consumers and a real client share one
    group; the run's trace replays identically, `explain` tells the real client's joins, and
    `analyze` (one Spark job) counts it as a member that held, consumed and committed its
    partitions: they are not unowned while it had them (its lines, from the wire, in real-1.jsonl)."""
    from grouplab.cluster import LocalCluster
    from grouplab.pipeline.analyze import analyze
    from grouplab.pipeline.report import write_report
    from grouplab.replay import replay

    run_dir = tmp_path / "run"
    cluster = LocalCluster({TOPIC: PARTITIONS}, "g", ["range"], BrokerConfig().with_overrides(BROKER),
                           ["session.timeout.ms=6000", "heartbeat.interval.ms=300"], run_dir, kafka_port=0)
    await cluster.start()
    try:
        assert cluster.server is not None
        env.server = cluster.server
        app = await cluster.add_consumer()
        real = await env.worker("confluent-kafka", client_id="real-1")
        await env.wait_until(lambda: env.converged([real], extra=1, extra_assigned=lambda: set(app.client.assignment)
                                                   if app.client.generation_id == env.group().generation_id else set()),
                             "the run's consumer and the real client to share the topic")
        held = {tp.partition for tp in real.assigned or set()}
        await env.produce(30)
        await env.wait_until(lambda: len(real.records) == 5 * len(held), "the real client to consume its records")
        await real.stop()
        await env.wait_until(lambda: len(env.group().members) == 1, "the real client to leave")
    finally:
        env.server = None
        await cluster.close()
    result = replay(run_dir)
    assert result.identical, result.difference
    out = subprocess.run([sys.executable, "-m", "grouplab.cli", "explain", str(run_dir)], capture_output=True,
                         text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "real-1 → coordinator: JoinGroup" in out.stdout

    tables = tmp_path / "analysis"
    await asyncio.to_thread(analyze, spark, [str(run_dir)], tables)
    await asyncio.to_thread(write_report, spark, tables)

    def table(name: str) -> list[dict[str, Any]]:
        return [r.asDict() for r in spark.read.parquet(str(tables / name)).collect()]

    (session,) = [r for r in table("member_sessions") if r["client_id"] == "real-1"]
    assert session["end_reason"] == "left" and session["generations"] >= 1 and session["commits"] >= 1
    member = session["member_id"]
    rebalances = table("rebalances")
    assert any(r["cause"] == "member_joined" and member in r["trigger"] for r in rebalances)
    assert any(r["cause"] == "member_left" and member in r["trigger"] for r in rebalances)
    assert {r["partition"] for r in table("assignments") if r["member_id"] == member} == held
    owned = {r["partition"]: r for r in table("ownership") if r["client_id"] == "real-1"}
    assert set(owned) == held and all(r["member_id"] == member for r in owned.values())
    for r in table("partition_time"):
        if r["partition"] in held and r["state"] == "unowned":  # never while the real client held it
            hold = owned[r["partition"]]
            assert r["end_ms"] <= hold["start_ms"] or r["start_ms"] >= hold["end_ms"], (r, hold)
    consumed = [r for r in table("partition_time") if r["client_id"] == "real-1" and r["state"] == "consumed"]
    assert {r["partition"] for r in consumed} == held
    assert "real-1" in (tables / "report.html").read_text(encoding="utf-8")


async def test_kcat_produces_and_consumes_in_a_group(env: Env) -> None:
    """kcat (librdkafka from Debian): -P writes records, -G consumes them as a balanced group member.
    scripts/test installs it as root; elsewhere this says how, and under CI=true it must run."""
    if shutil.which("kcat") is None:
        message = "kcat is not installed: `sudo apt-get install kcat` (scripts/test does it as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    await env.start_server()
    produce = await asyncio.create_subprocess_exec(
        "kcat", "-b", env.bootstrap, "-P", "-t", TOPIC, "-p", "0", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(produce.communicate(b"one\ntwo\nthree\n"), 60)
    assert produce.returncode == 0, err
    consume = await asyncio.create_subprocess_exec(
        "kcat", "-b", env.bootstrap, "-G", "kcat-group", "-o", "beginning", "-e", "-f", "%s\\n", TOPIC,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    lines: list[str] = []
    try:
        assert consume.stdout is not None
        while len(lines) < 3:
            line = await asyncio.wait_for(consume.stdout.readline(), 60)
            assert line, "kcat ended before reading the records"
            lines.append(line.decode().strip())
    finally:
        if consume.returncode is None:
            consume.kill()
        await consume.wait()
    assert lines == ["one", "two", "three"]
    stable = env.recorder.events("group_stable", group_id="kcat-group")
    assert stable and [TOPIC, 0] in stable[-1].fields["assignments"][stable[-1].fields["leader"]]


async def test_librdkafka_transactions_and_read_committed(env: Env) -> None:
    """A transactional confluent-kafka producer on grouplab's transaction coordinator: a committed
    transaction with offsets sent to it (send_offsets_to_transaction), an aborted one, and a
    read_committed consumer that sees only the committed records; an idempotent producer too."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KTP

    await env.start_server()
    bootstrap = env.bootstrap

    def run() -> tuple[list[bytes], int, int]:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-1", "log_level": 0})
        p.init_transactions(30)
        group = Consumer({"bootstrap.servers": bootstrap, "group.id": "txg", "log_level": 0})
        p.begin_transaction()
        for i in range(5):
            p.produce(TOPIC, value=b"c%d" % i, partition=0)
        p.send_offsets_to_transaction([KTP(TOPIC, 1, 7)], group.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(3):
            p.produce(TOPIC, value=b"a%d" % i, partition=0)
        p.abort_transaction(30)
        committed = group.committed([KTP(TOPIC, 1)], 30)[0].offset
        group.close()
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "earliest",
                           "isolation.level": "read_committed", "log_level": 0})
        reader.assign([KTP(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            m = reader.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
        for _ in range(5):  # anything after them (the aborted records) would come now
            m = reader.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
        reader.close()
        idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 0})
        for i in range(10):
            idempotent.produce(TOPIC, value=b"i%d" % i, partition=2)
        left = idempotent.flush(30)
        return got, committed, left

    got, committed, left = await asyncio.to_thread(run)
    assert got == [b"c%d" % i for i in range(5)]
    assert committed == 7 and left == 0
    assert env.server is not None and env.server.broker.logs.existing(TOPIC, 2).log_end_offset == 10
