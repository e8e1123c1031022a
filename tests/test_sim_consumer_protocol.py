"""The simulator drives the consumer-protocol member (KIP-848, consumer/membership.py) as it drives
the classic one: seeded crash and clean-restart storms on a lossy network hold the invariants (one owner at a time,
liveness: the group settles, every member stable at the target epoch with every partition owned
once), and a seed replays byte-identically."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import Scenario, parse_scenario

KIP848 = """
name = "kip848-{kind}"
description = "consumer-protocol members, {kind}"
topics = {{ t0 = 8, t1 = 4 }}
duration_ms = 240_000
faults_from_ms = 20_000

[broker]
"group.consumer.heartbeat.interval.ms" = 1000
"group.consumer.min.heartbeat.interval.ms" = 100
"group.consumer.session.timeout.ms" = 10000
"group.consumer.min.session.timeout.ms" = 1000

[consumer]
"group.protocol" = "consumer"
"max.poll.interval.ms" = 30000

[[members]]
count = 6
start_ms = [0, 1000]

[network]
delay_ms = [1, 30]
loss = 0.01
duplicate = 0.01

[random]
{kind} = 400  # an hour's rate: ~25 in the 220 s of faults
duration_ms = [1000, 20000]
"""


def scenario(kind: str) -> Scenario:
    return parse_scenario(tomllib.loads(KIP848.format(kind=kind)), f"kip848-{kind}")


@pytest.mark.parametrize("kind", ["crash", "leave"])
def test_consumer_protocol_storms_hold_the_invariants(kind: str) -> None:
    failures = []
    for seed in range(1, 6):
        result = run_seed(scenario(kind), seed)
        if not result.ok:
            failures.append(f"seed {seed}: {result.violation}")
        else:
            assert result.stats.settled_at_ms is not None
    assert failures == []


def test_a_consumer_protocol_seed_replays_byte_identically(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run_seed(scenario("crash"), 3, a)
    run_seed(scenario("crash"), 3, b)
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    assert "m-1.jsonl" in files or any(f.startswith("m-") for f in files), files
    for name in files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    events = (a / "coordinator.jsonl").read_text()
    assert "consumer_member_reconciled" in events and "group_stable" not in events


# ----------------------------------------------------------------------------- built-in scenarios, --group-protocol


@pytest.mark.parametrize("name", ["kip848-crash-storm", "kip848-rolling-restart"])
def test_the_built_in_kip848_scenarios_hold_the_invariants_over_seeds(name: str) -> None:
    from grouplab.sim.scenario import load_scenario, resolve_scenario

    scenario = load_scenario(resolve_scenario(name))
    assert scenario.group_protocol() == "consumer"
    failures = [f"seed {seed}: {r.violation}" for seed in range(1, 21) if not (r := run_seed(scenario, seed)).ok]
    assert failures == []


@pytest.mark.parametrize("name", ["crash-storm", "clean-shutdown", "hang", "network-chaos"])
def test_a_classic_scenario_runs_on_the_consumer_protocol(name: str) -> None:
    """`simulate --group-protocol consumer`: the members' session and heartbeat settings become
    the broker's group.consumer.* ones; the run holds the invariants and counts epochs, not
    generations."""
    from grouplab.sim.scenario import load_scenario, resolve_scenario

    classic = load_scenario(resolve_scenario(name))
    scenario = classic.with_group_protocol("consumer")
    assert scenario.group_protocol() == "consumer" and classic.group_protocol() == "classic"
    assert "session.timeout.ms" not in scenario.consumer
    assert scenario.coordinator_session_timeout_ms() == classic.session_timeout_ms()
    for seed in (1, 2, 3):
        result = run_seed(scenario, seed)
        assert result.ok, result.violation
        assert result.stats.generations == 0 and result.stats.group_epochs > 0
    assert scenario.with_group_protocol("classic").group_protocol() == "classic"


def test_a_built_in_kip848_seed_replays_byte_identically(tmp_path: Path) -> None:
    from grouplab.sim.scenario import load_scenario, resolve_scenario

    scenario = load_scenario(resolve_scenario("kip848-rolling-restart"))
    a, b = tmp_path / "a", tmp_path / "b"
    run_seed(scenario, 5, a)
    run_seed(scenario, 5, b)
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    assert len(files) >= 7
    for name in files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
