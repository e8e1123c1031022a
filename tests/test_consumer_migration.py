"""Kafka 4's online migration between classic and consumer-protocol groups (KIP-848), through the
Broker step by step (coordinator/consumer_classic.py, docs/protocol.md §11.8): the upgrade when a
ConsumerGroupHeartbeat joins a classic group with members, classic members served inside the
consumer group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit), the downgrade when only
classic members remain, and the migration policy. The cases follow Kafka's GroupMetadataManagerTest
(its online upgrade/downgrade and classicGroup*ToConsumerGroup tests), with grouplab's ids."""

from __future__ import annotations

from typing import Any

import pytest

from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group_log import GroupMetadataRecord
from grouplab.protocol import consumer_protocol
from grouplab.protocol.effects import ArmTimer, LogEvent, Persist, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from grouplab.protocol.states import ConsumerGroupState, GroupState
from grouplab.protocol.types import Assignment, Subscription, TopicPartition

T0 = 1_700_000_000_000
G = "g"
SESSION_MS = 10_000
REBALANCE_MS = 30_000


def broker(**config: Any) -> Broker:
    b = Broker(BrokerConfig(group_initial_rebalance_delay_ms=0, **config), SequentialMemberIds())
    b.topics.partitions.update({"t": 6})
    return b


def handle(b: Broker, api: str, body: Any, now_ms: int = T0, token: str = "r", client_id: str = "c") -> tuple[Any, list]:
    out = b.handle(api, body, RequestContext(token, client_id=client_id), now_ms)
    replies = [o.body for o in out if isinstance(o, Reply) and o.to == token]
    assert len(replies) <= 1
    return (replies[0] if replies else None), out


def metadata(topics: list[str] = ["t"], owned: list[tuple[str, int]] = []) -> bytes:
    return consumer_protocol.encode_subscription(Subscription(topics=topics,
                                                              owned_partitions=[TopicPartition(t, p) for t, p in owned]))


def assignment(*partitions: int) -> bytes:
    return consumer_protocol.encode_assignment(Assignment([TopicPartition("t", p) for p in partitions]))


def assigned(data: bytes) -> list[int]:
    return sorted(tp.partition for tp in consumer_protocol.decode_assignment(data).partitions)


def join_group(b: Broker, member_id: str = "", meta: bytes | None = None, now_ms: int = T0, token: str = "j",
               protocol_type: str = "consumer", instance_id: str | None = None, client_id: str = "k") -> Any:
    req = JoinGroupRequest(G, SESSION_MS, REBALANCE_MS, member_id, protocol_type,
                           [JoinGroupRequestProtocol("range", meta if meta is not None else metadata())],
                           group_instance_id=instance_id)
    return handle(b, "JoinGroup", req, now_ms, token, client_id)


def sync_group(b: Broker, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
               now_ms: int = T0, token: str = "s") -> Any:
    req = SyncGroupRequest(G, generation, member_id, protocol_type="consumer", protocol_name="range",
                           assignments=[SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()])
    return handle(b, "SyncGroup", req, now_ms, token)[0]


def beat(b: Broker, member_id: str, generation: int, now_ms: int = T0) -> int:
    return handle(b, "Heartbeat", HeartbeatRequest(G, generation, member_id), now_ms, "h")[0].error_code


def consumer_join(b: Broker, now_ms: int = T0, member_id: str = "") -> Any:
    req = ConsumerGroupHeartbeatRequest(G, member_id, 0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=["t"],
                                        topic_partitions=[])
    return handle(b, "ConsumerGroupHeartbeat", req, now_ms, "c", client_id="new")


def consumer_beat(b: Broker, member_id: str, epoch: int, owned: list[int], now_ms: int = T0) -> Any:
    from grouplab.protocol.messages import ConsumerGroupHeartbeatTopicPartitions
    req = ConsumerGroupHeartbeatRequest(G, member_id, epoch, topic_partitions=[ConsumerGroupHeartbeatTopicPartitions("t", owned)])
    return handle(b, "ConsumerGroupHeartbeat", req, now_ms, "c", client_id="new")[0]


def commit(b: Broker, member_id: str, generation: int, offset: int = 7) -> int:
    reply, _ = handle(b, "OffsetCommit", OffsetCommitRequest(G, [OffsetCommitRequestTopic("t", [
        OffsetCommitRequestPartition(0, offset)])], generation_id=generation, member_id=member_id), token="o")
    return reply.topics[0].partitions[0].error_code


def fetched(b: Broker) -> int:
    reply, _ = handle(b, "OffsetFetch", OffsetFetchRequest(G), token="f")
    return {(t.name, p.partition_index): p.committed_offset for t in reply.topics for p in t.partitions}.get(("t", 0), -1)


def events(out: list) -> list[str]:
    return [o.event for o in out if isinstance(o, LogEvent)]


def stable_classic_group(b: Broker) -> tuple[str, str, int]:
    """Two classic members, Stable: the leader A has partitions 0, 1, 2, B has 3, 4, 5; an offset committed."""
    a = join_group(b, client_id="a")[0].member_id
    bb = join_group(b, client_id="b", token="j2")[0].member_id
    join_group(b, a)
    join_group(b, bb, token="j2")
    while b.groups[G].state is GroupState.PREPARING_REBALANCE:  # the initial delay (0 ms here) runs out
        b.on_timer(("join", G), T0)
    generation = b.groups[G].generation_id
    sync_group(b, a, generation, {a: assignment(0, 1, 2), bb: assignment(3, 4, 5)})
    sync_group(b, bb, generation, token="s2")
    assert b.groups[G].state is GroupState.STABLE
    assert commit(b, a, generation) == ErrorCode.NONE
    return a, bb, generation


# ----------------------------------------------------------------------------------------- upgrade


def test_a_consumer_join_upgrades_a_stable_classic_group_keeping_members_assignments_and_offsets() -> None:
    b = broker()
    a, bb, generation = stable_classic_group(b)
    reply, out = consumer_join(b)
    assert reply.error_code == ErrorCode.NONE and reply.member_epoch == generation + 1
    assert reply.assignment == {}  # every partition is still held by a classic member
    assert G in b.consumer_groups and G not in b.groups
    group = b.consumer_groups[G]
    assert list(group.members) == [a, bb, reply.member_id]
    assert [m.classic is not None for m in group.members.values()] == [True, True, False]
    # Kafka's fromClassicGroup: each classic member Stable at epoch = the generation, its last assignment.
    assert {mid: (m.member_epoch, dict(m.progress.assigned)) for mid, m in group.members.items() if m.classic} == {
        a: (generation, {"t": frozenset({0, 1, 2})}), bb: (generation, {"t": frozenset({3, 4, 5})})}
    assert group.members[a].classic.session_timeout_ms == SESSION_MS
    assert group.group_epoch == generation + 1 and group.state is ConsumerGroupState.RECONCILING
    # The classic group handed its members over (Empty); the consumer group took them, Stable; the join follows.
    assert events(out)[:4] == ["state_changed", "consumer_group_state_changed", "group_converted", "consumer_member_joined"]
    # The classic group stays as the offset store, Empty, its Empty record superseding the one with members.
    persisted = [o.record for o in out if isinstance(o, Persist)]
    assert isinstance(persisted[0], GroupMetadataRecord) and persisted[0].members == [] and persisted[0].state == "Empty"
    assert fetched(b) == 7


def test_classic_members_rejoin_and_revoke_before_the_consumer_member_gets_partitions() -> None:
    b = broker()
    a, bb, generation = stable_classic_group(b)
    new = consumer_join(b)[0].member_id
    epoch = generation + 1
    # The group epoch moved past the classic members: their heartbeats say rejoin.
    assert beat(b, a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    assert beat(b, bb, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    # An eager member revoked everything before rejoining (owned = []): it moves to the new epoch at once.
    reply, _ = join_group(b, a)
    assert (reply.error_code, reply.generation_id, reply.leader, reply.members) == (ErrorCode.NONE, epoch, "", [])
    assert reply.protocol_type == "consumer" and reply.protocol_name == "range"
    synced = sync_group(b, a, epoch)
    assert synced.error_code == ErrorCode.NONE and len(assigned(synced.assignment)) == 2
    assert beat(b, a, epoch) == ErrorCode.NONE
    reply, _ = join_group(b, bb, token="j2")
    assert sync_group(b, bb, reply.generation_id, token="s2").error_code == ErrorCode.NONE
    # Now the consumer member gets what the classic members let go.
    got = consumer_beat(b, new, epoch, [])
    group = b.consumer_groups[G]
    owned = [p for m in group.members.values() for p in m.progress.held().get("t", ())]
    assert sorted(owned) == [0, 1, 2, 3, 4, 5] and len(got.assignment["t"]) == 2
    assert group.state is ConsumerGroupState.STABLE


def test_a_cooperative_member_that_still_owns_a_revoked_partition_stays_at_its_epoch_until_it_revokes() -> None:
    b = broker()
    a, bb, generation = stable_classic_group(b)
    consumer_join(b)
    reply, _ = join_group(b, a, meta=metadata(owned=[("t", 0), ("t", 1), ("t", 2)]))
    assert reply.generation_id == generation  # UNREVOKED_PARTITIONS: its epoch waits
    member = b.consumer_groups[G].members[a]
    assert member.progress.state.value == "unrevoked_partitions"
    kept = assigned(sync_group(b, a, generation).assignment)  # the sync hands it only what it keeps
    assert len(kept) == 2
    assert beat(b, a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    reply, _ = join_group(b, a, meta=metadata(owned=[("t", p) for p in kept]))
    assert reply.generation_id == generation + 1


def test_an_upgrade_of_a_group_mid_rebalance_answers_its_parked_joins_rebalance_in_progress() -> None:
    b = broker()
    a, bb, generation = stable_classic_group(b)
    _, out = join_group(b, a, meta=metadata(["t", "u"]), token="parked")  # the leader rejoins: PreparingRebalance
    assert b.groups[G].state is GroupState.PREPARING_REBALANCE and not [o for o in out if isinstance(o, Reply)]
    _, out = consumer_join(b)
    parked = [o.body for o in out if isinstance(o, Reply) and o.to == "parked"]
    assert [p.error_code for p in parked] == [ErrorCode.REBALANCE_IN_PROGRESS]
    assert G in b.consumer_groups and set(b.consumer_groups[G].members) >= {a, bb}


@pytest.mark.parametrize("policy", ["disabled", "downgrade", "DISABLED"])
def test_the_policy_may_forbid_the_upgrade(policy: str) -> None:
    b = broker(consumer_migration_policy=policy)
    a, bb, generation = stable_classic_group(b)
    reply, _ = consumer_join(b)
    assert reply.error_code == ErrorCode.GROUP_ID_NOT_FOUND and reply.error_message == (
        f"Cannot upgrade classic group {G} to consumer group because online upgrade is disabled.")
    assert not b.consumer_groups and list(b.groups[G].members) == [a, bb]
    assert b.groups[G].state is GroupState.STABLE


def test_a_group_of_another_protocol_type_or_too_many_members_is_not_upgraded() -> None:
    b = broker()
    join_group(b, protocol_type="connect")
    join_group(b, b.groups[G].pending_members and next(iter(b.groups[G].pending_members)), protocol_type="connect")
    reply, _ = consumer_join(b)
    assert reply.error_message == (f"Cannot upgrade classic group {G} to consumer group because the group does not use "
                                   f"the consumer embedded protocol.")
    b = broker(consumer_max_size=1)
    stable_classic_group(b)
    reply, _ = consumer_join(b)
    assert reply.error_message == (f"Cannot upgrade classic group {G} to consumer group because the group size exceeds "
                                   f"the consumer group maximum size.")
    assert not b.consumer_groups


def test_a_custom_assignors_user_data_refuses_the_upgrade() -> None:
    b = broker()
    a = join_group(b)[0].member_id
    join_group(b, a)
    while b.groups[G].state is GroupState.PREPARING_REBALANCE:
        b.on_timer(("join", G), T0)
    generation = b.groups[G].generation_id
    data = consumer_protocol.encode_assignment(Assignment([TopicPartition("t", 0)], user_data=b"mine"))
    sync_group(b, a, generation, {a: data})
    reply, _ = consumer_join(b)
    assert reply.error_code == ErrorCode.GROUP_ID_NOT_FOUND and "unsupported custom assignor" in reply.error_message
    assert G in b.groups and not b.consumer_groups


def test_a_join_the_consumer_group_refuses_converts_nothing() -> None:
    b = broker()
    stable_classic_group(b)
    req = ConsumerGroupHeartbeatRequest(G, "", 0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=["t"],
                                        server_assignor="sticky", topic_partitions=[])
    reply, _ = handle(b, "ConsumerGroupHeartbeat", req)
    assert reply.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert not b.consumer_groups and b.groups[G].state is GroupState.STABLE and len(b.groups[G].members) == 2


# ----------------------------------------------------------------------------------------- classic members


def consumer_group_with_one_member(b: Broker) -> str:
    reply, _ = consumer_join(b)
    assert reply.assignment == {"t": [0, 1, 2, 3, 4, 5]}
    return reply.member_id


def test_a_classic_member_joins_a_consumer_group_as_kafka_serves_it() -> None:
    b = broker()
    first = consumer_group_with_one_member(b)
    reply, _ = join_group(b)
    assert reply.error_code == ErrorCode.MEMBER_ID_REQUIRED
    member_id = reply.member_id
    reply, out = join_group(b, member_id)
    assert reply.error_code == ErrorCode.NONE and reply.member_id == member_id and reply.generation_id == 2
    assert "consumer_classic_member_joined" in events(out)
    timers = {o.key[0]: o.deadline_ms for o in out if isinstance(o, ArmTimer)}
    assert timers["consumer-session"] == T0 + SESSION_MS and timers["consumer-sync"] == T0 + REBALANCE_MS
    # Its target waits for the consumer member to revoke: nothing yet.
    assert assigned(sync_group(b, member_id, 2).assignment) == []
    assert beat(b, member_id, 2) == ErrorCode.NONE  # UNRELEASED, still waiting: no rejoin
    revoking = consumer_beat(b, first, 1, [0, 1, 2, 3, 4, 5])
    kept = revoking.assignment["t"]
    consumer_beat(b, first, 1, kept)  # revoked: the rest is free
    assert beat(b, member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS  # a partition it waits for is free: rejoin
    reply, _ = join_group(b, member_id)
    got = assigned(sync_group(b, member_id, reply.generation_id).assignment)
    assert sorted(got + kept) == [0, 1, 2, 3, 4, 5]
    described = handle(b, "ConsumerGroupDescribe", ConsumerGroupDescribeRequest([G]))[0].groups[0]
    assert {m.member_id: m.member_type for m in described.members} == {first: 1, member_id: 0}


def test_classic_requests_are_checked_as_kafka_checks_them() -> None:
    b = broker()
    first = consumer_group_with_one_member(b)
    member_id = join_group(b)[0].member_id
    join_group(b, member_id)
    assert beat(b, "nobody", 2) == ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(b, first, 1) == ErrorCode.UNKNOWN_MEMBER_ID  # does not use the classic protocol
    assert beat(b, member_id, 7) == ErrorCode.ILLEGAL_GENERATION
    req = SyncGroupRequest(G, 2, member_id, protocol_type="consumer", protocol_name="roundrobin")
    assert handle(b, "SyncGroup", req)[0].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    reply, _ = join_group(b, "", protocol_type="connect")
    assert reply.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    reply, _ = join_group(b, "new-1", meta=b"\x00")  # not a ConsumerProtocolSubscription
    assert reply.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    b2 = broker(consumer_max_size=1)
    consumer_group_with_one_member(b2)
    assert join_group(b2)[0].error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_a_static_classic_member_joins_at_once_is_fenced_by_a_wrong_id_and_replaced_by_a_restart() -> None:
    b = broker()
    consumer_group_with_one_member(b)
    reply, _ = join_group(b, instance_id="i1")
    assert reply.error_code == ErrorCode.NONE and reply.member_id  # a static member needs no MEMBER_ID_REQUIRED
    old = reply.member_id
    sync_group(b, old, reply.generation_id)
    reply, _ = join_group(b, "someone-else", instance_id="i1")
    assert reply.error_code == ErrorCode.FENCED_INSTANCE_ID
    assert reply.error_message == f"Static member someone-else with instance id i1 was fenced by member {old}."
    reply, _ = join_group(b, instance_id="i1", token="j2")  # it restarts: a new id takes the old one's place
    group = b.consumer_groups[G]
    assert reply.error_code == ErrorCode.NONE and reply.member_id != old
    assert old not in group.members and group.static_members == {"i1": reply.member_id}
    assert group.members[reply.member_id].classic is not None


def test_offset_commit_from_a_classic_member_uses_its_generation() -> None:
    b = broker()
    consumer_group_with_one_member(b)
    member_id = join_group(b)[0].member_id
    generation = join_group(b, member_id)[0].generation_id
    assert commit(b, member_id, generation + 1) == ErrorCode.ILLEGAL_GENERATION
    assert commit(b, member_id, generation) == ErrorCode.NONE
    assert fetched(b) == 7


def test_a_classic_member_is_removed_after_its_own_session_timeout() -> None:
    b = broker()
    consumer_group_with_one_member(b)
    member_id = join_group(b)[0].member_id
    join_group(b, member_id)
    group = b.consumer_groups[G]
    out = b.on_timer(("consumer-session", G, member_id), T0 + SESSION_MS)
    assert member_id not in group.members and "consumer_member_removed" in events(out)


def test_a_classic_member_that_does_not_rejoin_in_its_rebalance_timeout_is_removed() -> None:
    b = broker()
    consumer_group_with_one_member(b)
    member_id = join_group(b)[0].member_id
    join_group(b, member_id)
    sync_group(b, member_id, 2)
    consumer_join(b, member_id="third")  # the group epoch moves past the classic member
    assert beat(b, member_id, 2, T0 + 1) == ErrorCode.REBALANCE_IN_PROGRESS
    out = b.on_timer(("consumer-join", G, member_id), T0 + 1 + REBALANCE_MS)
    removed = [o.payload for o in out if isinstance(o, LogEvent) and o.event == "consumer_member_removed"]
    assert [r.member_id for r in removed] == [member_id] and removed[0].reason.value == "rebalance_timeout"


def test_a_classic_member_that_does_not_sync_in_its_rebalance_timeout_is_removed() -> None:
    b = broker()
    consumer_group_with_one_member(b)
    member_id = join_group(b)[0].member_id
    join_group(b, member_id)
    b.on_timer(("consumer-sync", G, member_id), T0 + REBALANCE_MS)
    assert member_id not in b.consumer_groups[G].members


def test_a_classic_member_leaves_with_leave_group() -> None:
    b = broker()
    first = consumer_group_with_one_member(b)
    member_id = join_group(b)[0].member_id
    join_group(b, member_id)
    reply, _ = handle(b, "LeaveGroup", LeaveGroupRequest(G, [LeaveGroupRequestMember(member_id),
                                                            LeaveGroupRequestMember(first),
                                                            LeaveGroupRequestMember("nobody")]))
    assert [(m.member_id, m.error_code) for m in reply.members] == [
        (member_id, ErrorCode.NONE), (first, ErrorCode.UNKNOWN_MEMBER_ID), ("nobody", ErrorCode.UNKNOWN_MEMBER_ID)]
    assert list(b.consumer_groups[G].members) == [first] and b.consumer_groups[G].group_epoch == 3


# ----------------------------------------------------------------------------------------- downgrade


def upgraded(b: Broker) -> tuple[str, str, str]:
    a, bb, generation = stable_classic_group(b)
    new = consumer_join(b)[0].member_id
    for mid, token in ((a, "j"), (bb, "j2")):
        reply, _ = join_group(b, mid, token=token)
        sync_group(b, mid, reply.generation_id)
    return a, bb, new


def test_the_last_consumer_member_leaving_downgrades_the_group_which_rebalances() -> None:
    b = broker()
    a, bb, new = upgraded(b)
    epoch = b.consumer_groups[G].group_epoch
    targets = {mid: sorted(b.consumer_groups[G].target[mid]["t"]) for mid in (a, bb)}
    req = ConsumerGroupHeartbeatRequest(G, new, -1)
    reply, out = handle(b, "ConsumerGroupHeartbeat", req)
    assert reply.error_code == ErrorCode.NONE and reply.member_epoch == -1
    assert G in b.groups and G not in b.consumer_groups
    group = b.groups[G]
    # Kafka's fromConsumerGroup: Stable at generation = the group epoch, each member's target as its
    # assignment, persisted; then a rebalance (PreparingRebalance), so the members rejoin.
    persisted = [o.record for o in out if isinstance(o, Persist)]
    assert persisted[-1].state == "Stable" and persisted[-1].generation_id == epoch
    assert {m.member_id: assigned(m.assignment) for m in persisted[-1].members} == targets
    assert group.state is GroupState.PREPARING_REBALANCE and group.generation_id == epoch
    assert (group.protocol_type, group.protocol_name, group.leader_id) == ("consumer", "range", a)
    assert "group_converted" in events(out)
    assert beat(b, a, epoch) == ErrorCode.REBALANCE_IN_PROGRESS
    join_group(b, a)
    reply, _ = join_group(b, bb, token="j2")
    assert reply.generation_id == epoch + 1 and b.groups[G].state is GroupState.COMPLETING_REBALANCE
    assert fetched(b) == 7


def test_a_session_timeout_of_the_last_consumer_member_downgrades_too() -> None:
    b = broker()
    a, bb, new = upgraded(b)
    b.on_timer(("consumer-session", G, new), T0 + 45_000)
    assert G in b.groups and list(b.groups[G].members) == [a, bb]


def test_the_policy_may_forbid_the_downgrade() -> None:
    b = broker(consumer_migration_policy="upgrade")
    a, bb, new = upgraded(b)
    handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, new, -1))
    assert G in b.consumer_groups and list(b.consumer_groups[G].members) == [a, bb]


def test_a_classic_member_leaving_while_a_consumer_member_remains_does_not_downgrade() -> None:
    b = broker()
    a, bb, new = upgraded(b)
    handle(b, "LeaveGroup", LeaveGroupRequest(G, [LeaveGroupRequestMember(a)]))
    assert G in b.consumer_groups and list(b.consumer_groups[G].members) == [bb, new]


def test_the_last_classic_member_leaving_leaves_an_empty_consumer_group() -> None:
    b = broker()
    consumer_group_with_one_member(b)
    member_id = join_group(b)[0].member_id
    join_group(b, member_id)
    first = next(iter(b.consumer_groups[G].members))
    handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, first, -1))  # one classic member remains
    assert G in b.groups and list(b.groups[G].members) == [member_id]
    handle(b, "LeaveGroup", LeaveGroupRequest(G, [LeaveGroupRequestMember(member_id)]))
    assert not b.groups[G].members


# ----------------------------------------------------------------------------------------- listing


def test_a_mixed_group_is_listed_as_a_consumer_group_and_described_dead_by_describe_groups() -> None:
    b = broker()
    upgraded(b)
    listed = handle(b, "ListGroups", ListGroupsRequest())[0].groups
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed] == [(G, "consumer", "consumer")]
    described = handle(b, "DescribeGroups", DescribeGroupsRequest([G]))[0].groups
    assert described[0].group_state == "Dead" and described[0].members == []


# ----------------------------------------------------------------------------------------- restart


def restarted(records: list) -> Broker:
    b = broker()
    b.restore(records, T0 + 1)
    return b


def test_a_restart_after_the_upgrade_or_the_downgrade_restores_what_the_log_says() -> None:
    """The group log says what the group was (docs/protocol.md §11.8, §11.10): a restart after the
    upgrade finds the consumer group with its classic member (its session timeout and protocols
    kept) and the newcomer, at their epochs, with the offsets; after the downgrade, the classic
    group with its members and assignments."""
    b = broker()
    log: list = []

    def run(api: str, body: Any, token: str = "x") -> None:
        log.extend(o.record for o in b.handle(api, body, RequestContext(token, client_id="k"), T0) if isinstance(o, Persist))

    a = join_group(b, client_id="a")[0].member_id
    run("JoinGroup", JoinGroupRequest(G, SESSION_MS, REBALANCE_MS, a, "consumer", [JoinGroupRequestProtocol("range", metadata())]))
    while b.groups[G].state is GroupState.PREPARING_REBALANCE:
        b.on_timer(("join", G), T0)
    generation = b.groups[G].generation_id
    run("SyncGroup", SyncGroupRequest(G, generation, a, assignments=[SyncGroupRequestAssignment(a, assignment(0, 1, 2, 3, 4, 5))]))
    run("OffsetCommit", OffsetCommitRequest(G, [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 5)])],
                                            generation_id=generation, member_id=a))
    assert [m.member_id for m in restarted(log).groups[G].members.values()] == [a]
    req = ConsumerGroupHeartbeatRequest(G, "", 0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=["t"],
                                        topic_partitions=[])
    run("ConsumerGroupHeartbeat", req)
    after_upgrade = restarted(log)
    assert G not in after_upgrade.groups
    restored, live = after_upgrade.consumer_groups[G], b.consumer_groups[G]
    assert set(restored.members) == set(live.members) and restored.group_epoch == live.group_epoch
    assert restored.members[a].classic == live.members[a].classic is not None
    assert restored.members[a].progress == live.members[a].progress and restored.target == live.target
    assert fetched(after_upgrade) == 5
    new = next(mid for mid in b.consumer_groups[G].members if mid != a)
    target = sorted(b.consumer_groups[G].target[a]["t"])
    assert len(target) == 3  # the newcomer's join split the partitions
    run("ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, new, -1))
    after_downgrade = restarted(log)
    group = after_downgrade.groups[G]
    assert group.state is GroupState.STABLE and list(group.members) == [a]
    assert assigned(group.members[a].assignment) == target and fetched(after_downgrade) == 5  # its target, as Kafka


def test_a_classic_static_member_replacing_the_last_consumer_static_member_downgrades_without_a_rebalance() -> None:
    """Kafka's validateOnlineDowngradeWithReplacedMember: the same subscription, so the classic
    group is Stable at once and the newcomer syncs its predecessor's target."""
    b = broker()
    req = ConsumerGroupHeartbeatRequest(G, "", 0, instance_id="i1", rebalance_timeout_ms=REBALANCE_MS,
                                        subscribed_topic_names=["t"], topic_partitions=[])
    static = handle(b, "ConsumerGroupHeartbeat", req, token="c")[0].member_id
    classic = join_group(b)[0].member_id
    generation = join_group(b, classic)[0].generation_id
    sync_group(b, classic, generation)
    target = sorted(b.consumer_groups[G].target[static]["t"])
    reply, out = join_group(b, instance_id="i1", token="j2")
    assert reply.error_code == ErrorCode.NONE
    assert G in b.groups and G not in b.consumer_groups
    group = b.groups[G]
    assert group.state is GroupState.STABLE and list(group.members) == [classic, reply.member_id]
    assert reply.generation_id == group.generation_id
    assert "rebalance_started" not in events(out) and "group_converted" in events(out)
    assert assigned(sync_group(b, reply.member_id, reply.generation_id, token="s2").assignment) == target
