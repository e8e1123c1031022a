"""Consumer configuration under Kafka's names and defaults (ConsumerConfig)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterable

# Kafka name -> attribute. Defaults are Kafka 3.x's.
_NAMES = {
    "group.id": "group_id",
    "client.id": "client_id",
    "group.instance.id": "group_instance_id",
    "partition.assignment.strategy": "assignors",
    "session.timeout.ms": "session_timeout_ms",
    "heartbeat.interval.ms": "heartbeat_interval_ms",
    "max.poll.interval.ms": "max_poll_interval_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "request.timeout.ms": "request_timeout_ms",
    "allow.auto.create.topics": "allow_auto_create_topics",
}


class ConsumerConfigError(ValueError):
    pass


@dataclass
class ConsumerConfig:
    group_id: str
    topics: list[str]
    client_id: str = "consumer"
    group_instance_id: str | None = None
    assignors: list[str] = field(default_factory=lambda: ["range"])  # preference order
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000  # also the rebalance timeout sent in JoinGroup
    retry_backoff_ms: int = 100
    metadata_max_age_ms: int = 300_000
    request_timeout_ms: int = 30_000
    allow_auto_create_topics: bool = True

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConsumerConfigError("group.id is required")
        if not self.assignors:
            raise ConsumerConfigError("partition.assignment.strategy needs at least one assignor")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConsumerConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        from grouplab.consumer.assignors import get_assignor

        for name in self.assignors:
            get_assignor(name)  # raises UnknownAssignor with the list of known names

    def with_overrides(self, pairs: Iterable[str]) -> "ConsumerConfig":
        values = override_values(self, pairs, _NAMES, "consumer config", lists=("assignors",),
                                 optional=("group_instance_id",))
        return ConsumerConfig(**values)


def override_values(config: Any, pairs: Iterable[str], names: dict[str, str], what: str,
                    lists: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of the dataclass `config` with `NAME=VALUE` overrides applied, NAME in Kafka's
    spelling (`names`: Kafka name -> attribute); a value is read as the field's current type
    (`lists`: comma-separated; `optional`: empty is None). A mistake raises ConsumerConfigError
    naming it, so both consumers' command lines answer a typo in one line."""
    values = {f.name: getattr(config, f.name) for f in fields(config)}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or name not in names:
            raise ConsumerConfigError(f"unknown {what} {name!r}; known: {', '.join(sorted(names))}")
        attr = names[name]
        current = values[attr]
        if attr in lists:
            values[attr] = [a.strip() for a in raw.split(",") if a.strip()]
        elif isinstance(current, bool):
            if raw.lower() not in ("true", "false"):
                raise ConsumerConfigError(f"{name}: expected true or false, got {raw!r}")
            values[attr] = raw.lower() == "true"
        elif isinstance(current, int):
            try:
                values[attr] = int(raw)
            except ValueError:
                raise ConsumerConfigError(f"{name}: expected an integer, got {raw!r}") from None
        else:
            values[attr] = (raw or None) if attr in optional else raw
    return values
