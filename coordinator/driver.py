"""The coordinator-side driver: one pure Broker, its timers, its durable records and its replies.

The asyncio server (coordinator/server.py), the simulator (grouplab/sim/world.py) and the tests'
virtual-time harness (tests/pair.py) each run the Broker through one of these and differ only in
what they inject: the clock, the timers, where replies go (a socket, a simulated link), where
records go (a GroupLog, a list) and where event-log lines go.
"""

from __future__ import annotations

from typing import Any, Callable

from coordinator.broker import Broker, RequestContext
from coordinator.group_log import Record
from coordinator.trace import TraceRecorder
from protocol.effects import ArmTimer, CancelTimer, LogEvent, Output, Persist, Reply, TimerKey
from protocol.kernel import Clock, EventSink, Timers, UnhandledOutput, no_event_log

ReplySink = Callable[[Reply], None]
"""Send a Reply's body to the request whose context carried the opaque token `reply.to` (a shell
that makes requests of its own with no token, RequestContext(None), drops their replies)."""

PersistSink = Callable[[list[Record]], None]
"""`persist(records)`: make records durable, in order, before anything after them is carried out."""


class CoordinatorDriver:
    """Runs a Broker's steps and carries out every output of its closed union (`Output`):
    consecutive Persists as one batch (one write and one sync of the group log) before the outputs
    after them, so a reply never goes out before the record it depends on; anything else raises
    UnhandledOutput. With a `trace`, every input and reply is also written to the message trace
    (coordinator/trace.py), and the member ids the Broker generates with them."""

    __slots__ = ("broker", "clock", "timers", "trace", "_persist", "_handlers")

    def __init__(self, broker: Broker, clock: Clock, timers: Timers, reply: ReplySink, persist: PersistSink,
                 events: EventSink | None, trace: TraceRecorder | None = None) -> None:
        self.broker = broker
        self.clock = clock
        self.timers = timers
        self.trace = trace
        self._persist = persist
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

    def apply(self, outputs: list[Output]) -> None:
        batch: list[Record] = []
        handlers = self._handlers
        for out in outputs:
            if type(out) is Persist:
                batch.append(out.record)
                continue
            if batch:
                self._persist(batch)
                batch = []
            try:
                handler = handlers[type(out)]
            except KeyError:
                raise UnhandledOutput("the coordinator driver", out) from None
            handler(out)
        if batch:
            self._persist(batch)

def _traced(trace: TraceRecorder, reply: ReplySink) -> ReplySink:
    def traced_reply(out: Reply) -> None:
        trace.reply(out)
        reply(out)

    return traced_reply
