"""What the pure state machines (coordinator and consumer side) ask their shell to do. The shell
(asyncio server or client, or the simulator) carries these out; the machines never touch sockets or
clocks themselves. Outputs that only one side uses live beside that side's machine; `Output` is
the closed union of the coordinator side's."""

from __future__ import annotations

from dataclasses import dataclass, field
import time
from typing import TYPE_CHECKING, Any, Callable, Hashable

if TYPE_CHECKING:
    from coordinator.group_log import Record

TimerKey = tuple[Hashable, ...]


@dataclass(slots=True)
class Reply:
    """Send `body` as the response to the request identified by the shell's opaque `to` token."""

    to: Any
    body: Any


@dataclass(slots=True)
class ArmTimer:
    """Fire `key` at `deadline_ms` (replacing an armed timer with the same key)."""

    key: TimerKey
    deadline_ms: int


@dataclass(slots=True)
class CancelTimer:
    key: TimerKey


@dataclass(slots=True)
class LogEvent:
    """One event-log line (DESIGN.md §5); the shell adds `node`."""

    event: str
    ts_ms: int
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Persist:
    """Output of the coordinator's pure machines: make `record` durable (the shell appends it to
    its GroupLog, if it has one, before carrying out the outputs that follow it). It lives here,
    not beside GroupLog, so that `Output` can name it without protocol/ importing coordinator/."""

    record: Record


Output = Reply | ArmTimer | CancelTimer | LogEvent | Persist


class StepOutputs:
    """The bookkeeping every pure machine shares: an input begins a step at `now_ms`, the step
    appends outputs, and ending it hands them over. `log_events = False` turns the LogEvents off
    (they are reports, never decisions) for a shell with no event log."""

    _out: list[Any]
    _now: int
    log_events: bool = True

    def _begin(self, now_ms: int) -> None:
        self._now = now_ms
        self._out = []

    def _end(self) -> list[Any]:
        out, self._out = self._out, []
        return out

    def _reply(self, to: Any, body: Any) -> None:
        self._out.append(Reply(to, body))

    def _emit_log(self, event: str, base: dict[str, Any], fields: dict[str, Any]) -> None:
        if self.log_events:
            base.update(fields)
            self._out.append(LogEvent(event, self._now, base))


def wall_clock_ms() -> int:
    """The real shells' clock (epoch milliseconds, so log lines of different nodes line up).
    State machines never call it: they get `now_ms` as an argument."""
    return time.time_ns() // 1_000_000


class TimerTable:
    """The shells' side of ArmTimer/CancelTimer: at most one pending timer per key; arming a key
    again replaces it. `schedule(delay_s, callback)` is the shell's scheduler (loop.call_later in
    the asyncio shells) and must return a handle with cancel(); `fire(key)` runs when one is due."""

    def __init__(self, schedule: Callable[[float, Callable[[], None]], Any], clock: Callable[[], int],
                 fire: Callable[[TimerKey], None]) -> None:
        self._schedule = schedule
        self._clock = clock
        self._fire = fire
        self._handles: dict[TimerKey, Any] = {}

    def apply(self, out: "ArmTimer | CancelTimer") -> None:
        self.cancel(out.key)
        if type(out) is ArmTimer:
            delay_s = max(0.0, (out.deadline_ms - self._clock()) / 1000.0)
            self._handles[out.key] = self._schedule(delay_s, lambda key=out.key: self._due(key))

    def cancel(self, key: TimerKey) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def _due(self, key: TimerKey) -> None:
        self._handles.pop(key, None)
        self._fire(key)
