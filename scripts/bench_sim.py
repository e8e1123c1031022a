#!/usr/bin/env python3
"""Benchmark the deterministic simulator. Prints a table and appends it to docs/benchmarks.md.

1. One seed of scenarios/crash-storm.toml resized to 10, 100 and 1,000 members: simulated events
   and protocol messages (requests and responses sent) per second of wall time, and how much faster
   than real time the virtual time ran. The peer, side by side: the same virtual duration in real
   time, which is what a run over real sockets would take.
2. Many seeds: 1,000 seeds of crash-storm as written (10 members) and 1,000 seeds of crash-storm
   with 100 members, one process per core (the plain-Python way; the Spark sweep comes later).

    scripts/bench_sim.py [--sizes 10,100,1000] [--seeds 1000] [--workers 2] [--no-write]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

from grouplab.sim.scenario import load_scenario  # noqa: E402
from grouplab.sim.world import Simulation  # noqa: E402

SCENARIO = ROOT / "scenarios" / "crash-storm.toml"


def one_seed(members: int, seed: int = 1) -> dict:
    scenario = load_scenario(SCENARIO).with_members(members)
    t0 = time.perf_counter()
    result = Simulation(scenario, seed).run()
    wall = time.perf_counter() - t0
    s = result.stats
    return {"members": members, "ok": result.ok, "wall_s": wall, "events": s.events, "messages": s.messages_sent,
            "virtual_s": result.ended_ms / 1000, "rebalances": s.generations,
            "faults": sum(s.faults.values())}


def _run_chunk(args: tuple[int, list[int]]) -> tuple[int, int]:
    members, seeds = args
    scenario = load_scenario(SCENARIO).with_members(members)
    failed = events = 0
    for seed in seeds:
        result = Simulation(scenario, seed).run()
        failed += not result.ok
        events += result.stats.events
    return failed, events


def many_seeds(members: int, count: int, workers: int) -> dict:
    seeds = list(range(1, count + 1))
    chunks = [(members, seeds[i::workers]) for i in range(workers)]
    t0 = time.perf_counter()
    with mp.get_context("fork").Pool(workers) as pool:
        parts = pool.map(_run_chunk, chunks)
    wall = time.perf_counter() - t0
    return {"members": members, "seeds": count, "workers": workers, "wall_s": wall,
            "failed": sum(p[0] for p in parts), "events": sum(p[1] for p in parts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--seed-members", default="10,100", help="member counts for the many-seeds runs")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    rows = ["| members | wall s | virtual s | speed-up vs real time | events/s | messages/s | rebalances | faults | invariants |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for n in (int(x) for x in args.sizes.split(",")):
        r = one_seed(n)
        line = (f"| {n} | {r['wall_s']:.2f} | {r['virtual_s']:.0f} | {r['virtual_s'] / r['wall_s']:,.0f}× | "
                f"{r['events'] / r['wall_s']:,.0f} | {r['messages'] / r['wall_s']:,.0f} | {r['rebalances']} | "
                f"{r['faults']} | {'held' if r['ok'] else 'VIOLATED'} |")
        rows.append(line)
        print(line, flush=True)
    seed_rows = ["| scenario | seeds | workers | wall s | seeds/s | events/s | failed |", "|---|---:|---:|---:|---:|---:|---:|"]
    for n in (int(x) for x in args.seed_members.split(",")):
        r = many_seeds(n, args.seeds, args.workers)
        line = (f"| crash-storm, {n} members | {r['seeds']} | {r['workers']} | {r['wall_s']:.1f} | "
                f"{r['seeds'] / r['wall_s']:.1f} | {r['events'] / r['wall_s']:,.0f} | {r['failed']} |")
        seed_rows.append(line)
        print(line, flush=True)
    text = "\n".join(rows) + "\n\n" + "\n".join(seed_rows)
    print()
    print(text)
    if not args.no_write:
        stamp = utc_stamp()
        header = (f"\n## Simulator throughput ({stamp})\n\n"
                  f"`scripts/bench_sim.py --sizes {args.sizes} --seeds {args.seeds} --seed-members {args.seed_members} "
                  f"--workers {args.workers}` on {os.cpu_count()} cores, Python {platform.python_version()}. "
                  f"Scenario: scenarios/crash-storm.toml (600 s of virtual time with crashes, 1% loss and 1% "
                  f"duplication), resized. *Messages* are protocol requests and responses sent; *events* also count "
                  f"both sides' timers, reconnects and faults. The peer is real time: the same run over real sockets "
                  f"would last the virtual duration.\n\n")
        append_to_benchmarks(header + text)


if __name__ == "__main__":
    main()
