"""Kafka requests into grouplab's request dataclasses, grouplab's answers into Kafka responses at
the version asked. Pure: no I/O, no state; the listener (coordinator/kafka_wire/listener.py) runs
the translated request through the same CoordinatorDriver and Broker as the msgpack port.

`to_grouplab(api, version, request)` returns the grouplab API name and body, or raises `Refused`
with a Kafka response to send without touching the Broker (a Fetch naming an incremental fetch
session, a Produce whose records Kafka would refuse). An OffsetFetch v8+ becomes `GroupFetches`,
one grouplab OffsetFetch per group, which the listener runs one by one and answers together as
`GroupsFetched`. `to_kafka(api, version, body, view)` builds kafka-python's response object;
`view` carries what only the listener knows (the port to advertise, the batch a Fetch returned per
partition).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from grouplab.coordinator.kafka_wire.apis import KafkaApi
from grouplab.coordinator.nodes import Nodes
from grouplab.coordinator.topics import CLUSTER_ID, topic_id_text, topic_id_value
from grouplab.coordinator.kafka_wire.records import DEFAULT_MESSAGE_MAX_BYTES, BadRecords, decode_batch, encode_batches
from grouplab.protocol import messages as m
from grouplab.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0  # KIP-227: the answer "no session": the client keeps sending full fetches
FINAL_EPOCH = -1


class Refused(Exception):
    """The request is answered at the edge with `body` (a grouplab response dataclass)."""

    def __init__(self, body: Any) -> None:
        super().__init__(type(body).__name__)
        self.body = body


@dataclass
class ClusterView:
    """A cluster of brokers as Kafka clients reach it (coordinator/brokers.py): each broker's
    Kafka-wire address, who leads what (leader epochs, replicas, in-sync replicas), and where each
    group's and transactional id's coordinator is. The server keeps one; every View shares it."""

    addresses: dict[int, tuple[str, int]]
    nodes: Nodes
    coordinator_of: Callable[[str, int], int]


@dataclass
class View:
    """What a response needs beyond the grouplab body: the advertised broker and cluster."""

    host: str
    port: int
    node_id: int = 0
    cluster_id: str = CLUSTER_ID
    cluster: ClusterView | None = None  # a cluster of brokers; None: this one broker is all of it
    # Produce partitions refused at the edge, merged into the Broker's answer: (topic, index) -> response
    refused_partitions: dict[tuple[str, int], m.ProducePartitionResponse] = field(default_factory=dict)
    # DeleteTopics v6 entries answered at the edge (by topic id, or malformed), after the Broker's:
    # (name, topic id, error code, message)
    refused_topics: list[tuple[str | None, Any, int, str]] = field(default_factory=list)
    # Which authorized operations the request asked for ("group", "topic", "cluster"): answered as
    # a Kafka broker without an authorizer answers them, every operation the resource supports.
    asked_operations: frozenset[str] = frozenset()
    # message.max.bytes: a produced batch is checked against it as it is decoded (records.py)
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES


# Kafka's AclOperation codes (READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION
# 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12), and per resource type the ones it
# supports (Kafka's AclEntry.supportedOperations): what a broker without an authorizer reports as
# authorized when a client asks. Not asked: None, Kafka's INT32_MIN (kafka-python encodes the field
# from a set of codes).
SUPPORTED_OPERATIONS = {
    "group": frozenset({3, 6, 8, 10, 11}),
    "topic": frozenset({3, 4, 5, 6, 7, 8, 10, 11}),
    "cluster": frozenset({5, 7, 8, 9, 10, 11, 12}),
}


def _operations(view: View, resource: str) -> frozenset[int] | None:
    return SUPPORTED_OPERATIONS[resource] if resource in view.asked_operations else None


def _asked_operations(name: str, version: int, r: Any) -> frozenset[str]:
    """The resources whose authorized operations this request asks for."""
    asked = set()
    if name == "DescribeGroups" and version >= 3 and r.include_authorized_operations:
        asked.add("group")
    elif name == "Metadata" and version >= 8:
        if r.include_topic_authorized_operations:
            asked.add("topic")
        if version <= 10 and r.include_cluster_authorized_operations:
            asked.add("cluster")
    elif name == "DescribeCluster" and r.include_cluster_authorized_operations:
        asked.add("cluster")
    return frozenset(asked)


@dataclass
class GroupFetches:
    """An OffsetFetch v8+ naming several groups, as grouplab's OffsetFetch of each, in request order
    (the listener submits each on its group's queue: coordinator/kafka_wire/listener.py)."""

    requests: list[m.OffsetFetchRequest]


@dataclass
class GroupsFetched:
    """The answers to a GroupFetches, in its order: (group id, grouplab's OffsetFetchResponse, or
    the ErrorResponse the server answered that group's step with)."""

    groups: list[tuple[str, Any]]


def _s(value: Any, default: str = "") -> str:
    return default if value is None else str(value)


# ----------------------------------------------------------------------------- requests


def _join(v: int, r: Any) -> m.JoinGroupRequest:
    return m.JoinGroupRequest(
        group_id=_s(r.group_id), session_timeout_ms=r.session_timeout_ms,
        rebalance_timeout_ms=r.rebalance_timeout_ms if v >= 1 else r.session_timeout_ms,
        member_id=_s(r.member_id), protocol_type=_s(r.protocol_type),
        protocols=[m.JoinGroupRequestProtocol(_s(p.name), bytes(p.metadata or b"")) for p in r.protocols or []],
        group_instance_id=r.group_instance_id if v >= 5 else None, reason=r.reason if v >= 8 else None)


def _sync(v: int, r: Any) -> m.SyncGroupRequest:
    return m.SyncGroupRequest(
        group_id=_s(r.group_id), generation_id=r.generation_id, member_id=_s(r.member_id),
        group_instance_id=r.group_instance_id if v >= 3 else None,
        protocol_type=r.protocol_type if v >= 5 else None, protocol_name=r.protocol_name if v >= 5 else None,
        assignments=[m.SyncGroupRequestAssignment(_s(a.member_id), bytes(a.assignment or b""))
                     for a in r.assignments or []])


def _heartbeat(v: int, r: Any) -> m.HeartbeatRequest:
    return m.HeartbeatRequest(group_id=_s(r.group_id), generation_id=r.generation_id, member_id=_s(r.member_id),
                              group_instance_id=r.group_instance_id if v >= 3 else None)


def _leave(v: int, r: Any) -> m.LeaveGroupRequest:
    if v < 3:
        members = [m.LeaveGroupRequestMember(_s(r.member_id))]
    else:
        members = [m.LeaveGroupRequestMember(_s(x.member_id), x.group_instance_id, x.reason if v >= 5 else None)
                   for x in r.members or []]
    return m.LeaveGroupRequest(group_id=_s(r.group_id), members=members)


def _offset_commit(v: int, r: Any) -> m.OffsetCommitRequest:
    topics = [m.OffsetCommitRequestTopic(_s(t.name), [
        m.OffsetCommitRequestPartition(p.partition_index, p.committed_offset,
                                       p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata)
        for p in t.partitions or []]) for t in r.topics or []]
    return m.OffsetCommitRequest(group_id=_s(r.group_id), topics=topics,
                                 generation_id=r.generation_id_or_member_epoch, member_id=_s(r.member_id),
                                 group_instance_id=r.group_instance_id if v >= 7 else None)


def _offset_fetch(v: int, r: Any) -> m.OffsetFetchRequest | GroupFetches:
    stable = bool(r.require_stable) if v >= 7 else False
    if v >= 8:  # several groups (KIP-709); v9's member id and epoch are KIP-848's: a classic group reads neither
        return GroupFetches([m.OffsetFetchRequest(
            group_id=_s(g.group_id), topics=_fetch_topics(g.topics), require_stable=stable,
            member_id=g.member_id if v >= 9 else None, member_epoch=g.member_epoch if v >= 9 else -1)
            for g in r.groups or []])
    return m.OffsetFetchRequest(group_id=_s(r.group_id), topics=_fetch_topics(r.topics), require_stable=stable)


def _fetch_topics(topics: Any) -> list[m.OffsetFetchRequestTopic] | None:
    if topics is None:
        return None  # every committed partition
    return [m.OffsetFetchRequestTopic(_s(t.name), list(t.partition_indexes or [])) for t in topics]


def _offset_delete(v: int, r: Any) -> m.OffsetDeleteRequest:
    return m.OffsetDeleteRequest(group_id=_s(r.group_id), topics=[m.OffsetDeleteRequestTopic(
        _s(t.name), [m.OffsetDeleteRequestPartition(p.partition_index) for p in t.partitions or []])
        for t in r.topics or []])


def _metadata(v: int, r: Any) -> m.MetadataRequest:
    allow = bool(r.allow_auto_topic_creation) if v >= 4 else True
    if r.topics is None or (v == 0 and not r.topics):
        return m.MetadataRequest(topics=None, allow_auto_topic_creation=allow)  # every topic (v0: an empty array)
    ids = [_topic_id_asked(v, t) for t in r.topics]
    return m.MetadataRequest(topics=[m.MetadataRequestTopic(_s(t.name)) for t, tid in zip(r.topics, ids) if tid is None],
                             topic_ids=[tid for tid in ids if tid is not None], allow_auto_topic_creation=allow)


def _topic_id_asked(v: int, t: Any) -> str | None:
    """v10+: a topic may be asked for by id (v12: its name null); Kafka's zero id is none."""
    if v < 10 or t.name or t.topic_id is None or t.topic_id.int == 0:
        return None
    return topic_id_text(t.topic_id)


def _list_offsets(v: int, r: Any) -> m.ListOffsetsRequest:
    return m.ListOffsetsRequest(
        topics=[m.ListOffsetsTopic(_s(t.name), [m.ListOffsetsPartition(p.partition_index, p.timestamp)
                                                for p in t.partitions or []]) for t in r.topics or []],
        isolation_level=r.isolation_level if v >= 2 else 0)


def _offset_for_leader_epoch(v: int, r: Any) -> m.OffsetForLeaderEpochRequest:
    return m.OffsetForLeaderEpochRequest(topics=[m.OffsetForLeaderTopic(_s(t.topic), [
        m.OffsetForLeaderPartition(p.partition, p.current_leader_epoch, p.leader_epoch) for p in t.partitions or []])
        for t in r.topics or []])


def _fetch(v: int, r: Any) -> m.FetchRequest:
    if v >= 7 and (r.session_id != INVALID_SESSION_ID or r.session_epoch not in (0, FINAL_EPOCH)):
        # An incremental fetch names a session this broker never created (it creates none):
        # Kafka's answer, after which the client sends a full fetch again (KIP-227).
        raise Refused(m.FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                                      error_message="grouplab keeps no fetch sessions"))
    return m.FetchRequest(
        topics=[m.FetchTopic(_s(t.topic), [m.FetchPartition(p.partition, p.fetch_offset, p.partition_max_bytes)
                                           for p in t.partitions or []]) for t in r.topics or []],
        max_wait_ms=r.max_wait_ms, min_bytes=r.min_bytes, max_bytes=r.max_bytes, isolation_level=r.isolation_level,
        as_batches=True)  # Kafka's answer: the stored batches, markers and aborted transactions included


def _produce(v: int, r: Any, view: View) -> m.ProduceRequest:
    topics = []
    for t in r.topic_data or []:
        parts = []
        for p in t.partition_data or []:
            try:
                parts.append(m.ProducePartitionData(p.index, decode_batch(p.records, view.message_max_bytes)))
            except BadRecords as exc:
                view.refused_partitions[(_s(t.name), p.index)] = m.ProducePartitionResponse(
                    p.index, exc.code, error_message=exc.message)
        topics.append(m.ProduceTopicData(_s(t.name), parts))
    return m.ProduceRequest(topic_data=topics, acks=r.acks, timeout_ms=r.timeout_ms,
                            transactional_id=r.transactional_id)


def _describe_groups(v: int, r: Any) -> m.DescribeGroupsRequest:
    return m.DescribeGroupsRequest(groups=[_s(g) for g in r.groups or []])


def _list_groups(v: int, r: Any) -> m.ListGroupsRequest:
    return m.ListGroupsRequest(states_filter=[_s(s) for s in (r.states_filter or [])] if v >= 4 else [],
                               types_filter=[_s(t) for t in (r.types_filter or [])] if v >= 5 else [])


def _create_topics(v: int, r: Any) -> m.CreateTopicsRequest:
    return m.CreateTopicsRequest(
        topics=[m.CreatableTopic(_s(t.name), t.num_partitions, t.replication_factor) for t in r.topics or []],
        timeout_ms=r.timeout_ms, validate_only=bool(r.validate_only))


def _create_partitions(v: int, r: Any) -> m.CreatePartitionsRequest:
    return m.CreatePartitionsRequest(topics=[m.CreatePartitionsTopic(_s(t.name), t.count) for t in r.topics or []],
                                     timeout_ms=r.timeout_ms, validate_only=bool(r.validate_only))


def _delete_topics(v: int, r: Any, view: View) -> m.DeleteTopicsRequest:
    """By name; v6 names each topic by name or by id (the Broker answers an id it does not know
    UNKNOWN_TOPIC_ID). An entry with both or neither, and an id given twice, are Kafka's
    INVALID_REQUEST, answered here beside the Broker's answer."""
    if v < 6:
        return m.DeleteTopicsRequest([_s(n) for n in r.topic_names or []], r.timeout_ms)
    names: list[str] = []
    ids: dict[Any, int] = {}
    for t in r.topics or []:
        if t.topic_id is None:
            if t.name is None:
                view.refused_topics.append((None, None, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."))
            else:
                names.append(t.name)
        elif t.name is not None:
            view.refused_topics.append((t.name, t.topic_id, ErrorCode.INVALID_REQUEST,
                                        "You may not specify both topic name and topic id."))
        else:
            ids[t.topic_id] = ids.get(t.topic_id, 0) + 1
    for topic_id, count in ids.items():
        if count > 1:
            view.refused_topics.append((None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id."))
    return m.DeleteTopicsRequest(names, r.timeout_ms, [topic_id_text(i) for i, n in ids.items() if n == 1])


def _describe_configs(v: int, r: Any) -> m.DescribeConfigsRequest:
    return m.DescribeConfigsRequest(
        [m.DescribeConfigsResource(x.resource_type, _s(x.resource_name),
                                   None if x.configuration_keys is None else [_s(k) for k in x.configuration_keys])
         for x in r.resources or []],
        include_synonyms=bool(r.include_synonyms), include_documentation=bool(r.include_documentation) if v >= 3 else False)


BROKER_ENDPOINT = 1  # KIP-919's endpoint types: 1 brokers, 2 controllers


def _describe_cluster(v: int, r: Any) -> m.DescribeClusterRequest:
    """v1+ names the endpoint type it wants described: grouplab's one broker is a broker endpoint,
    so controllers are Kafka's MISMATCHED_ENDPOINT_TYPE, anything else UNSUPPORTED_ENDPOINT_TYPE."""
    if v >= 1 and r.endpoint_type != BROKER_ENDPOINT:
        if r.endpoint_type == 2:
            raise Refused(m.DescribeClusterResponse(
                error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                              "CONTROLLER"))
        raise Refused(m.DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                                error_message=f"Unsupported endpoint type {r.endpoint_type}"))
    return m.DescribeClusterRequest(bool(r.include_cluster_authorized_operations))


def _delete_groups(v: int, r: Any) -> Any:
    return m.API["DeleteGroups"].request(groups_names=[_s(g) for g in r.groups_names or []])


def _init_producer_id(v: int, r: Any) -> m.InitProducerIdRequest:
    return m.InitProducerIdRequest(transactional_id=r.transactional_id, transaction_timeout_ms=r.transaction_timeout_ms,
                                   producer_id=r.producer_id if v >= 3 else -1,
                                   producer_epoch=r.producer_epoch if v >= 3 else -1)


def _add_partitions(v: int, r: Any) -> m.AddPartitionsToTxnRequest:
    return m.AddPartitionsToTxnRequest(
        transactional_id=_s(r.v3_and_below_transactional_id), producer_id=r.v3_and_below_producer_id,
        producer_epoch=r.v3_and_below_producer_epoch,
        topics=[m.AddPartitionsToTxnTopic(_s(t.name), list(t.partitions or [])) for t in r.v3_and_below_topics or []])


def _add_offsets(v: int, r: Any) -> m.AddOffsetsToTxnRequest:
    return m.AddOffsetsToTxnRequest(_s(r.transactional_id), r.producer_id, r.producer_epoch, _s(r.group_id))


def _end_txn(v: int, r: Any) -> m.EndTxnRequest:
    return m.EndTxnRequest(_s(r.transactional_id), r.producer_id, r.producer_epoch, bool(r.committed))


def _txn_offset_commit(v: int, r: Any) -> m.TxnOffsetCommitRequest:
    topics = [m.OffsetCommitRequestTopic(_s(t.name), [
        m.OffsetCommitRequestPartition(p.partition_index, p.committed_offset,
                                       p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata)
        for p in t.partitions or []]) for t in r.topics or []]
    return m.TxnOffsetCommitRequest(
        transactional_id=_s(r.transactional_id), group_id=_s(r.group_id), producer_id=r.producer_id,
        producer_epoch=r.producer_epoch, topics=topics, generation_id=r.generation_id if v >= 3 else -1,
        member_id=_s(r.member_id) if v >= 3 else "", group_instance_id=r.group_instance_id if v >= 3 else None)


def _consumer_heartbeat(v: int, r: Any) -> m.ConsumerGroupHeartbeatRequest:
    """KIP-848's heartbeat. Owned partitions name topics by id: passed as ids (the Broker names
    them and drops an id that is no topic, as Kafka does)."""
    owned = None if r.topic_partitions is None else [
        m.ConsumerGroupHeartbeatTopicPartitions("", list(tp.partitions or []), topic_id=topic_id_text(tp.topic_id))
        for tp in r.topic_partitions]
    return m.ConsumerGroupHeartbeatRequest(
        group_id=_s(r.group_id), member_id=_s(r.member_id), member_epoch=r.member_epoch, instance_id=r.instance_id,
        rack_id=r.rack_id, rebalance_timeout_ms=r.rebalance_timeout_ms,
        subscribed_topic_names=None if r.subscribed_topic_names is None else list(r.subscribed_topic_names),
        subscribed_topic_regex=r.subscribed_topic_regex if v >= 1 else None, server_assignor=r.server_assignor,
        topic_partitions=owned)


def _consumer_describe(v: int, r: Any) -> m.ConsumerGroupDescribeRequest:
    return m.ConsumerGroupDescribeRequest(group_ids=[_s(g) for g in r.group_ids or []],
                                          include_authorized_operations=bool(r.include_authorized_operations))


_REQUESTS: dict[str, Callable[[int, Any], Any]] = {
    "ConsumerGroupHeartbeat": _consumer_heartbeat, "ConsumerGroupDescribe": _consumer_describe,
    "JoinGroup": _join, "SyncGroup": _sync, "Heartbeat": _heartbeat, "LeaveGroup": _leave,
    "OffsetCommit": _offset_commit, "OffsetFetch": _offset_fetch, "OffsetDelete": _offset_delete,
    "Metadata": _metadata, "ListOffsets": _list_offsets, "OffsetForLeaderEpoch": _offset_for_leader_epoch, "Fetch": _fetch, "DescribeGroups": _describe_groups, "ListGroups": _list_groups,
    "CreateTopics": _create_topics, "CreatePartitions": _create_partitions, "DeleteGroups": _delete_groups,
    "InitProducerId": _init_producer_id, "AddPartitionsToTxn": _add_partitions, "AddOffsetsToTxn": _add_offsets,
    "EndTxn": _end_txn, "TxnOffsetCommit": _txn_offset_commit, "DescribeConfigs": _describe_configs,
    "DescribeCluster": _describe_cluster,
}


def to_grouplab(api: KafkaApi, version: int, request: Any, view: View) -> Any:
    """The grouplab request body for a decoded Kafka request (its API name is `api.name`)."""
    view.asked_operations = _asked_operations(api.name, version, request)
    if api.name == "Produce":
        return _produce(version, request, view)
    if api.name == "DeleteTopics":
        return _delete_topics(version, request, view)
    return _REQUESTS[api.name](version, request)


# ----------------------------------------------------------------------------- responses


def _join_resp(v: int, b: m.JoinGroupResponse, c: Any, view: View) -> Any:
    return c(error_code=b.error_code, generation_id=b.generation_id, protocol_type=b.protocol_type,
             protocol_name=b.protocol_name if v >= 7 else _s(b.protocol_name), leader=b.leader,
             skip_assignment=b.skip_assignment, member_id=b.member_id, throttle_time_ms=0,
             members=[c.JoinGroupResponseMember(member_id=x.member_id, group_instance_id=x.group_instance_id,
                                                metadata=x.metadata) for x in b.members])


def _sync_resp(v: int, b: m.SyncGroupResponse, c: Any, view: View) -> Any:
    return c(error_code=b.error_code, protocol_type=b.protocol_type, protocol_name=b.protocol_name,
             assignment=b.assignment or b"", throttle_time_ms=0)


def _error_only(v: int, b: Any, c: Any, view: View) -> Any:
    return c(error_code=b.error_code, throttle_time_ms=0)


def _leave_resp(v: int, b: m.LeaveGroupResponse, c: Any, view: View) -> Any:
    code = b.error_code
    if v < 3 and not code and b.members:
        code = b.members[0].error_code  # one member per request before v3: its error is the answer's
    return c(error_code=code, throttle_time_ms=0, members=[
        c.MemberResponse(member_id=x.member_id, group_instance_id=x.group_instance_id, error_code=x.error_code)
        for x in b.members])


def _commit_resp(v: int, b: m.OffsetCommitResponse, c: Any, view: View) -> Any:
    T = c.OffsetCommitResponseTopic
    return c(throttle_time_ms=0, topics=[T(name=t.name, partitions=[
        T.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=p.error_code or b.error_code)
        for p in t.partitions]) for t in b.topics])


def _offset_fetch_resp(v: int, b: Any, c: Any, view: View) -> Any:
    if v >= 8:
        return c(throttle_time_ms=0, groups=[_fetched_group(c.OffsetFetchResponseGroup, group_id, body)
                                             for group_id, body in b.groups])
    T = c.OffsetFetchResponseTopic
    return c(throttle_time_ms=0, error_code=b.error_code, topics=[T(name=t.name, partitions=[
        T.OffsetFetchResponsePartition(partition_index=p.partition_index, committed_offset=p.committed_offset,
                                       committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata,
                                       error_code=p.error_code)
        for p in t.partitions]) for t in b.topics])


def _fetched_group(G: Any, group_id: str, b: Any) -> Any:
    """One group of an OffsetFetch v8+ answer; a step answered with an error is that group's error."""
    if isinstance(b, m.ErrorResponse):
        return G(group_id=group_id, error_code=b.error_code, topics=[])
    T = G.OffsetFetchResponseTopics
    return G(group_id=group_id, error_code=b.error_code, topics=[T(name=t.name, partitions=[
        T.OffsetFetchResponsePartitions(partition_index=p.partition_index, committed_offset=p.committed_offset,
                                        committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata,
                                        error_code=p.error_code)
        for p in t.partitions]) for t in b.topics])


def _offset_delete_resp(v: int, b: m.OffsetDeleteResponse, c: Any, view: View) -> Any:
    T = c.OffsetDeleteResponseTopic
    return c(error_code=b.error_code, throttle_time_ms=0, topics=[T(name=t.name, partitions=[
        T.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=p.error_code)
        for p in t.partitions]) for t in b.topics])


def _uuid(text: str | None) -> uuid.UUID:
    """A topic id in Kafka's encoding; Kafka's zero id for none."""
    return uuid.UUID(int=0) if text is None else topic_id_value(text)


def _metadata_resp(v: int, b: m.MetadataResponse, c: Any, view: View) -> Any:
    if view.cluster is not None:
        return _cluster_metadata_resp(v, b, c, view, view.cluster)
    T = c.MetadataResponseTopic
    node = view.node_id
    # One replica list per leader and one empty list, shared by every partition (encoding only reads
    # them): four lists a partition made a 20,000-partition answer 100,000 objects.
    nodes: dict[int, list[int]] = {}
    none: list[int] = []
    return c(
        throttle_time_ms=0, cluster_id=view.cluster_id, controller_id=node, error_code=b.error_code,
        brokers=[c.MetadataResponseBroker(node_id=node, host=view.host, port=view.port, rack=None)],
        authorized_operations=_operations(view, "cluster"),
        topics=[T(error_code=t.error_code, name=t.name or (None if v >= 12 else ""), is_internal=False, authorized_operations=_operations(view, "topic"),
                  topic_id=_uuid(t.topic_id),
                  partitions=[T.MetadataResponsePartition(
                      error_code=p.error_code, partition_index=p.partition_index, leader_id=p.leader_id, leader_epoch=0,
                      replica_nodes=(replicas := nodes.setdefault(p.leader_id, [p.leader_id])), isr_nodes=replicas,
                      offline_replicas=none)
                      for p in t.partitions]) for t in b.topics])


def _cluster_metadata_resp(v: int, b: m.MetadataResponse, c: Any, view: View, cluster: ClusterView) -> Any:
    """Metadata from a broker of a cluster: every live broker at its Kafka address, and each
    partition's leader, leader epoch, replicas, in-sync and offline replicas (nodes.py)."""
    T = c.MetadataResponseTopic
    nodes = cluster.nodes
    return c(
        throttle_time_ms=0, cluster_id=view.cluster_id, controller_id=b.controller_id, error_code=b.error_code,
        brokers=[c.MetadataResponseBroker(node_id=x.node_id, host=cluster.addresses[x.node_id][0],
                                          port=cluster.addresses[x.node_id][1], rack=None) for x in b.brokers],
        authorized_operations=_operations(view, "cluster"),
        topics=[T(error_code=t.error_code, name=t.name or (None if v >= 12 else ""), is_internal=False,
                  authorized_operations=_operations(view, "topic"), topic_id=_uuid(t.topic_id),
                  partitions=[T.MetadataResponsePartition(
                      error_code=p.error_code or (ErrorCode.LEADER_NOT_AVAILABLE if p.leader_id < 0 else 0),
                      partition_index=p.partition_index, leader_id=p.leader_id,
                      leader_epoch=nodes.leader_epoch(t.name, p.partition_index),
                      replica_nodes=nodes.replicas(p.partition_index), isr_nodes=nodes.isr(p.partition_index),
                      offline_replicas=nodes.offline(p.partition_index))
                      for p in t.partitions]) for t in b.topics])


def _offset_for_leader_epoch_resp(v: int, b: m.OffsetForLeaderEpochResponse, c: Any, view: View) -> Any:
    T = c.OffsetForLeaderTopicResult
    return c(throttle_time_ms=0, topics=[T(topic=t.topic, partitions=[
        T.EpochEndOffset(error_code=p.error_code or b.error_code, partition=p.partition, leader_epoch=p.leader_epoch,
                         end_offset=p.end_offset) for p in t.partitions]) for t in b.topics])


def _list_offsets_resp(v: int, b: m.ListOffsetsResponse, c: Any, view: View) -> Any:
    T = c.ListOffsetsTopicResponse
    return c(throttle_time_ms=0, topics=[T(name=t.name, partitions=[
        T.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=p.error_code or b.error_code,
                                       timestamp=p.timestamp, offset=p.offset,
                                       leader_epoch=(-1 if p.offset < 0 else 0 if view.cluster is None
                                                     else view.cluster.nodes.leader_epoch(t.name, p.partition_index)))
        for p in t.partitions]) for t in b.topics])


def _fetch_resp(v: int, b: m.FetchResponse, c: Any, view: View) -> Any:
    T = c.FetchableTopicResponse
    P = T.PartitionData
    A = P.AbortedTransaction
    return c(throttle_time_ms=0, error_code=b.error_code, session_id=INVALID_SESSION_ID, responses=[
        T(topic=t.topic, partitions=[P(
            partition_index=p.partition_index, error_code=p.error_code, high_watermark=p.high_watermark,
            last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
            # null under read_uncommitted, as Kafka (the Broker fills it under read_committed only)
            aborted_transactions=None if p.aborted_transactions is None else [
                A(producer_id=a.producer_id, first_offset=a.first_offset) for a in p.aborted_transactions],
            preferred_read_replica=-1, records=encode_batches(p.batches))
            for p in t.partitions]) for t in b.responses])


def _produce_resp(v: int, b: m.ProduceResponse, c: Any, view: View) -> Any:
    T = c.TopicProduceResponse
    P = T.PartitionProduceResponse
    topics: dict[str, list[m.ProducePartitionResponse]] = {t.name: list(t.partition_responses) for t in b.responses}
    for (name, index), refused in view.refused_partitions.items():
        topics.setdefault(name, []).append(refused)
    return c(throttle_time_ms=0, responses=[T(name=name, partition_responses=[P(
        index=p.index, error_code=p.error_code or b.error_code, base_offset=p.base_offset,
        log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset, record_errors=[],
        error_message=p.error_message or b.error_message) for p in sorted(parts, key=lambda p: p.index)])
        for name, parts in topics.items()])


def _describe_groups_resp(v: int, b: m.DescribeGroupsResponse, c: Any, view: View) -> Any:
    G = c.DescribedGroup
    return c(throttle_time_ms=0, groups=[G(
        error_code=g.error_code or b.error_code, group_id=g.group_id, group_state=g.group_state,
        protocol_type=g.protocol_type, protocol_data=g.protocol_data,
        authorized_operations=None if g.error_code or b.error_code else _operations(view, "group"),
        members=[G.DescribedGroupMember(member_id=x.member_id, group_instance_id=x.group_instance_id,
                                        client_id=x.client_id, client_host=x.client_host,
                                        member_metadata=x.member_metadata, member_assignment=x.member_assignment)
                 for x in g.members]) for g in b.groups])


def _list_groups_resp(v: int, b: m.ListGroupsResponse, c: Any, view: View) -> Any:
    return c(throttle_time_ms=0, error_code=b.error_code, groups=[
        c.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.group_state,
                      group_type=g.group_type) for g in b.groups])


def _create_topics_resp(v: int, b: m.CreateTopicsResponse, c: Any, view: View) -> Any:
    return c(throttle_time_ms=0, topics=[c.CreatableTopicResult(
        name=t.name, error_code=t.error_code or b.error_code, error_message=t.error_message,
        num_partitions=t.num_partitions, replication_factor=1 if t.num_partitions > 0 else -1, configs=[],
        topic_id=_uuid(t.topic_id))
        for t in b.topics])


def _create_partitions_resp(v: int, b: m.CreatePartitionsResponse, c: Any, view: View) -> Any:
    return c(throttle_time_ms=0, results=[c.CreatePartitionsTopicResult(
        name=t.name, error_code=t.error_code or b.error_code, error_message=t.error_message) for t in b.results])


def _delete_topics_resp(v: int, b: m.DeleteTopicsResponse, c: Any, view: View) -> Any:
    R = c.DeletableTopicResult

    def code(error_code: int) -> int:
        # Before v3 Kafka refuses a disabled deletion as INVALID_REQUEST (TOPIC_DELETION_DISABLED is v3+).
        return ErrorCode.INVALID_REQUEST if v < 3 and error_code == ErrorCode.TOPIC_DELETION_DISABLED else error_code

    results = [R(name=t.name, topic_id=_uuid(t.topic_id), error_code=code(t.error_code or b.error_code),
                 error_message=t.error_message or b.error_message) for t in b.responses]
    results += [R(name=name, topic_id=topic_id, error_code=error_code, error_message=message)
                for name, topic_id, error_code, message in view.refused_topics]
    return c(throttle_time_ms=0, responses=results)


def _describe_configs_resp(v: int, b: m.DescribeConfigsResponse, c: Any, view: View) -> Any:
    R = c.DescribeConfigsResult
    E = R.DescribeConfigsResourceResult
    S = E.DescribeConfigsSynonym
    return c(throttle_time_ms=0, results=[R(
        error_code=r.error_code or b.error_code, error_message=r.error_message or b.error_message,
        resource_type=r.resource_type, resource_name=r.resource_name, configs=[E(
            name=e.name, value=e.value, read_only=e.read_only, config_source=e.config_source,
            is_sensitive=e.is_sensitive, config_type=e.config_type, documentation=e.documentation,
            synonyms=[S(name=y.name, value=y.value, source=y.source) for y in e.synonyms])
            for e in r.configs]) for r in b.results])


def _describe_cluster_resp(v: int, b: m.DescribeClusterResponse, c: Any, view: View) -> Any:
    """The broker as the client reached it (as Metadata names it)."""
    addresses = view.cluster.addresses if view.cluster is not None else {}

    def where(node: int) -> tuple[str, int]:
        return addresses.get(node, (view.host, view.port))

    return c(throttle_time_ms=0, error_code=b.error_code, error_message=b.error_message, endpoint_type=BROKER_ENDPOINT,
             cluster_id=b.cluster_id, controller_id=b.controller_id, authorized_operations=_operations(view, "cluster"),
             brokers=[c.DescribeClusterBroker(broker_id=x.broker_id, host=where(x.broker_id)[0], port=where(x.broker_id)[1],
                                              rack=x.rack, is_fenced=False) for x in b.brokers])


def _delete_groups_resp(v: int, b: Any, c: Any, view: View) -> Any:
    return c(throttle_time_ms=0, results=[c.DeletableGroupResult(group_id=r.group_id, error_code=r.error_code or b.error_code)
                                          for r in b.results])


def _init_producer_id_resp(v: int, b: m.InitProducerIdResponse, c: Any, view: View) -> Any:
    return c(throttle_time_ms=0, error_code=b.error_code, producer_id=b.producer_id, producer_epoch=b.producer_epoch)


def _add_partitions_resp(v: int, b: m.AddPartitionsToTxnResponse, c: Any, view: View) -> Any:
    T = c.AddPartitionsToTxnTopicResult
    return c(throttle_time_ms=0, results_by_topic_v3_and_below=[T(name=t.name, results_by_partition=[
        T.AddPartitionsToTxnPartitionResult(partition_index=p.partition_index,
                                            partition_error_code=p.error_code or b.error_code)
        for p in t.results]) for t in b.results])


def _txn_offset_commit_resp(v: int, b: m.TxnOffsetCommitResponse, c: Any, view: View) -> Any:
    T = c.TxnOffsetCommitResponseTopic
    return c(throttle_time_ms=0, topics=[T(name=t.name, partitions=[
        T.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=p.error_code or b.error_code)
        for p in t.partitions]) for t in b.topics])


def _consumer_heartbeat_resp(v: int, b: m.ConsumerGroupHeartbeatResponse, c: Any, view: View) -> Any:
    """The assignment by topic id (grouplab's answer gives each topic's id beside its name)."""
    assignment = None
    if b.assignment is not None:
        T = c.Assignment.TopicPartitions
        assignment = c.Assignment(topic_partitions=[T(topic_id=_uuid(b.topic_ids[t]), partitions=ps)
                                                    for t, ps in b.assignment.items()])
    return c(throttle_time_ms=0, error_code=b.error_code, error_message=b.error_message, member_id=b.member_id,
             member_epoch=b.member_epoch, heartbeat_interval_ms=b.heartbeat_interval_ms, assignment=assignment)


def _consumer_describe_resp(v: int, b: m.ConsumerGroupDescribeResponse, c: Any, view: View) -> Any:
    G = c.DescribedGroup
    M = G.Member
    A = M.Assignment

    def assignment(g: m.ConsumerGroupDescribedGroup, topics: dict[str, list[int]]) -> Any:
        return A(topic_partitions=[A.TopicPartitions(topic_id=_uuid(g.topic_ids.get(t)), topic_name=t, partitions=ps)
                                   for t, ps in topics.items()])

    groups = [G(error_code=g.error_code or b.error_code, error_message=g.error_message, group_id=g.group_id,
                group_state=g.group_state, group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch,
                assignor_name=g.assignor_name, authorized_operations=-2147483648, members=[
                    M(member_id=x.member_id, instance_id=x.instance_id, rack_id=x.rack_id, member_epoch=x.member_epoch,
                      client_id=x.client_id, client_host=x.client_host, subscribed_topic_names=x.subscribed_topic_names,
                      subscribed_topic_regex=x.subscribed_topic_regex, assignment=assignment(g, x.assignment),
                      target_assignment=assignment(g, x.target_assignment),
                      member_type=x.member_type if x.member_type in (-1, 0, 1) else -1)  # Kafka: -1 unknown
                    for x in g.members]) for g in b.groups]
    return c(throttle_time_ms=0, groups=groups)


_RESPONSES: dict[str, Callable[[int, Any, Any, View], Any]] = {
    "ConsumerGroupHeartbeat": _consumer_heartbeat_resp, "ConsumerGroupDescribe": _consumer_describe_resp,
    "JoinGroup": _join_resp, "SyncGroup": _sync_resp, "Heartbeat": _error_only, "LeaveGroup": _leave_resp,
    "OffsetCommit": _commit_resp, "OffsetFetch": _offset_fetch_resp, "OffsetDelete": _offset_delete_resp,
    "Metadata": _metadata_resp,
    "ListOffsets": _list_offsets_resp, "OffsetForLeaderEpoch": _offset_for_leader_epoch_resp, "Fetch": _fetch_resp, "Produce": _produce_resp,
    "DescribeGroups": _describe_groups_resp, "ListGroups": _list_groups_resp, "CreateTopics": _create_topics_resp,
    "CreatePartitions": _create_partitions_resp, "DeleteTopics": _delete_topics_resp, "DeleteGroups": _delete_groups_resp,
    "InitProducerId": _init_producer_id_resp, "AddPartitionsToTxn": _add_partitions_resp,
    "AddOffsetsToTxn": _error_only, "EndTxn": _error_only, "TxnOffsetCommit": _txn_offset_commit_resp,
    "DescribeConfigs": _describe_configs_resp, "DescribeCluster": _describe_cluster_resp,
}


def find_coordinator_response(api: KafkaApi, version: int, request: Any, view: View) -> Any:
    """FindCoordinator, answered by the listener itself (it reads, never changes, the state): one
    broker coordinates every group and transaction; in a cluster, each key's coordinator is the
    leader of its partition of `__consumer_offsets` or `__transaction_state` (coordinator/brokers.py),
    COORDINATOR_NOT_AVAILABLE while it has none."""
    cls = api.response[version]
    key_type = getattr(request, "key_type", 0) or 0

    def where(key: str) -> tuple[int, str, int, int, str | None]:
        if view.cluster is None:
            return view.node_id, view.host, view.port, 0, None
        node = view.cluster.coordinator_of(key, key_type)
        if node < 0:
            return -1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE, "no live broker leads its partition"
        host, port = view.cluster.addresses[node]
        return node, host, port, 0, None

    if version >= 4:
        found = [(k, where(k)) for k in request.coordinator_keys or []]
        return cls(throttle_time_ms=0, coordinators=[
            cls.Coordinator(key=k, node_id=n, host=h, port=p, error_code=e, error_message=msg)
            for k, (n, h, p, e, msg) in found])
    node, host, port, code, message = where(_s(getattr(request, "key", "")))
    return cls(throttle_time_ms=0, error_code=code, error_message=message, node_id=node, host=host, port=port)


def reuse_key(name: str, version: int, body: Any) -> tuple | None:
    """For an answer whose encoding depends on nothing but these values (Heartbeat, OffsetCommit:
    the answers a running group sends most), a key under which its encoded body can be kept and
    sent again; None for any other answer."""
    kind = type(body)
    if kind is m.HeartbeatResponse:
        return (name, version, body.error_code)
    if kind is m.OffsetCommitResponse:
        code = body.error_code
        return (name, version, tuple((t.name, tuple((p.partition_index, p.error_code or code) for p in t.partitions))
                                     for t in body.topics))
    return None


def to_kafka(api: KafkaApi, version: int, body: Any, view: View) -> Any:
    """kafka-python's response object for grouplab's answer `body`. An ErrorResponse (the server's
    answer to a step that failed) becomes the API's response with that error where it has a
    top-level or per-item error code."""
    cls = api.response[version]
    if isinstance(body, m.ErrorResponse):
        body = _error_body(api.name, body)
    return _RESPONSES[api.name](version, body, cls, view)


def _error_body(name: str, err: m.ErrorResponse) -> Any:
    response_type = m.API[name].response
    return response_type(error_code=err.error_code, error_message=err.error_message)
