"""The one place grouplab starts Spark: a local session by default, any cluster with `--master`.

Every pipeline command (`grouplab analyze`, `grouplab sweep`, the benchmark) goes through
`spark_session`, so the defaults below are the same everywhere and every Spark setting a user
knows (`--conf spark.executor.memory=8g`, ...) passes through unchanged.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterable

from grouplab.extras import require

DEFAULT_MASTER = "local[*]"

# Applied only where the user gave no value of their own. Small shuffles: a run's tables are
# thousands to millions of rows, and Spark's default of 200 shuffle partitions costs more in task
# overhead than it saves. No web UI on a laptop unless asked for.
DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # A run directory is one small file per node, and analyze reads thousands of them. Past this
    # many paths Spark lists them with a job of its own, one task per path: 25 s for 4,000 files
    # here, against well under a second listed on the driver.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
}
JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"
# Only for local masters, where the driver is the whole cluster.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.driver.memory": "4g",
}


class SparkUnavailable(RuntimeError):
    """Spark would not start (Java missing or too old, a bad master): say so instead of a Py4J
    stack trace. PySpark itself missing is grouplab.extras.MissingExtra (the spark extra)."""


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """`--conf key=value`, as spark-submit takes it."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected --conf key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def effective_conf(master: str, conf: dict[str, str]) -> dict[str, str]:
    settings = dict(DEFAULTS)
    if master.startswith("local"):
        settings.update(LOCAL_DEFAULTS)
    log4j = f"-Dlog4j.configurationFile=file:{Path(__file__).with_name('log4j2.properties')}"
    settings.update(conf)
    # A user's own JVM options (-Xss4m, a profiler, ...) come after grouplab's quiet logging, not
    # instead of it; a -Dlog4j.configurationFile of theirs, later on the line, still wins.
    options = conf.get(JAVA_OPTIONS_KEY, "").strip()
    settings[JAVA_OPTIONS_KEY] = f"{log4j} {options}" if options else log4j
    return settings


def spark_session(master: str | None = None, conf: Iterable[str] | dict[str, str] = (),
                  app_name: str = "grouplab") -> Any:
    """A SparkSession for `master` (default `local[*]`), with grouplab's defaults under `conf`.

    Local workers run this same interpreter, so a sweep's simulations import the grouplab that is
    installed here; on a real cluster the executors need grouplab installed too (docs/pipeline.md)."""
    require("spark", "pipeline (analyze, sweep)")  # the CLI checked already; this is for other callers
    from pyspark.sql import SparkSession

    conf = conf if isinstance(conf, dict) else parse_conf(conf)
    active = SparkSession.getActiveSession()
    if active is not None:
        # One SparkContext per process: a second command in the same process (tests, notebooks)
        # reuses it, with only the settings asked for now, not grouplab's defaults over its own.
        for key, value in conf.items():
            try:
                active.conf.set(key, value)
            except Exception:  # a setting fixed when the context started (memory, master, ...)
                pass
        return active
    master = master or os.environ.get("GROUPLAB_SPARK_MASTER") or DEFAULT_MASTER
    if master.startswith("local"):
        # Local workers are this machine: they run this interpreter, with grouplab installed.
        # On a cluster the executors' Python is the cluster's (PYSPARK_PYTHON, docs/pipeline.md).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in effective_conf(master, conf).items():
        builder = builder.config(key, value)
    try:
        spark = _own_session(builder.getOrCreate)
    except Exception as exc:  # Java missing or too old, bad master URL, ...
        raise SparkUnavailable(f"could not start Spark (master {master}): {exc}. "
                               "Spark needs Java 17 or newer on PATH or in JAVA_HOME.") from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _own_session(start: Any) -> Any:
    """Run `start` with Spark's JVM launched in a session of its own: a Ctrl-C at the terminal then
    reaches only this driver (which stops Spark quietly, grouplab/cli.py), not the JVM and its Python
    workers, whose interrupted tasks would otherwise print pages of stack traces. The JVM still ends
    with the driver: it exits when its stdin, a pipe from this process, closes."""
    try:
        from pyspark.core import context
    except ImportError:  # pragma: no cover - older PySpark layout
        return start()
    launch = context.launch_gateway

    def launch_in_own_session(conf: Any = None, popen_kwargs: dict[str, Any] | None = None) -> Any:
        return launch(conf, {**(popen_kwargs or {}), "start_new_session": True})

    context.launch_gateway = launch_in_own_session
    try:
        return start()
    finally:
        context.launch_gateway = launch
