"""DescribeConfigs (Kafka's API 32; docs/protocol.md §3.24) as a pure function of the broker's
config and its topics, and DescribeCluster (API 60; §3.25) through the Broker: values, sources
(DEFAULT_CONFIG unless given: STATIC_BROKER_CONFIG), synonyms, types and documentation when asked,
and Kafka's answers for an unknown topic, another broker id and resource types grouplab does not
describe."""

from __future__ import annotations

import pytest

from grouplab.coordinator.broker import Broker, RequestContext
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.describe_configs import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
    describe_configs,
)
from grouplab.protocol.effects import Reply
from grouplab.protocol.errors import AnswerTooLarge, ErrorCode
from grouplab.protocol.messages import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsSynonym,
    ErrorResponse,
)

STATIC, DEFAULT = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG


def describe(config: BrokerConfig, *resources: DescribeConfigsResource, synonyms: bool = False,
             documentation: bool = False, topics: dict[str, int] | None = None):
    req = DescribeConfigsRequest(list(resources), synonyms, documentation)
    return describe_configs(req, config, {"t": 3} if topics is None else topics).results


def by_name(result) -> dict:
    return {e.name: e for e in result.configs}


def test_every_broker_config_is_described_with_its_value_and_source() -> None:
    """The list is every config grouplab honours (a new one must be added to the table), each
    read-only, not sensitive, its value in Kafka's string form; given ones are STATIC_BROKER_CONFIG
    even at their default value, the rest DEFAULT_CONFIG."""
    assert list(BROKER_CONFIGS) == BrokerConfig.names()
    config = BrokerConfig().with_overrides(["group.initial.rebalance.delay.ms=0", "num.partitions=1",
                                            "auto.create.topics.enable=false"])
    (result,) = describe(config, DescribeConfigsResource(RESOURCE_BROKER, "0"))
    assert (result.error_code, result.resource_type, result.resource_name) == (0, RESOURCE_BROKER, "0")
    entries = by_name(result)
    assert list(entries) == BrokerConfig.names()
    assert [(entries[n].value, entries[n].config_source) for n in (
        "group.initial.rebalance.delay.ms", "num.partitions", "auto.create.topics.enable", "group.max.size",
        "delete.topic.enable", "grouplab.log.fsync", "log.flush.interval.ms")] == [
        ("0", STATIC), ("1", STATIC), ("false", STATIC), ("4096", DEFAULT), ("true", DEFAULT), ("always", DEFAULT),
        ("9223372036854775807", DEFAULT)]
    assert all(e.read_only and not e.is_sensitive and e.synonyms == [] and e.documentation is None
               for e in entries.values())
    assert entries["auto.create.topics.enable"].config_type == ConfigType.BOOLEAN
    assert entries["log.flush.interval.messages"].config_type == ConfigType.LONG
    assert entries["grouplab.log.fsync"].config_type == ConfigType.STRING
    assert entries["num.partitions"].config_type == ConfigType.INT


def test_a_config_set_in_code_to_another_value_is_static_too() -> None:
    (result,) = describe(BrokerConfig(num_partitions=4), DescribeConfigsResource(RESOURCE_BROKER, "0"))
    assert (by_name(result)["num.partitions"].value, by_name(result)["num.partitions"].config_source) == ("4", STATIC)


def test_synonyms_and_documentation_only_when_asked() -> None:
    config = BrokerConfig().with_overrides(["num.partitions=6", "log.segment.bytes=2048"])
    broker, topic = describe(config, DescribeConfigsResource(RESOURCE_BROKER, "0"),
                             DescribeConfigsResource(RESOURCE_TOPIC, "t"), synonyms=True, documentation=True)
    b = by_name(broker)
    assert b["num.partitions"].synonyms == [DescribeConfigsSynonym("num.partitions", "6", STATIC),
                                            DescribeConfigsSynonym("num.partitions", "1", DEFAULT)]
    assert b["group.max.size"].synonyms == [DescribeConfigsSynonym("group.max.size", "4096", DEFAULT)]
    assert all(e.documentation for e in broker.configs) and all(e.documentation for e in topic.configs)
    t = by_name(topic)
    assert (t["segment.bytes"].value, t["segment.bytes"].config_source) == ("2048", STATIC)
    assert t["segment.bytes"].synonyms == [DescribeConfigsSynonym("log.segment.bytes", "2048", STATIC),
                                           DescribeConfigsSynonym("log.segment.bytes", "1073741824", DEFAULT)]
    assert t["cleanup.policy"].synonyms == []


def test_a_topic_lists_the_topic_configs_grouplab_honours() -> None:
    config = BrokerConfig().with_overrides(["message.max.bytes=5000"])
    (result,) = describe(config, DescribeConfigsResource(RESOURCE_TOPIC, "t"))
    entries = by_name(result)
    assert list(entries) == list(TOPIC_CONFIGS)
    assert {n: (e.value, e.config_source) for n, e in entries.items()} == {
        "cleanup.policy": ("delete", DEFAULT), "retention.ms": ("-1", DEFAULT), "retention.bytes": ("-1", DEFAULT),
        "segment.bytes": ("1073741824", DEFAULT), "index.interval.bytes": ("4096", DEFAULT),
        "flush.messages": ("9223372036854775807", DEFAULT), "flush.ms": ("9223372036854775807", DEFAULT),
        "max.message.bytes": ("5000", STATIC), "message.timestamp.type": ("CreateTime", DEFAULT)}
    assert entries["cleanup.policy"].config_type == ConfigType.LIST


def test_configuration_keys_pick_configs_and_unknown_ones_are_left_out() -> None:
    broker, topic, every = describe(
        BrokerConfig(), DescribeConfigsResource(RESOURCE_BROKER, "0", ["broker.id", "no.such", "num.partitions"]),
        DescribeConfigsResource(RESOURCE_TOPIC, "t", ["retention.ms"]), DescribeConfigsResource(RESOURCE_TOPIC, "t", []))
    assert [e.name for e in broker.configs] == ["num.partitions", "broker.id"]  # grouplab's order
    assert [e.name for e in topic.configs] == ["retention.ms"]
    assert len(every.configs) == len(TOPIC_CONFIGS)  # empty keys: every config, as Kafka


@pytest.mark.parametrize("resource, code, words", [
    (DescribeConfigsResource(RESOURCE_TOPIC, "nope"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
    (DescribeConfigsResource(RESOURCE_TOPIC, "bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION, "illegal"),
    (DescribeConfigsResource(RESOURCE_BROKER, "1"), ErrorCode.INVALID_REQUEST,
     "Unexpected broker id, expected 0 or empty string, but received 1"),
    (DescribeConfigsResource(RESOURCE_BROKER, "x"), ErrorCode.INVALID_REQUEST,
     "Broker id must be an integer, but it is: x"),
    (DescribeConfigsResource(8, "0"), ErrorCode.INVALID_REQUEST, "Unsupported resource type: BROKER_LOGGER"),
    (DescribeConfigsResource(32, "g"), ErrorCode.INVALID_REQUEST, "Unsupported resource type: GROUP"),
    (DescribeConfigsResource(99, "x"), ErrorCode.INVALID_REQUEST, "Unsupported resource type: 99"),
])
def test_each_resource_is_refused_alone_as_kafka_refuses_it(resource: DescribeConfigsResource, code: ErrorCode,
                                                             words: str) -> None:
    refused, fine = describe(BrokerConfig(), resource, DescribeConfigsResource(RESOURCE_BROKER, "0"))
    assert (refused.error_code, refused.configs) == (code, [])
    assert words in refused.error_message
    assert (refused.resource_type, refused.resource_name) == (resource.resource_type, resource.resource_name)
    assert fine.error_code == 0 and fine.configs


def test_the_broker_with_an_empty_name_is_the_cluster_wide_dynamic_defaults_none() -> None:
    (result,) = describe(BrokerConfig(), DescribeConfigsResource(RESOURCE_BROKER, ""))
    assert (result.error_code, result.configs) == (0, [])


def test_another_broker_id_in_the_config_is_the_one_described() -> None:
    config = BrokerConfig().with_overrides(["broker.id=3"])
    ok, other = describe(config, DescribeConfigsResource(RESOURCE_BROKER, "3"), DescribeConfigsResource(RESOURCE_BROKER, "0"))
    assert ok.error_code == 0 and other.error_code == ErrorCode.INVALID_REQUEST


def test_an_answer_too_large_is_refused_before_it_is_built() -> None:
    many = [DescribeConfigsResource(RESOURCE_BROKER, "0")] * 200
    with pytest.raises(AnswerTooLarge):
        describe_configs(DescribeConfigsRequest(many), BrokerConfig(), {}, max_answer_bytes=10_000)
    b = Broker(BrokerConfig().with_overrides(["grouplab.response.max.bytes=10000"]))
    out = b.handle("DescribeConfigs", DescribeConfigsRequest(many), RequestContext("r"), 0)
    [reply] = [o.body for o in out if isinstance(o, Reply)]
    assert isinstance(reply, ErrorResponse) and reply.error_code == ErrorCode.INVALID_REQUEST


def test_describe_cluster_names_the_one_broker_and_the_cluster() -> None:
    b = Broker(BrokerConfig().with_overrides(["broker.id=2"]), host="127.0.0.1", port=9192)
    for asked in (False, True):
        [reply] = [o.body for o in b.handle("DescribeCluster", DescribeClusterRequest(asked), RequestContext("r"), 0)
                   if isinstance(o, Reply)]
        assert (reply.error_code, reply.cluster_id, reply.controller_id) == (0, "grouplab", 2)
        assert [(x.broker_id, x.host, x.port, x.rack) for x in reply.brokers] == [(2, "127.0.0.1", 9192, None)]
        assert reply.cluster_authorized_operations == -2**31


# ----------------------------------------------------------------------------- grouplab configs


def test_grouplab_configs() -> None:
    """The broker's configs by default (its id from DescribeCluster), a topic's with --topic; an
    unknown topic or another broker id is one line on stderr and exit 1."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from grouplab.testing import Cluster

    root = Path(__file__).resolve().parent.parent

    def grouplab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "grouplab.cli", "configs", *args], capture_output=True, text=True,
                              timeout=60, cwd=root, env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "120"})

    def one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
        assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
        (line,) = proc.stderr.splitlines()
        assert all(w in line for w in words), line

    with Cluster(topics={"t": 2}, config={"num.partitions": "3", "broker.id": "4"}) as cluster:
        bootstrap = ("--bootstrap-server", f"127.0.0.1:{cluster.grouplab_port}")
        proc = grouplab(*bootstrap)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        lines = proc.stdout.splitlines()
        assert "configs of broker 4" in lines[0]
        assert any("num.partitions" in line and " 3 " in line and "STATIC_BROKER_CONFIG" in line for line in lines)
        assert any("group.max.size" in line and "DEFAULT_CONFIG" in line for line in lines)
        proc = grouplab("--topic", "t", "--format", "json", *bootstrap)
        assert proc.returncode == 0, proc.stderr
        configs = {c["name"]: c for c in json.loads(proc.stdout)}
        assert list(configs) == list(TOPIC_CONFIGS)
        assert configs["retention.ms"]["value"] == "-1" and configs["retention.ms"]["documentation"]
        one_line_error(grouplab("--topic", "nope", *bootstrap), "topic 'nope' does not exist", "grouplab topics list")
        one_line_error(grouplab("--broker", "0", *bootstrap), "broker 0", "Unexpected broker id, expected 4")
    one_line_error(grouplab("--bootstrap-server", "127.0.0.1:1"), "cannot connect")
