"""`grouplab compare` (docs/legacy.md §7): the same membership changes under the ZooKeeper era,
the classic coordinator protocol (eager and cooperative) and KIP-848. In the simulators a seed
gives the same tables (a golden file), and the figures show what each design does: every
ZooKeeper-era consumer rebalances on every change and reads every registration (more registry
operations than coordinator requests), a crash is noticed after the session timeout in all, new
partitions at once by the ZooKeeper-era consumers' watch, at the members' next heartbeat by
KIP-848's coordinator and only at the leader's next metadata refresh by the classic protocol; a
leave under KIP-848 touches only the members that take the leaver's partitions. Over real
sockets, on the embedded registry and on a real ZooKeeper, every change settles under every design."""

from __future__ import annotations

import json
import os
import re
from typing import Any
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.compare.real import run_real
from grouplab.compare.report import as_json
from grouplab.compare.script import DESIGNS, Figures, Settings, real_names, script, sim_names
from grouplab.compare.simulate import simulate
from tests.golden_files import GOLDEN, compare

ROOT = Path(__file__).resolve().parent.parent


def simulated(seed: int, **kw: object) -> tuple[Any, dict[str, list[Figures]]]:
    settings = Settings(**kw)  # type: ignore[arg-type]
    s = script(settings, sim_names(settings.consumers), seed)
    return s, {d: simulate(s, seed, d) for d in DESIGNS}


def test_the_tables_of_a_seed_are_identical_to_golden() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "TERM": "dumb", "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "grouplab.cli", "compare", "--seed", "1"], capture_output=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    compare(out.stdout, GOLDEN / "compare-seed-1.txt")


def test_a_seed_gives_the_same_figures_and_another_seed_others() -> None:
    a, b, c = (as_json(*simulated(seed), "simulator", seed) for seed in (3, 3, 4))
    assert a == b
    assert a["changes"] != c["changes"]


def test_the_figures_show_what_each_design_does() -> None:
    s, results = simulated(1, metadata_refresh="max-age")  # Kafka's client: the leader's periodic refresh
    co, zk, kip848 = results["eager"], results["zk"], results["consumer"]
    changes, live, settings = s.changes, s.live_after, s.settings
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
    # KIP-848: the coordinator sees the new partitions at the members' next heartbeat (5 s) and
    # assigns them itself; a crash is noticed after its session timeout (one heartbeat less at most).
    assert all(f.settle_ms is not None for f in kip848)
    assert kip848[grow].settle_ms <= 2 * 5000 and kip848[grow].idle_ms < co[grow].idle_ms / 10  # type: ignore[operator]
    assert kip848[crash].settle_ms >= settings.session_timeout_ms - 5000  # type: ignore[operator]
    # A leave: every classic member rebalances; under KIP-848 only those that take the leaver's partitions move.
    leave = 1
    assert set(co[leave].rebalances) == live[leave] and set(results["cooperative"][leave].rebalances) == live[leave]
    assert 0 < len(kip848[leave].rebalances) < len(live[leave])
    # Heartbeats carry KIP-848's protocol: it sends fewer requests than the classic designs.
    assert sum(f.total for f in kip848) < sum(f.total for f in co)


@pytest.mark.parametrize("registry", ["embedded", "zookeeper"])
async def test_over_real_sockets_every_change_settles_under_both_designs(registry: str,
                                                                        request: pytest.FixtureRequest) -> None:
    zookeeper = None if registry == "embedded" else str(request.getfixturevalue("zookeeper").hosts)
    settings = Settings(consumers=3, session_timeout_ms=6000, zk_session_timeout_ms=4000, metadata_max_age_ms=1000,
                        group=f"compare-{registry}")
    s = script(settings, real_names(3))
    results = await run_real(s, list(DESIGNS), zookeeper, timeout_s=60, hold_s=0.1, say=lambda line: None)
    co, zk, kip848 = results["eager"], results["zk"], results["consumer"]
    assert all(len(figures) == 5 for figures in results.values())
    for i, (change, live) in enumerate(zip(s.changes, s.live_after)):
        for design, figures in results.items():
            f = figures[i]
            assert f.settle_ms is not None and 0 <= f.settle_ms < 60_000, (design, change.label())
            assert f.total + (f.heartbeats or 0) > 0, (design, change.label())
        assert set(co[i].rebalances) == live and set(zk[i].rebalances) >= live, change.label()
        assert set(kip848[i].rebalances) <= live, change.label()  # only the members whose assignment changed
    # A crash is noticed no sooner than the session timeout less one heartbeat (ping) interval.
    assert co[2].settle_ms >= 6000 - 3000 and zk[2].settle_ms >= 4000 * 2 // 3  # type: ignore[operator]
    assert kip848[2].settle_ms >= 6000 - 5000  # type: ignore[operator]


def test_the_json_form_has_every_figure() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "grouplab.cli", "compare", "--consumers", "3", "--format", "json",
                          "--seed", "2"], capture_output=True, env=env, cwd=ROOT, timeout=120, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "simulator" and doc["seed"] == 2 and len(doc["changes"]) == 5
    assert list(doc["designs"]) == ["zk", "eager", "cooperative", "consumer"]
    first = doc["changes"][0]
    assert list(first["figures"]) == list(doc["designs"]) and list(doc["totals"]) == list(doc["designs"])
    for figures in first["figures"].values():
        assert set(figures) == {"settle_ms", "messages", "offsets", "heartbeats", "idle_ms", "rebalances", "failed",
                                "gave_up", "metadata_wait_ms", "metadata_wait_idle_ms"}
    assert doc["conclusion"][0].startswith("Over the whole script: ZooKeeper era")
    assert first["figures"]["eager"]["metadata_wait_ms"] is None


def test_designs_can_be_chosen_and_an_unknown_one_is_refused() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "grouplab.cli", "compare", "--designs", "consumer,zk", "--format",
                          "json"], capture_output=True, env=env, cwd=ROOT, timeout=120, text=True)
    assert out.returncode == 0, out.stderr
    assert list(json.loads(out.stdout)["designs"]) == ["zk", "consumer"]  # in the designs' own order
    out = subprocess.run([sys.executable, "-m", "grouplab.cli", "compare", "--designs", "zk,paxos"],
                         capture_output=True, env=env, cwd=ROOT, timeout=120, text=True)
    assert out.returncode == 2 and "unknown paxos" in out.stderr and len(out.stderr.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- issue 25: fair and explained


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "TERM": "dumb", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "grouplab.cli", "compare", *args], capture_output=True, env=env,
                          cwd=ROOT, timeout=120, text=True)


def test_by_default_every_design_hears_of_added_partitions_when_they_are_made() -> None:
    """The classic consumers' metadata is refreshed when the partitions are made (as the watch and
    KIP-848's coordinator tell theirs), so the classic group no longer waits metadata.max.age.ms."""
    s, results = simulated(1)
    grow = 3
    assert s.changes[grow].kind == "add_partitions"
    for design in ("eager", "cooperative"):
        f = results[design][grow]
        assert f.settle_ms is not None and f.settle_ms < 2 * 3000, design  # a rebalance, not 300 s
        assert f.metadata_wait_ms is not None and f.metadata_wait_ms < 100, design
    # ... and the script no longer leaves metadata.max.age.ms after the change for it
    assert s.changes[grow + 1].at_ms - s.changes[grow].at_ms < s.settings.metadata_max_age_ms


def test_kafkas_client_wait_is_a_line_of_its_own_with_its_cause() -> None:
    out = cli("--metadata-refresh", "max-age", "--designs", "zk,eager")
    assert out.returncode == 0, out.stderr
    assert "↳ waiting for" in out.stdout  # its row, beneath the classic design's (the cell wraps)
    assert "Waiting for metadata refresh (metadata.max.age.ms = 300000): the group coordinator (classic protocol, " \
           "eager range) waited 268.8 s" in out.stdout
    _, results = simulated(1, metadata_refresh="max-age")
    f = results["eager"][3]
    assert f.metadata_wait_ms is not None and 250_000 < f.metadata_wait_ms <= f.settle_ms  # type: ignore[operator]
    assert f.metadata_wait_idle_ms >= 2 * f.metadata_wait_ms  # the two new partitions, without a consumer meanwhile


def test_the_verdict_names_the_design_and_each_winner_has_its_cause() -> None:
    out = cli("--consumers", "20", "--format", "json")
    assert out.returncode == 0, out.stderr
    lines = json.loads(out.stdout)["conclusion"]
    verdict = next(line for line in lines if line.startswith("Verdict: "))
    assert re.match(r"Verdict: the (ZooKeeper era|group coordinator) \(.+\) settled sooner, [\d.]+ s over the whole "
                    r"script \(", verdict), verdict
    assert "coordinated with the fewest messages" in verdict
    whys = [line for line in lines if ". Why: " in line]
    assert len(whys) == 5 and all(" first (" in line for line in whys)
    assert "group.initial.rebalance.delay.ms" in whys[0] and "session times out" in whys[2]
    costs = next(line for line in lines if line.startswith("What the ZooKeeper era's speed cost: "))
    assert all(word in costs for word in ("registry operations", "the herd effect", "failed claims",
                                          "rebalance.max.retries"))
    # With 20 consumers the registry operations are many times the coordinator's requests, and said so.
    assert float(re.search(r"([\d.]+)× the", costs).group(1)) > 5  # type: ignore[union-attr]


def test_the_scaling_table_has_every_design_at_every_size() -> None:
    out = cli("--scale", "4,20", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "scale" and list(doc["sizes"]) == ["4", "20"]
    for by_design in doc["sizes"].values():
        assert list(by_design) == ["zk", "eager", "cooperative", "consumer"]  # KIP-848 a column of the same table
        assert all(f["settle_ms"] is not None for f in by_design.values())
        assert by_design["zk"]["failed"] is not None and by_design["zk"]["gave_up"] is not None
    small, large = doc["sizes"]["4"], doc["sizes"]["20"]
    reads = [s["zk"]["messages"]["reads"] for s in (small, large)]
    requests = [sum(s["eager"]["messages"].values()) for s in (small, large)]
    assert reads[1] / reads[0] > 2 * requests[1] / requests[0]  # the herd: reads grow with the square
    assert doc["conclusion"][0].startswith("From 4 to 20 consumers (5× the group): ZooKeeper era ")
    assert cli("--scale", "2,10").returncode == 2 and cli("--scale", "10", "--real").returncode == 2


def test_the_scaling_table_of_a_seed_is_identical_to_golden() -> None:
    out = cli("--scale", "3,10", "--seed", "1")
    assert out.returncode == 0, out.stderr
    compare(out.stdout.encode(), GOLDEN / "compare-scale-3-10.txt")


def test_a_metadata_refresh_fault_makes_a_classic_leader_rejoin_at_once() -> None:
    from grouplab.protocol import events
    from grouplab.sim.runner import run_seed
    from grouplab.sim.scenario import parse_scenario

    raw = {"name": "refresh", "topics": {"t0": 2}, "duration_ms": 40_000, "faults_from_ms": 0,
           "consumer": {"metadata.max.age.ms": 300_000}, "members": [{"count": 2}],
           "schedule": [{"at_ms": 20_000, "fault": "add_partitions", "topic": "t0", "partitions": 2},
                        {"at_ms": 20_000, "fault": "refresh_metadata"}]}
    seen: list[tuple[int, str]] = []
    run_seed(parse_scenario(raw, "test"), 1, listener=lambda node, ev: seen.append((ev.ts_ms, node))
             if isinstance(ev.payload, events.MetadataChanged) else None)
    assert len(seen) == 1 and 20_000 <= seen[0][0] < 20_100  # the leader alone, at once
    seen.clear()
    del raw["schedule"][1]  # without it: the leader's periodic refresh, metadata.max.age.ms after it assigned
    run_seed(parse_scenario(raw, "test"), 1, listener=lambda node, ev: seen.append((ev.ts_ms, node))
             if isinstance(ev.payload, events.MetadataChanged) else None)
    assert len(seen) == 1 and seen[0][0] >= 300_000
