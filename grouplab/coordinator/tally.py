"""Who asked what, and which errors they were answered: a per-client tally of requests for
benchmarks (scripts/bench_failover.py counts the requests each consumer sends while its group's
coordinator moves).

The server (both ports, every broker of a cluster) tells a `RequestTally` of each request it reads
and each answer it sends, when one is given (`CoordinatorServer.tally`; None: nothing is counted,
the default). It records only between `start()` and `stop()`, so a benchmark pays nothing outside
the window it measures; the clock is the caller's (a benchmark's `time.monotonic`, one clock across
processes on Linux), so the tally is a plain recorder, not part of any state machine.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Callable

from grouplab.protocol.errors import ErrorCode


@dataclasses.dataclass(frozen=True, slots=True)
class Tallied:
    """One request read (`error` None) or one error code in one answer sent, at `t` (the tally's clock)."""

    t: float
    client_id: str
    api: str
    error: str | None = None


def answer_errors(body: Any) -> set[str]:
    """The names of the non-zero error codes anywhere in an answer (grouplab's message dataclasses:
    its own, each group's, topic's or partition's), once each: an OffsetCommit refused for 20
    partitions is one NOT_COORDINATOR."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        elif dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                item = getattr(value, f.name)
                if f.name == "error_code":
                    if isinstance(item, int) and item != 0:
                        found.add(_error_name(item))
                elif isinstance(item, (list, tuple)) or dataclasses.is_dataclass(item):
                    walk(item)

    walk(body)
    return found


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


class RequestTally:
    """Requests and the errors answered to them, per client id and API, while recording."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.recording = False
        self.lines: list[Tallied] = []

    def start(self) -> float:
        """Forget what was recorded and record from now (the clock's reading)."""
        self.lines = []
        self.recording = True
        return self.clock()

    def stop(self) -> None:
        self.recording = False

    def request(self, client_id: str, api: str) -> None:
        if self.recording:
            self.lines.append(Tallied(self.clock(), client_id, api))

    def answered(self, client_id: str, api: str, body: Any) -> None:
        if self.recording:
            now = self.clock()
            self.lines.extend(Tallied(now, client_id, api, name) for name in sorted(answer_errors(body)))

    def answered_codes(self, client_id: str, api: str, codes: list[int]) -> None:
        """An answer built outside the Broker (the Kafka listener's FindCoordinator), by its codes."""
        if self.recording:
            now = self.clock()
            self.lines.extend(Tallied(now, client_id, api, name) for name in sorted({_error_name(c) for c in codes if c}))

    def counts(self, until: float | None = None) -> dict[str, dict[str, int]]:
        """client id -> {api: requests, "error:NAME": answers carrying it}, up to `until` (inclusive)."""
        out: dict[str, Counter[str]] = {}
        for line in self.lines:
            if until is not None and line.t > until:
                continue
            key = line.api if line.error is None else f"error:{line.error}"
            out.setdefault(line.client_id, Counter())[key] += 1
        return {client: dict(c) for client, c in out.items()}
