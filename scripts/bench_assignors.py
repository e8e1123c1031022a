#!/usr/bin/env python3
"""Benchmark: how fast each assignor assigns, and how many partitions move when 10% of the group
leaves. Prints a table and appends it to docs/benchmarks.md.

Subscription shapes (--shapes):
  equal  every member subscribes to every topic (partitions spread over 10 topics);
  half   each member subscribes to a random half of the topics (seeded; 100 topics at 2,000 ×
         100,000 as in issue 15, else 10);
  mod3   10 topics; member i subscribes to topic t unless (i + t) % 3 == 0.
The unequal shapes run the sticky assignors only (range and roundrobin make no balance claim there).

For every assignor, shape and size (members × partitions):

  round 1  one assignment from scratch (no history);
  round 2  every 10th member leaves; the rest rejoin owning their round-1 partitions
           (owned_partitions + generation_id=1, and for the eager `sticky` also in user_data);
  moved    partitions whose round-2 owner differs from their round-1 owner;
  bound    what the departed members owned, plus whatever a remaining member held above the new
           max quota ceil(P/M'): the least that any balanced assignment must move (with equal
           subscriptions; with unequal ones a guide, not a bound);
  round 3  cooperative-sticky only: the partitions it withheld in round 2 (their previous owner
           must revoke them first) are handed out in a follow-up rebalance; where they land is
           reported in the notes.

Side by side, in the same run, the peer: kafka-python's StickyPartitionAssignor on the same
inputs (round 2 gets grouplab's round-1 sticky assignment as each member's previous assignment,
in kafka-python's user-data format). Each peer measurement runs in its own process with a time
limit (default 60 s) and a memory limit; its result is checked (every partition exactly once)
before its time is reported.

    scripts/bench_assignors.py [--sizes 100x1000,1000x10000,2000x100000] [--repeat 5]
                               [--shapes equal,half,mod3] [--unequal-sizes 1000x10000,2000x100000]
                               [--peer-timeout 60] [--no-peer] [--no-write] [--baseline DIR]

--baseline DIR also times the assignors of another grouplab tree (say, main's worktree) on the same
inputs, so a change is compared with what it replaces in the same run: this tree and DIR each in a
fresh process, alternately --baseline-runs times (the best of each kept), so both see the same
machine; the machine this runs on is shared and loaded, and back-to-back runs differ by half.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import multiprocessing as mp
import os
import platform
import queue
import random
import shlex
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

ROOT = Path(__file__).resolve().parent.parent
# A --baseline child imports the assignors of the tree it measures, not this one.
sys.path.insert(0, os.environ.get("GROUPLAB_BENCH_TREE", str(ROOT)))
sys.path.insert(1, str(Path(__file__).resolve().parent))
from _bench import append_to_benchmarks, parse_sizes, utc_stamp  # noqa: E402

from grouplab.consumer.assignors import get_assignor  # noqa: E402
from grouplab.protocol.types import Subscription, TopicPartition  # noqa: E402

ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]
STICKY = {"sticky", "cooperative-sticky"}
DEFAULT_SIZES = "100x1000,1000x10000,2000x100000"
DEFAULT_UNEQUAL_SIZES = "1000x10000,2000x100000"
SHAPES = ["equal", "half", "mod3"]
TOPICS = 10
SMALL = 10_000  # sizes with at most this many partitions are timed --repeat times, best kept
LARGE_REPEAT = 3  # larger sizes: the best of 3 (one call costs under a second; a single timing on a
                  # shared machine is noise: 0.12 s in one run where the same call takes 0.05-0.07 s alone)
PEER_SMALL = 1_000  # the peer (minutes per call at 10,000) is timed --repeat times only up to this

Owners = dict[TopicPartition, str]


# ----------------------------------------------------------------------------- inputs


def topic_count(shape: str, members: int, partitions: int) -> int:
    """Issue 15's shapes: a random half of 100 topics of 1,000 at 2,000 × 100,000; else 10 topics."""
    return 100 if shape == "half" and partitions >= 100_000 else TOPICS


def topic_sizes(partitions: int, topics: int = TOPICS) -> dict[str, int]:
    """`partitions` spread over `topics` topics, as evenly as possible."""
    per, extra = divmod(partitions, topics)
    width = len(str(topics - 1))
    return {f"topic-{t:0{width}d}": per + (1 if t < extra else 0) for t in range(topics)}


def subscribed_topics(shape: str, members: list[str], topics: list[str]) -> dict[str, list[str]]:
    """Each member's topics for a shape."""
    if shape == "equal":
        return {m: list(topics) for m in members}
    if shape == "half":
        rnd = random.Random(15)
        return {m: sorted(rnd.sample(topics, len(topics) // 2)) for m in members}
    if shape == "mod3":
        return {m: [t for j, t in enumerate(topics) if (i + j) % 3] for i, m in enumerate(members)}
    raise ValueError(f"unknown shape {shape!r}")


def member_ids(n: int) -> list[str]:
    return [f"member-{i:05d}" for i in range(n)]  # zero-padded: member order is index order


def departing(members: list[str]) -> list[str]:
    """The deterministic 10%: every 10th member (the 10th, 20th, ...)."""
    return members[9::10]


def fmt_size(m: int, p: int) -> str:
    return f"{m:,} × {p:,}"


# ----------------------------------------------------------------------------- checks


def owners_of(result: Mapping[str, list[TopicPartition]], members: list[str], ppt: Mapping[str, int],
              complete: bool = True) -> tuple[Owners, list[str]]:
    """partition -> owner, and what is wrong with the assignment (duplicates, unknown partitions,
    missing members, and — when `complete` — unassigned partitions)."""
    problems: list[str] = []
    owner: Owners = {}
    dup = bad = 0
    for m, parts in result.items():
        for tp in parts:
            if not 0 <= tp.partition < ppt.get(tp.topic, 0):
                bad += 1
            elif tp in owner:
                dup += 1
            else:
                owner[tp] = m
    missing_members = set(members) - set(result)
    extra_members = set(result) - set(members)
    total = sum(ppt.values())
    if dup:
        problems.append(f"{dup} assigned twice")
    if bad:
        problems.append(f"{bad} unknown partitions")
    if missing_members:
        problems.append(f"{len(missing_members)} members missing from result")
    if extra_members:
        problems.append(f"{len(extra_members)} non-members in result")
    if complete and len(owner) != total:
        problems.append(f"{total - len(owner)} unassigned")
    return owner, problems


def unbalanced_topics(result: Mapping[str, list[TopicPartition]], topics_of: Mapping[str, list[str]]) -> int:
    """Topics where some owner has at least two more partitions than some subscriber (the balance
    rule for unequal subscriptions), in one pass per topic."""
    count = {m: len(ps) for m, ps in result.items()}
    most: dict[str, int] = {}
    for m, ps in result.items():
        for tp in ps:
            most[tp.topic] = max(most.get(tp.topic, 0), count[m])
    fewest: dict[str, int] = {}
    for m, ts in topics_of.items():
        for t in ts:
            fewest[t] = min(fewest.get(t, count[m]), count[m])
    return sum(1 for t, c in most.items() if c > fewest.get(t, c) + 1)


def spread(result: Mapping[str, list[TopicPartition]]) -> tuple[int, int]:
    counts = [len(ps) for ps in result.values()]
    return (min(counts), max(counts)) if counts else (0, 0)


def moved_count(before: Owners, after: Owners) -> int:
    """Partitions that have an owner after and it is not their owner before."""
    return sum(1 for tp, m in after.items() if before.get(tp) != m)


def stickiness_bound(prev: Mapping[str, list[TopicPartition]], gone: list[str], remaining: list[str],
                     total: int) -> int:
    """Departed members' partitions, plus each remaining member's excess over the new max quota."""
    quota = math.ceil(total / len(remaining))
    return sum(len(prev[m]) for m in gone) + sum(max(0, len(prev[m]) - quota) for m in remaining)


def best_time(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, result = math.inf, None
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


# ----------------------------------------------------------------------------- grouplab


@dataclass
class Row:
    assignor: str
    shape: str
    size: tuple[int, int]
    r1: float
    r2: float
    moved: int
    withheld: int
    bound: int
    ok: bool | None  # None: not a sticky assignor, no claim to check
    notes: list[str] = field(default_factory=list)
    peer: "PeerPair | None" = None
    baseline: tuple[float, float] | str | None = None  # (round 1 s, round 2 s), or why not
    this_tree: tuple[float, float] | str | None = None  # the same, measured like the baseline


def bench_grouplab(name: str, shape: str, members_n: int, partitions: int, repeats: int,
                   r1_cache: dict[str, Mapping[str, list[TopicPartition]]]) -> Row:
    ppt = topic_sizes(partitions, topic_count(shape, members_n, partitions))
    members = member_ids(members_n)
    topics_of = subscribed_topics(shape, members, sorted(ppt))
    gone = departing(members)
    remaining = [m for m in members if m not in set(gone)]
    assignor = get_assignor(name)
    notes: list[str] = []

    # round 1: from scratch
    subs1 = {m: Subscription(topics=list(topics_of[m])) for m in members}
    r1_time, r1 = best_time(lambda: get_assignor(name).assign(ppt, subs1), repeats)
    owner1, problems = owners_of(r1, members, ppt)
    if problems:
        notes.append("round 1 INVALID: " + ", ".join(problems))
    r1_cache[name] = r1

    # round 2: every 10th member gone, the rest rejoin with what they own
    subs2 = {m: Subscription(topics=list(topics_of[m]), user_data=assignor.subscription_user_data(r1[m], 1),
                             owned_partitions=list(r1[m]), generation_id=1) for m in remaining}
    r2_time, r2 = best_time(lambda: get_assignor(name).assign(ppt, subs2), repeats)
    cooperative = name == "cooperative-sticky"
    owner2, problems = owners_of(r2, remaining, ppt, complete=not cooperative)
    if problems:
        notes.append("round 2 INVALID: " + ", ".join(problems))
    moved = moved_count(owner1, owner2)
    withheld = partitions - len(owner2) if cooperative else 0
    bound = stickiness_bound(r1, gone, remaining, partitions)
    lo, hi = spread(r2)
    notes.append(f"round-2 counts {lo}–{hi}")
    equal = shape == "equal"
    if name in STICKY and not cooperative and (hi - lo > 1 if equal else unbalanced_topics(r2, {m: topics_of[m] for m in remaining})):
        notes.append("round 2 UNBALANCED")
    if name in STICKY and not equal and moved + withheld > bound:
        notes.append(f"moved {moved + withheld - bound:,} more than the guide")

    ok: bool | None = None
    if name in STICKY:
        ok = ((moved + withheld <= bound or not equal)
              and not any("INVALID" in n or "UNBALANCED" in n for n in notes))

    if cooperative:
        # round 3: the follow-up rebalance after the owners revoked what was withheld
        target = get_assignor(name).compute(ppt, subs2).assignment  # type: ignore[attr-defined]  # before withholding
        target_owner, _ = owners_of(target, remaining, ppt)
        subs3 = {m: Subscription(topics=list(topics_of[m]), owned_partitions=list(r2[m]), generation_id=2)
                 for m in remaining}
        r3_time, r3 = best_time(lambda: get_assignor(name).assign(ppt, subs3), repeats)
        owner3, problems = owners_of(r3, remaining, ppt)
        lo3, hi3 = spread(r3)
        withheld_tps = [tp for tp in owner1 if tp not in owner2]
        to_target = sum(1 for tp in withheld_tps if owner3.get(tp) == target_owner.get(tp))
        revoked3 = sum(1 for m in remaining for tp in r2[m] if owner3.get(tp) != m)
        total3 = moved_count(owner1, owner3)
        landed = (f"the {withheld:,} withheld: {to_target:,} to their round-2 target owner" if withheld
                  else "nothing was withheld")
        notes.append(f"round 3 ({fmt_s(r3_time)} s): {landed}, {revoked3:,} further revocations, "
                     f"total moved since round 1 {total3:,}, counts {lo3}–{hi3}")
        if problems:
            notes.append("round 3 INVALID: " + ", ".join(problems))
        unbalanced3 = hi3 - lo3 > 1 if equal else unbalanced_topics(r3, {m: topics_of[m] for m in remaining}) > 0
        if problems or unbalanced3 or (equal and (revoked3 or total3 > bound or to_target != len(withheld_tps))):
            ok = False
    return Row(name, shape, (members_n, partitions), r1_time, r2_time, moved, withheld, bound, ok, notes)


def measure_only(name: str, shape: str, members_n: int, partitions: int, repeats: int) -> tuple[float, float]:
    """Round 1 and round 2 times of this process's assignors (a --baseline child)."""
    ppt = topic_sizes(partitions, topic_count(shape, members_n, partitions))
    members = member_ids(members_n)
    topics_of = subscribed_topics(shape, members, sorted(ppt))
    gone = set(departing(members))
    assignor = get_assignor(name)
    subs1 = {m: Subscription(topics=list(topics_of[m])) for m in members}
    r1_time, r1 = best_time(lambda: get_assignor(name).assign(ppt, subs1), repeats)
    subs2 = {m: Subscription(topics=list(topics_of[m]), user_data=assignor.subscription_user_data(r1[m], 1),
                             owned_partitions=list(r1[m]), generation_id=1) for m in members if m not in gone}
    r2_time, _ = best_time(lambda: get_assignor(name).assign(ppt, subs2), repeats)
    return r1_time, r2_time


def run_pair(tree: str, name: str, shape: str, members_n: int, partitions: int, repeats: int, timeout_s: float,
             runs: int) -> tuple[tuple[float, float] | str, tuple[float, float] | str]:
    """(baseline, this tree): each measured in a fresh process, alternately, best of `runs`."""
    best: dict[str, tuple[float, float] | str] = {}
    for _ in range(runs):
        for key, where in (("base", tree), ("this", str(ROOT))):
            got = run_baseline(where, name, shape, members_n, partitions, repeats, timeout_s)
            old = best.get(key)
            if isinstance(got, str) or old is None or isinstance(old, str):
                best[key] = got if old is None or isinstance(old, str) else old
            else:
                best[key] = (min(old[0], got[0]), min(old[1], got[1]))
    return best["base"], best["this"]


def run_baseline(tree: str, name: str, shape: str, members_n: int, partitions: int, repeats: int,
                 timeout_s: float) -> tuple[float, float] | str:
    env = dict(os.environ, GROUPLAB_BENCH_TREE=tree)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--measure", f"{name},{shape},{members_n},{partitions}",
           "--repeat", str(repeats)]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"did not finish in {timeout_s:g} s"
    if done.returncode != 0:
        return "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:120]
    r1, r2 = json.loads(done.stdout.strip().splitlines()[-1])
    return float(r1), float(r2)


# ----------------------------------------------------------------------------- the peer


@dataclass
class PeerRun:
    seconds: float | None = None  # best time, when it finished and its result was valid
    failure: str | None = None  # why there is no time
    moved: int | None = None


@dataclass
class PeerPair:
    r1: PeerRun
    r2: PeerRun


def _peer_child(out: mp.Queue, ppt: dict[str, int], topics_of: dict[str, list[str]], previous: dict[str, list] | None,
                generation: int, repeats: int, mem_bytes: int, owner_before: Owners | None) -> None:
    """Runs in its own process: builds the peer's inputs, times its assign, checks the result."""
    import logging
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        from collections import namedtuple

        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        from kafka.structs import TopicPartition as KafkaTP

        class Cluster:
            """The two calls the assignor makes on ClusterMetadata."""

            def topics(self) -> set[str]:
                return set(ppt)

            def partitions_for_topic(self, topic: str) -> set[int] | None:
                return set(range(ppt[topic])) if topic in ppt else None

        Member = namedtuple("Member", "member_id group_instance_id metadata")  # JoinGroupResponseMember
        members = list(topics_of)

        def subscription(member: str):
            parts = None if previous is None else [KafkaTP(tp.topic, tp.partition) for tp in previous[member]]
            sub = StickyPartitionAssignor._metadata(topics_of[member], parts, generation)
            # What the leader receives is bytes: encode user data as a member would put it on the wire.
            if sub.user_data and not isinstance(sub.user_data, bytes):
                sub.user_data = sub.user_data.encode()
            return sub

        subs = {m: subscription(m) for m in members}
        as_list = [Member(m, None, subs[m]) for m in members]

        def assign():
            return StickyPartitionAssignor().assign(Cluster(), as_list)

        # kafka-python 3.x takes a list of JoinGroupResponseMember; 2.x took {member_id: metadata}.
        # Decide on a probe with one member and one partition, outside the timing (a probe on the
        # real topics would be slow itself: the peer is quadratic in partitions per member).
        class Tiny:
            def topics(self) -> set[str]:
                return {"probe"}

            def partitions_for_topic(self, topic: str) -> set[int] | None:
                return {0} if topic == "probe" else None

        try:
            StickyPartitionAssignor().assign(Tiny(), [Member("probe", None, StickyPartitionAssignor._metadata(["probe"], None))])
        except (AttributeError, TypeError):
            def assign():  # noqa: F811
                return StickyPartitionAssignor.assign(Cluster(), subs)

        out.put(("ready",))
        result = None
        best = math.inf
        for _ in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            result = assign()
            elapsed = time.perf_counter() - t0
            best = min(best, elapsed)
            out.put(("timed", elapsed))
        converted = {m: [TopicPartition(tp.topic, tp.partition) for tp in a.partitions()] for m, a in result.items()}
        owner, problems = owners_of(converted, members, ppt)
        moved = moved_count(owner_before, owner) if owner_before is not None else None
        out.put(("checked", best, problems, moved))
    except MemoryError:
        out.put(("failed", f"out of memory (limit {mem_bytes / 2**30:.0f} GiB)"))
    except BaseException as e:  # noqa: BLE001 - report anything, the parent decides
        out.put(("failed", f"error: {type(e).__name__}: {e}"[:200]))


def run_peer(ppt: dict[str, int], topics_of: dict[str, list[str]], previous: dict[str, list] | None, generation: int,
             repeats: int, timeout_s: float, mem_bytes: int, owner_before: Owners | None) -> PeerRun:
    ctx = mp.get_context("fork")  # the child inherits the inputs instead of unpickling them
    out: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_peer_child, daemon=True,
                       args=(out, ppt, topics_of, previous, generation, repeats, mem_bytes, owner_before))
    proc.start()

    def get(limit: float):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                return out.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                if not proc.is_alive():
                    try:
                        return out.get(timeout=1.0)
                    except queue.Empty:
                        return ("failed", f"peer process died (exit code {proc.exitcode})")
        return None

    try:
        msg = get(600)  # building the inputs is not timed
        if msg is None or msg[0] != "ready":
            return PeerRun(failure=msg[1] if msg else "inputs not ready in 600 s")
        for _ in range(repeats):
            msg = get(timeout_s)
            if msg is None:
                return PeerRun(failure=f"did not finish in {timeout_s:g} s")
            if msg[0] != "timed":
                return PeerRun(failure=msg[1])
        msg = get(600)
        if msg is None or msg[0] != "checked":
            return PeerRun(failure=msg[1] if msg else "result not checked in 600 s")
        _, best, problems, moved = msg
        if problems:
            return PeerRun(failure="invalid result: " + ", ".join(problems), moved=moved)
        return PeerRun(seconds=best, moved=moved)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)


def bench_peer(shape: str, members_n: int, partitions: int, repeats: int, timeout_s: float, mem_bytes: int,
               sticky_r1: Mapping[str, list[TopicPartition]]) -> PeerPair:
    ppt = topic_sizes(partitions, topic_count(shape, members_n, partitions))
    members = member_ids(members_n)
    topics_of = subscribed_topics(shape, members, sorted(ppt))
    gone = set(departing(members))
    remaining = [m for m in members if m not in gone]
    owner1, _ = owners_of(sticky_r1, members, ppt)
    r1 = run_peer(ppt, topics_of, None, -1, repeats, timeout_s, mem_bytes, None)
    print(f"    peer round 1: {fmt_peer(r1)}", flush=True)
    previous = {m: list(sticky_r1[m]) for m in remaining}
    r2 = run_peer(ppt, {m: topics_of[m] for m in remaining}, previous, 1, repeats, timeout_s, mem_bytes, owner1)
    print(f"    peer round 2: {fmt_peer(r2)}" + (f", moved {r2.moved:,}" if r2.moved is not None else ""), flush=True)
    return PeerPair(r1, r2)


# ----------------------------------------------------------------------------- output


def fmt_s(t: float) -> str:
    if t >= 100:
        return f"{t:,.0f}"
    if t >= 10:
        return f"{t:.1f}"
    if t >= 1:
        return f"{t:.2f}"
    if t <= 0:
        return "0"
    return f"{t:.{2 - math.floor(math.log10(t))}f}"  # three significant digits, no exponent


def fmt_peer(run: PeerRun) -> str:
    return fmt_s(run.seconds) if run.seconds is not None else run.failure or "-"


def speedup(ours: float, peer: PeerRun, timeout_s: float) -> tuple[float | None, str]:
    """(factor or lower bound, text). A timed-out peer gives a lower bound: timeout / ours."""
    if peer.seconds is not None:
        f = peer.seconds / ours
        return f, f"{f:,.0f}×" if f >= 10 else f"{f:.1f}×"
    if peer.failure and peer.failure.startswith("did not finish"):
        f = timeout_s / ours
        return f, f"> {f:,.0f}×"
    return None, "-"


def fmt_baseline(b: tuple[float, float] | str | None) -> str:
    if b is None:
        return "-"
    if isinstance(b, str):
        return b
    return f"{fmt_s(b[0])} / {fmt_s(b[1])}"


def table(rows: list[Row], timeout_s: float, baseline: bool = False) -> str:
    base_head, base_rule = (" this tree r1 / r2 s (paired) | baseline r1 / r2 s (paired) |", "---:|---:|") if baseline else ("", "")
    out = [f"| assignor | subscriptions | members × partitions | round-1 s | round-2 s |{base_head} moved | bound | ok | "
           "peer round-1 s | peer round-2 s | speed-up vs peer (r1 / r2) | notes |",
           f"|---|---|---|---:|---:|{base_rule}---:|---:|:-:|---:|---:|---:|---|"]
    for r in rows:
        moved = f"{r.moved:,}" + (f" + {r.withheld:,} withheld" if r.assignor == "cooperative-sticky" else "")
        ok = "-" if r.ok is None else ("yes" if r.ok else "**NO**")
        if r.peer is not None:
            p1, p2 = fmt_peer(r.peer.r1), fmt_peer(r.peer.r2)
            s = f"{speedup(r.r1, r.peer.r1, timeout_s)[1]} / {speedup(r.r2, r.peer.r2, timeout_s)[1]}"
            notes = r.notes + ([f"peer moved {r.peer.r2.moved:,}"] if r.peer.r2.moved is not None else [])
        else:
            p1 = p2 = s = "-"
            notes = r.notes
        base = f" {fmt_baseline(r.this_tree)} | {fmt_baseline(r.baseline)} |" if baseline else ""
        out.append(f"| {r.assignor} | {SHAPE_LABELS[r.shape]} | {fmt_size(*r.size)} | {fmt_s(r.r1)} | {fmt_s(r.r2)} |{base} "
                   f"{moved} | {r.bound:,} | "
                   f"{ok} | {p1} | {p2} | {s} | {'; '.join(notes)} |")
    return "\n".join(out)


SHAPE_LABELS = {"equal": "equal", "half": "random half", "mod3": "(i + t) % 3 ≠ 0"}


def targets(rows: list[Row], timeout_s: float, peer_enabled: bool) -> list[str]:
    lines = []
    big = (2000, 100000)
    for shape in ("half", "mod3"):
        for name in ("sticky", "cooperative-sticky"):
            found = [r for r in rows if r.assignor == name and r.shape == shape and r.size == big]
            label = f"{name} {fmt_size(*big)} {SHAPE_LABELS[shape]} under 4 s per call"
            if not found:
                lines.append(f"- {label}: not measured")
                continue
            worst = max(found[0].r1, found[0].r2)
            lines.append(f"- {label}: {'MET' if worst < 4 else 'NOT MET'} "
                         f"(round 1 {fmt_s(found[0].r1)} s, round 2 {fmt_s(found[0].r2)} s)")
    for r in rows:
        if r.shape == "equal" and r.size == big and r.assignor in STICKY:
            lines.append(f"- {r.assignor} {fmt_size(*big)} equal round 1 under 0.1 s (aim): "
                         f"{'MET' if r.r1 < 0.1 else 'NOT MET'} ({fmt_s(r.r1)} s)")
    sticky = {r.size: r for r in rows if r.assignor == "sticky" and r.shape == "equal"}
    for size, limit in (((1000, 10000), 1.0), ((2000, 100000), 10.0)):
        r = sticky.get(size)
        if r is None:
            lines.append(f"- sticky {fmt_size(*size)} under {limit:g} s: not measured (size not selected)")
        else:
            worst = max(r.r1, r.r2)
            lines.append(f"- sticky {fmt_size(*size)} under {limit:g} s: {'MET' if worst < limit else 'NOT MET'} "
                         f"(round 1 {fmt_s(r.r1)} s, round 2 {fmt_s(r.r2)} s)")
    if not peer_enabled:
        lines.append("- sticky at least 10× faster than the peer: not measured (--no-peer)")
        return lines
    verdicts = []
    for r in sticky.values():
        if r.peer is None:
            continue
        for label, ours, peer in (("round 1", r.r1, r.peer.r1), ("round 2", r.r2, r.peer.r2)):
            f, text = speedup(ours, peer, timeout_s)
            verdicts.append((f is not None and f >= 10, f"equal {fmt_size(*r.size)} {label} {text}"))
    if not verdicts:
        lines.append("- sticky at least 10× faster than the peer: not measured")
    else:
        met = all(v for v, _ in verdicts)
        lines.append(f"- sticky at least 10× faster than the peer: {'MET' if met else 'NOT MET'} ("
                     + ", ".join(t for _, t in verdicts) + ")")
    return lines


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help=f"MEMBERSxPARTITIONS,... for equal subscriptions (default {DEFAULT_SIZES})")
    ap.add_argument("--unequal-sizes", default=DEFAULT_UNEQUAL_SIZES,
                    help=f"MEMBERSxPARTITIONS,... for the unequal shapes (default {DEFAULT_UNEQUAL_SIZES})")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)} (default: all)")
    ap.add_argument("--assignors", default=",".join(ASSIGNORS), help="comma-separated (default: all four)")
    ap.add_argument("--repeat", type=int, default=5,
                    help=f"timings per measurement (at most {LARGE_REPEAT} above {SMALL:,} partitions); the best is kept")
    ap.add_argument("--peer-timeout", type=float, default=60.0, help="seconds per peer measurement (default 60)")
    ap.add_argument("--peer-mem-gb", type=float, default=6.0, help="address-space limit of a peer process (GiB)")
    ap.add_argument("--no-peer", action="store_true", help="skip kafka-python's sticky assignor")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    ap.add_argument("--baseline", metavar="DIR", help="also time this grouplab tree's assignors on the same inputs")
    ap.add_argument("--baseline-timeout", type=float, default=900.0, help="seconds per baseline measurement (default 900)")
    ap.add_argument("--baseline-runs", type=int, default=3, help="alternating runs of each tree per row (default 3)")
    ap.add_argument("--measure", help=argparse.SUPPRESS)  # a --baseline child: NAME,SHAPE,M,P
    args = ap.parse_args()
    if args.measure:
        name, shape, m, p = args.measure.split(",")
        repeats = args.repeat if int(p) <= SMALL else min(args.repeat, LARGE_REPEAT)
        print(json.dumps(measure_only(name, shape, int(m), int(p), repeats)))
        return
    shapes = [x.strip() for x in args.shapes.split(",") if x.strip()]
    for shape in shapes:
        if shape not in SHAPES:
            ap.error(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    names = [n.strip() for n in args.assignors.split(",") if n.strip()]
    for n in names:
        get_assignor(n)  # fail early on a typo
    peer_enabled = not args.no_peer
    kafka_version = None
    if peer_enabled:
        try:
            import kafka

            kafka_version = kafka.__version__
        except ImportError:
            print("kafka-python is not installed (pip install -e '.[dev]'): running without the peer", file=sys.stderr)
            peer_enabled = False

    rows: list[Row] = []
    for shape in shapes:
        sizes = parse_sizes(args.sizes if shape == "equal" else args.unequal_sizes)
        shape_names = names if shape == "equal" else [n for n in names if n in STICKY]
        for members_n, partitions in sizes:
            repeats = args.repeat if partitions <= SMALL else min(args.repeat, LARGE_REPEAT)
            topics_n = topic_count(shape, members_n, partitions)
            print(f"{SHAPE_LABELS[shape]} subscriptions, {fmt_size(members_n, partitions)} over {topics_n} topics "
                  f"({repeats} timing{'s' if repeats > 1 else ''} each)", flush=True)
            r1_cache: dict[str, Mapping[str, list[TopicPartition]]] = {}
            size_rows = []
            for name in shape_names:
                row = bench_grouplab(name, shape, members_n, partitions, repeats, r1_cache)
                size_rows.append(row)
                print(f"  {name:<19} round 1 {fmt_s(row.r1):>7} s  round 2 {fmt_s(row.r2):>7} s  moved {row.moved:,}"
                      + (f" + {row.withheld:,} withheld" if name == "cooperative-sticky" else "")
                      + f"  bound {row.bound:,}", flush=True)
                if args.baseline:
                    row.baseline, row.this_tree = run_pair(args.baseline, name, shape, members_n, partitions, repeats,
                                                           args.baseline_timeout, args.baseline_runs)
                    print(f"  {'':<19} paired: this tree {fmt_baseline(row.this_tree)} s, "
                          f"baseline {fmt_baseline(row.baseline)} s", flush=True)
            if peer_enabled and any(r.assignor in STICKY for r in size_rows):
                sticky_r1 = r1_cache.get("sticky") or r1_cache["cooperative-sticky"]
                print("  peer: kafka-python StickyPartitionAssignor", flush=True)
                peer_repeats = args.repeat if partitions <= PEER_SMALL else 1
                pair = bench_peer(shape, members_n, partitions, peer_repeats, args.peer_timeout,
                                  int(args.peer_mem_gb * 2**30), sticky_r1)
                for row in size_rows:
                    if row.assignor in STICKY:
                        row.peer = pair
            rows.extend(size_rows)

    text = table(rows, args.peer_timeout, baseline=bool(args.baseline))
    verdict = targets(rows, args.peer_timeout, peer_enabled)
    print()
    print(text)
    print("\nTargets:")
    print("\n".join(verdict))
    if not args.no_write:
        stamp = utc_stamp()
        command = shlex.join(["scripts/bench_assignors.py", *sys.argv[1:]])
        peer = (f"peer: kafka-python {kafka_version} `StickyPartitionAssignor` (eager), shown on both sticky rows, "
                f"each measurement in its own process with a {args.peer_timeout:g} s limit"
                if peer_enabled else "no peer")
        load = ", load average at the end %.2f / %.2f / %.2f (1 / 5 / 15 min)" % os.getloadavg()
        base = (f" paired = the same inputs through this tree's and `{args.baseline}`'s assignors, each in a fresh "
                f"process, alternately {args.baseline_runs} times, best kept (the fair comparison on a shared machine)."
                if args.baseline else "")
        header = (f"\n## Assignor speed and stickiness ({stamp})\n\n"
                  f"`{command}` on {os.cpu_count()} cores{load}, Python {platform.python_version()}; {peer}. "
                  f"Subscriptions: equal = every member on every topic ({TOPICS} topics); random half = each member "
                  f"on a seeded random half of the topics (100 topics of 1,000 at 2,000 × 100,000, else {TOPICS}); "
                  f"(i + t) % 3 ≠ 0 = member i on topic t of {TOPICS} unless (i + t) % 3 = 0. "
                  f"Round 2 drops every 10th member, the rest own their round-1 partitions; "
                  f"sizes with at most {SMALL:,} partitions are the best of {args.repeat}, larger ones of "
                  f"{min(args.repeat, LARGE_REPEAT)} "
                  f"(the peer's only up to {PEER_SMALL:,}). "
                  f"moved = round-2 owner differs from round-1 owner; bound = departed members' partitions "
                  f"+ remaining members' excess over ceil(P/M') (a guide only for unequal subscriptions); "
                  f"ok = valid and balanced, and for equal subscriptions moved (+ withheld) ≤ bound.{base}\n\n")
        append_to_benchmarks(header + text + "\n\nTargets:\n\n" + "\n".join(verdict))


if __name__ == "__main__":
    main()
