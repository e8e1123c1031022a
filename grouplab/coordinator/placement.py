"""Where things live in a cluster of brokers, as Kafka computes it (pure functions).

A group's coordinator is the leader of one partition of `__consumer_offsets`, the partition Kafka's
`partitionFor(groupId)` names: Java's `String.hashCode` of the id, made non-negative with Kafka's
`Utils.abs` (which maps Integer.MIN_VALUE to 0, where Java's Math.abs would leave it negative),
modulo `offsets.topic.num.partitions` (default 50). A transactional id's coordinator is found the
same way over `__transaction_state` (`transaction.state.log.num.partitions`, default 50).

Replicas: grouplab's brokers share one store "as if every partition were fully replicated", so
every broker is a replica of every partition. Partition p of any topic lists its replicas starting
at broker p mod N and going round (p, p+1, ..., p+N-1 mod N): the first is its preferred leader,
and when its leader goes down the next live one in that order takes over, as Kafka's controller
picks the first live in-sync replica of the assignment. Kafka's own assignment starts each topic at
a random broker; a fixed start keeps a seed's run identical.
"""

from __future__ import annotations

from typing import Collection

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
NO_LEADER = -1  # Kafka's leader id for a partition with no live replica


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode`: s[0]*31^(n-1) + ... + s[n-1] over the UTF-16 code units, as a
    signed 32-bit int (a character outside the BMP counts as its two surrogates, as in Java)."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: |n|, and 0 for Integer.MIN_VALUE (whose absolute value is no int)."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, partition_count: int) -> int:
    """The partition of `__consumer_offsets` (or `__transaction_state`) that holds `key`."""
    if partition_count < 1:
        raise ValueError(f"the partition count must be at least 1, not {partition_count}")
    return kafka_abs(java_string_hash(key)) % partition_count


def replicas(partition: int, brokers: int) -> list[int]:
    """Partition `partition`'s replicas in preference order on brokers 0..brokers-1."""
    return [(partition + i) % brokers for i in range(brokers)]


def preferred_leader(partition: int, brokers: int) -> int:
    return partition % brokers


def first_live(partition: int, brokers: int, live: Collection[int]) -> int:
    """The leader a partition gets when its leader must change: the first live replica in
    preference order, or NO_LEADER when none is live."""
    for node in replicas(partition, brokers):
        if node in live:
            return node
    return NO_LEADER
