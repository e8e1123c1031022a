"""What every driver of the pure machines shares, whichever side it runs and whatever world it runs
in (asyncio sockets, the simulator's heap, the tests' virtual clock): the interfaces a driver is
given instead of a clock, an event loop and an event log, the timer table built on them, and the
loud failure when a machine asks for something its driver cannot do.

The drivers themselves are coordinator/driver.py (a Broker) and consumer/driver.py (a member).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Protocol

from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, TimerKey

if TYPE_CHECKING:
    import asyncio  # (only the asyncio shells need it; the simulator does not import it)

Clock = Callable[[], int]
"""The current time in milliseconds: the wall clock in the asyncio shells, virtual elsewhere."""

EventSink = Callable[[LogEvent], None]
"""Where one node's event-log lines go (an EventLog's `emit`)."""


def no_event_log(ev: LogEvent) -> None:
    """The EventSink of a node that keeps no event log."""


class Cancellable(Protocol):
    def cancel(self) -> None: ...


Schedule = Callable[[int, Callable[[], None]], object]
"""`schedule(delay_ms, action)`: run `action` once, `delay_ms` from now."""

CancellableSchedule = Callable[[int, Callable[[], None]], Cancellable]
"""A Schedule whose returned handle cancels the action (what a TimerTable needs)."""


class Timers(Protocol):
    """A machine's timers as its driver keeps them: the machine's ArmTimer/CancelTimer outputs go to
    `apply`; when one is due, the world around the driver hands its key back to the machine."""

    def apply(self, out: ArmTimer | CancelTimer) -> None: ...

    def cancel_all(self) -> None: ...


class UnhandledOutput(TypeError):
    """A driver met an output it has no way to carry out: the machine and its driver disagree on
    the closed union of outputs. Dropping it would hide a lost reply, timer or record."""

    def __init__(self, driver: str, out: object) -> None:
        super().__init__(f"{driver} cannot carry out {type(out).__name__} (not in its closed union of outputs): {out!r}")
        self.output = out


class TimerTable:
    """Timers on a `CancellableSchedule` (loop.call_later in the asyncio shells, the tests' virtual clock): at
    most one pending timer per key; arming a key again replaces it. `fire(key)` runs when one is
    due."""

    def __init__(self, schedule: CancellableSchedule, clock: Clock, fire: Callable[[TimerKey], None]) -> None:
        self._schedule = schedule
        self._clock = clock
        self._fire = fire
        self._handles: dict[TimerKey, Cancellable] = {}

    def apply(self, out: ArmTimer | CancelTimer) -> None:
        self.cancel(out.key)
        if type(out) is ArmTimer:
            delay_ms = max(0, out.deadline_ms - self._clock())
            self._handles[out.key] = self._schedule(delay_ms, functools.partial(self._due, out.key))

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


class ExtendingTimerTable(TimerTable):
    """A TimerTable for timers mostly armed again later than they were (a member's session, pushed
    on at each heartbeat): arming a key again with a deadline no earlier than its pending one only
    notes the new deadline, and when the pending action runs it waits on for the rest instead of
    firing. The key fires at the same deadline as in a TimerTable, without a cancel and a new
    entry on the schedule per heartbeat (the coordinator's shell: about a tenth of a heartbeat's
    CPU, and a loop heap full of cancelled handles). An earlier deadline, or a cancel, is carried
    out at once as in a TimerTable."""

    def __init__(self, schedule: CancellableSchedule, clock: Clock, fire: Callable[[TimerKey], None]) -> None:
        super().__init__(schedule, clock, fire)
        self._deadlines: dict[TimerKey, int] = {}  # key -> the deadline it fires at (pending keys only)

    def apply(self, out: ArmTimer | CancelTimer) -> None:
        key = out.key
        if type(out) is ArmTimer:
            pending = self._deadlines.get(key)
            if pending is not None and out.deadline_ms >= pending:
                self._deadlines[key] = out.deadline_ms
                return
            self.cancel(key)
            self._deadlines[key] = out.deadline_ms
            self._arm(key, out.deadline_ms)
        else:
            self.cancel(key)

    def cancel(self, key: TimerKey) -> None:
        self._deadlines.pop(key, None)
        super().cancel(key)

    def cancel_all(self) -> None:
        self._deadlines.clear()
        super().cancel_all()

    def _arm(self, key: TimerKey, deadline_ms: int) -> None:
        delay_ms = max(0, deadline_ms - self._clock())
        self._handles[key] = self._schedule(delay_ms, functools.partial(self._due_at, key, deadline_ms))

    def _due_at(self, key: TimerKey, scheduled_ms: int) -> None:
        deadline = self._deadlines.get(key)
        if deadline is not None and deadline > scheduled_ms:  # pushed on since: wait for the rest
            self._arm(key, deadline)
            return
        self._deadlines.pop(key, None)
        self._due(key)


def loop_schedule(loop: asyncio.AbstractEventLoop) -> CancellableSchedule:
    """An asyncio event loop as a `Schedule` (its call_later counts seconds)."""
    return lambda delay_ms, action: loop.call_later(delay_ms / 1000, action)
