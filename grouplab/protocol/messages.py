"""Every request and response of grouplab's wire contract, as dataclasses.

Field names are Kafka's message-schema names in snake_case (docs/design.md §3). A field with no default
is required in a request; responses always carry `error_code` (0 = none) and may carry
`error_message`. `docs/protocol.md` is the prose spec of the same messages.

`API` maps an API name to its request class, response class and supported version range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

# ----------------------------------------------------------------------------- JoinGroup


@dataclass
class JoinGroupRequestProtocol:
    name: str
    metadata: bytes


@dataclass
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    protocol_type: str
    protocols: list[JoinGroupRequestProtocol]
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass
class JoinGroupResponseMember:
    member_id: str
    metadata: bytes
    group_instance_id: str | None = None


@dataclass
class JoinGroupResponse:
    error_code: int = 0
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[JoinGroupResponseMember] = field(default_factory=list)
    # KIP-814: a static leader that rejoined without a rebalance must not re-run the assignor.
    skip_assignment: bool = False
    error_message: str | None = None


# ----------------------------------------------------------------------------- SyncGroup


@dataclass
class SyncGroupRequestAssignment:
    member_id: str
    assignment: bytes


@dataclass
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: list[SyncGroupRequestAssignment] = field(default_factory=list)


@dataclass
class SyncGroupResponse:
    error_code: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""
    error_message: str | None = None


# ----------------------------------------------------------------------------- Heartbeat


@dataclass
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass
class HeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None


# ----------------------------------------------------------------------------- LeaveGroup


@dataclass
class LeaveGroupRequestMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass
class LeaveGroupRequest:
    group_id: str
    members: list[LeaveGroupRequestMember]


@dataclass
class LeaveGroupResponseMember:
    member_id: str
    group_instance_id: str | None = None
    error_code: int = 0


@dataclass
class LeaveGroupResponse:
    error_code: int = 0
    members: list[LeaveGroupResponseMember] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- DescribeGroups


@dataclass
class DescribeGroupsRequest:
    groups: list[str]


@dataclass
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    member_metadata: bytes = b""
    member_assignment: bytes = b""


@dataclass
class DescribedGroup:
    group_id: str
    error_code: int = 0
    group_state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[DescribedGroupMember] = field(default_factory=list)
    # grouplab extensions (Kafka's DescribeGroups has neither): shown by `grouplab describe`.
    generation_id: int = -1
    leader: str = ""


@dataclass
class DescribeGroupsResponse:
    error_code: int = 0
    groups: list[DescribedGroup] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- DeleteGroups


@dataclass
class DeleteGroupsRequest:
    groups_names: list[str]


@dataclass
class DeletableGroupResult:
    group_id: str
    error_code: int = 0


@dataclass
class DeleteGroupsResponse:
    error_code: int = 0
    results: list[DeletableGroupResult] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- ListGroups


@dataclass
class ListGroupsRequest:
    states_filter: list[str] = field(default_factory=list)
    types_filter: list[str] = field(default_factory=list)  # KIP-848's group types; every grouplab group is "classic"


@dataclass
class ListedGroup:
    group_id: str
    protocol_type: str = ""
    group_state: str = ""
    group_type: str = "classic"


@dataclass
class ListGroupsResponse:
    error_code: int = 0
    groups: list[ListedGroup] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- FindCoordinator


@dataclass
class FindCoordinatorRequest:
    """Kafka's FindCoordinator: the broker that coordinates a group (key_type 0) or a transactional
    id (1); several keys at once in `coordinator_keys` (Kafka's v4), else `key`."""

    key: str = ""
    key_type: int = 0
    coordinator_keys: list[str] = field(default_factory=list)


@dataclass
class FoundCoordinator:
    key: str
    node_id: int
    host: str
    port: int
    error_code: int = 0
    error_message: str | None = None


@dataclass
class FindCoordinatorResponse:
    error_code: int = 0
    node_id: int = -1
    host: str = ""
    port: int = -1
    coordinators: list[FoundCoordinator] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- Metadata


@dataclass
class MetadataRequestTopic:
    name: str


@dataclass
class MetadataRequest:
    topics: list[MetadataRequestTopic] | None = None  # nil: every topic
    # Kafka's Metadata v10+: topics asked for by id alone (Kafka's text form), as librdkafka asks
    # for the topics of a KIP-848 assignment; an id that is no topic is answered UNKNOWN_TOPIC_ID.
    topic_ids: list[str] = field(default_factory=list)
    allow_auto_topic_creation: bool = True  # Kafka's default; auto.create.topics.enable must allow it too


@dataclass
class MetadataResponseBroker:
    node_id: int
    host: str
    port: int


@dataclass
class MetadataResponsePartition:
    partition_index: int
    leader_id: int
    error_code: int = 0


@dataclass
class MetadataResponseTopic:
    name: str
    error_code: int = 0
    partitions: list[MetadataResponsePartition] = field(default_factory=list)
    topic_id: str | None = None  # Kafka's text form (base64url, 22 characters); None for no topic


@dataclass
class MetadataResponse:
    error_code: int = 0
    brokers: list[MetadataResponseBroker] = field(default_factory=list)
    controller_id: int = -1
    topics: list[MetadataResponseTopic] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- CreateTopics


@dataclass
class CreatableTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1


@dataclass
class CreateTopicsRequest:
    topics: list[CreatableTopic]
    timeout_ms: int = 60000
    validate_only: bool = False


@dataclass
class CreatableTopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None
    num_partitions: int = -1
    topic_id: str | None = None  # the new topic's id (Kafka's text form); None when none was made


@dataclass
class CreateTopicsResponse:
    error_code: int = 0
    topics: list[CreatableTopicResult] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- CreatePartitions


@dataclass
class CreatePartitionsTopic:
    name: str
    count: int  # the new total number of partitions


@dataclass
class CreatePartitionsRequest:
    topics: list[CreatePartitionsTopic]
    timeout_ms: int = 60000
    validate_only: bool = False


@dataclass
class CreatePartitionsTopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass
class CreatePartitionsResponse:
    error_code: int = 0
    results: list[CreatePartitionsTopicResult] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- DeleteTopics


@dataclass
class DeleteTopicsRequest:
    topic_names: list[str]
    timeout_ms: int = 60000
    topic_ids: list[str] = field(default_factory=list)  # Kafka's v6: topics by id (text form), after the names


@dataclass
class DeletableTopicResult:
    name: str | None
    error_code: int = 0
    error_message: str | None = None
    topic_id: str | None = None  # the id it was named by (None when named by name)


@dataclass
class DeleteTopicsResponse:
    error_code: int = 0
    responses: list[DeletableTopicResult] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- DescribeConfigs

# Kafka's ConfigResource.Type ids (DescribeConfigs `resource_type`).
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


@dataclass
class DescribeConfigsResource:
    resource_type: int  # 2 topic, 4 broker (Kafka's ids)
    resource_name: str  # a topic, or a broker id ("" for the cluster-wide dynamic defaults)
    configuration_keys: list[str] | None = None  # nil (or empty): every config


@dataclass
class DescribeConfigsRequest:
    resources: list[DescribeConfigsResource]
    include_synonyms: bool = False
    include_documentation: bool = False


@dataclass
class DescribeConfigsSynonym:
    name: str
    value: str | None
    source: int


@dataclass
class DescribeConfigsResourceResult:
    name: str
    value: str | None
    read_only: bool = True
    config_source: int = 5  # Kafka's ConfigSource: 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG
    is_sensitive: bool = False
    synonyms: list[DescribeConfigsSynonym] = field(default_factory=list)
    config_type: int = 0  # Kafka's ConfigType: 1 BOOLEAN, 2 STRING, 3 INT, 5 LONG, 7 LIST
    documentation: str | None = None


@dataclass
class DescribeConfigsResult:
    resource_type: int
    resource_name: str
    error_code: int = 0
    error_message: str | None = None
    configs: list[DescribeConfigsResourceResult] = field(default_factory=list)


@dataclass
class DescribeConfigsResponse:
    error_code: int = 0
    results: list[DescribeConfigsResult] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- DescribeCluster


@dataclass
class DescribeClusterRequest:
    include_cluster_authorized_operations: bool = False


@dataclass
class DescribeClusterBroker:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class DescribeClusterResponse:
    error_code: int = 0
    cluster_id: str = ""
    controller_id: int = -1
    brokers: list[DescribeClusterBroker] = field(default_factory=list)
    cluster_authorized_operations: int = -2147483648  # Kafka's INT32_MIN: not requested / not known
    error_message: str | None = None


# ----------------------------------------------------------------------------- ApiVersions


@dataclass
class ApiVersionsRequest:
    client_software_name: str = ""
    client_software_version: str = ""


@dataclass
class ApiVersionsResponseKey:
    api_key: str
    min_version: int
    max_version: int


@dataclass
class ApiVersionsResponse:
    error_code: int = 0
    api_keys: list[ApiVersionsResponseKey] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- records
#
# Partition logs, producers and offsets (the delivery-semantics APIs). A record batch on the wire
# is a msgpack map, not Kafka's binary batch; its fields are Kafka's.


@dataclass
class RecordHeader:
    key: str
    value: bytes | None = None


@dataclass
class Record:
    value: bytes | None
    key: bytes | None = None
    headers: list[RecordHeader] = field(default_factory=list)
    timestamp: int = -1  # -1: the broker stamps it (LogAppendTime)


@dataclass
class RecordBatch:
    """What a producer sends for one partition. producer_id -1: not idempotent."""

    records: list[Record]
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False


@dataclass
class FetchedRecord:
    offset: int
    timestamp: int
    value: bytes | None
    key: bytes | None = None
    headers: list[RecordHeader] = field(default_factory=list)
    producer_id: int = -1


@dataclass
class FetchedBatch:
    """One stored record batch, whole, as a Kafka broker returns it (a Fetch with `as_batches`):
    the producer's id, epoch and base sequence and its transactional flag as appended, and every
    record of the batch (also those before the fetch offset: Kafka returns whole batches). A
    control batch (`is_control`, a transaction marker) holds one record whose key and value are
    Kafka's control record: key version int16 0 and type int16 (0 abort, 1 commit), value version
    int16 0 and the coordinator epoch int32."""

    base_offset: int
    records: list[FetchedRecord]
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False
    is_control: bool = False


@dataclass
class AbortedTransaction:
    """An aborted transaction overlapping a read_committed Fetch's batches (Kafka's
    FetchResponse.AbortedTransactions): its producer's batches from `first_offset` up to its
    abort marker are to be skipped."""

    producer_id: int
    first_offset: int


# ----------------------------------------------------------------------------- Produce


@dataclass
class ProducePartitionData:
    index: int
    records: RecordBatch


@dataclass
class ProduceTopicData:
    name: str
    partition_data: list[ProducePartitionData]


@dataclass
class ProduceRequest:
    topic_data: list[ProduceTopicData]
    acks: int = -1  # -1 all, 1 leader, 0 none (grouplab has one replica: -1 and 1 are the same)
    timeout_ms: int = 30000
    transactional_id: str | None = None


@dataclass
class ProducePartitionResponse:
    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass
class ProduceTopicResponse:
    name: str
    partition_responses: list[ProducePartitionResponse] = field(default_factory=list)


@dataclass
class ProduceResponse:
    error_code: int = 0
    responses: list[ProduceTopicResponse] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- Fetch


@dataclass
class FetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int = 1024 * 1024


@dataclass
class FetchTopic:
    topic: str
    partitions: list[FetchPartition]


@dataclass
class FetchRequest:
    topics: list[FetchTopic]
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 50 * 1024 * 1024
    isolation_level: int = 0  # 0 read_uncommitted, 1 read_committed
    # Answer with the stored batches, as Kafka does (`batches`, `aborted_transactions`), instead
    # of `records` (the Kafka-wire listener asks for this).
    as_batches: bool = False


@dataclass
class FetchPartitionResponse:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: list[FetchedRecord] = field(default_factory=list)
    error_message: str | None = None
    # Where to fetch next: past what this answer returned and past the transaction markers (and,
    # read_committed, aborted records) read after it; the fetch offset when nothing was read.
    next_offset: int = -1
    batches: list[FetchedBatch] = field(default_factory=list)  # with as_batches
    aborted_transactions: list[AbortedTransaction] | None = None  # with as_batches and read_committed


@dataclass
class FetchTopicResponse:
    topic: str
    partitions: list[FetchPartitionResponse] = field(default_factory=list)


@dataclass
class FetchResponse:
    error_code: int = 0
    responses: list[FetchTopicResponse] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- ListOffsets

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3  # KIP-734 (ListOffsets v7): the record with the largest timestamp


@dataclass
class ListOffsetsPartition:
    partition_index: int
    timestamp: int = LATEST_TIMESTAMP


@dataclass
class ListOffsetsTopic:
    name: str
    partitions: list[ListOffsetsPartition]


@dataclass
class ListOffsetsRequest:
    topics: list[ListOffsetsTopic]
    isolation_level: int = 0


@dataclass
class ListOffsetsPartitionResponse:
    partition_index: int
    error_code: int = 0
    timestamp: int = -1
    offset: int = -1


@dataclass
class ListOffsetsTopicResponse:
    name: str
    partitions: list[ListOffsetsPartitionResponse] = field(default_factory=list)


@dataclass
class ListOffsetsResponse:
    error_code: int = 0
    topics: list[ListOffsetsTopicResponse] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- OffsetForLeaderEpoch


@dataclass
class OffsetForLeaderPartition:
    partition: int
    current_leader_epoch: int = -1  # -1: not checked
    leader_epoch: int = -1  # the epoch whose end offset is asked for


@dataclass
class OffsetForLeaderTopic:
    topic: str
    partitions: list[OffsetForLeaderPartition]


@dataclass
class OffsetForLeaderEpochRequest:
    """KIP-320: where a leader epoch ends, so a consumer whose partition changed leader can check
    its position was not truncated away (Kafka's clients send it after a leader move)."""

    topics: list[OffsetForLeaderTopic]


@dataclass
class EpochEndOffset:
    partition: int
    error_code: int = 0
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass
class OffsetForLeaderTopicResult:
    topic: str
    partitions: list[EpochEndOffset] = field(default_factory=list)


@dataclass
class OffsetForLeaderEpochResponse:
    error_code: int = 0
    topics: list[OffsetForLeaderTopicResult] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- OffsetCommit / OffsetFetch


@dataclass
class OffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@dataclass
class OffsetCommitRequestTopic:
    name: str
    partitions: list[OffsetCommitRequestPartition]


@dataclass
class OffsetCommitRequest:
    group_id: str
    topics: list[OffsetCommitRequestTopic]
    generation_id: int = -1  # -1 with member_id "": a simple (non-group) consumer
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class OffsetCommitResponsePartition:
    partition_index: int
    error_code: int = 0


@dataclass
class OffsetCommitResponseTopic:
    name: str
    partitions: list[OffsetCommitResponsePartition] = field(default_factory=list)


@dataclass
class OffsetCommitResponse:
    error_code: int = 0
    topics: list[OffsetCommitResponseTopic] = field(default_factory=list)
    error_message: str | None = None


@dataclass
class OffsetFetchRequestTopic:
    name: str
    partition_indexes: list[int]


@dataclass
class OffsetFetchRequest:
    group_id: str
    topics: list[OffsetFetchRequestTopic] | None = None  # nil: every committed partition
    require_stable: bool = False  # KIP-447: UNSTABLE_OFFSET_COMMIT while a transaction holds one
    # KIP-848 (Kafka's v9): a consumer-protocol member's id and epoch, checked against its group;
    # None and -1: an admin's or a classic consumer's fetch (a classic group reads neither).
    member_id: str | None = None
    member_epoch: int = -1


@dataclass
class OffsetFetchResponsePartition:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = None
    error_code: int = 0


@dataclass
class OffsetFetchResponseTopic:
    name: str
    partitions: list[OffsetFetchResponsePartition] = field(default_factory=list)


@dataclass
class OffsetFetchResponse:
    error_code: int = 0
    topics: list[OffsetFetchResponseTopic] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- OffsetDelete


@dataclass
class OffsetDeleteRequestPartition:
    partition_index: int


@dataclass
class OffsetDeleteRequestTopic:
    name: str
    partitions: list[OffsetDeleteRequestPartition]


@dataclass
class OffsetDeleteRequest:
    group_id: str
    topics: list[OffsetDeleteRequestTopic]


@dataclass
class OffsetDeleteResponsePartition:
    partition_index: int
    error_code: int = 0


@dataclass
class OffsetDeleteResponseTopic:
    name: str
    partitions: list[OffsetDeleteResponsePartition] = field(default_factory=list)


@dataclass
class OffsetDeleteResponse:
    error_code: int = 0
    topics: list[OffsetDeleteResponseTopic] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- producers and transactions


@dataclass
class InitProducerIdRequest:
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass
class InitProducerIdResponse:
    error_code: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    error_message: str | None = None


@dataclass
class AddPartitionsToTxnTopic:
    name: str
    partitions: list[int]


@dataclass
class AddPartitionsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: list[AddPartitionsToTxnTopic]


@dataclass
class AddPartitionsToTxnPartitionResult:
    partition_index: int
    error_code: int = 0


@dataclass
class AddPartitionsToTxnTopicResult:
    name: str
    results: list[AddPartitionsToTxnPartitionResult] = field(default_factory=list)


@dataclass
class AddPartitionsToTxnResponse:
    error_code: int = 0
    results: list[AddPartitionsToTxnTopicResult] = field(default_factory=list)
    error_message: str | None = None


@dataclass
class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass
class AddOffsetsToTxnResponse:
    error_code: int = 0
    error_message: str | None = None


@dataclass
class TxnOffsetCommitRequest:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    topics: list[OffsetCommitRequestTopic]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class TxnOffsetCommitResponse:
    error_code: int = 0
    topics: list[OffsetCommitResponseTopic] = field(default_factory=list)
    error_message: str | None = None


@dataclass
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass
class EndTxnResponse:
    error_code: int = 0
    error_message: str | None = None


# ----------------------------------------------------------------------------- ConsumerGroupHeartbeat (KIP-848)
# Kafka's wire names topics by id; grouplab's messages name them (the Kafka-wire translation maps
# ids <-> names). Client-side assignors (ClientAssignors) are not carried: Kafka never shipped them.


@dataclass
class ConsumerGroupHeartbeatTopicPartitions:
    """Partitions of one topic a member owns (the request's `topic_partitions`). The Kafka wire
    names the topic by id only: `topic` is then "" and `topic_id` (Kafka's text form) is set; the
    Broker names it, and drops an id that is no topic, as Kafka ignores it."""

    topic: str
    partitions: list[int]
    topic_id: str | None = None


@dataclass
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str  # "" with member_epoch 0: the coordinator gives one (v0); v1 clients send their own uuid
    member_epoch: int  # 0 join, -1 leave, -2 a static member's temporary leave, else the member's epoch
    instance_id: str | None = None  # None: none, or unchanged since the last heartbeat
    rack_id: str | None = None  # None: none, or unchanged
    rebalance_timeout_ms: int = -1  # -1: unchanged (must be given when joining)
    subscribed_topic_names: list[str] | None = None  # None: unchanged
    subscribed_topic_regex: str | None = None  # None: unchanged; Python `re`, whole-name match
    server_assignor: str | None = None  # None: unchanged, or the group's default
    topic_partitions: list[ConsumerGroupHeartbeatTopicPartitions] | None = None  # None: unchanged


@dataclass
class ConsumerGroupHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # topic -> partitions the member is to own now; None: no change since the last answer.
    assignment: dict[str, list[int]] | None = None
    # topic -> its id (Kafka's text form) for every topic of `assignment`: the Kafka wire names them by id.
    topic_ids: dict[str, str] = field(default_factory=dict)


# ----------------------------------------------------------------------------- ConsumerGroupDescribe (KIP-848)


@dataclass
class ConsumerGroupDescribeRequest:
    group_ids: list[str]
    include_authorized_operations: bool = False


@dataclass
class ConsumerGroupDescribedMember:
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    assignment: dict[str, list[int]] = field(default_factory=dict)  # what the member owns now
    target_assignment: dict[str, list[int]] = field(default_factory=dict)
    # grouplab extension: unrevoked_partitions etc. (Kafka's ConsumerGroupMember state, not on its wire).
    member_state: str = "stable"
    # Kafka's MemberType (ConsumerGroupDescribe v1+): 0 a classic member (online migration), 1 a consumer one.
    member_type: int = 1


@dataclass
class ConsumerGroupDescribedGroup:
    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = "Dead"  # Empty, Assigning, Reconciling, Stable, Dead
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[ConsumerGroupDescribedMember] = field(default_factory=list)
    # topic -> its id (Kafka's text form) for every topic the members' assignments name.
    topic_ids: dict[str, str] = field(default_factory=dict)


@dataclass
class ConsumerGroupDescribeResponse:
    error_code: int = 0
    groups: list[ConsumerGroupDescribedGroup] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- error-only answer


@dataclass
class ErrorResponse:
    """The body sent for a request that could not be parsed far enough to pick its response type."""

    error_code: int
    error_message: str | None = None


# ----------------------------------------------------------------------------- envelope


@dataclass
class RequestHeader:
    api: str
    version: int
    correlation_id: int
    client_id: str = ""


class ApiSpec(NamedTuple):
    request: type
    response: type
    min_version: int
    max_version: int


API: dict[str, ApiSpec] = {
    "ApiVersions": ApiSpec(ApiVersionsRequest, ApiVersionsResponse, 0, 0),
    "Metadata": ApiSpec(MetadataRequest, MetadataResponse, 0, 0),
    "FindCoordinator": ApiSpec(FindCoordinatorRequest, FindCoordinatorResponse, 0, 0),
    "CreateTopics": ApiSpec(CreateTopicsRequest, CreateTopicsResponse, 0, 0),
    "CreatePartitions": ApiSpec(CreatePartitionsRequest, CreatePartitionsResponse, 0, 0),
    "DeleteTopics": ApiSpec(DeleteTopicsRequest, DeleteTopicsResponse, 0, 0),
    "DescribeConfigs": ApiSpec(DescribeConfigsRequest, DescribeConfigsResponse, 0, 0),
    "DescribeCluster": ApiSpec(DescribeClusterRequest, DescribeClusterResponse, 0, 0),
    "JoinGroup": ApiSpec(JoinGroupRequest, JoinGroupResponse, 0, 0),
    "SyncGroup": ApiSpec(SyncGroupRequest, SyncGroupResponse, 0, 0),
    "Heartbeat": ApiSpec(HeartbeatRequest, HeartbeatResponse, 0, 0),
    "LeaveGroup": ApiSpec(LeaveGroupRequest, LeaveGroupResponse, 0, 0),
    "DescribeGroups": ApiSpec(DescribeGroupsRequest, DescribeGroupsResponse, 0, 0),
    "ListGroups": ApiSpec(ListGroupsRequest, ListGroupsResponse, 0, 0),
    "DeleteGroups": ApiSpec(DeleteGroupsRequest, DeleteGroupsResponse, 0, 0),
    "Produce": ApiSpec(ProduceRequest, ProduceResponse, 0, 0),
    "Fetch": ApiSpec(FetchRequest, FetchResponse, 0, 0),
    "ListOffsets": ApiSpec(ListOffsetsRequest, ListOffsetsResponse, 0, 0),
    "OffsetForLeaderEpoch": ApiSpec(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 0, 0),
    "InitProducerId": ApiSpec(InitProducerIdRequest, InitProducerIdResponse, 0, 0),
    "OffsetCommit": ApiSpec(OffsetCommitRequest, OffsetCommitResponse, 0, 0),
    "OffsetFetch": ApiSpec(OffsetFetchRequest, OffsetFetchResponse, 0, 0),
    "OffsetDelete": ApiSpec(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0),
    "AddPartitionsToTxn": ApiSpec(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 0),
    "AddOffsetsToTxn": ApiSpec(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 0),
    "TxnOffsetCommit": ApiSpec(TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 0),
    "EndTxn": ApiSpec(EndTxnRequest, EndTxnResponse, 0, 0),
    "ConsumerGroupHeartbeat": ApiSpec(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, 0, 0),
    "ConsumerGroupDescribe": ApiSpec(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, 0, 0),
}

# KIP-848's APIs (served by the Broker with coordinator/consumer_group.py), also listed apart.
CONSUMER_GROUP_API: dict[str, ApiSpec] = {name: API[name] for name in ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe")}

REQUEST_API: dict[type, str] = {spec.request: name for name, spec in API.items()}
RESPONSE_API: dict[type, str] = {spec.response: name for name, spec in API.items()}
