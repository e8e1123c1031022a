"""The dashboard's brokers panel as a pure fold (docs/ui.md §2): which brokers of a cluster are
live, which one coordinates the shown group (and whether it is still loading it), and which one
leads each partition of the grid. Fed the trace's `start` line (how many brokers, their
`offsets.topic.num.partitions`) and the cluster's events (docs/events.md §4.3a), never the server:
a recorded run folds the same. With one broker there is nothing to show (`snapshot` is None).

A partition's leader is what Kafka's placement says (coordinator/placement.py: the first live
broker of its replicas) until a `leaders_moved` line names another, as coordinator/nodes.py keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grouplab.coordinator.placement import (GROUP_METADATA_TOPIC, NO_LEADER, first_live, partition_for,
                                            preferred_leader)


@dataclass
class BrokersView:
    group_id: str
    count: int = 1
    offsets_partitions: int = 50  # offsets.topic.num.partitions (Kafka's default)
    live: set[int] = field(default_factory=set)
    leaders: dict[tuple[str, int], int] = field(default_factory=dict)  # what leaders_moved said, over placement
    loading_until_ms: int | None = None  # the group's new coordinator loads it until then

    def start(self, line: dict[str, Any]) -> None:
        """The trace's first line: a cluster's names its brokers; a restart's starts them all again."""
        self.count = int(line.get("brokers", 1) or 1)
        config = line.get("config") or {}
        self.offsets_partitions = int(config.get("offsets.topic.num.partitions", self.offsets_partitions))
        self.live = set(range(self.count))
        self.leaders.clear()
        self.loading_until_ms = None

    def event(self, name: str, ts_ms: int, f: dict[str, Any]) -> None:
        if name in ("broker_stopped", "broker_started"):
            self.live = {int(n) for n in f.get("live") or []}
        elif name == "leaders_moved":
            for topic, partition, _old, new, _epoch in f.get("partitions") or []:
                self.leaders[(str(topic), int(partition))] = int(new)
        elif name == "coordinator_moved" and self.group_id in (f.get("groups") or []):
            self.leaders[(GROUP_METADATA_TOPIC, int(f["partition"]))] = int(f["to_node"])
            self.loading_until_ms = ts_ms + int(f.get("load_ms") or 0) if int(f["to_node"]) != NO_LEADER else None
        elif name == "coordinator_loaded" and self.group_id in (f.get("groups") or []):
            self.loading_until_ms = None

    def leader(self, topic: str, partition: int) -> int:
        node = self.leaders.get((topic, partition))
        if node is not None:
            return node
        preferred = preferred_leader(partition, self.count)
        return preferred if preferred in self.live else first_live(partition, self.count, self.live)

    def coordinator(self) -> int:
        return self.leader(GROUP_METADATA_TOPIC, partition_for(self.group_id, self.offsets_partitions))

    def snapshot(self, topics: dict[str, int], now_ms: int) -> dict[str, Any] | None:
        if self.count <= 1:
            return None
        coordinator = self.coordinator()
        loading = self.loading_until_ms is not None and now_ms < self.loading_until_ms
        return {
            "coordinator": coordinator, "loading": loading,
            "offsets_partition": partition_for(self.group_id, self.offsets_partitions),
            "nodes": [{"id": n, "live": n in self.live, "coordinator": n == coordinator,
                       "leads": sum(1 for t, c in topics.items() for p in range(c) if self.leader(t, p) == n)}
                      for n in range(self.count)],
            "leaders": [[t, p, self.leader(t, p)] for t, c in sorted(topics.items()) for p in range(c)],
        }
