"""End to end against a real ZooKeeper started by the test set-up (tests/conftest.py): the
ZooKeeper-era consumers through kazoo join, crash and are replaced; after every change the owner
nodes in ZooKeeper name exactly the thread each live consumer fetches with, every partition once;
a crashed consumer's ephemeral nodes vanish after its session timeout and its partitions are
taken over. The same script on the embedded registry, and `grouplab run --protocol zk` on both."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from grouplab.zk.kazoo_backend import KazooBackend
from grouplab.zk.run import ZkCluster
from grouplab.protocol.registry import GetChildren, GetData, Layout
from tests.zk_server import ZooKeeperServer

ROOT = Path(__file__).resolve().parent.parent
TOPICS = {"t0": 5, "t1": 2}


async def owner_nodes(backend: KazooBackend | None, cluster: ZkCluster, group: str) -> dict[str, str]:
    """`topic/partition -> thread` as the registry has it (read through kazoo, or the embedded tree)."""
    layout = Layout(group)
    if backend is None:
        from grouplab.zk.run import owner_nodes_now

        assert cluster.server is not None
        return owner_nodes_now(cluster.server, group)
    out: dict[str, str] = {}
    topics = await ZkCluster._call(backend, GetChildren(layout.owners))
    for topic in topics.children or []:
        parts = await ZkCluster._call(backend, GetChildren(f"{layout.owners}/{topic}"))
        for p in parts.children or []:
            got = await ZkCluster._call(backend, GetData(f"{layout.owners}/{topic}/{p}"))
            if got.data is not None:
                out[f"{topic}/{p}"] = got.data.decode()
    return out


def expected_owners(cluster: ZkCluster) -> dict[str, str]:
    return {f"{tp.topic}/{tp.partition}": f.thread for d in cluster.drivers for tp, f in d.machine.fetchers.items()}


async def check_settled(cluster: ZkCluster, observer: KazooBackend | None, group: str) -> None:
    assert await cluster.wait_settled(30) is not None, "did not settle"
    owners = await owner_nodes(observer, cluster, group)
    assert owners == expected_owners(cluster)
    assert sorted(owners) == sorted(f"{t}/{p}" for t, n in TOPICS.items() for p in range(n))
    assignments = {repr(sorted(d.machine.assignment.items())) for d in cluster.drivers if d.machine.assignment}
    assert len(assignments) == 1  # every live consumer computed the same assignment


async def scenario(cluster: ZkCluster, observer: KazooBackend | None, group: str) -> None:
    never_two = asyncio.create_task(watch_single_fetcher(cluster))
    try:
        await cluster.start()
        for _ in range(3):
            cluster.add_consumer()
        await check_settled(cluster, observer, group)
        victim = cluster.drivers[0]
        victim_threads = set(expected_owners(cluster).values()) & {f"{victim.consumer_id}-0", f"{victim.consumer_id}-1"}
        assert victim_threads
        cluster.stop_consumer(victim, crash=True)
        await check_settled(cluster, observer, group)  # after its session timeout (6 s)
        owners = await owner_nodes(observer, cluster, group)
        assert not victim_threads & set(owners.values())  # taken over
        ids = (await ZkCluster._call(observer, GetChildren(Layout(group).ids))).children if observer else \
            cluster.server.registry.children(Layout(group).ids)  # type: ignore[union-attr]
        assert victim.consumer_id not in (ids or [])  # its ephemeral registration vanished
        cluster.add_consumer()
        await check_settled(cluster, observer, group)
    finally:
        never_two.cancel()
        await cluster.close()


async def watch_single_fetcher(cluster: ZkCluster) -> None:
    """All along: no partition is fetched by two consumers at once."""
    while True:
        for tp, consumers in cluster.fetching.items():
            assert len(consumers) <= 1, f"{tp} fetched by {consumers}"
        await asyncio.sleep(0.005)


@pytest.mark.e2e
async def test_legacy_consumers_on_a_real_zookeeper(zookeeper: ZooKeeperServer) -> None:
    group = f"e2e-{uuid.uuid4().hex[:6]}"
    cluster = ZkCluster(dict(TOPICS), group, "range", 2, [], zookeeper.hosts)
    observer = KazooBackend(zookeeper.hosts)
    connected = asyncio.Event()
    observer.start(6000, lambda ev: connected.set())
    await asyncio.wait_for(connected.wait(), 15)
    try:
        await scenario(cluster, observer, group)
    finally:
        observer.close()


async def test_legacy_consumers_on_the_embedded_registry() -> None:
    await scenario(ZkCluster(dict(TOPICS), "embedded", "range", 2, []), None, "embedded")


def grouplab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grouplab.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})


@pytest.mark.e2e
def test_cli_run_protocol_zk_on_a_real_zookeeper(zookeeper: ZooKeeperServer) -> None:
    proc = grouplab("run", "--protocol", "zk", "--zookeeper", zookeeper.hosts, "--consumers", "2", "--hold", "0",
                    "--topics", "t0:3", "--group", f"cli-{uuid.uuid4().hex[:6]}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "registry operations per consumer" in proc.stdout and "one joined: settled in" in proc.stdout


@pytest.mark.parametrize("args, words", [
    (["--protocol", "zk", "--zookeeper", "nowhere"], ["HOST:PORT"]),
    (["--zookeeper", "127.0.0.1:2181"], ["--protocol zk"]),
    (["--protocol", "zk", "--assignor", "sticky"], ["sticky", "range, roundrobin"]),
    (["--protocol", "zk", "--consumer-config", "session.timeout.ms=5"], ["session.timeout.ms", "zookeeper.session.timeout.ms"]),
    (["--protocol", "zk", "--zookeeper", "127.0.0.1:1", "--consumer-config", "zookeeper.connection.timeout.ms=300"],
     ["cannot reach ZooKeeper", "127.0.0.1:1"]),
])
def test_cli_run_protocol_zk_mistakes(args: list[str], words: list[str]) -> None:
    proc = grouplab("run", *args)
    assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    for word in words:
        assert word in proc.stderr
