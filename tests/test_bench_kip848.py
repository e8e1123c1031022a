"""scripts/bench_kip848.py end to end at its smallest (two confluent-kafka consumers, heartbeats
lowered): every cell finishes, and a leave stops what each protocol says it stops: eager every
partition (the survivor revokes its own too), cooperative and KIP-848 only the leaver's. No timings
are asserted; the script's figures are in docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_kip848.py"


def test_two_consumers_under_each_protocol() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--sizes", "2", "--repeat", "1", "--heartbeat-ms", "500",
                           "--initial-delay-ms", "0", "--settle-s", "0.5", "--cell-timeout", "60", "--no-write", "--json"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    results = {r["protocol"]: r for r in json.loads(done.stdout.strip().splitlines()[-1])}
    assert sorted(results) == ["consumer", "cooperative", "eager"]
    for protocol, r in results.items():
        assert not r["notes"], (protocol, r["notes"], done.stdout[-3000:])
        assert r["stable_s"] is not None and r["leave_stable_s"] is not None, protocol
        assert r["leave_partition_s"] > 0, protocol  # the leaver's partitions wait for the survivor
    assert results["eager"]["leave_stopped"] == 4
    assert results["cooperative"]["leave_stopped"] == 2
    assert results["consumer"]["leave_stopped"] == 2


def test_bad_arguments_are_refused() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--protocols", "eager,zookeeper", "--no-write"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "unknown: zookeeper" in done.stderr
