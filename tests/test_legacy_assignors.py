"""The ZooKeeper-era assignors over consumer thread ids (consumer/legacy/, docs/legacy.md §2): the
seed notes' worked examples written out, roundrobin's refusal, properties over random groups, and
`grouplab assign --streams`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.consumer.legacy.range import assign_range
from grouplab.consumer.legacy.roundrobin import RoundRobinRefused, assign_roundrobin, java_string_hash, old_partition_order
from grouplab.consumer.legacy.threads import ThreadId, by_consumer, sorted_threads
from grouplab.protocol.types import TopicPartition

ROOT = Path(__file__).resolve().parent.parent


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


def test_notes_example_two_consumers_two_threads_five_partitions() -> None:
    # The notes' figure: P0→C1_0, P1→C1_0, P2→C1_1, P3→C2_0, P4→C2_1 (the notes print the last as
    # "P3→C2_1", a typo: docs/design.md §5).
    assert assign_range({"t": 5}, {"C1": {"t": 2}, "C2": {"t": 2}}) == {
        "C1-0": tps("t", 0, 1), "C1-1": tps("t", 2), "C2-0": tps("t", 3), "C2-1": tps("t", 4)}


def test_range_ten_partitions_three_single_stream_consumers() -> None:
    # The notes' walk-through of the formula (aaa, bbb, ccc on ten partitions).
    assert assign_range({"t": 10}, {"ccc": {"t": 1}, "aaa": {"t": 1}, "bbb": {"t": 1}}) == {
        "aaa-0": tps("t", 0, 1, 2, 3), "bbb-0": tps("t", 4, 5, 6), "ccc-0": tps("t", 7, 8, 9)}


def test_range_is_per_topic_over_that_topics_threads() -> None:
    # C2 reads only t1: t0's threads are C1's alone.
    result = assign_range({"t0": 3, "t1": 4}, {"C1": {"t0": 1, "t1": 1}, "C2": {"t1": 1}})
    assert result == {"C1-0": tps("t0", 0, 1, 2) + tps("t1", 0, 1), "C2-0": tps("t1", 2, 3)}


def test_thread_ids_sort_as_text() -> None:
    threads = [ThreadId("c", n) for n in range(12)]
    assert [str(t) for t in sorted_threads(threads)][:4] == ["c-0", "c-1", "c-10", "c-11"]


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -2147483648  # Java's famous MIN_VALUE hash


def test_roundrobin_deals_in_hash_order_over_sorted_threads() -> None:
    order = old_partition_order({"t0": 3, "t1": 3}, ["t0", "t1"])
    assert sorted(order) == tps("t0", 0, 1, 2) + tps("t1", 0, 1, 2)
    hashes = [java_string_hash(f"[{tp.topic},{tp.partition}]") for tp in order]
    assert hashes == sorted(hashes)
    result = assign_roundrobin({"t0": 3, "t1": 3}, {"C0": {"t0": 1, "t1": 1}, "C1": {"t0": 1, "t1": 1}})
    assert result == {"C0-0": order[0::2], "C1-0": order[1::2]}


def test_roundrobin_refuses_different_topics() -> None:
    with pytest.raises(RoundRobinRefused, match="same topics: C1 has t0, t1, C2 has t0"):
        assign_roundrobin({"t0": 2, "t1": 2}, {"C1": {"t0": 1, "t1": 1}, "C2": {"t0": 1}})


def test_roundrobin_refuses_different_stream_counts_within_a_consumer() -> None:
    with pytest.raises(RoundRobinRefused, match="same stream count.*C1 has t0:2, t1:1"):
        assign_roundrobin({"t0": 2, "t1": 2}, {"C1": {"t0": 2, "t1": 1}, "C2": {"t0": 2, "t1": 1}})


def test_roundrobin_allows_consumers_with_different_stream_counts() -> None:
    # Kafka's check compares thread sets per topic: C1 with 2 streams of each and C2 with 1 pass.
    result = assign_roundrobin({"t": 6}, {"C1": {"t": 2}, "C2": {"t": 1}})
    assert sorted(len(ps) for ps in result.values()) == [2, 2, 2]


groups = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d", "e"]),
    st.dictionaries(st.sampled_from(["t0", "t1", "t2"]), st.integers(1, 3), min_size=1),
    min_size=1)
sizes = st.fixed_dictionaries({"t0": st.integers(1, 12), "t1": st.integers(1, 12), "t2": st.integers(1, 12)})


@settings(max_examples=200, deadline=None)
@given(groups, sizes)
def test_range_gives_every_partition_to_exactly_one_subscribed_thread(group: dict, size: dict) -> None:
    result = assign_range(size, group)
    owners = Counter(tp for ps in result.values() for tp in ps)
    subscribed = {t for counts in group.values() for t in counts}
    assert set(owners) == {TopicPartition(t, p) for t in subscribed for p in range(size[t])}
    assert set(owners.values()) == {1}
    for thread, partitions in result.items():
        consumer, _, n = thread.rpartition("-")
        for tp in partitions:
            assert int(n) < group[consumer][tp.topic]  # only a thread that reads that topic
    for topic in subscribed:  # per topic, counts over that topic's threads differ by at most one
        threads = [f"{c}-{n}" for c, counts in group.items() for n in range(counts.get(topic, 0))]
        counts = [sum(tp.topic == topic for tp in result[t]) for t in threads]
        assert max(counts) - min(counts) <= 1


@settings(max_examples=200, deadline=None)
@given(groups, sizes)
def test_roundrobin_balances_identical_subscriptions_or_refuses(group: dict, size: dict) -> None:
    try:
        result = assign_roundrobin(size, group)
    except RoundRobinRefused:
        topic_sets = {frozenset(c) for c in group.values()}
        assert len(topic_sets) > 1 or any(len(set(c.values())) > 1 for c in group.values())
        return
    owners = Counter(tp for ps in result.values() for tp in ps)
    subscribed = {t for counts in group.values() for t in counts}
    assert set(owners) == {TopicPartition(t, p) for t in subscribed for p in range(size[t])}
    assert set(owners.values()) == {1}
    counts = [len(ps) for ps in result.values()]
    assert max(counts) - min(counts) <= 1
    assert sum(len(ps) for ps in by_consumer(result, group).values()) == sum(owners.values())


def grouplab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grouplab.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_cli_assign_streams_json_is_the_notes_example() -> None:
    proc = grouplab("assign", "--assignor", "range", "--topics", "t:5", "--member", "C1=t", "--member", "C2=t",
                    "--streams", "2", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"C1-0": [["t", 0], ["t", 1]], "C1-1": [["t", 2]], "C2-0": [["t", 3]],
                                       "C2-1": [["t", 4]]}


def test_cli_assign_streams_table_names_threads() -> None:
    proc = grouplab("assign", "--assignor", "range", "--topics", "t:5", "--member", "C1=t", "--member", "C2=t",
                    "--streams", "2")
    assert proc.returncode == 0, proc.stderr
    assert "thread" in proc.stdout and "C1-1" in proc.stdout and "C1: t[0,1,2] · C2: t[3,4]" in proc.stdout


@pytest.mark.parametrize("args, words", [
    (["--assignor", "roundrobin", "--member", "C1=t:2,u:1", "--member", "C2=t"], ["roundrobin", "stream count"]),
    (["--assignor", "roundrobin", "--member", "C1=t,u", "--member", "C2=t", "--streams", "1"], ["same topics"]),
    (["--assignor", "sticky", "--member", "C1=t", "--streams", "2"], ["sticky", "range, roundrobin"]),
    (["--assignor", "range", "--member", "C1=t:0"], ["STREAMS"]),
    (["--assignor", "range", "--member", "C1=v:1"], ["'v'", "--topics"]),
])
def test_cli_assign_streams_mistakes(args: list[str], words: list[str]) -> None:
    proc = grouplab("assign", "--topics", "t:5,u:2", *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    for word in words:
        assert word in proc.stderr
