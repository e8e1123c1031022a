"""The Metadata answer's topic descriptions: built once per partition count and shared by every
answer (issue 22, case 5: a storm of Metadata requests for a 20,000-partition topic built 20,000
objects an answer and left the allocator fragmented), yet always what the store holds now."""

from __future__ import annotations

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.topics import TopicStore
from grouplab.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
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
