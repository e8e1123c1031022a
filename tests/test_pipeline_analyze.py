"""`grouplab analyze` on a real local SparkSession: every table checked against what happened.

The main run is a deterministic simulation with known faults (three members; m-1 crashes at 20 s
and comes back at 45 s, m-0 leaves cleanly at 40 s), recorded to a run directory while the same events are collected in
memory. The expected rows are worked out here in plain Python from those events, the simple way
(rebalances, assignments and movements by the rebalance tracker, grouplab/rebalances.py), and
compared with what Spark wrote. The odd runs (a delivery run, malformed lines, a reused
directory, a deleted topic, a real-socket run) are analyzed together in one call (`several`):
an analyze costs tens of seconds of Spark planning whatever its size, and every table is per run.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from grouplab.costs import CostTracker
from grouplab.pipeline.analyze import TABLES, analyze
from grouplab.rebalances import Rebalance, RebalanceTracker
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import load_scenario, parse_scenario, resolve_scenario
from grouplab.protocol.effects import LogEvent


KNOWN = {
    "name": "known", "topics": {"t0": 4, "t1": 2}, "duration_ms": 60_000, "faults_from_ms": 0,
    "broker": {"group.initial.rebalance.delay.ms": 1000},
    "consumer": {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
    "members": [{"count": 3, "assignors": ["range"], "start_ms": [0, 0]}],
    "network": {"delay_ms": [1, 1]},
    "schedule": [{"at_ms": 20_000, "fault": "crash", "members": ["m-1"], "duration_ms": 25_000},
                 {"at_ms": 40_000, "fault": "leave", "members": ["m-0"]}],
}
CRASH_MS, LEAVE_MS, RESTART_MS = 20_000, 40_000, 45_000


def record(tmp: Path, name: str, scenario_raw: dict[str, Any] | None = None, seed: int = 1, scenario: Any = None):
    """Run a simulation into tmp/name; return the run dir and its events as (node, event, fields)."""
    run_dir = tmp / name
    events = Recorded()

    def listen(node: str, ev: LogEvent) -> None:
        events.append((node, ev.event, ev.ts_ms, dict(ev.fields)))
        events.typed.append((node, ev))

    run_seed(scenario or parse_scenario(dict(scenario_raw or KNOWN)), seed, run_dir=run_dir, listener=listen)
    return run_dir, events


class Recorded(list[tuple[str, str, int, dict[str, Any]]]):
    """A run's lines as (node, event, ts_ms, fields), and `typed`: the (node, LogEvent) pairs."""

    def __init__(self) -> None:
        super().__init__()
        self.typed: list[tuple[str, LogEvent]] = []


def rows(spark, out: Path, table: str, run: str | tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """A table's rows, or only those of `run` (a run's label, or several)."""
    got = [r.asDict(recursive=True) for r in spark.read.parquet(str(out / table)).collect()]
    runs = (run,) if isinstance(run, str) else run
    return got if runs is None else [r for r in got if r["run"] in runs]


@pytest.fixture(scope="module")
def known(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("known")
    run_dir, events = record(tmp, "known")
    out = tmp / "out"
    result = analyze(spark, [str(run_dir)], out)
    return {"run_dir": run_dir, "events": events, "out": out, "result": result}


@pytest.fixture(scope="module")
def several(spark, known, tmp_path_factory):
    """The odd runs the tests below look at, analyzed together in one `analyze`: each call costs
    tens of seconds of Spark planning whatever its size, and the tables are per run, so each test
    reads its own run's rows. The runs: a delivery run (`alo`); the known run twice under two
    parents, one copy with malformed lines (`dirty`, `clean`); two coordinators appended to one
    directory (`reused`); a deleted topic (`fresh`, `stale`); and a real-socket run (`real`).
    The two copies' names clash, so every run is labelled by its path: `label` maps these short
    names to the labels."""
    from tests.test_costs import u_made_again, write_run

    tmp = tmp_path_factory.mktemp("several")
    alo_dir, alo_events = record(tmp, "alo", scenario=load_scenario(resolve_scenario("delivery-at-least-once")), seed=2)
    dirty, clean = copy_with_malformed_lines(known["run_dir"], tmp)
    reused = write_reused_run(tmp / "reused")
    for name, stale in (("fresh", False), ("stale", True)):
        write_run(tmp / name, u_made_again(stale))
    real = record_real_run(tmp / "real")
    out = tmp / "out"
    dirs = {"alo": alo_dir, "dirty": dirty, "clean": clean, "reused": reused, "fresh": tmp / "fresh",
            "stale": tmp / "stale", "real": real}
    result = analyze(spark, [str(d) for d in dirs.values()], out)
    return {"out": out, "result": result, "alo_events": alo_events, "dirs": dirs, "tmp": tmp,
            "label": {name: str(d) for name, d in dirs.items()}}


def coordinator(events, name):
    return [(ts, f) for node, ev, ts, f in events if node == "coordinator" and ev == name]


def rebalances(events) -> list[Rebalance]:
    """The completed rebalances, by the tracker the simulator and `grouplab run` use too."""
    tracker = RebalanceTracker()
    return [r for node, ev in events.typed if (r := tracker.feed(node, ev)) is not None]


# ----------------------------------------------------------------------------- rebalances


def test_rebalances_are_the_three_that_happened_with_their_causes_and_phases(spark, known):
    got = sorted(rows(spark, known["out"], "rebalances"), key=lambda r: r["generation"])
    expected = {r.generation: r for r in rebalances(known["events"])}
    assert [r["generation"] for r in got] == [1, 2, 3, 4] == list(expected)
    assert [r["cause"] for r in got] == ["member_joined", "session_timeout", "member_left", "member_joined"]
    assert [r["members"] for r in got] == [3, 2, 1, 2]
    assert [r["outcome"] for r in got] == ["stable"] * 4
    for r in got:
        want = expected[r["generation"]]
        assert r["run"] == "known" and r["group_id"] == "sim" and r["protocol"] == "range" == want.protocol
        assert (r["start_ms"], r["join_end_ms"], r["end_ms"]) == (want.started_ms, want.formed_ms, want.ended_ms)
        assert r["duration_ms"] == r["join_ms"] + r["sync_ms"] == want.duration_ms
        assert (r["leader"], r["trigger"], r["cause"]) == (want.leader, want.trigger, want.cause)
        assert r["members"] == len(want.members)
    # The crash was noticed by the session timeout, 6 s later; the leave at once.
    assert got[1]["start_ms"] >= CRASH_MS + 5_000 and LEAVE_MS <= got[2]["start_ms"] < LEAVE_MS + 100
    assert got[3]["start_ms"] >= RESTART_MS


# ----------------------------------------------------------------------------- assignments, movements


def test_assignments_are_each_stable_generations_decoded_assignment(spark, known):
    stable = rebalances(known["events"])
    # A generation's assignment is in force until the next rebalance starts.
    until = {r.generation: later.started_ms for r, later in zip(stable, stable[1:])}
    expected = {(r.generation, member, r.clients[member], tp.topic, tp.partition, r.ended_ms, until.get(r.generation))
                for r in stable for member, parts in r.assignments.items() for tp in parts}
    got = {(r["generation"], r["member_id"], r["client_id"], r["topic"], r["partition"], r["from_ms"], r["to_ms"])
           for r in rows(spark, known["out"], "assignments")}
    assert got == expected and len(expected) == 6 * 4


def test_movements_are_owner_changes_between_consecutive_generations(spark, known):
    stable = rebalances(known["events"])
    expected = {(r.generation, *move.partition, move.from_member, move.to_member,
                 "rebalanced" if move.from_member in r.members else "owner_gone")
                for r in stable for move in r.moved}
    got = {(r["generation"], r["topic"], r["partition"], r["from_member"], r["to_member"], r["reason"])
           for r in rows(spark, known["out"], "movements")}
    assert got == expected
    assert any(r[-1] == "owner_gone" for r in got) and any(r[-1] == "rebalanced" for r in got)
    causes = {r["generation"]: r["cause"] for r in rows(spark, known["out"], "movements")}
    assert causes == {2: "session_timeout", 3: "member_left", 4: "member_joined"} == {
        r.generation: r.cause for r in stable if r.moved}


# ----------------------------------------------------------------------------- sessions, ownership


def test_member_sessions_say_who_joined_and_how_each_left(spark, known):
    got = sorted(rows(spark, known["out"], "member_sessions"), key=lambda r: r["joined_ms"])
    assert [r["client_id"] for r in got][-1] == "m-1" and sorted(r["client_id"] for r in got) == ["m-0", "m-1", "m-1", "m-2"]
    by = {(r["client_id"], r["joined_ms"] >= RESTART_MS): r for r in got}
    crashed, back, left, stayed = by[("m-1", False)], by[("m-1", True)], by[("m-0", False)], by[("m-2", False)]
    assert crashed["end_reason"] == "session_timeout" and crashed["left_ms"] >= CRASH_MS + 5_000
    assert left["end_reason"] == "left" and LEAVE_MS <= left["left_ms"] < LEAVE_MS + 100
    assert stayed["end_reason"] is back["end_reason"] is None and stayed["left_ms"] is None
    assert (stayed["generations"], crashed["generations"], left["generations"], back["generations"]) == (4, 1, 2, 1)
    assert crashed["member_id"] != back["member_id"]
    joined = {f["member_id"]: ts for ts, f in coordinator(known["events"], "member_joined")}
    assert {r["member_id"]: r["joined_ms"] for r in got} == joined
    assert sum(r["led_generations"] for r in got) == 4
    commits = Counter(f["member_id"] for _ts, f in coordinator(known["events"], "offsets_committed"))
    assert {r["member_id"]: r["commits"] for r in got} == {m: commits.get(m, 0) for m in joined}
    assert all((r["last_commit_ms"] is None) == (r["commits"] == 0) for r in got)


def folded(events):
    """The cost fold (grouplab/costs.py) over the run's events, finished at the log's end."""
    costs = CostTracker()
    for node, ev in events.typed:
        costs.feed(node, ev)
    costs.finish(max(ts for _, _, ts, _ in events))
    return costs


def reference_ownership(events) -> list[tuple]:
    """The member-side intervals the plain way, by the fold's rules (docs/events.md §6)."""
    return sorted((h.client_id, h.partition.topic, h.partition.partition, h.generation, h.start_ms, h.end_ms,
                   h.end_reason) for h in folded(events).holdings)


def test_ownership_intervals_follow_the_members_own_logs(spark, known):
    got = sorted((r["client_id"], r["topic"], r["partition"], r["generation"], r["start_ms"], r["end_ms"], r["end_reason"])
                 for r in rows(spark, known["out"], "ownership"))
    assert got == reference_ownership(known["events"])
    reasons = {r[-1] for r in got}
    # m-1 crashed: it held its partitions until the session timeout removed it
    assert {"removed", "closed", "revoked", "end_of_log"} <= reasons and "crashed" not in reasons
    crashed = [r for r in got if r[0] == "m-1" and r[-1] == "removed"]
    assert crashed and all(r[5] >= CRASH_MS + 5_000 for r in crashed)


def test_stop_the_world_time_is_charged_to_the_rebalance_that_ended_it(spark, known):
    intervals = reference_ownership(known["events"])
    first_start = rebalances(known["events"])[0].started_ms
    by_tp: dict[tuple[str, int], list[tuple]] = defaultdict(list)
    for node, t, p, gen, start, end, _ in intervals:
        by_tp[(t, p)].append((start, end, gen))
    expected: dict[int, int] = defaultdict(int)
    for spans in by_tp.values():
        latest_end = first_start
        for i, (start, end, gen) in enumerate(sorted(spans)):
            expected[gen] += max(start - latest_end, 0)
            latest_end = end if i == 0 else max(latest_end, end)
    got = {r["generation"]: r["unowned_partition_ms"] for r in rows(spark, known["out"], "rebalances")}
    assert got == dict(expected)
    # m-1's two partitions were assigned but not consumed from the crash until the session timeout
    # removed it (6 s, less the time since its last heartbeat), then unowned until generation 2.
    anc = {r["generation"]: r["assigned_not_consumed_ms"] for r in rows(spark, known["out"], "rebalances")}
    assert anc[2] >= 2 * 5_000 and anc[1] == anc[3] == anc[4] == 0 and got[2] < 2 * 1_000


def test_partition_time_and_stalls_are_the_cost_folds(spark, known):
    costs = folded(known["events"])
    got = sorted((r["group_id"], r["topic"], r["partition"], r["state"], r["start_ms"], r["end_ms"], r["client_id"],
                  r["member_id"], r["generation"], r["stall_id"], r["ended_by"])
                 for r in rows(spark, known["out"], "partition_time"))
    assert got == sorted((g.group_id, *g.partition, g.state, g.start_ms, g.end_ms, g.client_id, g.member_id,
                          g.generation, g.stall, g.ended_by) for g in costs.segments)
    (stall,) = rows(spark, known["out"], "stalls")
    (want,) = costs.stalls
    assert (stall["client_id"], stall["fault"], stall["stopped_ms"], stall["ended_by"]) == ("m-1", "crash", CRASH_MS,
                                                                                            "session_timeout")
    assert (stall["partitions"], stall["assigned_not_consumed_ms"], stall["unowned_after_ms"], stall["ended_ms"],
            stall["repaired_generation"]) == (len(want.partitions), want.assigned_not_consumed_ms,
                                              want.unowned_after_ms, want.ended_ms, want.repaired_generation) \
        == (2, 2 * (want.ended_ms - CRASH_MS), want.unowned_after_ms, want.ended_ms, 2)
    (run,) = rows(spark, known["out"], "runs")
    total = costs.totals()
    assert (run["consumed_partition_ms"], run["assigned_not_consumed_ms"]) == (total.consumed_ms,
                                                                               total.assigned_not_consumed_ms)


def test_runs_summary_adds_up(spark, known):
    (run,) = rows(spark, known["out"], "runs")
    assert run["events"] == len(known["events"]) and run["malformed_lines"] == 0
    assert run["rebalances"] == 4 and run["stable_generations"] == 4
    reb = rows(spark, known["out"], "rebalances")
    assert run["partitions_moved"] == sum(r["partitions_moved"] for r in reb) == len(rows(spark, known["out"], "movements"))
    assert run["partitions_moved"] == sum(len(r.moved) for r in rebalances(known["events"]))
    assert run["unowned_partition_ms"] == sum(r["unowned_partition_ms"] for r in reb)
    assert run["delivery_mode"] is None
    assert set(known["result"].rows) == set(TABLES)


# ----------------------------------------------------------------------------- deliveries


def test_deliveries_per_record_add_up_to_the_simulators_account(spark, several):
    (account,) = [f for node, ev, _, f in several["alo_events"] if ev == "delivery_account"]
    got = rows(spark, several["out"], "deliveries", several["label"]["alo"])
    assert len(got) == account["produced"]
    assert sum(r["outcome"] == "lost" for r in got) == account["lost"]
    assert sum(r["output"] - 1 for r in got if r["outcome"] == "duplicated") == account["duplicated"]
    assert sum(r["processed"] for r in got) == account["processed"]
    assert all(r["committed"] for r in got) and {r["mode"] for r in got} == {"at-least-once"}
    assert all(r["processed"] >= 1 for r in got)  # at-least-once: every record was processed
    (run,) = rows(spark, several["out"], "runs", several["label"]["alo"])
    assert (run["delivery_mode"], run["lost"], run["duplicated"]) == ("at-least-once", account["lost"], account["duplicated"])


# ----------------------------------------------------------------------------- bad and odd input


BAD_LINES = ["not json at all", '{"ts_ms": 5, "event": "group_stable"', "[1, 2, 3]",
             '{"event": "rebalance_started", "node": "coordinator"}',
             '{"ts_ms": "soon", "event": "x", "node": "coordinator"}']


def copy_with_malformed_lines(run_dir: Path, tmp: Path) -> tuple[Path, Path]:
    """The same run twice, under two parents (so the runs are named by their paths), one copy with
    five malformed lines appended to its coordinator log."""
    dirty, clean = tmp / "a" / run_dir.name, tmp / "b" / run_dir.name
    for copy in (dirty, clean):
        shutil.copytree(run_dir, copy)
    with open(dirty / "coordinator.jsonl", "a") as f:
        f.write("\n".join(BAD_LINES) + "\n")
    return dirty, clean


def test_malformed_lines_are_counted_per_run_and_change_nothing_else(spark, known, several):
    dirty, clean, out = several["label"]["dirty"], several["label"]["clean"], several["out"]
    runs = [r for r in several["result"].runs if r["run"] in (dirty, clean)]
    assert {r["run"]: r["malformed_lines"] for r in runs} == {dirty: 5, clean: 0}
    assert sorted((r["run"], r["file"], r["line"]) for r in rows(spark, out, "malformed")) == sorted(
        (dirty, "coordinator.jsonl", line) for line in BAD_LINES)  # (no other run has any)
    assert [r["rebalances"] for r in runs] == [4, 4]
    for table in ("rebalances", "assignments", "movements", "ownership", "member_sessions"):
        got = rows(spark, out, table)
        expected = len(rows(spark, known["out"], table))
        assert [sum(r["run"] == d for r in got) for d in (dirty, clean)] == [expected, expected], table


def test_an_empty_run_gives_empty_tables(spark, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "coordinator.jsonl").write_text("")
    result = analyze(spark, [str(tmp_path / "empty")], tmp_path / "out")
    assert result.runs == [] and all(n == 0 for n in result.rows.values())


def write_reused_run(run_dir: Path) -> Path:
    """Two coordinators started without a data directory appended to the same files."""
    def lines(t0: int) -> list[dict[str, Any]]:
        g = {"node": "coordinator", "group_id": "g"}
        return [
            {"ts_ms": t0, "event": "coordinator_started", "node": "coordinator", "host": "127.0.0.1", "port": 1,
             "config": {}, "data_dir": None},
            {"ts_ms": t0 + 1, "event": "rebalance_started", **g, "generation_id": 0, "state": "PreparingRebalance",
             "trigger": "member a joined", "cause": "member_joined", "members": ["a"]},
            {"ts_ms": t0 + 5, "event": "generation_completed", **g, "generation_id": 1, "state": "CompletingRebalance",
             "protocol_name": "range", "leader": "a", "members": ["a"], "trigger": "member a joined"},
            {"ts_ms": t0 + 6, "event": "group_stable", **g, "generation_id": 1, "state": "Stable", "leader": "a",
             "protocol_name": "range", "assignments": {"a": [["t", 0]]}, "clients": {"a": "c1"}},
        ]
    run_dir.mkdir()
    (run_dir / "coordinator.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines(1000) + lines(9000)))
    return run_dir


def test_a_reused_run_directory_is_split_into_its_runs(spark, several):
    """Two runs in one directory, each with its own generation 1. (No member logs: stop-the-world
    time is unknown, not 0.)"""
    out, reused = several["out"], several["label"]["reused"]
    both = (reused, f"{reused}#2")
    got = sorted((r["run"], r["generation"], r["start_ms"], r["end_ms"]) for r in rows(spark, out, "rebalances", both))
    assert got == [(reused, 1, 1001, 1006), (f"{reused}#2", 1, 9001, 9006)]
    # Only the coordinator's log: what the members owned, and so the stop-the-world time, is unknown.
    assert {r["unowned_partition_ms"] for r in rows(spark, out, "rebalances", both)} == {None}
    assert {r["assigned_not_consumed_ms"] for r in rows(spark, out, "rebalances", both)} == {None}
    assert {(r["consumed_partition_ms"], r["assigned_not_consumed_ms"]) for r in rows(spark, out, "runs", both)} \
        == {(None, None)}


# ----------------------------------------------------------------------------- a deleted topic


def test_a_deleted_topics_partitions_agree_with_the_fold_in_every_table(spark, several):
    """Two runs of a group on topics t and u, u deleted at 5 s and made again at 7 s (tests/test_costs.py):
    `fresh`, the group rebalanced without u, then gave the new u-0 to b; `stale`, a leader that had
    not seen the deletion assigned u once more first. The tables agree with the fold and the
    tracker read back from the same directories: nothing of u between its deletion and its new
    creation, its assignments and holdings end at the deletion, and the new u-0 moved from nobody."""
    from grouplab.runlog import read_run

    tmp_path, label = several["tmp"], several["label"]  # the runs, and their tables in tmp_path / "out"
    for name in ("fresh", "stale"):
        log = read_run(tmp_path / name)
        costs, tracker = CostTracker(), RebalanceTracker()
        moves = []
        for node, ev in log.events:
            costs.feed(node, ev)
            r = tracker.feed(node, ev)
            moves += [(r.generation, m.partition.topic, m.partition.partition, m.from_member, m.to_member)
                      for m in (r.moved if r is not None else ())]
        costs.finish(log.end_ms)
        got = sorted((r["group_id"], r["topic"], r["partition"], r["state"], r["start_ms"], r["end_ms"], r["client_id"],
                      r["generation"], r["ended_by"]) for r in rows(spark, tmp_path / "out", "partition_time")
                     if r["run"] == label[name])
        assert got == sorted((g.group_id, *g.partition, g.state, g.start_ms, g.end_ms, g.client_id, g.generation,
                              g.ended_by) for g in costs.segments), name
        assert not [r for r in got if r[1] == "u" and r[5] > 5_000 and r[4] < 7_000], name
        owned = sorted((r["client_id"], r["topic"], r["partition"], r["generation"], r["start_ms"], r["end_ms"],
                        r["end_reason"]) for r in rows(spark, tmp_path / "out", "ownership") if r["run"] == label[name])
        assert owned == sorted((h.client_id, *h.partition, h.generation, h.start_ms, h.end_ms, h.end_reason)
                               for h in costs.holdings), name
        assert ("a", "u", 0, 1, 1_010, 5_000, "deleted") in owned
        moved = sorted((r["generation"], r["topic"], r["partition"], r["from_member"], r["to_member"])
                       for r in rows(spark, tmp_path / "out", "movements") if r["run"] == label[name])
        assert moved == sorted(moves), name
        assigned = {(r["generation"], r["topic"], r["partition"]): r["to_ms"]
                    for r in rows(spark, tmp_path / "out", "assignments") if r["run"] == label[name]}
        assert assigned[(1, "u", 0)] == assigned[(1, "u", 1)] == 5_000  # the deletion, not the next rebalance
        assert assigned[(3, "u", 0)] is None and assigned[(1, "t", 0)] in (5_200, 6_000)
    # fresh: the new u-0 came from nobody; stale: from a-1, that the stale generation gave it to
    assert not [r for r in rows(spark, tmp_path / "out", "movements") if r["run"] == label["fresh"] and r["topic"] == "u"]
    assert [(r["generation"], r["from_member"], r["to_member"]) for r in rows(spark, tmp_path / "out", "movements")
            if r["run"] == label["stale"] and r["topic"] == "u"] == [(3, "a-1", "b-1")]


# ----------------------------------------------------------------------------- the command


def test_the_cli_writes_tables_and_a_report_and_refuses_bad_input(spark, known, tmp_path, capsys):
    from grouplab.cli import main

    out = tmp_path / "out"
    assert main(["analyze", str(known["run_dir"]), "--out", str(out), "--master", "local[2]"]) == 0
    assert all((out / t).is_dir() for t in TABLES) and (out / "report.html").is_file()
    assert "known" in capsys.readouterr().out
    assert main(["analyze", str(tmp_path / "nope"), "--out", str(out)]) == 2
    (tmp_path / "no-logs").mkdir()
    assert main(["analyze", str(tmp_path / "no-logs"), "--out", str(out)]) == 2
    assert "no *.jsonl event logs" in " ".join(capsys.readouterr().err.split())



def test_the_cli_speaks_chinese_in_its_table_lines_and_report(spark, known, tmp_path, capsys):
    """`--lang zh`: the runs table, the lines and the whole report (a real run's triggers, causes and
    charts) carry no untranslated English sentence (tests/test_zh_output.py's check)."""
    import re

    from grouplab.cli import main
    from tests.test_zh_analyze import words_of
    from tests.test_zh_output import untranslated

    out = tmp_path / "out"
    assert main(["analyze", str(known["run_dir"]), "--out", str(out), "--master", "local[2]", "--lang", "zh"]) == 0
    said = capsys.readouterr()
    printed = re.sub(r"/\S+", "PATH", said.out + said.err)  # a path is a name, wrapped or not
    assert untranslated(printed) == [], printed
    assert "再均衡" in said.out and "报告" in said.out
    page = (out / "report.html").read_text()
    assert page.startswith("<!doctype html><html lang=zh>")
    words = re.sub(r"/\S+", "PATH", words_of(page))  # the tables' directory is a name
    assert untranslated(words) == [], untranslated(words)
    assert "影响最大的再均衡" in words

# ----------------------------------------------------------------------------- a real-socket run


def record_real_run(run_dir: Path) -> Path:
    """`grouplab run --delivery at-least-once --crash`: three consumers over TCP, one killed
    without LeaveGroup (its session expires), one added; every input record counted."""
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "grouplab.cli", "run", "--consumers", "3", "--topics", "in:3", "--run-dir", str(run_dir),
         "--delivery", "at-least-once", "--records", "50", "--processing-ms", "1", "--crash",
         "--config", "group.initial.rebalance.delay.ms=0", "--consumer-config", "heartbeat.interval.ms=100",
         "--consumer-config", "session.timeout.ms=6000", "--hold", "0.2", "--timeout", "60"],
        capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    return run_dir


def test_a_real_socket_run_with_a_crash_is_analyzed_from_its_wall_clock_logs(spark, several):
    out = several["out"]
    coordinator_lines = [json.loads(x) for x in (several["dirs"]["real"] / "coordinator.jsonl").read_text().splitlines()]
    real = several["label"]["real"]
    (run,) = [r for r in several["result"].runs if r["run"] == real]
    completed = [x for x in coordinator_lines if x["event"] == "generation_completed"]
    assert run["rebalances"] == len(completed) >= 3 and run["malformed_lines"] == 0
    reb = sorted(rows(spark, out, "rebalances", real), key=lambda r: r["generation"])
    assert "session_timeout" in [r["cause"] for r in reb] and reb[0]["cause"] == "member_joined"
    crash = next(r for r in reb if r["cause"] == "session_timeout")
    assert crash["unowned_partition_ms"] > 0 and crash["outcome"] == "stable"
    sessions = rows(spark, out, "member_sessions", real)
    # the crashed one, and the three that left when the run ended
    assert sorted(r["end_reason"] or "-" for r in sessions) == ["left", "left", "left", "session_timeout"]
    crashed = next(r for r in sessions if r["end_reason"] == "session_timeout")
    ends = {r["end_reason"] for r in rows(spark, out, "ownership", real) if r["member_id"] == crashed["member_id"]}
    assert ends == {"removed"}  # it never said goodbye: the coordinator's removal ends its ownership
    # ... and its partitions were assigned but not consumed from its crash until then: that is the
    # crash's cost, charged with the session-timeout rebalance, beside its unowned time. (About the
    # 6 s session: less the time since its last heartbeat, more how late a loaded machine's timer
    # fires; the bounds are loose on purpose.)
    (stall,) = rows(spark, out, "stalls", real)
    assert (stall["fault"], stall["member_id"], stall["ended_by"]) == ("app_crashed", crashed["member_id"],
                                                                       "session_timeout")
    assert stall["partitions"] >= 1 and 3_000 <= stall["ended_ms"] - stall["stopped_ms"] <= 30_000
    assert crash["assigned_not_consumed_ms"] == stall["assigned_not_consumed_ms"] >= stall["partitions"] * 3_000
    assert crash["unowned_partition_ms"] < crash["assigned_not_consumed_ms"]
    deliveries = rows(spark, out, "deliveries", real)
    assert len(deliveries) == 3 * 50 and not [r for r in deliveries if r["outcome"] == "lost"]
    assert (run["delivery_mode"], run["lost"]) == ("at-least-once", 0)


def test_a_run_reached_through_a_symbolic_link_is_read_under_the_links_name(tmp_path):
    """The run's name comes from the files' paths: they must stay under the link as given."""
    from grouplab.pipeline.tables import input_files, run_labels

    (tmp_path / "storm-1").mkdir()
    (tmp_path / "storm-1" / "coordinator.jsonl").write_text("")
    (tmp_path / "latest").symlink_to(tmp_path / "storm-1")
    assert input_files([str(tmp_path / "latest")]) == [str(tmp_path / "latest" / "coordinator.jsonl")]
    assert run_labels([str(tmp_path / "latest")]) == {str(tmp_path / "latest"): "latest"}
