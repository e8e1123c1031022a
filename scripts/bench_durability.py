#!/usr/bin/env python3
"""Benchmark: what an acknowledged write survives under each durability profile, and what each
profile costs. Prints two tables and appends them to docs/benchmarks.md (docs/durability.md reads
them).

Each round starts a fresh `grouplab coordinator --data-dir` process, loads it over loopback with
the project's idempotent producer (4 partitions, batches of 20 records of 100 bytes, acks=-1) and
two simple-consumer committers (each OffsetCommit covers the 4 partitions at a higher offset than
the last), and stops it (SIGSTOP) at a random moment of the crash window. Then:

- power cut (modelled, grouplab/durability/powercut.py): the data directory is copied as the disk
  would hold it if the power went at that moment: each file cut to its last synced length, each
  directory reduced to the names it had at its last sync;
- kill -9: the process is killed with SIGKILL and its own directory is left as it is.

A fresh coordinator on each directory is asked for every acknowledged record (at the offset it was
acknowledged with) and every group's committed offsets (a commit is lost if the committed offset
went below the last acknowledged one; later commits may win). Then, per profile, a cost run on a
fresh process (--cost-runs of them, the profiles in turn): --commits sequential one-partition
OffsetCommits with nothing else going on, then produce for --produce-seconds (throughput, and each batch's send-to-acknowledgement time). The
crash rounds' own OffsetCommit round trips give the commit latency while records are produced.

    scripts/bench_durability.py [--rounds 30] [--profiles defaults,fsync-never,flush-messages-1,flush-ms-1000]
                                [--crash-window 0.05-2.0] [--produce-seconds 3] [--commits 1000]
                                [--cost-runs 3] [--seed 1] [--torn] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

from grouplab.durability.load import Losses  # noqa: E402
from grouplab.durability.rounds import PROFILES, Cost, Profile, crash_round, measure_cost, percentile  # noqa: E402


@dataclass
class Tally:
    """One profile's rounds, added up."""

    rounds: int = 0
    records: int = 0
    commit_requests: int = 0
    killed: Losses = field(default_factory=Losses)
    powercut: Losses = field(default_factory=Losses)
    powercut_rounds_with_loss: int = 0
    unmodelled: int = 0
    crash_after_s: list[float] = field(default_factory=list)
    commit_ms: list[float] = field(default_factory=list)  # OffsetCommit round trips while the producer ran


async def crash_rounds(profile: Profile, args: argparse.Namespace, work: Path, rng: random.Random) -> Tally:
    tally = Tally()
    for i in range(args.rounds):
        workdir = work / profile.name / f"round-{i}"
        workdir.mkdir(parents=True)
        r = await crash_round(profile, workdir, rng, args.crash_window, torn=args.torn)
        assert r.powercut is not None and r.cut is not None
        tally.rounds += 1
        tally.records += r.ledger.record_count()
        tally.commit_requests += r.ledger.commit_requests
        tally.killed.add(r.killed)
        tally.powercut.add(r.powercut)
        tally.powercut_rounds_with_loss += bool(r.powercut.records_lost or r.powercut.commits_lost)
        tally.unmodelled += len(r.cut.unmodelled)
        tally.crash_after_s.append(r.crash_after_s)
        tally.commit_ms += r.ledger.commit_ms
        shutil.rmtree(workdir, ignore_errors=True)
        print(f"  round {i + 1:>3}: crash after {r.crash_after_s:.2f} s, {r.ledger.record_count():,} records and "
              f"{r.ledger.commit_requests} commits acknowledged; lost after kill -9 {r.killed.records_lost} / "
              f"{r.killed.commits_lost}, after the power cut {r.powercut.records_lost} / {r.powercut.commits_lost}",
              flush=True)
    return tally


async def costs(profiles: list[Profile], args: argparse.Namespace, work: Path) -> dict[str, list[Cost]]:
    """--cost-runs runs per profile, the profiles taken in turn so that a busy spell of the
    machine does not fall on one profile only."""
    runs: dict[str, list[Cost]] = {p.name: [] for p in profiles}
    for i in range(args.cost_runs):
        for profile in profiles:
            cost_dir = work / profile.name / f"cost-{i}"
            cost_dir.mkdir(parents=True)
            cost = await measure_cost(profile, cost_dir, args.produce_seconds, commits=args.commits)
            shutil.rmtree(cost_dir, ignore_errors=True)
            runs[profile.name].append(cost)
            print(f"  cost run {i + 1} of {profile.name}: {cost.records_per_s:,.0f} records/s; batch p50 "
                  f"{percentile(cost.batch_ms, 0.5):.2f} ms; commit p50 {percentile(cost.commit_ms, 0.5):.2f} ms",
                  flush=True)
    return runs


def lost(n: int, of: int) -> str:
    return f"**{n:,}** of {of:,}" if n else f"0 of {of:,}"


def tables(results: list[tuple[Profile, Tally, list[Cost]]]) -> str:
    survive = ["| profile | settings | acknowledged: records, OffsetCommits | kill -9: records lost | kill -9: "
               "commits lost | power cut (model): records lost | power cut (model): commits lost | power cut: rounds "
               "with a loss |",
               "|---|---|---:|---:|---:|---:|---:|---:|"]
    for p, t, _ in results:
        settings = ", ".join(f"`{o}`" for o in p.overrides) or "none (the defaults)"
        extra = f"; {t.unmodelled} names unmodelled" if t.unmodelled else ""
        phantom = t.killed.commits_phantom + t.powercut.commits_phantom
        extra += f"; {phantom} commits above anything sent" if phantom else ""
        survive.append(f"| {p.name} | {settings}{extra} | {t.records:,}, {t.commit_requests:,} | "
                       f"{lost(t.killed.records_lost, t.killed.records_checked)} | "
                       f"{lost(t.killed.commits_lost, t.killed.commit_keys_checked)} | "
                       f"{lost(t.powercut.records_lost, t.powercut.records_checked)} | "
                       f"{lost(t.powercut.commits_lost, t.powercut.commit_keys_checked)} | "
                       f"{t.powercut_rounds_with_loss} of {t.rounds} |")
    cost = ["| profile | produce records/s: median (range) | produce batch acknowledged p50 / p99 ms | OffsetCommit "
            "alone p50 / p99 ms | OffsetCommit while producing p50 / p99 ms |",
            "|---|---:|---:|---:|---:|"]
    for p, t, runs in results:
        if not runs:
            continue
        rates = sorted(c.records_per_s for c in runs)
        batch = [v for c in runs for v in c.batch_ms]
        commit = [v for c in runs for v in c.commit_ms]
        cost.append(f"| {p.name} | {statistics.median(rates):,.0f} ({rates[0]:,.0f}–{rates[-1]:,.0f}) | {ms(batch)} | "
                    f"{ms(commit)} | {ms(t.commit_ms)} |")
    if not any(runs for _, _, runs in results):
        return "\n".join(survive)
    return "\n".join(survive) + "\n\n" + "\n".join(cost)


def ms(values: list[float]) -> str:
    return f"{percentile(values, 0.5):.2f} / {percentile(values, 0.99):.2f}"


def window(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition("-")
    low, high = float(lo), float(hi or lo)
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError(f"expected LOW-HIGH seconds, got {text!r}")
    return low, high


async def run(args: argparse.Namespace, work: Path) -> list[tuple[Profile, Tally, list[Cost]]]:
    rng = random.Random(args.seed)
    profiles = [PROFILES[name] for name in args.profiles]
    tallies = []
    for profile in profiles:
        print(f"{profile.name}: {profile.what}", flush=True)
        tallies.append(await crash_rounds(profile, args, work, rng))
    runs = await costs(profiles, args, work)
    return [(p, t, runs[p.name]) for p, t in zip(profiles, tallies)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30, help="crash rounds per profile")
    ap.add_argument("--profiles", default=",".join(PROFILES), help=f"comma-separated, of {', '.join(PROFILES)}")
    ap.add_argument("--crash-window", type=window, default=(0.05, 2.0),
                    help="seconds after the load starts within which the crash falls, uniformly (LOW-HIGH)")
    ap.add_argument("--produce-seconds", type=float, default=3.0, help="length of the cost run's produce phase")
    ap.add_argument("--commits", type=int, default=1000, help="sequential OffsetCommits in a cost run")
    ap.add_argument("--cost-runs", type=int, default=3, help="cost runs per profile (0: none)")
    ap.add_argument("--seed", type=int, default=1, help="seeds the crash moments")
    ap.add_argument("--torn", action="store_true", help="the power cut keeps a random part of each unsynced tail")
    ap.add_argument("--dir", help="where to put the data (default: a temporary directory)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    args.profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    unknown = [p for p in args.profiles if p not in PROFILES]
    if unknown:
        ap.error(f"unknown profile {unknown[0]!r}; known: {', '.join(PROFILES)}")
    work = Path(tempfile.mkdtemp(prefix="bench-durability-", dir=args.dir))
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    try:
        results = asyncio.run(run(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    minutes = (time.perf_counter() - started) / 60
    text = tables(results)
    print()
    print(text)
    if not args.no_write:
        argv = " ".join(sys.argv[1:])
        lo, hi = args.crash_window
        header = (
            f"\n## Durability: what an acknowledged write survives ({utc_stamp()})\n\n"
            f"`scripts/bench_durability.py{' ' + argv if argv else ''}` on {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, {platform.system()} {platform.release()}; took {minutes:.1f} min; load "
            f"average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end (other jobs share the "
            f"machine: the costs are this run's, not a promise). "
            f"{args.rounds} rounds per profile, each a fresh coordinator process with a data directory under "
            f"load (one idempotent producer on 4 partitions, batches of 20 × 100 B, acks=-1; two committers, "
            f"4 partitions per OffsetCommit), stopped at a random moment {lo:g}–{hi:g} s into the load. "
            f"*kill -9*: SIGKILL, then a restart on the same directory. *power cut (model)*: a copy of the "
            f"directory holding only what had been synced at that moment (each file's last fsync'd length, each "
            f"directory's names at its last fsync{'; torn: a random part of each unsynced tail kept as well, its end zeros half the time' if args.torn else ''}), "
            f"then a restart on the copy — a model, not a real power cut (docs/durability.md). Records: every "
            f"acknowledged record checked at its offset; commits: every (group, partition)'s last acknowledged "
            f"offset checked, lost if the committed offset is below it. " + (
            f"Cost: {args.cost_runs} runs per profile, the "
            f"profiles in turn, each a fresh process: {args.commits:,} sequential one-partition OffsetCommits with "
            f"nothing else going on, then one idempotent producer on 8 partitions for {args.produce_seconds:g} s "
            f"(one batch in flight per partition); percentiles over all runs' samples; *while producing*: the round "
            f"trips of the crash rounds' 4-partition OffsetCommits." if args.cost_runs else "No cost runs.") + "\n\n")
        append_to_benchmarks(header + text)


if __name__ == "__main__":
    main()
