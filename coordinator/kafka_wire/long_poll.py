"""When may a Fetch be answered? Kafka parks a Fetch that finds nothing until data arrives or
max_wait_ms passes (a long poll); the listener asks this before it hands the Fetch to the Broker,
so the Broker, which answers at once, stays as it is and the trace holds one Fetch per request.

Read-only over the broker's logs: it never creates a log or changes one.
"""

from __future__ import annotations

from coordinator.data_plane import DataPlaneHost
from coordinator.partition_log import READ_COMMITTED
from protocol.messages import FetchRequest


def fetch_ready(broker: DataPlaneHost, req: FetchRequest) -> bool:
    """True when answering now returns a record or an error for some partition; min_bytes counts
    as one record (grouplab does not count bytes for it)."""
    if req.min_bytes <= 0 or req.max_wait_ms <= 0 or req.isolation_level not in (0, 1):
        return True
    for topic in req.topics:
        count = broker.topics.partitions.get(topic.topic)
        for p in topic.partitions:
            if count is None or not 0 <= p.partition < count or p.partition_max_bytes < 0:
                return True  # an error answer
            log = broker.logs.existing(topic.topic, p.partition)
            if log is None:
                if p.fetch_offset != 0:
                    return True  # OFFSET_OUT_OF_RANGE
                continue
            if not log.log_start_offset <= p.fetch_offset <= log.log_end_offset:
                return True
            upper = log.last_stable_offset if req.isolation_level == READ_COMMITTED else log.log_end_offset
            if p.fetch_offset < upper and log.read(p.fetch_offset, 1, req.isolation_level, min_one=True):
                return True
    return False
