"""The dashboard's state model and timeline: pure folds over event-log and trace lines, fed by hand
(grouplab/ui/model.py, grouplab/ui/timeline.py; docs/ui.md §2, §4)."""

from __future__ import annotations

import base64
from typing import Any

from grouplab.ui.model import DashboardModel, subscribed_topics
from grouplab.ui.timeline import Names, Timeline, describe
from grouplab.protocol import events as E
from grouplab.protocol.consumer_protocol import encode_assignment, encode_subscription
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.events import FreeFormEvent
from grouplab.protocol.states import GroupState, MemberState, RebalanceCause, RemovalReason
from grouplab.protocol.types import Assignment, Subscription, TopicPartition

G = "g"
A = "consumer-1-0f3a9c2e-1111-4222-8333-444455556666"
B = "consumer-2-7b1d0000-1111-4222-8333-444455556666"
STABLE, PREPARING = GroupState.STABLE, GroupState.PREPARING_REBALANCE


def b64(raw: bytes) -> dict[str, str]:
    return {"$bytes": base64.b64encode(raw).decode()}


def coordinator(model: DashboardModel, ts: int, payload: Any) -> None:
    model.feed("coordinator", LogEvent(ts, payload))


def run_note(model: DashboardModel, ts: int, name: str, **fields: Any) -> None:
    model.feed("run", LogEvent(ts, FreeFormEvent(name, fields)))


def assigned(model: DashboardModel, ts: int, client: str, member: str, gen: int, owned: list[list[Any]]) -> None:
    model.feed(client, LogEvent(ts, E.PartitionsAssigned(G, member, gen, MemberState.STABLE, owned, owned)))


def join(ts: int, client: str, member: str, conn: str, cid: int = 1, session_ms: int = 6000) -> dict[str, Any]:
    meta = b64(encode_subscription(Subscription(topics=["t0"])))
    return {"ts_ms": ts, "kind": "request", "conn": conn, "correlation_id": cid, "client_id": client,
            "client_host": "127.0.0.1", "api": "JoinGroup",
            "body": {"group_id": G, "session_timeout_ms": session_ms, "rebalance_timeout_ms": 300000,
                     "member_id": member, "protocol_type": "consumer",
                     "protocols": [{"name": "range", "metadata": meta}], "group_instance_id": None, "reason": None}}


def heartbeat(ts: int, client: str, member: str, conn: str, cid: int, gen: int = 1) -> dict[str, Any]:
    return {"ts_ms": ts, "kind": "request", "conn": conn, "correlation_id": cid, "client_id": client,
            "client_host": "127.0.0.1", "api": "Heartbeat",
            "body": {"group_id": G, "generation_id": gen, "member_id": member, "group_instance_id": None}}


def response(ts: int, api: str, conn: str, cid: int, **body: Any) -> dict[str, Any]:
    return {"ts_ms": ts, "kind": "response", "conn": conn, "correlation_id": cid, "api": api,
            "body": {"error_code": 0, **body}}


def stable(model: DashboardModel, ts: int, gen: int, assignments: dict[str, list[list[Any]]]) -> None:
    coordinator(model, ts, E.GenerationCompleted(G, gen, GroupState.COMPLETING_REBALANCE, "range", A,
                                                 list(assignments), "test"))
    clients = {m: m.rsplit("-", 5)[0] for m in assignments}
    coordinator(model, ts, E.GroupStable(G, gen, STABLE, A, "range", assignments, clients))


def two_members(model: DashboardModel) -> None:
    coordinator(model, 1000, E.CoordinatorStarted("127.0.0.1", 9092, {}, None))
    coordinator(model, 1000, E.TopicCreated("t0", 2, False))
    model.trace(join(1000, "consumer-1", A, "c1"))
    model.trace(join(1000, "consumer-2", B, "c2"))
    coordinator(model, 1000, E.RebalanceStarted(G, 0, PREPARING, f"member {A} joined", RebalanceCause.MEMBER_JOINED, [A]))
    stable(model, 1100, 1, {A: [["t0", 0]], B: [["t0", 1]]})
    assigned(model, 1100, "consumer-1", A, 1, [["t0", 0]])
    assigned(model, 1100, "consumer-2", B, 1, [["t0", 1]])


def cells(snap: dict[str, Any]) -> dict[str, tuple[str, str | None, int | None]]:
    return {f"{p['topic']}-{p['partition']}": (p["state"], p["client"], p["generation"]) for p in snap["partitions"]}


def test_a_stable_group_consumes_everything_and_its_join_was_unowned_time() -> None:
    model = DashboardModel(G)
    two_members(model)
    snap = model.snapshot(2000)
    assert (snap["state"], snap["generation"], snap["protocol"], snap["leader"]) == ("Stable", 1, "range", A)
    assert [m["client_id"] for m in snap["members"]] == ["consumer-1", "consumer-2"]
    assert snap["members"][0]["leader"] and snap["members"][0]["session_timeout_ms"] == 6000
    assert cells(snap) == {"t0-0": ("consumed", "consumer-1", 1), "t0-1": ("consumed", "consumer-2", 1)}
    # Two partitions nobody consumed for the 100 ms of the first rebalance.
    assert snap["costs"] == {"not_consumed_ms": 0, "unowned_ms": 200}
    assert snap["rebalances"][-1]["generation"] == 1 and snap["rebalancing_ms"] is None


def test_a_killed_member_owns_its_partitions_unconsumed_until_removed_then_the_rebalance() -> None:
    model = DashboardModel(G)
    two_members(model)
    model.trace(heartbeat(3000, "consumer-2", B, "c2", 2))
    model.trace(response(3001, "Heartbeat", "c2", 2))
    run_note(model, 4000, "member_crashed", client_id="consumer-2", member_id=B, session_timeout_ms=6000)
    model.feed("consumer-2", LogEvent(4000, E.AppCrashed(G, B)))  # the dying application's last line

    snap = model.snapshot(5000)
    assert cells(snap)["t0-1"] == ("not_consumed", "consumer-2", 1)
    victim = next(m for m in snap["members"] if m["client_id"] == "consumer-2")
    assert victim["fault"] == "crash"
    # The countdown runs from the last time the coordinator heard from it, not from the kill.
    assert victim["removal"] == {"in_ms": 3000 + 6000 - 5000, "by": "session.timeout.ms"}
    assert victim["heartbeat_age_ms"] == 2000 and victim["heartbeats"] == 1
    assert snap["faults"][0]["not_consumed_ms"] == 1000  # one partition for one second

    coordinator(model, 9000, E.MemberRemoved(G, 1, PREPARING, B, RemovalReason.SESSION_TIMEOUT, "no heartbeat"))
    coordinator(model, 9000, E.RebalanceStarted(G, 1, PREPARING, f"{B} removed: session_timeout",
                                                RebalanceCause.SESSION_TIMEOUT, [A]))
    snap = model.snapshot(9050)
    assert cells(snap)["t0-1"] == ("unowned", None, None)
    assert snap["rebalancing_ms"] == 50
    fault = snap["faults"][0]
    assert (fault["removed_ms"], fault["removal_reason"], fault["not_consumed_ms"]) == (9000, "session_timeout", 5000)
    assert [m["client_id"] for m in snap["members"]] == ["consumer-1"]
    # Issue 25: the grid keeps a column for the member that was removed, with when and why.
    assert snap["departed"] == [{"member_id": B, "client_id": "consumer-2", "removed_ms": 9000,
                                 "reason": "session_timeout"}]

    stable(model, 9100, 2, {A: [["t0", 0], ["t0", 1]]})
    snap = model.snapshot(9100)
    assert cells(snap)["t0-1"] == ("assigned", "consumer-1", 2)  # handed out, not taken yet
    assigned(model, 9120, "consumer-1", A, 2, [["t0", 0], ["t0", 1]])
    snap = model.snapshot(10000)
    assert cells(snap) == {"t0-0": ("consumed", "consumer-1", 2), "t0-1": ("consumed", "consumer-1", 2)}
    # Unowned: the first rebalance (200) and t0-1 from its owner's removal to its new owner (120).
    assert snap["costs"] == {"not_consumed_ms": 5000, "unowned_ms": 320}
    last = snap["rebalances"][-1]
    assert (last["generation"], last["moved"], last["removed"]) == (2, 1, [[B, "session_timeout"]])


def test_a_resumed_hang_stops_being_charged_and_a_slow_member_counts_down_its_poll_interval() -> None:
    model = DashboardModel(G)
    two_members(model)
    run_note(model, 2000, "member_fault", client_id="consumer-1", member_id=A, fault="hang",
             session_timeout_ms=6000, max_poll_interval_ms=300000)
    run_note(model, 2500, "member_fault_over", client_id="consumer-1", fault="hang", how="resumed")
    run_note(model, 3000, "member_fault", client_id="consumer-2", member_id=B, fault="slow",
             session_timeout_ms=6000, max_poll_interval_ms=20000)
    snap = model.snapshot(4000)
    hung, slow = snap["faults"]
    assert hung["kind"] == "hang" and hung["ended_ms"] == 2500 and hung["not_consumed_ms"] == 500
    assert slow["not_consumed_ms"] == 1000
    m2 = next(m for m in snap["members"] if m["client_id"] == "consumer-2")
    assert m2["removal"] == {"in_ms": 3000 + 20000 - 4000, "by": "max.poll.interval.ms"}
    assert cells(snap)["t0-0"][0] == "consumed"


def test_heartbeat_errors_come_from_the_answers_and_a_sync_answer_clears_them() -> None:
    model = DashboardModel(G)
    two_members(model)
    model.trace(heartbeat(2000, "consumer-1", A, "c1", 7))
    model.trace(response(2001, "Heartbeat", "c1", 7, error_code=27))
    assert model.snapshot(2002)["members"][0]["heartbeat_error"] == "REBALANCE_IN_PROGRESS"
    model.trace({"ts_ms": 2100, "kind": "request", "conn": "c1", "correlation_id": 8, "client_id": "consumer-1",
                 "client_host": "", "api": "SyncGroup", "body": {"group_id": G, "generation_id": 2, "member_id": A}})
    model.trace(response(2200, "SyncGroup", "c1", 8, assignment=b64(b"")))
    member = model.group.members[A]
    assert member.heartbeat_error is None and member.last_session_ms == 2200


def test_a_coordinator_restart_without_data_forgets_the_group() -> None:
    model = DashboardModel(G)
    two_members(model)
    coordinator(model, 3000, E.CoordinatorStopped())
    assert model.snapshot(3000)["coordinator_up"] is False
    coordinator(model, 3100, E.CoordinatorStarted("127.0.0.1", 9092, {}, None))
    snap = model.snapshot(3200)
    assert (snap["state"], snap["generation"], snap["members"], snap["coordinator_up"]) == ("Empty", 0, [], True)
    # The consumers still hold what they had: consumed, though no group assigns it now.
    assert {c[0] for c in cells(snap).values()} == {"consumed"}


def test_subscription_topics_are_read_from_a_traced_join() -> None:
    meta = b64(encode_subscription(Subscription(topics=["a", "b"])))
    assert subscribed_topics([{"name": "range", "metadata": meta}]) == ["a", "b"]
    assert subscribed_topics([{"name": "range", "metadata": b64(b"\x00junk")}]) is None
    assert subscribed_topics([]) is None


# ----------------------------------------------------------------------------- timeline


def test_each_message_is_one_sentence_and_answers_pair_with_their_requests() -> None:
    tl = Timeline()
    tl.trace(join(1000, "consumer-1", "", "c1", cid=1))
    tl.trace(response(1001, "JoinGroup", "c1", 1, error_code=79, member_id=A))
    tl.trace({"ts_ms": 1001, "kind": "member_id", "client_id": "consumer-1", "member_id": A})
    req, resp = list(tl.entries)
    assert req["text"] == ("consumer-1 → coordinator: JoinGroup as (new) (session 6000 ms, assignors range)")
    assert resp["text"] == "coordinator → consumer-1: JoinGroup MEMBER_ID_REQUIRED: join again as consumer-1-0f3a"
    assert resp["error"] == "MEMBER_ID_REQUIRED"
    assert tl.raw(req["id"]) == tl.raw(resp["id"])
    raw = tl.raw(resp["id"])
    assert raw is not None and raw["request"]["api"] == "JoinGroup" and raw["response"]["body"]["error_code"] == 79

    sync = encode_assignment(Assignment(partitions=[TopicPartition("t0", 0), TopicPartition("t0", 1)]))
    tl.trace({"ts_ms": 1100, "kind": "request", "conn": "c1", "correlation_id": 3, "client_id": "consumer-1",
              "client_host": "", "api": "SyncGroup", "body": {"group_id": G, "generation_id": 1, "member_id": A}})
    entry = tl.trace(response(1101, "SyncGroup", "c1", 3, assignment=b64(sync)))
    assert entry is not None and entry["text"] == "coordinator → consumer-1: SyncGroup your partitions: t0[0,1]"

    beat = tl.trace(heartbeat(1200, "consumer-1", A, "c1", 4))
    ok = tl.trace(response(1201, "Heartbeat", "c1", 4))
    failed = tl.trace(response(1202, "Heartbeat", "c1", 5, error_code=27))
    assert beat is not None and beat["routine"] and ok is not None and ok["routine"]
    assert failed is not None and not failed["routine"] and failed["error"] == "REBALANCE_IN_PROGRESS"
    assert [e["id"] for e in tl.since(ok["id"])] == [failed["id"]]


def test_timers_faults_and_turning_points_read_as_sentences() -> None:
    names = Names(member_client={A: "consumer-1"})
    assert describe({"ts_ms": 1, "kind": "timer", "key": ["session", G, A]}, names) == (
        "timer: session check of consumer-1-0f3a (removed if not heard from for session.timeout.ms)")
    tl = Timeline()
    tl.event("coordinator", "group_stable", 5, {"generation_id": 2, "protocol_name": "range",
                                                "assignments": {A: [["t0", 0]]}, "clients": {A: "consumer-1"}})
    tl.event("run", "member_crashed", 6, {"client_id": "consumer-2", "member_id": B, "session_timeout_ms": 6000})
    tl.event("run", "member_fault", 7, {"client_id": "consumer-1", "fault": "partition", "seconds": 15.0})
    tl.event("coordinator", "rebalance_started", 8, {"trigger": f"{B} removed: session_timeout"})
    tl.event("consumer-1", "heartbeat_failed", 9, {})  # not a turning point
    texts = [e["text"] for e in tl.entries]
    assert texts == [
        "generation 2 is stable (range): consumer-1-0f3a: t0[0]",
        "you killed consumer-2: no LeaveGroup; the group notices only when its session times out",
        "you cut consumer-1 off from the coordinator for 15 s",
        "rebalance begins: consumer-2-7b1d removed: session_timeout",
    ]
    assert [e["kind"] for e in tl.entries] == ["event", "fault", "fault", "event"]


def test_a_narrator_can_take_the_place_of_describe() -> None:
    tl = Timeline(narrate=lambda line, names: f"《{line['kind']}》" if line["kind"] == "request" else None)
    assert tl.trace(join(1, "consumer-1", "", "c1")) is not None
    assert tl.trace(response(2, "JoinGroup", "c1", 1)) is None
    assert [e["text"] for e in tl.entries] == ["《request》"]


def test_the_teachers_own_actions_are_told_in_the_dashboards_language() -> None:
    from grouplab.ui.timeline import Names, describe_event
    from grouplab.teach.catalog import Catalog

    killed = {"client_id": "consumer-2"}
    assert describe_event("run", "member_crashed", killed, Names()).startswith("you killed consumer-2")
    zh = describe_event("run", "member_crashed", killed, Names(), Catalog("zh"))
    assert zh is not None and zh.startswith("你杀掉了 consumer-2")
    cut = describe_event("run", "member_fault", {"fault": "partition", "client_id": "c1", "seconds": 5}, Names(),
                         Catalog("zh"))
    assert cut == "你把 c1 与协调者隔断 5 秒"
    assert describe_event("run", "member_added", {}, Names()) == "you added ? (assignors ?)"  # a field missing


def test_a_consumer_protocol_group_shows_its_epoch_assignor_and_each_members_partitions() -> None:
    """KIP-848 (docs/events.md §4.1c): no generation, no leader; the group epoch, the coordinator's
    assignor, and what each member holds after its reconciliation, at its member epoch."""
    from grouplab.protocol.states import ConsumerGroupState as CS, ConsumerMemberState as MS, GroupEpochCause

    model = DashboardModel(G)
    model.feed("coordinator", LogEvent(0, E.CoordinatorStarted("127.0.0.1", 9192, {
        "group.consumer.session.timeout.ms": 45000}, None)))
    model.feed("coordinator", LogEvent(0, E.TopicCreated("t0", 2, False)))
    coordinator(model, 10, E.ConsumerMemberJoined(G, 0, CS.EMPTY, A, None, "c1", ["t0"], None))
    coordinator(model, 10, E.GroupEpochBumped(G, 1, CS.EMPTY, GroupEpochCause.MEMBER_JOINED, f"member {A} joined"))
    coordinator(model, 10, E.TargetAssignmentComputed(G, 1, CS.EMPTY, 1, "uniform", {A: [["t0", 0], ["t0", 1]]}))
    coordinator(model, 10, E.ConsumerMemberReconciled(G, 1, CS.EMPTY, A, 1, 0, MS.STABLE, [["t0", 0], ["t0", 1]], [], []))
    snap = model.snapshot(20)
    assert (snap["type"], snap["generation"], snap["protocol"], snap["leader"]) == ("consumer", 1, "uniform", None)
    assert snap["rebalancing_ms"] == 10  # the epoch moved and no Stable yet
    coordinator(model, 11, E.ConsumerGroupStateChanged(G, 1, CS.STABLE, CS.EMPTY, CS.STABLE))
    snap = model.snapshot(20)
    assert snap["state"] == "Stable" and snap["rebalancing_ms"] is None
    (member,) = snap["members"]
    assert member["client_id"] == "c1" and member["session_timeout_ms"] == 45000
    assert {(p["partition"], p["member"], p["generation"]) for p in snap["partitions"]} == {(0, A, 1), (1, A, 1)}
    coordinator(model, 30, E.ConsumerMemberRemoved(G, 2, CS.ASSIGNING, A, RemovalReason.LEFT, "left",
                                                   [["t0", 0], ["t0", 1]]))
    snap = model.snapshot(40)
    assert snap["members"] == [] and {p["state"] for p in snap["partitions"]} == {"unowned"}


def test_a_crashed_consumer_protocol_member_counts_down_the_brokers_session_timeout() -> None:
    """Under KIP-848 the coordinator removes a silent member after the broker's
    group.consumer.session.timeout.ms, not the consumer's session.timeout.ms: the countdown
    says so, with the broker's value."""
    from grouplab.protocol.states import ConsumerGroupState as CS, ConsumerMemberState as MS, GroupEpochCause

    model = DashboardModel(G)
    model.feed("coordinator", LogEvent(0, E.CoordinatorStarted("127.0.0.1", 9192, {
        "group.consumer.session.timeout.ms": 10000}, None)))
    model.feed("coordinator", LogEvent(0, E.TopicCreated("t0", 1, False)))
    coordinator(model, 10, E.ConsumerMemberJoined(G, 0, CS.EMPTY, A, None, "c1", ["t0"], None))
    coordinator(model, 10, E.GroupEpochBumped(G, 1, CS.EMPTY, GroupEpochCause.MEMBER_JOINED, f"member {A} joined"))
    coordinator(model, 10, E.ConsumerMemberReconciled(G, 1, CS.EMPTY, A, 1, 0, MS.STABLE, [["t0", 0]], [], []))
    coordinator(model, 11, E.ConsumerGroupStateChanged(G, 1, CS.STABLE, CS.EMPTY, CS.STABLE))
    assigned(model, 12, "c1", A, 1, [["t0", 0]])
    run_note(model, 4000, "member_crashed", client_id="c1", member_id=A, session_timeout_ms=10000,
             session_timeout_setting="group.consumer.session.timeout.ms")
    model.feed("c1", LogEvent(4000, E.AppCrashed(G, A)))
    (victim,) = model.snapshot(5000)["members"]
    assert victim["fault"] == "crash"
    assert victim["removal"]["by"] == "group.consumer.session.timeout.ms"
    assert victim["removal"]["in_ms"] <= 4000 + 10000 - 5000
