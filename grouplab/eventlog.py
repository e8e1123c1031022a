"""The event log (docs/design.md §6): one JSON object a line, written with structlog.

Every line has `ts_ms` (the state machine's now_ms), `event` and `node`, then the event's fields
(`group_id`, `generation_id`, `member_id`, `state`, `partitions`, ...): `LogEvent.fields`, those of
its typed event (protocol/events.py) in its class's order. docs/events.md lists them.
A run directory holds one file per node: `coordinator.jsonl`, `<member>.jsonl`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, MutableMapping, TextIO

import structlog

from grouplab.protocol.effects import LogEvent


def _order(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> Mapping[str, Any]:
    """Put ts_ms, event and node first so a line reads well in a terminal."""
    head = {k: event_dict.pop(k) for k in ("ts_ms", "event", "node") if k in event_dict}
    head.update(event_dict)
    return head


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)


class EventLog:
    """Writes LogEvents of one node as JSON lines. `listeners` see every event (the live display)."""

    def __init__(self, node: str, stream: TextIO | None = None, path: str | Path | None = None) -> None:
        self.node = node
        self._file: TextIO | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # A node's file starts fresh with each run, so a rerun into the same directory does not mix runs.
            self._file = open(path, "w", buffering=1, encoding="utf-8")
            stream = self._file
        self._logger = None
        if stream is not None:
            self._logger = structlog.wrap_logger(
                structlog.PrintLogger(stream),
                processors=[_order, structlog.processors.JSONRenderer(serializer=json.dumps, default=_default)],
            )
        self.listeners: list[Callable[[str, LogEvent], None]] = []

    def emit(self, ev: LogEvent) -> None:
        if self._logger is not None:
            self._logger.msg(ev.event, ts_ms=ev.ts_ms, node=self.node, **ev.fields)
        for listener in self.listeners:
            listener(self.node, ev)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def stderr_log(node: str) -> EventLog:
    return EventLog(node, stream=sys.stderr)


def null_log(node: str) -> EventLog:
    return EventLog(node)


def run_dir_log(run_dir: str | Path, node: str) -> EventLog:
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in node)
    return EventLog(node, path=Path(run_dir) / f"{safe}.jsonl")
