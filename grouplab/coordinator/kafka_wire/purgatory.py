"""Kafka's fetch purgatory: parked Fetches watched per partition, so a step costs work only for
the Fetches that watch a partition it changed, in proportion to what changed.

Kafka parks a Fetch that cannot be answered yet (a DelayedFetch) under a watcher key per
partition it names; an append to a partition checks only the Fetches under that key. Here the
index maps topic -> partition -> the parked Fetches naming it (with their FetchPartition). Each
parked Fetch remembers, per partition that had data to count, where it has counted to and how many
bytes it found; a change to that partition reads only what was appended since (shared by the
Fetches parked at the same place: 500 Fetches at one log end read a new batch once).

The count is Kafka's (DelayedFetch.tryComplete): per partition the bytes from its fetch offset up
to the high watermark (read_committed: the last stable offset), at most its partition_max_bytes;
the Fetch completes when their sum reaches min_bytes, or when a partition errors (its topic
deleted, an offset out of range, an unknown partition, a negative partition_max_bytes). The bytes
are grouplab's measure of what the Broker would return (data_plane.read_fetch): with `as_batches`
(Kafka clients) whole stored batches, a batch v2 header (61 bytes) plus 16 bytes a record and its
key, value and header bytes, so a transaction marker counts and a Fetch positioned at one is
answered at once; grouplab's own record answers count records only.

Compact, because a Fetch may name every partition of a topic and a hundred such may be parked
(issue 22, case 1): a parked Fetch keeps per topic three arrays (partitions sorted, their fetch
offsets and partition_max_bytes), not the request's objects, and the index holds plain ints (a
number per parked Fetch) in dicts the garbage collector does not track; so parking 20,000
partitions adds no object per partition for the collector to walk, and the memory goes back in
a few large blocks when the Fetch is answered or its client goes.

Pure and read-only over the broker's logs: it never creates a log; the listener owns the timers
(max_wait_ms), keeps what it needs to hand the completed Fetches to the Broker, and hands them.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Generic, Hashable, Iterator, TypeVar

from grouplab.coordinator.data_plane import DataPlaneHost
from grouplab.coordinator.partition_log import READ_COMMITTED, LogChanges
from grouplab.protocol.messages import FetchPartition, FetchRequest

K = TypeVar("K", bound=Hashable)


def answers_at_once(req: FetchRequest) -> bool:
    """A Fetch that does not wait: min_bytes <= 0 or max_wait_ms <= 0, or an isolation level the
    Broker refuses (its error is the answer)."""
    return req.min_bytes <= 0 or req.max_wait_ms <= 0 or req.isolation_level not in (0, 1)


def wanted(req: FetchRequest) -> dict[str, dict[int, FetchPartition]]:
    """Each partition once, as read_fetch answers it: a repeat replaces the earlier entry."""
    out: dict[str, dict[int, FetchPartition]] = {}
    for ft in req.topics:
        by_index = out.setdefault(ft.topic, {})
        for fp in ft.partitions:
            by_index[fp.partition] = fp
    return out


class _Reads:
    """One look at the logs (a park, or one step's changes): reads shared by the Fetches it checks."""

    __slots__ = ("broker", "cache")

    def __init__(self, broker: DataPlaneHost) -> None:
        self.broker = broker
        self.cache: dict[tuple, tuple[int, int]] = {}

    def since(self, topic: str, index: int, partition_max_bytes: int, start: int, limit: int,
              isolation_level: int, as_batches: bool) -> tuple[int, int] | None:
        """(where counting got to, the bytes found) reading `topic`-`index` from `start` up to its
        high watermark (read_committed: last stable offset), `limit` bytes at most; None when the
        partition answers with an error."""
        broker = self.broker
        count = broker.topics.partitions.get(topic)
        if count is None or not 0 <= index < count or partition_max_bytes < 0:
            return None
        log = broker.logs.existing(topic, index)
        if log is None:  # no data yet: an empty log, offset 0 only
            return None if start != 0 else (0, 0)
        if start < log.log_start_offset or start > log.log_end_offset:
            return None
        upper = log.last_stable_offset if isolation_level == READ_COMMITTED else log.high_watermark
        if start >= upper or limit <= 0:
            return start, 0
        key = (topic, index, start, limit, isolation_level, as_batches)
        found = self.cache.get(key)
        if found is None:
            if as_batches:
                batches = log.read_batches(start, limit, isolation_level)
                found = (batches.next_offset, batches.size)
            else:
                records = log.read_records(start, limit, isolation_level)
                found = (records.next_offset, records.size)
            self.cache[key] = found
        return found


class _Wanted:
    """What a Fetch names of one topic, as arrays: its partitions sorted (each once, the last
    entry of a repeat, as read_fetch answers it), their fetch offsets and partition_max_bytes."""

    __slots__ = ("partitions", "offsets", "max_bytes")

    def __init__(self, by_index: dict[int, FetchPartition]) -> None:
        order = sorted(by_index)
        self.partitions = array("q", order)
        self.offsets = array("q", (by_index[p].fetch_offset for p in order))
        self.max_bytes = array("q", (by_index[p].partition_max_bytes for p in order))

    def find(self, partition: int) -> int:
        """The position of `partition` in the arrays, or -1."""
        at = bisect_left(self.partitions, partition)
        return at if at < len(self.partitions) and self.partitions[at] == partition else -1


class _Watch:
    """One parked Fetch: what it names (compact), the bytes found so far, in all and per
    partition counted (only partitions that had something to count)."""

    __slots__ = ("min_bytes", "isolation_level", "as_batches", "topics", "counted", "total")

    def __init__(self, req: FetchRequest) -> None:
        self.min_bytes = req.min_bytes
        self.isolation_level = req.isolation_level
        self.as_batches = req.as_batches
        self.topics = {topic: _Wanted(by_index) for topic, by_index in wanted(req).items()}
        self.counted: dict[tuple[str, int], tuple[int, int]] = {}  # partition -> (counted to, bytes)
        self.total = 0

    def partitions(self) -> Iterator[tuple[str, int]]:
        for topic, w in self.topics.items():
            for index in w.partitions:
                yield topic, index

    def look(self, reads: _Reads, topic: str, index: int) -> bool:
        """Count what the partition gained since the last look; True when the Fetch is complete
        (or the partition errors)."""
        w = self.topics.get(topic)
        at = -1 if w is None else w.find(index)
        if w is None or at < 0:
            return False  # not one of ours (the index says it is: never)
        return self._look_at(reads, topic, index, w.offsets[at], w.max_bytes[at])

    def _look_at(self, reads: _Reads, topic: str, index: int, fetch_offset: int, partition_max_bytes: int) -> bool:
        key = (topic, index)
        start, had = self.counted.get(key, (fetch_offset, 0))
        limit = partition_max_bytes - had
        found = reads.since(topic, index, partition_max_bytes, start, limit, self.isolation_level, self.as_batches)
        if found is None:
            return True
        position, size = found
        if size or position != start:
            size = min(size, limit)
            self.total += size
            self.counted[key] = (position, had + size)
        return self.total >= self.min_bytes

    def first_look(self, reads: _Reads) -> bool:
        """Count every partition named (Kafka's first tryComplete); True when complete."""
        for topic, w in self.topics.items():
            for index, offset, most in zip(w.partitions, w.offsets, w.max_bytes):
                if self._look_at(reads, topic, index, offset, most):
                    return True
        return False


def first_look(broker: DataPlaneHost, req: FetchRequest) -> _Watch | None:
    """Count what every partition `req` names holds now: the watch to park, or None when the
    Fetch may be answered at once (as Kafka's first tryComplete)."""
    if answers_at_once(req):
        return None
    watch = _Watch(req)
    return None if watch.first_look(_Reads(broker)) else watch


def fetch_ready(broker: DataPlaneHost, req: FetchRequest) -> bool:
    """May `req` be answered now (an error due, min_bytes reached, or it does not wait)?"""
    return first_look(broker, req) is None


class FetchPurgatory(Generic[K]):
    """Parked Fetches by a key of the caller's (the listener's connection), indexed by partition:
    topic -> partition -> {number of a parked Fetch: None} (ints only: untracked by the collector)."""

    def __init__(self) -> None:
        self._numbers: dict[K, int] = {}
        self._keys: dict[int, K] = {}
        self._watches: dict[int, _Watch] = {}
        self._index: dict[str, dict[int, dict[int, None]]] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._watches)

    def __contains__(self, key: object) -> bool:
        return key in self._numbers

    def watchers(self, topic: str, partition: int) -> list[K]:
        """The keys of the Fetches parked on `topic`-`partition` (for tests and inspection)."""
        return [self._keys[n] for n in self._index.get(topic, {}).get(partition, {})]

    def try_park(self, key: K, req: FetchRequest, broker: DataPlaneHost) -> bool:
        """Park `req` under `key` unless it may be answered now (then nothing is kept): True when
        parked. One look over every partition it names, as Kafka's first tryComplete. Nothing of
        `req` itself is kept."""
        self.remove(key)
        watch = first_look(broker, req)
        if watch is None:
            return False
        number = self._next
        self._next += 1
        self._numbers[key] = number
        self._keys[number] = key
        self._watches[number] = watch
        index = self._index
        for topic, w in watch.topics.items():
            entries = index.setdefault(topic, {})
            for partition in w.partitions:
                watching = entries.get(partition)
                if watching is None:
                    entries[partition] = {number: None}
                else:
                    watching[number] = None
        return True

    def changed(self, broker: DataPlaneHost, changes: LogChanges) -> list[K]:
        """A step changed these partitions and deleted these topics: look again at the Fetches
        watching them (only those), and return, removed from the purgatory, the ones complete."""
        done: dict[int, None] = {}
        index = self._index
        for topic in changes.topics:
            for deleted in index.get(topic, {}).values():
                done.update(deleted)
        reads = _Reads(broker)
        for topic, partition in changes.partitions:
            watching = index.get(topic, {}).get(partition)
            if not watching:
                continue
            for number in watching:
                if number not in done and self._watches[number].look(reads, topic, partition):
                    done[number] = None
        keys = [self._keys[number] for number in done]
        for key in keys:
            self.remove(key)
        return keys

    def remove(self, key: K) -> bool:
        """Forget the Fetch parked under `key` (answered, expired, its client gone), from every
        partition it watched. False if none was parked."""
        number = self._numbers.pop(key, None)
        if number is None:
            return False
        del self._keys[number]
        watch = self._watches.pop(number)
        index = self._index
        for topic, w in watch.topics.items():
            entries = index.get(topic)
            if entries is None:
                continue
            for partition in w.partitions:
                watching = entries.get(partition)
                if watching is not None:
                    watching.pop(number, None)
                    if not watching:
                        del entries[partition]
            if not entries:
                del index[topic]
        return True

    def clear(self) -> None:
        self._numbers.clear()
        self._keys.clear()
        self._watches.clear()
        self._index.clear()
