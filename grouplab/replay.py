"""`grouplab replay RUN_DIR`: run the coordinator's state machine again over a run's message trace.

The trace (RUN_DIR/trace/coordinator.jsonl, coordinator/trace.py) holds every input the Broker saw
at the `now_ms` it saw it, and the member ids it generated. A fresh Broker fed the same inputs in the
same order must give the same answers and the same event-log lines: the Broker is a pure machine
(docs/design.md §2). The replay writes its own trace as it goes and compares it with the recorded
one line by line, and its events with RUN_DIR/coordinator.jsonl (less the lines only the asyncio
shell writes, `coordinator.trace.SHELL_EVENTS`).

What a replay cannot do: start from state a data directory handed the recorded coordinator (its
partition logs and group log are not in the trace), so a run that began on a non-empty
`--data-dir` is refused with that reason.
"""

from __future__ import annotations


import io
import json
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig, ConfigError
from grouplab.coordinator.driver import CoordinatorDriver
from grouplab.coordinator.partition_log import MemoryLogStore
from grouplab.coordinator.trace import SHELL_EVENT_NAMES, TRACE_VERSION, TraceRecorder, request_body, timer_key
from grouplab.eventlog import EventLog
from grouplab.tracefile import TraceUnreadable, read_trace, trace_path
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Reply
from grouplab.protocol.errors import ProtocolError
from grouplab.protocol.messages import API


class ReplayRefused(ValueError):
    """The trace cannot be replayed (missing, unreadable, from a non-empty data directory, or a
    newer format); the message says why."""


@dataclass
class Difference:
    """The first place where the replay and the recording part ways."""

    what: str  # "trace line" or "event-log line"
    index: int  # 1-based line number in the recorded file (or one past its end)
    recorded: dict[str, Any] | None
    replayed: dict[str, Any] | None


@dataclass
class ReplayResult:
    requests: int = 0
    timers: int = 0
    member_ids: int = 0
    responses: int = 0
    events: int = 0
    restarts: int = 0
    difference: Difference | None = None
    events_compared: bool = True  # False when the run kept no coordinator event log
    notes: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.difference is None


class _NoTimers:
    """A replay's timers: firings are inputs in the trace, so armed timers are only noted."""

    def apply(self, out: ArmTimer | CancelTimer) -> None:
        pass

    def cancel_all(self) -> None:
        pass


def _token_label(token: tuple[str, int]) -> tuple[str, int]:
    return token


class _RecordedIds:
    """The member ids the recorded Broker generated, handed out again in the same order."""

    def __init__(self, ids: Iterable[tuple[str, str]]) -> None:
        self.ids = deque(ids)

    def __call__(self, client_id: str) -> str:
        if not self.ids:
            return f"{client_id}-unrecorded"  # the comparison reports the extra member_id line
        recorded_client, member_id = self.ids.popleft()
        return member_id if recorded_client == client_id else f"{client_id}-unrecorded"


@dataclass
class Step:
    """One input of the recorded run, replayed: the trace line that was the input (a request, a
    timer, the simulator's crash or restart), what the Broker wrote for it (its answers and member
    ids as trace lines, its event-log lines as LogEvents), and the Broker after it (None while the
    coordinator is down). Read the Broker, never change it: the next step runs on it."""

    index: int  # the input line's number in the trace file (1-based)
    line: dict[str, Any]
    written: list[dict[str, Any]]  # the replay's own trace lines for this step, the input's first
    events: list[LogEvent]
    broker: Broker | None


class Replay:
    """A run's trace, opened: its `start` line and config checked (ReplayRefused otherwise).
    Iterating it replays the inputs one Step at a time."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = trace_path(self.run_dir)
        try:
            self.recorded = list(read_trace(self.path))
        except TraceUnreadable as exc:
            raise ReplayRefused(str(exc)) from None
        if not self.recorded or self.recorded[0].get("kind") != "start":
            raise ReplayRefused(f"{self.path}: the trace does not begin with its `start` line")
        start = self.start = self.recorded[0]
        if start.get("version") != TRACE_VERSION:
            raise ReplayRefused(f"{self.path}: trace format version {start.get('version')!r}; "
                                f"this grouplab reads version {TRACE_VERSION}")
        if start.get("recovered"):
            raise ReplayRefused(f"{self.run_dir}: this coordinator began from state an existing --data-dir handed it "
                                "(groups, topics or partition logs of an earlier run), which the trace does not hold; "
                                "only runs that started empty can be replayed")
        try:
            config = BrokerConfig().with_overrides(f"{k}={_text(v)}" for k, v in start["config"].items())
            # Which were given (DescribeConfigs' STATIC_BROKER_CONFIG), not all of them: an older
            # trace has no list, and then those that differ from their default count.
            self.config = replace(config, overridden=frozenset(start.get("config_given", ())))
        except (ConfigError, KeyError, AttributeError, TypeError) as exc:
            raise ReplayRefused(f"{self.path}: the start line's config cannot be read: {exc}") from None
        self.written: list[dict[str, Any]] = [start]  # the replay's whole trace, as it goes

    def __iter__(self) -> Iterator[Step]:
        start, path = self.start, self.path
        written = self.written
        step_events: list[LogEvent] = []
        recorder = TraceRecorder(written.append, _token_label)
        ids = _RecordedIds((line["client_id"], line["member_id"]) for line in self.recorded if line["kind"] == "member_id")
        durable: list[Any] = []
        topics = {str(k): int(v) for k, v in start.get("topics", {}).items()}
        now = [int(start["ts_ms"])]

        def new_driver(logs: MemoryLogStore | None) -> CoordinatorDriver:
            broker = Broker(self.config, ids, host=str(start.get("host", "127.0.0.1")), port=int(start.get("port", 0)),
                            logs=logs, brokers=int(start.get("brokers", 1)))
            broker.topics.partitions.update(topics)
            if broker.cluster is not None:  # each broker's address, as its Metadata answers named it
                broker.cluster.addresses.update({int(n): (str(a[0]), int(a[1])) for n, a in start["addresses"].items()})
            return CoordinatorDriver(broker, lambda: now[0], _NoTimers(), _ignore_reply, durable.extend,
                                     step_events.append, recorder)

        driver: CoordinatorDriver | None = new_driver(None)
        crashed_logs: MemoryLogStore | None = None
        for n, line in enumerate(self.recorded[1:], 2):
            kind = line.get("kind")
            if kind == "start":
                raise ReplayRefused(f"{path}:{n}: a second `start` line: this run's coordinator was stopped and "
                                    "started again over sockets (grouplab ui's restart), and a replay follows one "
                                    "coordinator's life from its start")
            if kind not in _INPUTS:
                continue
            now[0] = int(line.get("ts_ms", now[0]))
            first = len(written)
            step_events.clear()
            try:
                if kind == "request":
                    api = line["api"]
                    if api not in API:
                        raise ReplayRefused(f"{path}:{n}: unknown API {api!r}")
                    body = request_body(api, line["body"])
                    if driver is None:
                        raise ReplayRefused(f"{path}:{n}: a request while the coordinator was down")
                    token = None if line["conn"] == "internal" else (line["conn"], line["correlation_id"])
                    driver.handle(api, body, RequestContext(token, line.get("client_id", ""), line.get("client_host", ""),
                                                            int(line.get("node", 0))))
                elif kind == "broker":
                    if driver is None:
                        raise ReplayRefused(f"{path}:{n}: a broker change while the coordinator was down")
                    driver.broker_change(str(line["op"]), int(line["node"]), str(line.get("how", "killed")))
                elif kind == "timer":
                    if driver is None:
                        raise ReplayRefused(f"{path}:{n}: a timer while the coordinator was down")
                    driver.on_timer(timer_key(line["key"]))
                elif kind == "crash":
                    if driver is None or not isinstance(driver.broker.logs, MemoryLogStore):
                        raise ReplayRefused(f"{path}:{n}: a crash while the coordinator was down")
                    recorder.crash(now[0])
                    crashed_logs = driver.broker.logs.recovered()
                    driver = None
                else:  # restart
                    recorder.restart(now[0])
                    driver = new_driver(crashed_logs)
                    driver.apply(driver.broker.restore(list(durable), now[0]) if durable else [])
            except (KeyError, TypeError, ValueError, ProtocolError) as exc:
                if isinstance(exc, ReplayRefused):
                    raise
                raise ReplayRefused(f"{path}:{n}: a {kind} line that cannot be read: {exc!r}") from None
            yield Step(n, line, written[first:], list(step_events), driver.broker if driver is not None else None)


_INPUTS = frozenset({"request", "timer", "crash", "restart", "broker"})


def replay(run_dir: str | Path) -> ReplayResult:
    """Replay RUN_DIR's trace and compare; raises ReplayRefused when it cannot be replayed at all."""
    run = Replay(run_dir)
    result = ReplayResult()
    event_text = io.StringIO()
    event_log = EventLog("coordinator", stream=event_text)
    for step in run:
        kind = step.line["kind"]
        if kind == "request":
            result.requests += 1
        elif kind == "timer":
            result.timers += 1
        elif kind == "restart":
            result.restarts += 1
        for ev in step.events:
            event_log.emit(ev)
    event_log.close()
    result.member_ids = sum(1 for line in run.recorded if line["kind"] == "member_id")
    result.responses = sum(1 for line in run.recorded if line["kind"] == "response")
    result.difference = _first_difference("trace line", run.recorded, _normalised(run.written))
    if result.difference is None:
        _compare_events(run.run_dir, event_text.getvalue(), result)
    return result


# The note when the run has no event log to compare (`grouplab replay --lang` says it in its language).
EVENTS_MISSING = "coordinator.jsonl is missing: the answers were compared, the event-log lines were not"


def _compare_events(run_dir: Path, replayed_text: str, result: ReplayResult) -> None:
    path = run_dir / "coordinator.jsonl"
    replayed = [line for line in (json.loads(t) for t in replayed_text.splitlines() if t.strip())
                if line.get("event") not in SHELL_EVENT_NAMES]
    result.events = len(replayed)
    if not path.exists():
        result.events_compared = False
        result.notes.append(EVENTS_MISSING)
        return
    recorded = []
    with open(path, encoding="utf-8") as f:
        for text in f:
            if text.strip() and text.endswith("\n"):
                line = json.loads(text)
                if line.get("event") not in SHELL_EVENT_NAMES:
                    recorded.append(line)
    result.difference = _first_difference("event-log line", recorded, replayed)


def _first_difference(what: str, recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> Difference | None:
    for i, (a, b) in enumerate(zip(recorded, replayed)):
        if a != b:
            return Difference(what, i + 1, a, b)
    if len(recorded) != len(replayed):
        i = min(len(recorded), len(replayed))
        return Difference(what, i + 1, recorded[i] if i < len(recorded) else None,
                          replayed[i] if i < len(replayed) else None)
    return None


def _normalised(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The replay's own lines as they read back from a file (tuples become lists)."""
    return [json.loads(json.dumps(line)) for line in lines]


def _ignore_reply(out: Reply) -> None:
    pass


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
