"""The member-side driver: one member machine (a ConsumerCoordinator, or a DeliveryApp around one),
its timers and its connection to the coordinator.

The asyncio client (consumer/client.py), the simulator (grouplab/sim/world.py) and the tests'
virtual-time harness (tests/pair.py) each run their members through one of these and differ only
in what they inject: the clock, a scheduler, the transport (a socket, a simulated link), the
listener that hears of partitions and of the application's outputs, and the event log.

The connection, as every shell models it: requests go out on the open connection, numbered by
`epoch` (a shell drops whatever arrives for an older one); a request made while there is none is
lost, and the machine hears of it (on_disconnect) once reconnected, so that it asks again; a
closed connection is reopened after the reconnect back-off.

In a cluster (the machine's Sends name a node), the driver keeps one connection per broker, as
Kafka's NetworkClient does: opened when a request first goes there (the request waits for it),
each with its own epoch and back-off; one that cannot be opened, or that closes, is told to the
machine as `on_disconnect(node)`, and is opened again on the next request after its back-off. A
Send without a node goes on the one connection (`epoch`, `connected`), as with one broker.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Protocol, TypeVar, get_args

from grouplab.consumer.backoff import ExponentialBackoff
from grouplab.consumer.coordinator import (
    MemberOutput,
    PartitionsAssigned,
    PartitionsLost,
    PartitionsRevoked,
    Reconnect,
    Send,
)
from grouplab.consumer.delivery import AppOutput
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, TimerKey
from grouplab.protocol.kernel import Clock, EventSink, Schedule, Timers, UnhandledOutput, no_event_log
from grouplab.protocol.types import TopicPartition

RECONNECT_BACKOFF_MS = 50
RECONNECT_BACKOFF_MAX_MS = 1000

DriverOutput = MemberOutput | AppOutput
"""Every output a MemberDriver carries out: a closed union."""


class ReconnectBackoff(ExponentialBackoff):
    """Kafka's reconnect.backoff.ms and reconnect.backoff.max.ms: wait 50 ms before reconnecting,
    twice as long after each attempt that finds the coordinator unreachable, at most 1 s, and 50 ms
    again once connected."""

    __slots__ = ()

    def __init__(self, initial_ms: int = RECONNECT_BACKOFF_MS, max_ms: int = RECONNECT_BACKOFF_MAX_MS) -> None:
        super().__init__(initial_ms, max_ms)


class MemberMachine(Protocol):
    """A ConsumerCoordinator's inputs and outputs (a DeliveryApp has the same)."""

    @property
    def member_id(self) -> str: ...

    def start(self, now_ms: int) -> list[DriverOutput]: ...

    def poll(self, now_ms: int) -> list[DriverOutput]: ...

    def close(self, now_ms: int) -> list[DriverOutput]: ...

    def on_disconnect(self, now_ms: int, node: int | None = None) -> list[DriverOutput]: ...

    def on_timer(self, key: TimerKey, now_ms: int) -> list[DriverOutput]: ...

    def on_response(self, correlation_id: int, body: Any, now_ms: int) -> list[DriverOutput]: ...


M = TypeVar("M", bound=MemberMachine)


class MemberTransport(Protocol):
    """The member's end of its connection to the coordinator."""

    def send(self, epoch: int, request: Send) -> None:
        """Put `request` on the open connection number `epoch`."""

    def disconnect(self) -> None:
        """Drop the open connection (the machine asked to Reconnect); what is in flight is lost."""

    def connect(self, done: Callable[[bool], None], node: int | None = None) -> None:
        """Try to open a connection (to broker `node` of a cluster; None: the coordinator's); call
        `done(opened)` when known (at once in virtual time). May do nothing while an earlier
        attempt is still under way: that one reports."""

    def close_node(self, node: int) -> None:
        """Close the connection to broker `node` (the machine asked to Reconnect it)."""


class NodeConnection:
    """One broker's connection in a cluster: its epoch while open, requests waiting for it to open,
    and its own reconnect back-off (`ready_at`: no new attempt before)."""

    __slots__ = ("epoch", "connected", "connecting", "waiting", "backoff", "ready_at")

    def __init__(self) -> None:
        self.epoch = 0
        self.connected = False
        self.connecting = False
        self.waiting: list[Send] = []
        self.backoff = ReconnectBackoff()
        self.ready_at = 0


class MemberListener(Protocol):
    """The member's owner: the application's rebalance listener and whatever watches the member."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None: ...

    def on_app_output(self, out: AppOutput) -> None:
        """A DeliveryApp's report (Processed, Committed) or its request to crash (CrashNow)."""

    def on_step(self) -> None:
        """The outputs of one step were carried out."""


class MemberDriver(Generic[M]):
    """Runs one member's machine: each input is a step at `clock()`, and every output of the step
    is carried out (DriverOutput, exhaustively: anything else raises UnhandledOutput).

    A shell keeps one driver per member; each process of the member is `boot`ed on it with its
    machine and its timers (the simulator restarts crashed processes), and `stop` ends it: its
    timers, pending reconnects and the rest of the step it ended in are dropped. `epoch` counts
    connections across processes, so nothing addressed to an old one is ever taken for new."""

    def __init__(self, group_id: str, clock: Clock, schedule: Schedule, transport: MemberTransport,
                 listener: MemberListener, events: EventSink | None,
                 backoff: ReconnectBackoff | None = None) -> None:
        self.group_id = group_id
        self.clock = clock
        self.schedule = schedule
        self.transport = transport
        self.listener = listener
        self.events = events
        self.backoff = backoff if backoff is not None else ReconnectBackoff()
        self.machine: M | None = None  # None while no process runs
        self.timers: Timers | None = None
        self.incarnation = 0  # processes booted
        self.epoch = 0  # connections opened (and closed)
        self.connected = False
        self.dropped_sends = False  # a request found no connection: tell the machine once reconnected
        self.reconnects = 0
        self.nodes: dict[int, NodeConnection] = {}  # a cluster's brokers this process talks to
        self._on_step = listener.on_step
        app_output = listener.on_app_output
        self._handlers: dict[type, Callable[[Any], None]] = {
            Send: self._send,
            LogEvent: events if events is not None else no_event_log,
            PartitionsAssigned: lambda out: listener.on_partitions_assigned(out.partitions),
            PartitionsRevoked: lambda out: listener.on_partitions_revoked(out.partitions),
            PartitionsLost: lambda out: listener.on_partitions_lost(out.partitions),
            Reconnect: self._reconnect,
            **{kind: app_output for kind in get_args(AppOutput)},
        }

    # ------------------------------------------------------------------ a process

    def boot(self, machine: M, timers: Timers, connected: bool) -> None:
        """A new process: its machine, its timers, and a connection (open, or to be opened by
        `start`)."""
        self.incarnation += 1
        self.machine = machine
        self.timers = timers
        self._handlers[ArmTimer] = self._handlers[CancelTimer] = timers.apply
        self.epoch += 1
        self.connected = connected
        self.dropped_sends = False
        self.backoff.reset()
        self.nodes = {}

    def stop(self) -> None:
        """The process is gone (crashed, exited or closed): nothing of it runs any more."""
        if self.timers is not None:
            self.timers.cancel_all()
        self.machine = None
        self.connected = False
        self.epoch += 1
        self.nodes = {}

    # ------------------------------------------------------------------ inputs (dropped while no process runs)

    def start(self) -> None:
        machine = self.machine
        if machine is None:
            return
        self._log_connected(machine)
        self.apply(machine.start(self.clock()))
        if not self.connected:
            self.reconnect_later()

    def poll(self) -> None:
        machine = self.machine
        if machine is not None:
            self.apply(machine.poll(self.clock()))

    def close(self) -> None:
        machine = self.machine
        if machine is not None:
            self.apply(machine.close(self.clock()))

    def on_timer(self, key: TimerKey) -> None:
        machine = self.machine
        if machine is not None:
            self.apply(machine.on_timer(key, self.clock()))

    def refresh_metadata(self) -> None:
        """A metadata refresh asked for now (a classic consumer's `refresh_metadata`); a machine
        without one (a KIP-848 member: its coordinator watches the topics) ignores it."""
        machine = self.machine
        refresh = getattr(machine, "refresh_metadata", None)
        if refresh is not None:
            self.apply(refresh(self.clock()))

    def on_response(self, correlation_id: int, body: Any) -> None:
        machine = self.machine
        if machine is not None:
            self.apply(machine.on_response(correlation_id, body, self.clock()))

    def tell_disconnected(self) -> None:
        machine = self.machine
        if machine is not None:
            self.apply(machine.on_disconnect(self.clock()))

    def connection_lost(self) -> None:
        """The connection closed under the member: it hears of it, and reconnects."""
        self.lose_connection()
        self.tell_disconnected()
        self.reconnect_later()

    def lose_connection(self) -> None:
        self.connected = False
        self.epoch += 1

    # ------------------------------------------------------------------ reconnecting

    def reconnect_later(self) -> None:
        incarnation = self.incarnation
        self.schedule(self.backoff.delay_ms, lambda: self._try_reconnect(incarnation))

    def _try_reconnect(self, incarnation: int) -> None:
        if self.machine is None or self.incarnation != incarnation or self.connected:
            return
        self.transport.connect(lambda opened: self._reconnected(incarnation, opened))

    def _reconnected(self, incarnation: int, opened: bool) -> None:
        machine = self.machine
        if machine is None or self.incarnation != incarnation or self.connected:
            return
        if not opened:
            self.backoff.failed()
            self.reconnect_later()
            return
        self.connected = True
        self.epoch += 1
        self.backoff.reset()
        self.reconnects += 1
        self._log_connected(machine)
        if self.dropped_sends:
            self.dropped_sends = False
            self.tell_disconnected()

    def _log_connected(self, machine: MemberMachine) -> None:
        if self.events is not None:
            self.events(LogEvent(self.clock(), events.CoordinatorConnected(self.group_id, machine.member_id)))

    # ------------------------------------------------------------------ outputs

    def apply(self, outputs: list[DriverOutput]) -> None:
        machine = self.machine
        handlers = self._handlers
        for out in outputs:
            try:
                handler = handlers[type(out)]
            except KeyError:
                raise UnhandledOutput("the member driver", out) from None
            handler(out)
            if self.machine is not machine:
                break  # the process ended on this output (a crash it asked for): the rest never happened
        self._on_step()

    def carry_out(self, out: DriverOutput) -> None:
        """One output by its handler, as `apply` does (for a shell that carries out its commonest
        outputs itself: the simulator's member step, grouplab/sim/world.py)."""
        try:
            handler = self._handlers[type(out)]
        except KeyError:
            raise UnhandledOutput("the member driver", out) from None
        handler(out)

    def is_open(self, epoch: int, node: int | None = None) -> bool:
        """Is connection `epoch` (to `node`, or the coordinator's one) the open one?"""
        if node is None:
            return self.connected and epoch == self.epoch
        conn = self.nodes.get(node)
        return conn is not None and conn.connected and conn.epoch == epoch

    def epoch_open(self, epoch: int) -> bool:
        """Is connection `epoch`, to whichever broker, open?"""
        if self.connected and epoch == self.epoch:
            return True
        return any(c.connected and c.epoch == epoch for c in self.nodes.values()) if self.nodes else False

    def close_node_now(self, node: int) -> None:
        """Broker `node`'s connection is gone; the machine is told later (a hung member's `node_lost`)."""
        conn = self.nodes.get(node)
        if conn is not None:
            self._close_node(conn)
            conn.connecting = True  # node_lost still tells the machine (it checks connected or connecting)

    def open_nodes(self) -> list[int]:
        return [n for n, c in self.nodes.items() if c.connected]

    def node_lost(self, node: int) -> None:
        """Broker `node`'s connection closed under the member: the machine hears of it."""
        conn = self.nodes.get(node)
        if conn is None or not (conn.connected or conn.connecting):
            return
        self._close_node(conn)
        machine = self.machine
        if machine is not None:
            self.apply(machine.on_disconnect(self.clock(), node))

    def _close_node(self, conn: NodeConnection) -> None:
        conn.connected = conn.connecting = False
        conn.waiting.clear()
        self.epoch += 1
        conn.epoch = self.epoch  # nothing of the old connection is taken for a new one

    def _send_to_node(self, out: Send, node: int) -> None:
        conn = self.nodes.get(node)
        if conn is None:
            conn = self.nodes[node] = NodeConnection()
        if conn.connected:
            self.transport.send(conn.epoch, out)
            return
        conn.waiting.append(out)
        if conn.connecting:
            return
        conn.connecting = True
        incarnation = self.incarnation
        delay = max(conn.ready_at - self.clock(), 0)
        if delay:
            self.schedule(delay, lambda: self._connect_node(incarnation, node, conn))
        else:
            self._connect_node(incarnation, node, conn)

    def _connect_node(self, incarnation: int, node: int, conn: NodeConnection) -> None:
        if self.machine is None or self.incarnation != incarnation or self.nodes.get(node) is not conn:
            return
        self.transport.connect(lambda opened: self._node_connected(incarnation, node, conn, opened), node)

    def _node_connected(self, incarnation: int, node: int, conn: NodeConnection, opened: bool) -> None:
        machine = self.machine
        if machine is None or self.incarnation != incarnation or self.nodes.get(node) is not conn or not conn.connecting:
            return
        conn.connecting = False
        if not opened:
            conn.waiting.clear()
            conn.ready_at = self.clock() + conn.backoff.delay_ms
            conn.backoff.failed()
            # Not inside the step that sent (the schedule runs it next): the machine hears the
            # requests were lost, as from a connection that closed.
            self.schedule(0, lambda: self._tell_node_lost(incarnation, node))
            return
        self.epoch += 1
        conn.epoch = self.epoch
        conn.connected = True
        conn.backoff.reset()
        waiting, conn.waiting = conn.waiting, []
        for out in waiting:
            self.transport.send(conn.epoch, out)

    def _tell_node_lost(self, incarnation: int, node: int) -> None:
        machine = self.machine
        if machine is not None and self.incarnation == incarnation:
            self.apply(machine.on_disconnect(self.clock(), node))

    def _send(self, out: Send) -> None:
        if out.node is not None:
            self._send_to_node(out, out.node)
        elif self.connected:
            self.transport.send(self.epoch, out)
        else:
            self.dropped_sends = True

    def _reconnect(self, out: Reconnect) -> None:
        if out.node is not None:
            conn = self.nodes.get(out.node)
            if conn is not None:
                self._close_node(conn)
                self.transport.close_node(out.node)
            return
        self.lose_connection()
        self.transport.disconnect()
        self.reconnect_later()
