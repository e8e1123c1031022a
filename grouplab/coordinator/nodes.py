"""The brokers of a grouplab cluster and who leads what, pure (docs/protocol.md §12).

grouplab's brokers share one store, as if every partition were replicated to all of them
(placement.py gives each partition its replica order). What differs between brokers is which are
live and which leads each partition: a request for a partition or a group reaches the right broker
or is refused as Kafka refuses it. This class keeps that state and changes it on the three inputs
Kafka's controller acts on: a broker going down, a broker coming back, and a preferred-leader
election. Each change returns the partitions whose leader moved, with their new leader epoch;
the Broker turns the moves of `__consumer_offsets` partitions into coordinator moves.

State: `live` (node ids), and for each partition whose leader is not its preferred one, that
leader (`_leaders`), and for each partition whose leader ever changed, its leader epoch
(`_epochs`; Kafka's leader epoch, bumped on every change, which clients compare to drop stale
Metadata). Partitions never touched cost nothing, so 100,000 partitions on three healthy brokers
hold no state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping

from grouplab.coordinator.placement import NO_LEADER, first_live, preferred_leader, replicas

Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LeaderMove:
    """Partition (topic, index) is now led by `new` (NO_LEADER: by none), at `epoch`."""

    topic: str
    partition: int
    old: int
    new: int
    epoch: int


class NodeError(ValueError):
    """A node id that is no broker of this cluster, or a change that cannot be made to it."""


class Nodes:
    """Brokers 0..count-1, which are live, and each partition's leader and leader epoch."""

    __slots__ = ("count", "live", "_leaders", "_epochs")

    def __init__(self, count: int = 1) -> None:
        if count < 1:
            raise NodeError(f"a cluster has at least one broker, not {count}")
        self.count = count
        self.live: set[int] = set(range(count))
        self._leaders: dict[Partition, int] = {}
        self._epochs: dict[Partition, int] = {}

    @property
    def many(self) -> bool:
        """More than one broker: only then can a request reach the wrong one."""
        return self.count > 1

    def check(self, node: int) -> None:
        if not 0 <= node < self.count:
            raise NodeError(f"no broker {node}: this cluster's brokers are 0..{self.count - 1}")

    # ------------------------------------------------------------------ reading

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader: its override (set when its leader went down), else its preferred
        leader."""
        node = self._leaders.get((topic, partition))
        if node is not None:
            return node
        preferred = preferred_leader(partition, self.count)
        # A partition created while its preferred leader was down is led by its first live replica.
        return preferred if preferred in self.live else first_live(partition, self.count, self.live)

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self._epochs.get((topic, partition), 0)

    def replicas(self, partition: int) -> list[int]:
        return replicas(partition, self.count)

    def isr(self, partition: int) -> list[int]:
        """The in-sync replicas: every live replica (one shared store: a live broker is in sync)."""
        return [n for n in replicas(partition, self.count) if n in self.live]

    def offline(self, partition: int) -> list[int]:
        return [n for n in replicas(partition, self.count) if n not in self.live]

    # ------------------------------------------------------------------ changing

    def down(self, node: int, partitions: Iterable[Partition]) -> list[LeaderMove]:
        """Broker `node` stops: each of `partitions` it led moves to its first live replica."""
        self.check(node)
        if node not in self.live:
            raise NodeError(f"broker {node} is already down")
        moving = [tp for tp in partitions if self.leader(*tp) == node]
        self.live.discard(node)
        return self._move(moving, lambda tp: first_live(tp[1], self.count, self.live), node)

    def up(self, node: int, partitions: Iterable[Partition]) -> list[LeaderMove]:
        """Broker `node` is back: live again, leading nothing it did not lead until an election
        gives it back its preferred partitions (Kafka's does, on auto.leader.rebalance.enable's
        timer), except the partitions of `partitions` that had no leader at all (every broker was
        down), which it leads at once."""
        self.check(node)
        if node in self.live:
            raise NodeError(f"broker {node} is already running")
        partitions = list(partitions)
        for tp in partitions:  # created while it was down: they keep the leader they were given
            if tp not in self._leaders and preferred_leader(tp[1], self.count) == node:
                leader = first_live(tp[1], self.count, self.live)
                if leader != NO_LEADER:
                    self._leaders[tp] = leader
        self.live.add(node)
        return self._move((tp for tp in partitions if self.leader(*tp) == NO_LEADER), lambda tp: node, None)

    def elect_preferred(self, partitions: Iterable[Partition]) -> list[LeaderMove]:
        """A preferred-leader election: each partition whose preferred leader is live and not its
        leader moves back to it."""
        return self._move([tp for tp in partitions if tp in self._leaders
                           and preferred_leader(tp[1], self.count) in self.live],
                          lambda tp: preferred_leader(tp[1], self.count), None)

    def forget(self, topic: str) -> None:
        """A deleted topic: its leaders and epochs go (a topic made again under its name starts afresh)."""
        for tp in [tp for tp in self._leaders if tp[0] == topic]:
            del self._leaders[tp]
        for tp in [tp for tp in self._epochs if tp[0] == topic]:
            del self._epochs[tp]

    def imbalanced(self) -> bool:
        """Some partition is led by another broker than its live preferred leader."""
        return any(leader != preferred_leader(p, self.count) and preferred_leader(p, self.count) in self.live
                   for (_, p), leader in self._leaders.items())

    # ------------------------------------------------------------------ inside

    def _move(self, moving: Iterable[Partition], target: Callable[[Partition], int],
              old: int | None) -> list[LeaderMove]:
        moves = []
        for tp in moving:
            was = self.leader(*tp) if old is None else old
            new = target(tp)
            self._set(tp, new)
            moves.append(LeaderMove(tp[0], tp[1], was, new, self._epochs[tp]))
        return moves

    def _set(self, tp: Partition, new: int) -> None:
        """Give `tp` leader `new` and bump its leader epoch; an override only if not preferred."""
        if new == preferred_leader(tp[1], self.count):
            self._leaders.pop(tp, None)
        else:
            self._leaders[tp] = new
        self._epochs[tp] = self._epochs.get(tp, 0) + 1

    def overrides(self) -> Iterator[tuple[Partition, int]]:
        """The partitions led by another broker than their preferred one (or by none)."""
        return iter(sorted(self._leaders.items()))


def all_partitions(partitions: Mapping[str, int]) -> Iterator[Partition]:
    """Every (topic, index) of a topic -> partition-count map, topics in sorted order."""
    for topic in sorted(partitions):
        for index in range(partitions[topic]):
            yield topic, index
