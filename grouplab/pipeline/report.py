"""`grouplab analyze`'s page: OUT/report.html, drawn from the Parquet tables under OUT.

One self-contained file (inline CSS, charts as inline SVG from matplotlib, no scripts) that shows
at a glance which rebalance hurt and why. Per run: its summary; per consumer group, the rebalances
that cost the most (stop-the-world time, and the time a stopped member's partitions sat assigned
but not consumed before them) with their cause and trigger, an ownership Gantt chart drawn by the
shared renderer grouplab/plot.py (one row per partition, a color per client, white where nobody
owned it, hatched where its holder had stopped, shaded bands where the group was rebalancing),
rebalance durations and what each rebalance cost per generation; for delivery runs the outcome of
every record; the malformed lines.

The big tables (ownership, deliveries, movements) are aggregated by Spark; what reaches the driver
is bounded: at most `max_gantt_rows` partitions and about `max_gantt_intervals` ownership
intervals per group (the page says when and how it capped) with their assigned-but-not-consumed
stretches and at most 200 stops, a few dozen partitions of delivery
counts, five malformed lines per run. `runs` and `rebalances` (one row per run, per generation)
are collected whole.
"""

from __future__ import annotations

import html
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from grouplab.pipeline.html import fmt, localized_svg
from grouplab.plot import (FAULT_WORDS, Band, Bar, FaultMark, Idle, OwnershipChart, chart_svg, client_colors, fault_word,
                           lane_name, mpl, natural_key)
from grouplab.teach.catalog import Catalog
from grouplab.teach.reasons import say_text

TABLES = ("runs", "rebalances", "ownership", "movements", "deliveries", "malformed", "partition_time", "stalls")

MAX_GANTT_ROWS = 60  # partitions per group's Gantt chart: more is not readable anyway
MAX_GANTT_INTERVALS = 3000  # ownership intervals per group's Gantt chart (about)
TOP_REBALANCES = 5
MALFORMED_EXAMPLES = 5
MAX_MALFORMED_FILES = 20
MAX_DELIVERY_PARTITIONS = 40
MAX_FAULT_MARKS = 200  # stops marked on a group's Gantt chart (the ones in its window)
PROCESSED_BUCKETS = 10  # processed-times histogram: 0 .. 9, then "10+"

# Stable colors for the rebalance causes (docs/events.md, `rebalance_started.cause`).
CAUSE_COLORS = {
    "member_joined": "#4E79A7",
    "static_member_joined": "#76B7B2",
    "static_member_rejoined": "#9C755F",
    "leader_rejoined": "#B07AA1",
    "member_metadata_changed": "#F28E2B",
    "member_left": "#59A14F",
    "session_timeout": "#E15759",
    "sync_timeout": "#FF9DA7",
    "unknown": "#BAB0AC",
}
OTHER_CAUSE_COLORS = ["#EDC948", "#8CD17D", "#86BCB6", "#D37295", "#A0CBE8"]
HURT_COLOR = "#d62728"  # one of the rebalances that hurt most
IDLE_COLOR = "#8c6d31"  # assigned but not consumed, in the stop-the-world chart


# ----------------------------------------------------------------------------- what the page shows


@dataclass
class Gantt:
    rows: list[tuple[str, int]]  # (topic, partition), top to bottom
    intervals: list[dict[str, Any]]  # topic, partition, client_id, start_ms, end_ms, end_reason
    partitions_total: int
    intervals_total: int
    intervals_shown: int
    window: tuple[int, int] | None = None  # (from_ms, to_ms) when the chart shows only that stretch
    window_generation: int | None = None  # the rebalance the window is centred on
    max_rows: int = MAX_GANTT_ROWS  # the limits it was drawn under
    max_intervals: int = MAX_GANTT_INTERVALS
    idle: list[dict[str, Any]] = field(default_factory=list)  # assigned but not consumed: topic, partition, client_id, start_ms, end_ms
    stops: list[dict[str, Any]] = field(default_factory=list)  # members that stopped: client_id, fault, stopped_ms

    @property
    def capped(self) -> bool:
        return len(self.rows) < self.partitions_total or self.window is not None


@dataclass
class Group:
    group_id: str
    rebalances: list[dict[str, Any]]  # by generation
    top: list[dict[str, Any]]  # the ones that hurt most, worst first
    moved_from: dict[int, list[tuple[str, str, int]]] = field(default_factory=dict)  # gen -> (client, reason, n)
    gantt: Gantt | None = None

    @property
    def owned(self) -> bool:
        """Whether the members' logs told who owned what: without them, stop-the-world time and
        revocations are unknown (the tables then hold 0)."""
        return self.gantt is not None and bool(self.gantt.intervals)


@dataclass
class Delivery:
    mode: str | None
    outcomes: dict[str, int]
    partitions: list[dict[str, Any]]  # topic, partition, records, lost, duplicated (the worst few)
    partitions_total: int
    processed: list[tuple[int, int]]  # (times processed, capped at PROCESSED_BUCKETS; records)


@dataclass
class Run:
    run: str
    summary: dict[str, Any] | None
    groups: list[Group] = field(default_factory=list)
    delivery: Delivery | None = None
    malformed_files: list[tuple[str, int]] = field(default_factory=list)  # the files with the most
    malformed_file_count: int = 0
    malformed_examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def origin_ms(self) -> int:
        """Time zero of the run's charts: its first event."""
        if self.summary and self.summary.get("first_ms") is not None:
            return int(self.summary["first_ms"])
        starts = [r["start_ms"] for g in self.groups for r in g.rebalances if r.get("start_ms") is not None]
        starts += [i["start_ms"] for g in self.groups if g.gantt for i in g.gantt.intervals]
        return min(starts, default=0)


# ----------------------------------------------------------------------------- reading the tables


def load_tables(spark: SparkSession, out: Path) -> tuple[dict[str, DataFrame], list[str]]:
    """The tables the report reads, and the names of those missing or unreadable. `group_id` is
    never null here (a null becomes ""), so it can be a key everywhere."""
    frames: dict[str, DataFrame] = {}
    missing: list[str] = []
    for name in TABLES:
        path = out / name
        if not path.is_dir():
            missing.append(name)
            continue
        try:
            df = spark.read.parquet(str(path))
            df.schema  # noqa: B018 - an empty directory fails here, not later
        except Exception:  # noqa: BLE001 - AnalysisException: no Parquet files (nothing written)
            missing.append(name)
            continue
        if "group_id" in df.columns:
            df = df.withColumn("group_id", F.coalesce(F.col("group_id"), F.lit("")))
        frames[name] = df
    return frames, missing


def rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


def lost_ms(r: dict[str, Any]) -> int:
    """What a rebalance cost in partition-ms: the unowned time its assignment ended, and the
    assigned-but-not-consumed time of the stopped members it repaired."""
    return (r.get("unowned_partition_ms") or 0) + (r.get("assigned_not_consumed_ms") or 0)


def hurt_order(r: dict[str, Any]) -> tuple:
    """Worst first: partition-ms lost (unowned, and assigned but not consumed), then duration (an
    interrupted one has none), then the earlier generation."""
    return (-lost_ms(r), -(r.get("duration_ms") or -1), r.get("generation") or 0)


def band_ends(rebalances: list[dict[str, Any]]) -> None:
    """Each rebalance's `band_end_ms`: its end, or for one that never completed the start of the
    next one (the group was rebalancing all along), else the end of its join phase."""
    for i, r in enumerate(rebalances):
        nxt = rebalances[i + 1]["start_ms"] if i + 1 < len(rebalances) else None
        candidates = [r.get("end_ms"), nxt, r.get("join_end_ms"), r.get("start_ms")]
        r["band_end_ms"] = next((c for c in candidates if c is not None), None)


def gather(spark: SparkSession, frames: dict[str, DataFrame], max_gantt_rows: int,
           max_gantt_intervals: int) -> list[Run]:
    """Everything the page shows, collected. The queries are small and mostly independent, so they
    run as concurrent Spark jobs (from threads): the report then waits for two rounds of jobs, not
    for a dozen one after the other."""
    runs: dict[str, Run] = {}

    def run(name: str) -> Run:
        if name not in runs:
            runs[name] = Run(name, None)
        return runs[name]

    def later(fn: Any, table: str, *args: Any) -> Future | None:
        return pool.submit(fn, frames[table], *args) if table in frames else None

    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="grouplab-report") as pool:
        run_rows = later(rows, "runs")
        rebalance_rows = later(rows, "rebalances")
        chosen = later(gantt_partitions, "ownership", max_gantt_rows)
        deliveries = later(delivery_data, "deliveries")
        bad = later(malformed_data, "malformed")

        groups: dict[tuple[str, str], Group] = {}
        by_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in rebalance_rows.result() if rebalance_rows else []:
            by_group.setdefault((r["run"], r["group_id"]), []).append(r)
        for (run_name, group_id), rebs in by_group.items():
            rebs.sort(key=lambda r: (r.get("generation") is None, r.get("generation") or 0, r.get("start_ms") or 0))
            band_ends(rebs)
            top = sorted(rebs, key=hurt_order)[:TOP_REBALANCES]
            for rank, r in enumerate(top, 1):
                r["rank"] = rank
            groups[(run_name, group_id)] = Group(group_id, rebs, top)

        gantts = later(gantt_data, "ownership", spark, chosen.result() if chosen else [], groups, max_gantt_rows,
                       max_gantt_intervals)
        moved = later(moved_from, "movements", spark, groups)

        drawn = gantts.result() if gantts else {}
        idle = later(idle_data, "partition_time", spark, drawn)
        stops = later(stop_data, "stalls", drawn)
        for r in run_rows.result() if run_rows else []:
            run(r["run"]).summary = r
        for key, gantt in drawn.items():
            groups.setdefault(key, Group(key[1], [], [])).gantt = gantt
        for key, spans in (idle.result() if idle else {}).items():
            drawn[key].idle = spans
        for key, marks in (stops.result() if stops else {}).items():
            drawn[key].stops = marks
        for key, moves in (moved.result() if moved else {}).items():
            groups[key].moved_from = moves
        for (run_name, _), group in sorted(groups.items(), key=lambda kv: (natural_key(kv[0][0]), natural_key(kv[0][1]))):
            run(run_name).groups.append(group)
        for run_name, delivery in (deliveries.result() if deliveries else {}).items():
            run(run_name).delivery = delivery
        files, examples = bad.result() if bad else ([], [])
        for r in files:
            run(r["run"]).malformed_files.append((r["file"], r["lines"]))
            run(r["run"]).malformed_file_count = r["files"]
        for r in examples:
            run(r["run"]).malformed_examples.append(r)

    return [runs[k] for k in sorted(runs, key=natural_key)]


def malformed_data(bad: DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Lines per file (the files with the most, per run) and a few lines per run."""
    w = Window.partitionBy("run").orderBy(F.col("lines").desc(), "file")
    per_file = (bad.groupBy("run", "file").agg(F.count(F.lit(1)).alias("lines"))
                   .withColumn("i", F.row_number().over(w))
                   .withColumn("files", F.count(F.lit(1)).over(Window.partitionBy("run")))
                   .where(F.col("i") <= MAX_MALFORMED_FILES))
    files = rows(per_file.orderBy("run", "i"))
    if not files:  # the usual case: no second job
        return [], []
    some = (bad.withColumn("i", F.row_number().over(Window.partitionBy("run").orderBy("file")))
               .where(F.col("i") <= MALFORMED_EXAMPLES).orderBy("run", "i"))
    return files, rows(some.select("run", "file", F.substring("line", 1, 300).alias("line")))


def gantt_partitions(own: DataFrame, max_rows: int) -> list[dict[str, Any]]:
    """Per group, the partitions its Gantt chart shows: all of them, or when there are more than
    `max_rows`, those owned the least time (the longest without an owner); with their interval
    counts and the group's totals."""
    key = ["run", "group_id", "topic", "partition"]
    stats = own.groupBy(*key).agg(F.count(F.lit(1)).alias("n"), F.sum("duration_ms").alias("owned_ms"),
                                  F.min("start_ms").alias("first_ms"), F.max("end_ms").alias("last_ms"))
    w = Window.partitionBy("run", "group_id").orderBy(F.col("owned_ms").asc_nulls_first(), "topic", "partition")
    ranked = (stats.withColumn("rank", F.row_number().over(w))
                   .withColumn("partitions", F.count(F.lit(1)).over(Window.partitionBy("run", "group_id")))
                   .withColumn("intervals", F.sum("n").over(Window.partitionBy("run", "group_id"))))
    return rows(ranked.where(F.col("rank") <= max_rows))


def gantt_data(own: DataFrame, spark: SparkSession, chosen: list[dict[str, Any]],
               groups: dict[tuple[str, str], Group], max_rows: int, max_intervals: int) -> dict[tuple[str, str], Gantt]:
    """Per group, the ownership intervals of the `chosen` partitions; when those are more than
    `max_intervals`, only the stretch of time around the group's worst rebalance that holds about
    that many (every interval overlapping it, so a gap drawn is a real gap)."""
    if not chosen:
        return {}
    per_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in chosen:
        per_group.setdefault((r["run"], r["group_id"]), []).append(r)

    # Groups whose chosen partitions still hold too many intervals: a window of time around the
    # worst rebalance (else the middle of the group's time), wide enough for `max_intervals` starts.
    centres: dict[tuple[str, str], tuple[int, int | None]] = {}
    for k, parts in per_group.items():
        if sum(p["n"] for p in parts) > max_intervals:
            group = groups.get(k)
            worst = group.top[0] if group and group.top and group.top[0].get("start_ms") is not None else None
            if worst is not None:
                centres[k] = (int(worst["start_ms"]), worst.get("generation"))
            else:
                lo, hi = min(p["first_ms"] for p in parts), max(p["last_ms"] for p in parts)
                centres[k] = ((lo + hi) // 2, None)

    sel_schema = StructType([StructField("run", StringType()), StructField("group_id", StringType()),
                             StructField("topic", StringType()), StructField("partition", LongType()),
                             StructField("centre_ms", LongType())])
    sel = spark.createDataFrame(
        [(r["run"], r["group_id"], r["topic"], int(r["partition"]), centres.get((r["run"], r["group_id"]), (None,))[0])
         for r in chosen], sel_schema)
    picked = own.join(F.broadcast(sel.withColumnRenamed("partition", "_p")),
                      on=[own["run"] == sel["run"], own["group_id"] == sel["group_id"],
                          own["topic"] == sel["topic"], own["partition"] == F.col("_p")])
    picked = picked.select(own["run"], own["group_id"], own["topic"], own["partition"], own["client_id"],
                           own["start_ms"], own["end_ms"], own["end_reason"], sel["centre_ms"])

    windows: dict[tuple[str, str], tuple[int, int]] = {}
    if centres:
        far = F.abs(F.col("start_ms") - F.col("centre_ms"))
        nth = (picked.where(F.col("centre_ms").isNotNull()).withColumn("d", far)
                     .withColumn("i", F.row_number().over(Window.partitionBy("run", "group_id").orderBy("d")))
                     .where(F.col("i") == max_intervals).select("run", "group_id", "d", "centre_ms"))
        for r in rows(nth):
            k = (r["run"], r["group_id"])
            lo, hi = min(p["first_ms"] for p in per_group[k]), max(p["last_ms"] for p in per_group[k])
            windows[k] = (max(r["centre_ms"] - r["d"], lo), min(r["centre_ms"] + r["d"], hi))
    win_schema = StructType([StructField("run", StringType()), StructField("group_id", StringType()),
                             StructField("w0", LongType()), StructField("w1", LongType())])
    wins = spark.createDataFrame([(k[0], k[1], v[0], v[1]) for k, v in windows.items()], win_schema)
    inside = F.col("w0").isNull() | ((F.col("start_ms") <= F.col("w1")) & (F.col("end_ms") >= F.col("w0")))
    drawn = (picked.join(F.broadcast(wins), on=["run", "group_id"], how="left").where(inside)
                   .select("run", "group_id", "topic", "partition", "client_id", "start_ms", "end_ms", "end_reason"))

    intervals: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows(drawn):
        intervals.setdefault((r["run"], r["group_id"]), []).append(r)
    result = {}
    for k, parts in per_group.items():
        result[k] = Gantt(
            rows=sorted(((p["topic"], p["partition"]) for p in parts), key=lambda tp: (natural_key(tp[0]), tp[1])),
            intervals=intervals.get(k, []), partitions_total=parts[0]["partitions"],
            intervals_total=parts[0]["intervals"], intervals_shown=len(intervals.get(k, [])),
            window=windows.get(k), window_generation=centres[k][1] if k in windows else None,
            max_rows=max_rows, max_intervals=max_intervals)
    return result


def _drawn_rows(spark: SparkSession, gantts: dict[tuple[str, str], Gantt]) -> DataFrame:
    """The partitions each Gantt chart draws, with its window, as a small DataFrame to join."""
    schema = StructType([StructField("run", StringType()), StructField("group_id", StringType()),
                         StructField("topic", StringType()), StructField("partition", LongType()),
                         StructField("w0", LongType()), StructField("w1", LongType())])
    return spark.createDataFrame(
        [(k[0], k[1], t, int(p), g.window[0] if g.window else None, g.window[1] if g.window else None)
         for k, g in gantts.items() for t, p in g.rows], schema)


def idle_data(times: DataFrame, spark: SparkSession,
              gantts: dict[tuple[str, str], Gantt]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per drawn Gantt chart, its partitions' assigned-but-not-consumed stretches (in its window)."""
    if not gantts:
        return {}
    sel = _drawn_rows(spark, gantts).withColumnRenamed("partition", "_p")
    idle = times.where(F.col("state") == "assigned_not_consumed")
    picked = idle.join(F.broadcast(sel), on=[idle["run"] == sel["run"], idle["group_id"] == sel["group_id"],
                                            idle["topic"] == sel["topic"], idle["partition"] == F.col("_p")])
    inside = F.col("w0").isNull() | ((idle["start_ms"] <= F.col("w1")) & (idle["end_ms"] >= F.col("w0")))
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows(picked.where(inside).select(idle["run"], idle["group_id"], idle["topic"], idle["partition"],
                                              idle["client_id"], idle["start_ms"], idle["end_ms"])):
        out.setdefault((r["run"], r["group_id"]), []).append(r)
    return out


def stop_data(stopped: DataFrame, gantts: dict[tuple[str, str], Gantt]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per drawn Gantt chart, the members that stopped while holding partitions (in its window)."""
    if not gantts:
        return {}
    keys = [F.lit(f"{k[0]}\x00{k[1]}") for k in gantts]
    w = Window.partitionBy("run", "group_id").orderBy("stopped_ms")
    picked = (stopped.where((F.col("partitions") > 0) & F.concat_ws("\x00", "run", "group_id").isin(*keys))
              .withColumn("i", F.row_number().over(w)).where(F.col("i") <= MAX_FAULT_MARKS))
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows(picked.select("run", "group_id", "client_id", "fault", "stopped_ms")):
        window = gantts[(r["run"], r["group_id"])].window
        if window is None or window[0] <= r["stopped_ms"] <= window[1]:
            out.setdefault((r["run"], r["group_id"]), []).append(r)
    return out


def moved_from(movements: DataFrame, spark: SparkSession,
               groups: dict[tuple[str, str], Group]) -> dict[tuple[str, str], dict[int, list[tuple[str, str, int]]]]:
    """For the rebalances that hurt: which clients the moved partitions came from, and why."""
    wanted = [(k[0], k[1], int(r["generation"])) for k, g in groups.items() for r in g.top if r.get("generation") is not None]
    if not wanted:
        return {}
    schema = StructType([StructField("run", StringType()), StructField("group_id", StringType()),
                         StructField("generation", LongType())])
    sel = spark.createDataFrame(wanted, schema)
    counted = (movements.join(F.broadcast(sel), on=["run", "group_id", "generation"])
                        .groupBy("run", "group_id", "generation", "from_client", "reason")
                        .agg(F.count(F.lit(1)).alias("n")))
    out: dict[tuple[str, str], dict[int, list[tuple[str, str, int]]]] = {}
    for r in rows(counted):
        out.setdefault((r["run"], r["group_id"]), {}).setdefault(r["generation"], []).append(
            (r["from_client"], r["reason"], r["n"]))
    for per_gen in out.values():
        for moves in per_gen.values():
            moves.sort(key=lambda m: (-m[2], natural_key(m[0] or "")))
    return out


OUTCOMES = ("once", "lost", "duplicated", "unknown")


def delivery_data(deliv: DataFrame) -> dict[str, Delivery]:
    """One Spark job: counts per partition (by outcome, and by times processed), their totals per
    run as window sums, and only the partitions with the most lost + duplicated records collected."""
    outcome = F.coalesce(F.col("outcome"), F.lit("unknown"))
    times = F.least(F.coalesce(F.col("processed"), F.lit(0)), F.lit(PROCESSED_BUCKETS))
    counts = ([F.sum(F.when(outcome == o, 1).otherwise(0)).alias(o) for o in OUTCOMES]
              + [F.sum(F.when(~outcome.isin(*OUTCOMES), 1).otherwise(0)).alias("other")]
              + [F.sum(F.when(times == k, 1).otherwise(0)).alias(f"p{k}") for k in range(PROCESSED_BUCKETS + 1)])
    per_tp = deliv.groupBy("run", "topic", "partition").agg(F.max("mode").alias("mode"), *counts)
    per_run = Window.partitionBy("run")
    totals = [F.sum(c).over(per_run).alias(f"total_{c}")
              for c in [*OUTCOMES, "other", *(f"p{k}" for k in range(PROCESSED_BUCKETS + 1))]]
    worst = Window.partitionBy("run").orderBy((F.col("lost") + F.col("duplicated")).desc(), "topic", "partition")
    picked = (per_tp.select("*", *totals, F.count(F.lit(1)).over(per_run).alias("partitions"),
                            F.max("mode").over(per_run).alias("run_mode"), F.row_number().over(worst).alias("i"))
                    .where(F.col("i") <= MAX_DELIVERY_PARTITIONS))
    out: dict[str, Delivery] = {}
    for r in rows(picked):
        if r["run"] not in out:
            outcomes = {o: r[f"total_{o}"] for o in (*OUTCOMES, "other") if r[f"total_{o}"] or o in OUTCOMES}
            processed = [(k, r[f"total_p{k}"]) for k in range(PROCESSED_BUCKETS + 1) if r[f"total_p{k}"]]
            out[r["run"]] = Delivery(r["run_mode"], outcomes, [], r["partitions"], processed)
        out[r["run"]].partitions.append(
            {"topic": r["topic"], "partition": r["partition"], "records": sum(r[o] for o in (*OUTCOMES, "other")),
             "lost": r["lost"], "duplicated": r["duplicated"]})
    for d in out.values():
        d.partitions.sort(key=lambda p: (natural_key(p["topic"]), p["partition"]))
    return out


# ----------------------------------------------------------------------------- charts


def esc(value: Any) -> str:
    return html.escape(fmt(value))


def cause_colors(causes: Iterable[str]) -> dict[str, str]:
    colors = dict(CAUSE_COLORS)
    extra = iter(OTHER_CAUSE_COLORS * 10)
    for c in sorted(set(causes) - set(colors)):
        colors[c] = next(extra, "#777777")
    return colors


def seconds(ms: Any, origin_ms: int) -> float:
    return (ms - origin_ms) / 1000.0


def gantt_chart(gantt: Gantt, group: Group, colors: dict[str, Any], origin_ms: int,
                c: Catalog | None = None) -> OwnershipChart:
    """The Gantt chart's data in the shared renderer's model (grouplab/plot.py), its words in `c`'s language."""
    c = c or Catalog()
    hurt = {r["generation"] for r in group.top}
    bands = [Band(r["start_ms"], r["band_end_ms"], f"g{r['generation']}", r["generation"] in hurt)
             for r in group.rebalances if r.get("start_ms") is not None and r.get("band_end_ms") is not None]
    return OwnershipChart(
        lanes=[lane_name(t, p) for t, p in gantt.rows],
        bars=[Bar(lane_name(i["topic"], i["partition"]), i["start_ms"], i["end_ms"], i["client_id"], i["end_reason"])
              for i in gantt.intervals],
        idle=[Idle(lane_name(i["topic"], i["partition"]), i["start_ms"], i["end_ms"], i["client_id"]) for i in gantt.idle],
        bands=bands,
        faults=[FaultMark(f["stopped_ms"], f"{fault_text(f['fault'], c)} {f['client_id']}") for f in gantt.stops],
        origin_ms=origin_ms, window=gantt.window, colors=colors, highlight_label=c.t("analyze.highlight"), lang=c.lang)


def fault_text(fault: str, c: Catalog) -> str:
    """English as it always was (a fault by its name); another language through the plot's words."""
    return FAULT_WORDS.get(fault, fault) if c.lang == "en" else fault_word(fault, c)


def gantt_svg(gantt: Gantt, group: Group, colors: dict[str, Any], origin_ms: int, prefix: str,
              c: Catalog | None = None) -> str:
    return chart_svg(gantt_chart(gantt, group, colors, origin_ms, c), prefix)


def legend_causes(ax: Any, causes: list[str], colors: dict[str, str], extra: list[Any]) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=colors[c], label=mpl(c, 32)) for c in causes] + extra
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.02), fontsize=7.5, frameon=False,
              ncols=min(len(handles), 6), borderaxespad=0)


def generation_axis(ax: Any, gens: list[int], c: Catalog) -> None:
    if len(gens) <= 60:
        ax.set_xticks(gens, [str(g) for g in gens], fontsize=7 if len(gens) <= 40 else 6)
    else:
        ax.tick_params(axis="x", labelsize=7)
    if gens:  # at least a dozen generations wide, so a single rebalance is not one huge bar
        lo, hi = min(gens) - 0.7, max(gens) + 0.7
        pad = max(0.0, (12 - (hi - lo)) / 2)
        ax.set_xlim(lo - pad, hi + pad)
    ax.set_xlabel(c.t("analyze.chart.generation"), fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def durations_svg(group: Group, prefix: str, c: Catalog | None = None) -> str:
    """Stacked bars per generation: join phase (colored by cause) + sync phase (dark); a rebalance
    that never completed shows its join phase hatched, with a red ×."""
    c = c or Catalog()
    return localized_svg(lambda: _durations(group, c), c.lang, prefix)


def _durations(group: Group, c: Catalog) -> Any:
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rebs = [r for r in group.rebalances if r.get("generation") is not None]
    colors = cause_colors(r["cause"] or "unknown" for r in rebs)
    fig = Figure(figsize=(13, 3.4))
    ax = fig.add_axes((0.06, 0.17, 0.92, 0.68))
    gens = [r["generation"] for r in rebs]
    join = [(r.get("join_ms") or 0) / 1000 for r in rebs]
    sync = [(r.get("sync_ms") or 0) / 1000 for r in rebs]
    done = [r.get("outcome") not in ("interrupted", "incomplete") for r in rebs]
    face = [colors[r["cause"] or "unknown"] for r in rebs]
    ax.bar(gens, join, 0.8, color=face, hatch=[None if d else "////" for d in done],
           edgecolor=["none" if d else HURT_COLOR for d in done], linewidth=0.6, zorder=2)
    ax.bar(gens, sync, 0.8, bottom=join, color="#333333", zorder=2)
    top = max([j + s for j, s in zip(join, sync)] + [0.001])
    broken = [(g, j + s) for g, j, s, d in zip(gens, join, sync, done) if not d]
    if broken:
        ax.scatter([g for g, _ in broken], [h + top * 0.04 for _, h in broken], marker="x", color=HURT_COLOR,
                   s=18, zorder=3)
    ax.set_ylim(0, top * 1.12)
    ax.set_ylabel(c.t("analyze.chart.seconds"), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", alpha=0.3, zorder=0)
    generation_axis(ax, gens, c)
    causes = sorted({r["cause"] or "unknown" for r in rebs}, key=natural_key)
    syncs = sorted(r["sync_ms"] for r in rebs if r.get("sync_ms") is not None)
    sync_label = (c.t("analyze.chart.sync_median", ms=f"{syncs[len(syncs) // 2]:,}") if syncs
                  else c.t("analyze.chart.sync"))
    extra: list[Any] = [Patch(color="#333333", label=sync_label)]
    if broken:
        extra.append(Line2D([], [], marker="x", ls="none", color=HURT_COLOR, label=c.t("analyze.chart.broken")))
    legend_causes(ax, causes, colors, extra)
    return fig


def stop_the_world_svg(group: Group, prefix: str, c: Catalog | None = None) -> str:
    """Top: unowned partition-seconds each generation's assignment ended (colored by cause), the
    worst labelled. Below, on the same generations: partitions revoked and moved in that rebalance."""
    c = c or Catalog()
    return localized_svg(lambda: _stop_the_world(group, c), c.lang, prefix)


def _stop_the_world(group: Group, c: Catalog) -> Any:
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rebs = [r for r in group.rebalances if r.get("generation") is not None]
    colors = cause_colors(r["cause"] or "unknown" for r in rebs)
    fig = Figure(figsize=(13, 4.4))
    ax = fig.add_axes((0.06, 0.42, 0.92, 0.47))
    low = fig.add_axes((0.06, 0.12, 0.92, 0.22), sharex=ax)
    gens = [r["generation"] for r in rebs]
    cost = [(r.get("unowned_partition_ms") or 0) / 1000 for r in rebs]
    idle = [(r.get("assigned_not_consumed_ms") or 0) / 1000 for r in rebs]
    ax.bar(gens, cost, 0.8, color=[colors[r["cause"] or "unknown"] for r in rebs], zorder=2)
    if any(idle):  # the stops each rebalance repaired: their partitions' idle time before it began
        ax.bar(gens, idle, 0.8, bottom=cost, color="white", edgecolor=IDLE_COLOR, hatch="////", linewidth=0.6,
               zorder=2)
    top = max([c + i for c, i in zip(cost, idle)] + [0.001])
    for r in group.top:
        if r.get("generation") is not None and lost_ms(r) > 0:
            ax.text(r["generation"], lost_ms(r) / 1000 + top * 0.02, f"g{r['generation']}: {lost_ms(r) / 1000:,.0f}",
                    ha="center", va="bottom", fontsize=7, color=HURT_COLOR, fontweight="bold")
    ax.set_ylim(0, top * 1.15 if top > 0.001 else 1)
    ax.set_ylabel(c.t("analyze.chart.lost"), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.tick_params(axis="x", labelbottom=False)
    ax.grid(axis="y", alpha=0.3, zorder=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    revoked = [r.get("partitions_revoked") or 0 for r in rebs]
    moved = [r.get("partitions_moved") or 0 for r in rebs]
    low.bar([g - 0.2 for g in gens], revoked, 0.4, color="#555555", zorder=2)
    low.bar([g + 0.2 for g in gens], moved, 0.4, color="#A0CBE8", zorder=2)
    low.set_ylim(0, max(revoked + moved + [1]) * 1.1)
    low.set_ylabel(c.t("analyze.chart.partitions"), fontsize=8)
    low.tick_params(axis="y", labelsize=7)
    low.grid(axis="y", alpha=0.3, zorder=0)
    generation_axis(low, gens, c)
    causes = sorted({r["cause"] or "unknown" for r in rebs}, key=natural_key)
    extra = [Patch(facecolor="white", edgecolor=IDLE_COLOR, hatch="////", label=c.t("analyze.chart.idle_before"))] \
        if any(idle) else []
    extra += [Patch(color="#555555", label=c.t("analyze.chart.revoked")),
              Patch(color="#A0CBE8", label=c.t("analyze.chart.moved"))]
    legend_causes(ax, causes, colors, extra)
    return fig


def delivery_partitions_svg(d: Delivery, prefix: str, c: Catalog | None = None) -> str:
    c = c or Catalog()
    return localized_svg(lambda: _delivery_partitions(d, c), c.lang, prefix)


def _delivery_partitions(d: Delivery, c: Catalog) -> Any:
    from matplotlib.figure import Figure

    parts = d.partitions
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_axes((0.11, 0.22, 0.86, 0.64))
    xs = range(len(parts))
    ax.bar([x - 0.2 for x in xs], [p["lost"] for p in parts], 0.4, color=HURT_COLOR,
           label=c.t("analyze.outcome.lost"), zorder=2)
    ax.bar([x + 0.2 for x in xs], [p["duplicated"] for p in parts], 0.4, color="#F28E2B",
           label=c.t("analyze.outcome.duplicated"), zorder=2)
    ax.set_xticks(list(xs), [mpl(f"{p['topic']}-{p['partition']}", 16) for p in parts], fontsize=7,
                  rotation=0 if len(parts) <= 12 else 90)
    ax.set_ylabel(c.t("analyze.chart.records"), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", alpha=0.3, zorder=0)
    ax.legend(fontsize=7.5, frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0), ncols=2, borderaxespad=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig


def processed_svg(d: Delivery, prefix: str, c: Catalog | None = None) -> str:
    c = c or Catalog()
    return localized_svg(lambda: _processed(d, c), c.lang, prefix)


def _processed(d: Delivery, c: Catalog) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_axes((0.11, 0.2, 0.86, 0.7))
    xs = [t for t, _ in d.processed]
    ns = [n for _, n in d.processed]
    ax.bar(xs, ns, 0.7, color=["#4E79A7" if t == 1 else HURT_COLOR if t == 0 else "#F28E2B" for t in xs], zorder=2)
    if ns and max(ns) > 50 * max(min(ns), 1):
        ax.set_yscale("log")
    for x, n in zip(xs, ns):
        ax.text(x, n, f"{n:,}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(xs, [f"{t}+" if t >= PROCESSED_BUCKETS else str(t) for t in xs], fontsize=8)
    ax.set_xlabel(c.t("analyze.chart.processed"), fontsize=8)
    ax.set_ylabel(c.t("analyze.chart.records"), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", alpha=0.3, zorder=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig


# ----------------------------------------------------------------------------- the page


SUMMARY_COLUMNS: list[tuple[str, str]] = [
    ("run", "run"), ("events", "events"), ("malformed_lines", "malformed lines"), ("groups", "groups"),
    ("span_s", "span s"), ("rebalances", "rebalances"), ("stable_generations", "stable"),
    ("partitions_moved", "partitions moved"), ("unowned_partition_s", "unowned partition-s"),
    ("assigned_not_consumed_s", "assigned but not consumed partition-s"),
    ("rebalance_p50_ms", "p50 ms"), ("rebalance_p99_ms", "p99 ms"), ("max_rebalance_ms", "max ms"),
]
DELIVERY_COLUMNS: list[tuple[str, str]] = [
    ("delivery_mode", "delivery"), ("records", "records"), ("lost", "lost"), ("duplicated", "extra copies"),
]

STYLE = """body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:1320px;
padding:0 1.2em;color:#222;line-height:1.4}
h1{font-size:1.5em;margin-bottom:0.2em}h2{font-size:1.3em;border-top:2px solid #ddd;padding-top:0.8em;margin-top:2em}
h3{font-size:1.1em;margin:1.4em 0 0.4em}h4{font-size:1em;margin:1.2em 0 0.3em;color:#333}
table{border-collapse:collapse;font-size:0.88em;margin:0.4em 0}th,td{border:1px solid #ccc;padding:0.22em 0.55em;
vertical-align:top}th{background:#f3f3f3;text-align:left}td.n{text-align:right;white-space:nowrap}
td.bad{text-align:right;color:#b00;font-weight:bold}tr.worst td{background:#fff3f3}
.note{color:#666;font-size:0.85em;margin:0.2em 0 0.6em}.cap{color:#8a5a00;font-size:0.88em;background:#fff8e1;
padding:0.3em 0.6em;border-left:3px solid #e0a800}.headline{font-size:1.02em;background:#f7f7f7;padding:0.5em 0.8em;
border-left:3px solid #888}.bad{color:#b00}.ok{color:#070}.muted{color:#777}
pre{white-space:pre-wrap;word-break:break-all;font-size:0.82em;background:#f7f7f7;padding:0.4em;margin:0.2em 0}
svg{max-width:100%;height:auto;display:block}.pair{display:flex;flex-wrap:wrap;gap:1em}.pair>div{flex:1 1 560px;min-width:0}
nav a{margin-right:1em}code{font-size:0.92em}
.wide{overflow-x:auto}table.hurt{width:100%;font-size:0.85em}table.hurt td:nth-child(3){min-width:14em}
table.hurt td:nth-child(12){min-width:14em}"""

def summary_row(run: Run) -> dict[str, Any]:
    s = dict(run.summary or {"run": run.run})
    if s.get("first_ms") is not None and s.get("last_ms") is not None:
        s["span_s"] = (s["last_ms"] - s["first_ms"]) / 1000
    if s.get("unowned_partition_ms") is not None and (any(g.owned for g in run.groups) or not s.get("rebalances")):
        s["unowned_partition_s"] = s["unowned_partition_ms"] / 1000  # else unknown: no member logs
        if s.get("assigned_not_consumed_ms") is not None:
            s["assigned_not_consumed_s"] = s["assigned_not_consumed_ms"] / 1000
    return s


def summary_table(runs: list[Run], c: Catalog | None = None) -> str:
    c = c or Catalog()
    columns = list(SUMMARY_COLUMNS)
    if any(r.summary and r.summary.get("delivery_mode") for r in runs):
        columns += DELIVERY_COLUMNS
    head = "".join(f"<th>{html.escape(c.t(f'analyze.col.{key}'))}</th>" for key, _ in columns)
    body = []
    for run in runs:
        s = summary_row(run)
        cells = []
        for key, _ in columns:
            value = s.get(key)
            if key == "run":
                cells.append(f"<td><a href='#{anchor(run.run)}'>{html.escape(run.run)}</a></td>")
            elif key in ("lost", "duplicated", "malformed_lines") and value:
                cells.append(f"<td class=bad>{esc(value)}</td>")
            elif key == "delivery_mode":
                cells.append(f"<td>{esc(value)}</td>")
            else:
                cells.append(f"<td class=n>{esc(value)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<div class=wide><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def anchor(name: str) -> str:
    return "run-" + re.sub(r"[^A-Za-z0-9_-]", "_", name)


def ms_s(ms: Any) -> str:
    return "–" if ms is None else f"{ms / 1000:,.1f}"


def headline(run: Run, c: Catalog | None = None) -> str:
    c = c or Catalog()
    s = run.summary or {}
    rebs = [r for g in run.groups for r in g.rebalances]
    parts = []
    if rebs:
        broken = sum(1 for r in rebs if r.get("outcome") in ("interrupted", "incomplete"))
        empty = sum(1 for r in rebs if r.get("outcome") == "empty")
        extra = c.t("analyze.list_sep").join(
            x for x in [c.t("analyze.h.broken", count=broken) if broken else "",
                        c.t("analyze.h.empty", count=empty) if empty else ""] if x)
        parts.append(c.t("analyze.h.rebalances", count=f"<b>{len(rebs):,}</b>")
                     + (c.t("analyze.h.extra", extra=extra) if extra else ""))
        moved = sum(r.get("partitions_moved") or 0 for r in rebs)
        unowned = sum(lost_ms(r) for r in rebs)
        parts.append(c.t("analyze.h.moved", count=f"<b>{moved:,}</b>"))
        if any(g.owned for g in run.groups):
            without = ms_s(sum(r.get("unowned_partition_ms") or 0 for r in rebs))
            parts.append(c.t("analyze.h.unowned", s=f"<b>{without}</b>"))
            idle = s.get("assigned_not_consumed_ms")
            if idle:
                parts.append(c.t("analyze.h.idle", s=f"<b>{ms_s(idle)}</b>"))
        else:
            unowned = 0
            parts.append(c.t("analyze.h.unknown"))
        # The worst disruption: a group's first generation (the group forming) does not count here.
        later = [r for g in run.groups for r in g.rebalances[1:]]
        worst = min(later, key=hurt_order, default=None)
        if worst is not None and (lost_ms(worst) or worst.get("duration_ms")):
            share = lost_ms(worst) / unowned if unowned else 0
            cost = (c.t("analyze.h.cost", s=ms_s(lost_ms(worst)))
                    + (c.t("analyze.h.share", share=f"{share:.0%}") if share else "")
                    if unowned else c.t("analyze.h.ms", ms=esc(worst.get("duration_ms"))))
            parts.append(c.t("analyze.h.worst" if unowned else "analyze.h.longest",
                             generation=f"<b>{esc(worst.get('generation'))}</b>",
                             group=c.t("analyze.h.of_group", group=html.escape(worst["group_id"])) if len(run.groups) > 1 else "",
                             cause=html.escape(worst.get("cause") or "unknown"),
                             trigger=html.escape(trigger_text(worst, c)), cost=cost))
    else:
        parts.append(c.t("analyze.h.none"))
    if s.get("malformed_lines"):
        bad = c.t("analyze.h.malformed", count=f"{s['malformed_lines']:,}")
        parts.append(f"<span class=bad>{bad}</span>")
    if s.get("delivery_mode"):
        lost, dup = s.get("lost") or 0, s.get("duplicated") or 0
        cls = "bad" if lost or dup else "ok"
        parts.append(f"<span class={cls}>" + c.t("analyze.h.delivery", mode=html.escape(s["delivery_mode"]),
                                                   lost=f"{lost:,}", dup=f"{dup:,}") + "</span>")
    return f"<p class=headline>{' · '.join(parts)}</p>"


def trigger_text(r: dict[str, Any], c: Catalog) -> str:
    """A rebalance's trigger, the coordinator's own words: as written in English, else said in the
    catalogue's language where grouplab's coordinator wrote it (teach/reasons.py)."""
    trigger = r.get("trigger") or ""
    return trigger if c.lang == "en" else say_text(trigger, c)


def moved_text(moves: list[tuple[str, str, int]], c: Catalog | None = None) -> str:
    """`owner gone: m-7 ×3, m-4 ×2 · rebalanced: m-0 ×1` (most first, a few per reason)."""
    c = c or Catalog()
    if not moves:
        return "<span class=muted>–</span>"
    parts = []
    for reason in sorted({m[1] or "" for m in moves}, key=lambda x: (x != "owner_gone", x)):
        these = [m for m in moves if (m[1] or "") == reason]
        items = ", ".join(f"{html.escape(cl or c.t('analyze.none'))}&nbsp;×{n:,}" for cl, _, n in these[:4])
        more = c.t("analyze.moved.more", count=len(these) - 4) if len(these) > 4 else ""
        parts.append(f"<i>{html.escape(reason_text(reason, c))}:</i> {items}{more}")
    return " · ".join(parts)


def reason_text(reason: str, c: Catalog) -> str:
    """Why a partition moved (movements.reason): the catalogue's word, else the reason's own name."""
    key = f"analyze.reason.{reason or 'moved'}"
    return c.t(key) if c.has(key) else reason.replace("_", " ")


def hurt_table(group: Group, c: Catalog | None = None) -> str:
    c = c or Catalog()
    head = "<tr>" + "".join(f"<th>{c.t(f'analyze.hurt.{key}')}</th>" for key in HURT_COLUMNS) + "</tr>"
    body = []
    first = group.rebalances[0] if group.rebalances else None
    owned = group.owned
    for r in group.top:
        dur = r.get("duration_ms")
        phases = c.t("analyze.hurt.split", join=esc(r.get("join_ms")), sync=esc(r.get("sync_ms")))
        split = f"<br><span class=muted>{phases}</span>"
        duration = (f"<b>{esc(dur)}</b>" if dur is not None else c.t("analyze.hurt.never")) + split
        outcome = r.get("outcome") or "–"
        forming = f" <span class=muted>{c.t('analyze.hurt.forming')}</span>" if r is first else ""
        body.append(
            f"<tr{' class=worst' if r['rank'] == 1 else ''}><td class=n>{r['rank']}</td>"
            f"<td class=n>{esc(r.get('generation'))}</td>"
            f"<td><b>{html.escape(r.get('cause') or 'unknown')}</b><br>{html.escape(trigger_text(r, c))}{forming}</td>"
            f"<td class=n>{esc(r.get('members_before'))} → {esc(r.get('members'))}</td>"
            f"<td class=n>{duration}</td>"
            f"<td{' class=bad' if outcome in ('interrupted', 'incomplete') else ''}>{html.escape(outcome)}</td>"
            f"<td class=n>{esc(r.get('partitions_revoked') if owned else None)}</td>"
            f"<td class=n>{esc(r.get('partitions_moved'))}</td>"
            f"<td class=n><b>{ms_s(r.get('unowned_partition_ms') if owned else None)}</b></td>"
            f"<td class=n>{ms_s(r.get('assigned_not_consumed_ms') if owned else None)}</td>"
            f"<td class=n>{ms_s(r.get('max_unowned_ms') if owned else None)}</td>"
            f"<td>{moved_text(group.moved_from.get(r['generation'], []) if r.get('generation') is not None else [], c)}</td></tr>")
    return f"<div class=wide><table class=hurt><thead>{head}</thead><tbody>{''.join(body)}</tbody></table></div>"


# The hurt table's columns (catalogue keys `analyze.hurt.<key>`; their texts are HTML).
HURT_COLUMNS = ("rank", "generation", "cause", "members", "duration", "outcome", "revoked", "moved", "unowned", "idle",
                "gap", "moved_from")


def gantt_note(g: Gantt, origin_ms: int, c: Catalog | None = None) -> str:
    c = c or Catalog()
    clients = len({i["client_id"] for i in g.intervals})
    legend = c.t("analyze.gantt.note", partitions=f"{g.partitions_total:,}", intervals=f"{g.intervals_total:,}",
                 clients=f"{clients:,}")
    note = f"<p class=note>{legend}</p>"
    if not g.capped:
        return note
    how = []
    if len(g.rows) < g.partitions_total:
        how.append(c.t("analyze.gantt.rows", shown=f"{len(g.rows):,}", total=f"{g.partitions_total:,}"))
    if g.window is not None:
        around = (c.t("analyze.gantt.around_worst", generation=g.window_generation) if g.window_generation is not None
                  else c.t("analyze.gantt.around_middle"))
        how.append(c.t("analyze.gantt.window", start=f"{seconds(g.window[0], origin_ms):,.1f}",
                       end=f"{seconds(g.window[1], origin_ms):,.1f}", around=around))
    capped = c.t("analyze.gantt.capped", how=c.t("analyze.gantt.and").join(how), shown=f"{g.intervals_shown:,}",
                 total=f"{g.intervals_total:,}", rows=f"{g.max_rows:,}", intervals=f"{g.max_intervals:,}")
    return f"<p class=cap>{capped}</p>{note}"


def group_html(run: Run, group: Group, colors: dict[str, Any], prefix: str, many_groups: bool,
               c: Catalog | None = None) -> str:
    c = c or Catalog()
    name = html.escape(group.group_id or c.t("analyze.none"))
    parts = [f"<h3>{c.t('analyze.group', group=name)}</h3>" if many_groups or group.group_id else ""]
    origin = run.origin_ms
    parts.append(f"<h4>{c.t('analyze.h4.hurt')}</h4>")
    if group.top:
        parts.append(f"<p class=note>{c.t('analyze.hurt.note' if group.owned else 'analyze.hurt.note_unowned')}</p>")
        parts.append(hurt_table(group, c))
    else:
        parts.append(f"<p>{c.t('analyze.hurt.none')}</p>")
    parts.append(f"<h4>{c.t('analyze.h4.gantt')}</h4>")
    if group.gantt and group.gantt.intervals:
        parts.append(gantt_svg(group.gantt, group, colors, origin, f"{prefix}-gantt", c))
        parts.append(gantt_note(group.gantt, origin, c))
    else:
        parts.append(f"<p>{c.t('analyze.gantt.none')}</p>")
    if group.rebalances:
        parts.append(f"<h4>{c.t('analyze.h4.durations')}</h4>")
        parts.append(durations_svg(group, f"{prefix}-durations", c))
        parts.append(f"<h4>{c.t('analyze.h4.stw')}</h4>")
        if group.owned:
            parts.append(stop_the_world_svg(group, f"{prefix}-stw", c))
        else:
            parts.append(f"<p>{c.t('analyze.stw.unknown')}</p>")
    return "".join(parts)


def delivery_html(d: Delivery, prefix: str, c: Catalog | None = None) -> str:
    c = c or Catalog()
    order = ["once", "lost", "duplicated", "unknown"]
    keys = order + sorted(set(d.outcomes) - set(order))
    head = "".join(f"<th>{html.escape(outcome_text(k, c))}</th>" for k in keys)
    cells = "".join(
        f"<td class={'bad' if k in ('lost', 'duplicated') and d.outcomes.get(k) else 'n'}>{esc(d.outcomes.get(k, 0))}</td>"
        for k in keys)
    mode = html.escape(d.mode or c.t("analyze.delivery.unknown_mode"))
    parts = [f"<h3>{c.t('analyze.delivery.title', mode=mode)}</h3>",
             f"<p class=note>{c.t('analyze.delivery.note')}</p>",
             f"<table><thead><tr>{head}</tr></thead><tbody><tr>{cells}</tr></tbody></table>"]
    charts = []
    per_partition = c.t("analyze.delivery.per_partition")
    if any(p["lost"] or p["duplicated"] for p in d.partitions):
        cap = (c.t("analyze.delivery.cap", shown=len(d.partitions), total=f"{d.partitions_total:,}")
               if d.partitions_total > len(d.partitions) else "")
        charts.append(f"<div><h4>{per_partition}{cap}</h4>"
                      f"{delivery_partitions_svg(d, f'{prefix}-deliv-tp', c)}</div>")
    else:
        charts.append(f"<div><h4>{per_partition}</h4>"
                      f"<p class=ok>{c.t('analyze.delivery.clean')}</p></div>")
    if d.processed:
        charts.append(f"<div><h4>{c.t('analyze.delivery.processed')}</h4>{processed_svg(d, f'{prefix}-deliv-proc', c)}</div>")
    parts.append(f"<div class=pair>{''.join(charts)}</div>")
    return "".join(parts)


def outcome_text(outcome: str, c: Catalog) -> str:
    """A delivery outcome's word (deliveries.outcome): the catalogue's, else the outcome's own name."""
    key = f"analyze.outcome.{outcome}"
    return c.t(key) if c.has(key) else outcome


def malformed_html(run: Run, c: Catalog | None = None) -> str:
    c = c or Catalog()
    title = f"<h3>{c.t('analyze.malformed.title')}</h3>"
    total = (run.summary or {}).get("malformed_lines") or sum(n for _, n in run.malformed_files)
    if not total:
        return f"{title}<p class=ok>{c.t('analyze.malformed.none')}</p>"
    files = "".join(f"<tr><td>{html.escape(f or '')}</td><td class=n>{n:,}</td></tr>" for f, n in run.malformed_files)
    if run.malformed_file_count > len(run.malformed_files):
        more = c.t("analyze.malformed.more", count=f"{run.malformed_file_count - len(run.malformed_files):,}")
        files += f"<tr><td colspan=2>{more}</td></tr>"
    examples = "".join(f"<li>{html.escape(e.get('file') or '')}:<pre>{html.escape(e.get('line') or '')}</pre></li>"
                       for e in run.malformed_examples)
    return (f"{title}<p class=bad>{c.t('analyze.malformed.total', count=f'{total:,}')}</p>"
            f"<table><thead><tr><th>{c.t('analyze.malformed.file')}</th><th>{c.t('analyze.malformed.lines')}</th></tr>"
            f"</thead><tbody>{files}</tbody></table>"
            f"<p class=note>{c.t('analyze.malformed.examples', count=len(run.malformed_examples))}</p><ol>{examples}</ol>")


def run_html(run: Run, index: int, c: Catalog | None = None) -> str:
    c = c or Catalog()
    parts = [f"<section id='{anchor(run.run)}'><h2>{c.t('analyze.run', run=html.escape(run.run))}</h2>", headline(run, c)]
    if not run.groups:
        parts.append(f"<p>{c.t('analyze.run.no_groups')}</p>")
    colors = client_colors(i["client_id"] for g in run.groups if g.gantt for i in g.gantt.intervals)
    many = len(run.groups) > 1
    for j, group in enumerate(run.groups):
        parts.append(group_html(run, group, colors, f"r{index}g{j}", many, c))
    if run.delivery is not None:
        parts.append(delivery_html(run.delivery, f"r{index}", c))
    parts.append(malformed_html(run, c))
    parts.append("</section>")
    return "".join(parts)


def render(runs: list[Run], title: str, out: Path, missing: list[str], lang: str = "en") -> str:
    """The page, its words in `lang` (the catalogue's `analyze.*` texts; en and zh)."""
    c = Catalog(lang)
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<p class=note>{c.t('analyze.from', out=html.escape(str(out)), count=f'{len(runs):,}')}</p>"]
    if missing:
        body.append(f"<p class=cap>{c.t('analyze.missing', tables=html.escape(', '.join(missing)))}</p>")
    if not runs:
        body.append(f"<p>{c.t('analyze.no_runs')}</p>")
    else:
        if len(runs) > 1:
            body.append("<nav>" + "".join(f"<a href='#{anchor(r.run)}'>{html.escape(r.run)}</a>" for r in runs) + "</nav>")
        body.append(f"<h2>{c.t('analyze.h2.summary')}</h2>")
        body.append(summary_table(runs, c))
        body.append(f"<p class=note>{c.t('analyze.explain')}</p>")
        body.extend(run_html(r, i, c) for i, r in enumerate(runs))
    return (f"<!doctype html><html lang={lang}><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n")


def default_title(runs: list[Run], c: Catalog | None = None) -> str:
    c = c or Catalog()
    names = [r.run for r in runs]
    shown = ", ".join(names[:5]) + (c.t("analyze.title.more", count=len(names) - 5) if len(names) > 5 else "")
    return f"grouplab analyze: {shown}" if names else "grouplab analyze"


def write_report(spark: SparkSession, out_dir: str | Path, title: str | None = None, *,
                 max_gantt_rows: int = MAX_GANTT_ROWS, max_gantt_intervals: int = MAX_GANTT_INTERVALS,
                 lang: str = "en") -> Path:
    """Read the tables under `out_dir`, write `out_dir/report.html` (its words in `lang`), return its path."""
    out = Path(out_dir)
    frames, missing = load_tables(spark, out)
    runs = gather(spark, frames, max_gantt_rows, max_gantt_intervals)
    page = render(runs, title or default_title(runs, Catalog(lang)), out, missing, lang)
    path = out / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
