"""`grouplab compare` (docs/legacy.md §7): the same membership changes under the coordinator
protocol and the ZooKeeper era. In the simulators a seed gives the same tables (a golden file),
and the figures show what each design does: every ZooKeeper-era consumer rebalances on every
change and reads every registration (more registry operations than coordinator requests), a crash
is noticed after the session timeout in both, new partitions at once by the ZooKeeper-era
consumers' watch and only at the leader's next metadata refresh by the coordinator protocol. Over
real sockets, on the embedded registry and on a real ZooKeeper, every change settles under both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.compare.real import run_real
from grouplab.compare.report import as_json
from grouplab.compare.script import Figures, Settings, real_names, script, sim_names
from grouplab.compare.simulate import simulate_coordinator, simulate_zk
from tests.golden_files import GOLDEN, compare

ROOT = Path(__file__).resolve().parent.parent


def simulated(seed: int, **kw: object) -> tuple[object, list[Figures], list[Figures]]:
    settings = Settings(**kw)  # type: ignore[arg-type]
    s = script(settings, sim_names(settings.consumers), seed)
    return s, simulate_coordinator(s, seed), simulate_zk(s, seed)


def test_the_tables_of_a_seed_are_identical_to_golden() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "TERM": "dumb", "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "grouplab.cli", "compare", "--seed", "1"], capture_output=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    compare(out.stdout, GOLDEN / "compare-seed-1.txt")


def test_a_seed_gives_the_same_figures_and_another_seed_others() -> None:
    a, b, c = (as_json(*simulated(seed)[:3], "simulator", seed) for seed in (3, 3, 4))  # type: ignore[misc]
    assert a == b
    assert a["changes"] != c["changes"]


def test_the_figures_show_what_each_design_does() -> None:
    s, co, zk = simulated(1)
    changes = s.changes  # type: ignore[attr-defined]
    live = s.live_after  # type: ignore[attr-defined]
    settings = s.settings  # type: ignore[attr-defined]
    assert [c.kind for c in changes] == ["join", "leave", "crash", "add_partitions", "join"]
    for i, (change, a, b) in enumerate(zip(changes, co, zk)):
        assert a.settle_ms is not None and b.settle_ms is not None, change.label()
        # The herd: every consumer in the group afterwards rebalanced, and read every registration.
        assert set(b.rebalances) >= live[i], change.label()
        assert b.total > a.total, change.label()
        assert a.heartbeats is not None and b.heartbeats is None and b.failed is not None and a.failed is None
    crash, grow = 2, 3
    # A crash is noticed when the session times out: after at most one heartbeat (ping) interval less.
    assert co[crash].settle_ms >= settings.session_timeout_ms - 3000  # type: ignore[operator]
    assert zk[crash].settle_ms >= settings.zk_session_timeout_ms * 2 // 3  # type: ignore[operator]
    # New partitions: the ZooKeeper-era consumers' watch fires at once; the coordinator protocol's
    # leader sees them at its next metadata refresh, and they wait unconsumed until then.
    assert zk[grow].settle_ms < 1000  # type: ignore[operator]
    assert 1000 < co[grow].settle_ms <= settings.metadata_max_age_ms + 10_000  # type: ignore[operator]
    added = changes[grow].total - settings.topics[changes[grow].topic]
    assert co[grow].idle_ms >= added * (co[grow].settle_ms - 1000)  # type: ignore[operator]


@pytest.mark.parametrize("registry", ["embedded", "zookeeper"])
async def test_over_real_sockets_every_change_settles_under_both_designs(registry: str,
                                                                        request: pytest.FixtureRequest) -> None:
    zookeeper = None if registry == "embedded" else str(request.getfixturevalue("zookeeper").hosts)
    settings = Settings(consumers=3, session_timeout_ms=6000, zk_session_timeout_ms=4000, metadata_max_age_ms=1000,
                        group=f"compare-{registry}")
    s = script(settings, real_names(3))
    co, zk = await run_real(s, zookeeper, timeout_s=60, hold_s=0.1, say=lambda line: None)
    assert len(co) == len(zk) == 5
    for change, live, a, b in zip(s.changes, s.live_after, co, zk):
        assert a.settle_ms is not None and 0 <= a.settle_ms < 60_000, change.label()
        assert b.settle_ms is not None and 0 <= b.settle_ms < 60_000, change.label()
        assert set(a.rebalances) == live and set(b.rebalances) >= live, change.label()
        assert a.total > 0 and b.total > 0, change.label()
    # A crash is noticed no sooner than the session timeout less one heartbeat (ping) interval.
    assert co[2].settle_ms >= 6000 - 3000 and zk[2].settle_ms >= 4000 * 2 // 3  # type: ignore[operator]


def test_the_json_form_has_every_figure() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "grouplab.cli", "compare", "--consumers", "3", "--format", "json",
                          "--seed", "2"], capture_output=True, env=env, cwd=ROOT, timeout=120, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "simulator" and doc["seed"] == 2 and len(doc["changes"]) == 5
    first = doc["changes"][0]
    assert set(first["coordinator"]) == set(first["zookeeper"]) == {
        "settle_ms", "messages", "offsets", "heartbeats", "idle_ms", "rebalances", "failed", "gave_up"}
    assert doc["conclusion"].startswith("The ZooKeeper era made")
