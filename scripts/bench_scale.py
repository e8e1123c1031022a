#!/usr/bin/env python3
"""Benchmark (issue 26): time until 1,000 and 10,000 members are one Stable generation against
`grouplab coordinator` as a user runs it, with its default console (the human view, to a file),
side by side in the same run with `--log-json` (the JSON lines instead); and the heartbeats per
second that coordinator answers with its console on. Prints a table and appends it to
docs/benchmarks.md.

Each coordinator is the real command in its own process (`grouplab coordinator --port 0
--kafka-port off --config group.initial.rebalance.delay.ms=0 --config group.max.size=20000`),
its stdout and stderr to a file, as when a terminal is not watching. The members are grouplab's own
consumers (consumer/client.py GroupMemberClient, session.timeout.ms 45000, heartbeat.interval.ms
3000), all in this process over loopback TCP, started at once (scripts/bench_rebalance.py's
time_to_stable). Measured per repetition: seconds from the first connect until every member is
Stable in one generation; the generation it took (with the initial delay at 0 the first
generation may form before every member has joined, and the rest then wait for their next
heartbeat to learn of the next rebalance); CPU seconds of the coordinator process and of this one
(the members) meanwhile; lines the console wrote. Heartbeats: 100 members, one connection each, 32
pipelined requests per connection, for --hb-seconds, against the default-console coordinator and
against a stateless echo server (the floor of framing plus asyncio here).

    scripts/bench_scale.py [--sizes 1000,10000] [--repeat 3] [--hb-seconds 5] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from _bench import append_to_benchmarks, cpu_s, spread, utc_stamp  # noqa: E402
from bench_rebalance import ServerProcess, _serve_echo, heartbeat_load, time_to_stable  # noqa: E402

from grouplab.admin import AdminClient  # noqa: E402

CONSOLES = {"default console": [], "--log-json (peer)": ["--log-json"]}


class Coordinator:
    """`grouplab coordinator` in its own process, its output to a file; the port read from it."""

    def __init__(self, extra: list[str], out: Path) -> None:
        self.out = out
        self.cmd = [str(Path(sys.executable).with_name("grouplab")), "coordinator", "--port", "0", "--kafka-port", "off",
                    "--config", "group.initial.rebalance.delay.ms=0", "--config", "group.max.size=20000", *extra]

    def __enter__(self) -> "Coordinator":
        self.file = self.out.open("w")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
        self.proc = subprocess.Popen(self.cmd, stdout=self.file, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(r"listening on 127\.0\.0\.1:(\d+)|\"port\": (\d+)", self.out.read_text())
            if found:
                self.port = int(found.group(1) or found.group(2))
                return self
            if self.proc.poll() is not None:
                raise SystemExit(f"grouplab coordinator exited: {self.out.read_text()[-2000:]}")
            time.sleep(0.05)
        raise SystemExit("grouplab coordinator did not say its port within 60 s")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.file.close()

    def lines(self) -> int:
        return len(self.out.read_text().splitlines())


async def one(console: str, n: int, work: Path) -> dict[str, float]:
    with Coordinator(CONSOLES[console], work / f"coordinator-{n}-{time.monotonic_ns()}.txt") as coordinator:
        async with AdminClient("127.0.0.1", coordinator.port) as admin:
            await admin.create_topics({"bench": 1000})
        before_lines = coordinator.lines()
        c0, s0 = cpu_s(coordinator.proc.pid), resource.getrusage(resource.RUSAGE_SELF)
        elapsed, generation, clients = await time_to_stable(coordinator.port, n, "scale")
        c1, s1 = cpu_s(coordinator.proc.pid), resource.getrusage(resource.RUSAGE_SELF)
        lines = coordinator.lines() - before_lines
        await asyncio.gather(*(c.close(leave=False) for c in clients))
    return {"s": elapsed, "generation": generation, "coordinator_cpu": c1 - c0,
            "members_cpu": (s1.ru_utime + s1.ru_stime) - (s0.ru_utime + s0.ru_stime), "lines": lines}


async def heartbeats(seconds: float, work: Path) -> tuple[float, float]:
    with Coordinator([], work / "coordinator-hb.txt") as coordinator:
        async with AdminClient("127.0.0.1", coordinator.port) as admin:
            await admin.create_topics({"bench": 1000})
        _, _, clients = await time_to_stable(coordinator.port, 100, "hb")
        members = [("hb", c.member_id, c.generation_id) for c in clients]
        ours = await heartbeat_load(coordinator.port, members, seconds)
        await asyncio.gather(*(c.close(leave=False) for c in clients))
    with ServerProcess(_serve_echo) as port:
        echo = await heartbeat_load(port, members, seconds)
    return ours, echo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000", help="group sizes, comma-separated (default 1000,10000)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of each cell, alternating the two consoles")
    ap.add_argument("--hb-seconds", type=float, default=5.0)
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # 10,000 members: a socket each, here and there
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in sizes:
            for rep in range(args.repeat):
                for console in CONSOLES:  # alternating, so that a slow spell of the machine hits both
                    r = asyncio.run(one(console, n, work))
                    results.setdefault((console, n), []).append(r)
                    print(f"  {n:>6} members, {console}, #{rep + 1}: Stable in {r['s']:.2f} s (generation "
                          f"{r['generation']:.0f}), coordinator CPU {r['coordinator_cpu']:.2f} s, members' CPU "
                          f"{r['members_cpu']:.2f} s, {r['lines']:.0f} console lines", flush=True)
        ours, echo = asyncio.run(heartbeats(args.hb_seconds, work))
        print(f"  heartbeats/s: grouplab coordinator (default console) {ours:,.0f}, echo peer {echo:,.0f}", flush=True)
    rows = ["| members | coordinator output | start → Stable s | generation | coordinator CPU s | members' CPU s | console lines |",
            "|---:|---|---:|---:|---:|---:|---:|"]
    for (console, n), rs in results.items():
        rows.append(f"| {n:,} | {console} | {spread([r['s'] for r in rs])} | "
                    f"{spread([r['generation'] for r in rs], '{:.0f}')} | {spread([r['coordinator_cpu'] for r in rs])} | "
                    f"{spread([r['members_cpu'] for r in rs])} | {spread([r['lines'] for r in rs], '{:.0f}')} |")
    table = "\n".join(rows)
    hb = (f"| heartbeats answered/s, 100 members, 32 pipelined each | grouplab coordinator, default console: "
          f"{ours:,.0f} | peer, stateless echo: {echo:,.0f} |")
    print("\n" + table + "\n\n| measurement | grouplab | peer |\n|---|---:|---:|\n" + hb)
    if not args.no_write:
        load = os.getloadavg()
        section = (f"## Members at scale: 1,000 and 10,000 to one Stable generation, default console (issue 26) "
                   f"({utc_stamp()})\n\n`scripts/bench_scale.py --sizes {args.sizes} --repeat {args.repeat} "
                   f"--hb-seconds {args.hb_seconds:g}` on {os.cpu_count()} cores, Python {platform.python_version()}, "
                   f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}. Median [min–max] of the "
                   f"repetitions. See the script's docstring for what is measured.\n\n{table}\n\n"
                   f"| measurement | grouplab | peer |\n|---|---:|---:|\n{hb}\n")
        append_to_benchmarks(section)


if __name__ == "__main__":
    main()
