"""Member-level faults on real sockets, done to the asyncio shells (never to the state machines).

    await crash(app)              # the process dies: socket aborted, no LeaveGroup
    stall = hang(app)             # the process freezes: socket open, nothing read, no timer runs,
    ...                           #   no poll; the coordinator sees heartbeats stop
    stall.resume()                # it wakes up: overdue timers fire, buffered responses are read
    stall = slow_processing(app)  # the app stops calling poll() (a long batch); the client's timers
    ...                           #   and heartbeats go on, so max.poll.interval.ms runs out
    stall.resume()                # it polls again (and rejoins, after a poll timeout)

`member` is a SimulatedConsumerApp or a bare GroupMemberClient (which only polls when its owner
calls poll(), so `slow_processing` of a bare client only records the fact).

`hang` reaches into two shell internals, on purpose and only here: the client's TimerTable
callback (timers that come due while hung are kept and fired on resume, as a frozen process runs
its overdue timers when it wakes) and the app's poll task. A hung member assumes its connection
stays up; if the peer closes it meanwhile, the client still notices at once.
"""

from __future__ import annotations

import asyncio
from typing import Any, Union

from grouplab.consumer.app import SimulatedConsumerApp
from grouplab.consumer.client import GroupMemberClient

Member = Union[SimulatedConsumerApp, GroupMemberClient]


def _client(member: Member) -> GroupMemberClient:
    return member.client if isinstance(member, SimulatedConsumerApp) else member


def _app(member: Member) -> SimulatedConsumerApp | None:
    return member if isinstance(member, SimulatedConsumerApp) else None


async def crash(member: Member) -> None:
    """Kill the member: its socket is aborted, no LeaveGroup is sent, its timers die with it. The
    coordinator only learns of it when the session timeout expires."""
    if isinstance(member, SimulatedConsumerApp):
        await member.stop(leave=False)
    else:
        await member.close(leave=False)


def _stop_polling(app: SimulatedConsumerApp | None) -> bool:
    task = app._task if app is not None else None
    if task is None or task.done():
        return False
    task.cancel()
    app._task = None  # type: ignore[union-attr]
    return True


def _start_polling(app: SimulatedConsumerApp | None) -> None:
    if app is not None and app._task is None:
        app._task = asyncio.ensure_future(app._run())


class Stall:
    """A member that stopped (hang or slow processing) until `resume()`; also a context manager."""

    def __init__(self, member: Member, kind: str) -> None:
        self.member = member
        self.kind = kind
        self.client = _client(member)
        self.app = _app(member)
        self.active = False
        self.deferred_timers: list[tuple] = []
        self._polling = False
        self._fire: Any = None
        self._transport: asyncio.Transport | None = None

    def _start(self) -> "Stall":
        self.active = True
        self._polling = _stop_polling(self.app)
        if self.kind == "hang":
            client = self.client
            table = client._timers
            if table is not None:
                self._fire = table._fire
                table._fire = self.deferred_timers.append  # due timers wait for resume()
            wire = client._wire
            if wire is not None and wire.transport is not None and not wire.transport.is_closing():
                self._transport = wire.transport
                self._transport.pause_reading()  # responses wait in the socket buffer
        return self

    def resume(self) -> None:
        if not self.active:
            return
        self.active = False
        if self.kind == "hang":
            table = self.client._timers
            if table is not None and self._fire is not None:
                table._fire = self._fire
            if self._transport is not None and not self._transport.is_closing():
                self._transport.resume_reading()
            deferred, self.deferred_timers = self.deferred_timers, []
            if not self.client._closing:
                for key in deferred:
                    self._fire(key)
        if self._polling and not self.client._closing:
            _start_polling(self.app)

    def __enter__(self) -> "Stall":
        return self

    def __exit__(self, *exc: object) -> None:
        self.resume()


def hang(member: Member) -> Stall:
    """Freeze the member's process: no timer runs (so no heartbeat, no poll-timeout leave), no
    response is read, the app does not poll; the TCP connection stays open. `resume()` wakes it."""
    return Stall(member, "hang")._start()


def slow_processing(member: Member) -> Stall:
    """The application stops calling poll() (processing takes longer than max.poll.interval.ms);
    heartbeats go on, so the consumer's own poll timer makes it leave the group, as Kafka's does.
    `resume()` makes it poll again, which rejoins."""
    return Stall(member, "slow")._start()
