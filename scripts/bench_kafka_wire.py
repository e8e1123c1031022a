#!/usr/bin/env python3
"""Benchmark: real Kafka clients on grouplab's Kafka-wire listener, side by side with librdkafka's
own mock cluster (docs/kafka-wire.md). Prints tables and appends them to docs/benchmarks.md.

1. Time to a stable group: N confluent-kafka (librdkafka) consumers, eager `range`, subscribe at
   once to a topic of N partitions; the time from subscribe until every consumer holds exactly
   its share (each partition owned once), with the same group.initial.rebalance.delay.ms on both
   (grouplab's config; the mock's rd_kafka_mock_group_initial_rebalance_delay_ms, called through
   ctypes on the librdkafka confluent-kafka ships). Delay 0 compares the protocol itself, where
   neither broker waits. Extra elections: generations beyond the first (each consumer counts its
   assignments; the most any consumer saw, minus one; for grouplab also its group's generation).
   Kafka's rule: how long Kafka's coordinator would hold the first join for the member joins
   grouplab saw (KIP-134 InitialDelayedJoin: a window of D after the first member is added; while
   a window saw a new member and rebalance time is left, another of min(D, remaining)); "beyond"
   is the stable time minus that hold. The mock waits one window of D whoever joins during it (its
   departure from Kafka): its "beyond" is the stable time minus D.
2. Heartbeats and commits per second: N consumers with heartbeat.interval.ms=100 for a window
   (Heartbeat requests answered, from librdkafka's own statistics), then each committing offsets
   asynchronously as fast as it can (successful commits from its on_commit callback).

grouplab runs in a process of its own (as `grouplab coordinator --kafka-port` would), so that the
Python loop driving the consumers does not share an interpreter lock with it; the mock is C
threads inside this process. --in-process runs grouplab on a thread of this process instead (the
setup of the results before 2026-11-24).

    scripts/bench_kafka_wire.py [--sizes 10,100] [--delays 0,500,3000] [--runs 3] [--window 5]
                                [--in-process] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import glob
import json
import multiprocessing
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


class _JoinRecorder:
    """The grouplab server's event sink: when each member was added (member_joined) and when each
    generation formed (generation_completed), per group, at the coordinator's clock."""

    def __init__(self) -> None:
        self.joins: dict[str, list[int]] = {}
        self.generations: dict[str, list[int]] = {}

    def emit(self, ev: Any) -> None:
        name = ev.event
        if name == "member_joined":
            self.joins.setdefault(ev.payload.group_id, []).append(ev.ts_ms)
        elif name == "generation_completed":
            self.generations.setdefault(ev.payload.group_id, []).append(ev.ts_ms)


def _start_server(partitions: int, delay_ms: int, loop: asyncio.AbstractEventLoop) -> tuple[Any, _JoinRecorder]:
    from grouplab.coordinator.config import BrokerConfig
    from grouplab.coordinator.server import CoordinatorServer
    from grouplab.admin import AdminClient

    config = BrokerConfig().with_overrides([f"group.initial.rebalance.delay.ms={delay_ms}",
                                            "group.min.session.timeout.ms=1000"])
    recorder = _JoinRecorder()
    server = CoordinatorServer(config, "127.0.0.1", 0, events=recorder, kafka_port=0)

    async def start() -> None:
        await server.start()
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({TOPIC: partitions})

    asyncio.run_coroutine_threadsafe(start(), loop).result(60)
    return server, recorder


def _group_facts(server: Any, recorder: _JoinRecorder, group: str) -> dict[str, Any]:
    """What the bench reads of a group: its generation, the member joins before its first
    generation, that generation's time, the largest rebalance timeout of its members."""
    g = server.broker.groups.get(group)
    formed = recorder.generations.get(group, [])
    first = formed[0] if formed else None
    joins = [t for t in recorder.joins.get(group, []) if first is None or t <= first]
    timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0) if g is not None else 0
    return {"generation": g.generation_id if g is not None else 0, "joins": joins, "first_generation": first,
            "rebalance_timeout_ms": timeout}


class InProcessGrouplab:
    """A CoordinatorServer with a Kafka-wire listener, on its own event-loop thread of this process."""

    name = "grouplab"

    def __init__(self, partitions: int, delay_ms: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server, self.recorder = _start_server(partitions, delay_ms, self.loop)
        self.bootstrap = f"127.0.0.1:{self.server.kafka_port}"

    def facts(self, group: str) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            return _group_facts(self.server, self.recorder, group)
        return asyncio.run_coroutine_threadsafe(read(), self.loop).result(60)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _serve(conn: Any, partitions: int, delay_ms: int) -> None:
    """The child process of `Grouplab`: a server on its loop; the pipe's queries answered from its state."""
    sys.path.insert(0, str(ROOT))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server, recorder = _start_server(partitions, delay_ms, loop)
    conn.send(server.kafka_port)
    while True:
        command, group = conn.recv()
        if command == "stop":
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(60)
            conn.send(None)
            return

        async def read() -> dict[str, Any]:
            return _group_facts(server, recorder, group)
        conn.send(asyncio.run_coroutine_threadsafe(read(), loop).result(60))


class Grouplab:
    """A CoordinatorServer with a Kafka-wire listener in a process of its own."""

    name = "grouplab"

    def __init__(self, partitions: int, delay_ms: int) -> None:
        ctx = multiprocessing.get_context("spawn")  # this process runs librdkafka's threads: no fork
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, partitions, delay_ms), daemon=True)
        self.process.start()
        if not self.conn.poll(60):
            raise RuntimeError("the grouplab server process did not start")
        self.bootstrap = f"127.0.0.1:{self.conn.recv()}"

    def facts(self, group: str) -> dict[str, Any]:
        self.conn.send(("facts", group))
        return self.conn.recv()  # type: ignore[no-any-return]

    def close(self) -> None:
        try:
            self.conn.send(("stop", ""))
            self.conn.poll(30)
        finally:
            self.process.join(10)
            if self.process.is_alive():
                self.process.kill()


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

    def facts(self, group: str) -> dict[str, Any] | None:
        return None  # not readable from outside the mock: the consumers' own count is used

    def close(self) -> None:
        self.lib.rd_kafka_mock_cluster_destroy(self.mc)
        self.lib.rd_kafka_destroy(self.rk)


# ----------------------------------------------------------------------------- 1. time to a stable group


def consumers(bootstrap: str, group: str, n: int, extra: dict[str, Any] | None = None) -> list[Consumer]:
    return [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"c{i}",
                      "partition.assignment.strategy": "range", "session.timeout.ms": 10000,
                      "heartbeat.interval.ms": 500, "enable.auto.commit": False, "log_level": 0,
                      **(extra or {})}) for i in range(n)]


def kafka_rule_hold_ms(joins: list[int], delay_ms: int, rebalance_timeout_ms: int) -> int:
    """How long Kafka's coordinator holds the first join of an Empty group whose members were added
    at `joins` (ms, sorted; the first one starts the delay and does not count as new): a window
    of D; at its end, if a member was added during it and rebalance time R (first max(T - D, 0))
    is left, another window of min(D, R), R becoming max(R - the window that ended, 0); and so on
    (GroupMetadataManager.prepareRebalance / tryCompleteInitialRebalanceElseSchedule, KIP-134)."""
    if not joins:
        return 0
    start = joins[0]
    end = start + delay_ms
    remaining = max(rebalance_timeout_ms - delay_ms, 0)
    window = delay_ms
    later = sorted(joins[1:])
    i = 0
    while True:
        added = False
        while i < len(later) and later[i] <= end:
            added, i = True, i + 1
        if not added or remaining == 0:
            return end - start
        next_window = min(delay_ms, remaining)
        remaining = max(remaining - window, 0)
        window = next_window
        end += next_window


def close_all(cs: list[Consumer], timeout_s: float = 60.0) -> None:
    """Close every consumer at once (each on a thread: close waits in librdkafka, not holding the
    interpreter lock). One at a time, a consumer's LeaveGroup can wait behind its JoinGroup parked
    by the rebalance the previous one's leaving started, which the others, no longer polled, do not
    finish: a close could then wait for the rebalance timeout."""
    threads = [threading.Thread(target=c.close, daemon=True) for c in cs]
    for t in threads:
        t.start()
    end = time.perf_counter() + timeout_s
    for t in threads:
        t.join(max(end - time.perf_counter(), 0))
    if any(t.is_alive() for t in threads):
        print(f"  note: {sum(t.is_alive() for t in threads)} consumers still closing after {timeout_s:.0f} s")


def stable_group(backend: Any, n: int, timeout_s: float) -> tuple[float | None, int, dict[str, Any] | None]:
    """Seconds until the group holds every partition exactly once, the extra elections seen, and
    what the broker says of the group (grouplab: generation, joins; the mock: None)."""
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
    facts = backend.facts(group)
    generations = max(facts["generation"] if facts else 0, max(assigns))
    close_all(cs)
    return stable_at, max(generations - 1, 0), facts


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
    close_all(cs)
    return heartbeats, done


# ----------------------------------------------------------------------------- main


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})" if values else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10,100", help="numbers of consumers")
    ap.add_argument("--delays", default="0,500,3000", help="group.initial.rebalance.delay.ms values")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=float, default=5.0, help="seconds each rate is measured over")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a group may take to be stable")
    ap.add_argument("--in-process", action="store_true",
                    help="run grouplab on a thread of this process (sharing the interpreter lock with the consumers' loop)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    delays = [int(x) for x in args.delays.split(",")]
    backends: list[Callable[[int, int], Any]] = [InProcessGrouplab if args.in_process else Grouplab, MockCluster]
    import confluent_kafka

    where = ("on a thread of the benchmark's own process (--in-process)" if args.in_process
             else "in a process of its own")
    lines = [f"## Kafka-wire listener: real clients, grouplab vs librdkafka's mock cluster ({utc_stamp()})", "",
             f"`scripts/bench_kafka_wire.py --sizes {args.sizes} --delays {args.delays} --runs {args.runs} "
             f"--window {args.window}{' --in-process' if args.in_process else ''}`; confluent-kafka "
             f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]}), eager `range`, one "
             f"topic of N partitions, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start. "
             f"grouplab runs {where}; the mock is C threads in the benchmark's process; the consumers and the "
             f"broker share this machine. *Kafka's rule*: how long Kafka's coordinator would hold the first join "
             f"for the member joins grouplab logged (median); *beyond*: stable time minus that hold, per run (for "
             f"the mock, which waits one window of the delay whoever joins during it, minus that one window).", "",
             "| consumers | initial delay ms | broker | stable in, s (median, min-max) | Kafka's rule, s "
             "| beyond the rule, s (median, min-max) | converged | extra elections (per run) |",
             "|---:|---:|---|---|---|---|---|---|"]
    print("\n".join(lines[-2:]))
    for n in sizes:
        for delay in delays:
            for make in backends:
                times, rules, beyond, extra, ok = [], [], [], [], 0
                name = ""
                for _ in range(args.runs):
                    backend = make(n, delay)
                    name = backend.name
                    try:
                        took, elections, facts = stable_group(backend, n, args.timeout)
                    finally:
                        backend.close()
                    extra.append(elections)
                    hold = None
                    if facts is not None:
                        hold = kafka_rule_hold_ms(facts["joins"], delay, facts["rebalance_timeout_ms"] or 300_000) / 1000
                        rules.append(hold)
                        if facts["first_generation"] is not None and facts["joins"]:
                            held = (facts["first_generation"] - facts["joins"][0]) / 1000
                            if abs(held - hold) > 0.05:  # grouplab should hold exactly what the rule says
                                print(f"  note: grouplab held the first join {held:.3f} s, Kafka's rule on exact timers "
                                      f"{hold:.3f} s (a join timer that fires late also counts the joins before it fires)")
                    if took is not None:
                        ok += 1
                        times.append(took)
                        beyond.append(took - (hold if hold is not None else delay / 1000))
                rule = f"{statistics.median(rules):.2f}" if rules else f"one window: {delay / 1000:.2f}"
                row = (f"| {n} | {delay} | {name} | {_spread(times)} | {rule} | {_spread(beyond)} | {ok}/{args.runs} "
                       f"| {', '.join(map(str, extra))} |")
                print(row)
                lines.append(row)
    lines += ["", "| consumers | broker | heartbeats answered /s (heartbeat.interval.ms=100) | async commits acknowledged /s |",
              "|---:|---|---:|---:|"]
    print("\n".join(lines[-2:]))
    for n in sizes:
        for make in backends:
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
