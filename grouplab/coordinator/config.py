"""Broker-side configuration under Kafka's own names and defaults.

Overrides come as `name=value` strings (CLI `--config`, repeatable) or a Java-style properties file,
exactly as `kafka-server-start.sh --override` and `server.properties` take them. Unknown names are
refused, so a typo does not silently leave a default in force.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Iterable

# 4x the largest group anything in the repository forms (1,000 members: scripts/bench_rebalance.py,
# bench_sim.py), room for crashed members' ids that linger until their sessions expire.
GROUP_MAX_SIZE_DEFAULT = 4096

# Kafka name -> (attribute, default). Defaults are Kafka's, except where noted.
_KEYS: dict[str, tuple[str, object]] = {
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", 6000),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", 1_800_000),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", 3000),
    # Kafka's default is Integer.MAX_VALUE; grouplab's bounds a group's memory (docs/protocol.md §4.12).
    "group.max.size": ("group_max_size", GROUP_MAX_SIZE_DEFAULT),
    # KIP-848 consumer-protocol groups (coordinator/consumer_group.py), Kafka 4's names and defaults.
    "group.consumer.session.timeout.ms": ("consumer_session_timeout_ms", 45_000),
    "group.consumer.min.session.timeout.ms": ("consumer_min_session_timeout_ms", 45_000),
    "group.consumer.max.session.timeout.ms": ("consumer_max_session_timeout_ms", 60_000),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_interval_ms", 5_000),
    "group.consumer.min.heartbeat.interval.ms": ("consumer_min_heartbeat_interval_ms", 5_000),
    "group.consumer.max.heartbeat.interval.ms": ("consumer_max_heartbeat_interval_ms", 15_000),
    "group.consumer.max.size": ("consumer_max_size", 2_147_483_647),
    # Kafka 4 lists its built-in assignors by name (class names are taken too); the first is the default.
    "group.consumer.assignors": ("consumer_assignors", "uniform,range"),
    "group.consumer.migration.policy": ("consumer_migration_policy", "bidirectional"),
    "num.partitions": ("num_partitions", 1),
    "auto.create.topics.enable": ("auto_create_topics_enable", True),
    # DeleteTopics allowed (Kafka's default since 1.0); false: refused TOPIC_DELETION_DISABLED.
    "delete.topic.enable": ("delete_topic_enable", True),
    # Kafka's default is 100 MiB; grouplab's frames carry group metadata only, so 1 MiB (DESIGN §2).
    "socket.request.max.bytes": ("socket_request_max_bytes", 1024 * 1024),
    # grouplab's own: the largest answer the server sends (encoded payload); a larger one is not
    # sent, the request is answered INVALID_REQUEST saying so (docs/protocol.md §1). Encoding one
    # this size takes well under the 1 s a heartbeat may wait (docs/benchmarks.md).
    "grouplab.response.max.bytes": ("response_max_bytes", 4 * 1024 * 1024),
    # Kafka's default -1 means "generate one"; grouplab runs one broker, node 0 (with --brokers N,
    # nodes 0..N-1 and this is not used).
    "broker.id": ("broker_id", 0),
    # A cluster of brokers (coordinator/nodes.py, placement.py): the partitions of the internal
    # topics that place groups and transactional ids, and Kafka's preferred-leader election.
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", 50),
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", 50),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", True),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_seconds", 300),
    # grouplab's own: how long a new coordinator takes to load a moved partition's groups, answering
    # COORDINATOR_LOAD_IN_PROGRESS meanwhile (Kafka's is the time to read the partition).
    "grouplab.coordinator.load.time.ms": ("coordinator_load_time_ms", 1000),
    # Longest committed_metadata an OffsetCommit may store (OFFSET_METADATA_TOO_LARGE beyond it).
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 4096),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", 900_000),
    # Group expiry (KIP-211): offsets of a group Empty that long (a standalone group's: that long
    # after their commit) expire at the next check, then the group, once Empty with none, is deleted.
    "offsets.retention.minutes": ("offsets_retention_minutes", 10_080),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", 600_000),
    # grouplab's own bounds on what clients can make the coordinator keep (docs/protocol.md §4.12).
    "grouplab.max.groups": ("max_groups", 10_000),
    "grouplab.max.protocols.per.member": ("max_protocols_per_member", 32),
    "grouplab.max.id.length": ("max_id_length", 249),
    # grouplab's own: when the durable group log (--data-dir) syncs appends to disk.
    "grouplab.log.fsync": ("log_fsync", "always"),
    # Partition logs (coordinator/partition_log.py), Kafka's names and defaults. The two flush
    # settings default to Long.MAX_VALUE (Kafka: never force a flush; the OS writes back).
    "log.segment.bytes": ("log_segment_bytes", 1024 * 1024 * 1024),
    "log.index.interval.bytes": ("log_index_interval_bytes", 4096),
    "log.flush.interval.messages": ("log_flush_interval_messages", 9_223_372_036_854_775_807),
    "log.flush.interval.ms": ("log_flush_interval_ms", 9_223_372_036_854_775_807),
    "message.max.bytes": ("message_max_bytes", 1_048_588),
}

LOG_FSYNC_POLICIES = ("always", "never")
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")  # Kafka's ConsumerGroupMigrationPolicy
# group.consumer.assignors: Kafka's built-in server assignors, by class name -> by name.
CONSUMER_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


class ConfigError(ValueError):
    pass


@dataclass
class BrokerConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = GROUP_MAX_SIZE_DEFAULT
    consumer_session_timeout_ms: int = 45_000
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    consumer_max_size: int = 2_147_483_647
    consumer_assignors: str = "uniform,range"
    consumer_migration_policy: str = "bidirectional"
    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 1024 * 1024
    response_max_bytes: int = 4 * 1024 * 1024
    broker_id: int = 0
    offsets_topic_num_partitions: int = 50
    transaction_state_log_num_partitions: int = 50
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    coordinator_load_time_ms: int = 1000
    log_fsync: str = "always"
    log_segment_bytes: int = 1024 * 1024 * 1024
    log_index_interval_bytes: int = 4096
    log_flush_interval_messages: int = 9_223_372_036_854_775_807
    log_flush_interval_ms: int = 9_223_372_036_854_775_807
    message_max_bytes: int = 1_048_588
    offset_metadata_max_bytes: int = 4096
    transaction_max_timeout_ms: int = 900_000
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    max_groups: int = 10_000
    max_protocols_per_member: int = 32
    max_id_length: int = 249
    # The Kafka names given on the command line or in a config file (`with_overrides`): what
    # DescribeConfigs reports as STATIC_BROKER_CONFIG, even where the value is the default.
    overridden: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def consumer_assignor_names(self) -> list[str]:
        """group.consumer.assignors as assignor names, in order (the first is the default); Kafka's
        class names of its built-in assignors stand for their names."""
        names = [n.strip() for n in self.consumer_assignors.split(",") if n.strip()]
        return [CONSUMER_ASSIGNOR_CLASSES.get(n, n) for n in names]

    @classmethod
    def names(cls) -> list[str]:
        return list(_KEYS)

    def with_overrides(self, pairs: Iterable[str]) -> "BrokerConfig":
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        overridden = set(self.overridden)
        for pair in pairs:
            name, sep, raw = pair.partition("=")
            name, raw = name.strip(), raw.strip()
            if not sep or not name:
                raise ConfigError(f"expected NAME=VALUE, got {pair!r}")
            if name not in _KEYS:
                raise ConfigError(f"unknown config {name!r}; known: {', '.join(sorted(_KEYS))}")
            attr, default = _KEYS[name]
            values[attr] = _parse(name, raw, type(default))
            overridden.add(name)
        values["overridden"] = frozenset(overridden)
        cfg = BrokerConfig(**values)
        cfg.validate()
        return cfg

    def with_properties_file(self, path: str | Path) -> "BrokerConfig":
        pairs = []
        for line in Path(path).read_text().splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            if "=" not in line and ":" in line:
                line = line.replace(":", "=", 1)
            pairs.append(line)
        return self.with_overrides(pairs)

    def validate(self) -> None:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ConfigError("group.initial.rebalance.delay.ms must be >= 0")
        if self.group_max_size < 1:
            raise ConfigError("group.max.size must be >= 1")
        if self.num_partitions < 1:
            raise ConfigError("num.partitions must be >= 1")
        if self.socket_request_max_bytes < 64:
            raise ConfigError("socket.request.max.bytes must be >= 64")
        if self.response_max_bytes < 1024:
            raise ConfigError("grouplab.response.max.bytes must be >= 1024")
        if self.offset_metadata_max_bytes < 0:
            raise ConfigError("offset.metadata.max.bytes must be >= 0")
        if self.log_segment_bytes < 14:
            raise ConfigError("log.segment.bytes must be >= 14")
        if self.log_index_interval_bytes < 0:
            raise ConfigError("log.index.interval.bytes must be >= 0")
        if self.log_flush_interval_messages < 1:
            raise ConfigError("log.flush.interval.messages must be >= 1")
        if self.log_flush_interval_ms < 0:
            raise ConfigError("log.flush.interval.ms must be >= 0")
        if self.message_max_bytes < 0:
            raise ConfigError("message.max.bytes must be >= 0")
        for name, value in (("offsets.retention.minutes", self.offsets_retention_minutes),
                            ("offsets.retention.check.interval.ms", self.offsets_retention_check_interval_ms),
                            ("grouplab.max.groups", self.max_groups),
                            ("grouplab.max.protocols.per.member", self.max_protocols_per_member),
                            ("grouplab.max.id.length", self.max_id_length),
                            ("offsets.topic.num.partitions", self.offsets_topic_num_partitions),
                            ("transaction.state.log.num.partitions", self.transaction_state_log_num_partitions),
                            ("leader.imbalance.check.interval.seconds", self.leader_imbalance_check_interval_seconds)):
            if value < 1:
                raise ConfigError(f"{name} must be >= 1")
        if self.coordinator_load_time_ms < 0:
            raise ConfigError("grouplab.coordinator.load.time.ms must be >= 0")
        self._validate_consumer_groups()
        if self.log_fsync not in LOG_FSYNC_POLICIES:
            raise ConfigError(f"grouplab.log.fsync must be one of {', '.join(LOG_FSYNC_POLICIES)}, got {self.log_fsync!r}")

    @property
    def upgrade_enabled(self) -> bool:
        """Kafka's ConsumerGroupMigrationPolicy.isUpgradeEnabled: a classic group with members may
        become a consumer group (a ConsumerGroupHeartbeat joins it)."""
        return self.consumer_migration_policy.lower() in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        """isDowngradeEnabled: a consumer group whose members all use the classic protocol may
        become a classic group again (its last consumer-protocol member left or was removed)."""
        return self.consumer_migration_policy.lower() in ("downgrade", "bidirectional")

    def _validate_consumer_groups(self) -> None:
        """Kafka's GroupCoordinatorConfig checks of the group.consumer.* settings."""
        if self.consumer_min_session_timeout_ms < 1 or self.consumer_min_heartbeat_interval_ms < 1:
            raise ConfigError("group.consumer.min.session.timeout.ms and group.consumer.min.heartbeat.interval.ms must be >= 1")
        for low, value, high, what in (
                (self.consumer_min_session_timeout_ms, self.consumer_session_timeout_ms,
                 self.consumer_max_session_timeout_ms, "session.timeout.ms"),
                (self.consumer_min_heartbeat_interval_ms, self.consumer_heartbeat_interval_ms,
                 self.consumer_max_heartbeat_interval_ms, "heartbeat.interval.ms")):
            if not low <= value <= high:
                raise ConfigError(f"group.consumer.{what} must be between group.consumer.min.{what} and "
                                  f"group.consumer.max.{what}")
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise ConfigError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
        if self.consumer_max_size < 1:
            raise ConfigError("group.consumer.max.size must be >= 1")
        names = self.consumer_assignor_names
        unknown = [n for n in names if n not in CONSUMER_ASSIGNOR_CLASSES.values()]
        if not names or unknown or len(set(names)) != len(names):
            raise ConfigError(f"group.consumer.assignors must list some of uniform, range (or Kafka's class names), "
                              f"each once; got {self.consumer_assignors!r}")
        if self.consumer_migration_policy.lower() not in MIGRATION_POLICIES:
            raise ConfigError(f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}, "
                              f"got {self.consumer_migration_policy!r}")

    def as_kafka_names(self) -> dict[str, object]:
        return {name: getattr(self, attr) for name, (attr, _) in _KEYS.items()}

    def is_set(self, name: str) -> bool:
        """Was `name` given (command line, config file), or does it differ from its default (a
        config built in code)? Kafka's STATIC_BROKER_CONFIG, where the rest is DEFAULT_CONFIG."""
        attr, default = _KEYS[name]
        return name in self.overridden or getattr(self, attr) != default

    def value_of(self, name: str) -> object:
        return getattr(self, _KEYS[name][0])

    @staticmethod
    def default_of(name: str) -> object:
        return _KEYS[name][1]


def _parse(name: str, raw: str, kind: type) -> object:
    if kind is bool:
        if raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        raise ConfigError(f"{name}: expected true or false, got {raw!r}")
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected {kind.__name__}, got {raw!r}") from None
