"""OffsetDelete (Kafka's API 47; docs/protocol.md §3.26) and the admin side of OffsetCommit, as
Kafka's classic group coordinator answers them (ClassicGroup.validateOffsetDelete and
isSubscribedToTopic, OffsetMetadataManager.deleteOffsets, KafkaApis' topic check; ClassicGroup.
validateOffsetCommit for a commit with generation -1 and no member id), then `grouplab delete
--group G --topic T` and a deletion that outlives a restart of a coordinator with a data directory.

A refused request changes nothing; a partition of a topic the members consume is refused on its
own; the others lose their committed (and staged) offsets, tombstones persisted before the answer.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from grouplab.admin import AdminClient, AdminError
from grouplab.coordinator.broker import EXPIRY_TIMER, Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group import GroupState
from grouplab.coordinator.group_log import OffsetTombstone, Persist
from grouplab.coordinator.offsets import OffsetAndMetadata
from grouplab.coordinator.server import CoordinatorServer
from grouplab.protocol.consumer_protocol import encode_subscription
from grouplab.protocol.effects import LogEvent, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
    OffsetFetchRequest,
)
from grouplab.protocol.types import Subscription
from grouplab.protocol.types import TopicPartition as TP
from tests.helpers_group import GROUP, MemberIds, config, form_generation, form_stable, join_req, leave_req, snapshot
from tests.cli_subprocess import grouplab, one_line

T0 = 1_000
TOPICS = {"t0": 3, "t1": 2}
UNKNOWN_TOPIC = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
SUBSCRIBED = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


def make_broker() -> Broker:
    broker = Broker(config(offsets_retention_check_interval_ms=60_000), MemberIds())
    broker.topics.partitions.update(TOPICS)
    return broker


def handle(broker: Broker, api: str, body: Any, now: int = T0) -> tuple[Any, list]:
    out = broker.handle(api, body, RequestContext("req", client_id="admin"), now)
    [reply] = [o.body for o in out if isinstance(o, Reply)]
    return reply, out


def commit(broker: Broker, offsets: dict[tuple[str, int], int], group: str = GROUP, gen: int = -1,
           member: str = "", now: int = T0) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append(OffsetCommitRequestPartition(p, off))
    reply, _ = handle(broker, "OffsetCommit", OffsetCommitRequest(
        group, [OffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()], gen, member), now)
    return {(t.name, p.partition_index): p.error_code for t in reply.topics for p in t.partitions}


def delete_req(*partitions: tuple[str, int], group: str = GROUP) -> OffsetDeleteRequest:
    by_topic: dict[str, list[OffsetDeleteRequestPartition]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(OffsetDeleteRequestPartition(p))
    return OffsetDeleteRequest(group, [OffsetDeleteRequestTopic(t, ps) for t, ps in by_topic.items()])


def delete(broker: Broker, *partitions: tuple[str, int], group: str = GROUP, now: int = T0
           ) -> tuple[OffsetDeleteResponse, list]:
    reply, out = handle(broker, "OffsetDelete", delete_req(*partitions, group=group), now)
    assert isinstance(reply, OffsetDeleteResponse)
    return reply, out


def answered(resp: OffsetDeleteResponse) -> list[tuple[str, list[tuple[int, int]]]]:
    return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics]


def committed(broker: Broker, group: str = GROUP) -> dict[tuple[str, int], int]:
    g = broker.groups.get(group)
    return {} if g is None else {(tp.topic, tp.partition): om.offset for tp, om in g.offsets.committed.items()}


def state_of(broker: Broker) -> dict[str, Any]:
    return {gid: (snapshot(g), copy.deepcopy(g.offsets.committed), copy.deepcopy(g.offsets.pending))
            for gid, g in broker.groups.items()}


def subscribing(*topics: str) -> dict[str, Any]:
    """A member spec for form_stable whose JoinGroup metadata is Kafka's ConsumerProtocol subscription."""
    return {"protocols": [("range", encode_subscription(Subscription(topics=list(topics))))]}


# ============================================================================ OffsetDelete, pure


def test_an_empty_groups_offsets_are_deleted_with_tombstones_before_the_answer() -> None:
    broker = make_broker()
    assert set(commit(broker, {("t0", 0): 5, ("t0", 1): 6, ("t1", 0): 7}).values()) == {0}
    resp, out = delete(broker, ("t0", 0), ("t0", 2), ("t0", 0), ("t1", 5), ("nope", 0), now=T0 + 1)
    # Each partition once, in the order first named; no offset (t0-2) is not an error.
    assert resp.error_code == 0
    assert answered(resp) == [("t0", [(0, 0), (2, 0)]), ("t1", [(5, UNKNOWN_TOPIC)]), ("nope", [(0, UNKNOWN_TOPIC)])]
    assert [type(o) for o in out] == [Persist, Reply, LogEvent]
    assert out[0].record == OffsetTombstone(GROUP, "t0", 0, T0 + 1)
    assert out[2].event == "offsets_deleted"
    assert out[2].fields == {"group_id": GROUP, "generation_id": 0, "state": "Empty", "partitions": [["t0", 0]]}
    assert committed(broker) == {("t0", 1): 6, ("t1", 0): 7}
    fetched, _ = handle(broker, "OffsetFetch", OffsetFetchRequest(GROUP))
    assert [(t.name, p.partition_index) for t in fetched.topics for p in t.partitions] == [("t0", 1), ("t1", 0)]


def test_a_group_that_does_not_exist_is_group_id_not_found_and_is_not_made() -> None:
    broker = make_broker()
    resp, out = delete(broker, ("t0", 0), ("nope", 0), group="nosuch")
    # Kafka answers a group-level error alone: no partitions, not even the unknown topic's.
    assert (resp.error_code, resp.topics) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    assert [type(o) for o in out] == [Reply] and broker.groups == {}
    assert Broker.group_key("OffsetDelete", delete_req(("t0", 0), group="nosuch")) == "nosuch"  # its group's queue


def test_a_consumer_group_with_members_refuses_only_the_topics_they_subscribe_to() -> None:
    broker = make_broker()
    (m0, m1), t = form_stable(broker.group(GROUP), [("c0", subscribing("t0")), ("c1", subscribing("t0"))])
    assert set(commit(broker, {("t0", 0): 1, ("t1", 0): 2, ("t1", 1): 3}, gen=1, member=m0, now=t).values()) == {0}
    before = snapshot(broker.groups[GROUP])
    resp, out = delete(broker, ("t0", 0), ("t0", 1), ("t1", 0), now=t)
    assert answered(resp) == [("t0", [(0, SUBSCRIBED), (1, SUBSCRIBED)]), ("t1", [(0, 0)])]
    assert [o.record for o in out if isinstance(o, Persist)] == [OffsetTombstone(GROUP, "t1", 0, t)]
    assert committed(broker) == {("t0", 0): 1, ("t1", 1): 3}
    assert snapshot(broker.groups[GROUP]) == before  # the group itself: no member, heartbeat or state changed


def test_a_group_with_members_of_another_protocol_type_is_non_empty_group_and_nothing_changes() -> None:
    broker = make_broker()
    g = broker.group(GROUP)
    form_stable(g, [("w0", {"protocol_type": "connect"})])
    g.offsets.commit({TP("t1", 0): OffsetAndMetadata(4)})
    before = state_of(broker)
    resp, out = delete(broker, ("t1", 0))
    assert (resp.error_code, resp.topics) == (ErrorCode.NON_EMPTY_GROUP, [])
    assert [type(o) for o in out] == [Reply] and state_of(broker) == before


def test_while_the_first_generation_forms_every_topic_counts_as_subscribed() -> None:
    """Kafka knows a classic group's subscriptions from its last completed generation; before one,
    a group of the consumer protocol counts as subscribed to every topic."""
    broker = make_broker()
    g = broker.group(GROUP)
    first = g.handle_join(join_req("", [("range", encode_subscription(Subscription(["t0"])))]), "j", T0, "c0")
    member_id = [o.body.member_id for o in first if isinstance(o, Reply)][0]
    g.handle_join(join_req(member_id, [("range", encode_subscription(Subscription(["t0"])))]), "j2", T0, "c0")
    assert g.state is GroupState.PREPARING_REBALANCE and g.protocol_type is None
    resp, _ = delete(broker, ("t1", 0))
    assert answered(resp) == [("t1", [(0, SUBSCRIBED)])]


def test_the_subscriptions_are_those_of_the_last_completed_generation() -> None:
    broker = make_broker()
    g = broker.group(GROUP)
    (m0, m1), t = form_stable(g, [("c0", subscribing("t0")), ("c1", subscribing("t0"))])
    g.handle_join(join_req(m0, subscribing("t1")["protocols"]), "rejoin", t + 1, "c0")  # c1 has not rejoined
    assert g.state is GroupState.PREPARING_REBALANCE
    assert answered(delete(broker, ("t0", 0), ("t1", 0), now=t + 1)[0]) == [("t0", [(0, SUBSCRIBED)]), ("t1", [(0, 0)])]
    g.handle_join(join_req(m1, subscribing("t0")["protocols"]), "rejoin2", t + 2, "c1")  # generation 2 completes
    assert g.state.value == "CompletingRebalance"
    assert answered(delete(broker, ("t1", 0), now=t + 2)[0]) == [("t1", [(0, SUBSCRIBED)])]


def test_a_group_that_was_empty_subscribes_to_nothing_until_its_next_generation_completes() -> None:
    """Kafka computed the subscriptions when the group became Empty: none. A member joining again
    does not change them until its generation completes."""
    broker = make_broker()
    g = broker.group(GROUP)
    (m0,), t = form_stable(g, [("c0", subscribing("t0"))])
    g.handle_leave(leave_req(m0), "leave", t + 1)
    assert g.state is GroupState.EMPTY and g.subscriptions == []
    first = g.handle_join(join_req("", subscribing("t0")["protocols"]), "j", t + 2, "c1")
    member_id = [o.body.member_id for o in first if isinstance(o, Reply)][0]
    g.handle_join(join_req(member_id, subscribing("t0")["protocols"]), "j2", t + 2, "c1")
    assert g.state.value == "PreparingRebalance"
    assert answered(delete(broker, ("t0", 0), now=t + 3)[0]) == [("t0", [(0, 0)])]


def test_subscriptions_that_cannot_be_read_count_every_topic_as_subscribed() -> None:
    broker = make_broker()
    form_stable(broker.group(GROUP), ["c0"])  # metadata b"c0:range": not Kafka's ConsumerProtocol
    assert answered(delete(broker, ("t1", 0))[0]) == [("t1", [(0, SUBSCRIBED)])]


def test_a_staged_transactional_offset_goes_too_and_its_commit_brings_nothing_back() -> None:
    broker = make_broker()
    commit(broker, {("t0", 0): 1})
    g = broker.groups[GROUP]
    g.offsets.stage_txn(9, {TP("t1", 0): (5, None), TP("t1", 1): (6, None)}, T0)
    resp, out = delete(broker, ("t1", 0))
    assert answered(resp) == [("t1", [(0, 0)])]
    assert [o for o in out if isinstance(o, Persist)] == []  # nothing durable to tombstone
    [ev] = [o for o in out if isinstance(o, LogEvent)]
    assert ev.fields["partitions"] == [["t1", 0]]
    broker._complete_txn_offsets(GROUP, 9, True, T0 + 1)
    assert committed(broker) == {("t0", 0): 1, ("t1", 1): 6}


def test_an_empty_group_left_without_offsets_is_deleted_by_the_next_retention_check() -> None:
    broker = make_broker()
    commit(broker, {("t0", 0): 1})
    _, out = delete(broker, ("t0", 0), now=T0 + 5)
    assert GROUP in broker.groups and broker.groups[GROUP].state is GroupState.EMPTY  # as in Kafka: until the check
    out = broker.on_timer(EXPIRY_TIMER, T0 + 60_000)
    assert GROUP not in broker.groups
    assert [o.fields["reason"] for o in out if isinstance(o, LogEvent) and o.event == "group_deleted"] == ["expired"]


def test_a_deleted_offset_stays_deleted_when_the_log_is_restored() -> None:
    broker = make_broker()
    durable: list[Any] = []
    for api, body in [("OffsetCommit", OffsetCommitRequest(GROUP, [OffsetCommitRequestTopic("t0", [
            OffsetCommitRequestPartition(0, 5), OffsetCommitRequestPartition(1, 6)])])),
            ("OffsetDelete", delete_req(("t0", 0)))]:
        _, out = handle(broker, api, body)
        durable += [o.record for o in out if isinstance(o, Persist)]
    fresh = make_broker()
    fresh.restore(durable, T0 + 10)
    assert committed(fresh) == {("t0", 1): 6}


# ============================================================================ OffsetCommit from an admin client


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance", "Stable"])
def test_an_admin_commit_to_a_group_with_members_is_unknown_member_id_and_changes_nothing(state: str) -> None:
    """Kafka's ClassicGroup.validateOffsetCommit: generation -1 and no member id commit only to an
    Empty (or unknown) group; with members it is UNKNOWN_MEMBER_ID, before the
    CompletingRebalance check (REBALANCE_IN_PROGRESS is a member's answer)."""
    broker = make_broker()
    g = broker.group(GROUP)
    if state == "Stable":
        form_stable(g, ["c0"])
    else:
        form_generation(g, ["c0"])
        if state == "PreparingRebalance":
            g.handle_join(join_req("", [("range", b"x")]), "newcomer/id", T0, "c1")
            g.handle_join(join_req(list(g.pending_members)[0], [("range", b"x")]), "newcomer", T0, "c1")
    assert g.state.value == state
    before = state_of(broker)
    assert commit(broker, {("t0", 0): 1, ("nope", 0): 1}) == {("t0", 0): ErrorCode.UNKNOWN_MEMBER_ID,
                                                              ("nope", 0): UNKNOWN_TOPIC}
    assert state_of(broker) == before


def test_an_admin_commit_to_an_empty_or_unknown_group_is_stored() -> None:
    broker = make_broker()
    assert commit(broker, {("t0", 0): 1}, group="new") == {("t0", 0): 0}
    assert broker.groups["new"].state is GroupState.EMPTY and committed(broker, "new") == {("t0", 0): 1}
    assert commit(broker, {("t0", 0): 2}, group="new") == {("t0", 0): 0}
    assert committed(broker, "new") == {("t0", 0): 2}


# ============================================================================ ListGroups filters


def test_list_groups_filters_by_state_and_by_type_as_kafka_does() -> None:
    broker = make_broker()
    commit(broker, {("t0", 0): 1}, group="simple")
    form_stable(broker.group("busy"), [("c0", {"group_id": "busy"})])

    def listed(**filters: Any) -> list[tuple[str, str, str]]:
        reply, _ = handle(broker, "ListGroups", ListGroupsRequest(**filters))
        return [(g.group_id, g.group_state, g.group_type) for g in reply.groups]

    both = [("simple", "Empty", "classic"), ("busy", "Stable", "classic")]
    assert listed() == both
    assert listed(states_filter=[" STABLE "]) == [both[1]]  # trimmed, any case
    assert listed(types_filter=["Classic"]) == both
    assert listed(types_filter=["consumer"]) == [] and listed(types_filter=["nonsense"]) == []
    assert listed(states_filter=["empty"], types_filter=["consumer", "classic"]) == [both[0]]


# ============================================================================ over sockets: durable, and `grouplab delete --topic`


async def test_a_deleted_offset_stays_deleted_after_a_coordinator_restart(tmp_path: Path) -> None:
    async def start() -> CoordinatorServer:
        return await CoordinatorServer(BrokerConfig(), "127.0.0.1", 0, data_dir=tmp_path).start()

    server = await start()
    try:
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"t": 2})
            await admin.commit_offsets("g", {TP("t", 0): 5, TP("t", 1): 6})
            assert await admin.delete_offsets("g", [TP("t", 0)]) == {TP("t", 0): 0}
            with pytest.raises(AdminError, match="GROUP_ID_NOT_FOUND"):
                await admin.delete_offsets("nosuch", [TP("t", 0)])
    finally:
        await server.stop()
    server = await start()
    try:
        async with AdminClient("127.0.0.1", server.port) as admin:
            assert await admin.fetch_offsets("g") == {TP("t", 1): 6}
    finally:
        await server.stop()


async def test_grouplab_delete_topic_deletes_offsets_of_one_group() -> None:
    server = await CoordinatorServer(BrokerConfig(group_initial_rebalance_delay_ms=0), "127.0.0.1", 0).start()
    try:
        bootstrap = ["--bootstrap-server", f"127.0.0.1:{server.port}"]
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"t": 2, "u": 1})
            await admin.commit_offsets("g", {TP("t", 0): 3, TP("t", 1): 4, TP("u", 0): 5})

            code, out, err = await grouplab("delete", "--group", "g", "--topic", "t", *bootstrap)
            assert (code, err) == (0, "") and "deleted the committed offsets of t-0, t-1 from group 'g'" in out
            assert await admin.fetch_offsets("g") == {TP("u", 0): 5}
            code, out, err = await grouplab("delete", "--group", "g", "--topic", "u:0,3", "--topic", "nope", *bootstrap)
            assert code == 1 and "u-0" in out
            one_line(err, "topic 'nope'", "u-3", "UNKNOWN_TOPIC_OR_PARTITION")
            code, out, err = await grouplab("delete", "--group", "nosuch", "--topic", "t", *bootstrap)
            assert (code, out) == (1, "")
            one_line(err, "'nosuch' does not exist")
            code, out, err = await grouplab("delete", "--group", "g", "--group", "h", "--topic", "t", *bootstrap)
            assert code == 2
            one_line(err, "exactly one --group")
            code, out, err = await grouplab("delete", "--group", "g", "--topic", "t:x", *bootstrap)
            assert code == 2
            one_line(err, "t:x")
            assert "g" in server.broker.groups  # deleting offsets never deletes the group
    finally:
        await server.stop()
