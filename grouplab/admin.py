"""A small request/response client for the admin commands (describe, delete, topics) and for tests that
speak the wire protocol directly: one connection, correlation ids matched, typed bodies back.

In a cluster of brokers (docs/protocol.md §12) it goes where Kafka's AdminClient goes: a group's
requests are tried at the bootstrap broker, and on NOT_COORDINATOR sent again to the coordinator
FindCoordinator names (COORDINATOR_LOAD_IN_PROGRESS: again after a back-off); a partition's, on
NOT_LEADER_OR_FOLLOWER, to the leader Metadata names; ListGroups to every broker. With one broker
none of that happens: the same requests as ever go out."""

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
from grouplab.protocol.messages import FindCoordinatorRequest, MetadataRequestTopic
from grouplab.protocol.types import TopicPartition

# A group's answer that says to ask another broker (its coordinator moved, or is loading it).
_ELSEWHERE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


def _first_partition_error(resp: Any) -> int:
    """OffsetCommit's group error: its first partition's (Kafka's answer has no top-level one)."""
    return resp.error_code or next((p.error_code for t in resp.topics for p in t.partitions), 0)


async def _retry_loading(client: "AdminClient", api: str, body: Any, timeout_s: float = 30.0) -> Any:
    """`body` at `client`, again after 100 ms while it answers COORDINATOR_LOAD_IN_PROGRESS."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        resp = await client.request(api, body)
        if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or asyncio.get_running_loop().time() >= deadline:
            return resp
        await asyncio.sleep(0.1)


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
        self._others: dict[tuple[str, int], AdminClient] = {}  # other brokers of a cluster, opened when needed

    async def __aenter__(self) -> "AdminClient":
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for other in self._others.values():
            await other.__aexit__()
        self._others.clear()
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

    # ------------------------------------------------------------------ a cluster of brokers

    async def at(self, host: str, port: int) -> "AdminClient":
        """This client, or its connection to another broker (opened once, closed with this one)."""
        if (host, port) == (self.host, self.port):
            return self
        other = self._others.get((host, port))
        if other is not None and other._gone():
            await other.__aexit__()  # that broker went away since (its restart is a new connection)
            other = None
        if other is None:
            other = await AdminClient(host, port, self.client_id).__aenter__()
            self._others[(host, port)] = other
        return other

    def _gone(self) -> bool:
        return self._reader is None or self._reader.at_eof() or self._writer is None or self._writer.is_closing()

    async def _request_at(self, client: "AdminClient", api: str, body: Any) -> Any:
        """`client.request`, or None when another broker's connection closed under it (it stopped)."""
        try:
            return await client.request(api, body)
        except (ConnectionError, NotGrouplab):
            if client is self:
                raise
            return None

    async def for_group(self, group_id: str, api: str, body: Any, code_of: Any = None,
                        timeout_s: float = 30.0) -> Any:
        """`body` answered where `group_id` is: here, or at the coordinator FindCoordinator names
        when this broker answers NOT_COORDINATOR, again after 100 ms while the coordinator loads
        the group. `code_of(answer)` reads the group's error (default: the top-level one)."""
        code_of = code_of or (lambda resp: resp.error_code)
        client: AdminClient = self
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            resp = await self._request_at(client, api, body)
            code = ErrorCode.NOT_COORDINATOR if resp is None else code_of(resp)
            if resp is not None and asyncio.get_running_loop().time() >= deadline:
                return resp
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                found = await self.request("FindCoordinator", FindCoordinatorRequest(group_id))
                if found.error_code:
                    await asyncio.sleep(0.1)
                    continue
                there = await self.at(found.host, found.port)
                if there is client and resp is not None:
                    return resp  # the coordinator itself said so (its log refused a write): the caller's to see
                client = there
            elif code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                await asyncio.sleep(0.1)
            else:
                return resp

    async def for_partition(self, topic: str, partition: int, api: str, body: Any, code_of: Any,
                            timeout_s: float = 30.0) -> Any:
        """`body` answered by the partition's leader: here, or where Metadata says it is when this
        broker answers NOT_LEADER_OR_FOLLOWER."""
        client: AdminClient = self
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            resp = await self._request_at(client, api, body)
            if resp is not None and (code_of(resp) != ErrorCode.NOT_LEADER_OR_FOLLOWER
                                     or asyncio.get_running_loop().time() >= deadline):
                return resp
            meta = await self.request("Metadata", MetadataRequest(topics=[MetadataRequestTopic(topic)],
                                                                  allow_auto_topic_creation=False))
            where = {b.node_id: (b.host, b.port) for b in meta.brokers}
            leaders = [p.leader_id for t in meta.topics for p in t.partitions if p.partition_index == partition]
            if leaders and leaders[0] in where:
                client = await self.at(*where[leaders[0]])
            else:
                await asyncio.sleep(0.1)

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
        return [g if g.error_code not in _ELSEWHERE else
                (await self.for_group(g.group_id, "DescribeGroups", DescribeGroupsRequest([g.group_id]),
                                      lambda r: r.error_code or r.groups[0].error_code)).groups[0]
                for g in resp.groups]

    async def describe_consumer_groups(self, groups: list[str]) -> list[ConsumerGroupDescribedGroup]:
        """ConsumerGroupDescribe (KIP-848): each group's answer in request order; a group that is not a
        consumer-protocol group answers GROUP_ID_NOT_FOUND (ask DescribeGroups for it)."""
        resp = await self.request("ConsumerGroupDescribe", ConsumerGroupDescribeRequest(groups))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return [g if g.error_code not in _ELSEWHERE else
                (await self.for_group(g.group_id, "ConsumerGroupDescribe", ConsumerGroupDescribeRequest([g.group_id]),
                                      lambda r: r.error_code or r.groups[0].error_code)).groups[0]
                for g in resp.groups]

    async def delete_groups(self, groups: list[str]) -> dict[str, int]:
        """DeleteGroups: each distinct group's error code (0: deleted), in request order."""
        resp = await self.request("DeleteGroups", DeleteGroupsRequest(groups))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        results = {r.group_id: r.error_code for r in resp.results}
        for group_id, code in results.items():
            if code in _ELSEWHERE:
                again = await self.for_group(group_id, "DeleteGroups", DeleteGroupsRequest([group_id]),
                                             lambda r: r.error_code or r.results[0].error_code)
                results[group_id] = again.error_code or again.results[0].error_code
        return results

    async def list_groups(self) -> list[str]:
        """Every group of every live broker (each lists the groups it coordinates), sorted as found."""
        meta = await self.request("Metadata", MetadataRequest(topics=[], allow_auto_topic_creation=False))
        if len(meta.brokers) <= 1:
            return [g.group_id for g in (await self.request("ListGroups", ListGroupsRequest())).groups]
        found: list[str] = []
        for broker in meta.brokers:
            resp = await _retry_loading(await self.at(broker.host, broker.port), "ListGroups", ListGroupsRequest())
            found += [g.group_id for g in resp.groups if g.group_id not in found]
        return found

    # ------------------------------------------------------------------ offsets

    async def commit_offsets(self, group_id: str, offsets: dict[TopicPartition, int], generation_id: int = -1,
                             member_id: str = "", group_instance_id: str | None = None,
                             metadata: str | None = None) -> dict[TopicPartition, int]:
        """OffsetCommit; the error code of each partition (0: stored). generation -1 and member ""
        commit as a simple consumer (allowed while the group is Empty or does not exist)."""
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(OffsetCommitRequestPartition(tp.partition, offset, committed_metadata=metadata))
        resp = await self.for_group(group_id, "OffsetCommit", OffsetCommitRequest(
            group_id, [OffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()], generation_id, member_id,
            group_instance_id), _first_partition_error)
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
        resp = await self.for_group(group_id, "OffsetFetch", OffsetFetchRequest(group_id, topics, require_stable))
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
        resp = await self.for_group(group_id, "OffsetDelete", OffsetDeleteRequest(
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
        elsewhere = [] if resp.error_code else [TopicPartition(t.name, p.partition_index) for t in resp.topics
                                                  for p in t.partitions if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER]
        for tp in elsewhere:  # a cluster: at each one's leader
            answer = await self.list_offsets(tp.topic, tp.partition)
            if answer.error_code == 0 and answer.offset >= 0:
                found[tp] = answer.offset
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
        resp = await self.for_partition(topic, partition, "Produce", req,
                                        lambda r: r.responses[0].partition_responses[0].error_code if r.responses else 0)
        if resp.error_code and not resp.responses:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.responses[0].partition_responses[0]

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1024 * 1024,
                    isolation_level: int = 0) -> "FetchPartitionResponse":
        """Fetch one partition from `offset` (the answer: error_code, high_watermark, records...)."""
        resp = await self.for_partition(topic, partition, "Fetch", FetchRequest(
            [FetchTopic(topic, [FetchPartition(partition, offset, max_bytes)])], max_bytes=max_bytes,
            isolation_level=isolation_level), lambda r: r.responses[0].partitions[0].error_code if r.responses else 0)
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.responses[0].partitions[0]

    async def list_offsets(self, topic: str, partition: int, timestamp: int = -1,
                           isolation_level: int = 0) -> "ListOffsetsPartitionResponse":
        """ListOffsets for one partition: -1 latest, -2 earliest, or the first offset at or after a timestamp."""
        resp = await self.for_partition(topic, partition, "ListOffsets", ListOffsetsRequest(
            [ListOffsetsTopic(topic, [ListOffsetsPartition(partition, timestamp)])], isolation_level),
            lambda r: r.topics[0].partitions[0].error_code if r.topics else 0)
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.topics[0].partitions[0]

    async def init_producer_id(self) -> tuple[int, int]:
        """A new idempotent producer id and epoch (InitProducerId without a transactional id)."""
        resp = await self.request("InitProducerId", InitProducerIdRequest())
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.producer_id, resp.producer_epoch
