"""Running simulations: one seed with an event log, or many seeds with a summary."""

from __future__ import annotations

import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterable

from grouplab.coordinator.trace import TraceSink
from grouplab.eventlog import EventLog, run_dir_log
from grouplab.tracefile import TraceFile, trace_path
from grouplab.sim.scenario import Scenario
from grouplab.sim.world import Simulation, SimResult
from grouplab.protocol.effects import LogEvent


def parse_seeds(text: str) -> list[int]:
    """`7`, `1-500`, or a comma list of both: `1-10,42`."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if a > b:
                    raise ValueError
                seeds.extend(range(a, b + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"expected seeds like 7, 1-500 or 1-10,42; got {part!r}") from None
    if not seeds:
        raise ValueError("no seeds given")
    return seeds


class RunDirEvents:
    """One JSON-lines file per node under a run directory, as `grouplab run --run-dir` writes."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.logs: dict[str, EventLog] = {}

    def __call__(self, node: str, ev: LogEvent) -> None:
        log = self.logs.get(node)
        if log is None:
            log = self.logs[node] = run_dir_log(self.run_dir, node)
        log.emit(ev)

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


def run_seed(scenario: Scenario, seed: int, run_dir: str | Path | None = None,
             listener: Callable[[str, LogEvent], None] | None = None,
             trace_listener: TraceSink | None = None) -> SimResult:
    """One seed; its event log and message trace into `run_dir`, and as they happen to the
    listeners (`grouplab compare` reads both)."""
    sink = RunDirEvents(run_dir) if run_dir is not None else None

    def emit(node: str, ev: LogEvent) -> None:
        if sink is not None:
            sink(node, ev)
        if listener is not None:
            listener(node, ev)

    messages = TraceFile(trace_path(run_dir)) if run_dir is not None else None  # the coordinator's message trace

    def trace(line: dict[str, Any]) -> None:
        if messages is not None:
            messages(line)
        if trace_listener is not None:
            trace_listener(line)

    try:
        return Simulation(scenario, seed, emit if (sink is not None or listener is not None) else None,
                          messages=trace if (messages is not None or trace_listener is not None) else None).run()
    finally:
        if sink is not None:
            sink.close()
        if messages is not None:
            messages.close()


def run_seeds(scenario: Scenario, seeds: Iterable[int], on_result: Callable[[SimResult], None] | None = None) -> list[SimResult]:
    results = []
    for seed in seeds:
        result = run_seed(scenario, seed)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def percentile(values: list[int], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def result_row(r: SimResult) -> dict[str, Any]:
    """One seed's metrics as a flat dict (for --summary-json and the Spark sweep)."""
    s = r.stats
    return {
        "scenario": r.scenario,
        "seed": r.seed,
        "ok": r.ok,
        "violation": None if r.violation is None else r.violation.invariant,
        "violation_detail": None if r.violation is None else r.violation.detail,
        "events": s.events,
        "messages_sent": s.messages_sent,
        "messages_lost": s.messages_lost,
        "messages_duplicated": s.messages_duplicated,
        "faults": dict(sorted(s.faults.items())),
        "rebalances": s.generations,
        "partitions_moved": s.partitions_moved,
        "unowned_partition_s": round(s.unowned_partition_ms / 1000, 3),
        "rebalance_p50_ms": percentile(s.rebalance_durations_ms, 0.5),
        "rebalance_p99_ms": percentile(s.rebalance_durations_ms, 0.99),
        "group_epochs": s.group_epochs,
        "epoch_causes": dict(s.epoch_causes),
        "converge_p50_ms": percentile(s.convergence_durations_ms, 0.5),
        "converge_p99_ms": percentile(s.convergence_durations_ms, 0.99),
        "settle_ms": None if s.settled_at_ms is None else s.settled_at_ms - s.quiet_at_ms,
        "imbalance": s.final_imbalance,
        "virtual_ms": r.ended_ms,
        "produced": s.produced,
        "processed": s.processed,
        "committed": s.committed,
        "lost": s.lost,
        "duplicated": s.duplicated,
        "duplicated_uncommitted": s.duplicated_uncommitted,
    }


def totals(results: list[SimResult]) -> dict[str, Any]:
    rows = [result_row(r) for r in results]
    settle = [r["settle_ms"] for r in rows if r["settle_ms"] is not None]
    return {
        "seeds": len(rows),
        "failed": [r["seed"] for r in rows if not r["ok"]],
        "events": sum(r["events"] for r in rows),
        "rebalances": sum(r["rebalances"] for r in rows),
        "partitions_moved": sum(r["partitions_moved"] for r in rows),
        "group_epochs": sum(r["group_epochs"] for r in rows),
        "epoch_causes": _sum_counts(r["epoch_causes"] for r in rows),
        "converge_ms_median": _median_of(r for result in results for r in result.stats.convergence_durations_ms),
        "converge_ms_max": max((d for result in results for d in result.stats.convergence_durations_ms), default=None),
        "settle_ms_median": statistics.median(settle) if settle else None,
        "settle_ms_max": max(settle) if settle else None,
        **{k: sum(r[k] or 0 for r in rows) if any(r[k] is not None for r in rows) else None
           for k in ("produced", "processed", "committed", "lost", "duplicated")},
    }


def _sum_counts(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, n in c.items():
            out[k] = out.get(k, 0) + n
    return dict(sorted(out.items()))


def _median_of(values: Iterable[int]) -> float | None:
    got = list(values)
    return statistics.median(got) if got else None


def stats_dict(r: SimResult) -> dict[str, Any]:
    return asdict(r.stats)
