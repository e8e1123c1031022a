"""What the pure state machines (coordinator and consumer side) ask their shell to do. The shell
(asyncio server or client, or the simulator) carries these out; the machines never touch sockets or
clocks themselves. Outputs that only one side uses live beside that side's machine; `Output` is
the closed union of the coordinator side's (the member side's is consumer/coordinator.py's
MemberOutput). protocol/kernel.py holds what the drivers that carry them out share."""

from __future__ import annotations

from dataclasses import dataclass, field
import time
from typing import TYPE_CHECKING, Any, Hashable

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

