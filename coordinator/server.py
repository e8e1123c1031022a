"""The asyncio shell around the pure Broker: sockets in, outputs carried out.

- Each connection is an asyncio.Protocol with a FrameReader; a bad frame gets an error response and
  changes nothing; an oversized one gets an error response and the connection closes.
- Group requests go through one serialized input queue per group (a deque drained by a scheduled
  callback, so handlers never await); timer firings come back through the same queue.
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
import logging
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from coordinator.broker import Broker, RequestContext, uuid_member_ids
from coordinator.config import BrokerConfig
from coordinator.driver import CoordinatorDriver
from coordinator.group_log import GroupLog, Record
from coordinator.kafka_wire.codec import looks_like_kafka
from coordinator.kafka_wire.listener import KafkaListener
from coordinator.partition_log import INT64_MAX, FileLogStore
from coordinator.trace import TraceRecorder, TraceSink
from protocol import events
from protocol.effects import LogEvent, Output, Reply, wall_clock_ms
from protocol.kernel import TimerTable, loop_schedule
from protocol.errors import ErrorCode, FrameTooLarge
from protocol.framing import BadRequest, FrameReader, decode_request, encode_response
from protocol.messages import ErrorResponse

_log = logging.getLogger("grouplab.coordinator")


class _ReplyTo:
    """The opaque token the state machine hands back in Reply: a connection and a correlation id."""

    __slots__ = ("conn", "correlation_id")

    def __init__(self, conn: "_Connection", correlation_id: int) -> None:
        self.conn = conn
        self.correlation_id = correlation_id

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
    __slots__ = ("items", "scheduled")

    def __init__(self) -> None:
        self.items: deque[tuple] = deque()
        self.scheduled = False


class _Connection(asyncio.Protocol):
    def __init__(self, server: "CoordinatorServer") -> None:
        self.server = server
        self.reader = FrameReader(server.config.socket_request_max_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.reader.feed(data)
        except FrameTooLarge as exc:
            for frame in exc.frames:
                self.server.on_frame(self, frame)
            self.send(-1, ErrorResponse(error_code=exc.code, error_message=exc.message))
            self.server.note_bad_frame(self, exc.message)
            self.close()
            return
        for frame in frames:
            self.server.on_frame(self, frame)

    def send(self, correlation_id: int, body: Any) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(encode_response(correlation_id, body))

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
    ) -> None:
        self.config = config or BrokerConfig()
        self.host = host
        self.port = port
        self.events = events  # an EventLog-like object with .emit(LogEvent), or None
        # The message trace (coordinator/trace.py): every request, timer and answer, for replay/explain.
        self.trace = TraceRecorder(trace, _conn_of) if trace is not None else None
        self.clock = clock
        self.broker = Broker(self.config, new_member_id, host, port)
        self.connections: set[_Connection] = set()
        self._queues: dict[str, _GroupQueue] = {}
        self.driver: CoordinatorDriver | None = None  # built by start(): its timers need the loop
        self._server: asyncio.base_events.Server | None = None
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

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> "CoordinatorServer":
        self._loop = asyncio.get_running_loop()
        driver = self.driver = CoordinatorDriver(
            self.broker, self.clock, TimerTable(loop_schedule(self._loop), self.clock, self._fire), self._reply,
            self._persist, self._emit, self.trace)  # reads self.events when an event comes
        try:
            restored = self._recover() if self.data_dir is not None else []
        except OSError as exc:
            driver.timers.cancel_all()
            raise DataDirError(f"cannot use the data directory {self.data_dir}: {exc.strerror or exc}") from exc
        try:
            self._server = await self._loop.create_server(lambda: _Connection(self), self.host, self.port, backlog=4096)
        except BaseException:
            driver.timers.cancel_all()
            self._close_log()
            raise
        self.port = self._server.sockets[0].getsockname()[1]
        self.broker.topics.port = self.port
        if self.kafka_port is not None:
            self.kafka = KafkaListener(self, self.config.socket_request_max_bytes, self.config.broker_id)
            try:
                self._kafka_server = await self._loop.create_server(self.kafka.protocol, self.host, self.kafka_port,
                                                                    backlog=4096)
            except BaseException as exc:
                self._server.close()
                driver.timers.cancel_all()
                self._close_log()
                if isinstance(exc, OSError):
                    raise KafkaPortError(exc.errno, exc.strerror) from exc
                raise
            self.kafka_port = self._kafka_server.sockets[0].getsockname()[1]
        if self.trace is not None:
            self.trace.start(self.clock(), host=self.host, port=self.port, config=self.config.as_kafka_names(),
                             topics=dict(self.broker.topics.partitions), recovered=self._recovered_state())
        self._emit(LogEvent(self.clock(), events.CoordinatorStarted(
            self.host, self.port, config=self.config.as_kafka_names(),
            data_dir=str(self.data_dir) if self.data_dir else None, kafka_port=self.kafka_port)))
        driver.apply(restored)
        self._schedule_flush()
        return self

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
        if self.driver is not None:
            self.driver.timers.cancel_all()
        if self._kafka_server is not None and self.kafka is not None:
            self._kafka_server.close()
            self.kafka.close_all()
            await self._kafka_server.wait_closed()
            self._kafka_server = None
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.close()
            await self._server.wait_closed()
            self._server = None
            self._close_log()
            self._emit(LogEvent(self.clock(), events.CoordinatorStopped()))
        self._close_log()

    async def __aenter__(self) -> "CoordinatorServer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

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
        ctx = RequestContext(_ReplyTo(conn, header.correlation_id), header.client_id, conn.peer.rsplit(":", 1)[0])
        self.submit(header.api, request.body, ctx)

    def submit(self, api: str, body: Any, ctx: RequestContext) -> None:
        """A decoded request, from either port: on its group's queue, or run now if cluster-wide."""
        group_id = self.broker.group_key(api, body)
        if group_id is None:
            self._run(lambda: self._driver().handle(api, body, ctx), ctx)
        else:
            self._enqueue(group_id, ("request", api, body, ctx))

    def note_bad_frame(self, conn: Any, message: str) -> None:
        self.bad_frames += 1
        self._emit(LogEvent(self.clock(), events.BadRequest(peer=conn.peer, error=message)))

    def _enqueue(self, group_id: str, item: tuple) -> None:
        queue = self._queues.get(group_id)
        if queue is None:
            queue = self._queues[group_id] = _GroupQueue()
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

    def _driver(self) -> CoordinatorDriver:
        assert self.driver is not None, "requests and timers come only after start()"
        return self.driver

    def _run(self, step: Callable[[], None], ctx: RequestContext | None) -> None:
        """Run one state-machine step and carry out its outputs; a bug in either answers
        UNKNOWN_SERVER_ERROR (an output the driver cannot carry out included), never kills the server."""
        try:
            step()
        except Exception as exc:  # pragma: no cover - a defect, reported loudly
            _log.exception("state machine failed")
            self._emit(LogEvent(self.clock(), events.InternalError(error=repr(exc))))
            if ctx is not None:
                ctx.reply_to.conn.send(ctx.reply_to.correlation_id,
                                       ErrorResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=repr(exc)))
        if self.kafka is not None and self.kafka.parked:
            self.kafka.wake()  # the step may have made records visible to a parked Fetch

    def _reply(self, out: Reply) -> None:
        out.to.conn.send(out.to.correlation_id, out.body)

    def _persist(self, records: list[Record]) -> None:
        """Append before the outputs that follow (the replies) go out; consecutive records (the
        partitions of one OffsetCommit) as one write and one sync. Without a data directory
        nothing is kept; a failed write is logged and the coordinator carries on in memory."""
        if self.group_log is None:
            return
        try:
            self.group_log.append_many(records)
        except OSError as exc:
            _log.error("group log append failed: %r", exc)
            for record in records:
                self._emit(LogEvent(self.clock(), events.LogWriteFailed(
                    record=type(record).__name__, key=list(record.key), error=repr(exc))))

    def _fire(self, key: tuple) -> None:
        self._enqueue(key[1], ("timer", key))

    def _emit(self, ev: LogEvent) -> None:
        if self.events is not None:
            self.events.emit(ev)
