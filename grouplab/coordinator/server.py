"""The asyncio shell around the pure Broker: sockets in, outputs carried out.

- Each connection is an asyncio.Protocol with a FrameReader; a bad frame gets an error response and
  changes nothing; an oversized one gets an error response and the connection closes. A
  connection's frames are handled for at most TURN_S at a time, so a burst of requests that make
  large answers does not hold the loop for all of them (docs/protocol.md §1, Fairness).
- Every answer is encoded within grouplab.response.max.bytes, or replaced by INVALID_REQUEST saying
  how big it would be; an answer that cannot be encoded at all (MemoryError included) is replaced by
  UNKNOWN_SERVER_ERROR. Either keeps the connection and the rest of the step (`_Connection.send`).
- Group requests go through one serialized input queue per group (a deque drained by a scheduled
  callback, so handlers never await); timer firings come back through the same queue. A queue
  lives only while it holds inputs, so ids that are never seen again cost nothing.
- The Broker runs in a CoordinatorDriver (coordinator/driver.py), which carries out its outputs;
  this shell gives it the wall clock, loop.call_later timers, the connections to reply on, the
  group log and the event log.
- With a data directory, `Persist` outputs are appended to the durable group log (coordinator/
  group_log.py) before the outputs after them are carried out; at start the log is replayed into the
  Broker and compacted, so a restarted coordinator comes back with its groups and topics. The
  partition logs live in DATA_DIR/logs/ (a FileLogStore, recovered at start; the Broker appends to
  it synchronously); without a data directory they are in memory.
- A request whose handler returns no Reply (Produce with acks=0) gets no answer.
"""

from __future__ import annotations

import asyncio
import os
import logging
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from grouplab.coordinator.broker import Broker, RequestContext, uuid_member_ids
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.driver import CoordinatorDriver, PersistFailed
from grouplab.coordinator.group_log import GroupLog, Record
from grouplab.coordinator.kafka_wire.codec import looks_like_kafka
from grouplab.coordinator.kafka_wire.holdings import client_node
from grouplab.coordinator.kafka_wire.listener import KafkaListener
from grouplab.coordinator.kafka_wire.translate import ClusterView
from grouplab.coordinator.nodes import NodeError
from grouplab.coordinator.partition_log import INT64_MAX, FileLogStore
from grouplab.coordinator.tally import RequestTally
from grouplab.coordinator.trace import TraceRecorder, TraceSink
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent, Output, Reply, wall_clock_ms
from grouplab.protocol.kernel import ExtendingTimerTable, loop_schedule
from grouplab.protocol.errors import AnswerTooLarge, ErrorCode, FrameTooLarge
from grouplab.protocol.framing import BadRequest, FrameReader, decode_request, encode_response
from grouplab.protocol.messages import ErrorResponse

_log = logging.getLogger("grouplab.coordinator")


class _ReplyTo:
    """The opaque token the state machine hands back in Reply: a connection and a correlation id
    (and, for the events about an answer that cannot be sent, the API and client id)."""

    __slots__ = ("conn", "correlation_id", "api", "client_id")

    def __init__(self, conn: "_Connection", correlation_id: int, api: str = "", client_id: str = "") -> None:
        self.conn = conn
        self.correlation_id = correlation_id
        self.api = api
        self.client_id = client_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ReplyTo) and other.conn is self.conn and other.correlation_id == self.correlation_id

    def __hash__(self) -> int:
        return hash((id(self.conn), self.correlation_id))


class KafkaPortError(OSError):
    """The Kafka-wire listener could not listen (its port, not the msgpack one, is the culprit)."""


class DataDirError(Exception):
    """The data directory cannot be opened or recovered (not a directory, no permission, a full
    disk): said as such, not as a failure to listen."""


def _conn_of(token: _ReplyTo) -> tuple[str, int]:
    return token.conn.peer, token.correlation_id


class _GroupQueue:
    """One group's pending inputs. It exists only while it holds some: `_drain` removes it once
    empty, so a request for a group id that never comes back leaves nothing behind."""

    __slots__ = ("group_id", "items", "scheduled")

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.items: deque[tuple] = deque()
        self.scheduled = False


# How long one connection's frames may hold the event loop before the other connections and the
# timers get a turn (a frame that takes longer is still handled whole: one per turn, then).
TURN_S = 0.005


class _Connection(asyncio.Protocol):
    """One client connection. Its frames are handled in order as they are read, for at most TURN_S
    at a time: a burst of requests on one connection (each of which may make a large answer) then
    goes on in later turns of the event loop, so it never holds the loop for more than about one of
    them while every other connection's requests and every timer wait. Frames read are handled
    even after the connection is lost (their answers go nowhere), as a burst handled at once was,
    but not once the server is stopping.
    Back-pressure: while more than socket.request.max.bytes of frames wait, the connection is not
    read, and while its answers wait for the client to read them (the transport's write buffer is
    over its high-water mark) none of its frames are handled: a client that does not read its
    answers holds only its own requests."""

    def __init__(self, server: "CoordinatorServer", node: int = 0) -> None:
        self.server = server
        self.node = node  # the broker of a cluster whose listener accepted it
        self.reader = FrameReader(server.config.socket_request_max_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.frames: deque[bytes] = deque()  # read, not yet handled
        self.queued_bytes = 0
        self.oversized: FrameTooLarge | None = None  # answered, and the connection closed, after the frames before it
        self.scheduled = False
        self.writing_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.writing_paused = False
        self.oversized = None
        self.server.connections.discard(self)
        self._schedule()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.reader.feed(data)
        except FrameTooLarge as exc:
            frames = exc.frames
            self.oversized = exc  # nothing after it can be read
        self.frames.extend(frames)
        self.queued_bytes += sum(map(len, frames))
        if self.scheduled:
            self._schedule()  # a turn is already due: only stop reading if much waits
        else:
            self._handle_frames()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._schedule()

    def _handle_frames(self) -> None:
        """Handle waiting frames for up to TURN_S; what is left waits for the next turn. At the
        end of the frames, read again, or refuse the oversized one."""
        self.scheduled = False
        if self.server.stopping:
            self.frames.clear()
            return
        deadline = time.perf_counter() + TURN_S
        while self.frames and not self.writing_paused:
            frame = self.frames.popleft()
            self.queued_bytes -= len(frame)
            try:
                self.server.on_frame(self, frame)
            except Exception as exc:  # pragma: no cover - a defect: this connection ends, the server goes on
                self.server.note_internal_error(exc)
                self.frames.clear()
                self.close()
                return
            if time.perf_counter() >= deadline:
                break
        if self.frames:
            self._schedule()
        elif (oversized := self.oversized) is not None:
            self.oversized = None
            self.send(-1, ErrorResponse(error_code=oversized.code, error_message=oversized.message))
            self.server.note_bad_frame(self, oversized.message)
            self.close()
        elif self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def _schedule(self) -> None:
        """Go on in a later turn (not reading meanwhile, if much is waiting)."""
        transport = self.transport
        if transport is not None and transport.is_reading() and (
                self.oversized is not None or self.queued_bytes > self.reader.max_frame_bytes):
            transport.pause_reading()
        if not self.scheduled and not self.writing_paused and (self.frames or self.oversized is not None):
            self.scheduled = True
            self.server.after_others(self._handle_frames)

    def send(self, correlation_id: int, body: Any, api: str = "", client_id: str = "") -> None:
        """Answer `correlation_id` with `body`, or, when that cannot be encoded, with an error that
        says why: an answer over grouplab.response.max.bytes is INVALID_REQUEST naming its size,
        the limit and what to ask instead; any other failure (MemoryError included) is
        UNKNOWN_SERVER_ERROR with the reason. Either is logged, and the connection stays open;
        nothing the caller carries out after this reply is skipped."""
        if self.transport is None or self.transport.is_closing():
            return
        frame: bytes | None
        try:
            frame = encode_response(correlation_id, body, self.server.config.response_max_bytes)
        except AnswerTooLarge as exc:
            self.server.note_answer_too_large(api, client_id, exc)
            frame = self._encode_error(correlation_id, exc.code, exc.message_for(api))
        except Exception as exc:
            _log.error("the answer to %s (correlation id %d) could not be encoded: %r", api or "a request",
                       correlation_id, exc)
            self.server.note_answer_failed(api, client_id, exc)
            frame = self._encode_error(correlation_id, ErrorCode.UNKNOWN_SERVER_ERROR,
                                       f"{api + ': ' if api else ''}the answer could not be encoded: {exc!r}")
        if frame is None:
            self.close()  # not even the error could be encoded: the client sees the connection end
            return
        self.transport.write(frame)

    @staticmethod
    def _encode_error(correlation_id: int, code: ErrorCode, message: str) -> bytes | None:
        try:
            return encode_response(correlation_id, ErrorResponse(error_code=code, error_message=message))
        except Exception:
            return None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class CoordinatorServer:
    def __init__(
        self,
        config: BrokerConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 9192,
        events: Any = None,
        clock: Callable[[], int] = wall_clock_ms,
        new_member_id: Callable[[str], str] = uuid_member_ids,
        data_dir: str | Path | None = None,
        trace: TraceSink | None = None,
        kafka_port: int | None = None,
        client_logs: Callable[[str], Any] | None = None,
        brokers: int = 1,
        node_ports: dict[int, int] | None = None,
        node_kafka_ports: dict[int, int] | None = None,
    ) -> None:
        self.config = config or BrokerConfig()
        self.host = host
        self.port = port
        self.events = events  # an EventLog-like object with .emit(LogEvent), or None
        # The message trace (coordinator/trace.py): every request, timer and answer, for replay/explain.
        self.trace = TraceRecorder(trace, _conn_of) if trace is not None else None
        self.clock = clock
        self.broker = Broker(self.config, new_member_id, host, port, brokers=brokers)
        # A cluster (--brokers N): one msgpack and one Kafka listener per broker, node ids 0..N-1;
        # `port` and `kafka_port` are broker 0's, `ports` and `kafka_ports` every broker's (kept
        # while a broker is down, so it comes back where it was).
        self.brokers = brokers
        self.ports: dict[int, int] = dict(node_ports or {})  # (given: where each broker listens, as after a restart)
        self.kafka_ports: dict[int, int] = dict(node_kafka_ports or {})
        self._servers: dict[int, asyncio.base_events.Server] = {}
        self._kafka_servers: dict[int, asyncio.base_events.Server] = {}
        self.kafkas: dict[int, KafkaListener] = {}
        self.kafka_cluster: ClusterView | None = None  # what every Kafka listener of a cluster shares
        self.connections: set[_Connection] = set()
        self._queues: dict[str, _GroupQueue] = {}
        self.driver: CoordinatorDriver | None = None  # built by start(): its timers need the loop
        self._server: asyncio.base_events.Server | None = None
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.bad_frames = 0
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.group_log: GroupLog | None = None
        self.log_store: FileLogStore | None = None  # partition logs under DATA_DIR/logs/ (with a data_dir)
        self._flusher: asyncio.TimerHandle | None = None
        # The Kafka-wire listener (coordinator/kafka_wire/): real Kafka clients, the same Broker.
        self.kafka_port = kafka_port
        self.kafka: KafkaListener | None = None
        self._kafka_server: asyncio.base_events.Server | None = None
        # node -> its EventLog-like log: where the Kafka-wire listener writes what each Kafka client
        # holds (coordinator/kafka_wire/holdings.py); None: not written (the client keeps no log here).
        self.client_logs = client_logs
        # A benchmark's request counter (coordinator/tally.py): every request read and error
        # answered, on both ports of every broker; None (the default) counts nothing.
        self.tally: RequestTally | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> "CoordinatorServer":
        self._loop = asyncio.get_running_loop()
        driver = self.driver = CoordinatorDriver(
            self.broker, self.clock, ExtendingTimerTable(loop_schedule(self._loop), self.clock, self._fire), self._reply,
            self._persist, self._emit, self.trace)  # reads self.events when an event comes
        try:
            restored = self._recover() if self.data_dir is not None else []
        except OSError as exc:
            driver.timers.cancel_all()
            raise DataDirError(f"cannot use the data directory {self.data_dir}: {exc.strerror or exc}") from exc
        try:
            for node in range(self.brokers):
                await self._listen(node, self.ports.get(node, self.port + node if self.port else 0))
        except BaseException:
            self._close_listeners()
            driver.timers.cancel_all()
            self._close_log()
            raise
        self.port = self.ports[0]
        self._server = self._servers[0]
        self.broker.topics.port = self.port
        if self.broker.cluster is not None:
            self.broker.cluster.addresses.update({n: (self.host, p) for n, p in self.ports.items()})
        if self.kafka_port is not None:
            try:
                for node in range(self.brokers):
                    await self._listen_kafka(node, self.kafka_ports.get(node, self.kafka_port + node if self.kafka_port else 0))
            except BaseException as exc:
                self._close_listeners()
                driver.timers.cancel_all()
                self._close_log()
                if isinstance(exc, OSError):
                    raise KafkaPortError(exc.errno, exc.strerror) from exc
                raise
            self.kafka = self.kafkas[0]
            self._kafka_server = self._kafka_servers[0]
            self.kafka_port = self.kafka_ports[0]
        if self.trace is not None:
            cluster = {} if self.broker.cluster is None else {
                "brokers": self.brokers, "addresses": {str(n): [h, p] for n, (h, p) in self.broker.cluster.addresses.items()}}
            self.trace.start(self.clock(), host=self.host, port=self.port, config=self.config.as_kafka_names(),
                             config_given=sorted(self.config.overridden),
                             topics=dict(self.broker.topics.partitions), recovered=self._recovered_state(), **cluster)
        self._emit(LogEvent(self.clock(), events.CoordinatorStarted(
            self.host, self.port, config=self.config.as_kafka_names(),
            data_dir=str(self.data_dir) if self.data_dir else None, kafka_port=self.kafka_port)))
        driver.apply(restored)
        self._schedule_flush()
        return self

    async def _listen(self, node: int, port: int) -> None:
        assert self._loop is not None
        server = await self._loop.create_server(lambda: _Connection(self, node), self.host, port, backlog=4096)
        self._servers[node] = server
        self.ports[node] = server.sockets[0].getsockname()[1]

    async def _listen_kafka(self, node: int, port: int) -> None:
        assert self._loop is not None
        cluster = self.broker.cluster
        if cluster is not None and self.kafka_cluster is None:
            self.kafka_cluster = ClusterView({}, cluster.nodes, self.broker.coordinator_node)
        listener = self.kafkas.get(node) or KafkaListener(
            self, self.config.socket_request_max_bytes, node if cluster is not None else self.config.broker_id,
            self.config.message_max_bytes, self.kafka_cluster)
        server = await self._loop.create_server(listener.protocol, self.host, port, backlog=4096)
        self.kafkas[node] = listener
        self._kafka_servers[node] = server
        self.kafka_ports[node] = server.sockets[0].getsockname()[1]
        if self.kafka_cluster is not None:
            self.kafka_cluster.addresses[node] = (self.host, self.kafka_ports[node])

    def _close_listeners(self, node: int | None = None) -> list[asyncio.base_events.Server]:
        """Stop listening (on `node`'s ports, or every broker's) and cut those connections; the
        servers, to await their closing."""
        closed = []
        for servers in (self._servers, self._kafka_servers):
            for n in [n for n in servers if node is None or n == node]:
                server = servers.pop(n)
                server.close()
                closed.append(server)
        for n, listener in self.kafkas.items():
            if node is None or n == node:
                listener.close_all()
        for conn in [c for c in self.connections if node is None or c.node == node]:
            conn.close()
        return closed

    # ------------------------------------------------------------------ a cluster's brokers

    def _cluster_node(self, node: int) -> None:
        """NodeError unless `node` is a broker of this cluster."""
        cluster = self.broker.cluster
        if cluster is None:
            raise NodeError("this coordinator is one broker (start it with --brokers N for a cluster)")
        cluster.nodes.check(node)

    async def kill_broker(self, node: int, how: str = "killed") -> None:
        """Broker `node` stops: its listeners close and its connections are cut, then its
        partitions and groups move (coordinator/brokers.py). NodeError if it is not running."""
        self._cluster_node(node)
        assert self.broker.cluster is not None
        if node not in self.broker.cluster.nodes.live:
            raise NodeError(f"broker {node} is already down")
        closed = self._close_listeners(node)
        self._driver().broker_change("down", node, how)
        for server in closed:
            await server.wait_closed()

    async def restart_broker(self, node: int) -> None:
        """Broker `node` listens again on its ports; leadership comes back at the next
        preferred-leader election. NodeError if it is running."""
        self._cluster_node(node)
        assert self.broker.cluster is not None
        if node in self.broker.cluster.nodes.live:
            raise NodeError(f"broker {node} is already running")
        await self._listen(node, self.ports[node])
        if self.kafka_ports:
            await self._listen_kafka(node, self.kafka_ports[node])
        self._driver().broker_change("up", node)

    def elect_leaders(self) -> None:
        """A preferred-leader election now (kafka-leader-election.sh --election-type PREFERRED)."""
        self._cluster_node(0)
        self._driver().broker_change("elect")

    def coordinator_of(self, group_id: str) -> int:
        """The broker coordinating `group_id` now (-1: none is live)."""
        return self.broker.coordinator_node(group_id)

    def live_brokers(self) -> list[int]:
        return sorted(self.broker.cluster.nodes.live) if self.broker.cluster is not None else [self.config.broker_id]

    def _schedule_flush(self) -> None:
        """log.flush.interval.ms: a periodic check that syncs partition logs whose oldest unsynced
        append is that old (appends check it too). Nothing to do with Kafka's default (never)."""
        interval_ms = self.config.log_flush_interval_ms
        if self.log_store is None or interval_ms >= INT64_MAX // 2 or self._loop is None:
            return

        def tick() -> None:
            if self.log_store is None:
                return
            try:
                self.log_store.flush_if_due(self.clock())
            except OSError as exc:
                _log.error("partition log flush failed: %r", exc)
                self._emit(LogEvent(self.clock(), events.PartitionFlushFailed(error=repr(exc))))
            self._flusher = self._loop.call_later(max(interval_ms, 10) / 1000, tick)  # type: ignore[union-attr]

        self._flusher = self._loop.call_later(max(interval_ms, 10) / 1000, tick)

    def _recover(self) -> list[Output]:
        """Replay the data directory's log into the (new) broker and compact it, and recover the
        partition logs under DATA_DIR/logs/ (a FileLogStore that becomes `broker.logs`). Returns the
        outputs to apply once the server listens (so `coordinator_started` stays the first event):
        `log_recovered`, `partition_logs_recovered` (and `partition_log_truncated` per torn log),
        then the restore's session timers and `group_loaded` events."""
        assert self.data_dir is not None
        started = time.perf_counter()
        log = GroupLog.in_dir(self.data_dir, fsync=self.config.log_fsync == "always")
        try:
            store = None
            records = log.replay()
            compacted = log.compact(records)
            # The partition logs (DATA_DIR/logs/) before the groups: their sessions start after.
            logs_started = time.perf_counter()
            store = FileLogStore(self.data_dir / "logs", self.config)
            logs_ms = (time.perf_counter() - logs_started) * 1000
            now = self.clock()  # after the (synced) compaction: restored sessions start from here
            self.broker.logs = store
            outputs = self.broker.restore(records, now)
        except BaseException:
            if store is not None:
                store.close()
            log.close()
            raise
        self.group_log = log
        self.log_store = store
        st = log.stats
        recovered = LogEvent(now, events.LogRecovered(
            path=str(log.path), records=st.records, bytes=st.bytes, torn_tail_bytes=st.torn_tail_bytes,
            corrupt_records=st.corrupt_records, groups=len(self.broker.groups),
            topics=len(self.broker.topics.partitions), compacted_bytes=compacted,
            ms=round((time.perf_counter() - started) * 1000 - logs_ms, 3)))
        rs = store.recovery
        logs_recovered = [LogEvent(now, events.PartitionLogsRecovered(
            path=str(store.root), partitions=rs.partitions, segments=rs.segments,
            batches=rs.batches, bytes=rs.bytes, truncated_bytes=rs.truncated_bytes,
            ms=round(logs_ms, 3)))]
        logs_recovered += [LogEvent(now, events.PartitionLogTruncated(**t)) for t in rs.truncations]
        return [recovered, *logs_recovered, *outputs]

    def _recovered_state(self) -> bool:
        """Did the data directory hand this coordinator state from an earlier run (groups, topics,
        partition logs, producer ids)? A trace of such a run cannot be replayed from empty."""
        b = self.broker
        return bool(b.groups or b.topics.partitions or b.logs.logs()) or b.logs.is_allocated(0)

    def _close_log(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        if self.log_store is not None:
            self.log_store.close()  # a clean shutdown syncs the partition logs
            self.log_store = None
        if self.group_log is not None:
            self.group_log.close()
            self.group_log = None

    async def stop(self) -> None:
        self.stopping = True  # frames still waiting on connections are dropped, not handled
        if self.driver is not None:
            self.driver.timers.cancel_all()
        if self._server is not None:
            for server in self._close_listeners():
                await server.wait_closed()
            self._server = self._kafka_server = None
            self._close_log()
            self._emit(LogEvent(self.clock(), events.CoordinatorStopped()))
        self._close_log()

    async def __aenter__(self) -> "CoordinatorServer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        """Until cancelled (a cluster's brokers come and go; the process serves on)."""
        assert self._server is not None
        await asyncio.Event().wait()

    # ------------------------------------------------------------------ requests

    def on_frame(self, conn: _Connection, frame: bytes) -> None:
        try:
            request = decode_request(frame)
        except BadRequest as exc:
            if looks_like_kafka(frame):  # it could not read a msgpack answer: say where it should go
                where = f"port {self.kafka_port}" if self.kafka_port is not None else "a Kafka port (--kafka-port)"
                self.note_bad_frame(conn, f"a Kafka client on grouplab's msgpack port: Kafka's protocol is served on "
                                          f"{where}; connection closed")
                conn.close()
                return
            conn.send(exc.correlation_id, ErrorResponse(error_code=exc.code, error_message=exc.message))
            self.note_bad_frame(conn, exc.message)
            return
        header = request.header
        ctx = RequestContext(_ReplyTo(conn, header.correlation_id, header.api, header.client_id), header.client_id,
                             conn.peer.rsplit(":", 1)[0], conn.node)
        self.submit(header.api, request.body, ctx)

    def submit(self, api: str, body: Any, ctx: RequestContext) -> None:
        """A decoded request, from either port: on its group's queue, or run now if cluster-wide."""
        if self.tally is not None:
            self.tally.request(ctx.client_id, api)
        group_id = self.broker.group_key(api, body)
        if group_id is None:
            self._run(lambda: self._driver().handle(api, body, ctx), ctx)
        else:
            self._enqueue(group_id, ("request", api, body, ctx))

    def note_bad_frame(self, conn: Any, message: str) -> None:
        self.bad_frames += 1
        self._emit(LogEvent(self.clock(), events.BadRequest(peer=conn.peer, error=message)))

    def note_client_event(self, client_id: str, payload: events.Event) -> None:
        """A line the Kafka-wire listener writes on a Kafka client's behalf, in the client's node."""
        if self.client_logs is not None:
            self.client_logs(client_node(client_id)).emit(LogEvent(self.clock(), payload))

    def note_internal_error(self, exc: Exception) -> None:
        _log.error("internal error: %r", exc)
        self._emit(LogEvent(self.clock(), events.InternalError(error=repr(exc))))

    def note_answer_too_large(self, api: str, client_id: str, exc: AnswerTooLarge) -> None:
        self._emit(LogEvent(self.clock(), events.ResponseTooLarge(api, client_id, exc.size, exc.limit, exc.exact)))

    def note_answer_failed(self, api: str, client_id: str, exc: Exception) -> None:
        self._emit(LogEvent(self.clock(), events.ResponseEncodeFailed(api, client_id, error=repr(exc))))

    def after_others(self, callback: Callable[[], None]) -> None:
        """Run `callback` once what is waiting now has run, and the requests read meanwhile with it:
        after the next turn's reads and the group queues they fill (a call_soon would run before
        those drains; a timer due at once, set from a call_soon, runs after them)."""
        loop = self._loop
        assert loop is not None
        loop.call_soon(loop.call_later, 0, callback)

    def _enqueue(self, group_id: str, item: tuple) -> None:
        queue = self._queues.get(group_id)
        if queue is None:
            queue = self._queues[group_id] = _GroupQueue(group_id)
        queue.items.append(item)
        if not queue.scheduled:
            queue.scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._drain, queue)

    def _drain(self, queue: _GroupQueue) -> None:
        queue.scheduled = False
        while queue.items:
            item = queue.items.popleft()
            if item[0] == "request":
                _, api, body, ctx = item
                self._run(lambda: self._driver().handle(api, body, ctx), ctx)
            else:
                key = item[1]
                self._run(lambda: self._driver().on_timer(key), None)
        # Drained: forget the queue (a later input makes a new one; nothing of this one is left).
        if self._queues.get(queue.group_id) is queue:
            del self._queues[queue.group_id]

    def _driver(self) -> CoordinatorDriver:
        assert self.driver is not None, "requests and timers come only after start()"
        return self.driver

    def _run(self, step: Callable[[], None], ctx: RequestContext | None) -> None:
        """Run one state-machine step and carry out its outputs; a bug in either answers
        UNKNOWN_SERVER_ERROR (an output the driver cannot carry out included), never kills the server.
        Then the partitions the step appended to and the topics it deleted (the log store's
        `take_changes`) go to the Kafka-wire listener, which looks again only at the parked
        Fetches watching them (kafka_wire/purgatory.py)."""
        try:
            step()
        except Exception as exc:  # pragma: no cover - a defect, reported loudly
            # One line for whoever runs it; the stack only when asked for (GROUPLAB_DEBUG=1).
            _log.error("state machine failed: %r (a grouplab defect: please report it)", exc,
                       exc_info=os.environ.get("GROUPLAB_DEBUG") == "1")
            self._emit(LogEvent(self.clock(), events.InternalError(error=repr(exc))))
            if ctx is not None:
                to = ctx.reply_to
                to.conn.send(to.correlation_id, ErrorResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                                              error_message=repr(exc)), to.api, to.client_id)
        changes = self.broker.logs.take_changes()
        if changes:
            for listener in self.kafkas.values():
                listener.wake(changes)

    def _reply(self, out: Reply) -> None:
        to = out.to
        if self.tally is not None:
            self.tally.answered(to.client_id, to.api, out.body)
        to.conn.send(to.correlation_id, out.body, to.api, to.client_id)

    def _persist(self, records: list[Record]) -> None:
        """Append before the outputs that follow (the replies) go out; consecutive records (the
        partitions of one OffsetCommit) as one write and one sync. Without a data directory
        nothing is kept. A failed write is logged and raises PersistFailed: the driver answers the
        step's requests NOT_COORDINATOR instead (coordinator/driver.py), and the coordinator
        carries on from memory."""
        if self.group_log is None:
            return
        try:
            self.group_log.append_many(records)
        except OSError as exc:
            _log.error("group log append failed: %r", exc)
            for record in records:
                self._emit(LogEvent(self.clock(), events.LogWriteFailed(
                    record=type(record).__name__, key=list(record.key), error=repr(exc))))
            raise PersistFailed(exc.strerror or repr(exc)) from None

    def _fire(self, key: tuple) -> None:
        queue = self.broker.timer_key_queue(key)
        if queue is None:  # the broker's own (the retention check): no group's queue to wait in
            self._run(lambda: self._driver().on_timer(key), None)
        else:
            self._enqueue(queue, ("timer", key))

    def _emit(self, ev: LogEvent) -> None:
        if self.events is not None:
            self.events.emit(ev)
