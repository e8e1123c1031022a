"""The Broker's KIP-848 wiring (docs/protocol.md §11): ConsumerGroupHeartbeat and
ConsumerGroupDescribe routed to coordinator/consumer_group.py, a group id of one type (an Empty
group converts between classic and consumer; the online migration of a group with members is in
tests/test_consumer_migration.py), topic ids in the answers, timers routed back, ListGroups' types, and
OffsetCommit checked against the member epoch into the one offset store."""

from __future__ import annotations

import dataclasses
from typing import Any

from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group_log import OffsetTombstone
from grouplab.protocol.effects import ArmTimer, Persist, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatTopicPartitions,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
)

T0 = 1_700_000_000_000
G = "g"


def broker() -> Broker:
    b = Broker(BrokerConfig(group_initial_rebalance_delay_ms=0), SequentialMemberIds())
    b.topics.partitions.update({"t": 3})
    return b


# Every record each broker's steps wrote, in order: its group log.
WRITTEN: dict[Broker, list] = {}


def handle(b: Broker, api: str, body: Any, now_ms: int = T0, token: str = "r") -> tuple[Any, list]:
    out = b.handle(api, body, RequestContext(token, client_id="c"), now_ms)
    WRITTEN.setdefault(b, []).extend(o.record for o in out if isinstance(o, Persist))
    replies = [o.body for o in out if isinstance(o, Reply) and o.to == token]
    assert len(replies) <= 1
    return (replies[0] if replies else None), out


def join(b: Broker, group: str = G, member_id: str = "", topics: list[str] | None = None, assignor: str | None = None,
         now_ms: int = T0) -> Any:
    req = ConsumerGroupHeartbeatRequest(group, member_id, 0, rebalance_timeout_ms=30_000,
                                        subscribed_topic_names=topics if topics is not None else ["t"],
                                        server_assignor=assignor, topic_partitions=[])
    return handle(b, "ConsumerGroupHeartbeat", req, now_ms)[0]


def commit(b: Broker, member_id: str = "", epoch: int = -1, offset: int = 10) -> list[int]:
    reply, _ = handle(b, "OffsetCommit", OffsetCommitRequest(G, [OffsetCommitRequestTopic(
        "t", [OffsetCommitRequestPartition(0, offset)])], generation_id=epoch, member_id=member_id))
    return [p.error_code for t in reply.topics for p in t.partitions]


def fetched(b: Broker) -> int:
    reply, _ = handle(b, "OffsetFetch", OffsetFetchRequest(G))
    return {(t.name, p.partition_index): p.committed_offset for t in reply.topics for p in t.partitions}.get(("t", 0), -1)


def classic_join(b: Broker, member_id: str = "") -> Any:
    req = JoinGroupRequest(G, 10_000, 30_000, member_id, "consumer", [JoinGroupRequestProtocol("range", b"")])
    return handle(b, "JoinGroup", req, token="j")[0]


def test_a_join_makes_a_consumer_group_and_the_answer_names_topic_ids() -> None:
    b = broker()
    reply = join(b)
    assert reply.error_code == 0 and reply.member_id == "c-1" and reply.member_epoch == 1
    assert reply.assignment == {"t": [0, 1, 2]}
    assert reply.topic_ids == {"t": b.topics.topic_id("t")}
    assert G in b.consumer_groups and G not in b.groups


def test_an_empty_group_id_is_an_invalid_request_and_makes_nothing() -> None:
    b = broker()
    reply = join(b, group="")
    assert reply.error_code == ErrorCode.INVALID_REQUEST and reply.error_message == "GroupId can't be empty."
    assert not b.consumer_groups and not b.groups


def test_a_heartbeat_other_than_a_join_for_an_unknown_group_is_group_id_not_found() -> None:
    b = broker()
    reply, _ = handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, "m", 3))
    assert reply.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert not b.consumer_groups


def test_a_refused_join_leaves_no_group() -> None:
    b = broker()
    reply = join(b, assignor="sticky")
    assert reply.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert not b.consumer_groups and not b.consumer_offsets


def test_an_empty_classic_group_converts_and_keeps_its_offsets() -> None:
    b = broker()
    assert commit(b) == [0]  # a simple consumer's commit: an Empty classic group
    assert G in b.groups
    reply = join(b)
    assert reply.error_code == 0
    assert G not in b.groups and G in b.consumer_groups
    assert fetched(b) == 10


def test_a_classic_group_whose_metadata_is_not_the_consumer_protocol_is_not_upgraded() -> None:
    b = broker()
    first = classic_join(b)
    classic_join(b, first.member_id)  # metadata b"": not a ConsumerProtocolSubscription
    assert b.groups[G].members
    reply = join(b)
    assert reply.error_code == ErrorCode.GROUP_ID_NOT_FOUND and reply.error_message == (
        f"Cannot upgrade classic group {G} to consumer group because the embedded consumer protocol is malformed.")
    assert not b.consumer_groups and b.groups[G].members


def test_a_classic_join_to_a_consumer_group_with_members_is_given_a_member_id() -> None:
    b = broker()
    join(b)
    reply = classic_join(b)
    assert reply.error_code == ErrorCode.MEMBER_ID_REQUIRED and reply.member_id
    assert G not in b.groups and len(b.consumer_groups[G].members) == 1


def test_an_empty_consumer_group_converts_back_to_classic_on_a_join_group() -> None:
    b = broker()
    member = join(b).member_id
    assert commit(b, member, 1) == [0]
    reply, _ = handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, member, -1))
    assert reply.error_code == 0 and reply.member_epoch == -1
    assert b.consumer_groups[G].state.value == "Empty"
    reply = classic_join(b)
    assert reply.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert G not in b.consumer_groups and G in b.groups
    assert fetched(b) == 10


def test_offset_commit_is_checked_against_the_member_epoch() -> None:
    b = broker()
    member = join(b).member_id
    assert commit(b, member, 0) == [ErrorCode.STALE_MEMBER_EPOCH]
    assert commit(b, "nobody", 1) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert commit(b, "", -1) == [ErrorCode.UNKNOWN_MEMBER_ID]  # an admin's commit only to a group without members
    assert fetched(b) == -1
    assert commit(b, member, 1, offset=42) == [0]
    assert fetched(b) == 42


def test_owned_partitions_by_topic_id_are_named_and_unknown_ids_dropped() -> None:
    b = broker()
    member = join(b).member_id
    tid = b.topics.topic_id("t")
    owned = [ConsumerGroupHeartbeatTopicPartitions("", [0, 1, 2], topic_id=tid),
             ConsumerGroupHeartbeatTopicPartitions("", [0], topic_id="AAAAAAAAAAAAAAAAAAAAAA")]
    reply, _ = handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, member, 1, topic_partitions=owned))
    assert reply.error_code == 0 and reply.member_epoch == 1
    assert b.consumer_groups[G].describe().members[0].assignment == {"t": [0, 1, 2]}


def test_consumer_group_describe_per_id() -> None:
    b = broker()
    join(b)
    handle(b, "OffsetCommit", OffsetCommitRequest("classic", [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 1)])]))
    reply, _ = handle(b, "ConsumerGroupDescribe", ConsumerGroupDescribeRequest([G, "classic", "nope", ""]))
    mine, classic, unknown, empty = reply.groups
    assert mine.error_code == 0 and mine.group_state == "Stable" and mine.group_epoch == 1
    assert mine.members[0].assignment == {"t": [0, 1, 2]} and mine.topic_ids == {"t": b.topics.topic_id("t")}
    assert (classic.error_code, classic.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a consumer group.")
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert empty.error_code == ErrorCode.INVALID_GROUP_ID


def test_list_groups_types_and_describe_groups() -> None:
    b = broker()
    join(b)
    handle(b, "OffsetCommit", OffsetCommitRequest("classic", [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 1)])]))
    listed = {g.group_id: (g.group_type, g.protocol_type, g.group_state)
              for g in handle(b, "ListGroups", ListGroupsRequest())[0].groups}
    assert listed == {G: ("consumer", "consumer", "Stable"), "classic": ("classic", "", "Empty")}
    only = handle(b, "ListGroups", ListGroupsRequest(types_filter=["Consumer"]))[0].groups
    assert [g.group_id for g in only] == [G]
    stable = handle(b, "ListGroups", ListGroupsRequest(states_filter=["stable"], types_filter=["classic"]))[0].groups
    assert stable == []
    described = handle(b, "DescribeGroups", DescribeGroupsRequest([G]))[0].groups[0]
    assert described.group_state == "Dead" and described.members == []  # Kafka's DescribeGroups v0-5


def test_the_session_timer_is_routed_to_the_group_and_removes_the_member() -> None:
    b = broker()
    _, out = handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(
        G, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"], topic_partitions=[]))
    timers = [o for o in out if isinstance(o, ArmTimer) and o.key[0] == "consumer-session"]
    assert len(timers) == 1 and b.timer_key_queue(timers[0].key) == G
    assert b.group_key("ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, "", 0)) == G
    b.on_timer(timers[0].key, timers[0].deadline_ms - 1)  # a heartbeat's session timer fires late, never early
    assert b.consumer_groups[G].members
    b.on_timer(timers[0].key, timers[0].deadline_ms)
    assert not b.consumer_groups[G].members


def test_offset_fetch_from_a_member_is_checked_against_its_epoch() -> None:
    b = broker()
    member = join(b).member_id
    assert commit(b, member, 1, offset=7) == [0]

    def fetch(member_id: str | None, epoch: int) -> Any:
        return handle(b, "OffsetFetch", OffsetFetchRequest(G, member_id=member_id, member_epoch=epoch))[0]

    assert fetch(member, 0).error_code == ErrorCode.STALE_MEMBER_EPOCH
    assert fetch("nobody", 1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    for member_id, epoch in ((member, 1), (None, -1)):  # the member at its epoch; an admin's fetch
        answer = fetch(member_id, epoch)
        assert answer.error_code == 0 and answer.topics[0].partitions[0].committed_offset == 7


def test_delete_groups_deletes_an_empty_consumer_group_with_its_offsets() -> None:
    b = broker()
    member = join(b).member_id
    assert commit(b, member, 1) == [0]
    results, _ = handle(b, "DeleteGroups", DeleteGroupsRequest([G]))
    assert [r.error_code for r in results.results] == [ErrorCode.NON_EMPTY_GROUP]
    handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, member, -1))
    results, out = handle(b, "DeleteGroups", DeleteGroupsRequest([G]))
    assert [r.error_code for r in results.results] == [ErrorCode.NONE]
    assert any(isinstance(o, Persist) and isinstance(o.record, OffsetTombstone) for o in out)
    assert G not in b.consumer_groups and G not in b.consumer_offsets and G not in b.groups
    assert fetched(b) == -1


# ----------------------------------------------------------------------------- durability and retention


def restarted(records: list, now_ms: int) -> tuple[Broker, list]:
    b = Broker(BrokerConfig(group_initial_rebalance_delay_ms=0), SequentialMemberIds(digits=1))
    out = b.restore(records, now_ms)
    return b, out


def test_a_restarted_coordinator_keeps_the_group_its_members_and_their_epochs() -> None:
    from grouplab.coordinator.group_log import TopicRecord

    b = broker()
    first = join(b).member_id
    reply, out = handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(
        G, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"], topic_partitions=[]))
    second = reply.member_id
    assert commit(b, first, 1, offset=5) == [0]
    # The first member is asked to give partitions up: it is UNREVOKED_PARTITIONS at epoch 1.
    reply, out = handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(
        G, first, 1, topic_partitions=[ConsumerGroupHeartbeatTopicPartitions("t", [0, 1, 2])]))
    before = b.consumer_groups[G].describe()
    assert {m.member_state for m in before.members} == {"unrevoked_partitions", "unreleased_partitions"}

    restored, out = restarted([TopicRecord("t", 3, T0), *WRITTEN[b]], T0 + 60_000)
    after = restored.consumer_groups[G].describe()
    assert sorted(after.members, key=lambda m: m.member_id) == sorted(before.members, key=lambda m: m.member_id)
    assert dataclasses.replace(after, members=[]) == dataclasses.replace(before, members=[])
    assert G not in restored.groups
    keys = sorted(o.key[0] for o in out if isinstance(o, ArmTimer) and o.key[0].startswith("consumer"))
    assert keys == ["consumer-rebalance", "consumer-session", "consumer-session"]
    # Both members carry on at their epochs: the first revokes, the second then gets its partition.
    reply, _ = handle(restored, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(
        G, first, 1, topic_partitions=[ConsumerGroupHeartbeatTopicPartitions("t", [0, 1])]), T0 + 60_001)
    assert reply.error_code == 0 and reply.member_epoch == 2
    reply, _ = handle(restored, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(
        G, second, 2, topic_partitions=[]), T0 + 60_002)
    assert reply.error_code == 0 and reply.assignment == {"t": [2]}
    assert fetched(restored) == 5


def expiry_check(b: Broker, now_ms: int) -> list:
    from grouplab.coordinator.broker import EXPIRY_TIMER

    out = b.on_timer(EXPIRY_TIMER, now_ms)
    WRITTEN.setdefault(b, []).extend(o.record for o in out if isinstance(o, Persist))
    return out


RETENTION_MS = 10_080 * 60_000  # offsets.retention.minutes' default


def test_an_empty_consumer_group_expires_its_offsets_after_their_commit_and_goes() -> None:
    from grouplab.coordinator.group_log import GroupTombstone, TopicRecord

    b = broker()
    member = join(b).member_id
    assert commit(b, member, 1) == [0]
    _, out = handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, member, -1), T0 + 1_000)
    expiry_check(b, T0 + RETENTION_MS - 1)
    assert fetched(b) == 10 and G in b.consumer_groups  # counted from the commit, not from Empty
    out = expiry_check(b, T0 + RETENTION_MS)
    assert [type(o.record) for o in out if isinstance(o, Persist)] == [OffsetTombstone, GroupTombstone]
    assert G not in b.consumer_groups and G not in b.consumer_offsets and fetched(b) == -1
    restored, _ = restarted([TopicRecord("t", 3, T0), *WRITTEN[b]], T0 + RETENTION_MS + 1)
    assert G not in restored.consumer_groups and G not in restored.groups


def test_a_consumer_group_with_members_expires_only_offsets_of_topics_nobody_subscribes_to() -> None:
    b = broker()
    b.topics.partitions["old"] = 1
    member = join(b).member_id
    handle(b, "OffsetCommit", OffsetCommitRequest(G, [OffsetCommitRequestTopic(
        "old", [OffsetCommitRequestPartition(0, 3)])], generation_id=1, member_id=member))
    assert commit(b, member, 1) == [0]
    expiry_check(b, T0 + RETENTION_MS)
    committed = {tp.topic for tp in b.consumer_offsets[G].offsets.committed}
    assert committed == {"t"} and b.consumer_groups[G].members


def test_an_empty_consumer_group_with_no_offsets_is_deleted_by_the_next_check() -> None:
    b = broker()
    member = join(b).member_id
    _, out = handle(b, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(G, member, -1))
    assert any(isinstance(o, ArmTimer) and o.key == ("offsets_expiry",) for o in out)
    expiry_check(b, T0 + 600_000)
    assert G not in b.consumer_groups


# ----------------------------------------------------------------------------- transactions and OffsetDelete


def test_txn_offset_commit_to_a_consumer_group_checks_the_member_and_commits_to_its_store() -> None:
    from grouplab.protocol.messages import (AddOffsetsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
                                            TxnOffsetCommitRequest)

    b = broker()
    member = join(b).member_id
    producer = handle(b, "InitProducerId", InitProducerIdRequest("app", 60_000))[0]
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert handle(b, "AddOffsetsToTxn", AddOffsetsToTxnRequest("app", pid, epoch, G))[0].error_code == 0

    def txn_commit(member_id: str, generation: int, offset: int) -> int:
        reply, _ = handle(b, "TxnOffsetCommit", TxnOffsetCommitRequest(
            "app", G, pid, epoch, [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, offset)])],
            generation_id=generation, member_id=member_id))
        return reply.topics[0].partitions[0].error_code

    assert txn_commit(member, 0, 1) == ErrorCode.STALE_MEMBER_EPOCH  # KIP-447's fencing, by the member epoch
    assert txn_commit("nobody", 1, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert txn_commit("", -1, 4) == 0  # naming no member: accepted, as Kafka's TxnOffsetCommit
    assert txn_commit(member, 1, 8) == 0
    assert G not in b.groups and fetched(b) == -1  # staged: not visible before the commit
    assert handle(b, "EndTxn", EndTxnRequest("app", pid, epoch, True))[0].error_code == 0
    assert fetched(b) == 8 and G in b.consumer_groups and G not in b.groups


def test_offset_delete_of_a_consumer_group_refuses_the_topics_its_members_subscribe_to() -> None:
    from grouplab.protocol.messages import OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic

    b = broker()
    b.topics.partitions["old"] = 1
    member = join(b).member_id
    handle(b, "OffsetCommit", OffsetCommitRequest(G, [OffsetCommitRequestTopic(
        "old", [OffsetCommitRequestPartition(0, 3)])], generation_id=1, member_id=member))
    assert commit(b, member, 1) == [0]
    reply, _ = handle(b, "OffsetDelete", OffsetDeleteRequest(G, [
        OffsetDeleteRequestTopic("t", [OffsetDeleteRequestPartition(0)]),
        OffsetDeleteRequestTopic("old", [OffsetDeleteRequestPartition(0)])]))
    codes = {t.name: t.partitions[0].error_code for t in reply.topics}
    assert codes == {"t": ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, "old": 0}
    assert {tp.topic for tp in b.consumer_offsets[G].offsets.committed} == {"t"}
