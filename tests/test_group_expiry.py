"""Issue 11, memory is bounded: groups expire as Kafka's do (KIP-211, docs/protocol.md §4.15).

An Empty group's committed offsets expire `offsets.retention.minutes` after it became Empty; a
simple consumer's (a group that never had members) after each commit; a group with members keeps
them. The retention check runs every `offsets.retention.check.interval.ms` while an Empty group
exists; a group left Empty with nothing (no offsets, no pending member id, no staged transactional
offsets) is deleted, with tombstones, so a restart from the group log does not bring it back.

The pure Broker is driven on a virtual clock by `Harness` (timers fired in deadline order): no
sleeps, no wall clock, no timings asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grouplab.coordinator.broker import EXPIRY_TIMER, Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group import Group, GroupState
from grouplab.coordinator.group_log import GroupLog, GroupTombstone, OffsetCommitRecord, OffsetTombstone, live
from grouplab.rebalances import RebalanceTracker
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Persist, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    SyncGroupRequest,
)
from grouplab.protocol.types import TopicPartition

T0 = 1_700_000_000_000
MINUTE = 60_000
RETENTION = 60 * MINUTE  # offsets.retention.minutes=60
CHECK = 1_000  # offsets.retention.check.interval.ms
SESSION = 10_000


class Harness:
    """One Broker on a virtual clock: replies by token, timers fired in deadline order, every
    persisted record and logged event kept."""

    def __init__(self, **overrides: Any) -> None:
        values: dict[str, Any] = dict(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1_000,
                                      offsets_retention_minutes=RETENTION // MINUTE,
                                      offsets_retention_check_interval_ms=CHECK)
        values.update(overrides)
        self.broker = Broker(BrokerConfig(**values), SequentialMemberIds())
        self.broker.topics.partitions.update({"t": 2})
        self.now = T0
        self.timers: dict[tuple, int] = {}
        self.records: list[Any] = []
        self.events: list[Any] = []
        self.replies: dict[Any, Any] = {}
        self._tokens = 0

    def apply(self, out: list) -> None:
        for o in out:
            if isinstance(o, ArmTimer):
                self.timers[o.key] = o.deadline_ms
            elif isinstance(o, CancelTimer):
                self.timers.pop(o.key, None)
            elif isinstance(o, Persist):
                self.records.append(o.record)
            elif isinstance(o, LogEvent):
                self.events.append(o.payload)
            elif isinstance(o, Reply):
                self.replies[o.to] = o.body

    def call(self, api: str, body: Any, client_id: str = "c") -> Any:
        self._tokens += 1
        token = ("req", self._tokens)
        self.apply(self.broker.handle(api, body, RequestContext(token, client_id=client_id), self.now))
        return self.replies.pop(token, None)

    def advance(self, to: int) -> None:
        while self.timers:
            key, due = min(self.timers.items(), key=lambda kv: kv[1])
            if due > to:
                break
            del self.timers[key]
            self.now = max(self.now, due)
            self.apply(self.broker.on_timer(key, self.now))
        self.now = to

    # ------------------------------------------------------------------ a member's steps

    def join(self, group: str, client: str = "c") -> tuple[str, int]:
        """A dynamic member joins (two steps, KIP-394) and syncs as the only member: (id, generation)."""
        first = self.call("JoinGroup", join_req(group, ""), client)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        self._tokens += 1
        token = ("req", self._tokens)
        self.apply(self.broker.handle("JoinGroup", join_req(group, first.member_id),
                                      RequestContext(token, client_id=client), self.now))
        self.advance(self.now)  # the initial rebalance delay (0) ends the join phase
        joined = self.replies.pop(token)
        assert joined.error_code == 0, joined
        synced = self.call("SyncGroup", SyncGroupRequest(group, joined.generation_id, joined.member_id,
                                                         assignments=[]), client)
        assert synced.error_code == 0
        return joined.member_id, joined.generation_id

    def commit(self, group: str, partition: int, offset: int, member_id: str = "", generation: int = -1) -> int:
        resp = self.call("OffsetCommit", OffsetCommitRequest(group, [OffsetCommitRequestTopic(
            "t", [OffsetCommitRequestPartition(partition, offset)])], generation, member_id))
        return resp.topics[0].partitions[0].error_code

    def committed(self, group: str, partition: int) -> int:
        resp = self.call("OffsetFetch", OffsetFetchRequest(group, [OffsetFetchRequestTopic("t", [partition])]))
        return resp.topics[0].partitions[0].committed_offset

    def leave(self, group: str, member_id: str) -> None:
        resp = self.call("LeaveGroup", LeaveGroupRequest(group, [LeaveGroupRequestMember(member_id)]))
        assert resp.members[0].error_code == 0

    def state(self, group: str) -> str:
        return self.call("DescribeGroups", DescribeGroupsRequest([group])).groups[0].group_state

    def logged(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def join_req(group: str, member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(group, SESSION, 30_000, member_id, "consumer", [JoinGroupRequestProtocol("range", b"")])


def empty_at(h: Harness, group: str) -> int:
    """A member joins, commits partition 0 and leaves: the group is Empty from the returned time."""
    member, generation = h.join(group)
    assert h.commit(group, 0, 42, member, generation) == 0
    h.advance(h.now + SESSION // 2)  # within the session: later than the commit
    h.leave(group, member)
    assert h.state(group) == "Empty"
    return h.now


# ----------------------------------------------------------------------------- KIP-211: from when the group became Empty


def test_offsets_expire_retention_after_the_group_became_empty_then_the_group_is_deleted() -> None:
    h = Harness()
    committed_at = h.now
    became_empty = empty_at(h, "g")
    assert became_empty > committed_at + CHECK
    # Retention counts from the moment the group became Empty, not from the commit.
    h.advance(committed_at + RETENTION + CHECK)
    assert h.committed("g", 0) == 42 and h.state("g") == "Empty"
    h.advance(became_empty + RETENTION - 1)
    assert h.committed("g", 0) == 42
    h.advance(became_empty + RETENTION + CHECK)
    [expired] = h.logged(events.OffsetsExpired)
    assert (expired.partitions, expired.empty_since_ms) == ([["t", 0]], became_empty)
    [deleted] = h.logged(events.GroupDeleted)
    assert (deleted.group_id, deleted.state, deleted.reason, deleted.offsets_deleted) == ("g", GroupState.DEAD, "expired", 0)
    assert "g" not in h.broker.groups and h.state("g") == "Dead" and h.committed("g", 0) == -1
    assert h.call("ListGroups", ListGroupsRequest()).groups == []
    # Kafka's tombstones: the offset's, then the group's.
    assert h.records[-2:] == [OffsetTombstone("g", "t", 0, h.records[-1].ts_ms), GroupTombstone("g", h.records[-1].ts_ms)]


def test_a_group_deleted_by_expiry_does_not_come_back_after_a_restart(tmp_path: Path) -> None:
    h = Harness()
    became_empty = empty_at(h, "g")
    h.advance(became_empty + RETENTION // 2)
    assert h.commit("kept", 1, 7) == 0  # a simple consumer's group, not due yet
    h.advance(became_empty + RETENTION + CHECK)
    assert "g" not in h.broker.groups
    with GroupLog.in_dir(tmp_path) as log:
        log.append_many(h.records)
    with GroupLog.in_dir(tmp_path) as log:
        records = log.recover()  # replay, then compact
    with GroupLog.in_dir(tmp_path) as log:
        compacted = log.replay()
    assert not [r for r in compacted if getattr(r, "group_id", None) == "g"]  # compaction dropped it all
    assert compacted == live(records)
    for replayed in (records, compacted):
        restarted = Broker(BrokerConfig(), SequentialMemberIds())
        restarted.restore(replayed, h.now)
        assert set(restarted.groups) == {"kept"}
        assert restarted.groups["kept"].offsets.get(TopicPartition("t", 1)) is not None


def test_a_simple_consumers_offsets_expire_retention_after_each_commit() -> None:
    h = Harness()
    first = h.now
    assert h.commit("simple", 0, 10) == 0  # generation -1, no member: the group exists, Empty
    h.advance(first + RETENTION // 2)
    second = h.now
    assert h.commit("simple", 1, 20) == 0
    h.advance(first + RETENTION + CHECK)
    [expired] = h.logged(events.OffsetsExpired)
    assert (expired.partitions, expired.empty_since_ms) == ([["t", 0]], None)
    assert h.committed("simple", 0) == -1 and h.committed("simple", 1) == 20 and h.state("simple") == "Empty"
    h.advance(second + RETENTION + CHECK)
    assert h.committed("simple", 1) == -1 and "simple" not in h.broker.groups
    assert [e.reason for e in h.logged(events.GroupDeleted)] == ["expired"]


def test_a_group_with_members_keeps_its_offsets_for_ever() -> None:
    h = Harness()
    member, generation = h.join("g")
    assert h.commit("g", 0, 5, member, generation) == 0
    assert EXPIRY_TIMER not in h.timers  # nothing Empty: the check is not even armed
    end = h.now + 3 * RETENTION
    while h.now < end:
        h.advance(h.now + SESSION // 2)
        assert h.call("Heartbeat", HeartbeatRequest("g", generation, member)).error_code == 0
    assert h.committed("g", 0) == 5 and h.state("g") == "Stable"
    assert not h.logged(events.OffsetsExpired) and not h.logged(events.GroupDeleted)
    # Once it is Empty, the retention starts.
    h.leave("g", member)
    empty = h.now
    assert EXPIRY_TIMER in h.timers
    h.advance(empty + RETENTION + CHECK)
    assert "g" not in h.broker.groups


def test_a_group_empty_with_no_offsets_is_deleted_at_the_next_check() -> None:
    h = Harness()
    member, _ = h.join("g")
    h.leave("g", member)
    h.advance(h.now + CHECK)
    assert "g" not in h.broker.groups
    [deleted] = h.logged(events.GroupDeleted)
    assert (deleted.reason, deleted.offsets_deleted) == ("expired", 0)
    assert not h.logged(events.OffsetsExpired)
    assert EXPIRY_TIMER not in h.timers  # no Empty group left: not armed again


def test_a_join_never_completed_leaves_nothing_once_its_member_id_expires() -> None:
    h = Harness()
    first = h.call("JoinGroup", join_req("g", ""))
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    h.advance(h.now + SESSION - 1)
    assert "g" in h.broker.groups  # the pending member id keeps it
    h.advance(h.now + 1 + CHECK)
    assert "g" not in h.broker.groups and h.timers == {}


def test_a_deleted_group_made_again_starts_from_generation_0() -> None:
    h = Harness()
    member, generation = h.join("g")
    h.leave("g", member)
    h.advance(h.now + CHECK)
    assert "g" not in h.broker.groups
    _, again = h.join("g")
    assert again == 1 and generation == 1  # a fresh group: its first generation


def test_the_restart_keeps_when_the_group_became_empty() -> None:
    """The Empty GroupMetadata record is written as the group becomes Empty: a restarted
    coordinator counts the retention from then, as Kafka does from currentStateTimestamp."""
    h = Harness()
    became_empty = empty_at(h, "g")
    h.advance(became_empty + RETENTION // 2)
    restarted = Harness()
    restarted.now = h.now
    restarted.apply(restarted.broker.restore(h.records, h.now))
    assert restarted.broker.groups["g"].empty_since_ms == became_empty
    restarted.advance(became_empty + RETENTION - 1)
    assert restarted.committed("g", 0) == 42
    restarted.advance(became_empty + RETENTION + CHECK)
    assert "g" not in restarted.broker.groups


# ----------------------------------------------------------------------------- the pure group machine


def simple_group() -> Group:
    g = Group.absent("s", BrokerConfig(), SequentialMemberIds())
    g.handle_offset_commit(OffsetCommitRequest("s", [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 1)])]),
                           "r", T0, {"t": 2})
    assert g.state is GroupState.EMPTY and g.empty_since_ms is None
    return g


def test_staged_transactional_offsets_keep_an_empty_group() -> None:
    g = simple_group()
    g.offsets.stage_txn(7, {TopicPartition("t", 1): (5, None)}, T0)
    out = g.expire_offsets(T0 + RETENTION, RETENTION)
    assert [type(o.record) for o in out if isinstance(o, Persist)] == [OffsetTombstone]  # the committed one expired
    assert g.state is GroupState.EMPTY and not g.offsets.committed  # kept: a transaction still holds offsets
    g.on_txn_completed(7, False, T0 + RETENTION + 1)
    out = g.expire_offsets(T0 + RETENTION + 2, RETENTION)
    assert g.state is GroupState.DEAD
    assert [o.record for o in out if isinstance(o, Persist)] == [GroupTombstone("s", T0 + RETENTION + 2)]


def test_the_check_changes_nothing_in_a_group_that_is_not_empty() -> None:
    g = simple_group()
    g.handle_join(join_req("s", ""), "j1", T0, "c")
    mid = g.pending_members and next(iter(g.pending_members))
    g.handle_join(join_req("s", str(mid)), "j2", T0, "c")
    assert g.state is GroupState.PREPARING_REBALANCE
    assert g.expire_offsets(T0 + 10 * RETENTION, RETENTION) == []
    assert g.offsets.get(TopicPartition("t", 0)) is not None


def test_expiry_before_its_time_changes_nothing() -> None:
    g = simple_group()
    assert g.expire_offsets(T0 + RETENTION - 1, RETENTION) == []
    assert g.state is GroupState.EMPTY and g.offsets.get(TopicPartition("t", 0)) is not None


def test_the_restored_tombstones_hide_the_records_they_follow() -> None:
    records = [OffsetCommitRecord("g", "t", 0, 1, -1, "", T0), OffsetTombstone("g", "t", 0, T0 + 1),
               OffsetCommitRecord("h", "t", 0, 2, -1, "", T0), GroupTombstone("g", T0 + 1)]
    broker = Broker(BrokerConfig(), SequentialMemberIds())
    broker.restore(records, T0 + 2)
    assert set(broker.groups) == {"h"}
    assert live(records) == [records[2]]


# ----------------------------------------------------------------------------- readers: the rebalance fold


def test_the_rebalance_tracker_forgets_a_deleted_group() -> None:
    """A group made again under a deleted id starts from generation 0: the tracker (and so the
    simulator's invariants) must not compare it with the old one's generations."""
    h = Harness()
    member, _ = h.join("g")
    h.leave("g", member)
    h.advance(h.now + CHECK)
    h.join("g")
    tracker = RebalanceTracker()
    history = tracker.group("g")
    generations = []
    for ev in h.events:
        tracker.feed("coordinator", LogEvent(T0, ev))
        generations.append(history.generation)
        if isinstance(ev, events.GroupDeleted):
            assert (history.generation, history.leaders, history.assignments) == (0, {}, {})
    assert generations[-1] == 1 and tracker.group("g") is history


# ----------------------------------------------------------------------------- the simulator


def test_the_simulator_accepts_a_group_that_expires_and_is_made_again(tmp_path: Path) -> None:
    """Every member crashes for longer than the session plus the retention: the group goes Empty,
    expires, and the restarted members make it again from generation 1. The invariants (generations
    only go up, one leader per generation, assignments from the leader) hold across the gap."""
    from grouplab.sim.runner import run_seed
    from grouplab.sim.scenario import scenario_from_text

    scenario = scenario_from_text("""
name = "expiry"
topics = { t0 = 4 }
duration_ms = 200_000

[broker]
"group.initial.rebalance.delay.ms" = 0
"offsets.retention.minutes" = 1
"offsets.retention.check.interval.ms" = 1000

[consumer]
"session.timeout.ms" = 10000
"heartbeat.interval.ms" = 3000

[[members]]
count = 3
start_ms = [0, 1000]

[[schedule]]
at_ms = 20_000
fault = "crash"
members = 3
duration_ms = 100_000
""")
    result = run_seed(scenario, 1, tmp_path)
    assert result.ok, result.violation
    lines = [json.loads(line) for line in (tmp_path / "coordinator.jsonl").read_text().splitlines()]
    names = [line["event"] for line in lines]
    deleted = names.index("group_deleted")
    assert lines[deleted]["reason"] == "expired"
    again = [line for line in lines[deleted:] if line["event"] == "generation_completed"]
    assert again and again[0]["generation_id"] == 1
