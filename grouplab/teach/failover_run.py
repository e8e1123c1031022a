"""A small cluster run told by `explain` and the `coordinator-failover` lesson: three brokers over
the pure Broker, a classic group of two members, its coordinator broker killed and restarted, the
preferred-leader election that gives the group back to it. Scripted, not simulated, so it is the
same run every time (the simulator's members do not follow a cluster on this branch).

It writes a run directory as any coordinator does (the message trace through CoordinatorDriver's
TraceRecorder, the event log), so `grouplab replay` replays it to the same answers and `explain`
reads it as any other run. What the members send is written out here, message by message, as a
Kafka client would send it: FindCoordinator to any broker, then the group's requests to the broker
it named, again after NOT_COORDINATOR or a connection the killed broker cut.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grouplab.consumer.assignors import get_assignor
from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.driver import CoordinatorDriver
from grouplab.coordinator.trace import TraceRecorder
from grouplab.eventlog import run_dir_log
from grouplab.protocol.consumer_protocol import encode_assignment, encode_subscription
from grouplab.protocol.effects import ArmTimer, CancelTimer, Reply, TimerKey
from grouplab.protocol.messages import (FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest,
                                        JoinGroupRequestProtocol, OffsetCommitRequest, OffsetCommitRequestPartition,
                                        OffsetCommitRequestTopic, SyncGroupRequest, SyncGroupRequestAssignment)
from grouplab.protocol.types import Assignment, Subscription
from grouplab.tracefile import TraceFile, trace_path

T0 = 1_700_000_000_000
GROUP = "orders"  # __consumer_offsets-31 of 50: replicas [1, 2, 0], so broker 1 coordinates it
TOPIC = "t"
BROKERS = 3
CONFIG = {"group.initial.rebalance.delay.ms": "0", "grouplab.coordinator.load.time.ms": "1000",
          "leader.imbalance.check.interval.seconds": "10"}
PORT = 9192  # each broker's address, as Metadata and FindCoordinator name it: 127.0.0.1:9192+node


class _Timers:
    """The Broker's timers on the script's clock: due ones fire, in deadline order, when the
    script moves time past them."""

    def __init__(self) -> None:
        self.due: dict[TimerKey, int] = {}

    def apply(self, out: ArmTimer | CancelTimer) -> None:
        if isinstance(out, ArmTimer):
            self.due[out.key] = out.deadline_ms
        else:
            self.due.pop(out.key, None)

    def cancel_all(self) -> None:
        self.due.clear()


class _Run:
    def __init__(self, run_dir: Path) -> None:
        self.now = T0
        self.timers = _Timers()
        self.answers: dict[Any, Any] = {}
        self.correlation: dict[str, int] = {}
        config = BrokerConfig().with_overrides(f"{k}={v}" for k, v in CONFIG.items())
        self.broker = Broker(config, SequentialMemberIds(), port=PORT, brokers=BROKERS)
        self.broker.topics.partitions[TOPIC] = 3
        assert self.broker.cluster is not None
        for n in range(BROKERS):
            self.broker.cluster.addresses[n] = ("127.0.0.1", PORT + n)
        self.events = run_dir_log(run_dir, "coordinator")
        self.trace = TraceFile(trace_path(run_dir))
        recorder = TraceRecorder(self.trace, lambda token: token)
        self.driver = CoordinatorDriver(self.broker, lambda: self.now, self.timers, self._reply, lambda _: None,
                                        self.events.emit, recorder)
        recorder.start(self.now, host="127.0.0.1", port=PORT, config=config.as_kafka_names(),
                       config_given=sorted(config.overridden), topics={TOPIC: 3}, recovered=False, brokers=BROKERS,
                       addresses={str(n): ["127.0.0.1", PORT + n] for n in range(BROKERS)})

    def _reply(self, out: Reply) -> None:
        self.answers[out.to] = out.body

    def at(self, ms: int) -> None:
        """Move the clock to T0 + ms, firing every timer due before then at its own time."""
        target = T0 + ms
        while True:
            due = [(when, str(key), key) for key, when in self.timers.due.items() if when <= target]
            if not due:
                break
            when, _, key = min(due)
            del self.timers.due[key]
            self.now = max(self.now, when)
            self.driver.on_timer(key)
        self.now = target

    def send(self, client: str, node: int, api: str, body: Any) -> Any:
        """`client` sends `body` to broker `node`; its answer, or None (parked, or nobody answers)."""
        n = self.correlation[client] = self.correlation.get(client, 0) + 1
        token = (f"{client}#{node}", n)
        self.driver.handle(api, body, RequestContext(token, client_id=client, client_host="/127.0.0.1", node_id=node))
        return self.answers.pop(token, None)

    def close(self) -> None:
        self.events.close()
        self.trace.close()


class _Member:
    """A classic member as a Kafka client drives one, written out: where it sends, what it keeps."""

    def __init__(self, run: _Run, client: str) -> None:
        self.run, self.client = run, client
        self.member_id, self.generation, self.coordinator = "", -1, -1

    def find(self, via: int) -> int:
        answer = self.run.send(self.client, via, "FindCoordinator", FindCoordinatorRequest(key=GROUP))
        self.coordinator = answer.node_id
        return int(answer.node_id)

    def join(self) -> None:
        sub = encode_subscription(Subscription(topics=[TOPIC]))
        req = JoinGroupRequest(GROUP, 45_000, 300_000, self.member_id, "consumer",
                               [JoinGroupRequestProtocol("range", sub)])
        answer = self.run.send(self.client, self.coordinator, "JoinGroup", req)
        if answer is not None and answer.member_id:
            self.member_id = answer.member_id
            if answer.error_code:  # MEMBER_ID_REQUIRED: join again with it
                self.run.send(self.client, self.coordinator, "JoinGroup",
                              JoinGroupRequest(GROUP, 45_000, 300_000, self.member_id, "consumer",
                                               [JoinGroupRequestProtocol("range", sub)]))

    def sync(self, assignments: dict[str, Assignment] | None = None) -> None:
        parts = [SyncGroupRequestAssignment(m, encode_assignment(a)) for m, a in (assignments or {}).items()]
        self.run.send(self.client, self.coordinator, "SyncGroup",
                      SyncGroupRequest(GROUP, self.generation, self.member_id, None, "consumer", "range", parts))

    def heartbeat(self) -> Any:
        return self.run.send(self.client, self.coordinator, "Heartbeat",
                             HeartbeatRequest(GROUP, self.generation, self.member_id))

    def commit(self, offsets: dict[int, int]) -> Any:
        topic = OffsetCommitRequestTopic(TOPIC, [OffsetCommitRequestPartition(p, o) for p, o in offsets.items()])
        return self.run.send(self.client, self.coordinator, "OffsetCommit",
                             OffsetCommitRequest(GROUP, [topic], self.generation, self.member_id))


def write_failover_run(run_dir: str | Path) -> Path:
    """Write the scripted run into RUN_DIR (made if missing) and return it."""
    run_dir = Path(run_dir)
    run = _Run(run_dir)
    a, b = _Member(run, "m-0"), _Member(run, "m-1")
    try:
        # The group forms at broker 1, its coordinator.
        for m in (a, b):
            m.find(via=0)
            m.join()
        run.at(30)  # the join phase ends when both have joined (no initial delay here): answers are parked until then
        group = run.broker.groups[GROUP]
        a.generation = b.generation = group.generation_id
        leader_id = group.leader_id
        assert leader_id is not None
        subs = {m.member_id: Subscription(topics=[TOPIC]) for m in (a, b)}
        plan = get_assignor("range").assign({TOPIC: 3}, subs)
        for m in (a, b) if a.member_id == leader_id else (b, a):
            m.sync({mid: Assignment(parts) for mid, parts in plan.items()} if m.member_id == leader_id else None)
        for t in (3_000, 6_000, 9_000):
            run.at(t)
            a.heartbeat()
            run.at(t + 100)
            b.heartbeat()
        run.at(9_500)
        b.commit({2: 40})
        # Broker 1 dies: orders' coordinator moves to broker 2, which loads it for a second.
        run.at(10_000)
        run.driver.broker_change("down", 1, "killed")
        run.at(10_050)
        a.find(via=0)  # its connection to broker 1 was cut
        run.at(10_060)
        a.heartbeat()  # broker 2 is loading: a classic heartbeat is answered NONE all the same
        run.at(10_200)
        b.find(via=2)
        run.at(10_210)
        b.commit({2: 45})  # COORDINATOR_LOAD_IN_PROGRESS
        run.at(11_300)
        b.commit({2: 45})
        for t in (13_000, 16_000):
            run.at(t)
            a.heartbeat()
            run.at(t + 100)
            b.heartbeat()
        # Broker 1 is back; the preferred-leader check (leader.imbalance.check.interval.seconds) gives it its partitions.
        run.at(17_000)
        run.driver.broker_change("up", 1)
        for t in (19_000, 22_000, 25_000):
            run.at(t)
            a.heartbeat()
            run.at(t + 100)
            b.heartbeat()
        run.at(27_100)
        a.heartbeat()  # NOT_COORDINATOR: broker 2 no longer coordinates orders
        run.at(27_150)
        a.find(via=2)
        run.at(27_160)
        a.heartbeat()
        run.at(28_200)
        b.heartbeat()
        run.at(28_250)
        b.find(via=0)
        run.at(28_260)
        b.heartbeat()
        run.at(30_000)
        a.heartbeat()
    finally:
        run.close()
    return run_dir
