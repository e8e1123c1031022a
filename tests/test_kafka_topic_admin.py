"""Real clients' admin APIs for topics and the cluster against the Kafka-wire listener (issue 21):
every topic and cluster call of kafka-python's KafkaAdminClient (3.0.12) and confluent-kafka's
AdminClient, and kafka-python's consumer offset lookups, answered as Kafka answers them (an error
code where Kafka gives one, never a closed connection): create_topics, create_partitions,
delete_topics, describe_configs (broker and topic), describe_cluster, list_topics /
describe_topics, list_offsets (earliest, latest, max timestamp, for a timestamp) and
offsets_for_times / beginning_offsets / end_offsets; and a group subscribed to a topic that is
deleted rebalancing it away, as on Kafka."""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import kafka.errors
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic, OffsetSpec, ResourceType
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import KafkaAdminClient
from kafka.protocol.consumer import OffsetSpec as KOffsetSpec
from kafka.structs import OffsetAndMetadata

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.describe_configs import TOPIC_CONFIGS
from grouplab.coordinator.topics import topic_id_text
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.types import TopicPartition
from grouplab.testing import Cluster

pytestmark = pytest.mark.e2e
TIMESTAMPS = (1000, 3000, 2000, 3000)  # topic "ts" partition 0, offsets 0-3: the largest twice (KIP-734: the first)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Topic t (2 partitions); topic ts (2 partitions), partition 0 holding records with the
    timestamps above, partition 1 empty."""
    with Cluster(topics={"t": 2, "ts": 2}, config={"num.partitions": 2}) as c:
        producer = KafkaProducer(bootstrap_servers=c.bootstrap)
        for i, ts in enumerate(TIMESTAMPS):
            producer.send("ts", value=b"r%d" % i, partition=0, timestamp_ms=ts)
        producer.flush(30)
        producer.close()
        yield c


@pytest.fixture
def kadmin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()


@pytest.fixture
def cadmin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})


def results(futures: dict[Any, Any]) -> dict[Any, Any]:
    """confluent-kafka's futures: each one's result, or (error code, message) where it failed."""
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=30)
        except KafkaException as exc:
            out[key] = (exc.args[0].code(), exc.args[0].str())
    return out


def codes(answer: dict[str, Any], key: str = "topics") -> dict[str, int]:
    return {t["name"]: t["error_code"] for t in answer[key]}


# ----------------------------------------------------------------------------- CreateTopics, CreatePartitions


def test_kafka_python_create_topics(cluster: Cluster, kadmin: KafkaAdminClient) -> None:
    created = kadmin.create_topics({"kp-new": {"num_partitions": 3, "replication_factor": 1}, "kp-default": {}})
    assert codes(created) == {"kp-new": 0, "kp-default": 0}
    assert {t["name"]: t["num_partitions"] for t in created["topics"]} == {"kp-new": 3, "kp-default": 2}
    assert kadmin.create_topics({"kp-vo": {"num_partitions": 2}}, validate_only=True)["topics"][0]["error_code"] == 0
    assert "kp-vo" not in cluster.topics()  # validate_only creates nothing
    refused = kadmin.create_topics({"kp-new": {"num_partitions": 1}, "kp-zero": {"num_partitions": 0},
                                    "kp-rf": {"num_partitions": 1, "replication_factor": 3}}, raise_errors=False)
    assert codes(refused) == {"kp-new": ErrorCode.TOPIC_ALREADY_EXISTS, "kp-zero": ErrorCode.INVALID_PARTITIONS,
                              "kp-rf": ErrorCode.INVALID_REPLICATION_FACTOR}
    with pytest.raises(kafka.errors.TopicAlreadyExistsError):
        kadmin.create_topics({"kp-new": {"num_partitions": 3}})
    assert cluster.topics()["kp-new"] == 3 and "kp-zero" not in cluster.topics() and "kp-rf" not in cluster.topics()


def test_confluent_create_topics(cluster: Cluster, cadmin: AdminClient) -> None:
    got = results(cadmin.create_topics([NewTopic("ck-new", 3, 1), NewTopic("t", 1, 1), NewTopic("ck-zero", 0, 1),
                                        NewTopic("ck-rf", 1, 3)], request_timeout=30))
    assert got["ck-new"] is None
    assert {k: v[0] for k, v in got.items() if v is not None} == {
        "t": ErrorCode.TOPIC_ALREADY_EXISTS, "ck-zero": ErrorCode.INVALID_PARTITIONS,
        "ck-rf": ErrorCode.INVALID_REPLICATION_FACTOR}
    assert results(cadmin.create_topics([NewTopic("ck-vo", 2, 1)], validate_only=True)) == {"ck-vo": None}
    assert cluster.topics()["ck-new"] == 3 and "ck-vo" not in cluster.topics()


def test_kafka_python_create_partitions(cluster: Cluster, kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics({"kp-grow": {"num_partitions": 2}})
    assert kadmin.create_partitions({"kp-grow": 4}).results[0].error_code == 0
    assert kadmin.create_partitions({"kp-grow": 6}, validate_only=True).results[0].error_code == 0
    assert cluster.topics()["kp-grow"] == 4
    refused = kadmin.create_partitions({"kp-grow": 3, "nope": 3}, raise_errors=False)
    assert {r.name: r.error_code for r in refused.results} == {"kp-grow": ErrorCode.INVALID_PARTITIONS,
                                                              "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    with pytest.raises(kafka.errors.InvalidPartitionsError):
        kadmin.create_partitions({"kp-grow": 4})


def test_confluent_create_partitions(cluster: Cluster, cadmin: AdminClient) -> None:
    results(cadmin.create_topics([NewTopic("ck-grow", 2, 1)]))
    assert results(cadmin.create_partitions([NewPartitions("ck-grow", 5), NewPartitions("nope", 2)])) == {
        "ck-grow": None, "nope": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "topic 'nope' does not exist")}
    assert results(cadmin.create_partitions([NewPartitions("ck-grow", 9)], validate_only=True)) == {"ck-grow": None}
    refused = results(cadmin.create_partitions([NewPartitions("ck-grow", 4)]))["ck-grow"]
    assert refused[0] == ErrorCode.INVALID_PARTITIONS
    assert cluster.topics()["ck-grow"] == 5


# ----------------------------------------------------------------------------- DeleteTopics


def test_kafka_python_delete_topics(cluster: Cluster, kadmin: KafkaAdminClient) -> None:
    """The topic goes with its records and the groups' committed offsets of it (a consumer's
    commit); an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown topic id (v6) UNKNOWN_TOPIC_ID."""
    kadmin.create_topics({"kp-del": {"num_partitions": 2}, "kp-stay": {"num_partitions": 1}})
    cluster.produce("kp-del", [b"x", b"y"])
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="kp-del-g", enable_auto_commit=False)
    consumer.commit({KTopicPartition("kp-del", 0): OffsetAndMetadata(2, "", -1),
                     KTopicPartition("kp-stay", 0): OffsetAndMetadata(0, "", -1)})
    consumer.close()
    assert cluster.committed("kp-del-g") == {TopicPartition("kp-del", 0): 2, TopicPartition("kp-stay", 0): 0}
    answer = kadmin.delete_topics(["kp-del", "nope"], raise_errors=False)
    assert codes(answer) == {"kp-del": 0, "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert "kp-del" not in kadmin.list_topics() and "kp-del" not in cluster.topics()
    assert cluster.committed("kp-del-g") == {TopicPartition("kp-stay", 0): 0}
    by_id = kadmin.delete_topics([uuid.uuid4()], raise_errors=False)["topics"]
    assert [(t["name"], t["error_code"]) for t in by_id] == [(None, ErrorCode.UNKNOWN_TOPIC_ID)]
    with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
        kadmin.delete_topics(["kp-del"])
    kadmin.create_topics({"kp-del": {"num_partitions": 1}})  # the name again: a new topic, from offset 0
    assert cluster.produce("kp-del", [b"new"]) == 0


def test_a_topic_has_an_id_both_clients_see_and_a_deletion_by_id_takes(cluster: Cluster, kadmin: KafkaAdminClient,
                                                                       cadmin: AdminClient) -> None:
    """Metadata v10+ gives each topic its id (kafka-topics --describe's TopicId), the same to both
    clients; DeleteTopics v6 deletes by it; the name made again is a new topic with a new id."""
    kadmin.create_topics({"by-id": {"num_partitions": 2}})

    def ids() -> tuple[uuid.UUID, str]:
        (k,) = kadmin.describe_topics(["by-id"])
        (c,) = results(cadmin.describe_topics(TopicCollection(["by-id"]), request_timeout=30)).values()
        # librdkafka prints standard base64; Kafka's own tools (Java's Uuid) the URL-safe form
        return uuid.UUID(str(k["topic_id"])), str(c.topic_id).replace("+", "-").replace("/", "_")

    first, shown = ids()
    assert first != uuid.UUID(int=0) and shown == topic_id_text(first)
    (deleted,) = kadmin.delete_topics([first], raise_errors=False)["topics"]
    assert (deleted["error_code"], uuid.UUID(str(deleted["topic_id"]))) == (0, first)
    assert "by-id" not in cluster.topics()
    kadmin.create_topics({"by-id": {"num_partitions": 1}})
    again, _ = ids()
    assert again not in (first, uuid.UUID(int=0))


def test_confluent_delete_topics(cluster: Cluster, cadmin: AdminClient) -> None:
    results(cadmin.create_topics([NewTopic("ck-del", 1, 1)]))
    got = results(cadmin.delete_topics(["ck-del", "nope"], operation_timeout=30))
    assert got["ck-del"] is None and got["nope"][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "ck-del" not in cadmin.list_topics(timeout=30).topics


def test_delete_topic_enable_false_is_topic_deletion_disabled_for_both_clients() -> None:
    with Cluster(topics={"t": 1}, config={"delete.topic.enable": False}) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=10000)
        try:
            assert codes(admin.delete_topics(["t"], raise_errors=False)) == {"t": ErrorCode.TOPIC_DELETION_DISABLED}
        finally:
            admin.close()
        cadmin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})  # kept: its futures need it
        got = results(cadmin.delete_topics(["t"]))
        assert got["t"][0] == ErrorCode.TOPIC_DELETION_DISABLED
        assert c.topics() == {"t": 1}


def test_a_group_subscribed_to_a_deleted_topic_rebalances_it_away(cluster: Cluster, kadmin: KafkaAdminClient) -> None:
    """As on Kafka: the leader's next metadata refresh finds the topic gone, and the group's next
    generation assigns only what is left."""
    kadmin.create_topics({"sub-keep": {"num_partitions": 2}, "sub-gone": {"num_partitions": 2}})
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "sub-g", "session.timeout.ms": 10000,
                         "topic.metadata.refresh.interval.ms": 1000, "log_level": 0})
    try:
        consumer.subscribe(["sub-keep", "sub-gone"])
        cluster.wait_for(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 4, timeout=30,
                         what="the member assigned both topics' partitions")
        generation = cluster.group("sub-g").generation
        kadmin.delete_topics(["sub-gone"])
        cluster.wait_for(lambda: consumer.poll(0.1) is None and cluster.group("sub-g").generation > generation
                         and sorted((p.topic, p.partition) for p in consumer.assignment()) == [
                             ("sub-keep", 0), ("sub-keep", 1)], timeout=30,
                         what="a new generation without the deleted topic's partitions")
    finally:
        consumer.close()


# ----------------------------------------------------------------------------- DescribeConfigs, DescribeCluster


def test_kafka_python_describe_configs(cluster: Cluster, kadmin: KafkaAdminClient) -> None:
    answer = kadmin.describe_configs([KConfigResource("BROKER", "0"), KConfigResource("TOPIC", "t")],
                                     include_synonyms=True, config_filter="all")
    broker, topic = answer["broker"]["0"], answer["topic"]["t"]
    assert list(broker) == BrokerConfig.names()
    assert broker["num.partitions"]["value"] == "2" and broker["num.partitions"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert [s["source"] for s in broker["num.partitions"]["synonyms"]] == ["STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"]
    assert broker["group.max.size"]["config_source"] == "DEFAULT_CONFIG" and broker["group.max.size"]["read_only"]
    assert broker["auto.create.topics.enable"]["config_type"] == "BOOLEAN"
    assert list(topic) == list(TOPIC_CONFIGS)
    assert topic["retention.ms"]["value"] == "-1" and topic["cleanup.policy"]["value"] == "delete"
    assert topic["segment.bytes"]["synonyms"] == [{"name": "log.segment.bytes", "value": "1073741824",
                                                   "source": "DEFAULT_CONFIG"}]
    keys = kadmin.describe_configs([KConfigResource("TOPIC", "t", ["retention.ms", "no.such"])], config_filter="all")
    assert list(keys["topic"]["t"]) == ["retention.ms"]
    # kafka-python leaves out a resource's error (an unknown topic) and asks another broker id of that broker
    assert kadmin.describe_configs([KConfigResource("TOPIC", "nope")], config_filter="all") == {"topic": {"nope": {}}}


def test_confluent_describe_configs(cluster: Cluster, cadmin: AdminClient) -> None:
    (broker,) = results(cadmin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])).values()
    assert list(broker) == BrokerConfig.names()
    assert (broker["num.partitions"].value, broker["num.partitions"].source) == (
        "2", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert broker["group.max.size"].source == ConfigSource.DEFAULT_CONFIG.value and broker["group.max.size"].is_read_only
    topics = results(cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, "t"),
                                              ConfigResource(ResourceType.TOPIC, "nope")]))
    (topic, missing) = topics.values()
    assert list(topic) == list(TOPIC_CONFIGS) and topic["retention.ms"].value == "-1"
    assert missing[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # (Both clients send a BROKER resource to that broker: another id never reaches grouplab. Its
    # answer, INVALID_REQUEST as Kafka's, is in tests/test_kafka_wire.py and test_describe_configs.py.)


def test_describe_cluster_from_both_clients(cluster: Cluster, kadmin: KafkaAdminClient, cadmin: AdminClient) -> None:
    """The broker as the client reached it (here the testing proxy's address), cluster id
    grouplab, controller broker.id; the cluster's authorized operations when asked (kafka-python
    asks) are every cluster operation, as a Kafka broker without an authorizer answers."""
    host, port = cluster.bootstrap.rsplit(":", 1)
    described_by_kafka_python = kadmin.describe_cluster()
    assert sorted(described_by_kafka_python.pop("authorized_operations")) == [
        "ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"]
    assert described_by_kafka_python == {"cluster_id": "grouplab", "controller_id": 0,
                                         "brokers": [{"broker_id": 0, "host": host, "port": int(port), "rack": None,
                                                      "is_fenced": False}]}
    described = cadmin.describe_cluster(request_timeout=30).result(timeout=30)
    assert (described.cluster_id, described.controller.id, described.authorized_operations) == ("grouplab", 0, None)
    assert [(n.id, n.host, n.port) for n in described.nodes] == [(0, host, int(port))]


def test_list_and_describe_topics_from_both_clients(cluster: Cluster, kadmin: KafkaAdminClient,
                                                    cadmin: AdminClient) -> None:
    assert {"t", "ts"} <= set(kadmin.list_topics())
    (described,) = kadmin.describe_topics(["t"])
    assert described["error_code"] == 0 and [p["partition_index"] for p in described["partitions"]] == [0, 1]
    assert all(p["leader_id"] == 0 and p["isr_nodes"] == [0] for p in described["partitions"])
    metadata = cadmin.list_topics(timeout=30)
    assert {"t", "ts"} <= set(metadata.topics) and metadata.cluster_id == "grouplab"
    assert sorted(metadata.topics["t"].partitions) == [0, 1]
    (topic,) = results(cadmin.describe_topics(TopicCollection(["t"]), request_timeout=30)).values()
    assert topic.name == "t" and [p.id for p in topic.partitions] == [0, 1]
    assert all(p.leader.id == 0 for p in topic.partitions)


# ----------------------------------------------------------------------------- ListOffsets


def test_confluent_list_offsets(cluster: Cluster, cadmin: AdminClient) -> None:
    tp, empty = CTopicPartition("ts", 0), CTopicPartition("ts", 1)

    def lookup(spec: OffsetSpec, partition: CTopicPartition = tp) -> tuple[int, int]:
        info = results(cadmin.list_offsets({partition: spec}, request_timeout=30))[partition]
        return info.offset, info.timestamp

    assert lookup(OffsetSpec.earliest()) == (0, -1)
    assert lookup(OffsetSpec.latest()) == (4, -1)
    assert lookup(OffsetSpec.max_timestamp()) == (1, 3000)  # the first of the two records with 3000
    assert lookup(OffsetSpec.for_timestamp(1500)) == (1, 3000)  # the first record at or after 1500, by offset
    assert lookup(OffsetSpec.for_timestamp(2000)) == (1, 3000)
    assert lookup(OffsetSpec.for_timestamp(1000)) == (0, 1000)
    assert lookup(OffsetSpec.for_timestamp(3001)) == (-1, -1)
    assert lookup(OffsetSpec.max_timestamp(), empty) == (-1, -1)
    assert lookup(OffsetSpec.latest(), empty) == (0, -1)


def test_kafka_python_list_partition_offsets(cluster: Cluster, kadmin: KafkaAdminClient) -> None:
    tp, empty = KTopicPartition("ts", 0), KTopicPartition("ts", 1)
    got = kadmin.list_partition_offsets({tp: KOffsetSpec.MAX_TIMESTAMP, empty: KOffsetSpec.EARLIEST})
    assert (got[tp].offset, got[tp].timestamp) == (1, 3000) and (got[empty].offset, got[empty].timestamp) == (0, -1)
    got = kadmin.list_partition_offsets({tp: KOffsetSpec.LATEST, empty: KOffsetSpec.MAX_TIMESTAMP})
    assert (got[tp].offset, got[empty].offset) == (4, -1)


def test_kafka_python_consumer_offset_lookups(cluster: Cluster) -> None:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    try:
        tp, empty = KTopicPartition("ts", 0), KTopicPartition("ts", 1)
        assert consumer.beginning_offsets([tp, empty]) == {tp: 0, empty: 0}
        assert consumer.end_offsets([tp, empty]) == {tp: 4, empty: 0}
        found = consumer.offsets_for_times({tp: 2500, empty: 0})
        assert (found[tp].offset, found[tp].timestamp) == (1, 3000) and found[empty] is None
        assert consumer.offsets_for_times({tp: 0})[tp].offset == 0
        assert consumer.offsets_for_times({tp: 5000}) == {tp: None}
    finally:
        consumer.close()


def test_calls_for_apis_grouplab_does_not_serve_fail_in_the_client_not_on_the_wire(cluster: Cluster,
                                                                                  kadmin: KafkaAdminClient) -> None:
    """AlterConfigs and DescribeLogDirs are not advertised: the client says so itself (as it does
    with a Kafka too old for them), and its connection stays usable."""
    with pytest.raises(kafka.errors.IncompatibleBrokerVersion):
        kadmin.alter_configs([KConfigResource("TOPIC", "t", {"retention.ms": "1000"})], raise_on_unknown=False)
    assert "t" in kadmin.list_topics()


def test_the_testing_cluster_deletes_a_topic(cluster: Cluster) -> None:
    from grouplab.testing.cluster import ClusterError

    cluster.create_topic("tc-del", 2)
    cluster.produce("tc-del", [b"x"])
    cluster.delete_topic("tc-del")
    assert "tc-del" not in cluster.topics()
    with pytest.raises(ClusterError, match="DeleteTopics refused: UNKNOWN_TOPIC_OR_PARTITION"):
        cluster.delete_topic("tc-del")
