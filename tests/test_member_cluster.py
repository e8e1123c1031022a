"""Members in a cluster of brokers (issue 24): the pure machines find their coordinator with
FindCoordinator and follow it on NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and a closed
connection (step by step, exact outputs); the member driver's connection per broker; and the
simulator's coordinator-failover and broker-rolling-restart scenarios over seeds, under the classic
protocol (eager and cooperative) and the consumer protocol, with a byte-identical replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import ConsumerCoordinator
from grouplab.consumer.driver import MemberDriver
from grouplab.consumer.member import FIND_COORDINATOR_TIMER, Reconnect, Send
from grouplab.consumer.membership import ConsumerMembership
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    ConsumerGroupHeartbeatResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
)
from grouplab.protocol.states import MemberState, MembershipState
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import Scenario, ScenarioError, load_scenario, parse_scenario, resolve_scenario
from grouplab.protocol.kernel import TimerTable

NODES = (0, 1, 2)


def config(**overrides: Any) -> ConsumerConfig:
    values: dict[str, Any] = dict(group_id="g", topics=["t0"], client_id="c", session_timeout_ms=10_000,
                                  heartbeat_interval_ms=1_000, max_poll_interval_ms=20_000, bootstrap_nodes=NODES)
    values.update(overrides)
    return ConsumerConfig(**values)


def sends(out: list[Any]) -> list[Send]:
    return [o for o in out if isinstance(o, Send)]


def logged(out: list[Any]) -> list[str]:
    return [o.payload.NAME for o in out if isinstance(o, LogEvent)]


def found(node: int) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(0, node, "127.0.0.1", 9000 + node)


def stable_classic(now: int = 0) -> ConsumerCoordinator:
    """A classic member that found node 2, joined generation 1 and synced nothing (enough to be STABLE)."""
    from grouplab.protocol.messages import SyncGroupResponse
    from grouplab.protocol.consumer_protocol import encode_assignment
    from grouplab.protocol.types import Assignment

    m = ConsumerCoordinator(config())
    out = m.start(now)
    lookup = sends(out)[0]
    out = m.on_response(lookup.correlation_id, found(2), now + 1)
    join = sends(out)[0]
    out = m.on_response(join.correlation_id, JoinGroupResponse(0, 1, "range", "leader", "c-1", []), now + 2)
    sync = sends(out)[0]
    m.on_response(sync.correlation_id, SyncGroupResponse(0, assignment=encode_assignment(Assignment([]))), now + 3)
    assert m.state is MemberState.STABLE and m.coordinator_node == 2
    return m


# ----------------------------------------------------------------------------- classic, step by step


def test_a_cluster_member_finds_its_coordinator_before_joining() -> None:
    m = ConsumerCoordinator(config())
    out = m.start(0)
    assert sends(out) == [Send(1, "FindCoordinator", FindCoordinatorRequest("g", 0), 0)]
    assert ArmTimer(FIND_COORDINATOR_TIMER, 30_000) in out
    assert m.state is MemberState.JOINING and m.coordinator_node is None
    out = m.on_response(1, found(2), 7)
    assert [(s.api, s.node) for s in sends(out)] == [("JoinGroup", 2)]
    assert logged(out) == ["coordinator_found", "join_sent"]
    assert next(o.payload for o in out if isinstance(o, LogEvent)).took_ms == 7  # type: ignore[union-attr]


def test_one_broker_sends_no_find_coordinator_and_names_no_node() -> None:
    m = ConsumerCoordinator(config(bootstrap_nodes=()))
    out = m.start(0)
    assert [(s.api, s.node) for s in sends(out)] == [("JoinGroup", None)]


def test_a_failed_lookup_asks_the_next_broker_after_the_backoff() -> None:
    m = ConsumerCoordinator(config())
    m.start(0)
    out = m.on_response(1, FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE.value), 5)
    assert sends(out) == [] and out[-1] == ArmTimer(FIND_COORDINATOR_TIMER, 105)
    out = m.on_timer(FIND_COORDINATOR_TIMER, 105)
    assert [(s.api, s.node) for s in sends(out)] == [("FindCoordinator", 1)]


def test_not_coordinator_on_join_finds_the_coordinator_again_and_joins_there() -> None:
    m = ConsumerCoordinator(config())
    m.start(0)
    m.on_response(1, found(2), 1)
    out = m.on_response(2, JoinGroupResponse(ErrorCode.NOT_COORDINATOR.value), 2)
    assert logged(out) == ["group_error", "coordinator_unknown"]
    assert [(s.api, s.node) for s in sends(out)] == [("FindCoordinator", 1)]
    assert m.state is MemberState.JOINING and m.coordinator_node is None
    out = m.on_response(3, found(0), 4)
    assert [(s.api, s.node) for s in sends(out)] == [("JoinGroup", 0)]
    assert isinstance(sends(out)[0].body, JoinGroupRequest)


def test_load_in_progress_on_join_retries_at_the_same_broker_after_the_backoff() -> None:
    m = ConsumerCoordinator(config())
    m.start(0)
    m.on_response(1, found(2), 1)
    out = m.on_response(2, JoinGroupResponse(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.value), 2)
    assert sends(out) == [] and ArmTimer(("rejoin",), 102) in out and m.coordinator_node == 2
    out = m.on_timer(("rejoin",), 102)
    assert [(s.api, s.node) for s in sends(out)] == [("JoinGroup", 2)]


def test_a_stable_member_keeps_its_generation_when_the_coordinator_connection_drops() -> None:
    m = stable_classic()
    out = m.on_disconnect(100, node=2)
    assert logged(out) == ["coordinator_unknown", "coordinator_disconnected"]
    lookup = sends(out)[0]
    assert (lookup.api, lookup.node) == ("FindCoordinator", 1)
    assert m.state is MemberState.STABLE and m.generation_id == 1
    out = m.on_timer(("heartbeat",), 1_003)  # the heartbeat waits for the coordinator
    assert sends(out) == []
    out = m.on_response(lookup.correlation_id, found(0), 1_010)
    assert logged(out) == ["coordinator_found"] and sends(out) == []
    out = m.on_timer(("heartbeat",), 2_003)
    assert [(s.api, s.node) for s in sends(out)] == [("Heartbeat", 0)]


def test_not_coordinator_on_a_heartbeat_keeps_the_member_stable() -> None:
    m = stable_classic()
    out = m.on_timer(("heartbeat",), 1_003)
    hb = sends(out)[0]
    out = m.on_response(hb.correlation_id, HeartbeatResponse(ErrorCode.NOT_COORDINATOR.value), 1_010)
    assert "coordinator_unknown" in logged(out) and m.state is MemberState.STABLE and m.generation_id == 1
    assert [(s.api, s.node) for s in sends(out)] == [("FindCoordinator", 1)]


def test_a_dropped_lookup_connection_asks_again() -> None:
    m = ConsumerCoordinator(config())
    m.start(0)
    out = m.on_disconnect(3, node=0)
    assert out == [ArmTimer(FIND_COORDINATOR_TIMER, 103)]
    out = m.on_timer(FIND_COORDINATOR_TIMER, 103)
    assert [(s.api, s.node) for s in sends(out)] == [("FindCoordinator", 1)]


def test_a_session_without_answers_marks_the_coordinator_unknown_and_drops_its_connection() -> None:
    m = stable_classic()
    out = m.on_timer(("heartbeat",), 20_000)
    assert Reconnect("no heartbeat answer within session.timeout.ms", 2) in out
    assert "coordinator_unknown" in logged(out) and m.coordinator_node is None


# ----------------------------------------------------------------------------- KIP-848, step by step


def test_a_consumer_protocol_member_heartbeats_at_the_coordinator_it_found() -> None:
    m = ConsumerMembership(config(group_protocol="consumer", session_timeout_ms=45_000, heartbeat_interval_ms=3_000))
    out = m.start(0)
    assert [(s.api, s.node) for s in sends(out)] == [("FindCoordinator", 0)]
    out = m.on_response(1, found(1), 2)
    assert [(s.api, s.node) for s in sends(out)] == [("ConsumerGroupHeartbeat", 1)]
    out = m.on_response(2, ConsumerGroupHeartbeatResponse(ErrorCode.NOT_COORDINATOR.value), 4)
    assert "coordinator_unknown" in logged(out)
    assert [(s.api, s.node) for s in sends(out)] == [("FindCoordinator", 1)]
    out = m.on_response(3, found(2), 6)
    assert [(s.api, s.node) for s in sends(out)] == [("ConsumerGroupHeartbeat", 2)]
    assert m.state is MembershipState.JOINING


def test_a_consumer_protocol_member_retries_a_loading_coordinator_after_the_backoff() -> None:
    m = ConsumerMembership(config(group_protocol="consumer", session_timeout_ms=45_000, heartbeat_interval_ms=3_000))
    m.start(0)
    m.on_response(1, found(1), 2)
    out = m.on_response(2, ConsumerGroupHeartbeatResponse(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.value), 4)
    assert sends(out) == [] and ArmTimer(("heartbeat",), 104) in out and m.coordinator_node == 1
    out = m.on_timer(("heartbeat",), 104)
    assert [(s.api, s.node) for s in sends(out)] == [("ConsumerGroupHeartbeat", 1)]


# ----------------------------------------------------------------------------- the member driver


class _Transport:
    def __init__(self, live: set[int]) -> None:
        self.live = live
        self.sent: list[tuple[int, str, int | None]] = []
        self.connects: list[int | None] = []

    def send(self, epoch: int, request: Send) -> None:
        self.sent.append((epoch, request.api, request.node))

    def disconnect(self) -> None:
        pass

    def close_node(self, node: int) -> None:
        pass

    def connect(self, done: Callable[[bool], None], node: int | None = None) -> None:
        self.connects.append(node)
        done(node is None or node in self.live)

    def on_partitions_revoked(self, partitions: Any) -> None: ...
    def on_partitions_assigned(self, partitions: Any) -> None: ...
    def on_partitions_lost(self, partitions: Any) -> None: ...
    def on_app_output(self, out: Any) -> None: ...
    def on_step(self) -> None: ...


def _driver(live: set[int]) -> tuple[MemberDriver[Any], _Transport, list[Any], list[int]]:
    now = [0]
    queue: list[Any] = []
    transport = _Transport(live)
    schedule = lambda delay, action: queue.append((now[0] + delay, action))  # noqa: E731
    driver = MemberDriver[Any]("g", lambda: now[0], schedule, transport, transport, None)
    machine = ConsumerCoordinator(config())
    driver.boot(machine, TimerTable(schedule, lambda: now[0], driver.on_timer), connected=False)
    return driver, transport, queue, now


def test_the_driver_opens_one_connection_per_broker_each_with_its_epoch() -> None:
    driver, transport, queue, _ = _driver({0, 1, 2})
    driver.machine.start(0)  # (the machine's outputs go through apply below)
    driver.apply([Send(1, "FindCoordinator", None, 0), Send(2, "JoinGroup", None, 2), Send(3, "Heartbeat", None, 2)])
    assert transport.connects == [0, 2]
    (e0, _, n0), (e2, _, n2), (e2b, _, _) = transport.sent
    assert (n0, n2) == (0, 2) and e0 != e2 and e2 == e2b
    assert driver.is_open(e2, 2) and driver.epoch_open(e0) and not driver.is_open(e0, 2)


def test_a_broker_that_cannot_be_reached_is_told_to_the_machine_and_backed_off() -> None:
    driver, transport, queue, now = _driver({1})
    told: list[int | None] = []
    machine = driver.machine
    original = machine.on_disconnect
    machine.on_disconnect = lambda now_ms, node=None: told.append(node) or original(now_ms, node)  # type: ignore[method-assign]
    driver.apply([Send(1, "FindCoordinator", None, 0)])
    assert transport.sent == [] and told == []  # told on the next turn, not inside the step
    for _, action in list(queue):
        action()
    assert told == [0]
    conn = driver.nodes[0]
    assert conn.ready_at == 50 and not conn.connected
    driver.apply([Send(2, "FindCoordinator", None, 0)])
    assert transport.connects == [0]  # the next attempt waits for the back-off
    queue.clear()


def test_a_closed_broker_connection_reaches_the_machine_once() -> None:
    driver, transport, queue, _ = _driver({0, 1, 2})
    driver.apply([Send(1, "FindCoordinator", None, 2)])
    epoch = transport.sent[0][0]
    driver.node_lost(2)
    assert not driver.epoch_open(epoch)
    driver.node_lost(2)  # already closed: nothing more


# ----------------------------------------------------------------------------- the simulator


def _kip848(scenario: Scenario) -> Scenario:
    return scenario.with_group_protocol("consumer")


VARIANTS: dict[str, Callable[[Scenario], Scenario]] = {
    "eager": lambda s: s,
    "cooperative": lambda s: s.with_assignors(["cooperative-sticky"]),
    "consumer": _kip848,
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", ["coordinator-failover", "broker-rolling-restart"])
def test_the_cluster_scenarios_hold_every_invariant_over_seeds(name: str, variant: str) -> None:
    scenario = VARIANTS[variant](load_scenario(resolve_scenario(name)))
    assert scenario.brokers == 3
    failures = [f"seed {seed}: {r.violation}" for seed in range(1, 51) if not (r := run_seed(scenario, seed)).ok]
    assert failures == []


def test_a_failover_moves_the_coordinator_and_the_members_follow_it(tmp_path: Path) -> None:
    run_seed(load_scenario(resolve_scenario("coordinator-failover")), 1, tmp_path)
    coordinator = (tmp_path / "coordinator.jsonl").read_text()
    assert '"coordinator_moved"' in coordinator and '"coordinator_loaded"' in coordinator
    member = (tmp_path / "m-0.jsonl").read_text()
    assert member.count('"coordinator_found"') >= 3 and '"coordinator_unknown"' in member


def test_a_cluster_seed_replays_byte_identically(tmp_path: Path) -> None:
    scenario = load_scenario(resolve_scenario("coordinator-failover"))
    a, b = tmp_path / "a", tmp_path / "b"
    run_seed(scenario, 7, a)
    run_seed(scenario, 7, b)
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    assert "coordinator.jsonl" in files
    for name in files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize("extra, message", [
    ('brokers = 1\n[[schedule]]\nat_ms = 1\nfault = "kill_broker"\n', "needs brokers >= 2"),
    ('brokers = 3\n[[schedule]]\nat_ms = 1\nfault = "kill_broker"\nnode = 3\n', "node must be a broker id"),
    ('brokers = 3\n[[schedule]]\nat_ms = 1\nfault = "coordinator_restart"\n', "one-broker fault"),
    ('brokers = 0\n', "brokers must be an integer >= 1"),
])
def test_broker_faults_are_checked_when_loaded(extra: str, message: str) -> None:
    import tomllib

    with pytest.raises(ScenarioError, match=message):
        parse_scenario(tomllib.loads('name = "x"\n' + extra))


def test_events_are_member_events() -> None:
    assert issubclass(events.CoordinatorFound, events.MemberEvent)
    assert issubclass(events.CoordinatorUnknown, events.MemberEvent)
    assert CancelTimer is not None
