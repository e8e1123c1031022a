"""Issue 11, memory is bounded: the server keeps no per-group state for group ids it has no group
for. A group's input queue lives only while it holds inputs (coordinator/server.py); counted here
over real loopback sockets after requests for ids nobody uses, and for a real group."""

from __future__ import annotations

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    SyncGroupRequest,
)


def join_req(group: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(group, 10_000, 30_000, member_id, "consumer", [JoinGroupRequestProtocol("range", b"")])


async def test_requests_for_unknown_groups_leave_nothing_behind_in_the_server() -> None:
    server = await CoordinatorServer(BrokerConfig(), "127.0.0.1", 0).start()
    try:
        async with AdminClient("127.0.0.1", server.port) as admin:
            for i in range(500):
                gid = f"unknown-{i}"
                assert (await admin.request("Heartbeat", HeartbeatRequest(gid, 1, "m"))).error_code == \
                    ErrorCode.UNKNOWN_MEMBER_ID
                fetched = await admin.request("OffsetFetch", OffsetFetchRequest(gid, [OffsetFetchRequestTopic("t", [0])]))
                assert fetched.topics[0].partitions[0].committed_offset == -1
                await admin.request("SyncGroup", SyncGroupRequest(gid, 1, "m"))
                await admin.request("LeaveGroup", LeaveGroupRequest(gid, [LeaveGroupRequestMember("m")]))
            assert server._queues == {} and server.broker.groups == {}
            # A real group's queue goes too once its inputs are handled (its parked join lives in the group).
            first = await admin.request("JoinGroup", join_req("real"))
            await admin.send("JoinGroup", join_req("real", first.member_id))
            await admin.request("OffsetFetch", OffsetFetchRequest("real", None))  # after the join, on its queue
            assert server._queues == {} and set(server.broker.groups) == {"real"}
    finally:
        await server.stop()
