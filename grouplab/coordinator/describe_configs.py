"""DescribeConfigs, pure: the configs of the broker and of a topic as Kafka's ConfigHelper describes
them, built from the BrokerConfig and the topic store (docs/protocol.md §3.24).

- BROKER `<broker.id>`: every broker config grouplab honours (coordinator/config.py), its value,
  and its source: STATIC_BROKER_CONFIG when given on the command line or in a config file (or set
  to another value in code), else DEFAULT_CONFIG. Read-only: grouplab cannot alter a config at
  run time (it serves no AlterConfigs). BROKER `""` is Kafka's cluster-wide dynamic defaults: none.
  Another broker id is Kafka's INVALID_REQUEST.
- TOPIC: the topic configs Kafka shows that describe what grouplab's topics do, with the broker
  config they follow (their synonym) where grouplab has one. grouplab keeps no per-topic
  overrides, so a topic config's source is its broker config's or DEFAULT_CONFIG.
- Synonyms (include_synonyms) as Kafka's: the value as set, then the default, each with its source.
- Types and documentation (v3+, include_documentation) per config.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Mapping, NamedTuple

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.topics import topic_name_error
from grouplab.protocol.errors import AnswerTooLarge, ErrorCode
from grouplab.protocol.messages import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from grouplab.protocol.schema import floor_bytes


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource (the ones grouplab answers)."""

    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigType (the ones grouplab's configs have)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


class BrokerEntry(NamedTuple):
    type: ConfigType
    documentation: str


# Every broker config of coordinator/config.py: its Kafka type and what it does in grouplab.
BROKER_CONFIGS: dict[str, BrokerEntry] = {
    "group.min.session.timeout.ms": BrokerEntry(ConfigType.INT, "The smallest session timeout a JoinGroup may ask for."),
    "group.max.session.timeout.ms": BrokerEntry(ConfigType.INT, "The largest session timeout a JoinGroup may ask for."),
    "group.initial.rebalance.delay.ms": BrokerEntry(
        ConfigType.INT, "How long the first rebalance of an Empty group waits for more members to join."),
    "group.max.size": BrokerEntry(ConfigType.INT, "The most members (and pending members) one group may have."),
    "group.consumer.session.timeout.ms": BrokerEntry(
        ConfigType.INT, "How long a consumer-protocol member may go without a heartbeat before it is removed."),
    "group.consumer.min.session.timeout.ms": BrokerEntry(ConfigType.INT, "The smallest group.consumer.session.timeout.ms."),
    "group.consumer.max.session.timeout.ms": BrokerEntry(ConfigType.INT, "The largest group.consumer.session.timeout.ms."),
    "group.consumer.heartbeat.interval.ms": BrokerEntry(
        ConfigType.INT, "How often a consumer-protocol member is told to heartbeat."),
    "group.consumer.min.heartbeat.interval.ms": BrokerEntry(
        ConfigType.INT, "The smallest group.consumer.heartbeat.interval.ms."),
    "group.consumer.max.heartbeat.interval.ms": BrokerEntry(
        ConfigType.INT, "The largest group.consumer.heartbeat.interval.ms."),
    "group.consumer.max.size": BrokerEntry(ConfigType.INT, "The most members one consumer-protocol group may have."),
    "group.consumer.assignors": BrokerEntry(
        ConfigType.LIST, "The server-side assignors (uniform, range); the first is used when a member names none."),
    "group.consumer.migration.policy": BrokerEntry(
        ConfigType.STRING, "Which conversions between classic and consumer-protocol groups are allowed "
                           "(disabled, upgrade, downgrade, bidirectional)."),
    "num.partitions": BrokerEntry(
        ConfigType.INT, "Partitions of an auto-created topic and of a CreateTopics that asks for -1."),
    "auto.create.topics.enable": BrokerEntry(
        ConfigType.BOOLEAN, "Whether a Metadata request creates the topics it names that do not exist."),
    "delete.topic.enable": BrokerEntry(ConfigType.BOOLEAN, "Whether DeleteTopics may delete topics."),
    "socket.request.max.bytes": BrokerEntry(ConfigType.INT, "The largest request frame accepted."),
    "grouplab.response.max.bytes": BrokerEntry(
        ConfigType.INT, "grouplab's own: the largest answer sent; a larger one is refused with INVALID_REQUEST."),
    "broker.id": BrokerEntry(ConfigType.INT, "The id of the one broker: every partition's leader and the controller."),
    "offsets.topic.num.partitions": BrokerEntry(
        ConfigType.INT, "The partitions of __consumer_offsets: a group's coordinator leads the one its id hashes to."),
    "transaction.state.log.num.partitions": BrokerEntry(
        ConfigType.INT, "The partitions of __transaction_state: a transactional id's coordinator leads its one."),
    "auto.leader.rebalance.enable": BrokerEntry(
        ConfigType.BOOLEAN, "Move leadership back to preferred leaders on a timer once a broker is back."),
    "leader.imbalance.check.interval.seconds": BrokerEntry(
        ConfigType.LONG, "How often the preferred-leader election runs while leadership is off balance."),
    "grouplab.coordinator.load.time.ms": BrokerEntry(
        ConfigType.INT, "grouplab's own: how long a new coordinator takes to load a moved partition's groups."),
    "offset.metadata.max.bytes": BrokerEntry(ConfigType.INT, "The longest metadata string a committed offset may carry."),
    "transaction.max.timeout.ms": BrokerEntry(ConfigType.INT, "The largest transaction timeout a producer may ask for."),
    "offsets.retention.minutes": BrokerEntry(
        ConfigType.INT, "How long an Empty group keeps its committed offsets (KIP-211)."),
    "offsets.retention.check.interval.ms": BrokerEntry(ConfigType.LONG, "How often expired offsets are looked for."),
    "grouplab.max.groups": BrokerEntry(ConfigType.INT, "grouplab's own: the most groups the coordinator keeps."),
    "grouplab.max.protocols.per.member": BrokerEntry(
        ConfigType.INT, "grouplab's own: the most protocols one JoinGroup may list."),
    "grouplab.max.id.length": BrokerEntry(
        ConfigType.INT, "grouplab's own: the longest id of a new group and client id of a joining member."),
    "grouplab.log.fsync": BrokerEntry(
        ConfigType.STRING, "grouplab's own: whether the durable group log syncs each append (always) or not (never)."),
    "log.segment.bytes": BrokerEntry(ConfigType.INT, "The size at which a partition log starts a new segment."),
    "log.index.interval.bytes": BrokerEntry(ConfigType.INT, "Bytes between entries of a segment's sparse index."),
    "log.flush.interval.messages": BrokerEntry(ConfigType.LONG, "Records appended to a partition log between syncs."),
    "log.flush.interval.ms": BrokerEntry(ConfigType.LONG, "The longest an append waits in a partition log for a sync."),
    "message.max.bytes": BrokerEntry(ConfigType.INT, "The largest record batch a Produce may append."),
}


class TopicEntry(NamedTuple):
    type: ConfigType
    broker_config: str | None  # the broker config it follows (Kafka's synonym), or None: a fixed value
    value: str | None  # the fixed value (when broker_config is None)
    documentation: str


# The topic configs Kafka shows that apply to grouplab's topics (Kafka's names and order of meaning).
TOPIC_CONFIGS: dict[str, TopicEntry] = {
    "cleanup.policy": TopicEntry(ConfigType.LIST, None, "delete",
                                 "How old segments are discarded: by retention (delete); grouplab never compacts."),
    "retention.ms": TopicEntry(ConfigType.LONG, None, "-1",
                               "How long records are kept: -1, for ever (grouplab's logs only grow until the topic "
                               "is deleted; Kafka's default is 7 days)."),
    "retention.bytes": TopicEntry(ConfigType.LONG, None, "-1", "How large a partition may grow before old records go: "
                                                               "-1, no limit."),
    "segment.bytes": TopicEntry(ConfigType.INT, "log.segment.bytes", None, "The size at which a partition log starts a "
                                                                           "new segment."),
    "index.interval.bytes": TopicEntry(ConfigType.INT, "log.index.interval.bytes", None,
                                       "Bytes between entries of a segment's sparse index."),
    "flush.messages": TopicEntry(ConfigType.LONG, "log.flush.interval.messages", None,
                                 "Records appended between syncs of the partition log."),
    "flush.ms": TopicEntry(ConfigType.LONG, "log.flush.interval.ms", None,
                           "The longest an append waits for a sync of the partition log."),
    "max.message.bytes": TopicEntry(ConfigType.INT, "message.max.bytes", None,
                                    "The largest record batch a Produce may append."),
    "message.timestamp.type": TopicEntry(ConfigType.STRING, None, "CreateTime",
                                         "Records keep the producer's timestamps (a record without one is stamped "
                                         "with the append time)."),
}

RESOURCE_NAMES = {RESOURCE_TOPIC: "TOPIC", RESOURCE_BROKER: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS",
                  32: "GROUP"}


def config_string(value: object) -> str:
    """Kafka's ConfigDef.convertToString: booleans as true/false, numbers in decimal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def describe_configs(req: DescribeConfigsRequest, config: BrokerConfig, topics: Mapping[str, int],
                     max_answer_bytes: int | None = None) -> DescribeConfigsResponse:
    """Each resource in request order, as Kafka's ConfigHelper answers it. Raises AnswerTooLarge,
    before building anything, when the configs it would list cannot fit in `max_answer_bytes`."""
    if max_answer_bytes is not None:
        entries = sum(_count(r) for r in req.resources)
        floor = (len(req.resources) * floor_bytes(DescribeConfigsResult)
                 + entries * floor_bytes(DescribeConfigsResourceResult))
        if floor > max_answer_bytes:
            raise AnswerTooLarge(floor, max_answer_bytes, exact=False)
    return DescribeConfigsResponse(results=[_describe(r, req, config, topics) for r in req.resources])


def _count(resource: DescribeConfigsResource) -> int:
    table = TOPIC_CONFIGS if resource.resource_type == RESOURCE_TOPIC else BROKER_CONFIGS
    return len(table) if not resource.configuration_keys else len(set(resource.configuration_keys) & set(table))


def _wanted(resource: DescribeConfigsResource, names: list[str]) -> list[str]:
    """Nil or empty keys: every config; else the named ones grouplab has (others are left out)."""
    if not resource.configuration_keys:
        return names
    keys = set(resource.configuration_keys)
    return [n for n in names if n in keys]


def _describe(resource: DescribeConfigsResource, req: DescribeConfigsRequest, config: BrokerConfig,
              topics: Mapping[str, int]) -> DescribeConfigsResult:
    result = DescribeConfigsResult(resource.resource_type, resource.resource_name)
    kind, name = resource.resource_type, resource.resource_name
    if kind == RESOURCE_TOPIC:
        if (problem := topic_name_error(name)) is not None:
            return _refused(result, ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if name not in topics:
            return _refused(result, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        result.configs = [_topic_entry(n, config, req) for n in _wanted(resource, list(TOPIC_CONFIGS))]
    elif kind == RESOURCE_BROKER:
        if name == "":
            return result  # the cluster-wide dynamic defaults: grouplab has none
        try:
            broker_id = int(name)
        except ValueError:
            return _refused(result, ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
        if broker_id != config.broker_id:
            return _refused(result, ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {config.broker_id} "
                                                               f"or empty string, but received {name}")
        result.configs = [_broker_entry(n, config, req) for n in _wanted(resource, list(BROKER_CONFIGS))]
    else:
        what = RESOURCE_NAMES.get(kind, str(kind))
        return _refused(result, ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {what} (grouplab describes "
                                                           f"TOPIC and BROKER configs)")
    return result


def _refused(result: DescribeConfigsResult, code: ErrorCode, message: str) -> DescribeConfigsResult:
    result.error_code, result.error_message = code, message
    return result


def _synonyms(broker_name: str, config: BrokerConfig) -> list[DescribeConfigsSynonym]:
    """Kafka's order: the value as set (STATIC_BROKER_CONFIG) if it was, then the default."""
    out = []
    if config.is_set(broker_name):
        out.append(DescribeConfigsSynonym(broker_name, config_string(config.value_of(broker_name)),
                                          ConfigSource.STATIC_BROKER_CONFIG))
    out.append(DescribeConfigsSynonym(broker_name, config_string(BrokerConfig.default_of(broker_name)),
                                      ConfigSource.DEFAULT_CONFIG))
    return out


def _broker_entry(name: str, config: BrokerConfig, req: DescribeConfigsRequest) -> DescribeConfigsResourceResult:
    entry = BROKER_CONFIGS[name]
    synonyms = _synonyms(name, config)
    return DescribeConfigsResourceResult(
        name, config_string(config.value_of(name)), read_only=True, config_source=synonyms[0].source,
        synonyms=synonyms if req.include_synonyms else [], config_type=entry.type,
        documentation=entry.documentation if req.include_documentation else None)


def _topic_entry(name: str, config: BrokerConfig, req: DescribeConfigsRequest) -> DescribeConfigsResourceResult:
    entry = TOPIC_CONFIGS[name]
    if entry.broker_config is None:
        value, synonyms = entry.value, []
    else:
        value = config_string(config.value_of(entry.broker_config))
        synonyms = _synonyms(entry.broker_config, config)
    return DescribeConfigsResourceResult(
        name, value, read_only=True, config_source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
        synonyms=synonyms if req.include_synonyms else [], config_type=entry.type,
        documentation=entry.documentation if req.include_documentation else None)
