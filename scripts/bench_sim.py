#!/usr/bin/env python3
"""Benchmark the deterministic simulator. Prints a table and appends it to docs/benchmarks.md.

1. One seed of scenarios/crash-storm.toml resized to 10, 100 and 1,000 members: simulated events
   and protocol messages (requests and responses sent) per second of wall time, and how much faster
   than real time the virtual time ran. The peer, side by side: the same virtual duration in real
   time, which is what a run over real sockets would take.
2. Many seeds: 1,000 seeds of crash-storm as written (10 members) and 1,000 seeds of crash-storm
   with 100 members, one process per core (the plain-Python way; the Spark sweep comes later).

3. With --baseline REF, instead: this tree against another commit (a refactor's before and after),
   one seed per size, each tree's own code in a fresh process, the two in turn; then (unless
   --seeds 0) --seeds seeds of crash-storm as written (10 members) on --workers processes, each
   tree in turn, wall time (what `grouplab simulate --seeds 1-1000` does, split over workers).

    scripts/bench_sim.py [--sizes 10,100,1000] [--seeds 1000] [--workers 2] [--no-write]
    scripts/bench_sim.py --baseline ade2ad3 [--sizes 10,100,1000] [--rounds 3] [--seeds 1000] [--workers 2] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

from grouplab.sim.scenario import load_scenario  # noqa: E402
from grouplab.sim.world import Simulation  # noqa: E402

SCENARIO = ROOT / "grouplab" / "scenarios" / "crash-storm.toml"


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


# One seed measured in another checkout's own code, in a fresh process (for --baseline).
_MEASURE_IN_TREE = """
import json, sys, time
tree, scenario_file, members = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, tree)
import grouplab
assert grouplab.__file__.startswith(tree), grouplab.__file__
from grouplab.sim.scenario import load_scenario
from grouplab.sim.world import Simulation
scenario = load_scenario(scenario_file).with_members(members)
t0 = time.perf_counter()
stats = Simulation(scenario, 1).run().stats
print(json.dumps({"wall_s": time.perf_counter() - t0, "messages": stats.messages_sent, "events": stats.events}))
"""


# Many seeds of one scenario in another checkout's own code, over worker processes (for --baseline).
_MANY_IN_TREE = """
import json, multiprocessing as mp, sys, time
tree, scenario_file, count, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, tree)
import grouplab
assert grouplab.__file__.startswith(tree), grouplab.__file__
from grouplab.sim.scenario import load_scenario
from grouplab.sim.world import Simulation

def chunk(seeds):
    scenario = load_scenario(scenario_file)
    failed = messages = 0
    for seed in seeds:
        result = Simulation(scenario, seed).run()
        failed += not result.ok
        messages += result.stats.messages_sent
    return failed, messages

seeds = list(range(1, count + 1))
t0 = time.perf_counter()
with mp.get_context("fork").Pool(workers) as pool:
    parts = pool.map(chunk, [seeds[i::workers] for i in range(workers)])
print(json.dumps({"wall_s": time.perf_counter() - t0, "failed": sum(p[0] for p in parts),
                  "messages": sum(p[1] for p in parts)}))
"""


def _many_in(tree: Path, count: int, workers: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _MANY_IN_TREE, str(tree), str(SCENARIO), str(count), str(workers)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def _measure_in(tree: Path, members: int) -> dict:
    # Both trees read this tree's scenario file: the same inputs (scenarios/ moved under grouplab/).
    out = subprocess.run([sys.executable, "-c", _MEASURE_IN_TREE, str(tree), str(SCENARIO), str(members)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def versus_baseline(ref: str, sizes: list[int], rounds: int, seeds: int = 0, workers: int = 2) -> str:
    """This tree against git `ref`, one seed per size, the two in turn `rounds` times (A B A B ...,
    so a drifting machine hurts both alike); each side's best run counts. With `seeds`: that many
    seeds of the scenario as written on `workers` processes, each tree in turn, best of `rounds`."""
    with tempfile.TemporaryDirectory(prefix="bench-sim-base-") as tmp:
        base = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(base), ref], check=True)
        try:
            rows = [f"| members | messages | {ref} messages/s | this tree messages/s | ratio |", "|---:|---:|---:|---:|---:|"]
            for n in sizes:
                best: dict[str, dict] = {}
                for _ in range(rounds):
                    for side, tree in (("base", base), ("this", ROOT)):
                        r = _measure_in(tree, n)
                        if side not in best or r["wall_s"] < best[side]["wall_s"]:
                            best[side] = r
                b, t = best["base"], best["this"]
                same = "" if (b["messages"], b["events"]) == (t["messages"], t["events"]) else " (runs differ!)"
                b_rate, t_rate = b["messages"] / b["wall_s"], t["messages"] / t["wall_s"]
                line = f"| {n} | {t['messages']:,}{same} | {b_rate:,.0f} | {t_rate:,.0f} | {t_rate / b_rate:.2f}× |"
                rows.append(line)
                print(line, flush=True)
            if seeds:
                many: dict[str, dict] = {}
                for _ in range(rounds):
                    for side, tree in (("base", base), ("this", ROOT)):
                        r = _many_in(tree, seeds, workers)
                        if side not in many or r["wall_s"] < many[side]["wall_s"]:
                            many[side] = r
                b, t = many["base"], many["this"]
                rows += ["", f"| {seeds:,} seeds of crash-storm (10 members), {workers} workers | {ref} wall s | "
                             f"this tree wall s | ratio | failed seeds ({ref} / this tree) |",
                         "|---|---:|---:|---:|---:|",
                         f"| messages: {t['messages']:,}" + ("" if b["messages"] == t["messages"] else
                                                             f" ({ref}: {b['messages']:,})")
                         + f" | {b['wall_s']:.1f} | {t['wall_s']:.1f} | {b['wall_s'] / t['wall_s']:.2f}× | "
                           f"{b['failed']} / {t['failed']} |"]
                print("\n".join(rows[-3:]), flush=True)
            return "\n".join(rows)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--seed-members", default="10,100", help="member counts for the many-seeds runs")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--baseline", metavar="REF", help="instead: this tree against git REF, one seed per size")
    ap.add_argument("--rounds", type=int, default=3, help="with --baseline: runs of each side per size (best counts)")
    args = ap.parse_args()
    if args.baseline:
        sizes = [int(x) for x in args.sizes.split(",")]
        text = versus_baseline(args.baseline, sizes, args.rounds, args.seeds, args.workers)
        print()
        print(text)
        if not args.no_write:
            append_to_benchmarks(
                f"\n## Simulator throughput against {args.baseline} ({utc_stamp()})\n\n"
                f"`scripts/bench_sim.py --baseline {args.baseline} --sizes {args.sizes} --rounds {args.rounds} "
                f"--seeds {args.seeds} --workers {args.workers}` on "
                f"{os.cpu_count()} cores, Python {platform.python_version()}: one seed of "
                f"grouplab/scenarios/crash-storm.toml resized (both trees read this tree's file), each tree's own "
                f"code in a fresh process, the two in turn, each side's best of {args.rounds} runs (wall time). "
                f"*Messages* are protocol requests and responses sent; a row says when the two trees' runs differ "
                f"(the same inputs, but the trees' machines behave differently since). Then the scenario as "
                f"written over {args.seeds} seeds on {args.workers} worker processes, each tree in turn.\n\n" + text)
        return

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
