"""grouplab's admin tools on a cluster of three brokers (docs/protocol.md §12): AdminClient, given
one bootstrap broker, goes where Kafka's AdminClient goes — a group's requests to its coordinator
(FindCoordinator after NOT_COORDINATOR, again while it loads), a partition's to its leader (Metadata
after NOT_LEADER_OR_FOLLOWER), ListGroups to every broker — and `grouplab describe` (one group, or
--all-groups) works from any broker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import AsyncIterator

import pytest

from grouplab.admin import AdminClient
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.protocol.types import TopicPartition

pytestmark = pytest.mark.e2e
HOST = "127.0.0.1"
GROUP = "orders"  # __consumer_offsets-31: broker 1 coordinates it, then 2 once 1 is down


@pytest.fixture
async def server() -> AsyncIterator[CoordinatorServer]:
    s = CoordinatorServer(BrokerConfig().with_overrides(["grouplab.coordinator.load.time.ms=200"]), HOST, 0,
                          brokers=3)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


def grouplab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grouplab.cli", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"})


async def test_admin_goes_to_the_coordinator_and_the_leader_from_any_broker(server: CoordinatorServer) -> None:
    assert server.coordinator_of(GROUP) == 1
    async with AdminClient(HOST, server.ports[0]) as admin:
        await admin.create_topics({"t": 3})
        assert (await admin.produce("t", 1, [b"a", b"b"])).error_code == 0  # t-1 is led by broker 1
        assert (await admin.list_offsets("t", 1)).offset == 2
        assert await admin.log_end_offsets([TopicPartition("t", p) for p in range(3)]) == {
            TopicPartition("t", 0): 0, TopicPartition("t", 1): 2, TopicPartition("t", 2): 0}
        codes = await admin.commit_offsets(GROUP, {TopicPartition("t", 1): 2})
        assert codes == {TopicPartition("t", 1): 0}
        assert await admin.fetch_offsets(GROUP) == {TopicPartition("t", 1): 2}
        assert [g.group_state for g in await admin.describe_groups([GROUP, "g"])] == ["Empty", "Dead"]
        await admin.commit_offsets("a", {TopicPartition("t", 0): 1})  # broker 2's
        assert sorted(await admin.list_groups()) == ["a", GROUP]

        await server.kill_broker(1)
        assert await admin.fetch_offsets(GROUP) == {TopicPartition("t", 1): 2}  # loaded by broker 2 meanwhile
        assert (await admin.fetch("t", 1, 0)).records[1].value == b"b"  # t-1 now led by broker 2
        assert sorted(await admin.list_groups()) == ["a", GROUP]
        assert await admin.delete_groups([GROUP]) == {GROUP: 0}


async def test_the_cli_describes_and_lists_groups_from_a_broker_that_is_not_their_coordinator(
        server: CoordinatorServer) -> None:
    async with AdminClient(HOST, server.ports[0]) as admin:
        await admin.create_topics({"t": 3})
        await admin.commit_offsets(GROUP, {TopicPartition("t", 0): 5})
    # (in a thread: the brokers answer in this test's event loop)
    described = await asyncio.to_thread(grouplab, "describe", "--bootstrap-server", f"{HOST}:{server.ports[0]}",
                                        "--group", GROUP)
    assert described.returncode == 0, described.stderr
    assert GROUP in described.stdout and "5" in described.stdout
    every = await asyncio.to_thread(grouplab, "describe", "--all-groups", "--bootstrap-server",
                                    f"{HOST}:{server.ports[2]}")
    assert every.returncode == 0 and GROUP in every.stdout, every.stdout + every.stderr


async def test_a_cluster_run_with_a_broker_killed_replays_identically(tmp_path) -> None:
    """The trace of a 3-broker run (requests at every broker, a kill, the load, a restart and an
    election) replays to the same answers and event-log lines (replay.py feeds the broker lines)."""
    from grouplab.eventlog import run_dir_log
    from grouplab.replay import replay
    from grouplab.tracefile import TraceFile, trace_path

    run_dir = tmp_path / "run"
    events = run_dir_log(run_dir, "coordinator")
    trace = TraceFile(trace_path(run_dir))
    server = CoordinatorServer(BrokerConfig().with_overrides(["grouplab.coordinator.load.time.ms=100"]), HOST, 0,
                               events=events, trace=trace, brokers=3)
    await server.start()
    try:
        async with AdminClient(HOST, server.ports[2]) as admin:
            await admin.create_topics({"t": 3})
            await admin.commit_offsets(GROUP, {TopicPartition("t", 0): 7})
            await admin.produce("t", 0, [b"x"])
            await server.kill_broker(1)
            assert await admin.fetch_offsets(GROUP) == {TopicPartition("t", 0): 7}
            await server.restart_broker(1)
            server.elect_leaders()
            assert await admin.fetch_offsets(GROUP) == {TopicPartition("t", 0): 7}
    finally:
        await server.stop()
        events.close()
        trace.close()
    lines = trace_path(run_dir).read_text().splitlines()
    assert any('"kind":"broker"' in line for line in lines) and any('"node":1' in line for line in lines)
    result = replay(run_dir)
    assert result.difference is None and result.events_compared, (result.difference, result.notes)
