"""Issue 22, cases 1 and 2 end to end, at sizes that run in seconds: hostile connections park
Fetches on the Kafka port (max_wait_ms and min_bytes at INT32_MAX) while a producer produces; a
protected group of three kafka-python consumers keeps its members and a bystander heartbeating
every 100 ms is answered within 1 s. Runs scripts/probe_parked_fetches.py (the coordinator in its
own process, this checkout's code) and reads its rows.

Case 1 on the code before the purgatory (every parked Fetch re-read over all its partitions after
every step): 60 Fetches over 20,000 partitions made each Produce take over a second; with the
purgatory but before wide requests took turns (each decoded, translated and counted back to back
as it arrived, the collector walking their objects) the bystander waited 3.7 s and a Produce 4.3 s,
and the process kept 300 MB after the clients went. Case 2's cost
is the count of reads, asserted in tests/test_fetch_purgatory.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "scripts" / "probe_parked_fetches.py"


def probe(*args: str) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, str(PROBE), "--json", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# What no member may suffer: a wait near its session (10 s), which would cost it its place. The
# issue's 1 s is the probe's figure on a quiet machine (docs/benchmarks.md), not a margin for a test
# on a loaded one; what keeps the wait short is asserted without a clock: the purgatory's count of
# reads (tests/test_fetch_purgatory.py) and the turns heavy work takes (tests/test_heavy_turns.py).
BOUND_MS = 8000


def test_wide_parked_fetches_slow_no_produce_and_no_heartbeat() -> None:
    (row,) = probe("--cases", "1", "--wide-conns", "60", "--partitions", "20000", "--produces", "10")
    assert row["members_removed"] == 0
    assert row["heartbeat_worst_ms"] < BOUND_MS, row
    assert row["produce_max_ms"] < BOUND_MS, row
    assert row["rss_after_mb"] - row["rss_before_mb"] < 50, row  # 60 such Fetches peaked 300 MB, kept after


def test_fetches_parked_at_a_log_end_slow_no_produce_and_no_heartbeat() -> None:
    (row,) = probe("--cases", "2", "--deep-conns", "200", "--produces", "30")
    assert row["members_removed"] == 0
    assert row["heartbeat_worst_ms"] < BOUND_MS, row
    assert row["produce_max_ms"] < BOUND_MS, row
