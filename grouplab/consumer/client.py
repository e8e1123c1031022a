"""The asyncio shell around the pure ConsumerCoordinator: one TCP connection to the coordinator,
frames in and out, timers, reconnects, and the rebalance listener's callbacks.

In a cluster of brokers (docs/protocol.md §12.1) the member's Sends name a broker and this shell
keeps a socket per broker, as Kafka's NetworkClient does: the bootstrap brokers are nodes -1, -2,
... (`with_bootstrap`), and every other broker's address is learned from the FindCoordinator and
Metadata answers that pass through, which name each broker with its host and port.

Everything the member decides is decided by ConsumerCoordinator; this file only carries it out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any, Callable, Protocol, Sequence

from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import ConsumerCoordinator, Send
from grouplab.consumer.delivery import AppOutput, DeliveryApp
from grouplab.consumer.driver import MemberDriver
from grouplab.consumer.membership import ConsumerMembership, member_machine
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent, TimerKey, wall_clock_ms
from grouplab.protocol.errors import ProtocolError
from grouplab.protocol import schema
from grouplab.protocol.framing import FrameReader, encode_request, read_response
from grouplab.protocol.kernel import TimerTable, loop_schedule
from grouplab.protocol.messages import API, FindCoordinatorResponse, MetadataResponse, RequestHeader
from grouplab.protocol.types import TopicPartition

_log = logging.getLogger("grouplab.consumer")


class RebalanceListener(Protocol):
    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...
    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...
    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None: ...


def with_bootstrap(config: ConsumerConfig, brokers: Sequence[tuple[str, int]]) -> tuple[ConsumerConfig, dict[int, tuple[str, int]]]:
    """A member that follows a cluster (several brokers to bootstrap from): its config names the
    bootstrap brokers as nodes -1, -2, ... (Kafka's ids for them until an answer names theirs), and
    their addresses; one broker: the config as it was (one connection, as ever)."""
    if len(brokers) <= 1:
        return config, {}
    nodes = {-(i + 1): broker for i, broker in enumerate(brokers)}
    return dataclasses.replace(config, bootstrap_nodes=tuple(nodes)), nodes


class _Wire(asyncio.Protocol):
    def __init__(self, client: "GroupMemberClient", node: int | None = None) -> None:
        self.client = client
        self.node = node  # the broker of a cluster it is connected to (None: the one coordinator)
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
        port: int = 9192,
        listener: RebalanceListener | None = None,
        events: Any = None,
        clock: Callable[[], int] = wall_clock_ms,
        machine: ConsumerCoordinator | ConsumerMembership | DeliveryApp | None = None,
        on_step: Callable[[], None] | None = None,
        nodes: dict[int, tuple[str, int]] | None = None,
    ) -> None:
        self.config = config
        # A cluster (`with_bootstrap`): each broker's address, bootstrap ones first, learned ones as
        # answers name them; one socket per broker the member talks to.
        self.nodes: dict[int, tuple[str, int]] = dict(nodes or {})
        self._node_wires: dict[int, _Wire] = {}
        # Called after every step of the machine, logged or not (a consumer-protocol member's epoch
        # can move on an answer that changes nothing else, and logs nothing): what waits on the
        # member's state from outside (LocalCluster.wait_stable) wakes on it.
        self.on_step = on_step
        self.host = host
        self.port = port
        self.listener = listener
        self.events = events
        self.clock = clock
        # The member's machine: the one group.protocol names (a ConsumerCoordinator, or a
        # ConsumerMembership for KIP-848), or anything with its inputs and outputs
        # (consumer/delivery.py's DeliveryApp wraps one, and its own outputs go to the listener's
        # on_output, if it has one).
        self.machine = machine if machine is not None else member_machine(config)
        self._wire: _Wire | None = None
        self._pending_api: dict[int, str] = {}
        self._timers: TimerTable | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._connecting: asyncio.Task | None = None
        self._state_changed = asyncio.Event()
        shell = _ClientShell(self)
        self.driver: MemberDriver[ConsumerCoordinator | ConsumerMembership | DeliveryApp] = MemberDriver(
            config.group_id, clock, self._schedule, shell, shell, self._emit)  # reads self.events when called

    # ------------------------------------------------------------------ public

    @property
    def state(self) -> events.AnyMemberState:
        return self.machine.state

    @property
    def working(self) -> bool:
        """In the group with partitions it may consume: stable (classic), or acknowledging or
        stable (consumer protocol)."""
        return self.machine.working

    @property
    def member_id(self) -> str:
        return self.machine.member_id

    @property
    def generation_id(self) -> int:
        return self.machine.generation_id

    @property
    def assignment(self) -> list[TopicPartition]:
        return list(self.machine.owned)

    @property
    def reconnects(self) -> int:
        return self.driver.reconnects

    @property
    def in_cluster(self) -> bool:
        return bool(self.config.bootstrap_nodes)

    async def start(self) -> "GroupMemberClient":
        self._loop = asyncio.get_running_loop()
        self._timers = TimerTable(loop_schedule(self._loop), self.clock, self._fire)
        if not self.in_cluster:  # (in a cluster the driver opens a socket per broker, when it first sends there)
            await self._open()
        self.driver.boot(self.machine, self._timers, connected=True)
        self.driver.start()
        return self

    def poll(self) -> None:
        self.driver.poll()

    async def close(self, leave: bool = True) -> None:
        """Leave the group (LeaveGroup) and close the socket. `leave=False` is a crash: no goodbye."""
        if leave:
            self.driver.close()
            await self._flush_waiting()
        self._closing = True
        self.driver.stop()
        if self._connecting is not None:
            self._connecting.cancel()
        wire, self._wire = self._wire, None
        wires = [w for w in (wire, *self._node_wires.values()) if w is not None and w.transport is not None]
        self._node_wires.clear()
        if leave and wires:
            # Give the LeaveGroup a moment to reach the socket buffer of the peer.
            await asyncio.sleep(0)
        for w in wires:
            if w.transport is not None:
                w.transport.close() if leave else w.transport.abort()

    async def _flush_waiting(self) -> None:
        """In a cluster the LeaveGroup may wait for its broker's socket to open (the coordinator
        just moved): give it that long, within request.timeout.ms, as Kafka's close() waits for it."""
        if not self.driver.nodes:
            return
        deadline = asyncio.get_running_loop().time() + self.config.request_timeout_ms / 1000
        while any(c.waiting for c in self.driver.nodes.values()) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)

    async def wait_for(self, predicate: Callable[["GroupMemberClient"], bool], timeout_s: float) -> None:
        """Wait until predicate(self) holds, re-checked after every state change."""
        async def loop() -> None:
            while not predicate(self):
                self._state_changed.clear()
                await self._state_changed.wait()
        await asyncio.wait_for(loop(), timeout_s)

    # ------------------------------------------------------------------ connection

    async def _open(self) -> None:
        assert self._loop is not None
        _, wire = await self._loop.create_connection(lambda: _Wire(self), self.host, self.port)
        self._wire = wire

    async def _open_node(self, node: int) -> None:
        assert self._loop is not None
        host, port = self.nodes[node]  # (KeyError: a broker no answer has named yet)
        _, wire = await self._loop.create_connection(lambda: _Wire(self, node), host, port)
        self._node_wires[node] = wire

    def _schedule(self, delay_ms: int, action: Callable[[], None]) -> asyncio.TimerHandle:
        assert self._loop is not None
        return self._loop.call_later(delay_ms / 1000, action)

    def _on_connection_lost(self, wire: _Wire) -> None:
        if wire.node is not None:
            if self._node_wires.get(wire.node) is wire and not self._closing:
                del self._node_wires[wire.node]
                self.driver.node_lost(wire.node)
            return
        if wire is not self._wire or self._closing:
            return
        self._wire = None
        self._pending_api.clear()
        self.driver.connection_lost()

    # ------------------------------------------------------------------ frames

    def _on_frame(self, frame: bytes) -> None:
        try:
            cid, raw_body = read_response(frame)
            api = self._pending_api.pop(cid, None)
            if api is None:
                self._emit(LogEvent(self.clock(), events.UnexpectedResponse(
                    self.config.group_id, self.machine.member_id, correlation_id=cid, body=repr(raw_body)[:200])))
                return
            body: Any = schema.decode(API[api].response, raw_body, "body")
        except ProtocolError as exc:
            self._emit(LogEvent(self.clock(), events.BadResponse(self.config.group_id, self.machine.member_id,
                                                                 error=exc.message)))
            return
        if self.in_cluster:
            self._learn_addresses(body)
        self.driver.on_response(cid, body)

    def _learn_addresses(self, body: Any) -> None:
        """Brokers an answer names, with their addresses: where to open a socket to each."""
        if isinstance(body, FindCoordinatorResponse):
            named = [(c.node_id, c.host, c.port, c.error_code) for c in body.coordinators] or \
                [(body.node_id, body.host, body.port, body.error_code)]
            for node_id, host, port, error_code in named:
                if node_id >= 0 and not error_code:
                    self.nodes[node_id] = (host, port)
        elif isinstance(body, MetadataResponse):
            for broker in body.brokers:
                self.nodes[broker.node_id] = (broker.host, broker.port)

    def _ids(self) -> dict[str, Any]:
        return {"group_id": self.config.group_id, "member_id": self.machine.member_id}

    def _fire(self, key: TimerKey) -> None:
        self.driver.on_timer(key)

    def _emit(self, ev: LogEvent) -> None:
        if self.events is not None:
            self.events.emit(ev)


class _ClientShell:
    """What the client's MemberDriver is given as transport and listener: the socket, and the
    application's rebalance listener (plus its on_output, for a DeliveryApp's outputs)."""

    def __init__(self, client: GroupMemberClient) -> None:
        self.client = client

    def send(self, epoch: int, request: Send) -> None:
        client = self.client
        wire = client._wire if request.node is None else client._node_wires.get(request.node)
        assert wire is not None and wire.transport is not None, "the driver sends only while connected"
        client._pending_api[request.correlation_id] = request.api
        header = RequestHeader(request.api, API[request.api].max_version, request.correlation_id, client.config.client_id)
        wire.transport.write(encode_request(header, request.body))

    def disconnect(self) -> None:
        client = self.client
        wire, client._wire = client._wire, None
        client._pending_api.clear()
        if wire is not None and wire.transport is not None:
            wire.transport.abort()

    def close_node(self, node: int) -> None:
        wire = self.client._node_wires.pop(node, None)
        if wire is not None and wire.transport is not None:
            wire.transport.abort()

    def connect(self, done: Callable[[bool], None], node: int | None = None) -> None:
        client = self.client
        if node is not None:
            self._connect_node(done, node)
            return
        if client._closing or (client._connecting is not None and not client._connecting.done()):
            return

        async def attempt() -> None:
            try:
                await client._open()
            except OSError:
                done(False)
                return
            done(True)

        client._connecting = asyncio.ensure_future(attempt())

    def _connect_node(self, done: Callable[[bool], None], node: int) -> None:
        """A socket to broker `node` (the driver asks once per attempt); done(False) when it cannot
        be opened, or no answer has said where that broker is."""
        client = self.client
        if client._closing:
            return

        async def attempt() -> None:
            try:
                await client._open_node(node)
            except (OSError, KeyError):
                done(False)
                return
            done(True)

        asyncio.ensure_future(attempt())

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        if self.client.listener is not None:
            self.client.listener.on_partitions_revoked(partitions)

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        if self.client.listener is not None:
            self.client.listener.on_partitions_assigned(partitions)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        if self.client.listener is not None:
            self.client.listener.on_partitions_lost(partitions)

    def on_app_output(self, out: AppOutput) -> None:
        on_output = getattr(self.client.listener, "on_output", None)
        if on_output is not None:
            on_output(out)

    def on_step(self) -> None:
        self.client._state_changed.set()
        if self.client.on_step is not None:
            self.client.on_step()
