"""An in-memory harness: one pure Broker and N pure ConsumerCoordinators on a virtual clock, run by
the same drivers as the simulator and the asyncio shells (coordinator/driver.py, consumer/driver.py).

No sockets, no sleeps, no encoding: a member's `Send` becomes a `broker.handle(api, body, ...)` call
with the body dataclass itself, and the broker's `Reply` goes back to the member's `on_response`,
routed by the reply token `(member index, connection epoch, correlation id)`. Everything waiting
(messages, both sides' timers, reconnects, the application's polls) sits in one queue ordered by
time, then arrival; when nothing is due the clock jumps to the next.

Messages are delivered after `delay()` ms (0 by default). A member's `Reconnect` output (or a
`disconnect()`) closes its connection: messages still on the old one are lost, as they are on a
real socket, and the member reconnects after the drivers' back-off. An isolated member
(`isolate()`) keeps running but nothing reaches it or leaves it. An application "poll" is
simulated every `poll_every_ms` (None: never).

`check()` runs after every step; `Pair.violations` collects what it found (tests assert it is empty).
"""

from __future__ import annotations

import functools
import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import (
    ConsumerCoordinator,
    MemberState,
    PartitionsAssigned,
    PartitionsLost,
    PartitionsRevoked,
    Send,
)
from grouplab.consumer.delivery import AppOutput
from grouplab.consumer.driver import MemberDriver
from grouplab.consumer.membership import member_machine
from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.driver import CoordinatorDriver
from grouplab.coordinator.group import Group, GroupState
from grouplab.protocol.effects import LogEvent, Reply
from grouplab.protocol.kernel import TimerTable, UnhandledOutput
from grouplab.protocol.types import TopicPartition

GROUP = "g"


def broker_config(**overrides: Any) -> BrokerConfig:
    values: dict[str, Any] = dict(group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=0)
    values.update(overrides)
    return BrokerConfig(**values)


def consumer_config(index: int, **overrides: Any) -> ConsumerConfig:
    values: dict[str, Any] = dict(
        group_id=GROUP,
        topics=["t0", "t1"],
        client_id=f"c{index}",
        assignors=["range"],
        session_timeout_ms=6_000,
        heartbeat_interval_ms=1_000,
        max_poll_interval_ms=20_000,
        retry_backoff_ms=100,
        metadata_max_age_ms=5_000,
    )
    values.update(overrides)
    return ConsumerConfig(**values)


class _Due:
    """One entry of the queue: its action runs when due, unless cancelled first."""

    __slots__ = ("action", "cancelled")

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _PairMemberShell:
    """Member `i`'s end of the harness, as its MemberDriver's transport and listener."""

    def __init__(self, pair: "Pair", i: int) -> None:
        self.pair = pair
        self.i = i

    def send(self, epoch: int, request: Send) -> None:
        pair, i = self.pair, self.i
        if i not in pair.isolated:
            pair._schedule(pair.delay(), lambda: pair._to_broker(i, epoch, request))

    def disconnect(self) -> None:
        """Nothing to close: what is queued on the old connection is dropped when it comes due."""

    def connect(self, done: Callable[[bool], None]) -> None:
        done(True)  # the broker never goes down here

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.pair.listener_calls[self.i].append(PartitionsRevoked(partitions))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.pair.listener_calls[self.i].append(PartitionsAssigned(partitions))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.pair.listener_calls[self.i].append(PartitionsLost(partitions))

    def on_app_output(self, out: AppOutput) -> None:
        raise UnhandledOutput(f"tests/pair.py (member {self.i} has no application)", out)

    def on_step(self) -> None:
        """Pair.check() runs after every step of the harness instead."""


@dataclass
class Pair:
    configs: list[ConsumerConfig]
    partitions: dict[str, int]
    broker_cfg: BrokerConfig = field(default_factory=broker_config)
    delay: Callable[[], int] = lambda: 0
    poll_every_ms: int | None = 1_000
    now: int = 0

    def __post_init__(self) -> None:
        self.queue: list[tuple[int, int, _Due]] = []
        self._seq = itertools.count()
        self.isolated: set[int] = set()
        self.stalled: set[int] = set()  # members whose application stopped calling poll()
        self.listener_calls: list[list[Any]] = [[] for _ in self.configs]
        self.broker_events: list[LogEvent] = []
        self.persisted: list[Any] = []  # records of the broker's Persist outputs
        self.violations: list[str] = []
        self.max_generation = 0
        self.steps = 0
        broker = Broker(self.broker_cfg, SequentialMemberIds())
        broker.topics.partitions.update(self.partitions)
        self.coordinator = CoordinatorDriver(
            broker, self._clock, TimerTable(self._schedule, self._clock, lambda key: self.coordinator.on_timer(key)),
            self._reply, self.persisted.extend, self.broker_events.append)
        # Each config's group.protocol picks its machine (consumer/membership.py's member_machine);
        # the classic harness's views read ConsumerCoordinators.
        self.members: list[Any] = [member_machine(c) for c in self.configs]
        self.drivers: list[MemberDriver[Any]] = []
        for i, (config, machine) in enumerate(zip(self.configs, self.members)):
            shell = _PairMemberShell(self, i)
            driver = MemberDriver[Any](config.group_id, self._clock, self._schedule, shell, shell, None)
            driver.boot(machine, TimerTable(self._schedule, self._clock, driver.on_timer), connected=True)
            self.drivers.append(driver)
        self._polls: list[_Due | None] = [None] * len(self.members)

    # ------------------------------------------------------------------ inputs from a test

    @property
    def broker(self) -> Broker:
        return self.coordinator.broker

    @property
    def group(self) -> Group | None:
        return self.broker.groups.get(GROUP)

    def start(self, indexes: list[int] | None = None) -> None:
        for i in range(len(self.members)) if indexes is None else indexes:
            self.drivers[i].start()
            if self.poll_every_ms is not None:
                self._polls[i] = self._schedule(self.poll_every_ms, functools.partial(self._app_poll, i))
        self.check()

    def close(self, i: int) -> None:
        self.drivers[i].close()
        poll = self._polls[i]
        if poll is not None:
            poll.cancel()
        self.check()

    def disconnect(self, i: int) -> None:
        self.drivers[i].connection_lost()
        self.check()

    def isolate(self, i: int) -> None:
        self.isolated.add(i)

    # ------------------------------------------------------------------ the loop

    def _clock(self) -> int:
        return self.now

    def _schedule(self, delay_ms: int, action: Callable[[], None]) -> _Due:
        due = _Due(action)
        heapq.heappush(self.queue, (self.now + delay_ms, next(self._seq), due))
        return due

    def step(self, until: int) -> bool:
        """Run the next due message, timer, reconnect or poll, if it is due by `until`."""
        queue = self.queue
        while queue and queue[0][2].cancelled:
            heapq.heappop(queue)
        if not queue or queue[0][0] > until:
            return False
        at, _, due = heapq.heappop(queue)
        self.now = max(self.now, at)
        due.action()
        self.steps += 1
        self.check()
        return True

    def run_for(self, ms: int) -> None:
        until = self.now + ms
        while self.step(until):
            pass
        self.now = max(self.now, until)

    def run_until(self, predicate: Callable[["Pair"], bool], within_ms: int) -> bool:
        """Step until `predicate` holds (checked after every step); False if `within_ms` passes."""
        until = self.now + within_ms
        while not predicate(self):
            if not self.step(until):
                return predicate(self)
        return True

    # ------------------------------------------------------------------ routing

    def _to_broker(self, i: int, epoch: int, request: Send) -> None:
        if i in self.isolated or epoch != self.drivers[i].epoch:
            return
        ctx = RequestContext((i, epoch, request.correlation_id), self.configs[i].client_id)
        self.coordinator.handle(request.api, request.body, ctx)

    def _reply(self, out: Reply) -> None:
        i, epoch, cid = out.to
        self._schedule(self.delay(), lambda: self._to_member(i, epoch, cid, out.body))

    def _to_member(self, i: int, epoch: int, cid: int, body: Any) -> None:
        if i in self.isolated or epoch != self.drivers[i].epoch:
            return
        self.drivers[i].on_response(cid, body)

    def _app_poll(self, i: int) -> None:
        if i not in self.stalled:
            self.drivers[i].poll()
        if self.members[i].state is not MemberState.CLOSED and self.poll_every_ms is not None:
            self._polls[i] = self._schedule(self.poll_every_ms, functools.partial(self._app_poll, i))

    # ------------------------------------------------------------------ invariants and views

    def check(self) -> None:
        if len(self.violations) >= 50:
            return  # enough to see what went wrong
        stable = [m for m in self.members if m.state is MemberState.STABLE]
        for a, b in itertools.combinations(stable, 2):
            if a.generation_id == b.generation_id and set(a.owned) & set(b.owned):
                self.violations.append(
                    f"t={self.now}: {a.member_id} and {b.member_id} (generation {a.generation_id}) both own "
                    f"{sorted(set(a.owned) & set(b.owned))}"
                )
        group = self.group
        if group is not None:
            if group.generation_id < self.max_generation:
                self.violations.append(f"t={self.now}: generation went from {self.max_generation} to {group.generation_id}")
            self.max_generation = max(self.max_generation, group.generation_id)

    def all_partitions(self) -> set[TopicPartition]:
        topics = {t for c in self.configs for t in c.topics}
        return {TopicPartition(t, p) for t in topics for p in range(self.broker.topics.partitions.get(t, 0))}

    def live(self) -> list[int]:
        return [i for i, m in enumerate(self.members)
                if m.state is not MemberState.CLOSED and i not in self.isolated and i not in self.stalled]

    def settled(self, members: list[int] | None = None) -> bool:
        """The broker's group is Stable with no member id pending, exactly the given (default: live)
        members are in it, all STABLE in its generation, and every partition is owned by exactly
        one of them."""
        group = self.group
        idx = self.live() if members is None else members
        if group is None or group.state is not GroupState.STABLE:
            return False
        if group.pending_members:
            return False  # a member id handed out may still join (its JoinGroup can be in flight)
        ms = [self.members[i] for i in idx]
        if any(m.state is not MemberState.STABLE or m.generation_id != group.generation_id for m in ms):
            return False
        if {m.member_id for m in ms} != set(group.members):
            return False
        owned = [tp for m in ms for tp in m.owned]
        return len(owned) == len(set(owned)) and set(owned) == self.all_partitions()

    def assignments(self) -> dict[str, list[TopicPartition]]:
        return {m.member_id: sorted(m.owned) for m in self.members if m.state is MemberState.STABLE}
