#!/usr/bin/env python3
"""How fast grouplab.testing gives a test a broker (issue 20's figures), beside librdkafka's mock
cluster in the same run:

1. `from grouplab.testing import Cluster` in a fresh interpreter (what a test session pays once, at
   its first cluster: the plugin itself imports next to nothing), beside a bare
   interpreter and `import confluent_kafka`;
2. from `Cluster(...)` (what the `grouplab_cluster` fixture does: a temporary run directory and
   data directory, a loop thread, the coordinator, its Kafka-wire listener and the fault proxy) to
   a broker that answers ApiVersions on `bootstrap`;
3. from the same start to a Stable group of 3 confluent-kafka consumers over a 3-partition topic
   (group.initial.rebalance.delay.ms 0 on both), each holding one partition.

The mock is librdkafka's C mock cluster (one broker) made through its C API, as
scripts/bench_kafka_wire.py makes it. Each row is the median (min-max) of --runs runs, the two
alternating. Prints a table and appends it to docs/benchmarks.md (unless --no-write).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

sys.path.insert(1, str(Path(__file__).resolve().parent))

from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

TOPIC = "bench"


def api_versions(bootstrap: str, timeout_s: float = 10.0) -> None:
    """One ApiVersions v0 request on a new connection, answered with error code 0."""
    host, port = bootstrap.rsplit(":", 1)
    client = b"bench"
    body = struct.pack(">hhih", 18, 0, 1, len(client)) + client
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(sock, 4))[0]
        answer = _read(sock, size)
    correlation_id, error_code = struct.unpack(">ih", answer[:6])
    if correlation_id != 1 or error_code != 0:
        raise RuntimeError(f"ApiVersions answered correlation id {correlation_id}, error {error_code}")


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise RuntimeError("connection closed before the answer")
        data += chunk
    return data


def stable_group(bootstrap: str, n: int, timeout_s: float = 60.0) -> None:
    """n confluent-kafka consumers subscribe; returns when each holds one partition of TOPIC."""
    from confluent_kafka import Consumer

    group = f"bench-{uuid.uuid4().hex[:8]}"
    cs = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"c{i}",
                    "partition.assignment.strategy": "range", "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 500, "enable.auto.commit": False, "log_level": 0}) for i in range(n)]
    try:
        for c in cs:
            c.subscribe([TOPIC])
        deadline = time.perf_counter() + timeout_s
        while True:
            for c in cs:
                c.poll(0)
            if sorted(tp.partition for c in cs for tp in c.assignment()) == list(range(n)) and all(
                    len(c.assignment()) == 1 for c in cs):
                return
            if time.perf_counter() > deadline:
                raise RuntimeError(f"no stable group of {n} within {timeout_s:g} s")
            time.sleep(0.002)
    finally:
        threads = [threading.Thread(target=c.close, daemon=True) for c in cs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)


def grouplab_run(n: int) -> tuple[float, float]:
    from grouplab.testing import Cluster

    started = time.perf_counter()
    with Cluster(topics={TOPIC: n}) as cluster:
        api_versions(cluster.bootstrap)
        ready = time.perf_counter() - started
        stable_group(cluster.bootstrap, n)
        stable = time.perf_counter() - started
    return ready, stable


def mock_run(n: int) -> tuple[float, float]:
    from bench_kafka_wire import MockCluster

    started = time.perf_counter()
    mock = MockCluster(n, 0)
    try:
        api_versions(mock.bootstrap)
        ready = time.perf_counter() - started
        stable_group(mock.bootstrap, n)
        stable = time.perf_counter() - started
    finally:
        mock.close()
    return ready, stable


def import_time(statement: str, runs: int) -> list[float]:
    """Wall time of `python -c STATEMENT` in a fresh interpreter, each run."""
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True)
        out.append(time.perf_counter() - started)
    return out


def fmt(values: list[float], unit: str = "s") -> str:
    if unit == "ms":
        return f"{statistics.median(values) * 1000:.1f} ms ({min(values) * 1000:.1f}-{max(values) * 1000:.1f})"
    return f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each (default 7)")
    parser.add_argument("--consumers", type=int, default=3, help="consumers in the group (default 3)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = parser.parse_args(argv)

    results: dict[str, list[tuple[float, float]]] = {"grouplab": [], "librdkafka mock": []}
    runners: dict[str, Callable[[int], tuple[float, float]]] = {"grouplab": grouplab_run, "librdkafka mock": mock_run}
    grouplab_run(args.consumers)  # warm: the first run pays the imports, which row 1 measures on its own
    for i in range(args.runs):
        for name in (list(runners) if i % 2 == 0 else list(runners)[::-1]):
            results[name].append(runners[name](args.consumers))
            print(f"  run {i + 1} {name}: ready {results[name][-1][0] * 1000:.1f} ms, "
                  f"stable {results[name][-1][1]:.3f} s", flush=True)
    imports = {"python -c pass": import_time("pass", args.runs),
               "from grouplab.testing import Cluster": import_time("from grouplab.testing import Cluster", args.runs),
               "import confluent_kafka": import_time("import confluent_kafka", args.runs)}

    rows: list[tuple[str, str, str]] = []
    for name, got in results.items():
        rows.append((name, fmt([r for r, _ in got], "ms"), fmt([s for _, s in got])))
    head = f"| broker | start to ApiVersions answered | start to a Stable group of {args.consumers} |"
    table = [head, "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]
    itable = ["| fresh interpreter | wall time |", "|---|---|"] + [f"| `{k}` | {fmt(v, 'ms')} |" for k, v in imports.items()]
    print("\n".join(table))
    print()
    print("\n".join(itable))
    if not args.no_write:
        append_to_benchmarks("\n".join([
            f"## grouplab.testing: a broker for a test, beside librdkafka's mock cluster ({utc_stamp()})", "",
            f"`scripts/bench_testing.py --runs {args.runs} --consumers {args.consumers}`: median (min-max) of "
            f"{args.runs} runs, alternating. grouplab: `Cluster(topics=...)` as the `grouplab_cluster` fixture "
            "starts it (temporary run and data directories, its loop thread, the coordinator, the Kafka-wire "
            "listener and the fault proxy clients connect through); the mock: librdkafka's C mock cluster, one "
            "broker. Group: confluent-kafka consumers, range, group.initial.rebalance.delay.ms 0 on both.", "",
            *table, "", *itable, ""]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
