"""What a ZooKeeper-era run counts, one account for the simulator (grouplab/zk/sim.py) and the
real-time run (grouplab/zk/run.py): who fetches each partition and the partition-milliseconds
nobody did (both hear of fetchers through the driver's listener, consumer/legacy/driver.py), and
what one change of the script cost (`grouplab compare`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from grouplab.consumer.legacy.driver import LegacyDriver
from grouplab.protocol.types import TopicPartition


class Fetching:
    """`topics` is the run's partition count per topic (shared: a topic that grows is seen at once).
    `account(now_ms, subscribed)` charges the time since the last call: one partition-millisecond
    per millisecond for every partition of a subscribed topic that no consumer fetched."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics
        self.fetchers: dict[TopicPartition, set[str]] = {}
        self.unowned_ms = 0
        self._last_ms: int | None = None

    def started(self, consumer_id: str, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.fetchers.setdefault(tp, set()).add(consumer_id)

    def stopped(self, consumer_id: str, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.fetchers.get(tp, set()).discard(consumer_id)

    def partitions(self, subscribed: set[str]) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, n in sorted(self.topics.items()) if t in subscribed for p in range(n)]

    def idle(self, subscribed: set[str]) -> int:
        """Partitions of the subscribed topics that no consumer fetches now."""
        return sum(1 for tp in self.partitions(subscribed) if not self.fetchers.get(tp))

    def account(self, now_ms: int, subscribed: set[str]) -> None:
        if self._last_ms is not None and now_ms > self._last_ms:
            self.unowned_ms += self.idle(subscribed) * (now_ms - self._last_ms)
        if self._last_ms is None or now_ms > self._last_ms:
            self._last_ms = now_ms


@dataclass
class ZkChange:
    """What one change (join, leave, crash, add_partitions, or a fault: pause, delay_watches,
    slow_release; changes at the same moment count as one) cost: counted from the change until
    everything was quiet and every partition fetched, or, if that never came, until the next
    change or the end of the run."""

    what: str  # e.g. "join c-2", "pause c-1 9000 ms"; changes at one moment joined by "; "
    at_ms: int
    settle_ms: int | None  # None: it never settled (a rebalance gave up, or the next change came first)
    reads: int
    writes: int
    offset_ops: int  # of the reads and writes, those of committed offsets
    rebalances: dict[str, int]  # per consumer: the rebalances it went through (done or given up)
    attempts_failed: int  # rebalance attempts that failed, most of them claim conflicts
    gave_up: int
    unowned_ms: int  # partition-milliseconds with no consumer fetching


@dataclass(frozen=True)
class Counters:
    """A run's counters at one moment (every consumer's, the stopped ones' too): a change is what
    they grew by."""

    at_ms: int
    reads: int
    writes: int
    offset_ops: int
    rebalances: dict[str, int]
    attempts_failed: int
    gave_up: int
    unowned_ms: int

    @staticmethod
    def of(now_ms: int, drivers: Iterable[LegacyDriver], unowned_ms: int) -> "Counters":
        drivers = list(drivers)
        rebalances: dict[str, int] = {}
        for d in drivers:
            rebalances[d.consumer_id] = rebalances.get(d.consumer_id, 0) + d.machine.rebalances + d.machine.gave_up
        return Counters(now_ms, sum(d.reads for d in drivers), sum(d.writes for d in drivers),
                        sum(d.offset_ops for d in drivers), rebalances,
                        sum(d.machine.attempts_failed for d in drivers), sum(d.machine.gave_up for d in drivers),
                        unowned_ms)

    def since(self, start: "Counters", settled: bool, what: str = "") -> ZkChange:
        return ZkChange(what, start.at_ms, self.at_ms - start.at_ms if settled else None, self.reads - start.reads,
                        self.writes - start.writes, self.offset_ops - start.offset_ops,
                        {c: n - start.rebalances.get(c, 0) for c, n in sorted(self.rebalances.items())
                         if n > start.rebalances.get(c, 0)},
                        self.attempts_failed - start.attempts_failed, self.gave_up - start.gave_up,
                        self.unowned_ms - start.unowned_ms)
