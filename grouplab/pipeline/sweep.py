"""`grouplab sweep`: many simulations as Spark tasks, then a comparison of assignors.

Cases are assignor × member count × seed. Each case is one `run_seed` of the scenario resized to
that many members with that one assignor; Spark runs them in parallel (one case per task by
default) and the per-seed metrics become a DataFrame. The scenario travels to the workers as its
TOML text, so an executor needs grouplab installed but not the scenario file.

The maths of the comparison (`summarize`) is DataFrame aggregation, so it stays the same whether a
sweep has twelve rows or twelve million; only the small summary comes back to the driver, for the
console table and the HTML report (`write_report`).
"""

from __future__ import annotations

import html
import math
import shlex
import threading
import time
import traceback
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BooleanType, DataType, DoubleType, IntegerType, LongType, MapType,
                               StringType, StructField, StructType)

from grouplab.pipeline.html import fmt, localized_svg
from grouplab.sim.scenario import Scenario
from grouplab.teach.catalog import Catalog

Case = tuple[str, int, int]  # (assignor, members, seed)

# One row per case: `result_row` (grouplab/sim/runner.py) plus what identifies the case and every
# rebalance's duration, so percentiles over a whole cell can be exact rather than a mean of p99s.
SEED_SCHEMA = StructType([
    StructField("scenario", StringType(), False),
    StructField("assignor", StringType(), False),
    StructField("members", IntegerType(), False),
    StructField("seed", LongType(), False),
    StructField("ok", BooleanType(), False),
    StructField("violation", StringType(), True),
    StructField("violation_detail", StringType(), True),
    StructField("events", LongType(), True),
    StructField("messages_sent", LongType(), True),
    StructField("messages_lost", LongType(), True),
    StructField("messages_duplicated", LongType(), True),
    StructField("faults", MapType(StringType(), LongType(), False), True),
    StructField("rebalances", LongType(), True),
    StructField("partitions_moved", LongType(), True),
    StructField("unowned_partition_s", DoubleType(), True),
    StructField("rebalance_p50_ms", DoubleType(), True),
    StructField("rebalance_p99_ms", DoubleType(), True),
    StructField("group_epochs", LongType(), True),
    StructField("epoch_causes", MapType(StringType(), LongType(), False), True),
    StructField("converge_p50_ms", DoubleType(), True),
    StructField("converge_p99_ms", DoubleType(), True),
    StructField("settle_ms", LongType(), True),
    StructField("imbalance", LongType(), True),
    StructField("virtual_ms", LongType(), True),
    StructField("produced", LongType(), True),
    StructField("processed", LongType(), True),
    StructField("committed", LongType(), True),
    StructField("lost", LongType(), True),
    StructField("duplicated", LongType(), True),
    StructField("duplicated_uncommitted", LongType(), True),
    StructField("rebalance_durations_ms", ArrayType(LongType(), False), True),
])

EXCEPTION = "exception"  # the `violation` of a case whose simulation raised

# (summary column, chart title, y axis) for the report's bar charts, in the order they are drawn.
CHART_METRICS: list[tuple[str, str, str]] = [
    ("rebalances_per_seed", "Rebalances per seed", "rebalances"),
    ("partitions_moved_per_seed", "Partitions moved per seed", "partitions"),
    ("unowned_partition_s_per_seed", "Unowned partition-seconds per seed", "partition-seconds"),
    ("imbalance_mean", "Final load imbalance (max − min partitions per member), mean over seeds", "partitions"),
    ("rebalance_p50_ms", "Rebalance duration p50, over every rebalance of the cell", "ms"),
    ("rebalance_p99_ms", "Rebalance duration p99, over every rebalance of the cell", "ms"),
]


# ----------------------------------------------------------------------------- the tasks


def run_case(scenario: Scenario, assignor: str, members: int, seed: int) -> dict[str, Any]:
    """One simulation as a flat row. A simulation that raises becomes an `exception` row instead of
    failing its Spark task: one bad case must not throw away a thousand good ones."""
    from grouplab.sim.runner import result_row, run_seed

    try:
        result = run_seed(scenario.with_members(members).with_assignors([assignor]), seed)
    except Exception as exc:  # noqa: BLE001 - recorded, not swallowed
        return exception_row(scenario.name, assignor, members, seed, exc)
    row = result_row(result)
    row.update(assignor=assignor, members=members, rebalance_durations_ms=list(result.stats.rebalance_durations_ms))
    return row


def exception_row(scenario_name: str, assignor: str, members: int, seed: int, exc: BaseException) -> dict[str, Any]:
    """The row of a case that raised: the error and its innermost frames, metrics null."""
    frames = "".join(traceback.format_exception(exc, limit=-3)).rstrip()
    return {"scenario": scenario_name, "assignor": assignor, "members": members, "seed": seed, "ok": False,
            "violation": EXCEPTION, "violation_detail": f"{type(exc).__name__}: {exc}\n{frames}"}


def _conform(value: Any, dtype: DataType) -> Any:
    """Python value -> what Spark's verifier accepts for `dtype` (an int where a double is due)."""
    if value is None:
        return None
    if isinstance(dtype, DoubleType):
        return float(value)
    if isinstance(dtype, (LongType, IntegerType)):
        return int(value)
    if isinstance(dtype, ArrayType):
        return [_conform(v, dtype.elementType) for v in value]
    if isinstance(dtype, MapType):
        return {k: _conform(v, dtype.valueType) for k, v in value.items()}
    return value


def to_record(row: dict[str, Any]) -> tuple:
    """A row dict as a tuple in SEED_SCHEMA's order (missing fields null)."""
    return tuple(_conform(row.get(f.name), f.dataType) for f in SEED_SCHEMA.fields)


def case_runner(scenario_text: str, scenario_name: str) -> Callable[[Iterable[Case]], Iterator[tuple]]:
    """The function a Spark partition runs: parse the scenario once, then run its cases in turn."""

    def run_partition(cases: Iterable[Case]) -> Iterator[tuple]:
        from grouplab.sim.scenario import scenario_from_text

        try:
            scenario = scenario_from_text(scenario_text, f"<{scenario_name}>", default_name=scenario_name)
        except Exception as exc:  # noqa: BLE001 - e.g. an executor's grouplab is older than the driver's
            for assignor, members, seed in cases:
                yield to_record(exception_row(scenario_name, assignor, members, seed, exc))
            return
        for assignor, members, seed in cases:
            yield to_record(run_case(scenario, assignor, members, seed))

    return run_partition


# ----------------------------------------------------------------------------- the job


def make_cases(assignors: list[str], sizes: list[int], seeds: list[int]) -> list[Case]:
    """Largest member counts first: Spark starts tasks in partition order, so the slow cases begin
    early instead of leaving one straggler at the end."""
    return [(a, m, s) for m in sorted(sizes, reverse=True) for a in assignors for s in seeds]


def task_count(cases: int, seeds_per_task: int) -> int:
    return max(1, math.ceil(cases / seeds_per_task))


def sweep(spark: SparkSession, scenario_text: str, assignors: list[str], sizes: list[int], seeds: list[int],
          scenario_name: str = "scenario", seeds_per_task: int = 1) -> DataFrame:
    """The per-seed DataFrame (lazy: the simulations run when it is written or collected).
    `seeds_per_task` cases share one Spark task; 1 spreads the load best, more cuts task overhead."""
    if seeds_per_task < 1:
        raise ValueError("seeds_per_task must be >= 1")
    cases = make_cases(assignors, sizes, seeds)
    rdd = spark.sparkContext.parallelize(cases, numSlices=task_count(len(cases), seeds_per_task))
    return spark.createDataFrame(rdd.mapPartitions(case_runner(scenario_text, scenario_name)), SEED_SCHEMA)


def write_seeds(df: DataFrame, path: Path) -> None:
    """Parquet, one directory per assignor and member count. The shuffle gathers each cell into one
    file (a sweep of 12,000 one-case tasks would otherwise write 12,000 tiny files); `coalesce` would
    be cheaper but would also shrink the simulations' own parallelism to that of the write."""
    (df.repartition("assignor", "members")
       .write.mode("overwrite").partitionBy("assignor", "members").parquet(str(path)))


def summarize(df: DataFrame) -> DataFrame:
    """One row per assignor × members. Means are over the seeds that produced metrics (an
    `exception` row has none); p50/p99 are exact, over every rebalance of the cell."""
    cell = ["assignor", "members"]
    violated = F.col("violation").isNotNull()
    totals = df.groupBy(*cell).agg(
        F.count(F.lit(1)).alias("seeds"),
        F.sum("rebalances").alias("rebalances"),
        F.avg("rebalances").alias("rebalances_per_seed"),
        F.sum("partitions_moved").alias("partitions_moved"),
        F.avg("partitions_moved").alias("partitions_moved_per_seed"),
        F.sum("unowned_partition_s").alias("unowned_partition_s"),
        F.avg("unowned_partition_s").alias("unowned_partition_s_per_seed"),
        F.avg("imbalance").alias("imbalance_mean"),
        F.max("imbalance").alias("imbalance_max"),
        F.count(F.when(violated, 1)).alias("violations"),
        F.array_sort(F.collect_list(F.when(violated, F.col("seed")))).alias("violating_seeds"),
        F.sum("events").alias("events"),
    )
    durations = (df.select(*cell, F.explode("rebalance_durations_ms").alias("ms"))
                   .groupBy(*cell)
                   .agg(F.percentile("ms", 0.5).alias("rebalance_p50_ms"),
                        F.percentile("ms", 0.99).alias("rebalance_p99_ms")))
    return totals.join(durations, cell, "left").orderBy("members", "assignor")


def violations(df: DataFrame) -> DataFrame:
    """The failed cases, for the report and the console (few, if the protocol is right)."""
    return (df.where(F.col("violation").isNotNull())
              .select("assignor", "members", "seed", "violation", "violation_detail")
              .orderBy("members", "assignor", "seed"))


# ----------------------------------------------------------------------------- progress


def task_counts(tracker: Any, group: str) -> tuple[int, int]:
    """(completed, total) tasks over the stages of the job group's jobs that have started. A stage
    that never starts is left out: with adaptive execution the write job lists the simulations' map
    stage again as a skipped copy under a new id, which would otherwise double the total."""
    completed = total = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in (job.stageIds if job is not None else []):
            stage = tracker.getStageInfo(stage_id)
            if stage is None or not (stage.numActiveTasks or stage.numCompletedTasks or stage.numFailedTasks):
                continue
            completed += stage.numCompletedTasks
            total += stage.numTasks
    return completed, total


@contextmanager
def job_progress(spark: SparkSession, on_update: Callable[[int, int], None], expected_tasks: int = 0,
                 interval_s: float = 0.25) -> Iterator[None]:
    """Run the body's Spark jobs in a job group of their own, and call `on_update(completed, total)`
    from a background thread that polls the status tracker (total is at least `expected_tasks`, so
    the bar has its length before the first task starts). The thread is stopped and joined on any
    exit, so an error or Ctrl-C never leaves it polling a stopped context."""
    sc = spark.sparkContext
    group = f"grouplab-sweep-{uuid.uuid4().hex[:12]}"
    sc.setJobGroup(group, "grouplab sweep")
    stop = threading.Event()

    def report() -> None:
        completed, total = task_counts(sc.statusTracker(), group)
        on_update(completed, max(total, expected_tasks))

    def poll() -> None:
        while not stop.wait(interval_s):
            try:
                report()
            except Exception:  # noqa: BLE001 - a display must not outlive or break the job
                return

    thread = threading.Thread(target=poll, name="grouplab-sweep-progress", daemon=True)
    thread.start()
    try:
        yield
        stop.set()
        thread.join()
        report()
    finally:
        stop.set()
        thread.join()
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(key, None)  # type: ignore[arg-type]  # None removes it


# ----------------------------------------------------------------------------- the whole command


@dataclass
class SweepResult:
    seeds_path: Path
    summary_path: Path
    report_path: Path
    summary: list[dict[str, Any]]
    violations: list[dict[str, Any]]
    cases: int
    tasks: int
    elapsed_s: float


def run_sweep(spark: SparkSession, scenario_text: str, scenario_name: str, scenario_arg: str,
              assignors: list[str], sizes: list[int], seeds: list[int], out: Path, seeds_per_task: int = 1,
              on_progress: Callable[[int, int], None] | None = None, lang: str = "en") -> SweepResult:
    """Simulate and write OUT/seeds; summarize what was written (reading it back, so the
    simulations run once) into OUT/summary; write OUT/report.html."""
    started = time.monotonic()
    cases = len(assignors) * len(sizes) * len(seeds)
    tasks = task_count(cases, seeds_per_task)
    df = sweep(spark, scenario_text, assignors, sizes, seeds, scenario_name, seeds_per_task)
    with job_progress(spark, on_progress or (lambda completed, total: None), expected_tasks=tasks):
        write_seeds(df, out / "seeds")
    written = spark.read.parquet(str(out / "seeds"))
    summarize(written).coalesce(1).write.mode("overwrite").parquet(str(out / "summary"))
    order = {a: i for i, a in enumerate(assignors)}
    summary = sorted((r.asDict() for r in spark.read.parquet(str(out / "summary")).collect()),
                     key=lambda r: (r["members"], order.get(r["assignor"], len(order)), r["assignor"]))
    failed = [r.asDict() for r in violations(written).collect()]
    elapsed = time.monotonic() - started
    write_report(out / "report.html", summary, failed, scenario_name=scenario_name, scenario_arg=scenario_arg,
                 assignors=assignors, sizes=sorted(sizes), seeds=seeds, elapsed_s=elapsed, lang=lang)
    return SweepResult(out / "seeds", out / "summary", out / "report.html", summary, failed, cases, tasks, elapsed)


# ----------------------------------------------------------------------------- the report


def replay_command(scenario_arg: str, assignor: str, members: int, seed: int, scenario_name: str) -> str:
    """The `grouplab simulate` line that reruns one case with its event log."""
    run_dir = f"runs/{scenario_name}-{assignor}-{members}-seed-{seed}"
    return " ".join(shlex.quote(p) for p in ["grouplab", "simulate", "--scenario", scenario_arg, "--members",
                                             str(members), "--assignor", assignor, "--seed", str(seed),
                                             "--run-dir", run_dir])


def seeds_label(seeds: list[int], c: Catalog | None = None) -> str:
    """`1-1000` for a contiguous range, else the count (the report's subtitle)."""
    ordered = sorted(set(seeds))
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}" if len(ordered) > 1 else str(ordered[0])
    return (c or Catalog()).t("sweep.seeds", count=len(ordered))


SUMMARY_COLUMNS: list[tuple[str, str]] = [
    ("assignor", "assignor"), ("members", "members"), ("seeds", "seeds"),
    ("rebalances_per_seed", "rebalances/seed"), ("partitions_moved_per_seed", "moved/seed"),
    ("unowned_partition_s_per_seed", "unowned s/seed"), ("imbalance_mean", "imbalance mean"),
    ("imbalance_max", "imbalance max"), ("rebalance_p50_ms", "p50 ms"), ("rebalance_p99_ms", "p99 ms"),
    ("events", "events"), ("violations", "violations"),
]


def bar_chart_svg(summary: list[dict[str, Any]], metric: str, ylabel: str, assignors: list[str],
                  sizes: list[int], c: Catalog | None = None) -> str:
    """Grouped bars: one group per member count, the assignors side by side. Matplotlib's object
    API (no pyplot, no GUI backend), rendered to SVG text for inlining."""
    c = c or Catalog()
    return localized_svg(lambda: _bar_chart(summary, metric, ylabel, assignors, sizes, c), c.lang, metric)


def _bar_chart(summary: list[dict[str, Any]], metric: str, ylabel: str, assignors: list[str],
               sizes: list[int], c: Catalog) -> Any:
    from matplotlib.figure import Figure

    value = {(r["assignor"], r["members"]): r.get(metric) for r in summary}
    fig = Figure(figsize=(7.5, 3.2))
    ax = fig.add_subplot()
    width = 0.8 / max(len(assignors), 1)
    for i, assignor in enumerate(assignors):
        ys = [value.get((assignor, m)) for m in sizes]
        xs = [k + (i - (len(assignors) - 1) / 2) * width for k in range(len(sizes))]
        ax.bar(xs, [math.nan if y is None else y for y in ys], width, label=assignor)
    ax.set_xticks(range(len(sizes)), [c.t("sweep.members", count=m) for m in sizes])
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncols=min(len(assignors), 4), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def cell_class(key: str, value: Any) -> str:
    """Names left, numbers right, a non-zero violation count red."""
    if key == "assignor":
        return "t"
    return "bad" if key == "violations" and value else "n"


def summary_table_html(summary: list[dict[str, Any]], c: Catalog | None = None) -> str:
    c = c or Catalog()
    head = "".join(f"<th>{html.escape(c.t(f'sweep.col.{key}'))}</th>" for key, _ in SUMMARY_COLUMNS)
    rows = []
    for r in summary:
        cells = "".join(f"<td class={cell_class(key, r.get(key))}>{html.escape(fmt(r.get(key)))}</td>"
                        for key, _ in SUMMARY_COLUMNS)
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def violations_html(failed: list[dict[str, Any]], scenario_arg: str, scenario_name: str, limit: int = 200,
                    c: Catalog | None = None) -> str:
    c = c or Catalog()
    if not failed:
        return f"<p class=ok>{html.escape(c.t('sweep.no_violations'))}</p>"
    items = []
    for v in failed[:limit]:
        cmd = replay_command(scenario_arg, v["assignor"], v["members"], v["seed"], scenario_name)
        detail = (v.get("violation_detail") or "").strip()
        case = c.t("sweep.case", assignor=f"<b>{html.escape(v['assignor'])}</b>", members=v["members"], seed=v["seed"])
        items.append(f"<li>{case}: "
                     f"<code>{html.escape(v['violation'] or '')}</code><pre>{html.escape(detail)}</pre>"
                     f"{c.t('sweep.replay', command=f'<code>{html.escape(cmd)}</code>')}</li>")
    more = f"<p>{html.escape(c.t('sweep.more', count=len(failed) - limit))}</p>" if len(failed) > limit else ""
    return f"<p class=bad>{html.escape(c.t('sweep.failed', count=len(failed)))}</p><ol>{''.join(items)}</ol>{more}"


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;font-size:0.9em}th,td{border:1px solid #ccc;padding:0.25em 0.6em}
th{background:#f3f3f3}td.n{text-align:right}td.bad{text-align:right;color:#b00;font-weight:bold}
.bad{color:#b00}.ok{color:#070}pre{white-space:pre-wrap;font-size:0.85em;background:#f7f7f7;padding:0.4em}
svg{max-width:100%;height:auto}"""


def write_report(path: Path, summary: list[dict[str, Any]], failed: list[dict[str, Any]], *, scenario_name: str,
                 scenario_arg: str, assignors: list[str], sizes: list[int], seeds: list[int],
                 elapsed_s: float | None = None, lang: str = "en") -> None:
    """One self-contained HTML file (inline SVG, inline CSS, no scripts): opens anywhere, mails well.
    Its words in `lang` (the catalogue's `sweep.*` texts)."""
    c = Catalog(lang)
    charts = "".join(f"<h3>{html.escape(c.t(f'sweep.chart.{key}'))}</h3>"
                     f"{bar_chart_svg(summary, key, c.t(f'sweep.unit.{unit}'), assignors, sizes, c)}"
                     for key, _title, unit in CHART_METRICS)
    took = c.t("sweep.took", s=f"{elapsed_s:.1f}") if elapsed_s is not None else ""
    subtitle = c.t("sweep.subtitle", assignors=", ".join(assignors), members=", ".join(map(str, sizes)),
                   seeds=seeds_label(seeds, c), count=f"{len(assignors) * len(sizes) * len(seeds):,}", took=took)
    opening = "<html>" if lang == "en" else f"<html lang={lang}>"
    page = (f"<!doctype html>{opening}<head><meta charset=utf-8><title>grouplab sweep: {html.escape(scenario_name)}"
            f"</title><style>{STYLE}</style></head><body><h1>grouplab sweep: {html.escape(scenario_name)}</h1>"
            f"<p>{html.escape(subtitle)}</p><h2>{c.t('sweep.h.summary')}</h2>{summary_table_html(summary, c)}"
            f"<h2>{c.t('sweep.h.violations')}</h2>{violations_html(failed, scenario_arg, scenario_name, c=c)}"
            f"<h2>{c.t('sweep.h.charts')}</h2>{charts}</body></html>\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
