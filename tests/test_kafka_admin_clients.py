"""Real clients' admin APIs for consumer groups against the Kafka-wire listener (issue 21): each
call is answered as Kafka answers it, never with a closed connection. Started here with the one
that closed it: DescribeGroups at v3+ (its authorized-operations field did not encode)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from grouplab.testing import Cluster

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster():
    """One consumer-group member (confluent-kafka, client id c1) over topic t (2 partitions)."""
    with Cluster(topics={"t": 2}) as c:
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g", "client.id": "c1",
                             "session.timeout.ms": 10000, "log_level": 0})
        consumer.subscribe(["t"])
        c.wait_for(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 2, timeout=30,
                   what="c1 assigned both partitions")
        try:
            yield c
        finally:
            consumer.close()


def test_confluent_describe_consumer_groups(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    described = admin.describe_consumer_groups(["g"], request_timeout=10)["g"].result(timeout=30)
    assert described.group_id == "g" and described.is_simple_consumer_group is False
    assert str(described.state).endswith("STABLE") and described.partition_assignor == "range"
    (member,) = described.members
    assert member.client_id == "c1"
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1]
    assert described.authorized_operations is None  # not asked for: Kafka answers INT32_MIN


def test_kafka_python_describe_and_list_consumer_groups(cluster: Cluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
    try:
        group = admin.describe_groups(["g"])["g"]
        assert group["error"] is None and group["group_state"] == "Stable" and group["protocol_data"] == "range"
        (member,) = group["members"]
        assert member["client_id"] == "c1"
        assert member["member_assignment"]["assigned_partitions"] == [{"topic": "t", "partitions": [0, 1]}]
        assert group["authorized_operations"] is None
        assert admin.list_groups() == [{"group_id": "g", "protocol_type": "consumer", "group_state": "Stable"}]
    finally:
        admin.close()
