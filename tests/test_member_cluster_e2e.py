"""grouplab's own members over real sockets on a cluster of three brokers (docs/protocol.md
§12.1): bootstrapped on every broker, each finds its group's coordinator with FindCoordinator and
opens a socket to it (an address it learns from the answer); the coordinator broker is killed and
every member finds the new one and the group is Stable again; the classic protocol and KIP-848.
Every wait is on a condition with a generous deadline."""

from __future__ import annotations

import contextlib

import pytest

from grouplab.consumer.client import GroupMemberClient, with_bootstrap
from grouplab.consumer.config import ConsumerConfig
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient

from conftest import DEFAULT_TIMEOUT_S, EventRecorder

pytestmark = pytest.mark.e2e
HOST = "127.0.0.1"
GROUP = "g"  # __consumer_offsets-3: broker 0 coordinates it first, then broker 1
BROKER = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100",
          "grouplab.coordinator.load.time.ms=200", "group.consumer.min.session.timeout.ms=1000",
          "group.consumer.session.timeout.ms=6000", "group.consumer.min.heartbeat.interval.ms=100",
          "group.consumer.heartbeat.interval.ms=200"]


async def start(recorder: EventRecorder, cleanup: contextlib.AsyncExitStack) -> CoordinatorServer:
    server = CoordinatorServer(BrokerConfig().with_overrides(BROKER), HOST, 0, events=recorder.log("coordinator"),
                               brokers=3)
    await server.start()
    cleanup.push_async_callback(server.stop)
    async with AdminClient(HOST, server.ports[2]) as admin:
        await admin.create_topics({"t": 6})
    return server


async def member(server: CoordinatorServer, recorder: EventRecorder, cleanup: contextlib.AsyncExitStack, name: str,
                 protocol: str) -> GroupMemberClient:
    overrides = ["retry.backoff.ms=20", "request.timeout.ms=3000"] + (
        ["session.timeout.ms=6000", "heartbeat.interval.ms=200"] if protocol == "classic" else [])
    config = ConsumerConfig(group_id=GROUP, topics=["t"], client_id=name,
                            group_protocol=protocol).with_overrides(overrides)
    config, nodes = with_bootstrap(config, [(HOST, p) for p in server.ports.values()])
    client = GroupMemberClient(config, HOST, server.port, events=recorder.log(name), nodes=nodes)
    cleanup.push_async_callback(client.close, False)
    return await client.start()


def working_with_every_partition(clients: list[GroupMemberClient]) -> bool:
    owned = sorted(tp.partition for c in clients for tp in c.assignment)
    return all(c.working for c in clients) and owned == list(range(6))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_members_find_the_coordinator_and_follow_it_when_its_broker_is_killed(
        protocol: str, recorder: EventRecorder, cleanup: contextlib.AsyncExitStack) -> None:
    server = await start(recorder, cleanup)
    clients = [await member(server, recorder, cleanup, f"c{i}", protocol) for i in range(3)]
    await recorder.wait_until(lambda: working_with_every_partition(clients), DEFAULT_TIMEOUT_S, "a group of three")
    first = server.coordinator_of(GROUP)
    assert first == 0
    found = [ev for _n, ev in recorder.records if ev.event == "coordinator_found"]
    assert {ev.fields["node_id"] for ev in found} == {0}

    await server.kill_broker(first)
    moved = server.coordinator_of(GROUP)
    assert moved not in (first, -1)
    await recorder.wait_until(
        lambda: len([ev for _n, ev in recorder.records if ev.event == "coordinator_found"
                     and ev.fields["node_id"] == moved]) >= 3, DEFAULT_TIMEOUT_S, "every member at the new coordinator")


    def loaded_with_three() -> bool:
        group = server.broker.groups.get(GROUP) or server.broker.consumer_groups.get(GROUP)
        return group is not None and len(group.members) == 3 and working_with_every_partition(clients)

    await recorder.wait_until(loaded_with_three, DEFAULT_TIMEOUT_S, "the group loaded by the new coordinator, three working")
