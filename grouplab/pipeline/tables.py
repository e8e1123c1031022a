"""From event-log lines to the analysis tables (docs/pipeline.md), with DataFrame operations only.

Each function takes DataFrames and returns one; nothing here collects rows to the driver, so the
same code runs on a laptop and on a cluster. Windows are partitioned as finely as the question
allows (per partition of a member, per group, ...) so that no single task sees a whole run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from pyspark.sql import types as T

from grouplab.costs import COST_EVENTS
from grouplab.pipeline.schema import EVENT_SCHEMA, NON_MEMBER_NODES, REQUIRED

RUN = ["run"]
GROUP = ["run", "group_id"]


class NoEventLogs(ValueError):
    """A run directory that does not exist or holds no `*.jsonl` files."""


# ----------------------------------------------------------------------------- reading


@dataclass
class EventLogs:
    events: DataFrame  # one row per valid line: run, file, seq, then EVENT_SCHEMA's fields
    malformed: DataFrame  # run, file, line (the first 500 characters)


def run_labels(run_dirs: Iterable[str]) -> dict[str, str]:
    """Run directory -> its label in the tables: the directory's name, or its path when two
    inputs share a name."""
    dirs = [str(d).rstrip("/") for d in run_dirs]
    names = [Path(d).name for d in dirs]
    return {d: (Path(d).name if names.count(Path(d).name) == 1 else d) for d in dirs}


def _input_files(run_dir: str) -> list[str]:
    if "://" in run_dir:  # hdfs://, s3a://, ...: let Spark list it
        return [run_dir.rstrip("/") + "/*.jsonl"]
    path = Path(run_dir)
    if not path.is_dir():
        raise NoEventLogs(f"{run_dir}: no such run directory")
    # absolute(), not resolve(): a run reached through a link is named by the link, as given.
    files = sorted(str(p.absolute()) for p in path.glob("*.jsonl"))
    if not files:
        raise NoEventLogs(f"{run_dir}: no *.jsonl event logs in it (grouplab run/simulate --run-dir writes them)")
    return files


PARTITION_BYTES = 128 << 20  # input bytes per partition of the parsed events, for big inputs


def _size(files: list[str]) -> int:
    """Bytes of the local input files (0 for URIs, which Spark lists itself)."""
    return sum(Path(f).stat().st_size for f in files if "://" not in f)


def input_files(run_dirs: Iterable[str]) -> list[str]:
    """The event-log files of the run directories; NoEventLogs for a missing or empty one."""
    return [f for d in run_dirs for f in _input_files(str(d))]


def parse_event_logs(spark: SparkSession, run_dirs: list[str]) -> DataFrame:
    """Every `*.jsonl` line of every run directory, parsed once with the explicit schema: `run`,
    `file`, `seq`, `valid`, `line` (the raw text, kept only for malformed lines), then the
    schema's fields. Persist this one DataFrame and derive both halves with `split_parsed`."""
    labels = run_labels(run_dirs)
    files = input_files(labels)
    text = spark.read.text(files)
    # Spark packs small files into input partitions as if each cost 4 MB to open: 3,876 files of
    # 58 KB made 122 partitions, so every later job over the persisted events ran 122 tasks, and
    # task overhead, not work, set the pace (1M events: 112 jobs, 13,000 tasks). A few partitions
    # per core, more only for big inputs, is what the work needs.
    target = max(2 * spark.sparkContext.defaultParallelism, math.ceil(_size(files) / PARTITION_BYTES))
    if text.rdd.getNumPartitions() > target:
        text = text.coalesce(target)
    raw = text.select(
        "value",
        F.col("_metadata.file_path").alias("file_path"),
        F.col("_metadata.file_name").alias("file"),
        # Read order within a file: ties on ts_ms are broken by it (one step's lines share ts_ms).
        F.monotonically_increasing_id().alias("seq"),
    )
    run_dir = F.url_decode(F.regexp_extract("file_path", r"^(?:[a-z0-9+.-]+:)?(?://[^/]*)?(.*)/[^/]*$", 1))
    by_name = len(set(labels.values())) == len(labels) and all(v == Path(k).name for k, v in labels.items())
    run = F.regexp_extract(run_dir, r"([^/]+)$", 1) if by_name else run_dir
    parsed = raw.select(run.alias("run"), "file", "seq", "value",
                        F.from_json("value", EVENT_SCHEMA, {"mode": "PERMISSIVE"}).alias("j"))
    valid = F.col("j").isNotNull()
    for name in REQUIRED:
        valid = valid & F.col(f"j.{name}").isNotNull()
    # The lines the cost fold reads keep their text: it parses them itself (grouplab/runlog.py),
    # exactly as `grouplab plot` does (see partition_costs).
    cost_line = F.when(valid & F.col("j.event").isin(*sorted(COST_EVENTS)), F.col("value"))
    return parsed.select("run", "file", "seq", valid.alias("valid"),
                         F.when(~valid, F.substring("value", 1, 500)).alias("line"), cost_line.alias("raw"), "j.*")


def split_parsed(parsed: DataFrame) -> EventLogs:
    """The valid lines as events, the others as the malformed table."""
    return EventLogs(parsed.where("valid").drop("valid", "line"),
                     parsed.where(~F.col("valid")).select("run", "file", "line"))


def read_event_logs(spark: SparkSession, run_dirs: list[str]) -> EventLogs:
    """Every `*.jsonl` file of every run directory, parsed with the explicit schema."""
    return split_parsed(parse_event_logs(spark, run_dirs))


def split_appended_runs(events: DataFrame) -> DataFrame:
    """A run directory used twice holds two runs (files are appended to, docs/events.md §1): a
    coordinator that started without a data directory starts from nothing, so its generations
    start again at 0. Those runs are labelled `run#2`, `run#3`, ... from the time of that start.
    The starts are a handful of rows: they are collected, and the label is a plain expression."""
    starts = (events.where((F.col("event") == "coordinator_started") & F.col("data_dir").isNull())
              .groupBy("run").agg(F.sort_array(F.collect_list("ts_ms")).alias("starts"))
              .where(F.size("starts") > 1).collect())
    if not starts:
        return events
    label = F.col("run")
    for row in starts:
        for n, from_ms in reversed(list(enumerate(row["starts"], start=1))[1:]):
            label = F.when((F.col("run") == row["run"]) & (F.col("ts_ms") >= from_ms),
                           F.lit(f"{row['run']}#{n}")).otherwise(label)
    return events.withColumn("run", label)


# ----------------------------------------------------------------------------- helpers


def _coordinator(events: DataFrame, name: str) -> DataFrame:
    return events.where((F.col("node") == "coordinator") & (F.col("event") == name))


def _explode_pairs(df: DataFrame, column: str, *keep: str) -> DataFrame:
    """One row per [topic, partition] pair of `column`, as topic (str) and partition (int)."""
    return (df.select(*keep, F.explode(column).alias("_tp"))
            .select(*keep, F.col("_tp")[0].alias("topic"), F.col("_tp")[1].cast("int").alias("partition")))


def _log_end(events: DataFrame) -> DataFrame:
    return events.groupBy("run").agg(F.max("ts_ms").alias("log_end_ms"))


def _topic_lives(events: DataFrame, rows: DataFrame, ts: str) -> DataFrame:
    """`rows` (with `run`, `topic` and the time column `ts`), each with what the topic's deletions
    (DeleteTopics: `topic_deleted`, docs/events.md §4.2) say at its time: `deleted_ms`, the first
    one after it (null: none), `while_deleted` (the topic was deleted then and not created again:
    the row names a partition that does not exist) and `topic_incarnation` (the deletions up to
    then: a topic made again under the name has new partitions). A coordinator line comes first at
    the same `ts_ms` (docs/events.md §6), so a deletion at the row's time is before it. The
    deletions and creations are a handful per run: gathered per topic into two small arrays and
    broadcast, so the rows are neither shuffled nor grouped."""
    none = F.lit(None).cast("long")
    deletions = _coordinator(events, "topic_deleted").select("run", "topic", F.col("ts_ms").alias("_d"), none.alias("_c"))
    creations = _coordinator(events, "topic_created").select("run", "topic", none.alias("_d"), F.col("ts_ms").alias("_c"))
    lives = (deletions.unionByName(creations).groupBy("run", "topic")
             .agg(F.collect_list("_d").alias("_dels"), F.collect_list("_c").alias("_made")))  # lists skip nulls
    at = F.col(ts)
    dels, made = F.coalesce("_dels", F.array().cast("array<long>")), F.coalesce("_made", F.array().cast("array<long>"))
    last_deleted = F.array_max(F.filter(dels, lambda d: d <= at))
    last_made = F.array_max(F.filter(made, lambda c: c <= at))
    gone = last_deleted.isNotNull() & (last_made.isNull() | (last_made < last_deleted))
    return (rows.join(F.broadcast(lives), on=["run", "topic"], how="left")
            .withColumn("deleted_ms", F.array_min(F.filter(dels, lambda d: d > at)))
            .withColumn("while_deleted", F.coalesce(gone, F.lit(False)))
            .withColumn("topic_incarnation", F.size(F.filter(dels, lambda d: d <= at)))
            .drop("_dels", "_made"))


def _next_non_null(value: Column, partition: list[str], order: list[str]) -> Column:
    """The nearest later non-null `value` in the partition: `last(ignorenulls)` over the rows
    after this one, in reverse order, so the frame grows by one row at a time (linear, where a
    frame reaching to the end of the partition would be quadratic)."""
    w = Window.partitionBy(*partition).orderBy(*[F.col(c).desc() for c in order]).rowsBetween(
        Window.unboundedPreceding, -1)
    return F.last(value, ignorenulls=True).over(w)


# ----------------------------------------------------------------------------- coordinator view


def rebalance_phases(events: DataFrame) -> DataFrame:
    """One row per rebalance of a group, keyed by the generation it formed: start (the first
    `rebalance_started` of the ending generation), join end (`generation_completed`) and end
    (`group_stable`), from the coordinator's lines."""
    started = (_coordinator(events, "rebalance_started").groupBy(*GROUP, "generation_id").agg(
        F.min("ts_ms").alias("start_ms"), F.min_by("trigger", "ts_ms").alias("trigger"),
        F.min_by("cause", "ts_ms").alias("cause"), F.min_by(F.size("members"), "ts_ms").alias("members_before"))
        .select(*GROUP, (F.col("generation_id") + 1).alias("generation"), "start_ms", "trigger", "cause", "members_before"))
    # A coordinator that lost an unpersisted generation forms it again: the later one holds.
    completed = (_coordinator(events, "generation_completed").groupBy(*GROUP, F.col("generation_id").alias("generation"))
                 .agg(F.max("ts_ms").alias("join_end_ms"), F.max_by("protocol_name", "ts_ms").alias("protocol"),
                      F.max_by("leader", "ts_ms").alias("leader"), F.max_by("members", "ts_ms").alias("member_ids"),
                      F.max_by("state", "ts_ms").alias("formed_state")))
    stable = (_coordinator(events, "group_stable").groupBy(*GROUP, F.col("generation_id").alias("generation"))
              .agg(F.max("ts_ms").alias("end_ms")))
    phases = started.join(completed, on=[*GROUP, "generation"], how="full").join(stable, on=[*GROUP, "generation"], how="left")
    next_start = F.lead("start_ms").over(Window.partitionBy(*GROUP).orderBy("generation"))
    outcome = (F.when(F.col("end_ms").isNotNull(), "stable")
               .when(F.col("formed_state") == "Empty", "empty")
               .when(F.col("join_end_ms").isNotNull() & F.col("next_start_ms").isNotNull(), "interrupted")
               .otherwise("incomplete"))
    return (phases.withColumn("next_start_ms", next_start).withColumn("outcome", outcome)
            .select(*GROUP, "generation", "trigger", F.coalesce("cause", F.lit("unknown")).alias("cause"),
                    "start_ms", "join_end_ms", "end_ms",
                    (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
                    (F.col("join_end_ms") - F.col("start_ms")).alias("join_ms"),
                    (F.col("end_ms") - F.col("join_end_ms")).alias("sync_ms"),
                    "members_before", F.coalesce(F.size("member_ids"), F.lit(0)).alias("members"), "member_ids",
                    "protocol", "leader", "outcome"))


def identities(events: DataFrame) -> DataFrame:
    """member_id -> identity: the static `group.instance.id` where it has one (a restarted static
    member is the same owner under a new id), else the member id."""
    joined = _coordinator(events, "member_joined").select(*GROUP, "member_id", "group_instance_id")
    replaced = _coordinator(events, "static_member_replaced").select(*GROUP, "member_id", "group_instance_id")
    return (joined.unionByName(replaced).groupBy(*GROUP, "member_id")
            .agg(F.max("group_instance_id").alias("group_instance_id"))
            .withColumn("identity", F.coalesce("group_instance_id", "member_id")))


def assignments(events: DataFrame, phases: DataFrame) -> DataFrame:
    """Each stable generation's assignment, one row per (member, partition): in force `from_ms`
    (its `group_stable`) `to_ms` (the next rebalance's start, or its topic's deletion if that
    comes first; null while in force at the log's end). A static member replaced within the
    generation hands its rows to its new id."""
    stable = _coordinator(events, "group_stable").withColumn("_last", F.max("ts_ms").over(
        Window.partitionBy(*GROUP, "generation_id")))
    stable = stable.where(F.col("ts_ms") == F.col("_last"))
    per_member = stable.select(*GROUP, F.col("generation_id").alias("generation"), F.col("ts_ms").alias("from_ms"),
                               "clients", "protocol_name", F.explode("assignments").alias("member_id", "pairs"))
    rows = (_explode_pairs(per_member, "pairs", *GROUP, "generation", "member_id", "from_ms", "clients", "protocol_name")
            .withColumn("client_id", F.col("clients")[F.col("member_id")]).drop("clients"))
    ends = phases.select(*GROUP, (F.col("generation") - 1).alias("generation"), F.col("start_ms").alias("to_ms"))
    rows = rows.join(ends, on=[*GROUP, "generation"], how="left")
    replaced = _coordinator(events, "static_member_replaced").select(
        *GROUP, F.col("generation_id").alias("generation"), F.col("old_member_id").alias("member_id"),
        F.col("member_id").alias("new_member_id"), F.col("ts_ms").alias("replaced_ms"))
    rows = rows.join(replaced, on=[*GROUP, "generation", "member_id"], how="left")
    kept = rows.select(*GROUP, "generation", "member_id", "client_id", "topic", "partition", "from_ms",
                       F.coalesce("replaced_ms", "to_ms").alias("to_ms"), F.col("protocol_name").alias("protocol"),
                       F.lit(False).alias("handed_over"))
    handed = rows.where(F.col("new_member_id").isNotNull()).select(
        *GROUP, "generation", F.col("new_member_id").alias("member_id"), "client_id", "topic", "partition",
        F.col("replaced_ms").alias("from_ms"), "to_ms", F.col("protocol_name").alias("protocol"),
        F.lit(True).alias("handed_over"))
    # A deleted partition stops existing: the assignment of it ends there (Spark's least skips nulls).
    out = _topic_lives(events, kept.unionByName(handed), "from_ms")
    return out.withColumn("to_ms", F.least("to_ms", "deleted_ms")).drop("deleted_ms", "while_deleted", "topic_incarnation")


def movements(events: DataFrame, assigned: DataFrame, phases: DataFrame, ids: DataFrame) -> DataFrame:
    """Partitions whose owner changed between consecutive stable generations. `withheld`: one or
    more stable generations in between gave it to nobody (cooperative rebalancing's two steps).
    `reason`: `owner_gone` if the previous owner is not in the new generation, else `rebalanced`
    (moved away from a member that stayed). `cause`: the new generation's rebalance cause. A topic
    deleted and made again has new partitions: nothing moves from their old owners."""
    owners = (assigned.where(~F.col("handed_over"))
              .join(ids.select(*GROUP, "member_id", "identity"), on=[*GROUP, "member_id"], how="left")
              .withColumn("identity", F.coalesce("identity", "member_id")))
    stable_rank = (phases.where(F.col("outcome") == "stable").select(*GROUP, "generation")
                   .withColumn("rank", F.row_number().over(Window.partitionBy(*GROUP).orderBy("generation"))))
    owners = _topic_lives(events, owners.join(stable_rank, on=[*GROUP, "generation"], how="left"), "from_ms")
    w = Window.partitionBy(*GROUP, "topic", "topic_incarnation", "partition").orderBy("generation")
    prev = (owners.withColumn("from_member", F.lag("member_id").over(w)).withColumn("from_client", F.lag("client_id").over(w))
            .withColumn("from_identity", F.lag("identity").over(w)).withColumn("from_generation", F.lag("generation").over(w))
            .withColumn("prev_rank", F.lag("rank").over(w)))
    moved = prev.where(F.col("from_identity").isNotNull() & (F.col("from_identity") != F.col("identity")))
    present = (assigned.select(*GROUP, "generation", "member_id").distinct()
               .unionByName(phases.select(*GROUP, "generation", F.explode("member_ids").alias("member_id")))
               .join(ids.select(*GROUP, "member_id", "identity"), on=[*GROUP, "member_id"], how="left")
               .select(*GROUP, "generation", F.coalesce("identity", "member_id").alias("from_identity"))
               .distinct().withColumn("still_member", F.lit(True)))
    return (moved.join(present, on=[*GROUP, "generation", "from_identity"], how="left")
            .join(phases.select(*GROUP, "generation", "cause"), on=[*GROUP, "generation"], how="left")
            .select(*GROUP, "generation", "topic", "partition", "from_member", "from_client",
                    F.col("member_id").alias("to_member"), F.col("client_id").alias("to_client"), "from_generation",
                    ((F.col("rank") - F.col("prev_rank")) > 1).alias("withheld"),
                    F.when(F.col("still_member"), "rebalanced").otherwise("owner_gone").alias("reason"),
                    F.coalesce("cause", F.lit("unknown")).alias("cause")))


def member_sessions(events: DataFrame, assigned: DataFrame, phases: DataFrame) -> DataFrame:
    """One row per member id: when it joined the group (or took a static instance's place, or
    was restored by a restarted coordinator), when and why it stopped being a member, and what it
    did in between."""
    joined = _coordinator(events, "member_joined").select(
        *GROUP, "member_id", "client_id", "group_instance_id", F.col("ts_ms").alias("joined_ms"),
        F.lit("joined").alias("how"))
    took_over = _coordinator(events, "static_member_replaced").select(
        *GROUP, "member_id", F.lit(None).cast("string").alias("client_id"), "group_instance_id",
        F.col("ts_ms").alias("joined_ms"), F.lit("replaced_static").alias("how"))
    restored = _coordinator(events, "group_loaded").select(
        *GROUP, F.explode("members").alias("member_id"), F.lit(None).cast("string").alias("client_id"),
        F.lit(None).cast("string").alias("group_instance_id"), F.col("ts_ms").alias("joined_ms"),
        F.lit("restored").alias("how"))
    starts = (joined.unionByName(took_over).unionByName(restored).groupBy(*GROUP, "member_id")
              .agg(F.min("joined_ms").alias("joined_ms"), F.min_by("how", "joined_ms").alias("how"),
                   F.max("client_id").alias("client_id"), F.max("group_instance_id").alias("group_instance_id")))
    removed = _coordinator(events, "member_removed").groupBy(*GROUP, "member_id").agg(
        F.min("ts_ms").alias("left_ms"), F.min_by("reason", "ts_ms").alias("end_reason"))
    fenced = _coordinator(events, "static_member_replaced").select(
        *GROUP, F.col("old_member_id").alias("member_id"), F.col("ts_ms").alias("fenced_ms"))
    gens = (assigned.select(*GROUP, "generation", "member_id", "client_id").unionByName(
        phases.select(*GROUP, "generation", F.explode("member_ids").alias("member_id"),
                      F.lit(None).cast("string").alias("client_id")))
        .groupBy(*GROUP, "member_id").agg(
            F.countDistinct("generation").alias("generations"), F.min("generation").alias("first_generation"),
            F.max("generation").alias("last_generation"), F.max("client_id").alias("assigned_client")))
    sizes = (assigned.where(~F.col("handed_over")).groupBy(*GROUP, "generation", "member_id").count()
             .groupBy(*GROUP, "member_id").agg(F.max("count").alias("max_partitions")))
    led = (phases.where(F.col("leader").isNotNull()).groupBy(*GROUP, F.col("leader").alias("member_id"))
           .agg(F.count("*").alias("led_generations")))
    # The coordinator's word for every member, grouplab's or a real Kafka client (which keeps no log).
    commits = (_coordinator(events, "offsets_committed").where(F.col("member_id").isNotNull())
               .groupBy(*GROUP, "member_id").agg(F.count("*").alias("commits"), F.max("ts_ms").alias("last_commit_ms")))
    ends = F.least("left_ms", "fenced_ms")
    out = (starts.join(removed, on=[*GROUP, "member_id"], how="left").join(fenced, on=[*GROUP, "member_id"], how="left")
           .join(gens, on=[*GROUP, "member_id"], how="left").join(sizes, on=[*GROUP, "member_id"], how="left")
           .join(led, on=[*GROUP, "member_id"], how="left").join(commits, on=[*GROUP, "member_id"], how="left")
           .join(_log_end(events), on=RUN, how="left"))
    return out.select(
        *GROUP, "member_id", F.coalesce("client_id", "assigned_client").alias("client_id"), "group_instance_id",
        "how", "joined_ms", ends.alias("left_ms"),
        F.when(F.col("fenced_ms").isNotNull() & (F.col("left_ms").isNull() | (F.col("fenced_ms") < F.col("left_ms"))),
               "replaced").otherwise(F.col("end_reason")).alias("end_reason"),
        (F.coalesce(ends, F.col("log_end_ms")) - F.col("joined_ms")).alias("duration_ms"),
        F.coalesce("generations", F.lit(0)).alias("generations"), "first_generation", "last_generation",
        F.coalesce("led_generations", F.lit(0)).alias("led_generations"),
        F.coalesce("max_partitions", F.lit(0)).alias("max_partitions"),
        F.coalesce("commits", F.lit(0)).alias("commits"), "last_commit_ms")


# ----------------------------------------------------------------------------- member view


def ownership(events: DataFrame) -> DataFrame:
    """What each consumer process held, and when (docs/events.md §6, "Holding"): one interval per
    partition from its `partitions_assigned` to its `partitions_revoked` / `partitions_lost`, the
    coordinator removing or fencing its member id, the same partition assigned to the same client
    again, its topic's deletion, or the end of the log. A process that crashed or hung still holds:
    the group counts its partitions as its own until the coordinator removes it (`partition_time`
    says when they were not consumed). A partition assigned while its topic is deleted does not
    exist: no interval. The same rules as grouplab/costs.py's holdings, which the tests hold this to."""
    member = events.where(~F.col("node").isin(*NON_MEMBER_NODES))
    starts = (_explode_pairs(member.where(F.col("event") == "partitions_assigned"), "partitions",
                             "run", "group_id", "node", "member_id", "generation_id", "ts_ms", "seq")
              .withColumn("kind", F.lit("start")))
    end_kind = (F.when(F.col("event") == "partitions_lost", "lost")
                .when(F.col("reason") == "closing", "closed").otherwise("revoked"))
    ends = (_explode_pairs(member.where(F.col("event").isin("partitions_revoked", "partitions_lost"))
                           .withColumn("end_kind", end_kind), "partitions",
                           "run", "group_id", "node", "member_id", "generation_id", "ts_ms", "seq", "end_kind")
            .withColumn("kind", F.lit("end")))
    stream = starts.unionByName(ends, allowMissingColumns=True)
    order = ["ts_ms", "seq"]
    per_tp = ["run", "node", "topic", "partition"]
    is_end = F.col("kind") == "end"
    stream = (stream
              .withColumn("next_end_ms", _next_non_null(F.when(is_end, F.col("ts_ms")), per_tp, order))
              .withColumn("next_end_kind", _next_non_null(F.when(is_end, F.col("end_kind")), per_tp, order))
              .withColumn("next_start_ms", _next_non_null(F.when(~is_end, F.col("ts_ms")), per_tp, order)))
    intervals = _topic_lives(events, stream.where(~is_end), "ts_ms").where(~F.col("while_deleted"))

    # The coordinator ending the member id: lines of the same ts_ms as the start come before it
    # in log order (docs/events.md §6), so only a later one ends the interval.
    removed = _coordinator(events, "member_removed").select("run", "group_id", "member_id", F.col("ts_ms").alias("_r"))
    fenced = _coordinator(events, "static_member_replaced").select(
        "run", "group_id", F.col("old_member_id").alias("member_id"), F.col("ts_ms").alias("_f"))
    key = ["run", "group_id", "node", "member_id", "topic", "partition", "ts_ms", "seq"]
    by_id = (intervals.select(*key).join(removed, on=["run", "group_id", "member_id"], how="left")
             .join(fenced, on=["run", "group_id", "member_id"], how="left")
             .groupBy(*key).agg(F.min(F.when(F.col("_r") > F.col("ts_ms"), F.col("_r"))).alias("removed_ms"),
                                F.min(F.when(F.col("_f") > F.col("ts_ms"), F.col("_f"))).alias("fenced_ms")))
    intervals = (intervals.join(by_id, on=key, how="left").join(_log_end(events), on=RUN, how="left"))
    # At the same ts_ms the coordinator's line comes first, then the member's (log order).
    candidates = [("deleted_ms", F.lit("deleted")), ("removed_ms", F.lit("removed")), ("fenced_ms", F.lit("fenced")),
                  ("next_end_ms", F.col("next_end_kind")), ("next_start_ms", F.lit("reassigned"))]
    end_ms = F.least(*[F.col(c) for c, _ in candidates])
    reason = F.lit("end_of_log")
    for c, kind in reversed(candidates):
        reason = F.when(F.col(c).isNotNull() & (F.col(c) == F.col("end_ms")), kind).otherwise(reason)
    return (intervals.withColumn("end_ms", F.coalesce(end_ms, F.col("log_end_ms")))
            .withColumn("end_reason", F.when(end_ms.isNull(), F.lit("end_of_log")).otherwise(reason))
            .select("run", "group_id", F.col("node").alias("client_id"), "member_id",
                    F.col("generation_id").alias("generation"), "topic", "partition",
                    F.col("ts_ms").alias("start_ms"), "end_ms", (F.col("end_ms") - F.col("ts_ms")).alias("duration_ms"),
                    "end_reason"))


def revocations(events: DataFrame) -> DataFrame:
    """Partitions members gave up or lost, charged to the rebalance that made them do it: an eager
    member revokes (and a member loses) in the generation it is leaving, so the rebalance forming
    the next one; a cooperative member revokes `reassigned` partitions once the new generation's
    assignment arrived, so in that generation."""
    member = events.where(~F.col("node").isin(*NON_MEMBER_NODES)
                          & F.col("event").isin("partitions_revoked", "partitions_lost")
                          & (F.coalesce(F.col("reason"), F.lit("")) != "closing") & (F.col("generation_id") >= 0))
    charged = F.col("generation_id") + F.when(F.col("reason") == "reassigned", 0).otherwise(1)
    return _explode_pairs(member.withColumn("generation", charged), "partitions",
                          "run", "group_id", "node", "member_id", "generation", "event", "ts_ms")


# ----------------------------------------------------------------------------- partition time (the cost fold)


# One row of the fold's output: a segment of partition time, or a stall (kind says which).
COST_ROWS = T.StructType([T.StructField(name, dtype) for name, dtype in [
    ("kind", T.StringType()), ("run", T.StringType()), ("group_id", T.StringType()), ("topic", T.StringType()),
    ("partition", T.IntegerType()), ("state", T.StringType()), ("start_ms", T.LongType()), ("end_ms", T.LongType()),
    ("client_id", T.StringType()), ("member_id", T.StringType()), ("generation", T.LongType()),
    ("stall_id", T.IntegerType()), ("ended_by", T.StringType()), ("fault", T.StringType()), ("detail", T.StringType()),
    ("until_ms", T.LongType()), ("resumed_ms", T.LongType()), ("partitions", T.IntegerType()),
    ("assigned_not_consumed_ms", T.LongType()), ("unowned_after_ms", T.LongType()), ("removed_ms", T.LongType()),
    ("removal_reason", T.StringType())]])


def fold_run(item: tuple[str, Iterable[tuple[int, str, int, str, int]]]) -> Iterator[tuple]:
    """The cost fold over one run's cost lines (ts_ms, node, seq, raw line, the run's last ts_ms),
    in log order: what `grouplab plot` computes from the run directory, as COST_ROWS rows."""
    from grouplab.costs import CostTracker
    from grouplab.runlog import node_rank, parse_line

    run, lines = item
    ordered = sorted(lines, key=lambda x: (x[0], node_rank(x[1]), x[2]))
    costs = CostTracker()
    end = None
    for _, _, _, raw, log_end in ordered:
        end = log_end
        parsed = parse_line(raw)
        if parsed is not None:
            costs.feed(*parsed)
    costs.finish(end)
    for g in costs.segments:
        yield ("segment", run, g.group_id, g.partition.topic, g.partition.partition, g.state, g.start_ms, g.end_ms,
               g.client_id, g.member_id, g.generation, g.stall, g.ended_by, None, None, None, None, None, None, None,
               None, None)
    for s in costs.stalls:
        yield ("stall", run, s.group_id, None, None, None, s.since_ms, s.ended_ms, s.client_id, s.member_id,
               s.repaired_generation, s.index, s.ended_by, s.fault, s.detail, s.until_ms, s.resumed_ms,
               len(s.partitions), s.assigned_not_consumed_ms, s.unowned_after_ms, s.removed_ms, s.removal_reason)


def partition_costs(events: DataFrame) -> DataFrame:
    """The cost fold (grouplab/costs.py, docs/events.md §6) on the executors, one run per task:
    partition time split into consumed, assigned but not consumed and unowned, and the stops
    charged. It is a fold in log order over a run's ownership lines, so unlike the other tables it
    needs a run's lines together; it gets only those it reads (`raw`, COST_EVENTS: no heartbeats,
    batches or offsets), and runs the same code as `grouplab plot`, so the two cannot disagree."""
    lines = (events.where(F.col("raw").isNotNull()).select("run", "node", "ts_ms", "seq", "raw")
             .join(_log_end(events), on=RUN, how="left"))
    rows = (lines.rdd.map(lambda r: (r["run"], (r["ts_ms"], r["node"], r["seq"], r["raw"], r["log_end_ms"])))
            .groupByKey().flatMap(fold_run))
    return events.sparkSession.createDataFrame(rows, COST_ROWS)


def partition_time(costs: DataFrame) -> DataFrame:
    """One row per stretch of a partition in one state: `consumed`, `assigned_not_consumed` or
    `unowned` (docs/events.md §6)."""
    return costs.where(F.col("kind") == "segment").select(
        *GROUP, "topic", "partition", "state", "start_ms", "end_ms", (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
        "client_id", "member_id", "generation", "stall_id", "ended_by")


def stalls(costs: DataFrame) -> DataFrame:
    """One row per member process that stopped consuming, with what it cost."""
    return costs.where(F.col("kind") == "stall").select(
        *GROUP, "stall_id", "client_id", "member_id", "fault", "detail", F.col("start_ms").alias("stopped_ms"),
        "until_ms", "resumed_ms", "partitions", "assigned_not_consumed_ms", "unowned_after_ms",
        F.col("end_ms").alias("ended_ms"), "ended_by", "removed_ms", "removal_reason",
        F.col("generation").alias("repaired_generation"))


def rebalances(phases: DataFrame, moved: DataFrame, times: DataFrame, revocations: DataFrame,
               owned: DataFrame, stopped: DataFrame) -> DataFrame:
    """The rebalance phases with what they cost: partitions moved, revoked by members during the
    rebalance, stop-the-world partition-milliseconds (unowned time this generation's assignment
    ended), and the assigned-but-not-consumed time of the stops it repaired."""
    moves = moved.groupBy(*GROUP, "generation").agg(F.count("*").alias("partitions_moved"))
    cost = (times.where((F.col("state") == "unowned") & F.col("generation").isNotNull() & (F.col("duration_ms") > 0))
            .groupBy(*GROUP, "generation").agg(
                F.sum("duration_ms").alias("unowned_partition_ms"), F.max("duration_ms").alias("max_unowned_ms"),
                F.countDistinct("topic", "partition").alias("partitions_unowned")))
    repaired = (stopped.where(F.col("repaired_generation").isNotNull() & (F.col("partitions") > 0))
                .groupBy(*GROUP, F.col("repaired_generation").alias("generation"))
                .agg(F.sum("assigned_not_consumed_ms").alias("assigned_not_consumed_ms"),
                     F.count("*").alias("stops_repaired")))
    revoked = revocations.groupBy(*GROUP, "generation").agg(F.count("*").alias("partitions_revoked"))
    # Stop-the-world and revocations come from the members' logs: without them they are unknown
    # (null), not zero.
    member_view = owned.select("run").distinct().withColumn("_members_logged", F.lit(True))
    known = F.col("_members_logged").isNotNull()
    member_cols = ["unowned_partition_ms", "max_unowned_ms", "partitions_unowned", "partitions_revoked",
                   "assigned_not_consumed_ms", "stops_repaired"]
    out = (phases.join(moves, on=[*GROUP, "generation"], how="left").join(cost, on=[*GROUP, "generation"], how="left")
           .join(repaired, on=[*GROUP, "generation"], how="left")
           .join(revoked, on=[*GROUP, "generation"], how="left").join(member_view, on=RUN, how="left")
           .fillna(0, subset=["partitions_moved"]))
    for c in member_cols:
        out = out.withColumn(c, F.when(known, F.coalesce(F.col(c), F.lit(0))))
    return out.drop("member_ids", "_members_logged")


# ----------------------------------------------------------------------------- delivery


def deliveries(events: DataFrame) -> DataFrame:
    """Per input record of a delivery run: how many times the application processed it (its
    `batch_processed` offset ranges), how many times it is in the output (the run's
    `delivery_records` account), whether its offset was committed, and the outcome."""
    batches = events.where((F.col("event") == "batch_processed") & F.col("first_offsets").isNotNull())
    ranges = batches.select("run", F.explode(F.arrays_zip("partitions", "first_offsets", "last_offsets")).alias("b"))
    processed = (ranges.select("run", F.col("b.partitions")[0].alias("topic"), F.col("b.partitions")[1].cast("int").alias("partition"),
                               F.explode(F.sequence("b.first_offsets", "b.last_offsets")).alias("offset"))
                 .groupBy("run", "topic", "partition", "offset").agg(F.count("*").alias("processed")))
    account = events.where(F.col("event") == "delivery_records").select(
        "run", "mode", "topic", F.col("partition").cast("int").alias("partition"), "committed_offset",
        F.posexplode("output_counts").alias("offset", "output"))
    account = account.withColumn("offset", F.col("offset").cast("long"))
    out = account.join(processed, on=["run", "topic", "partition", "offset"], how="full")
    outcome = (F.when(F.col("output").isNull(), "unknown").when(F.col("output") == 0, "lost")
               .when(F.col("output") > 1, "duplicated").otherwise("once"))
    return out.select("run", "mode", "topic", "partition", "offset",
                      F.coalesce("processed", F.lit(0)).alias("processed"), "output",
                      (F.col("offset") < F.col("committed_offset")).alias("committed"), outcome.alias("outcome"))


# ----------------------------------------------------------------------------- per run


def run_summary(events: DataFrame, malformed: DataFrame, rebal: DataFrame, deliv: DataFrame,
                times: DataFrame, owned: DataFrame) -> DataFrame:
    """One row per run: its size, what its rebalances cost in total, and how much of its
    partitions' time was consumed and assigned but not consumed (null without member logs)."""
    base = events.groupBy("run").agg(
        F.count("*").alias("events"), F.countDistinct("node").alias("nodes"),
        F.countDistinct("group_id").alias("groups"), F.min("ts_ms").alias("first_ms"), F.max("ts_ms").alias("last_ms"))
    bad = malformed.groupBy("run").agg(F.count("*").alias("malformed_lines"))
    reb = rebal.groupBy("run").agg(
        F.count("*").alias("rebalances"), F.sum(F.when(F.col("outcome") == "stable", 1).otherwise(0)).alias("stable_generations"),
        F.sum("partitions_moved").alias("partitions_moved"), F.sum("unowned_partition_ms").alias("unowned_partition_ms"),
        F.max("duration_ms").alias("max_rebalance_ms"),
        F.percentile_approx("duration_ms", 0.5, 10000).alias("rebalance_p50_ms"),
        F.percentile_approx("duration_ms", 0.99, 10000).alias("rebalance_p99_ms"))
    dl = deliv.groupBy("run").agg(
        F.max("mode").alias("delivery_mode"), F.sum(F.when(F.col("output").isNotNull(), 1).otherwise(0)).alias("records"),
        F.sum(F.when(F.col("outcome") == "lost", 1).otherwise(0)).alias("lost"),
        F.sum(F.when(F.col("outcome") == "duplicated", F.col("output") - 1).otherwise(0)).alias("duplicated"))
    member_view = owned.select("run").distinct()
    split = times.join(member_view, on=RUN, how="left_semi").groupBy("run").agg(*[
        F.sum(F.when(F.col("state") == state, F.col("duration_ms")).otherwise(0)).alias(f"{state}_ms")
        for state in ("consumed", "assigned_not_consumed")])
    return (base.join(bad, on=RUN, how="full").join(reb, on=RUN, how="left").join(dl, on=RUN, how="left")
            .join(split.withColumnRenamed("consumed_ms", "consumed_partition_ms"), on=RUN, how="left")
            .fillna(0, subset=["events", "malformed_lines", "rebalances", "stable_generations", "partitions_moved"]))
