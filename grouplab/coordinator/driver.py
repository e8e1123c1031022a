"""The coordinator-side driver: one pure Broker, its timers, its durable records and its replies.

The asyncio server (coordinator/server.py), the simulator (grouplab/sim/world.py) and the tests'
virtual-time harness (tests/pair.py) each run the Broker through one of these and differ only in
what they inject: the clock, the timers, where replies go (a socket, a simulated link), where
records go (a GroupLog, a list) and where event-log lines go.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.group_log import Record
from grouplab.coordinator.trace import TraceRecorder
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Output, Persist, Reply, TimerKey
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.kernel import Clock, EventSink, Timers, UnhandledOutput, no_event_log

ReplySink = Callable[[Reply], None]
"""Send a Reply's body to the request whose context carried the opaque token `reply.to` (a shell
that makes requests of its own with no token, RequestContext(None), drops their replies)."""

PersistSink = Callable[[list[Record]], None]
"""`persist(records)`: make records durable, in order, before anything after them is carried out;
raises PersistFailed if they could not be."""


class PersistFailed(Exception):
    """The records could not be made durable (the group log's disk refused them). The replies the
    same step sends after them are then not sent as they are: see CoordinatorDriver.apply."""


class CoordinatorDriver:
    """Runs a Broker's steps and carries out every output of its closed union (`Output`):
    consecutive Persists as one batch (one write and one sync of the group log) before the outputs
    after them, so a reply never goes out before the record it depends on; anything else raises
    UnhandledOutput. With a `trace`, every input and reply is also written to the message trace
    (coordinator/trace.py), and the member ids the Broker generates with them.

    If a batch of records cannot be made durable (PersistFailed), every reply of the step after it
    goes out with NOT_COORDINATOR in each of its error codes that said NONE, as Kafka's coordinator
    answers when its log refuses an append (a storage error): the client finds the coordinator
    again and retries, and the retry writes the record. Nothing is acknowledged that is not
    durable. The step itself stands in memory (the trace keeps the Broker's own answers, so a
    replay is still identical)."""

    __slots__ = ("broker", "clock", "timers", "trace", "_persist", "_handlers", "_send_reply")

    def __init__(self, broker: Broker, clock: Clock, timers: Timers, reply: ReplySink, persist: PersistSink,
                 events: EventSink | None, trace: TraceRecorder | None = None) -> None:
        self.broker = broker
        self.clock = clock
        self.timers = timers
        self.trace = trace
        self._persist = persist
        self._send_reply = reply
        if trace is not None:
            broker.new_member_id = trace.recording_ids(broker.new_member_id)  # (before any group takes it)
            reply = _traced(trace, reply)
        self._handlers: dict[type, Callable[[Any], None]] = {
            Reply: reply,
            ArmTimer: timers.apply,
            CancelTimer: timers.apply,
            LogEvent: events if events is not None else no_event_log,
        }

    def handle(self, api: str, body: Any, ctx: RequestContext) -> None:
        now = self.clock()
        if self.trace is not None:
            self.trace.request(now, api, body, ctx)
        self.apply(self.broker.handle(api, body, ctx, now))

    def on_timer(self, key: TimerKey) -> None:
        now = self.clock()
        if self.trace is not None:
            self.trace.timer(now, key)
        self.apply(self.broker.on_timer(key, now))

    def broker_change(self, op: str, node: int = -1, how: str = "killed") -> None:
        """A cluster's broker stops (`down`, `how` killed or shutdown), comes back (`up`), or
        leadership goes back to the preferred leaders (`elect`): brokers.py's inputs, traced as
        one line so a replay makes the same change at the same time. NodeError if it cannot be."""
        now = self.clock()
        broker = self.broker
        outputs = (broker.broker_down(node, now, how) if op == "down" else broker.broker_up(node, now) if op == "up"
                   else broker.elect_preferred_leaders(now))
        if self.trace is not None:
            self.trace.broker(now, op, node, how)
        self.apply(outputs)

    def apply(self, outputs: list[Output]) -> None:
        batch: list[Record] = []
        handlers = self._handlers
        failed: str | None = None  # why the step's records could not be made durable
        for out in outputs:
            if type(out) is Persist:
                batch.append(out.record)
                continue
            if batch:
                failed = self._flush(batch) or failed
                batch = []
            if failed is not None and type(out) is Reply:
                self._refuse(out, failed)
                continue
            try:
                handler = handlers[type(out)]
            except KeyError:
                raise UnhandledOutput("the coordinator driver", out) from None
            handler(out)
        if batch:
            self._flush(batch)

    def _flush(self, batch: list[Record]) -> str | None:
        try:
            self._persist(batch)
        except PersistFailed as exc:
            return str(exc)
        return None

    def _refuse(self, out: Reply, why: str) -> None:
        if self.trace is not None:
            self.trace.reply(out)  # what the Broker answered (a replay computes the same)
        message = f"the coordinator could not write its log ({why}); find the coordinator and retry"
        self._send_reply(Reply(out.to, with_error(out.body, ErrorCode.NOT_COORDINATOR, message)))


def _traced(trace: TraceRecorder, reply: ReplySink) -> ReplySink:
    def traced_reply(out: Reply) -> None:
        trace.reply(out)
        reply(out)

    return traced_reply


def with_error(body: Any, code: ErrorCode, message: str) -> Any:
    """`body` (a response dataclass) with every `error_code` that says NONE, at the top and in its
    lists (per topic, per partition, per member), set to `code`, and its error messages to
    `message`: the same shape, so a client reads the error where it reads the answer."""
    if not dataclasses.is_dataclass(body) or isinstance(body, type):
        return body
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(body):
        value = getattr(body, f.name)
        if f.name == "error_code" and value == 0:
            changes[f.name] = int(code)
        elif f.name == "error_message" and getattr(body, "error_code", 0) == 0:
            changes[f.name] = message
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            changes[f.name] = [with_error(item, code, message) for item in value]
    return dataclasses.replace(body, **changes)

