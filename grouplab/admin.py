"""A small request/response client for the admin commands (describe, delete, topics) and for tests that
speak the wire protocol directly: one connection, correlation ids matched, typed bodies back."""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any, Sequence

from grouplab.protocol import schema
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.framing import wrong_port, encode_request, read_response
from grouplab.protocol.messages import (
    API,
    ConsumerGroupDescribedGroup,
    ConsumerGroupDescribeRequest,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResult,
    DescribeGroupsRequest,
    DescribedGroup,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    RequestHeader,
)
from grouplab.protocol.messages import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchTopic,
    InitProducerIdRequest,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsTopic,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceTopicData,
    Record,
    RecordBatch,
)
from grouplab.protocol.types import TopicPartition


class AdminError(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        name = ErrorCode.from_code(code).name
        super().__init__(f"{name} ({code}): {message}" if message else f"{name} ({code})")
        self.code = code


class NotGrouplab(ConnectionError):
    """The server took the connection and closed it without answering: not grouplab's own port
    (a Kafka broker, or grouplab's Kafka-wire port before it named the right one). The message
    says so whole; the CLI adds nothing to it."""


def parse_bootstrap(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


class AdminClient:
    def __init__(self, host: str = "127.0.0.1", port: int = 9192, client_id: str = "grouplab-admin") -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)

    async def __aenter__(self) -> "AdminClient":
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except ConnectionError:
                pass

    async def send(self, api: str, body: Any) -> int:
        """Send one request without waiting for an answer (Produce with acks=0 gets none)."""
        assert self._writer is not None
        cid = next(self._ids)
        self._writer.write(encode_request(RequestHeader(api, API[api].max_version, cid, self.client_id), body))
        await self._writer.drain()
        return cid

    async def request(self, api: str, body: Any, timeout_s: float = 30.0) -> Any:
        """Send one request and wait for its response (typed as the API's response class)."""
        assert self._reader is not None and self._writer is not None
        cid = await self.send(api, body)
        while True:
            try:
                header = await asyncio.wait_for(self._reader.readexactly(4), timeout_s)
                payload = await asyncio.wait_for(self._reader.readexactly(struct.unpack(">I", header)[0]), timeout_s)
            except asyncio.IncompleteReadError:
                raise NotGrouplab(f"{self.host}:{self.port} closed the connection without answering {api}: a Kafka "
                                  "broker, or grouplab's Kafka-wire port? grouplab's tools use its own port "
                                  "(grouplab coordinator --port, default 9192)") from None
            got, raw = read_response(payload)
            if got in (cid, -1):
                refused = wrong_port(raw)  # grouplab's Kafka-wire port, naming grouplab's own
                if refused is not None:
                    raise AdminError(*refused)
                return schema.decode(API[api].response, raw, "body")

    # ------------------------------------------------------------------ conveniences

    async def create_topics(self, topics: dict[str, int]) -> None:
        resp = await self.request("CreateTopics", CreateTopicsRequest([CreatableTopic(n, p) for n, p in topics.items()]))
        for r in resp.topics:
            if r.error_code:
                raise AdminError(r.error_code, r.error_message)

    async def create_partitions(self, topic: str, total: int) -> None:
        resp = await self.request("CreatePartitions", CreatePartitionsRequest([CreatePartitionsTopic(topic, total)]))
        for r in resp.results:
            if r.error_code:
                raise AdminError(r.error_code, r.error_message)

    async def delete_topics(self, names: list[str]) -> dict[str, tuple[int, str | None]]:
        """DeleteTopics: each distinct name's (error code, message), 0 where it was deleted."""
        resp = await self.request("DeleteTopics", DeleteTopicsRequest(names))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return {r.name: (r.error_code, r.error_message) for r in resp.responses}

    async def describe_configs(self, resources: list[DescribeConfigsResource], synonyms: bool = False,
                               documentation: bool = False) -> list[DescribeConfigsResult]:
        """DescribeConfigs: each resource's result (check its error_code), in request order."""
        resp = await self.request("DescribeConfigs", DescribeConfigsRequest(resources, synonyms, documentation))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.results

    async def describe_cluster(self) -> DescribeClusterResponse:
        resp = await self.request("DescribeCluster", DescribeClusterRequest())
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp

    async def topics(self) -> dict[str, int]:
        resp = await self.request("Metadata", MetadataRequest(topics=None))
        return {t.name: len(t.partitions) for t in resp.topics if t.error_code == 0}

    async def describe_groups(self, groups: list[str]) -> list[DescribedGroup]:
        resp = await self.request("DescribeGroups", DescribeGroupsRequest(groups))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.groups

    async def describe_consumer_groups(self, groups: list[str]) -> list[ConsumerGroupDescribedGroup]:
        """ConsumerGroupDescribe (KIP-848): each group's answer in request order; a group that is not a
        consumer-protocol group answers GROUP_ID_NOT_FOUND (ask DescribeGroups for it)."""
        resp = await self.request("ConsumerGroupDescribe", ConsumerGroupDescribeRequest(groups))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.groups

    async def delete_groups(self, groups: list[str]) -> dict[str, int]:
        """DeleteGroups: each distinct group's error code (0: deleted), in request order."""
        resp = await self.request("DeleteGroups", DeleteGroupsRequest(groups))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return {r.group_id: r.error_code for r in resp.results}

    async def list_groups(self) -> list[str]:
        resp = await self.request("ListGroups", ListGroupsRequest())
        return [g.group_id for g in resp.groups]

    # ------------------------------------------------------------------ offsets

    async def commit_offsets(self, group_id: str, offsets: dict[TopicPartition, int], generation_id: int = -1,
                             member_id: str = "", group_instance_id: str | None = None,
                             metadata: str | None = None) -> dict[TopicPartition, int]:
        """OffsetCommit; the error code of each partition (0: stored). generation -1 and member ""
        commit as a simple consumer (allowed while the group is Empty or does not exist)."""
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(OffsetCommitRequestPartition(tp.partition, offset, committed_metadata=metadata))
        resp = await self.request("OffsetCommit", OffsetCommitRequest(
            group_id, [OffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()], generation_id, member_id,
            group_instance_id))
        return {TopicPartition(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    async def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None = None,
                            require_stable: bool = False) -> dict[TopicPartition, int]:
        """OffsetFetch: the committed offset of each partition (-1: none); `None` asks for every
        committed partition. A partition-level error raises AdminError."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [OffsetFetchRequestTopic(t, ps) for t, ps in by_topic.items()]
        resp = await self.request("OffsetFetch", OffsetFetchRequest(group_id, topics, require_stable))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise AdminError(p.error_code, f"{t.name}-{p.partition_index}")
                out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
        return out

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetDelete: each partition's error code (0: its committed offset is gone, or it had
        none; GROUP_SUBSCRIBED_TO_TOPIC: the group's members consume its topic). A refusal of the
        whole request (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) raises AdminError."""
        by_topic: dict[str, list[OffsetDeleteRequestPartition]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(OffsetDeleteRequestPartition(tp.partition))
        resp = await self.request("OffsetDelete", OffsetDeleteRequest(
            group_id, [OffsetDeleteRequestTopic(t, ps) for t, ps in by_topic.items()]))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return {TopicPartition(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    async def log_end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        """ListOffsets (latest) for each partition: its log end offset, or None where the server
        gave none (an error, or a coordinator without partition logs / without ListOffsets)."""
        if "ListOffsets" not in API or not partitions:
            return {tp: None for tp in partitions}
        from grouplab.protocol.messages import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(ListOffsetsPartition(tp.partition))
        resp = await self.request("ListOffsets", ListOffsetsRequest([ListOffsetsTopic(t, ps) for t, ps in by_topic.items()]))
        found = {} if resp.error_code else {
            TopicPartition(t.name, p.partition_index): p.offset
            for t in resp.topics for p in t.partitions if p.error_code == 0 and p.offset >= 0}
        return {tp: found.get(tp) for tp in partitions}

    # ------------------------------------------------------------------ partition logs (tests, benchmarks)

    async def produce(self, topic: str, partition: int, records: "Sequence[Record | bytes]", *, producer_id: int = -1,
                      producer_epoch: int = -1, base_sequence: int = -1, acks: int = -1,
                      is_transactional: bool = False, transactional_id: str | None = None,
                      ) -> "ProducePartitionResponse | None":
        """Produce one batch to one partition; bytes become records with that value. The
        partition's answer (check its error_code), or None with acks=0 (no answer comes)."""
        batch = RecordBatch([r if isinstance(r, Record) else Record(value=r) for r in records], producer_id,
                            producer_epoch, base_sequence, is_transactional)
        req = ProduceRequest([ProduceTopicData(topic, [ProducePartitionData(partition, batch)])], acks,
                             transactional_id=transactional_id)
        if acks == 0:
            await self.send("Produce", req)
            return None
        resp = await self.request("Produce", req)
        if resp.error_code and not resp.responses:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.responses[0].partition_responses[0]

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1024 * 1024,
                    isolation_level: int = 0) -> "FetchPartitionResponse":
        """Fetch one partition from `offset` (the answer: error_code, high_watermark, records...)."""
        resp = await self.request("Fetch", FetchRequest([FetchTopic(topic, [FetchPartition(partition, offset, max_bytes)])],
                                                        max_bytes=max_bytes, isolation_level=isolation_level))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.responses[0].partitions[0]

    async def list_offsets(self, topic: str, partition: int, timestamp: int = -1,
                           isolation_level: int = 0) -> "ListOffsetsPartitionResponse":
        """ListOffsets for one partition: -1 latest, -2 earliest, or the first offset at or after a timestamp."""
        resp = await self.request("ListOffsets", ListOffsetsRequest(
            [ListOffsetsTopic(topic, [ListOffsetsPartition(partition, timestamp)])], isolation_level))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.topics[0].partitions[0]

    async def init_producer_id(self) -> tuple[int, int]:
        """A new idempotent producer id and epoch (InitProducerId without a transactional id)."""
        resp = await self.request("InitProducerId", InitProducerIdRequest())
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.producer_id, resp.producer_epoch
