"""Golden event logs: every built-in scenario on a fixed seed, every node's JSON lines compared byte
for byte with the files under tests/golden/sim/, and `grouplab simulate`'s printed report with
tests/golden/simulate-*.txt. The event log is a contract (docs/events.md) that outside readers and
the Spark pipeline depend on; refactoring the machines, their events or the simulator must leave
these bytes as they are.

After a deliberate change of the log, regenerate with `GROUPLAB_UPDATE_GOLDEN=1 scripts/test
tests/test_golden_logs.py` and review the diff like code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import load_scenario
from tests.golden_files import GOLDEN, UPDATE
from tests.golden_files import compare as _compare

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "grouplab" / "scenarios").glob("*.toml"))
SEED = 3


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_event_log_is_byte_identical_to_golden(path: Path, tmp_path: Path) -> None:
    result = run_seed(load_scenario(path), SEED, tmp_path)
    assert result.ok, result.violation
    golden_dir = GOLDEN / "sim" / path.stem
    # The event logs, one per node; the message trace beside them (trace/) is held to the run by
    # tests/test_trace.py, which replays it, not by a golden copy.
    produced = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    if not UPDATE:
        assert produced == sorted(p.name for p in golden_dir.iterdir())
    for name in produced:
        _compare((tmp_path / name).read_bytes(), golden_dir / name)


@pytest.mark.parametrize("scenario", ["crash-storm", "delivery-exactly-once", "kip848-crash-storm"])
def test_simulate_report_is_identical_to_golden(scenario: str) -> None:
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "grouplab.cli", "simulate", "--scenario", scenario,
                          "--seed", str(SEED)], capture_output=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    _compare(out.stdout, GOLDEN / f"simulate-{scenario}.txt")
