"""The Metadata answer's topic descriptions: built once per partition count and shared by every
answer (issue 22, case 5: a storm of Metadata requests for a 20,000-partition topic built 20,000
objects an answer and left the allocator fragmented), yet always what the store holds now; and
topic ids: given when a topic is made, kept in its record, new when the name is made again."""

from __future__ import annotations

from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group_log import Persist, TopicRecord, decode_record, encode_record
from grouplab.coordinator.topics import TopicStore, new_topic_id, topic_id_text, topic_id_value
from grouplab.protocol.effects import Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    MetadataRequest,
    MetadataRequestTopic,
)


def describe(store: TopicStore, name: str) -> list[int]:
    answer, _ = store.metadata(MetadataRequest([MetadataRequestTopic(name)], allow_auto_topic_creation=False))
    (topic,) = answer.topics
    return [p.partition_index for p in topic.partitions]


def test_every_answer_shares_one_description_of_a_topic() -> None:
    store = TopicStore(BrokerConfig(), partitions={"wide": 2000})
    first, _ = store.metadata(MetadataRequest(None))
    again, _ = store.metadata(MetadataRequest([MetadataRequestTopic("wide")]))
    assert first.topics[0] is again.topics[0]
    assert [p.partition_index for p in again.topics[0].partitions] == list(range(2000))


def test_the_description_follows_new_partitions_a_deletion_and_a_topic_made_again() -> None:
    store = TopicStore(BrokerConfig(), partitions={"t": 2})
    assert describe(store, "t") == [0, 1]
    store.create_partitions(CreatePartitionsRequest([CreatePartitionsTopic("t", 5)]))
    assert describe(store, "t") == [0, 1, 2, 3, 4]
    store.remove("t")
    answer, _ = store.metadata(MetadataRequest([MetadataRequestTopic("t")], allow_auto_topic_creation=False))
    assert answer.topics[0].error_code != 0 and answer.topics[0].partitions == []
    store.partitions["t"] = 3  # as a restart restores a topic record
    assert describe(store, "t") == [0, 1, 2]


def test_a_topic_made_keeps_its_id_through_growth_and_a_restart_and_a_new_one_comes_with_the_name_again() -> None:
    broker = Broker(BrokerConfig(), SequentialMemberIds())
    ctx = RequestContext("r")
    out = broker.handle("CreateTopics", CreateTopicsRequest([CreatableTopic("t", 2)]), ctx, 1000)
    (created,) = [o.body for o in out if isinstance(o, Reply)][0].topics
    assert created.topic_id == new_topic_id("t", 1000) == broker.topics.topic_id("t")
    assert topic_id_text(topic_id_value(created.topic_id)) == created.topic_id and len(created.topic_id) == 22
    out = broker.handle("CreatePartitions", CreatePartitionsRequest([CreatePartitionsTopic("t", 3)]), ctx, 2000)
    records = [decode_record(encode_record(o.record)) for o in out if isinstance(o, Persist)]
    assert records == [TopicRecord("t", 3, 2000, created.topic_id)]
    restarted = Broker(BrokerConfig(), SequentialMemberIds())
    restarted.restore(records, 3000)
    assert restarted.topics.topic_id("t") == created.topic_id
    assert restarted.topics.named(created.topic_id) == "t"
    out = restarted.handle("DeleteTopics", DeleteTopicsRequest([], topic_ids=[created.topic_id, "AAAAAAAAAAAAAAAAAAAAAA"]), ctx, 4000)
    answer = [o.body for o in out if isinstance(o, Reply)][0]
    assert [(r.name, r.topic_id, r.error_code) for r in answer.responses] == [
        (None, "AAAAAAAAAAAAAAAAAAAAAA", ErrorCode.UNKNOWN_TOPIC_ID), ("t", created.topic_id, ErrorCode.NONE)]
    assert "t" not in restarted.topics.partitions
    restarted.handle("CreateTopics", CreateTopicsRequest([CreatableTopic("t", 1)]), ctx, 5000)
    assert restarted.topics.topic_id("t") == new_topic_id("t", 5000) != created.topic_id


def test_a_topic_record_of_an_older_grouplab_has_no_id_and_the_name_gives_one() -> None:
    record = decode_record(encode_record(TopicRecord("old", 1, 0)))
    assert record.topic_id is None
    broker = Broker(BrokerConfig(), SequentialMemberIds())
    broker.restore([record], 0)
    assert broker.topics.topic_id("old") == new_topic_id("old", -1)
