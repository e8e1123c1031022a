"""`grouplab simulate --protocol zk`: one seed of a ZooKeeper-era scenario (grouplab/zk/scenario.py)
with its event logs (one file per node, as the coordinator simulator writes them) and a readable
timeline, or many seeds with the invariants checked in each (docs/legacy.md §5)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.table import Table

from grouplab.sim.runner import RunDirEvents
from grouplab.sim.timeline import Timeline
from grouplab.zk.sim import Violation, ZkResult, ZkScenario, ZkSimulation
from grouplab.protocol.effects import LogEvent


def _pairs(partitions: list[list[object]]) -> str:
    by_topic: dict[str, list[str]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(str(topic), []).append(str(partition))
    return " ".join(f"{t}[{','.join(ps)}]" for t, ps in by_topic.items()) or "nothing"


@dataclass
class ZkTimeline(Timeline):
    """The simulator's changes and faults as the coordinator simulator's timeline shows them, and
    what the consumers did about them: rebalances done (the herd), claim conflicts, give-ups,
    sessions that expired."""

    def __call__(self, node: str, ev: LogEvent) -> None:
        f = ev.fields
        if node == "simulator":
            super().__call__(node, ev)
        elif ev.event == "registry_session_expired":
            self.rows.append((ev.ts_ms, "registry session expired", f"session {f['session_id']} ({f['timeout_ms']} ms)"))
        elif ev.event == "zk_session_expired":
            running = (f"; its fetchers run on ({_pairs(f['fetching'])}) until its new session's rebalance"
                       if f["fetching"] else "")
            self.rows.append((ev.ts_ms, "session expired", f"{node}: its registration and owner nodes are gone{running}"))
        elif ev.event == "zk_rebalance_done":
            self.rows.append((ev.ts_ms, "rebalanced", f"{node}: {_pairs(f['partitions'])} (attempt {f['attempt']}, "
                                                      f"{f['reads']} reads, {f['writes']} writes)"))
        elif ev.event == "zk_claim_conflict":
            self.rows.append((ev.ts_ms, "claim conflict", f"{node}: {_pairs(f['partitions'])} still owned "
                                                          f"(attempt {f['attempt']})"))
        elif ev.event == "zk_rebalance_failed":
            self.rows.append((ev.ts_ms, "gave up", f"{node}: after {f['attempts']} attempts: {f['reason']}"))


def run_zk_seed(scenario: ZkScenario, seed: int, run_dir: str | Path | None = None,
                listener: Callable[[str, LogEvent], None] | None = None) -> ZkResult:
    """One seed; its event log into `run_dir` (one JSON-lines file per node) and to `listener`.
    A broken invariant raises Violation, naming the seed."""
    sink = RunDirEvents(run_dir) if run_dir is not None else None

    def emit(node: str, ev: LogEvent) -> None:
        if sink is not None:
            sink(node, ev)
        if listener is not None:
            listener(node, ev)

    try:
        return ZkSimulation(scenario, seed, emit if sink is not None or listener is not None else None).run()
    finally:
        if sink is not None:
            sink.close()


def changes_table(result: ZkResult, title: str) -> Table:
    """Each change's cost, a fault's too (changes at one moment are one), as `grouplab compare`
    counts it."""
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("change")
    for col in ("at (s)", "settled after (s)", "reads", "writes", "of which offsets", "rebalances",
                "failed attempts", "gave up", "partition-s without a consumer"):
        table.add_column(col, justify="right")
    for c in result.changes:
        table.add_row(c.what, f"{c.at_ms / 1000:.3f}", "not settled" if c.settle_ms is None else f"{c.settle_ms / 1000:.3f}",
                      str(c.reads), str(c.writes), str(c.offset_ops), str(sum(c.rebalances.values())),
                      str(c.attempts_failed), str(c.gave_up), f"{c.unowned_ms / 1000:.1f}")
    return table


def summary_line(scenario: ZkScenario, results: list[ZkResult], failed: list[Violation]) -> str:
    reads, writes = sum(r.reads for r in results), sum(r.writes for r in results)
    return (f"{scenario.name}: {len(results) + len(failed)} seed(s), {sum(r.events for r in results):,} simulator events, "
            f"{sum(r.rebalances for r in results)} rebalances, {reads} registry reads and {writes} writes, "
            f"{sum(r.attempts_failed for r in results)} failed attempts, {sum(r.gave_up for r in results)} give-ups, "
            f"{sum(r.unowned_partition_ms for r in results) / 1000:,.1f} partition-seconds without a consumer; "
            + _zombies(results) + ("all invariants held" if not failed else f"failed seeds: {[v.seed for v in failed]}"))


def _zombies(results: list[ZkResult]) -> str:
    """The zombie windows, said whenever there were any (docs/legacy.md §4)."""
    windows = [w for r in results for w in r.zombie_windows]
    if not windows:
        return ""
    longest = max(windows, key=lambda w: w.ms)
    return (f"{len(windows)} zombie window(s) (a consumer fetching after its session expired; the longest: "
            f"{longest.consumer}, {longest.ms / 1000:.3f} s from {longest.from_ms / 1000:.3f} s), "
            f"{sum(r.zombie_partition_ms for r in results) / 1000:,.1f} partition-seconds fetched by a zombie, "
            f"{sum(r.double_fetch_ms for r in results) / 1000:,.1f} fetched twice; ")
