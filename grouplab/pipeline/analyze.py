"""`grouplab analyze`: read run directories' event logs, build the tables, write them as Parquet.

The tables are built lazily by `build_tables` (grouplab/pipeline/tables.py); `analyze` persists the
parsed events once, writes every table and returns the per-run summary for the console and the
report.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from grouplab.pipeline import tables as t

# Written in this order; the report reads them back from OUT.
TABLES = ("rebalances", "assignments", "movements", "member_sessions", "ownership", "partition_time", "stalls",
          "deliveries", "runs", "malformed")


@dataclass
class Tables:
    events: DataFrame
    frames: dict[str, DataFrame] = field(default_factory=dict)

    def __getitem__(self, name: str) -> DataFrame:
        return self.frames[name]


def build_tables(logs: t.EventLogs, keep: Callable[[DataFrame], DataFrame] = lambda df: df) -> Tables:
    """Every table of docs/pipeline.md from parsed event logs. `keep` is applied to the
    intermediate results several tables share (analyze persists them, so each is computed once)."""
    events = logs.events
    phases = keep(t.rebalance_phases(events))
    ids = t.identities(events)
    assigned = keep(t.assignments(events, phases))
    moved = keep(t.movements(events, assigned, phases, ids))
    owned = keep(t.ownership(events))
    costs = keep(t.partition_costs(events))
    times, stopped = t.partition_time(costs), t.stalls(costs)
    rebal = keep(t.rebalances(phases, moved, times, t.revocations(events), owned, stopped))
    deliv = keep(t.deliveries(events))
    return Tables(events, {
        "rebalances": rebal,
        "assignments": assigned,
        "movements": moved,
        "member_sessions": t.member_sessions(events, assigned, phases),
        "ownership": owned,
        "partition_time": times,
        "stalls": stopped,
        "deliveries": deliv,
        "runs": t.run_summary(events, logs.malformed, rebal, deliv, times, owned),
        "malformed": logs.malformed,
    })


@dataclass
class AnalyzeResult:
    out: Path
    runs: list[dict[str, Any]]  # the `runs` table, collected (one row per run: small)
    rows: dict[str, int]  # rows written per table
    malformed_examples: list[dict[str, Any]]


def analyze(spark: SparkSession, run_dirs: list[str], out: str | Path,
            on_table: Callable[[str, int], None] | None = None, events_table: bool = False) -> AnalyzeResult:
    """Read `run_dirs`, write every table to `out/<table>/` (Parquet, replacing what was there).

    The lines are parsed once and written as Parquet (`out/events/`, kept with `events_table`);
    every table then reads back only the columns it needs. Caching the parsed lines in memory
    instead was slower: Spark's in-memory cache builds nested columns (the [[topic, partition]]
    lists, the assignment maps) row by row, and that cost more than parsing the JSON."""
    out = Path(out)
    staged = out / ("events" if events_table else "_parsed")
    t.parse_event_logs(spark, run_dirs).write.mode("overwrite").parquet(str(staged))
    logs = t.split_parsed(spark.read.parquet(str(staged)))
    logs = t.EventLogs(t.split_appended_runs(logs.events), logs.malformed)
    kept: list[DataFrame] = []

    def keep(df: DataFrame) -> DataFrame:
        kept.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return kept[-1]

    try:
        tables = build_tables(logs, keep)
        rows: dict[str, int] = {}
        if events_table:
            rows["events"] = logs.events.count()
            if on_table is not None:
                on_table("events", rows["events"])
        for name in TABLES:
            tables[name].write.mode("overwrite").parquet(str(out / name))
            rows[name] = spark.read.parquet(str(out / name)).count()
            if on_table is not None:
                on_table(name, rows[name])
        runs = [r.asDict() for r in spark.read.parquet(str(out / "runs")).orderBy("run").collect()]
        examples = [r.asDict() for r in spark.read.parquet(str(out / "malformed")).limit(5).collect()]
    finally:
        for df in kept:
            df.unpersist()
        if not events_table:
            shutil.rmtree(staged, ignore_errors=True)
    return AnalyzeResult(out, runs, rows, examples)
