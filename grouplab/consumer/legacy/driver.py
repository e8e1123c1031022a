"""The legacy consumer's driver: one LegacyConsumer, its timers and its registry session.

The asyncio shell (grouplab/zk/), the simulator (grouplab/zk/sim.py) and the tests run the same
driver and differ in what they inject: the clock, a scheduler, the registry back end (a real
ZooKeeper through kazoo, or the embedded registry on the event loop or on virtual time), the
listener that hears of fetchers, and the event log. Every registry operation is counted here, by
kind, which is what shows the herd effect.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Protocol

from grouplab.consumer.legacy.connector import (
    CloseSession,
    LegacyConsumer,
    LegacyOutput,
    RegistryCall,
    StartFetchers,
    StopFetchers,
)
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, TimerKey
from grouplab.protocol.kernel import Clock, EventSink, Timers, UnhandledOutput, no_event_log
from grouplab.protocol.registry import RegistryBackend, Result, SessionEvent, WatchEvent, is_write
from grouplab.protocol.types import TopicPartition


class FetcherListener(Protocol):
    """Whoever watches the consumer's fetchers (a display, the simulator's invariants)."""

    def on_fetchers_started(self, consumer_id: str, offsets: dict[TopicPartition, int],
                            threads: dict[TopicPartition, str]) -> None: ...

    def on_fetchers_stopped(self, consumer_id: str, partitions: list[TopicPartition]) -> None: ...


class NoFetcherListener:
    def on_fetchers_started(self, consumer_id: str, offsets: dict[TopicPartition, int],
                            threads: dict[TopicPartition, str]) -> None:
        pass

    def on_fetchers_stopped(self, consumer_id: str, partitions: list[TopicPartition]) -> None:
        pass


class LegacyDriver:
    """Feeds the machine its inputs at `clock()` and carries out every output (exhaustively:
    anything outside LegacyOutput raises UnhandledOutput). `stop()` ends the process without a
    word to the registry (a crash); `close()` is the clean shutdown."""

    def __init__(self, machine: LegacyConsumer, backend: RegistryBackend, clock: Clock,
                 timers_for: Callable[[Callable[[TimerKey], None]], Timers],
                 listener: FetcherListener | None = None, events: EventSink | None = None) -> None:
        self.machine = machine
        self.backend = backend
        self.clock = clock
        self.listener = listener if listener is not None else NoFetcherListener()
        self.events = events if events is not None else no_event_log
        self.timers = timers_for(self._on_timer)
        self.ops: Counter[str] = Counter()  # registry operations by op name
        self.offset_ops = 0  # of them, reads and writes of committed offsets (offsets/...)
        self._offsets_prefix = machine.layout.offsets + "/"
        self.running = False
        self._handlers: dict[type, Callable[[Any], None]] = {
            RegistryCall: self._call,
            StartFetchers: lambda o: self.listener.on_fetchers_started(machine.config.consumer_id, o.offsets, o.threads),
            StopFetchers: lambda o: self.listener.on_fetchers_stopped(machine.config.consumer_id, o.partitions),
            CloseSession: lambda o: self._close_session(),
            ArmTimer: self.timers.apply,
            CancelTimer: self.timers.apply,
            LogEvent: self.events,
        }

    @property
    def consumer_id(self) -> str:
        return self.machine.config.consumer_id

    @property
    def reads(self) -> int:
        return sum(n for op, n in self.ops.items() if op in ("GetData", "GetChildren", "Exists"))

    @property
    def writes(self) -> int:
        return sum(n for op, n in self.ops.items() if op in ("Create", "SetData", "Delete"))

    def start(self) -> None:
        self.running = True
        self.backend.start(self.machine.config.session_timeout_ms, self._on_registry)

    def close(self) -> None:
        if self.running:
            self.apply(self.machine.close(self.clock()))

    def stop(self) -> None:
        """The process is gone: no more inputs, no more timers; the session is left to expire."""
        self.running = False
        self.timers.cancel_all()

    # ------------------------------------------------------------------ inputs

    def _on_registry(self, event: WatchEvent | SessionEvent) -> None:
        if not self.running:
            return
        if isinstance(event, SessionEvent):
            self.apply(self.machine.on_session(event, self.clock()))
        else:
            self.apply(self.machine.on_watch(event, self.clock()))

    def _on_result(self, op_id: int, result: Result) -> None:
        if self.running:
            self.apply(self.machine.on_result(op_id, result, self.clock()))

    def _on_timer(self, key: TimerKey) -> None:
        if self.running:
            self.apply(self.machine.on_timer(key, self.clock()))

    # ------------------------------------------------------------------ outputs

    def apply(self, outputs: list[LegacyOutput]) -> None:
        for out in outputs:
            try:
                handler = self._handlers[type(out)]
            except KeyError:
                raise UnhandledOutput("the legacy consumer driver", out) from None
            handler(out)

    def _call(self, out: RegistryCall) -> None:
        self.ops[type(out.op).__name__] += 1
        if out.op.path.startswith(self._offsets_prefix):
            self.offset_ops += 1
        assert is_write(out.op) == (type(out.op).__name__ in ("Create", "SetData", "Delete"))
        op_id = out.op_id
        self.backend.call(out.op, lambda result: self._on_result(op_id, result))

    def _close_session(self) -> None:
        self.running = False
        self.timers.cancel_all()
        self.backend.close()
