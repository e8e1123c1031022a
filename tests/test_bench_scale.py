"""scripts/bench_scale.py and its lean load generator (scripts/_lean_members.py) at their smallest:
the lean members, over two worker processes and real sockets, end as one Stable generation whose
assignment covers every partition once, and the check refuses anything less. No timings are
asserted; the script's figures are in docs/benchmarks.md."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.admin import AdminClient
from grouplab.protocol import consumer_protocol
from grouplab.protocol.types import Assignment, TopicPartition

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import _lean_members  # noqa: E402
from bench_scale import Coordinator  # noqa: E402

pytestmark = pytest.mark.e2e


def _assignment(*partitions: int) -> bytes:
    return consumer_protocol.encode_assignment(Assignment([TopicPartition("t", p) for p in partitions]))


@pytest.mark.parametrize("delay_ms", [0, 100])
def test_lean_members_end_as_one_stable_generation(tmp_path: Path, delay_ms: int) -> None:
    with Coordinator([], tmp_path / "coordinator.txt", delay_ms) as coordinator:
        async def topic() -> None:
            async with AdminClient("127.0.0.1", coordinator.port) as admin:
                await admin.create_topics({"t": 5})

        asyncio.run(topic())
        result = _lean_members.time_to_stable(coordinator.port, 9, "g", "t", 5, procs=2, timeout_s=60)
    assert result.members == 9 and result.generation >= 1 and result.s > 0
    console = (tmp_path / "coordinator.txt").read_text()
    assert f"generation {result.generation} · protocol range" in console, console[-3000:]


def test_the_check_refuses_what_is_not_one_stable_generation() -> None:
    good = [("m0", "a", 1, 2, _assignment(0)), ("m1", "b", 1, 0, _assignment(1))]
    assert _lean_members.check(good, 2, 2, "t") == (1, 2)
    cases = {
        "not one generation": [good[0], ("m1", "b", 2, 0, _assignment(1))],
        "distinct member ids": [good[0], ("m1", "a", 1, 0, _assignment(1))],
        "does not cover": [good[0], ("m1", "b", 1, 0, _assignment(0))],
        "listed 1 members": [("m0", "a", 1, 1, _assignment(0)), good[1]],
    }
    for why, reports in cases.items():
        with pytest.raises(AssertionError, match=why):
            _lean_members.check(reports, 2, 2, "t")


def test_the_script_measures_both_kinds_of_members() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_scale.py"), "--sizes", "12", "--repeat", "1",
                           "--hb-seconds", "0.3", "--no-write"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 12 |")]
    assert [row.split("|")[2:4] for row in rows] == [[" lean ", " default console "], [" lean ", " --log-json (peer) "],
                                                      [" full client ", " default console "]], done.stdout
