#!/usr/bin/env python3
"""Probe (issue 22, cases 3-5): does a hostile Kafka client hurt the others on the Kafka port?

A coordinator runs in its own process (`grouplab coordinator --kafka-port`, its log in a file);
in this one a protected group of three kafka-python consumers (1 s polls, session.timeout.ms
10000) and a bystander member heartbeating every 100 ms over a raw Kafka connection from its own
thread. Then, one at a time, each hostile client:

  3a  a Produce of one gzip batch of N empty records (the issue: 3,000,000, ~30 KB sent);
  3b  a Produce of one gzip batch whose one record inflates to N bytes (the issue: ~900 MB);
  4   N Fetches for ~1 MiB answers on a connection that never reads (the issue: 1,500), then closes;
  5   N malformed frames: kafka-python's requests of every API and version the listener advertises
      (each array holding two entries, every string "t", the name of a 20,000-partition topic as
      in the issue's case 1), mutated (a byte flipped, a length inflated, a varint widened,
      truncated, three random bytes), from 8 connections at once; a connection the server closes
      is opened again.

For each: the offending answer and how long it took, the bystander's worst heartbeat round trip
and how many took over 1 s, the protected consumers' generation change, the coordinator's RSS
before, at its peak and 3 s after the client went, and its CPU seconds. Prints a table and appends
it to docs/benchmarks.md. With --baseline REF the same against the coordinator of git REF (its own
code, in a temporary worktree), before this tree's.

    scripts/probe_kafka_hostile.py [--small] [--cases 3a,3b,4,5] [--baseline 5314ae1] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402
from hostile_kafka import _HEADER, _varint  # noqa: E402

from kafka import KafkaConsumer  # noqa: E402
from kafka.protocol.admin.topics import CreateTopicsRequest, CreateTopicsResponse  # noqa: E402
from kafka.protocol.consumer.fetch import FetchRequest  # noqa: E402
from kafka.protocol.consumer.group import (  # noqa: E402
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, SyncGroupRequest, SyncGroupResponse)
from kafka.protocol.metadata.api_versions import ApiVersionsRequest  # noqa: E402
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.util import calc_crc32c  # noqa: E402

from grouplab.coordinator.kafka_wire.apis import APIS  # noqa: E402

# A record with no key, value or headers and every delta 0 (length 6; attributes, timestamp delta,
# offset delta 0; key and value -1; no headers): the 3,000,000 compress to ~21 KB.
EMPTY_RECORD = b"\x0c\x00\x00\x00\x01\x01\x00"
PARKED_S = 10  # a frame whose request waits (a Fetch's max wait, a JoinGroup's rebalance) is left after this
SIZES = {"3a": 3_000_000, "3b": 900_000_000, "4": 1_500, "5": 10_000}  # the issue's
SMALL = {"3a": 300_000, "3b": 50_000_000, "4": 150, "5": 1_000}
WIDE_PARTITIONS = 20_000
STORM_CONNECTIONS = 8
SKIPPED_APIS = {"DeleteTopics"}  # its seed names the wide topic: the storm would delete the state it is about


# ----------------------------------------------------------------------------- the coordinator


class Coordinator:
    """`grouplab coordinator` of a tree, in its own process, its log in a file."""

    def __init__(self, tree: Path, log: Path) -> None:
        self.log = log
        env = dict(os.environ, PYTHONPATH=str(tree))
        where = subprocess.run([sys.executable, "-c", "import grouplab; print(grouplab.__file__)"], cwd=tree, env=env,
                               capture_output=True, text=True, check=True).stdout
        assert where.startswith(str(tree)), f"{tree}'s coordinator would run {where}"  # -m puts cwd first
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "grouplab.cli", "coordinator", "--port", "0", "--kafka-port", "0",
                 "--config", "group.initial.rebalance.delay.ms=0"], stdout=out, stderr=out, env=env, cwd=tree)
        deadline = time.monotonic() + 60
        while True:
            found = re.search(r"Kafka clients on [\d.]+:(\d+)", log.read_text())
            if found:
                self.port = int(found.group(1))
                break
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"the coordinator did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


class PeakRss:
    """The coordinator's RSS, sampled every 50 ms from a thread while a case runs."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator, self.peak = coordinator, coordinator.rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.coordinator.rss_mb())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self.coordinator.rss_mb())


# ----------------------------------------------------------------------------- raw Kafka calls


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError("closed by the server")
        out += chunk
    return bytes(out)


def call(sock: socket.socket, request: Any, response: Any, version: int, correlation_id: int = 1) -> Any:
    request.with_header(correlation_id=correlation_id, client_id="probe")
    sock.sendall(bytes(request.encode(header=True, framed=True)))
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    return response.decode(_read_exactly(sock, size), version=version, header=True)


def create_topics(port: int, topics: dict[str, int]) -> None:
    c = CreateTopicsRequest[5]
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        call(sock, c(topics=[c.CreatableTopic(name=name, num_partitions=n, replication_factor=1, assignments=[],
                                              configs=[]) for name, n in topics.items()],
                     timeout_ms=60_000, validate_only=False), CreateTopicsResponse, 5)


def produce_request(topic: str, partition: int, records: bytes) -> Any:
    c = ProduceRequest
    return c[9](transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[c.TopicProduceData(
        name=topic, partition_data=[c.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def fetch_request(topic: str, partition: int) -> Any:
    c = FetchRequest
    return c[12](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                 session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[c.FetchTopic(topic=topic, partitions=[
                     c.FetchTopic.FetchPartition(partition=partition, fetch_offset=0, log_start_offset=-1,
                                                 partition_max_bytes=1 << 20, current_leader_epoch=-1,
                                                 last_fetched_epoch=-1)])])


def batch_of(payload: bytes, count: int, codec: int) -> bytes:
    """A batch v2 around an already compressed (or plain) records section, its CRC right."""
    header = _HEADER.pack(0, 0, -1, 2, 0, codec, max(count - 1, 0), 0, 0, -1, -1, -1, count)
    data = bytearray(header + payload)
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def gzip_of_one_zero_record(size: int) -> bytes:
    """gzip of one record whose value is `size` zero bytes, compressed in chunks (never held whole)."""
    body_head = b"\x00\x00\x00\x01" + _varint(size)
    body_len = len(body_head) + size + 1
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [z.compress(_varint(body_len) + body_head)]
    chunk = bytes(16 << 20)
    left = size
    while left:
        n = min(left, len(chunk))
        out.append(z.compress(chunk[:n]))
        left -= n
    out.append(z.compress(b"\x00") + z.flush())
    return b"".join(out)


# ----------------------------------------------------------------------------- who watches


class Bystander:
    """A member of a group of its own, heartbeating every 100 ms over a raw connection from a thread."""

    def __init__(self, port: int) -> None:
        self.port = port
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            member_id = ""
            for _ in range(2):  # MEMBER_ID_REQUIRED, then the join
                j = JoinGroupRequest[5]
                joined = call(sock, j(group_id="bystander", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                      member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                      protocols=[j.JoinGroupRequestProtocol(name="range", metadata=b"")]),
                              JoinGroupResponse, 5)
                member_id = joined.member_id
            synced = call(sock, SyncGroupRequest[3](group_id="bystander", generation_id=joined.generation_id,
                                                    member_id=member_id, group_instance_id=None, assignments=[]),
                          SyncGroupResponse, 3)
            assert joined.error_code == 0 and synced.error_code == 0, (joined, synced)
        self.member_id, self.generation = member_id, joined.generation_id
        self.round_trips: list[tuple[float, float]] = []  # (sent, seconds)
        self.errors: Counter[int] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=120) as sock:
            cid = 0
            while not self._stop.is_set():
                cid += 1
                sent = time.monotonic()
                answer = call(sock, HeartbeatRequest[4](group_id="bystander", generation_id=self.generation,
                                                        member_id=self.member_id, group_instance_id=None),
                              HeartbeatResponse, 4, cid)
                self.round_trips.append((sent, time.monotonic() - sent))
                if answer.error_code:
                    self.errors[answer.error_code] += 1
                self._stop.wait(0.1)

    def since(self, start: float) -> list[float]:
        return [s for sent, s in self.round_trips if sent >= start]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(130)


class ProtectedGroup:
    """Three kafka-python consumers of topic `protected`, each polling 1 s in a thread of its own."""

    def __init__(self, port: int) -> None:
        self.consumers = [KafkaConsumer("protected", bootstrap_servers=f"127.0.0.1:{port}", group_id="protected",
                                        client_id=f"protected-{i}", session_timeout_ms=10_000,
                                        heartbeat_interval_ms=1000, auto_offset_reset="earliest")
                          for i in range(3)]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._poll, args=(c,), daemon=True) for c in self.consumers]
        for t in self._threads:
            t.start()
        deadline = time.monotonic() + 120
        while not self.stable():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the protected group did not settle: {self.generations()}")
            time.sleep(0.2)

    def _poll(self, consumer: KafkaConsumer) -> None:
        while not self._stop.is_set():
            consumer.poll(timeout_ms=1000)

    def generations(self) -> list[int]:
        return [c._coordinator._generation.generation_id for c in self.consumers]  # noqa: SLF001

    def stable(self) -> bool:
        gens = self.generations()
        return len(set(gens)) == 1 and gens[0] > 0 and all(c.assignment() for c in self.consumers)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        for c in self.consumers:
            c.close(autocommit=False)


# ----------------------------------------------------------------------------- the cases


@dataclass
class Row:
    tree: str
    case: str
    size: str
    answer: str
    seconds: float
    worst_heartbeat: float = 0.0
    over_1s: int = 0
    generations: str = ""
    rss: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cpu: float = 0.0
    notes: list[str] = field(default_factory=list)


def case_3a(port: int, n: int) -> Callable[[], tuple[str, str]]:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # identical records (offset deltas 0): ~7 KB a million
    data = batch_of(z.compress(EMPTY_RECORD * n) + z.flush(), n, 1)

    def run() -> tuple[str, str]:
        with socket.create_connection(("127.0.0.1", port), timeout=300) as sock:
            answer = call(sock, produce_request("target", 0, data), ProduceResponse, 9)
        return f"{n:,} empty records, {len(data):,} B gzip'd", _produce_answer(answer)
    return run


def case_3b(port: int, n: int) -> Callable[[], tuple[str, str]]:
    data = batch_of(gzip_of_one_zero_record(n), 1, 1)

    def run() -> tuple[str, str]:
        with socket.create_connection(("127.0.0.1", port), timeout=300) as sock:
            answer = call(sock, produce_request("target", 0, data), ProduceResponse, 9)
        return f"one record of {n:,} B, {len(data):,} B gzip'd", _produce_answer(answer)
    return run


def _produce_answer(answer: Any) -> str:
    code = answer.responses[0].partition_responses[0].error_code
    return "appended" if code == 0 else f"error {code}"


def case_4(port: int, n: int) -> Callable[[], tuple[str, str]]:
    frames = []
    for i in range(n):
        request = fetch_request("target", 1)
        request.with_header(correlation_id=i + 1, client_id="never-reads")
        frames.append(bytes(request.encode(header=True, framed=True)))

    def run() -> tuple[str, str]:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(10)  # the server stops reading a connection whose answers wait: so does this send
        sent = 0
        try:
            for frame in frames:
                sock.sendall(frame)
                sent += 1
        except socket.timeout:
            pass
        time.sleep(2)  # what the server would buffer, it has by now
        sock.close()
        told = "all taken" if sent == n else f"server stopped reading after {sent:,}"
        return f"{n:,} Fetches of ~1 MiB answers, never read", told
    return run


def case_5(port: int, n: int, seed: int = 22) -> Callable[[], tuple[str, str]]:
    from probe_seeds import seeded_request  # noqa: PLC0415
    ping = ApiVersionsRequest[0]()
    ping.with_header(correlation_id=0x5EED, client_id="probe")
    ping_frame = bytes(ping.encode(header=True, framed=True))
    pong_id = struct.pack(">i", 0x5EED)
    rng = random.Random(seed)
    bases = []
    for api in APIS.values():
        if api.name in SKIPPED_APIS:
            continue
        for version in range(api.min_version, api.max_version + 1):
            request = seeded_request(api.request, version)
            request.with_header(correlation_id=7, client_id="fuzz")
            bases.append((api.name, bytes(request.encode(header=True))))
    frames = []
    for i in range(n):
        name, base = bases[i % len(bases)]
        kind, mutated = mutate(rng, base)
        frames.append((name, kind, struct.pack(">i", len(mutated)) + mutated))
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def storm(mine: list[tuple[str, str, bytes]]) -> None:
        sock: socket.socket | None = None
        for _name, _kind, frame in mine:
            if sock is None:
                sock = socket.create_connection(("127.0.0.1", port), timeout=PARKED_S)
            sock.sendall(frame + ping_frame)  # the ping's answer (or a close) ends this frame's turn
            got, outcome = b"", "answered"
            try:
                while True:
                    size_bytes = sock.recv(4, socket.MSG_WAITALL)
                    if len(size_bytes) < 4:
                        outcome = "closed"
                        break
                    body = _read_exactly(sock, struct.unpack(">i", size_bytes)[0])
                    if body[:4] == pong_id and not got:
                        outcome = "no answer (acks=0)"
                        break
                    if body[:4] == pong_id:
                        break
                    got = body
            except socket.timeout:
                outcome = f"waited > {PARKED_S} s (parked), left"
            except (ConnectionError, OSError):
                outcome = "closed"
            if outcome != "answered" and not outcome.startswith("no answer"):
                sock.close()
                sock = None
            with lock:
                outcomes[outcome] += 1
        if sock is not None:
            sock.close()

    def run() -> tuple[str, str]:
        threads = [threading.Thread(target=storm, args=(frames[i::STORM_CONNECTIONS],)) for i in range(STORM_CONNECTIONS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return (f"{n:,} mutated frames of {len(bases)} API versions, {STORM_CONNECTIONS} connections",
                ", ".join(f"{v:,} {k}" for k, v in outcomes.most_common()))
    return run


MUTATIONS = ("flip", "inflate32", "inflate16", "varint", "truncate", "random3")


def mutate(rng: random.Random, base: bytes) -> tuple[str, bytes]:
    """One mutation of a request (header and body, unframed), past the API key and version."""
    kind = rng.choice(MUTATIONS)
    b = bytearray(base)
    i = rng.randrange(8, len(b)) if len(b) > 8 else len(b)
    if kind == "flip" and i < len(b):
        b[i] ^= 1 << rng.randrange(8)
    elif kind == "inflate32":
        b[i:i + 4] = rng.choice([b"\x7f\xff\xff\xff", b"\x00\x0f\xff\xff", b"\x00\x00\xff\xff"])
    elif kind == "inflate16":
        b[i:i + 2] = rng.choice([b"\x7f\xff", b"\x0f\xff"])
    elif kind == "varint":
        b[i:i + 1] = rng.choice([b"\xff\xff\xff\x07", b"\xff\xff\x3f", b"\xff\x7f"])
    elif kind == "truncate":
        del b[i:]
    else:
        for _ in range(3):
            b[rng.randrange(8, len(b))] = rng.randrange(256)
    return kind, bytes(b)


def setup_data(port: int) -> None:
    """The target topic (2 partitions; partition 1 holds ~1 MB to fetch), the protected group's
    topic, and the 20,000-partition topic `t` the storm's requests name."""
    create_topics(port, {"target": 2, "protected": 3, "t": WIDE_PARTITIONS})
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        for _ in range(4):
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                          producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
            b.append(0, timestamp=int(time.time() * 1000), key=None, value=bytes(250_000), headers=[])
            answer = call(sock, produce_request("target", 1, bytes(b.build())), ProduceResponse, 9)
            assert answer.responses[0].partition_responses[0].error_code == 0, answer


def measure(tree: Path, label: str, sizes: dict[str, int], cases: list[str], log_dir: Path) -> list[Row]:
    coordinator = Coordinator(tree, log_dir / f"coordinator-{label}.log")
    print(f"{label}: coordinator pid {coordinator.proc.pid}, Kafka port {coordinator.port}, "
          f"log {coordinator.log}", flush=True)
    rows: list[Row] = []
    try:
        setup_data(coordinator.port)
        group = ProtectedGroup(coordinator.port)
        bystander = Bystander(coordinator.port)
        time.sleep(2)
        makers = {"3a": case_3a, "3b": case_3b, "4": case_4, "5": case_5}
        for name in cases:
            run = makers[name](coordinator.port, sizes[name])  # built before the clock starts
            before_gen, rss_before, cpu_before = group.generations(), coordinator.rss_mb(), coordinator.cpu_s()
            peak = PeakRss(coordinator)
            start = time.monotonic()
            try:
                size, answer = run()
            except (OSError, ConnectionError) as exc:
                size, answer = "", f"failed: {exc!r}"
            seconds = time.monotonic() - start
            time.sleep(3)  # the client has gone: what the coordinator gives back in a few seconds
            rss_peak = peak.stop()
            beats = bystander.since(start)
            after_gen = group.generations()
            row = Row(label, name, size, answer, seconds, max(beats, default=0.0), sum(b > 1 for b in beats),
                      "unchanged" if after_gen == before_gen else f"{before_gen} → {after_gen}",
                      (rss_before, rss_peak, coordinator.rss_mb()), coordinator.cpu_s() - cpu_before)
            rows.append(row)
            print(f"  {fmt(row)}", flush=True)
        bystander.stop()
        if bystander.errors:
            rows[-1].notes.append(f"bystander heartbeat errors {dict(bystander.errors)}")
        group.close()
    finally:
        coordinator.stop()
    return rows


COLUMNS = ("| tree | case | size | answer | s | bystander worst heartbeat s | heartbeats > 1 s | protected "
           "generation | coordinator RSS MB before / peak / after | coordinator CPU s |\n"
           "|---|---|---|---|---:|---:|---:|---|---|---:|")


def fmt(r: Row) -> str:
    rss = " / ".join(f"{v:,.0f}" for v in r.rss)
    notes = f" ({'; '.join(r.notes)})" if r.notes else ""
    return (f"| {r.tree} | {r.case} | {r.size} | {r.answer}{notes} | {r.seconds:.1f} | {r.worst_heartbeat:.3f} | "
            f"{r.over_1s} | {r.generations} | {rss} | {r.cpu:.1f} |")


def main() -> None:
    global STORM_CONNECTIONS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help=f"smaller sizes: {SMALL}")
    ap.add_argument("--cases", default="3a,3b,4,5", help="which cases, in order")
    for name in SIZES:
        ap.add_argument(f"--n{name}", type=int, help=f"case {name}'s size (default {SIZES[name]:,})")
    ap.add_argument("--connections", type=int, default=STORM_CONNECTIONS, help="case 5's connections at once")
    ap.add_argument("--baseline", metavar="REF", help="also probe the coordinator of git REF, first")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    sizes = dict(SMALL if args.small else SIZES)
    for name in SIZES:
        if getattr(args, f"n{name}") is not None:
            sizes[name] = getattr(args, f"n{name}")
    cases = args.cases.split(",")
    STORM_CONNECTIONS = args.connections
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="probe-kafka-hostile-") as tmp:
        log_dir = Path(tmp)
        if args.baseline:
            tree = log_dir / "tree"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), args.baseline],
                           check=True)
            try:
                rows += measure(tree, args.baseline, sizes, cases, log_dir)
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        rows += measure(ROOT, "this tree", sizes, cases, log_dir)
    text = COLUMNS + "\n" + "\n".join(fmt(r) for r in rows)
    print("\n" + text)
    command = "scripts/probe_kafka_hostile.py" + (" --small" if args.small else "") + \
        (f" --cases {args.cases}" if args.cases != "3a,3b,4,5" else "") + \
        (f" --baseline {args.baseline}" if args.baseline else "")
    if not args.no_write:
        append_to_benchmarks(
            f"\n## Hostile Kafka clients and the others on the port (issue 22, cases 3-5) ({utc_stamp()})\n\n"
            f"`{command}` on {os.cpu_count()} cores, Python {platform.python_version()}. The coordinator "
            f"(`grouplab coordinator`, group.initial.rebalance.delay.ms=0) runs in its own process; a protected "
            f"group of three kafka-python consumers (1 s polls, session.timeout.ms 10000) and a bystander "
            f"heartbeating every 100 ms from a thread watch each hostile client in turn: 3a a gzip batch of "
            f"empty records, 3b a gzip batch of one record of zeros, 4 Fetches for ~1 MiB answers on a "
            f"connection that never reads, 5 mutated requests of every advertised API version (each naming "
            f"the {WIDE_PARTITIONS:,}-partition topic `t`) from {STORM_CONNECTIONS} connections. *s* is from the "
            f"first byte sent to the answer (case 4: to the close); RSS *after* is 3 s after the client went; "
            f"the CPU is the coordinator's over the case and those 3 s. Targets: no heartbeat over 1 s, the "
            f"protected generation unchanged, RSS back within 50 MB.\n\n" + text)


if __name__ == "__main__":
    main()
