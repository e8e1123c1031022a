"""Tests of the KIP-848 consumer-protocol group machine (coordinator/consumer_group.py) and its
reconciliation (coordinator/consumer_reconcile.py).

Scenarios are ported from Kafka's GroupMetadataManagerTest and CurrentAssignmentBuilderTest: the
assignor is a `PreparedAssignor` (Kafka's MockPartitionAssignor) that returns the target each step
prepares. Every step asserts the exact answer, the net timer changes, the events written and the
whole group (`view`); a refused input is checked to change nothing (`assert_refused`). Member ids
are deterministic ("m1", "m2", ...). Config: Kafka's defaults (session 45 s, heartbeat 5 s).

The hypothesis state machine drives clients that join, heartbeat (reporting what they own, or
not), finish revocations when they like, leave, crash and change subscriptions, against a random
valid assignor; it checks that no partition is ever held by two members (the coordinator's view
and the clients'), and that with every member live and acknowledging, every subscribed partition
ends up owned.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
from dataclasses import dataclass, field
from typing import Any, Mapping

import pytest
from hypothesis import HealthCheck, event as note_event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.consumer_group import ConsumerGroup, MemberSpec
from grouplab.coordinator.consumer_reconcile import MemberAssignment, normalized, reconcile
from grouplab.protocol import schema
from grouplab.coordinator.group_log import (ConsumerGroupRecord, ConsumerMemberRecord, decode_frames, encode_frame,
                                            live)
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Persist, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    CONSUMER_GROUP_API,
    ConsumerGroupDescribedGroup,
    ConsumerGroupDescribedMember,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
)
from grouplab.protocol.states import ConsumerMemberState

G = "g"
SESSION_MS = 45_000
INTERVAL_MS = 5_000
STABLE = ConsumerMemberState.STABLE
UNREVOKED = ConsumerMemberState.UNREVOKED_PARTITIONS
UNRELEASED = ConsumerMemberState.UNRELEASED_PARTITIONS


# ----------------------------------------------------------------------------- assignors


class PreparedAssignor:
    """Kafka's MockPartitionAssignor: returns the assignment prepared for the next call, and
    keeps what it was asked."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.prepared: dict[str, dict[str, list[int]]] = {}
        self.calls: list[tuple[dict[str, MemberSpec], dict[str, int]]] = []

    def prepare(self, assignment: dict[str, dict[str, list[int]]]) -> None:
        self.prepared = assignment

    def assign(self, members: Mapping[str, MemberSpec], partitions_per_topic: Mapping[str, int]) -> dict[str, dict[str, frozenset[int]]]:
        self.calls.append((dict(members), dict(partitions_per_topic)))
        return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in self.prepared.items()}


class RandomAssignor:
    """A valid but arbitrary assignor: each partition to one member subscribed to its topic,
    chosen by a seeded random source (a new draw per call)."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.rng = random.Random(seed)

    def assign(self, members: Mapping[str, MemberSpec], partitions_per_topic: Mapping[str, int]) -> dict[str, dict[str, frozenset[int]]]:
        out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
        for topic in sorted(partitions_per_topic):
            subscribed = sorted(m for m, spec in members.items() if topic in spec.subscribed_topics)
            for p in range(partitions_per_topic[topic]):
                if subscribed:
                    out[self.rng.choice(subscribed)].setdefault(topic, set()).add(p)
        return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


# ----------------------------------------------------------------------------- helpers


def make_group(*overrides: str, assignor: Any = None) -> tuple[ConsumerGroup, PreparedAssignor]:
    prepared = assignor or PreparedAssignor("uniform")
    counter = itertools.count(1)
    g = ConsumerGroup(G, BrokerConfig().with_overrides(list(overrides)),
                      {"uniform": prepared, "range": PreparedAssignor("range")}, lambda client_id: f"m{next(counter)}")
    return g, prepared


def tps(owned: Mapping[str, list[int]] | None) -> list[ConsumerGroupHeartbeatTopicPartitions] | None:
    return None if owned is None else [ConsumerGroupHeartbeatTopicPartitions(t, ps) for t, ps in owned.items()]


def join_req(member_id: str = "", topics: list[str] | None = None, *, instance: str | None = None,
             regex: str | None = None, assignor: str | None = None, rebalance_timeout_ms: int = 30_000,
             rack: str | None = None) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(G, member_id, 0, instance_id=instance, rack_id=rack,
                                         rebalance_timeout_ms=rebalance_timeout_ms,
                                         subscribed_topic_names=topics if topics is not None or regex else ["foo"],
                                         subscribed_topic_regex=regex, server_assignor=assignor, topic_partitions=[])


def hb_req(member_id: str, epoch: int, owned: Mapping[str, list[int]] | None = None, *,
           instance: str | None = None, **fields: Any) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(G, member_id, epoch, instance_id=instance, topic_partitions=tps(owned), **fields)


def ok(member_id: str, epoch: int, assignment: dict[str, list[int]] | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=INTERVAL_MS,
                                          assignment=assignment)


def err(code: ErrorCode) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=code)


@dataclass
class Step:
    """One input's outputs: the answer (message blanked), net timers (key -> deadline, None:
    cancelled), the events' names, and the events themselves (for detail checks)."""

    reply: Any = None
    timers: dict[tuple, int | None] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    logs: list[LogEvent] = field(default_factory=list, compare=False)
    message: str | None = field(default=None, compare=False)  # the answer's error message
    persisted: list = field(default_factory=list, compare=False)  # the records the step wrote


def step(outputs: list) -> Step:
    s = Step()
    for o in outputs:
        if isinstance(o, Reply):
            assert s.reply is None, f"two replies in one step: {outputs}"
            s.message = o.body.error_message
            s.reply = dataclasses.replace(o.body, error_message=None)
        elif isinstance(o, ArmTimer):
            s.timers[o.key] = o.deadline_ms
        elif isinstance(o, CancelTimer):
            s.timers[o.key] = None
        elif isinstance(o, LogEvent):
            s.events.append(o.event)
            s.logs.append(o)
        elif isinstance(o, Persist):
            assert s.reply is None, "a record written after the reply"
            s.persisted.append(o.record)
        else:  # pragma: no cover
            raise AssertionError(f"unexpected output {o!r}")
    return s


def event(s: Step, name: str) -> dict[str, Any]:
    (found,) = [e.fields for e in s.logs if e.event == name]
    return found


def session(member_id: str) -> tuple:
    return ("consumer-session", G, member_id)


def rebalance(member_id: str) -> tuple:
    return ("consumer-rebalance", G, member_id)


def hb(g: ConsumerGroup, req: ConsumerGroupHeartbeatRequest, now: int, topics: Mapping[str, int]) -> Step:
    return step(g.heartbeat(req, "r", "client", "host", now, topics))


def A(**topics: list[int]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in topics.items()}


def member_view(g: ConsumerGroup, member_id: str) -> tuple:
    p = g.members[member_id].progress
    return (p.member_epoch, p.previous_member_epoch, p.state, dict(p.assigned), dict(p.pending_revocation))


def view(g: ConsumerGroup) -> dict[str, Any]:
    return {"state": g.state.value, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "members": {mid: member_view(g, mid) for mid in g.members}, "static": dict(g.static_members)}


def snapshot(g: ConsumerGroup) -> dict[str, Any]:
    return {f.name: copy.deepcopy(getattr(g, f.name)) for f in dataclasses.fields(g)
            if f.name not in ("config", "assignors", "new_member_id")} | {"order": list(g.members)}


def assert_refused(g: ConsumerGroup, req: ConsumerGroupHeartbeatRequest, code: ErrorCode, now: int,
                   topics: Mapping[str, int], message: str | None = None) -> None:
    """The heartbeat is answered `code` (with Kafka's `message`, if given), logged as rejected,
    and nothing else: the group is exactly as before."""
    before = snapshot(g)
    s = hb(g, req, now, topics)
    assert s == Step(reply=err(code), events=["consumer_heartbeat_rejected"])
    if message is not None:
        assert s.message == message
    assert snapshot(g) == before


FOO = {"foo": 6}


def two_members_stable(now: int = 0) -> tuple[ConsumerGroup, PreparedAssignor]:
    """m1 and m2 subscribed to foo (6 partitions): m1 0-2, m2 3-5, both at epoch 2, Stable."""
    g, a = make_group()
    a.prepare({"m1": {"foo": [0, 1, 2, 3, 4, 5]}})
    hb(g, join_req(topics=["foo"]), now, FOO)
    a.prepare({"m1": {"foo": [0, 1, 2]}, "m2": {"foo": [3, 4, 5]}})
    hb(g, join_req(topics=["foo"]), now, FOO)
    hb(g, hb_req("m1", 1, {"foo": [0, 1, 2, 3, 4, 5]}), now, FOO)
    hb(g, hb_req("m1", 1, {"foo": [0, 1, 2]}), now, FOO)
    hb(g, hb_req("m2", 2, {}), now, FOO)
    assert view(g)["state"] == "Stable"
    return g, a


# ----------------------------------------------------------------------------- messages and config


def test_messages_round_trip_through_the_schema():
    assert set(CONSUMER_GROUP_API) == {"ConsumerGroupHeartbeat", "ConsumerGroupDescribe"}
    bodies = [
        join_req("m1", ["foo"], instance="i1", rack="r1", assignor="range"),
        hb_req("m1", 3, {"foo": [0, 1], "bar": []}),
        ok("m1", 3, {"foo": [0, 1]}),
        ok("m1", 3),
        ConsumerGroupDescribeRequest(group_ids=[G]),
        ConsumerGroupDescribeResponse(groups=[ConsumerGroupDescribedGroup(G, group_state="Stable", group_epoch=2, members=[
            ConsumerGroupDescribedMember("m1", 2, assignment={"foo": [0]}, target_assignment={"foo": [0, 1]})])]),
    ]
    for body in bodies:
        assert schema.decode(type(body), schema.encode(body), "body") == body


def test_consumer_group_configs_have_kafkas_defaults_and_checks():
    c = BrokerConfig()
    assert (c.consumer_session_timeout_ms, c.consumer_min_session_timeout_ms, c.consumer_max_session_timeout_ms,
            c.consumer_heartbeat_interval_ms, c.consumer_min_heartbeat_interval_ms, c.consumer_max_heartbeat_interval_ms,
            c.consumer_max_size, c.consumer_assignor_names, c.consumer_migration_policy) == (
        45_000, 45_000, 60_000, 5_000, 5_000, 15_000, 2_147_483_647, ["uniform", "range"], "bidirectional")
    assert BrokerConfig().with_overrides(
        ["group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform"]
    ).consumer_assignor_names == ["range", "uniform"]
    for bad in ("group.consumer.assignors=sticky", "group.consumer.assignors=range,range",
                "group.consumer.session.timeout.ms=30000", "group.consumer.heartbeat.interval.ms=16000",
                "group.consumer.migration.policy=sideways", "group.consumer.max.size=0"):
        with pytest.raises(ValueError):
            BrokerConfig().with_overrides([bad])


# ----------------------------------------------------------------------------- joining


def test_a_member_joins_an_empty_group_and_gets_everything():
    g, a = make_group()
    a.prepare({"m1": {"foo": [0, 1, 2, 3, 4, 5], "bar": [0, 1, 2]}})
    s = hb(g, join_req(topics=["foo", "bar"]), 1000, {"foo": 6, "bar": 3, "zar": 1})
    assert s == Step(reply=ok("m1", 1, {"bar": [0, 1, 2], "foo": [0, 1, 2, 3, 4, 5]}),
                     timers={session("m1"): 1000 + SESSION_MS},
                     events=["consumer_member_joined", "group_epoch_bumped", "target_assignment_computed",
                             "consumer_member_reconciled", "consumer_group_state_changed"])
    assert event(s, "group_epoch_bumped") == {"group_id": G, "group_epoch": 1, "state": "Empty", "cause": "member_joined",
                                              "detail": "member m1 joined"}
    assert event(s, "consumer_group_state_changed")["to_state"] == "Stable"
    assert view(g) == {"state": "Stable", "group_epoch": 1, "assignment_epoch": 1, "static": {},
                       "members": {"m1": (1, 0, STABLE, A(bar=[0, 1, 2], foo=[0, 1, 2, 3, 4, 5]), {})}}
    # The assignor saw the member's subscription (existing topics only) and the subscribed topics.
    (specs, topics), = a.calls
    assert specs == {"m1": MemberSpec(frozenset({"foo", "bar"}), {}, None, None)}
    assert topics == {"foo": 6, "bar": 3}
    assert g.subscription_metadata == {"bar": 3, "foo": 6}


def test_a_member_may_bring_its_own_member_id():
    """KIP-1082 (ConsumerGroupHeartbeat v1): the client generates its member id; v0 clients send
    "" and are given one. Both are accepted."""
    g, a = make_group()
    a.prepare({"8c2f0c5e-client-uuid": {"foo": [0]}})
    s = hb(g, join_req("8c2f0c5e-client-uuid", ["foo"]), 0, {"foo": 1})
    assert s.reply == ok("8c2f0c5e-client-uuid", 1, {"foo": [0]})


def test_a_second_member_waits_until_the_first_revokes():
    """GroupMetadataManagerTest.testReconciliationProcess, shortened to two members."""
    g, a = make_group()
    a.prepare({"m1": {"foo": [0, 1, 2, 3, 4, 5]}})
    hb(g, join_req(topics=["foo"]), 0, FOO)

    # m2 joins: epoch 2, new target; m2 is at the target epoch but 3-5 are still m1's.
    a.prepare({"m1": {"foo": [0, 1, 2]}, "m2": {"foo": [3, 4, 5]}})
    s = hb(g, join_req(topics=["foo"]), 10, FOO)
    assert s == Step(reply=ok("m2", 2, {}), timers={session("m2"): 10 + SESSION_MS},
                     events=["consumer_member_joined", "group_epoch_bumped", "target_assignment_computed",
                             "consumer_member_reconciled", "consumer_group_state_changed"])
    assert event(s, "consumer_member_reconciled")["unreleased"] == [["foo", 3], ["foo", 4], ["foo", 5]]
    assert view(g) == {"state": "Reconciling", "group_epoch": 2, "assignment_epoch": 2, "static": {},
                       "members": {"m1": (1, 0, STABLE, A(foo=[0, 1, 2, 3, 4, 5]), {}),
                                   "m2": (2, 0, UNRELEASED, {}, {})}}

    # m1's heartbeat: it must revoke 3-5 first; its epoch stays 1; its rebalance timeout runs.
    s = hb(g, hb_req("m1", 1, {"foo": [0, 1, 2, 3, 4, 5]}), 20, FOO)
    assert s == Step(reply=ok("m1", 1, {"foo": [0, 1, 2]}),
                     timers={rebalance("m1"): 20 + 30_000, session("m1"): 20 + SESSION_MS},
                     events=["consumer_member_reconciled"])
    assert view(g)["members"]["m1"] == (1, 1, UNREVOKED, A(foo=[0, 1, 2]), A(foo=[3, 4, 5]))

    # m2 heartbeats before m1 acknowledged: still nothing for it, no assignment change to send.
    s = hb(g, hb_req("m2", 2, {}), 30, FOO)
    assert s == Step(reply=ok("m2", 2), timers={session("m2"): 30 + SESSION_MS})

    # m1 heartbeats without saying what it owns: it cannot move on (Kafka: it might still own them).
    s = hb(g, hb_req("m1", 1), 40, FOO)
    assert s == Step(reply=ok("m1", 1), timers={session("m1"): 40 + SESSION_MS})

    # m1 acknowledges: it no longer owns 3-5; it moves to epoch 2, STABLE; the rebalance timer goes.
    s = hb(g, hb_req("m1", 1, {"foo": [0, 1, 2]}), 50, FOO)
    assert s == Step(reply=ok("m1", 2), timers={rebalance("m1"): None, session("m1"): 50 + SESSION_MS},
                     events=["consumer_member_reconciled"])
    assert view(g)["members"]["m1"] == (2, 1, STABLE, A(foo=[0, 1, 2]), {})

    # m2 gets the released partitions; the group is Stable.
    s = hb(g, hb_req("m2", 2, {}), 60, FOO)
    assert s == Step(reply=ok("m2", 2, {"foo": [3, 4, 5]}), timers={session("m2"): 60 + SESSION_MS},
                     events=["consumer_member_reconciled", "consumer_group_state_changed"])
    assert view(g) == {"state": "Stable", "group_epoch": 2, "assignment_epoch": 2, "static": {},
                       "members": {"m1": (2, 1, STABLE, A(foo=[0, 1, 2]), {}),
                                   "m2": (2, 2, STABLE, A(foo=[3, 4, 5]), {})}}
    # The assignor was given each member's current target, for stickiness.
    assert a.calls[-1][0]["m1"].assignment == {"foo": frozenset(range(6))}


def test_a_member_that_acknowledged_without_the_answer_may_send_its_previous_epoch():
    """The answer that moved a member to a new epoch may be lost: its previous epoch is accepted
    while it owns no more than it is assigned (throwIfMemberEpochIsInvalid)."""
    g, _ = two_members_stable()
    assert view(g)["members"]["m1"] == (2, 1, STABLE, A(foo=[0, 1, 2]), {})
    s = hb(g, hb_req("m1", 1, {"foo": [0, 1, 2]}), 100, FOO)
    assert s.reply == ok("m1", 2)
    assert view(g)["members"]["m1"] == (2, 1, STABLE, A(foo=[0, 1, 2]), {})
    # ... but not while it claims more, nor without saying what it owns.
    assert_refused(g, hb_req("m1", 1, {"foo": [0, 1, 2, 3]}), ErrorCode.FENCED_MEMBER_EPOCH, 110, FOO)
    assert_refused(g, hb_req("m1", 1), ErrorCode.FENCED_MEMBER_EPOCH, 120, FOO)


# ----------------------------------------------------------------------------- leaving and timeouts


def test_a_member_leaves_and_the_next_heartbeat_gives_its_partitions_to_the_other():
    g, a = two_members_stable()
    s = hb(g, hb_req("m2", -1), 100, FOO)
    assert s == Step(reply=ok("m2", -1), timers={session("m2"): None, rebalance("m2"): None},
                     events=["consumer_member_removed", "group_epoch_bumped", "consumer_group_state_changed"])
    assert event(s, "consumer_member_removed") == {
        "group_id": G, "group_epoch": 2, "state": "Stable", "member_id": "m2", "reason": "left", "detail": "m2 left",
        "partitions": [["foo", 3], ["foo", 4], ["foo", 5]]}
    assert event(s, "group_epoch_bumped")["cause"] == "member_left"
    assert view(g) == {"state": "Assigning", "group_epoch": 3, "assignment_epoch": 2, "static": {},
                       "members": {"m1": (2, 1, STABLE, A(foo=[0, 1, 2]), {})}}
    a.prepare({"m1": {"foo": [0, 1, 2, 3, 4, 5]}})
    s = hb(g, hb_req("m1", 2, {"foo": [0, 1, 2]}), 110, FOO)
    assert s == Step(reply=ok("m1", 3, {"foo": [0, 1, 2, 3, 4, 5]}), timers={session("m1"): 110 + SESSION_MS},
                     events=["target_assignment_computed", "consumer_member_reconciled", "consumer_group_state_changed"])
    assert view(g)["state"] == "Stable"
    # The left member is unknown now.
    assert_refused(g, hb_req("m2", 2, {}), ErrorCode.UNKNOWN_MEMBER_ID, 120, FOO,
                   "Member m2 is not a member of group g.")


def test_the_last_member_leaving_empties_the_group():
    g, a = make_group()
    a.prepare({"m1": {"foo": [0]}})
    hb(g, join_req(topics=["foo"]), 0, {"foo": 1})
    s = hb(g, hb_req("m1", -1), 10, {"foo": 1})
    assert s.reply == ok("m1", -1)
    assert view(g) == {"state": "Empty", "group_epoch": 2, "assignment_epoch": 1, "members": {}, "static": {}}
    assert g.holders == {} and g.subscription_metadata == {}


def test_session_timeout_removes_a_silent_member():
    g, a = two_members_stable()
    # A heartbeat at 20 s moved m2's deadline: the timer of the old one re-arms for the new one.
    hb(g, hb_req("m2", 2, {"foo": [3, 4, 5]}), 20_000, FOO)
    s = step(g.timer(session("m2"), SESSION_MS))
    assert s == Step(timers={session("m2"): 20_000 + SESSION_MS})
    assert "m2" in g.members
    s = step(g.timer(session("m2"), 20_000 + SESSION_MS))
    assert s == Step(timers={session("m2"): None, rebalance("m2"): None},
                     events=["consumer_member_removed", "group_epoch_bumped", "consumer_group_state_changed"])
    assert event(s, "consumer_member_removed")["reason"] == "session_timeout"
    assert view(g) == {"state": "Assigning", "group_epoch": 3, "assignment_epoch": 2, "static": {},
                       "members": {"m1": (2, 1, STABLE, A(foo=[0, 1, 2]), {})}}
    # A timer of a member that is gone does nothing.
    before = snapshot(g)
    assert step(g.timer(session("m2"), 99_999)) == Step()
    assert snapshot(g) == before


def test_rebalance_timeout_fences_a_slow_revoker():
    """GroupMetadataManagerTest.testRebalanceTimeoutLifecycle: the member that does not revoke
    within its rebalance timeout is removed; its partitions go back through a new epoch."""
    g, a = make_group()
    a.prepare({"m1": {"foo": [0, 1, 2, 3, 4, 5]}})
    hb(g, join_req(topics=["foo"], rebalance_timeout_ms=12_000), 0, FOO)
    a.prepare({"m1": {"foo": [0, 1, 2]}, "m2": {"foo": [3, 4, 5]}})
    hb(g, join_req(topics=["foo"]), 1000, FOO)
    s = hb(g, hb_req("m1", 1, {"foo": [0, 1, 2, 3, 4, 5]}), 2000, FOO)
    assert s.timers[rebalance("m1")] == 2000 + 12_000
    # m1 keeps heartbeating while still holding 3-5.
    hb(g, hb_req("m1", 1, {"foo": [0, 1, 2, 3, 4, 5]}), 7000, FOO)
    s = step(g.timer(rebalance("m1"), 14_000))
    assert s == Step(timers={session("m1"): None, rebalance("m1"): None},
                     events=["consumer_member_removed", "group_epoch_bumped", "consumer_group_state_changed"])
    assert event(s, "consumer_member_removed")["reason"] == "rebalance_timeout"
    assert event(s, "consumer_member_removed")["partitions"] == [["foo", p] for p in range(6)]
    assert event(s, "group_epoch_bumped")["cause"] == "rebalance_timeout"
    # m1 is fenced: its next heartbeat learns it.
    assert_refused(g, hb_req("m1", 1, {"foo": [0, 1, 2, 3, 4, 5]}), ErrorCode.UNKNOWN_MEMBER_ID, 15_000, FOO)
    a.prepare({"m2": {"foo": [0, 1, 2, 3, 4, 5]}})
    s = hb(g, hb_req("m2", 2, {}), 15_000, FOO)
    assert s.reply == ok("m2", 3, {"foo": [0, 1, 2, 3, 4, 5]})
    assert view(g)["state"] == "Stable"


def test_a_rebalance_timer_after_the_revocation_does_nothing():
    g, a = make_group()
    a.prepare({"m1": {"foo": [0, 1, 2, 3, 4, 5]}})
    hb(g, join_req(topics=["foo"]), 0, FOO)
    a.prepare({"m1": {"foo": [0, 1, 2]}, "m2": {"foo": [3, 4, 5]}})
    hb(g, join_req(topics=["foo"]), 0, FOO)
    hb(g, hb_req("m1", 1, {"foo": [0, 1, 2, 3, 4, 5]}), 0, FOO)
    hb(g, hb_req("m1", 1, {"foo": [0, 1, 2]}), 0, FOO)
    before = snapshot(g)
    assert step(g.timer(rebalance("m1"), 30_000)) == Step()
    assert snapshot(g) == before


# ----------------------------------------------------------------------------- static members


def test_a_static_member_leaves_with_minus_two_and_its_restart_takes_over():
    """testStaticMemberGetsBackAssignmentUponRejoin: -2 keeps the assignment; the same instance
    id joining under a new member id takes it over at the target epoch without an epoch bump."""
    g, a = make_group()
    a.prepare({"m1": {"foo": [0, 1, 2]}})
    hb(g, join_req(topics=["foo"], instance="i1"), 0, {"foo": 3})
    assert g.static_members == {"i1": "m1"}
    s = hb(g, hb_req("m1", -2, instance="i1"), 10, {"foo": 3})
    assert s == Step(reply=ok("m1", -2), timers={rebalance("m1"): None, session("m1"): 10 + SESSION_MS},
                     events=["consumer_static_member_left", "consumer_group_state_changed"])
    assert view(g) == {"state": "Reconciling", "group_epoch": 1, "assignment_epoch": 1, "static": {"i1": "m1"},
                       "members": {"m1": (-2, 0, STABLE, A(foo=[0, 1, 2]), {})}}
    # The same instance id under a new member id: m2 replaces m1, gets its partitions at epoch 1.
    s = hb(g, join_req("m2", ["foo"], instance="i1"), 20, {"foo": 3})
    assert s == Step(reply=ok("m2", 1, {"foo": [0, 1, 2]}),
                     timers={session("m1"): None, rebalance("m1"): None, session("m2"): 20 + SESSION_MS},
                     events=["consumer_static_member_replaced", "consumer_member_reconciled",
                             "consumer_group_state_changed"])
    assert view(g) == {"state": "Stable", "group_epoch": 1, "assignment_epoch": 1, "static": {"i1": "m2"},
                       "members": {"m2": (1, 0, STABLE, A(foo=[0, 1, 2]), {})}}
    assert g.target == {"m2": A(foo=[0, 1, 2])}
    # The old member id is fenced for that instance.
    assert_refused(g, hb_req("m1", 1, {}, instance="i1"), ErrorCode.FENCED_INSTANCE_ID, 30, {"foo": 3})


def test_a_static_instance_id_held_by_a_live_member_is_unreleased():
    g, a = make_group()
    a.prepare({"m1": {"foo": [0]}})
    hb(g, join_req(topics=["foo"], instance="i1"), 0, {"foo": 1})
    assert_refused(g, join_req("m9", ["foo"], instance="i1"), ErrorCode.UNRELEASED_INSTANCE_ID, 10, {"foo": 1},
                   "Static member m9 with instance id i1 cannot join the group because the instance id is owned by "
                   "m1 member.")
    assert_refused(g, hb_req("m9", 1, {}, instance="i2"), ErrorCode.UNKNOWN_MEMBER_ID, 10, {"foo": 1},
                   "Instance id i2 is unknown.")


def test_a_static_member_that_does_not_come_back_is_removed_after_the_session_timeout():
    g, a = make_group()
    a.prepare({"m1": {"foo": [0]}})
    hb(g, join_req(topics=["foo"], instance="i1"), 0, {"foo": 1})
    hb(g, hb_req("m1", -2, instance="i1"), 1000, {"foo": 1})
    s = step(g.timer(session("m1"), 1000 + SESSION_MS))
    assert event(s, "consumer_member_removed")["reason"] == "session_timeout"
    assert view(g) == {"state": "Empty", "group_epoch": 2, "assignment_epoch": 1, "members": {}, "static": {}}


def test_a_static_member_leaving_with_minus_one_is_removed_for_good():
    g, a = make_group()
    a.prepare({"m1": {"foo": [0]}})
    hb(g, join_req(topics=["foo"], instance="i1"), 0, {"foo": 1})
    s = hb(g, hb_req("m1", -1, instance="i1"), 10, {"foo": 1})
    assert s.reply == ok("m1", -1)
    assert g.members == {} and g.static_members == {}


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("req, message", [
    (dataclasses.replace(hb_req("m1", 1), member_id=""), "MemberId can't be empty."),
    (dataclasses.replace(hb_req("m1", -1), member_id=""), "MemberId can't be empty."),
    (dataclasses.replace(join_req(), group_id="  "), "GroupId can't be empty."),
    (join_req(instance=""), "InstanceId can't be empty."),
    (join_req(rack=" "), "RackId can't be empty."),
    (join_req(rebalance_timeout_ms=-1), "RebalanceTimeoutMs must be provided in first request."),
    (dataclasses.replace(join_req(), topic_partitions=None), "TopicPartitions must be empty when (re-)joining."),
    (dataclasses.replace(join_req(), topic_partitions=tps({"foo": [0]})), "TopicPartitions must be empty when (re-)joining."),
    (dataclasses.replace(join_req(), subscribed_topic_names=None),
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (hb_req("m1", -2), "InstanceId can't be null."),
    (hb_req("m1", -3), "MemberEpoch is invalid."),
    (join_req(regex="foo("), None),
    (hb_req("m1", 1, {"foo": [-1]}), "TopicPartitions has a negative partition."),
])
def test_malformed_heartbeats_are_invalid_requests_and_change_nothing(req, message):
    g, _ = two_members_stable()
    assert_refused(g, req, ErrorCode.INVALID_REQUEST, 100, FOO, message)


def test_an_unknown_assignor_is_unsupported():
    g, _ = two_members_stable()
    assert_refused(g, join_req(topics=["foo"], assignor="sticky"), ErrorCode.UNSUPPORTED_ASSIGNOR, 100, FOO,
                   "ServerAssignor sticky is not supported. Supported assignors: uniform, range.")


def test_member_epochs_ahead_or_too_far_behind_are_fenced():
    g, _ = two_members_stable()
    assert_refused(g, hb_req("m1", 3, {"foo": [0, 1, 2]}), ErrorCode.FENCED_MEMBER_EPOCH, 100, FOO,
                   "The consumer group member has a greater member epoch (3) than the one known by the group "
                   "coordinator (2). The member must abandon all its partitions and rejoin.")
    assert_refused(g, hb_req("m2", 1, {}), ErrorCode.FENCED_MEMBER_EPOCH, 100, FOO,
                   "The consumer group member has a smaller member epoch (1) than the one known by the group "
                   "coordinator (2). The member must abandon all its partitions and rejoin.")
    assert_refused(g, hb_req("nobody", 2, {}), ErrorCode.UNKNOWN_MEMBER_ID, 100, FOO)
    assert_refused(g, hb_req("nobody", -1), ErrorCode.UNKNOWN_MEMBER_ID, 100, FOO)


def test_a_full_group_refuses_one_more_member():
    g, a = make_group("group.consumer.max.size=1")
    a.prepare({"m1": {"foo": [0]}})
    hb(g, join_req(topics=["foo"]), 0, {"foo": 1})
    assert_refused(g, join_req(topics=["foo"]), ErrorCode.GROUP_MAX_SIZE_REACHED, 10, {"foo": 1},
                   "The consumer group has reached its maximum capacity of 1 members.")
    # The member itself rejoining (epoch 0, its id) is not one more.
    assert hb(g, join_req("m1", ["foo"]), 20, {"foo": 1}).reply == ok("m1", 1, {"foo": [0]})


# ----------------------------------------------------------------------------- epochs: subscriptions, metadata, regex


def test_subscription_and_partition_count_changes_bump_the_group_epoch():
    g, a = make_group()
    a.prepare({"m1": {"foo": [0, 1]}})
    hb(g, join_req(topics=["foo"]), 0, {"foo": 2, "bar": 1})
    a.prepare({"m1": {"foo": [0, 1], "bar": [0]}})
    s = hb(g, hb_req("m1", 1, {"foo": [0, 1]}, subscribed_topic_names=["foo", "bar"]), 10, {"foo": 2, "bar": 1})
    assert event(s, "group_epoch_bumped")["cause"] == "subscription_changed"
    assert s.reply == ok("m1", 2, {"bar": [0], "foo": [0, 1]})
    # Nothing changed: no bump.
    s = hb(g, hb_req("m1", 2, {"foo": [0, 1], "bar": [0]}), 20, {"foo": 2, "bar": 1})
    assert s == Step(reply=ok("m1", 2), timers={session("m1"): 20 + SESSION_MS})
    # foo grows to 3 partitions: a new epoch.
    a.prepare({"m1": {"foo": [0, 1, 2], "bar": [0]}})
    s = hb(g, hb_req("m1", 2, {"foo": [0, 1], "bar": [0]}), 30, {"foo": 3, "bar": 1})
    assert event(s, "group_epoch_bumped")["cause"] == "metadata_changed"
    assert s.reply == ok("m1", 3, {"bar": [0], "foo": [0, 1, 2]})
    # A topic nobody subscribes to changing does not move the epoch.
    s = hb(g, hb_req("m1", 3, {"foo": [0, 1, 2], "bar": [0]}), 40, {"foo": 3, "bar": 1, "zar": 9})
    assert "group_epoch_bumped" not in s.events
    # Another assignor asked for: a new epoch, computed by it.
    ranged = g.assignors["range"]
    assert isinstance(ranged, PreparedAssignor)
    ranged.prepare({"m1": {"foo": [0, 1, 2], "bar": [0]}})
    s = hb(g, hb_req("m1", 3, {"foo": [0, 1, 2], "bar": [0]}, server_assignor="range"), 50, {"foo": 3, "bar": 1})
    assert event(s, "group_epoch_bumped")["cause"] == "assignor_changed"
    assert event(s, "target_assignment_computed")["assignor"] == "range"
    assert g.describe().assignor_name == "range"


def test_a_regex_subscription_matches_whole_topic_names_and_follows_new_topics():
    g, a = make_group()
    a.prepare({"m1": {"orders": [0]}})
    s = hb(g, join_req(topics=[], regex="ord.*"), 0, {"orders": 1, "reorders": 1, "bar": 1})
    assert s.reply == ok("m1", 1, {"orders": [0]})
    assert a.calls[-1][0]["m1"].subscribed_topics == frozenset({"orders"})
    # A new topic that matches: the epoch moves and the assignor sees it.
    a.prepare({"m1": {"orders": [0], "orders-eu": [0]}})
    s = hb(g, hb_req("m1", 1, {"orders": [0]}), 10, {"orders": 1, "orders-eu": 1, "reorders": 1})
    assert event(s, "group_epoch_bumped")["cause"] == "metadata_changed"
    assert a.calls[-1][0]["m1"].subscribed_topics == frozenset({"orders", "orders-eu"})
    assert s.reply == ok("m1", 2, {"orders": [0], "orders-eu": [0]})


def test_describe_shows_epochs_members_and_both_assignments():
    g, a = make_group()
    a.prepare({"m1": {"foo": [0, 1, 2, 3, 4, 5]}})
    g.heartbeat(join_req(topics=["foo"], instance="i1", rack="r1"), "r", "c1", "10.0.0.1", 0, FOO)
    a.prepare({"m1": {"foo": [0, 1, 2]}, "m2": {"foo": [3, 4, 5]}})
    g.heartbeat(join_req(topics=["foo"]), "r", "c2", "10.0.0.2", 0, FOO)
    g.heartbeat(hb_req("m1", 1, {"foo": [0, 1, 2, 3, 4, 5]}, instance="i1"), "r", "c1", "10.0.0.1", 0, FOO)
    assert g.describe() == ConsumerGroupDescribedGroup(
        group_id=G, group_state="Reconciling", group_epoch=2, assignment_epoch=2, assignor_name="uniform", members=[
            ConsumerGroupDescribedMember("m1", 1, instance_id="i1", rack_id="r1", client_id="c1", client_host="10.0.0.1",
                                         subscribed_topic_names=["foo"], assignment={"foo": [0, 1, 2]},
                                         target_assignment={"foo": [0, 1, 2]}, member_state="unrevoked_partitions"),
            ConsumerGroupDescribedMember("m2", 2, client_id="c2", client_host="10.0.0.2", subscribed_topic_names=["foo"],
                                         target_assignment={"foo": [3, 4, 5]}, member_state="unreleased_partitions")])


def test_offset_commits_are_checked_against_the_member_epoch():
    g, _ = two_members_stable()
    assert g.validate_offset_commit("m1", 2) is None
    assert g.validate_offset_commit("m1", 1) is ErrorCode.STALE_MEMBER_EPOCH
    assert g.validate_offset_commit("nobody", 2) is ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_offset_commit("", -1) is ErrorCode.UNKNOWN_MEMBER_ID  # the group has members
    empty, _ = make_group()
    assert empty.validate_offset_commit("", -1) is None


# ----------------------------------------------------------------------------- reconciliation (CurrentAssignmentBuilderTest)


def free(topic: str, p: int) -> bool:
    return False


def test_reconcile_stable_to_stable_with_new_partitions():
    m = MemberAssignment(STABLE, 10, 9, A(foo=[1, 2, 3]))
    assert reconcile(m, 11, A(foo=[1, 2, 3, 4]), A(foo=[1, 2, 3]), free) == MemberAssignment(
        STABLE, 11, 10, A(foo=[1, 2, 3, 4]))


def test_reconcile_stable_to_unrevoked_partitions():
    m = MemberAssignment(STABLE, 10, 9, A(foo=[1, 2, 3], bar=[4, 5, 6]))
    assert reconcile(m, 11, A(foo=[2, 3, 4], bar=[5, 6, 7]), None, free) == MemberAssignment(
        UNREVOKED, 10, 10, A(foo=[2, 3], bar=[5, 6]), A(foo=[1], bar=[4]))


def test_reconcile_skips_the_revocation_the_member_already_did():
    """The member reports it no longer owns what it would have to revoke: straight to the target."""
    m = MemberAssignment(STABLE, 10, 9, A(foo=[1, 2, 3]))
    assert reconcile(m, 11, A(foo=[2, 3]), A(foo=[2, 3]), free) == MemberAssignment(STABLE, 11, 10, A(foo=[2, 3]))


def test_reconcile_unrevoked_waits_until_the_partitions_are_gone():
    m = MemberAssignment(UNREVOKED, 10, 10, A(foo=[2, 3]), A(foo=[1]))
    assert reconcile(m, 11, A(foo=[2, 3, 4]), None, free) is m
    assert reconcile(m, 11, A(foo=[2, 3, 4]), A(foo=[1, 2, 3]), free) is m
    assert reconcile(m, 11, A(foo=[2, 3, 4]), A(foo=[2, 3]), free) == MemberAssignment(STABLE, 11, 10, A(foo=[2, 3, 4]))


def test_reconcile_unreleased_partitions_wait_for_their_holder():
    held = {("foo", 4)}
    m = MemberAssignment(UNREVOKED, 10, 10, A(foo=[2, 3]), A(foo=[1]))
    after = reconcile(m, 11, A(foo=[2, 3, 4]), A(foo=[2, 3]), lambda t, p: (t, p) in held)
    assert after == MemberAssignment(UNRELEASED, 11, 10, A(foo=[2, 3]))
    held.clear()
    assert reconcile(after, 11, A(foo=[2, 3, 4]), A(foo=[2, 3]), lambda t, p: (t, p) in held) == MemberAssignment(
        STABLE, 11, 11, A(foo=[2, 3, 4]))


def test_reconcile_a_partition_pending_its_own_revocation_is_not_unreleased():
    m = MemberAssignment(UNREVOKED, 10, 10, A(foo=[2]), A(foo=[1]))
    # The target takes 1 back; the member revoked it meanwhile: it may have it again.
    assert reconcile(m, 11, A(foo=[1, 2]), A(foo=[2]), free) == MemberAssignment(STABLE, 11, 10, A(foo=[1, 2]))
    assert normalized({"foo": [], "bar": [1]}) == {"bar": frozenset({1})}


# ----------------------------------------------------------------------------- hypothesis: random groups


@dataclass
class Client:
    """A consumer as the coordinator's peer: what it holds, what it is giving up, its epoch."""

    member_id: str = ""
    instance: str | None = None  # a static member's group.instance.id
    epoch: int = 0
    joined: bool = False
    crashed: bool = False
    topics: list[str] = field(default_factory=lambda: ["a", "b"])
    held: set[tuple[str, int]] = field(default_factory=set)
    revoking: set[tuple[str, int]] = field(default_factory=set)

    def owned(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for t, p in sorted(self.held):
            out.setdefault(t, []).append(p)
        return out

    def drop_all(self) -> None:
        self.held.clear()
        self.revoking.clear()
        self.joined, self.epoch = False, 0


CLIENTS = 4


class ConsumerGroupMachine(RuleBasedStateMachine):
    @initialize(seed=st.integers(0, 2**32 - 1))
    def start(self, seed: int) -> None:
        self.seed = seed
        self.g, _ = make_group(assignor=RandomAssignor("uniform", seed))
        self.now = 0
        self.topics = {"a": 3, "b": 2, "c": 2}
        self.clients = [Client(instance=f"i{i}" if i < 2 else None) for i in range(CLIENTS)]
        self.timers: dict[tuple, int] = {}
        self.by_member: dict[str, Client] = {}
        self.log: list = []  # every record the group wrote, in order (its group log)

    # ---- plumbing

    def run(self, outputs: list) -> ConsumerGroupHeartbeatResponse | None:
        answer = None
        for o in outputs:
            if isinstance(o, ArmTimer):
                self.timers[o.key] = o.deadline_ms
            elif isinstance(o, CancelTimer):
                self.timers.pop(o.key, None)
            elif isinstance(o, Reply):
                answer = o.body
            elif isinstance(o, Persist):
                self.log.append(o.record)
            elif isinstance(o, LogEvent) and o.event == "consumer_static_member_replaced":
                note_event("a static member took its old place")
            elif isinstance(o, LogEvent) and o.event == "consumer_member_removed":
                # The coordinator let the member go (timeout): its client is fenced and gives up
                # what it held (Kafka's client does on its own session/poll timeout).
                gone = self.by_member.pop(o.fields["member_id"], None)
                if gone is not None and gone.member_id == o.fields["member_id"]:
                    gone.drop_all()
        return answer

    def send(self, c: Client, req: ConsumerGroupHeartbeatRequest) -> None:
        answer = self.run(self.g.heartbeat(req, "r", "client", "host", self.now, dict(self.topics)))
        assert answer is not None
        if answer.error_code:
            assert answer.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID,
                                         ErrorCode.UNRELEASED_INSTANCE_ID), answer
            note_event(f"refused {ErrorCode(answer.error_code).name}")
            self.by_member.pop(c.member_id, None)
            c.drop_all()
            return
        if req.member_epoch < 0:
            self.by_member.pop(c.member_id, None)
            c.drop_all()
            return
        c.member_id, c.epoch, c.joined = answer.member_id or "", answer.member_epoch, True
        self.by_member[c.member_id] = c
        if answer.assignment is not None:
            given = {(t, p) for t, ps in answer.assignment.items() for p in ps}
            c.revoking |= c.held - given
            c.held |= given

    def heartbeat(self, c: Client, ack: bool) -> None:
        self.send(c, hb_req(c.member_id, c.epoch, c.owned() if ack else None, instance=c.instance))

    def advance(self, ms: int) -> None:
        self.now += ms
        while True:
            due = sorted((deadline, key) for key, deadline in self.timers.items() if deadline <= self.now)
            if not due:
                return
            deadline, key = due[0]
            del self.timers[key]
            self.run(self.g.timer(key, max(deadline, 0)))

    # ---- rules

    @rule(i=st.integers(0, CLIENTS - 1), topics=st.sampled_from([["a"], ["a", "b"], ["b", "c"], ["a", "b", "c"]]))
    def join(self, i: int, topics: list[str]) -> None:
        c = self.clients[i]
        if c.joined:
            return
        c.crashed, c.topics = False, topics
        if c.instance is not None:  # a static member (re)starts with a new member id
            self.send(c, join_req("", topics, instance=c.instance))
        else:
            self.send(c, join_req(c.member_id if c.member_id in self.g.members else "", topics))

    @rule(i=st.integers(0, CLIENTS - 1), ack=st.booleans())
    def heartbeat_rule(self, i: int, ack: bool) -> None:
        c = self.clients[i]
        if c.joined and not c.crashed:
            self.heartbeat(c, ack)

    @rule(i=st.integers(0, CLIENTS - 1))
    def finish_revocation(self, i: int) -> None:
        c = self.clients[i]
        c.held -= c.revoking
        c.revoking.clear()

    @rule(i=st.integers(0, CLIENTS - 1), epoch=st.sampled_from([-1, -2]))
    def leave(self, i: int, epoch: int) -> None:
        c = self.clients[i]
        if c.joined and not c.crashed and (epoch == -1 or c.instance is not None):
            self.send(c, hb_req(c.member_id, epoch, instance=c.instance))

    @rule(i=st.integers(0, 1))
    def static_restart(self, i: int) -> None:
        """A static member's clean restart: -2, then a join under a new member id that takes its place."""
        c = self.clients[i]
        if c.joined and not c.crashed:
            self.send(c, hb_req(c.member_id, -2, instance=c.instance))
            self.send(c, join_req("", c.topics, instance=c.instance))
            assert c.joined

    @rule(i=st.integers(0, 1))
    def restart_after_crash(self, i: int) -> None:
        """A crashed static member restarts: refused (UNRELEASED_INSTANCE_ID) until its old
        member is gone."""
        c = self.clients[i]
        if c.crashed:
            c.crashed, c.joined = False, False
            self.send(c, join_req("", c.topics, instance=c.instance))

    @rule(i=st.integers(0, CLIENTS - 1))
    def crash(self, i: int) -> None:
        c = self.clients[i]
        if c.joined:
            c.crashed = True
            c.held.clear()
            c.revoking.clear()

    @rule(i=st.integers(0, CLIENTS - 1), topics=st.sampled_from([["a"], ["c"], ["a", "c"]]))
    def resubscribe(self, i: int, topics: list[str]) -> None:
        c = self.clients[i]
        if c.joined and not c.crashed:
            c.topics = topics
            self.send(c, hb_req(c.member_id, c.epoch, c.owned(), instance=c.instance, subscribed_topic_names=topics))

    @rule(topic=st.sampled_from(["a", "b", "c"]))
    def add_partition(self, topic: str) -> None:
        self.topics[topic] += 1

    @rule(ms=st.sampled_from([1_000, 10_000, 40_000]))
    def time_passes(self, ms: int) -> None:
        # Live clients heartbeat often enough; crashed ones do not.
        for c in self.clients:
            if c.joined and not c.crashed:
                self.heartbeat(c, ack=True)
        self.advance(ms)

    @rule()
    def converge(self) -> None:
        """Every live member finishes its revocations and heartbeats with its partitions; crashed
        ones time out. Then every subscribed partition is owned by exactly one live client."""
        for _ in range(12):
            for c in self.clients:
                if c.joined and not c.crashed:
                    c.held -= c.revoking
                    c.revoking.clear()
                    self.heartbeat(c, ack=True)
            self.advance(INTERVAL_MS)
        live = [c for c in self.clients if c.joined and not c.crashed]
        assert {c.member_id for c in live} == set(self.g.members)
        note_event(f"converged with {len(live)} live members")
        if not live:
            return
        assert self.g.state.value == "Stable", (self.g.state, view(self.g))
        wanted = {(t, p) for c in live for t in c.topics if t in self.topics for p in range(self.topics[t])}
        owned = [tp for c in live for tp in c.held]
        assert sorted(owned) == sorted(wanted)
        for c in live:
            assert {(t, p) for t, ps in self.g.members[c.member_id].progress.assigned.items() for p in ps} == c.held

    @rule()
    def coordinator_restarts(self) -> None:
        """The coordinator restarts: the group is what its log (framed, compacted) restores; every
        member's session and revocation start again from now."""
        if not self.log:
            return  # nothing was ever written: the group never had a member
        ids = self.g.new_member_id  # the restarted coordinator's ids are new ones (Kafka: random UUIDs)
        self.g, _ = make_group(assignor=RandomAssignor("uniform", self.seed))
        self.g.new_member_id = ids
        self.timers.clear()
        note_event("coordinator restarted")
        self.run(self.g.restore(*records_of(self.log), self.now, dict(self.topics)))

    # ---- invariants

    @invariant()
    def the_log_restores_the_group(self) -> None:
        if hasattr(self, "g") and self.log:
            assert durable_view(restored(self.log, self.now, self.topics)) == durable_view(self.g)

    @invariant()
    def no_partition_has_two_holders(self) -> None:
        if not hasattr(self, "g"):
            return
        seen: dict[tuple[str, int], str] = {}
        for mid, m in self.g.members.items():
            for t, ps in m.progress.held().items():
                for p in ps:
                    assert (t, p) not in seen, f"{t}-{p} held by {seen[(t, p)]} and {mid}"
                    seen[(t, p)] = mid
        assert seen == self.g.holders
        clients: dict[tuple[str, int], int] = {}
        for i, c in enumerate(self.clients):
            for tp in c.held:
                assert tp not in clients, f"{tp} held by clients {clients[tp]} and {i}"
                clients[tp] = i
            if c.joined and not c.crashed:
                assert c.held <= {(t, p) for t, ps in self.g.members[c.member_id].progress.held().items() for p in ps}


def records_of(log: list) -> tuple[ConsumerGroupRecord, list[ConsumerMemberRecord]]:
    """The group's records after a trip through the log's framing and compaction."""
    frames, stats = decode_frames(b"".join(encode_frame(r) for r in live(log)))
    assert stats.corrupt_records == 0
    (group,) = [r for r in frames if isinstance(r, ConsumerGroupRecord)]
    return group, [r for r in frames if isinstance(r, ConsumerMemberRecord)]


def restored(log: list, now: int, topics: Mapping[str, int]) -> ConsumerGroup:
    g, _ = make_group()
    g.restore(*records_of(log), now, dict(topics))
    return g


def durable_view(g: ConsumerGroup) -> dict[str, Any]:
    """What a restart must keep (not heartbeat times and timers, which start again)."""
    return {"epochs": (g.group_epoch, g.assignment_epoch), "assignor": g.assignor_name, "state": g.state,
            "metadata": g.subscription_metadata, "static": g.static_members, "holders": g.holders,
            "members": sorted((m.record(g.group_id, g.target.get(m.member_id, {})) for m in g.members.values()),
                              key=lambda r: r.member_id),  # (a restart need not keep the join order)
            "regex": {m.member_id: m.regex_topics for m in g.members.values()},
            "revoking": g.revoking_since_epoch}


TestConsumerGroupRandomSequences = ConsumerGroupMachine.TestCase
TestConsumerGroupRandomSequences.settings = settings(
    max_examples=300, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
