"""Which Kafka APIs and versions the Kafka-wire listener speaks, and kafka-python's message classes
for each (generated from Kafka's own message schemas: docs/kafka-wire.md §2).

The ranges are what ApiVersions advertises. Each stops short of the version that would need
something grouplab does not have: topic ids (Fetch 13+, Produce 13+, OffsetCommit/OffsetFetch 10+),
transactions v2 (KIP-890: Produce 12+, EndTxn 5+, TxnOffsetCommit 5+, AddOffsetsToTxn 4+,
AddPartitionsToTxn 4+, InitProducerId 6+), and JoinGroup before v4 (a member id handed out without
MEMBER_ID_REQUIRED). OffsetFetch 8-9 (several groups in one request) and ListGroups 5 (the types
filter: "classic", "consumer") are served: the listener splits the first into one request per group
(listener.py). KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) are served at
v0-1 (classes generated from Kafka's schemas: kip848.py).
DeleteTopics goes to v6, where a topic is named by name or by id (Metadata v10+ gives the ids).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.admin.configs import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from grouplab.coordinator.kafka_wire.kip848 import (
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from grouplab.protocol.messages import API as GROUPLAB_APIS


_EDGE = ("ApiVersions", "FindCoordinator")  # answered by the listener itself


class KafkaApi(NamedTuple):
    key: int
    name: str  # Kafka's name, which is grouplab's API name where grouplab has the API
    min_version: int
    max_version: int
    request: Any  # kafka-python's message classes
    response: Any


_TABLE = [
    KafkaApi(0, "Produce", 3, 11, ProduceRequest, ProduceResponse),
    KafkaApi(1, "Fetch", 4, 12, FetchRequest, FetchResponse),
    KafkaApi(2, "ListOffsets", 1, 7, ListOffsetsRequest, ListOffsetsResponse),
    KafkaApi(3, "Metadata", 0, 12, MetadataRequest, MetadataResponse),
    KafkaApi(8, "OffsetCommit", 2, 9, OffsetCommitRequest, OffsetCommitResponse),
    KafkaApi(9, "OffsetFetch", 1, 9, OffsetFetchRequest, OffsetFetchResponse),
    KafkaApi(10, "FindCoordinator", 0, 6, FindCoordinatorRequest, FindCoordinatorResponse),
    KafkaApi(11, "JoinGroup", 4, 9, JoinGroupRequest, JoinGroupResponse),
    KafkaApi(12, "Heartbeat", 0, 4, HeartbeatRequest, HeartbeatResponse),
    KafkaApi(13, "LeaveGroup", 0, 5, LeaveGroupRequest, LeaveGroupResponse),
    KafkaApi(14, "SyncGroup", 0, 5, SyncGroupRequest, SyncGroupResponse),
    KafkaApi(15, "DescribeGroups", 0, 5, DescribeGroupsRequest, DescribeGroupsResponse),
    KafkaApi(16, "ListGroups", 0, 5, ListGroupsRequest, ListGroupsResponse),
    KafkaApi(18, "ApiVersions", 0, 4, ApiVersionsRequest, ApiVersionsResponse),
    KafkaApi(19, "CreateTopics", 2, 7, CreateTopicsRequest, CreateTopicsResponse),
    KafkaApi(20, "DeleteTopics", 1, 6, DeleteTopicsRequest, DeleteTopicsResponse),
    KafkaApi(22, "InitProducerId", 0, 5, InitProducerIdRequest, InitProducerIdResponse),
    KafkaApi(23, "OffsetForLeaderEpoch", 2, 4, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    KafkaApi(24, "AddPartitionsToTxn", 0, 3, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    KafkaApi(25, "AddOffsetsToTxn", 0, 3, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    KafkaApi(26, "EndTxn", 0, 4, EndTxnRequest, EndTxnResponse),
    KafkaApi(28, "TxnOffsetCommit", 0, 4, TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    KafkaApi(32, "DescribeConfigs", 1, 4, DescribeConfigsRequest, DescribeConfigsResponse),
    KafkaApi(37, "CreatePartitions", 0, 3, CreatePartitionsRequest, CreatePartitionsResponse),
    KafkaApi(42, "DeleteGroups", 0, 2, DeleteGroupsRequest, DeleteGroupsResponse),
    KafkaApi(47, "OffsetDelete", 0, 0, OffsetDeleteRequest, OffsetDeleteResponse),
    KafkaApi(60, "DescribeCluster", 0, 2, DescribeClusterRequest, DescribeClusterResponse),
    KafkaApi(68, "ConsumerGroupHeartbeat", 0, 1, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
    KafkaApi(69, "ConsumerGroupDescribe", 0, 1, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
]

# DeleteGroups only where the coordinator has it (it comes with group expiry): ApiVersions never
# advertises an API the Broker would not serve.
APIS: dict[int, KafkaApi] = {api.key: api for api in _TABLE if api.name in GROUPLAB_APIS or api.name in _EDGE}
API_VERSIONS_KEY = 18
