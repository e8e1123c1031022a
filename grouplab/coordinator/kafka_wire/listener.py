"""The Kafka-wire listener: an asyncio shell that lets real Kafka clients (kafka-python, aiokafka,
librdkafka, Java) talk to the same Broker as grouplab's msgpack port (docs/kafka-wire.md).

Per connection, as Kafka does: one request at a time, in order (the connection stops reading while
a request is in flight, so JoinGroup parked by a rebalance holds back what follows it); a frame
over `socket.request.max.bytes`, an unknown API key, a version outside the advertised range or a
body that does not decode closes the connection; nothing reaches the Broker before it decoded.

ApiVersions and FindCoordinator are answered here (they read no state; FindCoordinator names this
listener for every key). Everything else is translated (coordinator/kafka_wire/translate.py) and
handed to the host's `submit`, the same path as the msgpack port, so the event log, the message
trace and replay see it. A Fetch that would find nothing waits here, parked in a purgatory keyed
by partition (purgatory.py), until a step changes a partition it names enough to complete it or
max_wait_ms passes, and only then goes to the Broker. An OffsetFetch v8+
naming several groups goes as one OffsetFetch per group, each through its group's queue (a step,
a trace line and an answer of its own, as Kafka fetches each group on that group's coordinator
shard); their answers are gathered into the one response (`_GroupFetches`). What each Kafka
client holds, as its JoinGroup, SyncGroup answer and LeaveGroup show it (holdings.py), is written
in that client's own node of the event log, as grouplab's consumers write it about themselves.

Heavy requests take turns (issue 22, case 1): a frame of HEAVY_FRAME_BYTES or more (a Fetch naming
thousands of partitions, a large Produce) is decoded, translated and counted in a turn of its own,
after what was waiting on the loop (other connections' reads, the groups' queues, timers), at most
TURN_S of such work per turn, as the msgpack port's connections take turns (server.py). A hundred
wide Fetches arriving at once then delay a heartbeat by about one of them, not by all. A parked
Fetch keeps its Kafka frame (about 16 bytes a partition), not the decoded request, and is decoded
again when it is answered, in a turn of its own if heavy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Protocol

from grouplab.coordinator.broker import RequestContext
from grouplab.coordinator.data_plane import DataPlaneHost
from grouplab.coordinator.partition_log import LogChanges
from grouplab.coordinator.kafka_wire.codec import (
    CloseConnection,
    KafkaRequest,
    UnsupportedApiVersions,
    api_versions_response,
    decode_request,
    encode_response,
    frame_response,
    header_v1,
)
from grouplab.coordinator.kafka_wire.commit_decoder import decode_offset_commit
from grouplab.coordinator.kafka_wire.holdings import WireHoldings
from grouplab.coordinator.tally import RequestTally
from grouplab.coordinator.kafka_wire.purgatory import FetchPurgatory
from grouplab.coordinator.kafka_wire.records import DEFAULT_MESSAGE_MAX_BYTES, is_heavy
from grouplab.coordinator.kafka_wire.translate import (
    ClusterView, GroupFetches, GroupsFetched, Refused, View, find_coordinator_response, reuse_key, to_grouplab, to_kafka,
)
from grouplab.protocol.errors import ErrorCode, FrameTooLarge
from grouplab.protocol.framing import WRONG_PORT, FrameReader, grouplab_correlation_id
from grouplab.protocol.framing import encode_response as encode_grouplab_response
from grouplab.protocol import events
from grouplab.protocol.memory import gc_paused, trim_heap
from grouplab.protocol.messages import (
    ErrorResponse, FetchRequest, JoinGroupRequest, LeaveGroupRequest, MetadataRequest, OffsetCommitRequest, ProduceRequest,
    SyncGroupRequest, SyncGroupResponse,
)

_log = logging.getLogger("grouplab.kafka_wire")

# Encoded bodies of the answers a running group repeats (translate.reuse_key): built once through
# kafka-python, then framed with each request's correlation id. Bounded: emptied when full.
_ENCODED_BODIES: dict[tuple, tuple[bytes, bool]] = {}
_ENCODED_BODIES_MAX = 4096

# Threads that decode heavy Produce batches (compressed or large: records.is_heavy) off the event
# loop: the decode is pure, and up to ~1 s of building records must not stop the groups' timers.
DECODE_THREADS = 2

# A frame this large or larger is handled in a turn of the loop of its own (see the module's doc):
# a Fetch over ~4,000 partitions (v4: 16 bytes a partition), a Produce of 64 KiB.
HEAVY_FRAME_BYTES = 64 * 1024
# How long heavy work may hold the loop before other connections and the timers get a turn (one
# piece that takes longer is still done whole: one per turn, then). As server.TURN_S.
TURN_S = 0.005
# After a heavy parked Fetch goes (answered, expired, its client gone), malloc's free pages go back
# to the system this long after, once for all that went meanwhile (protocol/memory.trim_heap).
TRIM_AFTER_S = 1.0


class KafkaHost(Protocol):
    """What the listener needs of the coordinator server (coordinator/server.py)."""

    @property
    def broker(self) -> DataPlaneHost: ...

    port: int  # grouplab's own (msgpack) port, named to grouplab's tools that come here by mistake

    def submit(self, api: str, body: Any, ctx: RequestContext) -> None: ...

    def note_bad_frame(self, conn: Any, message: str) -> None: ...

    def note_client_event(self, client_id: str, payload: events.Event) -> None: ...

    def note_internal_error(self, exc: Exception) -> None: ...

    @property
    def tally(self) -> RequestTally | None: ...


class KafkaReplyTo:
    """The reply token of one Kafka request: the Broker hands it back in Reply; the connection
    encodes the answer at the request's API and version."""

    __slots__ = ("conn", "correlation_id", "request", "view", "api", "client_id", "body", "frame")

    def __init__(self, conn: "KafkaConnection | _GroupPart", request: KafkaRequest, view: View) -> None:
        self.conn = conn
        self.correlation_id = request.correlation_id
        self.request = request
        self.view = view
        self.api = request.api.name  # what the server's reply path names in its events
        self.client_id = request.client_id
        self.body: Any = None  # grouplab's request, once translated
        self.frame = b""  # a Fetch's Kafka frame, until it is parked or answered


class _GroupFetches:
    """The groups of one OffsetFetch v8+, each fetched by a request of its own; when the last answer
    is in, the connection sends them all as the request's one response, in request order."""

    __slots__ = ("conn", "correlation_id", "group_ids", "answers", "missing")

    def __init__(self, conn: "KafkaConnection", correlation_id: int, group_ids: list[str]) -> None:
        self.conn = conn
        self.correlation_id = correlation_id
        self.group_ids = group_ids
        self.answers: list[Any] = [None] * len(group_ids)
        self.missing = len(group_ids)

    def answer(self, index: int, body: Any) -> None:
        if self.answers[index] is not None:
            return  # one answer per group's request
        self.answers[index] = body
        self.missing -= 1
        if not self.missing:
            self.conn.send(self.correlation_id, GroupsFetched(list(zip(self.group_ids, self.answers))))


class _GroupPart:
    """What one group's OffsetFetch has for a connection (its reply token's `conn`): the peer the
    trace names, and a `send` that hands the answer to the gathering request."""

    __slots__ = ("batch", "index")

    def __init__(self, batch: _GroupFetches, index: int) -> None:
        self.batch = batch
        self.index = index

    @property
    def peer(self) -> str:
        return self.batch.conn.peer

    def send(self, correlation_id: int, body: Any, api: str = "", client_id: str = "") -> None:
        self.batch.answer(self.index, body)


class _ParkedFetch:
    """What the listener keeps of a parked Fetch besides the purgatory's count: its Kafka frame
    (decoded again when it is answered: compact, where the decoded request is an object a
    partition), its context and its max_wait_ms timer."""

    __slots__ = ("frame", "ctx", "timer")

    def __init__(self, frame: bytes, ctx: RequestContext, timer: asyncio.TimerHandle) -> None:
        self.frame = frame
        self.ctx = ctx
        self.timer = timer

    def request(self) -> FetchRequest:
        """grouplab's Fetch again, from the frame (it decoded and translated before it parked)."""
        token = self.ctx.reply_to
        request = decode_request(self.frame)
        assert isinstance(request, KafkaRequest)
        body = to_grouplab(request.api, request.version, request.body, token.view)
        assert isinstance(body, FetchRequest)
        return body


class KafkaListener:
    """The connections of one Kafka port and their parked Fetches."""

    def __init__(self, host: KafkaHost, max_frame_bytes: int, node_id: int,
                 message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES, cluster: ClusterView | None = None) -> None:
        self.host = host
        self.max_frame_bytes = max_frame_bytes
        self.node_id = node_id
        self.cluster = cluster  # a cluster of brokers (one listener each); None: the one broker
        self.message_max_bytes = message_max_bytes
        self.decoder: ThreadPoolExecutor | None = None  # made at the first heavy Produce
        # The most bytes any one connection held at once (frames read and not handled, answers not
        # yet taken by the client): what a client that never reads can make the server keep.
        self.peak_buffered_bytes = 0
        self.connections: set[KafkaConnection] = set()
        self.parked: dict[KafkaConnection, _ParkedFetch] = {}
        self.purgatory: FetchPurgatory[KafkaConnection] = FetchPurgatory()
        self.holdings = WireHoldings()
        self._waking = False
        self._changes: list[LogChanges] = []  # what steps changed, not yet looked at
        # Heavy work waiting for its turn, in lanes taken in rotation: a heavy frame's decoding
        # ("frames") and a heavy step of a small request ("steps", heavy_step), so a burst of one
        # kind does not hold the other back for all of it.
        self._turns: dict[str, deque[Callable[[], None]]] = {"frames": deque(), "steps": deque()}
        self._turn_due = False
        self._trim: asyncio.TimerHandle | None = None

    def protocol(self) -> "KafkaConnection":
        return KafkaConnection(self)

    def close_all(self) -> None:
        if self._trim is not None:
            self._trim.cancel()
            self._trim = None
        for parked in self.parked.values():
            parked.timer.cancel()
        self.parked.clear()
        self.purgatory.clear()
        for conn in list(self.connections):
            conn.close()
        if self.decoder is not None:
            self.decoder.shutdown(wait=False, cancel_futures=True)
            self.decoder = None

    def decode_off_loop(self) -> ThreadPoolExecutor:
        if self.decoder is None:
            self.decoder = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="grouplab-kafka-decode")
        return self.decoder

    def in_turn(self, work: Callable[[], None], lane: str = "frames") -> None:
        """Run `work` in a later turn of the loop, after what is waiting now and the requests read
        meanwhile (a timer due at once, set from a call_soon, runs after the reads and the group
        queues they fill; as server.after_others); heavy work runs in order within its lane, the
        lanes in rotation, TURN_S at a time."""
        self._turns[lane].append(work)
        if not self._turn_due:
            self._turn_due = True
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_later, 0, self._take_turn)

    def _waiting_turns(self) -> bool:
        return any(self._turns.values())

    def _next_turn(self) -> Callable[[], None]:
        """The first work of the next lane that has some; that lane then goes to the back."""
        for lane, works in list(self._turns.items()):
            if works:
                self._turns[lane] = self._turns.pop(lane)  # to the back of the rotation
                return works.popleft()
        raise LookupError("no heavy work waits")

    def _take_turn(self) -> None:
        """Heavy work for up to TURN_S, the cyclic collector paused: a wide request's thousands of
        objects live only while it is decoded and translated and are freed by reference counting;
        the collector would only walk them (protocol/memory.gc_paused)."""
        self._turn_due = False
        deadline = time.perf_counter() + TURN_S
        with gc_paused():
            while self._waiting_turns():
                work = self._next_turn()
                try:
                    work()
                except Exception as exc:  # pragma: no cover - a defect: reported, the other turns go on
                    _log.exception("heavy Kafka-wire work failed")
                    self.host.note_internal_error(exc)
                if time.perf_counter() >= deadline:
                    break
        if self._waiting_turns() and not self._turn_due:
            self._turn_due = True
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_later, 0, self._take_turn)

    def wake(self, changes: LogChanges) -> None:
        """A step changed these partitions (appended records or a marker) or deleted these topics:
        answer the parked Fetches watching them that are now complete; no other is looked at. The
        steps of the Fetches it releases run inside; what they change is looked at after."""
        if not changes or not self.parked:
            return
        self._changes.append(changes)
        if self._waking:
            return
        self._waking = True
        try:
            while self._changes:
                for conn in self.purgatory.changed(self.host.broker, self._changes.pop(0)):
                    self._release(conn)
        finally:
            self._waking = False

    def park(self, conn: "KafkaConnection", body: FetchRequest, ctx: RequestContext, frame: bytes) -> bool:
        """Park the Fetch unless it may be answered now; True when parked (then it is answered
        when the partitions it watches complete it, or at its max_wait_ms). What is kept is its
        frame, not `body`."""
        if self.cluster is not None and not all(self.cluster.nodes.leader(t.topic, p.partition) == self.node_id
                                                for t in body.topics for p in t.partitions):
            return False  # a partition it does not lead: answered at once, NOT_LEADER_OR_FOLLOWER (Kafka's too)
        if not self.purgatory.try_park(conn, body, self.host.broker):
            return False
        loop = asyncio.get_running_loop()
        timer = loop.call_later(body.max_wait_ms / 1000, self._release, conn)
        self.parked[conn] = _ParkedFetch(frame, ctx, timer)
        return True

    def _release(self, conn: "KafkaConnection") -> None:
        self.purgatory.remove(conn)
        parked = self.parked.pop(conn, None)
        if parked is None:
            return
        parked.timer.cancel()
        if conn.transport is None:
            return
        if len(parked.frame) >= HEAVY_FRAME_BYTES:
            self._trim_soon()
            self.in_turn(lambda: self._answer(conn, parked))
        else:
            self._answer(conn, parked)

    def _answer(self, conn: "KafkaConnection", parked: _ParkedFetch) -> None:
        if conn.transport is not None:
            self.host.submit("Fetch", parked.request(), parked.ctx)

    def forget(self, conn: "KafkaConnection") -> None:
        self.purgatory.remove(conn)
        parked = self.parked.pop(conn, None)
        if parked is not None:
            parked.timer.cancel()
            if len(parked.frame) >= HEAVY_FRAME_BYTES:
                self._trim_soon()
        self.connections.discard(conn)

    def _trim_soon(self) -> None:
        """A heavy parked Fetch went: give malloc's free pages back in a moment, once for all that
        go meanwhile (a hundred clients closing together trim once)."""
        if self._trim is None:
            self._trim = asyncio.get_running_loop().call_later(TRIM_AFTER_S, self._trim_now)

    def _trim_now(self) -> None:
        self._trim = None
        trim_heap()


class KafkaConnection(asyncio.Protocol):
    def __init__(self, listener: KafkaListener) -> None:
        self.listener = listener
        self.reader = FrameReader(listener.max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.peer_host = ""
        self.local: tuple[str, int] = ("127.0.0.1", 0)
        self._commit_view: View | None = None  # made at the first OffsetCommit (_commit)
        self.pending: deque[bytes] = deque()  # frames read, not yet handled
        self.pending_bytes = 0
        self.inflight: KafkaReplyTo | None = None
        self.writing_paused = False  # the client is not taking its answers: no next request (muted)
        self.heavy_waiting = False  # a heavy frame waits for its turn (listener.in_turn): no next request
        self.encoding = False  # a heavy answer is being encoded on a thread: no next request yet
        # Answers to a pipelined run of Heartbeats and OffsetCommits, written together (_flush).
        self.outbox: list[bytes] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.peer_host = self.peer.rsplit(":", 1)[0]  # what each request's context names
        local = transport.get_extra_info("sockname")
        if local:
            self.local = (local[0], local[1])  # advertised to this client: the address it reached
        self.listener.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.outbox.clear()
        self.pending.clear()
        self.pending_bytes = 0
        self.writing_paused = False
        self.listener.forget(self)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.reader.feed(data)
        except FrameTooLarge as exc:
            self._queue(exc.frames)
            self._pump()
            self._refuse(exc.message)
            return
        self._queue(frames)
        self._pump()

    def _queue(self, frames: list[bytes]) -> None:
        self.pending.extend(frames)
        self.pending_bytes += sum(map(len, frames))

    def pause_writing(self) -> None:
        """The transport's write buffer passed its high-water mark: the client is not reading."""
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._pump()

    def buffered_bytes(self) -> int:
        """What this connection holds in the server: frames read and not handled, a partial frame,
        answers not yet taken by the client."""
        transport = self.transport
        written = transport.get_write_buffer_size() if transport is not None else 0
        return self.pending_bytes + self.reader.buffered + written + sum(map(len, self.outbox))

    def close(self) -> None:
        if self.transport is not None:
            self._flush()
            self.transport.close()

    def _refuse(self, message: str) -> None:
        """Kafka's answer to a request it cannot read: the connection closes, nothing changes."""
        self.listener.host.note_bad_frame(self, f"kafka wire: {message}")
        self.close()

    # ------------------------------------------------------------------ one request at a time

    def _pump(self) -> None:
        """Handle the next request if none is in flight and the client takes its answers (Kafka
        mutes a connection while its answer waits to be written); stop reading while frames wait,
        so what one connection holds is one read's frames and one answer past the write buffer's
        high-water mark. A heavy frame waits for a turn of its own (listener.in_turn)."""
        while (self.inflight is None and not self.encoding and not self.writing_paused and not self.heavy_waiting
               and self.pending and self.transport is not None):
            frame = self.pending.popleft()
            self.pending_bytes -= len(frame)
            if len(frame) >= HEAVY_FRAME_BYTES:
                self.heavy_waiting = True
                self.listener.in_turn(lambda: self._heavy_turn(frame))
                break
            self._handle(frame)
        if self.outbox and not self._coalescing():
            self._flush()
        if self.transport is not None:
            if (self.inflight is not None or self.encoding or self.writing_paused or self.heavy_waiting) and self.pending:
                self.transport.pause_reading()
            elif not self.transport.is_closing():
                self.transport.resume_reading()

    def _heavy_turn(self, frame: bytes) -> None:
        self.heavy_waiting = False
        if self.transport is None:
            return  # the client went while its request waited: nothing to answer
        self._handle(frame)
        self._pump()

    def _view(self) -> View:
        return View(host=self.local[0], port=self.local[1], node_id=self.listener.node_id,
                    message_max_bytes=self.listener.message_max_bytes, cluster=self.listener.cluster)

    def _handle(self, frame: bytes) -> None:
        commit = decode_offset_commit(frame)
        if commit is not None:  # the commonest request of a running group, read straight into grouplab's
            self._commit(*commit)
            return
        try:
            request = decode_request(frame)
        except CloseConnection as exc:
            cid = grouplab_correlation_id(frame)
            if cid is not None:  # grouplab's own tool on this port: tell it, in its protocol, where to go
                message = (f"{WRONG_PORT} (Kafka's protocol, for Kafka clients); grouplab's own tools connect "
                           f"to its port {self.listener.host.port} (--port)")
                self._write(encode_grouplab_response(cid, ErrorResponse(ErrorCode.INVALID_REQUEST, message)))
                self._refuse(f"a grouplab client on the Kafka-wire port: {message}")
                return
            self._refuse(str(exc))
            return
        if isinstance(request, UnsupportedApiVersions):
            self._write(encode_response(api_versions_response(0, ErrorCode.UNSUPPORTED_VERSION),
                                        request.correlation_id))
            return
        name = request.api.name
        if name == "ApiVersions":
            self._write(encode_response(api_versions_response(request.version), request.correlation_id))
            return
        view = self._view()
        tally = self.listener.host.tally
        if name == "FindCoordinator":
            found = find_coordinator_response(request.api, request.version, request.body, view)
            if tally is not None:
                tally.request(request.client_id, name)
                tally.answered_codes(request.client_id, name, [getattr(found, "error_code", 0) or 0] + [
                    c.error_code for c in getattr(found, "coordinators", None) or []])
            self._write(encode_response(found, request.correlation_id))
            return
        token = KafkaReplyTo(self, request, view)
        if name == "Fetch":
            token.frame = frame
        if name == "Produce" and _heavy_produce(request.body):
            self._translate_off_loop(token)
            return
        try:
            body = to_grouplab(request.api, request.version, request.body, view)
        except Exception as exc:  # noqa: BLE001 - Refused, or a value the translation cannot take
            self._translated(token, None, exc)
            return
        self._translated(token, body, None)

    def _commit(self, request: KafkaRequest, body: OffsetCommitRequest) -> None:
        """What _translated does with an OffsetCommit, without asking what else it might be; its
        View is the connection's one for commits (an OffsetCommit's answer reads nothing of it
        that a request changes)."""
        view = self._commit_view
        if view is None:
            view = self._commit_view = self._view()
        token = KafkaReplyTo(self, request, view)
        token.body = body
        self.inflight = token
        self.listener.host.submit("OffsetCommit", body, RequestContext(token, request.client_id, self.peer_host,
                                                                       self.listener.node_id))

    def _translate_off_loop(self, token: KafkaReplyTo) -> None:
        """A Produce whose batches take long to decode (records.is_heavy): decoded on a thread, the
        connection holding its place (in flight) meanwhile; the rest of the request goes on here."""
        request = token.request
        self.inflight = token
        assert self._loop is not None
        future = self._loop.run_in_executor(self.listener.decode_off_loop(), to_grouplab, request.api,
                                            request.version, request.body, token.view)

        def done(f: "asyncio.Future[Any]") -> None:
            self.inflight = None
            if self.transport is None or f.cancelled():
                return
            exc = f.exception()
            self._translated(token, None if exc is not None else f.result(), exc)
            self._pump()

        future.add_done_callback(done)

    def _translated(self, token: KafkaReplyTo, body: Any, exc: BaseException | None) -> None:
        request, view, name = token.request, token.view, token.request.api.name
        if isinstance(exc, Refused):
            tally = self.listener.host.tally
            if tally is not None:  # refused before the Broker: counted here, as the server counts the rest
                tally.request(request.client_id, name)
                tally.answered(request.client_id, name, exc.body)
            self._write(encode_response(to_kafka(request.api, request.version, exc.body, view),
                                        request.correlation_id))
            return
        if exc is not None:  # a value the translation cannot take: refused as unreadable
            self._refuse(f"{name} v{request.version}: {exc!r}")
            return
        ctx = RequestContext(token, request.client_id, self.peer_host, self.listener.node_id)
        frame, token.frame = token.frame, b""
        if isinstance(body, FetchRequest):  # a parked Fetch keeps its frame only (_ParkedFetch)
            token.request = dataclasses.replace(request, body=None)
        else:
            token.body = body
        if isinstance(body, JoinGroupRequest):  # what it no longer lists as owned, it revoked before asking
            self._note(request.client_id, self.listener.holdings.joining(body))
        elif isinstance(body, LeaveGroupRequest):
            self._note(request.client_id, self.listener.holdings.leaving(body))
        self.inflight = token
        if name == "Produce" and isinstance(body, ProduceRequest) and body.acks == 0:
            self.inflight = None  # no answer is coming: the next request may start
            self.listener.host.submit(name, body, ctx)
            return
        if isinstance(body, FetchRequest) and self.listener.park(self, body, ctx, frame):
            return
        if isinstance(body, GroupFetches):
            self._fetch_groups(request, body, view)
            return
        if heavy_step(body, self.listener.host.broker):
            self.listener.in_turn(lambda: self._submit_now(name, body, ctx), lane="steps")
            return
        self.listener.host.submit(name, body, ctx)

    def _submit_now(self, name: str, body: Any, ctx: RequestContext) -> None:
        if self.transport is not None:  # not if the client went while its request waited for its turn
            self.listener.host.submit(name, body, ctx)

    def _fetch_groups(self, request: KafkaRequest, body: GroupFetches, view: View) -> None:
        """OffsetFetch v8+: each group's OffsetFetch on that group's queue; one response when all are in."""
        batch = _GroupFetches(self, request.correlation_id, [r.group_id for r in body.requests])
        if not body.requests:
            self.send(request.correlation_id, GroupsFetched([]))
            return
        host = self.peer_host
        for index, sub in enumerate(body.requests):
            token = KafkaReplyTo(_GroupPart(batch, index), request, view)
            token.body = sub
            self.listener.host.submit("OffsetFetch", sub, RequestContext(token, request.client_id, host,
                                                                         self.listener.node_id))

    # ------------------------------------------------------------------ answers

    def send(self, correlation_id: int, body: Any, api: str = "", client_id: str = "") -> None:
        """The Broker's answer (or the server's ErrorResponse) to the request in flight."""
        token = self.inflight
        if token is None or token.correlation_id != correlation_id:
            return  # an answer to nothing in flight (acks=0 Produce's never comes): nothing to send
        if self.transport is None:
            self.inflight = None
            return  # the client went while its request ran: no one to encode the answer for
        request = token.request
        key = reuse_key(request.api.name, request.version, body)
        cached = _ENCODED_BODIES.get(key) if key is not None else None
        if cached is not None and self._loop is not None:
            # A running group's Heartbeat or OffsetCommit answer: framed, not encoded, and kept with
            # the answers around it in a pipelined run; the next request's _pump writes them.
            self.inflight = None
            self.outbox.append(frame_response(cached[0], cached[1], correlation_id))
            self._loop.call_soon(self._pump)
            return
        if self._loop is not None and heavy_answer(body):
            self.encoding = True  # holds the connection's place: its next request waits for this answer
            self.inflight = None
            future = self._loop.run_in_executor(self.listener.decode_off_loop(), self._encode, token, body,
                                                correlation_id)
            future.add_done_callback(lambda f: self._encoded(token, body, f))
            return
        self.inflight = None
        try:
            data = self._encode(token, body, correlation_id)
        except Exception as exc:  # noqa: BLE001 - a defect in translation: the client sees a closed connection
            self._encode_failed(token, exc)
            return
        self._answered(token, body, data)
        if self._loop is not None:
            self._loop.call_soon(self._pump)  # not inside the Broker step that answered

    def _encoded(self, token: KafkaReplyTo, body: Any, future: "asyncio.Future[bytes]") -> None:
        """A heavy answer encoded on a thread: written now, then the connection's next request."""
        self.encoding = False
        if self.transport is None or future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            self._encode_failed(token, exc)
            return
        self._answered(token, body, future.result())
        self._pump()

    def _encode_failed(self, token: KafkaReplyTo, exc: BaseException) -> None:
        """A defect in translation: the client sees a closed connection."""
        _log.error("encoding a %s response failed", token.request.api.name, exc_info=exc)
        self._refuse(f"cannot encode the {token.request.api.name} response: {exc!r}")

    def _answered(self, token: KafkaReplyTo, body: Any, data: bytes) -> None:
        self._write(data)
        if isinstance(body, SyncGroupResponse) and isinstance(token.body, SyncGroupRequest):
            self._note(token.client_id, self.listener.holdings.synced(token.body, body))

    def _note(self, client_id: str, lines: list[events.Event]) -> None:
        for payload in lines:
            self.listener.host.note_client_event(client_id, payload)

    @staticmethod
    def _encode(token: KafkaReplyTo, body: Any, correlation_id: int) -> bytes:
        api, version = token.request.api, token.request.version
        key = reuse_key(api.name, version, body)
        if key is None:
            return encode_response(to_kafka(api, version, body, token.view), correlation_id)
        encoded = _ENCODED_BODIES.get(key)
        if encoded is None:
            response = to_kafka(api, version, body, token.view)
            encoded = (bytes(response.encode()), header_v1(response))
            if len(_ENCODED_BODIES) >= _ENCODED_BODIES_MAX:
                _ENCODED_BODIES.clear()
            _ENCODED_BODIES[key] = encoded
        return frame_response(encoded[0], encoded[1], correlation_id)

    def _write(self, data: bytes) -> None:
        if self.outbox:
            self._flush()  # the answers before this one go first
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)
            held = self.buffered_bytes()
            if held > self.listener.peak_buffered_bytes:
                self.listener.peak_buffered_bytes = held

    def _coalescing(self) -> bool:
        """Keep the answers in the outbox a little longer? Only while the client's pipelined run of
        prompt requests goes on: the request now in flight is a Heartbeat or an OffsetCommit, which
        the group answers within a turn or two of the loop, more wait behind it, and the outbox is
        short. Anything else (a JoinGroup held for seconds, a parked Fetch) first lets the answers
        before it go: a client never waits on an answer the server has."""
        token = self.inflight
        return (token is not None and bool(self.pending) and len(self.outbox) < OUTBOX_ANSWERS
                and token.request.api.name in _PROMPT)

    def _flush(self) -> None:
        """The outbox's answers in one write: one system call and one wake-up of the client where
        there were one per answer (a client pipelining commits sends a hundred in one read)."""
        data, self.outbox = b"".join(self.outbox), []
        self._write(data)


# Kept answers written together at most this many at a time (_coalescing): ~0.3 ms of the loop each.
OUTBOX_ANSWERS = 16
_PROMPT = frozenset({"Heartbeat", "OffsetCommit"})


# An answer with more entries than this (partitions, records, groups, members...; a bytes field
# counts one per HEAVY_ANSWER_BYTES_PER_ENTRY bytes) is encoded on a thread: building and encoding
# kafka-python's objects costs ~7 us an entry, so a 20,000-partition Metadata answer held the loop
# ~150 ms, and a storm of them from several connections held it for seconds (issue 22, case 5).
HEAVY_ANSWER_ENTRIES = 2000
HEAVY_ANSWER_BYTES_PER_ENTRY = 256


def heavy_answer(body: Any, limit: int = HEAVY_ANSWER_ENTRIES) -> bool:
    """Does grouplab's answer hold more than `limit` entries? Counts down from `limit` and stops as
    soon as it is passed, so the check itself costs at most `limit` steps. Every answer goes
    through it, so a class's fields are looked up once (_fields_of), not per value."""
    budget = limit
    stack = [body]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind in _LEAVES:
            continue
        if kind is list or kind is tuple or (isinstance(value, (list, tuple)) and _fields_of(kind) is None):
            budget -= len(value)
            if budget < 0:
                return True
            stack.extend(value)
        elif kind is bytes or kind is bytearray or kind is memoryview:
            budget -= len(value) // HEAVY_ANSWER_BYTES_PER_ENTRY
            if budget < 0:
                return True
        else:
            names = _fields_of(kind)
            if names:
                stack.extend([getattr(value, name) for name in names])
    return False


_LEAVES = frozenset({int, str, bool, float, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _fields_of(kind: type) -> tuple[str, ...] | None:
    """A dataclass's field names (None for anything else), found once per class."""
    try:
        return _FIELD_NAMES[kind]
    except KeyError:
        names = tuple(f.name for f in dataclasses.fields(kind)) if dataclasses.is_dataclass(kind) else None
        _FIELD_NAMES[kind] = names
        return names


def heavy_step(body: Any, broker: DataPlaneHost, limit: int = HEAVY_ANSWER_ENTRIES) -> bool:
    """Will the Broker's step for this small request build a heavy answer? A Metadata naming
    topics (or all of them) with more than `limit` partitions in all: its step builds every
    partition's entry, ~50 ms for 20,000, and several connections asking at once held the loop for
    all of them back to back (issue 22, case 5). Such a step waits for a turn of its own
    (`in_turn`), so others' requests are read and answered between them."""
    if not isinstance(body, MetadataRequest):
        return False
    counts = broker.topics.partitions
    if body.topics is None:
        total = sum(counts.values())
    else:
        total = sum(counts.get(name, 0) for name in {t.name for t in body.topics})
    return total > limit


def _heavy_produce(body: Any) -> bool:
    return any(is_heavy(p.records) for t in body.topic_data or [] for p in t.partition_data or [])

