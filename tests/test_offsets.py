"""Committed offsets (coordinator/offsets.py, the group's offset inputs in coordinator/group.py):
OffsetCommit fencing rule by rule (every refusal
leaves the group, its offsets and the log untouched), OffsetFetch, transactional staging and
require_stable (KIP-447), the offset records in the group log (round trip, compaction, restore,
the simulator's durable list), and end to end over real sockets: members commit and fetch, a
stale generation is refused, a simple consumer commits to an Empty group, a restarted coordinator
keeps what was committed, and `grouplab describe` shows committed offsets, log end offsets and lag.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable

import msgpack
import pytest

from grouplab.consumer.client import GroupMemberClient
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import MemberState
from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig, ConfigError
from grouplab.coordinator.group import Group, GroupState
from grouplab.coordinator.group_log import (
    GroupLog,
    OffsetCommitRecord,
    Persist,
    RecordError,
    TopicRecord,
    decode_record,
    encode_record,
    latest,
)
from grouplab.coordinator.offsets import OffsetAndMetadata, OffsetStore
from grouplab.coordinator.server import CoordinatorServer
from grouplab.admin import AdminClient
from grouplab.protocol.effects import LogEvent, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    API,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
)
from grouplab.protocol.types import TopicPartition as TP
from tests.helpers_group import (
    GROUP,
    SESSION,
    MemberIds,
    config,
    form_generation,
    form_stable,
    hb_req,
    join_req,
    leave_req,
    protos,
    require_id,
    session_key,
    snapshot,
    sync_req,
)

from conftest import EventRecorder

ROOT = Path(__file__).resolve().parent.parent
TOPICS = {"t0": 3, "t1": 2}

# ============================================================================ helpers (pure)


def make_broker(**overrides: Any) -> Broker:
    broker = Broker(config(**overrides), MemberIds())
    broker.topics.partitions.update(TOPICS)
    return broker


def commit_req(offsets: dict[tuple[str, int], int], gen: int = -1, member: str = "", instance: str | None = None,
               metadata: str | None = None, group: str = GROUP, epoch: int = -1) -> OffsetCommitRequest:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append(OffsetCommitRequestPartition(p, off, epoch, metadata))
    return OffsetCommitRequest(group, [OffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()], gen, member, instance)


def fetch_req(partitions: Iterable[tuple[str, int]] | None = None, group: str = GROUP,
              require_stable: bool = False) -> OffsetFetchRequest:
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = [OffsetFetchRequestTopic(t, ps) for t, ps in by_topic.items()]
    return OffsetFetchRequest(group, topics, require_stable)


def handle(broker: Broker, api: str, body: Any, now: int, token: str = "req") -> tuple[list, Any]:
    """Run one request through the broker; returns the outputs and the one reply's body."""
    outputs = broker.handle(api, body, RequestContext(token), now)
    [reply] = [o for o in outputs if isinstance(o, Reply)]
    assert reply.to == token
    return outputs, reply.body


def codes(resp: OffsetCommitResponse) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetched(resp: OffsetFetchResponse) -> dict[tuple[str, int], tuple[int, str | None, int]]:
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in resp.topics for p in t.partitions}


def committed(broker: Broker, group: str = GROUP) -> dict[tuple[str, int], int]:
    g = broker.groups.get(group)
    return {} if g is None else {(tp.topic, tp.partition): om.offset for tp, om in g.offsets.committed.items()}


def persisted(outputs: list) -> list:
    return [o.record for o in outputs if isinstance(o, Persist)]


def events(outputs: list, name: str) -> list[LogEvent]:
    return [o for o in outputs if isinstance(o, LogEvent) and o.event == name]


def state_of(broker: Broker) -> dict[str, Any]:
    """Everything a refused commit must leave alone: every group in full (members with their
    heartbeat times) and every offset store."""
    return {gid: (snapshot(g), copy.deepcopy(g.offsets.committed), copy.deepcopy(g.offsets.pending))
            for gid, g in broker.groups.items()}


def assert_refused(broker: Broker, req: OffsetCommitRequest, now: int, error: ErrorCode) -> OffsetCommitResponse:
    """The commit is refused with `error` on every (known) partition and at the top level, and
    nothing changed: no group, member, heartbeat, offset or record."""
    before = state_of(broker)
    outputs, resp = handle(broker, "OffsetCommit", req, now)
    assert resp.error_code == error
    assert set(codes(resp).values()) == {error}
    assert persisted(outputs) == []
    assert state_of(broker) == before
    [ev] = events(outputs, "offset_commit_rejected")
    assert ev.fields["error"] == error.name and ev.fields["member_id"] == req.member_id
    assert ev.fields["request_generation_id"] == req.generation_id
    return resp


def group_record(g: Any, now: int) -> Any:
    """The GroupMetadataRecord the group writes in its current state."""
    g._begin(now)
    g._persist()
    [record] = persisted(g._end())
    return record


def stable_group(broker: Broker, clients: Iterable[Any] = ("c0", "c1"), now: int = 0) -> tuple[list[str], int]:
    return form_stable(broker.group(GROUP), clients, now)


# ============================================================================ OffsetCommit: who may commit


def test_a_simple_consumer_commits_to_a_group_that_does_not_exist_and_creates_it_empty():
    broker = make_broker()
    outputs, resp = handle(broker, "OffsetCommit", commit_req({("t0", 0): 5, ("t1", 1): 9}, metadata="m"), 100)
    assert resp.error_code == 0 and codes(resp) == {("t0", 0): 0, ("t1", 1): 0}
    g = broker.groups[GROUP]
    assert g.state is GroupState.EMPTY and g.generation_id == 0 and not g.members
    assert g.offsets.committed == {TP("t0", 0): OffsetAndMetadata(5, "m", 100, -1),
                                   TP("t1", 1): OffsetAndMetadata(9, "m", 100, -1)}
    # Durable before the reply: one record per partition, every Persist ahead of the Reply.
    kinds = [type(o).__name__ for o in outputs]
    assert kinds.index("Reply") > max(i for i, k in enumerate(kinds) if k == "Persist")
    assert persisted(outputs) == [OffsetCommitRecord(GROUP, "t0", 0, 5, -1, "m", 100),
                                  OffsetCommitRecord(GROUP, "t1", 1, 9, -1, "m", 100)]
    [ev] = events(outputs, "offsets_committed")
    assert ev.fields == {"group_id": GROUP, "generation_id": 0, "state": "Empty", "member_id": "",
                         "partitions": [["t0", 0], ["t1", 1]], "offsets": [5, 9], "producer_id": None}


def test_a_simple_consumer_commits_to_an_empty_group_with_any_member_id():
    broker = make_broker()
    [m0], t = stable_group(broker, ["c0"])
    broker.handle("LeaveGroup", leave_req(m0), RequestContext("leave"), t)
    g = broker.groups[GROUP]
    assert g.state is GroupState.EMPTY and g.generation_id == 2
    _, resp = handle(broker, "OffsetCommit", commit_req({("t0", 1): 3}), t + 1)
    assert resp.error_code == 0 and committed(broker) == {("t0", 1): 3}
    # Kafka: generation -1 on an Empty group is a simple consumer whatever member id it gives.
    _, resp = handle(broker, "OffsetCommit", commit_req({("t0", 1): 4}, member="someone"), t + 2)
    assert resp.error_code == 0 and committed(broker) == {("t0", 1): 4}


def test_a_commit_to_an_unknown_group_with_a_generation_is_illegal_generation_and_creates_nothing():
    broker = make_broker()
    assert_refused(broker, commit_req({("t0", 0): 1}, gen=3, member="ghost"), 10, ErrorCode.ILLEGAL_GENERATION)
    assert GROUP not in broker.groups


def test_a_simple_consumer_cannot_commit_to_a_group_with_members():
    broker = make_broker()
    stable_group(broker)
    assert_refused(broker, commit_req({("t0", 0): 1}), 10, ErrorCode.UNKNOWN_MEMBER_ID)


def test_an_unknown_member_is_refused():
    broker = make_broker()
    _, t = stable_group(broker)
    assert_refused(broker, commit_req({("t0", 0): 1}, gen=1, member="stranger"), t, ErrorCode.UNKNOWN_MEMBER_ID)


def test_a_pending_member_that_has_not_joined_is_refused():
    broker = make_broker()
    _, t = stable_group(broker)
    pending = require_id(broker.groups[GROUP], "late", t)
    assert pending in broker.groups[GROUP].pending_members
    assert_refused(broker, commit_req({("t0", 0): 1}, gen=1, member=pending), t, ErrorCode.UNKNOWN_MEMBER_ID)


def test_a_stale_generation_is_refused():
    broker = make_broker()
    (m0, m1), t = stable_group(broker)
    g = broker.groups[GROUP]
    # m1 leaves: generation 2 forms with m0 alone; m0's commit in generation 1 is a zombie's.
    broker.handle("LeaveGroup", leave_req(m1), RequestContext("l"), t)
    broker.handle("JoinGroup", join_req(m0, protos("c0")), RequestContext("j"), t)
    broker.handle("SyncGroup", sync_req(m0, 2, {m0: b"a"}), RequestContext("s"), t)
    assert g.state is GroupState.STABLE and g.generation_id == 2
    assert_refused(broker, commit_req({("t0", 0): 1}, gen=1, member=m0), t, ErrorCode.ILLEGAL_GENERATION)
    # A newer generation than the group's is as wrong, and so is -1 from a known member.
    assert_refused(broker, commit_req({("t0", 0): 1}, gen=3, member=m0), t, ErrorCode.ILLEGAL_GENERATION)
    assert_refused(broker, commit_req({("t0", 0): 1}, gen=-1, member=m0), t, ErrorCode.ILLEGAL_GENERATION)
    _, resp = handle(broker, "OffsetCommit", commit_req({("t0", 0): 1}, gen=2, member=m0), t)
    assert resp.error_code == 0 and committed(broker) == {("t0", 0): 1}


def test_completing_rebalance_answers_rebalance_in_progress_even_for_the_current_generation():
    broker = make_broker()
    g = broker.group(GROUP)
    (m0, m1), _, t = form_generation(g, ["c0", "c1"])
    assert g.state is GroupState.COMPLETING_REBALANCE and g.generation_id == 1
    assert_refused(broker, commit_req({("t0", 0): 1}, gen=1, member=m1), t + 5, ErrorCode.REBALANCE_IN_PROGRESS)


def test_preparing_rebalance_accepts_the_current_generation_and_counts_as_a_heartbeat():
    """Kafka lets members commit while the group prepares a rebalance: an eager consumer commits
    in onPartitionsRevoked, before it rejoins. The generation is still the old one."""
    broker = make_broker()
    (m0, m1), t = stable_group(broker)
    g = broker.groups[GROUP]
    broker.handle("JoinGroup", join_req(m0, protos("c0")), RequestContext("rejoin"), t + 10)  # the leader rejoins
    assert g.state is GroupState.PREPARING_REBALANCE and g.generation_id == 1
    _, resp = handle(broker, "OffsetCommit", commit_req({("t1", 0): 42}, gen=1, member=m1), t + 500)
    assert resp.error_code == 0 and committed(broker) == {("t1", 0): 42}
    assert g.members[m1].last_heartbeat_ms == t + 500


def test_a_commit_from_a_stable_member_is_its_heartbeat():
    broker = make_broker()
    (m0, m1), t = stable_group(broker)
    g = broker.groups[GROUP]
    # m1 never heartbeats, only commits: the session timer at its original deadline keeps it.
    _, resp = handle(broker, "OffsetCommit", commit_req({("t0", 2): 7}, gen=1, member=m1), t + SESSION - 1)
    assert resp.error_code == 0 and g.members[m1].last_heartbeat_ms == t + SESSION - 1
    broker.handle("Heartbeat", hb_req(m0, 1), RequestContext("hb"), t + SESSION - 1)
    broker.on_timer(session_key(m1), t + SESSION)
    broker.on_timer(session_key(m0), t + SESSION)
    assert set(g.members) == {m0, m1} and g.state is GroupState.STABLE


def test_static_members_are_fenced_by_instance_id():
    broker = make_broker()
    (m0, m1), t = stable_group(broker, [("c0", {"instance": "i0"}), ("c1", {"instance": "i1"})])
    g = broker.groups[GROUP]
    # i0 restarts: a new member id takes the old one's place (no rebalance), the old id is fenced.
    broker.handle("JoinGroup", join_req("", protos("c0"), instance="i0"), RequestContext("i0-again"), t + 1, )
    new0 = g.static_members["i0"]
    assert new0 != m0 and g.state is GroupState.STABLE
    assert_refused(broker, commit_req({("t0", 0): 1}, gen=1, member=m0, instance="i0"), t + 2, ErrorCode.FENCED_INSTANCE_ID)
    # An instance id the group does not know, or one given with a dynamic member's id.
    assert_refused(broker, commit_req({("t0", 0): 1}, gen=1, member=m1, instance="i9"), t + 2, ErrorCode.UNKNOWN_MEMBER_ID)
    _, resp = handle(broker, "OffsetCommit", commit_req({("t0", 0): 1}, gen=1, member=new0, instance="i0"), t + 3)
    assert resp.error_code == 0


def test_validate_commit_for_transactional_commits_skips_the_state_checks():
    broker = make_broker()
    g = broker.group(GROUP)
    (m0, m1), _, _ = form_generation(g, ["c0", "c1"])  # CompletingRebalance
    assert g.validate_commit(m0, None, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    assert g.validate_commit(m0, None, 1, transactional=True) is None
    assert g.validate_commit("", None, -1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_commit("", None, -1, transactional=True) is None  # old TxnOffsetCommit versions
    assert g.validate_commit(m0, None, 0, transactional=True) is ErrorCode.ILLEGAL_GENERATION
    assert Group.absent(GROUP, config(), MemberIds()).validate_commit("", None, 5, transactional=True) is None


# ============================================================================ OffsetCommit: per partition


def test_unknown_topics_and_partitions_are_refused_per_partition_and_the_rest_is_stored():
    broker = make_broker()
    _, resp = handle(broker, "OffsetCommit", commit_req({("t0", 0): 1, ("t0", 3): 2, ("nope", 0): 3, ("t1", -1): 4}), 5)
    assert resp.error_code == 0
    assert codes(resp) == {("t0", 0): 0, ("t0", 3): 3, ("nope", 0): 3, ("t1", -1): 3}
    assert committed(broker) == {("t0", 0): 1}


def test_a_commit_of_only_unknown_partitions_touches_no_group():
    broker = make_broker()
    outputs, resp = handle(broker, "OffsetCommit", commit_req({("nope", 0): 3}, gen=7, member="x"), 5)
    assert codes(resp) == {("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION} and resp.error_code == 0
    assert GROUP not in broker.groups and persisted(outputs) == [] and not events(outputs, "offset_commit_rejected")
    # Unknown partitions keep their own error when the group refuses the others.
    stable_group(broker)
    _, resp = handle(broker, "OffsetCommit", commit_req({("nope", 0): 3, ("t0", 0): 1}, gen=9, member="x"), 5)
    assert codes(resp) == {("nope", 0): 3, ("t0", 0): ErrorCode.UNKNOWN_MEMBER_ID}


def test_metadata_longer_than_offset_metadata_max_bytes_is_refused_per_partition():
    broker = make_broker(offset_metadata_max_bytes=8)
    (m0, _), t = stable_group(broker)
    req = commit_req({("t0", 0): 1, ("t0", 1): 2}, gen=1, member=m0, metadata="12345678")
    req.topics[0].partitions[1].committed_metadata = "123456789"
    outputs, resp = handle(broker, "OffsetCommit", req, t + 1)
    assert resp.error_code == 0 and codes(resp) == {("t0", 0): 0, ("t0", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert committed(broker) == {("t0", 0): 1} and len(persisted(outputs)) == 1
    # Every partition too large: nothing stored, nothing persisted, no event; the heartbeat counts.
    before = committed(broker)
    outputs, resp = handle(broker, "OffsetCommit", commit_req({("t0", 2): 5}, gen=1, member=m0, metadata="x" * 9), t + 2)
    assert codes(resp) == {("t0", 2): 12} and committed(broker) == before and persisted(outputs) == []
    assert broker.groups[GROUP].members[m0].last_heartbeat_ms == t + 2
    assert BrokerConfig().offset_metadata_max_bytes == 4096
    assert BrokerConfig().with_overrides(["offset.metadata.max.bytes=10"]).offset_metadata_max_bytes == 10
    with pytest.raises(ConfigError):
        BrokerConfig().with_overrides(["offset.metadata.max.bytes=-1"])


def test_a_simple_consumer_whose_every_partition_is_refused_creates_no_group():
    broker = make_broker(offset_metadata_max_bytes=2)
    outputs, resp = handle(broker, "OffsetCommit", commit_req({("t0", 0): 1, ("nope", 0): 2}, metadata="abc"), 5)
    assert resp.error_code == 0 and codes(resp) == {("t0", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("nope", 0): 3}
    assert GROUP not in broker.groups and persisted(outputs) == [] and [type(o) for o in outputs] == [Reply]


def test_a_lower_offset_may_be_committed_like_a_consumer_that_seeks_back():
    broker = make_broker()
    handle(broker, "OffsetCommit", commit_req({("t0", 0): 100}), 1)
    _, resp = handle(broker, "OffsetCommit", commit_req({("t0", 0): 40}, metadata="rewind"), 2)
    assert resp.error_code == 0 and committed(broker) == {("t0", 0): 40}
    _, resp = handle(broker, "OffsetFetch", fetch_req([("t0", 0)]), 3)
    assert fetched(resp) == {("t0", 0): (40, "rewind", 0)}


def test_an_empty_group_id_is_a_group_like_any_other_for_offsets():
    broker = make_broker()
    assert Broker.group_key("OffsetCommit", commit_req({}, group="")) == ""
    _, resp = handle(broker, "OffsetCommit", commit_req({("t0", 0): 1}, group=""), 1)
    assert resp.error_code == 0 and committed(broker, "") == {("t0", 0): 1}


# ============================================================================ OffsetFetch


def test_offset_fetch_answers_committed_offsets_and_minus_one_for_the_rest():
    broker = make_broker()
    handle(broker, "OffsetCommit", commit_req({("t0", 2): 8, ("t1", 0): 3}, metadata="meta", epoch=4), 1)
    handle(broker, "OffsetCommit", commit_req({("t0", 0): 5}), 2)
    _, resp = handle(broker, "OffsetFetch", fetch_req([("t1", 0), ("t0", 1), ("t0", 2), ("nope", 0)]), 3)
    assert resp.error_code == 0
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics] == [
        ("t1", [0]), ("t0", [1, 2]), ("nope", [0])]  # request order
    assert fetched(resp) == {("t1", 0): (3, "meta", 0), ("t0", 1): (-1, "", 0), ("t0", 2): (8, "meta", 0),
                             ("nope", 0): (-1, "", 0)}
    assert resp.topics[0].partitions[0].committed_leader_epoch == 4
    # topics nil: every committed partition, by topic then partition.
    _, resp = handle(broker, "OffsetFetch", fetch_req(None), 4)
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in resp.topics] == [
        ("t0", [(0, 5), (2, 8)]), ("t1", [(0, 3)])]


def test_offset_fetch_of_an_unknown_group_is_minus_one_and_no_error():
    broker = make_broker()
    _, resp = handle(broker, "OffsetFetch", fetch_req([("t0", 0)], group="nobody"), 1)
    assert resp.error_code == 0 and fetched(resp) == {("t0", 0): (-1, "", 0)}
    _, resp = handle(broker, "OffsetFetch", fetch_req(None, group="nobody"), 1)
    assert resp.error_code == 0 and resp.topics == []
    assert "nobody" not in broker.groups


# ============================================================================ transactional offsets


def test_staged_offsets_are_invisible_until_the_transaction_commits():
    store = OffsetStore(GROUP)
    store.commit({TP("t0", 0): OffsetAndMetadata(10)})
    store.stage_txn(7, {TP("t0", 0): (20, "txn"), TP("t0", 1): (5, None)}, now_ms=50)
    assert store.fetch([TP("t0", 0), TP("t0", 1)]) == [(TP("t0", 0), OffsetAndMetadata(10), ErrorCode.NONE),
                                                       (TP("t0", 1), None, ErrorCode.NONE)]
    assert store.has_pending(TP("t0", 0)) and not store.has_pending(TP("t1", 0))
    records = store.complete_txn(7, commit=True)
    assert records == [OffsetCommitRecord(GROUP, "t0", 0, 20, -1, "txn", 50), OffsetCommitRecord(GROUP, "t0", 1, 5, -1, "", 50)]
    assert store.committed == {TP("t0", 0): OffsetAndMetadata(20, "txn", 50), TP("t0", 1): OffsetAndMetadata(5, "", 50)}
    assert store.pending == {} and not store.has_pending(TP("t0", 0))
    assert store.complete_txn(7, commit=True) == []  # nothing staged any more: a no-op


def test_an_aborted_transaction_drops_its_staged_offsets():
    store = OffsetStore(GROUP)
    store.commit({TP("t0", 0): OffsetAndMetadata(10)})
    store.stage_txn(7, {TP("t0", 0): (20, None)})
    store.stage_txn(8, {TP("t0", 1): (30, None)})
    assert store.complete_txn(7, commit=False) == []
    assert store.committed == {TP("t0", 0): OffsetAndMetadata(10)} and set(store.pending) == {8}
    assert not store.has_pending(TP("t0", 0)) and store.has_pending(TP("t0", 1))


def test_whichever_of_a_staged_and_a_plain_commit_was_written_last_wins():
    store = OffsetStore(GROUP)
    store.stage_txn(1, {TP("t0", 0): (20, None)})
    store.commit({TP("t0", 0): OffsetAndMetadata(25)})  # written after the staged offset
    assert store.complete_txn(1, commit=True) == []
    assert store.committed[TP("t0", 0)].offset == 25
    store.commit({TP("t0", 1): OffsetAndMetadata(3)})
    store.stage_txn(2, {TP("t0", 1): (4, None)})  # written after the plain commit
    assert [r.offset for r in store.complete_txn(2, commit=True)] == [4]
    assert store.committed[TP("t0", 1)].offset == 4


def test_require_stable_answers_unstable_offset_commit_for_pending_partitions_only():
    broker = make_broker()
    handle(broker, "OffsetCommit", commit_req({("t0", 0): 10, ("t0", 1): 11}), 1)
    broker.groups[GROUP].offsets.stage_txn(7, {TP("t0", 0): (20, None), TP("t1", 1): (1, None)})
    want = [("t0", 0), ("t0", 1), ("t1", 1)]
    _, resp = handle(broker, "OffsetFetch", fetch_req(want, require_stable=True), 2)
    assert fetched(resp) == {("t0", 0): (-1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT), ("t0", 1): (11, "", 0),
                             ("t1", 1): (-1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)}
    _, resp = handle(broker, "OffsetFetch", fetch_req(want), 2)  # without require_stable: the committed ones
    assert fetched(resp) == {("t0", 0): (10, "", 0), ("t0", 1): (11, "", 0), ("t1", 1): (-1, "", 0)}
    _, resp = handle(broker, "OffsetFetch", fetch_req(None, require_stable=True), 2)  # all committed partitions
    assert fetched(resp) == {("t0", 0): (-1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT), ("t0", 1): (11, "", 0)}


def test_a_completed_transaction_persists_and_logs_what_became_committed():
    broker = make_broker()
    g = broker.group(GROUP)
    g.offsets.stage_txn(7, {TP("t1", 0): (4, "a"), TP("t0", 2): (9, None)}, now_ms=3)
    out = g.on_txn_completed(7, True, 10)
    assert persisted(out) == [OffsetCommitRecord(GROUP, "t1", 0, 4, -1, "a", 3), OffsetCommitRecord(GROUP, "t0", 2, 9, -1, "", 3)]
    [ev] = events(out, "offsets_committed")
    assert ev.fields["partitions"] == [["t0", 2], ["t1", 0]] and ev.fields["offsets"] == [9, 4]
    assert ev.fields["producer_id"] == 7 and ev.ts_ms == 10
    g.offsets.stage_txn(8, {TP("t0", 0): (1, None)})
    out = g.on_txn_completed(8, False, 11)
    assert persisted(out) == [] and events(out, "txn_offsets_aborted")[0].fields["partitions"] == [["t0", 0]]


# ============================================================================ durability


def test_offset_records_round_trip_and_bad_ones_are_refused():
    record = OffsetCommitRecord("g", "t0", 2, 99, 3, "meta", 1234)
    body = msgpack.unpackb(encode_record(record))
    assert body == {"type": "offset_commit", "version": 0, "group_id": "g", "topic": "t0", "partition": 2,
                    "offset": 99, "leader_epoch": 3, "metadata": "meta", "commit_timestamp_ms": 1234}
    assert decode_record(encode_record(record)) == record
    for change, why in [({"partition": -1}, "partition"), ({"metadata": None}, "metadata"), ({"offset": "1"}, "offset")]:
        bad = dict(body, **change)
        with pytest.raises(RecordError, match=why):
            decode_record(msgpack.packb(bad, use_bin_type=True))
    with pytest.raises(RecordError, match="topic"):
        decode_record(msgpack.packb({k: v for k, v in body.items() if k != "topic"}, use_bin_type=True))


def test_latest_keeps_the_last_offset_per_group_topic_and_partition():
    rs = [OffsetCommitRecord("g", "t0", 0, 1, -1, "", 1), OffsetCommitRecord("g", "t0", 1, 1, -1, "", 1),
          OffsetCommitRecord("h", "t0", 0, 7, -1, "", 1), OffsetCommitRecord("g", "t0", 0, 2, -1, "", 2)]
    assert latest(rs) == [rs[1], rs[2], rs[3]]


def test_restore_brings_offsets_back_into_their_groups():
    broker = make_broker()
    (m0, m1), t = stable_group(broker)
    log = []
    log += persisted(handle(broker, "OffsetCommit", commit_req({("t0", 0): 5, ("t1", 1): 6}, gen=1, member=m0), t)[0])
    log += persisted(handle(broker, "OffsetCommit", commit_req({("t0", 0): 7}, gen=1, member=m1, metadata="x"), t + 1)[0])
    log += persisted(handle(broker, "OffsetCommit", commit_req({("t0", 1): 3}, group="simple"), t + 2)[0])
    # The topics and the group's own record (what the leader's SyncGroup of generation 1 wrote).
    records = [TopicRecord("t0", 3, 0), TopicRecord("t1", 2, 0), group_record(broker.groups[GROUP], t), *log]

    fresh = Broker(config(), MemberIds())
    out = fresh.restore(records, 50_000)
    assert fresh.groups[GROUP].state is GroupState.STABLE and set(fresh.groups[GROUP].members) == {m0, m1}
    assert committed(fresh) == {("t0", 0): 7, ("t1", 1): 6}
    assert fresh.groups[GROUP].offsets.committed[TP("t0", 0)] == OffsetAndMetadata(7, "x", t + 1, -1)
    assert fresh.groups["simple"].state is GroupState.EMPTY and committed(fresh, "simple") == {("t0", 1): 3}
    loaded = {ev.fields["group_id"]: ev.fields["committed_partitions"] for ev in events(out, "offsets_loaded")}
    assert loaded == {GROUP: 2, "simple": 1}
    # The restored stores keep working: a member of the restored generation commits again.
    _, resp = handle(fresh, "OffsetCommit", commit_req({("t0", 0): 8}, gen=1, member=m1), 50_001)
    assert resp.error_code == 0 and committed(fresh)[("t0", 0)] == 8


def test_offsets_survive_compaction_and_replay(tmp_path: Path):
    broker = make_broker()
    records = []
    for i in range(20):
        records += persisted(handle(broker, "OffsetCommit", commit_req({("t0", i % 3): i, ("t1", 0): 100 + i}), i)[0])
    with GroupLog.in_dir(tmp_path) as log:
        log.append_many(records[:10])
        for r in records[10:]:
            log.append(r)
    with GroupLog.in_dir(tmp_path) as log:
        replayed = log.recover()  # replay, then compact
        assert replayed == records
    with GroupLog.in_dir(tmp_path) as log:
        kept = log.replay()
    assert len(kept) == 4  # t0-0, t0-1, t0-2, t1-0
    fresh = Broker(config(), MemberIds())
    fresh.restore(kept, 0)
    assert committed(fresh) == committed(broker) == {("t0", 0): 18, ("t0", 1): 19, ("t0", 2): 17, ("t1", 0): 119}


def test_the_simulator_restores_offsets_from_its_durable_records():
    from grouplab.sim.scenario import parse_scenario
    from grouplab.sim.world import Simulation

    scenario = parse_scenario({"topics": {"t0": 2}, "members": [{"count": 2}],
                               "broker": {"group.initial.rebalance.delay.ms": 0}})
    sim = Simulation(scenario, 1)
    sim.run(until_ms=5_000)
    g = sim.broker.groups[scenario.group_id]
    assert g.state is GroupState.STABLE
    member = next(iter(g.members))
    req = commit_req({("t0", 0): 11, ("t0", 1): 12}, gen=g.generation_id, member=member, group=scenario.group_id)
    sim.admin_request("OffsetCommit", req)
    assert [r for r in sim.durable if isinstance(r, OffsetCommitRecord)]
    sim._crash_coordinator(100)
    sim.run(until_ms=sim.now + 1_000)
    restored = sim.broker.groups[scenario.group_id]
    assert restored is not g and committed(sim.broker, scenario.group_id) == {("t0", 0): 11, ("t0", 1): 12}


# ============================================================================ end to end over real sockets

HOST = "127.0.0.1"
BROKER = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100"]
CONSUMER = ["session.timeout.ms=3000", "heartbeat.interval.ms=100", "retry.backoff.ms=20"]


class Env:
    def __init__(self, recorder: EventRecorder, cleanup: contextlib.AsyncExitStack, data_dir: Path) -> None:
        self.recorder, self.cleanup, self.data_dir = recorder, cleanup, data_dir
        self.server: CoordinatorServer | None = None
        self.port = 0

    async def start_server(self, durable: bool = False, *overrides: str) -> CoordinatorServer:
        server = CoordinatorServer(BrokerConfig().with_overrides([*BROKER, *overrides]), HOST, self.port,
                                   events=self.recorder.log("coordinator"), data_dir=self.data_dir if durable else None)
        await server.start()
        self.cleanup.push_async_callback(server.stop)
        self.server, self.port = server, server.port
        return server

    async def admin(self) -> AdminClient:
        return await self.cleanup.enter_async_context(AdminClient(HOST, self.port))

    async def consumer(self, name: str) -> GroupMemberClient:
        cfg = ConsumerConfig(group_id=GROUP, topics=sorted(TOPICS), client_id=name).with_overrides(CONSUMER)
        client = GroupMemberClient(cfg, HOST, self.port, events=self.recorder.log(name))
        self.cleanup.push_async_callback(client.close, False)
        return await client.start()

    async def wait_stable(self, clients: list[GroupMemberClient], after: int = -1) -> Any:
        def ok() -> bool:
            g = self.server.broker.groups.get(GROUP) if self.server else None
            return (g is not None and g.state is GroupState.STABLE and g.generation_id > after
                    and set(g.members) == {c.member_id for c in clients}
                    and all(c.state is MemberState.STABLE and c.generation_id == g.generation_id for c in clients))
        await self.recorder.wait_until(ok, what="a stable group")
        return self.server.broker.groups[GROUP]


@pytest.fixture
def env(recorder: EventRecorder, cleanup: contextlib.AsyncExitStack, tmp_path: Path) -> Env:
    return Env(recorder, cleanup, tmp_path / "data")


async def produce(admin: AdminClient, tp: TP, n: int) -> None:
    from grouplab.protocol.messages import ProducePartitionData, ProduceRequest, ProduceTopicData, Record, RecordBatch

    resp = await admin.request("Produce", ProduceRequest([ProduceTopicData(tp.topic, [
        ProducePartitionData(tp.partition, RecordBatch([Record(b"v%d" % i) for i in range(n)]))])]))
    assert resp.responses[0].partition_responses[0].error_code == 0, resp


async def test_members_commit_their_partitions_and_fetch_them_back(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    admin = await env.admin()
    await admin.create_topics(TOPICS)
    clients = [await env.consumer(f"c{i}") for i in range(2)]
    g = await env.wait_stable(clients)
    for n, c in enumerate(clients):
        errors = await admin.commit_offsets(GROUP, {tp: 10 * n + tp.partition for tp in c.assignment},
                                            g.generation_id, c.member_id)
        assert errors and set(errors.values()) == {0}
    expected = {tp: 10 * n + tp.partition for n, c in enumerate(clients) for tp in c.assignment}
    assert await admin.fetch_offsets(GROUP) == dict(sorted(expected.items()))
    assert await admin.fetch_offsets(GROUP, [TP("t0", 0), TP("t9", 0)]) == {TP("t0", 0): expected[TP("t0", 0)], TP("t9", 0): -1}
    [ev, _] = recorder.events("offsets_committed", node="coordinator")
    assert ev.fields["member_id"] == clients[0].member_id and ev.fields["generation_id"] == g.generation_id


async def test_a_stale_generation_commit_is_refused_and_changes_nothing(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    admin = await env.admin()
    await admin.create_topics(TOPICS)
    first = await env.consumer("c0")
    g = await env.wait_stable([first])
    old_gen = g.generation_id
    assert set((await admin.commit_offsets(GROUP, {TP("t0", 0): 5}, old_gen, first.member_id)).values()) == {0}
    second = await env.consumer("c1")
    g = await env.wait_stable([first, second], after=old_gen)
    errors = await admin.commit_offsets(GROUP, {TP("t0", 0): 99, TP("t1", 1): 99}, old_gen, first.member_id)
    assert set(errors.values()) == {ErrorCode.ILLEGAL_GENERATION}
    assert await admin.fetch_offsets(GROUP) == {TP("t0", 0): 5}
    [rejected] = recorder.events("offset_commit_rejected", node="coordinator")
    assert rejected.fields["error"] == "ILLEGAL_GENERATION" and rejected.fields["request_generation_id"] == old_gen
    # A simple consumer may not commit to this group either: it has members.
    assert set((await admin.commit_offsets(GROUP, {TP("t0", 0): 1})).values()) == {ErrorCode.UNKNOWN_MEMBER_ID}


async def test_a_simple_consumer_commits_for_an_empty_group(env: Env) -> None:
    await env.start_server()
    admin = await env.admin()
    await admin.create_topics(TOPICS)
    assert await admin.commit_offsets("simple", {TP("t1", 1): 12}, metadata="by hand") == {TP("t1", 1): 0}
    assert await admin.fetch_offsets("simple") == {TP("t1", 1): 12}
    [described] = await admin.describe_groups(["simple"])
    assert described.group_state == "Empty" and described.members == []
    assert "simple" in await admin.list_groups()
    resp = await admin.request("OffsetFetch", fetch_req([("t1", 1)], group="simple"))
    assert fetched(resp) == {("t1", 1): (12, "by hand", 0)}


async def test_a_restarted_coordinator_keeps_what_was_committed(env: Env, recorder: EventRecorder) -> None:
    first = await env.start_server(durable=True)
    async with AdminClient(HOST, first.port) as admin:
        await admin.create_topics(TOPICS)
        for i in range(5):
            await admin.commit_offsets("simple", {TP("t0", 0): i, TP("t0", 1): 100 + i})
        await admin.commit_offsets("other", {TP("t1", 0): 7})
    clients = [await env.consumer("c0")]
    g = await env.wait_stable(clients)
    async with AdminClient(HOST, first.port) as admin:
        assert set((await admin.commit_offsets(GROUP, {TP("t0", 2): 33}, g.generation_id, clients[0].member_id)).values()) == {0}
    await first.stop()
    second = await env.start_server(durable=True)
    assert second.port == first.port
    recovered = recorder.events("log_recovered")[-1].fields
    assert recovered["groups"] == 3 and recovered["corrupt_records"] == 0
    loaded = {ev.fields["group_id"]: ev.fields["committed_partitions"] for ev in recorder.events("offsets_loaded")}
    assert loaded == {"simple": 2, "other": 1, GROUP: 1}
    async with AdminClient(HOST, second.port) as admin:
        assert await admin.fetch_offsets("simple") == {TP("t0", 0): 4, TP("t0", 1): 104}
        assert await admin.fetch_offsets("other") == {TP("t1", 0): 7}
        assert await admin.fetch_offsets(GROUP) == {TP("t0", 2): 33}
    # Compacted at start: only the latest record of each committed partition was kept.
    assert recovered["compacted_bytes"] < recovered["bytes"]
    # The restored member carries on in its generation and commits again.
    await recorder.wait_until(lambda: clients[0].reconnects >= 1 and clients[0].state is MemberState.STABLE,
                              what="the member back after the restart")
    async with AdminClient(HOST, second.port) as admin:
        errors = await admin.commit_offsets(GROUP, {TP("t0", 2): 34}, g.generation_id, clients[0].member_id)
        assert set(errors.values()) == {0} and await admin.fetch_offsets(GROUP) == {TP("t0", 2): 34}


async def test_describe_shows_committed_offsets_log_end_offsets_and_lag(env: Env) -> None:
    await env.start_server()
    admin = await env.admin()
    await admin.create_topics(TOPICS)
    clients = [await env.consumer(f"c{i}") for i in range(2)]
    g = await env.wait_stable(clients)
    owner = {tp: c for c in clients for tp in c.assignment}
    await produce(admin, TP("t0", 0), 10)
    await produce(admin, TP("t1", 1), 4)
    c = owner[TP("t0", 0)]
    await admin.commit_offsets(GROUP, {TP("t0", 0): 7}, g.generation_id, c.member_id)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "grouplab.cli", "describe", "--group", GROUP, "--format", "json",
        "--bootstrap-server", f"{HOST}:{env.port}", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=ROOT)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    [described] = json.loads(out)
    rows = {(r["topic"], r["partition"]): r for r in described["offsets"]}
    assert set(rows) == {(t, p) for t, n in TOPICS.items() for p in range(n)}  # every assigned partition
    assert rows[("t0", 0)] == {"topic": "t0", "partition": 0, "committed_offset": 7, "log_end_offset": 10, "lag": 3,
                               "member_id": c.member_id, "client_id": c.config.client_id, "host": "127.0.0.1"}
    assert rows[("t1", 1)]["committed_offset"] is None and rows[("t1", 1)]["log_end_offset"] == 4
    assert rows[("t1", 1)]["lag"] is None
    # The table form says the same, with the total lag in its title.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "grouplab.cli", "describe", "--group", GROUP, "--bootstrap-server", f"{HOST}:{env.port}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert "total lag 3" in text and "log-end-offset" in text


def test_offset_apis_are_registered():
    assert {"OffsetCommit", "OffsetFetch"} <= set(API)
    assert API["OffsetCommit"].request is OffsetCommitRequest and API["OffsetFetch"].response is OffsetFetchResponse
