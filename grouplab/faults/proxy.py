"""FaultProxy: a TCP proxy between the clients and the coordinator that injects faults per frame.

Clients connect to the proxy instead of the coordinator. Each client connection gets its own
upstream connection to the coordinator; the pair is a *link*, named after the client id of its
first request (`consumer-1#1`, `consumer-1#2` after a reconnect, ...). The proxy splits both
directions into frames with the protocol's FrameReader and reads just the envelope (API name,
correlation id, client id), so rules can pick requests by API and responses by the API of the
request they answer: the model is franz-go kfake's ControlKey(api, fn). The coordinator and the
consumers are untouched; no fault is ever a flag inside protocol logic.

    proxy = await FaultProxy("127.0.0.1", server.port, seed=7).start()
    rule = proxy.add_rule("Heartbeat", "drop", p=0.5)          # or proxy.drop("Heartbeat", p=0.5)
    proxy.add_rule("*", "delay", delay_ms=(100, 300))
    proxy.hold("SyncGroup", link="consumer-1"); ...; proxy.release(api="SyncGroup")
    proxy.disconnect_on("Heartbeat", link="consumer-2", limit=1)   # reset the link a heartbeat came on
    proxy.partition("consumer-2"); ...; proxy.heal()
    proxy.isolate("consumer-2"); ...; proxy.heal("consumer-2")      # its links reset, reconnects refused
    proxy.remove(rule); proxy.clear()

Per link and direction, frames leave in the order they arrived (a delay is latency, not
reordering); `reorder` and `hold` are the only ways to change the order. Bytes the proxy cannot
parse are passed through untouched (no rule applies to them; link-level faults still do).
"""

from __future__ import annotations

import asyncio
import random
import struct
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from grouplab.faults.rules import (Envelope, Fate, FaultSpecError, LinkId, Rule, RuleSet, delay_range, error_code_of,
                                   error_response, link_matches, parse_spec)
from grouplab.protocol.effects import LogEvent, wall_clock_ms
from grouplab.protocol.events import FreeFormEvent
from grouplab.protocol.errors import FrameTooLarge, ProtocolError
from grouplab.faults.kafka_frames import error_frame, request_meta, response_correlation_id, rewrite_advertised
from grouplab.protocol.framing import FrameReader, encode_response, read_response, unpack

# Larger than any endpoint's limit (the server's socket.request.max.bytes, the client's 64 MiB), so
# the endpoints, not the proxy, decide about big frames. A declared length beyond it switches that
# direction of the link to raw pass-through.
MAX_FRAME_BYTES = 64 * 1024 * 1024
_LEN = struct.Struct(">I")
_EPSILON_S = 0.001


@dataclass(eq=False)
class Held:
    """A frame parked by a `hold` rule until `FaultProxy.release`."""

    link: "Link"
    direction: str
    api: str
    correlation_id: int
    rule: Rule
    data: bytes

    @property
    def client_id(self) -> str:
        return self.link.client_id


class _Pipe:
    """One direction of a link: bytes in, frames parsed, rules applied, frames out in order."""

    def __init__(self, link: "Link", direction: str) -> None:
        self.link = link
        self.proxy = link.proxy
        self.direction = direction  # "request": client -> coordinator; "response": back
        self.reader: FrameReader | None = FrameReader(MAX_FRAME_BYTES)
        self.queue: deque[tuple[float, bytes]] = deque()
        self.tail_due = 0.0
        self.handle: asyncio.TimerHandle | None = None
        self.parked: list[tuple[bytes, tuple | None]] = []  # while the proxy is paused
        self.stash: tuple[bytes, tuple | None] | None = None  # a reordered frame
        self.stash_handle: asyncio.TimerHandle | None = None
        self.close_when_drained = False

    # ------------------------------------------------------------------ in

    def feed(self, data: bytes) -> None:
        if self.reader is None:
            self._arrive(data, None)
            return
        try:
            frames = self.reader.feed(data)
        except FrameTooLarge as exc:
            for payload in exc.frames:
                self._guarded(payload)
            rest = self.leftover()
            self.reader = None  # from here on: raw bytes, passed through as they come
            self.proxy._event("link_unparseable", link=self.link.name, client_id=self.link.client_id,
                              direction=self.direction, error=exc.message)
            if rest:
                self._arrive(rest, None)
            return
        for payload in frames:
            self._guarded(payload)

    def _guarded(self, payload: bytes) -> None:
        """A defect in the proxy must not cost the link: the frame goes on untouched."""
        try:
            self._on_payload(payload)
        except Exception as exc:  # pragma: no cover - a defect, reported in the event log
            self.proxy._event("proxy_internal_error", link=self.link.name, direction=self.direction, error=repr(exc))
            self.send(_LEN.pack(len(payload)) + payload, 0.0)

    def leftover(self) -> bytes:
        """Bytes of an incomplete frame the reader still buffers (FrameReader keeps them in `_buf`)."""
        return bytes(self.reader._buf) if self.reader is not None else b""

    def _on_payload(self, payload: bytes) -> None:
        if self.proxy.wire == "kafka":
            self._on_kafka_payload(payload)
            return
        data = _LEN.pack(len(payload)) + payload
        meta: tuple | None = None
        if self.direction == "request":
            try:
                raw = unpack(payload)
            except ProtocolError:
                raw = None
            if isinstance(raw, dict):
                api, cid, client_id = raw.get("api"), raw.get("correlation_id"), raw.get("client_id", "")
                if isinstance(api, str) and isinstance(cid, int) and not isinstance(cid, bool):
                    meta = (api, cid)
                if isinstance(client_id, str) and not self.link.identified:
                    self.proxy._identify(self.link, client_id)
        else:
            try:
                cid, body = read_response(payload)
            except ProtocolError:
                cid = None
            if cid is not None:
                api = self.link.answered(cid)
                if api is not None:
                    meta = (api, cid)
                    if self.proxy.advertise is not None and api in ("Metadata", "FindCoordinator"):
                        data = _readvertised(cid, body, self.proxy.advertise, data)
        self._arrive(data, meta)

    def _on_kafka_payload(self, payload: bytes) -> None:
        """Kafka's frames: the request header names API, version and client id; a response only
        its correlation id, so the link remembers what each asked (and at which version, for an
        error rule's answer and the rewritten broker address)."""
        meta: tuple | None = None
        if self.direction == "request":
            req = request_meta(payload)
            if req is not None:
                meta = (req.api, req.correlation_id)
                self.link.versions[req.correlation_id] = req.version
                if req.client_id and not self.link.identified:
                    self.proxy._identify(self.link, req.client_id)
        else:
            cid = response_correlation_id(payload)
            api = self.link.answered(cid) if cid is not None else None
            if api is not None and cid is not None:
                version = self.link.versions.pop(cid, 0)
                meta = (api, cid, version)  # the version an error rule's answer is encoded at
                payload = rewrite_advertised(api, version, payload, self.proxy.host, self.proxy.port,
                                             self.proxy.advertise)
        self._arrive(_LEN.pack(len(payload)) + payload, meta)

    def _arrive(self, data: bytes, meta: tuple | None) -> None:
        if self.proxy.paused:
            self.parked.append((data, meta))
        else:
            self.process(data, meta)

    # ------------------------------------------------------------------ rules

    def process(self, data: bytes, meta: tuple | None) -> None:
        link, proxy = self.link, self.proxy
        if link.closed or link.aborted:
            return
        if proxy._isolated(link):  # a link not yet identified when its client was isolated
            link.abort("isolated")
            return
        if proxy._partitioned(link):
            proxy.partition_dropped += 1
            return
        api, cid = meta[:2] if meta is not None else (None, None)
        decision = proxy.rules.decide(Envelope(api, self.direction), LinkId(link.client_id, link.name), link.rng,
                                      reorder_waiting=self.stash is not None)
        for fired in decision.fired:
            if fired.action != "delay":  # delays fire on nearly every frame: counted, not logged
                self._report(fired, api, cid)
        delay_s, fate = decision.delay_ms / 1000, decision.fate
        if fate is Fate.DELIVER:
            for _ in range(decision.copies):
                self.send_frame(data, meta, delay_s)
            if self.stash is not None:
                self._flush_stash(delay_s)
            return
        rule = decision.rule
        assert rule is not None and api is not None and cid is not None
        if fate is Fate.ERROR:
            self._answer_error(rule, api, cid, delay_s, data, meta[2] if meta is not None and len(meta) > 2 else None)
        elif fate is Fate.HOLD:
            proxy.held.append(Held(link, self.direction, api, cid, rule, data))
        elif fate is Fate.REORDER:
            self.stash = (data, meta)
            self.stash_handle = proxy._loop.call_later(rule.wait_ms / 1000, self._flush_stash)
        elif fate is Fate.DISCONNECT:
            # A reset, as a broker or a network does one: this frame and whatever else is still
            # delayed, stashed or parked on the link are lost; the client reconnects.
            link.abort(f"reset by fault rule {rule.spec()}")
        # Fate.DROP: never forwarded

    def _report(self, rule: Rule, api: str | None, cid: int | None) -> None:
        self.proxy._event("fault_injected", rule=rule.spec(), action=rule.action, api=api, direction=self.direction,
                          link=self.link.name, client_id=self.link.client_id, correlation_id=cid)

    def _answer_error(self, rule: Rule, api: str, cid: int, delay_s: float, data: bytes,
                      response_version: int | None = None) -> None:
        """`response_version`: for a response replaced by the error, the version its request was
        sent at (the link forgot it when the response arrived)."""
        assert rule.error_code is not None
        body = error_response(api, rule.error_code, "the fault proxy")
        if self.proxy.wire == "kafka":
            if self.direction == "request":
                version = self.link.versions.pop(cid, 0)
                request, response = data[_LEN.size:], None  # what an answer naming the request's items reads
            else:
                version = response_version if response_version is not None else 0
                request, response = None, data[_LEN.size:]  # or the answer it replaces, naming the same
            kafka_frame = error_frame(api, version, cid, body, self.proxy.host, self.proxy.port, request, response)
            if kafka_frame is None:
                return  # an answer this API cannot carry as an error: the frame is dropped instead
            frame = kafka_frame
        else:
            frame = encode_response(cid, body)
        if self.direction == "request":
            # Answered in the coordinator's place: the request never reaches it.
            self.link.pipes["response"].send_frame(frame, (api, cid), delay_s)
        else:
            # The coordinator did act on the request; the client is told otherwise.
            self.send_frame(frame, (api, cid), delay_s)

    def _flush_stash(self, delay_s: float = 0.0) -> None:
        if self.stash_handle is not None:
            self.stash_handle.cancel()
            self.stash_handle = None
        stash, self.stash = self.stash, None
        if stash is not None and not self.link.closed and not self.link.aborted:
            self.send_frame(stash[0], stash[1], delay_s)

    # ------------------------------------------------------------------ out

    def send_frame(self, data: bytes, meta: tuple | None, delay_s: float) -> None:
        api = meta[0] if meta is not None else "?"
        self.proxy.forwarded[(api, self.direction)] += 1
        if self.direction == "request" and meta is not None:
            self.link.expect(meta[1], meta[0])
        self.send(data, delay_s)

    def send(self, data: bytes, delay_s: float) -> None:
        """Write `data` `delay_s` from now, but never before what is already queued (FIFO)."""
        loop = self.proxy._loop
        now = loop.time()
        due = max(now + delay_s, self.tail_due)
        self.tail_due = due
        if not self.queue and due <= now + _EPSILON_S:
            self._write(data)
            return
        self.queue.append((due, data))
        if self.handle is None:
            self.handle = loop.call_at(self.queue[0][0], self._drain)

    def _drain(self) -> None:
        self.handle = None
        now = self.proxy._loop.time()
        while self.queue and self.queue[0][0] <= now + _EPSILON_S:
            self._write(self.queue.popleft()[1])
        if self.queue:
            self.handle = self.proxy._loop.call_at(self.queue[0][0], self._drain)
        elif self.close_when_drained:
            self._close_target()

    def _write(self, data: bytes) -> None:
        link = self.link
        if link.aborted:
            return
        if self.proxy._partitioned(link):
            self.proxy.partition_dropped += 1
            return
        target: asyncio.Transport | None
        if self.direction == "request":
            if link.upstream is None:
                if link.upstream_pending:
                    link.backlog.append(data)
                return
            target = link.upstream
        else:
            target = link.client
        if target is not None and not target.is_closing():
            target.write(data)

    def _close_target(self) -> None:
        target = self.link.upstream if self.direction == "request" else self.link.client
        if target is not None and not target.is_closing():
            target.close()

    def finish(self, graceful: bool) -> None:
        """The source side of this pipe closed: close the target too, after what is queued if graceful."""
        self.parked.clear()
        if graceful and self.queue:
            self.close_when_drained = True
            return
        self.stop()
        target = self.link.upstream if self.direction == "request" else self.link.client
        if target is not None and not target.is_closing():
            target.close() if graceful else target.abort()

    def stop(self) -> None:
        for handle in (self.handle, self.stash_handle):
            if handle is not None:
                handle.cancel()
        self.handle = self.stash_handle = None
        self.queue.clear()
        self.stash = None
        self.parked.clear()


class _ClientSide(asyncio.Protocol):
    def __init__(self, proxy: "FaultProxy") -> None:
        self.proxy = proxy
        self.link: Link | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.link = self.proxy._accept(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        if self.link is not None:
            self.link.pipes["request"].feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.link is not None:
            self.link.side_lost("client", exc)


class _UpstreamSide(asyncio.Protocol):
    def __init__(self, link: "Link") -> None:
        self.link = link

    def data_received(self, data: bytes) -> None:
        self.link.pipes["response"].feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.link.side_lost("upstream", exc)


def _readvertised(cid: int, body: Any, advertise: dict[int, tuple[str, int]], frame: bytes) -> bytes:
    """A grouplab-protocol Metadata or FindCoordinator answer of a cluster's broker, with each broker
    it names at its own proxy's address (Kafka-wire answers: kafka_frames.rewrite_advertised). A
    body of another shape passes as it came."""
    if not isinstance(body, dict):
        return frame
    named = [*(body.get("brokers") or []), *(body.get("coordinators") or [])]
    if "node_id" in body:
        named.append(body)
    changed = False
    for entry in named:
        node = entry.get("node_id") if isinstance(entry, dict) else None
        if isinstance(node, int) and node in advertise:
            entry["host"], entry["port"] = advertise[node]
            changed = True
    if not changed:
        return frame
    return encode_response(cid, body)  # with its length prefix


class Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: "FaultProxy", number: int, client: asyncio.Transport) -> None:
        self.proxy = proxy
        self.number = number  # accept order over the proxy's lifetime
        self.client_id = ""
        self.index = 0  # this client id's n-th link
        self.identified = False
        self.rng = proxy.rng  # until identified; then its own, derived from the seed and the name
        self.client: asyncio.Transport | None = client
        self.upstream: asyncio.Transport | None = None
        self.upstream_pending = True
        self.backlog: list[bytes] = []
        self.pipes = {"request": _Pipe(self, "request"), "response": _Pipe(self, "response")}
        self._expected: dict[int, list] = {}  # correlation id -> [api, responses still expected]
        self.versions: dict[int, int] = {}  # Kafka wire: correlation id -> the request's version
        self.lost_gracefully = True
        self.closed = False
        self.aborted = False  # reset by the proxy: nothing more goes through, either way
        self.reset_why: str | None = None  # why it was reset, for its link_closed event

    @property
    def name(self) -> str:
        return f"{self.client_id}#{self.index}" if self.identified else f"?#{self.number}"

    def __repr__(self) -> str:
        return f"Link({self.name})"

    def expect(self, cid: int, api: str) -> None:
        entry = self._expected.get(cid)
        if entry is None or entry[0] != api:
            self._expected[cid] = [api, 1]
        else:
            entry[1] += 1

    def answered(self, cid: int) -> str | None:
        entry = self._expected.get(cid)
        if entry is None:
            return None
        entry[1] -= 1
        if entry[1] <= 0:
            del self._expected[cid]
        return entry[0]

    async def connect_upstream(self) -> None:
        loop = self.proxy._loop
        try:
            transport, _ = await loop.create_connection(lambda: _UpstreamSide(self), self.proxy.upstream_host,
                                                        self.proxy.upstream_port)
        except OSError as exc:
            self.upstream_pending = False
            self.proxy._event("upstream_connect_failed", link=self.name, error=str(exc))
            if self.client is not None:
                self.client.abort()  # the client sees its connection reset
            self._maybe_closed("upstream", exc)
            return
        self.upstream_pending = False
        if self.aborted:  # reset while it connected: the coordinator sees a connection reset at once
            transport.abort()
            return
        self.upstream = transport
        backlog, self.backlog = self.backlog, []
        for data in backlog:
            transport.write(data)
        if self.client is None:  # the client went away while we connected
            self.pipes["request"].finish(self.lost_gracefully)

    def side_lost(self, side: str, exc: Exception | None) -> None:
        graceful = exc is None and not self.aborted  # an aborted transport reports no exception
        if side == "client":
            self.client = None
            self.lost_gracefully = graceful
            self.pipes["response"].stop()
            pipe = self.pipes["request"]
            if graceful:
                rest = pipe.leftover()  # a truncated frame: its bytes go on, as they would on a wire
                if rest:
                    pipe.send(rest, 0.0)
            if not self.upstream_pending:
                pipe.finish(graceful)
        else:
            self.upstream = None
            self.pipes["request"].stop()
            self.pipes["response"].finish(graceful)
        self._maybe_closed(side, exc)

    def _maybe_closed(self, side: str, exc: Exception | None) -> None:
        if self.closed or self.client is not None or self.upstream is not None or self.upstream_pending:
            return
        self.closed = True
        for pipe in self.pipes.values():
            pipe.stop()
        why = self.reset_why or f"{side} closed" + (f" ({type(exc).__name__})" if exc is not None else "")
        self.proxy._forget(self, why)

    def abort(self, why: str | None = None) -> None:
        """Reset both connections (a crashed network path): nothing queued is delivered, and
        nothing that arrives after is forwarded (bytes already read, a connect in progress).
        `why` goes into its `link_closed` event."""
        if why is not None and self.reset_why is None:
            self.reset_why = why
        self.aborted = True
        self.backlog.clear()
        for pipe in self.pipes.values():
            pipe.stop()
        for transport in (self.client, self.upstream):
            if transport is not None:
                transport.abort()


class FaultProxy:
    """A fault-injecting TCP proxy in front of one coordinator. See the module docstring."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        seed: int | None = None,
        events: Any = None,
        clock: Callable[[], int] = wall_clock_ms,
        wire: str = "msgpack",
        advertise: dict[int, tuple[str, int]] | None = None,
    ) -> None:
        if wire not in ("msgpack", "kafka"):
            raise ValueError(f"wire must be 'msgpack' or 'kafka', not {wire!r}")
        # "kafka": in front of the Kafka-wire listener, reading Kafka's frames (grouplab/faults/kafka_frames.py)
        self.wire = wire
        # A cluster's brokers, each behind its own proxy: node id -> the proxy clients must reach
        # it through, named in the answers that advertise brokers (None: this proxy, for all).
        self.advertise = advertise
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.host = listen_host
        self.port = listen_port
        self.seed = seed
        self.rng = random.Random(seed)
        self.events = events  # an EventLog-like object with .emit(LogEvent), or None
        self.clock = clock
        self.rules = RuleSet()
        self.links: list[Link] = []
        self.held: list[Held] = []
        self.paused = False
        self.forwarded: Counter = Counter()  # (api or "?", direction) -> frames forwarded
        self.partition_dropped = 0
        self._partitions: list[str] = []
        self._isolations: list[str] = []
        self._accepted = 0
        self._per_client: Counter = Counter()
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._tasks: set[asyncio.Task] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> "FaultProxy":
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(lambda: _ClientSide(self), self.host, self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        self._event("proxy_started", host=self.host, port=self.port,
                    upstream=f"{self.upstream_host}:{self.upstream_port}")
        return self

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for link in list(self.links):
            link.abort()
        self.held.clear()
        await asyncio.sleep(0)  # the aborted connections report their loss (link_closed) first
        await self._server.wait_closed()
        self._server = None
        self._event("proxy_stopped", links=self._accepted)

    async def __aenter__(self) -> "FaultProxy":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ rules

    def add_rule(self, api: str = "*", action: str = "drop", *, direction: str = "request", link: str = "*",
                 p: float = 1.0, delay_ms: int | tuple[int, int] = 0, error_code: int | str | None = None,
                 limit: int | None = None, wait_ms: int | None = None) -> Rule:
        """Add a rule; it applies from the next frame on. Raises FaultSpecError (a ValueError)."""
        kwargs: dict[str, Any] = {}
        if wait_ms is not None:
            kwargs["wait_ms"] = wait_ms
        return self.add(Rule(action=action, api=api, direction=direction, link=link, p=p,
                             delay_ms=delay_range(delay_ms),
                             error_code=None if error_code is None else error_code_of(error_code), limit=limit,
                             **kwargs))

    def add(self, rule: Rule) -> Rule:
        """Add a rule; FaultSpecError for one naming a Kafka-wire API on the msgpack proxy, which
        never sees such a frame (the rule would silently do nothing)."""
        if rule.kafka_wire_only and self.wire != "kafka":
            raise FaultSpecError(f"{rule.spec()}: {rule.api} is Kafka's own API, served only on the Kafka-wire "
                                 f"port; grouplab's msgpack protocol has none, so this proxy would never see one "
                                 f"(put the rule on a FaultProxy(wire=\"kafka\"); `grouplab run` needs --kafka-port)")
        rule._removed = False
        self.rules.add(rule)
        self._event("rule_added", rule=rule.spec())
        return rule

    def add_spec(self, spec: str) -> Rule:
        """Add a rule given in the SPEC text form (`Heartbeat:drop:0.2`); `hold` is allowed here."""
        return self.add(parse_spec(spec, allow_hold=True))

    def remove(self, rule: Rule) -> None:
        if rule in self.rules:
            self.rules.remove(rule)
            rule._removed = True
            self._event("rule_removed", rule=rule.spec(), fired=rule.fired)

    def clear(self) -> None:
        """Remove every rule (held frames stay held; link faults stay)."""
        for rule in list(self.rules):
            self.remove(rule)

    def drop(self, api: str = "*", p: float = 1.0, **kw: Any) -> Rule:
        return self.add_rule(api, "drop", p=p, **kw)

    def delay(self, api: str = "*", ms: int | tuple[int, int] = 0, **kw: Any) -> Rule:
        return self.add_rule(api, "delay", delay_ms=ms, **kw)

    def duplicate(self, api: str = "*", **kw: Any) -> Rule:
        return self.add_rule(api, "duplicate", **kw)

    def hold(self, api: str = "*", **kw: Any) -> Rule:
        return self.add_rule(api, "hold", **kw)

    def error(self, api: str, error_code: int | str, **kw: Any) -> Rule:
        return self.add_rule(api, "error", error_code=error_code, **kw)

    def reorder(self, api: str = "*", **kw: Any) -> Rule:
        return self.add_rule(api, "reorder", **kw)

    def disconnect_on(self, api: str = "*", **kw: Any) -> Rule:
        """The `disconnect` rule: reset the link a selected frame comes on. Not `disconnect`, which
        resets links now, whatever they carry."""
        return self.add_rule(api, "disconnect", **kw)

    # ------------------------------------------------------------------ held frames

    def held_frames(self, api: str | None = None, link: str = "*", direction: str | None = None) -> list[Held]:
        return [h for h in self.held
                if (api is None or h.api == api) and (direction is None or h.direction == direction)
                and link_matches(link, h.link.client_id, h.link.name)]

    def release(self, api: str | None = None, link: str = "*", direction: str | None = None) -> int:
        """Forward the held frames that match (in the order they were held); returns how many were
        released. Frames of links closed meanwhile are discarded."""
        chosen = self.held_frames(api, link, direction)
        self.held = [h for h in self.held if h not in chosen]
        released = 0
        for h in chosen:
            if h.link.closed or h.link.aborted:
                continue
            h.link.pipes[h.direction].send_frame(h.data, (h.api, h.correlation_id), 0.0)
            released += 1
            self._event("frame_released", api=h.api, direction=h.direction, link=h.link.name,
                        client_id=h.link.client_id, correlation_id=h.correlation_id)
        return released

    # ------------------------------------------------------------------ link faults

    def partition(self, links: str | Iterable[str] = "*") -> None:
        """Blackhole the links whose client id (or link name) matches: frames in both directions
        are dropped, connections stay open. It also covers links the client opens later (its
        reconnects) until `heal`."""
        globs = _globs(links)
        self._partitions.extend(globs)
        self._event("network_partitioned", links=globs,
                    affected=[l.name for l in self.links if self._partitioned(l)])

    def heal(self, links: str | Iterable[str] | None = None) -> None:
        """End the partitions and isolations given, by the globs they were made with (all if None).
        What was dropped meanwhile stays lost; an isolated client's next connection goes through.
        Writes `network_healed` for the partitions (also when it ends nothing at all, as it always
        did) and `client_healed` for the isolations."""
        if links is None:
            healed, self._partitions = self._partitions, []
            unisolated, self._isolations = self._isolations, []
        else:
            globs = _globs(links)
            healed = [g for g in self._partitions if g in globs]
            self._partitions = [g for g in self._partitions if g not in globs]
            unisolated = [g for g in self._isolations if g in globs]
            self._isolations = [g for g in self._isolations if g not in globs]
        if healed or not unisolated:
            self._event("network_healed", links=healed)
        if unisolated:
            self._event("client_healed", links=unisolated)

    def disconnect(self, links: str | Iterable[str] = "*") -> int:
        """Reset the matching connections (both sides) now; returns how many links were closed.
        (`disconnect_on` resets a link when a frame a rule selects comes on it.)"""
        globs = _globs(links)
        chosen = [l for l in self.links if any(link_matches(g, l.client_id, l.name) for g in globs)]
        self._event("links_disconnected", links=[l.name for l in chosen])
        for link in chosen:
            link.abort("reset by disconnect()")
        return len(chosen)

    def isolate(self, links: str | Iterable[str]) -> int:
        """Cut clients off, to the group a crash without LeaveGroup: their open links are reset
        (both sides), and every link one of them opens later is reset as soon as its first frame
        names its client id, before anything is forwarded, until `heal`. Globs over the client id
        or the link name, as `partition` takes; returns how many open links were reset. Raises
        FaultSpecError (a ValueError), isolating nobody, for no glob or an empty one."""
        try:
            globs = _globs(links)
        except TypeError:  # not a glob, nor an iterable of them
            globs = []
        if not globs or not all(isinstance(g, str) and g for g in globs):
            raise FaultSpecError(f"isolate needs client id globs such as 'consumer-2' (* for every client), "
                                 f"got {links!r}")
        self._isolations.extend(globs)
        chosen = [l for l in self.links if self._isolated(l) and not l.aborted]
        self._event("client_isolated", links=globs, affected=[l.name for l in chosen])
        for link in chosen:
            link.abort("isolated")
        return len(chosen)

    def pause(self) -> None:
        """Stop forwarding anything, both ways (a hung coordinator, from the clients' view).
        Frames that arrive meanwhile are kept and go through the rules on `resume`."""
        self.paused = True
        self._event("proxy_paused")

    def resume(self) -> None:
        self.paused = False
        self._event("proxy_resumed")
        for link in list(self.links):
            for pipe in link.pipes.values():
                parked, pipe.parked = pipe.parked, []
                for data, meta in parked:
                    pipe.process(data, meta)

    # ------------------------------------------------------------------ introspection

    def find_links(self, links: str = "*") -> list[Link]:
        return [l for l in self.links if link_matches(links, l.client_id, l.name)]

    def is_partitioned(self, client_id: str) -> bool:
        return any(link_matches(g, client_id, "") for g in self._partitions)

    def is_isolated(self, client_id: str) -> bool:
        return any(link_matches(g, client_id, "") for g in self._isolations)

    # ------------------------------------------------------------------ internals

    def _accept(self, transport: asyncio.Transport) -> Link:
        self._accepted += 1
        link = Link(self, self._accepted, transport)
        self.links.append(link)
        task = asyncio.ensure_future(link.connect_upstream())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return link

    def _identify(self, link: Link, client_id: str) -> None:
        self._per_client[client_id] += 1
        link.client_id, link.index, link.identified = client_id, self._per_client[client_id], True
        # Each link draws from its own generator, derived from the seed and its name, so the faults
        # a link sees do not depend on how the links' frames interleave.
        link.rng = random.Random(f"{self.seed}/{link.name}" if self.seed is not None else self.rng.getrandbits(64))
        isolated = self._isolated(link)
        self._event("link_opened", link=link.name, client_id=client_id, partitioned=self._partitioned(link),
                    isolated=isolated)
        if isolated:  # at once, paused or not: the frame that named it is not forwarded
            link.abort("isolated")

    def _forget(self, link: Link, why: str) -> None:
        if link in self.links:
            self.links.remove(link)
        self.held = [h for h in self.held if h.link is not link]
        self._event("link_closed", link=link.name, client_id=link.client_id, why=why)

    def _partitioned(self, link: Link) -> bool:
        return bool(self._partitions) and any(link_matches(g, link.client_id, link.name) for g in self._partitions)

    def _isolated(self, link: Link) -> bool:
        return bool(self._isolations) and any(link_matches(g, link.client_id, link.name) for g in self._isolations)

    def _event(self, name: str, **fields: Any) -> None:
        if self.events is not None:
            self.events.emit(LogEvent(self.clock(), FreeFormEvent(name, fields)))


def _globs(links: str | Iterable[str]) -> list[str]:
    """One glob or several, as the link faults take them."""
    return [links] if isinstance(links, str) else list(links)
