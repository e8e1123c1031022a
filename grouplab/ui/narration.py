"""The live timeline told by `grouplab explain`'s narrator (grouplab/teach/narrate.py), in English or
Chinese: the same sentences and the same "why", as the run happens.

The narrator reads Steps, as a replay makes them: an input line (a request, a timer), what the
Broker wrote for it (member ids, answers) and its event-log lines, and the Broker after it. Live,
the coordinator's driver runs each step to its end without yielding to the loop, so a step is
everything from one input line until the loop turns: an input line opens a step, the member ids,
answers and coordinator events that follow join it, and a callback scheduled with call_soon closes
it. The Broker "after" is the live one, read only.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from grouplab.coordinator.broker import Broker
from grouplab.replay import Step
from grouplab.teach.narrate import Narrated, Narrator
from grouplab.protocol.effects import LogEvent

INPUTS = frozenset({"request", "timer"})


class LiveSteps:
    """Trace lines and coordinator events in, a Narrated per step out (to `told`)."""

    def __init__(self, lang: str, broker: Callable[[], Broker | None],
                 told: Callable[[Narrated, str | None], Any]) -> None:
        self.narrator = Narrator(lang)
        self.broker = broker
        self.told = told
        self._open: Step | None = None
        self._count = 0

    def trace(self, line: dict[str, Any]) -> None:
        kind = line.get("kind")
        if kind in INPUTS:
            self.flush()
            self._count += 1
            self._open = Step(self._count, line, [line], [], None)
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # no loop (a test feeding lines): the next input or flush() closes it
                pass
        elif self._open is not None and kind in ("member_id", "response"):
            self._open.written.append(line)

    def event(self, node: str, ev: LogEvent) -> None:
        if node == "coordinator" and self._open is not None:
            self._open.events.append(ev)

    def flush(self) -> None:
        step, self._open = self._open, None
        if step is None:
            return
        step.broker = self.broker()
        try:
            narrated = self.narrator.narrate(step)
        except Exception:  # a step the narrator cannot read must not cost the dashboard: skip it
            return
        after = None
        if narrated.changed and narrated.group is not None:
            after = "⇒ " + self.narrator.c.t("state.after", group=narrated.group, state=narrated.state,
                                             generation=narrated.generation)
        self.told(narrated, after)
