"""DeleteGroups (API key 42 in Kafka; docs/protocol.md §3.11) and `grouplab delete`, like
`kafka-consumer-groups --delete`: an Empty group and its offsets are deleted, with tombstones in
the group log so a restart does not bring it back; a group with members is NON_EMPTY_GROUP, an
unknown one GROUP_ID_NOT_FOUND, a longer id than any group may have INVALID_GROUP_ID; a repeated
name is answered once. A refusal changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group_log import GroupLog, GroupTombstone, OffsetTombstone
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.protocol import events
from grouplab.protocol.effects import CancelTimer, LogEvent, Persist, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from grouplab.protocol.types import TopicPartition
from tests.cli_subprocess import grouplab, one_line

T0 = 1_700_000_000_000


def broker(**overrides: Any) -> Broker:
    b = Broker(BrokerConfig(group_initial_rebalance_delay_ms=0, **overrides), SequentialMemberIds())
    b.topics.partitions.update({"t": 3})
    return b


def handle(b: Broker, api: str, body: Any, token: str = "r") -> tuple[Any, list]:
    """The reply to `token` (None if the request was parked) and every output."""
    out = b.handle(api, body, RequestContext(token, client_id="c"), T0)
    replies = [o.body for o in out if isinstance(o, Reply) and o.to == token]
    assert len(replies) <= 1
    return (replies[0] if replies else None), out


def commit(b: Broker, group: str, *partitions: int) -> None:
    reply, _ = handle(b, "OffsetCommit", OffsetCommitRequest(group, [OffsetCommitRequestTopic(
        "t", [OffsetCommitRequestPartition(p, 10 + p) for p in partitions])]))
    assert all(p.error_code == 0 for t in reply.topics for p in t.partitions)


def join(b: Broker, group: str, member_id: str = "", token: str = "j") -> Any:
    req = JoinGroupRequest(group, 10_000, 30_000, member_id, "consumer", [JoinGroupRequestProtocol("range", b"")])
    return handle(b, "JoinGroup", req, token)[0]


def delete(b: Broker, *groups: str) -> tuple[list[tuple[str, int]], list]:
    reply, out = handle(b, "DeleteGroups", DeleteGroupsRequest(list(groups)))
    assert isinstance(reply, DeleteGroupsResponse) and reply.error_code == 0
    return [(r.group_id, r.error_code) for r in reply.results], out


def test_an_empty_group_is_deleted_with_its_offsets_and_tombstones_go_before_the_answer() -> None:
    b = broker()
    commit(b, "g", 0, 2)
    results, out = delete(b, "g")
    assert results == [("g", ErrorCode.NONE)]
    assert "g" not in b.groups
    kinds = [type(o) for o in out]
    assert kinds == [Persist, Persist, Persist, Reply, LogEvent]
    assert [o.record for o in out if isinstance(o, Persist)] == [
        OffsetTombstone("g", "t", 0, T0), OffsetTombstone("g", "t", 2, T0), GroupTombstone("g", T0)]
    [ev] = [o.payload for o in out if isinstance(o, LogEvent)]
    assert isinstance(ev, events.GroupDeleted)
    assert (ev.group_id, ev.reason, ev.offsets_deleted, ev.state.value) == ("g", "delete_groups", 2, "Dead")
    described, _ = handle(b, "DescribeGroups", DescribeGroupsRequest(["g"]))
    assert described.groups[0].group_state == "Dead"


def test_every_refusal_is_answered_per_group_and_changes_nothing() -> None:
    b = broker(max_id_length=8)
    first = join(b, "busy")
    assert join(b, "busy", first.member_id, token="j2") is None  # parked: a member, PreparingRebalance
    commit(b, "empty", 1)
    before = {gid: (g.state, dict(g.offsets.committed), dict(g.members)) for gid, g in b.groups.items()}
    results, out = delete(b, "busy", "nosuch", "x" * 9)
    assert results == [("busy", ErrorCode.NON_EMPTY_GROUP), ("nosuch", ErrorCode.GROUP_ID_NOT_FOUND),
                       ("x" * 9, ErrorCode.INVALID_GROUP_ID)]
    assert [type(o) for o in out] == [Reply]  # nothing persisted, nothing logged
    assert {gid: (g.state, dict(g.offsets.committed), dict(g.members)) for gid, g in b.groups.items()} == before


def test_a_repeated_name_is_answered_once_in_first_seen_order() -> None:
    b = broker()
    commit(b, "a", 0)
    commit(b, "b", 0)
    results, out = delete(b, "b", "a", "b", "nosuch", "a", "nosuch")
    assert results == [("b", 0), ("a", 0), ("nosuch", ErrorCode.GROUP_ID_NOT_FOUND)]
    assert len([o for o in out if isinstance(o, LogEvent)]) == 2
    assert b.groups == {}


def test_the_empty_group_id_is_a_valid_name_as_in_kafka() -> None:
    """Offsets may be committed under "" (a simple consumer's group): it can be deleted too."""
    b = broker()
    assert delete(b, "")[0] == [("", ErrorCode.GROUP_ID_NOT_FOUND)]
    commit(b, "", 0)
    assert delete(b, "")[0] == [("", ErrorCode.NONE)] and b.groups == {}


def test_pending_member_ids_go_with_the_group() -> None:
    b = broker()
    first = join(b, "g")
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and b.groups["g"].state.value == "Empty"
    results, out = delete(b, "g")
    assert results == [("g", 0)]
    assert [o.key for o in out if isinstance(o, CancelTimer)] == [("pending", "g", first.member_id)]
    # The pending id's owner comes back to a group that does not know it, and starts over.
    assert join(b, "g", first.member_id, token="j2").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert "g" not in b.groups


def test_staged_transactional_offsets_are_dropped_with_the_group_and_their_commit_brings_nothing_back() -> None:
    b = broker()
    commit(b, "g", 0)
    b.groups["g"].offsets.stage_txn(9, {TopicPartition("t", 1): (5, None)}, T0)
    assert delete(b, "g")[0] == [("g", 0)]
    assert b._complete_txn_offsets("g", 9, True, T0 + 1) == [] and "g" not in b.groups


# ----------------------------------------------------------------------------- over sockets, with a data directory


async def test_a_deleted_group_stays_deleted_after_a_restart(tmp_path: Path) -> None:
    async def start() -> CoordinatorServer:
        server = CoordinatorServer(BrokerConfig(), "127.0.0.1", 0, data_dir=tmp_path)
        return await server.start()

    server = await start()
    try:
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"t": 2})
            assert await admin.commit_offsets("gone", {TopicPartition("t", 0): 5, TopicPartition("t", 1): 6}) == {
                TopicPartition("t", 0): 0, TopicPartition("t", 1): 0}
            await admin.commit_offsets("kept", {TopicPartition("t", 0): 7})
            assert await admin.delete_groups(["gone", "gone", "nosuch"]) == {
                "gone": 0, "nosuch": ErrorCode.GROUP_ID_NOT_FOUND}
    finally:
        await server.stop()
    server = await start()
    try:
        assert set(server.broker.groups) == {"kept"}
        async with AdminClient("127.0.0.1", server.port) as admin:
            assert await admin.fetch_offsets("gone", [TopicPartition("t", 0)]) == {TopicPartition("t", 0): -1}
            assert await admin.fetch_offsets("kept") == {TopicPartition("t", 0): 7}
            assert sorted(await admin.list_groups()) == ["kept"]
    finally:
        await server.stop()
    with GroupLog.in_dir(tmp_path) as log:  # compacted at the second start: nothing of "gone" is left
        assert not [r for r in log.replay() if getattr(r, "group_id", None) == "gone"]


# ----------------------------------------------------------------------------- grouplab delete


async def test_grouplab_delete() -> None:
    server = await CoordinatorServer(BrokerConfig(), "127.0.0.1", 0).start()
    try:
        bootstrap = f"127.0.0.1:{server.port}"
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"t": 1})
            await admin.commit_offsets("g", {TopicPartition("t", 0): 3})
            await admin.commit_offsets("h", {TopicPartition("t", 0): 4})
            first = await admin.request("JoinGroup", JoinGroupRequest(
                "busy", 10_000, 30_000, "", "consumer", [JoinGroupRequestProtocol("range", b"")]))
            await admin.send("JoinGroup", JoinGroupRequest(  # parked for the initial delay: a member, not Empty
                "busy", 10_000, 30_000, first.member_id, "consumer", [JoinGroupRequestProtocol("range", b"")]))
            while "busy" not in server.broker.groups or not server.broker.groups["busy"].members:
                await asyncio.sleep(0.01)

            code, out, err = await grouplab("delete", "--group", "g", "--bootstrap-server", bootstrap)
            assert (code, err) == (0, "") and "deleted group 'g'" in out
            code, out, err = await grouplab("delete", "--group", "g", "--bootstrap-server", bootstrap)
            assert code == 1 and out == ""
            one_line(err, "'g' does not exist")
            code, out, err = await grouplab("delete", "--group", "busy", "--group", "h", "--bootstrap-server", bootstrap)
            assert code == 1 and "deleted group 'h'" in out
            one_line(err, "'busy'", "NON_EMPTY_GROUP")
            assert set(server.broker.groups) == {"busy"}
            code, out, err = await grouplab("delete", "--bootstrap-server", bootstrap)
            assert code == 2
            one_line(err, "--group")
    finally:
        await server.stop()
    code, out, err = await grouplab("delete", "--group", "g", "--bootstrap-server", "127.0.0.1:1")
    assert code == 1
    one_line(err, "cannot connect")
