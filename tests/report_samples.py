"""Hand-built report data (no Spark) for grouplab analyze's page in any language."""
from __future__ import annotations

from grouplab.pipeline.report import Delivery, Gantt, Group, Run, band_ends


def reb(gen, cause, trigger, start, join, sync, outcome="stable", unowned=4000, idle=1500, moved=2):
    return {"run": "run-1", "group_id": "g1", "generation": gen, "cause": cause, "trigger": trigger,
            "start_ms": start, "join_end_ms": start + join, "end_ms": None if sync is None else start + join + sync,
            "join_ms": join, "sync_ms": sync, "duration_ms": None if sync is None else join + sync,
            "outcome": outcome, "members_before": 1, "members": 2, "partitions_revoked": 1, "partitions_moved": moved,
            "unowned_partition_ms": unowned, "assigned_not_consumed_ms": idle, "max_unowned_ms": 900}


def sample_runs() -> list[Run]:
    rebs = [reb(1, "member_joined", "member m-0 joined", 1000, 50, 10), reb(2, "session_timeout", "m-1", 5000, 300, None, "interrupted"),
            reb(3, "member_left", "m-1 left (closing)", 9000, 200, 20, unowned=9000)]
    band_ends(rebs)
    top = sorted(rebs, key=lambda r: -r["unowned_partition_ms"])
    for i, r in enumerate(top, 1):
        r["rank"] = i
    intervals = [{"topic": "t", "partition": p, "client_id": f"m-{p % 2}", "start_ms": 1100 + p, "end_ms": 8000,
                  "end_reason": "revoked"} for p in range(4)]
    gantt = Gantt(rows=[("t", p) for p in range(4)], intervals=intervals, partitions_total=9, intervals_total=40,
                  intervals_shown=4, window=(1000, 9000), window_generation=3,
                  idle=[{"topic": "t", "partition": 0, "client_id": "m-0", "start_ms": 6000, "end_ms": 7000}],
                  stops=[{"client_id": "m-0", "fault": "crash", "stopped_ms": 6000}])
    group = Group("g1", rebs, top, {3: [("m-1", "owner_gone", 3), ("m-0", "rebalanced", 1)]}, gantt)
    other = Group("g2", [], [])
    summary = {"run": "run-1", "events": 1234, "malformed_lines": 2, "groups": 2, "first_ms": 0, "last_ms": 12000,
               "rebalances": 3, "stable_generations": 2, "partitions_moved": 6, "unowned_partition_ms": 17000,
               "assigned_not_consumed_ms": 4500, "rebalance_p50_ms": 60, "rebalance_p99_ms": 220,
               "max_rebalance_ms": 220, "delivery_mode": "at-least-once", "records": 100, "lost": 1, "duplicated": 3}
    delivery = Delivery("at-least-once", {"once": 96, "lost": 1, "duplicated": 3},
                        [{"topic": "t", "partition": 0, "records": 50, "lost": 1, "duplicated": 3}], 4,
                        [(0, 1), (1, 96), (2, 3)])
    a = Run("run-1", summary, [group, other], delivery, [("m-0.jsonl", 2)], 3,
            [{"run": "run-1", "file": "m-0.jsonl", "line": "{not json"}])
    b = Run("run-2", None)
    return [a, b]
