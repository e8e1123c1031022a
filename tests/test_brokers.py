"""A cluster of brokers in the pure code (coordinator/placement.py, nodes.py, routing.py,
brokers.py): Kafka's placement of a group's coordinator, the refusals at the wrong broker, a
coordinator broker stopping (the group leaves memory, the new coordinator answers
COORDINATOR_LOAD_IN_PROGRESS, then loads it from the replicated group log), leaders moving with
their epochs, and the preferred-leader election that brings them back. Step by step, exact."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, strategies as st

from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.brokers import ELECTION_TIMER, LOAD_TIMER
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.nodes import NodeError, Nodes, all_partitions
from grouplab.coordinator.placement import (NO_LEADER, first_live, java_string_hash, kafka_abs, partition_for,
                                            replicas)
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, LogEvent, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    DescribeGroupsRequest,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    FindCoordinatorRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)

T0 = 1_700_000_000_000
GROUP = "orders"  # __consumer_offsets-31: preferred leader broker 1, then 2, then 0
LOAD_MS = 1000


# ----------------------------------------------------------------------------- placement


def test_java_string_hash_is_javas() -> None:
    """Values Java's String.hashCode gives (the second is Integer.MIN_VALUE, which Kafka's
    Utils.abs maps to 0; the third is one emoji, two UTF-16 code units)."""
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert kafka_abs(java_string_hash("polygenelubricants")) == 0
    assert java_string_hash("\U0001F600") == 1772899
    assert partition_for("polygenelubricants", 50) == 0


@given(st.text(max_size=40), st.integers(1, 200))
def test_partition_for_is_in_range_and_matches_the_formula(key: str, count: int) -> None:
    h = java_string_hash(key)
    assert -(1 << 31) <= h < (1 << 31)
    p = partition_for(key, count)
    assert 0 <= p < count
    assert p == (0 if h == -(1 << 31) else abs(h)) % count


def test_replicas_start_at_the_preferred_leader_and_go_round() -> None:
    assert replicas(31, 3) == [1, 2, 0]
    assert first_live(31, 3, {0, 2}) == 2
    assert first_live(31, 3, set()) == NO_LEADER
    with pytest.raises(ValueError):
        partition_for("g", 0)


@given(st.lists(st.tuples(st.sampled_from(["down", "up", "elect"]), st.integers(0, 2)), max_size=30))
def test_every_partition_is_led_by_a_live_broker_while_one_is_live(steps: list[tuple[str, int]]) -> None:
    nodes = Nodes(3)
    parts = list(all_partitions({"t": 7, "u": 2}))
    epochs = {tp: 0 for tp in parts}
    for op, node in steps:
        try:
            moves = (nodes.down(node, parts) if op == "down" else nodes.up(node, parts) if op == "up"
                     else nodes.elect_preferred(parts))
        except NodeError:
            continue
        for mv in moves:
            assert mv.epoch == epochs[(mv.topic, mv.partition)] + 1  # every move bumps the leader epoch
            epochs[(mv.topic, mv.partition)] = mv.epoch
        for t, p in parts:
            leader = nodes.leader(t, p)
            assert (leader in nodes.live) if nodes.live else leader == NO_LEADER
            assert nodes.leader_epoch(t, p) == epochs[(t, p)]


# ----------------------------------------------------------------------------- a cluster of three


def cluster() -> Broker:
    b = Broker(BrokerConfig(group_initial_rebalance_delay_ms=0, coordinator_load_time_ms=LOAD_MS,
                            consumer_session_timeout_ms=45_000), SequentialMemberIds(), brokers=3)
    b.topics.partitions.update({"t": 3})
    assert b.cluster is not None
    for n in range(3):
        b.cluster.addresses[n] = ("127.0.0.1", 9100 + n)
    return b


def send(b: Broker, node: int, api: str, body: Any, now_ms: int = T0) -> tuple[Any, list]:
    out = b.handle(api, body, RequestContext("r", client_id="c", node_id=node), now_ms)
    replies = [o.body for o in out if isinstance(o, Reply) and o.to == "r"]
    assert len(replies) <= 1
    return (replies[0] if replies else None), out


def heartbeat(b: Broker, node: int, member_id: str = "", epoch: int = 0, now_ms: int = T0) -> Any:
    req = ConsumerGroupHeartbeatRequest(GROUP, member_id, epoch, rebalance_timeout_ms=30_000,
                                        subscribed_topic_names=["t"] if epoch == 0 else None, topic_partitions=[])
    return send(b, node, "ConsumerGroupHeartbeat", req, now_ms)[0]


def commit(b: Broker, node: int, member_id: str, epoch: int, offset: int, now_ms: int = T0) -> Any:
    req = OffsetCommitRequest(GROUP, [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, offset)])],
                              generation_id=epoch, member_id=member_id)
    return send(b, node, "OffsetCommit", req, now_ms)[0]


def payloads(out: list, kind: type) -> list:
    return [o.payload for o in out if isinstance(o, LogEvent) and isinstance(o.payload, kind)]


def test_find_coordinator_names_the_leader_of_the_groups_offsets_partition() -> None:
    b = cluster()
    answer, _ = send(b, 0, "FindCoordinator", FindCoordinatorRequest(GROUP))
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (0, 1, "127.0.0.1", 9101)
    batch, _ = send(b, 2, "FindCoordinator", FindCoordinatorRequest(coordinator_keys=["g", "a", GROUP]))
    assert [(c.key, c.node_id, c.port) for c in batch.coordinators] == [("g", 0, 9100), ("a", 2, 9102), (GROUP, 1, 9101)]
    assert b.coordinator_node(GROUP) == 1


def test_a_group_request_at_another_broker_is_refused_not_coordinator_and_changes_nothing() -> None:
    b = cluster()
    for node in (0, 2):
        answer = heartbeat(b, node)
        assert answer.error_code == ErrorCode.NOT_COORDINATOR, answer
        assert "broker 1 is" in answer.error_message
    assert b.group_ids() == []
    refused = commit(b, 0, "", -1, 5)
    assert [[p.error_code for p in t.partitions] for t in refused.topics] == [[ErrorCode.NOT_COORDINATOR]]
    joined = heartbeat(b, 1)
    assert joined.error_code == 0 and joined.member_epoch == 1


def test_the_coordinator_broker_stopping_moves_the_group_which_loads_with_its_offsets() -> None:
    b = cluster()
    joined = heartbeat(b, 1)
    member, epoch = joined.member_id, joined.member_epoch
    assert commit(b, 1, member, epoch, 42).topics[0].partitions[0].error_code == 0

    out = b.broker_down(1, T0 + 100)
    moved = payloads(out, events.CoordinatorMoved)
    assert [(e.partition, e.from_node, e.to_node, e.groups, e.load_ms) for e in moved if e.groups] == \
        [(31, 1, 2, [GROUP], LOAD_MS)]
    assert ArmTimer((LOAD_TIMER, 31), T0 + 100 + LOAD_MS) in out
    assert b.group_ids() == []  # the old coordinator's memory is gone
    assert payloads(out, events.BrokerStopped)[0].live == [0, 2]

    # At the stopped broker nothing answers; at the new one, the load is in progress; elsewhere, not it.
    assert send(b, 1, "ConsumerGroupHeartbeat", ConsumerGroupHeartbeatRequest(GROUP, member, epoch))[1] == []
    assert heartbeat(b, 2, member, epoch, T0 + 200).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert heartbeat(b, 0, member, epoch, T0 + 200).error_code == ErrorCode.NOT_COORDINATOR
    found, _ = send(b, 0, "FindCoordinator", FindCoordinatorRequest(GROUP))
    assert (found.node_id, found.port) == (2, 9102)

    loaded = b.on_timer((LOAD_TIMER, 31), T0 + 100 + LOAD_MS)
    assert [(e.partition, e.node_id, e.groups) for e in payloads(loaded, events.CoordinatorLoaded)] == [(31, 2, [GROUP])]
    assert b.group_ids() == [GROUP]
    again = heartbeat(b, 2, member, epoch, T0 + 1200)
    assert again.error_code == 0 and again.member_epoch == epoch
    fetched, _ = send(b, 2, "OffsetFetch", OffsetFetchRequest(GROUP), T0 + 1200)
    assert fetched.topics[0].partitions[0].committed_offset == 42  # no acknowledged commit is lost


def test_a_restarted_broker_gets_its_partitions_back_at_the_election() -> None:
    b = cluster()
    heartbeat(b, 1)
    b.broker_down(1, T0)
    b.on_timer((LOAD_TIMER, 31), T0 + LOAD_MS)
    out = b.broker_up(1, T0 + 5000)
    assert payloads(out, events.BrokerStarted)[0].live == [0, 1, 2]
    assert b.coordinator_node(GROUP) == 2  # leadership stays where it went...
    assert ArmTimer(ELECTION_TIMER, T0 + 5000 + 300_000) in out  # ...until auto.leader.rebalance's check
    elected = b.on_timer(ELECTION_TIMER, T0 + 305_000)
    moved = [e for e in payloads(elected, events.CoordinatorMoved) if e.groups]
    assert [(e.from_node, e.to_node, e.cause) for e in moved] == [(2, 1, "auto_leader_rebalance")]
    assert b.coordinator_node(GROUP) == 1
    assert heartbeat(b, 1, "x", 1, T0 + 305_001).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    leaders = payloads(elected, events.LeadersMoved)[0]
    assert ["t", 1, 2, 1, 2] in leaders.partitions  # t-1: preferred 1, led by 2 meanwhile, epoch 2


def test_metadata_names_live_brokers_and_leaders_and_fetch_is_refused_where_it_does_not_lead() -> None:
    b = cluster()
    meta, _ = send(b, 0, "Metadata", MetadataRequest(topics=None))
    assert [(x.node_id, x.port) for x in meta.brokers] == [(0, 9100), (1, 9101), (2, 9102)]
    assert [p.leader_id for p in meta.topics[0].partitions] == [0, 1, 2]
    b.broker_down(0, T0)
    meta, _ = send(b, 2, "Metadata", MetadataRequest(topics=None))
    assert [x.node_id for x in meta.brokers] == [1, 2] and meta.controller_id == 1
    assert [p.leader_id for p in meta.topics[0].partitions] == [1, 1, 2]
    assert b.cluster is not None and b.cluster.nodes.leader_epoch("t", 0) == 1
    req = FetchRequest([FetchTopic("t", [FetchPartition(0, 0), FetchPartition(1, 0), FetchPartition(2, 0)])], max_wait_ms=0)
    answer, _ = send(b, 2, "Fetch", req)
    assert [(p.partition_index, p.error_code) for p in answer.responses[0].partitions] == \
        [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER), (1, ErrorCode.NOT_LEADER_OR_FOLLOWER), (2, 0)]


def test_batched_group_requests_answer_each_group_where_it_is() -> None:
    b = cluster()
    heartbeat(b, 1)
    described, _ = send(b, 1, "DescribeGroups", DescribeGroupsRequest(["g", GROUP]))
    assert [(g.group_id, g.error_code) for g in described.groups] == [("g", ErrorCode.NOT_COORDINATOR), (GROUP, 0)]
    listed = {n: [g.group_id for g in send(b, n, "ListGroups", ListGroupsRequest())[0].groups] for n in range(3)}
    assert listed == {0: [], 1: [GROUP], 2: []}
    b.broker_down(1, T0)
    assert send(b, 2, "ListGroups", ListGroupsRequest())[0].error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_stopping_a_stopped_broker_or_one_that_is_not_there_is_refused() -> None:
    b = cluster()
    b.broker_down(2, T0)
    with pytest.raises(NodeError, match="already down"):
        b.broker_down(2, T0)
    with pytest.raises(NodeError, match="no broker 3"):
        b.broker_down(3, T0)
    with pytest.raises(NodeError, match="already running"):
        b.broker_up(0, T0)
    single = Broker()
    with pytest.raises(NodeError, match="--brokers"):
        single.broker_down(0, T0)


def test_offset_for_leader_epoch_checks_the_current_epoch_and_answers_the_log_end() -> None:
    """KIP-320 after a leader move: the current epoch fenced or unknown as Kafka says, and for an
    epoch the partition had, the log end (one shared store: nothing is ever truncated)."""
    b = cluster()
    b.logs.log("t", 0)  # an empty log: end offset 0
    b.broker_down(0, T0)  # t-0: broker 0 -> 1, leader epoch 1

    def ask(node: int, current: int, epoch: int) -> tuple[int, int, int]:
        req = OffsetForLeaderEpochRequest([OffsetForLeaderTopic("t", [OffsetForLeaderPartition(0, current, epoch)])])
        p = send(b, node, "OffsetForLeaderEpoch", req)[0].topics[0].partitions[0]
        return p.error_code, p.leader_epoch, p.end_offset

    assert ask(1, 1, 0) == (0, 0, 0)
    assert ask(1, 0, 0)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert ask(1, 2, 0)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert ask(1, -1, 5) == (0, -1, -1)
    assert ask(2, 1, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
