"""The old roundrobin assignment (Kafka 0.8.2's kafka.consumer.RoundRobinAssignor), over thread ids.

Every partition of every subscribed topic, in the old order — sorted by the Java hashCode of the
text `[topic,partition]` (TopicAndPartition.toString), which Kafka used to scatter one topic's
partitions over the circle; equal hashes keep topic-then-partition order — dealt one at a time to
the sorted thread ids, round and round.

It deals to any thread whatever the partition's topic, so Kafka allowed it only when every
consumer subscribes to the same topics with the same stream count for each: otherwise it refuses,
with the reason (RoundRobinRefused).
"""

from __future__ import annotations

from typing import Mapping

from grouplab.consumer.legacy.threads import Subscriptions, ThreadAssignment, empty_assignment, sorted_threads, threads_per_topic
from grouplab.protocol.types import TopicPartition


class RoundRobinRefused(ValueError):
    """The subscriptions differ between consumers, or between one consumer's topics."""


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]·31^(n-1) + … + s[n-1] over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def old_partition_order(partitions_per_topic: Mapping[str, int], topics: list[str]) -> list[TopicPartition]:
    partitions = [TopicPartition(t, p) for t in sorted(topics) for p in range(partitions_per_topic.get(t, 0))]
    return sorted(partitions, key=lambda tp: java_string_hash(f"[{tp.topic},{tp.partition}]"))


def check_identical(subscriptions: Subscriptions) -> None:
    counts = {consumer: dict(sorted(c.items())) for consumer, c in sorted(subscriptions.items())}
    first_consumer, first = next(iter(counts.items()), ("", {}))
    for consumer, topics in counts.items():
        if set(topics) != set(first):
            raise RoundRobinRefused(
                f"roundrobin needs every consumer to subscribe to the same topics: {first_consumer} has "
                f"{', '.join(first) or 'none'}, {consumer} has {', '.join(topics) or 'none'}")
        if len(set(topics.values())) > 1:
            raise RoundRobinRefused(
                f"roundrobin needs the same stream count for every topic of a consumer: {consumer} has "
                + ", ".join(f"{t}:{n}" for t, n in topics.items()))


def assign_roundrobin(partitions_per_topic: Mapping[str, int], subscriptions: Subscriptions) -> ThreadAssignment:
    result = empty_assignment(subscriptions)
    if not subscriptions:
        return result
    check_identical(subscriptions)
    per_topic = threads_per_topic(subscriptions)
    threads = sorted_threads({t for ts in per_topic.values() for t in ts})
    if not threads:
        return result
    for i, tp in enumerate(old_partition_order(partitions_per_topic, list(per_topic))):
        result[str(threads[i % len(threads)])].append(tp)
    return result
