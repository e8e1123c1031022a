#!/usr/bin/env python3
"""Benchmark (issue 26): time until 1,000 and 10,000 members are one Stable generation against
`grouplab coordinator` as a user runs it, with its default console (the human view, to a file),
side by side in the same run with `--log-json` (the JSON lines instead); and the heartbeats per
second that coordinator answers with its console on. Prints a table and appends it to
docs/benchmarks.md.

Each coordinator is the real command in its own process (`grouplab coordinator --port 0
--kafka-port off --config group.initial.rebalance.delay.ms=100 --config group.max.size=20000`),
its stdout and stderr to a file, as when a terminal is not watching.

Two kinds of members, each a row of the table:
- *lean* (scripts/_lean_members.py), the load generator, as Kafka's perf tools are to its clients:
  every member its own loopback TCP connection speaking the same JoinGroup / SyncGroup / Heartbeat
  requests, in the same encodings, as grouplab's consumer (the leader runs `range` over the
  subscriptions its JoinGroup answer lists), with nothing the coordinator does not see (no event
  log, no poll loop, no asyncio: plain sockets on one epoll loop per worker), spread over
  --lean-procs worker processes, with at most 3,500 connects in flight (10,000 at once overflow the
  kernel's accept queue of 4,096, and a dropped SYN is sent again only 1 s later). Done when
  every member holds a SyncGroup answer of one generation, whose leader listed all of them, and
  the assignments cover each of the topic's 1,000 partitions exactly once (checked each time).
  This row is the coordinator's figure.
- *full client*: grouplab's own consumers (consumer/client.py GroupMemberClient, its event log
  included), all in this one process (scripts/bench_rebalance.py's time_to_stable), as before the
  lean generator: what 10,000 real clients in one Python process cost, most of it their own CPU.
Both use session.timeout.ms 45000 and heartbeat.interval.ms 3000, and start every member at once.

The initial delay. Kafka holds the first rebalance of an Empty group for
group.initial.rebalance.delay.ms (default 3000) and again for each window in which a member
joined (KIP-134), so members that start together form one generation; with the delay at 0 a
pause in the arrivals lets the first generation form early, and its members hear of the next only
at their next heartbeat, 3 s later (generation 2 in the earlier runs). 3000 ms alone would exceed
the target, so the benchmark sets it to 100 ms (--initial-delay-ms): every member's join falls
inside the windows, and the figure includes the last window (100–200 ms after the last join).
What is measured is still "time until all members are one Stable generation": a run that needed
a second generation (on a machine so loaded that the members, waiting for a core, let a whole
window pass without a join) says so in the generation column and pays for it.

Measured per repetition: seconds from the start until that; the generation it took; CPU seconds of
the coordinator process and of the members (the lean workers' own, or this process's) meanwhile;
lines the console wrote. Heartbeats: 100 members, one connection each, 32 pipelined requests per
connection, for --hb-seconds, against the default-console coordinator and against a stateless
echo server (the floor of framing plus asyncio here).

    scripts/bench_scale.py [--sizes 1000,10000] [--repeat 3] [--hb-seconds 5] [--lean-procs 2]
                           [--initial-delay-ms 100] [--no-full-client] [--no-write]
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
import _lean_members  # noqa: E402

from grouplab.admin import AdminClient  # noqa: E402

CONSOLES = {"default console": [], "--log-json (peer)": ["--log-json"]}
LEAN, FULL = "lean", "full client"
TOPIC, PARTITIONS = "bench", 1000


class Coordinator:
    """`grouplab coordinator` in its own process, its output to a file; the port read from it."""

    def __init__(self, extra: list[str], out: Path, initial_delay_ms: int = 100) -> None:
        self.out = out
        self.cmd = [str(Path(sys.executable).with_name("grouplab")), "coordinator", "--port", "0", "--kafka-port", "off",
                    "--config", f"group.initial.rebalance.delay.ms={initial_delay_ms}",
                    "--config", "group.max.size=20000", *extra]

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


async def one(members: str, console: str, n: int, work: Path, args: argparse.Namespace) -> dict[str, float]:
    out = work / f"coordinator-{n}-{time.monotonic_ns()}.txt"
    with Coordinator(CONSOLES[console], out, args.initial_delay_ms) as coordinator:
        async with AdminClient("127.0.0.1", coordinator.port) as admin:
            await admin.create_topics({TOPIC: PARTITIONS})
        before_lines = coordinator.lines()
        c0, s0 = cpu_s(coordinator.proc.pid), resource.getrusage(resource.RUSAGE_SELF)
        if members == LEAN:
            # Blocking here is fine: nothing else runs in this loop meanwhile.
            r = _lean_members.time_to_stable(coordinator.port, n, "scale", TOPIC, PARTITIONS, args.lean_procs)
            c1 = cpu_s(coordinator.proc.pid)
            lines = coordinator.lines() - before_lines
            return {"s": r.s, "generation": r.generation, "coordinator_cpu": c1 - c0, "members_cpu": r.members_cpu_s,
                    "lines": lines}
        elapsed, generation, clients = await time_to_stable(coordinator.port, n, "scale")
        c1, s1 = cpu_s(coordinator.proc.pid), resource.getrusage(resource.RUSAGE_SELF)
        lines = coordinator.lines() - before_lines
        await asyncio.gather(*(c.close(leave=False) for c in clients))
    return {"s": elapsed, "generation": generation, "coordinator_cpu": c1 - c0,
            "members_cpu": (s1.ru_utime + s1.ru_stime) - (s0.ru_utime + s0.ru_stime), "lines": lines}


async def heartbeats(seconds: float, work: Path, initial_delay_ms: int) -> tuple[float, float]:
    with Coordinator([], work / "coordinator-hb.txt", initial_delay_ms) as coordinator:
        async with AdminClient("127.0.0.1", coordinator.port) as admin:
            await admin.create_topics({TOPIC: PARTITIONS})
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
    ap.add_argument("--lean-procs", type=int, default=2, help="worker processes of the lean members (default 2)")
    ap.add_argument("--initial-delay-ms", type=int, default=100,
                    help="group.initial.rebalance.delay.ms of the coordinator (default 100; see above)")
    ap.add_argument("--no-full-client", action="store_true", help="lean members only (no GroupMemberClient rows)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    load0 = os.getloadavg()  # the machine is shared: what else ran is part of the figures
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # 10,000 members: a socket each, here and there
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    cells = [(LEAN, console) for console in CONSOLES] + ([] if args.no_full_client else [(FULL, "default console")])
    results: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in sizes:
            for rep in range(args.repeat):
                for members, console in cells:  # alternating, so that a slow spell of the machine hits each
                    r = asyncio.run(one(members, console, n, work, args))
                    results.setdefault((members, console, n), []).append(r)
                    print(f"  {n:>6} {members} members, {console}, #{rep + 1}: Stable in {r['s']:.2f} s (generation "
                          f"{r['generation']:.0f}), coordinator CPU {r['coordinator_cpu']:.2f} s, members' CPU "
                          f"{r['members_cpu']:.2f} s, {r['lines']:.0f} console lines", flush=True)
        ours, echo = asyncio.run(heartbeats(args.hb_seconds, work, args.initial_delay_ms))
        print(f"  heartbeats/s: grouplab coordinator (default console) {ours:,.0f}, echo peer {echo:,.0f}", flush=True)
    rows = ["| members | members are | coordinator output | start → Stable s | generation | coordinator CPU s | members' CPU s | console lines |",
            "|---:|---|---|---:|---:|---:|---:|---:|"]
    for (members, console, n), rs in results.items():
        rows.append(f"| {n:,} | {members} | {console} | {spread([r['s'] for r in rs])} | "
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
                   f"--hb-seconds {args.hb_seconds:g} --lean-procs {args.lean_procs} --initial-delay-ms "
                   f"{args.initial_delay_ms}{' --no-full-client' if args.no_full_client else ''}` on {os.cpu_count()} cores, Python {platform.python_version()}, "
                   f"load average at the start {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f}, at the end "
                   f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}. Median [min–max] of the "
                   f"repetitions. See the script's docstring for what is measured.\n\n{table}\n\n"
                   f"| measurement | grouplab | peer |\n|---|---:|---:|\n{hb}\n")
        append_to_benchmarks(section)


if __name__ == "__main__":
    main()
