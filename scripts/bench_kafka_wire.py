#!/usr/bin/env python3
"""Benchmark: real Kafka clients on grouplab's Kafka-wire listener, side by side with librdkafka's
own mock cluster (docs/kafka-wire.md). Prints tables and appends them to docs/benchmarks.md.

1. Time to a stable group: N confluent-kafka (librdkafka) consumers, eager `range`, subscribe at
   once to a topic of N partitions; the time from subscribe until every consumer holds exactly
   its share (each partition owned once), with the same group.initial.rebalance.delay.ms on both
   (grouplab's config; the mock's rd_kafka_mock_group_initial_rebalance_delay_ms, called through
   ctypes on the librdkafka confluent-kafka ships). Extra elections: generations beyond the first
   (each consumer counts its assignments; the most any consumer saw, minus one).
2. Heartbeats and commits per second: N consumers with heartbeat.interval.ms=100 for a window
   (Heartbeat requests answered, from librdkafka's own statistics), then each committing offsets
   asynchronously as fast as it can (successful commits from its on_commit callback).

    scripts/bench_kafka_wire.py [--sizes 10,100] [--delays 500,3000] [--runs 3] [--window 5] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import glob
import json
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

TOPIC = "bench"


# ----------------------------------------------------------------------------- backends


class Grouplab:
    """A CoordinatorServer with a Kafka-wire listener, on its own event-loop thread."""

    name = "grouplab"

    def __init__(self, partitions: int, delay_ms: int) -> None:
        from coordinator.config import BrokerConfig
        from coordinator.server import CoordinatorServer

        config = BrokerConfig().with_overrides([f"group.initial.rebalance.delay.ms={delay_ms}",
                                                "group.min.session.timeout.ms=1000"])
        self.server = CoordinatorServer(config, "127.0.0.1", 0, kafka_port=0)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._call(self.server.start())
        self._call(self._create(partitions))
        self.bootstrap = f"127.0.0.1:{self.server.kafka_port}"

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    async def _create(self, partitions: int) -> None:
        from grouplab.admin import AdminClient

        async with AdminClient("127.0.0.1", self.server.port) as admin:
            await admin.create_topics({TOPIC: partitions})

    def generation(self, group: str) -> int:
        g = self.server.broker.groups.get(group)
        return g.generation_id if g is not None else 0

    def close(self) -> None:
        self._call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class MockCluster:
    """librdkafka's mock cluster (one broker), made and configured through librdkafka's C API."""

    name = "librdkafka mock"

    def __init__(self, partitions: int, delay_ms: int) -> None:
        import confluent_kafka

        libdir = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
        lib = ctypes.CDLL(glob.glob(str(libdir / "librdkafka*.so*"))[0])
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_size_t]
        self.lib = lib
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        lib.rd_kafka_conf_set(conf, b"log_level", b"0", errstr, 512)  # it has no bootstrap servers, and says so
        self.rk = lib.rd_kafka_new(0, conf, errstr, 512)
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, 1)
        lib.rd_kafka_mock_topic_create(self.mc, TOPIC.encode(), partitions, 1)
        lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self.mc, delay_ms)
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()

    def generation(self, group: str) -> int:
        return 0  # not readable from outside the mock: the consumers' own count is used

    def close(self) -> None:
        self.lib.rd_kafka_mock_cluster_destroy(self.mc)
        self.lib.rd_kafka_destroy(self.rk)


BACKENDS: list[Callable[[int, int], Any]] = [Grouplab, MockCluster]


# ----------------------------------------------------------------------------- 1. time to a stable group


def consumers(bootstrap: str, group: str, n: int, extra: dict[str, Any] | None = None) -> list[Consumer]:
    return [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"c{i}",
                      "partition.assignment.strategy": "range", "session.timeout.ms": 10000,
                      "heartbeat.interval.ms": 500, "enable.auto.commit": False, "log_level": 0,
                      **(extra or {})}) for i in range(n)]


def stable_group(backend: Any, n: int, timeout_s: float) -> tuple[float | None, int]:
    """Seconds until the group holds every partition exactly once, and the extra elections seen."""
    group = f"bench-{uuid.uuid4().hex[:8]}"
    cs = consumers(backend.bootstrap, group, n)
    assigns = [0] * n

    def counter(i: int) -> Callable[[Any, list[TopicPartition]], None]:
        def on_assign(c: Any, parts: list[TopicPartition]) -> None:
            assigns[i] += 1
        return on_assign

    started = time.perf_counter()
    for i, c in enumerate(cs):
        c.subscribe([TOPIC], on_assign=counter(i))
    stable_at = None
    deadline = started + timeout_s
    while time.perf_counter() < deadline:
        for c in cs:
            c.poll(0)
        owned = sorted(tp.partition for c in cs for tp in c.assignment())
        if owned == list(range(n)) and all(c.assignment() for c in cs):
            stable_at = time.perf_counter() - started
            break
        time.sleep(0.005)
    settle = time.perf_counter() + 1.0  # a late extra election would show here
    while stable_at is not None and time.perf_counter() < settle:
        for c in cs:
            c.poll(0)
        time.sleep(0.01)
    generations = max(backend.generation(group), max(assigns))
    for c in cs:
        c.close()
    return stable_at, max(generations - 1, 0)


# ----------------------------------------------------------------------------- 2. heartbeats and commits


def rates(backend: Any, n: int, window_s: float) -> tuple[float, float]:
    """Heartbeats answered per second (librdkafka statistics) and successful commits per second."""
    group = f"rate-{uuid.uuid4().hex[:8]}"
    stats: dict[int, int] = {}
    commits = [0]

    def on_stats(i: int) -> Callable[[str], None]:
        def cb(text: str) -> None:
            data = json.loads(text)
            stats[i] = sum(b.get("req", {}).get("Heartbeat", 0) for b in data.get("brokers", {}).values())
        return cb

    def on_commit(err: Any, parts: Any) -> None:
        if err is None:
            commits[0] += 1

    cs = [Consumer({"bootstrap.servers": backend.bootstrap, "group.id": group, "client.id": f"r{i}",
                    "partition.assignment.strategy": "range", "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 100, "enable.auto.commit": False, "statistics.interval.ms": 500,
                    "stats_cb": on_stats(i), "on_commit": on_commit, "log_level": 0}) for i in range(n)]
    for c in cs:
        c.subscribe([TOPIC])
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline and not all(c.assignment() for c in cs):
        for c in cs:
            c.poll(0)
        time.sleep(0.01)

    def spin(seconds: float, step: Callable[[Consumer], None]) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for c in cs:
                step(c)

    spin(1.0, lambda c: c.poll(0.001))
    before = sum(stats.values())
    spin(window_s, lambda c: c.poll(0.001))
    spin(0.6, lambda c: c.poll(0.001))  # the last statistics interval
    heartbeats = (sum(stats.values()) - before) / window_s
    offset = [1000]

    def commit(c: Consumer) -> None:
        offset[0] += 1
        parts = c.assignment()
        if parts:
            c.commit(offsets=[TopicPartition(TOPIC, parts[0].partition, offset[0])], asynchronous=True)
        c.poll(0)

    commits[0] = 0
    spin(window_s, commit)
    done = commits[0] / window_s
    for c in cs:
        c.close()
    return heartbeats, done


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10,100", help="numbers of consumers")
    ap.add_argument("--delays", default="500,3000", help="group.initial.rebalance.delay.ms values")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=float, default=5.0, help="seconds each rate is measured over")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a group may take to be stable")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    delays = [int(x) for x in args.delays.split(",")]
    import confluent_kafka

    lines = [f"## Kafka-wire listener: real clients, grouplab vs librdkafka's mock cluster ({utc_stamp()})", "",
             f"`scripts/bench_kafka_wire.py --sizes {args.sizes} --delays {args.delays} --runs {args.runs} "
             f"--window {args.window}`; confluent-kafka {confluent_kafka.version()[0]} (librdkafka "
             f"{confluent_kafka.libversion()[0]}), eager `range`, one topic of N partitions, {os.cpu_count()} cores, "
             f"load average {os.getloadavg()[0]:.2f} at the start. The consumers and the broker share this machine.", "",
             "| consumers | initial delay ms | broker | stable in, s (median, min-max) | converged | extra elections (per run) |",
             "|---:|---:|---|---|---|---|"]
    print("\n".join(lines[-2:]))
    for n in sizes:
        for delay in delays:
            for make in BACKENDS:
                times, extra, ok = [], [], 0
                name = ""
                for _ in range(args.runs):
                    backend = make(n, delay)
                    name = backend.name
                    try:
                        took, elections = stable_group(backend, n, args.timeout)
                    finally:
                        backend.close()
                    extra.append(elections)
                    if took is not None:
                        ok += 1
                        times.append(took)
                cell = (f"{statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f})" if times else "-")
                row = f"| {n} | {delay} | {name} | {cell} | {ok}/{args.runs} | {', '.join(map(str, extra))} |"
                print(row)
                lines.append(row)
    lines += ["", "| consumers | broker | heartbeats answered /s (heartbeat.interval.ms=100) | async commits acknowledged /s |",
              "|---:|---|---:|---:|"]
    print("\n".join(lines[-2:]))
    for n in sizes:
        for make in BACKENDS:
            backend = make(n, 0)
            try:
                hb, cm = rates(backend, n, args.window)
            finally:
                backend.close()
            row = f"| {n} | {backend.name} | {hb:.0f} | {cm:.0f} |"
            print(row)
            lines.append(row)
    lines.append(f"\nload average {os.getloadavg()[0]:.2f} at the end.")
    if not args.no_write:
        append_to_benchmarks("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
