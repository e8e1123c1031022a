"""The asyncio shell around the pure ConsumerCoordinator: one TCP connection to the coordinator,
frames in and out, timers, reconnects, and the rebalance listener's callbacks.

Everything the member decides is decided by ConsumerCoordinator; this file only carries it out.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Protocol

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
from protocol.effects import ArmTimer, CancelTimer, LogEvent, wall_clock_ms
from protocol.errors import ProtocolError
from protocol import schema
from protocol.framing import FrameReader, encode_request, read_response
from protocol.kernel import TimerTable, loop_schedule
from protocol.messages import API, RequestHeader
from protocol.types import TopicPartition

_log = logging.getLogger("grouplab.consumer")

RECONNECT_BACKOFF_MS = 50
RECONNECT_BACKOFF_MAX_MS = 1000


class RebalanceListener(Protocol):
    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...
    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...
    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None: ...


class _Wire(asyncio.Protocol):
    def __init__(self, client: "GroupMemberClient") -> None:
        self.client = client
        self.reader = FrameReader(64 * 1024 * 1024)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        for frame in self.reader.feed(data):
            self.client._on_frame(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.client._on_connection_lost(self)


class GroupMemberClient:
    """A group member over a real socket. `start()` joins; `close()` leaves; `poll()` says the
    application is alive (max.poll.interval.ms)."""

    def __init__(
        self,
        config: ConsumerConfig,
        host: str = "127.0.0.1",
        port: int = 9092,
        listener: RebalanceListener | None = None,
        events: Any = None,
        clock: Callable[[], int] = wall_clock_ms,
        machine: Any = None,
    ) -> None:
        self.config = config
        self.host = host
        self.port = port
        self.listener = listener
        self.events = events
        self.clock = clock
        # The member's machine: a ConsumerCoordinator, or anything with its inputs and outputs
        # (consumer/delivery.py's DeliveryApp wraps one). Outputs this shell does not know go to
        # the listener's on_output, if it has one.
        self.machine = machine if machine is not None else ConsumerCoordinator(config)
        self._wire: _Wire | None = None
        self._pending_api: dict[int, str] = {}
        self._timers: TimerTable | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._reconnect_task: asyncio.Task | None = None
        self._state_changed = asyncio.Event()
        self.reconnects = 0
        # A request the machine sent while there was no connection (e.g. a backed-off rejoin that
        # fired before the reconnect): it never left, so the machine is told once reconnected.
        self._dropped_sends = False

    # ------------------------------------------------------------------ public

    @property
    def state(self) -> MemberState:
        return self.machine.state

    @property
    def member_id(self) -> str:
        return self.machine.member_id

    @property
    def generation_id(self) -> int:
        return self.machine.generation_id

    @property
    def assignment(self) -> list[TopicPartition]:
        return list(self.machine.owned)

    async def start(self) -> "GroupMemberClient":
        self._loop = asyncio.get_running_loop()
        self._timers = TimerTable(loop_schedule(self._loop), self.clock, self._fire)
        await self._connect()
        self._apply(self.machine.start(self.clock()))
        return self

    def poll(self) -> None:
        self._apply(self.machine.poll(self.clock()))

    async def close(self, leave: bool = True) -> None:
        """Leave the group (LeaveGroup) and close the socket. `leave=False` is a crash: no goodbye."""
        self._closing = True
        if leave:
            self._apply(self.machine.close(self.clock()))
        if self._timers is not None:
            self._timers.cancel_all()
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        wire, self._wire = self._wire, None
        if wire is not None and wire.transport is not None:
            transport = wire.transport
            if leave:
                # Give the LeaveGroup a moment to reach the socket buffer of the peer.
                await asyncio.sleep(0)
            transport.close() if leave else transport.abort()

    async def wait_for(self, predicate: Callable[["GroupMemberClient"], bool], timeout_s: float) -> None:
        """Wait until predicate(self) holds, re-checked after every state change."""
        async def loop() -> None:
            while not predicate(self):
                self._state_changed.clear()
                await self._state_changed.wait()
        await asyncio.wait_for(loop(), timeout_s)

    # ------------------------------------------------------------------ connection

    async def _connect(self) -> None:
        assert self._loop is not None
        _, wire = await self._loop.create_connection(lambda: _Wire(self), self.host, self.port)
        self._wire = wire
        self._emit(LogEvent("coordinator_connected", self.clock(), self._ids()))

    def _ids(self) -> dict[str, Any]:
        return {"group_id": self.config.group_id, "member_id": self.machine.member_id}

    def _on_connection_lost(self, wire: _Wire) -> None:
        if wire is not self._wire or self._closing:
            return
        self._wire = None
        self._pending_api.clear()
        self._apply(self.machine.on_disconnect(self.clock()))
        self._schedule_reconnect()

    def _schedule_reconnect(self) -> None:
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.ensure_future(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        backoff = RECONNECT_BACKOFF_MS
        while not self._closing and self._wire is None:
            await asyncio.sleep(backoff / 1000)
            try:
                await self._connect()
                self.reconnects += 1
                if self._dropped_sends:
                    self._dropped_sends = False
                    self._apply(self.machine.on_disconnect(self.clock()))
            except OSError:
                backoff = min(backoff * 2, RECONNECT_BACKOFF_MAX_MS)

    # ------------------------------------------------------------------ frames

    def _on_frame(self, frame: bytes) -> None:
        try:
            cid, raw_body = read_response(frame)
            api = self._pending_api.pop(cid, None)
            if api is None:
                self._emit(LogEvent("unexpected_response", self.clock(), {**self._ids(), "correlation_id": cid, "body": repr(raw_body)[:200]}))
                return
            body = schema.decode(API[api].response, raw_body, "body")
        except ProtocolError as exc:
            self._emit(LogEvent("bad_response", self.clock(), {**self._ids(), "error": exc.message}))
            return
        self._apply(self.machine.on_response(cid, body, self.clock()))

    # ------------------------------------------------------------------ outputs

    def _apply(self, outputs: list) -> None:
        for out in outputs:
            kind = type(out)
            if kind is Send:
                self._send(out)
            elif kind is ArmTimer or kind is CancelTimer:
                assert self._timers is not None
                self._timers.apply(out)
            elif kind is LogEvent:
                self._emit(out)
            elif kind is PartitionsRevoked:
                if self.listener is not None:
                    self.listener.on_partitions_revoked(out.partitions)
            elif kind is PartitionsAssigned:
                if self.listener is not None:
                    self.listener.on_partitions_assigned(out.partitions)
            elif kind is PartitionsLost:
                if self.listener is not None:
                    self.listener.on_partitions_lost(out.partitions)
            elif kind is Reconnect:
                self._drop_connection()
            elif self.listener is not None and hasattr(self.listener, "on_output"):
                self.listener.on_output(out)
        self._state_changed.set()

    def _send(self, out: Send) -> None:
        wire = self._wire
        if wire is None or wire.transport is None:
            self._dropped_sends = True  # lost; the machine hears of it through on_disconnect
            return
        self._pending_api[out.correlation_id] = out.api
        header = RequestHeader(out.api, API[out.api].max_version, out.correlation_id, self.config.client_id)
        wire.transport.write(encode_request(header, out.body))

    def _drop_connection(self) -> None:
        wire, self._wire = self._wire, None
        self._pending_api.clear()
        if wire is not None and wire.transport is not None:
            wire.transport.abort()
        if not self._closing:
            self._schedule_reconnect()

    def _fire(self, key: tuple) -> None:
        self._apply(self.machine.on_timer(key, self.clock()))

    def _emit(self, ev: LogEvent) -> None:
        if self.events is not None:
            self.events.emit(ev)
