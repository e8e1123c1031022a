"""The Kafka-wire listener writes a client's pipelined run of OffsetCommit and Heartbeat answers
together (issue 26: async commits per second). A client pipelining commits sends a hundred in one
read; one write and one wake-up per answer cost a fifth of the server's time. The answers still
come one per request, in order, and none waits behind a request that takes long (a parked Fetch):
the client never waits on an answer the server has."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

from grouplab.coordinator.kafka_wire.listener import OUTBOX_ANSWERS
from grouplab.coordinator.server import CoordinatorServer

from test_kafka_wire import Raw, fetch, server  # noqa: F401 - the fixture too

pytestmark = pytest.mark.e2e
COMMIT = OffsetCommitRequest[8]
PART = COMMIT.OffsetCommitRequestTopic.OffsetCommitRequestPartition


def commit(offset: int) -> Any:
    """A simple consumer's commit (no member, no generation), accepted while the group is Empty."""
    return COMMIT(group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                  topics=[COMMIT.OffsetCommitRequestTopic(name="t", partitions=[PART(
                      partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])])


def count_writes(srv: CoordinatorServer) -> list[int]:
    """Wrap the transport of the server's one Kafka connection: the sizes of its writes."""
    (conn,) = srv.kafkas[0].connections
    writes: list[int] = []
    real = conn.transport.write

    def write(data: bytes) -> None:
        writes.append(len(data))
        real(data)

    conn.transport.write = write  # type: ignore[method-assign]
    return writes


async def connected(srv: CoordinatorServer) -> Raw:
    raw = await Raw.open(srv.kafka_port)
    raw.send(commit(0))  # the server has the connection once it answers
    assert (await raw.read(OffsetCommitResponse, 8, timeout=30)).topics[0].partitions[0].error_code == 0
    return raw


async def test_pipelined_commits_are_answered_in_order_in_fewer_writes(server: CoordinatorServer) -> None:
    raw = await connected(server)
    writes = count_writes(server)
    sent = [raw.send(commit(offset)) for offset in range(1, 101)]  # one write of the client's
    got = [await raw.read(OffsetCommitResponse, 8, timeout=30) for _ in sent]
    assert [r.header.correlation_id for r in got] == sent
    assert all(r.topics[0].partitions[0].error_code == 0 for r in got)
    # At most OUTBOX_ANSWERS answers a write; on main each answer was a write of its own.
    assert len(writes) < len(sent), writes
    assert len(writes) >= len(sent) // OUTBOX_ANSWERS
    raw.close()


async def test_answers_before_a_parked_fetch_are_written_before_it_completes(server: CoordinatorServer) -> None:
    """A commit, then a Fetch that parks for a minute at the log end: the commit's answer comes now."""
    raw = await connected(server)
    raw.send(commit(1))
    raw.send(fetch(11, 0, max_wait_ms=60_000))
    answered = await raw.read(OffsetCommitResponse, 8, timeout=30)  # well before the Fetch's minute
    assert answered.topics[0].partitions[0].error_code == 0
    (conn,) = server.kafkas[0].connections
    assert conn.outbox == [] and conn.inflight is not None  # the Fetch waits; nothing is kept back
    raw.close()
