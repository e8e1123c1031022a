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
    "retry.backoff.max.ms": "retry_backoff_max_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "request.timeout.ms": "request_timeout_ms",
    "allow.auto.create.topics": "allow_auto_create_topics",
    "group.protocol": "group_protocol",
    "group.remote.assignor": "group_remote_assignor",
}

GROUP_PROTOCOLS = ("classic", "consumer")
# Settings of the classic protocol only. Under group.protocol=consumer the coordinator assigns
# (group.remote.assignor) and sets the session and heartbeat interval (group.consumer.*): Kafka's
# Java client (4.x, CONSUMER_PROTOCOL_UNSUPPORTED_CONFIGS) refuses them when set, and so does grouplab
# (librdkafka only warns).
CLASSIC_ONLY = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")
# And the other way round (Kafka's CLASSIC_PROTOCOL_UNSUPPORTED_CONFIGS).
CONSUMER_ONLY = ("group.remote.assignor",)


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
    retry_backoff_max_ms: int = 1_000  # KIP-580: retries back off exponentially up to this
    metadata_max_age_ms: int = 300_000
    request_timeout_ms: int = 30_000
    allow_auto_create_topics: bool = True
    group_protocol: str = "classic"  # or "consumer": KIP-848's ConsumerGroupHeartbeat (consumer/membership.py)
    group_remote_assignor: str | None = None  # the server-side assignor to ask for; None: the coordinator's choice
    # The brokers of a cluster (node ids) the member may ask FindCoordinator: set, the member finds
    # its coordinator and sends each request to a node; empty (one broker), every request goes on
    # its one connection, as before clusters. Not a Kafka name: the shell sets it from bootstrap.servers.
    bootstrap_nodes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConsumerConfigError("group.id is required")
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ConsumerConfigError(f"group.protocol: expected classic or consumer, got {self.group_protocol!r}")
        set_here = [name for name, attr in _NAMES.items() if getattr(self, attr) != _DEFAULTS.get(attr)]
        self._check_protocol_settings(set_here)
        if not self.assignors:
            raise ConsumerConfigError("partition.assignment.strategy needs at least one assignor")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConsumerConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        from grouplab.consumer.assignors import get_assignor

        for name in self.assignors:
            get_assignor(name)  # raises UnknownAssignor with the list of known names

    @property
    def consumer_protocol(self) -> bool:
        return self.group_protocol == "consumer"

    def _check_protocol_settings(self, names: list[str]) -> None:
        """Refuse a setting the chosen group.protocol does not use, as Kafka's Java client does."""
        unsupported = CLASSIC_ONLY if self.consumer_protocol else CONSUMER_ONLY
        wrong = [name for name in names if name in unsupported]
        if wrong:
            other = "classic" if self.consumer_protocol else "consumer"
            raise ConsumerConfigError(f"{', '.join(wrong)} cannot be set when group.protocol={self.group_protocol} "
                                      f"(only with group.protocol={other})")

    def with_overrides(self, pairs: Iterable[str]) -> "ConsumerConfig":
        pairs = list(pairs)
        values = override_values(self, pairs, _NAMES, "consumer config", lists=("assignors",),
                                 optional=("group_instance_id", "group_remote_assignor"))
        config = ConsumerConfig(**values)
        # Set explicitly, even to its default, is set (Kafka looks at the properties given).
        config._check_protocol_settings([pair.partition("=")[0].strip() for pair in pairs])
        return config


_DEFAULTS = {f.name: (f.default_factory() if callable(f.default_factory) else f.default)
             for f in fields(ConsumerConfig)}


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
