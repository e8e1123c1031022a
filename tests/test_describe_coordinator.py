"""`grouplab describe` names each group's coordinator as kafka-consumer-groups --describe does (its
COORDINATOR (ID) column: `host:port (id)`): from any broker of a cluster, again after the
coordinator broker is killed (the new one), and with one broker (broker 0)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from rich.console import Console

from grouplab.admin import AdminClient
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.describe import ClassicGroupAt, Coordinator, describe
from grouplab.display import describe_table
from grouplab.protocol.consumer_protocol import decode_assignment
from grouplab.protocol.types import TopicPartition

pytestmark = pytest.mark.e2e
HOST = "127.0.0.1"
GROUP = "orders"  # __consumer_offsets-31: broker 1 coordinates it, then 2 once 1 is down


def grouplab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grouplab.cli", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "250"})


async def test_describe_names_the_coordinator_before_and_after_its_broker_dies() -> None:
    server = CoordinatorServer(BrokerConfig().with_overrides(["grouplab.coordinator.load.time.ms=100"]), HOST, 0,
                               brokers=3)
    await server.start()
    try:
        async with AdminClient(HOST, server.ports[0]) as admin:
            await admin.create_topics({"t": 3})
            await admin.commit_offsets(GROUP, {TopicPartition("t", 0): 5})
            await admin.commit_offsets("a", {TopicPartition("t", 0): 1})
            described = await describe(admin, [GROUP, "a"])
            assert described.coordinators == {GROUP: Coordinator(1, HOST, server.ports[1]),
                                              "a": Coordinator(server.coordinator_of("a"), HOST,
                                                               server.ports[server.coordinator_of("a")])}
            (group, _) = described.groups
            assert isinstance(group, ClassicGroupAt) and group.coordinator == Coordinator(1, HOST, server.ports[1])
        await server.kill_broker(1)
        out = await asyncio.to_thread(
            grouplab, "describe", "--group", GROUP, "--format", "json", "--bootstrap-server", f"{HOST}:{server.ports[0]}")
        assert out.returncode == 0, out.stderr
        (g,) = json.loads(out.stdout)
        assert g["coordinator"] == {"node_id": 2, "host": HOST, "port": server.ports[2]}
        text = await asyncio.to_thread(
            grouplab, "describe", "--group", GROUP, "--bootstrap-server", f"{HOST}:{server.ports[2]}")
        assert text.returncode == 0, text.stderr
        assert f"coordinator {HOST}:{server.ports[2]} (2)" in text.stdout
    finally:
        await server.stop()


async def test_with_one_broker_the_coordinator_is_broker_0() -> None:
    server = CoordinatorServer(BrokerConfig(), HOST, 0)
    await server.start()
    try:
        async with AdminClient(HOST, server.port) as admin:
            await admin.create_topics({"t": 1})
            await admin.commit_offsets("g", {TopicPartition("t", 0): 1})
            described = await describe(admin, ["g"])
        assert described.coordinators == {"g": Coordinator(0, HOST, server.port)}
        console = Console(width=250, record=True, color_system=None, file=open(os.devnull, "w"))
        console.print(describe_table(described.groups[0], decode_assignment))
        assert f"coordinator {HOST}:{server.port} (0)" in console.export_text()
    finally:
        await server.stop()
