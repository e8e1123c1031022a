#!/usr/bin/env python3
"""Benchmark the Spark pipeline. Prints tables and appends them to docs/benchmarks.md.

1. `grouplab analyze` throughput: event-log lines (events) per second for 1 and 10 million lines
   (`--events`), and larger sizes up to `--max-events` (doubling) while they work. The logs are
   crash-storm runs written by the simulator (`run_seed(..., run_dir=...)`) into a cache directory,
   two processes at a time, and reused by later runs of this script. 100 members is the default
   because it writes lines fastest (measured: about 23,700 lines/s per process at 10 members,
   26,700 at 30, 29,400 at 100). Past `--distinct-events` lines the extra run directories are
   hard-linked copies of the distinct ones under new names (the analyzer treats each directory as
   its own run; symbolic links would not do: it resolves them to the original directory's name);
   the tables say how many lines were distinct. Each measurement is `analyze(spark, dirs, out)` on
   a fresh Spark (its own process, so no warm JVM is carried from one measurement to the next);
   session start-up is timed apart. Peer, same files, same run: one plain Python process that only
   reads every line and `json.loads` it: the least time any single-process Python analysis could
   take. local[1] is timed at the smallest size, and analyze's first step alone (parse and stage
   the lines) at the `--events` sizes.
2. Sweep throughput: the same seeds of crash-storm at several member counts, one assignor, as
   (a) plain Python, `run_seed` in a loop in one process, (b) Spark local[1], (c) Spark local[2],
   and local[2] with `--spt` seeds per task at the smallest member count. Spark is timed from
   `sweep(...)` to the collected rows (no report); the Spark rows must equal plain Python's
   (rebalances, partitions moved, events, ok) or the script fails.

The machine may be shared: every measurement records the load average and the cores used by this
benchmark's processes and by everything else (from /proc), and is repeated (`--retries`) when the
others used more than `--busy` cores during it.

    scripts/bench_pipeline.py [--events 1000000,10000000] [--max-events N] [--sweep-seeds 1-200]
                              [--sweep-members 3,10,100] [--logs-dir /tmp/grouplab-bench-logs] [--no-write]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import multiprocessing as mp
import os
import platform
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

from grouplab.sim.runner import parse_seeds, run_seed  # noqa: E402
from grouplab.sim.scenario import load_scenario, resolve_scenario  # noqa: E402

SCENARIO = "crash-storm"
# Tables whose row counts are shown (analyze writes more; all are timed).
MAIN_TABLES = ("rebalances", "assignments", "movements", "ownership", "member_sessions")
LOAD_COL = "load 1m; cores: ours / others"
SEED_DIR = re.compile(r"^seed-(\d+)$")


def code_state() -> str:
    """The commit measured, and whether grouplab/ differs from it (the pipeline may change under us)."""
    import subprocess

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--", "grouplab")
    return f"commit {git('rev-parse', '--short', 'HEAD')}" + (" with uncommitted changes in grouplab/" if dirty else "")


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    data = f.read()
            except OSError:
                continue
            children.setdefault(int(data[data.rindex(")") + 2:].split()[1]), []).append(int(name))
    out, stack = [], [root]
    while stack:
        for pid in children.get(stack.pop(), ()):
            out.append(pid)
            stack.append(pid)
    return out


def _on_sigterm(signum: int, frame) -> None:
    """Say so (someone else's kill, not a crash), stop the processes this script started, exit."""
    print(f"\nkilled by signal {signum} at {datetime.now(timezone.utc):%H:%M:%S} UTC (not by this script); "
          f"stopping its own child processes", file=sys.stderr, flush=True)
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    os._exit(128 + signum)


def load1() -> float:
    return os.getloadavg()[0]


class CpuMonitor:
    """CPU time of every process on the machine, sampled once a second and at each window's ends,
    split into ours (this process and its descendants: the generators, Spark's JVM and Python
    workers) and everyone else's. The load average counts our own threads too, so the others'
    cores are the better measure of contention. Processes that live less than a second between
    two samples are missed."""

    def __init__(self, interval: float = 1.0) -> None:
        import threading

        self.me = os.getpid()
        self.tick = os.sysconf("SC_CLK_TCK")
        self.prev: dict[int, tuple[int, int]] = {}  # pid -> (starttime, jiffies)
        self.ours = self.others = 0
        self.lock = threading.Lock()
        self.sample(first=True)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, args=(interval,), daemon=True)
        self.thread.start()

    def _loop(self, interval: float) -> None:
        while not self.stop.wait(interval):
            self.sample()

    def sample(self, first: bool = False) -> tuple[int, int]:
        with self.lock:
            procs: dict[int, tuple[int, int, int]] = {}
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/stat") as f:
                        data = f.read()
                except OSError:
                    continue
                rest = data[data.rindex(")") + 2:].split()
                procs[int(name)] = (int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[19]))
            children: dict[int, list[int]] = {}
            for pid, (ppid, _, _) in procs.items():
                children.setdefault(ppid, []).append(pid)
            ours, stack = set(), [self.me]
            while stack:
                pid = stack.pop()
                ours.add(pid)
                stack.extend(children.get(pid, ()))
            current = {}
            for pid, (_, jiffies, start) in procs.items():
                current[pid] = (start, jiffies)
                if first:
                    continue
                prev = self.prev.get(pid)
                delta = jiffies - prev[1] if prev and prev[0] == start else jiffies  # new since the last sample
                if pid in ours:
                    self.ours += delta
                else:
                    self.others += delta
            self.prev = current
            return self.ours, self.others

    def window(self) -> "CpuWindow":
        return CpuWindow(self)


class CpuWindow:
    def __init__(self, monitor: CpuMonitor) -> None:
        self.monitor = monitor
        self.load = load1()
        self.t0 = time.perf_counter()
        self.start = monitor.sample()

    def close(self) -> str:
        """`load; ours / others`: the 1-minute load when it started; cores used on average by us and
        by everything else while it ran."""
        ours, others = self.monitor.sample()
        wall = time.perf_counter() - self.t0
        tick = self.monitor.tick
        self.others = (others - self.start[1]) / tick / wall
        self.ours = (ours - self.start[0]) / tick / wall
        return f"{self.load:.1f}; {self.ours:.2f} / {self.others:.2f}"


MONITOR: CpuMonitor | None = None
BUSY = 0.25  # --busy: others' cores above which a measurement is repeated
RETRIES = 2  # --retries


def measured(fn, *args) -> dict:
    """fn(*args) -> dict, timed under a CPU window; repeated (up to RETRIES more times) while other
    processes used more than BUSY cores during it; the try with the least of others' CPU is kept."""
    best, tries = None, 0
    for tries in range(1, RETRIES + 2):
        w = MONITOR.window()
        r = fn(*args)
        r["load"] = w.close()
        r["_others"], r["_try"] = w.others, tries
        if best is None or r["_others"] < best["_others"]:
            best = r
        if r["_others"] <= BUSY:
            break
        print(f"  (others used {r['_others']:.2f} cores during try {tries})", flush=True)
    if tries > 1:
        best["load"] += f"; try {best['_try']} of {tries}"
    return best


# ----------------------------------------------------------------------------- event logs


_GEN_SCENARIO = None


def _gen_init(members: int) -> None:
    global _GEN_SCENARIO
    _GEN_SCENARIO = load_scenario(resolve_scenario(SCENARIO)).with_members(members)


def count_lines(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def dir_lines(run_dir: Path) -> tuple[int, int, int]:
    """(lines, files, bytes) of a run directory's *.jsonl files, counted exactly."""
    lines = files = size = 0
    for f in run_dir.glob("*.jsonl"):
        lines += count_lines(f)
        files += 1
        size += f.stat().st_size
    return lines, files, size


def _gen_one(args: tuple[str, int]) -> tuple[int, int, float]:
    parent, seed = args
    final = Path(parent) / f"seed-{seed}"
    tmp = Path(parent) / f"seed-{seed}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.perf_counter()
    run_seed(_GEN_SCENARIO, seed, run_dir=tmp)
    wall = time.perf_counter() - t0
    lines = dir_lines(tmp)[0]
    tmp.rename(final)  # complete directories only: a killed run leaves *.tmp, removed next time
    return seed, lines, wall


class LogCache:
    """Distinct crash-storm run directories `seed-N` under logs_dir/m<members>/, generated on
    demand, plus hard-linked copies `copyK-seed-N` past the distinct budget."""

    def __init__(self, logs_dir: Path, members: int, workers: int) -> None:
        self.dir = logs_dir / f"m{members}"
        self.members = members
        self.workers = workers
        self.dir.mkdir(parents=True, exist_ok=True)
        for tmp in self.dir.glob("*.tmp"):
            shutil.rmtree(tmp, ignore_errors=True)
        self.base: dict[int, tuple[int, int, int]] = {}  # seed -> (lines, files, bytes)
        for d in self.dir.iterdir():
            m = SEED_DIR.match(d.name)
            if m and d.is_dir():
                self.base[int(m.group(1))] = dir_lines(d)
        self.generated = {"seeds": 0, "lines": 0, "wall_s": 0.0}

    def distinct_lines(self) -> int:
        return sum(v[0] for v in self.base.values())

    def ensure(self, lines: int) -> None:
        """At least `lines` distinct lines in the cache."""
        t0 = time.perf_counter()
        per_seed = (sum(v[0] for v in self.base.values()) / len(self.base)) if self.base else 265 * self.members
        while self.distinct_lines() < lines:
            missing = lines - self.distinct_lines()
            count = max(self.workers, math.ceil(missing / per_seed * 1.02))
            start = max(self.base, default=0) + 1
            jobs = [(str(self.dir), s) for s in range(start, start + count)]
            print(f"  generating {count} seeds of {SCENARIO} at {self.members} members "
                  f"({missing:,} lines missing) ...", flush=True)
            with mp.get_context("fork").Pool(self.workers, _gen_init, (self.members,)) as pool:
                for seed, n, _ in pool.imap_unordered(_gen_one, jobs):
                    self.base[seed] = dir_lines(self.dir / f"seed-{seed}")
                    assert self.base[seed][0] == n
                    self.generated["seeds"] += 1
                    self.generated["lines"] += n
            per_seed = self.distinct_lines() / len(self.base)
        self.generated["wall_s"] += time.perf_counter() - t0
        if self.generated["seeds"]:
            record = self.dir / "generation.json"
            earlier = json.loads(record.read_text()) if record.is_file() else {"seeds": 0, "lines": 0, "wall_s": 0.0}
            record.write_text(json.dumps({k: earlier[k] + self.generated[k] for k in earlier} | {
                "workers": self.workers}))

    def earlier_generation(self) -> dict | None:
        """What generating the cache cost when an earlier run made it (generation.json)."""
        record = self.dir / "generation.json"
        return json.loads(record.read_text()) if record.is_file() else None

    def select(self, lines: int, distinct_budget: int) -> dict:
        """Run directories holding at least `lines` lines: distinct ones first (seed order, at most
        `distinct_budget` lines of them), then copies of those, cycling, until there are enough."""
        self.ensure(min(lines, distinct_budget))
        dirs: list[Path] = []
        total = distinct = files = size = 0
        for seed in sorted(self.base):
            if total >= lines or distinct >= distinct_budget:
                break
            n, f, b = self.base[seed]
            dirs.append(self.dir / f"seed-{seed}")
            total += n
            distinct += n
            files += f
            size += b
        base = list(dirs)
        copy = 0
        while total < lines:
            copy += 1
            for src in base:
                if total >= lines:
                    break
                dst = self.dir / f"copy{copy}-{src.name}"
                if not dst.is_dir():
                    tmp = self.dir / f"copy{copy}-{src.name}.tmp"
                    shutil.rmtree(tmp, ignore_errors=True)
                    tmp.mkdir()
                    for f in src.glob("*.jsonl"):
                        try:
                            os.link(f, tmp / f.name)
                        except OSError:
                            shutil.copy2(f, tmp / f.name)
                    tmp.rename(dst)
                n, f, b = dir_lines(dst)  # counted, not assumed
                dirs.append(dst)
                total += n
                files += f
                size += b
        return {"dirs": [str(d) for d in dirs], "lines": total, "distinct": distinct, "runs": len(dirs),
                "distinct_runs": len(base), "files": files, "bytes": size}


# ----------------------------------------------------------------------------- measurements (analyze)


def json_peer(dirs: list[str]) -> dict:
    """One process: read every line of every *.jsonl file and json.loads it; nothing else."""
    files = sorted(str(f) for d in dirs for f in Path(d).glob("*.jsonl"))
    lines = bad = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for name in files:
        with open(name, "rb") as fh:
            for line in fh:
                lines += 1
                try:
                    json.loads(line)
                except ValueError:
                    bad += 1
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "cpu": (time.process_time() - c0) / wall, "lines": lines, "bad": bad}


def _child(fn_name: str, *args):
    """Run a measurement in a fresh interpreter (spawn): a fresh JVM and SparkSession each time."""
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        return ex.submit(globals()[fn_name], *args).result()


def _start(master: str, conf: list[str], app: str):
    from grouplab.pipeline.session import spark_session

    t0 = time.perf_counter()
    spark = spark_session(master, conf, app_name=app)
    spark.range(1).count()  # the first job starts the executors' machinery
    return spark, time.perf_counter() - t0


def spark_analyze(master: str, conf: list[str], dirs: list[str], parse_only: bool = False) -> dict:
    spark, start_s = _start(master, conf, "bench analyze")
    out = Path(tempfile.mkdtemp(prefix="bench-analyze-"))
    marks: list[tuple[str, float]] = []
    try:
        tracker = spark.sparkContext.statusTracker()
        jobs_before = set(tracker.getJobIdsForGroup(None))
        t0 = time.perf_counter()
        if parse_only:
            from grouplab.pipeline import tables as t

            if hasattr(t, "parse_event_logs"):  # analyze's first step: parse every line once, stage as Parquet
                parsed = t.parse_event_logs(spark, dirs)  # lists every input file
                listing_s = time.perf_counter() - t0
                parsed.write.mode("overwrite").parquet(str(out / "_parsed"))
                rows = {"events": spark.read.parquet(str(out / "_parsed")).where("valid").count()}
                what = "read, parse, stage as Parquet (analyze's first step)"
            else:
                logs = t.read_event_logs(spark, dirs)
                parsed = logs.events
                listing_s = time.perf_counter() - t0
                rows = {"events": parsed.count()}
                what = "read + parse only (count)"
        else:
            from grouplab.pipeline.analyze import analyze

            result = analyze(spark, dirs, out, on_table=lambda name, n: marks.append((name, time.perf_counter())))
            rows = dict(result.rows)
        wall = time.perf_counter() - t0
        if parse_only:
            rows.update(listing_s=listing_s, partitions=parsed.rdd.getNumPartitions(), what=what)
        jobs = [j for j in tracker.getJobIdsForGroup(None) if j not in jobs_before]
        stages = {s for j in jobs if (info := tracker.getJobInfo(j)) for s in info.stageIds}
        tasks = sum(info.numTasks for s in stages if (info := tracker.getStageInfo(s)))
    finally:
        spark.stop()
        shutil.rmtree(out, ignore_errors=True)
    per_table, prev = {}, t0
    for name, when in marks:
        per_table[name] = when - prev
        prev = when
    return {"start_s": start_s, "wall_s": wall, "rows": rows, "per_table": per_table,
            "jobs": len(jobs), "tasks": tasks}


def first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


# ----------------------------------------------------------------------------- measurements (sweep)


def plain_sweep(assignor: str, members: int, seeds: list[int]) -> dict:
    scenario = load_scenario(resolve_scenario(SCENARIO)).with_members(members).with_assignors([assignor])
    rows = {}
    c0 = time.process_time()
    t0 = time.perf_counter()
    for seed in seeds:
        r = run_seed(scenario, seed)
        rows[seed] = (r.stats.generations, r.stats.partitions_moved, r.stats.events, r.ok)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "cpu": (time.process_time() - c0) / wall, "rows": rows}


def spark_sweep(master: str, conf: list[str], assignor: str, members: int, seeds: list[int], spt: int) -> dict:
    from grouplab.pipeline.sweep import sweep, task_count

    path = resolve_scenario(SCENARIO)
    text = path.read_text()
    name = load_scenario(path).name
    spark, start_s = _start(master, conf, "bench sweep")
    try:
        t0 = time.perf_counter()
        df = sweep(spark, text, [assignor], [members], seeds, name, spt)
        got = df.select("seed", "rebalances", "partitions_moved", "events", "ok", "violation_detail").collect()
        wall = time.perf_counter() - t0
    finally:
        spark.stop()
    rows = {r["seed"]: (r["rebalances"], r["partitions_moved"], r["events"], r["ok"]) for r in got}
    errors = [r["violation_detail"] for r in got if r["violation_detail"]][:3]
    return {"start_s": start_s, "wall_s": wall, "rows": rows, "count": len(got),
            "tasks": task_count(len(seeds), spt), "errors": errors}


# ----------------------------------------------------------------------------- output


def table(header: list[str], align: str, rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def ratio(x: float) -> str:
    return f"{x:.2f}×" if x >= 0.995 else f"{x:.2g}×"


def mb(n: int) -> str:
    return f"{n / 1e6:,.0f}"


def main() -> None:
    global MONITOR, BUSY, RETRIES
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", default="1000000,10000000", help="analyze sizes, in event-log lines")
    ap.add_argument("--max-events", type=int, default=0,
                    help="after --events, keep doubling the largest size up to this many lines while it works")
    ap.add_argument("--distinct-events", type=int, default=10_000_000,
                    help="at most this many distinct (simulated) lines; larger sizes add hard-linked copies")
    ap.add_argument("--log-members", type=int, default=100,
                    help="members of the simulated runs that make the logs (100 writes lines fastest)")
    ap.add_argument("--logs-dir", default="/tmp/grouplab-bench-logs", help="cache of generated run directories")
    ap.add_argument("--workers", type=int, default=2, help="processes generating logs")
    ap.add_argument("--sweep-seeds", default="1-200")
    ap.add_argument("--sweep-members", default="3,10,100")
    ap.add_argument("--assignor", default="range", help="the sweep's one assignor (crash-storm's own)")
    ap.add_argument("--spt", type=int, default=10, help="seeds per task of the extra local[2] run at the smallest size")
    ap.add_argument("--conf", action="append", default=[], help="Spark setting KEY=VALUE for every session")
    ap.add_argument("--busy", type=float, default=BUSY,
                    help="repeat a measurement when other processes used more than this many cores during it")
    ap.add_argument("--retries", type=int, default=RETRIES, help="at most this many repeats per measurement")
    ap.add_argument("--skip-analyze", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    BUSY, RETRIES = args.busy, args.retries
    signal.signal(signal.SIGTERM, _on_sigterm)
    code_start = code_state()
    print(f"grouplab at {code_start}", flush=True)
    MONITOR = CpuMonitor()
    whole_window = MONITOR.window()
    started = time.perf_counter()
    load_start = os.getloadavg()
    print(f"{os.cpu_count()} cores, Python {platform.python_version()}, load average {load_start[0]:.2f} "
          f"{load_start[1]:.2f} {load_start[2]:.2f}", flush=True)

    sections: list[str] = []
    facts: dict = {}

    # ---- 1. analyze
    if not args.skip_analyze:
        sizes = [int(x) for x in args.events.split(",")]
        extra, n = [], max(sizes)
        while args.max_events and n < args.max_events:
            n = min(n * 2, args.max_events)
            extra.append(n)
        cache = LogCache(Path(args.logs_dir), args.log_members, args.workers)
        print(f"log cache {cache.dir}: {len(cache.base)} run directories, {cache.distinct_lines():,} distinct lines",
              flush=True)
        cache.ensure(min(max(sizes + extra), args.distinct_events))
        gen = cache.generated
        if gen["seeds"]:
            print(f"  generated {gen['seeds']} seeds, {gen['lines']:,} lines in {gen['wall_s']:.1f} s "
                  f"({gen['lines'] / gen['wall_s']:,.0f} lines/s, {args.workers} processes)", flush=True)
        facts["generated"] = gen
        a_rows: list[list[str]] = []
        table_times: list[tuple[int, dict]] = []
        smallest = min(sizes)
        for size in sizes + extra:
            sel = cache.select(size, args.distinct_events)
            lines, dirs = sel["lines"], sel["dirs"]
            desc = [f"{lines:,}", f"{sel['distinct']:,}", f"{sel['runs']:,} ({sel['distinct_runs']:,})",
                    f"{sel['files']:,}", mb(sel["bytes"])]
            print(f"\n{lines:,} lines ({sel['distinct']:,} distinct) in {sel['runs']} run directories "
                  f"({sel['distinct_runs']} distinct), {sel['files']:,} files, {mb(sel['bytes'])} MB", flush=True)
            peer = measured(json_peer, dirs)
            if peer["lines"] != lines:
                raise SystemExit(f"line count mismatch: counted {lines}, the peer read {peer['lines']}")
            peer_rate = lines / peer["wall_s"]
            row = desc + ["peer: 1 Python process, json.loads only", "-", f"{peer['wall_s']:.1f}",
                          f"{peer_rate:,.0f}", "1.00×", f"{peer['bad']} unparsable lines; CPU {peer['cpu']:.0%} of wall",
                   peer["load"]]
            a_rows.append(row)
            print("| " + " | ".join(row) + " |", flush=True)
            facts.setdefault("peer", {})[lines] = peer_rate
            # local[1] at the smallest size; the parse-only step at the --events sizes (not the --max-events ones)
            runs = ([("local[2]", False)] + ([("local[1]", False)] if size == smallest else [])
                    + ([("local[2]", True)] if size in sizes else []))
            failed = False
            for master, parse_only in runs:
                what = f"Spark {master}, {'read + parse only' if parse_only else 'analyze'}"
                try:
                    r = measured(_child, "spark_analyze", master, args.conf, dirs, parse_only)
                except Exception as exc:  # noqa: BLE001 - recorded: the largest size that worked is the result
                    traceback.print_exc()
                    row = desc + [what, "-", "-", "-", "-", f"FAILED: {first_line(exc)}", f"{load1():.1f}"]
                    a_rows.append(row)
                    print("| " + " | ".join(row) + " |", flush=True)
                    failed = True
                    break
                rate = lines / r["wall_s"]
                rows = r["rows"]
                if parse_only:
                    what = f"Spark {master}, {rows['what']}"
                    note = (f"{rows['events']:,} events parsed in {rows['partitions']:,} input partitions; setting up "
                            f"the read (listing the files) took {rows['listing_s']:.1f} s of it")
                    if rows["events"] != lines:
                        note += f" (≠ {lines:,} lines!)"
                else:
                    note = " / ".join(f"{rows.get(t, 0):,}" for t in MAIN_TABLES)
                    note += f"; runs {rows.get('runs', 0):,}, malformed {rows.get('malformed', 0):,}"
                    if rows.get("runs") != sel["runs"] or rows.get("malformed"):
                        note += " (UNEXPECTED)"
                    if master == "local[2]":
                        table_times.append((lines, r["per_table"]))
                    facts.setdefault(f"analyze {master}", {})[lines] = rate
                    facts.setdefault(f"wall {master}", {})[lines] = r["wall_s"]
                    facts.setdefault("jobs", []).append(r["jobs"])
                    print("  per table: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["per_table"].items()), flush=True)
                note += f"; {r['jobs']:,} Spark jobs, {r['tasks']:,} tasks"
                row = desc + [what, f"{r['start_s']:.1f}", f"{r['wall_s']:.1f}", f"{rate:,.0f}",
                              ratio(rate / peer_rate), note, r["load"]]
                a_rows.append(row)
                print("| " + " | ".join(row) + " |", flush=True)
            if failed:
                facts["analyze_failed"] = size
                break
        a_text = table(["lines", "distinct lines", "run dirs (distinct)", "files", "MB", "engine", "start-up s",
                        "wall s", "lines/s", "vs peer", "rows: " + " / ".join(MAIN_TABLES), LOAD_COL],
                       "rrrrrlrrrrlr", a_rows)
        if table_times:
            names = list(table_times[0][1])
            t_text = table(["lines"] + [f"{n} s" for n in names] + ["total s"], "r" * (len(names) + 2),
                           [[f"{lines:,}"] + [f"{pt.get(n, 0):.1f}" for n in names] + [f"{sum(pt.values()):.1f}"]
                            for lines, pt in table_times])
        else:
            t_text = ""
        sections.append(("analyze", a_text, t_text, cache))

    # ---- 2. sweep
    if not args.skip_sweep:
        seeds = parse_seeds(args.sweep_seeds)
        members_list = [int(x) for x in args.sweep_members.split(",")]
        s_rows: list[list[str]] = []
        sweep_facts = {}
        for members in members_list:
            print(f"\nsweep: {SCENARIO}, {members} members, {len(seeds)} seeds, {args.assignor}", flush=True)
            plain = measured(plain_sweep, args.assignor, members, seeds)
            plain_rate = len(seeds) / plain["wall_s"]
            ms = plain["wall_s"] / len(seeds) * 1000
            row = [str(members), str(len(seeds)), "plain Python, 1 process", "-", "-", f"{plain['wall_s']:.1f}",
                   f"{plain_rate:.1f}", f"{plain_rate:.1f}", "1.00× / 1.00×",
                   f"{ms:.0f} ms per seed; CPU {plain['cpu']:.0%} of wall",
                   plain["load"]]
            s_rows.append(row)
            print("| " + " | ".join(row) + " |", flush=True)
            cell = {"plain": plain_rate, "ms": ms, "plain_s": plain["wall_s"], "seeds": len(seeds)}
            variants = [("local[1]", 1), ("local[2]", 1)] + ([("local[2]", args.spt)]
                                                              if members == min(members_list) and args.spt > 1 else [])
            for master, spt in variants:
                r = measured(_child, "spark_sweep", master, args.conf, args.assignor, members, seeds, spt)
                if r["count"] != len(seeds) or r["rows"] != plain["rows"]:
                    bad = [s for s in seeds if r["rows"].get(s) != plain["rows"].get(s)]
                    raise SystemExit(f"Spark {master} (seeds per task {spt}) differs from plain Python at {members} "
                                     f"members: {len(r['rows'])} rows, seeds differing {bad[:10]}; e.g. seed "
                                     f"{bad[0] if bad else '-'}: spark {r['rows'].get(bad[0]) if bad else '-'}, "
                                     f"plain {plain['rows'].get(bad[0]) if bad else '-'}; errors {r['errors']}")
                rate = len(seeds) / r["wall_s"]
                rate_all = len(seeds) / (r["wall_s"] + r["start_s"])
                row = [str(members), str(len(seeds)), f"Spark {master}, {spt} seed{'s' if spt > 1 else ''} per task",
                       str(r["tasks"]), f"{r['start_s']:.1f}", f"{r['wall_s']:.1f}", f"{rate:.1f}", f"{rate_all:.1f}",
                       f"{rate / plain_rate:.2f}× / {rate_all / plain_rate:.2f}×", "rows = plain Python's",
                       r["load"]]
                s_rows.append(row)
                print("| " + " | ".join(row) + " |", flush=True)
                cell[(master, spt)] = (rate, rate_all, r["start_s"], r["wall_s"], r["tasks"])
            sweep_facts[members] = cell
        s_text = table(["members", "seeds", "engine", "tasks", "start-up s", "job s", "seeds/s",
                        "seeds/s incl. start-up", "vs plain (job / incl. start-up)", "notes", LOAD_COL],
                       "rrlrrrrrllr", s_rows)
        sections.append(("sweep", s_text, sweep_facts, seeds))

    total = time.perf_counter() - started
    whole = whole_window.close()
    load_end = os.getloadavg()
    code_end = code_state()
    code = code_start if code_end == code_start else f"{code_start} at the start, {code_end} at the end (CHANGED DURING THE RUN)"
    print(f"grouplab at {code}", flush=True)
    text, paragraphs = render(sections, facts, args, total, load_start, load_end)
    print()
    print(text)
    print(f"\nwhole benchmark: {total / 60:.1f} min; load 1m at the start; cores ours / others: {whole}")
    whole = f"{whole_window.ours:.2f} cores ours and {whole_window.others:.2f} others on average"
    if not args.no_write:
        stamp = utc_stamp()
        argv = " ".join(sys.argv[1:])
        header = (f"\n## Spark pipeline: analyze and sweep throughput ({stamp})\n\n"
                  f"`scripts/bench_pipeline.py{' ' + argv if argv else ''}` on {os.cpu_count()} cores, Python "
                  f"{platform.python_version()}, PySpark {pyspark_version()}, {java_version()}; grouplab at {code}; "
                  f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; "
                  f"load average {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end "
                  f"(other jobs may share the machine). Each row's last column: the 1-minute load average when it "
                  f"started (it counts our own threads too), then the cores used on average while it ran by this "
                  f"benchmark's processes (for Spark: its JVM and Python workers, start-up included) and by every "
                  f"other process, sampled from /proc each second; over the whole benchmark, {whole}. A "
                  f"measurement during which other processes used more than {BUSY} cores was repeated (at most "
                  f"{RETRIES} times) and the quietest try kept (*try k of n*). "
                  f"The whole benchmark took {total / 60:.1f} min. Every Spark measurement runs in a fresh "
                  f"process with its own SparkSession (grouplab's defaults, driver memory 4g"
                  f"{', ' + ', '.join(args.conf) if args.conf else ''}); *start-up s* is the session's start "
                  f"and a first trivial job, not counted in the rates.\n\n")
        append_to_benchmarks(header + text)


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def java_version() -> str:
    import subprocess

    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr
        m = re.search(r'version "([^"]+)"', out)
        return f"Java {m.group(1)}" if m else "Java"
    except (OSError, subprocess.SubprocessError):
        return "Java ?"


def render(sections, facts, args, total, load_start, load_end) -> tuple[str, list[str]]:
    parts: list[str] = []
    paragraphs: list[str] = []
    for section in sections:
        if section[0] == "analyze":
            _, a_text, t_text, cache = section
            gen = facts.get("generated", {})
            before = cache.earlier_generation()
            if gen.get("seeds"):
                made = (f"{gen['lines']:,} of them generated by this run in {gen['wall_s']:.0f} s "
                        f"({gen['lines'] / gen['wall_s']:,.0f} lines/s, {args.workers} processes)")
            elif before and before["wall_s"]:
                made = (f"reused from the cache, which an earlier run generated at {before['lines'] / before['wall_s']:,.0f} "
                        f"lines/s ({before['lines']:,} lines in {before['wall_s']:.0f} s, {before['workers']} processes)")
            else:
                made = "reused from the cache"
            intro = (f"**analyze.** Event logs: runs of `{SCENARIO}` resized to {args.log_members} members, written "
                     f"by the simulator (`run_seed(..., run_dir=...)`), {len(cache.base):,} distinct run directories, "
                     f"{cache.distinct_lines():,} lines in the cache, {made}. A size takes whole run directories "
                     f"in seed order until it has at least that many lines (lines counted exactly); past "
                     f"{args.distinct_events:,} distinct lines it adds hard-linked copies under new directory "
                     f"names, which analyze treats as further runs (*distinct lines* says how many were not "
                     f"copies). *lines/s* is lines ÷ wall time of `analyze(spark, dirs, out)`: read, parse, build "
                     f"and write all eight tables as Parquet, count each back. The peer reads and `json.loads` "
                     f"every line of the same files in one Python process, with nothing else: the least time any "
                     f"single-process Python analysis could take. The *read, parse, stage* rows are analyze's first "
                     f"step alone (`tables.parse_event_logs(...)` written as Parquet, counted back): how much of "
                     f"analyze is getting the lines in. Files were in the page cache for all of them.")
            parts.append(intro + "\n\n" + a_text)
            if t_text:
                parts.append("Where analyze's time goes, local[2] (seconds from the previous table's end to this "
                             "one's written and counted; the first also includes reading, parsing and staging "
                             "the lines, and every shared intermediate is computed when a table first needs it):"
                             "\n\n" + t_text)
            paragraphs.append(analyze_paragraph(facts))
        else:
            _, s_text, sweep_facts, seeds = section
            intro = (f"**sweep.** Seeds {args.sweep_seeds} of `{SCENARIO}` with `{args.assignor}`, resized: plain "
                     f"Python runs `run_seed` in a loop in one process; Spark runs `sweep(...)` (one case per task "
                     f"unless said) and collects the per-seed rows, no report. *job s* is from `sweep(...)` to the "
                     f"rows collected; *incl. start-up* adds the session's start. Every Spark run's rows (rebalances, "
                     f"partitions moved, events, ok) equal plain Python's for the same seeds.")
            parts.append(intro + "\n\n" + s_text)
            paragraphs.append(sweep_paragraph(sweep_facts, args))
    text = "\n\n".join(parts)
    text += "\n\n" + "\n\n".join(p for p in paragraphs if p)
    return text, paragraphs


def analyze_paragraph(facts) -> str:
    l2 = facts.get("analyze local[2]", {})
    l1 = facts.get("analyze local[1]", {})
    walls = facts.get("wall local[2]", {})
    peer = facts.get("peer", {})
    if not l2:
        return "**Where Spark pays off, analyze:** no analyze measurement succeeded."
    sizes = sorted(l2)
    bits = [f"{s:,} lines at {l2[s]:,.0f} lines/s ({walls[s]:.0f} s; the json.loads-only peer read them "
            f"{peer[s] / l2[s]:,.0f}× faster)" for s in sizes]
    text = "**Where Spark pays off, analyze:** local[2] analyzed " + "; ".join(bits) + "."
    for s in sorted(l1):
        if s in l2:
            text += f" On {s:,} lines local[2] was {l2[s] / l1[s]:.2f}× as fast as local[1]."
    if len(sizes) > 1:
        a, b = sizes[0], sizes[-1]
        marginal = (walls[b] - walls[a]) / (b - a)  # s per line
        fixed = walls[a] - marginal * a
        if marginal > 0:
            jobs = facts.get("jobs", [])
            text += (f" A straight line through the {a:,} and {b:,} line runs gives a fixed cost of {fixed:.0f} s "
                     f"per analyze (planning and running its {min(jobs)}–{max(jobs)} Spark jobs, most of them "
                     f"small) plus {1 / marginal:,.0f} lines/s at the margin; the peer alone does "
                     f"{peer[b]:,.0f} lines/s in one process.")
    b = sizes[-1]
    if l2[b] < peer[b]:
        need = 1 / (1 / l2[b] - 1 / peer[b])
        text += (f" The peer is a ceiling for one Python process, not an analyzer: a one-process analyzer of the same "
                 f"tables would lose to Spark at {b:,} lines only if building them, after parsing, ran slower than "
                 f"{need:,.0f} lines/s. What Spark does buy on this machine is scaling: the rate still rises with the "
                 f"input, nothing here had to fit in memory, and the same job runs unchanged on a cluster.")
    if "analyze_failed" in facts:
        text += f" {facts['analyze_failed']:,} lines failed (above); the largest that worked is the last row before."
    return text


def sweep_paragraph(sf, args) -> str:
    if not sf:
        return ""
    bits = []
    pays = None
    pays_all = None
    for members in sorted(sf):
        c = sf[members]
        two = c.get(("local[2]", 1))
        one = c.get(("local[1]", 1))
        if not two:
            continue
        ratio, ratio_all = two[0] / c["plain"], two[1] / c["plain"]
        if ratio > 1 and pays is None:
            pays = members
        if ratio_all > 1 and pays_all is None:
            pays_all = members
        s = (f"{members} members ({c['ms']:.0f} ms per seed in plain Python): local[2] {ratio:.2f}× plain Python "
             f"({ratio_all:.2f}× with start-up), local[1] {one[0] / c['plain']:.2f}×")
        spt = c.get(("local[2]", args.spt))
        if spt:
            s += f", local[2] with {args.spt} seeds per task {spt[0] / c['plain']:.2f}× ({spt[1] / c['plain']:.2f}×)"
        bits.append(s)
    text = "**Where Spark pays off, sweep:** " + "; ".join(bits) + ". "
    # Spark's cost per task: local[1] runs the same simulations one at a time, so its job time minus plain
    # Python's is overhead (scheduling, serialization, the Python worker round trip, the collect).
    over = {m: (c[("local[1]", 1)][3] - c["plain_s"]) / c[("local[1]", 1)][4] * 1000
            for m, c in sorted(sf.items()) if ("local[1]", 1) in c}
    if over:
        text += ("Spark's overhead per one-seed task, local[1] job time minus plain Python's over the tasks: "
                 + ", ".join(f"{o:.0f} ms at {m} members" for m, o in over.items())
                 + "; local[2] can at best halve seed cost plus overhead, so it beats one plain process only "
                   "where a seed costs clearly more than the overhead. ")
    if pays is None:
        text += "local[2] did not beat one plain Python process at any member count measured, even without start-up."
    else:
        def at(m: int, k: int) -> str:
            c = sf[m]
            return f"{m} members ({c[('local[2]', 1)][k] / c['plain']:.2f}×, {c['ms']:.0f} ms per seed)"

        text += (f"Counting the job only, local[2] first beats one plain Python process at {at(pays, 0)}"
                 + (f"; counting the session's start too ({args.sweep_seeds} seeds), at {at(pays_all, 1)}."
                    if pays_all is not None else "; counting the session's start too, it never does here."))
    return text


if __name__ == "__main__":
    main()
