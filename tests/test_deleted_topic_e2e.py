"""A topic deleted under a consuming group, end to end: two kafka-python consumers of one group on
topics t and u over grouplab.testing's Cluster; u is deleted (DeleteTopics) while they consume.
Kafka-wise the deleted partitions stop existing: the cost fold (grouplab/costs.py) ends their
lanes at the `topic_deleted`, so once the group has rebalanced without u no unowned time accrues
(before, u's partitions were unowned for the rest of the run), and what `grouplab plot` and
`explain` read back from the run directory says the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from grouplab.costs import CONSUMED, CostTracker
from grouplab.runlog import read_run
from grouplab.testing import Cluster
from tests.kafka_python_app import PollingConsumer

pytestmark = pytest.mark.e2e

T = [("t", 0), ("t", 1)]


def test_a_deleted_topic_accrues_no_time_after_its_deletion(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # No auto-creation: a consumer still subscribed to u would otherwise make it again at once.
    config = {"group.min.session.timeout.ms": 1000, "auto.create.topics.enable": "false"}
    with Cluster(config=config, topics={"t": 2, "u": 2}, run_dir=run_dir) as cluster:
        consumers = [PollingConsumer(cluster.bootstrap, ["t", "u"], "g", f"c{i}", metadata_max_age_ms=1000)
                     for i in (1, 2)]
        try:
            first = cluster.wait_stable("g", members=2, timeout=60)
            assert sorted(tp for ps in first.assignments.values() for tp in ps) == [*T, ("u", 0), ("u", 1)]
            cluster.wait_for(lambda: sorted(tp for c in consumers for tp in c.assigned) == [*T, ("u", 0), ("u", 1)],
                             timeout=60, what="both consumers hold their t and u partitions")

            cluster.delete_topic("u")
            (deleted,) = cluster.events(event="topic_deleted")
            deleted_ms = deleted["ts_ms"]
            # The leader sees u gone at its next metadata refresh and rejoins: a generation without u.
            after = cluster.wait_stable("g", members=2, timeout=60, after_generation=first.generation)
            assert sorted(tp for ps in after.assignments.values() for tp in ps) == T
            cluster.wait_for(lambda: sorted(tp for c in consumers for tp in c.assigned) == T, timeout=60,
                             what="the consumers hold t's partitions only")

            # Settled: both t partitions consumed, u's gone. Unowned time no longer grows (u's two
            # partitions used to be counted unowned from here to the end of the run).
            settled = cluster.partition_time("g")
            heartbeats = len(cluster.requests(apis=["Heartbeat"]))
            cluster.wait_for(lambda: len(cluster.requests(apis=["Heartbeat"])) >= heartbeats + 4, timeout=60,
                             what="four more heartbeats")
            later = cluster.partition_time("g")
            assert later.unowned_ms == settled.unowned_ms and later.assigned_not_consumed_ms == 0
            assert later.total_ms > settled.total_ms and later.partitions == 4
            assert later.consumed_ms - settled.consumed_ms == later.total_ms - settled.total_ms
            assert "g" in cluster.report("g")
        finally:
            for c in consumers:
                c.stop()

    # Read back from the run directory, as `grouplab plot` and `analyze` read it.
    log = read_run(run_dir)
    costs = CostTracker()
    for node, ev in log.events:
        costs.feed(node, ev)
    costs.finish(log.end_ms)
    u_segments = [s for s in costs.segments if s.partition.topic == "u"]
    assert u_segments and max(s.end_ms for s in u_segments) == deleted_ms
    assert {s.ended_by for s in u_segments if s.end_ms == deleted_ms} == {"deleted"}
    assert {(s.state, s.ended_by) for s in u_segments if s.end_ms == deleted_ms} == {(CONSUMED, "deleted")}
    u_held = [h for h in costs.holdings if h.partition.topic == "u"]
    # Each u partition's last holding ends at the deletion; an earlier one (a rebalance before it,
    # as a slow machine may see) ended before it: none outlives u.
    last = {}
    for h in u_held:
        if h.partition not in last or h.start_ms > last[h.partition].start_ms:
            last[h.partition] = h
    assert u_held and all(h.end_ms <= deleted_ms for h in u_held)
    assert {(h.end_ms, h.end_reason) for h in last.values()} == {(deleted_ms, "deleted")} and len(last) == 2
    t_ends = {s.end_ms for s in costs.segments if s.partition.topic == "t"}
    assert max(t_ends) == log.end_ms and log.end_ms is not None and log.end_ms > deleted_ms

    from grouplab.teach.explain import narrate_run, text_lines
    from grouplab.teach.catalog import Catalog

    story = narrate_run(run_dir, "en")
    text = "\n".join(line for _, line in text_lines(story, story.steps, Catalog("en")))
    assert "topic u is deleted: its 2 partitions and their records are gone" in text
