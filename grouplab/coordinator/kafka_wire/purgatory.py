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

Pure and read-only over the broker's logs: it never creates a log; the listener owns the timers
(max_wait_ms) and hands the completed Fetches to the Broker.
"""

from __future__ import annotations

from typing import Generic, Hashable, TypeVar

from grouplab.coordinator.data_plane import DataPlaneHost
from grouplab.coordinator.partition_log import READ_COMMITTED, LogChanges, fetched_size
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

    def since(self, topic: str, fp: FetchPartition, start: int, limit: int, isolation_level: int,
              as_batches: bool) -> tuple[int, int] | None:
        """(where counting got to, the bytes found) reading `topic`-`fp.partition` from `start`
        up to its high watermark (read_committed: last stable offset), `limit` bytes at most;
        None when the partition answers with an error."""
        broker = self.broker
        index = fp.partition
        count = broker.topics.partitions.get(topic)
        if count is None or not 0 <= index < count or fp.partition_max_bytes < 0:
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
                found = (records.next_offset, sum(fetched_size(r) for r in records.records))
            self.cache[key] = found
        return found


class _Watch:
    """One parked Fetch: the bytes it has found so far, in all and per partition counted."""

    __slots__ = ("req", "counted", "total")

    def __init__(self, req: FetchRequest) -> None:
        self.req = req
        self.counted: dict[tuple[str, int], tuple[int, int]] = {}  # partition -> (counted to, bytes)
        self.total = 0

    def look(self, reads: _Reads, topic: str, fp: FetchPartition) -> bool:
        """Count what the partition gained since the last look; True when the Fetch is complete."""
        key = (topic, fp.partition)
        start, had = self.counted.get(key, (fp.fetch_offset, 0))
        limit = fp.partition_max_bytes - had
        found = reads.since(topic, fp, start, limit, self.req.isolation_level, self.req.as_batches)
        if found is None:
            return True
        position, size = found
        if size or position != start:
            size = min(size, limit)
            self.total += size
            self.counted[key] = (position, had + size)
        return self.total >= self.req.min_bytes


def first_look(broker: DataPlaneHost, req: FetchRequest,
               by_topic: dict[str, dict[int, FetchPartition]] | None = None) -> _Watch | None:
    """Count what every partition `req` names holds now: the watch to park, or None when the
    Fetch may be answered at once (as Kafka's first tryComplete)."""
    if answers_at_once(req):
        return None
    watch = _Watch(req)
    reads = _Reads(broker)
    for topic, by_index in (wanted(req) if by_topic is None else by_topic).items():
        for fp in by_index.values():
            if watch.look(reads, topic, fp):
                return None
    return watch


def fetch_ready(broker: DataPlaneHost, req: FetchRequest) -> bool:
    """May `req` be answered now (an error due, min_bytes reached, or it does not wait)?"""
    return first_look(broker, req) is None


class FetchPurgatory(Generic[K]):
    """Parked Fetches by a key of the caller's (the listener's connection), indexed by partition."""

    def __init__(self) -> None:
        self._watches: dict[K, _Watch] = {}
        self._index: dict[str, dict[int, dict[K, FetchPartition]]] = {}

    def __len__(self) -> int:
        return len(self._watches)

    def __contains__(self, key: object) -> bool:
        return key in self._watches

    def watchers(self, topic: str, partition: int) -> list[K]:
        """The keys of the Fetches parked on `topic`-`partition` (for tests and inspection)."""
        return list(self._index.get(topic, {}).get(partition, {}))

    def try_park(self, key: K, req: FetchRequest, broker: DataPlaneHost) -> bool:
        """Park `req` under `key` unless it may be answered now (then nothing is kept): True when
        parked. One look over every partition it names, as Kafka's first tryComplete."""
        self.remove(key)
        by_topic = wanted(req)
        watch = first_look(broker, req, by_topic)
        if watch is None:
            return False
        self._watches[key] = watch
        index = self._index
        for topic, by_index in by_topic.items():
            entries = index.setdefault(topic, {})
            for partition, fp in by_index.items():
                entries.setdefault(partition, {})[key] = fp
        return True

    def changed(self, broker: DataPlaneHost, changes: LogChanges) -> list[K]:
        """A step changed these partitions and deleted these topics: look again at the Fetches
        watching them (only those), and return, removed from the purgatory, the ones complete."""
        done: dict[K, None] = {}
        index = self._index
        for topic in changes.topics:
            for deleted in index.get(topic, {}).values():
                done.update(dict.fromkeys(deleted))
        reads = _Reads(broker)
        for topic, partition in changes.partitions:
            watching = index.get(topic, {}).get(partition)
            if not watching:
                continue
            for key, fp in watching.items():
                if key not in done and self._watches[key].look(reads, topic, fp):
                    done[key] = None
        for key in done:
            self.remove(key)
        return list(done)

    def remove(self, key: K) -> FetchRequest | None:
        """Forget the Fetch parked under `key` (answered, expired, its client gone), from every
        partition it watched. Returns it, or None if none was parked."""
        watch = self._watches.pop(key, None)
        if watch is None:
            return None
        index = self._index
        for ft in watch.req.topics:
            entries = index.get(ft.topic)
            if entries is None:
                continue
            for fp in ft.partitions:
                watching = entries.get(fp.partition)
                if watching is not None:
                    watching.pop(key, None)
                    if not watching:
                        del entries[fp.partition]
            if not entries:
                del index[ft.topic]
        return watch.req

    def clear(self) -> None:
        self._watches.clear()
        self._index.clear()
