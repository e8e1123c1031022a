"""coordinator/tally.py step by step: the errors an answer carries (once each, however deep),
recording only between start() and stop(), counts per client id up to a moment; and the server
feeding it from both ports of a cluster's brokers (scripts/bench_failover.py's counts)."""

from __future__ import annotations

import asyncio

import pytest

from grouplab.admin import AdminClient, AdminError
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.coordinator.tally import RequestTally, answer_errors
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (HeartbeatResponse, OffsetCommitResponse, OffsetCommitResponsePartition,
                                        OffsetCommitResponseTopic)


def test_answer_errors_names_each_code_once_at_any_depth() -> None:
    refused = OffsetCommitResponse(topics=[OffsetCommitResponseTopic("t", [
        OffsetCommitResponsePartition(p, ErrorCode.NOT_COORDINATOR) for p in range(20)]),
        OffsetCommitResponseTopic("u", [OffsetCommitResponsePartition(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])])
    assert answer_errors(refused) == {"NOT_COORDINATOR", "UNKNOWN_TOPIC_OR_PARTITION"}
    assert answer_errors(HeartbeatResponse(ErrorCode.REBALANCE_IN_PROGRESS)) == {"REBALANCE_IN_PROGRESS"}
    assert answer_errors(HeartbeatResponse()) == set()
    assert answer_errors(HeartbeatResponse(9999)) == {"ERROR_9999"}


def test_records_only_while_started_and_counts_up_to_a_moment() -> None:
    now = [0.0]
    tally = RequestTally(lambda: now[0])
    tally.request("a", "Heartbeat")  # not recording yet
    now[0] = 1.0
    assert tally.start() == 1.0
    tally.request("a", "Heartbeat")
    tally.answered("a", "Heartbeat", HeartbeatResponse(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    tally.answered_codes("b", "FindCoordinator", [0, ErrorCode.COORDINATOR_NOT_AVAILABLE, 0])
    now[0] = 2.0
    tally.request("a", "Heartbeat")
    tally.answered("a", "Heartbeat", HeartbeatResponse())
    assert tally.counts(until=1.5) == {"a": {"Heartbeat": 1, "error:COORDINATOR_LOAD_IN_PROGRESS": 1},
                                       "b": {"error:COORDINATOR_NOT_AVAILABLE": 1}}
    assert tally.counts()["a"] == {"Heartbeat": 2, "error:COORDINATOR_LOAD_IN_PROGRESS": 1}
    tally.stop()
    tally.request("a", "Heartbeat")
    assert tally.counts()["a"]["Heartbeat"] == 2
    tally.start()
    assert tally.counts() == {}


async def test_the_server_counts_each_brokers_requests_by_client_id() -> None:
    server = CoordinatorServer(BrokerConfig(), "127.0.0.1", 0, kafka_port=0, brokers=3)
    await server.start()
    try:
        tally = server.tally = RequestTally(asyncio.get_running_loop().time)
        tally.start()
        for node in (0, 2):
            async with AdminClient("127.0.0.1", server.ports[node], client_id=f"admin-{node}") as admin:
                await admin.create_topics({f"t{node}": 1})
                with pytest.raises(AdminError):
                    await admin.create_topics({f"t{node}": 1})  # TOPIC_ALREADY_EXISTS
        counts = tally.counts()
        for node in (0, 2):
            assert counts[f"admin-{node}"]["CreateTopics"] == 2
            assert counts[f"admin-{node}"]["error:TOPIC_ALREADY_EXISTS"] == 1
    finally:
        await server.stop()
