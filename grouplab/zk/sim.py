"""The deterministic simulator of the ZooKeeper-era design: legacy consumers (consumer/legacy/)
over the embedded registry (coordinator/registry.py) on virtual time, every random choice from one
seeded `random.Random`, so a seed replays the run exactly (docs/legacy.md §5).

One heap of (virtual time, sequence, action) drives everything: registry answers and watch
events (each client's channel delayed by a draw from `delay_ms`), pings, session expiry, the
consumers' timers and the scenario's changes and faults:

- `join` / `leave` (clean shutdown: commit, close the session) / `crash` (nothing more is sent:
  the session expires after its timeout) / `add_partitions`;
- `pause` MS: the process stops for MS (a long GC pause): it sends nothing, pings included, and
  hears nothing until it resumes; longer than the session timeout, it expires;
- `partition` MS: the consumer's link to the registry is down for MS while the process runs on
  and fetches: its requests wait, it sends no pings and hears nothing; longer than the session
  timeout, the session expires, its nodes vanish and the others take its partitions over while it
  still fetches them, until the link is back and its new session's rebalance stops its fetchers;
- `delay_watches` MS for DURATION: the registry's watch events reach the member MS late (and what
  follows them on its channel queues behind), so members read the registry at different moments;
- `slow_release` MS for DURATION: the member's deletes of owner nodes are sent MS late.

The invariants, checked after every event (`check`): no partition is fetched by a running
consumer whose owner node for it is missing or names another thread (ownership never held by two
threads) — except by a zombie, a consumer whose session expired, whose fetchers Kafka 0.8 let run
until its new session's rebalance: those windows are measured (`ZombieWindow`, the partition-ms
fetched by zombies and fetched twice) rather than refused; and whenever everything is quiet, every
live consumer computed the same assignment.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from grouplab.consumer.legacy.config import LegacyConfig
from grouplab.consumer.legacy.connector import LegacyConsumer, Phase
from grouplab.consumer.legacy.driver import LegacyDriver
from grouplab.zk.embedded import EmbeddedClient, RegistryServer
from grouplab.zk.account import Counters, Fetching, ZkChange
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent, TimerKey
from grouplab.protocol.kernel import Timers, TimerTable
from grouplab.protocol.registry import Layout, Registration, encode_topic, topic_path
from grouplab.protocol.types import TopicPartition


@dataclass(frozen=True)
class Change:
    """One scripted change at `at_ms`: join (member, topics {topic: streams}), leave, crash,
    add_partitions (topic, count: the new total), pause and partition (member, ms), delay_watches
    and slow_release (member, ms, duration_ms)."""

    at_ms: int
    kind: str
    member: str = ""
    topics: dict[str, int] = field(default_factory=dict)
    topic: str = ""
    count: int = 0
    ms: int = 0
    duration_ms: int = 0
    spread_ms: int = 0  # join: at a moment drawn from the seed in [at_ms, at_ms + spread_ms]


KINDS = ("join", "leave", "crash", "add_partitions", "pause", "partition", "delay_watches", "slow_release")
FAULTS = ("pause", "partition", "delay_watches", "slow_release")


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
    description: str = ""

    def __post_init__(self) -> None:
        for c in self.changes:
            if c.kind not in KINDS:
                raise ValueError(f"unknown change {c.kind!r}; known: {', '.join(KINDS)}")


class Violation(AssertionError):
    def __init__(self, invariant: str, detail: str, at_ms: int, seed: int) -> None:
        super().__init__(f"invariant {invariant} broken at {at_ms} ms (seed {seed}): {detail}")
        self.invariant = invariant
        self.detail = detail
        self.at_ms = at_ms
        self.seed = seed


@dataclass(frozen=True)
class ZombieWindow:
    """A consumer that fetched partitions it no longer owned: its session had expired (it had not
    heard yet, or had and waited for its new session's rebalance to stop its fetchers)."""

    consumer: str
    from_ms: int
    to_ms: int
    partitions: int  # the most it fetched at once in the window

    @property
    def ms(self) -> int:
        return self.to_ms - self.from_ms


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
    settle_ms: list[int]  # per change, until everything was quiet and every partition fetched (-1: never)
    log_lines: int
    changes: list[ZkChange] = field(default_factory=list)
    zombie_windows: list[ZombieWindow] = field(default_factory=list)
    zombie_partition_ms: int = 0  # partition-ms fetched by a consumer whose session had expired
    double_fetch_ms: int = 0  # partition-ms fetched by two consumers at once

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
        self.fetching = Fetching(self.topics)
        self.events_run = 0
        self.settle_ms: list[int] = []
        self.changes: list[ZkChange] = []
        self._change_at: int | None = None
        self._change_start: Counters | None = None
        self._change_what: list[str] = []
        self._gone: dict[str, LegacyDriver] = {}
        self._incarnations: dict[str, int] = {}
        self.zombie_windows: list[ZombieWindow] = []
        self._zombie_since: dict[str, tuple[int, int]] = {}  # consumer -> (since, most partitions at once)
        self._agreed: list[tuple[str, Any]] = []  # (consumer, assignment) at the last agreement check that passed
        self.zombie_ms = 0
        self.double_fetch_ms = 0
        self.layout = Layout(scenario.group)

    # ------------------------------------------------------------------ the loop

    def clock(self) -> int:
        return self.now

    def schedule(self, delay_ms: int, action: Callable[[], None]) -> _Handle:
        handle = _Handle()
        heapq.heappush(self._heap, (self.now + max(0, delay_ms), next(self._seq), handle, action))
        return handle

    def run(self) -> ZkResult:
        self.fetching.account(0, set())
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
        self._change_ended(settled=False)
        for member in list(self._zombie_since):
            self._zombie_ended(member)
        drivers = list(self.drivers.values()) + list(self._gone.values())
        return ZkResult(
            seed=self.seed, events=self.events_run,
            reads=sum(d.reads for d in drivers), writes=sum(d.writes for d in drivers),
            rebalances=sum(d.machine.rebalances for d in drivers),
            attempts_failed=sum(d.machine.attempts_failed for d in drivers),
            gave_up=sum(d.machine.gave_up for d in drivers),
            unowned_partition_ms=self.fetching.unowned_ms, settle_ms=self.settle_ms, log_lines=self.log_lines,
            changes=self.changes, zombie_windows=self.zombie_windows, zombie_partition_ms=self.zombie_ms,
            double_fetch_ms=self.double_fetch_ms)

    @property
    def unowned_ms(self) -> int:
        return self.fetching.unowned_ms

    def counters(self) -> Counters:
        return Counters.of(self.now, list(self.drivers.values()) + list(self._gone.values()), self.fetching.unowned_ms)

    def _change_ended(self, settled: bool) -> None:
        """The change under way settled now (or never will: the next one comes, or the run ends)."""
        if self._change_start is not None:
            self.changes.append(self.counters().since(self._change_start, settled, "; ".join(self._change_what)))
            self.settle_ms.append(self.now - self._change_start.at_ms if settled else -1)
        self._change_at, self._change_start = None, None

    def _change_begins(self, what: str) -> None:
        if self._change_at != self.now:  # changes at one moment are one change
            self._change_ended(settled=False)  # (if the previous one is still under way, it never settled)
            self._change_at, self._change_start, self._change_what = self.now, self.counters(), []
        self._change_what.append(what)

    def _sink(self, node: str) -> Callable[[LogEvent], None] | None:
        emit = self.emit

        def sink(ev: LogEvent) -> None:
            self.log_lines += 1
            if emit is not None:
                emit(node, ev)
        return sink

    def _all_changes(self) -> list[Change]:
        changes = [replace(c, at_ms=c.at_ms + self.rng.randint(0, c.spread_ms), spread_ms=0) if c.spread_ms else c
                   for c in self.scenario.changes]
        members = sorted({c.member for c in changes if c.kind == "join"})
        for _ in range(self.scenario.random_faults):
            kind = self.rng.choice(["pause", "delay_watches", "slow_release", "partition"])
            at = self.rng.randrange(1000, max(1001, self.scenario.duration_ms // 2))
            member = self.rng.choice(members) if members else ""
            ms = self.rng.randrange(500, 9000) if kind in ("pause", "partition") else self.rng.randrange(200, 3000)
            changes.append(Change(at, kind, member, ms=ms, duration_ms=self.rng.randrange(2000, 10000)))
        return sorted(changes, key=lambda c: (c.at_ms, KINDS.index(c.kind), c.member))

    # ------------------------------------------------------------------ changes

    def _apply_change(self, c: Change) -> None:
        if c.kind in FAULTS:
            self._do_fault(c)
            return
        if c.kind in ("leave", "crash") and c.member not in self.drivers or c.kind == "join" and c.member in self.drivers:
            return  # no such consumer running (or it runs already): skipped, as the coordinator simulator does
        self._change_begins(f"{c.kind} {c.topic} to {c.count}" if c.kind == "add_partitions" else f"{c.kind} {c.member}")
        if c.kind == "join":
            self._incarnations[c.member] = self._incarnations.get(c.member, 0) + 1
            self._log_sim(events.ProcessStarted(self.scenario.group, self.seed, c.member, self._incarnations[c.member]))
            self._join(c.member, c.topics)
        elif c.kind in ("leave", "crash"):
            self._log_sim(events.FaultInjected(self.scenario.group, self.seed, c.kind, [c.member], 0, None))
            driver = self.drivers.pop(c.member)
            self._gone[f"{c.member}#{self.now}"] = driver
            if c.kind == "leave":
                driver.close()
            else:
                driver.stop()
                self.clients[c.member].crash()
                self.fetching.stopped(c.member, list(driver.machine.fetchers))
                self._zombie_ended(c.member)
        elif c.kind == "add_partitions":
            self._log_sim(events.FaultInjected(self.scenario.group, self.seed, c.kind, [], 0, c.topic))
            self.topics[c.topic] = c.count
            self._write_topic(c.topic, c.count)

    def _do_fault(self, c: Change) -> None:
        if c.member in self.clients and c.member in self.drivers:
            client = self.clients[c.member]
            group, seed = self.scenario.group, self.seed
            self._change_begins(f"{c.kind} {c.member} {c.ms} ms"
                                + (f" for {c.duration_ms} ms" if c.kind not in ("pause", "partition") else ""))
            if c.kind == "pause":
                self._log_sim(events.FaultInjected(group, seed, c.kind, [c.member], c.ms, None))
                client.freeze()
                self.schedule(c.ms, client.thaw)
            elif c.kind == "partition":
                self._log_sim(events.FaultInjected(group, seed, c.kind, [c.member], c.ms, None))
                client.cut_off()
                self.schedule(c.ms, client.heal)
            elif c.kind == "delay_watches":
                self._log_sim(events.DelayFaultInjected(group, seed, c.kind, [c.member], c.duration_ms, None, c.ms))
                client.watch_delay_ms = c.ms
                self.schedule(c.duration_ms, lambda: setattr(client, "watch_delay_ms", 0))
            elif c.kind == "slow_release":
                self._log_sim(events.DelayFaultInjected(group, seed, c.kind, [c.member], c.duration_ms, None, c.ms))
                client.release_delay_ms = c.ms
                self.schedule(c.duration_ms, lambda: setattr(client, "release_delay_ms", 0))

    def _log_sim(self, payload: events.SimulatorEvent) -> None:
        """What the simulator did, as the coordinator simulator writes it (node `simulator`, events.md §4.6)."""
        if self.emit is not None:
            self.log_lines += 1
            self.emit("simulator", LogEvent(self.now, payload))

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
        from grouplab.protocol.registry import Create, SetData
        op = SetData(path, encode_topic(count)) if path in registry.nodes else Create(path, encode_topic(count), makepath=True)
        self.server.apply(registry.call((_Admin(), lambda r: None), sid, op, self.now))
        self.server.apply(registry.close_session(sid, self.now))

    # ------------------------------------------------------------------ fetchers (the driver's listener)

    def on_fetchers_started(self, consumer_id: str, offsets: dict[TopicPartition, int],
                            threads: dict[TopicPartition, str]) -> None:
        self.fetching.started(consumer_id, offsets)

    def on_fetchers_stopped(self, consumer_id: str, partitions: list[TopicPartition]) -> None:
        self.fetching.stopped(consumer_id, partitions)

    def _account(self, at: int) -> None:
        """Partition-milliseconds with no consumer fetching, fetched by a zombie, and fetched twice,
        from the last event until `at`."""
        if at > self.now:
            fetched: dict[TopicPartition, int] = {}
            zombie: set[TopicPartition] = set()
            for member in self.drivers:
                if not self.clients[member].frozen:
                    for tp in self.drivers[member].machine.fetchers:
                        fetched[tp] = fetched.get(tp, 0) + 1
                    zombie.update(self._zombie_partitions(member))
            self.zombie_ms += len(zombie) * (at - self.now)
            self.double_fetch_ms += sum(1 for n in fetched.values() if n > 1) * (at - self.now)
        self.fetching.account(at, self._subscribed())

    def _zombie_partitions(self, member: str) -> list[TopicPartition]:
        """What a running consumer fetches without owning it any more: its session expired (it may
        not know yet), or it knows and its new session's rebalance has not stopped its fetchers."""
        driver, client = self.drivers[member], self.clients[member]
        machine = driver.machine
        if not machine.fetchers or not driver.running or client.frozen:
            return []  # (a paused process fetches nothing)
        expired = not self.server.registry.is_alive(client.session_id)
        return [tp for tp in machine.fetchers if expired or tp not in machine.owned]

    def _watch_zombies(self, zombies: dict[str, list[TopicPartition]]) -> None:
        for member, partitions in zombies.items():
            if partitions:
                since, most = self._zombie_since.get(member, (self.now, 0))
                self._zombie_since[member] = (since, max(most, len(partitions)))
            else:
                self._zombie_ended(member)

    def _zombie_ended(self, member: str) -> None:
        if member in self._zombie_since:
            since, most = self._zombie_since.pop(member)
            self.zombie_windows.append(ZombieWindow(member, since, self.now, most))

    def _subscribed(self) -> set[str]:
        return {t for d in self.drivers.values() for t in d.machine.config.topic_count}

    # ------------------------------------------------------------------ invariants

    def check(self) -> None:
        registry = self.server.registry
        zombies = {member: self._zombie_partitions(member) for member in self.drivers}
        self._watch_zombies(zombies)
        for member, driver in self.drivers.items():
            client = self.clients[member]
            if client.frozen or not driver.running or not driver.machine.fetchers:
                continue
            zombie = set(zombies[member])
            for tp, fetcher in driver.machine.fetchers.items():
                if tp in zombie:
                    continue  # measured, not refused: Kafka 0.8 let them run (ZombieWindow)
                data = registry.data(self.layout.owner(tp.topic, tp.partition))
                if data != fetcher.thread.encode():
                    holder = "nobody" if data is None else data.decode()
                    self._fail("single_owner", f"{member} fetches {tp} as {fetcher.thread}, but its owner node "
                                               f"names {holder}")
        if self._quiet():
            self._check_same_assignment()
            if self._change_at is not None and self._all_fetched():
                self._change_ended(settled=True)

    def _quiet(self) -> bool:
        """No consumer has a task, a pending rebalance or a message on its way."""
        for member, driver in self.drivers.items():
            client = self.clients[member]
            if driver.machine.busy or client.frozen or client.cut or client._last_delivery > self.now or driver.machine.phase in (
                    Phase.WAITING_FOR_SESSION, Phase.REGISTERING):
                return False
        return True

    def _all_fetched(self) -> bool:
        return self.fetching.idle(self._subscribed()) == 0

    def _check_same_assignment(self) -> None:
        registry = self.server.registry
        if set(registry.children(self.layout.ids)) != set(self.drivers):
            return  # a crashed consumer's session has not expired yet: the watches have not fired
        # A consumer's assignment is a new object each time it computes one: if none did since the
        # last check that passed, they still agree.
        current = [(member, driver.machine.assignment) for member, driver in sorted(self.drivers.items())]
        if len(current) == len(self._agreed) and all(
                m == n and a is b for (m, a), (n, b) in zip(current, self._agreed)):
            return
        seen: dict[str, tuple[str, list[Any]]] = {}
        # Consumers that computed the same assignment over the same topics agree on every share:
        # compare one of them (with a hundred consumers this check was most of the run's time).
        checked: list[tuple[Any, list[str]]] = []
        for member, driver in sorted(self.drivers.items()):
            m = driver.machine
            if m.assignment is None:
                continue
            topics = list(m.config.topic_count)
            if any(topics == t and m.assignment == a for a, t in checked):
                continue
            checked.append((m.assignment, topics))
            for topic in m.config.topic_count:
                share = sorted((t, tps) for t, tps in ((t, [tp for tp in ps if tp.topic == topic])
                                                       for t, ps in m.assignment.items()) if tps)
                if topic in seen and seen[topic][1] != share:
                    self._fail("same_assignment", f"{member} and {seen[topic][0]} computed different assignments "
                                                  f"of {topic}: {share} vs {seen[topic][1]}")
                seen.setdefault(topic, (member, share))
        self._agreed = current

    def _fail(self, invariant: str, detail: str) -> None:
        raise Violation(invariant, detail, self.now, self.seed)


class _Admin:
    """The `to` of the topic writes' replies: nobody listens."""

    def deliver(self, action: Callable[[], None]) -> None:
        pass
