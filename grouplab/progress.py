"""Progress of a long command, told where it runs (issue 25: silence for minutes is a hang to a user).

On a terminal, rich's bar, redrawn in place and gone when the work is done. Anywhere else (a pipe,
a CI log, a file) a bar cannot be redrawn, so a plain line instead, at most every `every_s`
seconds ("200 of 500 seeds · 41 s"): the first one after `every_s`, so a job that ends sooner
prints nothing. The same calls for both. The plain line's words come from a catalogue
(`progress.*`), English unless one is given.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from grouplab.teach.catalog import Catalog

PLAIN_EVERY_S = 10.0


class ProgressReport:
    """`with ProgressReport(err, "seeds", total=500) as progress: ... progress.update(advance=1)`."""

    def __init__(self, console: Console, description: str, total: int | None = None, unit: str = "",
                 every_s: float = PLAIN_EVERY_S, clock: Callable[[], float] = time.monotonic,
                 c: Catalog | None = None) -> None:
        self.console = console
        self.c = c or Catalog()
        self.description = description
        self.total = total
        self.unit = unit or description
        self.completed = 0
        self.every_s = every_s
        self.clock = clock
        self._started = self._said = 0.0
        self._bar: Progress | None = None
        self._task: Any = None

    def __enter__(self) -> "ProgressReport":
        self._started = self._said = self.clock()
        if self.console.is_terminal:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(kind, exc, tb)

    def update(self, completed: int | None = None, total: int | None = None, advance: int = 0,
               description: str | None = None) -> None:
        if completed is not None:
            self.completed = completed
        self.completed += advance
        if total is not None:
            self.total = total
        if description is not None:
            self.description = description
        if self._bar is not None:
            self._bar.update(self._task, completed=self.completed, total=self.total, description=self.description)
            return
        now = self.clock()
        if now - self._said >= self.every_s:
            self._said = now
            c = self.c
            of = c.t("progress.of", total=f"{self.total:,}") if self.total else ""
            elapsed = now - self._started
            # What is left at the pace so far (once something is done): a guess, said as one.
            left = (c.t("progress.left", s=f"{elapsed * (self.total - self.completed) / self.completed:.0f}")
                    if self.total and 0 < self.completed < self.total else "")
            self.console.print(c.t("progress.line", done=f"{self.completed:,}", of=of, unit=self.unit,
                                   s=f"{elapsed:.0f}", left=left)
                               + (f" · {self.description}" if self.description != self.unit else ""),
                               soft_wrap=True, highlight=False)
