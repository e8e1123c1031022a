"""The consumer-protocol member machine (consumer/membership.py, KIP-848), step by step: every
input's exact outputs, then the machine run against the pure Broker (tests/pair.py), and a
hypothesis property: it never owns a partition the coordinator's last assignment did not give it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.consumer.config import ConsumerConfig, ConsumerConfigError
from grouplab.consumer.member import PartitionsAssigned, PartitionsLost, PartitionsRevoked, Reconnect, Send
from grouplab.consumer.membership import ConsumerMembership, member_machine
from grouplab.consumer.coordinator import ConsumerCoordinator
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions as TP,
)
from grouplab.protocol.states import ConsumerGroupState, GroupEpochCause, MembershipState
from grouplab.protocol.types import TopicPartition
from grouplab.teach.catalog import Catalog

from pair import Pair, consumer_config

S = MembershipState


def config(**overrides: Any) -> ConsumerConfig:
    values: dict[str, Any] = dict(group_id="g", topics=["b", "a"], client_id="c1", group_protocol="consumer",
                                  max_poll_interval_ms=20_000, retry_backoff_ms=100, request_timeout_ms=30_000)
    values.update(overrides)
    return ConsumerConfig(**values)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def sends(out: list[Any]) -> list[Send]:
    return [o for o in out if isinstance(o, Send)]


def logged(out: list[Any]) -> list[str]:
    return [o.event for o in out if isinstance(o, LogEvent)]


def effects(out: list[Any]) -> list[Any]:
    """Everything but the log lines."""
    return [o for o in out if not isinstance(o, LogEvent)]


def answer(epoch: int, assignment: dict[str, list[int]] | None = None, member_id: str = "m1",
           interval: int = 5_000, error: ErrorCode = ErrorCode.NONE) -> ConsumerGroupHeartbeatResponse:
    if error is not ErrorCode.NONE:
        return ConsumerGroupHeartbeatResponse(error_code=error.value, error_message=f"{error.name} said so")
    return ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=interval,
                                          assignment=assignment)


def joined(m: ConsumerMembership, epoch: int = 1, assignment: dict[str, list[int]] | None = None) -> int:
    """Start `m`, answer its join with `assignment` at `epoch`, and its acknowledgement: it is
    STABLE at 1_000. Returns the correlation id of the next request."""
    out = m.start(0)
    m.on_response(sends(out)[0].correlation_id, answer(epoch, assignment or {}), 10)
    ack = m._heartbeat_cid
    assert ack is not None
    m.on_response(ack, answer(epoch), 20)
    assert m.state is S.STABLE
    return m._next_cid + 1


# ---------------------------------------------------------------------------- joining


def test_start_sends_a_full_join_at_epoch_0_and_arms_its_timers() -> None:
    m = ConsumerMembership(config(group_remote_assignor="range"))
    out = m.start(1_000)
    assert effects(out) == [
        ArmTimer(("poll",), 21_000),
        Send(1, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(
            "g", "", 0, instance_id=None, rebalance_timeout_ms=20_000, subscribed_topic_names=["a", "b"],
            server_assignor="range", topic_partitions=[])),
        ArmTimer(("request",), 31_000),
        ArmTimer(("heartbeat",), 1_000 + m.config.heartbeat_interval_ms),
    ]
    assert logged(out) == ["consumer_join_sent"]
    assert (m.state, m.member_epoch, m.owned) == (S.JOINING, 0, [])


def test_the_join_answer_assigns_then_the_member_acknowledges_at_once_and_is_stable_on_the_answer() -> None:
    m = ConsumerMembership(config())
    m.start(0)
    out = m.on_response(1, answer(3, {"a": [1, 0]}, interval=2_000), 10)
    assert effects(out) == [
        CancelTimer(("request",)),
        ArmTimer(("heartbeat",), 2_000),  # the coordinator's interval, from when the join went
        PartitionsAssigned([tp("a", 0), tp("a", 1)]),
        Send(2, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(
            "g", "m1", 3, topic_partitions=[TP("a", [0, 1])])),  # only what changed: the owned partitions
        ArmTimer(("request",), 30_010),
        ArmTimer(("heartbeat",), 2_010),
    ]
    assert logged(out) == ["assignment_received", "partitions_assigned"]
    assert (m.state, m.member_id, m.member_epoch, m.owned, m.generation_id) == (S.ACKNOWLEDGING, "m1", 3,
                                                                               [tp("a", 0), tp("a", 1)], 3)
    out = m.on_response(2, answer(3, interval=2_000), 20)
    assert effects(out) == [CancelTimer(("request",))]
    assert logged(out) == ["assignment_acknowledged"]
    assert m.state is S.STABLE


def test_a_regular_heartbeat_carries_only_group_member_epoch_and_instance() -> None:
    m = ConsumerMembership(config(group_instance_id="i1"))
    joined(m, 1, {"a": [0]})
    out = m.on_timer(("heartbeat",), 5_000)
    assert sends(out)[0].body == ConsumerGroupHeartbeatRequest("g", "m1", 1, instance_id="i1")


def test_a_heartbeat_due_while_one_is_in_flight_goes_when_it_is_answered() -> None:
    m = ConsumerMembership(config())
    joined(m, 1)
    first = sends(m.on_timer(("heartbeat",), 5_000))[0]
    assert sends(m.on_timer(("heartbeat",), 10_000)) == []
    out = m.on_response(first.correlation_id, answer(1), 10_500)
    assert [s.body.member_epoch for s in sends(out)] == [1]


# ---------------------------------------------------------------------------- reconciliation


def test_a_new_assignment_revokes_first_then_assigns_and_acknowledges() -> None:
    m = ConsumerMembership(config())
    joined(m, 1, {"a": [0, 1]})
    hb = sends(m.on_timer(("heartbeat",), 5_000))[0]
    out = m.on_response(hb.correlation_id, answer(2, {"a": [1], "b": [0]}), 5_010)
    listener = [o for o in out if isinstance(o, (PartitionsRevoked, PartitionsAssigned))]
    assert listener == [PartitionsRevoked([tp("a", 0)]), PartitionsAssigned([tp("b", 0)])]
    assert logged(out) == ["assignment_received", "partitions_revoked", "partitions_assigned"]
    assert sends(out)[0].body.topic_partitions == [TP("a", [1]), TP("b", [0])]
    assert (m.state, m.member_epoch, m.owned) == (S.ACKNOWLEDGING, 2, [tp("a", 1), tp("b", 0)])


def test_revoke_first_keeps_the_epoch_and_the_acknowledgement_reports_what_is_left() -> None:
    """The coordinator's answer leaves out what must go first and keeps the epoch: the member revokes
    and says so; the next answer moves it on."""
    m = ConsumerMembership(config())
    joined(m, 1, {"a": [0, 1, 2]})
    hb = sends(m.on_timer(("heartbeat",), 5_000))[0]
    out = m.on_response(hb.correlation_id, answer(1, {"a": [0]}), 5_010)
    assert [o for o in out if isinstance(o, PartitionsRevoked)] == [PartitionsRevoked([tp("a", 1), tp("a", 2)])]
    assert not [o for o in out if isinstance(o, PartitionsAssigned)]  # nothing added: no assign call
    ack = sends(out)[0]
    assert ack.body == ConsumerGroupHeartbeatRequest("g", "m1", 1, topic_partitions=[TP("a", [0])])
    out = m.on_response(ack.correlation_id, answer(2, {"a": [0]}), 5_020)
    assert [o for o in out if isinstance(o, (PartitionsRevoked, PartitionsAssigned))] == []
    # The epoch moved with the same partitions: reported once more, then stable.
    ack2 = sends(out)[0]
    assert ack2.body.topic_partitions == [TP("a", [0])]
    m.on_response(ack2.correlation_id, answer(2), 5_030)
    assert (m.state, m.member_epoch, m.owned) == (S.STABLE, 2, [tp("a", 0)])


def test_an_answer_without_assignment_moves_the_epoch_only() -> None:
    m = ConsumerMembership(config())
    joined(m, 1, {"a": [0]})
    hb = sends(m.on_timer(("heartbeat",), 5_000))[0]
    out = m.on_response(hb.correlation_id, answer(4), 5_010)
    assert effects(out) == [CancelTimer(("request",))]
    assert (m.state, m.member_epoch, m.owned) == (S.STABLE, 4, [tp("a", 0)])


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("error", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fenced_loses_its_partitions_and_rejoins_at_epoch_0_at_once_with_its_id(error: ErrorCode) -> None:
    m = ConsumerMembership(config())
    joined(m, 1, {"a": [0, 1]})
    hb = sends(m.on_timer(("heartbeat",), 5_000))[0]
    out = m.on_response(hb.correlation_id, answer(0, error=error), 5_010)
    assert [o for o in out if isinstance(o, (PartitionsLost, PartitionsRevoked))] == [PartitionsLost([tp("a", 0), tp("a", 1)])]
    assert logged(out) == ["member_fenced", "partitions_lost", "consumer_join_sent"]
    assert sends(out)[0].body == ConsumerGroupHeartbeatRequest(
        "g", "m1", 0, rebalance_timeout_ms=20_000, subscribed_topic_names=["a", "b"], topic_partitions=[])
    assert (m.state, m.member_epoch, m.owned) == (S.JOINING, 0, [])


@pytest.mark.parametrize("error", [ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.FENCED_INSTANCE_ID,
                                   ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.UNSUPPORTED_ASSIGNOR,
                                   ErrorCode.INVALID_REQUEST, ErrorCode.GROUP_ID_NOT_FOUND])
def test_fatal_errors_stop_the_member_with_its_partitions_lost(error: ErrorCode) -> None:
    m = ConsumerMembership(config())
    joined(m, 1, {"a": [0]})
    hb = sends(m.on_timer(("heartbeat",), 5_000))[0]
    out = m.on_response(hb.correlation_id, answer(0, error=error), 5_010)
    assert effects(out) == [CancelTimer(("request",)), PartitionsLost([tp("a", 0)]), CancelTimer(("heartbeat",)),
                            CancelTimer(("poll",)), CancelTimer(("request",))]
    assert logged(out) == ["group_error", "partitions_lost", "fatal_error"]
    assert (m.state, m.fatal_error) == (S.FATAL, error)
    assert m.on_timer(("heartbeat",), 10_000) == [] and m.poll(10_000) == []


@pytest.mark.parametrize("error", [ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                   ErrorCode.COORDINATOR_LOAD_IN_PROGRESS])
def test_retriable_errors_ask_again_after_the_backoff_with_everything(error: ErrorCode) -> None:
    m = ConsumerMembership(config())
    joined(m, 1, {"a": [0]})
    hb = sends(m.on_timer(("heartbeat",), 5_000))[0]
    out = m.on_response(hb.correlation_id, answer(0, error=error), 5_010)
    assert effects(out) == [CancelTimer(("request",)), ArmTimer(("heartbeat",), 5_110)]
    assert (m.state, m.owned) == (S.STABLE, [tp("a", 0)])
    again = sends(m.on_timer(("heartbeat",), 5_110))[0]
    assert again.body == ConsumerGroupHeartbeatRequest("g", "m1", 1, rebalance_timeout_ms=20_000,
                                                       subscribed_topic_names=["a", "b"], topic_partitions=[TP("a", [0])])


def test_a_coordinator_still_loading_is_asked_again_with_exponential_backoff_until_it_answers() -> None:
    """Kafka's HeartbeatRequestState (KIP-580): 100, 200, 400, 800, then retry.backoff.max.ms; an
    answer starts the backoff over."""
    m = ConsumerMembership(config())
    joined(m, 1, {"a": [0]})
    now, waits = 5_000, []
    hb = sends(m.on_timer(("heartbeat",), now))[0]
    for _ in range(6):
        out = m.on_response(hb.correlation_id, answer(0, error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), now)
        (arm,) = [e for e in effects(out) if isinstance(e, ArmTimer)]
        waits.append(arm.deadline_ms - now)
        now = arm.deadline_ms
        hb = sends(m.on_timer(("heartbeat",), now))[0]
    assert waits == [100, 200, 400, 800, 1_000, 1_000]
    m.on_response(hb.correlation_id, answer(1), now)
    hb = sends(m.on_timer(("heartbeat",), now + 5_000))[0]
    out = m.on_response(hb.correlation_id, answer(0, error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), now + 5_000)
    assert [e for e in effects(out) if isinstance(e, ArmTimer)] == [ArmTimer(("heartbeat",), now + 5_100)]


def test_a_lost_connection_keeps_the_partitions_and_heartbeats_in_full_after_the_backoff() -> None:
    m = ConsumerMembership(config())
    joined(m, 1, {"a": [0]})
    sends(m.on_timer(("heartbeat",), 5_000))
    out = m.on_disconnect(5_005)
    assert effects(out) == [CancelTimer(("request",)), ArmTimer(("heartbeat",), 5_105)]
    assert m.owned == [tp("a", 0)]
    body = sends(m.on_timer(("heartbeat",), 5_105))[0].body
    assert body.topic_partitions == [TP("a", [0])] and body.subscribed_topic_names == ["a", "b"]


def test_an_unanswered_heartbeat_is_given_up_after_request_timeout() -> None:
    m = ConsumerMembership(config(request_timeout_ms=3_000))
    joined(m, 1, {"a": [0]})
    hb = sends(m.on_timer(("heartbeat",), 5_000))[0]
    out = m.on_timer(("request",), 8_000)
    assert effects(out) == [Reconnect("no ConsumerGroupHeartbeat answer within request.timeout.ms"),
                            ArmTimer(("heartbeat",), 8_100)]
    assert m.on_response(hb.correlation_id, answer(1), 8_050) == []  # too late: forgotten


# ---------------------------------------------------------------------------- leaving


def test_close_revokes_then_leaves_with_epoch_minus_1() -> None:
    m = ConsumerMembership(config())
    joined(m, 2, {"a": [0]})
    out = m.close(9_000)
    assert effects(out)[:2] == [PartitionsRevoked([tp("a", 0)]),
                                Send(m._next_cid, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest("g", "m1", -1))]
    assert logged(out) == ["partitions_revoked", "consumer_leave_sent"]
    assert (m.state, m.member_epoch) == (S.CLOSED, -1)
    assert m.close(9_500) == []


def test_a_static_member_leaves_with_epoch_minus_2() -> None:
    m = ConsumerMembership(config(group_instance_id="i1"))
    joined(m, 2, {"a": [0]})
    body = sends(m.close(9_000))[0].body
    assert body == ConsumerGroupHeartbeatRequest("g", "m1", -2, instance_id="i1")


def test_poll_timeout_loses_leaves_and_rejoins_on_the_next_poll() -> None:
    m = ConsumerMembership(config())
    joined(m, 2, {"a": [0]})
    m.on_timer(("heartbeat",), 5_000)
    out = m.on_timer(("poll",), 20_000)
    assert [o for o in out if isinstance(o, (PartitionsLost, PartitionsRevoked))] == [PartitionsLost([tp("a", 0)])]
    assert [s.body for s in sends(out)] == [ConsumerGroupHeartbeatRequest("g", "m1", -1)]
    assert logged(out) == ["poll_timeout", "partitions_lost", "consumer_leave_sent"]
    assert (m.state, m.member_epoch) == (S.STALE, 0)
    assert m.on_timer(("heartbeat",), 25_000) == []
    out = m.poll(30_000)
    assert sends(out)[0].body == ConsumerGroupHeartbeatRequest(
        "g", "m1", 0, rebalance_timeout_ms=20_000, subscribed_topic_names=["a", "b"], topic_partitions=[])
    assert m.state is S.JOINING


def test_a_poll_in_time_only_moves_the_poll_deadline() -> None:
    m = ConsumerMembership(config())
    joined(m, 1)
    m.poll(15_000)
    assert effects(m.on_timer(("poll",), 20_000)) == [ArmTimer(("poll",), 35_000)]


# ---------------------------------------------------------------------------- config


def test_group_protocol_picks_the_machine_and_classic_settings_are_refused_under_consumer() -> None:
    assert isinstance(member_machine(config()), ConsumerMembership)
    assert isinstance(member_machine(config(group_protocol="classic")), ConsumerCoordinator)
    base = ConsumerConfig("g", ["t"])
    assert base.with_overrides(["group.protocol=consumer", "group.remote.assignor=uniform"]).group_remote_assignor == "uniform"
    for pairs, words in ((["group.protocol=consumer", "session.timeout.ms=45000"], "session.timeout.ms"),
                         (["group.protocol=consumer", "partition.assignment.strategy=range"], "partition.assignment"),
                         (["group.protocol=consumer", "heartbeat.interval.ms=3000"], "heartbeat.interval.ms"),
                         (["group.remote.assignor=range"], "group.remote.assignor"),
                         (["group.protocol=eager"], "group.protocol")):
        with pytest.raises(ConsumerConfigError, match=words):
            base.with_overrides(pairs)


# ---------------------------------------------------------------------------- against the coordinator


def _cp(i: int, **overrides: Any) -> ConsumerConfig:
    return consumer_config(i, group_protocol="consumer", session_timeout_ms=45_000, heartbeat_interval_ms=3_000, **overrides)


def _no_partition_twice(pair: Pair) -> None:
    live = [m for m in pair.members if m.state in (S.JOINING, S.ACKNOWLEDGING, S.STABLE)]
    owned = [t for m in live for t in m.owned]
    assert len(owned) == len(set(owned)), f"t={pair.now}: a partition owned twice: {[m.owned for m in live]}"


def _converged(pair: Pair, idx: list[int]) -> bool:
    group = pair.broker.consumer_groups.get("g")
    ms = [pair.members[i] for i in idx]
    owned = sorted(t for m in ms for t in m.owned)
    return (group is not None and group.state is ConsumerGroupState.STABLE
            and all(m.state is S.STABLE and m.member_epoch == group.assignment_epoch for m in ms)
            and owned == sorted(pair.all_partitions()))


def test_against_the_broker_a_group_forms_a_fourth_takes_only_released_partitions_and_one_leaves() -> None:
    pair = Pair([_cp(i) for i in range(4)], {"t0": 3, "t1": 3})
    seen: list[int] = []

    def check() -> None:  # after every step of the harness
        seen.append(1)
        _no_partition_twice(pair)

    pair.check = check  # type: ignore[method-assign]
    pair.start([0, 1, 2])
    assert pair.run_until(lambda p: _converged(p, [0, 1, 2]), 60_000)
    before = {i: set(pair.members[i].owned) for i in range(3)}
    calls_before = [len(calls) for calls in pair.listener_calls]
    pair.start([3])
    assert pair.run_until(lambda p: _converged(p, [0, 1, 2, 3]), 60_000)
    # Only partitions that moved were revoked, and each went to the newcomer after its revocation.
    for i in range(3):
        revoked = [t for c in pair.listener_calls[i][calls_before[i]:] if isinstance(c, PartitionsRevoked)
                   for t in c.partitions]
        assert set(revoked) == before[i] - set(pair.members[i].owned)
        assert set(revoked) <= set(pair.members[3].owned)
    pair.close(0)
    assert pair.run_until(lambda p: _converged(p, [1, 2, 3]), 60_000)
    assert len(seen) > 10


# ---------------------------------------------------------------------------- a property


@st.composite
def answers(draw: Any) -> list[tuple[str, Any]]:
    steps = []
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["ok", "ok", "ok", "none", "fenced", "retry", "timer", "disconnect", "poll"]))
        assignment = {t: sorted(draw(st.sets(st.integers(0, 3), max_size=4))) for t in ("a", "b")}
        steps.append((kind, (draw(st.integers(1, 9)), assignment)))
    return steps


@settings(max_examples=200, deadline=None)
@given(answers())
def test_it_never_owns_a_partition_the_last_assignment_did_not_give(steps: list[tuple[str, Any]]) -> None:
    m = ConsumerMembership(config())
    now = 0
    out = m.start(now)
    last: set[TopicPartition] = set()
    for kind, (epoch, assignment) in steps:
        now += 1_000
        cid = m._heartbeat_cid
        if kind == "timer":
            out = m.on_timer(("heartbeat",), now)
        elif kind == "disconnect":
            out = m.on_disconnect(now)
        elif kind == "poll":
            out = m.poll(now)
        elif cid is not None:
            if kind == "ok":
                body = answer(epoch, assignment)
                last = {tp(t, p) for t, ps in assignment.items() for p in ps}
            elif kind == "none":
                body = answer(epoch)
            elif kind == "fenced":
                body = answer(0, error=ErrorCode.FENCED_MEMBER_EPOCH)
                last = set()
            else:
                body = answer(0, error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            out = m.on_response(cid, body, now)
        assert set(m.owned) <= last, (m.owned, last)
        assert len([s for s in sends(out) if s.body.member_epoch >= 0]) <= 1  # one heartbeat at a time
        assert all(isinstance(o.payload, events.MemberEvent) for o in out if isinstance(o, LogEvent))


def test_a_consumer_protocol_members_lines_read_back_typed() -> None:
    """runlog reads M's state as either member's (plot, costs and explain fold these lines)."""
    from grouplab.runlog import payload_of

    m = ConsumerMembership(config())
    m.start(0)
    out = m.on_response(1, answer(3, {"a": [0]}), 10)
    lines = [o for o in out if isinstance(o, LogEvent)]
    assert [line.fields["state"] for line in lines] == ["joining", "joining"]
    m.on_response(2, answer(3), 20)
    for line in lines + [LogEvent(30, events.AssignmentAcknowledged("g", "m1", 3, S.ACKNOWLEDGING, owned=[["a", 0]]))]:
        back = payload_of(line.event, dict(line.fields))
        assert type(back) is type(line.payload) and back.log_fields() == line.fields
    read = payload_of("assignment_acknowledged", dict(group_id="g", member_id="m1", generation_id=3,
                                                      state="acknowledging", owned=[]))
    assert isinstance(read, events.AssignmentAcknowledged) and read.state is S.ACKNOWLEDGING


def told(out: list[Any], lang: str = "en") -> str:
    """What `grouplab consumer`'s terminal (readable.ConsumerView) prints for `out`'s lines."""
    import io

    from rich.console import Console

    from grouplab.readable import ConsumerView

    console = Console(width=300, file=io.StringIO(), record=True, color_system=None)
    view = ConsumerView(console, lang)
    for o in out:
        if isinstance(o, LogEvent):
            view("consumer-1", o)
    return console.export_text()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_terminal_says_fenced_and_lost_only_for_what_it_owned(lang: str) -> None:
    """A fence is one line; the partitions lost are the next line, and only if there were any (a
    member fenced on its join owned nothing: nothing is said lost)."""
    m = ConsumerMembership(config())
    joined(m, 1, {"a": [0, 1]})
    hb = sends(m.on_timer(("heartbeat",), 5_000))[0]
    text = told(m.on_response(hb.correlation_id, answer(0, error=ErrorCode.FENCED_MEMBER_EPOCH), 5_010), lang)
    lines = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert "FENCED_MEMBER_EPOCH" in lines[0] and "a[0,1]" not in lines[0]
    assert "a[0,1]" in lines[1] and "FENCED_MEMBER_EPOCH" in lines[1]  # member.lost, with the reason
    rejoin = m._heartbeat_cid
    assert rejoin is not None
    text = told(m.on_response(rejoin, answer(0, error=ErrorCode.UNKNOWN_MEMBER_ID), 5_020), lang)
    lines = [line for line in text.splitlines() if line and not line.startswith(" ")]
    lost = Catalog(lang).t("member.lost", partitions="", reason="").split()[0]
    assert "UNKNOWN_MEMBER_ID" in lines[0] and not any(lost in line for line in lines), text


def test_a_runs_summary_counts_a_consumer_protocol_groups_epochs() -> None:
    """`grouplab run --group-protocol consumer` ends with the group's last epoch, not '0 rebalances'."""
    from grouplab.readable import GroupEpochs

    epochs = GroupEpochs("g")
    for group, epoch in (("g", 1), ("other", 9), ("g", 4), ("g", 3)):
        epochs("coordinator", LogEvent(0, events.GroupEpochBumped(group, epoch, ConsumerGroupState.ASSIGNING,
                                                                   cause=GroupEpochCause.MEMBER_JOINED, detail="")))
    epochs("consumer-1", LogEvent(0, events.AssignmentAcknowledged("g", "m1", 7, S.STABLE, owned=[])))  # a member's
    assert epochs.last == 4
