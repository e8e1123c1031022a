"""The ZooKeeper-era consumer's configuration under Kafka 0.8's names and defaults (the 0.8
consumer configuration page): what grouplab's legacy consumer reads of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from grouplab.consumer.config import ConsumerConfigError, override_values

# Kafka 0.8 name -> attribute.
_NAMES = {
    "group.id": "group_id",
    "consumer.id": "consumer_id",
    "zookeeper.connect": "zookeeper_connect",
    "zookeeper.session.timeout.ms": "session_timeout_ms",
    "zookeeper.connection.timeout.ms": "connection_timeout_ms",
    "zookeeper.sync.time.ms": "sync_time_ms",
    "rebalance.max.retries": "rebalance_max_retries",
    "rebalance.backoff.ms": "rebalance_backoff_ms",
    "auto.commit.enable": "auto_commit_enable",
    "auto.commit.interval.ms": "auto_commit_interval_ms",
    "auto.offset.reset": "auto_offset_reset",
    "partition.assignment.strategy": "assignment_strategy",
}


@dataclass
class LegacyConfig:
    group_id: str
    consumer_id: str
    topic_count: dict[str, int] = field(default_factory=dict)  # topicCountMap: {topic: streams}
    zookeeper_connect: str = ""  # "": the embedded registry
    session_timeout_ms: int = 6000
    connection_timeout_ms: int = 6000
    sync_time_ms: int = 2000  # kept for the name: the old consumer's ZooKeeper follower lag, unused here
    rebalance_max_retries: int = 4
    rebalance_backoff_ms: int = 2000
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = 60_000
    auto_offset_reset: str = "largest"  # where a partition with no committed offset starts: smallest or largest
    assignment_strategy: str = "range"

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConsumerConfigError("group.id is required")
        if not self.consumer_id or "/" in self.consumer_id:
            raise ConsumerConfigError(f"consumer.id must be a non-empty name without '/', got {self.consumer_id!r}")
        if self.auto_offset_reset not in ("smallest", "largest"):
            raise ConsumerConfigError(f"auto.offset.reset must be smallest or largest (Kafka 0.8's names), "
                                      f"got {self.auto_offset_reset!r}")
        if self.rebalance_max_retries < 1:
            raise ConsumerConfigError("rebalance.max.retries must be 1 or more")
        for topic, streams in self.topic_count.items():
            if streams < 1 or not topic or "/" in topic:
                raise ConsumerConfigError(f"topicCountMap: {topic!r} needs a name without '/' and 1 or more streams")
        from grouplab.consumer.legacy.assignors import get_legacy_assignor

        get_legacy_assignor(self.assignment_strategy)

    @staticmethod
    def names() -> list[str]:
        return sorted(_NAMES)

    def with_overrides(self, pairs: Iterable[str]) -> "LegacyConfig":
        return LegacyConfig(**override_values(self, pairs, _NAMES, "ZooKeeper-era consumer config"))
