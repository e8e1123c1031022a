"""Tests of the pure ConsumerCoordinator (consumer/coordinator.py).

Part 1 drives one member step by step with hand-made responses and checks its state and the exact
outputs (log events aside) after every input. Part 2 runs members against the real pure Broker in
the in-memory harness of tests/pair.py, checking after every step that no partition is owned by two
STABLE members of one generation and that the group's generation never goes back.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grouplab.consumer.assignors import get_assignor
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import (
    JOIN_GRACE_MS,
    ConsumerCoordinator,
    MemberState,
    PartitionsAssigned,
    PartitionsLost,
    PartitionsRevoked,
    Reconnect,
    Send,
)
from grouplab.protocol.consumer_protocol import decode_assignment, decode_subscription, encode_assignment, encode_subscription
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    LeaveGroupResponse,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
    SyncGroupRequest,
    SyncGroupResponse,
)
from grouplab.protocol.types import Assignment, Subscription, TopicPartition

from tests.pair import Pair, consumer_config

GROUP = "g"
SESSION = 10_000
HEARTBEAT = 3_000
MAX_POLL = 60_000
BACKOFF = 100
META_AGE = 30_000
REQUEST_DEADLINE = MAX_POLL + JOIN_GRACE_MS

POLL = ("poll",)
HB = ("heartbeat",)
REJOIN = ("rejoin",)
META = ("metadata",)
REQ = ("request",)
ALL_TIMERS = [CancelTimer(HB), CancelTimer(REJOIN), CancelTimer(META), CancelTimer(POLL), CancelTimer(REQ)]


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def config(**overrides) -> ConsumerConfig:
    values = dict(group_id=GROUP, topics=["t1", "t0"], client_id="c", assignors=["range", "roundrobin"],
                  session_timeout_ms=SESSION, heartbeat_interval_ms=HEARTBEAT, max_poll_interval_ms=MAX_POLL,
                  retry_backoff_ms=BACKOFF, metadata_max_age_ms=META_AGE)
    values.update(overrides)
    return ConsumerConfig(**values)


def core(outputs: list) -> list:
    """The outputs that matter to the shell, in order: everything but log events."""
    assert all(o is not None for o in outputs)
    return [o for o in outputs if not isinstance(o, LogEvent)]


def sends(outputs: list) -> list[Send]:
    return [o for o in outputs if isinstance(o, Send)]


def subscription_bytes(topics=("t0", "t1"), owned=(), generation=-1) -> bytes:
    return encode_subscription(Subscription(topics=sorted(topics), owned_partitions=sorted(owned), generation_id=generation))


def join_request(member_id: str, owned=(), generation=-1, reason="starting", cfg: ConsumerConfig | None = None) -> JoinGroupRequest:
    cfg = cfg or config()
    meta = subscription_bytes(cfg.topics, owned, generation)
    return JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=cfg.session_timeout_ms, rebalance_timeout_ms=cfg.max_poll_interval_ms,
        member_id=member_id, protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name, meta) for name in cfg.assignors],
        group_instance_id=cfg.group_instance_id, reason=reason,
    )


def join_outputs(cid: int, now: int, member_id: str, owned=(), generation=-1, reason="starting", revoked=None) -> list:
    out = [PartitionsRevoked(revoked)] if revoked else []
    return out + [CancelTimer(HB), CancelTimer(META),
                  Send(cid, "JoinGroup", join_request(member_id, owned, generation, reason)),
                  ArmTimer(REQ, now + REQUEST_DEADLINE)]


def metadata_response(**counts: int) -> MetadataResponse:
    return MetadataResponse(topics=[
        MetadataResponseTopic(name=t, partitions=[MetadataResponsePartition(p, 0) for p in range(n)])
        for t, n in counts.items()
    ])


def sync_response(partitions: list[TopicPartition], protocol="range") -> SyncGroupResponse:
    return SyncGroupResponse(protocol_type="consumer", protocol_name=protocol,
                             assignment=encode_assignment(Assignment(sorted(partitions))))


def follower_join_response(member_id="m1", generation=1, leader="m0", protocol="range") -> JoinGroupResponse:
    return JoinGroupResponse(generation_id=generation, protocol_type="consumer", protocol_name=protocol,
                             leader=leader, member_id=member_id)


def state_of(c: ConsumerCoordinator) -> tuple:
    return (c.state, c.member_id, c.generation_id, c.leader_id, c.protocol_name, sorted(c.owned))


def last_cid(outputs: list) -> int:
    return sends(outputs)[-1].correlation_id


ASSIGNED = [tp("t0", 1), tp("t1", 1)]


def stable_follower(now: int = 30) -> tuple[ConsumerCoordinator, int]:
    """A follower `m1` STABLE in generation 1 owning ASSIGNED; returns it and the next free correlation id."""
    c = ConsumerCoordinator(config())
    cid = last_cid(c.start(0))
    cid = last_cid(c.on_response(cid, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m1"), 10))
    cid = last_cid(c.on_response(cid, follower_join_response(), 20))
    c.on_response(cid, sync_response(ASSIGNED), now)
    assert state_of(c) == (MemberState.STABLE, "m1", 1, "m0", "range", ASSIGNED)
    return c, cid + 1


def stable_leader(counts=None, now: int = 40) -> tuple[ConsumerCoordinator, int]:
    """A leader `m0` of {m0, m1} STABLE in generation 1 (range over t0:3, t1:3 -> t0[0,1] t1[0,1])."""
    counts = counts or {"t0": 3, "t1": 3}
    c = ConsumerCoordinator(config())
    cid = last_cid(c.start(0))
    cid = last_cid(c.on_response(cid, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m0"), 10))
    members = [JoinGroupResponseMember("m0", subscription_bytes()), JoinGroupResponseMember("m1", subscription_bytes())]
    resp = JoinGroupResponse(generation_id=1, protocol_type="consumer", protocol_name="range", leader="m0",
                             member_id="m0", members=members)
    cid = last_cid(c.on_response(cid, resp, 20))
    cid = last_cid(c.on_response(cid, metadata_response(**counts), 30))
    mine = get_assignor("range").assign(counts, {m.member_id: decode_subscription(m.metadata) for m in members})["m0"]
    c.on_response(cid, sync_response(mine), now)
    assert c.state is MemberState.STABLE and c.leader_id == c.member_id == "m0"
    return c, cid + 1


# ============================================================================ part 1: one member


def test_start_sends_join_with_every_assignor_and_arms_the_poll_timer():
    c = ConsumerCoordinator(config())
    out = c.start(0)
    assert core(out) == [ArmTimer(POLL, MAX_POLL)] + join_outputs(1, 0, member_id="")
    join = sends(out)[0].body
    assert join.member_id == "" and join.protocol_type == "consumer"
    assert [p.name for p in join.protocols] == ["range", "roundrobin"]  # preference order
    for p in join.protocols:
        assert decode_subscription(p.metadata) == Subscription(topics=["t0", "t1"], owned_partitions=[], generation_id=-1)
    assert join.rebalance_timeout_ms == MAX_POLL and join.session_timeout_ms == SESSION
    assert state_of(c) == (MemberState.JOINING, "", -1, "", None, [])


def test_member_id_required_joins_again_with_the_given_id():
    c = ConsumerCoordinator(config())
    c.start(0)
    out = c.on_response(1, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m1"), 5)
    assert core(out) == join_outputs(2, 5, member_id="m1")
    assert state_of(c) == (MemberState.JOINING, "m1", -1, "", None, [])


def test_follower_syncs_with_no_assignments_and_becomes_stable_with_its_partitions():
    c = ConsumerCoordinator(config())
    c.start(0)
    c.on_response(1, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m1"), 5)

    out = c.on_response(2, follower_join_response(), 10)
    assert core(out) == [
        Send(3, "SyncGroup", SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="m1", group_instance_id=None,
                                              protocol_type="consumer", protocol_name="range", assignments=[])),
        ArmTimer(REQ, 10 + REQUEST_DEADLINE),
    ]
    assert state_of(c) == (MemberState.SYNCING, "m1", 1, "m0", "range", [])

    out = c.on_response(3, sync_response(ASSIGNED), 20)
    assert core(out) == [CancelTimer(REQ), PartitionsAssigned(ASSIGNED), ArmTimer(HB, 20 + HEARTBEAT)]
    assert state_of(c) == (MemberState.STABLE, "m1", 1, "m0", "range", ASSIGNED)


def test_leader_fetches_metadata_for_all_members_topics_and_syncs_every_members_assignment():
    c = ConsumerCoordinator(config(topics=["t0"]))
    c.start(0)
    c.on_response(1, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m0"), 5)
    members = [
        JoinGroupResponseMember("m0", subscription_bytes(["t0"])),
        JoinGroupResponseMember("m1", subscription_bytes(["t0", "t1"])),
        JoinGroupResponseMember("m2", subscription_bytes(["t2"])),
    ]
    resp = JoinGroupResponse(generation_id=4, protocol_type="consumer", protocol_name="roundrobin", leader="m0",
                             member_id="m0", members=members)
    out = c.on_response(2, resp, 10)
    assert core(out) == [Send(3, "Metadata", MetadataRequest(
        topics=[MetadataRequestTopic("t0"), MetadataRequestTopic("t1"), MetadataRequestTopic("t2")],
        allow_auto_topic_creation=True))]
    assert state_of(c) == (MemberState.JOINING, "m0", 4, "m0", "roundrobin", [])

    counts = {"t0": 4, "t1": 2, "t2": 3}
    out = c.on_response(3, metadata_response(**counts), 20)
    assert core(out)[1:] == [ArmTimer(REQ, 20 + REQUEST_DEADLINE)]
    (sync,) = sends(out)
    assert sync.api == "SyncGroup" and sync.correlation_id == 4
    body = sync.body
    assert (body.group_id, body.generation_id, body.member_id, body.protocol_type, body.protocol_name) == (
        GROUP, 4, "m0", "consumer", "roundrobin")
    subs = {m.member_id: decode_subscription(m.metadata) for m in members}
    expected = get_assignor("roundrobin").assign(counts, subs)
    got = {a.member_id: decode_assignment(a.assignment).partitions for a in body.assignments}
    assert got == {m: sorted(ps) for m, ps in expected.items()}
    assert set(got) == {"m0", "m1", "m2"}
    assert state_of(c) == (MemberState.SYNCING, "m0", 4, "m0", "roundrobin", [])

    out = c.on_response(4, sync_response(got["m0"], "roundrobin"), 30)
    assert core(out) == [CancelTimer(REQ), PartitionsAssigned(got["m0"]), ArmTimer(HB, 30 + HEARTBEAT),
                         ArmTimer(META, 30 + META_AGE)]
    assert state_of(c) == (MemberState.STABLE, "m0", 4, "m0", "roundrobin", got["m0"])
    assert c.assigned_metadata == counts


def test_heartbeat_timer_sends_at_most_one_heartbeat_and_rearms():
    c, cid = stable_follower(now=30)
    out = c.on_timer(HB, 3_030)
    assert core(out) == [Send(cid, "Heartbeat", HeartbeatRequest(GROUP, 1, "m1", None)), ArmTimer(HB, 6_030)]
    # no answer yet: the next firing does not send a second one
    assert core(c.on_timer(HB, 6_030)) == [ArmTimer(HB, 9_030)]
    assert core(c.on_response(cid, HeartbeatResponse(), 6_100)) == []
    assert c.last_heartbeat_ack_ms == 6_100
    out = c.on_timer(HB, 9_030)
    assert core(out) == [Send(cid + 1, "Heartbeat", HeartbeatRequest(GROUP, 1, "m1", None)), ArmTimer(HB, 12_030)]
    assert state_of(c) == (MemberState.STABLE, "m1", 1, "m0", "range", ASSIGNED)


def test_no_heartbeat_answer_within_the_session_timeout_reconnects_and_rejoins_after_backoff():
    c, cid = stable_follower(now=30)
    c.on_timer(HB, 3_030)  # heartbeat `cid` is never answered
    out = c.on_timer(HB, 30 + SESSION)
    assert core(out) == [Reconnect("no heartbeat answer within session.timeout.ms"), CancelTimer(HB), CancelTimer(META),
                         CancelTimer(REQ), ArmTimer(REJOIN, 30 + SESSION + BACKOFF)]
    assert c.state is MemberState.UNJOINED
    assert core(c.on_response(cid, HeartbeatResponse(), 30 + SESSION + 1)) == []  # the lost connection's answer
    out = c.on_timer(REJOIN, 30 + SESSION + BACKOFF)
    assert core(out) == join_outputs(cid + 1, 30 + SESSION + BACKOFF, "m1", (), 1, "coordinator unresponsive",
                                     revoked=ASSIGNED)


def test_rebalance_in_progress_revokes_everything_before_rejoining_with_the_member_id():
    c, cid = stable_follower()
    c.on_timer(HB, 3_030)
    out = c.on_response(cid, HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS), 3_040)
    assert core(out) == [CancelTimer(HB), CancelTimer(META), CancelTimer(REQ)] + join_outputs(
        cid + 1, 3_040, "m1", (), 1, "Heartbeat: REBALANCE_IN_PROGRESS", revoked=ASSIGNED)
    assert state_of(c) == (MemberState.JOINING, "m1", 1, "m0", "range", [])


def test_illegal_generation_loses_partitions_resets_the_generation_and_rejoins():
    c, cid = stable_follower()
    c.on_timer(HB, 3_030)
    out = c.on_response(cid, HeartbeatResponse(error_code=ErrorCode.ILLEGAL_GENERATION), 3_040)
    assert core(out) == [PartitionsLost(ASSIGNED), CancelTimer(HB), CancelTimer(META), CancelTimer(REQ)] + join_outputs(
        cid + 1, 3_040, "m1", (), -1, "Heartbeat: ILLEGAL_GENERATION")
    assert state_of(c) == (MemberState.JOINING, "m1", -1, "m0", "range", [])


def test_unknown_member_id_loses_partitions_resets_the_member_and_rejoins():
    c, cid = stable_follower()
    c.on_timer(HB, 3_030)
    out = c.on_response(cid, HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID), 3_040)
    assert core(out) == [PartitionsLost(ASSIGNED), CancelTimer(HB), CancelTimer(META), CancelTimer(REQ)] + join_outputs(
        cid + 1, 3_040, "", (), -1, "Heartbeat: UNKNOWN_MEMBER_ID")
    assert state_of(c) == (MemberState.JOINING, "", -1, "m0", "range", [])


@pytest.mark.parametrize("code", [ErrorCode.FENCED_INSTANCE_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL])
def test_fatal_error_on_heartbeat_fails_the_member_for_good(code):
    c, cid = stable_follower()
    c.on_timer(HB, 3_030)
    out = c.on_response(cid, HeartbeatResponse(error_code=code), 3_040)
    assert core(out) == [PartitionsLost(ASSIGNED)] + ALL_TIMERS
    assert c.state is MemberState.FAILED and c.fatal_error is code and c.owned == []
    # nothing more is ever sent
    for key in (HB, REJOIN, META, POLL, REQ):
        assert sends(c.on_timer(key, 500_000)) == []
    assert core(c.poll(500_001)) == []
    assert core(c.on_response(cid + 1, HeartbeatResponse(), 500_002)) == []
    assert core(c.on_disconnect(500_003)) == []
    assert c.state is MemberState.FAILED


@pytest.mark.parametrize("code", [ErrorCode.FENCED_INSTANCE_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL])
def test_fatal_error_on_join(code):
    c = ConsumerCoordinator(config())
    c.start(0)
    out = c.on_response(1, JoinGroupResponse(error_code=code, error_message="no"), 5)
    assert core(out) == ALL_TIMERS
    assert state_of(c) == (MemberState.FAILED, "", -1, "", None, []) and c.fatal_error is code


def test_retriable_join_error_backs_off_then_rejoins():
    c = ConsumerCoordinator(config())
    c.start(0)
    out = c.on_response(1, JoinGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE), 7)
    assert core(out) == [CancelTimer(HB), CancelTimer(META), CancelTimer(REQ), ArmTimer(REJOIN, 7 + BACKOFF)]
    assert state_of(c) == (MemberState.UNJOINED, "", -1, "", None, [])
    out = c.on_timer(REJOIN, 7 + BACKOFF)
    assert core(out) == join_outputs(2, 7 + BACKOFF, "", reason="JoinGroup: COORDINATOR_NOT_AVAILABLE")
    assert c.state is MemberState.JOINING


def test_rebalance_in_progress_on_sync_rejoins_at_once():
    c = ConsumerCoordinator(config())
    c.start(0)
    c.on_response(1, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m1"), 5)
    c.on_response(2, follower_join_response(), 10)
    out = c.on_response(3, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS), 20)
    assert core(out) == [CancelTimer(HB), CancelTimer(META), CancelTimer(REQ)] + join_outputs(
        4, 20, "m1", (), 1, "SyncGroup: REBALANCE_IN_PROGRESS")
    assert state_of(c) == (MemberState.JOINING, "m1", 1, "m0", "range", [])


@pytest.mark.parametrize("case", ["old_cid", "unknown_cid", "wrong_type", "sync_while_joining"])
def test_stale_responses_change_nothing(case):
    c = ConsumerCoordinator(config())
    c.start(0)
    c.on_response(1, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m1"), 5)
    before = state_of(c)
    if case == "old_cid":  # the first join, already answered
        out = c.on_response(1, follower_join_response(), 6)
    elif case == "unknown_cid":
        out = c.on_response(99, follower_join_response(), 6)
    elif case == "wrong_type":  # a heartbeat answer to our JoinGroup's correlation id
        out = c.on_response(2, HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID), 6)
    else:
        out = c.on_response(2, sync_response(ASSIGNED), 6)
    assert core(out) == []
    assert state_of(c) == before


def test_stale_responses_while_stable_change_nothing():
    c, cid = stable_follower()
    before = state_of(c)
    for old in range(1, cid):
        assert core(c.on_response(old, HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID), 100)) == []
        assert core(c.on_response(old, SyncGroupResponse(error_code=ErrorCode.ILLEGAL_GENERATION), 100)) == []
        assert core(c.on_response(old, follower_join_response(generation=7), 100)) == []
    assert state_of(c) == before


def test_a_previous_generations_heartbeat_answer_is_ignored():
    c, cid = stable_leader(now=40)
    owned = sorted(c.owned)
    c.on_timer(HB, 3_040)  # heartbeat `cid` of generation 1: its answer comes late
    c.on_timer(META, 40 + META_AGE)  # Metadata cid+1
    c.on_response(cid + 1, metadata_response(t0=4, t1=3), 30_050)  # changed: JoinGroup cid+2
    members = [JoinGroupResponseMember("m0", subscription_bytes()), JoinGroupResponseMember("m1", subscription_bytes())]
    c.on_response(cid + 2, JoinGroupResponse(generation_id=2, protocol_type="consumer", protocol_name="range",
                                             leader="m0", member_id="m0", members=members), 30_060)
    c.on_response(cid + 3, metadata_response(t0=4, t1=3), 30_070)
    c.on_response(cid + 4, sync_response(owned), 30_080)
    assert state_of(c) == (MemberState.STABLE, "m0", 2, "m0", "range", owned)
    assert core(c.on_response(cid, HeartbeatResponse(error_code=ErrorCode.ILLEGAL_GENERATION), 30_090)) == []
    assert state_of(c) == (MemberState.STABLE, "m0", 2, "m0", "range", owned)
    # a heartbeat of generation 2 goes out at the next firing
    assert sends(c.on_timer(HB, 33_080)) == [Send(cid + 5, "Heartbeat", HeartbeatRequest(GROUP, 2, "m0", None))]


def test_leader_metadata_watch_rearms_when_nothing_changed():
    c, cid = stable_leader(now=40)
    assert c.assigned_metadata == {"t0": 3, "t1": 3}
    out = c.on_timer(META, 40 + META_AGE)
    assert core(out) == [Send(cid, "Metadata", MetadataRequest([MetadataRequestTopic("t0"), MetadataRequestTopic("t1")]))]
    out = c.on_response(cid, metadata_response(t0=3, t1=3), 40 + META_AGE + 5)
    assert core(out) == [ArmTimer(META, 40 + META_AGE + 5 + META_AGE)]
    assert c.state is MemberState.STABLE


def test_leader_metadata_watch_rejoins_when_a_partition_count_changed():
    c, cid = stable_leader(now=40)
    owned = sorted(c.owned)
    c.on_timer(META, 40 + META_AGE)
    now = 40 + META_AGE + 5
    out = c.on_response(cid, metadata_response(t0=6, t1=3), now)
    assert core(out) == [CancelTimer(HB), CancelTimer(META), CancelTimer(REQ)] + join_outputs(
        cid + 1, now, "m0", (), 1, "partition count changed: {'t0': [3, 6]}", revoked=owned)
    assert state_of(c) == (MemberState.JOINING, "m0", 1, "m0", "range", [])


def test_followers_do_not_watch_metadata():
    c, cid = stable_follower()
    assert core(c.on_timer(META, 40 + META_AGE)) == []


def test_poll_timeout_loses_partitions_leaves_and_the_next_poll_rejoins():
    c, cid = stable_follower(now=30)
    c.on_timer(HB, 3_030)
    c.on_response(cid, HeartbeatResponse(), 3_040)
    # poll() was last called at start (0): the poll timer fires at MAX_POLL
    out = c.on_timer(POLL, MAX_POLL)
    assert core(out) == [
        PartitionsLost(ASSIGNED),
        Send(cid + 1, "LeaveGroup", LeaveGroupRequest(GROUP, [LeaveGroupRequestMember("m1", None, "consumer poll timeout has expired")])),
        CancelTimer(HB), CancelTimer(META), CancelTimer(REQ), CancelTimer(REJOIN), ArmTimer(POLL, 2 * MAX_POLL),
    ]
    assert state_of(c) == (MemberState.UNJOINED, "", -1, "m0", "range", [])
    # the heartbeat timer is cancelled, but a firing already on its way does nothing
    assert core(c.on_timer(HB, MAX_POLL + 1)) == []
    out = c.poll(MAX_POLL + 10)
    assert core(out) == join_outputs(cid + 2, MAX_POLL + 10, "", reason="poll timeout")
    assert c.state is MemberState.JOINING
    # the LeaveGroup's answer arriving afterwards changes nothing
    assert core(c.on_response(cid + 1, LeaveGroupResponse(), MAX_POLL + 20)) == []
    assert c.state is MemberState.JOINING


def test_poll_timer_rearms_from_the_last_poll_when_polled_in_time():
    c, _ = stable_follower(now=30)
    assert core(c.poll(20_000)) == []
    assert core(c.on_timer(POLL, MAX_POLL)) == [ArmTimer(POLL, 20_000 + MAX_POLL)]
    assert c.state is MemberState.STABLE


def test_close_revokes_then_leaves_and_cancels_every_timer():
    c, cid = stable_follower()
    out = c.close(100)
    assert core(out) == [
        PartitionsRevoked(ASSIGNED),
        Send(cid, "LeaveGroup", LeaveGroupRequest(GROUP, [LeaveGroupRequestMember("m1", None, "the consumer is closing")])),
    ] + ALL_TIMERS
    assert c.state is MemberState.CLOSED and c.owned == []
    assert core(c.close(101)) == []
    assert core(c.on_response(cid, LeaveGroupResponse(), 102)) == []
    assert sends(c.on_timer(HB, 3_100)) == [] and sends(c.poll(3_101)) == []


def test_close_before_having_a_member_id_sends_no_leave():
    c = ConsumerCoordinator(config())
    c.start(0)
    assert core(c.close(5)) == ALL_TIMERS
    assert c.state is MemberState.CLOSED


def test_disconnect_while_stable_keeps_the_generation_and_heartbeats_on_after_reconnecting():
    """Kafka's member does not rejoin when it loses its coordinator: it keeps its generation and
    partitions, and heartbeats again once connected (a restarted coordinator that restored the
    group accepts them; otherwise the heartbeat's error makes it rejoin)."""
    c, cid = stable_follower()
    c.on_timer(HB, 3_030)  # heartbeat cid in flight
    out = c.on_disconnect(3_050)
    assert core(out) == []
    assert state_of(c) == (MemberState.STABLE, "m1", 1, "m0", "range", ASSIGNED)
    assert core(c.on_response(cid, HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID), 3_060)) == []  # lost one
    assert state_of(c) == (MemberState.STABLE, "m1", 1, "m0", "range", ASSIGNED)
    # the forgotten heartbeat does not block the next one, in the same generation
    assert sends(c.on_timer(HB, 6_030)) == [Send(cid + 1, "Heartbeat", HeartbeatRequest(GROUP, 1, "m1", None))]
    assert core(c.on_response(cid + 1, HeartbeatResponse(), 6_040)) == []
    assert c.last_heartbeat_ack_ms == 6_040 and state_of(c) == (MemberState.STABLE, "m1", 1, "m0", "range", ASSIGNED)


def test_disconnect_while_stable_then_a_heartbeat_error_rejoins_as_usual():
    c, cid = stable_follower()
    c.on_disconnect(3_000)
    c.on_timer(HB, 3_030)
    out = c.on_response(cid, HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID), 3_040)
    assert core(out) == [PartitionsLost(ASSIGNED), CancelTimer(HB), CancelTimer(META), CancelTimer(REQ)] + join_outputs(
        cid + 1, 3_040, "", (), -1, "Heartbeat: UNKNOWN_MEMBER_ID")


def test_disconnect_of_a_stable_leader_asks_for_its_lost_metadata_watch_again():
    c, cid = stable_leader()
    c.on_timer(META, 40 + META_AGE)  # Metadata cid in flight
    out = c.on_disconnect(40 + META_AGE + 5)
    assert core(out) == [ArmTimer(META, 40 + META_AGE + 5 + BACKOFF)]
    assert sends(c.on_timer(META, 40 + META_AGE + 5 + BACKOFF))[0].api == "Metadata"
    assert c.state is MemberState.STABLE and c.generation_id == 1


def test_disconnect_while_joining_rejoins_after_backoff_and_forgets_in_flight_requests():
    c = ConsumerCoordinator(config())
    c.start(0)
    c.on_response(1, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m1"), 5)  # JoinGroup 2
    out = c.on_disconnect(50)
    assert core(out) == [CancelTimer(HB), CancelTimer(META), CancelTimer(REQ), ArmTimer(REJOIN, 50 + BACKOFF)]
    assert state_of(c) == (MemberState.UNJOINED, "m1", -1, "", None, [])
    assert core(c.on_response(2, follower_join_response(), 60)) == []  # the lost connection's answer
    out = c.on_timer(REJOIN, 50 + BACKOFF)
    assert core(out) == join_outputs(3, 50 + BACKOFF, "m1", reason="coordinator connection lost")


def test_disconnect_while_unjoined_does_nothing():
    c = ConsumerCoordinator(config())
    assert core(c.on_disconnect(0)) == []
    assert c.state is MemberState.UNJOINED


def test_request_timeout_while_joining_reconnects_and_rejoins_after_backoff():
    c = ConsumerCoordinator(config())
    c.start(0)
    out = c.on_timer(REQ, REQUEST_DEADLINE)
    assert core(out) == [Reconnect("no answer while joining"), CancelTimer(HB), CancelTimer(META), CancelTimer(REQ),
                         ArmTimer(REJOIN, REQUEST_DEADLINE + BACKOFF)]
    assert c.state is MemberState.UNJOINED
    assert core(c.on_response(1, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="x"), REQUEST_DEADLINE + 1)) == []
    assert c.member_id == ""
    out = c.on_timer(REJOIN, REQUEST_DEADLINE + BACKOFF)
    assert core(out) == join_outputs(2, REQUEST_DEADLINE + BACKOFF, "", reason="request timed out")


def test_heartbeats_resume_after_a_request_timeout_that_dropped_an_unanswered_heartbeat():
    """A heartbeat in flight when a rejoin starts and the connection is then dropped for a request
    timeout is gone with the connection: it must not block the heartbeats of the next generation."""
    c, cid = stable_leader(now=40)
    members = [JoinGroupResponseMember("m0", subscription_bytes()), JoinGroupResponseMember("m1", subscription_bytes())]
    c.on_timer(HB, 3_040)  # Heartbeat cid: never answered
    c.on_timer(META, 40 + META_AGE)  # Metadata cid+1
    c.on_response(cid + 1, metadata_response(t0=4, t1=3), 30_050)  # changed: JoinGroup cid+2
    assert c.state is MemberState.JOINING
    out = c.on_timer(REQ, 30_050 + REQUEST_DEADLINE)
    assert Reconnect("no answer while joining") in core(out) and c.state is MemberState.UNJOINED
    now = 30_050 + REQUEST_DEADLINE + BACKOFF
    assert sends(c.on_timer(REJOIN, now))[0].api == "JoinGroup"  # cid+3
    c.on_response(cid + 3, JoinGroupResponse(generation_id=2, protocol_type="consumer", protocol_name="range",
                                             leader="m0", member_id="m0", members=members), now + 10)
    c.on_response(cid + 4, metadata_response(t0=4, t1=3), now + 20)
    c.on_response(cid + 5, sync_response([tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)]), now + 30)
    assert c.state is MemberState.STABLE and c.generation_id == 2
    out = c.on_timer(HB, now + 30 + HEARTBEAT)
    assert sends(out) == [Send(cid + 6, "Heartbeat", HeartbeatRequest(GROUP, 2, "m0", None))]


def test_a_poll_timeout_during_the_rejoin_backoff_waits_for_poll_before_rejoining():
    """After a poll timeout the member rejoins on the application's next poll(), not on a rejoin
    timer armed before the timeout."""
    c, cid = stable_follower(now=30)
    c.poll(50_000)
    # no heartbeat answered for a session: reconnect, rejoin timer at 110_090
    assert Reconnect("no heartbeat answer within session.timeout.ms") in core(c.on_timer(HB, 109_990))
    out = c.on_timer(POLL, 110_000)  # no poll since 50_000
    assert PartitionsLost(ASSIGNED) in core(out) and c.state is MemberState.UNJOINED
    assert CancelTimer(REJOIN) in core(out)  # the backoff's rejoin timer is withdrawn
    assert c.state is MemberState.UNJOINED
    out = c.poll(110_500)
    assert [s.api for s in sends(out)] == ["JoinGroup"] and c.state is MemberState.JOINING


def test_request_timer_while_stable_does_nothing():
    c, _ = stable_follower()
    assert core(c.on_timer(REQ, REQUEST_DEADLINE)) == []
    assert c.state is MemberState.STABLE


# ============================================================================ part 2: with the broker

T03_T13 = {"t0": 3, "t1": 3}


def make_pair(n: int, partitions=None, **kw) -> Pair:
    assignors = kw.pop("assignors", None)
    configs = [consumer_config(i, **({"assignors": assignors[i]} if assignors else {})) for i in range(n)]
    return Pair(configs, dict(partitions or T03_T13), **kw)


def assert_settled(pair: Pair, within_ms: int = 30_000) -> None:
    assert pair.run_until(lambda p: p.settled(), within_ms), (
        f"not settled at t={pair.now}: group={pair.group.state if pair.group else None} "
        f"members={[(m.member_id, m.state.value, m.generation_id, m.owned) for m in pair.members]}")
    assert pair.violations == []


def test_pair_three_members_reach_one_stable_generation_with_a_complete_disjoint_assignment():
    pair = make_pair(3)
    pair.start()
    assert_settled(pair, 5_000)
    group = pair.group
    gens = {m.generation_id for m in pair.members}
    assert gens == {group.generation_id}
    leader = [m for m in pair.members if m.member_id == group.leader_id]
    assert len(leader) == 1 and all(m.leader_id == group.leader_id for m in pair.members)
    subs = {m.member_id: Subscription(topics=["t0", "t1"]) for m in pair.members}
    assert pair.assignments() == get_assignor("range").assign(T03_T13, subs)
    # it stays settled: heartbeats keep going, no rebalance
    gen = group.generation_id
    pair.run_for(30_000)
    assert pair.settled() and pair.group.generation_id == gen and pair.violations == []


def test_pair_a_member_closing_makes_the_others_rebalance_and_cover_everything():
    pair = make_pair(3)
    pair.start()
    assert_settled(pair, 5_000)
    gen = pair.group.generation_id
    owned = list(pair.members[1].owned)
    pair.close(1)
    assert pair.listener_calls[1][-1] == PartitionsRevoked(owned)
    assert_settled(pair, 5_000)
    assert pair.group.generation_id > gen
    assert len(pair.group.members) == 2
    assert pair.members[1].state is MemberState.CLOSED and pair.members[1].owned == []


def test_pair_a_silent_member_is_removed_after_the_session_timeout():
    pair = make_pair(3)
    pair.start()
    assert_settled(pair, 5_000)
    gen = pair.group.generation_id
    silent = pair.members[2].member_id
    t0 = pair.now
    pair.isolate(2)
    assert pair.run_until(lambda p: silent not in p.group.members, 20_000)
    session = pair.configs[2].session_timeout_ms
    assert session <= pair.now - t0 <= session + pair.configs[2].heartbeat_interval_ms
    assert any(e.event == "member_removed" and e.fields["reason"] == "session_timeout" for e in pair.broker_events)
    assert_settled(pair, 10_000)
    assert pair.group.generation_id > gen and set(pair.group.members) == {pair.members[0].member_id, pair.members[1].member_id}


@pytest.mark.parametrize(
    "prefs, expected",
    [
        ([["range", "roundrobin"], ["roundrobin", "range"], ["roundrobin", "range"]], "roundrobin"),
        ([["roundrobin", "range"], ["range", "roundrobin"], ["range", "roundrobin"]], "range"),
        ([["range"], ["roundrobin", "range"], ["roundrobin", "range"]], "range"),  # the only common one
    ],
)
def test_pair_protocol_vote(prefs, expected):
    pair = make_pair(3, {"t0": 5, "t1": 2}, assignors=prefs)
    pair.start()
    assert_settled(pair, 5_000)
    assert pair.group.protocol_name == expected
    assert {m.protocol_name for m in pair.members} == {expected}
    subs = {m.member_id: Subscription(topics=["t0", "t1"]) for m in pair.members}
    assert pair.assignments() == get_assignor(expected).assign({"t0": 5, "t1": 2}, subs)


def test_pair_partition_count_change_is_noticed_by_the_leaders_metadata_watch():
    pair = make_pair(3)
    pair.start()
    assert_settled(pair, 5_000)
    gen = pair.group.generation_id
    t_change = pair.now
    pair.broker.topics.partitions["t0"] = 6
    assert not pair.settled()  # t0 3..5 are owned by nobody now
    assert_settled(pair, pair.configs[0].metadata_max_age_ms + 5_000)
    assert pair.group.generation_id == gen + 1
    assert pair.now - t_change <= pair.configs[0].metadata_max_age_ms + 1_000
    owned_t0 = sorted(tp for m in pair.members for tp in m.owned if tp.topic == "t0")
    assert owned_t0 == [tp("t0", p) for p in range(6)]


def test_pair_poll_timeout_member_leaves_and_rejoins_on_its_next_poll():
    pair = make_pair(2)
    pair.start()
    assert_settled(pair, 5_000)
    stalled = pair.members[1]
    pair.stalled.add(1)
    assert pair.run_until(lambda p: stalled.state is MemberState.UNJOINED, 25_000)
    assert isinstance(pair.listener_calls[1][-1], PartitionsLost)
    assert_settled(pair, 5_000)  # the other one alone
    assert len(pair.group.members) == 1
    pair.stalled.discard(1)
    assert_settled(pair, 5_000)  # polls resume: it comes back
    assert len(pair.group.members) == 2


def test_pair_disconnects_during_the_rebalance_still_settle():
    pair = make_pair(3, delay=lambda: 5)  # every message takes 5 ms
    pair.start()
    pair.run_for(12)  # member ids handed out, real JoinGroups on their way
    assert {m.state for m in pair.members} == {MemberState.JOINING}
    pair.disconnect(0)
    pair.run_for(10)
    pair.disconnect(1)
    assert {pair.members[0].state, pair.members[1].state} == {MemberState.UNJOINED}
    assert_settled(pair, 20_000)
    assert pair.group.generation_id >= 1


# ---------------------------------------------------------------------------- random schedules


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_pair_random_delays_and_closes_keep_the_invariants_and_settle(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 4)
    partitions = {"t0": rng.randint(1, 6), "t1": rng.randint(1, 6)}
    prefs = [rng.sample(["range", "roundrobin"], 2) for _ in range(n)]
    configs = [consumer_config(i, assignors=prefs[i]) for i in range(n)]
    pair = Pair(configs, partitions, delay=lambda: rng.randint(0, 50))
    starts = sorted(rng.randint(0, 3_000) for _ in range(n))
    disruptions = [(starts[i], "start", i) for i in range(n)]
    for i in rng.sample(range(n), rng.randint(0, n - 1)):
        disruptions.append((rng.randint(starts[i], 10_000), "close", i))
    for _ in range(rng.randint(0, 3)):
        disruptions.append((rng.randint(0, 10_000), "disconnect", rng.randrange(n)))
    disruptions.sort()
    started: set[int] = set()
    for at, what, i in disruptions:
        pair.run_for(at - pair.now) if at > pair.now else None
        if what == "start":
            pair.start([i])
            started.add(i)
        elif what == "close" and i in started:
            pair.close(i)
        elif what == "disconnect" and i in started and pair.members[i].state is not MemberState.CLOSED:
            pair.disconnect(i)
        assert pair.violations == [], (seed, pair.violations)
    assert pair.run_until(lambda p: p.settled(), 60_000), (
        seed, pair.now, pair.group.state,
        [(m.member_id, m.state.value, m.generation_id, sorted(m.owned)) for m in pair.members])
    assert pair.violations == [], (seed, pair.violations)
    # and once settled it stays so
    gen = pair.group.generation_id
    pair.run_for(10_000)
    assert pair.settled() and pair.group.generation_id == gen and pair.violations == []


# ============================================================================ cooperative and sticky


def stable_cooperative_follower(owned: list[TopicPartition]) -> tuple[ConsumerCoordinator, int]:
    c = ConsumerCoordinator(config(assignors=["cooperative-sticky"]))
    cid = last_cid(c.start(0))
    cid = last_cid(c.on_response(cid, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m1"), 10))
    cid = last_cid(c.on_response(cid, follower_join_response(protocol="cooperative-sticky"), 20))
    c.on_response(cid, sync_response(owned, protocol="cooperative-sticky"), 30)
    assert c.state is MemberState.STABLE and sorted(c.owned) == sorted(owned)
    return c, cid + 1


def test_cooperative_member_keeps_its_partitions_when_a_rebalance_starts():
    owned = [tp("t0", 0), tp("t0", 1), tp("t1", 0)]
    c, cid = stable_cooperative_follower(owned)
    c.on_timer(HB, 30 + HEARTBEAT)
    out = c.on_response(cid, HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS), 30 + HEARTBEAT + 1)
    assert not [o for o in out if isinstance(o, (PartitionsRevoked, PartitionsLost))]
    join = sends(out)[-1].body
    sub = decode_subscription(join.protocols[0].metadata)
    # KIP-429: it rejoins owning what it had, and says so, with its generation.
    assert sub.owned_partitions == sorted(owned) and sub.generation_id == 1
    assert sorted(c.owned) == sorted(owned)


def test_cooperative_member_revokes_only_what_was_taken_and_rejoins_at_once():
    owned = [tp("t0", 0), tp("t0", 1), tp("t1", 0)]
    c, cid = stable_cooperative_follower(owned)
    c.on_timer(HB, 30 + HEARTBEAT)
    out = c.on_response(cid, HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS), 3100)
    cid = last_cid(out)
    cid = last_cid(c.on_response(cid, follower_join_response(generation=2, protocol="cooperative-sticky"), 3200))
    new = [tp("t0", 0), tp("t1", 0), tp("t1", 2)]  # t0-1 taken away, t1-2 added
    out = c.on_response(cid, sync_response(new, protocol="cooperative-sticky"), 3300)
    listener_calls = [o for o in out if isinstance(o, (PartitionsRevoked, PartitionsAssigned, PartitionsLost))]
    assert listener_calls == [PartitionsRevoked([tp("t0", 1)]), PartitionsAssigned([tp("t1", 2)])]
    # It gave something up, so it rejoins straight away for the follow-up rebalance.
    join = sends(out)[-1]
    assert join.api == "JoinGroup"
    assert decode_subscription(join.body.protocols[0].metadata).owned_partitions == sorted(new)
    assert c.state is MemberState.JOINING and sorted(c.owned) == sorted(new)


def test_cooperative_member_that_lost_its_generation_loses_its_partitions():
    owned = [tp("t0", 0)]
    c, cid = stable_cooperative_follower(owned)
    c.on_timer(HB, 30 + HEARTBEAT)
    out = c.on_response(cid, HeartbeatResponse(error_code=ErrorCode.ILLEGAL_GENERATION), 3100)
    assert [o for o in out if isinstance(o, (PartitionsRevoked, PartitionsLost))] == [PartitionsLost(owned)]
    assert decode_subscription(sends(out)[-1].body.protocols[0].metadata).owned_partitions == []


def test_eager_sticky_member_remembers_its_last_assignment_in_user_data():
    c = ConsumerCoordinator(config(assignors=["sticky", "range"]))
    cid = last_cid(c.start(0))
    cid = last_cid(c.on_response(cid, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id="m1"), 10))
    cid = last_cid(c.on_response(cid, follower_join_response(protocol="sticky"), 20))
    c.on_response(cid, sync_response(ASSIGNED, protocol="sticky"), 30)
    c.on_timer(HB, 30 + HEARTBEAT)
    out = c.on_response(cid + 1, HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS), 3100)
    # Eager: everything is revoked before the JoinGroup...
    assert [o for o in out if isinstance(o, PartitionsRevoked)] == [PartitionsRevoked(ASSIGNED)]
    protocols = {p.name: decode_subscription(p.metadata) for p in sends(out)[-1].body.protocols}
    assert protocols["sticky"].owned_partitions == [] and protocols["range"].owned_partitions == []
    # ...but the sticky assignor's user data still carries the last assignment and its generation.
    from grouplab.consumer.assignors.sticky import decode_user_data

    assert decode_user_data(protocols["sticky"].user_data) == (sorted(ASSIGNED), 1)
    assert protocols["range"].user_data is None
