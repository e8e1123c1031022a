#!/usr/bin/env python3
"""Benchmark (issue 23, figures): confluent-kafka consumers on grouplab under the three rebalance
protocols, KIP-848 (`group.protocol=consumer`, server assignor uniform), classic eager (`range`) and
classic cooperative (`cooperative-sticky`). Prints a table and appends it to docs/benchmarks.md.

Per repetition of a cell (protocol × group size), on a fresh coordinator:

  stable  N consumers of one topic (2N partitions) start together; seconds from the first
          consumer's start until every partition is assigned to exactly one consumer as their own
          on_assign/on_revoke/on_lost callbacks say AND AdminClient.describe_consumer_groups says
          Stable with N members whose assignments match the callbacks;
  leave   --settle-s plus (k + 1/2)/R of a heartbeat interval after that (repetition k of R: the
          survivors hear of a leave at their next heartbeat, so the repetitions sample its phase
          evenly), one consumer closes cleanly; until the same holds for the N-1 others:
          partition-seconds unowned (a partition counts from the leaver's close(), or its owner's
          revoke, until its next owner's on_assign), the seconds until every partition is owned
          again (callbacks) and until stable again (callbacks and server), and how many distinct
          partitions were unowned at some moment (eager: all; otherwise the leaver's).

Processes: the coordinator (grouplab's CoordinatorServer with its Kafka port, no event log or
trace) in its own process; the consumers in --per-worker consumers per worker process, one Python
thread per consumer polling it (poll releases the GIL; librdkafka has its own threads); this
process gathers the callbacks (time.monotonic, one clock across processes on Linux) and asks the
AdminClient. Every wait has a deadline (--cell-timeout) and says what it still missed.

    scripts/bench_kip848.py [--sizes 10,100] [--protocols consumer,eager,cooperative] [--repeat 3]
                            [--heartbeat-ms N] [--initial-delay-ms 3000] [--settle-s 2]
                            [--cell-timeout 180] [--per-worker 25] [--no-write] [--json] [--profile]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import platform
import queue
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(Path(__file__).resolve().parent))
from _bench import append_to_benchmarks, cpu_s, spread, utc_stamp  # noqa: E402

TOPIC = "bench"
PROTOCOLS = {  # name -> (label, librdkafka settings of its own)
    "consumer": ("KIP-848 consumer (uniform)", {"group.protocol": "consumer", "group.remote.assignor": "uniform"}),
    "eager": ("classic eager (range)", {"group.protocol": "classic", "partition.assignment.strategy": "range"}),
    "cooperative": ("classic cooperative (cooperative-sticky)",
                    {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky"}),
}
# Kafka's defaults, said in the output: librdkafka's classic consumer settings, and the broker's.
CLASSIC_DEFAULTS = {"session.timeout.ms": 45_000, "heartbeat.interval.ms": 3_000, "max.poll.interval.ms": 300_000}
BROKER_DEFAULTS = {"group.initial.rebalance.delay.ms": 3_000, "group.consumer.heartbeat.interval.ms": 5_000,
                   "group.consumer.session.timeout.ms": 45_000}
LAYOUT = ("One topic of 2 × consumers partitions; each repetition on a fresh coordinator (its own process: "
          "grouplab's CoordinatorServer with its Kafka port, no event log or trace); the consumers as threads, {} "
          "to a worker process, one poll loop each; times from the consumers' callbacks and the AdminClient's "
          "describe_consumer_groups, median [min–max] of the repetitions. A leave comes (k + 1/2)/R of a heartbeat "
          "interval after the settle time in repetition k of R.")
DESCRIBE_GAP_S = 0.02  # between two describe_consumer_groups calls once the callbacks say stable


# ----------------------------------------------------------------------------- child processes


def _serve_coordinator(broker: dict[str, str], port_q: Any, profile: str) -> None:
    """The coordinator's process: a CoordinatorServer with a Kafka port; SIGTERM stops it cleanly
    (and writes the cProfile stats to `profile`, if given)."""
    import asyncio
    import cProfile
    import signal

    from grouplab.coordinator.config import BrokerConfig
    from grouplab.coordinator.server import CoordinatorServer

    async def main() -> None:
        cfg = BrokerConfig().with_overrides([f"{k}={v}" for k, v in broker.items()])
        server = await CoordinatorServer(cfg, port=0, kafka_port=0).start()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        port_q.put((server.port, server.kafka_port))
        await stop.wait()
        await server.stop()

    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    asyncio.run(main())
    if prof:
        prof.disable()
        prof.dump_stats(profile)


def _worker(bootstrap: str, group: str, names: list[str], conf: dict[str, Any], events: Any, commands: Any) -> None:
    """A worker process: waits for "go", then runs one thread per consumer; each thread polls its
    consumer and reports (kind, name, monotonic time, partitions) for every callback."""
    from confluent_kafka import Consumer

    closing: dict[str, threading.Event] = {n: threading.Event() for n in names}
    stop = threading.Event()

    def run(name: str) -> None:
        def said(kind: str) -> Any:
            def callback(consumer: Any, partitions: list[Any]) -> None:
                events.put((kind, name, time.monotonic(), [p.partition for p in partitions]))
            return callback

        def error(err: Any) -> None:
            events.put(("error", name, time.monotonic(), str(err)))

        events.put(("start", name, time.monotonic(), []))
        consumer = Consumer(dict(conf, **{"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                          "error_cb": error, "log_level": 0}))
        consumer.subscribe([TOPIC], on_assign=said("assign"), on_revoke=said("revoke"), on_lost=said("lost"))
        while not stop.is_set():
            if closing[name].is_set():
                events.put(("closing", name, time.monotonic(), []))
                consumer.close()
                events.put(("closed", name, time.monotonic(), []))
                return
            consumer.poll(0.1)

    if commands.recv() != "go":
        return
    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in names]
    for t in threads:
        t.start()
    while True:
        command = commands.recv()
        if command == "stop":
            break
        closing[command].set()
    stop.set()
    os._exit(0)  # no leaves: the coordinator goes with this cell


# ----------------------------------------------------------------------------- one cell


@dataclasses.dataclass
class Outcome:
    """One repetition of one cell; a None figure did not happen before the deadline."""

    stable_s: float | None = None
    callbacks_s: float | None = None  # the callbacks alone said stable (before the server did)
    leave_partition_s: float | None = None
    leave_stable_s: float | None = None
    leave_callbacks_s: float | None = None  # every partition owned again, as the callbacks say
    start_revoked: int | None = None  # partitions revoked (callbacks) on the way to the first stable group
    leave_stopped: int | None = None  # distinct partitions unowned at some moment during the leave
    coordinator_cpu_s: float = 0.0  # over the whole repetition
    workers_cpu_s: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)


class Run:
    """A coordinator, the worker processes and the gathered callbacks of one repetition."""

    def __init__(self, ctx: Any, protocol: str, n: int, args: argparse.Namespace, rep: int) -> None:
        self.ctx, self.protocol, self.n, self.args = ctx, protocol, n, args
        self.partitions = 2 * n
        self.group = f"{protocol}-{n}-{rep}"
        self.names = [f"c{i:03d}" for i in range(n)]
        self.events: Any = ctx.Queue()
        self.log: list[tuple[str, str, float, Any]] = []  # every event, in arrival order
        self.held: dict[str, set[int]] = {name: set() for name in self.names}
        self.gone: set[str] = set()
        self.pipes: dict[str, Any] = {}  # consumer name -> its worker's command pipe
        self.workers: list[Any] = []
        self.coordinator: Any = None

    # ---- set-up and tear-down

    def start(self) -> None:
        broker = {k: str(v) for k, v in self.args.broker.items()}
        port_q = self.ctx.Queue()
        profile = self.args.profile_out if self.args.profile else ""
        self.coordinator = self.ctx.Process(target=_serve_coordinator, args=(broker, port_q, profile), daemon=True)
        self.coordinator.start()
        _, kafka_port = port_q.get(timeout=60)
        self.bootstrap = f"127.0.0.1:{kafka_port}"
        from confluent_kafka.admin import AdminClient, NewTopic

        self.admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        self.admin.create_topics([NewTopic(TOPIC, self.partitions, 1)])[TOPIC].result(60)
        conf = dict(PROTOCOLS[self.protocol][1], **self.args.client)
        if self.protocol == "consumer":  # librdkafka refuses the classic ones with group.protocol=consumer
            conf = {k: v for k, v in conf.items() if k not in CLASSIC_DEFAULTS}
        for i in range(0, self.n, self.args.per_worker):
            names = self.names[i:i + self.args.per_worker]
            ours, theirs = self.ctx.Pipe()
            p = self.ctx.Process(target=_worker, args=(self.bootstrap, self.group, names, conf, self.events, theirs),
                                 daemon=True)
            p.start()
            self.workers.append((p, ours))
            for name in names:
                self.pipes[name] = ours

    def stop(self) -> None:
        """Workers exit without leaving (os._exit), then the coordinator stops: nothing outlives the cell."""
        for p, pipe in self.workers:
            try:
                pipe.send("stop")
            except OSError:
                pass
        for p, _ in self.workers:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)
        if self.coordinator is not None:
            self.coordinator.terminate()
            self.coordinator.join(30)
            if self.coordinator.is_alive():
                self.coordinator.kill()

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far: the coordinator's, and all the workers' (librdkafka's threads included)."""
        coordinator = cpu_s(self.coordinator.pid) if self.coordinator is not None else -1.0
        return coordinator, sum(cpu_s(p.pid) for p, _ in self.workers)

    # ---- what the consumers and the coordinator say

    def drain(self, wait_s: float) -> None:
        try:
            ev = self.events.get(timeout=wait_s)
        except queue.Empty:
            return
        while True:
            self.apply(ev)
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return

    def apply(self, ev: tuple[str, str, float, Any]) -> None:
        self.log.append(ev)
        kind, name, _, parts = ev
        if kind == "assign":
            self.held[name] |= set(parts)
        elif kind in ("revoke", "lost"):
            self.held[name] -= set(parts)
        elif kind == "closing":
            self.held[name] = set()
            self.gone.add(name)
        elif kind == "error":
            print(f"    librdkafka error at {name}: {parts}", flush=True)

    def callbacks_complete(self) -> bool:
        """Every partition held by exactly one live consumer, as their callbacks say."""
        owned = sorted(p for name, parts in self.held.items() if name not in self.gone for p in parts)
        return owned == list(range(self.partitions))

    def last_event_t(self) -> float:
        return max((t for kind, _, t, _ in self.log if kind in ("assign", "revoke", "lost", "closing")), default=0.0)

    def server_stable(self) -> tuple[bool, str]:
        """The coordinator's own view: Stable, the live members, their assignments as the callbacks say."""
        from confluent_kafka import ConsumerGroupState

        try:
            g = self.admin.describe_consumer_groups([self.group], request_timeout=10)[self.group].result(15)
        except Exception as e:  # a describe that fails is not yet stable; the deadline decides
            return False, f"describe failed: {e}"
        live = {name: parts for name, parts in self.held.items() if name not in self.gone}
        said = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in g.members}
        if g.state != ConsumerGroupState.STABLE:
            return False, f"server state {g.state.name}, {len(g.members)} members"
        if said != live:
            return False, f"server Stable, {len(g.members)} members, assignments differ from the callbacks"
        return True, "stable"

    def wait_stable(self) -> tuple[float | None, float | None, str]:
        """When (time.monotonic) callbacks and server first agreed on a stable group, and when the
        callbacks alone did; (None, None, what was missing) at the deadline."""
        deadline = time.monotonic() + self.args.cell_timeout
        why = "the callbacks never covered every partition once"
        callbacks_at = None
        while time.monotonic() < deadline:
            self.drain(0.05)
            if not self.callbacks_complete():
                callbacks_at = None
                continue
            if callbacks_at is None:
                callbacks_at = self.last_event_t()
            ok, why = self.server_stable()
            if ok:
                answered = time.monotonic()
                self.drain(0)
                if self.callbacks_complete():
                    return answered, callbacks_at, why
            time.sleep(DESCRIBE_GAP_S)
        held = sum(len(p) for n, p in self.held.items() if n not in self.gone)
        return None, None, f"{why}; callbacks hold {held} of {self.partitions} partition assignments"

    def unowned_between(self, start: float, end: float) -> tuple[float, int]:
        """Partition-seconds unowned in [start, end] and how many partitions were unowned at some
        moment in it, replaying every callback in time order (they come from several processes)."""
        owners = {p: 0 for p in range(self.partitions)}
        held: dict[str, set[int]] = {name: set() for name in self.names}
        integral, stopped = 0.0, set()
        last = start
        for kind, name, t, parts in sorted(self.log, key=lambda e: e[2]):
            if t > end:
                break
            if t > start:
                unowned = [p for p, c in owners.items() if c == 0]
                integral += len(unowned) * (t - last)
                stopped.update(unowned)
                last = t
            if kind == "assign":
                for p in parts:
                    if p not in held[name]:
                        held[name].add(p)
                        owners[p] += 1
            elif kind in ("revoke", "lost", "closing"):
                for p in (held[name] & set(parts)) if kind != "closing" else set(held[name]):
                    held[name].discard(p)
                    owners[p] -= 1
        unowned = [p for p, c in owners.items() if c == 0]
        integral += len(unowned) * (end - last)
        stopped.update(unowned)
        return integral, len(stopped)


def heartbeat_ms(protocol: str, args: argparse.Namespace) -> int:
    """The heartbeat interval the protocol's members use: the broker's for KIP-848, the client's for classic."""
    if protocol == "consumer":
        return int(args.broker["group.consumer.heartbeat.interval.ms"])
    return int(args.client["heartbeat.interval.ms"])


def run_once(ctx: Any, protocol: str, n: int, args: argparse.Namespace, rep: int) -> Outcome:
    out = Outcome()
    run = Run(ctx, protocol, n, args, rep)
    label = f"{PROTOCOLS[protocol][0]}, {n} consumers, #{rep + 1}"
    try:
        run.start()
        for _, pipe in run.workers:
            pipe.send("go")
        stable_at, callbacks_at, why = run.wait_stable()
        if stable_at is None or callbacks_at is None:
            out.notes.append(f"TIMEOUT after {args.cell_timeout:.0f} s waiting for a stable group: {why}")
            print(f"    {label}: {out.notes[-1]}", flush=True)
            return out
        first = min(t for kind, _, t, _ in run.log if kind == "start")
        out.stable_s, out.callbacks_s = stable_at - first, callbacks_at - first
        out.start_revoked = sum(len(parts) for kind, _, t, parts in run.log if kind in ("revoke", "lost"))
        print(f"    {label}: stable in {out.stable_s:.2f} s (callbacks {out.callbacks_s:.2f} s), "
              f"{out.start_revoked} partitions revoked on the way", flush=True)
        # The others hear of the leave at their next heartbeat, whose phase decides most of the figure:
        # repetition k of R leaves (k + 1/2)/R of a heartbeat interval after --settle-s, so the
        # repetitions sample that phase evenly and their median is the middle of the interval.
        phase_s = (rep + 0.5) / args.repeat * heartbeat_ms(protocol, args) / 1000
        end_settle = stable_at + args.settle_s + phase_s
        while time.monotonic() < end_settle:
            run.drain(0.05)
        leaver = run.names[n // 2]
        run.pipes[leaver].send(leaver)
        deadline = time.monotonic() + 30
        while leaver not in run.gone and time.monotonic() < deadline:
            run.drain(0.05)
        if leaver not in run.gone:
            out.notes.append(f"TIMEOUT: {leaver} did not start its close within 30 s")
            print(f"    {label}: {out.notes[-1]}", flush=True)
            return out
        t_leave = next(t for kind, name, t, _ in run.log if kind == "closing" and name == leaver)
        again_at, owned_at, why = run.wait_stable()
        if again_at is None or owned_at is None:
            out.notes.append(f"TIMEOUT after {args.cell_timeout:.0f} s waiting for a stable group after the leave: {why}")
            print(f"    {label}: {out.notes[-1]}", flush=True)
            return out
        out.leave_stable_s = again_s = again_at - t_leave
        out.leave_callbacks_s = owned_at - t_leave
        out.leave_partition_s, out.leave_stopped = run.unowned_between(t_leave, again_at)
        print(f"    {label}: leave: {out.leave_partition_s:.2f} partition-s unowned, {out.leave_stopped} partitions "
              f"stopped, all owned again in {out.leave_callbacks_s:.2f} s, stable again in {again_s:.2f} s", flush=True)
        return out
    finally:
        try:
            out.coordinator_cpu_s, out.workers_cpu_s = run.cpu()
        finally:
            run.stop()


# ----------------------------------------------------------------------------- the table


def row(protocol: str, n: int, outcomes: list[Outcome]) -> list[str]:
    def got(field: str) -> list[float]:
        return [v for o in outcomes if (v := getattr(o, field)) is not None]

    timeouts = sum(1 for o in outcomes if o.notes)
    return [PROTOCOLS[protocol][0], str(n), spread(got("stable_s")), spread(got("callbacks_s")),
            spread(got("start_revoked"), "{:.0f}"),
            spread(got("leave_partition_s")), spread(got("leave_callbacks_s")), spread(got("leave_stable_s")), spread(got("leave_stopped"), "{:.0f}"),
            spread([o.coordinator_cpu_s for o in outcomes], "{:.1f}"), spread([o.workers_cpu_s for o in outcomes], "{:.1f}"),
            f"{len(outcomes) - timeouts}/{len(outcomes)}"]


HEADER = ["protocol", "consumers", "start → stable s", "start → callbacks stable s", "start: partitions revoked",
          "leave: partition-s unowned", "leave → all owned s (callbacks)", "leave → stable again s",
          "leave: partitions stopped", "coordinator CPU s", "consumers' CPU s", "done"]


def table(rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(HEADER) + " |", "|---|" + "---:|" * (len(HEADER) - 2) + ":-:|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def settings(args: argparse.Namespace) -> str:
    broker = ", ".join(f"{k}={v}" for k, v in args.broker.items())
    client = ", ".join(f"{k}={v}" for k, v in args.client.items())
    return (f"broker: {broker}; classic consumers: {client} (KIP-848 consumers take their heartbeat interval and "
            f"session timeout from the broker); librdkafka otherwise at its defaults")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100", help="group sizes, comma-separated (default 10,100); partitions = 2 × size")
    ap.add_argument("--protocols", default="consumer,eager,cooperative",
                    help="which of consumer, eager, cooperative (default all three)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per cell, each on a fresh coordinator (default 3)")
    ap.add_argument("--heartbeat-ms", type=int, default=None,
                    help="lower both heartbeat intervals (classic heartbeat.interval.ms and the broker's "
                         "group.consumer.heartbeat.interval.ms) to this; default: Kafka's 3000 and 5000")
    ap.add_argument("--initial-delay-ms", type=int, default=BROKER_DEFAULTS["group.initial.rebalance.delay.ms"],
                    help="the broker's group.initial.rebalance.delay.ms (classic groups only; default Kafka's 3000)")
    ap.add_argument("--settle-s", type=float, default=2.0, help="seconds between stable and the leave (default 2)")
    ap.add_argument("--cell-timeout", type=float, default=180.0,
                    help="deadline for each wait for a stable group, seconds (default 180)")
    ap.add_argument("--per-worker", type=int, default=25, help="consumers per worker process (default 25)")
    ap.add_argument("--profile", action="store_true", help="cProfile the coordinator; print its top functions per cell")
    ap.add_argument("--profile-out", default="/tmp/bench_kip848.prof", help=argparse.SUPPRESS)
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    ap.add_argument("--json", action="store_true", help="also print every repetition's figures as one JSON line")
    args = ap.parse_args(argv)
    args.size_list = [int(s) for s in args.sizes.split(",")]
    args.protocol_list = [p.strip() for p in args.protocols.split(",")]
    unknown = [p for p in args.protocol_list if p not in PROTOCOLS]
    if unknown or any(n < 2 for n in args.size_list) or args.repeat < 1 or args.per_worker < 1:
        ap.error(f"protocols are {', '.join(PROTOCOLS)}; sizes >= 2; --repeat and --per-worker >= 1"
                 + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    args.broker = dict(BROKER_DEFAULTS, **{"group.initial.rebalance.delay.ms": args.initial_delay_ms})
    args.client = dict(CLASSIC_DEFAULTS)
    if args.heartbeat_ms is not None:
        args.broker["group.consumer.heartbeat.interval.ms"] = args.heartbeat_ms
        args.broker["group.consumer.min.heartbeat.interval.ms"] = min(args.heartbeat_ms, 5000)
        args.client["heartbeat.interval.ms"] = args.heartbeat_ms
    return args


def print_profile(path: str) -> None:
    import pstats

    if Path(path).exists():
        pstats.Stats(path).sort_stats("cumulative").print_stats(25)
        pstats.Stats(path).sort_stats("tottime").print_stats(15)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    ctx = mp.get_context("spawn")  # no fork of a process with librdkafka's threads in it
    print(settings(args), flush=True)
    rows, results = [], []
    for n in args.size_list:
        for protocol in args.protocol_list:
            print(f"  {PROTOCOLS[protocol][0]}, {n} consumers:", flush=True)
            outcomes = [run_once(ctx, protocol, n, args, rep) for rep in range(args.repeat)]
            rows.append(row(protocol, n, outcomes))
            results += [dict(protocol=protocol, consumers=n, **dataclasses.asdict(o)) for o in outcomes]
            if args.profile:
                print_profile(args.profile_out)
    text = table(rows)
    print()
    print(text)
    if args.json:
        print(json.dumps(results))
    if not args.no_write:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"
        command = "scripts/bench_kip848.py " + shlex.join(sys.argv[1:] if argv is None else argv)
        header = (f"## KIP-848 against classic: time to a stable group, partitions unconsumed on a leave "
                  f"(issue 23) ({utc_stamp()})\n\n"
                  f"`{command.strip()}` on {os.cpu_count()} cores, load average at the end {load}, "
                  f"Python {platform.python_version()}, confluent-kafka {_versions()}. {settings(args)}. "
                  f"{LAYOUT.format(args.per_worker)}\n\n")
        append_to_benchmarks(header + text)


def _versions() -> str:
    import confluent_kafka

    return f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})"


if __name__ == "__main__":
    main()
