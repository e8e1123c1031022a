"""Values shared by the coordinator, the consumers and the assignors.

`TopicPartition` and `Subscription` are part of the assignor API (docs/design.md §5): code outside the
project builds them directly, so their names, field order and defaults are a contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> "TopicPartition":
        """Parse `t0:1` or `t0-1` (Kafka tools print the second form)."""
        for sep in (":", "-"):
            topic, found, part = text.rpartition(sep)
            if found and topic and part.isdigit():
                return cls(topic, int(part))
        raise ValueError(f"not a topic partition: {text!r} (expected TOPIC:PARTITION)")


@dataclass
class Subscription:
    """What one member tells the leader: its topics and, for sticky assignors, what it owns now."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack: str | None = None
    # Filled in by the leader from the JoinGroup member list, not sent inside the metadata bytes.
    group_instance_id: str | None = None


@dataclass
class Assignment:
    """What the leader hands one member in SyncGroup."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


def sorted_partitions(partitions: "list[TopicPartition] | set[TopicPartition]") -> list[TopicPartition]:
    return sorted(partitions)


def group_by_topic(partitions: "list[TopicPartition]") -> dict[str, list[int]]:
    """{topic: sorted partition numbers}, topics in sorted order: the compact form used on the wire."""
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def format_partitions(partitions: "list[TopicPartition]") -> str:
    """`t0[0,1] t1[2]`: short enough for a table cell, exact enough to read off."""
    grouped = group_by_topic(partitions)
    if not grouped:
        return "-"
    return " ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in grouped.items())
