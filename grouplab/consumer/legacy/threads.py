"""Consumer threads of the ZooKeeper-era high-level consumer (Kafka 0.8's ZookeeperConsumerConnector).

An old consumer asked for N streams per topic (its `topicCountMap`, `{topic: streams}`), and each
stream was read by one consumer thread named `<consumer>-<n>`, n from 0. The old assignors hand
partitions to these thread ids, not to consumers. Thread ids sort as strings, as Kafka's
`ConsumerThreadId.compare` did (so `c-10` comes before `c-2`).
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from grouplab.protocol.types import TopicPartition

TopicCount = Mapping[str, int]
"""A consumer's subscription: `{topic: streams}` (Kafka's topicCountMap)."""

Subscriptions = Mapping[str, TopicCount]
"""Every consumer of the group: `{consumer id: {topic: streams}}`."""


class ThreadId(NamedTuple):
    """`consumer-n`: the n-th stream of one consumer."""

    consumer: str
    thread: int

    def __str__(self) -> str:
        return f"{self.consumer}-{self.thread}"


ThreadAssignment = dict[str, list[TopicPartition]]
"""`{thread id as text: its partitions}`: every thread of every consumer is a key, possibly with []."""


def thread_ids(consumer: str, streams: int) -> list[ThreadId]:
    return [ThreadId(consumer, n) for n in range(streams)]


def sorted_threads(threads: "list[ThreadId] | set[ThreadId]") -> list[ThreadId]:
    """Kafka's order: by the text `consumer-n`."""
    return sorted(threads, key=str)


def threads_per_topic(subscriptions: Subscriptions) -> dict[str, list[ThreadId]]:
    """`{topic: the sorted thread ids of every consumer subscribed to it}` (ZkUtils.getConsumersPerTopic)."""
    per_topic: dict[str, list[ThreadId]] = {}
    for consumer, counts in subscriptions.items():
        for topic, streams in counts.items():
            per_topic.setdefault(topic, []).extend(thread_ids(consumer, streams))
    return {topic: sorted_threads(threads) for topic, threads in sorted(per_topic.items())}


def empty_assignment(subscriptions: Subscriptions) -> ThreadAssignment:
    return {str(t): [] for consumer, counts in subscriptions.items()
            for t in thread_ids(consumer, max(counts.values(), default=0))}


def by_consumer(assignment: ThreadAssignment, subscriptions: Subscriptions) -> dict[str, list[TopicPartition]]:
    """The same assignment per consumer (every consumer a key): what its fetchers read."""
    out: dict[str, list[TopicPartition]] = {consumer: [] for consumer in subscriptions}
    owner = {str(t): t.consumer for consumer, counts in subscriptions.items()
             for t in thread_ids(consumer, max(counts.values(), default=0))}
    for thread, partitions in assignment.items():
        out[owner[thread]].extend(partitions)
    return {consumer: sorted(ps) for consumer, ps in out.items()}
