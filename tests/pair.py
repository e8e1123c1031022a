"""An in-memory harness: one pure Broker and N pure ConsumerCoordinators on a virtual clock.

No sockets, no sleeps, no encoding: a member's `Send` becomes a `broker.handle(api, body, ...)` call
with the body dataclass itself, and the broker's `Reply` goes back to the member's `on_response`,
routed by the reply token `(member index, connection epoch, correlation id)`. Timers of both sides
sit in dicts; when no message is due the clock jumps to the earliest deadline.

Messages are delivered after `delay()` ms (0 by default). A member's `Reconnect` output (or a
`disconnect()`) opens a new connection: messages still queued on the old one are lost, as they are
on a real socket. An isolated member (`isolate()`) keeps running but nothing reaches it or leaves it.
An application "poll" is simulated with a harness timer every `poll_every_ms` (None: never).

`check()` runs after every step; `Pair.violations` collects what it found (tests assert it is empty).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

from consumer.config import ConsumerConfig
from consumer.coordinator import (
    ConsumerCoordinator,
    MemberState,
    PartitionsAssigned,
    PartitionsLost,
    PartitionsRevoked,
    Reconnect,
    Send,
)
from coordinator.broker import Broker, RequestContext
from coordinator.config import BrokerConfig
from coordinator.group import Group, GroupState
from coordinator.group_log import Persist
from protocol.effects import ArmTimer, CancelTimer, LogEvent, Reply
from protocol.types import TopicPartition

GROUP = "g"
APP_POLL = ("app-poll",)  # the harness's own per-member timer: the application calls poll()


class MemberIds:
    """Deterministic member ids: `client.id-N`, N counting across the broker."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, client_id: str) -> str:
        self.n += 1
        return f"{client_id}-{self.n}"


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


@dataclass
class ToBroker:
    member: int
    epoch: int
    correlation_id: int
    api: str
    body: Any


@dataclass
class ToMember:
    member: int
    epoch: int
    correlation_id: int
    body: Any


@dataclass
class Pair:
    configs: list[ConsumerConfig]
    partitions: dict[str, int]
    broker_cfg: BrokerConfig = field(default_factory=broker_config)
    delay: Callable[[], int] = lambda: 0
    poll_every_ms: int | None = 1_000
    now: int = 0

    def __post_init__(self) -> None:
        self.broker = Broker(self.broker_cfg, MemberIds())
        self.broker.topics.partitions.update(self.partitions)
        self.members = [ConsumerCoordinator(c) for c in self.configs]
        self.epoch = [0] * len(self.members)
        self.isolated: set[int] = set()
        self.stalled: set[int] = set()  # members whose application stopped calling poll()
        self.queue: list[tuple[int, int, Any]] = []
        self._seq = itertools.count()
        self.broker_timers: dict[tuple, int] = {}
        self.member_timers: list[dict[tuple, int]] = [{} for _ in self.members]
        self.listener_calls: list[list[Any]] = [[] for _ in self.members]
        self.broker_events: list[LogEvent] = []
        self.persisted: list[Any] = []  # records of the broker's Persist outputs
        self.violations: list[str] = []
        self.max_generation = 0
        self.steps = 0

    # ------------------------------------------------------------------ inputs from a test

    @property
    def group(self) -> Group | None:
        return self.broker.groups.get(GROUP)

    def start(self, indexes: list[int] | None = None) -> None:
        for i in range(len(self.members)) if indexes is None else indexes:
            self._member_outputs(i, self.members[i].start(self.now))
            if self.poll_every_ms is not None:
                self.member_timers[i][APP_POLL] = self.now + self.poll_every_ms
        self.check()

    def close(self, i: int) -> None:
        self._member_outputs(i, self.members[i].close(self.now))
        self.member_timers[i].pop(APP_POLL, None)
        self.check()

    def disconnect(self, i: int) -> None:
        self.epoch[i] += 1
        self._member_outputs(i, self.members[i].on_disconnect(self.now))
        self.check()

    def isolate(self, i: int) -> None:
        self.isolated.add(i)

    # ------------------------------------------------------------------ the loop

    def _next_timer(self) -> tuple[int, str, Any] | None:
        best: tuple[int, str, Any] | None = None
        for key, at in self.broker_timers.items():
            if best is None or at < best[0]:
                best = (at, "broker", key)
        for i, timers in enumerate(self.member_timers):
            for key, at in timers.items():
                if best is None or at < best[0]:
                    best = (at, "member", (i, key))
        return best

    def step(self, until: int) -> bool:
        """Deliver the next due message or fire the next timer, if it is due by `until`."""
        timer = self._next_timer()
        msg_at = self.queue[0][0] if self.queue else None
        if msg_at is not None and (timer is None or msg_at <= timer[0]):
            if msg_at > until:
                return False
            at, _, msg = heapq.heappop(self.queue)
            self.now = max(self.now, at)
            self._deliver(msg)
        elif timer is not None:
            at, side, key = timer
            if at > until:
                return False
            self.now = max(self.now, at)
            if side == "broker":
                del self.broker_timers[key]
                self._broker_outputs(self.broker.on_timer(key, self.now))
            else:
                i, mkey = key
                del self.member_timers[i][mkey]
                if mkey == APP_POLL:
                    if i not in self.stalled:
                        self._member_outputs(i, self.members[i].poll(self.now))
                    if self.members[i].state is not MemberState.CLOSED:
                        self.member_timers[i][APP_POLL] = self.now + self.poll_every_ms
                else:
                    self._member_outputs(i, self.members[i].on_timer(mkey, self.now))
        else:
            return False
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

    def _deliver(self, msg: Any) -> None:
        if isinstance(msg, ToBroker):
            if msg.member in self.isolated or msg.epoch != self.epoch[msg.member]:
                return
            ctx = RequestContext((msg.member, msg.epoch, msg.correlation_id), self.configs[msg.member].client_id)
            self._broker_outputs(self.broker.handle(msg.api, msg.body, ctx, self.now))
        else:
            if msg.member in self.isolated or msg.epoch != self.epoch[msg.member]:
                return
            self._member_outputs(msg.member, self.members[msg.member].on_response(msg.correlation_id, msg.body, self.now))

    def _enqueue(self, msg: Any) -> None:
        heapq.heappush(self.queue, (self.now + self.delay(), next(self._seq), msg))

    def _member_outputs(self, i: int, outputs: list[Any]) -> None:
        for out in outputs:
            if isinstance(out, Send):
                if i not in self.isolated:
                    self._enqueue(ToBroker(i, self.epoch[i], out.correlation_id, out.api, out.body))
            elif isinstance(out, ArmTimer):
                self.member_timers[i][out.key] = out.deadline_ms
            elif isinstance(out, CancelTimer):
                self.member_timers[i].pop(out.key, None)
            elif isinstance(out, Reconnect):
                self.epoch[i] += 1
            elif isinstance(out, (PartitionsAssigned, PartitionsRevoked, PartitionsLost)):
                self.listener_calls[i].append(out)
            elif not isinstance(out, LogEvent):
                raise AssertionError(f"member {i}: unexpected output {out!r}")

    def _broker_outputs(self, outputs: list[Any]) -> None:
        for out in outputs:
            if isinstance(out, Reply):
                if out.to is None:
                    continue
                member, epoch, cid = out.to
                self._enqueue(ToMember(member, epoch, cid, out.body))
            elif isinstance(out, ArmTimer):
                self.broker_timers[out.key] = out.deadline_ms
            elif isinstance(out, CancelTimer):
                self.broker_timers.pop(out.key, None)
            elif isinstance(out, LogEvent):
                self.broker_events.append(out)
            elif isinstance(out, Persist):
                self.persisted.append(out.record)
            else:
                raise AssertionError(f"broker: unexpected output {out!r}")

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
