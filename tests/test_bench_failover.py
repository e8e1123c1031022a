"""scripts/bench_failover.py end to end at its smallest: two consumers each of confluent-kafka's
KIP-848 consumer and grouplab's own, on a 3-broker grouplab with short heartbeats and load time so
it takes seconds. Each cell finishes, the coordinator moved to another broker, the brokers counted
each consumer's FindCoordinator and heartbeats after the kill, and the table has a row per cell.
No timings are asserted; the script's figures are in docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_failover.py"
FAST = ["group.initial.rebalance.delay.ms=0", "grouplab.coordinator.load.time.ms=200",
        "group.consumer.heartbeat.interval.ms=500", "group.consumer.min.heartbeat.interval.ms=500"]


def test_two_consumers_of_two_libraries_ride_through_a_killed_coordinator() -> None:
    broker = [arg for setting in FAST for arg in ("--broker", setting)]
    done = subprocess.run([sys.executable, str(SCRIPT), "--sizes", "2", "--repeat", "1", "--libraries",
                           "confluent-kip848,grouplab-kip848", *broker, "--start-timeout", "60",
                           "--failover-timeout", "60", "--no-write", "--json"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    results = {r["library"]: r for r in json.loads(lines[-1])}
    assert sorted(results) == ["confluent-kip848", "grouplab-kip848"]
    for library, r in results.items():
        assert not r["notes"], (library, r["notes"], done.stdout[-3000:])
        assert r["failover_s"] is not None and r["failover_s"] > 0, library
        assert r["from_node"] != r["to_node"] and r["to_node"] >= 0, library
        assert sorted(r["requests"]) == ["c000", "c001"], library
        for client, counts in r["requests"].items():
            assert counts.get("FindCoordinator", 0) >= 1, (library, client, counts)  # it looked for the new one
            assert counts.get("ConsumerGroupHeartbeat", 0) >= 1, (library, client, counts)  # and reached it
    rows = [line for line in lines if line.startswith("| ")]
    assert rows[0].startswith("| consumers of | N |") and len(rows) == 3
    assert {len(row.split(" | ")) for row in rows} == {len(rows[0].split(" | "))}
    assert "settings changed: " + ", ".join(FAST) in done.stdout


def test_bad_arguments_are_refused() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--libraries", "aiokafka,kafka-java", "--no-write"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "unknown: kafka-java" in done.stderr
