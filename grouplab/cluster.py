"""A local cluster for `grouplab run`, tests and benchmarks: one coordinator server and any number
of simulated consumer apps in this process, all talking over real loopback TCP sockets. With
`faults` (SPEC strings, docs/faults.md), a FaultProxy sits between the consumers and the
coordinator and applies them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
import itertools
from pathlib import Path
from typing import Any, Callable

from consumer.app import SimulatedConsumerApp
from consumer.delivery import DeliveryConfig, DeliveryMode, OutputLedger, input_value
from consumer.config import ConsumerConfig
from consumer.coordinator import MemberState
from coordinator.config import BrokerConfig
from coordinator.group import GroupState
from coordinator.server import CoordinatorServer
from grouplab.eventlog import EventLog, null_log, run_dir_log
from grouplab.tracefile import TraceFile, trace_path
from grouplab.faults.proxy import FaultProxy
from grouplab.faults.rules import Rule, parse_spec
from protocol import events
from protocol.consumer_protocol import decode_assignment
from protocol.errors import ProtocolError
from protocol.effects import LogEvent, wall_clock_ms
from protocol.types import TopicPartition


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
    ) -> None:
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
        self.fault_seed = fault_seed
        self.proxy: FaultProxy | None = None
        self.kafka_proxy: FaultProxy | None = None  # the same rules in front of the Kafka-wire listener
        self.server: CoordinatorServer | None = None
        self.apps: list[SimulatedConsumerApp] = []
        self.stopped: list[SimulatedConsumerApp] = []
        self._numbers = itertools.count(1)
        self._changed = asyncio.Event()
        self._logs: list[EventLog] = []
        self._trace: TraceFile | None = None

    def event_log(self, node: str) -> EventLog:
        """This run's event log for `node` (a file in the run dir, or nowhere)."""
        return self._log(node)

    def _log(self, node: str) -> EventLog:
        log = run_dir_log(self.run_dir, node) if self.run_dir else null_log(node)
        log.listeners.append(lambda _n, _e: self._changed.set())
        log.listeners.extend(self.listeners)
        self._logs.append(log)
        return log

    async def start(self) -> "LocalCluster":
        self._trace = TraceFile(trace_path(self.run_dir)) if self.run_dir else None
        self.server = CoordinatorServer(self.broker_config, self.host, self.port, events=self._log("coordinator"),
                                        data_dir=self.data_dir, trace=self._trace, kafka_port=self.kafka_port)
        await self.server.start()
        self.port = self.server.port
        self.kafka_port = self.server.kafka_port
        if self.fault_rules:
            self.proxy = FaultProxy(self.host, self.port, self.host, 0, seed=self.fault_seed, events=self._log("proxy"))
            await self.proxy.start()
            for rule in self.fault_rules:
                self.proxy.add(rule)
            if self.kafka_port is not None:
                self.kafka_proxy = FaultProxy(self.host, self.kafka_port, self.host, 0, seed=self.fault_seed,
                                              events=self._log("kafka-proxy"), wire="kafka")
                await self.kafka_proxy.start()
                for rule in self.fault_rules:
                    self.kafka_proxy.add(rule)
        # With a data directory the topics may have survived from an earlier run.
        missing = {t: n for t, n in self.topics.items() if t not in self.server.broker.topics.partitions}
        if missing:
            from grouplab.admin import AdminClient

            async with AdminClient(self.host, self.port) as admin:
                await admin.create_topics(missing)
        if self.delivery is not None:
            await self.delivery.write_input(self.host, self.port, self.topics[self.delivery.input_topic])
        return self

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
        app = SimulatedConsumerApp(config, self.host, self.consumer_port, events=self._log(name),
                                   delivery=self.delivery.config() if self.delivery is not None else None)
        await app.start()
        self.apps.append(app)
        return app

    async def stop_consumer(self, app: SimulatedConsumerApp, leave: bool = True) -> None:
        self.apps.remove(app)
        self.stopped.append(app)
        await app.stop(leave=leave)
        self._changed.set()

    async def crash_consumer_at(self, app: SimulatedConsumerApp, point: str, timeout_s: float) -> bool:
        """Crash a delivery consumer at `point` (SimulatedConsumerApp.crash_at); it is then stopped."""
        crashed = await app.crash_at(point, timeout_s)
        self.apps.remove(app)
        self.stopped.append(app)
        self._changed.set()
        return crashed

    def group_state(self) -> Any:
        assert self.server is not None
        return self.server.broker.groups.get(self.group_id)

    def is_stable(self) -> bool:
        """The group is Stable with exactly the live apps as members (with a Kafka port, real
        clients too), each app Stable in it, and every partition owned (a cooperative rebalance is
        not over until its follow-up is)."""
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
        if self.proxy is not None:
            await self.proxy.stop()
        if self.kafka_proxy is not None:
            await self.kafka_proxy.stop()
        if self.server is not None:
            await self.server.stop()
        for log in self._logs:
            log.close()
        if self._trace is not None:
            self._trace.close()


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

    @property
    def output_topic(self) -> str:
        return f"{self.input_topic}-out"

    def config(self) -> DeliveryConfig:
        return DeliveryConfig(self.mode, self.output_topic, max_records=self.max_records,
                              processing_ms=self.processing_ms)

    def value(self, partition: int, i: int) -> bytes:
        return input_value(self.input_topic, partition, i)

    async def write_input(self, host: str, port: int, partitions: int) -> None:
        from grouplab.admin import AdminClient

        async with AdminClient(host, port) as admin:
            for p in range(partitions):
                end = (await admin.list_offsets(self.input_topic, p)).offset
                for start in range(max(end, 0), self.records, 500):
                    values = [self.value(p, i) for i in range(start, min(start + 500, self.records))]
                    resp = await admin.produce(self.input_topic, p, values)
                    if resp is not None and resp.error_code:
                        raise RuntimeError(f"writing the input failed: error {resp.error_code}")

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
