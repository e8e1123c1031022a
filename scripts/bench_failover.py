#!/usr/bin/env python3
"""Benchmark (issue 24, figures): the time until a group of real consumers is Stable again after
its coordinator broker is killed, per client library, with the requests each consumer sent
meanwhile. Prints a table and appends it to docs/benchmarks.md.

Per repetition of a cell (library × group size), on a fresh 3-broker grouplab (Kafka's defaults,
grouplab.coordinator.load.time.ms at its 1000; the consumers at their library's defaults):

  N consumers of one library join one group on a topic of 2N partitions, bootstrapped on all three
  brokers. Once the group is Stable (server: Stable with N members; clients: every partition
  assigned to exactly one consumer, as each consumer's assignment() says after its poll), the
  group's coordinator broker is killed. Measured:

  kill → Stable again   seconds until, at once: the new coordinator has the group Stable with N
                        members, each of which has reached it since it loaded the group (a
                        heartbeat, join or commit: its last_heartbeat_ms is after the load, which
                        gives every member a fresh session), and the clients' assignments cover
                        every partition exactly once;
  requests meanwhile    per consumer, counted server side over both ports of every broker
                        (coordinator/tally.py, by client id): FindCoordinator, Metadata,
                        JoinGroup + SyncGroup, Heartbeat (ConsumerGroupHeartbeat for KIP-848),
                        OffsetCommit, and the answers that carried an error (by error name);
  session timeouts      members the coordinator removed for their session meanwhile;
  rebalances            how far the generation (KIP-848: the group epoch) moved.

Processes: the coordinator (grouplab's CoordinatorServer, brokers=3, Kafka ports, no event log file
or trace) in its own process, so the consumers' Python (kafka-python and aiokafka are pure Python)
does not share its GIL and its timings are its own. It takes commands on a multiprocessing Pipe:
a thread reads them and hands each to the coordinator's asyncio loop (call_soon_threadsafe), where
the kill runs as `grouplab coordinator`'s `kill N` does, and a watcher task looks at the group every
WATCH_S. The consumers run --per-worker to a worker process, one thread per consumer polling it
(aiokafka and grouplab's own: an event loop per thread). Times are time.monotonic, one clock across
processes on Linux. Every wait has a deadline and says what it still missed.

    scripts/bench_failover.py [--sizes 10,100] [--libraries kafka-python,aiokafka,confluent-kafka,
                              confluent-kip848,grouplab,grouplab-kip848] [--repeat 3]
                              [--start-timeout 240] [--failover-timeout 150] [--per-worker 25]
                              [--no-write] [--json]
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
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(Path(__file__).resolve().parent))
from _bench import append_to_benchmarks, cpu_s, spread, utc_stamp  # noqa: E402

TOPIC = "bench"
HOST = "127.0.0.1"
BROKERS = 3
WATCH_S = 0.01  # how often the coordinator process looks at the group
LIBRARIES = {  # name -> what the table calls it
    "kafka-python": "kafka-python (classic, range)",
    "aiokafka": "aiokafka (classic, range)",
    "confluent-kafka": "confluent-kafka (classic, range,roundrobin)",
    "confluent-kip848": "confluent-kafka (KIP-848, group.protocol=consumer)",
    "grouplab": "grouplab's consumer (classic)",
    "grouplab-kip848": "grouplab's consumer (KIP-848)",
}
DEFAULT_LIBRARIES = "kafka-python,aiokafka,confluent-kafka,confluent-kip848,grouplab,grouplab-kip848"
JOIN_APIS = ("JoinGroup", "SyncGroup")
HEARTBEAT_APIS = ("Heartbeat", "ConsumerGroupHeartbeat")


# ----------------------------------------------------------------------------- the coordinator's process


class _Watch:
    """What the coordinator process knows of the measured group: set by the events the server emits
    (an EventLog-like sink) and by the watcher task."""

    def __init__(self) -> None:
        self.group = ""
        self.size = 0
        self.loaded_ms: int | None = 0  # the load at the new coordinator (None: killed, not yet loaded)
        self.since: float | None = None  # monotonic time since which the group is ready (None: it is not)
        self.removed: list[str] = []  # members removed for their session since the kill
        self.recording = False

    def emit(self, ev: Any) -> None:
        from grouplab.protocol import events
        from grouplab.protocol.states import RemovalReason

        p = ev.payload
        if isinstance(p, events.CoordinatorLoaded) and self.group in p.groups:
            self.loaded_ms = ev.ts_ms
        elif (isinstance(p, (events.MemberRemoved, events.ConsumerMemberRemoved)) and p.group_id == self.group
              and p.reason is RemovalReason.SESSION_TIMEOUT and self.recording):
            self.removed.append(p.member_id)


def _group_view(server: Any, watch: _Watch) -> dict[str, Any]:
    """The group as its coordinator holds it now: state, members, how many reached it since its load."""
    from grouplab.coordinator.group import GroupState
    from grouplab.protocol.states import ConsumerGroupState

    classic = server.broker.groups.get(watch.group)
    consumer = server.broker.consumer_groups.get(watch.group)
    group = classic if classic is not None else consumer
    if group is None:
        return {"state": "absent", "members": 0, "fresh": 0, "generation": None}
    stable = GroupState.STABLE if group is classic else ConsumerGroupState.STABLE
    loaded = watch.loaded_ms
    fresh = 0 if loaded is None else sum(1 for m in group.members.values() if m.last_heartbeat_ms > loaded)
    return {"state": group.state.value, "stable": group.state is stable, "members": len(group.members),
            "fresh": fresh, "generation": group.generation_id if group is classic else group.group_epoch}


def _serve_coordinator(overrides: list[str], partitions: int, pipe: Any) -> None:
    """The coordinator's process: three brokers, the topic, then the commands of the pipe until "stop"."""
    import asyncio

    from grouplab.admin import AdminClient
    from grouplab.coordinator.config import BrokerConfig
    from grouplab.coordinator.server import CoordinatorServer
    from grouplab.coordinator.tally import RequestTally

    watch = _Watch()

    async def main() -> None:
        server = CoordinatorServer(BrokerConfig().with_overrides(overrides), HOST, 0, events=watch, kafka_port=0,
                                   brokers=BROKERS)
        await server.start()
        tally = server.tally = RequestTally(time.monotonic)
        async with AdminClient(HOST, server.ports[0]) as admin:
            await admin.create_topics({TOPIC: partitions})
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        async def watcher() -> None:
            while not done.is_set():
                if watch.group:
                    v = _group_view(server, watch)
                    ok = v["state"] != "absent" and v["stable"] and v["members"] == watch.size == v["fresh"]
                    if not ok:
                        watch.since = None
                    elif watch.since is None:
                        watch.since = time.monotonic()
                await asyncio.sleep(WATCH_S)

        async def kill() -> None:
            node = server.coordinator_of(watch.group)
            watch.removed, watch.recording, watch.loaded_ms, watch.since = [], True, None, None
            t = tally.start()
            await server.kill_broker(node)
            pipe.send({"t": t, "from": node, "to": server.coordinator_of(watch.group)})

        def command(msg: tuple) -> None:
            kind = msg[0]
            if kind == "watch":
                watch.group, watch.size = msg[1], msg[2]
                pipe.send(None)
            elif kind == "status":
                pipe.send(dict(_group_view(server, watch), since=watch.since, now=time.monotonic(),
                               coordinator=server.coordinator_of(watch.group), loaded=watch.loaded_ms is not None))
            elif kind == "kill":
                loop.create_task(kill())
            elif kind == "counts":
                tally.stop()
                pipe.send({"counts": tally.counts(until=msg[1]), "removed": list(watch.removed)})
            elif kind == "stop":
                done.set()

        def read() -> None:
            while True:
                try:
                    msg = pipe.recv()
                except (EOFError, OSError):
                    msg = ("stop",)
                loop.call_soon_threadsafe(command, msg)
                if msg[0] == "stop":
                    return

        task = loop.create_task(watcher())
        threading.Thread(target=read, daemon=True).start()
        pipe.send({"kafka": dict(server.kafka_ports), "ports": dict(server.ports)})
        await done.wait()
        await task
        await server.stop()

    asyncio.run(main())


# ----------------------------------------------------------------------------- the consumers' processes


def _consume(library: str, name: str, group: str, where: dict[str, Any], report: Callable[[str, Any], None],
             stop: threading.Event) -> None:
    """One consumer of `library`, polled until `stop`; report("assigned", partitions) when its assignment
    changes, report("error", text) for what its poll raised (then it polls again, as an application does)."""
    held: list[int] | None = None

    def seen(partitions: list[int]) -> None:
        nonlocal held
        partitions = sorted(partitions)
        if partitions != held:
            held = partitions
            report("assigned", partitions)

    kafka = ",".join(f"{HOST}:{p}" for p in where["kafka"].values())
    if library == "kafka-python":
        from kafka import KafkaConsumer

        c = KafkaConsumer(TOPIC, bootstrap_servers=kafka, group_id=group, client_id=name)
        while not stop.is_set():
            try:
                c.poll(1000)  # not shorter: kafka-python 3.0.12 can lose a join in flight (tests/kafka_client_worker.py)
            except Exception as exc:  # noqa: BLE001 - retriable errors raised by poll: poll again
                report("error", repr(exc))
            seen([tp.partition for tp in c.assignment()])
    elif library == "aiokafka":
        import asyncio

        from aiokafka import AIOKafkaConsumer

        async def run_aiokafka() -> None:
            c = AIOKafkaConsumer(TOPIC, bootstrap_servers=kafka, group_id=group, client_id=name)
            await c.start()
            while not stop.is_set():
                await c.getmany(timeout_ms=200)
                seen([tp.partition for tp in c.assignment()])

        asyncio.run(run_aiokafka())
    elif library in ("confluent-kafka", "confluent-kip848"):
        from confluent_kafka import Consumer

        conf: dict[str, Any] = {"bootstrap.servers": kafka, "group.id": group, "client.id": name, "log_level": 0,
                                "error_cb": lambda err: report("error", str(err))}
        if library == "confluent-kip848":
            conf["group.protocol"] = "consumer"
        c = Consumer(conf)
        c.subscribe([TOPIC])
        while not stop.is_set():
            c.poll(0.1)
            seen([tp.partition for tp in c.assignment()])
    else:
        import asyncio

        from grouplab.consumer.client import GroupMemberClient, with_bootstrap
        from grouplab.consumer.config import ConsumerConfig

        async def run_grouplab() -> None:
            config = ConsumerConfig(group_id=group, topics=[TOPIC], client_id=name,
                                    group_protocol="consumer" if library == "grouplab-kip848" else "classic")
            config, nodes = with_bootstrap(config, [(HOST, p) for p in where["ports"].values()])
            client = GroupMemberClient(config, HOST, where["ports"][0], nodes=nodes)
            await client.start()
            while not stop.is_set():
                client.poll()
                seen([tp.partition for tp in client.assignment] if client.working else [])
                await asyncio.sleep(0.1)  # the application's poll loop; the client's own timers run meanwhile

        asyncio.run(run_grouplab())


def _worker(library: str, group: str, names: list[str], where: dict[str, Any], events: Any, commands: Any) -> None:
    """A worker process: waits for "go", then runs one thread per consumer; "stop" ends it at once
    (os._exit: no leaves, the cluster goes with the repetition)."""
    import logging

    for logger in ("kafka", "aiokafka", "grouplab"):  # their warnings while a broker is down: not ours to print
        logging.getLogger(logger).setLevel(logging.CRITICAL)
    stop = threading.Event()

    def run(name: str) -> None:
        def report(kind: str, value: Any) -> None:
            events.put((kind, name, time.monotonic(), value))

        try:
            _consume(library, name, group, where, report, stop)
        except Exception as exc:  # noqa: BLE001 - said in the output; the deadline decides the cell
            report("error", f"consumer thread ended: {exc!r}")

    if commands.recv() != "go":
        return
    for n in names:
        threading.Thread(target=run, args=(n,), daemon=True).start()
    commands.recv()
    stop.set()
    os._exit(0)


# ----------------------------------------------------------------------------- one repetition


@dataclasses.dataclass
class Outcome:
    """One repetition of one cell; None figures did not happen before their deadline."""

    stable_s: float | None = None  # start → the first Stable group (both sides)
    failover_s: float | None = None  # kill → Stable again (both sides)
    server_s: float | None = None  # kill → the server side alone ready
    from_node: int = -1
    to_node: int = -1
    rebalances: int | None = None
    removed: int | None = None  # members removed by session timeout meanwhile
    requests: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # client -> api/error -> count
    errors_seen: int = 0  # client-side error reports (error_cb, poll exceptions) meanwhile
    coordinator_cpu_s: float = 0.0
    workers_cpu_s: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)


class Run:
    """A 3-broker coordinator process, the worker processes and what their consumers said, for one repetition."""

    def __init__(self, ctx: Any, library: str, n: int, args: argparse.Namespace, rep: int) -> None:
        self.ctx, self.library, self.n, self.args = ctx, library, n, args
        self.partitions = 2 * n
        self.group = f"{library}-{n}-{rep}"
        self.names = [f"c{i:03d}" for i in range(n)]
        self.events: Any = ctx.Queue()
        self.held: dict[str, list[int]] = {name: [] for name in self.names}
        self.complete_since: float | None = None  # when the clients' assignments last became complete
        self.errors: list[tuple[str, float, str]] = []
        self.workers: list[tuple[Any, Any]] = []
        self.coordinator: Any = None
        self.pipe: Any = None

    def start(self) -> None:
        self.pipe, theirs = self.ctx.Pipe()
        self.coordinator = self.ctx.Process(target=_serve_coordinator,
                                            args=(self.args.overrides, self.partitions, theirs), daemon=True)
        self.coordinator.start()
        if not self.pipe.poll(60):
            raise TimeoutError("the coordinator process did not say its ports within 60 s")
        where = self.pipe.recv()
        self.ask(("watch", self.group, self.n))
        for i in range(0, self.n, self.args.per_worker):
            ours, theirs = self.ctx.Pipe()
            p = self.ctx.Process(target=_worker, args=(self.library, self.group, self.names[i:i + self.args.per_worker],
                                                       where, self.events, theirs), daemon=True)
            p.start()
            self.workers.append((p, ours))

    def ask(self, msg: tuple, timeout_s: float = 30.0) -> Any:
        self.pipe.send(msg)
        if not self.pipe.poll(timeout_s):
            raise TimeoutError(f"the coordinator process did not answer {msg[0]} within {timeout_s:.0f} s")
        return self.pipe.recv()

    def stop(self) -> None:
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
            try:
                self.pipe.send(("stop",))
            except OSError:
                pass
            self.coordinator.join(30)
            if self.coordinator.is_alive():
                self.coordinator.kill()
                self.coordinator.join(5)

    def cpu(self) -> tuple[float, float]:
        coordinator = cpu_s(self.coordinator.pid) if self.coordinator is not None else -1.0
        return coordinator, sum(cpu_s(p.pid) for p, _ in self.workers)

    def drain(self, wait_s: float) -> None:
        try:
            ev = self.events.get(timeout=wait_s)
        except queue.Empty:
            return
        while True:
            kind, name, t, value = ev
            if kind == "assigned":
                self.held[name] = value
                complete = sorted(p for parts in self.held.values() for p in parts) == list(range(self.partitions))
                if not complete:
                    self.complete_since = None
                elif self.complete_since is None:
                    self.complete_since = t
            elif kind == "error":
                self.errors.append((name, t, value))
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return

    def wait_ready(self, timeout_s: float, what: str) -> tuple[float | None, float | None, str]:
        """When (monotonic) the server side and the clients were both ready, and when the server side
        alone became so; (None, None, what was still missing) at the deadline."""
        deadline = time.monotonic() + timeout_s
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            self.drain(0.05)
            status = self.ask(("status",))
            if status["since"] is not None and self.complete_since is not None:
                self.drain(0)  # an assignment change already reported breaks it
                if self.complete_since is not None:
                    return max(status["since"], self.complete_since), status["since"], "ready"
        owned = sorted(p for parts in self.held.values() for p in parts)
        doubled = len(owned) - len(set(owned))
        return None, None, (f"TIMEOUT after {timeout_s:.0f} s waiting for {what}: server: group {status.get('state')} "
                            f"with {status.get('members')} of {self.n} members, {status.get('fresh')} reached the "
                            f"coordinator (broker {status.get('coordinator')}) since its load"
                            f"{'' if status.get('loaded', True) else ' (not loaded yet)'}; clients: "
                            f"{len(set(owned))} of {self.partitions} partitions assigned, {doubled} twice")


def run_once(ctx: Any, library: str, n: int, args: argparse.Namespace, rep: int) -> Outcome:
    out = Outcome()
    run = Run(ctx, library, n, args, rep)
    label = f"{LIBRARIES[library]}, {n} consumers, #{rep + 1}"
    try:
        run.start()
        started = time.monotonic()
        for _, pipe in run.workers:
            pipe.send("go")
        ready_at, _, why = run.wait_ready(args.start_timeout, "the first Stable group")
        if ready_at is None:
            out.notes.append(why)
            print(f"    {label}: {why}", flush=True)
            return out
        out.stable_s = ready_at - started
        before = run.ask(("status",))["generation"]
        killed = run.ask(("kill",))
        out.from_node, out.to_node = killed["from"], killed["to"]
        errors_before = len(run.errors)
        again_at, server_at, why = run.wait_ready(args.failover_timeout, "the group Stable again")
        end = again_at if again_at is not None else time.monotonic()
        tallied = run.ask(("counts", end))
        out.requests = {c: v for c, v in tallied["counts"].items() if c in run.held}
        out.removed = len(tallied["removed"])
        out.errors_seen = sum(1 for _, t, _ in run.errors[errors_before:] if t <= end)
        if again_at is None or server_at is None:
            out.notes.append(why)
            print(f"    {label}: stable in {out.stable_s:.1f} s; {why}", flush=True)
            return out
        out.failover_s, out.server_s = again_at - killed["t"], server_at - killed["t"]
        after = run.ask(("status",))["generation"]
        out.rebalances = after - before if after is not None and before is not None else None
        sent = [sum(v.get(a, 0) for a in ("FindCoordinator", "Metadata", *JOIN_APIS, *HEARTBEAT_APIS, "OffsetCommit"))
                for v in out.requests.values()]
        print(f"    {label}: stable in {out.stable_s:.1f} s; broker {out.from_node} killed, coordinator now "
              f"{out.to_node}; Stable again in {out.failover_s:.2f} s (server side {out.server_s:.2f} s), "
              f"{sum(sent) / n:.1f} group requests a consumer, {out.removed} removed by session timeout, "
              f"{out.rebalances} rebalances", flush=True)
        return out
    except TimeoutError as exc:
        out.notes.append(str(exc))
        print(f"    {label}: {exc}", flush=True)
        return out
    finally:
        try:
            out.coordinator_cpu_s, out.workers_cpu_s = run.cpu()
        finally:
            run.stop()


# ----------------------------------------------------------------------------- the table


def per_consumer(outcomes: list[Outcome], keys: tuple[str, ...], n: int) -> str:
    """Requests (or errors) a consumer sent (received) meanwhile: the median over repetitions of
    the mean over consumers, and the most any one consumer did in any repetition."""
    done = [o for o in outcomes if o.failover_s is not None]
    if not done:
        return "-"
    means = [sum(sum(v.get(k, 0) for k in keys) for v in o.requests.values()) / n for o in done]
    most = max((sum(v.get(k, 0) for k in keys) for o in done for v in o.requests.values()), default=0)
    return f"{statistics.median(means):.1f} (max {most})"


def errors_cell(outcomes: list[Outcome], n: int, top: int = 3) -> str:
    """Answers carrying an error, a consumer: the total, then the most frequent errors by name."""
    done = [o for o in outcomes if o.failover_s is not None]
    names = sorted({k for o in done for v in o.requests.values() for k in v if k.startswith("error:")})
    if not done:
        return "-"
    total = per_consumer(outcomes, tuple(names), n).split(" (")[0]
    by_name = sorted(((statistics.median([sum(v.get(k, 0) for v in o.requests.values()) / n for o in done]), k[6:])
                      for k in names), reverse=True)
    named = ", ".join(f"{name} {mean:.1f}" for mean, name in by_name[:top] if mean > 0)
    return total + (f": {named}" if named else "")


def row(library: str, n: int, outcomes: list[Outcome]) -> list[str]:
    def got(field: str) -> list[float]:
        return [v for o in outcomes if (v := getattr(o, field)) is not None]

    done = sum(1 for o in outcomes if o.failover_s is not None)
    return [LIBRARIES[library], str(n), spread(got("stable_s"), "{:.1f}"), spread(got("failover_s")),
            spread(got("server_s")),
            per_consumer(outcomes, ("FindCoordinator",), n), per_consumer(outcomes, ("Metadata",), n),
            per_consumer(outcomes, JOIN_APIS, n), per_consumer(outcomes, HEARTBEAT_APIS, n),
            per_consumer(outcomes, ("OffsetCommit",), n), errors_cell(outcomes, n),
            spread(got("removed"), "{:.0f}"), spread(got("rebalances"), "{:.0f}"),
            spread([o.coordinator_cpu_s for o in outcomes], "{:.1f}"), f"{done}/{len(outcomes)}"]


HEADER = ["consumers of", "N", "start → Stable s", "kill → Stable again s", "kill → server side ready s",
          "FindCoordinator", "Metadata", "JoinGroup + SyncGroup", "Heartbeat", "OffsetCommit",
          "answers with an error: by name", "removed by session timeout", "rebalances", "coordinator CPU s", "done"]


def table(rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(HEADER) + " |", "|---|" + "---:|" * (len(HEADER) - 2) + ":-:|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def settings(args: argparse.Namespace) -> str:
    changed = ", ".join(args.overrides) or "none"
    return (f"3 brokers, Kafka's defaults (group.initial.rebalance.delay.ms 3000, group.consumer.heartbeat.interval.ms "
            f"5000, session timeouts 45000) and grouplab.coordinator.load.time.ms 1000; broker settings changed: "
            f"{changed}. Consumers at their library's defaults, enable.auto.commit included (kafka-python 3.0.12 "
            f"and aiokafka: session.timeout.ms 10000, heartbeat.interval.ms 3000; librdkafka classic: 45000 and "
            f"3000; KIP-848 members: the broker's; grouplab's: 45000 and 3000), bootstrapped on all three brokers")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100", help="group sizes, comma-separated (default 10,100); partitions = 2 × size")
    ap.add_argument("--libraries", default=DEFAULT_LIBRARIES, help=f"which of {', '.join(LIBRARIES)} (default all)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per cell, each on a fresh cluster (default 3)")
    ap.add_argument("--broker", action="append", default=[], metavar="NAME=VALUE",
                    help="a broker setting to change (said in the output); default: none")
    ap.add_argument("--start-timeout", type=float, default=240.0,
                    help="deadline for the first Stable group, seconds (default 240)")
    ap.add_argument("--failover-timeout", type=float, default=150.0,
                    help="deadline for the group Stable again after the kill, seconds (default 150)")
    ap.add_argument("--per-worker", type=int, default=25, help="consumers per worker process (default 25)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    ap.add_argument("--json", action="store_true", help="also print every repetition's figures as one JSON line")
    args = ap.parse_args(argv)
    args.size_list = [int(s) for s in args.sizes.split(",")]
    args.library_list = [lib.strip() for lib in args.libraries.split(",")]
    unknown = [lib for lib in args.library_list if lib not in LIBRARIES]
    if unknown or any(n < 1 for n in args.size_list) or args.repeat < 1 or args.per_worker < 1:
        ap.error(f"libraries are {', '.join(LIBRARIES)}; sizes >= 1; --repeat and --per-worker >= 1"
                 + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    args.overrides = list(args.broker)
    return args


def _versions() -> str:
    import aiokafka
    import confluent_kafka
    import kafka

    return (f"kafka-python {kafka.__version__}, aiokafka {aiokafka.__version__}, confluent-kafka "
            f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    ctx = mp.get_context("spawn")  # no fork of a process with librdkafka's threads in it
    print(settings(args), flush=True)
    rows, results = [], []
    for n in args.size_list:
        for library in args.library_list:
            print(f"  {LIBRARIES[library]}, {n} consumers:", flush=True)
            outcomes = [run_once(ctx, library, n, args, rep) for rep in range(args.repeat)]
            rows.append(row(library, n, outcomes))
            results += [dict(library=library, consumers=n, **dataclasses.asdict(o)) for o in outcomes]
    text = table(rows)
    print()
    print(text)
    if args.json:
        print(json.dumps(results))
    if not args.no_write:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"
        command = "scripts/bench_failover.py " + shlex.join(sys.argv[1:] if argv is None else argv)
        header = (f"## Coordinator failover: a group Stable again after its coordinator broker is killed "
                  f"(issue 24) ({utc_stamp()})\n\n"
                  f"`{command.strip()}` on {os.cpu_count()} cores, load average at the end {load}, "
                  f"Python {platform.python_version()}, {_versions()}. {settings(args)}. "
                  f"Per consumer, the requests it sent from the kill until Stable again (counted by the "
                  f"brokers, by client id): the median over repetitions of the mean over consumers, and the "
                  f"most any one sent; median [min–max] of the repetitions for the times.\n\n")
        append_to_benchmarks(header + text)


if __name__ == "__main__":
    main()
