"""The consumer-group admin APIs on the Kafka wire (issue 21; docs/kafka-wire.md §4): the translation
of OffsetFetch at every version (v8+ names several groups: one grouplab OffsetFetch each, their
answers gathered in request order), OffsetDelete (API 47) and ListGroups up to v5 (the types
filter), each checked by encoding and decoding with kafka-python's classes as a client would; then
over a socket, an OffsetFetch of several groups answered in one response, and its run replayed
identically from the trace, one OffsetFetch step per group."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin.groups import ListGroupsRequest, ListGroupsResponse
from kafka.protocol.consumer.group import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.kafka_wire.apis import APIS
from grouplab.coordinator.kafka_wire.listener import _GroupFetches, _GroupPart
from grouplab.coordinator.kafka_wire.translate import GroupFetches, GroupsFetched, View, to_grouplab, to_kafka
from grouplab.coordinator.server import CoordinatorServer
from grouplab.eventlog import run_dir_log
from grouplab.protocol import messages as m
from grouplab.protocol.errors import ErrorCode
from grouplab.replay import replay
from grouplab.tracefile import TraceFile, read_trace, trace_path

VIEW = View("127.0.0.1", 9092)
FETCH, DELETE, LIST = APIS[9], APIS[47], APIS[16]


def wire(request: Any) -> Any:
    """The request as the listener gets it: encoded by the client, decoded at its version."""
    return type(request).decode(bytes(request.encode()), version=request.API_VERSION)


def answer(api: Any, version: int, body: Any) -> Any:
    """grouplab's answer as the client reads it."""
    response = to_kafka(api, version, body, VIEW)
    return api.response[version].decode(bytes(response.encode()), version=version)


def test_the_advertised_ranges() -> None:
    assert (FETCH.min_version, FETCH.max_version) == (1, 9)
    assert (LIST.min_version, LIST.max_version) == (0, 5)
    assert (DELETE.name, DELETE.min_version, DELETE.max_version) == ("OffsetDelete", 0, 0)


# ----------------------------------------------------------------------------- OffsetFetch


@pytest.mark.parametrize("version", range(1, 8))
def test_offset_fetch_of_one_group_up_to_v7(version: int) -> None:
    c = OffsetFetchRequest[version]
    topics = [c.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]
    got = to_grouplab(FETCH, version, wire(c(group_id="g", topics=topics, require_stable=True)), VIEW)
    assert got == m.OffsetFetchRequest("g", [m.OffsetFetchRequestTopic("t", [0, 1])], require_stable=version >= 7)
    if version >= 2:  # a null topic list asks for every committed partition
        assert to_grouplab(FETCH, version, wire(c(group_id="g", topics=None)), VIEW).topics is None
    body = m.OffsetFetchResponse(topics=[m.OffsetFetchResponseTopic("t", [
        m.OffsetFetchResponsePartition(0, 42, 3, "md"), m.OffsetFetchResponsePartition(1, -1, -1, "")])])
    resp = answer(FETCH, version, body)
    [t] = resp.topics
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in t.partitions] == [
        (0, 42, "md", 0), (1, -1, "", 0)]


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetch_of_several_groups_is_one_grouplab_request_per_group(version: int) -> None:
    c = OffsetFetchRequest[version]
    G = c.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    # v9's member id and epoch are KIP-848's: carried, and checked by a consumer-protocol group only
    extra = {"member_id": "consumer-1", "member_epoch": 7} if version >= 9 else {}
    groups = [G(group_id="a", topics=[T(name="t", partition_indexes=[1])], **extra), G(group_id="b", topics=None),
              G(group_id="a", topics=None)]
    got = to_grouplab(FETCH, version, wire(c(groups=groups, require_stable=True)), VIEW)
    first = m.OffsetFetchRequest("a", [m.OffsetFetchRequestTopic("t", [1])], True)
    if version >= 9:
        first.member_id, first.member_epoch = "consumer-1", 7
    assert got == GroupFetches([first, m.OffsetFetchRequest("b", None, True), m.OffsetFetchRequest("a", None, True)])
    fetched = m.OffsetFetchResponse(topics=[m.OffsetFetchResponseTopic("t", [m.OffsetFetchResponsePartition(1, 9)])])
    resp = answer(FETCH, version, GroupsFetched([
        ("a", fetched), ("b", m.OffsetFetchResponse()), ("c", m.ErrorResponse(ErrorCode.UNKNOWN_SERVER_ERROR, "x"))]))
    assert [(g.group_id, g.error_code, [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                                        for t in g.topics]) for g in resp.groups] == [
        ("a", 0, [("t", [(1, 9)])]), ("b", 0, []), ("c", ErrorCode.UNKNOWN_SERVER_ERROR, [])]


def test_the_answers_of_a_several_group_fetch_are_sent_once_all_are_in_in_request_order() -> None:
    sent: list[tuple[int, Any]] = []

    class Conn:
        peer = "127.0.0.1:5555"

        def send(self, correlation_id: int, body: Any, api: str = "", client_id: str = "") -> None:
            sent.append((correlation_id, body))

    batch = _GroupFetches(Conn(), 7, ["a", "b"])  # type: ignore[arg-type]
    first, second = _GroupPart(batch, 0), _GroupPart(batch, 1)
    assert first.peer == "127.0.0.1:5555"  # what the trace names the request's connection
    second.send(7, m.OffsetFetchResponse(error_code=1))
    second.send(7, m.OffsetFetchResponse(error_code=2))  # a second answer to one part is not taken
    assert sent == []
    first.send(7, m.ErrorResponse(ErrorCode.UNKNOWN_SERVER_ERROR))
    assert sent == [(7, GroupsFetched([("a", m.ErrorResponse(ErrorCode.UNKNOWN_SERVER_ERROR)),
                                       ("b", m.OffsetFetchResponse(error_code=1))]))]


def test_a_fault_rules_error_answers_each_group_of_a_several_group_fetch() -> None:
    """The fault proxy's `error` answer to an OffsetFetch v8+ names the request's groups (it needs
    the request: without it the rule can only drop the frame)."""
    from grouplab.faults.kafka_frames import error_frame

    c = OffsetFetchRequest[9]
    request = c(groups=[c.OffsetFetchRequestGroup(group_id=g, member_id=None, member_epoch=-1, topics=None)
                        for g in ("a", "b")], require_stable=False)
    request.with_header(correlation_id=3, client_id="x")
    payload = bytes(request.encode(header=True))
    body = m.OffsetFetchResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    frame = error_frame("OffsetFetch", 9, 3, body, "127.0.0.1", 1, payload)
    assert frame is not None
    resp = OffsetFetchResponse.decode(frame[4:], version=9, header=True)
    assert [(g.group_id, g.error_code, list(g.topics)) for g in resp.groups] == [
        ("a", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []), ("b", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [])]
    assert error_frame("OffsetFetch", 9, 3, body, "127.0.0.1", 1) is None


# ----------------------------------------------------------------------------- OffsetDelete


def test_offset_delete_v0() -> None:
    c = OffsetDeleteRequest[0]
    T = c.OffsetDeleteRequestTopic
    request = c(group_id="g", topics=[T(name="t", partitions=[T.OffsetDeleteRequestPartition(partition_index=0),
                                                               T.OffsetDeleteRequestPartition(partition_index=2)])])
    assert to_grouplab(DELETE, 0, wire(request), VIEW) == m.OffsetDeleteRequest("g", [m.OffsetDeleteRequestTopic(
        "t", [m.OffsetDeleteRequestPartition(0), m.OffsetDeleteRequestPartition(2)])])
    resp = answer(DELETE, 0, m.OffsetDeleteResponse(topics=[m.OffsetDeleteResponseTopic("t", [
        m.OffsetDeleteResponsePartition(0), m.OffsetDeleteResponsePartition(2, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)])]))
    assert resp.error_code == 0
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        ("t", [(0, 0), (2, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)])]
    refused = answer(DELETE, 0, m.OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND))
    assert (refused.error_code, list(refused.topics)) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    failed = answer(DELETE, 0, m.ErrorResponse(ErrorCode.UNKNOWN_SERVER_ERROR, "x"))  # a step that failed
    assert failed.error_code == ErrorCode.UNKNOWN_SERVER_ERROR


# ----------------------------------------------------------------------------- ListGroups


@pytest.mark.parametrize("version", range(0, 6))
def test_list_groups_at_every_version(version: int) -> None:
    fields: dict[str, Any] = {}
    if version >= 4:
        fields["states_filter"] = ["Stable"]
    if version >= 5:
        fields["types_filter"] = ["classic"]
    got = to_grouplab(LIST, version, wire(ListGroupsRequest[version](**fields)), VIEW)
    assert got == m.ListGroupsRequest(states_filter=fields.get("states_filter", []),
                                      types_filter=fields.get("types_filter", []))
    resp = answer(LIST, version, m.ListGroupsResponse(groups=[m.ListedGroup("g", "consumer", "Stable")]))
    [g] = resp.groups
    assert (g.group_id, g.protocol_type) == ("g", "consumer")
    if version >= 4:
        assert g.group_state == "Stable"
    if version >= 5:
        assert g.group_type == "classic"


# ----------------------------------------------------------------------------- over a socket, traced and replayed


class Raw:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    def send(self, request: Any) -> None:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="admin")
        self.writer.write(bytes(request.encode(header=True, framed=True)))

    async def read(self, response_class: Any, version: int) -> Any:
        size = int.from_bytes(await asyncio.wait_for(self.reader.readexactly(4), 30), "big")
        payload = await asyncio.wait_for(self.reader.readexactly(size), 30)
        return response_class.decode(payload, version=version, header=True)


@pytest.mark.e2e
async def test_an_offset_fetch_of_several_groups_over_the_wire_is_traced_per_group_and_replays(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    events = run_dir_log(run_dir, "coordinator")
    trace = TraceFile(trace_path(run_dir))
    srv = CoordinatorServer(BrokerConfig(), "127.0.0.1", 0, events=events, trace=trace, kafka_port=0)
    await srv.start()
    try:
        raw = Raw(*await asyncio.open_connection("127.0.0.1", srv.kafka_port))
        from grouplab.admin import AdminClient
        async with AdminClient("127.0.0.1", srv.port) as admin:
            await admin.create_topics({"t": 2})
        c = OffsetCommitRequest[8]
        P = c.OffsetCommitRequestTopic.OffsetCommitRequestPartition
        for group, offset in (("a", 5), ("b", 7)):
            raw.send(c(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                       topics=[c.OffsetCommitRequestTopic(name="t", partitions=[P(
                           partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                           committed_metadata="")])]))
            assert (await raw.read(OffsetCommitResponse, 8)).topics[0].partitions[0].error_code == 0
        f = OffsetFetchRequest[8]
        G = f.OffsetFetchRequestGroup
        raw.send(f(groups=[G(group_id="b", topics=None), G(group_id="nosuch", topics=None),
                           G(group_id="a", topics=[G.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])])],
                   require_stable=False))
        resp = await raw.read(OffsetFetchResponse, 8)
        assert [(g.group_id, g.error_code, [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                                            for t in g.topics]) for g in resp.groups] == [
            ("b", 0, [("t", [(0, 7)])]), ("nosuch", 0, []), ("a", 0, [("t", [(0, 5), (1, -1)])])]
        d = OffsetDeleteRequest[0]
        raw.send(d(group_id="a", topics=[d.OffsetDeleteRequestTopic(name="t", partitions=[
            d.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])]))
        deleted = await raw.read(OffsetDeleteResponse, 0)
        assert (deleted.error_code, deleted.topics[0].partitions[0].error_code) == (0, 0)
        raw.writer.close()
    finally:
        await srv.stop()
        events.close()
        trace.close()
    lines = list(read_trace(trace_path(run_dir)))
    fetches = [line for line in lines if line.get("kind") == "request" and line["api"] == "OffsetFetch"]
    assert [line["body"]["group_id"] for line in fetches] == ["b", "nosuch", "a"]
    assert len({(line["conn"], line["correlation_id"]) for line in fetches}) == 1  # one Kafka request
    result = replay(run_dir)
    assert result.identical, result.difference


def test_an_error_rule_over_a_response_answers_at_the_requests_version() -> None:
    """A fault rule's error in place of the coordinator's answer (`direction="response"`) is encoded
    at the version the client asked (the proxy forgot it when the answer arrived and wrote v0, which
    a client reading v4 misreads, or dropped the answer of an API without v0), and an OffsetFetch v8+
    answer names the groups the replaced answer named."""
    import socket
    import struct

    from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse

    from grouplab.testing import Cluster

    def ask(sock: socket.socket, request: Any, cid: int) -> bytes:
        request.with_header(correlation_id=cid, client_id="raw")
        payload = bytes(request.encode(header=True))
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _read(sock, 4))
        return _read(sock, size)

    with Cluster() as cluster:
        host, port = cluster.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            cluster.error("Heartbeat", "NOT_COORDINATOR", count=1, direction="response")
            beat = HeartbeatRequest[4](group_id="g", generation_id=1, member_id="m", group_instance_id=None)
            answer = HeartbeatResponse.decode(ask(sock, beat, 5), version=4, header=True)
            assert answer.header.correlation_id == 5 and answer.error_code == ErrorCode.NOT_COORDINATOR

            cluster.error("OffsetFetch", "COORDINATOR_LOAD_IN_PROGRESS", count=1, direction="response")
            c = OffsetFetchRequest[9]
            fetch = c(groups=[c.OffsetFetchRequestGroup(group_id=g, member_id=None, member_epoch=-1, topics=None)
                              for g in ("a", "b")], require_stable=False)
            answer = OffsetFetchResponse.decode(ask(sock, fetch, 6), version=9, header=True)
            assert [(g.group_id, g.error_code) for g in answer.groups] == [
                ("a", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), ("b", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]


def _read(sock: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the connection closed"
        data += chunk
    return data
