"""The ZooKeeper-era design in the deterministic simulator (grouplab/zk/sim.py, docs/legacy.md §5):
the invariants hold over many seeds with faults, a seed replays exactly, a crashed consumer's
nodes vanish after its session timeout and its partitions are taken over, the herd effect is
counted, conflicting claims retry, and a consumer slow to release makes a rebalance give up."""

from __future__ import annotations

import json

import pytest

from grouplab.zk.sim import Change, Violation, ZkScenario, ZkSimulation
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.registry import Layout

BASE = [
    Change(0, "join", "c1", {"t0": 2, "t1": 1}),
    Change(100, "join", "c2", {"t0": 2, "t1": 1}),
    Change(150, "join", "c3", {"t0": 1}),
    Change(20_000, "leave", "c2"),
    Change(40_000, "crash", "c3"),
    Change(60_000, "add_partitions", topic="t0", count=9),
    Change(80_000, "join", "c4", {"t0": 1, "t1": 1}),
]


def scenario(changes: list[Change] = BASE, **kw: object) -> ZkScenario:
    return ZkScenario("test", {"t0": 6, "t1": 4}, list(changes), **{"duration_ms": 110_000, **kw})  # type: ignore[arg-type]


def run_logged(sc: ZkScenario, seed: int) -> tuple[object, list[str]]:
    lines: list[str] = []
    result = ZkSimulation(sc, seed, lambda node, ev: lines.append(
        json.dumps({"ts_ms": ev.ts_ms, "event": ev.event, "node": node, **ev.fields}))).run()
    return result, lines


@pytest.mark.parametrize("seeds", [range(1, 41)])
def test_invariants_hold_over_seeds_with_faults(seeds: range) -> None:
    sc = scenario(random_faults=6)
    for seed in seeds:
        result = ZkSimulation(sc, seed).run()  # raises Violation with the seed
        assert result.rebalances > 0


def test_a_seed_replays_exactly() -> None:
    sc = scenario(random_faults=6)
    a, lines_a = run_logged(sc, 11)
    b, lines_b = run_logged(sc, 11)
    assert a == b and lines_a == lines_b and len(lines_a) > 50
    c, lines_c = run_logged(sc, 12)
    assert lines_c != lines_a


def test_crashed_consumer_nodes_vanish_after_session_timeout_and_partitions_are_taken_over() -> None:
    sc = scenario([Change(0, "join", "c1", {"t0": 1}), Change(10, "join", "c2", {"t0": 1}),
                   Change(10_000, "crash", "c2")], duration_ms=30_000)
    lines: list[tuple[int, str, str]] = []
    sim = ZkSimulation(sc, 3, lambda node, ev: lines.append((ev.ts_ms, node, ev.event)))
    sim.run()
    expired = [ts for ts, node, event in lines if event == "registry_session_expired"]
    # zookeeper.session.timeout.ms (6000) after its last ping, which came at most a third of that before the crash
    assert len(expired) == 1 and 10_000 + 4000 <= expired[0] <= 10_000 + 6000
    registry, layout = sim.server.registry, Layout("grouplab")
    assert registry.children(layout.ids) == ["c1"]
    owners = {p: registry.data(layout.owner("t0", int(p))) for p in registry.children(layout.owners + "/t0")}
    assert owners == {str(p): b"c1-0" for p in range(6)}
    taken_over = [ts for ts, node, event in lines if node == "c1" and event == "zk_rebalance_done"]
    assert taken_over[-1] >= expired[0]


def test_herd_effect_every_consumer_reacts_to_every_change() -> None:
    members = [Change(i * 10, "join", f"c{i}", {"t0": 1}) for i in range(1, 7)]
    before: dict[str, int] = {}

    def note(node: str, ev: LogEvent) -> None:
        if ev.event == "zk_rebalance_begun" and ev.ts_ms >= 20_000:
            before[node] = before.get(node, 0) + 1
    sim = ZkSimulation(scenario(members + [Change(20_000, "join", "c7", {"t0": 1})], duration_ms=30_000), 5, note)
    sim.run()
    assert set(before) == {f"c{i}" for i in range(1, 8)}  # one newcomer: all seven rebalance
    assert sum(d.reads + d.writes for d in sim.drivers.values()) > 7 * 10


def test_conflicting_claims_are_retried_after_the_backoff() -> None:
    result, lines = run_logged(scenario(BASE[:3], duration_ms=20_000), 1)
    events = [json.loads(line) for line in lines]
    conflicts = [e for e in events if e["event"] == "zk_claim_conflict"]
    assert conflicts and result.attempts_failed >= 1 and result.gave_up == 0  # type: ignore[attr-defined]
    retried = [e for e in events if e["event"] == "zk_rebalance_begun" and e["node"] == conflicts[0]["node"]
               and e["attempt"] == conflicts[0]["attempt"] + 1]
    assert retried and retried[0]["ts_ms"] - conflicts[0]["ts_ms"] >= 2000  # rebalance.backoff.ms


def test_a_consumer_slow_to_release_makes_a_rebalance_give_up() -> None:
    sc = scenario([Change(0, "join", "c1", {"t0": 1}), Change(5000, "slow_release", "c1", ms=12_000, duration_ms=60_000),
                   Change(6000, "join", "c2", {"t0": 1})], duration_ms=40_000)
    result, lines = run_logged(sc, 2)
    events = [json.loads(line) for line in lines]
    failed = [e for e in events if e["event"] == "zk_rebalance_failed"]
    assert failed and failed[0]["node"] == "c2" and failed[0]["attempts"] == 4  # rebalance.max.retries
    assert result.gave_up >= 1 and result.unowned_partition_ms > 0  # type: ignore[attr-defined]


def test_a_pause_longer_than_the_session_expires_it_and_the_consumer_comes_back() -> None:
    sc = scenario([Change(0, "join", "c1", {"t0": 1}), Change(10, "join", "c2", {"t0": 1}),
                   Change(5000, "pause", "c2", ms=9000)], duration_ms=30_000)
    result, lines = run_logged(sc, 4)
    events = [json.loads(line) for line in lines]
    assert any(e["event"] == "zk_session_expired" and e["node"] == "c2" for e in events)
    registered = [e for e in events if e["event"] == "zk_registered" and e["node"] == "c2"]
    assert len(registered) == 2 and registered[1]["ts_ms"] >= 14_000


def test_unknown_change_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown change 'explode'"):
        scenario([Change(0, "explode")])


def test_a_violation_names_its_seed() -> None:
    v = Violation("single_owner", "x", 5, 42)
    assert "seed 42" in str(v)


@pytest.mark.parametrize("policy, first", [("largest", 500), ("smallest", 0)])
def test_auto_offset_reset_starts_a_partition_without_a_committed_offset(policy: str, first: int) -> None:
    """Kafka 0.8's names: smallest (0) or largest (the log's end: the synthetic logs grow at 100
    records/s from the start of the run); the default is largest."""
    config = [] if policy == "largest" else ["auto.offset.reset=smallest"]
    sc = scenario([Change(5000, "join", "c1", {"t0": 1}), Change(20_000, "join", "c2", {"t0": 1})],
                  duration_ms=30_000, config=config)
    result, lines = run_logged(sc, 1)
    events = [json.loads(line) for line in lines]
    resets = [e for e in events if e["event"] == "zk_offsets_reset"]
    assert resets[0]["node"] == "c1" and resets[0]["policy"] == policy
    offsets = [o for _, _, o in resets[0]["offsets"]]
    assert all(first <= o <= (first and resets[0]["ts_ms"] // 10) for o in offsets)  # largest: the log end then
    # c2's partitions were committed by c1 when it released them: no reset, they go on from there.
    started = [e for e in events if e["event"] == "zk_fetchers_started" and e["node"] == "c2"]
    assert len(resets) == 1 and all(o >= first for _, _, o in started[-1]["offsets"])


def test_an_unknown_auto_offset_reset_is_refused_with_kafka_0_8s_names() -> None:
    from grouplab.consumer.config import ConsumerConfigError
    from grouplab.consumer.legacy.config import LegacyConfig

    with pytest.raises(ConsumerConfigError, match="smallest or largest"):
        LegacyConfig("g", "c").with_overrides(["auto.offset.reset=earliest"])
