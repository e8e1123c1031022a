"""What the pure state machines (coordinator and consumer side) ask their shell to do. The shell
(asyncio server or client, or the simulator) carries these out; the machines never touch sockets or
clocks themselves. Outputs that only one side uses live beside that side's machine."""

from __future__ import annotations

from dataclasses import dataclass, field
import time
from typing import Any, Hashable

TimerKey = tuple[Hashable, ...]


@dataclass(frozen=True)
class Reply:
    """Send `body` as the response to the request identified by the shell's opaque `to` token."""

    to: Any
    body: Any


@dataclass(frozen=True)
class ArmTimer:
    """Fire `key` at `deadline_ms` (replacing an armed timer with the same key)."""

    key: TimerKey
    deadline_ms: int


@dataclass(frozen=True)
class CancelTimer:
    key: TimerKey


@dataclass(frozen=True)
class LogEvent:
    """One event-log line (DESIGN.md §5); the shell adds `node`."""

    event: str
    ts_ms: int
    fields: dict[str, Any] = field(default_factory=dict)


Output = Reply | ArmTimer | CancelTimer | LogEvent


def wall_clock_ms() -> int:
    """The real shells' clock (epoch milliseconds, so log lines of different nodes line up).
    State machines never call it: they get `now_ms` as an argument."""
    return time.time_ns() // 1_000_000
