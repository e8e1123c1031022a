"""`grouplab run --protocol zk`: the ZooKeeper-era consumers over real time, on the embedded
registry (default) or a real ZooKeeper (`--zookeeper HOST:PORT`), with the same script as the
coordinator run: start N consumers, stop one (cleanly, or `--crash`: its session is left to
expire), add one; each step waits until the group has settled. The summary counts every registry
operation by consumer: the herd effect (docs/legacy.md §4)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from grouplab.consumer.legacy.config import LegacyConfig
from grouplab.consumer.legacy.connector import LegacyConsumer, Phase
from grouplab.consumer.legacy.driver import LegacyDriver
from grouplab.zk.account import Counters, Fetching
from grouplab.zk.embedded import RegistryServer, loop_post
from grouplab.zk.forwarder import CuttableForwarder
from grouplab.protocol.effects import wall_clock_ms
from grouplab.protocol.effects import TimerKey
from grouplab.protocol.kernel import EventSink, TimerTable, Timers
from grouplab.protocol.registry import (
    Create,
    Layout,
    RegistryBackend,
    RegistryError,
    Result,
    SetData,
    encode_topic,
    topic_path,
)
from grouplab.protocol.types import TopicPartition


class ZkRunError(Exception):
    """The run cannot go on (no ZooKeeper there): one line for the user."""


@dataclass
class Step:
    what: str
    settle_ms: int | None  # None: it did not settle in time
    ops: int


@dataclass
class ZkCluster:
    """The registry (embedded or real), the topics in it, and the legacy consumers."""

    topics: dict[str, int]
    group: str
    assignor: str
    streams: int
    overrides: list[str]
    zookeeper: str | None = None
    events: Callable[[str], EventSink | None] = lambda node: None
    drivers: list[LegacyDriver] = field(default_factory=list)
    stopped: list[LegacyDriver] = field(default_factory=list)
    forwarders: dict[str, CuttableForwarder] = field(default_factory=dict)
    server: RegistryServer | None = None
    _next: int = 0

    def __post_init__(self) -> None:
        self.started_ms = wall_clock_ms()  # the synthetic logs are written from then on (auto.offset.reset)
        self.topics = dict(self.topics)
        self.account = Fetching(self.topics)

    @property
    def fetching(self) -> dict[TopicPartition, set[str]]:
        """partition -> the consumers fetching it now."""
        return self.account.fetchers

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.zookeeper is None:
            self.server = RegistryServer(wall_clock_ms, loop_post(loop), self.events("registry"))
        admin = self._backend("admin")
        connected = asyncio.Event()
        admin.start(6000, lambda ev: connected.set())
        timeout_ms = LegacyConfig(self.group, "check").with_overrides(self.overrides).connection_timeout_ms
        try:
            await asyncio.wait_for(connected.wait(), timeout_ms / 1000)
        except asyncio.TimeoutError:
            admin.close()
            raise ZkRunError(f"cannot reach ZooKeeper at {self.zookeeper} within zookeeper.connection.timeout.ms "
                             f"({timeout_ms} ms); start one (docs/legacy.md §6) or leave out --zookeeper "
                             "for the embedded registry") from None
        for topic, count in self.topics.items():
            await self._write_topic(admin, topic, count)
        admin.close()
        self.account.account(wall_clock_ms(), set())

    async def _write_topic(self, admin: RegistryBackend, topic: str, count: int) -> None:
        """What `grouplab topics` writes in the ZooKeeper era: /brokers/topics/<topic>."""
        got = await self._call(admin, SetData(topic_path(topic), encode_topic(count)))
        if got.error is RegistryError.NO_NODE:
            await self._call(admin, Create(topic_path(topic), encode_topic(count), makepath=True))

    async def add_partitions(self, topic: str, total: int) -> None:
        """Raise `topic`'s partition count to `total` in the registry: every consumer's watch on
        the topic's node fires."""
        admin = self._backend("admin")
        connected = asyncio.Event()
        admin.start(6000, lambda ev: connected.set())
        try:
            await asyncio.wait_for(connected.wait(), 10)
            self._account()
            self.topics[topic] = total
            await self._write_topic(admin, topic, total)
        finally:
            admin.close()

    def _backend(self, name: str, cuttable: bool = False) -> RegistryBackend:
        if self.server is not None:
            return self.server.client(name)
        from grouplab.zk.kazoo_backend import KazooBackend

        hosts = self.zookeeper or ""
        if cuttable:
            host, _, port = hosts.rpartition(":")
            forwarder = CuttableForwarder(int(port), host or "127.0.0.1")
            self.forwarders[name] = forwarder
            hosts = forwarder.hosts
        return KazooBackend(hosts)

    @staticmethod
    async def _call(backend: RegistryBackend, op: Any) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()

        def done(result: Result) -> None:
            if not future.done():
                future.set_result(result)
        backend.call(op, done)
        return await asyncio.wait_for(future, 10)

    def add_consumer(self, name: str | None = None) -> LegacyDriver:
        self._next += 1
        name = name or f"consumer-{self._next}"
        config = LegacyConfig(self.group, name, {t: self.streams for t in self.topics},
                              assignment_strategy=self.assignor).with_overrides(self.overrides)
        machine = LegacyConsumer(config, log_start_ms=self.started_ms)
        sink = self.events(name)
        machine.log_events = sink is not None
        loop = asyncio.get_running_loop()

        def timers(fire: Callable[[TimerKey], None]) -> Timers:
            return TimerTable(loop_post(loop), wall_clock_ms, fire)

        driver = LegacyDriver(machine, self._backend(name, cuttable=True), wall_clock_ms, timers, self, sink)
        self.drivers.append(driver)
        driver.start()
        return driver

    def stop_consumer(self, driver: LegacyDriver, crash: bool) -> None:
        self.drivers.remove(driver)
        self.stopped.append(driver)
        if crash:
            driver.stop()
            self.on_fetchers_stopped(driver.consumer_id, list(driver.machine.fetchers))
            backend = driver.backend
            if driver.consumer_id in self.forwarders:
                self.forwarders[driver.consumer_id].cut()
            elif hasattr(backend, "crash"):
                backend.crash()
        else:
            driver.close()

    async def close(self) -> None:
        for driver in list(self.drivers):
            driver.close()
        await asyncio.sleep(0.2)  # let the last commits and session closes go out
        for driver in self.drivers + self.stopped:
            if driver.running:
                driver.stop()
            driver.backend.close()
        for forwarder in self.forwarders.values():
            forwarder.cut()

    # ------------------------------------------------------------------ fetchers and settling

    def on_fetchers_started(self, consumer_id: str, offsets: dict[TopicPartition, int],
                            threads: dict[TopicPartition, str]) -> None:
        self._account()
        self.account.started(consumer_id, offsets)

    def on_fetchers_stopped(self, consumer_id: str, partitions: list[TopicPartition]) -> None:
        self._account()
        self.account.stopped(consumer_id, partitions)

    def _account(self) -> None:
        self.account.account(wall_clock_ms(), {t for d in self.drivers for t in d.machine.config.topic_count})

    def counters(self) -> Counters:
        """Every consumer's counters now (the stopped ones' too), the idle time charged up to now."""
        self._account()
        return Counters.of(wall_clock_ms(), self.drivers + self.stopped, self.account.unowned_ms)

    def settled(self) -> bool:
        """Every live consumer idle with its claims in place, every partition fetched by exactly
        one consumer, and every consumer that computed an assignment computed the same one."""
        live = self.drivers
        if any(d.machine.busy or d.machine.phase is not Phase.FETCHING for d in live):
            return False
        partitions = [TopicPartition(t, p) for t, n in self.topics.items() for p in range(n)]
        if live and any(len(self.fetching.get(tp, ())) != 1 for tp in partitions):
            return False
        assignments = {repr(sorted(d.machine.assignment.items())) for d in live if d.machine.assignment is not None}
        return len(assignments) <= 1

    def ops(self) -> int:
        return sum(d.reads + d.writes for d in self.drivers + self.stopped)

    async def wait_settled(self, timeout_s: float, quiet_s: float = 0.3, began: float | None = None) -> int | None:
        """Milliseconds from `began` (a time.monotonic(); default: now) until settled (and still so
        `quiet_s` later), or None after `timeout_s`."""
        began = time.monotonic() if began is None else began
        while time.monotonic() - began < timeout_s:
            if self.settled():
                await asyncio.sleep(quiet_s)
                if self.settled():
                    return int((time.monotonic() - began - quiet_s) * 1000)
            await asyncio.sleep(0.05)
        return None


def owner_nodes_now(server: RegistryServer, group: str) -> dict[str, str]:
    """`topic/partition -> thread id` from the embedded registry's owner nodes."""
    layout, registry = Layout(group), server.registry
    out: dict[str, str] = {}
    for topic in registry.children(layout.owners):
        for p in registry.children(f"{layout.owners}/{topic}"):
            out[f"{topic}/{p}"] = (registry.data(f"{layout.owners}/{topic}/{p}") or b"").decode()
    return out

