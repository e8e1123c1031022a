#!/usr/bin/env python3
"""Benchmark: time until N consumers are one stable generation, and heartbeats/s the coordinator
answers with 100 members. Prints a table and appends it to docs/benchmarks.md.

The coordinator runs in its own process (as it would for a user); consumers and the load
generator run in this one, over real loopback TCP. Side by side, in the same run, the heartbeat
load goes to a peer: a bare asyncio server that answers each msgpack frame with a fixed frame
and keeps no state, which is the floor that framing plus asyncio costs on this machine.

    scripts/bench_rebalance.py [--sizes 10,100,1000] [--hb-seconds 5] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import platform
import struct
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

from grouplab.consumer.client import GroupMemberClient  # noqa: E402
from grouplab.consumer.config import ConsumerConfig  # noqa: E402
from grouplab.consumer.coordinator import MemberState  # noqa: E402
from grouplab.coordinator.config import BrokerConfig  # noqa: E402
from grouplab.admin import AdminClient  # noqa: E402
from grouplab.protocol.framing import encode_request, encode_response  # noqa: E402
from grouplab.protocol.messages import HeartbeatRequest, HeartbeatResponse, RequestHeader  # noqa: E402


# ----------------------------------------------------------------------------- server processes


def _serve_coordinator(port_q: mp.Queue) -> None:
    from grouplab.coordinator.server import CoordinatorServer

    async def main() -> None:
        cfg = BrokerConfig().with_overrides(["group.initial.rebalance.delay.ms=0"])
        server = await CoordinatorServer(cfg, port=0).start()
        port_q.put(server.port)
        await server.serve_forever()

    asyncio.run(main())


def _serve_echo(port_q: mp.Queue) -> None:
    """The peer: frames in, one fixed response frame out per frame, no decoding, no state."""
    answer = encode_response(0, HeartbeatResponse())

    class Echo(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.t = transport
            self.buf = bytearray()

        def data_received(self, data: bytes) -> None:
            self.buf += data
            n = 0
            pos = 0
            while len(self.buf) - pos >= 4:
                size = struct.unpack_from(">I", self.buf, pos)[0]
                if len(self.buf) - pos - 4 < size:
                    break
                pos += 4 + size
                n += 1
            del self.buf[:pos]
            if n:
                self.t.write(answer * n)  # type: ignore[attr-defined]

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
        port_q.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


class ServerProcess:
    def __init__(self, target) -> None:
        self.q: mp.Queue = mp.Queue()
        self.p = mp.Process(target=target, args=(self.q,), daemon=True)

    def __enter__(self) -> int:
        self.p.start()
        return self.q.get(timeout=30)

    def __exit__(self, *exc: object) -> None:
        self.p.terminate()
        self.p.join(5)


# ----------------------------------------------------------------------------- measurements


async def time_to_stable(port: int, n: int, group: str, timeout_s: float = 120.0) -> tuple[float, int, list[GroupMemberClient]]:
    """Seconds from the first connect until all n members are Stable in one generation."""
    config = dict(group_id=group, topics=["bench"], session_timeout_ms=45_000, heartbeat_interval_ms=3_000)
    clients = [GroupMemberClient(ConsumerConfig(client_id=f"m{i}", **config), port=port) for i in range(n)]
    done = asyncio.Event()
    # Counted as they sync (a scan of every client at each sync would make the harness quadratic:
    # at 10,000 members it, not the coordinator, took most of the time): the generation each
    # member last synced in, and how many are in each.
    synced: dict[int, int] = {}
    in_generation: Counter[int] = Counter()

    def check() -> None:
        gen = max(in_generation)
        if in_generation[gen] == n and all(c.state is MemberState.STABLE and c.generation_id == gen for c in clients):
            done.set()

    class Watch:
        def __init__(self, index: int) -> None:
            self.index = index

        def emit(self, ev) -> None:
            if ev.event == "sync_completed":
                was = synced.get(self.index)
                if was is not None:
                    in_generation[was] -= 1
                gen = clients[self.index].generation_id
                synced[self.index] = gen
                in_generation[gen] += 1
                if in_generation[gen] == n:
                    check()

    for i, c in enumerate(clients):
        c.events = Watch(i)
    t0 = time.perf_counter()
    await asyncio.gather(*(c.start() for c in clients))
    await asyncio.wait_for(done.wait(), timeout_s)
    elapsed = time.perf_counter() - t0
    return elapsed, clients[0].generation_id, clients


async def heartbeat_load(port: int, members: list[tuple[str, str, int]], seconds: float, inflight: int = 32) -> float:
    """Answered heartbeats per second: one connection per member, `inflight` pipelined requests each."""
    counts = [0]
    stop = time.perf_counter() + seconds

    async def one(group: str, member_id: str, generation: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frame = encode_request(RequestHeader("Heartbeat", 0, 1, "bench"), HeartbeatRequest(group, generation, member_id))
        writer.write(frame * inflight)
        buf = bytearray()
        while time.perf_counter() < stop:
            data = await reader.read(65536)
            if not data:
                break
            buf += data
            pos = n = 0
            while len(buf) - pos >= 4:
                size = struct.unpack_from(">I", buf, pos)[0]
                if len(buf) - pos - 4 < size:
                    break
                pos += 4 + size
                n += 1
            del buf[:pos]
            counts[0] += n
            writer.write(frame * n)
        writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one(*m) for m in members))
    return counts[0] / (time.perf_counter() - t0)


async def run(sizes: list[int], hb_seconds: float) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    with ServerProcess(_serve_coordinator) as port:
        async with AdminClient("127.0.0.1", port) as admin:
            await admin.create_topics({"bench": 1000})
        for n in sizes:
            elapsed, generation, clients = await time_to_stable(port, n, f"stable-{n}-{time.monotonic_ns()}")
            rows.append((f"{n} consumers: start → one stable generation", f"{elapsed:.2f} s",
                         f"generation {generation} (initial delay 0)"))
            print(f"  {n:>5} consumers stable in {elapsed:.2f} s (generation {generation})", flush=True)
            await asyncio.gather(*(c.close(leave=False) for c in clients))
        _, generation, clients = await time_to_stable(port, 100, "hb")
        members = [("hb", c.member_id, c.generation_id) for c in clients]
        rate = await heartbeat_load(port, members, hb_seconds)
        rows.append(("heartbeats answered/s, 100 members (grouplab coordinator)", f"{rate:,.0f}", "32 pipelined per connection"))
        print(f"  heartbeats/s grouplab: {rate:,.0f}", flush=True)
        await asyncio.gather(*(c.close(leave=False) for c in clients))
    with ServerProcess(_serve_echo) as port:
        rate = await heartbeat_load(port, members, hb_seconds)
        rows.append(("frames answered/s, 100 connections (peer: stateless echo)", f"{rate:,.0f}", "same load, no decoding"))
        print(f"  frames/s echo peer:    {rate:,.0f}", flush=True)
    return rows


def table(rows: list[tuple[str, str, str]]) -> str:
    out = ["| measurement | result | notes |", "|---|---:|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--hb-seconds", type=float, default=5.0)
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = asyncio.run(run(sizes, args.hb_seconds))
    text = table(rows)
    print()
    print(text)
    if not args.no_write:
        stamp = utc_stamp()
        header = (f"\n## Rebalance and heartbeat throughput ({stamp})\n\n"
                  f"`scripts/bench_rebalance.py --sizes {args.sizes} --hb-seconds {args.hb_seconds}` on "
                  f"{os.cpu_count()} cores, Python {platform.python_version()}, coordinator in its own process.\n\n")
        append_to_benchmarks(header + text)


if __name__ == "__main__":
    main()
