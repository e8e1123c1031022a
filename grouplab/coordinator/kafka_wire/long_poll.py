"""When may a Fetch be answered? Kafka parks a Fetch until the data it would return add up to
`min_bytes`, an error is due, or max_wait_ms passes (a long poll); the listener asks this before it
hands the Fetch to the Broker, so the Broker, which answers at once, stays as it is and the trace
holds one Fetch per request.

The bytes are counted as the Broker counts them against max_bytes (coordinator/data_plane.py's
handle_fetch: 16 bytes per record plus its key, value and header bytes, `fetched_size`), over the
records it would return: each partition's bounded by partition_max_bytes and what is left of
max_bytes, in request order, the first record returned even over both. Kafka counts the stored
batches' bytes instead; grouplab's logs keep their own frames, so this is the same data in
grouplab's measure (a few bytes per record less than a batch v2 carries).

Read-only over the broker's logs: it never creates a log or changes one.
"""

from __future__ import annotations

from grouplab.coordinator.data_plane import DataPlaneHost
from grouplab.coordinator.partition_log import READ_COMMITTED, fetched_size
from grouplab.protocol.messages import FetchPartition, FetchRequest


def fetch_ready(broker: DataPlaneHost, req: FetchRequest) -> bool:
    """True when answering now returns an error for some partition, or records whose bytes reach
    `min_bytes` (min_bytes <= 0 or max_wait_ms <= 0: at once)."""
    if req.min_bytes <= 0 or req.max_wait_ms <= 0 or req.isolation_level not in (0, 1):
        return True
    wanted: dict[tuple[str, int], FetchPartition] = {}
    for topic in req.topics:
        for p in topic.partitions:
            wanted[(topic.topic, p.partition)] = p  # a repeat replaces the entry, in its first place (as the Broker)
    remaining = max(req.max_bytes, 0)
    gathered = 0
    min_one = True  # until a partition returns a record (the Broker's rule)
    for (topic_name, index), p in wanted.items():
        count = broker.topics.partitions.get(topic_name)
        if count is None or not 0 <= index < count or p.partition_max_bytes < 0:
            return True  # an error answer
        log = broker.logs.existing(topic_name, index)
        if log is None:
            if p.fetch_offset != 0:
                return True  # OFFSET_OUT_OF_RANGE
            continue
        if not log.log_start_offset <= p.fetch_offset <= log.log_end_offset:
            return True
        upper = log.last_stable_offset if req.isolation_level == READ_COMMITTED else log.log_end_offset
        if p.fetch_offset >= upper:
            continue
        records = log.read(p.fetch_offset, min(p.partition_max_bytes, remaining), req.isolation_level,
                           min_one=min_one)
        if records:
            size = sum(fetched_size(r) for r in records)
            gathered += size
            remaining = max(remaining - size, 0)
            min_one = False
            if gathered >= req.min_bytes:
                return True
    return False
