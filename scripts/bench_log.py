#!/usr/bin/env python3
"""Benchmark: partition logs. Produce and fetch throughput over real loopback sockets (100-byte
values, batches of 100 records, idempotent producers) on 1 partition and on 16, and the recovery
time of a 1 GB log. Prints a table and appends it to docs/benchmarks.md.

The coordinator runs in its own process with a data directory (FileLogStore, Kafka's default
flush policy unless --flush-messages is given); the load generator runs in this one and encodes
its requests with msgpack directly (no dataclasses), so the client costs as little as it can.
Side by side, in the same run, the peer: the same bytes (every batch frame the log wrote, in the
same sizes) written to a plain file with os.write and the same fsync policy, and, for recovery, the
same segment files read sequentially with a plain read.

    scripts/bench_log.py [--records 1000000] [--connections 4] [--inflight 8] [--recovery-gb 1]
                         [--flush-messages N] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import platform
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

import msgpack

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

from grouplab.coordinator.config import BrokerConfig  # noqa: E402
from grouplab.coordinator.partition_log import INT64_MAX, FileLogStore  # noqa: E402
from grouplab.admin import AdminClient  # noqa: E402
from grouplab.protocol.messages import Record, RecordBatch  # noqa: E402

VALUE = b"v" * 100
BATCH = 100
_LEN = struct.Struct(">I")


# ----------------------------------------------------------------------------- the server process


def _serve(port_q: mp.Queue, data_dir: str, overrides: list[str], profile: str | None) -> None:
    from grouplab.coordinator.server import CoordinatorServer

    async def main() -> None:
        cfg = BrokerConfig().with_overrides(overrides)
        server = await CoordinatorServer(cfg, port=0, data_dir=data_dir).start()
        port_q.put(server.port)
        try:
            await server.serve_forever()
        finally:
            await server.stop()

    if profile:
        import cProfile
        import signal

        prof = cProfile.Profile()
        signal.signal(signal.SIGTERM, lambda *_: (prof.disable(), prof.dump_stats(profile), os._exit(0)))
        prof.enable()
    asyncio.run(main())


class ServerProcess:
    def __init__(self, data_dir: str, overrides: list[str], profile: str | None = None) -> None:
        self.q: mp.Queue = mp.Queue()
        self.p = mp.Process(target=_serve, args=(self.q, data_dir, overrides, profile), daemon=True)

    def __enter__(self) -> int:
        self.p.start()
        return self.q.get(timeout=60)

    def __exit__(self, *exc: object) -> None:
        self.p.terminate()
        self.p.join(10)


# ----------------------------------------------------------------------------- a minimal pipelining client


def frame(api: str, cid: int, body: dict) -> bytes:
    payload = msgpack.packb({"api": api, "version": 0, "correlation_id": cid, "client_id": "bench", "body": body})
    return _LEN.pack(len(payload)) + payload


RECORDS = [{"value": VALUE, "key": None, "headers": [], "timestamp": -1} for _ in range(BATCH)]


def produce_body(topic: str, partition: int, pid: int, seq: int) -> dict:
    batch = {"records": RECORDS, "producer_id": pid, "producer_epoch": 0, "base_sequence": seq, "is_transactional": False}
    return {"topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
            "acks": -1, "timeout_ms": 30000, "transactional_id": None}


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buf = bytearray()

    @classmethod
    async def open(cls, port: int) -> "Conn":
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=64 * 1024 * 1024)
        return cls(reader, writer)

    async def frames(self) -> list[bytes]:
        """At least one whole response frame."""
        while True:
            out, pos, buf = [], 0, self.buf
            while len(buf) - pos >= 4:
                (size,) = _LEN.unpack_from(buf, pos)
                if len(buf) - pos - 4 < size:
                    break
                out.append(bytes(buf[pos + 4:pos + 4 + size]))
                pos += 4 + size
            del buf[:pos]
            if out:
                return out
            data = await self.reader.read(1 << 20)
            if not data:
                raise ConnectionError("server closed the connection")
            buf += data

    def close(self) -> None:
        self.writer.close()


async def produce_load(port: int, topic: str, partitions: int, total: int, connections: int, inflight: int) -> float:
    """Seconds to produce `total` records: `connections` connections, each its own idempotent
    producer, each with up to `inflight` requests in flight, one 100-record batch per request,
    round-robin over the partitions."""
    per_conn = total // BATCH // connections
    assert per_conn > 0

    async def one(k: int) -> None:
        async with AdminClient("127.0.0.1", port) as admin:
            pid, _ = await admin.init_producer_id()
        conn = await Conn.open(port)
        seqs = [0] * partitions
        sent = acked = 0
        cid = 0

        def send() -> None:
            nonlocal sent, cid
            p = (k + sent) % partitions
            cid += 1
            conn.writer.write(frame("Produce", cid, produce_body(topic, p, pid, seqs[p])))
            seqs[p] += BATCH
            sent += 1

        for _ in range(min(inflight, per_conn)):
            send()
        while acked < per_conn:
            for f in await conn.frames():
                body = msgpack.unpackb(f)["body"]
                part = body["responses"][0]["partition_responses"][0]
                if part["error_code"]:
                    raise RuntimeError(f"produce failed: {part}")
                acked += 1
                if sent < per_conn:
                    send()
        conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(connections)))
    return time.perf_counter() - t0


async def fetch_all(port: int, topic: str, partitions: int, connections: int) -> tuple[float, int]:
    """Seconds to read every partition from offset 0 to its end (1 MiB per partition per fetch),
    and the records read. Partitions are split over the connections; each connection sends one
    Fetch at a time covering its partitions."""
    async def one(k: int) -> int:
        mine = [p for p in range(partitions) if p % connections == k]
        if not mine:
            return 0
        conn = await Conn.open(port)
        offsets = {p: 0 for p in mine}
        done: set[int] = set()
        got = cid = 0
        while len(done) < len(mine):
            cid += 1
            parts = [{"partition": p, "fetch_offset": offsets[p], "partition_max_bytes": 1 << 20}
                     for p in mine if p not in done]
            conn.writer.write(frame("Fetch", cid, {"topics": [{"topic": topic, "partitions": parts}],
                                                   "max_bytes": 50 << 20, "isolation_level": 0}))
            (f,) = await conn.frames()
            body = msgpack.unpackb(f)["body"]
            for pr in body["responses"][0]["partitions"]:
                recs = pr["records"]
                if pr["error_code"]:
                    raise RuntimeError(f"fetch failed: {pr}")
                got += len(recs)
                if recs:
                    offsets[pr["partition_index"]] = recs[-1]["offset"] + 1
                if offsets[pr["partition_index"]] >= pr["high_watermark"]:
                    done.add(pr["partition_index"])
        conn.close()
        return got

    t0 = time.perf_counter()
    counts = await asyncio.gather(*(one(k) for k in range(connections)))
    return time.perf_counter() - t0, sum(counts)


# ----------------------------------------------------------------------------- the peer: a plain file


def segment_frames(log_dir: Path, topic: str) -> list[bytes]:
    """Every batch frame in the segment files of `topic` under `log_dir` (the bytes the log wrote)."""
    frames = []
    for seg in sorted(log_dir.glob(f"{topic}-[0-9]*/*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos < len(data):
            (length,) = _LEN.unpack_from(data, pos)
            frames.append(data[pos:pos + 4 + length])
            pos += 4 + length
    return frames


def plain_file_writes(frames: list[bytes], path: Path, flush_messages: int) -> float:
    """Seconds to os.write every frame to a plain file, fsyncing as the log would."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    unflushed = 0
    t0 = time.perf_counter()
    for f in frames:
        os.write(fd, f)
        unflushed += BATCH
        if unflushed >= flush_messages:
            os.fsync(fd)
            unflushed = 0
    elapsed = time.perf_counter() - t0
    os.close(fd)
    path.unlink()
    return elapsed


# ----------------------------------------------------------------------------- recovery


def make_log(root: Path, target_bytes: int) -> tuple[int, float]:
    """Write a log of about `target_bytes` through FileLogStore (idempotent batches of 100 records
    of 100-byte values, 1 GiB segments); returns (bytes, seconds)."""
    store = FileLogStore(root, BrokerConfig())
    log = store.log("recovery", 0)
    records = [Record(value=VALUE) for _ in range(BATCH)]
    t0 = time.perf_counter()
    seq, written = 0, 0
    while written < target_bytes:
        result = log.append(RecordBatch(records, producer_id=7, producer_epoch=0, base_sequence=seq), 1_700_000_000_000)
        assert result.error_code == 0
        seq += BATCH
        written = sum(s.size for s in log._storage.segments)
    store.close()
    return written, time.perf_counter() - t0


def drop_page_cache(root: Path) -> bool:
    """Ask the kernel to drop these files' clean cached pages (no root needed)."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for seg in root.rglob("*.log"):
        fd = os.open(seg, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def time_recovery(root: Path) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    store = FileLogStore(root, BrokerConfig())
    elapsed = time.perf_counter() - t0
    stats = store.recovery
    log = store.log("recovery", 0)
    end = log.log_end_offset
    assert stats.truncated_bytes == 0 and log.producers[7].last_seq == end - 1
    store.close()
    return elapsed, stats.bytes, stats.batches


def time_plain_read(root: Path) -> float:
    t0 = time.perf_counter()
    for seg in sorted(root.rglob("*.log")):
        with open(seg, "rb", buffering=0) as f:
            while f.read(16 << 20):
                pass
    return time.perf_counter() - t0


# ----------------------------------------------------------------------------- the run


async def run(args: argparse.Namespace, work: Path) -> tuple[list[tuple[str, str, str]], dict]:
    rows: list[tuple[str, str, str]] = []
    facts: dict = {}
    flush = args.flush_messages
    overrides = [f"log.flush.interval.messages={flush}"] if flush < INT64_MAX else []
    policy = f"fsync every {flush} records" if flush < INT64_MAX else "no forced fsync (Kafka's default)"
    for partitions in (1, 16):
        data_dir = work / f"data-{partitions}"
        topic = "bench"
        with ServerProcess(str(data_dir), overrides, args.profile if partitions == 1 else None) as port:
            async with AdminClient("127.0.0.1", port) as admin:
                await admin.create_topics({topic: partitions})
            total = args.records
            secs = await produce_load(port, topic, partitions, total, args.connections, args.inflight)
            produced = total // BATCH // args.connections * BATCH * args.connections
            rate = produced / secs
            facts[f"produce_{partitions}"] = rate
            rows.append((f"produce, {partitions} partition{'s' * (partitions > 1)}: records/s (MB/s of values)",
                         f"{rate:,.0f} ({rate * len(VALUE) / 1e6:,.1f} MB/s)",
                         f"{produced:,} records; {args.connections} connections × {args.inflight} in flight, one "
                         f"idempotent producer each; {policy}"))
            print(f"  produce {partitions:>2} partitions: {rate:,.0f} records/s", flush=True)
            if partitions == 1:  # what pipelining and several connections buy (a topic of their own)
                async with AdminClient("127.0.0.1", port) as admin:
                    await admin.create_topics({"single": 1})
                n = max(total // 4 // BATCH * BATCH, BATCH)
                for conns, inflight in ((1, 1), (1, args.inflight)):
                    single = n / await produce_load(port, "single", 1, n, conns, inflight)
                    rows.append((f"produce, 1 partition, {conns} connection × {inflight} in flight: records/s",
                                 f"{single:,.0f} ({single * len(VALUE) / 1e6:,.1f} MB/s)",
                                 f"{n:,} records; " + ("one request at a time: a round trip per batch" if inflight == 1
                                                       else "pipelined on one connection")))
                    print(f"  produce  1 partition, {conns}×{inflight}: {single:,.0f} records/s", flush=True)
            fsecs, fetched = await fetch_all(port, topic, partitions, min(args.connections, partitions))
            assert fetched == produced, (fetched, produced)
            frate = fetched / fsecs
            rows.append((f"fetch, {partitions} partition{'s' * (partitions > 1)}: records/s (MB/s of values)",
                         f"{frate:,.0f} ({frate * len(VALUE) / 1e6:,.1f} MB/s)",
                         f"every record from offset 0, 1 MiB per partition per fetch, "
                         f"{min(args.connections, partitions)} connection{'s' * (min(args.connections, partitions) > 1)}"))
            print(f"  fetch   {partitions:>2} partitions: {frate:,.0f} records/s", flush=True)
        frames = segment_frames(data_dir / "logs", topic)
        disk_bytes = sum(len(f) for f in frames)
        rows.append((f"produce, {partitions} partition{'s' * (partitions > 1)}: log bytes written/s",
                     f"{disk_bytes / secs / 1e6:,.1f} MB/s", f"{disk_bytes / 1e6:,.1f} MB in {len(frames):,} batch frames"))
        psecs = plain_file_writes(frames, work / "peer.bin", flush)
        rows.append((f"peer: the same {len(frames):,} frames os.write'n to a plain file",
                     f"{disk_bytes / psecs / 1e6:,.1f} MB/s ({produced / psecs:,.0f} records/s)",
                     f"same fsync policy; grouplab reaches {secs and psecs / secs * 100:.1f}% of it"))
        print(f"  peer plain file: {disk_bytes / psecs / 1e6:,.1f} MB/s", flush=True)
        shutil.rmtree(data_dir)

    if args.recovery_gb > 0:
        root = work / "recovery"
        size, gen_secs = make_log(root, int(args.recovery_gb * (1 << 30)))
        print(f"  wrote a {size / 1e9:.2f} GB log in {gen_secs:.1f} s", flush=True)
        warm, scanned, batches = time_recovery(root)
        rows.append((f"recovery of a {size / 1e9:.2f} GB log, page cache warm",
                     f"{warm:.2f} s ({scanned / warm / 1e6:,.0f} MB/s)",
                     f"{batches:,} batches: headers unpacked, CRC-32 of every batch checked, index, producer state"))
        print(f"  recovery warm: {warm:.2f} s", flush=True)
        facts["recovery_warm"] = scanned / warm
        if drop_page_cache(root):
            cold, scanned, _ = time_recovery(root)
            rows.append((f"recovery of the same log, page cache dropped", f"{cold:.2f} s ({scanned / cold / 1e6:,.0f} MB/s)",
                         "posix_fadvise(DONTNEED) on every segment first"))
            print(f"  recovery cold: {cold:.2f} s", flush=True)
            facts["recovery_cold"] = scanned / cold
            drop_page_cache(root)
            plain = time_plain_read(root)
            rows.append(("peer: plain sequential read of the same files, page cache dropped",
                         f"{plain:.2f} s ({scanned / plain / 1e6:,.0f} MB/s)", "16 MiB reads, no parsing: the disk's floor"))
        shutil.rmtree(root)
    return rows, facts


def table(rows: list[tuple[str, str, str]]) -> str:
    out = ["| measurement | result | notes |", "|---|---:|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(out)


# ----------------------------------------------------------------------------- offset commits (coordinator/offsets.py)
#
# A separate section (its own table in docs/benchmarks.md): OffsetCommit latency over real sockets,
# one request at a time on one connection, as a consumer's commitSync sees it, with the group log
# in memory (no data directory), grouplab.log.fsync=never and grouplab.log.fsync=always. Run it
# alone with --only-offsets.


def commit_body(group: str, topic: str, partitions: int, offset: int) -> dict:
    parts = [{"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": None}
             for p in range(partitions)]
    return {"group_id": group, "topics": [{"name": topic, "partitions": parts}], "generation_id": -1, "member_id": "",
            "group_instance_id": None}


async def commit_latencies(port: int, api: str, partitions: int, n: int) -> list[float]:
    """Seconds of each of `n` sequential round trips: OffsetCommit of `partitions` partitions by a
    simple consumer (generation -1), or ApiVersions (the floor: framing, asyncio and one hop)."""
    conn = await Conn.open(port)
    out = []
    for i in range(n + n // 10):  # the first tenth warms up and is not counted
        body = commit_body("bench-offsets", "bench", partitions, i) if api == "OffsetCommit" else {}
        t0 = time.perf_counter()
        conn.writer.write(frame(api, i + 1, body))
        (f,) = await conn.frames()
        elapsed = time.perf_counter() - t0
        resp = msgpack.unpackb(f)["body"]
        if api == "OffsetCommit":
            errors = {p["error_code"] for t in resp["topics"] for p in t["partitions"]}
            if errors != {0}:
                raise RuntimeError(f"OffsetCommit failed: {resp}")
        if i >= n // 10:
            out.append(elapsed)
    conn.close()
    return out


def plain_fsync_latencies(path: Path, n: int, size: int) -> list[float]:
    """The peer of fsync=always: os.write of one record-sized frame and os.fsync, `n` times."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    out = []
    data = b"x" * size
    for _ in range(n):
        t0 = time.perf_counter()
        os.write(fd, data)
        os.fsync(fd)
        out.append(time.perf_counter() - t0)
    os.close(fd)
    path.unlink()
    return out


def percentiles_us(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (ordered[len(ordered) // 2] * 1e6, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6)


async def run_offsets(n: int, work: Path) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    modes = [("in memory (no data directory)", None, []),
             ("grouplab.log.fsync=never", work / "offsets-never", ["grouplab.log.fsync=never"]),
             ("grouplab.log.fsync=always", work / "offsets-always", ["grouplab.log.fsync=always"])]
    for label, data_dir, overrides in modes:
        with ServerProcess(str(data_dir) if data_dir else None, overrides) as port:  # type: ignore[arg-type]
            async with AdminClient("127.0.0.1", port) as admin:
                await admin.create_topics({"bench": 10})
            if data_dir is None:
                p50, p99 = percentiles_us(await commit_latencies(port, "ApiVersions", 0, n))
                rows.append(("peer: ApiVersions round trip", f"{p50:,.0f}", f"{p99:,.0f}", "no state: the floor"))
                print(f"  {rows[-1][0]}: p50 {p50:,.0f} µs, p99 {p99:,.0f} µs", flush=True)
            for partitions in (1, 10):
                p50, p99 = percentiles_us(await commit_latencies(port, "OffsetCommit", partitions, n))
                note = f"{n:,} sequential commits"
                if data_dir:
                    note += f"; {partitions} record{'s' * (partitions > 1)}, one write"
                    note += " and one fsync" if "always" in label else ""
                rows.append((f"OffsetCommit, {partitions} partition{'s' * (partitions > 1)}, {label}",
                             f"{p50:,.0f}", f"{p99:,.0f}", note))
                print(f"  {rows[-1][0]}: p50 {p50:,.0f} µs, p99 {p99:,.0f} µs", flush=True)
    p50, p99 = percentiles_us(plain_fsync_latencies(work / "peer-fsync.bin", n, 80))
    rows.append(("peer: os.write + os.fsync of one 80-byte frame to a plain file", f"{p50:,.0f}", f"{p99:,.0f}",
                 "the disk's floor under fsync=always"))
    return rows


def offsets_main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-offsets-", dir=args.dir))
    try:
        rows = asyncio.run(run_offsets(args.offset_commits, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(["| measurement | p50 µs | p99 µs | notes |", "|---|---:|---:|---|"]
                     + [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows])
    print()
    print(text)
    if not args.no_write:
        stamp = utc_stamp()
        argv = " ".join(sys.argv[1:])
        header = (f"\n## Offset commits: OffsetCommit latency ({stamp})\n\n"
                  f"`scripts/bench_log.py{' ' + argv if argv else ''}` on {os.cpu_count()} cores, Python "
                  f"{platform.python_version()}: coordinator in its own process, one client connection sending one "
                  f"request at a time over loopback TCP (a simple consumer's commits, generation -1), so each figure "
                  f"is a full round trip as commitSync sees it. With a data directory every committed partition is "
                  f"one record in the group log, written (and with `always` synced) before the response.\n\n")
        append_to_benchmarks(header + text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records produced per partition count")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--inflight", type=int, default=8, help="requests in flight per connection")
    ap.add_argument("--recovery-gb", type=float, default=1.0, help="size of the log to recover (0: skip)")
    ap.add_argument("--flush-messages", type=int, default=INT64_MAX, help="log.flush.interval.messages (default: never)")
    ap.add_argument("--dir", help="where to put the data (default: a temporary directory)")
    ap.add_argument("--profile", help="write a cProfile of the 1-partition server to this file")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    ap.add_argument("--offset-commits", type=int, default=2000, help="OffsetCommit round trips per mode (offsets section)")
    ap.add_argument("--only-offsets", action="store_true", help="run only the OffsetCommit latency section")
    ap.add_argument("--no-offsets", action="store_true", help="skip the OffsetCommit latency section")
    args = ap.parse_args()
    if args.only_offsets:
        offsets_main(args)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-log-", dir=args.dir))
    try:
        rows, facts = asyncio.run(run(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    verdict = "MET" if min(facts["produce_1"], facts["produce_16"]) >= 200_000 else "NOT MET"
    if args.flush_messages < INT64_MAX:
        verdict = f"not applicable (the target is for Kafka's default flush policy; this run syncs every " \
                  f"{args.flush_messages} records)"
    targets = [f"- at least 200,000 records/s produced: {verdict} "
               f"(1 partition {facts['produce_1']:,.0f}, 16 partitions {facts['produce_16']:,.0f})"]
    if "recovery_warm" in facts:
        cold = facts.get("recovery_cold")
        targets.append(f"- recovery at least 200 MB/s: {'MET' if facts['recovery_warm'] >= 200e6 else 'NOT MET'} "
                       f"(page cache warm {facts['recovery_warm'] / 1e6:,.0f} MB/s"
                       + (f"; dropped {cold / 1e6:,.0f} MB/s, {'MET' if cold >= 200e6 else 'NOT MET'}" if cold else "")
                       + ")")
    text = table(rows) + "\n\nTargets:\n\n" + "\n".join(targets)
    print()
    print(text)
    if not args.no_write:
        stamp = utc_stamp()
        argv = " ".join(sys.argv[1:])
        header = (f"\n## Partition logs: produce, fetch, recovery ({stamp})\n\n"
                  f"`scripts/bench_log.py{' ' + argv if argv else ''}` on {os.cpu_count()} cores, Python "
                  f"{platform.python_version()}, coordinator in its own process with a data directory, the load "
                  f"generator in this one (msgpack encoded directly), over loopback TCP.\n\n")
        append_to_benchmarks(header + text)
    if not args.no_offsets:
        offsets_main(args)


if __name__ == "__main__":
    main()
