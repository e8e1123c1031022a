"""grouplab's own consumers with `group.protocol=consumer` (KIP-848) end to end over loopback: three
GroupMemberClients form a group on a grouplab coordinator's msgpack port, a fourth joins and is
given each partition only after its previous owner revoked it, one leaves and its partitions move;
then a confluent-kafka consumer with `group.protocol=consumer` joins the same group on the Kafka
port of the same coordinator and the five share the partitions. Every wait is on a condition with
a deadline."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer

from grouplab.consumer.client import GroupMemberClient
from grouplab.consumer.config import ConsumerConfig
from grouplab.protocol.states import ConsumerGroupState, MembershipState
from grouplab.protocol.types import TopicPartition
from grouplab.testing import AsyncCluster

pytestmark = pytest.mark.e2e
TOPIC = "t"
PARTITIONS = 6
GROUP = "own-kip848"
TIMEOUT_S = 60.0
BROKER = {"group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 100}
ALL = {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}
_order = itertools.count()  # one sequence for every listener call of the test, to order them across members


class Recorder:
    """A member's rebalance listener: each call with its place in the test's one sequence."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.calls.append((next(_order), "revoked", set(partitions)))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.calls.append((next(_order), "assigned", set(partitions)))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.calls.append((next(_order), "lost", set(partitions)))


class KafkaMember:
    """A confluent-kafka consumer (group.protocol=consumer) polled on its own thread; `held` is what
    its callbacks said it holds."""

    def __init__(self, bootstrap: str) -> None:
        self.held: set[int] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": "librdkafka",
                                  "group.protocol": "consumer", "log_level": 0})
        self.consumer.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            self.held |= {p.partition for p in partitions}

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            self.held -= {p.partition for p in partitions}

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.1)
        self.consumer.close()

    def holding(self) -> set[TopicPartition]:
        with self.lock:
            return {TopicPartition(TOPIC, p) for p in self.held}

    def close(self) -> None:
        self.stop.set()
        self.thread.join(TIMEOUT_S)


async def member(cluster: AsyncCluster, name: str, assignor: str | None = "uniform") -> tuple[GroupMemberClient, Recorder]:
    overrides = ["group.protocol=consumer"] + ([f"group.remote.assignor={assignor}"] if assignor else [])
    config = ConsumerConfig(group_id=GROUP, topics=[TOPIC], client_id=name).with_overrides(overrides)
    recorder = Recorder()
    client = GroupMemberClient(config, cluster.host, cluster.grouplab_port, listener=recorder)
    await client.start()
    return client, recorder


async def until(predicate: Callable[[], bool], what: str, show: Callable[[], object]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT_S
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"not within {TIMEOUT_S} s: {what}; saw {show()}")
        await asyncio.sleep(0.02)


def settled(cluster: AsyncCluster, clients: list[GroupMemberClient], others: tuple[KafkaMember, ...] = ()) -> bool:
    """The coordinator's group is Stable with these members only, each of ours stable at its target
    epoch, and the partitions held once each."""
    assert cluster.server is not None
    group = cluster.server.broker.consumer_groups.get(GROUP)
    if group is None or group.state is not ConsumerGroupState.STABLE or len(group.members) != len(clients) + len(others):
        return False
    if not all(c.state is MembershipState.STABLE and c.generation_id == group.assignment_epoch for c in clients):
        return False
    held = [tp for c in clients for tp in c.assignment] + [tp for o in others for tp in o.holding()]
    return len(held) == len(set(held)) and set(held) == ALL


def view(clients: list[GroupMemberClient]) -> object:
    return {c.config.client_id: (c.state.value, c.generation_id, sorted(c.assignment)) for c in clients}


async def test_grouplab_consumers_speak_kip848_beside_a_confluent_kafka_consumer() -> None:
    async with AsyncCluster(config=BROKER, topics={TOPIC: PARTITIONS}) as cluster:
        members = [await member(cluster, f"c{i}") for i in range(3)]
        clients = [c for c, _ in members]
        await until(lambda: settled(cluster, clients), "three members share six partitions", lambda: view(clients))
        assert all(len(c.assignment) == 2 for c in clients)  # uniform

        # A fourth joins: each partition it gets was revoked by its previous owner first, and only
        # the partitions that moved were revoked.
        before = {c.config.client_id: set(c.assignment) for c in clients}
        marks = [len(r.calls) for _, r in members]
        fourth, fourth_rec = await member(cluster, "c3")
        clients.append(fourth)
        await until(lambda: settled(cluster, clients), "four members share six partitions", lambda: view(clients))
        revocations = {tp: seq for (_, r), mark in zip(members, marks) for seq, kind, tps in r.calls[mark:]
                       if kind == "revoked" for tp in tps}
        for (c, r), mark in zip(members, marks):
            revoked = {tp for _, kind, tps in r.calls[mark:] if kind == "revoked" for tp in tps}
            assert revoked == before[c.config.client_id] - set(c.assignment), c.config.client_id
            assert not [k for _, k, _ in r.calls[mark:] if k == "lost"]
        gained = [(seq, tp) for seq, kind, tps in fourth_rec.calls if kind == "assigned" for tp in tps]
        assert {tp for _, tp in gained} == set(fourth.assignment) != set()
        assert all(tp in revocations and revocations[tp] < seq for seq, tp in gained), (gained, revocations)

        # One leaves (epoch -1): its partitions go to the others.
        leaver = clients.pop(0)
        await leaver.close()
        await until(lambda: settled(cluster, clients), "three members again after a leave", lambda: view(clients))
        assert cluster.server is not None
        assert cluster.server.broker.consumer_groups[GROUP].members.keys() == {c.member_id for c in clients}

        # A confluent-kafka consumer joins the same group on the Kafka port.
        kafka = KafkaMember(cluster.bootstrap)
        try:
            await until(lambda: settled(cluster, clients, (kafka,)), "grouplab's three and librdkafka share the partitions",
                        lambda: (view(clients), sorted(kafka.holding())))
            assert kafka.holding()
        finally:
            await asyncio.to_thread(kafka.close)
        for c in clients:
            await c.close()


class Lines:
    """A member's event log in memory: (its member epoch when written, event name)."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def emit(self, ev: Any) -> None:
        self.lines.append((ev.fields["generation_id"], ev.event) if "generation_id" in ev.fields else (-9, ev.event))


async def test_an_epoch_that_moves_without_a_logged_event_still_wakes_a_waiter() -> None:
    """A consumer-protocol member's epoch can move on an answer that changes nothing else (another
    member joined for a topic it does not read): nothing is logged, so a wait woken only by log
    lines would miss it (LocalCluster.wait_stable did, `grouplab run` then timed out). The client's
    on_step is called after every step, logged or not; this test waits on it alone."""
    async with AsyncCluster(config=BROKER, topics={TOPIC: 2, "u": 2}) as cluster:
        woke = asyncio.Event()
        lines = Lines()
        config = ConsumerConfig(group_id=GROUP, topics=[TOPIC], client_id="reads-t").with_overrides(
            ["group.protocol=consumer"])
        first = GroupMemberClient(config, cluster.host, cluster.grouplab_port, events=lines, on_step=woke.set)
        await first.start()

        async def until_step(predicate: Callable[[], bool]) -> None:
            while not predicate():
                woke.clear()
                await woke.wait()

        await asyncio.wait_for(until_step(lambda: first.state is MembershipState.STABLE and first.generation_id == 1),
                               TIMEOUT_S)
        other = ConsumerConfig(group_id=GROUP, topics=["u"], client_id="reads-u").with_overrides(["group.protocol=consumer"])
        second = GroupMemberClient(other, cluster.host, cluster.grouplab_port)
        await second.start()
        await asyncio.wait_for(until_step(lambda: first.generation_id == 2), TIMEOUT_S)
        assert first.state is MembershipState.STABLE and first.assignment == [TopicPartition(TOPIC, 0),
                                                                               TopicPartition(TOPIC, 1)]
        assert not [name for epoch, name in lines.lines if epoch == 2], lines.lines  # the move logged nothing
        for c in (second, first):
            await c.close()
