"""grouplab/epochs.py: a consumer-protocol group's epochs, moves and convergences, folded from the
coordinator's §4.1c events; and what the simulator counts from it (SimStats)."""

from __future__ import annotations

import tomllib

from grouplab.epochs import EpochTracker
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.states import ConsumerGroupState, ConsumerMemberState, GroupEpochCause, RemovalReason
from grouplab.protocol.types import TopicPartition
from grouplab.sim.runner import result_row, run_seed
from grouplab.sim.scenario import parse_scenario

S = ConsumerGroupState
G = "g"


def bumped(epoch: int, cause: GroupEpochCause, state: S = S.STABLE) -> events.GroupEpochBumped:
    return events.GroupEpochBumped(G, epoch, state, cause, "")


def reconciled(epoch: int, member: str, assigned: list[list], state: S = S.RECONCILING) -> events.ConsumerMemberReconciled:
    return events.ConsumerMemberReconciled(G, epoch, state, member, epoch, epoch - 1, ConsumerMemberState.STABLE,
                                           assigned, [], [])


def changed(epoch: int, old: S, new: S) -> events.ConsumerGroupStateChanged:
    return events.ConsumerGroupStateChanged(G, epoch, new, old, new)


def target(epoch: int, assignment: dict[str, list[list]], state: S) -> events.TargetAssignmentComputed:
    return events.TargetAssignmentComputed(G, epoch, state, epoch, "uniform", assignment)


def feed(tracker: EpochTracker, script: list[tuple[int, events.Event]]) -> list:
    return [c for ts, p in script if (c := tracker.feed("coordinator", LogEvent(ts, p))) is not None]


def test_a_join_then_a_crash_converge_twice_and_count_the_moves() -> None:
    t = EpochTracker()
    done = feed(t, [
        (0, events.ConsumerMemberJoined(G, 0, S.EMPTY, "a", None, "a", ["t"], None)),
        (0, bumped(1, GroupEpochCause.MEMBER_JOINED, S.EMPTY)),
        (0, target(1, {"a": [["t", 0], ["t", 1]]}, S.EMPTY)),
        (0, reconciled(1, "a", [["t", 0], ["t", 1]], S.EMPTY)),
        (0, changed(1, S.EMPTY, S.STABLE)),
        # b joins: a revokes t-1 first, then b gets it (one move)
        (100, bumped(2, GroupEpochCause.MEMBER_JOINED)),
        (100, target(2, {"a": [["t", 0]], "b": [["t", 1]]}, S.STABLE)),
        (100, changed(2, S.STABLE, S.RECONCILING)),
        (900, reconciled(2, "a", [["t", 0]])),
        (1000, reconciled(2, "b", [["t", 1]])),
        (1000, changed(2, S.RECONCILING, S.STABLE)),
        # b crashes: removed at its session timeout, a gets t-1 (a second move), a two-step epoch
        (9000, events.ConsumerMemberRemoved(G, 2, S.STABLE, "b", RemovalReason.SESSION_TIMEOUT, "", [["t", 1]])),
        (9000, bumped(3, GroupEpochCause.SESSION_TIMEOUT)),
        (9000, changed(3, S.STABLE, S.ASSIGNING)),
        (9500, target(3, {"a": [["t", 0], ["t", 1]]}, S.ASSIGNING)),
        (9500, reconciled(3, "a", [["t", 0], ["t", 1]], S.ASSIGNING)),
        (9500, changed(3, S.ASSIGNING, S.STABLE)),
    ])
    assert [(c.epoch, c.started_ms, c.ended_ms, c.causes) for c in done] == [
        (1, 0, 0, ("member_joined",)), (2, 100, 1000, ("member_joined",)), (3, 9000, 9500, ("session_timeout",))]
    assert [tuple(m) for m in done[1].moved] == [(TopicPartition("t", 1), "a", "b")]
    assert [tuple(m) for m in done[2].moved] == [(TopicPartition("t", 1), "b", "a")]
    assert [r.member_id for r in done[2].removed] == ["b"]
    assert done[2].assignment == {"a": [TopicPartition("t", 0), TopicPartition("t", 1)]}
    assert (t.epochs, dict(t.causes), t.moves) == (3, {"member_joined": 2, "session_timeout": 1}, 2)


def test_an_epoch_move_that_leaves_the_group_stable_ends_at_its_step() -> None:
    """A lone member whose subscription changes: bumped, target, reconciled in one step, and no
    state change (Stable to Stable). The next event of another instant still says Stable."""
    t = EpochTracker()
    done = feed(t, [
        (0, events.ConsumerMemberJoined(G, 0, S.EMPTY, "a", None, "a", ["t"], None)),
        (0, bumped(1, GroupEpochCause.MEMBER_JOINED, S.EMPTY)),
        (0, changed(1, S.EMPTY, S.STABLE)),
        (500, bumped(2, GroupEpochCause.SUBSCRIPTION_CHANGED)),
        (500, reconciled(2, "a", [["t", 0]], S.STABLE)),
        (7000, reconciled(2, "a", [["t", 0], ["u", 0]], S.STABLE)),
    ])
    assert [(c.epoch, c.started_ms, c.ended_ms) for c in done] == [(1, 0, 0), (2, 500, 500)]


def test_a_group_that_empties_does_not_converge() -> None:
    t = EpochTracker()
    done = feed(t, [
        (0, bumped(1, GroupEpochCause.MEMBER_JOINED, S.EMPTY)),
        (0, changed(1, S.EMPTY, S.RECONCILING)),
        (50, bumped(2, GroupEpochCause.MEMBER_LEFT, S.RECONCILING)),
        (50, changed(2, S.RECONCILING, S.EMPTY)),
        (80, bumped(3, GroupEpochCause.MEMBER_JOINED, S.EMPTY)),
        (90, changed(3, S.EMPTY, S.STABLE)),
    ])
    assert [(c.epoch, c.started_ms, c.causes) for c in done] == [(3, 80, ("member_joined",))]


KIP848 = """
name = "kip848-joins"
topics = { t0 = 6 }
duration_ms = 30_000
faults_from_ms = 1_000

[broker]
"group.consumer.heartbeat.interval.ms" = 1000
"group.consumer.min.heartbeat.interval.ms" = 100
"group.consumer.session.timeout.ms" = 10000
"group.consumer.min.session.timeout.ms" = 1000

[consumer]
"group.protocol" = "consumer"

[[members]]
count = 3
start_ms = [0, 0]

[[schedule]]
at_ms = 10_000
fault = "crash"
members = ["m-2"]
"""


def test_the_simulator_counts_epochs_moves_and_convergences_of_a_consumer_protocol_group() -> None:
    """Three members join at once, one crashes for good: its partitions move at the epoch its
    session timeout makes, and the group is Stable again."""
    scenario = parse_scenario(tomllib.loads(KIP848), "kip848-joins")
    result = run_seed(scenario, 1)
    assert result.ok, result.violation
    s = result.stats
    assert s.generations == 0 and s.rebalance_durations_ms == []
    assert s.epoch_causes["member_joined"] == 3 and s.epoch_causes["session_timeout"] == 1
    assert s.group_epochs == sum(s.epoch_causes.values())
    assert 2 <= s.partitions_moved <= 6  # m-2's two partitions, and what the first joins shuffled
    assert s.convergence_durations_ms and all(d >= 0 for d in s.convergence_durations_ms)
    row = result_row(result)
    assert row["group_epochs"] == s.group_epochs and row["converge_p50_ms"] is not None
