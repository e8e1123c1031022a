"""The fetch purgatory (coordinator/kafka_wire/purgatory.py), pure, over a Broker's logs: a step
looks only at the Fetches watching a partition it changed, counts only what was appended since
the last look, completes a Fetch at min_bytes or when a partition errors (its topic deleted), and a
Fetch removed (answered, expired, its client gone) leaves nothing in the index."""

from __future__ import annotations

import gc
import sys
from typing import Any

from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.kafka_wire.purgatory import FetchPurgatory
from grouplab.coordinator.partition_log import PartitionLog
from grouplab.protocol.messages import (DeleteTopicsRequest, FetchPartition, FetchRequest, FetchTopic, Record,
                                        RecordBatch)

T0 = 1_700_000_000_000
INT32_MAX = 2**31 - 1


def broker(partitions: int = 4) -> Broker:
    b = Broker(BrokerConfig())
    b.topics.partitions["t"] = partitions
    return b


def fetch(offsets: dict[int, int], min_bytes: int = 1, isolation_level: int = 0, topic: str = "t") -> FetchRequest:
    return FetchRequest([FetchTopic(topic, [FetchPartition(p, o) for p, o in offsets.items()])],
                        max_wait_ms=INT32_MAX, min_bytes=min_bytes, isolation_level=isolation_level, as_batches=True)


def batch(*values: bytes) -> RecordBatch:
    return RecordBatch([Record(v, timestamp=T0) for v in values])


def append(b: Broker, partition: int, *values: bytes) -> None:
    assert b.logs.log("t", partition).append(batch(*values), T0).error_code == 0


def test_a_step_looks_only_at_the_fetches_watching_what_it_changed(monkeypatch: Any) -> None:
    b = broker()
    purgatory: FetchPurgatory[str] = FetchPurgatory()
    assert purgatory.try_park("a", fetch({0: 0}), b)
    assert purgatory.try_park("b", fetch({1: 0}), b)
    assert purgatory.try_park("wide", fetch({p: 0 for p in range(4)}), b)
    assert sorted(purgatory.watchers("t", 1)) == ["b", "wide"]
    b.logs.take_changes()
    append(b, 0, b"x")
    looked: list[tuple[str, int]] = []
    existing = b.logs.existing
    monkeypatch.setattr(b.logs, "existing", lambda t, p: looked.append((t, p)) or existing(t, p))
    assert sorted(purgatory.changed(b, b.logs.take_changes())) == ["a", "wide"]
    assert set(looked) == {("t", 0)}  # partitions 1-3 were not looked at, for "wide" either
    assert "b" in purgatory and len(purgatory) == 1


def test_a_fetch_completes_when_what_it_watches_adds_up_to_min_bytes() -> None:
    b = broker()
    purgatory: FetchPurgatory[str] = FetchPurgatory()
    value = b"v" * 100  # a batch of one record: 61 + 16 + 100 = 177 bytes
    append(b, 0, value)
    assert purgatory.try_park("f", fetch({0: 0, 1: 0}, min_bytes=500), b)  # 177 already there
    b.logs.take_changes()
    append(b, 1, value)
    assert purgatory.changed(b, b.logs.take_changes()) == []  # 354
    append(b, 0, value)
    assert purgatory.changed(b, b.logs.take_changes()) == ["f"]  # 531 >= 500
    assert len(purgatory) == 0 and purgatory.watchers("t", 0) == []


def test_a_look_reads_only_what_was_appended_since_the_last_and_once_for_fetches_at_one_place(
        monkeypatch: Any) -> None:
    b = broker()
    for _ in range(3):
        append(b, 0, b"old")
    purgatory: FetchPurgatory[int] = FetchPurgatory()
    for key in range(500):  # parked at the log end of one partition, waiting for far more than comes
        assert purgatory.try_park(key, fetch({0: 3}, min_bytes=INT32_MAX), b)
    reads: list[int] = []
    read_batches = PartitionLog.read_batches
    monkeypatch.setattr(PartitionLog, "read_batches",
                        lambda self, offset, *a, **k: reads.append(offset) or read_batches(self, offset, *a, **k))
    b.logs.take_changes()
    for n in range(3, 6):
        append(b, 0, b"new")
        assert purgatory.changed(b, b.logs.take_changes()) == []
        assert reads == [n]  # one read of the one new batch, for all 500
        reads.clear()


def test_read_committed_completes_at_the_marker_that_moves_the_last_stable_offset() -> None:
    b = broker()
    pid = b.logs.allocate_producer_id()
    log = b.logs.log("t", 0)
    log.append(RecordBatch([Record(b"x", timestamp=T0)], pid, 0, 0, True), T0)
    purgatory: FetchPurgatory[str] = FetchPurgatory()
    assert not purgatory.try_park("uncommitted", fetch({0: 0}), b)  # the open batch is there to read
    assert purgatory.try_park("committed", fetch({0: 0}, isolation_level=1), b)  # the LSO is 0
    b.logs.take_changes()
    log.append_marker(pid, 0, True, T0)
    assert purgatory.changed(b, b.logs.take_changes()) == ["committed"]


def test_a_fetch_on_a_deleted_topic_completes() -> None:
    b = broker()
    b.topics.partitions["other"] = 1
    purgatory: FetchPurgatory[str] = FetchPurgatory()
    assert purgatory.try_park("t", fetch({0: 0, 3: 0}), b)
    assert purgatory.try_park("other", fetch({0: 0}, topic="other"), b)
    b.logs.take_changes()
    b.handle("DeleteTopics", DeleteTopicsRequest(topic_names=["t"]), RequestContext(None), T0)
    assert purgatory.changed(b, b.logs.take_changes()) == ["t"]
    assert purgatory.watchers("t", 3) == [] and purgatory.watchers("other", 0) == ["other"]


def test_a_fetch_that_errors_or_has_enough_is_not_parked_and_looking_creates_no_log() -> None:
    b = broker()
    purgatory: FetchPurgatory[str] = FetchPurgatory()
    assert not purgatory.try_park("unknown", fetch({9: 0}), b)
    assert not purgatory.try_park("out of range", fetch({0: 5}), b)
    assert not purgatory.try_park("at once", fetch({0: 0}, min_bytes=0), b)
    assert purgatory.try_park("waits", fetch({p: 0 for p in range(4)}), b)
    assert len(purgatory) == 1 and b.logs.logs() == {}


def test_a_removed_fetch_leaves_no_index_entry() -> None:
    """Its client gone, or its max_wait_ms over: every partition it watched forgets it."""
    b = broker(partitions=1000)
    purgatory: FetchPurgatory[str] = FetchPurgatory()
    wide = fetch({p: 0 for p in range(1000)})
    assert purgatory.try_park("wide", wide, b)
    assert purgatory.try_park("narrow", fetch({7: 0}), b)
    assert purgatory.remove("wide")
    assert not purgatory.remove("wide")
    assert all(purgatory.watchers("t", p) == [] for p in range(1000) if p != 7)
    assert purgatory.watchers("t", 7) == ["narrow"]
    purgatory.remove("narrow")
    assert purgatory._index == {} and len(purgatory) == 0


def test_a_parked_wide_fetch_adds_no_object_per_partition_for_the_collector() -> None:
    """Issue 22, case 1: a hundred Fetches over 20,000 partitions parked at once made every full
    collection walk millions of objects. Parked, a Fetch keeps arrays, and the index plain ints in
    dicts the collector does not track; nothing of the request object is kept."""
    b = broker(partitions=5000)
    purgatory: FetchPurgatory[str] = FetchPurgatory()
    gc.collect()
    before = len(gc.get_objects())
    wide = fetch({p: 0 for p in range(5000)})
    assert purgatory.try_park("wide", wide, b)
    referrers = sys.getrefcount(wide.topics[0].partitions[0])
    del wide
    gc.collect()
    assert len(gc.get_objects()) - before < 50  # not 5,000 or more
    assert referrers == 2  # its list and getrefcount's argument: the purgatory keeps no reference
    assert not gc.is_tracked(purgatory._index["t"][4999])


def test_a_repeated_partition_is_watched_once_from_its_last_entry() -> None:
    """As read_fetch answers a partition named twice: the last entry's fetch offset counts."""
    b = broker()
    append(b, 0, b"a", b"b")  # offsets 0, 1
    purgatory: FetchPurgatory[str] = FetchPurgatory()
    twice = FetchRequest([FetchTopic("t", [FetchPartition(0, 0), FetchPartition(0, 2)])], max_wait_ms=INT32_MAX,
                         min_bytes=1, as_batches=True)
    assert purgatory.try_park("f", twice, b)  # at the log end (2): nothing to count yet
    assert purgatory.watchers("t", 0) == ["f"]
    append(b, 0, b"c")
    assert purgatory.changed(b, b.logs.take_changes()) == ["f"]
