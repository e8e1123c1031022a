"""The driver kernel on its own (protocol/kernel.py, coordinator/driver.py, consumer/driver.py):
the reconnect back-off, exhaustive dispatch, Persist batching, a process that ends mid-step, the
timer table, the member-id generator, and the asyncio server turning a defect into an error reply.
(tests/pair.py, tests/test_golden_logs.py and the e2e tests run the drivers in their three worlds.)"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import struct
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from grouplab.consumer.coordinator import PartitionsAssigned, PartitionsLost, Reconnect, Send
from grouplab.consumer.delivery import Committed, CrashNow
from grouplab.consumer.driver import MemberDriver, ReconnectBackoff
from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.driver import CoordinatorDriver
from grouplab.coordinator.group_log import TopicRecord
from grouplab.coordinator.server import CoordinatorServer
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Persist, Reply
from grouplab.protocol.events import FreeFormEvent
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.framing import encode_request, read_response
from grouplab.protocol.kernel import ExtendingTimerTable, TimerTable, UnhandledOutput
from grouplab.protocol.messages import API, ListGroupsRequest, RequestHeader
from grouplab.protocol.types import TopicPartition

TP = TopicPartition("t", 0)


class VirtualTime:
    """A clock and a scheduler: `run_until(t)` runs what is due, in order."""

    def __init__(self) -> None:
        self.now = 0
        self.queue: list[tuple[int, int, list[Any]]] = []
        self._seq = itertools.count()
        self.delays: list[int] = []

    def clock(self) -> int:
        return self.now

    def schedule(self, delay_ms: int, action: Callable[[], None]) -> Any:
        self.delays.append(delay_ms)
        entry: list[Any] = [action]
        heapq.heappush(self.queue, (self.now + delay_ms, next(self._seq), entry))

        class Handle:
            def cancel(self) -> None:
                entry[0] = None

        return Handle()

    def run_until(self, until: int) -> None:
        while self.queue and self.queue[0][0] <= until:
            at, _, entry = heapq.heappop(self.queue)
            self.now = at
            if entry[0] is not None:
                entry[0]()
        self.now = until


@dataclass
class ScriptedMachine:
    """A member machine whose every input answers with the next scripted outputs."""

    member_id: str = "m-1"
    script: dict[str, list[list[Any]]] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)

    def _next(self, name: str) -> list[Any]:
        self.inputs.append(name)
        steps = self.script.get(name)
        return steps.pop(0) if steps else []

    def start(self, now_ms: int) -> list[Any]:
        return self._next("start")

    def poll(self, now_ms: int) -> list[Any]:
        return self._next("poll")

    def close(self, now_ms: int) -> list[Any]:
        return self._next("close")

    def on_disconnect(self, now_ms: int) -> list[Any]:
        return self._next("on_disconnect")

    def on_timer(self, key: tuple, now_ms: int) -> list[Any]:
        return self._next("on_timer")

    def on_response(self, correlation_id: int, body: Any, now_ms: int) -> list[Any]:
        return self._next("on_response")


class Shell:
    """Transport and listener: records everything; `reachable` decides connect attempts."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, Send]] = []
        self.calls: list[Any] = []
        self.reachable = True
        self.driver: MemberDriver[Any] | None = None
        self.stop_on: type | None = None

    def send(self, epoch: int, request: Send) -> None:
        self.sent.append((epoch, request))

    def disconnect(self) -> None:
        self.calls.append("disconnect")

    def connect(self, done: Callable[[bool], None]) -> None:
        self.calls.append("connect")
        done(self.reachable)

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("lost", partitions))

    def on_app_output(self, out: Any) -> None:
        self.calls.append(out)
        if self.stop_on is not None and type(out) is self.stop_on:
            assert self.driver is not None
            self.driver.stop()

    def on_step(self) -> None:
        self.calls.append("step")


def member(machine: ScriptedMachine, connected: bool = True) -> tuple[MemberDriver[Any], Shell, VirtualTime, list[LogEvent]]:
    time, shell, events = VirtualTime(), Shell(), list[LogEvent]()
    driver: MemberDriver[Any] = MemberDriver("g", time.clock, time.schedule, shell, shell, events.append)
    shell.driver = driver
    driver.boot(machine, TimerTable(time.schedule, time.clock, driver.on_timer), connected)
    return driver, shell, time, events


# ----------------------------------------------------------------------------- reconnect back-off


def test_reconnect_backoff_starts_at_50_ms_doubles_to_1_s_and_resets():
    backoff = ReconnectBackoff()
    waits = [backoff.delay_ms]
    for _ in range(6):
        backoff.failed()
        waits.append(backoff.delay_ms)
    assert waits == [50, 100, 200, 400, 800, 1000, 1000]
    backoff.reset()
    assert backoff.delay_ms == 50


def test_member_reconnects_with_backoff_while_the_coordinator_is_unreachable_and_rejoins_after_lost_sends():
    machine = ScriptedMachine(script={"on_disconnect": [[Send(2, "JoinGroup", "join")], []]})
    driver, shell, time, events = member(machine)
    shell.reachable = False
    driver.connection_lost()  # its JoinGroup finds no connection: lost
    assert not driver.connected and driver.dropped_sends and shell.sent == []
    time.run_until(749)  # attempts at 50, 150 and 350 ms fail, each wait twice the last
    assert shell.calls.count("connect") == 3 and not driver.connected
    shell.reachable = True
    time.run_until(750)
    assert time.delays == [50, 100, 200, 400]
    assert driver.connected and driver.reconnects == 1 and driver.backoff.delay_ms == 50
    assert [e.event for e in events] == ["coordinator_connected"]
    assert events[0].ts_ms == 750 and events[0].fields == {"group_id": "g", "member_id": "m-1"}
    # Reconnected, it is told of the lost request once more, so that it asks again.
    assert machine.inputs == ["on_disconnect", "on_disconnect"] and not driver.dropped_sends


def test_a_reconnect_output_drops_the_connection_and_reconnects_on_a_new_epoch():
    machine = ScriptedMachine(script={"on_timer": [[Reconnect("no answer"), Send(1, "Heartbeat", "hb")]]})
    driver, shell, time, _ = member(machine)
    epoch = driver.epoch
    driver.on_timer(("request",))
    assert shell.calls[0] == "disconnect" and shell.sent == [] and driver.dropped_sends
    time.run_until(50)
    assert driver.connected and driver.epoch == epoch + 2


def test_a_stopped_process_ignores_its_pending_reconnect():
    driver, shell, time, _ = member(ScriptedMachine())
    driver.connection_lost()
    driver.stop()
    time.run_until(1_000)
    assert "connect" not in shell.calls and not driver.connected


def test_a_member_that_starts_without_a_coordinator_reconnects_after_the_backoff():
    driver, shell, time, events = member(ScriptedMachine(script={"start": [[Send(1, "JoinGroup", "j")]]}), connected=False)
    driver.start()
    assert shell.sent == [] and driver.dropped_sends
    time.run_until(50)
    assert driver.connected and len(events) == 2  # logged at start, as the simulator always has


# ----------------------------------------------------------------------------- member dispatch


def test_member_driver_carries_out_each_output_kind():
    outputs = [Send(1, "Heartbeat", "hb"), ArmTimer(("heartbeat",), 3_000), LogEvent(0, FreeFormEvent("x", {})),
               PartitionsAssigned([TP]), PartitionsLost([TP]), Committed(TP, 5)]
    driver, shell, time, events = member(ScriptedMachine(script={"poll": [outputs]}))
    driver.poll()
    assert shell.sent == [(driver.epoch, outputs[0])]
    assert [e.event for e in events] == ["x"]
    assert shell.calls == [("assigned", [TP]), ("lost", [TP]), Committed(TP, 5), "step"]
    assert time.queue[0][0] == 3_000


def test_member_driver_fails_loudly_on_an_output_it_cannot_carry_out():
    driver, _, _, _ = member(ScriptedMachine(script={"poll": [[object()]]}))
    with pytest.raises(UnhandledOutput, match="member driver cannot carry out object"):
        driver.poll()


def test_a_process_that_ends_on_an_output_does_not_carry_out_the_rest_of_its_step():
    outputs = [CrashNow("processed"), Send(1, "OffsetCommit", "c"), CancelTimer(("x",))]
    driver, shell, _, _ = member(ScriptedMachine(script={"poll": [outputs]}))
    shell.stop_on = CrashNow
    driver.poll()
    assert shell.sent == [] and shell.calls == [CrashNow("processed"), "step"] and driver.machine is None
    driver.on_response(1, "late")  # inputs to a gone process are dropped
    assert shell.calls[-1] == "step"


# ----------------------------------------------------------------------------- coordinator dispatch


def coordinator_driver() -> tuple[CoordinatorDriver, list[Any], VirtualTime]:
    time, done = VirtualTime(), list[Any]()
    driver = CoordinatorDriver(Broker(), time.clock, TimerTable(time.schedule, time.clock, lambda key: None),
                               lambda out: done.append(("reply", out.to, out.body)),
                               lambda records: done.append(("persist", list(records))), done.append)
    return driver, done, time


def test_coordinator_driver_persists_consecutive_records_as_one_batch_before_what_follows():
    driver, done, time = coordinator_driver()
    a, b, c = TopicRecord("a", 1, 0), TopicRecord("b", 2, 0), TopicRecord("c", 3, 0)
    driver.apply([Persist(a), Persist(b), Reply("to", "ok"), Persist(c), ArmTimer(("join", "g"), 10),
                  LogEvent(0, FreeFormEvent("e", {}))])
    assert done == [("persist", [a, b]), ("reply", "to", "ok"), ("persist", [c]), LogEvent(0, FreeFormEvent("e", {}))]
    assert len(time.queue) == 1


def test_coordinator_driver_fails_loudly_on_an_output_it_cannot_carry_out():
    driver, done, _ = coordinator_driver()
    with pytest.raises(UnhandledOutput, match="coordinator driver cannot carry out Send"):
        driver.apply([Send(1, "JoinGroup", None)])


def test_coordinator_driver_runs_broker_steps_at_its_clock():
    driver, done, time = coordinator_driver()
    time.now = 1234
    driver.handle("ListGroups", ListGroupsRequest(), RequestContext("to"))
    assert [d[0] for d in done] == ["reply"] and done[0][2].error_code == 0


async def test_the_server_answers_unknown_server_error_when_a_step_has_an_output_it_cannot_carry_out(recorder):
    server = await CoordinatorServer(port=0, events=recorder.log("coordinator")).start()
    try:
        server.broker.handle = lambda api, body, ctx, now: [object()]  # type: ignore[method-assign]
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        header = RequestHeader("ListGroups", API["ListGroups"].max_version, 7, "test")
        writer.write(encode_request(header, ListGroupsRequest()))
        (size,) = struct.unpack(">I", await reader.readexactly(4))
        cid, body = read_response(await reader.readexactly(size))
        assert cid == 7 and body["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
        [ev] = recorder.events("internal_error")
        assert "UnhandledOutput" in ev.fields["error"]
        writer.close()
    finally:
        await server.stop()


# ----------------------------------------------------------------------------- timers and ids


def test_timer_table_rearming_replaces_and_cancelling_drops():
    time, fired = VirtualTime(), []
    timers = TimerTable(time.schedule, time.clock, fired.append)
    timers.apply(ArmTimer(("a",), 100))
    timers.apply(ArmTimer(("a",), 300))
    timers.apply(ArmTimer(("b",), 200))
    timers.apply(CancelTimer(("b",)))
    time.run_until(1_000)
    assert fired == [("a",)] and time.delays == [100, 300, 200]


def test_an_extending_timer_table_fires_each_key_when_a_timer_table_would():
    """The coordinator's table (a session pushed on at each heartbeat): a later deadline is noted,
    not scheduled again; an earlier one and a cancel act at once; each key fires at its last
    deadline, exactly as a TimerTable fires it."""
    script = [(0, ArmTimer(("s",), 100)), (40, ArmTimer(("s",), 140)), (90, ArmTimer(("s",), 190)),
              (0, ArmTimer(("e",), 500)), (10, ArmTimer(("e",), 600)), (20, ArmTimer(("e",), 250)),
              (0, ArmTimer(("c",), 300)), (50, ArmTimer(("c",), 400)), (60, CancelTimer(("c",))),
              (300, ArmTimer(("r",), 350)), (360, ArmTimer(("r",), 420))]
    seen = {}
    for table in (TimerTable, ExtendingTimerTable):
        time, fired = VirtualTime(), list[tuple[int, tuple]]()
        timers = table(time.schedule, time.clock, lambda key, time=time, fired=fired: fired.append((time.now, key)))
        for at, out in sorted(script, key=lambda step: step[0]):
            time.run_until(at)
            timers.apply(out)
        time.run_until(1_000)
        seen[table] = (fired, len(time.delays))
    assert seen[ExtendingTimerTable][0] == seen[TimerTable][0] == [(190, ("s",)), (250, ("e",)), (350, ("r",)), (420, ("r",))]
    assert seen[ExtendingTimerTable][1] < seen[TimerTable][1]  # fewer entries on the schedule


def test_sequential_member_ids_keep_the_simulators_and_the_tests_forms():
    sim, tests = SequentialMemberIds(digits=6), SequentialMemberIds()
    assert [sim("client"), sim("other")] == ["client-000001", "other-000002"]
    assert [tests("c0"), tests("c1")] == ["c0-1", "c1-2"]
