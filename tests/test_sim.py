"""The deterministic simulator: every scenario over many seeds with the invariants checked after
every event, byte-identical replays, and proof that the checker catches broken behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.consumer import assignors as assignors_module
from grouplab.consumer.assignors.range import RangeAssignor
from grouplab.sim.runner import parse_seeds, result_row, run_seed
from grouplab.sim.scenario import ScenarioError, load_scenario, parse_scenario
from grouplab.sim.world import Simulation
from grouplab.protocol.types import TopicPartition

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "grouplab" / "scenarios").glob("*.toml"))
ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]
SEEDS_PER_SCENARIO = int(os.environ.get("GROUPLAB_SIM_SEEDS", "24"))


def test_every_named_scenario_exists() -> None:
    names = {p.stem for p in SCENARIOS}
    assert {"crash-storm", "hang", "slow-consumer", "clean-shutdown", "network-chaos", "partition",
            "coordinator-restart", "static-members", "add-partitions", "rebalance-storm"} <= names


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_holds_its_invariants_over_many_seeds(path: Path) -> None:
    base = load_scenario(path)
    failures = []
    for seed in range(1, SEEDS_PER_SCENARIO + 1):
        # Every assignor gets its share of seeds; the seed decides which.
        # (A consumer-protocol scenario's members assign nothing: the coordinator does, KIP-848.)
        scenario = base.with_assignors([ASSIGNORS[seed % len(ASSIGNORS)]]) if base.group_protocol() == "classic" else base
        result = run_seed(scenario, seed)
        if not result.ok:
            failures.append(f"seed {seed} ({ASSIGNORS[seed % len(ASSIGNORS)]}): {result.violation}")
        else:
            assert result.stats.settled_at_ms is not None
    assert failures == []


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_the_simulators_inlined_steps_do_what_the_drivers_do(path: Path) -> None:
    """The simulator carries out its commonest outputs itself (grouplab/sim/world.py, for speed):
    the same run, event by event, as with every output carried out by the drivers the asyncio
    shells use. Two seeds, each with its stats, its event log and its last 200 steps compared.
    (Without a message trace: with one, the coordinator's steps go through its driver anyway.)"""
    def run(seed: int, through_drivers: bool) -> tuple:
        events: list = []
        sim = Simulation(load_scenario(path), seed, events=lambda node, ev: events.append((node, ev)),
                         trace_len=200, through_drivers=through_drivers)
        result = sim.run()
        return result.stats, result.violation, [str(step) for step in sim.trace], result.ended_ms, events

    for seed in (1, 2):
        inlined, driven = run(seed, False), run(seed, True)
        assert inlined == driven, f"seed {seed}"
        assert inlined[-1] and inlined[2]  # (there were events and steps to compare)


def test_the_same_seed_replays_byte_identically(tmp_path: Path) -> None:
    scenario = load_scenario(ROOT / "grouplab" / "scenarios" / "crash-storm.toml")
    a, b = tmp_path / "a", tmp_path / "b"
    run_seed(scenario, 7, a)
    run_seed(scenario, 7, b)
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())  # the message trace included
    assert files == sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    assert {"coordinator.jsonl", "simulator.jsonl", "trace/coordinator.jsonl"} <= set(files)
    for name in files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    # A different seed is a different run.
    c = tmp_path / "c"
    run_seed(scenario, 8, c)
    assert (c / "coordinator.jsonl").read_bytes() != (a / "coordinator.jsonl").read_bytes()


def test_replay_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """Python randomises str hashing per process; set iteration must never leak into a run."""
    outs = []
    for hash_seed in ("1", "2"):
        run_dir = tmp_path / f"h{hash_seed}"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run([sys.executable, "-m", "grouplab.cli", "simulate", "--scenario",
                               str(ROOT / "grouplab" / "scenarios" / "rebalance-storm.toml"), "--seed", "3", "--assignor",
                               "cooperative-sticky", "--run-dir", str(run_dir)],
                              capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        outs.append({str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()})
    assert outs[0] == outs[1]


def test_event_log_has_the_common_fields(tmp_path: Path) -> None:
    run_seed(load_scenario(ROOT / "grouplab" / "scenarios" / "partition.toml"), 2, tmp_path)
    lines = [json.loads(line) for p in tmp_path.glob("*.jsonl") for line in p.read_text().splitlines()]
    assert lines
    for ev in lines:
        assert {"ts_ms", "event", "node"} <= set(ev)
    events = {ev["event"] for ev in lines}
    assert {"group_stable", "generation_completed", "joined", "sync_completed", "fault_injected", "settled"} <= events


class DoubleDealingRange(RangeAssignor):
    """A broken assignor: the first partition goes to every member."""

    def assign(self, partitions_per_topic, subscriptions):
        result = super().assign(partitions_per_topic, subscriptions)
        first = min(tp for parts in result.values() for tp in parts)
        return {m: sorted(set(parts) | {first}) for m, parts in result.items()}


def test_a_broken_assignor_is_caught_with_seed_step_and_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(assignors_module._ASSIGNORS, "range", DoubleDealingRange)
    result = run_seed(load_scenario(ROOT / "grouplab" / "scenarios" / "crash-storm.toml"), 5)
    assert not result.ok
    v = result.violation
    assert v.invariant == "one owner per generation" and v.seed == 5 and v.now_ms > 0
    assert v.trace and all(line.startswith("t=") for line in v.trace)
    assert "seed 5" in str(v)


def test_liveness_is_enforced() -> None:
    scenario = load_scenario(ROOT / "grouplab" / "scenarios" / "hang.toml")
    scenario.settle_ms = 1  # nothing settles in 1 ms after a storm of hangs
    scenario.random.hang = 200
    results = [run_seed(scenario, s) for s in range(1, 6)]
    assert any(r.violation is not None and r.violation.invariant == "liveness" for r in results)


def test_static_restarts_do_not_rebalance() -> None:
    scenario = load_scenario(ROOT / "grouplab" / "scenarios" / "static-members.toml")
    scenario.schedule = []  # no zombie: only quick restarts
    result = run_seed(scenario, 4)
    assert result.ok and result.stats.faults.get("static_restart", 0) > 0
    assert result.stats.generations == 1, "restarts within the session timeout must keep the generation"


def test_a_zombie_is_fenced_and_exits(tmp_path: Path) -> None:
    scenario = load_scenario(ROOT / "grouplab" / "scenarios" / "static-members.toml")
    scenario.random.static_restart = 0
    run_seed(scenario, 1, tmp_path)
    sim_events = [json.loads(line) for line in (tmp_path / "simulator.jsonl").read_text().splitlines()]
    exited = [ev for ev in sim_events if ev["event"] == "process_exited"]
    assert exited and exited[0]["error"] == "FENCED_INSTANCE_ID"


def test_seed_lists_and_scenario_errors() -> None:
    assert parse_seeds("1-3,7") == [1, 2, 3, 7]
    with pytest.raises(ValueError):
        parse_seeds("3-1")
    with pytest.raises(ScenarioError, match="unknown key"):
        parse_scenario({"topics": {"t": 1}, "membrs": []})
    with pytest.raises(ScenarioError, match="unknown fault"):
        parse_scenario({"topics": {"t": 1}, "schedule": [{"at_ms": 1, "fault": "meteor"}]})
    with pytest.raises(ScenarioError, match="unknown topic"):
        parse_scenario({"topics": {"t": 1}, "members": [{"topics": ["nope"]}]})
    with pytest.raises(ScenarioError, match="members must be a count or a list of member names"):
        parse_scenario({"topics": {"t": 1}, "schedule": [{"at_ms": 1, "fault": "crash", "members": "two"}]})
    with pytest.raises(ValueError, match="unknown consumer config"):
        parse_scenario({"topics": {"t": 1}, "consumer": {"session.timeout": 5}})


def test_resizing_a_scenario() -> None:
    scenario = load_scenario(ROOT / "grouplab" / "scenarios" / "crash-storm.toml").with_members(25)
    assert scenario.member_count == 25
    assert len(Simulation(scenario, 1).members) == 25


def test_cli_many_seeds_and_summary_json(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "grouplab.cli", "simulate", "--scenario",
                           str(ROOT / "grouplab" / "scenarios" / "clean-shutdown.toml"), "--seeds", "1-3", "--summary-json", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(out.read_text())
    assert summary["totals"]["seeds"] == 3 and summary["totals"]["failed"] == []
    assert [row["seed"] for row in summary["seeds"]] == [1, 2, 3]
    assert set(result_row(run_seed(load_scenario(ROOT / "grouplab" / "scenarios" / "clean-shutdown.toml"), 1))) == set(summary["seeds"][0])


def test_timeline_render_keeps_the_first_and_last_rows_at_any_limit():
    from grouplab.sim.timeline import Timeline

    timeline = Timeline("g")
    timeline.rows = [(i * 1000, f"row {i}", "") for i in range(10)]
    for limit, shown in [(1, ["row 0"]), (2, ["row 0", "row 9"]), (3, ["row 0", "row 1", "row 9"]), (0, None), (10, None)]:
        table = timeline.render(limit=limit)
        whats = list(table.columns[1]._cells)
        if shown is None:
            assert whats == [f"row {i}" for i in range(10)]
        else:
            assert [w for w in whats if w != "…"] == shown and "…" in whats


def test_a_clean_leave_reaches_the_coordinator_before_the_connection_closes():
    """A `leave` fault closes the consumer: its LeaveGroup, written before the socket closed,
    arrives, so the member is removed as `left` at once, not after its session timeout."""
    scenario = parse_scenario({
        "topics": {"t0": 4}, "duration_ms": 30_000, "faults_from_ms": 0,
        "consumer": {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000},
        "members": [{"count": 2, "start_ms": [0, 0]}],
        "network": {"delay_ms": [5, 5]},
        "schedule": [{"at_ms": 15_000, "fault": "leave", "members": ["m-0"]}],
    })
    removed = []
    run_seed(scenario, 1, listener=lambda node, ev: removed.append((ev.ts_ms, ev.fields["reason"]))
             if ev.event == "member_removed" else None)
    assert removed == [(15_005, "left")]


def test_partitions_added_survive_a_coordinator_restart():
    """`add_partitions` changes the topic as CreatePartitions does, durably: a coordinator that
    restarts afterwards comes back with the new size, not the scenario's (the members keep
    consuming the added partitions, and the group owns all 6 when it settles)."""
    scenario = parse_scenario({
        "topics": {"t0": 4}, "duration_ms": 60_000, "faults_from_ms": 0,
        "consumer": {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000, "metadata.max.age.ms": 5000},
        "members": [{"count": 2, "start_ms": [0, 0]}],
        "schedule": [{"at_ms": 15_000, "fault": "add_partitions", "topic": "t0", "partitions": 2},
                     {"at_ms": 30_000, "fault": "coordinator_restart", "duration_ms": 2000}],
    })
    sim = Simulation(scenario, 1)
    result = sim.run()
    assert result.ok, result.violation
    assert sim.broker is not None and sim.broker.topics.partitions["t0"] == 6
    assert sorted(tp for m in sim.live_members() for tp in m.machine.owned) == [TopicPartition("t0", p) for p in range(6)]
