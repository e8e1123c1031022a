"""The old range assignment (Kafka 0.8's kafka.consumer.RangeAssignor): per topic, over thread ids.

For a topic with P partitions and T threads subscribed to it (every stream of every subscribed
consumer, sorted as text), n = P // T and r = P % T; the thread at index i gets partitions starting
at n·i + min(i, r), n + 1 of them if i < r else n. The notes' example: consumers C1 and C2 with two
streams each on five partitions give C1-0: P0, P1; C1-1: P2; C2-0: P3; C2-1: P4.

Unlike today's range (consumer/assignors/range.py), the unit is a thread, so a consumer with more
streams gets a bigger share; and each consumer computed this on its own, for the whole group.
"""

from __future__ import annotations

from typing import Mapping

from grouplab.consumer.legacy.threads import Subscriptions, ThreadAssignment, empty_assignment, threads_per_topic
from grouplab.protocol.types import TopicPartition


def assign_range(partitions_per_topic: Mapping[str, int], subscriptions: Subscriptions) -> ThreadAssignment:
    result = empty_assignment(subscriptions)
    for topic, threads in threads_per_topic(subscriptions).items():
        count = partitions_per_topic.get(topic, 0)
        if not count or not threads:
            continue
        per_thread, extra = divmod(count, len(threads))
        for i, thread in enumerate(threads):
            start = per_thread * i + min(i, extra)
            length = per_thread + (1 if i < extra else 0)
            result[str(thread)].extend(TopicPartition(topic, p) for p in range(start, start + length))
    return result
