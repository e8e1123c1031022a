"""`AsyncCluster`: a grouplab coordinator for an application's own tests, in the caller's event
loop, on free loopback ports (docs/testing.md).

One CoordinatorServer with its Kafka-wire listener, and a FaultProxy (wire="kafka") in front of
that listener: `bootstrap` is the proxy's address, and the listener's Metadata, FindCoordinator
and DescribeCluster answers are rewritten to it, so every connection a Kafka client opens goes
through the proxy. Faults are the proxy's rules (the one language of `--faults`, docs/faults.md), added
and removed while clients run; `isolate` cuts a client off; `restart_coordinator` stops the server
and starts a new one on the same ports over the same data directory, as a broker restart does.

Everything the coordinator and the proxy log is kept in memory and written to a run directory
(`run_dir`: the event log per node and the message trace, what `grouplab explain`, `replay` and
`plot` read), and folded by the CostTracker as it happens, so a test can ask for the group's
rebalance history and what each one cost, and a failed wait can say what it saw instead.

The synchronous `Cluster` (grouplab/testing/sync.py) runs one of these in its own thread.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import io
import shutil
import tempfile
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping

from rich.console import Console

from grouplab.admin import AdminClient, AdminError
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.costs import CostTracker, PartitionTime
from grouplab.eventlog import EventLog, run_dir_log
from grouplab.coordinator.nodes import NodeError
from grouplab.faults.proxy import FaultProxy
from grouplab.faults.proxy_group import ProxyGroup
from grouplab.faults.rules import Rule, parse_spec
from grouplab.protocol.effects import LogEvent, wall_clock_ms
from grouplab.protocol.events import FreeFormEvent
from grouplab.protocol.types import TopicPartition
from grouplab.readable import CoordinatorView
from grouplab.testing.settings import config_pairs
from grouplab.testing.views import GroupView, RebalanceView, WaitTimeout, describe_history, group_view, rebalance_view
from grouplab.tracefile import TraceFile, trace_path

# What a test broker changes from Kafka's defaults, unless the test sets them itself: no initial
# rebalance delay (a test's first group would wait 3 s for nothing; test images of Kafka set the
# same), and with grouplab's own temporary data directory no fsync of the group log (its restarts
# are clean stops: nothing written is lost without a sync; docs/durability.md).
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}
PRIVATE_DATA_DIR_DEFAULTS = {"grouplab.log.fsync": "never"}
MAX_BROKERS = 16  # as `grouplab coordinator --brokers`
KEPT_EVENTS = 100_000  # event-log lines kept in memory (all of them are in the run directory)
STORY_LINES = 400  # lines of the coordinator's narration kept for failure messages


class ClusterError(RuntimeError):
    """An operation the cluster cannot do as asked (not started, an unknown topic, a refused
    CreateTopics); the message says why in one line."""


class AsyncCluster:
    """A coordinator for tests, in the running event loop: `async with AsyncCluster() as cluster`.

    Arguments: `config` (broker settings by Kafka's names), `topics` (name -> partitions, created
    at start), `data_dir` (durable groups, offsets and records; default: a temporary directory of
    its own, removed at close), `run_dir` (where the event log and message trace are written;
    default: a temporary directory, removed at close unless `keep_run_dir`), `fault_seed` (the
    proxy's random choices, for rules with p < 1), `faults` (SPECs in force from the start)."""

    def __init__(
        self,
        config: Mapping[str, object] | Iterable[str] | None = None,
        topics: Mapping[str, int] | None = None,
        data_dir: str | Path | None = None,
        run_dir: str | Path | None = None,
        keep_run_dir: bool = False,
        host: str = "127.0.0.1",
        fault_seed: int | None = None,
        faults: Iterable[str] = (),
        brokers: int = 1,
    ) -> None:
        if not isinstance(brokers, int) or not 1 <= brokers <= MAX_BROKERS:
            raise ClusterError(f"brokers must be a number from 1 to {MAX_BROKERS}, not {brokers!r}")
        self.brokers = brokers
        pairs = config_pairs(config)
        given = {p.partition("=")[0].strip() for p in pairs}
        defaults = dict(TEST_DEFAULTS, **(PRIVATE_DATA_DIR_DEFAULTS if data_dir is None else {}))
        # Parsed now: a misspelt name or a bad value fails here, before anything starts.
        self.broker_config = BrokerConfig().with_overrides(
            [f"{k}={v}" for k, v in defaults.items() if k not in given] + pairs)
        self.initial_topics = dict(topics or {})
        self.host = host
        self.fault_seed = fault_seed
        self._initial_rules = [parse_spec(spec, allow_hold=True) for spec in faults]
        self._own_data_dir = data_dir is None
        self._data_dir_arg = data_dir
        self._run_dir_arg = run_dir
        self.keep_run_dir = keep_run_dir or run_dir is not None
        self.data_dir: Path | None = None
        self.run_dir: Path | None = None
        self.server: CoordinatorServer | None = None
        self.proxy: FaultProxy | ProxyGroup | None = None  # one per broker of a cluster (a ProxyGroup)
        self.port = 0  # the Kafka-wire listener's own port (behind the proxy)
        self.grouplab_port = 0  # grouplab's msgpack port, for grouplab's own clients and AdminClient
        self.restarts = 0
        self.costs = CostTracker()
        self._events: collections.deque[tuple[str, LogEvent]] = collections.deque(maxlen=KEPT_EVENTS)
        self._trace_lines: collections.deque[dict[str, Any]] = collections.deque(maxlen=KEPT_EVENTS)
        self._cost_of: dict[tuple[str, int], int] = {}  # (group, generation) -> assigned-not-consumed ms
        self._story = io.StringIO()
        self._narrator = CoordinatorView(Console(file=self._story, width=140, color_system=None,
                                                 force_terminal=False, soft_wrap=True))
        self._logs: dict[str, EventLog] = {}
        self._trace: TraceFile | None = None
        self._changed: asyncio.Event | None = None
        self._isolated: set[str] = set()
        self._rules: list[Rule] = []  # every rule added, for the report
        # Called after every event (in the loop): the sync Cluster's waits wake on them.
        self.change_listeners: list[Callable[[], None]] = []
        self.started = False
        self.closed = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> "AsyncCluster":
        if self.started:
            raise ClusterError("this cluster is already started")
        self._changed = asyncio.Event()
        self.data_dir = Path(tempfile.mkdtemp(prefix="grouplab-data-")) if self._own_data_dir else Path(self._data_dir_arg)  # type: ignore[arg-type]
        self.run_dir = Path(self._run_dir_arg) if self._run_dir_arg else Path(tempfile.mkdtemp(prefix="grouplab-run-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._trace = TraceFile(trace_path(self.run_dir))
        self.started = True
        try:
            self.server = self._new_server(kafka_port=0)
            await self.server.start()
            self.grouplab_port = self.server.port
            assert self.server.kafka_port is not None
            self.port = self.server.kafka_port
            if self.brokers == 1:
                self.proxy = FaultProxy(self.host, self.port, self.host, 0, seed=self.fault_seed,
                                        events=self._log("proxy"), wire="kafka")
            else:
                self.proxy = ProxyGroup({node: FaultProxy(self.host, port, self.host, 0, seed=self.fault_seed,
                                                          events=self._log("proxy"), wire="kafka")
                                         for node, port in self.server.kafka_ports.items()})
            await self.proxy.start()
            for rule in self._initial_rules:
                self._rules.append(self.proxy.add(rule))
            await self.create_topics(self.initial_topics)
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        """Stop the proxy and the coordinator (clients still connected see their connections
        close) and remove the temporary directories. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        if self.proxy is not None:
            await self.proxy.stop()
        if self.server is not None:
            await self.server.stop()
        for log in self._logs.values():
            log.close()
        if self._trace is not None:
            self._trace.close()
        if self._own_data_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        if not self.keep_run_dir and self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    async def __aenter__(self) -> "AsyncCluster":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _new_server(self, kafka_port: int, old: CoordinatorServer | None = None) -> CoordinatorServer:
        """A server on free ports, or on `old`'s (a restart: clients come back where they were)."""
        return CoordinatorServer(self.broker_config, self.host, self.grouplab_port, events=self._log("coordinator"),
                                 data_dir=self.data_dir, trace=self._trace_line, kafka_port=kafka_port,
                                 client_logs=self._log, brokers=self.brokers,
                                 node_ports=old.ports if old is not None else None,
                                 node_kafka_ports=old.kafka_ports if old is not None else None)

    def _running(self) -> CoordinatorServer:
        if not self.started or self.server is None:
            raise ClusterError("the cluster is not started: use it as a context manager, or call start()")
        if self.closed:
            raise ClusterError("the cluster is closed")
        return self.server

    # ------------------------------------------------------------------ addresses

    @property
    def bootstrap(self) -> str:
        """"host:port" for Kafka clients' bootstrap.servers (the fault proxy's address); with
        several brokers, every live broker's ("host:port,host:port,..."), each through its proxy."""
        proxy = self.proxy
        if proxy is None:
            raise ClusterError("the cluster is not started: use it as a context manager, or call start()")
        if isinstance(proxy, FaultProxy):
            return f"{self.host}:{proxy.port}"
        live = self._running().live_brokers()
        return ",".join(f"{self.host}:{proxy.proxies[n].port}" for n in live)

    # ------------------------------------------------------------------ a cluster's brokers (brokers=N)

    def coordinator_of(self, group_id: str) -> int:
        """The node id of the broker that coordinates `group_id` now, as FindCoordinator would
        answer (Kafka's placement: the leader of its `__consumer_offsets` partition); -1 if none
        is live. With one broker, its id (0)."""
        return self._running().coordinator_of(group_id)

    @property
    def live_brokers(self) -> list[int]:
        return self._running().live_brokers()

    async def kill_broker(self, node_id: int) -> None:
        """Broker `node_id` dies: its listeners close and its connections are cut; the partitions
        it led get new leaders and the groups it coordinated are loaded by their new coordinator
        (COORDINATOR_LOAD_IN_PROGRESS meanwhile). ClusterError if there is no such live broker."""
        await self._broker_change(lambda server: server.kill_broker(node_id))

    async def stop_broker(self, node_id: int) -> None:
        """Broker `node_id` shuts down (a controlled shutdown: the same moves, logged as one)."""
        await self._broker_change(lambda server: server.kill_broker(node_id, "shutdown"))

    async def restart_broker(self, node_id: int) -> None:
        """A stopped broker listens again on its ports; leadership comes back to it at the next
        preferred-leader election (auto.leader.rebalance.enable's timer, or `elect_leaders`)."""
        await self._broker_change(lambda server: server.restart_broker(node_id))

    def elect_leaders(self) -> None:
        """A preferred-leader election now: partitions (and groups) go back to their preferred broker."""
        try:
            self._running().elect_leaders()
        except NodeError as exc:
            raise ClusterError(str(exc)) from None

    async def _broker_change(self, change: Callable[[CoordinatorServer], Awaitable[None]]) -> None:
        try:
            await change(self._running())
        except NodeError as exc:
            raise ClusterError(str(exc)) from None

    # ------------------------------------------------------------------ topics and records

    async def create_topic(self, name: str, partitions: int = 1) -> None:
        await self.create_topics({name: partitions})

    async def create_topics(self, topics: Mapping[str, int]) -> None:
        """CreateTopics, as an admin would; a topic that exists already with as many partitions is
        left as it is (an error if it has another count)."""
        server = self._running()
        existing = server.broker.topics.partitions
        for name, count in topics.items():
            if name in existing and existing[name] != count:
                raise ClusterError(f"topic {name!r} exists with {existing[name]} partitions, not {count}; "
                                   "add_partitions raises the count")
        missing = {t: n for t, n in topics.items() if t not in existing}
        if missing:
            await self._admin("CreateTopics", lambda admin: admin.create_topics(missing))

    async def add_partitions(self, topic: str, total: int) -> None:
        """CreatePartitions: raise `topic`'s partition count to `total`; the groups' leaders see it
        in their next metadata refresh and rebalance."""
        await self._admin("CreatePartitions", lambda admin: admin.create_partitions(topic, total))

    async def delete_topic(self, name: str) -> None:
        """DeleteTopics: the topic's records go, and every group's committed offsets of it; its
        groups' members see it gone at their next metadata refresh (docs/protocol.md §3.23)."""
        results = await self._admin("DeleteTopics", lambda admin: admin.delete_topics([name]))
        code, message = results[name]
        if code:
            raise ClusterError(f"DeleteTopics refused: {AdminError(code, message)}")

    def topics(self) -> dict[str, int]:
        return dict(self._running().broker.topics.partitions)

    async def produce(self, topic: str, values: Iterable[bytes | str], partition: int = 0) -> int:
        """Append records (values only) to one partition; returns the first one's offset."""
        records = [v.encode() if isinstance(v, str) else v for v in values]
        resp = await self._admin("Produce", lambda admin: admin.produce(topic, partition, records),
                                 self._leader(topic, partition))
        if resp is None or resp.error_code:
            why = AdminError(resp.error_code, resp.error_message) if resp is not None else "no answer"
            raise ClusterError(f"Produce to {topic}-{partition} refused: {why}")
        return int(resp.base_offset)

    def _leader(self, topic: str, partition: int) -> int | None:
        """The broker leading a partition now (None with one broker, or none leading it)."""
        cluster = self._running().broker.cluster
        return None if cluster is None else cluster.nodes.leader(topic, partition)

    async def _admin(self, what: str, call: Callable[[AdminClient], Any], node: int | None = None) -> Any:
        """`call` with an AdminClient on grouplab's protocol, at broker `node` (a partition's
        leader, a group's coordinator), or at the first live broker."""
        server = self._running()
        live = server.live_brokers()
        port = server.ports.get(node if node is not None and node in live else live[0], self.grouplab_port) \
            if live and server.ports else self.grouplab_port
        try:
            async with AdminClient(self.host, port, client_id="grouplab-testing") as admin:
                return await call(admin)
        except AdminError as exc:
            raise ClusterError(f"{what} refused: {exc}") from None

    # ------------------------------------------------------------------ observation

    def group(self, group_id: str) -> GroupView:
        """The group as the coordinator has it now (state `Dead` if it has none)."""
        server = self._running()
        return group_view(server.broker.groups.get(group_id), group_id, server.broker.topics.partitions)

    def groups(self) -> list[str]:
        return sorted(self._running().broker.groups)

    async def committed(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (OffsetFetch), partition -> offset."""
        offsets = await self._admin("OffsetFetch", lambda admin: admin.fetch_offsets(group_id),
                                    self._running().coordinator_of(group_id))
        return {tp: offset for tp, offset in offsets.items() if offset >= 0}

    async def log_end_offsets(self, topic: str) -> dict[TopicPartition, int]:
        """Each partition's log end offset (ListOffsets latest)."""
        n = self.topics().get(topic)
        if n is None:
            raise ClusterError(f"unknown topic {topic!r} (topics: {', '.join(sorted(self.topics())) or 'none'})")
        by_leader: dict[int | None, list[TopicPartition]] = {}
        for p in range(n):
            by_leader.setdefault(self._leader(topic, p), []).append(TopicPartition(topic, p))
        out: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            ends = await self._admin("ListOffsets", lambda admin: admin.log_end_offsets(tps), leader)
            out.update({tp: int(end or 0) for tp, end in ends.items()})
        return dict(sorted(out.items()))

    async def lag(self, group_id: str, topic: str | None = None) -> dict[TopicPartition, int]:
        """Log end offset minus committed offset, per partition of the group's topics (or of
        `topic`); a partition with no commit counts from offset 0."""
        view = self.group(group_id)
        committed = await self.committed(group_id)
        topics = [topic] if topic else sorted(set(view.subscribed) | {tp.topic for tp in committed})
        out: dict[TopicPartition, int] = {}
        for t in topics:
            for tp, end in (await self.log_end_offsets(t)).items():
                out[tp] = max(end - max(committed.get(tp, 0), 0), 0)
        return out

    def rebalances(self, group_id: str) -> list[RebalanceView]:
        """Every rebalance of the group completed so far, oldest first."""
        history = self.costs.rebalances.groups.get(group_id)
        known = history.clients if history is not None else {}
        return [rebalance_view(r, self._cost_of.get((r.group_id, r.generation), 0), known)
                for r in self.costs.completed if r.group_id == group_id]

    def partition_time(self, group_id: str | None = None) -> PartitionTime:
        """Partition-milliseconds so far, consumed, assigned but not consumed (held by a member that
        had stopped), and unowned, for one group or all."""
        return self.costs.totals(wall_clock_ms(), group_id)

    def events(self, group_id: str | None = None, node: str | None = None,
               event: str | None = None) -> list[dict[str, Any]]:
        """Event-log lines kept in memory (docs/events.md), as the run directory has them, oldest
        first; filtered by `group_id`, `node` and `event` name."""
        out = []
        for n, ev in self._events:
            if node is not None and n != node or event is not None and ev.event != event:
                continue
            fields = ev.fields
            if group_id is not None and fields.get("group_id") != group_id:
                continue
            out.append({"ts_ms": ev.ts_ms, "event": ev.event, "node": n, **fields})
        return out

    def trace(self) -> list[dict[str, Any]]:
        """The coordinator's message trace so far (docs/events.md §7): every request and answer."""
        return list(self._trace_lines)

    def requests(self, client_id: str | None = None, apis: Iterable[str] | None = None) -> list[str]:
        """The API names of the requests that reached the coordinator (after any fault the proxy
        applied), in the order it took them, from the trace; only `client_id`'s, of `apis`."""
        wanted = None if apis is None else set(apis)
        return [line["api"] for line in self._trace_lines if line.get("kind") == "request"
                and (client_id is None or line.get("client_id") == client_id)
                and (wanted is None or line.get("api") in wanted)]

    def story(self, lines: int = 40) -> str:
        """The last lines of the coordinator's narration: who joined, why each rebalance started,
        who was removed and why, each rebalance's table (what `grouplab coordinator` prints)."""
        return "\n".join(self._story.getvalue().rstrip("\n").splitlines()[-lines:])

    def report(self, group_id: str | None = None) -> str:
        """Everything a failing test should show: each group now, its last rebalances, the
        coordinator's recent narration, the faults in force and where the run directory is."""
        groups = [group_id] if group_id else self.groups()
        parts = []
        for g in groups:
            parts.append(self.group(g).describe())
            parts.append("last rebalances:\n" + describe_history(self.rebalances(g)))
        if self.proxy is not None and (self._rules or self._isolated):
            live = set(self.proxy.rules)
            rules = "; ".join(f"{r.spec()} (fired {r.fired}, "
                              f"{'removed' if r not in live else 'spent' if r.exhausted else 'in force'})"
                              for r in self._rules) or "none"
            parts.append(f"faults: {rules}\nisolated: {', '.join(sorted(self._isolated)) or 'none'}")
        story = self.story()
        if story:
            parts.append("what the coordinator did, most recent last:\n" + story)
        if self.run_dir is not None and self.keep_run_dir:
            parts.append(f"run directory: {self.run_dir} (grouplab explain {self.run_dir})")
        return "\n".join(parts)

    # ------------------------------------------------------------------ waiting

    async def wait_for(self, predicate: Callable[[], bool | Awaitable[bool]], timeout: float = 30.0,
                       describe: Callable[[], str] | None = None, what: str = "condition") -> None:
        """Until `predicate()` holds, checked after every event the cluster logs (and every
        100 ms); WaitTimeout with `describe()`'s text (default: the cluster's report) if it does
        not within `timeout` seconds. The predicate may be a coroutine function, so that it can
        await what the cluster reads over its admin client (`committed`, `lag`)."""
        self._running()
        assert self._changed is not None

        async def holds() -> bool:
            result = predicate()
            return bool(await result) if inspect.isawaitable(result) else bool(result)

        deadline = asyncio.get_running_loop().time() + timeout
        while not await holds():
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise WaitTimeout(f"{what} did not hold within {timeout:g} s\n" + (describe or self.report)())
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.1))
            except asyncio.TimeoutError:
                pass

    async def wait_stable(self, group_id: str, members: int | None = None, timeout: float = 30.0,
                          after_generation: int | None = None) -> GroupView:
        """Until the group is Stable with `members` members (any number if None), in a generation
        after `after_generation` if given, with every partition of its members' topics assigned
        (a cooperative rebalance's follow-up done); returns it then."""
        def stable() -> bool:
            view = self.group(group_id)
            return (view.is_stable and (members is None or len(view.members) == members)
                    and (after_generation is None or view.generation > after_generation)
                    and view.protocol_type is not None and not view.unassigned)

        want = f"group {group_id!r} Stable" + (f" with {members} member{'s' if members != 1 else ''}"
                                                if members is not None else "")
        if after_generation is not None:
            want += f" after generation {after_generation}"
        await self.wait_for(stable, timeout, lambda: self.report(group_id), want)
        return self.group(group_id)

    async def wait_rebalances(self, group_id: str, count: int, timeout: float = 30.0) -> list[RebalanceView]:
        """Until the group has completed `count` rebalances in all; returns them."""
        await self.wait_for(lambda: len(self.rebalances(group_id)) >= count, timeout,
                            lambda: self.report(group_id), f"{count} completed rebalances of group {group_id!r}")
        return self.rebalances(group_id)

    # ------------------------------------------------------------------ faults

    def _faults(self) -> FaultProxy | ProxyGroup:
        self._running()
        assert self.proxy is not None
        return self.proxy

    def add_fault(self, spec: str) -> Rule:
        """Add a rule in the SPEC form of `--faults` (docs/faults.md), e.g.
        `SyncGroup:drop:link=app-1:limit=1`; in force from the next frame until removed or
        spent (`limit`). Returns the rule: `rule.fired` counts what it did."""
        return self._added(self._faults().add(parse_spec(spec, allow_hold=True)))

    def _added(self, rule: Rule) -> Rule:
        self._rules.append(rule)
        return rule

    def remove_fault(self, rule: Rule) -> None:
        self._faults().remove(rule)

    def clear_faults(self) -> None:
        """Remove every rule (held frames stay held: `release` them; isolations stay: `heal`)."""
        self._faults().clear()

    @property
    def faults(self) -> list[Rule]:
        """The rules in force: added, not removed, not spent (a rule whose `limit` is reached)."""
        return [r for r in self._faults().rules if not r.exhausted]

    def drop(self, api: str, client_id: str = "*", count: int | None = None, p: float = 1.0,
             direction: str = "request") -> Rule:
        return self._added(self._faults().add_rule(api, "drop", link=client_id, limit=count, p=p,
                                                   direction=direction))

    def delay(self, api: str, ms: int | tuple[int, int], client_id: str = "*", count: int | None = None,
              direction: str = "request") -> Rule:
        return self._added(self._faults().add_rule(api, "delay", delay_ms=ms, link=client_id, limit=count,
                                                   direction=direction))

    def error(self, api: str, code: int | str, client_id: str = "*", count: int | None = None,
              direction: str = "request") -> Rule:
        """Answer the API with this Kafka error (a number or a name such as NOT_COORDINATOR):
        in the coordinator's place (`direction="request"`: the request never reaches it), or over
        its answer (`"response"`: the coordinator acted, the client is told it failed)."""
        return self._added(self._faults().add_rule(api, "error", error_code=code, link=client_id, limit=count,
                                                   direction=direction))

    def hold(self, api: str, client_id: str = "*", count: int | None = None, direction: str = "request") -> Rule:
        """Park matching frames until `release`."""
        return self._added(self._faults().add_rule(api, "hold", link=client_id, limit=count, direction=direction))

    def disconnect_on(self, api: str, client_id: str = "*", count: int | None = None,
                      direction: str = "request") -> Rule:
        """Reset the connection a matching frame comes on, instead of forwarding it (the
        `disconnect` rule); the client reconnects with its back-off."""
        return self._added(self._faults().add_rule(api, "disconnect", link=client_id, limit=count,
                                                   direction=direction))

    def release(self, api: str | None = None, client_id: str = "*") -> int:
        """Forward the held frames that match, in the order they were held; returns how many."""
        return self._faults().release(api, client_id)

    def held(self, api: str | None = None, client_id: str = "*") -> int:
        return len(self._faults().held_frames(api, client_id))

    def disconnect(self, client_id: str = "*") -> int:
        """Reset the client's connections now (both sides); it reconnects with its back-off.
        Returns how many connections were closed."""
        return self._faults().disconnect(client_id)

    def isolate(self, client_id: str) -> None:
        """Cut the client off: its connections are closed and new ones refused until `heal`. To
        the group it is a crash without LeaveGroup: the coordinator removes it when its session
        times out. `client_id` may be a glob."""
        proxy = self._faults()
        proxy.isolate(client_id)
        self._isolated.add(client_id)
        self._note("member_fault", client_id=client_id, fault="partition", how="isolated")

    def heal(self, client_id: str | None = None) -> None:
        """End `isolate` for this client (every client if None); it reconnects and rejoins."""
        proxy = self._faults()
        healed = sorted(self._isolated) if client_id is None else [client_id]
        proxy.heal(None if client_id is None else client_id)
        for c in healed:
            self._isolated.discard(c)
            self._note("member_fault_over", client_id=c, fault="partition", how="healed")

    def pause(self) -> None:
        """The coordinator stops answering anyone (a hung broker, connections open) until resume."""
        self._faults().pause()

    def resume(self) -> None:
        self._faults().resume()

    async def restart_coordinator(self, downtime: float = 0.0) -> None:
        """Stop the coordinator and start a new one on the same ports over the same data
        directory, `downtime` seconds later: groups come back Stable in their generation, with
        their committed offsets and records, and members that reconnect in time carry on."""
        server = self._running()
        self.restarts += 1
        self._note("coordinator_restart", durable=True, downtime_s=downtime)
        await server.stop()
        if downtime > 0:
            await asyncio.sleep(downtime)
        self.server = self._new_server(kafka_port=self.port, old=server)
        await self.server.start()

    # ------------------------------------------------------------------ the logs

    def _log(self, node: str) -> EventLog:
        log = self._logs.get(node)
        if log is None:
            assert self.run_dir is not None
            log = run_dir_log(self.run_dir, node)
            log.listeners.append(self._on_event)
            self._logs[node] = log
        return log

    def _on_event(self, node: str, ev: LogEvent) -> None:
        self._events.append((node, ev))
        self.costs.feed(node, ev)
        for report in self.costs.take_reports():
            if report.rebalance is not None:
                key = (report.rebalance.group_id, report.rebalance.generation)
                self._cost_of[key] = self._cost_of.get(key, 0) + report.assigned_not_consumed_ms
        if node == "coordinator":
            self._narrator(node, ev)
            if self._story.tell() > 1_000_000:  # keep the narration's tail only
                tail = "\n".join(self._story.getvalue().splitlines()[-STORY_LINES:]) + "\n"
                self._story.seek(0)
                self._story.truncate()
                self._story.write(tail)
        if self._changed is not None:
            self._changed.set()
        for listener in self.change_listeners:
            listener()

    def _trace_line(self, line: dict[str, Any]) -> None:
        self._trace_lines.append(line)
        if self._trace is not None:
            self._trace(line)

    def _note(self, name: str, **fields: Any) -> None:
        """A line in the run's own log (node `run`), as `grouplab run` writes what it was asked to do."""
        self._log("run").emit(LogEvent(wall_clock_ms(), FreeFormEvent(name, fields)))
