"""Reading a run directory's event logs back as the typed events that wrote them.

`grouplab run/simulate --run-dir DIR` write one JSON-lines file per node (docs/events.md §1).
Readers that fold events (the rebalance tracker, the cost fold in grouplab/costs.py) take
`(node, LogEvent)` pairs whose payloads are the classes of protocol/events.py, as the live
listeners get them; `read_run` turns the files back into that stream, so `grouplab plot` and
friends run the very code the live views run, with no Spark.

Order: the files are merged by `ts_ms`; lines that share a `ts_ms` come coordinator first, then
the members (by node name), then the simulator and the other non-member nodes, each file in its
own order. That is the order the simulator writes them in for the cases that matter: a
coordinator's answer before the member acts on it, and a member's last lines before the fault
that stopped it.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterator

from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.states import (
    ConsumerGroupState,
    ConsumerMemberState,
    GroupEpochCause,
    GroupState,
    MembershipState,
    MemberState,
    ProducerState,
    RebalanceCause,
    RemovalReason,
    TxnState,
)

_ENUMS: dict[str, type[Enum]] = {e.__name__: e for e in (GroupState, MemberState, ProducerState, RebalanceCause,
                                                          RemovalReason, TxnState, ConsumerGroupState,
                                                          ConsumerMemberState, GroupEpochCause)}
_BY_NAME: dict[str, list[type[events.Event]]] = {}
for _cls in events.EVENT_TYPES:
    _BY_NAME.setdefault(_cls.NAME, []).append(_cls)


def _any_member_state(value: Any) -> MemberState | MembershipState:
    """M's `state`: a classic member's, else a consumer-protocol member's (ValueError if neither).
    A value both have (`joining`, `stable`, `closed`) reads as the classic one: the folds look
    at the partitions and the generation, not at which enumeration it came from."""
    try:
        return MemberState(value)
    except ValueError:
        return MembershipState(value)


_PARSERS: dict[str, Callable[[Any], Enum]] = {**_ENUMS, "AnyMemberState": _any_member_state}
_ENUM_OF: dict[type, dict[str, Callable[[Any], Enum]]] = {
    cls: {f.name: _PARSERS[str(f.type)] for f in fields(cls) if str(f.type) in _PARSERS} for cls in events.EVENT_TYPES}

NOT_MEMBERS = ("coordinator", "simulator", "run", "proxy")  # nodes whose files are not consumers' logs


class NoRunLogs(ValueError):
    """A run directory that does not exist or holds no `*.jsonl` event logs."""


def payload_of(name: str, fields: dict[str, Any]) -> events.Event | events.FreeFormEvent:
    """The typed event a line's `event` and other fields make: the class of that name whose fields
    the line has (two classes may share a name). A line that fits none (another version's, or a
    value outside an enumeration) comes back as a FreeFormEvent, which the folds ignore."""
    for cls in _BY_NAME.get(name, ()):
        if set(cls.FIELDS) != set(fields):
            continue
        try:
            values = {k: (_ENUM_OF[cls][k](v) if k in _ENUM_OF[cls] else v) for k, v in fields.items()}
            return cls(**values)
        except (ValueError, TypeError):
            break
    return events.FreeFormEvent(name, fields)


def parse_line(line: str) -> tuple[str, LogEvent] | None:
    """One JSON line as (node, LogEvent); None for a malformed line (not an object with an int
    `ts_ms` and str `event` and `node`)."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    ts, name, node = obj.pop("ts_ms", None), obj.pop("event", None), obj.pop("node", None)
    if not isinstance(ts, int) or isinstance(ts, bool) or not isinstance(name, str) or not isinstance(node, str):
        return None
    return node, LogEvent(ts, payload_of(name, obj))


def node_rank(node: str) -> tuple[int, str]:
    """Where a node's lines go among lines of the same `ts_ms` (see the module's docstring)."""
    return (0 if node == "coordinator" else 2 if node in NOT_MEMBERS else 1, node)


@dataclass
class RunLog:
    """A run directory's events in order, and the lines that could not be read."""

    run_dir: Path
    events: list[tuple[str, LogEvent]] = field(default_factory=list)
    malformed: int = 0

    @property
    def end_ms(self) -> int | None:
        """The last `ts_ms` of the run: where its accounting ends."""
        return max((ev.ts_ms for _, ev in self.events), default=None)


def log_files(run_dir: str | Path) -> list[Path]:
    path = Path(run_dir)
    if not path.is_dir():
        raise NoRunLogs(f"{run_dir}: no such run directory")
    files = sorted(path.glob("*.jsonl"))
    if not files:
        raise NoRunLogs(f"{run_dir}: no *.jsonl event logs in it (grouplab run/simulate --run-dir writes them)")
    return files


def read_run(run_dir: str | Path) -> RunLog:
    """Every `*.jsonl` file of `run_dir`, merged into one stream of (node, LogEvent)."""
    log = RunLog(Path(run_dir))
    streams = []
    for path in log_files(run_dir):
        parsed: list[tuple[tuple[int, tuple[int, str], int], tuple[str, LogEvent]]] = []
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                if not line.strip():
                    continue
                item = parse_line(line)
                if item is None:
                    log.malformed += 1
                    continue
                parsed.append(((item[1].ts_ms, node_rank(item[0]), i), item))
        parsed.sort(key=lambda x: x[0])  # a file is in ts_ms order but for clock steps; keep it stable
        streams.append(parsed)
    log.events = [item for _, item in heapq.merge(*streams, key=lambda x: x[0])]
    return log


def iter_run(run_dir: str | Path) -> Iterator[tuple[str, LogEvent]]:
    yield from read_run(run_dir).events
