"""The deterministic simulator of the ZooKeeper-era design: legacy consumers (consumer/legacy/)
over the embedded registry (coordinator/registry.py) on virtual time, every random choice from one
seeded `random.Random`, so a seed replays the run exactly (docs/legacy.md §5).

One heap of (virtual time, sequence, action) drives everything: registry answers and watch
events (each client's channel delayed by a draw from `delay_ms`), pings, session expiry, the
consumers' timers and the scenario's changes and faults:

- `join` / `leave` (clean shutdown: commit, close the session) / `crash` (nothing more is sent:
  the session expires after its timeout) / `add_partitions`;
- `pause` MS: the process stops for MS (a long GC pause, a cut-off host): it sends nothing, pings
  included, and hears nothing until it resumes; longer than the session timeout, it expires;
- `delay_watches` MS for DURATION: the registry's watch events reach the member MS late (and what
  follows them on its channel queues behind), so members read the registry at different moments;
- `slow_release` MS for DURATION: the member's deletes of owner nodes are sent MS late.

The invariants, checked after every event (`check`): no partition is fetched by a running
consumer whose owner node for it is missing or names another thread (ownership never held by two
threads); and whenever everything is quiet, every live consumer computed the same assignment.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from consumer.legacy.config import LegacyConfig
from consumer.legacy.connector import LegacyConsumer, Phase
from consumer.legacy.driver import LegacyDriver
from grouplab.zk.embedded import EmbeddedClient, RegistryServer
from protocol.effects import LogEvent, TimerKey
from protocol.kernel import Timers, TimerTable
from protocol.registry import Layout, Registration, encode_topic, topic_path
from protocol.types import TopicPartition


@dataclass(frozen=True)
class Change:
    """One scripted change at `at_ms`: join (member, topics {topic: streams}), leave, crash,
    add_partitions (topic, count: the new total), pause (member, ms), delay_watches and
    slow_release (member, ms, duration_ms)."""

    at_ms: int
    kind: str
    member: str = ""
    topics: dict[str, int] = field(default_factory=dict)
    topic: str = ""
    count: int = 0
    ms: int = 0
    duration_ms: int = 0


KINDS = ("join", "leave", "crash", "add_partitions", "pause", "delay_watches", "slow_release")


@dataclass(frozen=True)
class ZkScenario:
    name: str
    topics: dict[str, int]
    changes: list[Change]
    duration_ms: int
    group: str = "grouplab"
    config: list[str] = field(default_factory=list)  # Kafka 0.8 NAME=VALUE overrides
    delay_ms: tuple[int, int] = (1, 5)
    random_faults: int = 0  # extra pause/delay_watches/slow_release faults drawn from the seed

    def __post_init__(self) -> None:
        for c in self.changes:
            if c.kind not in KINDS:
                raise ValueError(f"unknown change {c.kind!r}; known: {', '.join(KINDS)}")


class Violation(AssertionError):
    def __init__(self, invariant: str, detail: str, at_ms: int, seed: int) -> None:
        super().__init__(f"invariant {invariant} broken at {at_ms} ms (seed {seed}): {detail}")
        self.invariant = invariant
        self.seed = seed


@dataclass
class ZkResult:
    seed: int
    events: int
    reads: int
    writes: int
    rebalances: int
    attempts_failed: int
    gave_up: int
    unowned_partition_ms: int  # partition-milliseconds with no consumer fetching
    settle_ms: list[int]  # per change, until everything was quiet and every partition fetched
    log_lines: int

    def summary(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _HeapTimers:
    """A consumer's timers on the heap, held back while its process is paused."""

    def __init__(self, sim: "ZkSimulation", client: EmbeddedClient, fire: Callable[[TimerKey], None]) -> None:
        self._table = TimerTable(lambda d, a: sim.schedule(d, lambda: client.arrive(a)), sim.clock, fire)

    def apply(self, out: Any) -> None:
        self._table.apply(out)

    def cancel_all(self) -> None:
        self._table.cancel_all()


class _Handle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ZkSimulation:
    def __init__(self, scenario: ZkScenario, seed: int,
                 events: Callable[[str, LogEvent], None] | None = None) -> None:
        self.scenario = scenario
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 0
        self._heap: list[tuple[int, int, _Handle, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.emit = events
        self.log_lines = 0
        self.server = RegistryServer(self.clock, self.schedule, self._sink("registry"))
        self.topics = dict(scenario.topics)
        self.drivers: dict[str, LegacyDriver] = {}
        self.clients: dict[str, EmbeddedClient] = {}
        self.fetching: dict[TopicPartition, set[str]] = {}
        self.events_run = 0
        self.unowned_ms = 0
        self._last_account = 0
        self.settle_ms: list[int] = []
        self._change_at: int | None = None
        self._gone: dict[str, LegacyDriver] = {}
        self.layout = Layout(scenario.group)

    # ------------------------------------------------------------------ the loop

    def clock(self) -> int:
        return self.now

    def schedule(self, delay_ms: int, action: Callable[[], None]) -> _Handle:
        handle = _Handle()
        heapq.heappush(self._heap, (self.now + max(0, delay_ms), next(self._seq), handle, action))
        return handle

    def run(self) -> ZkResult:
        for topic, count in sorted(self.topics.items()):
            self._write_topic(topic, count)
        for change in self._all_changes():
            self.schedule(change.at_ms, functools.partial(self._apply_change, change))
        end = self.scenario.duration_ms
        while self._heap and self._heap[0][0] <= end:
            at, _, handle, action = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            self._account(at)
            self.now = at
            action()
            self.events_run += 1
            self.check()
        self._account(end)
        self.now = end
        drivers = list(self.drivers.values()) + list(self._gone.values())
        return ZkResult(
            seed=self.seed, events=self.events_run,
            reads=sum(d.reads for d in drivers), writes=sum(d.writes for d in drivers),
            rebalances=sum(d.machine.rebalances for d in drivers),
            attempts_failed=self.attempts_failed, gave_up=sum(d.machine.gave_up for d in drivers),
            unowned_partition_ms=self.unowned_ms, settle_ms=self.settle_ms, log_lines=self.log_lines)

    attempts_failed = 0

    def _sink(self, node: str) -> Callable[[LogEvent], None] | None:
        emit = self.emit

        def sink(ev: LogEvent) -> None:
            self.log_lines += 1
            if ev.event == "zk_rebalance_attempt_failed":
                self.attempts_failed += 1
            if emit is not None:
                emit(node, ev)
        return sink

    def _all_changes(self) -> list[Change]:
        changes = list(self.scenario.changes)
        members = sorted({c.member for c in changes if c.kind == "join"})
        for _ in range(self.scenario.random_faults):
            kind = self.rng.choice(["pause", "delay_watches", "slow_release"])
            at = self.rng.randrange(1000, max(1001, self.scenario.duration_ms // 2))
            member = self.rng.choice(members) if members else ""
            ms = self.rng.randrange(500, 9000) if kind == "pause" else self.rng.randrange(200, 3000)
            changes.append(Change(at, kind, member, ms=ms, duration_ms=self.rng.randrange(2000, 10000)))
        return sorted(changes, key=lambda c: (c.at_ms, KINDS.index(c.kind), c.member))

    # ------------------------------------------------------------------ changes

    def _apply_change(self, c: Change) -> None:
        if c.kind in ("pause", "delay_watches", "slow_release"):
            self._do_fault(c)
            return
        if self._change_at is not None:
            self.settle_ms.append(-1)  # the previous change never settled (a rebalance gave up)
        self._change_at = self.now
        if c.kind == "join":
            self._join(c.member, c.topics)
        elif c.kind in ("leave", "crash"):
            driver = self.drivers.pop(c.member, None)
            if driver is not None:
                self._gone[f"{c.member}#{self.now}"] = driver
                if c.kind == "leave":
                    driver.close()
                else:
                    driver.stop()
                    self.clients[c.member].crash()
                    self._fetchers_stopped(c.member, list(driver.machine.fetchers))
        elif c.kind == "add_partitions":
            self.topics[c.topic] = c.count
            self._write_topic(c.topic, c.count)

    def _do_fault(self, c: Change) -> None:
        if c.member in self.clients and c.member in self.drivers:
            client = self.clients[c.member]
            if c.kind == "pause":
                client.freeze()
                self.schedule(c.ms, client.thaw)
            elif c.kind == "delay_watches":
                client.watch_delay_ms = c.ms
                self.schedule(c.duration_ms, lambda: setattr(client, "watch_delay_ms", 0))
            elif c.kind == "slow_release":
                client.release_delay_ms = c.ms
                self.schedule(c.duration_ms, lambda: setattr(client, "release_delay_ms", 0))

    def _join(self, member: str, topics: dict[str, int]) -> None:
        config = LegacyConfig(self.scenario.group, member, dict(topics)).with_overrides(self.scenario.config)
        machine = LegacyConsumer(config)
        machine.log_events = self.emit is not None
        client = self.server.client(member)
        client.delay_ms = self.rng.randint(*self.scenario.delay_ms)
        self.clients[member] = client
        driver = LegacyDriver(machine, client, self.clock, lambda fire: _HeapTimers(self, client, fire),
                              self, self._sink(member))
        self.drivers[member] = driver
        driver.start()

    def _write_topic(self, topic: str, count: int) -> None:
        """What `grouplab topics` does in the ZooKeeper era: /brokers/topics/<topic> (no session)."""
        registry, path = self.server.registry, topic_path(topic)
        sid, outs = registry.open_session(6000, self.now)
        self.server.apply(outs)
        from protocol.registry import Create, SetData
        op = SetData(path, encode_topic(count)) if path in registry.nodes else Create(path, encode_topic(count), makepath=True)
        self.server.apply(registry.call((_Admin(), lambda r: None), sid, op, self.now))
        self.server.apply(registry.close_session(sid, self.now))

    # ------------------------------------------------------------------ fetchers (the driver's listener)

    def on_fetchers_started(self, consumer_id: str, offsets: dict[TopicPartition, int],
                            threads: dict[TopicPartition, str]) -> None:
        for tp in offsets:
            self.fetching.setdefault(tp, set()).add(consumer_id)

    def on_fetchers_stopped(self, consumer_id: str, partitions: list[TopicPartition]) -> None:
        self._fetchers_stopped(consumer_id, partitions)

    def _fetchers_stopped(self, consumer_id: str, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.fetching.get(tp, set()).discard(consumer_id)

    def _account(self, at: int) -> None:
        """Partition-milliseconds with no consumer fetching, from the last event until `at`."""
        if at > self._last_account:
            if self.drivers:
                idle = sum(1 for t, n in self.topics.items() if self._subscribed(t) for p in range(n)
                           if not self.fetching.get(TopicPartition(t, p)))
                self.unowned_ms += idle * (at - self._last_account)
            self._last_account = at

    def _subscribed(self, topic: str) -> bool:
        return any(topic in d.machine.config.topic_count for d in self.drivers.values())

    # ------------------------------------------------------------------ invariants

    def check(self) -> None:
        registry = self.server.registry
        for member, driver in self.drivers.items():
            client = self.clients[member]
            if client.frozen or not driver.running:
                continue
            for tp, fetcher in driver.machine.fetchers.items():
                data = registry.data(self.layout.owner(tp.topic, tp.partition))
                if data != fetcher.thread.encode():
                    holder = "nobody" if data is None else data.decode()
                    self._fail("single_owner", f"{member} fetches {tp} as {fetcher.thread}, but its owner node "
                                               f"names {holder}")
        if self._quiet():
            self._check_same_assignment()
            if self._change_at is not None and self._all_fetched():
                self.settle_ms.append(self.now - self._change_at)
                self._change_at = None

    def _quiet(self) -> bool:
        """No consumer has a task, a pending rebalance or a message on its way."""
        for member, driver in self.drivers.items():
            client = self.clients[member]
            if driver.machine.busy or client.frozen or client._last_delivery > self.now or driver.machine.phase in (
                    Phase.WAITING_FOR_SESSION, Phase.REGISTERING):
                return False
        return True

    def _all_fetched(self) -> bool:
        return all(self.fetching.get(TopicPartition(t, p)) for t, n in self.topics.items()
                   if self._subscribed(t) for p in range(n))

    def _check_same_assignment(self) -> None:
        registry = self.server.registry
        registered = {c: Registration.decode(registry.data(self.layout.consumer(c)) or b"{}").subscription
                      for c in registry.children(self.layout.ids)}
        if set(registered) != set(self.drivers):
            return  # a crashed consumer's session has not expired yet: the watches have not fired
        seen: dict[str, tuple[str, list[Any]]] = {}
        for member, driver in sorted(self.drivers.items()):
            m = driver.machine
            if m.assignment is None:
                continue
            for topic in m.config.topic_count:
                share = sorted((t, tps) for t, tps in ((t, [tp for tp in ps if tp.topic == topic])
                                                       for t, ps in m.assignment.items()) if tps)
                if topic in seen and seen[topic][1] != share:
                    self._fail("same_assignment", f"{member} and {seen[topic][0]} computed different assignments "
                                                  f"of {topic}: {share} vs {seen[topic][1]}")
                seen.setdefault(topic, (member, share))

    def _fail(self, invariant: str, detail: str) -> None:
        raise Violation(invariant, detail, self.now, self.seed)


class _Admin:
    """The `to` of the topic writes' replies: nobody listens."""

    def deliver(self, action: Callable[[], None]) -> None:
        pass
