#!/usr/bin/env python3
"""Benchmark: the KIP-848 server-side assignors (uniform, range) at issue 23's sizes. Prints a table
and appends it to docs/benchmarks.md.

Inputs as Kafka's JMH ServerSideAssignorBenchmark builds them: --topics topics (default 100) of
partitions / topics partitions each; homogeneous = every member on every topic; heterogeneous =
5 buckets, bucket b's members (a fifth of them, in order) on bucket b's topics (a fifth).

  first  one assignment from scratch;
  leave  every 10th member leaves, the rest carry their first assignment as current (`assignment`);
  moved  partitions whose owner after the leave differs from their first owner;
  bound  what the departed members held, plus what a remaining member held above the new max quota
         (the least any balanced assignment must move; homogeneous only).

Each time is the best of --repeat calls (a single call on this shared machine is noise). Kafka's
figures are the issue's: its Java assignors at 10,000 × 100,000 on these 2-core machines; ratio =
ours / Kafka's.

    scripts/bench_server_assignors.py [--sizes 1000x10000,5000x50000,10000x100000] [--topics 100]
                                      [--repeat 3] [--no-write] [--profile SIZE]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import platform
import pstats
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(Path(__file__).resolve().parent))
from _bench import append_to_benchmarks, parse_sizes, utc_stamp  # noqa: E402

from grouplab.coordinator.server_assignors import MemberSpec, TargetAssignment, server_assignor  # noqa: E402

DEFAULT_SIZES = "1000x10000,5000x50000,10000x100000"
BUCKETS = 5  # Kafka's MAX_BUCKET_COUNT
# The figures for Kafka's Java assignors at 10,000 × 100,000 (ms): (assignor, shape, round).
KAFKA_MS = {("uniform", "homogeneous", "first"): 12, ("uniform", "homogeneous", "leave"): 29,
            ("uniform", "heterogeneous", "first"): 244, ("uniform", "heterogeneous", "leave"): 219,
            ("range", "homogeneous", "first"): 17, ("range", "homogeneous", "leave"): 15}
KAFKA_SIZE = (10_000, 100_000)


def group(shape: str, members: int, partitions: int, topics: int) -> tuple[dict[str, MemberSpec], dict[str, int]]:
    width = len(str(topics - 1))
    names = [f"topic{t:0{width}d}" for t in range(topics)]
    per_topic = {t: partitions // topics for t in names}
    ids = [f"member{i:05d}" for i in range(members)]
    if shape == "homogeneous":
        everything = frozenset(names)
        return {m: MemberSpec(everything) for m in ids}, per_topic
    topics_per_bucket = -(-topics // BUCKETS)
    members_per_bucket = -(-members // BUCKETS)
    specs = {}
    for i, m in enumerate(ids):
        b = i // members_per_bucket
        specs[m] = MemberSpec(frozenset(names[b * topics_per_bucket:(b + 1) * topics_per_bucket]))
    return specs, per_topic


def timed(name: str, members: dict[str, MemberSpec], topics: dict[str, int], repeat: int) -> tuple[float, TargetAssignment]:
    best, result = float("inf"), {}
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = server_assignor(name).assign(members, topics)
        best = min(best, time.perf_counter() - start)
    return best, result


def owners(result: TargetAssignment) -> dict[tuple[str, int], str]:
    return {(t, p): m for m, got in result.items() for t, ps in got.items() for p in ps}


def check(members: dict[str, MemberSpec], topics: dict[str, int], result: TargetAssignment) -> str:
    own = owners(result)
    wanted = sum(topics[t] for t in set().union(*(s.subscribed_topics for s in members.values())))
    if sum(len(ps) for got in result.values() for ps in got.values()) != len(own) or len(own) != wanted:
        return "INVALID"
    return "ok"


def bound(first: TargetAssignment, stay: list[str], partitions: int) -> int:
    most = -(-partitions // len(stay))
    kept = set(stay)
    left = sum(sum(len(ps) for ps in got.values()) for m, got in first.items() if m not in kept)
    excess = sum(max(0, sum(len(ps) for ps in first[m].values()) - most) for m in stay)
    return left + excess


def run(sizes: list[tuple[int, int]], n_topics: int, repeat: int) -> list[list[str]]:
    rows = []
    for name in ("uniform", "range"):
        for shape in ("homogeneous", "heterogeneous"):
            for m, p in sizes:
                members, topics = group(shape, m, p, n_topics)
                t_first, first = timed(name, members, topics, repeat)
                ok_first = check(members, topics, first)
                ids = sorted(members)
                stay = [x for i, x in enumerate(ids) if i % 10 != 9]
                after = {x: MemberSpec(members[x].subscribed_topics, first[x]) for x in stay}
                t_leave, second = timed(name, after, topics, repeat)
                ok_leave = check(after, topics, second)
                before, now = owners(first), owners(second)
                moved = sum(1 for tp, o in now.items() if before.get(tp) != o)
                least = str(bound(first, stay, p)) if shape == "homogeneous" else "-"
                for round_, secs, ok in (("first", t_first, ok_first), ("leave", t_leave, ok_leave)):
                    kafka = KAFKA_MS.get((name, shape, round_)) if (m, p) == KAFKA_SIZE else None
                    ms = secs * 1000
                    rows.append([name, shape, f"{m:,} × {p:,}", round_, f"{ms:,.0f}",
                                 f"{kafka}" if kafka else "-", f"{ms / kafka:.1f}×" if kafka else "-",
                                 f"{moved:,}" if round_ == "leave" else "-",
                                 f"{int(least):,}" if round_ == "leave" and least != "-" else "-", ok])
                    print(" | ".join(rows[-1]), flush=True)
    return rows


def table(rows: list[list[str]]) -> str:
    head = ["assignor", "subscriptions", "members × partitions", "round", "ms", "Kafka ms", "ratio", "moved",
            "bound", "check"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes(DEFAULT_SIZES))
    ap.add_argument("--topics", type=int, default=100, help="topics (Kafka's JMH: 10, 100 or 1000)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--profile", metavar="ASSIGNOR:SHAPE:MxP", help="cProfile one first assignment and stop")
    args = ap.parse_args()
    if args.profile:
        name, shape, size = args.profile.split(":")
        (m, p), = parse_sizes(size)
        members, topics = group(shape, m, p, args.topics)
        prof = cProfile.Profile()
        prof.runcall(server_assignor(name).assign, members, topics)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(15)
        return
    rows = run(args.sizes, args.topics, args.repeat)
    text = table(rows)
    print()
    print(text)
    if not args.no_write:
        command = shlex.join(["scripts/bench_server_assignors.py", *sys.argv[1:]])
        load = "load average at the end %.2f / %.2f / %.2f (1 / 5 / 15 min)" % os.getloadavg()
        header = (f"\n## Server-side assignors, KIP-848 uniform and range ({utc_stamp()})\n\n"
                  f"`{command}` on {os.cpu_count()} cores, {load}, Python {platform.python_version()}. "
                  f"{args.topics} topics of partitions / {args.topics} each; homogeneous = every member on every "
                  f"topic, heterogeneous = {BUCKETS} buckets of members each on its own fifth of the topics (as "
                  f"Kafka's JMH ServerSideAssignorBenchmark); leave = every 10th member leaves, the rest carry "
                  f"their first assignment; best of {args.repeat}. Kafka ms = the issue's figures for Kafka's "
                  f"Java assignors at 10,000 × 100,000 on these machines; ratio = ours / Kafka's (aim: ≤ 10×). "
                  f"moved = owner changed by the leave; bound = the least a balanced assignment must move (a sticky one; Kafka 4's range reads no current assignment and makes no such claim).\n\n")
        append_to_benchmarks(header + text)


if __name__ == "__main__":
    main()
