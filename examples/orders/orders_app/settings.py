"""The consumer settings an operator tunes, by Kafka's names; each front end maps them onto its
library's own (kafka-python and aiokafka take snake_case keyword arguments, librdkafka Kafka's
dotted names). The defaults are Kafka's."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class ConsumerSettings:
    client_id: str  # client.id: names the consumer in the coordinator's view (and grouplab's faults)
    group_id: str = "orders-app"  # group.id
    group_instance_id: str | None = None  # group.instance.id: a static member (KIP-345)
    session_timeout_ms: int = 45_000  # session.timeout.ms: silence after which the member is removed
    heartbeat_interval_ms: int = 3_000  # heartbeat.interval.ms
    max_poll_interval_ms: int = 300_000  # max.poll.interval.ms: the longest a batch may take
    request_timeout_ms: int = 30_000  # request.timeout.ms (librdkafka: socket.timeout.ms)
    # Anything else, passed to the library as it is (its own names), e.g. reconnect back-offs.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def replace(self, **changes: Any) -> "ConsumerSettings":
        return dataclasses.replace(self, **changes)
