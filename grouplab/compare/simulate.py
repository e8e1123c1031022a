"""`grouplab compare` in the simulators: the script as a scenario of the coordinator simulator
(grouplab/sim/: its `leave`, `crash`, `add_partitions` and `join_burst` faults at the script's
times) and of the ZooKeeper-era simulator (grouplab/zk/sim.py: the same changes), one seed for
both. Virtual time: a seed gives the same figures every time."""

from __future__ import annotations

from typing import Any

from grouplab.compare.probe import CoordinatorProbe
from grouplab.compare.script import CompareError, Figures, Script
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import Scenario, parse_scenario
from grouplab.zk.account import ZkChange
from grouplab.zk.sim import Change as ZkStep
from grouplab.zk.sim import ZkScenario, ZkSimulation


def coordinator_scenario(script: Script) -> Scenario:
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
    return parse_scenario({
        "name": "compare", "description": "grouplab compare: the coordinator protocol's side",
        "group_id": s.group, "topics": dict(s.topics), "duration_ms": script.end_ms, "faults_from_ms": 0,
        "consumer": {"session.timeout.ms": s.session_timeout_ms, "metadata.max.age.ms": s.metadata_max_age_ms},
        "members": [{"count": len(first.members), "name": "m", "start_ms": [first.at_ms, first.at_ms]}],
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


def simulate_coordinator(script: Script, seed: int) -> list[Figures]:
    probe = CoordinatorProbe(script.settings.group, set(script.consumers))
    for change, live in zip(script.changes, script.live_after):
        probe.expect(change.at_ms, live)
    result = run_seed(coordinator_scenario(script), seed, listener=probe.feed, trace_listener=probe.trace)
    if result.violation is not None:
        raise CompareError(f"the coordinator simulator broke an invariant (seed {seed}): {result.violation}")
    return probe.finish(max(result.ended_ms, script.end_ms))


def simulate_zk(script: Script, seed: int) -> list[Figures]:
    result = ZkSimulation(zk_scenario(script), seed).run()  # raises Violation, naming the seed
    return [zk_figures(c) for c in result.changes]


def zk_figures(c: ZkChange) -> Figures:
    return Figures(settle_ms=c.settle_ms, messages={"reads": c.reads, "writes": c.writes}, offsets=c.offset_ops,
                   heartbeats=None, idle_ms=c.unowned_ms, rebalances=c.rebalances, failed=c.attempts_failed,
                   gave_up=c.gave_up)
