"""The message trace on disk: RUN_DIR/trace/coordinator.jsonl, one JSON object a line.

It lives in its own subdirectory so that readers of a run's event logs (`RUN_DIR/*.jsonl`:
`analyze`, the golden files) do not take it for one. The lines are coordinator/trace.py's; the
format is docs/events.md §7.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, TextIO

TRACE_DIR = "trace"


def trace_path(run_dir: str | Path, node: str = "coordinator") -> Path:
    return Path(run_dir) / TRACE_DIR / f"{node}.jsonl"


class TraceFile:
    """A TraceSink writing one node's trace. Line-buffered, as the event log is, so a run killed
    with kill -9 keeps every line written before it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = open(self.path, "w", buffering=1, encoding="utf-8")

    def __call__(self, line: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(line, separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class TraceUnreadable(ValueError):
    """A trace that is missing or not JSON lines; the message says which and where."""


def read_trace(path: str | Path) -> Iterator[dict[str, Any]]:
    path = Path(path)
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise TraceUnreadable(f"{path}: no message trace (grouplab run, simulate and coordinator write one "
                              "with --run-dir)") from None
    with f:
        for n, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as exc:
                if not text.endswith("\n"):
                    return  # a torn last line: the run was killed while writing it
                raise TraceUnreadable(f"{path}:{n}: not a JSON line ({exc.msg})") from None
            if not isinstance(line, dict) or "kind" not in line:
                raise TraceUnreadable(f"{path}:{n}: not a trace line (no `kind`)")
            yield line
