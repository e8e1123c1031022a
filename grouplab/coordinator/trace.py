"""The coordinator's message trace: every input its Broker saw, and every answer it gave.

A CoordinatorDriver given a `TraceRecorder` writes one line per step input — a request (with its
connection, client and correlation id), a timer that fired, a member id the Broker generated — and
one line per Reply it carries out, each stamped with the `now_ms` the Broker was given. The lines
are the inputs of `replay` (grouplab/replay.py): a fresh Broker fed the same inputs at the same
times, with the same member ids, gives the same answers and the same event-log lines, because the
Broker is a pure machine (docs/design.md §2). They are also what `explain` narrates.

Lines are plain dicts (the shell writes them as JSON, docs/events.md §7): message bodies as
protocol/schema.py encodes them for the wire, bytes as `{"$bytes": base64}`.
"""

from __future__ import annotations

import base64
from typing import Any, Callable

from grouplab.coordinator.broker import RequestContext
from grouplab.protocol import events
from grouplab.protocol.effects import Reply, TimerKey
from grouplab.protocol.messages import API, RESPONSE_API
from grouplab.protocol.schema import decode, encode

TRACE_VERSION = 1

TraceSink = Callable[[dict[str, Any]], None]
"""Where trace lines go (a JSON-lines file under the run directory, or a list in tests)."""

ConnOf = Callable[[Any], tuple[str, int]]
"""The shell's reading of its opaque reply token: (connection label, correlation id)."""

SHELL_EVENTS: frozenset[type[events.Event]] = frozenset({
    events.CoordinatorStarted, events.CoordinatorStopped, events.BadRequest, events.InternalError,
    events.LogRecovered, events.LogWriteFailed, events.PartitionLogsRecovered, events.PartitionLogTruncated,
    events.PartitionFlushFailed, events.ResponseTooLarge, events.ResponseEncodeFailed,
})
"""Events the asyncio shell writes itself: a replay does not make them, and compares the rest of
the coordinator's event log, on both sides (tests/test_trace.py holds this list to
coordinator/server.py). `response_too_large` is also the Broker's when it refuses an answer before
building it; the shell's come from encoding, so the name is left out of the comparison altogether."""

SHELL_EVENT_NAMES = frozenset(cls.NAME for cls in SHELL_EVENTS)


def to_json(value: Any) -> Any:
    """A wire-encoded value (maps, lists, scalars, bytes) as JSON can hold it."""
    kind = type(value)
    if kind is bytes or kind is bytearray:
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if kind is dict:
        return {k: to_json(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [to_json(v) for v in value]
    return value


def from_json(value: Any) -> Any:
    """The inverse of `to_json`."""
    kind = type(value)
    if kind is dict:
        if len(value) == 1 and "$bytes" in value:
            return base64.b64decode(value["$bytes"])
        return {k: from_json(v) for k, v in value.items()}
    if kind is list:
        return [from_json(v) for v in value]
    return value


def body_json(body: Any) -> Any:
    return to_json(encode(body))


def request_body(api: str, value: Any) -> Any:
    """A traced request body back as its message dataclass."""
    return decode(API[api].request, from_json(value))


def timer_key(value: Any) -> TimerKey:
    """A traced timer key (JSON lists) back as the tuple the machines armed."""
    return tuple(timer_key(v) if type(v) is list else v for v in value)


class TraceRecorder:
    """Turns a driver's inputs and replies into trace lines. `conn_of` reads the shell's reply
    token; requests whose token is None (the simulator's own, an admin step) are `internal`."""

    def __init__(self, sink: TraceSink, conn_of: ConnOf) -> None:
        self.sink = sink
        self.conn_of = conn_of
        self._pending: dict[Any, str] = {}  # reply token -> api, until its reply goes out
        self.now_ms = 0

    def start(self, now_ms: int, **info: Any) -> None:
        """The first line: what a replay needs to build the same Broker (config, host, port,
        topics that existed without a request, whether state was recovered)."""
        self.sink({"ts_ms": now_ms, "kind": "start", "version": TRACE_VERSION, **info})

    def request(self, now_ms: int, api: str, body: Any, ctx: RequestContext) -> None:
        self.now_ms = now_ms
        conn, correlation_id = self.conn_of(ctx.reply_to) if ctx.reply_to is not None else ("internal", -1)
        if ctx.reply_to is not None:
            self._pending[ctx.reply_to] = api
        line = {"ts_ms": now_ms, "kind": "request", "conn": conn, "correlation_id": correlation_id,
                "client_id": ctx.client_id, "client_host": ctx.client_host, "api": api, "body": body_json(body)}
        if ctx.node_id:
            line["node"] = ctx.node_id  # the broker of a cluster it reached (absent: broker 0, or the only one)
        self.sink(line)

    def broker(self, now_ms: int, op: str, node: int, how: str) -> None:
        """A cluster's broker stopped (`down`), came back (`up`), or an election (`elect`) ran:
        an input of the Broker (coordinator/brokers.py), at `now_ms`."""
        self.now_ms = now_ms
        self.sink({"ts_ms": now_ms, "kind": "broker", "op": op, "node": node, "how": how})

    def timer(self, now_ms: int, key: TimerKey) -> None:
        self.now_ms = now_ms
        self.sink({"ts_ms": now_ms, "kind": "timer", "key": to_json(list(key))})

    def member_id(self, client_id: str, member_id: str) -> None:
        """A member id the Broker generated during the current step (a replay hands it out again)."""
        self.sink({"ts_ms": self.now_ms, "kind": "member_id", "client_id": client_id, "member_id": member_id})

    def reply(self, out: Reply) -> None:
        if out.to is None:
            return
        conn, correlation_id = self.conn_of(out.to)
        api = self._pending.pop(out.to, None) or RESPONSE_API.get(type(out.body), type(out.body).__name__)
        self.sink({"ts_ms": self.now_ms, "kind": "response", "conn": conn, "correlation_id": correlation_id,
                   "api": api, "body": body_json(out.body)})

    def crash(self, now_ms: int) -> None:
        """The coordinator stopped without a goodbye (the simulator's coordinator_restart fault):
        its timers and memory are gone, its durable records and partition logs stay."""
        self.now_ms = now_ms
        self._pending.clear()
        self.sink({"ts_ms": now_ms, "kind": "crash"})

    def restart(self, now_ms: int) -> None:
        """A new Broker restored from the durable records the last one persisted."""
        self.now_ms = now_ms
        self.sink({"ts_ms": now_ms, "kind": "restart"})

    def recording_ids(self, new_member_id: Callable[[str], str]) -> Callable[[str], str]:
        """`new_member_id` that also writes each id it makes into the trace."""

        def generate(client_id: str) -> str:
            member_id = new_member_id(client_id)
            self.member_id(client_id, member_id)
            return member_id

        return generate
