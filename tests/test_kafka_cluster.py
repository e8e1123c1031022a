"""Real Kafka clients on a cluster of three grouplab brokers (issue 24): one group of a
kafka-python, an aiokafka and a confluent-kafka (librdkafka) consumer, each in its own process
(tests/kafka_client_worker.py), bootstrapped on every broker. The group's coordinator broker is
killed while they consume and a kafka-python producer (acks=all) keeps producing through the leader
moves: every client finds the new coordinator, the group is Stable again, every record is consumed
(at least once), and no acknowledged commit is lost (committed offsets never go backwards). Then a
rolling restart of all three brokers. Every wait is on a condition with a generous deadline."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group import GroupState
from grouplab.coordinator.server import CoordinatorServer
from grouplab.protocol.types import TopicPartition

from conftest import EventRecorder
from test_kafka_clients import BROKER, HOST, PARTITIONS, TOPIC, Env, Worker

pytestmark = pytest.mark.e2e
GROUP = "g"  # __consumer_offsets-3: broker 0 coordinates it (Kafka's placement, coordinator/placement.py)
LIBRARIES = ("kafka-python", "aiokafka", "confluent-kafka")


class ClusterEnv(Env):
    """Env (tests/test_kafka_clients.py) on three brokers, bootstrapped on all of them."""

    async def start_server(self, data_dir: Path | None = None, topics: bool = True) -> CoordinatorServer:
        self.server = CoordinatorServer(BrokerConfig().with_overrides([*BROKER, "grouplab.coordinator.load.time.ms=500"]),
                                        HOST, 0, kafka_port=0, events=self.recorder.log("coordinator"), brokers=3)
        await self.server.start()
        await asyncio.to_thread(create_topic, self.bootstrap)
        return self.server

    @property
    def bootstrap(self) -> str:
        assert self.server is not None
        return ",".join(f"{HOST}:{p}" for p in self.server.kafka_ports.values())

    def committed(self) -> dict[int, int]:
        """The group's committed offsets, per partition, as the coordinator holds them now."""
        assert self.server is not None
        group = self.server.broker.groups.get(GROUP)
        if group is None:
            return {}
        return {tp.partition: c.offset for tp, c in group.offsets.committed.items()}


def create_topic(bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-admin")
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    finally:
        admin.close()


class Producer:
    """A kafka-python producer (acks=all, idempotent) in a thread: every send acknowledged or raised."""

    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, retry_backoff_ms=200,
                                      request_timeout_ms=15000, client_id="test-producer")

    def send(self, values: list[str]) -> None:
        futures = [self.producer.send(TOPIC, v.encode(), partition=i % PARTITIONS) for i, v in enumerate(values)]
        for f in futures:
            f.get(timeout=60)  # acknowledged by the partition's leader, or the test fails

    def close(self) -> None:
        self.producer.close(timeout=10)


@pytest.fixture
async def env(recorder: EventRecorder, tmp_path: Path) -> AsyncIterator[ClusterEnv]:
    async with contextlib.AsyncExitStack() as stack:
        e = ClusterEnv(recorder, tmp_path, stack)
        try:
            yield e
        finally:
            await e.close()


def all_consumed(workers: list[Worker], values: set[str]) -> bool:
    return values <= {v for w in workers for _p, _o, v in w.records}


def stable_with(env: ClusterEnv, workers: list[Worker]) -> bool:
    assert env.server is not None
    group = env.server.broker.groups.get(GROUP)
    if group is None or group.state is not GroupState.STABLE or len(group.members) != len(workers):
        return False
    owned = sorted(tp for w in workers for tp in (w.assigned or set()))
    return owned == [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]


async def start_group(env: ClusterEnv) -> tuple[list[Worker], Producer]:
    await env.start_server()
    workers = [await env.worker(lib, group=GROUP) for lib in LIBRARIES]
    await env.wait_until(lambda: stable_with(env, workers), "a Stable group of the three libraries")
    producer = await asyncio.to_thread(Producer, env.bootstrap)
    return workers, producer


async def produce(producer: Producer, start: int, count: int) -> set[str]:
    values = [f"r{i}" for i in range(start, start + count)]
    await asyncio.to_thread(producer.send, values)
    return set(values)


def not_backwards(history: list[dict[int, int]]) -> None:
    for before, after in zip(history, history[1:]):
        for partition, offset in before.items():
            assert after.get(partition, -1) >= offset, (partition, before, after)


async def test_every_client_follows_its_coordinator_broker_being_killed(env: ClusterEnv) -> None:
    workers, producer = await start_group(env)
    assert env.server is not None
    try:
        values = await produce(producer, 0, 60)
        await env.wait_until(lambda: all_consumed(workers, values), "the first 60 records consumed")
        await env.wait_until(lambda: sum(env.committed().values()) >= 60, "their offsets committed")
        history = [env.committed()]
        coordinator = env.server.coordinator_of(GROUP)
        assert coordinator == 0
        await env.server.kill_broker(coordinator)
        assert env.server.coordinator_of(GROUP) != coordinator
        values |= await produce(producer, 60, 60)  # through the leader moves, acks=all
        await env.wait_until(lambda: all_consumed(workers, values), "every record consumed after the kill")
        await env.wait_until(lambda: stable_with(env, workers), "the group Stable again at the new coordinator")
        await env.wait_until(lambda: sum(env.committed().values()) >= 120, "every offset committed again")
        history.append(env.committed())
        not_backwards(history)
        moved = [ev for _n, ev in env.recorder.records if ev.event == "coordinator_moved" and GROUP in ev.fields["groups"]]
        assert [(ev.fields["from_node"], ev.fields["to_node"]) for ev in moved] == [(0, env.server.coordinator_of(GROUP))]
    finally:
        await asyncio.to_thread(producer.close)


async def test_a_rolling_restart_of_every_broker_loses_no_record_and_no_commit(env: ClusterEnv) -> None:
    workers, producer = await start_group(env)
    assert env.server is not None
    try:
        values: set[str] = set()
        history: list[dict[int, int]] = []
        for node in range(3):
            values |= await produce(producer, len(values), 30)
            await env.wait_until(lambda: all_consumed(workers, values), f"records consumed before broker {node} goes")
            await env.wait_until(lambda: sum(env.committed().values()) >= len(values), "their offsets committed")
            history.append(env.committed())
            await env.server.kill_broker(node, "shutdown")
            values |= await produce(producer, len(values), 30)
            await env.server.restart_broker(node)
            await env.wait_until(lambda: all_consumed(workers, values), f"records consumed with broker {node} back")
            await env.wait_until(lambda: stable_with(env, workers), f"the group Stable after broker {node}'s restart")
        env.server.elect_leaders()  # leadership back where it started
        values |= await produce(producer, len(values), 30)
        await env.wait_until(lambda: all_consumed(workers, values), "records consumed after the election")
        await env.wait_until(lambda: sum(env.committed().values()) >= len(values), "every offset committed")
        history.append(env.committed())
        not_backwards(history)
        assert env.server.coordinator_of(GROUP) == 0
    finally:
        await asyncio.to_thread(producer.close)
