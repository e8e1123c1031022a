"""Online migration in the simulator (docs/protocol.md §11.10): a group of classic members and
KIP-848 members (grouplab's own consumers of both protocols) under seeded crash and leave storms on
a network that delays, loses and duplicates messages. The group converts back and forth as the
consumer-protocol members come and go, and the invariants hold at every step: one owner per
partition at a time, and the group settles after the faults (every live member, of either
protocol, stable at the group's epoch, every partition owned once). A seed replays byte for byte."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import Scenario, parse_scenario

MIXED = """
name = "mixed-{kind}"
description = "classic and consumer-protocol members in one group, {kind} storm"
topics = {{ t0 = 8, t1 = 4 }}
duration_ms = 240_000
faults_from_ms = 20_000

[broker]
"group.consumer.heartbeat.interval.ms" = 1000
"group.consumer.min.heartbeat.interval.ms" = 100
"group.consumer.session.timeout.ms" = 10000
"group.consumer.min.session.timeout.ms" = 1000
"group.initial.rebalance.delay.ms" = 0

[[members]]
count = 3
name = "c"
start_ms = [0, 1000]
config = {{ "session.timeout.ms" = 10000, "heartbeat.interval.ms" = 1000 }}

[[members]]
count = 2
name = "k"
start_ms = [5000, 8000]
config = {{ "group.protocol" = "consumer" }}

[network]
delay_ms = [1, 30]
loss = 0.01
duplicate = 0.01

[random]
{kind} = 400  # an hour's rate: ~25 in the 220 s of faults
duration_ms = [1000, 20000]
"""


def scenario(kind: str) -> Scenario:
    return parse_scenario(tomllib.loads(MIXED.format(kind=kind)), f"mixed-{kind}")


@pytest.mark.parametrize("kind", ["crash", "leave"])
def test_mixed_groups_hold_the_invariants_while_they_convert(kind: str, tmp_path: Path) -> None:
    failures, conversions = [], 0
    for seed in range(1, 6):
        run_dir = tmp_path / str(seed)
        result = run_seed(scenario(kind), seed, run_dir)
        if not result.ok:
            failures.append(f"seed {seed}: {result.violation}")
        lines = [json.loads(line) for line in (run_dir / "coordinator.jsonl").read_text().splitlines()]
        conversions += sum(1 for line in lines if line["event"] == "group_converted")
    assert failures == []
    assert conversions >= 5  # the storms do make the group change type, both ways


def test_a_mixed_seed_replays_byte_identically(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run_seed(scenario("crash"), 2, a)
    run_seed(scenario("crash"), 2, b)
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    for name in files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert "consumer_classic_member_joined" in (a / "coordinator.jsonl").read_text() or \
           "group_converted" in (a / "coordinator.jsonl").read_text()
