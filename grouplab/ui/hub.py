"""Between the running cluster and the open pages: the hub listens to every event-log line and
trace line (as the terminal display listens to events), keeps the pure model and the timeline,
and streams to each page a fresh snapshot twice a second plus the timeline entries it has not
seen. Pages only read; the buttons go through grouplab/ui/controls.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Callable

from grouplab.ui.model import DashboardModel
from grouplab.ui.timeline import Narrate, Timeline, describe
from grouplab.protocol.effects import LogEvent, wall_clock_ms

PUSH_INTERVAL_S = 0.5
BACKLOG = 1000  # timeline entries a page gets when it opens


def sse(event: str, data: Any) -> str:
    """One server-sent event: a name and a JSON payload on one data line."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


class Hub:
    """With `lang`, the timeline is told by grouplab explain's narrator in that language (each step
    with its why; `broker` gives the live Broker it reads the group's state from); without, each
    trace line by `narrate` (grouplab/ui/timeline.py's `describe`). The page, its state's free texts
    and its answers speak `lang` (English without)."""

    def __init__(self, group_id: str, lang: str | None = None, broker: Callable[[], Any] = lambda: None,
                 narrate: Narrate = describe, extras: Callable[[], dict[str, Any]] | None = None,
                 clock: Callable[[], int] = wall_clock_ms) -> None:
        self.lang = lang or "en"
        self.model = DashboardModel(group_id, self.lang)
        self.timeline = Timeline(narrate if lang is None else None, lang or "en")
        self.steps = None
        if lang is not None:
            from grouplab.ui.narration import LiveSteps

            self.steps = LiveSteps(lang, broker, self.timeline.told)
        self.extras = extras  # what only the processes know: records processed, lag, the cluster's shape
        self.clock = clock
        self._closed = asyncio.Event()

    # ------------------------------------------------------------------ listeners

    def on_event(self, node: str, ev: LogEvent) -> None:
        """An EventLog listener (LocalCluster(listeners=[hub.on_event]))."""
        self.model.feed(node, ev)
        self.timeline.event(node, ev.event, ev.ts_ms, ev.fields)
        if self.steps is not None:
            self.steps.event(node, ev)

    def on_trace(self, line: dict[str, Any]) -> None:
        """A trace listener (LocalCluster(trace_listeners=[hub.on_trace]))."""
        self.model.trace(line)
        self.timeline.trace(line)
        if self.steps is not None:
            self.steps.trace(line)

    # ------------------------------------------------------------------ for the pages

    def state(self) -> dict[str, Any]:
        snap = self.model.snapshot(self.clock())
        if self.extras is not None:
            snap["cluster"] = self.extras()
        return snap

    async def stream(self) -> AsyncIterator[str]:
        """A page's event stream: the state and the recent timeline, then what changed, until the
        hub closes (the server shuts down) or the page goes away."""
        yield sse("state", self.state())
        backlog = list(self.timeline.entries)[-BACKLOG:]
        yield sse("timeline", backlog)
        last = backlog[-1]["id"] if backlog else 0
        while not self._closed.is_set():
            try:
                await asyncio.wait_for(self._closed.wait(), PUSH_INTERVAL_S)
            except asyncio.TimeoutError:
                pass
            if self._closed.is_set():
                break
            yield sse("state", self.state())
            new = self.timeline.since(last)
            if new:
                last = new[-1]["id"]
                yield sse("timeline", new)
        yield sse("bye", {"message": self.model.c.t("ui.answer.bye")})

    def close(self) -> None:
        """End every open stream, so the web server can shut down at once."""
        self._closed.set()
