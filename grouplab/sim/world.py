"""The deterministic simulator: the real pure state machines (Broker, ConsumerCoordinator) on
virtual time and an in-memory network, all randomness from one seeded `random.Random`.

One agenda of events ordered by (virtual time, order of scheduling) drives everything: message
deliveries, both sides' timers, reconnects and faults. Nothing sleeps and nothing reads a clock,
so a seed replays the run exactly, event log included. The agenda is a list of events per virtual
ms (appended in the order they are scheduled) and a heap of the ms that have one: the order of a
heap of (time, sequence number) tuples, for a dict look-up and a list index per event instead of a
sift through thousands of tuples. Nothing is ever scheduled before the present.

How the shells are modelled (the same behaviour as coordinator/server.py and consumer/client.py):
- a member talks to the coordinator over one connection; every message gets a delay drawn from
  the scenario's range and, while faults are on, may be lost or duplicated, and goes through the
  scenario's [[faults]] rules (grouplab/sim/fault_rules.py), the FaultProxy's rules;
- a connection that closes (member Reconnect output, coordinator crash, disconnect fault or rule) loses
  what is in flight; the member reconnects after 50 ms, doubling while the coordinator is down, and
  a request it tried to send while disconnected makes it rejoin once reconnected (the member side
  is consumer/driver.py's MemberDriver, the coordinator side coordinator/driver.py's
  CoordinatorDriver: the same drivers as the asyncio shells, given virtual time and this network);
- the application polls whenever its poll timer would fire (no extra events), unless it is slow;
- a hung member processes nothing (messages and timers wait) until it resumes;
- a crashed member's process is gone; a restart is a new process with the same client id.

`check()` runs the invariants after every event (grouplab/sim/invariants.py).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Concatenate

from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.membership import member_machine
from grouplab.protocol.states import MembershipState
from grouplab.consumer.coordinator import JOIN_GRACE_MS, MemberState, Send
from grouplab.consumer.delivery import AppOutput
from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.driver import CoordinatorDriver
from grouplab.coordinator.consumer_group import ConsumerGroup
from grouplab.coordinator.group import GroupState
from grouplab.coordinator.partition_log import LogStore, MemoryLogStore
from grouplab.coordinator.trace import TraceRecorder, TraceSink
from grouplab.sim.delivery import DeliveryWorld
from grouplab.sim.fault_rules import SimFaultRules
from grouplab.sim.invariants import Invariants, Violation, format_step
from grouplab.sim.member import SimMember
from grouplab.sim.scenario import BROKER_KINDS, RANDOM_KINDS, Scenario, ScheduledFault, _kafka_value
from grouplab.sim.stats import SimStats
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Persist, Reply, TimerKey
from grouplab.protocol.kernel import UnhandledOutput
from grouplab.protocol.memory import gc_relaxed
from grouplab.protocol.messages import (CreatePartitionsRequest, CreatePartitionsTopic, OffsetCommitResponse,
                                        TxnOffsetCommitResponse)
from grouplab.protocol.types import TopicPartition

POLL_KEY = ("poll",)
# Commits and their answers, which the invariants check against each other (invariant 8).
_COMMITS = frozenset({"OffsetCommit", "TxnOffsetCommit"})
_COMMIT_ANSWERS = (OffsetCommitResponse, TxnOffsetCommitResponse)

# A member machine's states that end its process (compared by identity: an Enum's hash is Python code).
_FAILED, _FATAL = MemberState.FAILED, MembershipState.FATAL

# Agenda event kinds.
_TO_BROKER, _TO_MEMBER, _BROKER_TIMER, _MEMBER_TIMER, _ACTION = range(5)


class _HeapTimers:
    """One node's timers on the simulator's agenda (the Timers its driver is given): each arming
    gets a fresh token and an agenda event, and an event is due only if its token is still armed
    under its key (not cancelled or re-armed since, nor dropped with its process: a new process
    has new timers)."""

    __slots__ = ("_sim", "_kind", "_owner", "armed")

    def __init__(self, sim: "Simulation", kind: int, owner: int | None) -> None:
        self._sim = sim
        self._kind = kind
        self._owner = owner  # the member index, or None for the coordinator
        self.armed: dict[TimerKey, int] = {}

    def apply(self, out: ArmTimer | CancelTimer) -> None:
        if type(out) is ArmTimer:
            self._sim._arm_timer(self._kind, self._owner, self.armed, out)
        else:
            self.armed.pop(out.key, None)

    def cancel_all(self) -> None:
        self.armed.clear()


class _SimMemberShell:
    """One member's end of the simulated world, as its MemberDriver's transport and listener."""

    __slots__ = ("_sim", "_m")

    def __init__(self, sim: "Simulation", m: SimMember) -> None:
        self._sim = sim
        self._m = m

    def send(self, epoch: int, request: Send) -> None:
        self._sim._transmit(self._m, _TO_BROKER, (self._m.index, epoch, request))

    def disconnect(self) -> None:
        """Nothing to close: what is in flight on the old connection is dropped when it arrives."""

    def connect(self, done: Callable[[bool], None], node: int | None = None) -> None:
        done(self._sim.broker_live(node))

    def close_node(self, node: int) -> None:
        """Nothing to close: what is in flight on the old connection is dropped when it arrives."""

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self._sim.invariants.on_assigned(self._m, partitions)

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self._sim.invariants.on_released(self._m, partitions)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self._sim.invariants.on_released(self._m, partitions)

    def on_app_output(self, out: AppOutput) -> None:
        if self._sim.delivery is None:
            raise UnhandledOutput("the simulator (a scenario without [delivery])", out)
        self._sim.delivery.on_output(self._m, out)

    def on_step(self) -> None:
        machine = self._m.machine
        if machine is not None and (machine.state is _FAILED or machine.state is _FATAL):
            self._sim._member_failed(self._m)


class Simulation:
    def __init__(self, scenario: Scenario, seed: int, events: Callable[[str, LogEvent], None] | None = None,
                 trace_len: int = 40, messages: TraceSink | None = None, through_drivers: bool = False) -> None:
        """`through_drivers`: every step's outputs carried out by the drivers (MemberDriver.apply,
        CoordinatorDriver.apply), as the asyncio shells have them carried out, instead of by the
        simulator's inlined copies of the commonest (_member_outputs, _coordinator_outputs). The
        same run either way, only slower: tests/test_sim.py checks that the copies still agree."""
        self._through_drivers = through_drivers
        self.scenario = scenario
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 0
        self.emit = events  # (node, LogEvent) -> None, or None for no event log
        self.stats = SimStats()
        # The agenda: events by virtual ms, each ms's in the order they were scheduled; the heap
        # of the ms that have events; how far into the earliest ms's list the loop has got.
        self._agenda: dict[int, list[tuple[int, tuple]]] = {}
        self._times: list[int] = []
        self._cursor = 0
        self._tokens = itertools.count(1)
        # The last steps, kept as tuples and turned into text only when a run fails.
        self.trace: deque[tuple] = deque(maxlen=trace_len)
        self.broker_config = BrokerConfig().with_overrides(f"{k}={_kafka_value(v)}" for k, v in scenario.broker.items())
        self.ids = SequentialMemberIds(digits=6)
        self.delivery = DeliveryWorld(self, scenario.delivery) if scenario.delivery is not None else None
        self.durable: list[Any] = []  # what the coordinator persisted: its durable log
        self._logs_after_crash: LogStore | None = None
        # The coordinator's message trace (coordinator/trace.py), one across its restarts.
        self.messages = TraceRecorder(messages, self._conn_label) if messages is not None else None
        if self.messages is not None:
            self.messages.start(0, host="127.0.0.1", port=0, config=self.broker_config.as_kafka_names(),
                                config_given=sorted(self.broker_config.overridden),
                                topics=dict(scenario.topics), recovered=False,
                                **({"brokers": scenario.brokers,
                                    "addresses": {str(n): ["127.0.0.1", 0] for n in range(scenario.brokers)}}
                                   if scenario.brokers > 1 else {}))
        # The coordinator (None while it is down), and its Broker: a plain attribute rather than a
        # property, as the network functions and the invariants read it on every message and event.
        self.coordinator: CoordinatorDriver | None = None
        self.broker: Broker | None = None
        self._set_coordinator(self._new_coordinator())
        if self.delivery is not None:
            self.delivery.write_input()
        self.members: list[SimMember] = []
        self.faults_on = True
        self._pending_fault_ends = 0
        net = scenario.network
        self._loss, self._duplicate = net.loss, net.duplicate
        self._delay_lo, self._delay_span = net.delay_ms[0], net.delay_ms[1] - net.delay_ms[0] + 1
        self.invariants = Invariants(self)
        self._build_members()
        faults_end_ms = self._schedule_faults()
        self.fault_rules = (SimFaultRules(self, scenario.faults, faults_end_ms, _TO_BROKER, _TO_MEMBER)
                            if scenario.faults else None)

    # ------------------------------------------------------------------ set-up

    def _new_coordinator(self) -> CoordinatorDriver:
        # The partition logs are the coordinator's disk: they outlive its crashes (their state
        # rebuilt from the batch headers, as FileLogStore recovers); everything else starts over.
        broker = Broker(self.broker_config, self.ids, logs=self._logs_after_crash, brokers=self.scenario.brokers)
        broker.topics.partitions.update(self.scenario.topics)
        return CoordinatorDriver(broker, self._clock, _HeapTimers(self, _BROKER_TIMER, None), self._reply_to_member,
                                 self.durable.extend, self._coordinator_event, self.messages)

    def _clock(self) -> int:
        return self.now

    def broker_live(self, node: int | None) -> bool:
        """Does broker `node` answer (None: the one broker)?"""
        broker = self.broker
        if broker is None:
            return False
        return node is None or broker.cluster is None or node in broker.cluster.nodes.live

    def _set_coordinator(self, coordinator: CoordinatorDriver | None) -> None:
        self.coordinator = coordinator
        self.broker = coordinator.broker if coordinator is not None else None
        if coordinator is not None:
            assert isinstance(coordinator.timers, _HeapTimers)
            self._broker_armed = coordinator.timers.armed  # (for _coordinator_outputs)

    def _consumer_config(self, spec: Any, name: str, instance: str | None) -> ConsumerConfig:
        overrides = {**self.scenario.consumer, **spec.config}
        topics = [self.scenario.delivery.input_topic] if self.scenario.delivery else (spec.topics or self.scenario.topics)
        return ConsumerConfig(group_id=self.scenario.group_id, topics=sorted(topics),
                              client_id=name, group_instance_id=instance,
                              assignors=list(spec.assignors),
                              bootstrap_nodes=tuple(range(self.scenario.brokers)) if self.scenario.brokers > 1 else (),
                              ).with_overrides(
            f"{k}={_kafka_value(v)}" for k, v in overrides.items())

    def _build_members(self) -> None:
        for g, spec in enumerate(self.scenario.members):
            for k in range(spec.count):
                name = (spec.names[k] if spec.names else
                        f"{spec.name}{g}-{k}" if len(self.scenario.members) > 1 else f"{spec.name}-{k}")
                self._add_member(spec, name, self.rng.randint(*spec.start_ms))

    def _add_member(self, spec: Any, name: str, start_at: int) -> SimMember:
        instance = f"{name}-instance" if spec.static else None
        member = self._new_member(name, self._consumer_config(spec, name, instance))
        self.at(start_at, functools.partial(self._start_process, member))
        return member

    def _new_member(self, name: str, config: ConsumerConfig) -> SimMember:
        m = SimMember(len(self.members), name, config, self._clock, self._after,
                      lambda member: _SimMemberShell(self, member),
                      functools.partial(self.emit, name) if self.emit is not None else None)
        self.members.append(m)
        return m

    # ------------------------------------------------------------------ the loop

    def push(self, at: int, kind: int, *payload: Any) -> None:
        """Schedule an event at virtual ms `at` (never before now: the agenda's order relies on it),
        after every event already scheduled for that ms."""
        assert at >= self.now, (at, self.now)
        bucket = self._agenda.get(at)
        if bucket is None:
            self._agenda[at] = [(kind, payload)]
            heapq.heappush(self._times, at)
        else:
            bucket.append((kind, payload))

    def _arm_timer(self, kind: int, owner: int | None, armed: dict[TimerKey, int], out: ArmTimer) -> None:
        """A node's timer armed (`armed`: its timers, key -> token): a fresh token under its key,
        and its event on the agenda at its deadline, or now if that has passed (push, inlined:
        most steps arm a timer). The event fires only if the key still holds that token then."""
        token = next(self._tokens)
        armed[out.key] = token
        at = out.deadline_ms if out.deadline_ms > self.now else self.now
        entry = (kind, (owner, armed, out.key, token))
        bucket = self._agenda.get(at)
        if bucket is None:
            self._agenda[at] = [entry]
            heapq.heappush(self._times, at)
        else:
            bucket.append(entry)

    def at(self, at: int, action: Callable[[], None]) -> None:
        self.push(max(at, self.now), _ACTION, action)

    def _after(self, delay_ms: int, action: Callable[[], None]) -> None:
        self.at(self.now + delay_ms, action)

    def run(self, until_ms: int | None = None) -> "SimResult":
        """Run until settled after the faults (or the liveness bound passes), or `until_ms`."""
        try:
            with gc_relaxed():  # a step makes many short-lived objects and next to no cycles
                self._loop(until_ms, self.liveness_bound_ms())
        except Violation as v:
            return SimResult(self.scenario.name, self.seed, self.stats, v, v.trace, self.now)
        return SimResult(self.scenario.name, self.seed, self.stats, None, [format_step(s) for s in self.trace], self.now)

    def _loop(self, until_ms: int | None, bound: int) -> None:
        # The simulator's hot path: what every event touches in locals, and the dispatch of the
        # commonest kinds inline (a response or a timer reaching a member, a coordinator timer,
        # each as their drivers take them: MemberDriver.on_response and on_timer,
        # CoordinatorDriver.on_timer). The per-event check
        # (Invariants.check) reads only the coordinator's state (its group's generation, which
        # groups it holds, a cluster's live and loading brokers) and what the coordinator's events
        # set, and gives the same answer until that changes; so it runs only after an event that
        # reached the coordinator (a request, its timer, an action). A member's step (a response,
        # a member timer) reaches the world only through its shell (the network, the invariants'
        # ownership records, the delivery counts), and a stale timer changes nothing.
        times, agenda, pop = self._times, self._agenda, heapq.heappop
        stats, invariants = self.stats, self.invariants
        check, members = invariants.check, self.members
        member_outputs, coordinator_outputs = self._member_outputs, self._coordinator_outputs
        trace = self.trace
        # Once the faults are over (an action: only actions change it), the liveness bound runs
        # and each event may be the one the group settles on.
        after_faults = not self.faults_on and stats.settled_at_ms is None
        cursor = self._cursor  # how far into the earliest ms's list (kept here, left in self._cursor)
        try:
            # `while True`, not `while times`: on Python 3.11 only an unconditional backward jump
            # counts towards specializing a function's bytecode, and this one is entered once per
            # run (with `while times` the loop ran unspecialized: every attribute and index generic).
            while True:
                if not times:
                    break
                at = times[0]
                if until_ms is not None and at > until_ms:
                    break
                if after_faults and at > stats.quiet_at_ms + bound:
                    self.now = stats.quiet_at_ms + bound
                    invariants.fail("liveness", f"not settled {bound} ms after the last fault "
                                                f"(quiet since t={stats.quiet_at_ms})")
                # The next event: the earliest ms's next one. A ms whose last event is taken leaves
                # the agenda at once: what that event schedules for the same ms starts a new list after it.
                bucket = agenda[at]
                kind, payload = bucket[cursor]
                cursor += 1
                if cursor == len(bucket):
                    pop(times)
                    del agenda[at]
                    cursor = 0
                if at > self.now:  # time passes: account for the partitions nobody owned meanwhile
                    every = invariants.every_partition  # (unowned_count(), inlined)
                    stats.unowned_partition_ms += (at - self.now) * (
                        len(every if every is not None else invariants.all_partitions()) - invariants.owned_count)
                    self.now = at
                if kind == _TO_BROKER:
                    idx, epoch, send = payload
                    m = members[idx]
                    node = send.node
                    coordinator = self.coordinator
                    # (_deliver_to_broker's checks first: most requests pass them)
                    if node is None and coordinator is not None and self.messages is None and (
                            (m.connected and epoch == m.epoch) or epoch == m.closed_epoch):
                        stats.messages_delivered += 1
                        trace.append((at, m.name, "->", send.api, send.correlation_id))
                        to = (idx, epoch, send.correlation_id)
                        if send.api in _COMMITS:
                            invariants.on_commit_request(to, send.body)
                        # (coordinator.handle, the step's outputs carried out by _coordinator_outputs)
                        coordinator_outputs(coordinator.broker.handle(send.api, send.body, RequestContext(to, m.name, "sim"), at))
                    else:
                        self._deliver_to_broker(m, epoch, send)
                    stats.events += 1
                    check()
                elif kind == _TO_MEMBER:  # a response, unless its connection is gone; held while hung
                    idx, epoch, cid, body = payload
                    m = members[idx]
                    machine = m.machine
                    if machine is not None and ((m.connected and epoch == m.epoch) or m.epoch_open(epoch)):
                        if m.hung:
                            m.held.append((kind, payload))
                        else:
                            stats.messages_delivered += 1
                            trace.append((at, m.name, "<-", body, cid))
                            member_outputs(m, machine.on_response(cid, body, at))
                    stats.events += 1
                elif kind == _MEMBER_TIMER:
                    idx, armed, key, token = payload
                    if armed.get(key) == token:  # else cancelled or re-armed since: nothing happens
                        m = members[idx]
                        if m.hung:
                            m.held.append((kind, payload))
                        else:
                            del armed[key]
                            if key == POLL_KEY and not m.slow:
                                # A healthy application polls all the time; only its latest poll matters here.
                                m.poll()
                            trace.append((at, m.name, "timer", key))
                            machine = m.machine
                            if machine is not None:
                                member_outputs(m, machine.on_timer(key, at))
                    stats.events += 1
                elif kind == _BROKER_TIMER:
                    _, armed, key, token = payload
                    coordinator = self.coordinator
                    if coordinator is not None and armed.get(key) == token:
                        del armed[key]
                        trace.append((at, "coordinator timer", key))
                        if self.messages is None:  # (coordinator.on_timer, as for a request)
                            coordinator_outputs(coordinator.broker.on_timer(key, at))
                        else:
                            coordinator.on_timer(key)
                        stats.events += 1
                        check()
                    else:
                        stats.events += 1
                else:  # an action
                    payload[0]()
                    stats.events += 1
                    check()
                    after_faults = not self.faults_on
                if after_faults and invariants.settled():
                    self._settled()
                    break
        finally:
            self._cursor = cursor

    def _settled(self) -> None:
        stats = self.stats
        stats.settled_at_ms = self.now
        stats.final_imbalance = self.invariants.imbalance()
        self.log_sim(events.Settled, quiet_at_ms=stats.quiet_at_ms)
        if self.delivery is not None:
            self.delivery.finish()

    # ------------------------------------------------------------------ network

    def _link_drops(self, m: SimMember) -> bool:
        if m.partitioned:
            return True
        if self.faults_on and self._loss and self.rng.random() < self._loss:
            self.stats.messages_lost += 1
            return True
        return False

    def _transmit(self, m: SimMember, kind: int, payload: tuple) -> None:
        stats = self.stats
        stats.messages_sent += 1
        # _link_drops(m), inlined: the same draw
        if m.partitioned:
            return
        if self.faults_on and self._loss and self.rng.random() < self._loss:
            stats.messages_lost += 1
            return
        if self.fault_rules is not None:
            self.fault_rules.transmit(m, kind, payload)
            return
        # on_wire(kind, payload), inlined (every message takes this path): the same draws in the
        # same order, the same events (push's, inlined).
        rng, agenda = self.rng, self._agenda
        at = self.now + self._delay_lo + int(rng.random() * self._delay_span)
        bucket = agenda.get(at)
        if bucket is None:
            agenda[at] = [(kind, payload)]
            heapq.heappush(self._times, at)
        else:
            bucket.append((kind, payload))
        if self.faults_on and self._duplicate and rng.random() < self._duplicate:
            stats.messages_duplicated += 1
            self.push(self.now + self._delay_lo + int(rng.random() * self._delay_span), kind, *payload)

    def on_wire(self, kind: int, payload: tuple, extra_ms: int = 0) -> int:
        """Put a message on the network: a delay from the scenario's range (plus `extra_ms`) and,
        while faults are on, maybe a duplicate. Returns when the last copy arrives."""
        due = self.now + extra_ms + self._delay()
        self.push(due, kind, *payload)
        if self.faults_on and self._duplicate and self.rng.random() < self._duplicate:
            self.stats.messages_duplicated += 1
            again = self.now + extra_ms + self._delay()
            self.push(again, kind, *payload)
            return max(due, again)
        return due

    def _delay(self) -> int:
        return self._delay_lo + int(self.rng.random() * self._delay_span)  # randint's result, for less

    def _deliver_to_broker(self, m: SimMember, epoch: int, send: Send) -> None:
        coordinator = self.coordinator
        node = send.node
        if coordinator is None or not (((m.connected and epoch == m.epoch) if node is None else m.is_open(epoch, node))
                                       or epoch == m.closed_epoch):
            return  # the coordinator is down, or the connection it came on is gone
        if node is not None and not self.broker_live(node):
            return  # a stopped broker: its connections are gone
        self.stats.messages_delivered += 1
        self.trace.append((self.now, m.name, "->", send.api, send.correlation_id))
        to = (m.index, epoch, send.correlation_id)
        if send.api in _COMMITS:
            self.invariants.on_commit_request(to, send.body)
        ctx = RequestContext(to, m.name, "sim", node_id=node if node is not None else 0)
        if self.messages is None:  # (coordinator.handle, with the step's outputs carried out by _coordinator_outputs)
            self._coordinator_outputs(coordinator.broker.handle(send.api, send.body, ctx, self.now))
        else:
            coordinator.handle(send.api, send.body, ctx)

    # ------------------------------------------------------------------ coordinator side

    def _coordinator_outputs(self, outputs: list) -> None:
        """coordinator.apply(outputs) (CoordinatorDriver.apply, coordinator/driver.py) for a
        coordinator without a message trace, every output carried out here, inline: a reply onto
        the network (_reply_to_member), a timer (_HeapTimers.apply), a record made durable (the
        simulator's persist, durable.extend, never fails, so a batch of records is the same
        appends in the same order, before what follows them), an event (_coordinator_event). The
        same effects in the same order, two to four calls fewer per output."""
        if self._through_drivers:
            assert self.coordinator is not None
            self.coordinator.apply(outputs)
            return
        armed, members = self._broker_armed, self.members
        for out in outputs:
            kind = type(out)
            if kind is Reply:  # (_reply_to_member, inlined)
                to = out.to
                if to is None:
                    continue
                idx, epoch, cid = to
                m = members[idx]
                body = out.body
                if isinstance(body, _COMMIT_ANSWERS):
                    self.invariants.on_commit_answer(to, body)
                if self.delivery is not None and self.delivery.ack_lost(body):
                    continue
                if (m.connected and epoch == m.epoch) or m.epoch_open(epoch):
                    self._transmit(m, _TO_MEMBER, (idx, epoch, cid, body))
            elif kind is ArmTimer:
                self._arm_timer(_BROKER_TIMER, None, armed, out)
            elif kind is CancelTimer:
                armed.pop(out.key, None)
            elif kind is Persist:
                self.durable.append(out.record)
            elif kind is LogEvent:
                self._coordinator_event(out)
            else:
                raise UnhandledOutput("the coordinator driver", out)

    def _reply_to_member(self, out: Reply) -> None:
        if out.to is None:
            return  # a request the simulator made itself (the tests do)
        idx, epoch, cid = out.to
        m = self.members[idx]
        if isinstance(out.body, _COMMIT_ANSWERS):
            self.invariants.on_commit_answer(out.to, out.body)
        if self.delivery is not None and self.delivery.ack_lost(out.body):
            return
        if m.epoch_open(epoch):
            self._transmit(m, _TO_MEMBER, (idx, epoch, cid, out.body))

    def _coordinator_event(self, ev: LogEvent) -> None:
        self.invariants.on_coordinator_event(ev)
        if self.delivery is not None and type(ev.payload) is events.OffsetsLoaded:
            self.delivery.check_commits_kept()
        if self.emit is not None:
            self.emit("coordinator", ev)

    def _crash_coordinator(self, down_ms: int) -> None:
        coordinator = self.coordinator
        self._set_coordinator(None)
        if coordinator is not None:
            logs = coordinator.broker.logs
            assert isinstance(logs, MemoryLogStore)  # the simulator's partition logs live in memory
            self._logs_after_crash = logs.recovered()
            coordinator.timers.cancel_all()
        if self.messages is not None:
            self.messages.crash(self.now)
        self.log_sim(events.CoordinatorCrashed, down_ms=down_ms)
        for m in self.members:
            if m.up and m.connected:
                self._connection_lost(m)
        self.at(self.now + down_ms, self._restart_coordinator)

    def _restart_coordinator(self) -> None:
        if self.messages is not None:
            self.messages.restart(self.now)
        coordinator = self._new_coordinator()
        outputs = coordinator.broker.restore(list(self.durable), self.now) if self.durable else []
        self._set_coordinator(coordinator)
        self.log_sim(events.CoordinatorRestarted, records=len(self.durable))
        coordinator.apply(outputs)

    # ------------------------------------------------------------------ a cluster's brokers

    def _broker_fault(self, f: ScheduledFault) -> bool:
        """kill_broker, restart_broker, elect_leaders; False if it found nothing to do."""
        coordinator, broker = self.coordinator, self.broker
        if coordinator is None or broker is None or broker.cluster is None:
            return False
        if f.fault == "elect_leaders":
            coordinator.broker_change("elect")
            return True
        node = broker.coordinator_node(self.scenario.group_id) if f.node == "coordinator" else int(f.node)
        if node < 0 or node not in broker.cluster.nodes.live or len(broker.cluster.nodes.live) < 2:
            return False
        how = "killed" if f.fault == "kill_broker" else "shutdown"
        self.trace.append((self.now, "simulator", f.fault, node))
        coordinator.broker_change("down", node, how)
        for m in self.members:
            if m.up and node in m.open_nodes():
                self._node_lost(m, node)
        self.at(self.now + max(f.duration_ms, 1), functools.partial(self._start_broker, node))
        return True

    def _start_broker(self, node: int) -> None:
        coordinator, broker = self.coordinator, self.broker
        if coordinator is not None and broker is not None and broker.cluster is not None \
                and node not in broker.cluster.nodes.live:
            self.trace.append((self.now, "simulator", "broker started", node))
            coordinator.broker_change("up", node)
            self.invariants.dirty = True

    def _node_lost(self, m: SimMember, node: int) -> None:
        """Broker `node`'s connection closed under the member (once resumed, if hung)."""
        if m.hung:
            m.held.append((_ACTION, (functools.partial(m.node_lost, node),)))
            m.close_node_now(node)
        else:
            m.node_lost(node)

    # ------------------------------------------------------------------ member side

    def _start_process(self, m: SimMember) -> None:
        if m.permanently_down and m.up:
            return
        machine = (self.delivery.new_app(m) if self.delivery is not None
                   else member_machine(m.config, log_events=self.emit is not None))
        m.hung = m.slow = False
        m.held.clear()
        # Connected at once, unless the coordinator is down (start() then reconnects with back-off).
        timers = _HeapTimers(self, _MEMBER_TIMER, m.index)
        m.boot(machine, timers, connected=self.broker is not None)
        m.armed = timers.armed
        self.log_sim(events.ProcessStarted, member=m.name, incarnation=m.incarnation)
        self.invariants.dirty = True
        m.start()

    def stop_process(self, m: SimMember, clean: bool) -> None:
        if not m.up:
            return
        if clean:
            # close() sends LeaveGroup; a socket closed after writing still delivers what it wrote.
            m.close()
            m.closed_epoch = m.epoch
        self.invariants.on_member_gone(m)
        self.invariants.dirty = True
        m.stop()
        m.held.clear()
        m.hung = False

    def _member_outputs(self, m: SimMember, outputs: list) -> None:
        """m.apply(outputs) (MemberDriver.apply, consumer/driver.py), with what nearly every step
        outputs carried out here, inline: a timer armed or cancelled (_HeapTimers.apply), a request
        on the one connection (MemberDriver._send, _SimMemberShell.send), and the end of the step
        (_SimMemberShell.on_step). The same effects in the same order, three to five calls fewer
        per output; anything else goes to the driver's own handler, as m.apply would."""
        if self._through_drivers:
            m.apply(outputs)
            return
        machine = m.machine
        for out in outputs:
            kind = type(out)
            if kind is ArmTimer:
                self._arm_timer(_MEMBER_TIMER, m.index, m.armed, out)
            elif kind is CancelTimer:
                m.armed.pop(out.key, None)
            elif kind is Send and out.node is None:
                if m.connected:
                    self._transmit(m, _TO_BROKER, (m.index, m.epoch, out))
                else:
                    m.dropped_sends = True
            else:
                m.carry_out(out)
            if m.machine is not machine:
                break  # the process ended on this output (a crash it asked for): the rest never happened
        machine = m.machine
        if machine is not None and (machine.state is _FAILED or machine.state is _FATAL):
            self._member_failed(m)

    def _member_failed(self, m: SimMember) -> None:
        """A fatal error (e.g. FENCED_INSTANCE_ID for a zombie) ends the application, as it does a
        KafkaConsumer's owner."""
        assert m.machine is not None and m.machine.fatal_error is not None
        self.log_sim(events.ProcessExited, member=m.name, error=m.machine.fatal_error.name)
        self.stop_process(m, clean=False)
        m.permanently_down = True

    def _connection_lost(self, m: SimMember) -> None:
        """The socket closed under the member: it hears of it (once resumed, if hung) and reconnects."""
        m.lose_connection()
        if m.machine is not None and not m.hung:
            m.tell_disconnected()
        elif m.machine is not None:
            m.held.append((_ACTION, (m.tell_disconnected,)))
        m.reconnect_later()

    def reset_connection(self, m: SimMember, epoch: int) -> None:
        """A fault rule's `disconnect`: connection `epoch` closes under the member as the
        `disconnect` fault closes it. Not at once: the rule decides in the middle of a step (the
        member's send, the coordinator's reply), which must not be re-entered; the agenda runs it
        next, at the same virtual ms. A connection gone by then (the process stopped, or another
        reset) is left alone."""
        self.at(self.now, functools.partial(self._reset_if_open, m, epoch))

    def _reset_if_open(self, m: SimMember, epoch: int) -> None:
        if m.epoch == epoch and m.connected:
            self._connection_lost(m)

    def _resume(self, m: SimMember) -> None:
        m.hung = False
        self.invariants.dirty = True
        held, m.held = m.held, []
        for kind, payload in held:
            self.push(self.now, kind, *payload)

    # ------------------------------------------------------------------ faults

    def _schedule_faults(self) -> int:
        """Schedule every fault; returns when the last one ends (the network is clean from then on)."""
        s = self.scenario
        end = max([s.duration_ms] + [f.until_ms for f in s.faults if f.until_ms is not None])
        self.stats.quiet_at_ms = end
        for f in s.schedule:
            self.at(f.at_ms, functools.partial(self.inject, f))
            end = max(end, f.at_ms + f.duration_ms)
        hours = max(s.duration_ms - s.faults_from_ms, 0) / 3_600_000
        for kind in RANDOM_KINDS:
            rate = getattr(s.random, kind)
            if rate <= 0 or hours <= 0:
                continue
            count = _poisson(self.rng, rate * hours)
            for _ in range(count):
                at = self.rng.randint(s.faults_from_ms, s.duration_ms)
                duration = self.rng.randint(*s.random.duration_ms)
                self.at(at, functools.partial(self._inject_random, kind, duration))
                end = max(end, at + duration)
        self.stats.quiet_at_ms = end
        self.at(end, self._faults_over)
        return end

    def _faults_over(self) -> None:
        self.faults_on = False
        self.invariants.dirty = True
        self.stats.quiet_at_ms = self.now
        for m in self.members:
            if m.partitioned:
                m.partitioned = False
            if m.hung:
                self._resume(m)
            m.slow = False
        self.log_sim(events.FaultsOver)

    def _pick(self, spec: Any, want: Callable[[SimMember], bool]) -> list[SimMember]:
        candidates = [m for m in self.members if want(m)]
        if isinstance(spec, list):
            names = set(spec)
            return [m for m in candidates if m.name in names]
        count = min(int(spec), len(candidates))
        return self.rng.sample(candidates, count) if count else []

    def _inject_random(self, kind: str, duration_ms: int) -> None:
        self.inject(ScheduledFault(self.now, kind, 1, duration_ms))

    def inject(self, f: ScheduledFault) -> None:
        """Apply one fault now. Faults that find no suitable member are skipped (and not counted)."""
        kind = f.fault
        alive = lambda m: m.up and not m.permanently_down  # noqa: E731
        chosen: list[SimMember] = []
        if kind == "coordinator_restart":
            if self.broker is None:
                return
            self._crash_coordinator(max(f.duration_ms, 1))
        elif kind in BROKER_KINDS:
            if not self._broker_fault(f):
                return
        elif kind == "add_partitions":
            if self.broker is not None:
                # As an admin's CreatePartitions: durable (a TopicRecord), so a restart keeps it.
                total = self.broker.topics.partitions.get(f.topic, 0) + f.partitions
                self.admin_request("CreatePartitions", CreatePartitionsRequest([CreatePartitionsTopic(f.topic, total)]))
                self.invariants.on_topics_changed()
        elif kind == "join_burst":
            spec = self.scenario.members[0]
            for k in range(f.count or int(f.members)):
                chosen.append(self._add_member(spec, f"burst-{len(self.members)}", self.now))
        elif kind == "refresh_metadata":
            # As if every client were told at once; only a classic leader acts on it (grouplab compare).
            for m in self.members:
                if alive(m) and not m.hung and not m.partitioned:
                    m.refresh_metadata()
        elif kind == "leave_burst":
            chosen = self._pick(f.count or f.members, lambda m: alive(m) and not m.hung)
            for m in chosen:
                self.stop_process(m, clean=True)
                m.permanently_down = True
        else:
            static_only = kind in ("static_restart", "zombie")
            chosen = self._pick(f.members, lambda m: alive(m) and not m.hung and not m.partitioned
                                and (m.config.group_instance_id is not None or not static_only))
            for m in chosen:
                self._member_fault(m, kind, f.duration_ms)
        if kind in ("coordinator_restart", "add_partitions", "refresh_metadata") or kind in BROKER_KINDS or chosen:
            self.stats.faults[kind] = self.stats.faults.get(kind, 0) + 1
            self.log_sim(events.FaultInjected, fault=kind, members=[m.name for m in chosen], duration_ms=f.duration_ms,
                          topic=f.topic or None)

    def _member_fault(self, m: SimMember, kind: str, duration_ms: int) -> None:
        if kind == "crash":
            self.stop_process(m, clean=False)
            self.restart_later(m, duration_ms)
        elif kind == "leave":
            self.stop_process(m, clean=True)
            self.restart_later(m, duration_ms)
        elif kind == "hang":
            m.hung = True
            self.at(self.now + duration_ms, functools.partial(self._resume_if_hung, m))
        elif kind == "slow":
            m.slow = True
            self.at(self.now + duration_ms, lambda: self._end_slow(m))
        elif kind == "partition":
            m.partitioned = True
            self.at(self.now + duration_ms, lambda: setattr(m, "partitioned", False))
        elif kind == "disconnect":
            if m.connected:
                self._connection_lost(m)
        elif kind == "static_restart":
            self.stop_process(m, clean=False)
            self.restart_later(m, duration_ms or 1)
        elif kind == "zombie":
            self._start_zombie_replacement(m, duration_ms)
        elif kind in ("crash_before_commit", "crash_after_commit") and self.delivery is not None:
            self.delivery.arm_crash(m, "processed" if kind == "crash_before_commit" else "committed", duration_ms)

    def _resume_if_hung(self, m: SimMember) -> None:
        if m.hung:
            self._resume(m)

    def _end_for_good(self, m: SimMember) -> None:
        self.stop_process(m, clean=False)
        m.permanently_down = True

    def _end_slow(self, m: SimMember) -> None:
        m.slow = False
        m.poll()

    def restart_later(self, m: SimMember, duration_ms: int) -> None:
        if duration_ms > 0:
            self.at(self.now + duration_ms, lambda: self._start_process(m) if not m.up else None)
        else:
            m.permanently_down = True

    def _start_zombie_replacement(self, old: SimMember, duration_ms: int) -> None:
        """A new process with the same group.instance.id starts while the old one keeps running
        (a zombie). The coordinator fences the old member id; the old process dies later."""
        spec = next(s for s in self.scenario.members if s.static) if any(s.static for s in self.scenario.members) else None
        if spec is None:
            return
        new = self._new_member(f"{old.name}-new", old.config)
        old.zombie = True
        self._start_process(new)
        self.at(self.now + max(duration_ms, 1), functools.partial(self._end_for_good, old))

    # ------------------------------------------------------------------ bookkeeping

    def liveness_bound_ms(self) -> int:
        """How long after the last fault the group must be Stable again, from the timeouts: a lost
        JoinGroup answer (request timeout), a rebalance and its sync phase (2 x rebalance timeout),
        a dead member's session, the initial delay, the leader's metadata refresh, and 10 s."""
        if self.scenario.settle_ms is not None:
            return self.scenario.settle_ms
        configs = [m.config for m in self.members] or [self._consumer_config(self.scenario.members[0], "x", None)]
        max_poll = max(c.max_poll_interval_ms for c in configs)
        session = max(c.session_timeout_ms for c in configs)
        metadata = max(c.metadata_max_age_ms for c in configs)
        bound = (max_poll + JOIN_GRACE_MS) + 2 * max_poll + session + self.broker_config.group_initial_rebalance_delay_ms \
            + metadata + 10_000
        return bound + (self.delivery.drain_bound_ms() if self.delivery is not None else 0)

    def _conn_label(self, token: tuple[int, int, int]) -> tuple[str, int]:
        """A member's connection as the trace names it: `<member>#<connection epoch>`."""
        idx, epoch, correlation_id = token
        return f"{self.members[idx].name}#{epoch}", correlation_id

    def admin_request(self, api: str, body: Any, node: int = 0) -> None:
        if self.coordinator is not None:
            self.coordinator.handle(api, body, RequestContext(None, "simulator", "sim", node_id=node))

    def log_sim(self, event: Callable[Concatenate[str, int, events.Fields], events.SimulatorEvent], /,
                 *args: events.Fields.args, **fields: events.Fields.kwargs) -> None:
        """Note what the simulator did, in the trace and (with an event log) as a §4.6 event."""
        payload = event(self.scenario.group_id, self.seed, *args, **fields)
        self.trace.append((self.now, "simulator", payload.NAME, fields))
        if self.emit is not None:
            self.emit("simulator", LogEvent(self.now, payload))

    def live_members(self) -> list[SimMember]:
        return [m for m in self.members if m.up and not m.permanently_down]

    def all_partitions(self) -> set[TopicPartition]:
        topics = {t for m in self.members for t in m.config.topics}
        sizes = self.broker.topics.partitions if self.broker is not None else self.scenario.topics
        return {TopicPartition(t, p) for t in topics for p in range(sizes.get(t, 0))}

    def group_state(self) -> Any:
        broker = self.broker  # (read once: group_state runs after every event)
        return broker.groups.get(self.scenario.group_id) if broker is not None else None

    def consumer_group_state(self) -> ConsumerGroup | None:
        """The scenario's group if it is a consumer-protocol one (KIP-848), else None."""
        broker = self.broker
        return broker.consumer_groups.get(self.scenario.group_id) if broker is not None else None


@dataclass
class SimResult:
    scenario: str
    seed: int
    stats: SimStats
    violation: Violation | None
    trace: list[str]
    ended_ms: int

    @property
    def ok(self) -> bool:
        return self.violation is None


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's method; fine for the small means of fault counts."""
    if mean <= 0:
        return 0
    if mean > 50:
        return max(0, round(rng.gauss(mean, mean ** 0.5)))
    import math

    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


GROUP_STABLE = GroupState.STABLE
MEMBER_STABLE = MemberState.STABLE
