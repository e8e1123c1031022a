#!/usr/bin/env python3
"""Benchmark: the coordinator's memory through issue 11's storm, and after groups expire.

The coordinator runs in its own process (started with `spawn`, so nothing of this one is in it),
with an event log to a file as `grouplab coordinator --run-dir` writes it, and a control pipe the
benchmark uses to ask for its counts and for a `gc.collect()`. Its RSS is read from
/proc/PID/status (VmRSS now, VmHWM the peak so far) at each step:

 1. start;
 2. 10,000 new group ids, each joined by one member (JoinGroup twice, SyncGroup), which commits
    an offset and leaves (the group is then Empty, with one offset); then one more new group,
    which `grouplab.max.groups` (10,000) refuses;
 3. 100,000 OffsetFetch and 100,000 Heartbeat requests for group ids nobody uses;
 4. the amplification storm: Metadata naming one topic 80,505 times, DescribeGroups of 100,000
    ids, OffsetFetch of partition 0 listed 100,000 times, Fetch of one partition listed 200 times
    with max_bytes 1 (each --storm times);
 5. the groups expired: the coordinator runs with offsets.retention.minutes=--retention-minutes
    and offsets.retention.check.interval.ms=1000, and the benchmark waits until it holds none;
 6. after gc.collect() in the coordinator, and 7. after malloc_trim(0) (glibc: hand freed heap
    back to the OS), which separates memory Python still uses from memory its allocator keeps.

Prints a table and appends it, with the command, to docs/benchmarks.md. `--tree PATH` runs the
coordinator from another source tree (e.g. a worktree of main) for comparison; settings that tree
does not know are left out (its groups then never expire, and step 5 waits --expiry-wait-s).
`--tracemalloc` adds the bytes Python's allocations still hold (live memory, whatever RSS says).

    scripts/bench_memory.py [--groups 10000] [--unknown 100000] [--storm 3] [--retention-minutes 3]
                            [--tracemalloc] [--tree PATH] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import multiprocessing as mp
import os
import platform
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

from grouplab.protocol import schema  # noqa: E402
from grouplab.protocol.framing import encode_request, read_response  # noqa: E402
from grouplab.protocol.messages import (  # noqa: E402
    API,
    CreatableTopic,
    CreateTopicsRequest,
    DescribeGroupsRequest,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    MetadataRequest,
    MetadataRequestTopic,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    Record,
    RecordBatch,
    RequestHeader,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)

MB = 1024 * 1024


# ----------------------------------------------------------------------------- the coordinator process


def _coordinator(conn: Any, tree: str, overrides: list[str], run_dir: str, trace: bool) -> None:
    """The child: a CoordinatorServer from `tree` with an event log file, answering the pipe."""
    if trace:
        import tracemalloc

        tracemalloc.start()
    # Spawning imported this script, and with it this tree's protocol package: forget every module
    # of the project so that the coordinator is `tree`'s alone.
    for name in [m for m in sys.modules if m.split(".")[0] in ("protocol", "coordinator", "consumer", "grouplab")]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    from grouplab.coordinator.config import BrokerConfig
    from grouplab.coordinator.server import CoordinatorServer
    from grouplab.eventlog import run_dir_log

    known = set(BrokerConfig.names())
    config = BrokerConfig().with_overrides([o for o in overrides if o.split("=", 1)[0] in known])

    async def main() -> None:
        events = run_dir_log(run_dir, "coordinator")
        server = await CoordinatorServer(config, port=0, events=events).start()
        loop = asyncio.get_running_loop()
        stop = loop.create_future()

        def counts() -> dict[str, int]:
            driver = server.driver
            timers = getattr(driver.timers, "_handles", {}) if driver is not None else {}
            counts = {"groups": len(server.broker.groups), "queues": len(server._queues), "timers": len(timers),
                      "objects": len(gc.get_objects())}
            if trace:
                counts["traced_kb"] = tracemalloc.get_traced_memory()[0] // 1024
            return counts

        def on_command() -> None:
            command = conn.recv()
            if command == "gc":
                gc.collect()
            elif command == "trim":
                try:
                    ctypes.CDLL("libc.so.6").malloc_trim(0)
                except OSError:
                    pass
            elif command == "stop":
                stop.set_result(None)
                return
            conn.send(counts())

        loop.add_reader(conn.fileno(), on_command)
        conn.send({"port": server.port, "unknown_settings": sorted({o.split("=", 1)[0] for o in overrides} - known)})
        await stop
        await server.stop()
        events.close()
        conn.send({})

    asyncio.run(main())


class Coordinator:
    def __init__(self, tree: Path, overrides: list[str], run_dir: str, trace: bool) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_coordinator, args=(child, str(tree), overrides, run_dir, trace), daemon=True)
        self.process.start()
        child.close()  # only the child holds its end: if it dies, recv() ends with EOFError
        try:
            hello = self.conn.recv()
        except EOFError:
            self.process.join(5)
            raise SystemExit(f"the coordinator process failed to start (exit code {self.process.exitcode})") from None
        self.port: int = hello["port"]
        self.unknown_settings: list[str] = hello["unknown_settings"]

    def ask(self, command: str = "counts") -> dict[str, int]:
        self.conn.send(command)
        return self.conn.recv()

    def status(self) -> tuple[float, float]:
        """VmRSS and VmHWM in MB, from /proc."""
        values = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
        return values["VmRSS"], values["VmHWM"]

    def close(self) -> None:
        try:
            self.conn.send("stop")
            self.conn.recv()
        except (EOFError, OSError):
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.process.terminate()


# ----------------------------------------------------------------------------- a pipelining client


class Client:
    """One connection: `call` one request and wait; `blast` many, a window in flight at a time."""

    def __init__(self) -> None:
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter
        self.cid = 0

    async def open(self, port: int) -> "Client":
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port, limit=64 * MB)
        return self

    def frame(self, api: str, body: Any) -> bytes:
        self.cid += 1
        return encode_request(RequestHeader(api, 0, self.cid, "bench"), body)

    async def _read(self) -> tuple[int, Any]:
        size = struct.unpack(">I", await self.reader.readexactly(4))[0]
        return read_response(await self.reader.readexactly(size))

    async def call(self, api: str, body: Any) -> Any:
        self.writer.write(self.frame(api, body))
        while True:
            cid, raw = await self._read()
            if cid in (self.cid, -1):
                return schema.decode(API[api].response, raw, "body")

    async def blast(self, api: str, bodies: Any, window: int = 500) -> int:
        sent = answered = 0
        pending: list[bytes] = []
        for body in bodies:
            pending.append(self.frame(api, body))
            sent += 1
            if len(pending) == window:
                self.writer.write(b"".join(pending))
                pending.clear()
                while answered < sent - window:
                    await self._read()
                    answered += 1
        self.writer.write(b"".join(pending))
        while answered < sent:
            await self._read()
            answered += 1
        return answered

    def close(self) -> None:
        self.writer.close()


def join_req(group: str, member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(group, 30_000, 30_000, member_id, "consumer", [JoinGroupRequestProtocol("range", b"")])


async def one_group(c: Client, group: str) -> int:
    """A member joins `group`, commits an offset and leaves. Returns the first JoinGroup's code."""
    first = await c.call("JoinGroup", join_req(group, ""))
    if first.error_code != 79:  # MEMBER_ID_REQUIRED
        return first.error_code
    joined = await c.call("JoinGroup", join_req(group, first.member_id))
    assert joined.error_code == 0, joined
    synced = await c.call("SyncGroup", SyncGroupRequest(group, joined.generation_id, joined.member_id,
                                                        assignments=[SyncGroupRequestAssignment(joined.member_id, b"")]))
    assert synced.error_code == 0, synced
    committed = await c.call("OffsetCommit", OffsetCommitRequest(group, [OffsetCommitRequestTopic(
        "bench", [OffsetCommitRequestPartition(0, 42)])], joined.generation_id, joined.member_id))
    assert committed.topics[0].partitions[0].error_code == 0, committed
    left = await c.call("LeaveGroup", LeaveGroupRequest(group, [LeaveGroupRequestMember(joined.member_id)]))
    assert left.members[0].error_code == 0, left
    return first.error_code


# ----------------------------------------------------------------------------- the run


async def run(args: argparse.Namespace, coordinator: Coordinator) -> list[tuple[str, str, float, float, dict]]:
    rows: list[tuple[str, str, float, float, dict]] = []
    t0 = time.perf_counter()

    def measure(step: str, note: str = "") -> None:
        rss, hwm = coordinator.status()
        counts = coordinator.ask()
        rows.append((step, note, rss, hwm, {**counts, "s": time.perf_counter() - t0}))
        print(f"  {step:<46} VmRSS {rss:7.1f} MB  VmHWM {hwm:7.1f} MB  {counts}  {note}", flush=True)

    port = coordinator.port
    admin = await Client().open(port)
    await admin.call("CreateTopics", CreateTopicsRequest([CreatableTopic("bench", 1)]))
    batch = RecordBatch([Record(value=b"x" * 100) for _ in range(10)])
    await admin.call("Produce", ProduceRequest([ProduceTopicData("bench", [ProducePartitionData(0, batch)])]))
    coordinator.ask("gc")
    measure("start")

    workers = 8
    clients = [await Client().open(port) for _ in range(workers)]

    async def groups_of(w: int) -> None:
        for i in range(w, args.groups, workers):
            code = await one_group(clients[w], f"group-{i:06d}")
            assert code == 79, f"group-{i}: JoinGroup answered {code}"

    await asyncio.gather(*(groups_of(w) for w in range(workers)))
    extra = (await clients[0].call("JoinGroup", join_req("one-too-many", ""))).error_code
    measure(f"{args.groups:,} groups made (joined, committed, left)",
            f"one more new group: error {extra}")

    unknown = args.unknown
    per = unknown // workers

    async def unknown_ids(w: int) -> None:
        ids = range(w * per, (w + 1) * per)
        await clients[w].blast("OffsetFetch", (OffsetFetchRequest(f"nobody-{i}", [OffsetFetchRequestTopic("bench", [0])])
                                               for i in ids))
        await clients[w].blast("Heartbeat", (HeartbeatRequest(f"nobody-hb-{i}", 1, "m") for i in ids))

    await asyncio.gather(*(unknown_ids(w) for w in range(workers)))
    measure(f"{per * workers:,} OffsetFetch + {per * workers:,} Heartbeat, unknown ids")

    for _ in range(args.storm):
        await admin.call("Metadata", MetadataRequest([MetadataRequestTopic("bench")] * 80_505, allow_auto_topic_creation=False))
        await admin.call("DescribeGroups", DescribeGroupsRequest([f"d{i}" for i in range(100_000)]))
        await admin.call("OffsetFetch", OffsetFetchRequest("group-000000", [OffsetFetchRequestTopic("bench", [0] * 100_000)]))
        await admin.call("Fetch", FetchRequest([FetchTopic("bench", [FetchPartition(0, 0, 1)] * 200)], max_bytes=1))
    measure(f"amplification storm ×{args.storm}")

    deadline = time.monotonic() + args.expiry_wait_s
    while coordinator.ask()["groups"] and time.monotonic() < deadline:
        await asyncio.sleep(1)
    held = coordinator.ask()["groups"]
    expiry = ("no group expiry in this tree" if "offsets.retention.minutes" in coordinator.unknown_settings
              else f"offsets.retention.minutes={args.retention_minutes}")
    measure("groups expired" if not held else f"after waiting {args.expiry_wait_s:.0f} s",
            expiry + (f"; {held:,} groups still held" if held else ""))
    coordinator.ask("gc")
    measure("after gc.collect()")
    coordinator.ask("trim")
    measure("after malloc_trim(0)")
    for c in [admin, *clients]:
        c.close()
    return rows


def table(rows: list[tuple[str, str, float, float, dict]]) -> str:
    start = rows[0][2]
    traced = "traced_kb" in rows[0][4]
    out = ["| step | VmRSS MB | vs start | VmHWM MB |" + (" Python-held MB (tracemalloc) |" if traced else "")
           + " groups | server queues | timers | gc-tracked objects | t s | notes |",
           "|---|---:|---:|---:|" + ("---:|" if traced else "") + "---:|---:|---:|---:|---:|---|"]
    for step, note, rss, hwm, c in rows:
        held = f" {c['traced_kb'] / 1024:.1f} |" if traced else ""
        out.append(f"| {step} | {rss:.1f} | {rss - start:+.1f} | {hwm:.1f} |{held} {c['groups']:,} | {c['queues']:,} | "
                   f"{c['timers']:,} | {c['objects']:,} | {c['s']:.0f} | {note} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--unknown", type=int, default=100_000, help="OffsetFetch (and as many Heartbeat) requests")
    ap.add_argument("--storm", type=int, default=3, help="times each amplified request is sent")
    ap.add_argument("--retention-minutes", type=int, default=3,
                    help="offsets.retention.minutes: long enough that no group expires before step 2 is measured")
    ap.add_argument("--expiry-wait-s", type=float, default=240.0, help="longest wait for the groups to expire")
    ap.add_argument("--tree", type=Path, default=ROOT, help="source tree the coordinator runs from")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="trace the coordinator's allocations: adds the bytes Python still holds (slower)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    overrides = ["group.initial.rebalance.delay.ms=0", f"offsets.retention.minutes={args.retention_minutes}",
                 "offsets.retention.check.interval.ms=1000"]
    with tempfile.TemporaryDirectory() as run_dir:
        coordinator = Coordinator(args.tree.resolve(), overrides, run_dir, args.tracemalloc)
        try:
            if coordinator.unknown_settings:
                print(f"  {args.tree} does not know {', '.join(coordinator.unknown_settings)}: left out")
            rows = asyncio.run(run(args, coordinator))
        finally:
            coordinator.close()
    text = table(rows)
    print()
    print(text)
    if not args.no_write:
        tree = "this tree" if args.tree.resolve() == ROOT else f"`{args.tree}`"
        command = " ".join(["scripts/bench_memory.py", *sys.argv[1:]])
        header = (f"\n## Coordinator memory through issue 11's storm ({utc_stamp()}, {tree})\n\n"
                  f"`{command}` on {os.cpu_count()} cores, Python {platform.python_version()}, the coordinator in "
                  f"its own process (spawned, event log to a file); RSS from /proc/PID/status.\n\n")
        append_to_benchmarks(header + text)


if __name__ == "__main__":
    main()
