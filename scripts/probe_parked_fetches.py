#!/usr/bin/env python3
"""Probe (issue 22, cases 1 and 2): parked Fetches on the Kafka port must not slow anyone else.

The coordinator runs in its own process (`python -m grouplab.cli coordinator --kafka-port P`).
Watching: a protected group of three kafka-python consumers (session.timeout.ms 10 s, 1 s polls),
and a bystander, a raw Kafka-protocol member of a group of its own heartbeating every 100 ms
(its worst wait for an answer is the delay reported). Then the hostile load:

- case 1 (wide): N connections each park one Fetch naming all P partitions of a topic, max_wait_ms
  and min_bytes at their maximum (INT32_MAX), while a producer produces one record at a time to
  partition 0 of that topic (`--produces` of them);
- case 2 (deep): M connections each park one such Fetch at the log end of the one partition of
  another topic, then the producer produces one record at a time to it.

Each row: produce latency p50/max (send to acknowledgement, acks=1), the bystander's worst
heartbeat delay, the protected members removed (member ids that left the group), the
coordinator's RSS before the load, at its peak and a few seconds after the hostile connections
closed. Defaults are the issue's sizes; --json prints the rows as JSON (the tests run it small).

    scripts/probe_parked_fetches.py [--wide-conns 100] [--partitions 20000] [--deep-conns 500]
                                    [--produces 50] [--cases 1,2] [--label TEXT] [--json] [--no-write]

To measure another checkout's coordinator (main's code, before the change), run this script with
PYTHONPATH pointing at that checkout: the coordinator process inherits it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.group import (HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
                                           SyncGroupRequest, SyncGroupResponse)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

INT32_MAX = 2**31 - 1
RESPONSES = {JoinGroupRequest.API_KEY: JoinGroupResponse, SyncGroupRequest.API_KEY: SyncGroupResponse,
             HeartbeatRequest.API_KEY: HeartbeatResponse}
PROTECTED_GROUP = "protected"
SESSION_MS = 10_000


@dataclass
class Row:
    case: str
    sizes: str
    produce_p50_ms: float
    produce_max_ms: float
    heartbeat_worst_ms: float
    members_removed: int
    rss_before_mb: float
    rss_peak_mb: float
    rss_after_mb: float


# ----------------------------------------------------------------------------- raw Kafka protocol


class Raw:
    """One blocking connection speaking Kafka's protocol (request header v1, non-flexible versions)."""

    def __init__(self, port: int, client_id: str = "probe") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id.encode()
        self.cid = 0

    def send(self, request: Any) -> int:
        self.cid += 1
        header = struct.pack(">hhih", request.API_KEY, request.API_VERSION, self.cid, len(self.client_id)) + self.client_id
        body = header + bytes(request.encode())
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        return self.cid

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def call(self, request: Any) -> Any:
        self.send(request)
        size, = struct.unpack(">i", self._exactly(4))
        data = self._exactly(size)
        return RESPONSES[request.API_KEY].decode(data[4:], version=request.API_VERSION)

    def close(self) -> None:
        self.sock.close()


class Bystander(threading.Thread):
    """A member of a group of its own, heartbeating every 100 ms; `worst` is its longest wait."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.raw = Raw(port, "bystander")
        J = JoinGroupRequest[5]  # v4+: the first join is answered MEMBER_ID_REQUIRED (79) with the id to use
        member_id = ""
        for _ in range(2):
            join = self.raw.call(J(group_id="bystander", session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                                   member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                   protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            member_id = join.member_id
            if join.error_code != 79:
                break
        assert join.error_code == 0, join
        self.member_id, self.generation = join.member_id, join.generation_id
        S = SyncGroupRequest[0]
        sync = self.raw.call(S(group_id="bystander", generation_id=self.generation, member_id=self.member_id,
                               assignments=[S.SyncGroupRequestAssignment(member_id=self.member_id, assignment=b"")]))
        assert sync.error_code == 0, sync
        self.worst = 0.0
        self.errors = 0
        self.stopping = threading.Event()

    def reset(self) -> None:
        self.worst = 0.0

    def run(self) -> None:
        while not self.stopping.wait(0.1):
            started = time.perf_counter()
            answer = self.raw.call(HeartbeatRequest[0](group_id="bystander", generation_id=self.generation,
                                                       member_id=self.member_id))
            self.worst = max(self.worst, time.perf_counter() - started)
            self.errors += answer.error_code != 0


def parking_fetch(topic: str, partitions: int, offset: int) -> Any:
    c = FetchRequest[4]
    return c(replica_id=-1, max_wait_ms=INT32_MAX, min_bytes=INT32_MAX, max_bytes=INT32_MAX, isolation_level=0,
             topics=[c.FetchTopic(topic=topic, partitions=[c.FetchTopic.FetchPartition(
                 partition=p, fetch_offset=offset, partition_max_bytes=1 << 20) for p in range(partitions)])])


# ----------------------------------------------------------------------------- the coordinator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Coordinator:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "grouplab.cli", "coordinator", "--port", "0",
                                      "--kafka-port", str(self.port)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=os.environ.copy())
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the coordinator did not start")
                time.sleep(0.1)
        self.peak = 0.0
        self._watching = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self._watching.wait(0.05):
            try:
                self.peak = max(self.peak, rss_mb(self.proc.pid))
            except OSError:
                return

    def rss(self) -> float:
        return rss_mb(self.proc.pid)

    def stop(self) -> None:
        self._watching.set()
        self.proc.terminate()
        self.proc.wait(30)


# ----------------------------------------------------------------------------- the protected group


class Protected:
    """Three kafka-python consumers in a group, each polling 1 s at a time on a thread."""

    def __init__(self, port: int, topic: str) -> None:
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._consume, args=(port, topic, i), daemon=True) for i in range(3)]
        for t in self.threads:
            t.start()

    def _consume(self, port: int, topic: str, i: int) -> None:
        consumer = KafkaConsumer(topic, bootstrap_servers=f"127.0.0.1:{port}", group_id=PROTECTED_GROUP,
                                 client_id=f"protected-{i}", session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000,
                                 max_poll_interval_ms=300_000, auto_offset_reset="earliest")
        try:
            while not self.stopping.is_set():
                consumer.poll(timeout_ms=1000)
        finally:
            consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(30)


def members(admin: KafkaAdminClient) -> set[str]:
    group = admin.describe_groups([PROTECTED_GROUP])[PROTECTED_GROUP]
    return {m["member_id"] for m in group["members"]} if group["group_state"] == "Stable" else set()


def wait_stable(admin: KafkaAdminClient, timeout: float = 120) -> set[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = members(admin)
        if len(found) == 3:
            return found
        time.sleep(0.5)
    raise RuntimeError("the protected group did not become stable with 3 members")


# ----------------------------------------------------------------------------- the cases


def produce_timed(producer: KafkaProducer, topic: str, count: int) -> list[float]:
    latencies = []
    for i in range(count):
        started = time.perf_counter()
        producer.send(topic, value=b"v%d" % i, partition=0).get(timeout=120)
        latencies.append(time.perf_counter() - started)
    return latencies


def run_case(coord: Coordinator, admin: KafkaAdminClient, bystander: Bystander, producer: KafkaProducer,
             case: str, topic: str, partitions: int, conns: int, offset: int, produces: int) -> Row:
    before_members = wait_stable(admin)
    time.sleep(2)  # the coordinator settles
    rss_before = coord.rss()
    coord.peak = rss_before
    bystander.reset()
    hostile = []
    request = parking_fetch(topic, partitions, offset)
    for _ in range(conns):
        raw = Raw(coord.port, "hostile")
        raw.send(request)
        hostile.append(raw)
    latencies = produce_timed(producer, topic, produces)
    for raw in hostile:
        raw.close()
    time.sleep(5)  # "a few seconds after the offending client goes"
    rss_after = coord.rss()
    after_members = members(admin)
    sizes = f"{conns} conns x {partitions} partitions" if case == "1 wide" else f"{conns} conns at the log end"
    return Row(case, f"{sizes}, {produces} produces", round(statistics.median(latencies) * 1000, 1),
               round(max(latencies) * 1000, 1), round(bystander.worst * 1000, 1),
               len(before_members - after_members), round(rss_before, 1), round(coord.peak, 1), round(rss_after, 1))


def probe(wide_conns: int, partitions: int, deep_conns: int, produces: int, cases: list[str]) -> list[Row]:
    coord = Coordinator()
    rows: list[Row] = []
    try:
        bootstrap = f"127.0.0.1:{coord.port}"
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=120_000)
        admin.create_topics([NewTopic("watched", 3, 1), NewTopic("wide", partitions, 1), NewTopic("deep", 1, 1)])
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0, request_timeout_ms=120_000)
        produce_timed(producer, "deep", 1)  # the deep Fetches park at offset 1, its log end
        protected = Protected(coord.port, "watched")
        bystander = Bystander(coord.port)
        bystander.start()
        try:
            if "1" in cases:
                rows.append(run_case(coord, admin, bystander, producer, "1 wide", "wide", partitions, wide_conns, 0,
                                     produces))
            if "2" in cases:
                rows.append(run_case(coord, admin, bystander, producer, "2 deep", "deep", 1, deep_conns, 1, produces))
        finally:
            bystander.stopping.set()
            protected.stop()
            producer.close()
            admin.close()
    finally:
        coord.stop()
    return rows


def table(rows: list[Row]) -> str:
    lines = ["| case | sizes | produce p50 ms | produce max ms | bystander worst heartbeat ms | members removed "
             "| RSS before / peak / after MB |", "|---|---|--:|--:|--:|--:|---|"]
    for r in rows:
        lines.append(f"| {r.case} | {r.sizes} | {r.produce_p50_ms} | {r.produce_max_ms} | {r.heartbeat_worst_ms} "
                     f"| {r.members_removed} | {r.rss_before_mb} / {r.rss_peak_mb} / {r.rss_after_mb} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wide-conns", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=20_000)
    ap.add_argument("--deep-conns", type=int, default=500)
    ap.add_argument("--produces", type=int, default=50)
    ap.add_argument("--cases", default="1,2")
    ap.add_argument("--label", default="", help="what code ran (e.g. main@abc1234), for the heading")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON (no table, nothing written)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows = probe(args.wide_conns, args.partitions, args.deep_conns, args.produces, args.cases.split(","))
    if args.json:
        print(json.dumps([asdict(r) for r in rows]))
        return
    text = table(rows)
    print(text)
    if not args.no_write:
        label = f" ({args.label})" if args.label else ""
        append_to_benchmarks(f"## Parked Fetches on the Kafka port{label} — {utc_stamp()}\n\n"
                             f"`scripts/probe_parked_fetches.py` (issue 22, cases 1-2): a protected group of three "
                             f"kafka-python consumers and a bystander heartbeating every 100 ms, while hostile "
                             f"connections park Fetches (max_wait_ms and min_bytes INT32_MAX) and a producer produces "
                             f"one record at a time (acks=1). RSS after: 5 s after the hostile connections closed.\n\n"
                             + text)


if __name__ == "__main__":
    main()
