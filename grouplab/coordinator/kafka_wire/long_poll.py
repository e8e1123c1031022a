"""When may a Fetch be answered? Kafka parks a Fetch until the data it would return add up to
`min_bytes`, an error is due, or max_wait_ms passes (a long poll); the listener asks this before it
hands the Fetch to the Broker, so the Broker, which answers at once, stays as it is and the trace
holds one Fetch per request.

It reads what the Broker would answer now (data_plane.read_fetch, the Broker's own code), so the
bytes counted are exactly what would be returned: the whole batches a Kafka client's Fetch gets
(transaction markers and aborted transactions' batches included), each a batch v2 header (61
bytes) plus 16 bytes per record and its key, value and header bytes, bounded by
partition_max_bytes and max_bytes as the answer is. A Fetch positioned at a marker is therefore
answered at once, as Kafka answers it. Kafka counts the stored batches' bytes; grouplab's logs keep
their own frames, so this is the same data in grouplab's measure (within a few bytes a record).

Read-only over the broker's logs: it never creates a log or changes one.
"""

from __future__ import annotations

from grouplab.coordinator.data_plane import DataPlaneHost, read_fetch
from grouplab.protocol.messages import FetchRequest


def fetch_ready(broker: DataPlaneHost, req: FetchRequest) -> bool:
    """True when answering now returns an error for some partition, or data whose bytes reach
    `min_bytes` (min_bytes <= 0 or max_wait_ms <= 0: at once)."""
    if req.min_bytes <= 0 or req.max_wait_ms <= 0 or req.isolation_level not in (0, 1):
        return True
    answer = read_fetch(broker, req, broker.logs.view)
    return answer.error or answer.size >= req.min_bytes
