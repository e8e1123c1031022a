"""What the pure state machines (coordinator and consumer side) ask their shell to do. The shell
(asyncio server or client, or the simulator) carries these out; the machines never touch sockets or
clocks themselves. Outputs that only one side uses live beside that side's machine; `Output` is
the closed union of the coordinator side's (the member side's is consumer/coordinator.py's
MemberOutput). protocol/kernel.py holds what the drivers that carry them out share."""

from __future__ import annotations

from dataclasses import dataclass
import time
from typing import Any, Generic, Hashable, TypeVar

from grouplab.protocol.events import Event, FreeFormEvent

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
    """One event-log line (docs/events.md): a typed event from protocol/events.py at `ts_ms`; the
    shell adds `node`. `event` and `fields` are the line as written, for readers of names and dicts."""

    ts_ms: int
    payload: Event | FreeFormEvent

    @property
    def event(self) -> str:
        return self.payload.NAME

    @property
    def fields(self) -> dict[str, Any]:
        return self.payload.log_fields()


R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Persist(Generic[R]):
    """Output of the coordinator's pure machines: make `record` durable (the shell appends it to
    its GroupLog, if it has one, before carrying out the outputs that follow it). It lives here,
    not beside GroupLog, so that `Output` can name it without protocol/ importing coordinator/: the
    record's type is the shell's business (coordinator/group_log.py's Record)."""

    record: R


Output = Reply | ArmTimer | CancelTimer | LogEvent | Persist[Any]


class StepOutputs:
    """The bookkeeping every pure machine shares: an input begins a step at `now_ms`, the step
    appends outputs, and ending it hands them over. `log_events = False` turns the LogEvents off
    (they are reports, never decisions) for a shell with no event log: each machine's `_log`
    checks it before building the event."""

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

    def _emit_log(self, event: Event) -> None:
        self._out.append(LogEvent(self._now, event))


def wall_clock_ms() -> int:
    """The real shells' clock (epoch milliseconds, so log lines of different nodes line up).
    State machines never call it: they get `now_ms` as an argument."""
    return time.time_ns() // 1_000_000

