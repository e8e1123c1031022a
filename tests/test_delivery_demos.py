"""README's delivery demos show their lesson with their defaults (issue 25): `grouplab run
--delivery MODE --crash`, nothing else on the command line. The crash must land where the mode's
cost shows (the input is held back until the crash point is armed, so the victim always has a batch
to crash on): at-least-once processes a batch twice, at-most-once loses one, exactly-once aborts the
crashed member's transaction and neither loses nor duplicates. The three run at once (each waits out
Kafka's default session timeout, 45 s)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

MODES = ("at-least-once", "at-most-once", "exactly-once")


def _row(out: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith("│") and ("held" in line or "BROKEN" in line))
    return [cell.strip() for cell in line.strip().strip("│").split("│")]


def test_the_readme_delivery_demos_show_their_lesson_with_their_defaults() -> None:
    env = {**os.environ, "COLUMNS": "250"}
    procs = {mode: subprocess.Popen([sys.executable, "-m", "grouplab.cli", "run", "--delivery", mode, "--crash"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for mode in MODES}
    outs = {}
    for mode, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err
        assert "had no batch left to crash on" not in out, out
        outs[mode] = out
    produced, processed, lost, duplicated, _unc, guarantee = _row(outs["at-least-once"])
    assert (lost, guarantee) == ("0", "held") and int(duplicated) > 0 and int(processed) == int(produced) + int(duplicated)
    produced, processed, lost, duplicated, _unc, guarantee = _row(outs["at-most-once"])
    assert (duplicated, guarantee) == ("0", "held") and int(lost) > 0 and int(processed) == int(produced) - int(lost)
    produced, processed, lost, duplicated, uncommitted, aborted, guarantee = _row(outs["exactly-once"])
    assert (lost, duplicated, aborted, guarantee) == ("0", "0", "1", "held") and int(uncommitted) > 0
