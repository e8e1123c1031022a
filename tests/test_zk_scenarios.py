"""ZooKeeper-era scenarios from the command line (grouplab/zk/scenario.py, docs/legacy.md §5): the
TOML format is checked as the coordinator scenarios' is (every key, every name); the built-in
scenarios keep their invariants over many seeds and show what they are named for (the herd, a
newcomer giving up on a slow release, a session expiring); their event logs, one file per node, and
`grouplab simulate --protocol zk`'s report are pinned byte for byte for one seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grouplab.sim.scenario import ScenarioError
from grouplab.zk.scenario import builtin_zk_dir, builtin_zk_names, load_zk_scenario, parse_zk_scenario
from grouplab.zk.simulate import run_zk_seed
from tests.golden_files import GOLDEN, UPDATE
from tests.golden_files import compare as _compare

ROOT = Path(__file__).resolve().parent.parent
SEED = 3


def test_the_built_in_scenarios() -> None:
    assert builtin_zk_names() == ["herd", "session-expiry", "slow-release", "zombie"]


@pytest.mark.parametrize("name", ["herd", "session-expiry", "slow-release", "zombie"])
def test_invariants_hold_over_seeds(name: str) -> None:
    scenario = load_zk_scenario(name)
    for seed in range(1, 13):
        result = run_zk_seed(scenario, seed)  # raises Violation, naming the seed
        assert result.rebalances > 0


@pytest.mark.parametrize("name", ["herd", "session-expiry", "slow-release", "zombie"])
def test_event_logs_are_byte_identical_to_golden(name: str, tmp_path: Path) -> None:
    run_zk_seed(load_zk_scenario(name), SEED, tmp_path)
    golden_dir = GOLDEN / "zk-sim" / name
    produced = sorted(p.name for p in tmp_path.iterdir())
    if not UPDATE:
        assert produced == sorted(p.name for p in golden_dir.iterdir())
    assert "simulator.jsonl" in produced and "registry.jsonl" in produced and "c-0.jsonl" in produced
    for file in produced:
        _compare((tmp_path / file).read_bytes(), golden_dir / file)


def test_simulate_report_is_identical_to_golden() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "TERM": "dumb", "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "grouplab.cli", "simulate", "--protocol", "zk", "--scenario",
                          "slow-release", "--seed", str(SEED)], capture_output=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    _compare(out.stdout, GOLDEN / "simulate-zk-slow-release.txt")


def events(name: str, seed: int = SEED) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    run_zk_seed(load_zk_scenario(name), seed,
                listener=lambda node, ev: lines.append({"ts_ms": ev.ts_ms, "event": ev.event, "node": node, **ev.fields}))
    return lines


def test_herd_every_consumer_rebalances_for_one_newcomer_and_one_leaver() -> None:
    lines = events("herd")
    for at, live in ((30_000, {f"c-{i}" for i in range(8)} | {"burst-8"}),
                     (50_000, {f"c-{i}" for i in range(8) if i != 3} | {"burst-8"})):
        began = {e["node"] for e in lines if e["event"] == "zk_rebalance_begun" and at <= e["ts_ms"] < at + 10_000}
        assert began == live


def test_slow_release_makes_the_newcomer_give_up_until_a_watch_fires_again() -> None:
    lines = events("slow-release")
    failed = [e for e in lines if e["event"] == "zk_rebalance_failed"]
    assert [(e["node"], e["attempts"]) for e in failed] == [("c-2", 4)]  # rebalance.max.retries
    assert 12_000 + 3 * 2000 <= failed[0]["ts_ms"] < 12_000 + 12_000  # three back-offs, before the release
    done = [e["ts_ms"] for e in lines if e["event"] == "zk_rebalance_done" and e["node"] == "c-2"]
    assert done and done[0] >= 45_000  # nothing until c-3's join fired its watch


def test_session_expiry_hands_the_partitions_over_and_the_consumer_registers_again() -> None:
    lines = events("session-expiry")
    expired = [e for e in lines if e["event"] == "registry_session_expired"]
    assert len(expired) == 1 and 10_000 + 4000 <= expired[0]["ts_ms"] <= 10_000 + 6000
    registered = [e["ts_ms"] for e in lines if e["event"] == "zk_registered" and e["node"] == "c-1"]
    assert len(registered) == 2 and registered[1] >= 19_000  # after the 9 s pause
    taken = [e for e in lines if e["event"] == "zk_rebalance_done" and expired[0]["ts_ms"] <= e["ts_ms"] < 19_000]
    assert {e["node"] for e in taken} == {"c-0", "c-2"}
    assert sorted(p for e in taken for _, p in e["partitions"]) == list(range(6))


def test_a_delaying_fault_says_by_how_much() -> None:
    line = next(e for e in events("slow-release") if e["event"] == "fault_injected")
    assert (line["fault"], line["members"], line["duration_ms"], line["delay_ms"]) == \
        ("slow_release", ["c-1"], 30_000, 12_000)


BASE = {"topics": {"t0": 2}, "members": [{"count": 2}]}


@pytest.mark.parametrize("raw, words", [
    ({**BASE, "colour": 1}, ["unknown key", "colour"]),
    ({**BASE, "members": [{"count": 1, "streams": 2}]}, ["members[0]", "streams"]),
    ({**BASE, "members": [{"topics": ["t9"]}]}, ["unknown topic 't9'"]),
    ({**BASE, "consumer": {"no.such": 1}}, ["no.such"]),
    ({**BASE, "schedule": [{"at_ms": 1, "fault": "explode"}]}, ["unknown fault 'explode'"]),
    ({**BASE, "schedule": [{"at_ms": 1, "fault": "crash", "members": ["c-9"]}]}, ["c-9", "running: c-0, c-1"]),
    ({**BASE, "schedule": [{"at_ms": 1, "fault": "crash", "members": ["c-0"]},
                           {"at_ms": 2, "fault": "pause", "members": ["c-0"], "duration_ms": 5}]}, ["'c-0'"]),
    ({**BASE, "schedule": [{"at_ms": 1, "fault": "join", "members": ["c-1"]}]}, ["already running"]),
    ({**BASE, "schedule": [{"at_ms": 1, "fault": "add_partitions", "topic": "t0"}]}, ["partitions >= 1"]),
    ({**BASE, "schedule": [{"at_ms": 1, "fault": "slow_release", "members": ["c-0"]}]}, ["delay_ms"]),
    ({**BASE, "topics": {"t0": 0}}, ["partition counts"]),
])
def test_mistakes_in_a_scenario_are_named(raw: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(ScenarioError) as exc:
        parse_zk_scenario(json.loads(json.dumps(raw)), "x.toml")
    assert str(exc.value).startswith("x.toml")
    for word in words:
        assert word in str(exc.value)


def test_members_and_added_partitions_become_the_simulators_changes() -> None:
    scenario = parse_zk_scenario({"topics": {"t0": 2, "t1": 1}, "members": [
        {"count": 2, "name": "a", "topics": {"t0": 2}}, {"count": 1, "name": "b", "start_ms": [100, 200]}],
        "schedule": [{"at_ms": 5, "fault": "add_partitions", "topic": "t0", "partitions": 3},
                     {"at_ms": 9, "fault": "join", "count": 2}]})
    joins = [(c.member, c.topics, c.at_ms, c.spread_ms) for c in scenario.changes if c.kind == "join"]
    assert joins == [("a0-0", {"t0": 2}, 0, 0), ("a0-1", {"t0": 2}, 0, 0), ("b1-0", {"t0": 1, "t1": 1}, 100, 100),
                     ("burst-3", {"t0": 1, "t1": 1}, 9, 0), ("burst-4", {"t0": 1, "t1": 1}, 9, 0)]
    grown = [c for c in scenario.changes if c.kind == "add_partitions"]
    assert [(c.topic, c.count) for c in grown] == [("t0", 5)]  # 2 + 3: the new total


def test_built_in_files_live_apart_from_the_coordinator_scenarios() -> None:
    assert builtin_zk_dir() == ROOT / "grouplab" / "scenarios" / "zk"
    assert not (ROOT / "grouplab" / "scenarios" / "herd.toml").exists()


def test_zombie_window_the_cut_off_consumer_fetches_until_its_new_sessions_rebalance() -> None:
    lines = events("zombie")
    result = run_zk_seed(load_zk_scenario("zombie"), SEED)
    expired = next(e["ts_ms"] for e in lines if e["event"] == "registry_session_expired")
    assert 10_000 + 4000 <= expired <= 10_000 + 6000  # the session times out while the link is down
    learned = next(e for e in lines if e["event"] == "zk_session_expired")
    assert learned["node"] == "c-1" and learned["ts_ms"] == 25_000 and learned["fetching"]  # when the link is back
    stopped = next(e["ts_ms"] for e in lines if e["event"] == "zk_fetchers_stopped" and e["node"] == "c-1"
                   and e["ts_ms"] >= 25_000)
    [window] = result.zombie_windows
    assert (window.consumer, window.from_ms, window.to_ms, window.partitions) == ("c-1", expired, stopped, 2)
    # The others took c-1's partitions over meanwhile: fetched twice for most of the window.
    assert 2 * (window.ms - 1000) <= result.double_fetch_ms <= result.zombie_partition_ms == 2 * window.ms


def test_a_cut_shorter_than_the_session_leaves_no_zombie() -> None:
    raw = {"topics": {"t0": 4}, "members": [{"count": 2}], "duration_ms": 30_000,
           "consumer": {"zookeeper.session.timeout.ms": 6000},
           "schedule": [{"at_ms": 5000, "fault": "partition", "members": ["c-1"], "duration_ms": 3000}]}
    result = run_zk_seed(parse_zk_scenario(raw), 1)
    assert result.zombie_windows == [] and result.double_fetch_ms == 0 and result.rebalances == 3
