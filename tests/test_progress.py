"""Progress where it runs (issue 25, item 7): a bar on a terminal; elsewhere a plain line at most
every 10 s, the first after 10 s (a short job says nothing), through the same calls."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from rich.console import Console

from grouplab.progress import ProgressReport


def test_off_a_terminal_a_line_every_ten_seconds_and_none_for_a_short_job() -> None:
    out = io.StringIO()
    now = [0.0]
    console = Console(file=out, force_terminal=False, width=200)
    with ProgressReport(console, "crash-storm: seeds", total=100, unit="seeds", clock=lambda: now[0]) as progress:
        for _ in range(100):
            now[0] += 0.5  # a seed takes half a second: 50 s in all
            progress.update(advance=1)
    lines = out.getvalue().splitlines()
    assert lines[0] == "20 of 100 seeds · 10 s · about 40 s left · crash-storm: seeds"
    assert lines[-1] == "100 of 100 seeds · 50 s · crash-storm: seeds"
    assert [line.split(" ")[0] for line in lines] == ["20", "40", "60", "80", "100"]

    short = io.StringIO()
    with ProgressReport(Console(file=short, force_terminal=False), "seeds", total=3, clock=lambda: 1.0) as progress:
        progress.update(advance=3)
    assert short.getvalue() == ""


def test_on_a_terminal_a_bar_and_no_plain_lines() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    now = [0.0]
    with ProgressReport(console, "Spark tasks", clock=lambda: now[0]) as progress:
        now[0] = 60.0
        progress.update(completed=5, total=10)
    assert "5 of 10 Spark tasks · 60 s" not in out.getvalue()


def test_simulate_of_many_seeds_into_a_pipe_says_it_started() -> None:
    """`simulate --seeds` whose output is not a terminal says what it runs before the first result."""
    proc = subprocess.run([sys.executable, "-m", "grouplab.cli", "simulate", "--scenario", "crash-storm",
                           "--seeds", "1-3"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "running 3 seeds of crash-storm" in proc.stderr
