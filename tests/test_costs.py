"""The cost fold (grouplab/costs.py): consumed, assigned-but-not-consumed and unowned time per
partition, and each stop charged with what it cost (docs/events.md §6).

Hand-written logs pin the definitions case by case (a crash noticed by the session timeout, a
real run's `app_crashed`, a hang that ends by itself, a slow consumer that gives its partitions
up, a static restart, a restart under a new member id, partitions added later, a topic deleted
and made again); hypothesis checks the invariants on random logs (every partition's three times
add up to its time in the run, none after its topic's deletion, a live snapshot equals the
finished fold of the same prefix); simulated runs check them on
the simulator's logs, live and read back from the run directory, and that a crash without a
LeaveGroup costs about a session timeout."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grouplab.cost_sentences import describe_stall
from grouplab.costs import ASSIGNED_NOT_CONSUMED, COST_EVENTS, CONSUMED, UNOWNED, CostTracker, Segment, StallReport
from grouplab.eventlog import EventLog, run_dir_log
from grouplab.runlog import payload_of, read_run
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import load_scenario
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.types import TopicPartition

ROOT = Path(__file__).resolve().parent.parent
G = "g"


def tp(p: int) -> TopicPartition:
    return TopicPartition("t", p)


def pairs(*ps: int) -> list[list[Any]]:
    return [["t", p] for p in ps]


def line(ts: int, node: str, event: str, **fields: Any) -> tuple[str, LogEvent]:
    payload = payload_of(event, fields)
    assert type(payload).__name__ != "FreeFormEvent", (event, fields)
    return node, LogEvent(ts, payload)


def coord(ts: int, event: str, gen: int, **fields: Any) -> tuple[str, LogEvent]:
    return line(ts, "coordinator", event, group_id=G, generation_id=gen, state="Stable", **fields)


def started(ts: int, gen: int, cause: str = "member_joined") -> tuple[str, LogEvent]:
    return coord(ts, "rebalance_started", gen, trigger=cause, cause=cause, members=[])


def stable(ts: int, gen: int, assignments: dict[str, list[list[Any]]]) -> list[tuple[str, LogEvent]]:
    leader = next(iter(assignments))
    return [coord(ts - 5, "generation_completed", gen, protocol_name="range", leader=leader,
                  members=list(assignments), trigger="-"),
            coord(ts, "group_stable", gen, leader=leader, protocol_name="range", assignments=assignments,
                  clients={m: m.split("-")[0] for m in assignments})]


def removed(ts: int, gen: int, member: str, reason: str = "session_timeout") -> tuple[str, LogEvent]:
    return coord(ts, "member_removed", gen, member_id=member, reason=reason, detail="-")


def member(ts: int, node: str, event: str, member_id: str, gen: int, **fields: Any) -> tuple[str, LogEvent]:
    return line(ts, node, event, group_id=G, member_id=member_id, generation_id=gen, state="stable", **fields)


def assigned(ts: int, node: str, member_id: str, gen: int, *ps: int) -> tuple[str, LogEvent]:
    return member(ts, node, "partitions_assigned", member_id, gen, partitions=pairs(*ps), owned=pairs(*ps))


def revoked(ts: int, node: str, member_id: str, gen: int, *ps: int, reason: str = "rejoin") -> tuple[str, LogEvent]:
    return member(ts, node, "partitions_revoked", member_id, gen, partitions=pairs(*ps), reason=reason)


def lost(ts: int, node: str, member_id: str, gen: int, *ps: int, reason: str = "poll timeout") -> tuple[str, LogEvent]:
    return member(ts, node, "partitions_lost", member_id, gen, partitions=pairs(*ps), reason=reason)


def sim(ts: int, event: str, **fields: Any) -> tuple[str, LogEvent]:
    return line(ts, "simulator", event, group_id=G, seed=1, **fields)


def fault(ts: int, kind: str, node: str, duration_ms: int = 0) -> tuple[str, LogEvent]:
    return sim(ts, "fault_injected", fault=kind, members=[node], duration_ms=duration_ms, topic=None)


def run(lines: list[tuple[str, LogEvent]], end_ms: int | None = None) -> tuple[CostTracker, list[StallReport]]:
    costs = CostTracker()
    reports: list[StallReport] = []
    for node, ev in lines:
        costs.feed(node, ev)
        reports += costs.take_reports()
    costs.finish(end_ms)
    reports += costs.take_reports()
    return costs, reports


def timeline(costs: CostTracker, p: int) -> list[tuple[str, int, int, str | None]]:
    return [(s.state, s.start_ms, s.end_ms, s.client_id) for s in sorted(costs.segments, key=lambda s: s.start_ms)
            if s.partition == tp(p)]


def assert_adds_up(costs: CostTracker, end_ms: int, deleted: tuple[int, ...] = ()) -> None:
    """Every lane's segments are contiguous from its start to the end of the log, but for the
    times its topic was deleted (`deleted`: when): a deletion ends the lane, and nothing accrues
    until the topic is made again."""
    for (_, part), (t, opened) in costs.lane_totals().items():
        assert deleted or t.total_ms == end_ms - opened, part
    for (g, part), segs in _by_lane(costs.segments).items():
        segs.sort(key=lambda s: s.start_ms)
        for a, b in zip(segs, segs[1:]):
            assert a.end_ms == b.start_ms or a.end_ms < b.start_ms and a.end_ms in deleted, part  # no overlap
        assert segs[-1].end_ms == end_ms or segs[-1].end_ms in deleted
    for s in costs.stalls:
        anc = sum(x.duration_ms for x in costs.segments if x.stall == s.index and x.state == ASSIGNED_NOT_CONSUMED)
        after = sum(x.duration_ms for x in costs.segments if x.stall == s.index and x.state == UNOWNED)
        assert (s.assigned_not_consumed_ms, s.unowned_after_ms) == (anc, after)
    assert all(x.stall is not None for x in costs.segments if x.state == ASSIGNED_NOT_CONSUMED)
    assert all(x.stall is None for x in costs.segments if x.state == CONSUMED)


def _by_lane(segments: list[Segment]) -> dict[tuple[str, TopicPartition], list[Segment]]:
    out: dict[tuple[str, TopicPartition], list[Segment]] = {}
    for s in segments:
        out.setdefault((s.group_id, s.partition), []).append(s)
    return out


# ----------------------------------------------------------------------------- hand-written logs


def two_members(t0: int = 1_000) -> list[tuple[str, LogEvent]]:
    """a and b join; a gets t-0, t-1 and b t-2, t-3 at t0 + 10."""
    return [started(0, 0), *stable(t0, 1, {"a-1": pairs(0, 1), "b-1": pairs(2, 3)}),
            assigned(t0 + 10, "a", "a-1", 1, 0, 1), assigned(t0 + 10, "b", "b-1", 1, 2, 3)]


def crash_then_session_timeout(crash: tuple[str, LogEvent]) -> list[tuple[str, LogEvent]]:
    return [*two_members(), crash,
            removed(19_000, 1, "b-1"), started(19_000, 1, "session_timeout"),
            revoked(19_010, "a", "a-1", 1, 0, 1),
            *stable(19_300, 2, {"a-1": pairs(0, 1, 2, 3)}), assigned(19_310, "a", "a-1", 2, 0, 1, 2, 3)]


def test_a_crash_is_assigned_but_not_consumed_until_the_session_timeout_removes_it() -> None:
    costs, reports = run(crash_then_session_timeout(fault(10_000, "crash", "b", 5_000)), end_ms=30_000)
    assert timeline(costs, 2) == [(UNOWNED, 0, 1_010, None), (CONSUMED, 1_010, 10_000, "b"),
                                  (ASSIGNED_NOT_CONSUMED, 10_000, 19_000, "b"), (UNOWNED, 19_000, 19_310, None),
                                  (CONSUMED, 19_310, 30_000, "a")]
    # a's own partitions: revoked for the rebalance the removal started, which is the rebalance's cost
    assert timeline(costs, 0)[2:] == [(UNOWNED, 19_010, 19_310, None), (CONSUMED, 19_310, 30_000, "a")]
    (stall,) = costs.stalls
    assert (stall.client_id, stall.member_id, stall.fault, stall.since_ms) == ("b", "b-1", "crash", 10_000)
    assert (stall.ended_ms, stall.ended_by, stall.removed_ms, stall.removal_reason) == (19_000, "session_timeout", 19_000,
                                                                                       "session_timeout")
    assert stall.partitions == {tp(2), tp(3)} and stall.assigned_not_consumed_ms == 2 * 9_000
    assert stall.unowned_after_ms == 2 * 310 and stall.repaired_generation == 2
    unowned_by_gen = {s.generation for s in costs.segments if s.state == UNOWNED and s.start_ms > 0}
    assert unowned_by_gen == {2}  # charged to the generation whose assignment ended it
    (report,) = reports
    assert report.rebalance is not None and report.rebalance.generation == 2 and report.ts_ms == 19_300
    assert describe_stall(report, session_timeout_ms=10_000) == (
        "b crashed at 10.0 s; its 2 partitions were assigned but not consumed for 9.0 s until the session timeout "
        "(session.timeout.ms=10000) removed it; the rebalance then took 300 ms")
    total = costs.totals()
    assert total.assigned_not_consumed_ms == 18_000 and total.total_ms == 4 * 30_000
    assert_adds_up(costs, 30_000)


def test_a_real_runs_crash_is_its_own_last_line() -> None:
    crash = line(10_000, "b", "app_crashed", group_id=G, member_id="b-1")
    costs, reports = run(crash_then_session_timeout(crash), end_ms=30_000)
    (stall,) = costs.stalls
    assert (stall.fault, stall.assigned_not_consumed_ms, stall.ended_by) == ("app_crashed", 18_000, "session_timeout")
    assert describe_stall(reports[0], origin_ms=1_000).startswith("b crashed at 9.0 s; its 2 partitions were assigned "
                                                                  "but not consumed for 9.0 s until the session timeout "
                                                                  "removed it")


def test_while_waiting_for_the_session_timeout_a_snapshot_counts_up_to_now() -> None:
    costs = CostTracker()
    for node, ev in [*two_members(), fault(10_000, "crash", "b")]:
        costs.feed(node, ev)
    (stall,) = costs.waiting()
    assert stall.client_id == "b" and costs.stall_cost(stall, 16_000) == (2 * 6_000, 0)
    assert costs.totals(16_000).assigned_not_consumed_ms == 12_000 and costs.totals(16_000).total_ms == 4 * 16_000
    frozen = copy.deepcopy(costs)
    costs.feed(*removed(19_000, 1, "b-1"))
    assert costs.waiting() == [] and frozen.waiting() and costs.stall_cost(costs.stalls[0], 19_500) == (18_000, 1_000)


def test_a_hang_shorter_than_the_session_ends_by_itself() -> None:
    lines = [*two_members(), fault(10_000, "hang", "b", 4_000), assigned(20_000, "a", "a-1", 1)]  # a later event
    costs, reports = run(lines, end_ms=20_000)
    assert timeline(costs, 3) == [(UNOWNED, 0, 1_010, None), (CONSUMED, 1_010, 10_000, "b"),
                                  (ASSIGNED_NOT_CONSUMED, 10_000, 14_000, "b"), (CONSUMED, 14_000, 20_000, "b")]
    (stall,) = costs.stalls
    assert (stall.ended_by, stall.resumed_ms, stall.removed_ms, stall.repaired_generation) == ("resumed", 14_000, None, None)
    assert reports[0].ts_ms == 14_000 and reports[0].rebalance is None
    assert describe_stall(reports[0]) == ("b hung at 10.0 s; its 2 partitions were assigned but not consumed for 4.0 s "
                                          "until it resumed")
    assert_adds_up(costs, 20_000)


def test_the_end_of_the_faults_ends_a_hang_early() -> None:
    costs, _ = run([*two_members(), fault(10_000, "hang", "b", 40_000), sim(12_000, "faults_over")], end_ms=20_000)
    assert costs.stalls[0].resumed_ms == 12_000 and costs.stalls[0].assigned_not_consumed_ms == 2 * 2_000


def test_a_slow_consumer_past_its_poll_interval_gives_its_partitions_up() -> None:
    lines = [*two_members(), fault(10_000, "slow", "b", 60_000), lost(40_000, "b", "b-1", 1, 2, 3),
             removed(40_001, 1, "b-1", "left"), started(40_001, 1, "member_left"), revoked(40_010, "a", "a-1", 1, 0, 1),
             *stable(40_300, 2, {"a-1": pairs(0, 1, 2, 3)}), assigned(40_310, "a", "a-1", 2, 0, 1, 2, 3)]
    costs, reports = run(lines, end_ms=50_000)
    (stall,) = costs.stalls
    assert (stall.ended_ms, stall.ended_by, stall.ended_detail) == (40_000, "lost", "poll timeout")
    assert stall.unowned_after_ms == 2 * 310 and stall.repaired_generation == 2 and stall.removal_reason == "left"
    assert describe_stall(reports[0]) == ("b stopped polling (slow) at 10.0 s; its 2 partitions were assigned but not "
                                          "consumed for 30.0 s until it gave them up as lost (poll timeout)")
    assert_adds_up(costs, 50_000)


def test_the_cost_sentences_in_chinese() -> None:
    """`--lang zh` (issue 25): the same sentences from the zh catalogue, Kafka's names kept, no
    English sentence left; the member's own reason said in Chinese too."""
    from grouplab.cost_sentences import describe_partition_time
    from tests.test_zh_output import untranslated

    costs, reports = run(crash_then_session_timeout(fault(10_000, "crash", "b", 5_000)), end_ms=30_000)
    assert describe_stall(reports[0], session_timeout_ms=10_000, lang="zh") == (
        "b 在 10.0 秒崩溃；它的 2 个分区已分配但未消费，持续 9.0 秒，直到会话超时（session.timeout.ms=10000）将它移除；"
        "随后的再均衡用时 300 毫秒")
    assert describe_partition_time(costs.totals(), costs.stalls, lang="zh") == (
        "分区时间（4 个分区，120.0 分区·秒）：80.6% 被消费 · 18.0 分区·秒已分配但未消费（记在 1 次停顿上：崩溃 ×1） · "
        "5.3 分区·秒无主")
    assert describe_partition_time(costs.totals(), costs.stalls) == (
        "partition time (4 partitions, 120.0 partition-s): 80.6% consumed · 18.0 partition-s assigned but not consumed "
        "(charged to 1 stop: crash ×1) · 5.3 partition-s unowned")
    _, slow = run([*two_members(), fault(10_000, "slow", "b", 60_000), lost(40_000, "b", "b-1", 1, 2, 3)], end_ms=50_000)
    assert describe_stall(slow[0], lang="zh").endswith("直到它把这些分区当作丢失而放弃（poll 超时）")
    every_way = [describe_stall(r, lang="zh") for r in (*reports, *slow)]
    assert [untranslated(s) for s in every_way] == [[], []]


def test_runs_display_prints_the_costs_in_its_language() -> None:
    import io

    from rich.console import Console

    from grouplab.display import RebalanceView

    out = io.StringIO()
    view = RebalanceView(Console(file=out, width=200, color_system=None), G, session_timeout_ms=10_000, lang="zh")
    for node, ev in crash_then_session_timeout(fault(10_000, "crash", "b", 5_000)):
        view(node, ev)
    assert view.finish(30_000).startswith("分区时间（4 个分区")
    assert "代价：b 在 10.0 秒崩溃；它的 2 个分区已分配但未消费" in out.getvalue()


def test_a_static_restart_is_fenced_and_its_new_process_consumes() -> None:
    lines = [*two_members(), fault(10_000, "static_restart", "b", 2_000),
             sim(12_000, "process_started", member="b", incarnation=2),
             line(12_000, "b", "coordinator_connected", group_id=G, member_id=""),
             coord(12_050, "static_member_replaced", 1, member_id="b-2", old_member_id="b-1", group_instance_id="b-i"),
             assigned(12_100, "b", "b-2", 1, 2, 3)]
    costs, reports = run(lines, end_ms=20_000)
    assert timeline(costs, 2)[2:] == [(ASSIGNED_NOT_CONSUMED, 10_000, 12_050, "b"), (UNOWNED, 12_050, 12_100, None),
                                      (CONSUMED, 12_100, 20_000, "b")]
    stall = costs.stalls[0]
    assert (stall.ended_by, stall.unowned_after_ms, stall.repaired_generation) == ("fenced", 100, None)
    assert [h.end_reason for h in costs.holdings if h.member_id == "b-1"] == ["fenced", "fenced"]
    assert "until its replacement with the same group.instance.id fenced it" in describe_stall(reports[0])
    assert_adds_up(costs, 20_000)


def test_a_restarted_client_is_a_new_process_and_its_old_member_still_holds() -> None:
    lines = [*two_members(), fault(10_000, "crash", "b", 3_000),
             line(13_000, "b", "coordinator_connected", group_id=G, member_id=""),  # before the simulator's line
             sim(13_000, "process_started", member="b", incarnation=2),
             member(13_010, "b", "join_sent", "", 0, reason="starting", protocols=["range"], owned=[]),
             line(13_020, "b", "coordinator_connected", group_id=G, member_id="b-2"),
             removed(19_000, 1, "b-1"), started(19_000, 1, "session_timeout"),
             *stable(19_300, 2, {"a-1": pairs(0, 1), "b-2": pairs(2, 3)}), assigned(19_310, "b", "b-2", 2, 2, 3)]
    costs, _ = run(lines, end_ms=20_000)
    assert timeline(costs, 2)[2:] == [(ASSIGNED_NOT_CONSUMED, 10_000, 19_000, "b"), (UNOWNED, 19_000, 19_310, None),
                                      (CONSUMED, 19_310, 20_000, "b")]
    assert len(costs.stalls) == 1 and costs.stalls[0].repaired_generation == 2
    assert_adds_up(costs, 20_000)


def test_partitions_added_later_are_counted_from_their_creation() -> None:
    lines = [*two_members(), line(5_000, "coordinator", "partitions_created", topic="t", partition_count=6),
             started(6_000, 1, "member_metadata_changed"),
             *stable(6_300, 2, {"a-1": pairs(0, 1, 4), "b-1": pairs(2, 3, 5)}), assigned(6_310, "a", "a-1", 2, 4)]
    costs, _ = run(lines, end_ms=10_000)
    assert timeline(costs, 4) == [(UNOWNED, 5_000, 6_310, None), (CONSUMED, 6_310, 10_000, "a")]
    assert timeline(costs, 5) == [(UNOWNED, 5_000, 10_000, None)]  # b never said it got it
    assert_adds_up(costs, 10_000)


def u(*ps: int) -> list[list[Any]]:
    return [["u", p] for p in ps]


def topic_deleted(ts: int, topic: str = "u", count: int = 2) -> tuple[str, LogEvent]:
    return line(ts, "coordinator", "topic_deleted", topic=topic, partition_count=count, partition_logs=count)


def topic_created(ts: int, topic: str = "u", count: int = 2) -> tuple[str, LogEvent]:
    return line(ts, "coordinator", "topic_created", topic=topic, partition_count=count, auto=False)


def member_lines(ts: int, node: str, event: str, member_id: str, gen: int, parts: list[list[Any]],
                 **fields: Any) -> tuple[str, LogEvent]:
    return member(ts, node, event, member_id, gen, partitions=parts, **fields)


def two_topics_then_u_deleted() -> list[tuple[str, LogEvent]]:
    """a and b consume t (4 partitions) and u (2) from 1.01 s; u is deleted at 5 s (the offsets of
    the group go with it); the members see it at their next metadata refresh, revoke everything
    (eager) and the group rebalances without u, stable at 6.3 s."""
    return [started(0, 0), *stable(1_000, 1, {"a-1": pairs(0, 1) + u(0), "b-1": pairs(2, 3) + u(1)}),
            member_lines(1_010, "a", "partitions_assigned", "a-1", 1, pairs(0, 1) + u(0), owned=[]),
            member_lines(1_010, "b", "partitions_assigned", "b-1", 1, pairs(2, 3) + u(1), owned=[]),
            topic_deleted(5_000),
            coord(5_000, "topic_offsets_deleted", 1, topic="u", partitions=u(0, 1), staged_partitions=[]),
            started(6_000, 1, "member_metadata_changed"),
            member_lines(6_010, "a", "partitions_revoked", "a-1", 1, pairs(0, 1) + u(0), reason="rejoin"),
            member_lines(6_010, "b", "partitions_revoked", "b-1", 1, pairs(2, 3) + u(1), reason="rejoin"),
            *stable(6_300, 2, {"a-1": pairs(0, 1), "b-1": pairs(2, 3)}),
            assigned(6_310, "a", "a-1", 2, 0, 1), assigned(6_310, "b", "b-1", 2, 2, 3)]


def lane(costs: CostTracker, topic: str, p: int) -> list[tuple[str, int, int, str | None, str]]:
    return [(s.state, s.start_ms, s.end_ms, s.client_id, s.ended_by)
            for s in sorted(costs.segments, key=lambda s: s.start_ms) if s.partition == TopicPartition(topic, p)]


def write_run(run_dir: Path, lines: list[tuple[str, LogEvent]]) -> None:
    """Hand-written lines as a run directory, one file per node (for plot and analyze)."""
    logs: dict[str, EventLog] = {}
    for node, ev in lines:
        if node not in logs:
            logs[node] = run_dir_log(run_dir, node)
        logs[node].emit(ev)
    for log in logs.values():
        log.close()


def test_a_deleted_topics_partitions_end_at_the_deletion_and_the_other_topic_goes_on() -> None:
    costs, reports = run(two_topics_then_u_deleted(), end_ms=10_000)
    # u's partitions: consumed until the deletion, then nothing at all (not unowned for the rest of the run)
    assert lane(costs, "u", 0) == [(UNOWNED, 0, 1_010, None, "assigned"), (CONSUMED, 1_010, 5_000, "a", "deleted")]
    assert lane(costs, "u", 1) == [(UNOWNED, 0, 1_010, None, "assigned"), (CONSUMED, 1_010, 5_000, "b", "deleted")]
    # t's: as if u had never been there; the rebalance's stop-the-world time is theirs alone
    assert lane(costs, "t", 2) == [(UNOWNED, 0, 1_010, None, "assigned"), (CONSUMED, 1_010, 6_010, "b", "revoked"),
                                   (UNOWNED, 6_010, 6_310, None, "assigned"), (CONSUMED, 6_310, 10_000, "b", "end_of_log")]
    after = [s for s in costs.segments if s.end_ms > 5_000 and s.partition.topic == "u"]
    assert after == []
    stop_the_world = {s.partition for s in costs.segments if s.state == UNOWNED and s.generation == 2}
    assert stop_the_world == {tp(0), tp(1), tp(2), tp(3)}
    assert sorted((h.partition.topic, h.partition.partition, h.end_ms, h.end_reason) for h in costs.holdings
                  if h.partition.topic == "u") == [("u", 0, 5_000, "deleted"), ("u", 1, 5_000, "deleted")]
    total = costs.totals()
    assert total.partitions == 6 and total.total_ms == 4 * 10_000 + 2 * 5_000
    assert total.unowned_ms == 6 * 1_010 + 4 * 300
    assert costs.totals(group_id=G) == total and not costs.stalls and not reports
    assert_adds_up(costs, 10_000, deleted=(5_000,))


def test_a_live_snapshot_after_a_deletion_counts_nothing_for_the_deleted_partitions() -> None:
    costs = CostTracker()
    for node, ev in two_topics_then_u_deleted()[:6]:  # up to the deletion
        costs.feed(node, ev)
    assert {s.partition.topic for s in costs.open_segments(9_000)} == {"t"}
    assert costs.totals(9_000).total_ms == 4 * 9_000 + 2 * 5_000
    assert costs.totals(9_000).unowned_ms == 6 * 1_010


def u_made_again(stale: bool) -> list[tuple[str, LogEvent]]:
    """u deleted at 5 s and made again at 7 s with one partition, which b gets in generation 3.
    `stale`: before that, a leader that had not refreshed its metadata yet still assigned u in
    generation 2 (at 5.5 s; a took u-0 and gave it up at 5.6 s); else generation 2 is the one
    without u of `two_topics_then_u_deleted`."""
    if stale:
        lines = [*two_topics_then_u_deleted()[:6],
                 started(5_200, 1, "member_joined"),
                 *stable(5_500, 2, {"a-1": pairs(0, 1) + u(0), "b-1": pairs(2, 3) + u(1)}),
                 member_lines(5_510, "a", "partitions_assigned", "a-1", 2, pairs(0, 1) + u(0), owned=[]),
                 member_lines(5_600, "a", "partitions_revoked", "a-1", 2, u(0), reason="rejoin")]
    else:
        lines = two_topics_then_u_deleted()
    return [*lines, topic_created(7_000, count=1), started(7_500, 2, "member_metadata_changed"),
            *stable(8_000, 3, {"a-1": pairs(0, 1), "b-1": pairs(2, 3) + u(0)}),
            member_lines(8_010, "b", "partitions_assigned", "b-1", 3, pairs(2, 3) + u(0), owned=[])]


def test_a_stale_assignment_does_not_bring_a_deleted_partition_back_and_a_new_topic_starts_afresh() -> None:
    costs, _ = run(u_made_again(stale=True), end_ms=10_000)
    assert lane(costs, "u", 0) == [(UNOWNED, 0, 1_010, None, "assigned"), (CONSUMED, 1_010, 5_000, "a", "deleted"),
                                   (UNOWNED, 7_000, 8_010, None, "assigned"), (CONSUMED, 8_010, 10_000, "b", "end_of_log")]
    assert lane(costs, "u", 1)[-1] == (CONSUMED, 1_010, 5_000, "b", "deleted")
    assert not [h for h in costs.holdings if h.partition.topic == "u" and 5_000 < h.start_ms < 7_000]
    total = costs.totals()
    assert total.partitions == 7 and total.total_ms == 4 * 10_000 + 2 * 5_000 + 3_000
    assert_adds_up(costs, 10_000, deleted=(5_000,))


def test_a_stop_whose_last_partitions_are_deleted_ends_there() -> None:
    lines = [started(0, 0), *stable(1_000, 1, {"a-1": pairs(0, 1), "b-1": u(0, 1)}),
             assigned(1_010, "a", "a-1", 1, 0, 1),
             member_lines(1_010, "b", "partitions_assigned", "b-1", 1, u(0, 1), owned=[]),
             fault(3_000, "crash", "b"), topic_deleted(5_000)]
    costs, reports = run(lines, end_ms=10_000)
    (stall,) = costs.stalls
    assert (stall.ended_ms, stall.ended_by, stall.assigned_not_consumed_ms) == (5_000, "deleted", 2 * 2_000)
    assert lane(costs, "u", 0)[-1] == (ASSIGNED_NOT_CONSUMED, 3_000, 5_000, "b", "deleted")
    assert costs.waiting() == []
    (report,) = reports
    assert report.ts_ms == 5_000 and describe_stall(report) == (
        "b crashed at 3.0 s; its 2 partitions were assigned but not consumed for 2.0 s until their topic was deleted")
    assert_adds_up(costs, 10_000, deleted=(5_000,))


# ----------------------------------------------------------------------------- random logs


@st.composite
def random_logs(draw: Any) -> list[tuple[str, LogEvent]]:
    """Members a..c of one group doing random things to partitions t-0..t-3 over time: assigned,
    revoked, lost, crashing, hanging, restarting, removed, fenced, the faults ending."""
    nodes = ["a", "b", "c"]
    incarnation = {n: 1 for n in nodes}
    lines = [started(0, 0)]
    ts, gen = 0, 1
    for _ in range(draw(st.integers(1, 40))):
        ts += draw(st.integers(0, 3_000))
        n = draw(st.sampled_from(nodes))
        mid = f"{n}-{incarnation[n]}"
        ps = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True))
        what = draw(st.sampled_from(["stable", "assigned", "assigned", "revoked", "lost", "crash", "hang", "slow",
                                     "restart", "removed", "fenced", "faults_over", "app_crashed", "deleted",
                                     "created"]))
        if what == "stable":
            gen += 1
            lines += stable(ts, gen, {f"{m}-{incarnation[m]}": pairs(*[p for p in range(4) if p % 3 == i])
                                      for i, m in enumerate(nodes)})
        elif what == "assigned":
            lines.append(assigned(ts, n, mid, gen, *ps))
        elif what == "revoked":
            lines.append(revoked(ts, n, mid, gen, *ps))
        elif what == "lost":
            lines.append(lost(ts, n, mid, gen, *ps))
        elif what in ("crash", "hang", "slow"):
            lines.append(fault(ts, what, n, draw(st.integers(0, 5_000))))
        elif what == "app_crashed":
            lines.append(line(ts, n, "app_crashed", group_id=G, member_id=mid))
        elif what == "restart":
            incarnation[n] += 1
            lines.append(sim(ts, "process_started", member=n, incarnation=incarnation[n]))
        elif what == "removed":
            lines.append(removed(ts, gen, mid, draw(st.sampled_from(["session_timeout", "left", "sync_timeout"]))))
        elif what == "fenced":
            incarnation[n] += 1
            lines.append(coord(ts, "static_member_replaced", gen, member_id=f"{n}-{incarnation[n]}", old_member_id=mid,
                               group_instance_id=n))
        elif what == "deleted":
            lines.append(topic_deleted(ts, "t", 4))
        elif what == "created":
            lines.append(topic_created(ts, "t", 4))
        else:
            lines.append(sim(ts, "faults_over"))
    return lines


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_logs(), st.integers(0, 5_000), st.data())
def test_every_partitions_three_times_add_up_and_a_snapshot_equals_the_finished_prefix(
        lines: list[tuple[str, LogEvent]], tail: int, data: Any) -> None:
    end = lines[-1][1].ts_ms + tail
    costs, reports = run(lines, end_ms=end)
    deleted = tuple(ev.ts_ms for _, ev in lines if ev.event == "topic_deleted")
    assert_adds_up(costs, end, deleted)
    assert_nothing_while_deleted(costs, lines)
    assert len({r.stall.index for r in reports}) == len(reports)  # each stall reported once
    assert {r.stall.index for r in reports} == {s.index for s in costs.stalls if s.partitions}
    # Live: a prefix fed, then read at `now` without finishing, is what finishing it at `now` gives.
    cut = data.draw(st.integers(1, len(lines)))
    now = lines[cut - 1][1].ts_ms + data.draw(st.integers(0, 2_000))
    live = CostTracker()
    for node, ev in lines[:cut]:
        live.feed(node, ev)
    snapshot = (live.totals(now), [live.stall_cost(s, now) for s in live.stalls])
    live.finish(now)
    assert snapshot == (live.totals(), [(s.assigned_not_consumed_ms, s.unowned_after_ms) for s in live.stalls])


def assert_nothing_while_deleted(costs: CostTracker, lines: list[tuple[str, LogEvent]]) -> None:
    """No segment and no holding of topic t spans a time it did not exist: from a `topic_deleted`
    to the next `topic_created`."""
    gone: list[tuple[int, int]] = []
    since = None
    for _, ev in lines:
        if ev.event == "topic_deleted" and since is None:
            since = ev.ts_ms
        elif ev.event == "topic_created" and since is not None:
            gone.append((since, ev.ts_ms))
            since = None
    if since is not None:
        gone.append((since, 1 << 62))
    spans = [(s.start_ms, s.end_ms) for s in costs.segments] + [(h.start_ms, h.end_ms) for h in costs.holdings]
    for start, end in spans:
        for a, b in gone:
            assert end <= a or start >= b or start == end, ((start, end), (a, b))


# ----------------------------------------------------------------------------- simulated runs


@pytest.mark.parametrize("scenario, seed", [(s, seed) for s in ("crash-storm", "hang", "slow-consumer")
                                            for seed in (1, 2, 3)])
def test_simulated_runs_add_up_live_and_from_their_run_directory(scenario: str, seed: int, tmp_path: Path) -> None:
    loaded = load_scenario(ROOT / "grouplab" / "scenarios" / f"{scenario}.toml")
    live = CostTracker()
    result = run_seed(loaded, seed, tmp_path, listener=live.feed)
    assert result.ok, result.violation
    log = read_run(tmp_path)
    live.finish(log.end_ms)
    assert log.end_ms is not None and log.malformed == 0
    assert_adds_up(live, log.end_ms)
    files = CostTracker()
    for node, ev in log.events:
        files.feed(node, ev)
    files.finish(log.end_ms)
    assert sorted(files.segments, key=repr) == sorted(live.segments, key=repr)
    # Fed only the lines it reads (as the Spark pipeline feeds it), it says the same.
    only = CostTracker()
    for node, ev in log.events:
        if ev.event in COST_EVENTS:
            only.feed(node, ev)
    only.finish(log.end_ms)
    assert only.segments == files.segments and only.holdings == files.holdings and only.stalls == files.stalls
    stalled = [s for s in live.stalls if s.partitions]
    assert stalled and live.totals().assigned_not_consumed_ms > 0
    expected_fault = {"crash-storm": "crash", "hang": "hang", "slow-consumer": "slow"}[scenario]
    assert {s.fault for s in stalled} == {expected_fault}
    session = loaded.consumer["session.timeout.ms"]
    heartbeat = loaded.consumer["heartbeat.interval.ms"]
    for s in stalled:
        if s.fault == "crash" and s.ended_by == "session_timeout":
            # No LeaveGroup: its partitions wait out the session, less the time since its last heartbeat.
            assert session - heartbeat - 100 <= s.span_ms <= session, s
            assert s.assigned_not_consumed_ms == len(s.partitions) * s.span_ms
        if s.fault == "hang" and s.ended_by == "resumed":
            assert s.until_ms is not None and s.span_ms <= s.until_ms - s.since_ms
