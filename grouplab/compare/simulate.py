"""`grouplab compare` in the simulators: the script as a scenario of the coordinator simulator
(grouplab/sim/: its `leave`, `crash`, `add_partitions` and `join_burst` faults at the script's
times), once per coordinator design (classic eager, classic cooperative, KIP-848), and of the
ZooKeeper-era simulator (grouplab/zk/sim.py: the same changes), one seed for all. Virtual time: a
seed gives the same figures every time."""

from __future__ import annotations

from typing import Any

from grouplab.compare.probe import CoordinatorProbe
from grouplab.compare.script import CompareError, Figures, Script
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import Scenario, parse_scenario
from grouplab.zk.account import ZkChange
from grouplab.zk.sim import Change as ZkStep
from grouplab.zk.sim import ZkScenario, ZkSimulation

# The classic designs' assignor (partition.assignment.strategy).
ASSIGNORS = {"eager": "range", "cooperative": "cooperative-sticky"}


def design_config(script: Script, design: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(consumer config, broker config, assignors) of a coordinator design. The session timeout
    is the script's under every design: KIP-848's is the broker's group.consumer.session.timeout.ms
    (its bounds widened to allow it); heartbeat intervals keep each protocol's Kafka default."""
    s = script.settings
    if design == "consumer":
        broker = {"group.consumer.session.timeout.ms": s.session_timeout_ms,
                  "group.consumer.min.session.timeout.ms": min(s.session_timeout_ms, 45_000),
                  "group.consumer.max.session.timeout.ms": max(s.session_timeout_ms, 60_000)}
        return {"group.protocol": "consumer", "metadata.max.age.ms": s.metadata_max_age_ms}, broker, ["range"]
    return ({"session.timeout.ms": s.session_timeout_ms, "metadata.max.age.ms": s.metadata_max_age_ms}, {},
            [ASSIGNORS[design]])


def coordinator_scenario(script: Script, design: str = "eager") -> Scenario:
    s = script.settings
    first, *rest = script.changes
    schedule: list[dict[str, Any]] = []
    for c in rest:
        if c.kind == "join":
            schedule.append({"at_ms": c.at_ms, "fault": "join_burst", "count": len(c.members)})
        elif c.kind in ("leave", "crash"):  # duration 0: the process never comes back
            schedule.append({"at_ms": c.at_ms, "fault": c.kind, "members": list(c.members)})
        else:
            grown = c.total - s.topics[c.topic]
            schedule.append({"at_ms": c.at_ms, "fault": "add_partitions", "topic": c.topic, "partitions": grown})
            if not s.waits_for_max_age:  # the fair default: the classic leader hears of them at once
                schedule.append({"at_ms": c.at_ms, "fault": "refresh_metadata"})
    consumer, broker, assignors = design_config(script, design)
    return parse_scenario({
        "name": "compare", "description": f"grouplab compare: the {design} design's side",
        "group_id": s.group, "topics": dict(s.topics), "duration_ms": script.end_ms, "faults_from_ms": 0,
        "consumer": consumer, "broker": broker,
        "members": [{"count": len(first.members), "name": "m", "start_ms": [first.at_ms, first.at_ms],
                     "assignors": assignors}],
        "schedule": schedule,
    }, "grouplab compare")


def zk_scenario(script: Script) -> ZkScenario:
    s = script.settings
    steps: list[ZkStep] = []
    for c in script.changes:
        if c.kind == "join":
            steps += [ZkStep(c.at_ms, "join", m, {t: 1 for t in s.topics}) for m in c.members]
        elif c.kind in ("leave", "crash"):
            steps += [ZkStep(c.at_ms, c.kind, m) for m in c.members]
        else:
            steps.append(ZkStep(c.at_ms, "add_partitions", topic=c.topic, count=c.total))
    return ZkScenario("compare", dict(s.topics), steps, script.end_ms, group=s.group,
                      config=[f"zookeeper.session.timeout.ms={s.zk_session_timeout_ms}"])


def simulate(script: Script, seed: int, design: str) -> list[Figures]:
    """One design's figures, per change of the script."""
    return simulate_zk(script, seed) if design == "zk" else simulate_coordinator(script, seed, design)


def simulate_coordinator(script: Script, seed: int, design: str = "eager") -> list[Figures]:
    probe = CoordinatorProbe(script.settings.group, set(script.consumers))
    for change, live in zip(script.changes, script.live_after):
        probe.expect(change.at_ms, live)
    result = run_seed(coordinator_scenario(script, design), seed, listener=probe.feed, trace_listener=probe.trace)
    if result.violation is not None:
        raise CompareError(f"the coordinator simulator ({design}) broke an invariant (seed {seed}): {result.violation}")
    return probe.finish(max(result.ended_ms, script.end_ms))


def simulate_zk(script: Script, seed: int) -> list[Figures]:
    result = ZkSimulation(zk_scenario(script), seed).run()  # raises Violation, naming the seed
    return [zk_figures(c) for c in result.changes]


def zk_figures(c: ZkChange) -> Figures:
    return Figures(settle_ms=c.settle_ms, messages={"reads": c.reads, "writes": c.writes}, offsets=c.offset_ops,
                   heartbeats=None, idle_ms=c.unowned_ms, rebalances=c.rebalances, failed=c.attempts_failed,
                   gave_up=c.gave_up)
