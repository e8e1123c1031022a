"""Real clients' admin APIs for consumer groups against the Kafka-wire listener (issue 21): each
call is answered as Kafka answers it, never with a closed connection. Every consumer-group call of
kafka-python's KafkaAdminClient (3.0.12: list_groups, describe_groups, list_group_offsets of one
group and of several in one OffsetFetch v8, alter_group_offsets, reset_group_offsets,
delete_group_offsets, delete_groups), of confluent-kafka's AdminClient (list_consumer_groups with
states and types filters, list_groups, describe_consumer_groups, list_consumer_group_offsets (one
group: librdkafka asks for no more), alter_consumer_group_offsets, delete_consumer_groups; it has no
call that deletes offsets) and of aiokafka's (list, describe, list offsets), against a group with a
member and against Empty (simple) groups.

Each test uses its own group names: the cluster and the member are shared by the module."""

from __future__ import annotations

from typing import Any

import kafka.errors as kafka_errors
import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient, OffsetSpec
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTP

from grouplab.protocol.errors import ErrorCode
from grouplab.testing import Cluster

pytestmark = pytest.mark.e2e

OFFSET_INVALID = -1001  # librdkafka's "no committed offset"


@pytest.fixture(scope="module")
def cluster() -> Any:
    """One consumer-group member (confluent-kafka, client id c1) of group g over topic t (2
    partitions); topic u (1 partition) is nobody's."""
    with Cluster(topics={"t": 2, "u": 1}) as c:
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
        # kafka-python asks for them; a Kafka broker without an authorizer answers every group operation
        assert sorted(group["authorized_operations"]) == ["ALTER_CONFIGS", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"]
        listed = {x["group_id"]: x for x in admin.list_groups()}  # ListGroups v5
        assert listed["g"] == {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"}
        assert "g" in {x["group_id"] for x in admin.list_groups(states_filter=["Stable"])}  # v4+
        assert "g" not in {x["group_id"] for x in admin.list_groups(states_filter=["Empty"])}
        assert "g" in {x["group_id"] for x in admin.list_groups(types_filter=["classic"])}  # v5
        assert admin.list_groups(types_filter=["consumer"]) == []  # no KIP-848 groups here
    finally:
        admin.close()


@pytest.fixture
def kp_admin(cluster: Cluster) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000, client_id="kp-admin")
    yield admin
    admin.close()


def test_kafka_python_alter_and_list_group_offsets(cluster: Cluster, kp_admin: Any) -> None:
    """alter_group_offsets (OffsetCommit, generation -1): stored for a group that does not exist
    (it becomes an Empty group), refused UNKNOWN_MEMBER_ID for a group with a member, as Kafka does;
    list_group_offsets of one group, and of several in one OffsetFetch v8 (an unknown group: none)."""
    stored = kp_admin.alter_group_offsets("kp-simple", {KTP("t", 0): OffsetAndMetadata(5, "by hand", None),
                                                        KTP("u", 0): OffsetAndMetadata(7, "", None)})
    assert stored == {KTP("t", 0): kafka_errors.NoError, KTP("u", 0): kafka_errors.NoError}
    assert kp_admin.alter_group_offsets("g", {KTP("t", 0): OffsetAndMetadata(1, "", None)}) == {
        KTP("t", 0): kafka_errors.UnknownMemberIdError}
    assert kp_admin.list_group_offsets("kp-simple") == {"kp-simple": {
        KTP("t", 0): OffsetAndMetadata(5, "by hand", -1), KTP("u", 0): OffsetAndMetadata(7, "", -1)}}
    several = kp_admin.list_group_offsets({"kp-simple": [KTP("t", 0), KTP("t", 1)], "kp-nosuch": None,
                                           "g": [KTP("u", 0)]})
    assert several == {"kp-simple": {KTP("t", 0): OffsetAndMetadata(5, "by hand", -1),
                                     KTP("t", 1): OffsetAndMetadata(-1, "", -1)},
                       "kp-nosuch": {}, "g": {KTP("u", 0): OffsetAndMetadata(-1, "", -1)}}
    # One Kafka request, one grouplab step per group (each on its group's queue, so in any order).
    fetches = [(line["conn"], line["correlation_id"], line["body"]["group_id"]) for line in cluster.trace()
               if line.get("kind") == "request" and line["api"] == "OffsetFetch" and line["client_id"] == "kp-admin"]
    assert sorted(g for *_, g in fetches[-3:]) == ["g", "kp-nosuch", "kp-simple"]
    assert len({key[:2] for key in fetches[-3:]}) == 1


def test_a_fault_rules_error_reaches_each_group_of_a_several_group_fetch(cluster: Cluster, kp_admin: Any) -> None:
    kp_admin.alter_group_offsets("kp-faulty", {KTP("t", 0): OffsetAndMetadata(2, "", None)})
    rule = cluster.error("OffsetFetch", "GROUP_AUTHORIZATION_FAILED", client_id="kp-admin", count=1)
    try:
        with pytest.raises(kafka_errors.GroupAuthorizationFailedError):
            kp_admin.list_group_offsets(["kp-faulty", "kp-nosuch"])
    finally:
        cluster.remove_fault(rule)
    assert kp_admin.list_group_offsets(["kp-faulty"]) == {"kp-faulty": {KTP("t", 0): OffsetAndMetadata(2, "", -1)}}


def test_kafka_python_reset_group_offsets(cluster: Cluster, kp_admin: Any) -> None:
    """reset_group_offsets: OffsetFetch, ListOffsets (earliest, latest) and OffsetCommit; the
    target is clamped to the log (empty here: 0)."""
    kp_admin.alter_group_offsets("kp-reset", {KTP("t", 1): OffsetAndMetadata(9, "", None)})
    assert kp_admin.reset_group_offsets("kp-reset", {KTP("t", 1): OffsetSpec.EARLIEST}) == {
        KTP("t", 1): {"error": kafka_errors.NoError, "offset": 0}}
    assert kp_admin.list_group_offsets("kp-reset")["kp-reset"][KTP("t", 1)].offset == 0


def test_kafka_python_delete_group_offsets(cluster: Cluster, kp_admin: Any) -> None:
    """OffsetDelete: an Empty group's offsets go (a topic that does not exist: its partition's
    error); a group with a member keeps those of the topic it consumes (GROUP_SUBSCRIBED_TO_TOPIC)
    and loses the others; a group that does not exist is GroupIdNotFoundError."""
    kp_admin.alter_group_offsets("kp-del", {KTP("t", 0): OffsetAndMetadata(3, "", None),
                                            KTP("u", 0): OffsetAndMetadata(4, "", None)})
    assert kp_admin.delete_group_offsets("kp-del", [KTP("t", 0), KTP("nope", 0)]) == {
        KTP("t", 0): kafka_errors.NoError, KTP("nope", 0): kafka_errors.UnknownTopicOrPartitionError}
    assert kp_admin.list_group_offsets("kp-del") == {"kp-del": {KTP("u", 0): OffsetAndMetadata(4, "", -1)}}
    assert kp_admin.delete_group_offsets("g", [KTP("t", 0), KTP("u", 0)]) == {
        KTP("t", 0): kafka_errors.GroupSubscribedToTopicError, KTP("u", 0): kafka_errors.NoError}
    with pytest.raises(kafka_errors.GroupIdNotFoundError):
        kp_admin.delete_group_offsets("kp-nosuch", [KTP("t", 0)])


def test_kafka_python_delete_groups(cluster: Cluster, kp_admin: Any) -> None:
    kp_admin.alter_group_offsets("kp-gone", {KTP("t", 0): OffsetAndMetadata(1, "", None)})
    assert kp_admin.delete_groups(["kp-gone", "g", "kp-nosuch"]) == {
        "kp-gone": "OK", "g": "NonEmptyGroupError", "kp-nosuch": "GroupIdNotFoundError"}
    assert "kp-gone" not in cluster.groups() and "g" in cluster.groups()


# ----------------------------------------------------------------------------- confluent-kafka


@pytest.fixture
def cf_admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})


def results(futures: dict[str, Any]) -> dict[str, Any]:
    """Each future's result, or the KafkaError code it failed with."""
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=30)
        except KafkaException as exc:
            out[key] = exc.args[0].code()
    return out


def test_confluent_list_consumer_groups_with_state_and_type_filters(cluster: Cluster, cf_admin: AdminClient) -> None:
    results(cf_admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("cf-empty", [CTP("t", 0, 1)])]))

    def listed(**filters: Any) -> dict[str, Any]:
        answer = cf_admin.list_consumer_groups(request_timeout=10, **filters).result(timeout=30)
        assert answer.errors == []
        return {x.group_id: x for x in answer.valid}

    everyone = listed()
    assert (everyone["g"].state, everyone["g"].type, everyone["g"].is_simple_consumer_group) == (
        ConsumerGroupState.STABLE, ConsumerGroupType.CLASSIC, False)
    assert (everyone["cf-empty"].state, everyone["cf-empty"].is_simple_consumer_group) == (ConsumerGroupState.EMPTY, True)
    empty = listed(states={ConsumerGroupState.EMPTY})
    assert "cf-empty" in empty and "g" not in empty
    assert set(listed(states={ConsumerGroupState.STABLE})) == {"g"}
    assert {"g", "cf-empty"} <= set(listed(types={ConsumerGroupType.CLASSIC}))
    assert listed(types={ConsumerGroupType.CONSUMER}) == {}


def test_a_consumer_group_whose_members_left_is_listed_as_an_empty_consumer_group(
        cluster: Cluster, cf_admin: AdminClient, kp_admin: Any) -> None:
    """Kafka keeps an Empty group's protocol type: it is not a simple consumer's group."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "cf-left", "client.id": "c2",
                         "session.timeout.ms": 10000, "log_level": 0})
    consumer.subscribe(["u"])
    cluster.wait_for(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 1, timeout=30,
                     what="c2 assigned u-0")
    consumer.close()  # LeaveGroup: the group is Empty
    cluster.wait_for(lambda: cluster.group("cf-left").state == "Empty", timeout=30, what="cf-left Empty")
    [listed] = [x for x in cf_admin.list_consumer_groups(request_timeout=10).result(timeout=30).valid
                if x.group_id == "cf-left"]
    assert (listed.state, listed.is_simple_consumer_group) == (ConsumerGroupState.EMPTY, False)
    described = cf_admin.describe_consumer_groups(["cf-left"], request_timeout=10)["cf-left"].result(timeout=30)
    assert (described.state, described.is_simple_consumer_group, described.members) == (
        ConsumerGroupState.EMPTY, False, [])
    assert {x["group_id"]: x for x in kp_admin.list_groups()}["cf-left"] == {
        "group_id": "cf-left", "protocol_type": "consumer", "group_state": "Empty", "group_type": "classic"}


@pytest.mark.filterwarnings("ignore:list_groups\\(\\) is deprecated:DeprecationWarning")
def test_confluent_list_groups(cluster: Cluster, cf_admin: AdminClient) -> None:
    """The older call (ListGroups, then DescribeGroups): the group, its protocol and its member."""
    groups: list[Any] = cf_admin.list_groups(group="g", timeout=30)  # (its stubs type every field None)
    [g] = groups
    assert (g.id, g.state, g.protocol_type, g.protocol, g.error) == ("g", "Stable", "consumer", "range", None)
    assert [m.client_id for m in g.members] == ["c1"]


def test_confluent_alter_and_list_consumer_group_offsets(cluster: Cluster, cf_admin: AdminClient) -> None:
    """OffsetCommit v9 with generation -1: stored for an unknown group, UNKNOWN_MEMBER_ID per
    partition for a group with a member; OffsetFetch v9 (one group, librdkafka's only kind)."""
    [stored] = results(cf_admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "cf-simple", [CTP("t", 1, 9), CTP("u", 0, 4)])])).values()
    assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in stored.topic_partitions] == [
        ("t", 1, 9, None), ("u", 0, 4, None)]
    [refused] = results(cf_admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "g", [CTP("t", 1, 2)])])).values()
    assert [tp.error.code() for tp in refused.topic_partitions] == [KafkaError.UNKNOWN_MEMBER_ID]
    [every] = results(cf_admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("cf-simple")])).values()
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in every.topic_partitions) == [("t", 1, 9), ("u", 0, 4)]
    [some] = results(cf_admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "cf-simple", [CTP("t", 0), CTP("t", 1)])])).values()
    assert [(tp.partition, tp.offset) for tp in some.topic_partitions] == [(0, OFFSET_INVALID), (1, 9)]


def test_confluent_delete_consumer_groups(cluster: Cluster, cf_admin: AdminClient) -> None:
    results(cf_admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("cf-gone", [CTP("t", 0, 1)])]))
    got = results(cf_admin.delete_consumer_groups(["cf-gone", "g", "cf-nosuch"], request_timeout=10))
    assert got == {"cf-gone": None, "g": KafkaError.NON_EMPTY_GROUP, "cf-nosuch": KafkaError.GROUP_ID_NOT_FOUND}
    assert "cf-gone" not in cluster.groups() and "g" in cluster.groups()
    assert ErrorCode.NON_EMPTY_GROUP == KafkaError.NON_EMPTY_GROUP  # the numbers are Kafka's


# ----------------------------------------------------------------------------- aiokafka (its three group calls)


async def test_aiokafka_list_describe_and_list_offsets(cluster: Cluster, kp_admin: Any) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.structs import TopicPartition as ATP

    kp_admin.alter_group_offsets("aio-simple", {KTP("t", 1): OffsetAndMetadata(6, "", None)})
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
    await admin.start()
    try:
        assert ("g", "consumer") in await admin.list_consumer_groups()
        [described] = await admin.describe_consumer_groups(["g"])
        [(error, group_id, state, protocol_type, protocol, members)] = described.groups
        assert (error, group_id, state, protocol_type, protocol, len(members)) == (0, "g", "Stable", "consumer", "range", 1)
        committed = await admin.list_consumer_group_offsets("aio-simple")
        assert {tp: om.offset for tp, om in committed.items()} == {ATP("t", 1): 6}
    finally:
        await admin.close()
