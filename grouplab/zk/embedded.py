"""The embedded registry as a server: coordinator/registry.py's pure machine on a scheduler (the
event loop, or the simulator's heap), and its clients, each a `RegistryBackend` for one legacy
consumer.

Every client has one ordered channel from the registry: answers and watch events arrive in the
order the registry produced them (ZooKeeper's guarantee), each after the channel's delay (0 on the
event loop). A client pings every third of its session timeout, as ZooKeeper's clients do. Faults
act here, at the edge: a frozen client (a process paused) sends nothing, pings included, and hears
nothing until it thaws; a client cut off from the registry (a network partition) runs on, but its
requests wait, it sends no pings and hears nothing until the link is back; watch events to a
client can be delayed; its deletes of owner nodes can be held back (a consumer slow to release).
"""

from __future__ import annotations

import functools
from collections import deque
from typing import Any, Callable

from grouplab.coordinator.registry import Notify, Registry, RegistryOutput, SessionExpiredNotice
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Reply, TimerKey
from grouplab.protocol.kernel import CancellableSchedule, Clock, EventSink, TimerTable, UnhandledOutput, no_event_log
from grouplab.protocol.registry import (
    Delete,
    RegistryCallback,
    RegistryError,
    RegistryListener,
    RegistryOp,
    Result,
    SessionEvent,
    SessionState,
    WatchEvent,
)


class RegistryServer:
    """One embedded registry and its clients."""

    def __init__(self, clock: Clock, schedule: CancellableSchedule, events: EventSink | None = None,
                 tick_time_ms: int = 2000) -> None:
        self.clock = clock
        self.schedule = schedule
        self.registry = Registry(tick_time_ms)
        self.registry.log_events = events is not None
        self.events = events if events is not None else no_event_log
        self.timers = TimerTable(schedule, clock, self._on_timer)
        self.clients: dict[int, EmbeddedClient] = {}  # by session id

    def client(self, name: str = "") -> "EmbeddedClient":
        return EmbeddedClient(self, name)

    def _on_timer(self, key: TimerKey) -> None:
        self.apply(self.registry.on_timer(key, self.clock()))

    def apply(self, outputs: list[RegistryOutput]) -> None:
        for out in outputs:
            if type(out) is Reply:
                client, done = out.to
                client.deliver(functools.partial(done, out.body))
            elif type(out) is Notify:
                client = self.clients.get(out.session)
                if client is not None:
                    client.deliver_watch(out.event)
            elif type(out) is SessionExpiredNotice:
                client = self.clients.pop(out.session, None)
                if client is not None:
                    client.deliver(functools.partial(client.session_expired, out.session))
            elif type(out) in (ArmTimer, CancelTimer):
                self.timers.apply(out)  # type: ignore[arg-type]
            elif type(out) is LogEvent:
                self.events(out)
            else:
                raise UnhandledOutput("the embedded registry server", out)


class EmbeddedClient:
    """A RegistryBackend on an embedded RegistryServer."""

    def __init__(self, server: RegistryServer, name: str) -> None:
        self.server = server
        self.name = name
        self.session_id = 0
        self.timeout_ms = 0
        self.listener: RegistryListener | None = None
        self.delay_ms = 0  # the channel's delay (the simulator draws it)
        self.watch_delay_ms = 0  # fault: watch events arrive this much later
        self.release_delay_ms = 0  # fault: deletes are sent this much later
        self.frozen = False
        self.cut = False  # fault: the link to the registry is down (the process runs on)
        self.closed = False
        self._unsent: deque[Callable[[], None]] = deque()  # requests made while cut off
        self._held: deque[Callable[[], None]] = deque()  # what arrived while frozen
        self._last_delivery = 0
        self._ping_gen = 0

    # ------------------------------------------------------------------ RegistryBackend

    def start(self, session_timeout_ms: int, listener: RegistryListener) -> None:
        self.listener = listener
        self.timeout_ms = session_timeout_ms
        self._open()

    def call(self, op: RegistryOp, done: RegistryCallback) -> None:
        if self.closed:
            return
        if self.session_id == 0:
            self.deliver(lambda: done(Result(RegistryError.CONNECTION_LOSS)))
            return
        session = self.session_id
        server = self.server

        def send() -> None:
            if self.closed:
                return
            server.apply(server.registry.call((self, done), session, op, server.clock()))

        delay = self.release_delay_ms if isinstance(op, Delete) and "/owners/" in op.path else 0
        if self.cut:  # sent once the link is back (Kafka 0.8's ZkClient retries until connected)
            self._unsent.append(send)
        elif delay:
            self.server.schedule(delay, send)
        else:
            send()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._ping_gen += 1
        server = self.server
        server.clients.pop(self.session_id, None)
        server.apply(server.registry.close_session(self.session_id, server.clock()))

    # ------------------------------------------------------------------ faults and crashes

    def crash(self) -> None:
        """The process died: nothing more is sent (no pings: the session will expire) or heard."""
        self.closed = True
        self._ping_gen += 1
        self._held.clear()

    def freeze(self) -> None:
        self.frozen = True

    def thaw(self) -> None:
        """Resume: what arrived meanwhile is heard now, in order, and pinging resumes (a session
        that expired meanwhile answers SessionExpired)."""
        self.frozen = False
        self._release()

    def cut_off(self) -> None:
        """The link to the registry is down, the process is not: its timers run, its requests wait
        and it hears nothing; no pings, so past the timeout the session expires."""
        self.cut = True

    def heal(self) -> None:
        """The link is back: what arrived is heard, what waited is sent, pinging resumes (and finds
        out whether the session expired meanwhile)."""
        self.cut = False
        if not self.frozen:
            while self._unsent and not self.closed:
                self._unsent.popleft()()
        self._release()

    def _release(self) -> None:
        while self._held and not self.frozen and not self.cut and not self.closed:
            self._held.popleft()()
        if not self.closed and not self.frozen and not self.cut:
            self._ping()

    # ------------------------------------------------------------------ the channel

    def deliver(self, action: Callable[[], None], extra_ms: int = 0) -> None:
        now = self.server.clock()
        at = max(self._last_delivery, now + self.delay_ms + extra_ms)
        self._last_delivery = at
        self.server.schedule(at - now, lambda: self._receive(action))

    def _receive(self, action: Callable[[], None]) -> None:
        """A message from the registry: heard now, or once the process resumes and the link is back."""
        if self.cut and not self.closed:
            self._held.append(action)
        else:
            self.arrive(action)

    def deliver_watch(self, event: WatchEvent) -> None:
        listener = self.listener
        if listener is not None:
            self.deliver(lambda: listener(event), self.watch_delay_ms)

    def arrive(self, action: Callable[[], None]) -> None:
        """Run `action` now, or when the process resumes if it is paused; never once it is gone."""
        if self.closed:
            return
        if self.frozen:
            self._held.append(action)
        else:
            action()

    def session_expired(self, session: int) -> None:
        """Heard that the session expired: tell the consumer, and open a new session."""
        if session != self.session_id or self.closed:
            return
        self.session_id = 0
        self._ping_gen += 1
        if self.listener is not None:
            self.listener(SessionEvent(SessionState.EXPIRED, session))
        self._open()

    def _open(self) -> None:
        server = self.server
        sid, outs = server.registry.open_session(self.timeout_ms, server.clock())
        self.session_id = sid
        server.clients[sid] = self
        server.apply(outs)
        listener = self.listener
        self.deliver(lambda: listener(SessionEvent(SessionState.CONNECTED, sid)) if listener else None)
        self._ping()

    def _ping(self) -> None:
        """Ping now and every third of the negotiated timeout while alive and not frozen."""
        self._ping_gen += 1
        gen = self._ping_gen
        server = self.server

        def ping() -> None:
            if gen != self._ping_gen or self.closed or self.frozen or self.cut or self.session_id == 0:
                return
            session = self.session_id
            if not server.registry.is_alive(session):
                self.deliver(lambda: self.session_expired(session))
                return
            server.apply(server.registry.ping(session, server.clock()))
            server.schedule(server.registry.timeout_of(session) // 3, ping)

        ping()


def loop_post(loop: Any) -> CancellableSchedule:
    """The event loop as a schedule that keeps FIFO order for equal deadlines (call_soon for 0)."""
    def schedule(delay_ms: int, action: Callable[[], None]) -> Any:
        if delay_ms <= 0:
            return loop.call_soon(action)
        return loop.call_later(delay_ms / 1000, action)
    return schedule
