"""A local cluster for `grouplab run`, `grouplab ui`, tests and benchmarks: one coordinator server and
any number of simulated consumer apps in this process, all talking over real loopback TCP sockets.
With `faults` (SPEC strings, docs/faults.md), or `proxy=True`, a FaultProxy sits between the
consumers and the coordinator.

The operations a teacher's dashboard needs are methods here, so that the web page only calls them:
crash, hang, slow down, resume, partition a member from the coordinator, add a member, add
partitions, restart the coordinator, switch a member's assignor. Each writes one line to the run's
own event log (node `run`, docs/ui.md §5), which is how the dashboard learns that a member stopped
consuming before the coordinator notices."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
import itertools
from pathlib import Path
from typing import Any, Callable

from grouplab.consumer.app import SimulatedConsumerApp
from grouplab.consumer.client import with_bootstrap
from grouplab.consumer.delivery import DeliveryConfig, DeliveryMode, OutputLedger, input_value
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import MemberState
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group import GroupState
from grouplab.protocol.states import ConsumerGroupState, MembershipState
from grouplab.coordinator.server import CoordinatorServer
from grouplab.eventlog import EventLog, null_log, run_dir_log
from grouplab.tracefile import TraceFile, trace_path
from grouplab.faults.members import Stall, hang, slow_processing
from grouplab.faults.proxy import FaultProxy
from grouplab.faults.proxy_group import ProxyGroup
from grouplab.faults.rules import FaultSpecError, Rule, parse_spec
from grouplab.protocol import events
from grouplab.protocol.consumer_protocol import decode_assignment
from grouplab.protocol.errors import ProtocolError
from grouplab.protocol.events import FreeFormEvent
from grouplab.protocol.effects import LogEvent, wall_clock_ms
from grouplab.protocol.types import TopicPartition

TraceListener = Callable[[dict[str, Any]], None]


class ClusterError(ValueError):
    """An operation that cannot be done as asked (an unknown member, a member already hung, no
    proxy): the message says why, in one line, and nothing changed."""


@dataclass
class MemberFault:
    """A fault the cluster put on one member app that is still in force."""

    kind: str  # hang, slow, partition
    started_ms: int
    stall: Stall | None = None
    heal: asyncio.TimerHandle | None = None


class LocalCluster:
    def __init__(
        self,
        topics: dict[str, int],
        group_id: str = "grouplab",
        assignors: list[str] | None = None,
        broker_config: BrokerConfig | None = None,
        consumer_overrides: list[str] | None = None,
        run_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        listeners: list[Callable[[str, LogEvent], None]] | None = None,
        data_dir: str | Path | None = None,
        faults: list[str] | None = None,
        fault_seed: int | None = None,
        delivery: "DeliveryRun | None" = None,
        kafka_port: int | None = None,
        trace_listeners: list[TraceListener] | None = None,
        proxy: bool = False,
        brokers: int = 1,
    ) -> None:
        # A cluster of brokers (docs/protocol.md §12): the consumers bootstrap on every broker and
        # follow their coordinator (and, with --delivery, their partitions' leaders). With faults,
        # each broker has its own fault proxy, advertising the others' (faults/proxy_group.py).
        self.brokers = brokers
        self.delivery = delivery
        if delivery is not None:
            # The input topic's partition count for the output too: partition p -> partition p.
            topics = {**topics, delivery.output_topic: topics[delivery.input_topic]}
        self.topics = topics
        self.group_id = group_id
        self.assignors = assignors or ["range"]
        self.broker_config = broker_config or BrokerConfig()
        self.consumer_overrides = consumer_overrides or []
        self.run_dir = Path(run_dir) if run_dir else None
        self.host = host
        self.port = port
        self.listeners = list(listeners or [])
        self.data_dir = data_dir
        self.kafka_port = kafka_port  # a Kafka-wire listener for real clients (None: none)
        # Parsed now, so that a bad SPEC fails before anything starts (FaultSpecError, a ValueError).
        self.fault_rules: list[Rule] = [parse_spec(spec) for spec in faults or []]
        kafka_only = [rule.spec() for rule in self.fault_rules if rule.kafka_wire_only]
        if kafka_only and kafka_port is None:
            raise FaultSpecError(f"fault rule {kafka_only[0]} names a Kafka-wire API (only real Kafka clients send "
                                 "it); it needs --kafka-port, whose fault proxy applies it")
        self.fault_seed = fault_seed
        # proxy=True: link faults can come later
        self.want_proxy = proxy or bool(self.fault_rules)
        # Who else reads the coordinator's message trace as it is written (the dashboard); the
        # trace is recorded when there is a run dir or a listener.
        self.trace_listeners: list[TraceListener] = list(trace_listeners or [])
        # One proxy, or in a cluster one per broker used as one (a rule counts across them).
        self.proxy: FaultProxy | ProxyGroup | None = None
        self.kafka_proxy: FaultProxy | ProxyGroup | None = None  # the same rules in front of the Kafka-wire listeners
        self.server: CoordinatorServer | None = None
        self.apps: list[SimulatedConsumerApp] = []
        self.stopped: list[SimulatedConsumerApp] = []
        self._numbers = itertools.count(1)
        self._changed = asyncio.Event()
        self._logs: dict[str, EventLog] = {}
        self._trace: TraceFile | None = None
        self.member_faults: dict[str, MemberFault] = {}  # app name -> a fault in force
        self.restarts = 0

    def event_log(self, node: str) -> EventLog:
        """This run's event log for `node` (a file in the run dir, or nowhere)."""
        return self._log(node)

    def _log(self, node: str) -> EventLog:
        """One log per node for the cluster's life: a member restarted under its name (a switched
        assignor) goes on writing the same file instead of starting it afresh."""
        log = self._logs.get(node)
        if log is None:
            log = run_dir_log(self.run_dir, node) if self.run_dir else null_log(node)
            log.listeners.append(lambda _n, _e: self._changed.set())
            log.listeners.extend(self.listeners)
            self._logs[node] = log
        return log

    def _trace_line(self, line: dict[str, Any]) -> None:
        if self._trace is not None:
            self._trace(line)
        for listener in self.trace_listeners:
            listener(line)

    def _note(self, name: str, **fields: Any) -> None:
        """A line in the run's own event log (node `run`): what the cluster was asked to do."""
        self._log("run").emit(LogEvent(wall_clock_ms(), FreeFormEvent(name, fields)))

    def _new_server(self, old: CoordinatorServer | None = None) -> CoordinatorServer:
        """A coordinator (a cluster's brokers with several), on `old`'s ports when it restarts."""
        traced = self._trace is not None or bool(self.trace_listeners)
        return CoordinatorServer(self.broker_config, self.host, self.port, events=self._log("coordinator"),
                                 data_dir=self.data_dir, trace=self._trace_line if traced else None,
                                 kafka_port=self.kafka_port, client_logs=self._log, brokers=self.brokers,
                                 node_ports=old.ports if old is not None else None,
                                 node_kafka_ports=old.kafka_ports if old is not None else None)

    async def start(self) -> "LocalCluster":
        self._trace = TraceFile(trace_path(self.run_dir)) if self.run_dir else None
        self.server = self._new_server()
        await self.server.start()
        self.port = self.server.port
        self.kafka_port = self.server.kafka_port
        if self.want_proxy:
            self.proxy = await self._proxies(self.server.ports, "proxy", "msgpack")
            for rule in self.fault_rules:
                if not rule.kafka_wire_only:  # FindCoordinator, ApiVersions: only the Kafka-wire proxy sees them
                    self.proxy.add(rule)
            if self.kafka_port is not None:
                self.kafka_proxy = await self._proxies(self.server.kafka_ports, "kafka-proxy", "kafka")
                for rule in self.fault_rules:
                    self.kafka_proxy.add(rule)
        await self._create_missing_topics(self.topics)
        if self.delivery is not None:
            await self.delivery.write_input(self.host, self.port, self.topics[self.delivery.input_topic],
                                            self.delivery.first_part)
        return self

    async def _proxies(self, ports: dict[int, int], node: str, wire: str) -> FaultProxy | ProxyGroup:
        """A fault proxy in front of the one broker, or one per broker of a cluster (each naming the
        others' proxies in the brokers its answers advertise)."""
        def proxy(port: int) -> FaultProxy:
            return FaultProxy(self.host, port, self.host, 0, seed=self.fault_seed, events=self._log(node), wire=wire)

        if self.brokers == 1:
            return await proxy(next(iter(ports.values()))).start()
        return await ProxyGroup({n: proxy(port) for n, port in ports.items()}).start()

    async def _create_missing_topics(self, topics: dict[str, int]) -> None:
        """With a data directory the topics may have survived from an earlier run (or restart)."""
        assert self.server is not None
        missing = {t: n for t, n in topics.items() if t not in self.server.broker.topics.partitions}
        if missing:
            from grouplab.admin import AdminClient

            async with AdminClient(self.host, self.port) as admin:
                await admin.create_topics(missing)

    @property
    def consumer_port(self) -> int:
        """Where consumers connect: the fault proxy if there is one, else the coordinator."""
        return self.proxy.port if self.proxy is not None else self.port

    @property
    def kafka_client_port(self) -> int | None:
        """Where real Kafka clients connect: the Kafka-wire fault proxy if there is one."""
        return self.kafka_proxy.port if self.kafka_proxy is not None else self.kafka_port

    async def add_consumer(self, name: str | None = None, topics: list[str] | None = None,
                           assignors: list[str] | None = None) -> SimulatedConsumerApp:
        name = name or f"consumer-{next(self._numbers)}"
        if self.delivery is not None:
            topics = [self.delivery.input_topic]
        config = ConsumerConfig(group_id=self.group_id, topics=topics or sorted(self.topics), client_id=name,
                                assignors=assignors or self.assignors).with_overrides(self.consumer_overrides)
        config, nodes = with_bootstrap(config, self.bootstrap)
        app = SimulatedConsumerApp(config, self.host, self.consumer_port, events=self._log(name),
                                   delivery=self.delivery.config() if self.delivery is not None else None,
                                   on_step=self._changed.set, nodes=nodes)
        await app.start()
        self.apps.append(app)
        return app

    async def stop_consumer(self, app: SimulatedConsumerApp, leave: bool = True) -> None:
        """`leave=True`: a clean shutdown (LeaveGroup); `leave=False`: a crash, written to the
        run's log as `member_crashed` with the timeouts that decide when the group notices."""
        name = app.client.config.client_id
        self.apps.remove(app)
        self.stopped.append(app)
        fault = self.member_faults.pop(name, None)
        if fault is not None:  # a crash leaves a hung process hung; a clean stop wakes it to leave
            self._end_fault(name, fault, "stopped" if leave else "crashed", wake=leave)
        if not leave:
            self._note("member_crashed", client_id=name, member_id=app.client.member_id,
                       **self._session_timeout(app.client.config))
        await app.stop(leave=leave)
        self._changed.set()

    async def crash_consumer_at(self, app: SimulatedConsumerApp, point: str, timeout_s: float) -> bool:
        """Crash a delivery consumer at `point` (SimulatedConsumerApp.crash_at); it is then stopped.
        Input held back (DeliveryRun.hold_back) is written once the point is armed."""
        delivery = self.delivery

        async def armed() -> None:
            if delivery is not None and delivery.first_part < delivery.records:
                await delivery.write_input(self.host, self.port, self.topics[delivery.input_topic])

        crashed = await app.crash_at(point, timeout_s, armed)
        self.apps.remove(app)
        self.stopped.append(app)
        self._changed.set()
        return crashed

    # ------------------------------------------------------------------ a teacher's operations

    def app(self, name: str) -> SimulatedConsumerApp:
        """The running member app whose client id is `name`."""
        for app in self.apps:
            if app.client.config.client_id == name:
                return app
        known = ", ".join(a.client.config.client_id for a in self.apps) or "none"
        raise ClusterError(f"no running member {name!r} (running: {known})")

    def _free(self, name: str) -> SimulatedConsumerApp:
        app = self.app(name)
        fault = self.member_faults.get(name)
        if fault is not None:
            raise ClusterError(f"{name} is already {_DOING[fault.kind]}; resume it first")
        return app

    async def crash_consumer(self, name: str) -> None:
        """Kill a member: no LeaveGroup, no commit. The group learns of it only when its session
        times out; until then the member still owns its partitions and nobody consumes them."""
        await self.stop_consumer(self.app(name), leave=False)

    def hang_consumer(self, name: str) -> None:
        """Freeze a member's process (docs/faults.md §2): no heartbeat, no poll, socket open."""
        app = self._free(name)
        self._begin_fault(name, MemberFault("hang", wall_clock_ms(), stall=hang(app)), app)

    def slow_consumer(self, name: str) -> None:
        """A member whose processing stalls: no poll() while heartbeats go on, so it leaves the group
        itself after max.poll.interval.ms, as a Kafka consumer does."""
        app = self._free(name)
        self._begin_fault(name, MemberFault("slow", wall_clock_ms(), stall=slow_processing(app)), app)

    def partition_consumer(self, name: str, seconds: float) -> None:
        """Cut a member off from the coordinator for `seconds`: the proxy drops its frames both ways
        (its reconnects too), then heals and resets its links."""
        if self.proxy is None:
            raise ClusterError("no fault proxy in this cluster: start it with proxy=True (grouplab ui does)")
        if not 0 < seconds <= 3600:
            raise ClusterError(f"a partition lasts from more than 0 to 3600 seconds, not {seconds:g}")
        app = self._free(name)
        proxy = self.proxy
        proxy.partition(name)
        handle = asyncio.get_running_loop().call_later(seconds, self._heal, name)
        self._begin_fault(name, MemberFault("partition", wall_clock_ms(), heal=handle), app, seconds=seconds)

    def _heal(self, name: str) -> None:
        fault = self.member_faults.get(name)
        if fault is not None and fault.kind == "partition":
            self.resume_consumer(name)

    def resume_consumer(self, name: str) -> None:
        """End a hang, a slow-down or a partition of this member."""
        fault = self.member_faults.pop(name, None)
        if fault is None:
            self.app(name)  # an unknown name says so
            raise ClusterError(f"{name} is running normally: nothing to resume")
        self._end_fault(name, fault, "resumed")

    def _begin_fault(self, name: str, fault: MemberFault, app: SimulatedConsumerApp, **extra: Any) -> None:
        self.member_faults[name] = fault
        config = app.client.config
        self._note("member_fault", client_id=name, member_id=app.client.member_id, fault=fault.kind,
                   **self._session_timeout(config), max_poll_interval_ms=config.max_poll_interval_ms, **extra)

    def _session_timeout(self, config: ConsumerConfig) -> dict[str, Any]:
        """The session timeout that decides when the coordinator removes a silent member, and its
        name: the consumer's session.timeout.ms, or under the consumer protocol (KIP-848) the
        broker's group.consumer.session.timeout.ms (the consumer's own is not used)."""
        if config.consumer_protocol:
            return {"session_timeout_ms": self.broker_config.consumer_session_timeout_ms,
                    "session_timeout_setting": "group.consumer.session.timeout.ms"}
        return {"session_timeout_ms": config.session_timeout_ms}

    def _end_fault(self, name: str, fault: MemberFault, how: str, wake: bool = True) -> None:
        if fault.stall is not None and wake:
            fault.stall.resume()
        if fault.heal is not None:
            fault.heal.cancel()
        if fault.kind == "partition" and self.proxy is not None:
            # Healed links are also reset, as a long partition kills TCP connections: the member
            # reconnects and rejoins now, instead of waiting rebalance.timeout.ms + 5 s (Kafka's
            # JoinGroup timeout) for the answer to a JoinGroup the partition swallowed.
            self.proxy.heal(name)
            self.proxy.disconnect(name)
        self._note("member_fault_over", client_id=name, fault=fault.kind, how=how)

    async def add_member(self, assignors: list[str] | None = None) -> SimulatedConsumerApp:
        app = await self.add_consumer(assignors=assignors)
        self._note("member_added", client_id=app.client.config.client_id, assignors=app.client.config.assignors)
        return app

    async def add_partitions(self, topic: str, total: int) -> None:
        """Raise `topic`'s partition count to `total` (CreatePartitions, as an admin would); the
        group's leader notices the change and starts a rebalance."""
        from grouplab.admin import AdminClient, AdminError

        current = self.topics.get(topic)
        if current is None:
            raise ClusterError(f"unknown topic {topic!r} (topics: {', '.join(sorted(self.topics))})")
        if total <= current:
            raise ClusterError(f"{topic} has {current} partitions: give a larger total, not {total}")
        try:
            async with AdminClient(self.host, self.port) as admin:
                await admin.create_partitions(topic, total)
        except AdminError as exc:
            raise ClusterError(f"CreatePartitions {topic} -> {total} refused: {exc}") from None
        self.topics[topic] = total
        self._note("partitions_added", topic=topic, partitions=total)

    async def restart_coordinator(self) -> None:
        """Stop the coordinator and start a new one on the same port. With a data directory it
        comes back with its groups, offsets and records; without one it starts empty (the topics
        are created again, as the cluster does at start) and the members rejoin from scratch."""
        assert self.server is not None
        self.restarts += 1
        self._note("coordinator_restart", durable=self.data_dir is not None)
        await self.server.stop()
        self.server = self._new_server(self.server)
        await self.server.start()
        await self._create_missing_topics(self.topics)

    # ------------------------------------------------------------------ a cluster's brokers

    def coordinator_of_group(self) -> int:
        assert self.server is not None
        return self.server.coordinator_of(self.group_id)

    async def kill_broker(self, node: int, how: str = "killed") -> None:
        """Broker `node` of the cluster stops (NodeError if it cannot): its partitions and the
        groups it coordinated move; the consumers find the new coordinator."""
        assert self.server is not None
        await self.server.kill_broker(node, how)
        self._note("broker_killed", node_id=node, how=how)

    async def restart_broker(self, node: int) -> None:
        assert self.server is not None
        await self.server.restart_broker(node)
        self._note("broker_restarted", node_id=node)

    def elect_leaders(self) -> None:
        assert self.server is not None
        self.server.elect_leaders()
        self._note("leaders_elected")

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        """Every broker's address on grouplab's protocol (one: the consumers' port)."""
        if self.server is None or self.brokers == 1:
            return [(self.host, self.consumer_port)]
        if isinstance(self.proxy, ProxyGroup):
            return [(self.host, proxy.port) for proxy in self.proxy.proxies.values()]
        return [(self.host, port) for port in self.server.ports.values()]

    async def switch_assignor(self, name: str, assignors: list[str]) -> SimulatedConsumerApp:
        """Restart member `name` with another partition.assignment.strategy (a clean LeaveGroup,
        then a new member under the same client id): the group must find a protocol every member
        supports, or refuses the newcomer with INCONSISTENT_GROUP_PROTOCOL."""
        from grouplab.consumer.assignors import get_assignor

        if not assignors:
            raise ClusterError("give at least one assignor")
        for assignor in assignors:
            try:
                get_assignor(assignor)
            except ValueError as exc:
                raise ClusterError(str(exc)) from None
        app = self._free(name)
        await self.stop_consumer(app, leave=True)
        new = await self.add_consumer(name=name, assignors=assignors)
        self._note("assignor_switched", client_id=name, assignors=assignors)
        return new

    def group_state(self) -> Any:
        assert self.server is not None
        return self.server.broker.groups.get(self.group_id)

    def is_stable(self) -> bool:
        """The group is Stable with exactly the live apps as members (with a Kafka port, real
        clients too), each app Stable in it, and every partition owned (a cooperative rebalance is
        not over until its follow-up is). A consumer-protocol group (KIP-848): the same, each app
        stable at the target assignment's epoch."""
        if not self._apps_at_the_coordinator():
            return False
        if self.server is not None and self.group_id in self.server.broker.consumer_groups:
            return self._consumer_group_stable()
        group = self.group_state()
        if group is None or group.state is not GroupState.STABLE:
            return False
        members = {app.client.member_id for app in self.apps}
        others = set(group.members) - members  # real Kafka clients, with a Kafka port
        if (not members <= set(group.members) or (others and self.kafka_port is None)) or not all(
                app.client.state is MemberState.STABLE and app.client.generation_id == group.generation_id
                for app in self.apps):
            return False
        owned = sorted(tp for app in self.apps for tp in app.client.assignment)
        # A real client's share, as the leader assigned it (it says nothing to us of its own state).
        try:
            owned = sorted(owned + [tp for m in others for tp in decode_assignment(group.members[m].assignment).partitions])
        except ProtocolError:
            return False  # a real client's assignment we cannot read: not a state we can call stable
        subscribed = {t for app in self.apps for t in app.client.config.topics}
        topics = self.server.broker.topics.partitions if self.server is not None else {}
        return owned == sorted(TopicPartition(t, p) for t in subscribed for p in range(topics.get(t, 0)))

    def _apps_at_the_coordinator(self) -> bool:
        """In a cluster: every app knows the group's coordinator is the broker that is (after a
        move, a member learns it at its next request there; until then it is not settled)."""
        if self.brokers == 1 or self.server is None:
            return True
        coordinator = self.server.coordinator_of(self.group_id)
        return all(getattr(app.client.machine, "coordinator_node", coordinator) == coordinator for app in self.apps)

    def _consumer_group_stable(self) -> bool:
        assert self.server is not None
        group = self.server.broker.consumer_groups[self.group_id]
        if group.state is not ConsumerGroupState.STABLE:
            return False
        members = {app.client.member_id for app in self.apps}
        others = set(group.members) - members  # real Kafka clients, with a Kafka port
        if not members <= set(group.members) or (others and self.kafka_port is None) or not all(
                app.client.state is MembershipState.STABLE and app.client.generation_id == group.assignment_epoch
                for app in self.apps):
            return False
        owned = sorted(tp for app in self.apps for tp in app.client.assignment)
        owned += [TopicPartition(t, p) for m in others for t, ps in group.members[m].progress.assigned.items() for p in ps]
        subscribed = {t for app in self.apps for t in app.client.config.topics}
        topics = self.server.broker.topics.partitions
        return sorted(owned) == sorted(TopicPartition(t, p) for t in subscribed for p in range(topics.get(t, 0)))

    async def recorder_wait(self, predicate: Callable[[], bool], timeout_s: float) -> None:
        """Until `predicate()` holds, re-checked after every logged event (or every 50 ms)."""
        async def wait() -> None:
            while not predicate():
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), 0.05)
                except asyncio.TimeoutError:
                    pass
        await asyncio.wait_for(wait(), timeout_s)

    async def wait_stable(self, timeout_s: float = 60.0) -> None:
        async def wait() -> None:
            while not self.is_stable():
                self._changed.clear()
                await self._changed.wait()
        await asyncio.wait_for(wait(), timeout_s)

    async def close(self) -> None:
        for app in list(self.apps):
            await self.stop_consumer(app, leave=True)
        await asyncio.sleep(0.05)  # let the last LeaveGroups land before the server goes
        for fault in self.member_faults.values():
            if fault.heal is not None:
                fault.heal.cancel()
        self.member_faults.clear()
        if self.proxy is not None:
            await self.proxy.stop()
        if self.kafka_proxy is not None:
            await self.kafka_proxy.stop()
        if self.server is not None:
            await self.server.stop()
        for log in self._logs.values():
            log.close()
        if self._trace is not None:
            self._trace.close()


_DOING = {"hang": "hung", "slow": "slowed down", "partition": "partitioned from the coordinator"}


@dataclass
class DeliveryRun:
    """`grouplab run --delivery MODE`: the consumers read `input_topic` (filled with `records` per
    partition before they start), write each record to `output_topic` and commit in `mode`; the
    account at the end reads the output back record by record."""

    mode: DeliveryMode
    input_topic: str
    records: int
    processing_ms: int = 0
    max_records: int = 50
    # With a crash to show (`run --delivery MODE --crash`), half of each partition's input is held
    # back until the crash point is armed (write_rest): the victim then certainly has a batch to
    # crash on, whatever the machine's speed, instead of finding its input all done.
    hold_back: bool = False

    @property
    def first_part(self) -> int:
        """Records per partition written at the start."""
        return self.records // 2 if self.hold_back else self.records

    @property
    def output_topic(self) -> str:
        return f"{self.input_topic}-out"

    def config(self) -> DeliveryConfig:
        return DeliveryConfig(self.mode, self.output_topic, max_records=self.max_records,
                              processing_ms=self.processing_ms)

    def value(self, partition: int, i: int) -> bytes:
        return input_value(self.input_topic, partition, i)

    async def write_input(self, host: str, port: int, partitions: int, upto: int | None = None) -> None:
        """Each partition's input up to record `upto` (default: all of it), from where it ends."""
        from grouplab.admin import AdminClient

        upto = self.records if upto is None else upto
        async with AdminClient(host, port) as admin:
            for p in range(partitions):
                end = (await admin.list_offsets(self.input_topic, p)).offset
                for start in range(max(end, 0), upto, 500):
                    values = [self.value(p, i) for i in range(start, min(start + 500, upto))]
                    resp = await admin.produce(self.input_topic, p, values)
                    if resp is not None and resp.error_code:
                        raise RuntimeError(f"writing the input failed: error {resp.error_code}")

    async def open_transactions(self, host: str, port: int, partitions: int) -> int:
        """How many output partitions an open transaction holds back from a read_committed reader
        (last stable offset behind the high watermark). A crashed member's transaction stays open
        until the coordinator aborts it (transaction.timeout.ms); the account waits for that."""
        from grouplab.admin import AdminClient

        held = 0
        async with AdminClient(host, port) as admin:
            for p in range(partitions):
                stable = (await admin.list_offsets(self.output_topic, p, isolation_level=1)).offset
                held += stable < (await admin.list_offsets(self.output_topic, p)).offset
        return held

    async def ledgers(self, host: str, port: int, partitions: int) -> tuple[OutputLedger, OutputLedger]:
        """The output read back as the mode's reader sees it (read_committed for exactly-once),
        and as a read_uncommitted reader would, each counted per input record."""
        from grouplab.admin import AdminClient

        async def read(isolation: int) -> OutputLedger:
            values: list[bytes | None] = []
            async with AdminClient(host, port) as admin:
                for p in range(partitions):
                    offset = 0
                    while (part := await admin.fetch(self.output_topic, p, offset, isolation_level=isolation)).records:
                        values.extend(r.value for r in part.records)
                        offset = part.records[-1].offset + 1
            return OutputLedger.from_output(self.input_topic, partitions, self.records, values)

        return await read(1 if self.mode is DeliveryMode.EXACTLY_ONCE else 0), await read(0)

    async def account(self, host: str, port: int, partitions: int, log: EventLog | None = None,
                      committed: dict[int, int] | None = None) -> dict[str, int]:
        """produced, lost, duplicated, and what a read_uncommitted reader would count as
        duplicated; with `log`, also written as `delivery_records` and `delivery_account` events."""
        ledger, uncommitted = await self.ledgers(host, port, partitions)
        account = {"produced": ledger.produced, "lost": ledger.lost, "duplicated": ledger.duplicated,
                   "duplicated_uncommitted": uncommitted.duplicated}
        if log is not None:
            committed = committed or {}
            isolation = "read_committed" if self.mode is DeliveryMode.EXACTLY_ONCE else "read_uncommitted"
            for fields in ledger.record_events(self.mode.value, isolation, committed):
                log.emit(LogEvent(wall_clock_ms(), events.RunDeliveryRecords(**fields)))
            log.emit(LogEvent(wall_clock_ms(), events.RunDeliveryAccount(
                self.mode.value, produced=ledger.produced, committed=sum(committed.values()), lost=ledger.lost,
                duplicated=ledger.duplicated)))
        return account
