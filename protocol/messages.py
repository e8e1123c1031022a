"""Every request and response of grouplab's wire contract, as dataclasses.

Field names are Kafka's message-schema names in snake_case (DESIGN.md §2). A field with no default
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


# ----------------------------------------------------------------------------- ListGroups


@dataclass
class ListGroupsRequest:
    states_filter: list[str] = field(default_factory=list)


@dataclass
class ListedGroup:
    group_id: str
    protocol_type: str = ""
    group_state: str = ""


@dataclass
class ListGroupsResponse:
    error_code: int = 0
    groups: list[ListedGroup] = field(default_factory=list)
    error_message: str | None = None


# ----------------------------------------------------------------------------- Metadata


@dataclass
class MetadataRequestTopic:
    name: str


@dataclass
class MetadataRequest:
    topics: list[MetadataRequestTopic] | None = None  # nil: every topic
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
    "CreateTopics": ApiSpec(CreateTopicsRequest, CreateTopicsResponse, 0, 0),
    "CreatePartitions": ApiSpec(CreatePartitionsRequest, CreatePartitionsResponse, 0, 0),
    "JoinGroup": ApiSpec(JoinGroupRequest, JoinGroupResponse, 0, 0),
    "SyncGroup": ApiSpec(SyncGroupRequest, SyncGroupResponse, 0, 0),
    "Heartbeat": ApiSpec(HeartbeatRequest, HeartbeatResponse, 0, 0),
    "LeaveGroup": ApiSpec(LeaveGroupRequest, LeaveGroupResponse, 0, 0),
    "DescribeGroups": ApiSpec(DescribeGroupsRequest, DescribeGroupsResponse, 0, 0),
    "ListGroups": ApiSpec(ListGroupsRequest, ListGroupsResponse, 0, 0),
}

REQUEST_API: dict[type, str] = {spec.request: name for name, spec in API.items()}
