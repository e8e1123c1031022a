"""grouplab's own data plane in a cluster of brokers (docs/protocol.md §12.1): the producer and the
delivery application follow partition leaders from Metadata and their coordinators from
FindCoordinator, step by step with exact outputs (NOT_LEADER_OR_FOLLOWER, a leader's connection
closing, NOT_COORDINATOR at the transaction coordinator); one broker names no node; and the
simulator's delivery-failover scenario over seeds, in every delivery mode, replayed identically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.delivery import DeliveryApp, DeliveryConfig, DeliveryMode
from grouplab.consumer.member import Send
from grouplab.consumer.producer import Acked, ProducerConfig, ProducerMachine
from grouplab.protocol.effects import ArmTimer
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
    FetchedRecord,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdResponse,
    JoinGroupResponse,
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
    Record,
    SyncGroupResponse,
)
from grouplab.protocol.types import TopicPartition
from grouplab.replay import replay
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import load_scenario, resolve_scenario

NODES = (0, 1, 2)
OUT0 = TopicPartition("out", 0)


def sends(out: list[Any]) -> list[Send]:
    return [o for o in out if isinstance(o, Send)]


def where(out: list[Any]) -> list[tuple[str, int | None]]:
    """Each Send as (api, node): what went where, in order."""
    return [(s.api, s.node) for s in sends(out)]


def metadata(leaders: dict[TopicPartition, int]) -> MetadataResponse:
    topics: dict[str, list[MetadataResponsePartition]] = {}
    for tp, node in sorted(leaders.items()):
        topics.setdefault(tp.topic, []).append(MetadataResponsePartition(tp.partition, node))
    return MetadataResponse(topics=[MetadataResponseTopic(t, error_code=0, partitions=ps) for t, ps in topics.items()])


def produced(code: ErrorCode, base_offset: int = 0) -> ProduceResponse:
    return ProduceResponse(responses=[ProduceTopicResponse("out", [ProducePartitionResponse(0, code.value, base_offset)])])


def sequence(send: Send) -> int:
    body = send.body
    assert isinstance(body, ProduceRequest)
    return body.topic_data[0].partition_data[0].records.base_sequence


def ready_producer(**config: Any) -> ProducerMachine:
    """An idempotent producer of a 3-broker cluster with its producer id (asked at bootstrap node 0)."""
    p = ProducerMachine(ProducerConfig(client_id="p", bootstrap_nodes=NODES, **config))
    out = p.start(0)
    assert where(out) == [("InitProducerId", 0)]
    p.on_response(sends(out)[0].correlation_id, InitProducerIdResponse(producer_id=7, producer_epoch=0), 1)
    return p


# ----------------------------------------------------------------------------- the producer, step by step


def test_a_batch_waits_for_metadata_and_goes_to_its_leader() -> None:
    p = ready_producer()
    _, out = p.send(OUT0, [Record(value=b"a")], 10)
    assert where(out) == [("Metadata", 0)]  # the leader is unknown: nothing is sent before the answer
    out = p.on_response(sends(out)[0].correlation_id, metadata({OUT0: 2}), 11)
    assert where(out) == [("Produce", 2)] and sequence(sends(out)[0]) == 0


def test_not_leader_refreshes_metadata_and_retries_at_the_new_leader_with_the_same_sequence() -> None:
    p = ready_producer(retry_backoff_ms=100)
    batch, out = p.send(OUT0, [Record(value=b"a"), Record(value=b"b")], 10)
    out = p.on_response(sends(out)[0].correlation_id, metadata({OUT0: 2}), 11)
    produce = sends(out)[0]
    out = p.on_response(produce.correlation_id, produced(ErrorCode.NOT_LEADER_OR_FOLLOWER), 20)
    # A refresh at once (the last one was 9 ms ago: it waits for the back-off), and the retry after it.
    assert where(out) == []
    assert ArmTimer(("metadata",), 110) in out and ArmTimer(("retry", 1), 120) in out
    out = p.on_timer(("metadata",), 110)
    assert where(out) == [("Metadata", 1)]  # the next bootstrap broker
    out = p.on_response(sends(out)[0].correlation_id, metadata({OUT0: 1}), 112)
    assert where(out) == []  # nothing parked: the batch waits for its retry timer
    out = p.on_timer(("retry", 1), 120)
    assert where(out) == [("Produce", 1)] and sequence(sends(out)[0]) == 0  # no gap, no new sequence
    out = p.on_response(sends(out)[0].correlation_id, produced(ErrorCode.NONE, 40), 125)
    assert [o for o in out if isinstance(o, Acked)] == [Acked(OUT0, batch, 40, 2, True)]
    _, out = p.send(OUT0, [Record(value=b"c")], 130)
    assert where(out) == [("Produce", 1)] and sequence(sends(out)[0]) == 2


def test_the_leaders_connection_closing_resends_there_after_a_refresh() -> None:
    p = ready_producer(retry_backoff_ms=100)
    _, out = p.send(OUT0, [Record(value=b"a")], 200)
    out = p.on_response(sends(out)[0].correlation_id, metadata({OUT0: 2}), 201)
    out = p.on_disconnect(210, 2)  # broker 2 killed: its connection closes under the producer
    # A refresh once the back-off since the last one (at 200) has passed; the batch after its own.
    assert where(out) == [] and ArmTimer(("metadata",), 300) in out and ArmTimer(("retry", 1), 310) in out
    out = p.on_timer(("metadata",), 300)
    assert where(out) == [("Metadata", 1)]
    out = p.on_response(sends(out)[0].correlation_id, metadata({OUT0: 0}), 302)
    out = p.on_timer(("retry", 1), 310)
    assert where(out) == [("Produce", 0)] and sequence(sends(out)[0]) == 0


def test_a_transactional_producer_finds_its_coordinator_and_follows_not_coordinator() -> None:
    p = ProducerMachine(ProducerConfig(client_id="p", transactional_id="tx", bootstrap_nodes=NODES, retry_backoff_ms=100))
    out = p.start(0)
    assert where(out) == [("FindCoordinator", 0)]
    lookup = sends(out)[0]
    assert lookup.body == FindCoordinatorRequest("tx", 1)
    out = p.on_response(lookup.correlation_id, FindCoordinatorResponse(0, 2, "h", 1), 1)
    assert where(out) == [("InitProducerId", 2)]
    p.on_response(sends(out)[0].correlation_id, InitProducerIdResponse(producer_id=3, producer_epoch=0), 2)
    p.begin_transaction()
    _, out = p.send(OUT0, [Record(value=b"a")], 10)
    assert where(out) == [("AddPartitionsToTxn", 2)]  # the batch waits for it (then for its leader)
    add = sends(out)[0]
    refused = AddPartitionsToTxnResponse(results=[AddPartitionsToTxnTopicResult(
        "out", [AddPartitionsToTxnPartitionResult(0, ErrorCode.NOT_COORDINATOR.value)])])
    out = p.on_response(add.correlation_id, refused, 12)
    assert where(out) == [] and ArmTimer(("retry", 1), 112) in out
    out = p.on_timer(("retry", 1), 112)
    assert where(out) == [("FindCoordinator", 1)]  # the coordinator is looked up again first
    out = p.on_response(sends(out)[0].correlation_id, FindCoordinatorResponse(0, 0, "h", 1), 113)
    assert where(out) == [("AddPartitionsToTxn", 0)]


def test_one_broker_names_no_node() -> None:
    p = ProducerMachine(ProducerConfig(client_id="p"))
    out = p.start(0)
    p.on_response(sends(out)[0].correlation_id, InitProducerIdResponse(producer_id=1, producer_epoch=0), 1)
    _, out = p.send(OUT0, [Record(value=b"a")], 2)
    assert where(out) == [("Produce", None)]
    out = p.on_response(sends(out)[0].correlation_id, produced(ErrorCode.NOT_LEADER_OR_FOLLOWER), 3)
    assert where(out) == [] and not any(isinstance(o, ArmTimer) and o.key == ("metadata",) for o in out)


# ----------------------------------------------------------------------------- the delivery app, step by step


def stable_app(mode: DeliveryMode = DeliveryMode.AT_LEAST_ONCE) -> tuple[DeliveryApp, list[Any]]:
    """A delivery app of a 3-broker cluster owning in-0 and in-1, its coordinator node 2, its producer
    ready, positions fetched: the outputs of its last step (the Metadata refresh for its fetch)."""
    from grouplab.protocol.consumer_protocol import encode_assignment
    from grouplab.protocol.types import Assignment

    consumer = ConsumerConfig(group_id="g", topics=["in"], client_id="c", session_timeout_ms=10_000,
                              heartbeat_interval_ms=1_000, max_poll_interval_ms=20_000, bootstrap_nodes=NODES)
    app = DeliveryApp(consumer, DeliveryConfig(mode, "out"))
    out = app.start(0)
    assert where(out) == [("InitProducerId", 0), ("FindCoordinator", 0)]
    init, lookup = sends(out)
    app.on_response(init.correlation_id, InitProducerIdResponse(producer_id=5, producer_epoch=0), 1)
    out = app.on_response(lookup.correlation_id, FindCoordinatorResponse(0, 2, "h", 1), 1)
    assert where(out) == [("JoinGroup", 2)]
    out = app.on_response(sends(out)[0].correlation_id, JoinGroupResponse(0, 1, "range", "leader", "c-1", []), 2)
    assert where(out) == [("SyncGroup", 2)]
    owned = [TopicPartition("in", 0), TopicPartition("in", 1)]
    out = app.on_response(sends(out)[0].correlation_id,
                          SyncGroupResponse(0, assignment=encode_assignment(Assignment(owned))), 3)
    assert where(out) == [("OffsetFetch", 2)]  # to the group's coordinator
    positions = OffsetFetchResponse(topics=[OffsetFetchResponseTopic("in", [OffsetFetchResponsePartition(0, 5),
                                                                            OffsetFetchResponsePartition(1, 7)])])
    out = app.on_response(sends(out)[0].correlation_id, positions, 4)
    return app, out


def fetched(topic: str, partition: int, code: ErrorCode = ErrorCode.NONE) -> FetchResponse:
    return FetchResponse(responses=[FetchTopicResponse(topic, [FetchPartitionResponse(partition, code.value)])])


def test_the_app_fetches_from_each_partitions_leader() -> None:
    app, out = stable_app()
    assert where(out) == [("Metadata", 0)]  # leaders first
    out = app.on_response(sends(out)[0].correlation_id,
                          metadata({TopicPartition("in", 0): 1, TopicPartition("in", 1): 2}), 5)
    assert where(out) == [("Fetch", 1), ("Fetch", 2)]
    bodies = [s.body for s in sends(out)]
    assert all(isinstance(b, FetchRequest) for b in bodies)
    assert [(t.topic, [(p.partition, p.fetch_offset) for p in t.partitions]) for b in bodies for t in b.topics] == \
        [("in", [(0, 5)]), ("in", [(1, 7)])]


def test_not_leader_on_a_fetch_refreshes_and_the_next_fetch_goes_to_the_new_leader() -> None:
    app, out = stable_app()
    out = app.on_response(sends(out)[0].correlation_id,
                          metadata({TopicPartition("in", 0): 1, TopicPartition("in", 1): 2}), 5)
    f1, f2 = sends(out)
    app.on_response(f1.correlation_id, fetched("in", 0), 6)
    out = app.on_response(f2.correlation_id, fetched("in", 1, ErrorCode.NOT_LEADER_OR_FOLLOWER), 7)
    # The batch is made of what both answered (nothing here); in-1's leader is refreshed after the back-off.
    assert where(out) == [] and ArmTimer(("app", "metadata"), 104) in out
    out = app.on_timer(("app", "metadata"), 104)
    assert where(out) == [("Metadata", 1)]
    out = app.on_response(sends(out)[0].correlation_id,
                          metadata({TopicPartition("in", 0): 1, TopicPartition("in", 1): 0}), 106)
    assert where(out) == [("Fetch", 0), ("Fetch", 1)]


def test_a_commit_refused_by_a_moved_coordinator_is_sent_again_after_the_backoff() -> None:
    from grouplab.protocol.messages import OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic

    app, out = stable_app()
    out = app.on_response(sends(out)[0].correlation_id,
                          metadata({TopicPartition("in", 0): 1, TopicPartition("in", 1): 1}), 5)
    fetch = sends(out)[0]
    records = FetchResponse(responses=[FetchTopicResponse("in", [FetchPartitionResponse(0, 0, records=[
        FetchedRecord(5, 0, b"x")], next_offset=6)])])
    out = app.on_response(fetch.correlation_id, records, 6)
    assert where(out) == [("Metadata", 0)]  # the producer's own table: the output's leader
    out = app.on_response(sends(out)[0].correlation_id, metadata({OUT0: 2}), 7)
    assert where(out) == [("Produce", 2)]
    out = app.on_response(sends(out)[0].correlation_id, produced(ErrorCode.NONE, 0), 8)
    assert where(out) == [("OffsetCommit", 2)]
    commit = sends(out)[0]
    refused = OffsetCommitResponse(topics=[OffsetCommitResponseTopic("in", [OffsetCommitResponsePartition(
        0, ErrorCode.NOT_COORDINATOR.value)])])
    out = app.on_response(commit.correlation_id, refused, 9)
    assert where(out) == [] and ArmTimer(("app", "commit"), 109) in out
    out = app.on_timer(("app", "commit"), 109)
    assert where(out) == [("OffsetCommit", 2)]  # the same generation: committed again


# ----------------------------------------------------------------------------- the simulator


@pytest.mark.parametrize("mode, seeds", [("exactly-once", range(1, 51)), ("at-least-once", range(1, 21)),
                                         ("at-most-once", range(1, 11))])
def test_delivery_failover_holds_every_invariant_over_seeds(mode: str, seeds: range) -> None:
    scenario = load_scenario(resolve_scenario("delivery-failover"))
    assert scenario.brokers == 3 and scenario.delivery is not None
    scenario.delivery.mode = mode
    failures = [f"seed {seed}: {r.violation}" for seed in seeds if not (r := run_seed(scenario, seed)).ok]
    assert failures == []


def test_delivery_failover_moves_leaders_and_coordinators_and_replays_identically(tmp_path: Path) -> None:
    scenario = load_scenario(resolve_scenario("delivery-failover"))
    a, b = tmp_path / "a", tmp_path / "b"
    assert run_seed(scenario, 3, a).ok
    coordinator = (a / "coordinator.jsonl").read_text()
    assert '"coordinator_moved"' in coordinator and '"leaders_moved"' in coordinator
    replayed = replay(a)
    assert replayed.identical, replayed.difference
    run_seed(scenario, 3, b)
    for name in sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file()):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
