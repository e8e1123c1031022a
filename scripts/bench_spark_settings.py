#!/usr/bin/env python3
"""The CPU one `analyze` and its report cost on a small run, under grouplab's default Spark
settings and under the test suite's (tests/spark_settings.py's TEST_SPARK_CONF). Prints a table and
appends it to docs/benchmarks.md.

A small run's tables are a few thousand rows: what costs is planning, compiling and scheduling
the queries, not running them. The suite analyzes several small runs, so its Spark settings trade
what only pays at scale (adaptive re-planning, whole-stage code generation, the optimizing JIT)
for less CPU. Each setting is measured in a fresh process: Spark's start, then `--rounds` analyze
and report rounds of one simulated crash-storm run (10 members, seed 1), each round's wall time
and the JVM's own CPU time (from /proc, the JVM's process id asked of the JVM); the first round
warms the JVM.

    scripts/bench_spark_settings.py [--rounds 2] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

SETTINGS = {"grouplab's defaults (as `grouplab analyze`)": {},
            "the test suite's (TEST_SPARK_CONF)": "tests"}


def measure(conf: dict[str, str], run_dir: str, rounds: int) -> dict:
    """In this process: start Spark with `conf`, analyze and report `run_dir` `rounds` times."""
    from grouplab.pipeline.analyze import analyze
    from grouplab.pipeline.report import write_report
    from grouplab.pipeline.session import spark_session

    t0 = time.perf_counter()
    spark = spark_session("local[2]", conf, app_name="bench-spark-settings")
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()

    def jvm_cpu() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    out = {"start_wall_s": time.perf_counter() - t0, "start_jvm_cpu_s": jvm_cpu(), "rounds": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            wall, cpu = time.perf_counter(), jvm_cpu()
            analyze(spark, [run_dir], f"{tmp}/out{i}")
            write_report(spark, f"{tmp}/out{i}")
            out["rounds"].append((time.perf_counter() - wall, jvm_cpu() - cpu))
    spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one setting (JSON) in this process
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(measure(json.loads(args.one), args.run_dir, args.rounds)))
        return
    from tests.spark_settings import TEST_SPARK_CONF

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = f"{tmp}/run"
        subprocess.run([sys.executable, "-m", "grouplab.cli", "simulate", "--scenario", "crash-storm", "--seed", "1",
                        "--run-dir", run_dir], check=True, capture_output=True)
        rows = []
        for label, conf in SETTINGS.items():
            conf = dict(TEST_SPARK_CONF) if conf == "tests" else conf
            print(f"measuring {label}…", flush=True)
            proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(conf), "--run-dir", run_dir,
                                   "--rounds", str(args.rounds)], capture_output=True, text=True, check=True)
            rows.append((label, conf, json.loads(proc.stdout.strip().splitlines()[-1])))
    lines = ["| settings | start: wall s | start: JVM CPU s | "
             + " | ".join(f"round {i + 1}: wall s / JVM CPU s" for i in range(args.rounds)) + " |",
             "|---|---:|---:|" + "---:|" * args.rounds]
    for label, _conf, r in rows:
        lines.append(f"| {label} | {r['start_wall_s']:.1f} | {r['start_jvm_cpu_s']:.1f} | "
                     + " | ".join(f"{w:.1f} / {c:.1f}" for w, c in r["rounds"]) + " |")
    table = "\n".join(lines)
    print("\n" + table)
    settings = "; ".join(f"{k}={v}" for k, v in dict(TEST_SPARK_CONF).items())
    if not args.no_write:
        append_to_benchmarks(
            f"## Spark settings for small runs: analyze + report, {utc_stamp()}\n\n"
            f"`scripts/bench_spark_settings.py --rounds {args.rounds}`: one crash-storm run (10 members, seed 1), "
            f"analyzed and reported {args.rounds} times in one fresh process per setting; load average "
            f"{os.getloadavg()[0]:.1f} at the end. The test suite's settings: {settings}.\n\n{table}")


if __name__ == "__main__":
    main()
