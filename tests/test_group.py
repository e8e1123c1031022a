"""Tests of the classic-protocol group state machine (coordinator/group.py) and of the broker's
routing of group APIs (coordinator/broker.py).

Every step asserts the whole protocol-relevant state (`view`: state, generation, leader, protocol,
members in join order with their parked JoinGroup/SyncGroup tokens and assignments, pending member
ids, pending syncs, static members) and the exact replies and net timer changes of that step
(`effects`). Rejected inputs are checked to change nothing via `snapshot` (every dataclass field).

Member ids are deterministic: `MemberIds` hands out "<client>-<n>" with one counter per group.
Defaults: session timeout 10 s, rebalance timeout 30 s, group.initial.rebalance.delay.ms 3 s.
"""

from __future__ import annotations

from collections import Counter

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.group import Group, GroupState
from grouplab.coordinator.group_log import Persist, decode_record, encode_record
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    LeaveGroupResponse,
    LeaveGroupResponseMember,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupResponse,
)
from tests.helpers_group import (
    DELAY,
    GROUP,
    MAX_SESSION,
    MIN_SESSION,
    NOTHING,
    PTYPE,
    REBALANCE,
    SESSION,
    Effects,
    M,
    MemberIds,
    assignment_of,
    config,
    effects,
    expect,
    form_generation,
    form_stable,
    hb_req,
    jerr,
    jm,
    join_key,
    join_req,
    jr,
    leave_req,
    make_group,
    meta,
    pending_key,
    protos,
    require_id,
    serr,
    session_key,
    snapshot,
    sr,
    sync_key,
    sync_req,
    view,
)

A, B, C = "c0-1", "c1-2", "c2-3"  # ids form_generation/form_stable hand out to c0, c1, c2 in order
NONE = ErrorCode.NONE


def hb(code: ErrorCode) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=code)


def left(*results: tuple[str, ErrorCode]) -> LeaveGroupResponse:
    return LeaveGroupResponse(members=[LeaveGroupResponseMember(m, None, code) for m, code in results])


def assert_unchanged_after(g: Group, call, expected: Effects) -> None:
    before = snapshot(g)
    assert effects(call()) == expected
    assert snapshot(g) == before


def ctx(tok: str, client: str = "", host: str = "") -> RequestContext:
    return RequestContext(tok, client, host)


def broker_generation(broker: Broker, gid: str, clients: list[str], now: int) -> list[str]:
    ids = []
    for c in clients:
        [r] = [o for o in broker.handle("JoinGroup", join_req("", protos(c), group_id=gid), ctx(f"{c}/id", c, f"/10.0.0.{c[1:]}"), now)
               if isinstance(o, Reply)]
        mid = r.body.member_id
        broker.handle("JoinGroup", join_req(mid, protos(c), group_id=gid), ctx(f"{c}/j", c, f"/10.0.0.{c[1:]}"), now)
        ids.append(mid)
    t = now
    while broker.groups[gid].state is GroupState.PREPARING_REBALANCE:  # the initial delay, maybe extended
        t += DELAY
        broker.on_timer(join_key(gid), t)
    assert broker.groups[gid].state is GroupState.COMPLETING_REBALANCE
    return ids


# ============================================================================ 1. MEMBER_ID_REQUIRED


def test_join_without_member_id_gets_member_id_required_and_a_pending_entry():
    g = make_group()
    eff = effects(g.handle_join(join_req(""), "c0/1", 100, "c0"))
    assert eff == Effects(replies={"c0/1": jerr(ErrorCode.MEMBER_ID_REQUIRED, "c0-1")},
                          timers={pending_key("c0-1"): 100 + SESSION})
    assert view(g) == expect("Empty", 0, pending={"c0-1": SESSION})


def test_pending_member_id_expires_and_cannot_be_used_afterwards():
    g = make_group()
    mid = require_id(g, "c0", 100)
    eff = effects(g.on_timer(pending_key(mid), 100 + SESSION))
    assert eff == NOTHING
    assert view(g) == expect("Empty", 0)
    assert_unchanged_after(
        g, lambda: g.handle_join(join_req(mid, protos("c0")), "c0/2", 100 + SESSION + 1, "c0"),
        Effects(replies={"c0/2": jerr(ErrorCode.UNKNOWN_MEMBER_ID, mid)}))


# ============================================================================ 2. initial delay


def test_join_with_assigned_id_starts_initial_delay_and_completes_only_when_timer_fires():
    g = make_group()
    a = require_id(g, "c0", 0)
    assert a == A
    eff = effects(g.handle_join(join_req(a, protos("c0")), "c0/2", 10, "c0"))
    assert eff == Effects(timers={pending_key(a): None, join_key(): 10 + DELAY})
    assert view(g) == expect("PreparingRebalance", 0, leader=a, members=[M(a, join="c0/2")])

    # Everybody has joined, but the delay still holds the generation back.
    eff = effects(g.handle_heartbeat(hb_req(a, 0), "c0/hb", 20))
    assert eff == Effects(replies={"c0/hb": hb(ErrorCode.REBALANCE_IN_PROGRESS)})
    assert view(g) == expect("PreparingRebalance", 0, leader=a, members=[M(a, join="c0/2")])

    t = 10 + DELAY
    eff = effects(g.on_timer(join_key(), t))
    assert eff == Effects(
        replies={"c0/2": jr(a, 1, a, [jm(a, meta("c0", "range"))])},
        timers={sync_key(1): t + REBALANCE, session_key(a): t + SESSION})
    assert view(g) == expect("CompletingRebalance", 1, leader=a, pname="range", members=[M(a)], pending_sync=[a])


def test_initial_delay_is_extended_when_a_new_member_joined_during_it():
    g = make_group()
    a = require_id(g, "c0", 0)
    g.handle_join(join_req(a, protos("c0")), "c0/2", 0, "c0")  # delay until 3000; 27000 ms of rebalance time left
    b = require_id(g, "c1", 1000)
    eff = effects(g.handle_join(join_req(b, protos("c1")), "c1/2", 1000, "c1"))
    assert eff == Effects(timers={pending_key(b): None})
    parked = expect("PreparingRebalance", 0, leader=a, members=[M(a, join="c0/2"), M(b, join="c1/2")])
    assert view(g) == parked

    eff = effects(g.on_timer(join_key(), 3000))
    assert eff == Effects(timers={join_key(): 6000})
    assert view(g) == parked

    eff = effects(g.on_timer(join_key(), 6000))  # nobody new during the extension: complete
    assert eff == Effects(
        replies={"c0/2": jr(a, 1, a, [jm(a, meta("c0", "range")), jm(b, meta("c1", "range"))]),
                 "c1/2": jr(b, 1, a)},
        timers={sync_key(1): 6000 + REBALANCE, session_key(a): 6000 + SESSION, session_key(b): 6000 + SESSION})
    assert view(g) == expect("CompletingRebalance", 1, leader=a, pname="range", members=[M(a), M(b)],
                             pending_sync=[a, b])


def test_initial_delay_extension_is_bounded_by_the_rebalance_timeout():
    g = make_group()
    a = require_id(g, "c0", 0, rebalance=5000)
    g.handle_join(join_req(a, protos("c0"), rebalance=5000), "c0/2", 0, "c0")  # delay to 3000, 2000 ms left
    b = require_id(g, "c1", 1000, rebalance=5000)
    g.handle_join(join_req(b, protos("c1"), rebalance=5000), "c1/2", 1000, "c1")
    eff = effects(g.on_timer(join_key(), 3000))
    assert eff == Effects(timers={join_key(): 5000})  # min(delay, remaining) = 2000
    c = require_id(g, "c2", 4000, rebalance=5000)
    eff = effects(g.handle_join(join_req(c, protos("c2"), rebalance=5000), "c2/2", 4000, "c2"))
    assert eff == Effects(timers={pending_key(c): None})
    assert view(g) == expect("PreparingRebalance", 0, leader=a,
                             members=[M(a, join="c0/2"), M(b, join="c1/2"), M(c, join="c2/2")])

    eff = effects(g.on_timer(join_key(), 5000))  # a new member joined, but no rebalance time is left
    metas = [jm(a, meta("c0", "range")), jm(b, meta("c1", "range")), jm(c, meta("c2", "range"))]
    assert eff == Effects(
        replies={"c0/2": jr(a, 1, a, metas), "c1/2": jr(b, 1, a), "c2/2": jr(c, 1, a)},
        timers={sync_key(1): 10000, session_key(a): 5000 + SESSION, session_key(b): 5000 + SESSION,
                session_key(c): 5000 + SESSION})
    assert view(g) == expect("CompletingRebalance", 1, leader=a, pname="range", members=[M(a), M(b), M(c)],
                             pending_sync=[a, b, c])


def test_initial_delay_flag_left_set_by_a_bounded_delay_extends_the_next_initial_delay():
    # Kafka clears newMemberAdded only when it extends the delay. A delay that ran out of rebalance
    # time with a new member in its last window leaves the flag set; the next time the group goes
    # from Empty to PreparingRebalance, its first window is extended though nobody else joined.
    g = make_group()
    a = require_id(g, "c0", 0, rebalance=5000)
    g.handle_join(join_req(a, protos("c0"), rebalance=5000), "c0/2", 0, "c0")
    b = require_id(g, "c1", 1000, rebalance=5000)
    g.handle_join(join_req(b, protos("c1"), rebalance=5000), "c1/2", 1000, "c1")
    g.on_timer(join_key(), 3000)  # extended to 5000; no rebalance time left after it
    c = require_id(g, "c2", 4000, rebalance=5000)
    g.handle_join(join_req(c, protos("c2"), rebalance=5000), "c2/2", 4000, "c2")
    g.on_timer(join_key(), 5000)
    assert g.state is GroupState.COMPLETING_REBALANCE and g.new_member_added
    for i, m in enumerate((a, b, c)):
        g.handle_leave(leave_req(m), f"c{i}/l", 6000)
    assert view(g) == expect("Empty", 2, ptype=PTYPE)  # Kafka keeps the type of an Empty group

    d = require_id(g, "c3", 7000, rebalance=5000)
    eff = effects(g.handle_join(join_req(d, protos("c3"), rebalance=5000), "c3/2", 7000, "c3"))
    assert eff == Effects(timers={pending_key(d): None, join_key(): 10000})
    eff = effects(g.on_timer(join_key(), 10000))  # the stale flag: one more window, min(3000, 2000)
    assert eff == Effects(timers={join_key(): 12000})
    eff = effects(g.on_timer(join_key(), 12000))
    assert eff == Effects(replies={"c3/2": jr(d, 3, d, [jm(d, meta("c3", "range"))])},
                          timers={sync_key(3): 12000 + 5000, session_key(d): 12000 + SESSION})


def test_initial_delay_windows_follow_kafkas_recurrence():
    # Kafka: the first window is the configured delay D, with R = max(T - D, 0) left (T: the group's
    # rebalance timeout); when a window ends and a new member joined during it and R != 0, the next
    # window is min(D, R) and R becomes max(R - (the window that ended), 0). The first member's own
    # join does not count. A member joining in every window sees these windows until R runs out.
    for rebalance, delay in [(30000, 3000), (5000, 3000), (7000, 3000), (7500, 3000), (3000, 3000),
                             (2000, 3000), (10000, 500), (1000, 0)]:
        windows, r, d = [delay], max(rebalance - delay, 0), delay
        while r != 0 and len(windows) < 100:
            windows.append(min(delay, r))
            r, d = max(r - d, 0), windows[-1]
        g = make_group(group_initial_rebalance_delay_ms=delay)
        a = require_id(g, "a0", 0, rebalance=rebalance)
        g.handle_join(join_req(a, protos("a0"), rebalance=rebalance), "a0/2", 0, "a0")
        t, seen = 0, []
        for k, window in enumerate(windows):  # a new member in every window
            m = require_id(g, f"n{k}", t, rebalance=rebalance)
            g.handle_join(join_req(m, protos(f"n{k}"), rebalance=rebalance), f"n{k}/2", t, f"n{k}")
            t += window
            armed = [o.deadline_ms for o in g.on_timer(join_key(), t)
                     if isinstance(o, ArmTimer) and o.key == join_key()]
            if g.state is not GroupState.PREPARING_REBALANCE:
                break
            seen.append(armed[0] - t)
        assert seen[:len(windows) - 1] == windows[1:], (rebalance, delay)
        if len(windows) < 100:  # the rule ran out of rebalance time: the join completed
            assert g.state is GroupState.COMPLETING_REBALANCE and t == sum(windows), (rebalance, delay)


# ============================================================================ 3. join completion


@pytest.mark.parametrize(
    "prefs, chosen",
    [
        # majority wins over the first member's preference
        ([("roundrobin", "range"), ("range", "roundrobin"), ("range", "roundrobin")], "range"),
        # a tie goes to the candidate the earliest-joined member prefers
        ([("roundrobin", "range"), ("range", "roundrobin")], "roundrobin"),
        ([("range", "roundrobin"), ("roundrobin", "range")], "range"),
        # only protocols every member supports are candidates: c0 votes range, not sticky
        ([("sticky", "range", "roundrobin"), ("roundrobin", "range"), ("range",)], "range"),
        # c1's favourite (roundrobin) is no candidate, so it votes sticky: 2-1 for sticky
        ([("sticky", "roundrobin", "range"), ("roundrobin", "sticky", "range"), ("range", "sticky")], "sticky"),
    ],
)
def test_protocol_is_chosen_by_vote(prefs, chosen):
    g = make_group()
    clients = [f"c{i}" for i in range(len(prefs))]
    ids, eff, t = form_generation(g, [(c, {"protocols": protos(c, *p)}) for c, p in zip(clients, prefs)])
    leader = ids[0]
    replies = {f"{c}/join": jr(m, 1, leader, pname=chosen) for c, m in zip(clients, ids)}
    replies[f"{clients[0]}/join"] = jr(leader, 1, leader, [jm(m, meta(c, chosen)) for c, m in zip(clients, ids)],
                                       pname=chosen)
    timers = {sync_key(1): t + REBALANCE, **{session_key(m): t + SESSION for m in ids}}
    assert eff == Effects(replies=replies, timers=timers)
    assert view(g) == expect("CompletingRebalance", 1, leader=leader, pname=chosen, members=[M(m) for m in ids],
                             pending_sync=ids)


def test_join_completion_sync_timer_uses_the_largest_rebalance_timeout():
    g = make_group()
    ids, eff, t = form_generation(g, [("c0", {"rebalance": 5000}), ("c1", {"rebalance": 45000}), ("c2", {"rebalance": 7000})])
    assert eff.timers[sync_key(1)] == t + 45000


# ============================================================================ 4. later rebalances


def test_later_rebalance_completes_as_soon_as_every_member_rejoined():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    stable = [M(a, assignment=assignment_of(a)), M(b, assignment=assignment_of(b))]
    assert view(g) == expect("Stable", 1, leader=a, pname="range", members=stable)

    t1 = t0 + 2000
    eff = effects(g.handle_join(join_req(b, protos("c1", "range", "roundrobin")), "c1/j2", t1, "c1"))
    assert eff == Effects(timers={join_key(): t1 + REBALANCE})
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range",
                             members=[M(a, assignment=assignment_of(a)), M(b, join="c1/j2", assignment=assignment_of(b))])

    t2 = t0 + 3000
    eff = effects(g.handle_join(join_req(a, protos("c0")), "c0/j2", t2, "c0"))
    assert eff == Effects(
        replies={"c0/j2": jr(a, 2, a, [jm(a, meta("c0", "range")), jm(b, meta("c1", "range"))]), "c1/j2": jr(b, 2, a)},
        timers={join_key(): None, sync_key(2): t2 + REBALANCE, session_key(a): t2 + SESSION,
                session_key(b): t2 + SESSION})
    assert view(g) == expect("CompletingRebalance", 2, leader=a, pname="range", members=stable, pending_sync=[a, b])


@pytest.mark.parametrize("pending_outcome", ["joins", "expires"])
def test_pending_member_id_holds_back_completion(pending_outcome):
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    stable = [M(a, assignment=assignment_of(a)), M(b, assignment=assignment_of(b))]
    c = require_id(g, "c2", t0 + 1000)
    assert view(g) == expect("Stable", 1, leader=a, pname="range", members=stable, pending={c: SESSION})

    assert effects(g.handle_join(join_req(a, protos("c0")), "c0/j2", t0 + 1100, "c0")) == Effects(
        timers={join_key(): t0 + 1100 + REBALANCE})
    assert effects(g.handle_join(join_req(b, protos("c1")), "c1/j2", t0 + 1200, "c1")) == NOTHING
    parked = [M(a, join="c0/j2", assignment=assignment_of(a)), M(b, join="c1/j2", assignment=assignment_of(b))]
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range", members=parked, pending={c: SESSION})

    if pending_outcome == "joins":
        t = t0 + 1300
        eff = effects(g.handle_join(join_req(c, protos("c2")), "c2/j", t, "c2"))
        members = [jm(a, meta("c0", "range")), jm(b, meta("c1", "range")), jm(c, meta("c2", "range"))]
        ids = [a, b, c]
        assert eff == Effects(
            replies={"c0/j2": jr(a, 2, a, members), "c1/j2": jr(b, 2, a), "c2/j": jr(c, 2, a)},
            timers={pending_key(c): None, join_key(): None, sync_key(2): t + REBALANCE,
                    **{session_key(m): t + SESSION for m in ids}})
        final = [M(a, assignment=assignment_of(a)), M(b, assignment=assignment_of(b)), M(c)]
    else:
        t = t0 + 1000 + SESSION
        eff = effects(g.on_timer(pending_key(c), t))
        ids = [a, b]
        assert eff == Effects(
            replies={"c0/j2": jr(a, 2, a, [jm(a, meta("c0", "range")), jm(b, meta("c1", "range"))]),
                     "c1/j2": jr(b, 2, a)},
            timers={join_key(): None, sync_key(2): t + REBALANCE, **{session_key(m): t + SESSION for m in ids}})
        final = stable
    assert view(g) == expect("CompletingRebalance", 2, leader=a, pname="range", members=final, pending_sync=ids)


def test_rebalance_timeout_removes_members_that_did_not_rejoin():
    g = make_group()
    (a, b, c), t0 = form_stable(g, ["c0", "c1", "c2"])
    t1 = t0 + 2000
    g.handle_join(join_req(a, protos("c0")), "c0/j2", t1, "c0")  # the leader rejoins: rebalance
    assert effects(g.handle_join(join_req(c, protos("c2")), "c2/j2", t1 + 1000, "c2")) == NOTHING
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range",
                             members=[M(a, join="c0/j2", assignment=assignment_of(a)), M(b, assignment=assignment_of(b)),
                                      M(c, join="c2/j2", assignment=assignment_of(c))])

    t = t1 + REBALANCE
    eff = effects(g.on_timer(join_key(), t))
    assert eff == Effects(
        replies={"c0/j2": jr(a, 2, a, [jm(a, meta("c0", "range")), jm(c, meta("c2", "range"))]), "c2/j2": jr(c, 2, a)},
        timers={session_key(b): None, sync_key(2): t + REBALANCE, session_key(a): t + SESSION,
                session_key(c): t + SESSION})
    assert view(g) == expect("CompletingRebalance", 2, leader=a, pname="range",
                             members=[M(a, assignment=assignment_of(a)), M(c, assignment=assignment_of(c))],
                             pending_sync=[a, c])
    assert_unchanged_after(g, lambda: g.handle_heartbeat(hb_req(b, 2), "c1/hb", t + 1),
                           Effects(replies={"c1/hb": hb(ErrorCode.UNKNOWN_MEMBER_ID)}))


def test_rebalance_timeout_with_nobody_rejoined_bumps_generation_and_empties_group():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    t1 = t0 + 2000
    eff = effects(g.handle_leave(leave_req(a), "c0/leave", t1))
    assert eff == Effects(replies={"c0/leave": left((a, NONE))},
                          timers={session_key(a): None, join_key(): t1 + REBALANCE})
    assert view(g) == expect("PreparingRebalance", 1, leader=b, pname="range", members=[M(b, assignment=assignment_of(b))])

    eff = effects(g.on_timer(join_key(), t1 + REBALANCE))
    assert eff == Effects(timers={session_key(b): None})
    assert view(g) == expect("Empty", 2, ptype=PTYPE)  # Kafka keeps the type of an Empty group


# ============================================================================ 5. SyncGroup


@pytest.mark.parametrize("phase", ["CompletingRebalance", "Stable"])
@pytest.mark.parametrize(
    "req, code",
    [
        (sync_req("ghost", 1), ErrorCode.UNKNOWN_MEMBER_ID),
        (sync_req(B, 0), ErrorCode.ILLEGAL_GENERATION),
        (sync_req(B, 2), ErrorCode.ILLEGAL_GENERATION),
        (sync_req(B, 1, protocol_type="connect"), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        (sync_req(B, 1, protocol_name="roundrobin"), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        (sync_req(A, 1, {A: b"x"}, protocol_type="consumer", protocol_name="roundrobin"), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ],
    ids=["unknown-member", "old-generation", "future-generation", "protocol-type", "protocol-name", "leader-protocol-name"],
)
def test_sync_errors_change_nothing(phase, req, code):
    g = make_group()
    if phase == "Stable":
        ids, t = form_stable(g, ["c0", "c1"])
    else:
        ids, _, t = form_generation(g, ["c0", "c1"])
    assert ids == [A, B] and g.state.value == phase
    assert_unchanged_after(g, lambda: g.handle_sync(req, "s/1", t + 100), Effects(replies={"s/1": serr(code)}))


def test_sync_during_preparing_rebalance_is_rebalance_in_progress():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    g.handle_join(join_req(a, protos("c0")), "c0/j2", t0 + 100, "c0")
    assert g.state is GroupState.PREPARING_REBALANCE
    for who, assign in ((b, {}), (a, {a: b"x", b: b"y"})):
        assert_unchanged_after(g, lambda: g.handle_sync(sync_req(who, 1, assign), "s/1", t0 + 200),
                               Effects(replies={"s/1": serr(ErrorCode.REBALANCE_IN_PROGRESS)}))


def test_followers_syncs_are_parked_until_the_leader_sends_the_assignment():
    g = make_group()
    (a, b, c), _, t = form_generation(g, ["c0", "c1", "c2"])

    assert effects(g.handle_sync(sync_req(b, 1), "c1/s", t + 100)) == NOTHING
    assert view(g) == expect("CompletingRebalance", 1, leader=a, pname="range",
                             members=[M(a), M(b, sync="c1/s"), M(c)], pending_sync=[a, c])

    # c is missing from the leader's list (gets b""); an assignment for a non-member is ignored.
    eff = effects(g.handle_sync(sync_req(a, 1, {a: b"A", b: b"B", "ghost": b"G"}, protocol_type="consumer",
                                         protocol_name="range"), "c0/s", t + 200))
    # Answering a parked SyncGroup restarts that member's session (Kafka's propagateAssignment).
    assert eff == Effects(replies={"c0/s": sr(b"A"), "c1/s": sr(b"B")},
                          timers={session_key(a): t + 200 + SESSION, session_key(b): t + 200 + SESSION})
    stable = [M(a, assignment=b"A"), M(b, assignment=b"B"), M(c)]
    assert view(g) == expect("Stable", 1, leader=a, pname="range", members=stable, pending_sync=[c])

    eff = effects(g.handle_sync(sync_req(c, 1), "c2/s", t + 300))
    assert eff == Effects(replies={"c2/s": sr(b"")}, timers={sync_key(1): None})
    assert view(g) == expect("Stable", 1, leader=a, pname="range", members=stable)

    # In Stable a SyncGroup just returns the member's current assignment.
    eff = effects(g.handle_sync(sync_req(b, 1), "c1/s2", t + 1000))
    assert eff.replies == {"c1/s2": sr(b"B")}
    assert set(eff.timers.items()) <= {(sync_key(1), None)}  # at most a (redundant) cancel
    assert view(g) == expect("Stable", 1, leader=a, pname="range", members=stable)


def test_sync_updates_last_heartbeat():
    g = make_group()
    (a, b), _, t = form_generation(g, ["c0", "c1"])
    g.handle_sync(sync_req(b, 1), "c1/s", t + 700)
    assert g.members[b].last_heartbeat_ms == t + 700


# ============================================================================ 6. sync timeout (KAFKA-12890)


def test_member_that_never_syncs_is_removed_when_sync_timer_fires_in_stable():
    g = make_group()
    (a, b), _, tc = form_generation(g, ["c0", "c1"])
    g.handle_sync(sync_req(a, 1, {a: b"A", b: b"B"}), "c0/s", tc + 100)
    assert view(g) == expect("Stable", 1, leader=a, pname="range",
                             members=[M(a, assignment=b"A"), M(b, assignment=b"B")], pending_sync=[b])

    t = tc + REBALANCE
    eff = effects(g.on_timer(sync_key(1), t))
    assert eff == Effects(timers={session_key(b): None, join_key(): t + REBALANCE})
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range", members=[M(a, assignment=b"A")])

    eff = effects(g.handle_join(join_req(a, protos("c0")), "c0/j2", t + 10, "c0"))
    assert eff == Effects(replies={"c0/j2": jr(a, 2, a, [jm(a, meta("c0", "range"))])},
                          timers={join_key(): None, sync_key(2): t + 10 + REBALANCE, session_key(a): t + 10 + SESSION})
    assert view(g) == expect("CompletingRebalance", 2, leader=a, pname="range", members=[M(a, assignment=b"A")],
                             pending_sync=[a])


def test_leader_that_never_syncs_is_removed_and_parked_followers_told_to_rejoin():
    g = make_group()
    (a, b), _, tc = form_generation(g, ["c0", "c1"])
    g.handle_sync(sync_req(b, 1), "c1/s", tc + 100)
    t = tc + REBALANCE
    eff = effects(g.on_timer(sync_key(1), t))
    # b waited in SyncGroup all along: its answer (an error too) gives it a whole session to rejoin.
    assert eff == Effects(replies={"c1/s": serr(ErrorCode.REBALANCE_IN_PROGRESS)},
                          timers={session_key(a): None, session_key(b): t + SESSION, join_key(): t + REBALANCE})
    assert view(g) == expect("PreparingRebalance", 1, leader=b, pname="range", members=[M(b)])


def test_nobody_syncs_then_sync_timer_empties_the_group():
    g = make_group()
    (a, b), _, tc = form_generation(g, ["c0", "c1"])
    eff = effects(g.on_timer(sync_key(1), tc + REBALANCE))
    assert eff.replies == {}
    assert eff.timers[session_key(a)] is None and eff.timers[session_key(b)] is None
    assert eff.timers.get(join_key()) is None  # no rebalance left waiting
    assert view(g) == expect("Empty", 2, ptype=PTYPE)  # Kafka keeps the type of an Empty group


def test_rebalance_after_sync_timeout_uses_the_rebalance_timeout_of_the_remaining_members():
    """The late members are gone before the new rebalance starts: its deadline must not be
    driven by a removed member's (larger) rebalance timeout."""
    g = make_group()
    (a, b, c), _, tc = form_generation(g, ["c0", "c1", ("c2", {"rebalance": 50_000})])
    g.handle_sync(sync_req(a, 1, {a: b"A"}), "c0/s", tc + 100)
    t = tc + 50_000
    eff = effects(g.on_timer(sync_key(1), t))
    assert eff.replies == {}
    assert eff.timers == {session_key(b): None, session_key(c): None, join_key(): t + REBALANCE}
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range", members=[M(a, assignment=b"A")])


# ============================================================================ 7. Heartbeat and sessions


def test_heartbeat_answers_by_state_and_updates_last_heartbeat():
    g = make_group()

    def check(member, gen, now, code, beat):
        before = snapshot(g)
        eff = effects(g.handle_heartbeat(hb_req(member, gen), "hb", now))
        assert eff == Effects(replies={"hb": hb(code)})
        if beat:
            before["members"][member].last_heartbeat_ms = now
        assert snapshot(g) == before

    check("ghost", 0, 5, ErrorCode.UNKNOWN_MEMBER_ID, False)
    a = require_id(g, "c0", 5)
    check(a, 0, 6, ErrorCode.UNKNOWN_MEMBER_ID, False)  # a pending id is not a member yet
    g.handle_join(join_req(a, protos("c0")), "c0/j", 10, "c0")
    check(a, 0, 20, ErrorCode.REBALANCE_IN_PROGRESS, True)
    check(a, 1, 21, ErrorCode.ILLEGAL_GENERATION, False)
    g.on_timer(join_key(), 10 + DELAY)
    assert g.state is GroupState.COMPLETING_REBALANCE
    check(a, 0, 3100, ErrorCode.ILLEGAL_GENERATION, False)
    check(a, 1, 3200, NONE, True)
    g.handle_sync(sync_req(a, 1, {a: b"A"}), "c0/s", 3300)
    assert g.state is GroupState.STABLE
    check(a, 1, 3500, NONE, True)
    check(a, 2, 3600, ErrorCode.ILLEGAL_GENERATION, False)
    g.handle_join(join_req(a, protos("c0", "roundrobin")), "c0/j2", 3700, "c0")
    assert g.state is GroupState.COMPLETING_REBALANCE  # sole member: completes at once
    check(a, 1, 3800, ErrorCode.ILLEGAL_GENERATION, False)
    check(a, 2, 3900, NONE, True)


def test_heartbeat_for_unknown_group_through_broker_is_unknown_member_id():
    broker = Broker(config(), MemberIds())
    out = broker.handle("Heartbeat", hb_req("m", 1, group_id="nope"), RequestContext("hb/1"), 0)
    assert out == [Reply("hb/1", HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))]
    assert broker.groups == {}


def test_session_timer_is_rearmed_after_a_heartbeat_then_expires_the_member():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    stable = [M(a, assignment=assignment_of(a)), M(b, assignment=assignment_of(b))]
    hb_at = t0 + 5000
    g.handle_heartbeat(hb_req(b, 1), "c1/hb", hb_at)
    before = snapshot(g)
    eff = effects(g.on_timer(session_key(b), t0 + SESSION))
    assert eff == Effects(timers={session_key(b): hb_at + SESSION})
    assert snapshot(g) == before

    eff = effects(g.on_timer(session_key(b), hb_at + SESSION))
    assert eff == Effects(timers={session_key(b): None, join_key(): hb_at + SESSION + REBALANCE})
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range", members=stable[:1])


def test_session_expiry_in_completing_rebalance_answers_parked_syncs():
    g = make_group()
    (a, b), _, tc = form_generation(g, ["c0", "c1"])
    g.handle_sync(sync_req(b, 1), "c1/s", tc + 100)
    t = tc + SESSION
    eff = effects(g.on_timer(session_key(a), t))
    assert eff.replies == {"c1/s": serr(ErrorCode.REBALANCE_IN_PROGRESS)}
    assert eff.timers[session_key(a)] is None and eff.timers[join_key()] == t + REBALANCE
    assert eff.timers[session_key(b)] == t + SESSION  # its parked SyncGroup answered: a whole session to rejoin
    assert set(eff.timers) <= {session_key(a), session_key(b), join_key(), sync_key(1)}
    assert view(g) == expect("PreparingRebalance", 1, leader=b, pname="range", members=[M(b)])


def test_member_parked_in_join_counts_as_alive_and_expiry_of_the_other_completes_the_join():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    g.handle_join(join_req(b, protos("c1", "range", "roundrobin")), "c1/j2", t0 + 1000, "c1")
    t = t0 + SESSION
    before = snapshot(g)
    eff = effects(g.on_timer(session_key(b), t))
    assert eff == Effects(timers={session_key(b): t + SESSION})
    before["members"][b].last_heartbeat_ms = t
    assert snapshot(g) == before

    # a has neither rejoined nor heartbeated: it is removed, and b alone completes generation 2.
    eff = effects(g.on_timer(session_key(a), t))
    assert eff == Effects(replies={"c1/j2": jr(b, 2, b, [jm(b, meta("c1", "range"))])},
                          timers={session_key(a): None, join_key(): None, sync_key(2): t + REBALANCE,
                                  session_key(b): t + SESSION})
    assert view(g) == expect("CompletingRebalance", 2, leader=b, pname="range",
                             members=[M(b, assignment=assignment_of(b))], pending_sync=[b])


def test_member_parked_in_sync_counts_as_alive():
    g = make_group()
    (a, b), _, tc = form_generation(g, ["c0", "c1"])
    g.handle_sync(sync_req(b, 1), "c1/s", tc + 100)
    t = tc + 100 + SESSION
    before = snapshot(g)
    eff = effects(g.on_timer(session_key(b), t))
    assert eff == Effects(timers={session_key(b): t + SESSION})
    before["members"][b].last_heartbeat_ms = t
    assert snapshot(g) == before


# ============================================================================ 8. JoinGroup of existing members


@pytest.mark.parametrize("who, plist", [
    ("leader-unchanged", protos("c0")),
    ("follower-new-protocol", protos("c1", "range", "roundrobin")),
    ("follower-new-metadata", [("range", b"new")]),
])
def test_join_in_stable_that_starts_a_rebalance(who, plist):
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    mid, tok = (a, "c0/j2") if who.startswith("leader") else (b, "c1/j2")
    eff = effects(g.handle_join(join_req(mid, plist), tok, t0 + 2000))
    assert eff == Effects(timers={join_key(): t0 + 2000 + REBALANCE})
    members = [M(a, assignment=assignment_of(a)), M(b, assignment=assignment_of(b))]
    members[[a, b].index(mid)] = M(mid, join=tok, assignment=assignment_of(mid))
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range", members=members)
    assert g.members[mid].protocols == plist


def test_unchanged_follower_join_in_stable_gets_current_generation():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    assert_unchanged_after(g, lambda: g.handle_join(join_req(b, protos("c1")), "c1/j2", t0 + 2000, "c1"),
                           Effects(replies={"c1/j2": jr(b, 1, a)}))


def test_unchanged_join_in_completing_rebalance_gets_current_generation():
    g = make_group()
    (a, b), _, tc = form_generation(g, ["c0", "c1"])
    g.handle_sync(sync_req(b, 1), "c1/s", tc + 100)
    assert_unchanged_after(g, lambda: g.handle_join(join_req(a, protos("c0")), "c0/j2", tc + 200, "c0"),
                           Effects(replies={"c0/j2": jr(a, 1, a, [jm(a, meta("c0", "range")), jm(b, meta("c1", "range"))])}))
    assert_unchanged_after(g, lambda: g.handle_join(join_req(b, protos("c1")), "c1/j2", tc + 300, "c1"),
                           Effects(replies={"c1/j2": jr(b, 1, a)}))


def test_changed_join_in_completing_rebalance_restarts_and_voids_parked_syncs():
    g = make_group()
    (a, b), _, tc = form_generation(g, ["c0", "c1"])
    g.handle_sync(sync_req(b, 1), "c1/s", tc + 100)
    eff = effects(g.handle_join(join_req(a, protos("c0", "range", "roundrobin")), "c0/j2", tc + 200, "c0"))
    assert eff == Effects(replies={"c1/s": serr(ErrorCode.REBALANCE_IN_PROGRESS)},
                          timers={sync_key(1): None, join_key(): tc + 200 + REBALANCE,
                                  session_key(b): tc + 200 + SESSION})
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range", members=[M(a, join="c0/j2"), M(b)])


def test_sole_member_rejoining_with_another_protocol_type_gets_that_type():
    """A member's protocol_type must follow its JoinGroup like its protocols do."""
    g = make_group()
    (a,), t0 = form_stable(g, ["c0"])
    t = t0 + 2000
    eff = effects(g.handle_join(join_req(a, [("p", b"z")], protocol_type="connect"), "c0/j2", t, "c0"))
    assert eff.replies == {"c0/j2": jr(a, 2, a, [jm(a, b"z")], pname="p", ptype="connect")}
    assert view(g) == expect("CompletingRebalance", 2, leader=a, pname="p", ptype="connect",
                             members=[M(a, assignment=assignment_of(a))], pending_sync=[a])
    eff = effects(g.handle_sync(sync_req(a, 2, {a: b"P"}, protocol_type="connect", protocol_name="p"), "c0/s2", t + 100))
    assert eff.replies == {"c0/s2": sr(b"P", pname="p", ptype="connect")}


# ============================================================================ 9. LeaveGroup


def test_follower_leave_in_stable_starts_rebalance():
    g = make_group()
    (a, b, c), t0 = form_stable(g, ["c0", "c1", "c2"])
    t = t0 + 2000
    eff = effects(g.handle_leave(leave_req(b), "c1/l", t))
    assert eff == Effects(replies={"c1/l": left((b, NONE))},
                          timers={session_key(b): None, join_key(): t + REBALANCE})
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range",
                             members=[M(a, assignment=assignment_of(a)), M(c, assignment=assignment_of(c))])


def test_leader_leave_elects_the_first_remaining_member():
    g = make_group()
    (a, b, c), t0 = form_stable(g, ["c0", "c1", "c2"])
    g.handle_leave(leave_req(a), "c0/l", t0 + 2000)
    assert view(g) == expect("PreparingRebalance", 1, leader=b, pname="range",
                             members=[M(b, assignment=assignment_of(b)), M(c, assignment=assignment_of(c))])
    assert effects(g.handle_join(join_req(c, protos("c2")), "c2/j", t0 + 2100, "c2")) == NOTHING
    t = t0 + 2200
    eff = effects(g.handle_join(join_req(b, protos("c1")), "c1/j", t, "c1"))
    assert eff == Effects(
        replies={"c1/j": jr(b, 2, b, [jm(b, meta("c1", "range")), jm(c, meta("c2", "range"))]), "c2/j": jr(c, 2, b)},
        timers={join_key(): None, sync_key(2): t + REBALANCE, session_key(b): t + SESSION,
                session_key(c): t + SESSION})
    assert view(g) == expect("CompletingRebalance", 2, leader=b, pname="range",
                             members=[M(b, assignment=assignment_of(b)), M(c, assignment=assignment_of(c))],
                             pending_sync=[b, c])


def test_leave_during_preparing_rebalance_may_complete_the_join():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    g.handle_join(join_req(a, protos("c0")), "c0/j2", t0 + 2000, "c0")
    t = t0 + 3000
    eff = effects(g.handle_leave(leave_req(b), "c1/l", t))
    assert eff == Effects(replies={"c1/l": left((b, NONE)), "c0/j2": jr(a, 2, a, [jm(a, meta("c0", "range"))])},
                          timers={session_key(b): None, join_key(): None, sync_key(2): t + REBALANCE,
                                  session_key(a): t + SESSION})
    assert view(g) == expect("CompletingRebalance", 2, leader=a, pname="range",
                             members=[M(a, assignment=assignment_of(a))], pending_sync=[a])


def test_leave_of_unknown_member_is_per_member_error_and_changes_nothing():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    t = t0 + 2000
    assert_unchanged_after(g, lambda: g.handle_leave(leave_req("ghost"), "x/l", t),
                           Effects(replies={"x/l": left(("ghost", ErrorCode.UNKNOWN_MEMBER_ID))}))
    eff = effects(g.handle_leave(leave_req(b, "ghost"), "x/l2", t))
    assert eff == Effects(replies={"x/l2": left((b, NONE), ("ghost", ErrorCode.UNKNOWN_MEMBER_ID))},
                          timers={session_key(b): None, join_key(): t + REBALANCE})
    assert eff.replies["x/l2"].error_code == 0


def test_last_member_leaving_empties_the_group():
    g = make_group()
    (a,), t0 = form_stable(g, ["c0"])
    eff = effects(g.handle_leave(leave_req(a), "c0/l", t0 + 2000))
    assert eff == Effects(replies={"c0/l": left((a, NONE))}, timers={session_key(a): None, join_key(): None})
    assert view(g) == expect("Empty", 2, ptype=PTYPE)  # Kafka keeps the type of an Empty group


def test_leave_of_a_parked_joiner_answers_its_join():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    g.handle_join(join_req(b, protos("c1", "range", "roundrobin")), "c1/j2", t0 + 2000, "c1")
    eff = effects(g.handle_leave(leave_req(b), "c1/l", t0 + 2100))
    assert eff.replies == {"c1/l": left((b, NONE)), "c1/j2": jerr(ErrorCode.UNKNOWN_MEMBER_ID, b)}
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range", members=[M(a, assignment=assignment_of(a))])


# ============================================================================ 10. rejected joins change nothing


@pytest.mark.parametrize(
    "req, code",
    [
        (join_req("", protos("c9"), session=MIN_SESSION - 1), ErrorCode.INVALID_SESSION_TIMEOUT),
        (join_req("", protos("c9"), session=MAX_SESSION + 1), ErrorCode.INVALID_SESSION_TIMEOUT),
        (join_req(B, protos("c1"), session=MAX_SESSION + 1), ErrorCode.INVALID_SESSION_TIMEOUT),
        (join_req("", [("sticky", b"")]), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        (join_req("", protos("c9"), protocol_type="connect"), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        (join_req("", []), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        (join_req(B, [("sticky", b"")]), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        (join_req(B, protos("c1"), protocol_type="connect"), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        (join_req(C, [("sticky", b"")]), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),  # the pending id
        (join_req("", protos("c9")), ErrorCode.GROUP_MAX_SIZE_REACHED),
        (join_req("", protos("c9"), instance="i9"), ErrorCode.GROUP_MAX_SIZE_REACHED),
        (join_req("ghost", protos("c9")), ErrorCode.UNKNOWN_MEMBER_ID),
    ],
    ids=["session-low", "session-high", "member-session-high", "no-shared-protocol", "protocol-type",
         "no-protocols", "member-switches-to-unshared", "member-protocol-type", "pending-unshared",
         "max-size-dynamic", "max-size-static", "unknown-member"],
)
@pytest.mark.parametrize("phase", ["Stable", "PreparingRebalance"])
def test_rejected_join_changes_nothing(phase, req, code):
    g = make_group(group_max_size=3)
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    assert require_id(g, "c2", t0 + 1000) == C  # members + pending ids = 3 = group.max.size
    if phase == "PreparingRebalance":
        g.handle_join(join_req(a, protos("c0")), "c0/j2", t0 + 1100, "c0")
    assert g.state.value == phase
    assert_unchanged_after(g, lambda: g.handle_join(req, "x/j", t0 + 2000, "c9"),
                           Effects(replies={"x/j": jerr(code, req.member_id)}))


def test_session_timeout_bounds_are_inclusive():
    g = make_group()
    for session in (MIN_SESSION, MAX_SESSION):
        eff = effects(g.handle_join(join_req("", session=session), "x", 0, "c0"))
        assert eff.replies["x"].error_code == ErrorCode.MEMBER_ID_REQUIRED


@pytest.mark.parametrize("req, code", [
    (join_req("", protos("c0"), session=MIN_SESSION - 1, group_id="g9"), ErrorCode.INVALID_SESSION_TIMEOUT),
    (join_req("made-up", protos("c0"), group_id="g9"), ErrorCode.UNKNOWN_MEMBER_ID),
    (join_req("", [], group_id="g9"), ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
], ids=["session", "unknown-member", "no-protocols"])
def test_rejected_join_through_broker_leaves_no_group_behind(req, code):
    broker = Broker(config(), MemberIds())
    broker_generation(broker, "g1", ["c0"], 0)
    before = snapshot(broker.groups["g1"])
    out = broker.handle("JoinGroup", req, ctx("x/j", "c0"), 10_000)
    assert [(o.to, o.body.error_code) for o in out if isinstance(o, Reply)] == [("x/j", code)]
    assert list(broker.groups) == ["g1"] and snapshot(broker.groups["g1"]) == before
    [r] = broker.handle("ListGroups", ListGroupsRequest(), ctx("lg"), 10_000)
    assert [lg.group_id for lg in r.body.groups] == ["g1"]
    [r] = broker.handle("DescribeGroups", DescribeGroupsRequest(groups=["g9"]), ctx("d"), 10_000)
    assert r.body.groups == [DescribedGroup(group_id="g9", group_state="Dead")]
    # The same request aimed at the existing group changes nothing there either.
    out = broker.handle("JoinGroup", replace(req, group_id="g1"), ctx("x/j2", "c0"), 10_000)
    assert [(o.to, o.body.error_code) for o in out if isinstance(o, Reply)] == [("x/j2", code)]
    assert snapshot(broker.groups["g1"]) == before


def test_empty_group_id_through_broker_is_invalid_group_id():
    broker = Broker(config(), MemberIds())
    out = broker.handle("JoinGroup", join_req("", group_id=""), RequestContext("x/1", "c0"), 0)
    assert [(o.to, o.body.error_code, o.body.member_id) for o in out] == [("x/1", ErrorCode.INVALID_GROUP_ID, "")]
    assert broker.groups == {}


# ============================================================================ 11. static membership


def test_static_member_joins_without_member_id_required():
    g = make_group()
    eff = effects(g.handle_join(join_req("", protos("c0"), instance="i0"), "c0/1", 0, "c0"))
    assert eff == Effects(timers={join_key(): DELAY})
    assert view(g) == expect("PreparingRebalance", 0, leader=A, members=[M(A, join="c0/1")], static={"i0": A})
    eff = effects(g.on_timer(join_key(), DELAY))
    assert eff.replies == {"c0/1": jr(A, 1, A, [jm(A, meta("c0", "range"), "i0")])}
    assert view(g) == expect("CompletingRebalance", 1, leader=A, pname="range", members=[M(A)], pending_sync=[A],
                             static={"i0": A})


STATIC2 = [("c0", {"instance": "i0"}), ("c1", {"instance": "i1"})]
A_S, B_S = "c0-1", "c1-2"  # static members get their id at once


def test_static_rejoin_in_stable_gets_new_id_keeps_assignment_and_fences_old_id():
    g = make_group()
    (a, b), t0 = form_stable(g, STATIC2)
    assert (a, b) == (A_S, B_S)
    t = t0 + 2000
    eff = effects(g.handle_join(join_req("", protos("c1"), instance="i1"), "c1/re", t, "c1"))
    b2 = "c1-3"
    assert eff == Effects(replies={"c1/re": jr(b2, 1, a)},
                          timers={session_key(b): None, session_key(b2): t + SESSION})
    stable = expect("Stable", 1, leader=a, pname="range",
                    members=[M(a, assignment=assignment_of(a)), M(b2, assignment=assignment_of(b))],
                    static={"i0": a, "i1": b2})
    assert view(g) == stable

    fenced = ErrorCode.FENCED_INSTANCE_ID
    assert_unchanged_after(g, lambda: g.handle_heartbeat(hb_req(b, 1, instance="i1"), "old/hb", t + 100),
                           Effects(replies={"old/hb": hb(fenced)}))
    assert_unchanged_after(g, lambda: g.handle_sync(sync_req(b, 1, instance="i1"), "old/s", t + 100),
                           Effects(replies={"old/s": serr(fenced)}))
    assert_unchanged_after(g, lambda: g.handle_join(join_req(b, protos("c1"), instance="i1"), "old/j", t + 100, "c1"),
                           Effects(replies={"old/j": jerr(fenced, b)}))
    assert_unchanged_after(g, lambda: g.handle_heartbeat(hb_req(b, 1), "old/hb2", t + 100),
                           Effects(replies={"old/hb2": hb(ErrorCode.UNKNOWN_MEMBER_ID)}))

    assert effects(g.handle_heartbeat(hb_req(b2, 1, instance="i1"), "new/hb", t + 200)).replies == {"new/hb": hb(NONE)}
    eff = effects(g.handle_sync(sync_req(b2, 1, instance="i1"), "new/s", t + 300))
    assert eff.replies == {"new/s": sr(assignment_of(b))}
    assert view(g) == stable


def test_static_leader_rejoin_keeps_leadership_across_the_next_rebalance():
    g = make_group()
    (a, b), t0 = form_stable(g, STATIC2)
    t = t0 + 2000
    eff = effects(g.handle_join(join_req("", protos("c0"), instance="i0"), "c0/re", t, "c0"))
    a2 = "c0-3"
    [(tok, body)] = eff.replies.items()
    assert tok == "c0/re"
    assert (body.error_code, body.generation_id, body.leader, body.member_id, body.skip_assignment) == (0, 1, a2, a2, True)
    assert eff.timers == {session_key(a): None, session_key(a2): t + SESSION}
    assert view(g) == expect("Stable", 1, leader=a2, pname="range",
                             # the new id keeps the old one's place in join order
                             members=[M(a2, assignment=assignment_of(a)), M(b, assignment=assignment_of(b))],
                             static={"i0": a2, "i1": b})

    # b changes its subscription; the previous leader (a2) stays leader.
    g.handle_join(join_req(b, protos("c1", "range", "roundrobin"), instance="i1"), "c1/j2", t + 1000, "c1")
    eff = effects(g.handle_join(join_req(a2, protos("c0"), instance="i0"), "c0/j2", t + 1100, "c0"))
    assert eff.replies == {
        "c0/j2": jr(a2, 2, a2, [jm(a2, meta("c0", "range"), "i0"), jm(b, meta("c1", "range"), "i1")]),
        "c1/j2": jr(b, 2, a2),
    }
    assert view(g) == expect("CompletingRebalance", 2, leader=a2, pname="range",
                             members=[M(a2, assignment=assignment_of(a)), M(b, assignment=assignment_of(b))],
                             pending_sync=[a2, b], static={"i0": a2, "i1": b})


def test_static_rejoin_with_changed_metadata_triggers_a_rebalance():
    g = make_group()
    (a, b), t0 = form_stable(g, STATIC2)
    t = t0 + 2000
    eff = effects(g.handle_join(join_req("", protos("c1", "roundrobin", "range"), instance="i1"), "c1/re", t, "c1"))
    b2 = "c1-3"
    assert eff == Effects(timers={session_key(b): None, join_key(): t + REBALANCE})
    assert view(g) == expect("PreparingRebalance", 1, leader=a, pname="range",
                             members=[M(a, assignment=assignment_of(a)), M(b2, join="c1/re", assignment=assignment_of(b))],
                             static={"i0": a, "i1": b2})


def test_static_rejoin_while_old_member_is_parked_fences_the_parked_request():
    g = make_group()
    (a, b), t0 = form_stable(g, STATIC2)
    g.handle_join(join_req(a, protos("c0"), instance="i0"), "c0/j2", t0 + 1000, "c0")  # rebalance
    g.handle_join(join_req(b, protos("c1"), instance="i1"), "c1/j2", t0 + 1100, "c1")  # completes at once
    assert g.state is GroupState.COMPLETING_REBALANCE
    g.handle_sync(sync_req(b, 2, instance="i1"), "c1/s", t0 + 1200)
    eff = effects(g.handle_join(join_req("", protos("c1"), instance="i1"), "c1/re", t0 + 1300, "c1"))
    b2 = "c1-3"
    assert eff.replies == {"c1/s": serr(ErrorCode.FENCED_INSTANCE_ID)}
    assert view(g) == expect("PreparingRebalance", 2, leader=a, pname="range",
                             members=[M(a, assignment=b""), M(b2, join="c1/re")], static={"i0": a, "i1": b2})


# ============================================================================ 12. DescribeGroups / ListGroups


def test_describe_and_list_groups_through_broker():
    broker = Broker(config(), MemberIds())
    a1, b1 = broker_generation(broker, "g1", ["c0", "c1"], 0)
    broker.handle("SyncGroup", sync_req(a1, 1, {a1: b"A1", b1: b"B1"}, group_id="g1"), ctx("s1"), 6100)
    broker.handle("SyncGroup", sync_req(b1, 1, group_id="g1"), ctx("s2"), 6100)
    (a2,) = broker_generation(broker, "g2", ["c2"], 0)
    (a3,) = broker_generation(broker, "g3", ["c3"], 0)
    broker.handle("LeaveGroup", leave_req(a3, group_id="g3"), ctx("l3"), 6200)

    [reply] = broker.handle("DescribeGroups", DescribeGroupsRequest(groups=["g1", "g2", "g3", "nope"]), ctx("d"), 7000)
    assert reply == Reply("d", DescribeGroupsResponse(groups=[
        DescribedGroup(group_id="g1", group_state="Stable", protocol_type="consumer", protocol_data="range",
                       members=[DescribedGroupMember(a1, None, "c0", "/10.0.0.0", meta("c0", "range"), b"A1"),
                                DescribedGroupMember(b1, None, "c1", "/10.0.0.1", meta("c1", "range"), b"B1")],
                       generation_id=1, leader=a1),
        DescribedGroup(group_id="g2", group_state="CompletingRebalance", protocol_type="consumer", protocol_data="",
                       members=[DescribedGroupMember(a2, None, "c2", "/10.0.0.2", b"", b"")],
                       generation_id=1, leader=a2),
        DescribedGroup(group_id="g3", group_state="Empty", protocol_type="consumer", protocol_data="", members=[],
                       generation_id=2, leader=""),  # Kafka keeps an Empty group's protocol type
        DescribedGroup(group_id="nope", group_state="Dead"),
    ]))

    def listed(*states: str) -> list[ListedGroup]:
        [r] = broker.handle("ListGroups", ListGroupsRequest(states_filter=list(states)), ctx("lg"), 7000)
        assert isinstance(r.body, ListGroupsResponse) and r.body.error_code == 0
        return r.body.groups

    g1 = ListedGroup("g1", "consumer", "Stable")
    g2 = ListedGroup("g2", "consumer", "CompletingRebalance")
    g3 = ListedGroup("g3", "consumer", "Empty")
    assert listed() == [g1, g2, g3]
    assert listed("Stable") == [g1]
    assert listed("completingrebalance", "EMPTY") == [g2, g3]
    assert listed("PreparingRebalance") == []
    assert listed("Dead") == []


# ============================================================================ 13. stale timers


def _stale_cases():
    def stable_join():
        g = make_group()
        form_stable(g, ["c0", "c1"])
        return g, join_key()

    def completing_join():
        g = make_group()
        form_generation(g, ["c0", "c1"])
        return g, join_key()

    def completing_join_after_leader_sync():
        g = make_group()
        (a, b), _, t = form_generation(g, ["c0", "c1"])
        g.handle_sync(sync_req(a, 1, {a: b"A"}), "c0/s", t)
        return g, join_key()

    def empty_join():
        g = make_group()
        require_id(g, "c0", 0)
        return g, join_key()

    def old_sync():
        g = make_group()
        (a, b), t0 = form_stable(g, ["c0", "c1"])
        g.handle_join(join_req(a, protos("c0")), "c0/j2", t0 + 1000, "c0")
        g.handle_join(join_req(b, protos("c1")), "c1/j2", t0 + 1000, "c1")
        assert g.generation_id == 2 and g.pending_sync == {a, b}
        return g, sync_key(1)

    def synced_sync():
        g = make_group()
        form_stable(g, ["c0", "c1"])
        return g, sync_key(1)

    def removed_session():
        g = make_group()
        (a, b), t0 = form_stable(g, ["c0", "c1"])
        g.handle_leave(leave_req(b), "c1/l", t0 + 1000)
        return g, session_key(b)

    def removed_session_after_expiry():
        g = make_group()
        (a, b), t0 = form_stable(g, ["c0", "c1"])
        g.handle_heartbeat(hb_req(a, 1), "hb", t0 + SESSION - 1)
        g.on_timer(session_key(b), t0 + SESSION)
        assert b not in g.members
        return g, session_key(b)

    def joined_pending():
        g = make_group()
        a = require_id(g, "c0", 0)
        g.handle_join(join_req(a, protos("c0")), "c0/j", 0, "c0")
        return g, pending_key(a)

    def unknown_pending():
        g = make_group()
        form_stable(g, ["c0"])
        return g, pending_key("ghost")

    return [stable_join, completing_join, completing_join_after_leader_sync, empty_join, old_sync, synced_sync, removed_session,
            removed_session_after_expiry, joined_pending, unknown_pending]


@pytest.mark.parametrize("case", _stale_cases(), ids=lambda f: f.__name__)
def test_stale_timer_changes_nothing_and_emits_nothing(case):
    g, key = case()
    before = snapshot(g)
    assert g.on_timer(key, 100_000) == []
    assert snapshot(g) == before


def test_timer_of_unknown_group_through_broker_emits_nothing():
    broker = Broker(config(), MemberIds())
    assert broker.on_timer(join_key("nope"), 0) == []
    assert broker.on_timer(session_key("m", "nope"), 0) == []
    assert broker.groups == {}


# ============================================================================ 14. many groups


def test_groups_in_one_broker_are_independent():
    broker = Broker(config(), MemberIds())
    out1 = broker.handle("JoinGroup", join_req("", protos("c0"), group_id="g1"), ctx("1/id", "c0"), 0)
    m1 = [o for o in out1 if isinstance(o, Reply)][0].body.member_id
    out2 = broker.handle("JoinGroup", join_req("", protos("c0"), group_id="g2"), ctx("2/id", "c0"), 0)
    m2 = [o for o in out2 if isinstance(o, Reply)][0].body.member_id
    assert m1 != m2
    assert ArmTimer(pending_key(m1, "g1"), SESSION) in out1 and ArmTimer(pending_key(m2, "g2"), SESSION) in out2

    out = broker.handle("JoinGroup", join_req(m1, protos("c0"), group_id="g1"), ctx("1/j", "c0"), 0)
    assert ArmTimer(join_key("g1"), DELAY) in out
    out = broker.handle("JoinGroup", join_req(m2, protos("c0"), group_id="g2"), ctx("2/j", "c0"), 1000)
    assert ArmTimer(join_key("g2"), 1000 + DELAY) in out
    g1, g2 = broker.groups["g1"], broker.groups["g2"]

    before2 = snapshot(g2)
    eff = effects(broker.on_timer(join_key("g1"), DELAY))
    assert eff.replies == {"1/j": jr(m1, 1, m1, [jm(m1, meta("c0", "range"))])}
    assert all(k[1] == "g1" for k in eff.timers)
    assert view(g1) == expect("CompletingRebalance", 1, leader=m1, pname="range", members=[M(m1)], pending_sync=[m1])
    assert snapshot(g2) == before2

    # A member of g1 is unknown to g2 and vice versa.
    before1 = snapshot(g1)
    assert broker.handle("Heartbeat", hb_req(m1, 1, group_id="g2"), ctx("hb"), 3100) == [
        Reply("hb", HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))]
    [r] = broker.handle("LeaveGroup", leave_req(m1, group_id="g2"), ctx("l"), 3100)
    assert r.body == left((m1, ErrorCode.UNKNOWN_MEMBER_ID))
    [r] = [o for o in broker.handle("SyncGroup", sync_req(m2, 1, {m2: b"x"}, group_id="g1"), ctx("s"), 3100)
           if isinstance(o, Reply)]
    assert r.body == serr(ErrorCode.UNKNOWN_MEMBER_ID)
    assert snapshot(g1) == before1 and snapshot(g2) == before2

    broker.handle("SyncGroup", sync_req(m1, 1, {m1: b"A"}, group_id="g1"), ctx("s1"), 3200)
    assert g1.state is GroupState.STABLE and g2.state is GroupState.PREPARING_REBALANCE
    assert snapshot(g2) == before2
    broker.on_timer(join_key("g2"), 1000 + DELAY)
    assert g2.state is GroupState.COMPLETING_REBALANCE and g1.state is GroupState.STABLE
    assert (g1.generation_id, g2.generation_id) == (1, 1)


# ============================================================================ 15. duplicated requests


def test_duplicate_join_with_same_token_while_parked_is_answered_once():
    g = make_group()
    a = require_id(g, "c0", 0)
    g.handle_join(join_req(a, protos("c0")), "c0/j", 0, "c0")
    before = snapshot(g)
    assert effects(g.handle_join(join_req(a, protos("c0")), "c0/j", 100, "c0")) == NOTHING
    assert snapshot(g) == before
    eff = effects(g.on_timer(join_key(), DELAY))
    assert list(eff.replies) == ["c0/j"]


def test_duplicate_join_with_same_token_in_later_rebalance_is_answered_once():
    g = make_group()
    (a, b), t0 = form_stable(g, ["c0", "c1"])
    g.handle_join(join_req(a, protos("c0")), "c0/j2", t0 + 1000, "c0")
    assert effects(g.handle_join(join_req(a, protos("c0")), "c0/j2", t0 + 1100, "c0")) == NOTHING
    eff = effects(g.handle_join(join_req(b, protos("c1")), "c1/j2", t0 + 1200, "c1"))
    assert set(eff.replies) == {"c0/j2", "c1/j2"}


def test_duplicate_static_join_with_same_token_is_answered_once():
    g = make_group()
    req = join_req("", protos("c0"), instance="i0")
    g.handle_join(req, "c0/j", 0, "c0")
    assert view(g) == expect("PreparingRebalance", 0, leader="c0-1", members=[M("c0-1", join="c0/j")], static={"i0": "c0-1"})
    eff = effects(g.handle_join(req, "c0/j", 100, "c0"))
    assert eff.replies == {}  # the parked request is not answered (FENCED) and then answered again
    [mid] = g.members
    assert view(g) == expect("PreparingRebalance", 0, leader=mid, members=[M(mid, join="c0/j")], static={"i0": mid})
    eff = effects(g.on_timer(join_key(), DELAY))
    assert eff.replies == {"c0/j": jr(mid, 1, mid, [jm(mid, meta("c0", "range"), "i0")])}


def test_join_with_a_new_token_supersedes_the_parked_one():
    g = make_group()
    a = require_id(g, "c0", 0)
    g.handle_join(join_req(a, protos("c0")), "c0/j", 0, "c0")
    eff = effects(g.handle_join(join_req(a, protos("c0")), "c0/j-retry", 100, "c0"))
    assert eff == Effects(replies={"c0/j": jerr(ErrorCode.REBALANCE_IN_PROGRESS, a)})
    assert view(g) == expect("PreparingRebalance", 0, leader=a, members=[M(a, join="c0/j-retry")])
    eff = effects(g.on_timer(join_key(), DELAY))
    assert eff.replies == {"c0/j-retry": jr(a, 1, a, [jm(a, meta("c0", "range"))])}


def test_duplicate_sync_with_same_token_is_answered_once_and_new_token_supersedes():
    g = make_group()
    (a, b), _, t = form_generation(g, ["c0", "c1"])
    g.handle_sync(sync_req(b, 1), "c1/s", t + 100)
    assert effects(g.handle_sync(sync_req(b, 1), "c1/s", t + 150)) == NOTHING
    eff = effects(g.handle_sync(sync_req(b, 1), "c1/s-retry", t + 200))
    assert eff == Effects(replies={"c1/s": serr(ErrorCode.REBALANCE_IN_PROGRESS)})
    eff = effects(g.handle_sync(sync_req(a, 1, {a: b"A", b: b"B"}), "c0/s", t + 300))
    assert eff.replies == {"c0/s": sr(b"A"), "c1/s-retry": sr(b"B")}


# ============================================================================ random sequences


RESPONSE_OF = {"join": JoinGroupResponse, "sync": SyncGroupResponse, "hb": HeartbeatResponse, "leave": LeaveGroupResponse}
CLIENTS = ["c0", "c1", "c2", "c3", "c4"]
INSTANCES = {"c3": "i3", "c4": "i4"}  # two static members, three dynamic
RANDOM_CONFIG = config(group_max_size=5)
PROTOCOL_VARIANTS = {
    "same": lambda c: [("range", meta(c, "range")), ("roundrobin", meta(c, "roundrobin"))],
    "reordered": lambda c: [("roundrobin", meta(c, "roundrobin")), ("range", meta(c, "range"))],
    "new-metadata": lambda c: [("range", b"v2"), ("roundrobin", b"v2")],
    "alien": lambda c: [("sticky", b"")],
}


class GroupMachine(RuleBasedStateMachine):
    """Drives one Group with random client behaviour and a shell that fires armed timers at their
    deadlines in order. Every request carries a fresh token (or, for a duplicate, the token of a
    still-parked JoinGroup); each token must be answered at most once, with the right body type."""

    @initialize()
    def setup(self):
        self.g = Group(GROUP, RANDOM_CONFIG, MemberIds())
        self.now = 0
        self.timers: dict[tuple, int] = {}
        self.outstanding: dict[str, tuple[str, str]] = {}  # token -> (kind, client)
        self.member_id = {c: "" for c in CLIENTS}
        self.generation = {c: -1 for c in CLIENTS}
        self.last_join: dict[str, tuple[str, object]] = {}
        self.n = 0
        self.max_generation = 0
        self.stuck: str | None = None

    # ---------------------------------------------------------------- shell

    def absorb(self, outputs):
        for o in outputs:
            if isinstance(o, Reply):
                assert o.to in self.outstanding, f"reply to unknown or already answered token {o.to!r}"
                kind, client = self.outstanding.pop(o.to)
                assert type(o.body) is RESPONSE_OF[kind], (kind, o.body)
                self.learn(kind, client, o.body)
            elif isinstance(o, ArmTimer):
                assert o.deadline_ms >= self.now, o
                self.timers[o.key] = o.deadline_ms
            elif isinstance(o, CancelTimer):
                self.timers.pop(o.key, None)
            elif isinstance(o, Persist):
                self.check_persisted(o.record)
            else:
                assert isinstance(o, LogEvent)

    def check_persisted(self, record):
        """A persisted record survives encoding, and restoring it gives back its group."""
        assert decode_record(encode_record(record)) == record
        assert record.state in ("Stable", "Empty") and record.generation_id == self.g.generation_id
        restored = Group(GROUP, RANDOM_CONFIG, MemberIds())
        restored.restore(record, self.now)
        assert restored.state.value == record.state and restored.leader_id == record.leader
        assert [(m.member_id, m.assignment) for m in restored.members.values()] == \
            [(m.member_id, m.assignment) for m in record.members]

    def learn(self, kind, client, body):
        if kind == "join":
            if body.error_code in (0, ErrorCode.MEMBER_ID_REQUIRED):
                self.member_id[client] = body.member_id
            if body.error_code == 0:
                assert body.generation_id == self.g.generation_id and body.member_id in self.g.members
                self.generation[client] = body.generation_id
                if body.member_id == self.g.leader_id:  # KIP-814: even with skip_assignment
                    assert [m.member_id for m in body.members] == list(self.g.members)
                else:
                    assert body.members == []
            elif body.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                self.member_id[client] = ""

    def send(self, kind, client, call):
        self.n += 1
        tok = f"{client}/{kind}/{self.n}"
        self.outstanding[tok] = (kind, client)
        self.absorb(call(tok))
        return tok

    # ---------------------------------------------------------------- client actions

    def _join(self, client, member_id, variant="same", session=10_000, rebalance=8_000):
        req = join_req(member_id, PROTOCOL_VARIANTS[variant](client), session=session, rebalance=rebalance,
                       instance=INSTANCES.get(client))
        tok = self.send("join", client, lambda t: self.g.handle_join(req, t, self.now, client))
        self.last_join[client] = (tok, req)

    # Weighted choices: mostly well-formed, compatible requests, so that groups get somewhere.
    @rule(client=st.sampled_from(CLIENTS),
          variant=st.sampled_from(["same"] * 5 + ["reordered", "new-metadata", "alien"]),
          fresh=st.sampled_from([False] * 4 + [True]),
          session=st.sampled_from([10_000] * 4 + [6_000, 500]),
          rebalance=st.sampled_from([5_000, 20_000]))
    def join(self, client, variant, fresh, session, rebalance):
        self._join(client, "" if fresh else self.member_id[client], variant, session, rebalance)

    @rule(client=st.sampled_from(CLIENTS))
    def behave(self, client):
        """What a well-behaved client would do next: (re)join, sync, or heartbeat."""
        g, mid = self.g, self.member_id[client]
        if client == self.stuck:
            if mid in g.members:
                self.heartbeat(client, stale=False)
            return
        if any(c == client for _, c in self.outstanding.values()):
            return  # waiting on a parked request
        known = mid in g.members or mid in g.pending_members
        if not known or g.state is GroupState.PREPARING_REBALANCE or self.generation[client] != g.generation_id:
            self._join(client, mid if known else "")
        elif g.state is GroupState.COMPLETING_REBALANCE or mid in g.pending_sync:
            self.sync(client, stale=False)
        else:
            self.heartbeat(client, stale=False)

    @rule(client=st.sampled_from([None, *CLIENTS]))
    def hang(self, client):
        """From now on `client` is a hung consumer: it only heartbeats (None: nobody hangs)."""
        self.stuck = client

    @rule()
    def everybody_behaves(self):
        for client in CLIENTS:
            self.behave(client)

    @rule(dt=st.integers(min_value=500, max_value=3_000))
    def tick(self, dt):
        """A few seconds of ordinary life: every client takes its next step, then time passes."""
        self.everybody_behaves()
        self.advance(dt)

    @rule(client=st.sampled_from(CLIENTS))
    def duplicate_join(self, client):
        if client in self.last_join and self.last_join[client][0] in self.outstanding:
            tok, req = self.last_join[client]
            self.absorb(self.g.handle_join(req, tok, self.now, client))

    @rule(client=st.sampled_from(CLIENTS), stale=st.booleans())
    def sync(self, client, stale):
        mid = self.member_id[client]
        gen = self.generation[client] - (1 if stale else 0)
        assignments = {m: f"{m}@{gen}".encode() for m in self.g.members} if mid == self.g.leader_id else {}
        req = sync_req(mid, gen, assignments, instance=INSTANCES.get(client))
        self.send("sync", client, lambda t: self.g.handle_sync(req, t, self.now))

    @rule(client=st.sampled_from(CLIENTS), stale=st.booleans())
    def heartbeat(self, client, stale):
        req = hb_req(self.member_id[client], self.generation[client] - (1 if stale else 0), instance=INSTANCES.get(client))
        self.send("hb", client, lambda t: self.g.handle_heartbeat(req, t, self.now))

    @rule(client=st.sampled_from(CLIENTS), really=st.sampled_from([False, False, True]))
    def leave(self, client, really):
        if not really:  # leaves are rarer than other requests
            return
        req = LeaveGroupRequest(GROUP, [LeaveGroupRequestMember(self.member_id[client], INSTANCES.get(client))])
        self.send("leave", client, lambda t: self.g.handle_leave(req, t, self.now))

    @rule(dt=st.one_of(st.integers(min_value=0, max_value=3_000), st.integers(min_value=0, max_value=15_000)))
    def advance(self, dt):
        target = self.now + dt
        while self.timers:
            key, deadline = min(self.timers.items(), key=lambda kv: (kv[1], repr(kv[0])))
            if deadline > target:
                break
            del self.timers[key]
            self.now = max(self.now, deadline)
            self.absorb(self.g.on_timer(key, self.now))
        self.now = target

    # ---------------------------------------------------------------- invariants

    @invariant()
    def group_invariants(self):
        if not hasattr(self, "g"):
            return
        g = self.g
        assert g.generation_id >= self.max_generation
        self.max_generation = g.generation_id
        # The protocol support index always matches the members' own lists.
        assert g._support == Counter(name for m in g.members.values() for name in m.protocol_names)
        members = g.members
        # leader
        assert (g.leader_id is None) == (not members)
        assert g.leader_id is None or g.leader_id in members
        # Empty iff no members, except transiently: a group left without members waits in
        # PreparingRebalance for its join timer during the initial delay or while pending member
        # ids are outstanding (Kafka's hasAllMembersJoined also waits for pending members)
        if g.state is GroupState.EMPTY:
            assert not members
        elif not members:
            assert g.state is GroupState.PREPARING_REBALANCE and (g.initial_delay_active or g.pending_members)
            assert join_key() in self.timers
        assert g.state is not GroupState.DEAD
        # pending syncs
        assert g.pending_sync <= set(members)
        if g.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert not g.pending_sync
        assert not set(g.pending_members) & set(members)
        # parked requests
        for m in members.values():
            assert m.join_reply is None or m.sync_reply is None
            if m.join_reply is not None:
                assert g.state is GroupState.PREPARING_REBALANCE
            if m.sync_reply is not None:
                assert g.state is GroupState.COMPLETING_REBALANCE
        parked = {t for m in members.values() for t in (m.join_reply, m.sync_reply) if t is not None}
        assert parked == set(self.outstanding), "every request is answered or parked, never both"
        # protocol
        if g.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert all(g.protocol_name in m.protocol_names for m in members.values())
            assert all(m.protocol_type == g.protocol_type for m in members.values())
        # static members
        assert g.static_members == {m.group_instance_id: mid for mid, m in members.items() if m.group_instance_id is not None}
        # group.max.size
        assert len(members) <= RANDOM_CONFIG.group_max_size
        # liveness: something is armed to move every member and pending id along
        for pid in g.pending_members:
            assert pending_key(pid) in self.timers
        if g.state is GroupState.PREPARING_REBALANCE:
            assert join_key() in self.timers
        for mid, m in members.items():
            if g.state is not GroupState.PREPARING_REBALANCE or m.join_reply is None:
                assert session_key(mid) in self.timers, (mid, g.state)
        if g.pending_sync:
            assert sync_key(g.generation_id) in self.timers


TestGroupRandomSequences = GroupMachine.TestCase
TestGroupRandomSequences.settings = settings(
    max_examples=200, stateful_step_count=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
