"""The emulated cluster's topic metadata: names and partition counts. Pure; one broker (node 0)
leads every partition, since grouplab emulates coordination, not replication."""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass, field
from typing import Callable
from itertools import repeat

from grouplab.coordinator.config import BrokerConfig
from grouplab.protocol.errors import AnswerTooLarge, ErrorCode
from grouplab.protocol.messages import (
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from grouplab.protocol.schema import floor_bytes

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
CLUSTER_ID = "grouplab"  # the cluster id Metadata (v2+) and DescribeCluster answer
MAX_PARTITIONS_PER_TOPIC = 1_000_000  # a bound, so one request cannot exhaust memory
# What one partition costs in a Metadata answer, rounded up (43 bytes measured with a 1-character
# topic name and small ids): a topic is never made bigger than grouplab.response.max.bytes can
# describe, or every client that asked for its metadata would be refused (docs/protocol.md §4.12).
METADATA_BYTES_PER_PARTITION = 64


def max_partitions_per_topic(config: object) -> int:
    limit = getattr(config, "response_max_bytes", 4 * 1024 * 1024)
    return max(1, min(MAX_PARTITIONS_PER_TOPIC, limit // METADATA_BYTES_PER_PARTITION))
# Topics one Metadata request may auto-create: more are answered UNKNOWN_TOPIC_OR_PARTITION (retriable:
# the next request creates the next ones), so no request holds the coordinator long (issue 11).
MAX_AUTO_CREATED_TOPICS = 1000


# The namespace of grouplab's topic ids: uuid5 of a topic's name and the time it was made, so an id
# is the same in a replay of the same steps (a pure machine draws no random numbers) and a topic
# deleted and made again gets a new one, as Kafka's do.
_TOPIC_ID_NAMESPACE = uuid.UUID("6f1b1c2e-5a4d-4f0e-9a57-67726f75706c")


def topic_id_text(value: uuid.UUID) -> str:
    """Kafka's text form of a topic id (`kafka-topics --describe`'s TopicId): URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def topic_id_value(text: str) -> uuid.UUID:
    """The id `topic_id_text` wrote; ValueError for anything else."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"a topic id is 16 bytes, got {len(raw)}")
    return uuid.UUID(bytes=raw)


def new_topic_id(name: str, now_ms: int) -> str:
    """The id of a topic made at `now_ms`. Never Kafka's zero id (no topic) or the one after it
    (the metadata topic's), which a uuid5 cannot be: its version bits are set."""
    return topic_id_text(uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{name}@{now_ms}"))


def topic_name_error(name: str) -> str | None:
    """Kafka's rule: 1-249 characters of [a-zA-Z0-9._-], and not '.' or '..'."""
    if name in (".", "..") or not _LEGAL_TOPIC.match(name):
        return f"topic name {name!r} is illegal: use 1-249 characters of a-z, A-Z, 0-9, '.', '_', '-'"
    return None


@dataclass
class TopicStore:
    config: BrokerConfig
    host: str = "127.0.0.1"
    port: int = 0
    partitions: dict[str, int] = field(default_factory=dict)
    # Each topic's description, built once per partition count and shared by every Metadata answer
    # (read-only): a storm of Metadata requests for a 20,000-partition topic built 20,000 objects an
    # answer, and those, alive together while the answers waited to be encoded, left the allocator's
    # arenas too fragmented to give back 85 MB after the storm (issue 22, case 5).
    _described: dict[str, MetadataResponseTopic] = field(default_factory=dict, repr=False, compare=False)
    # Each topic's id (Kafka's text form), given when it is made and kept in its TopicRecord.
    ids: dict[str, str] = field(default_factory=dict)
    _names: dict[str, str] = field(default_factory=dict, repr=False, compare=False)  # id -> name, ids' mirror
    # How many brokers are live (a cluster's Broker sets it): the most replicas a topic may ask for.
    live_brokers: Callable[[], int] = field(default=lambda: 1, repr=False, compare=False)

    def topic_id(self, name: str) -> str:
        """The topic's id. A topic put in `partitions` without being made (a test's, a log of an
        older grouplab's) gets one from its name alone, the same at every start."""
        found = self.ids.get(name)
        if found is None:
            found = new_topic_id(name, -1)
            self.set_id(name, found)
        return found

    def set_id(self, name: str, topic_id: str) -> None:
        """The topic's id (when it is made, or as its record says at a restart)."""
        old = self.ids.get(name)
        if old is not None:
            self._names.pop(old, None)
        self.ids[name] = topic_id
        self._names[topic_id] = name

    def named(self, topic_id: str) -> str | None:
        """The topic of an id, or None: Kafka's UNKNOWN_TOPIC_ID. One lookup; on a miss, topics put
        in `partitions` without being made get their ids first, and it looks again."""
        name = self._names.get(topic_id)
        if name is None:
            for each in self.partitions:
                self.topic_id(each)
            name = self._names.get(topic_id)
        return name if name is not None and name in self.partitions else None

    def _make(self, name: str, count: int, now_ms: int) -> None:
        self.partitions[name] = count
        self.set_id(name, new_topic_id(name, now_ms))

    def metadata(self, req: MetadataRequest, max_answer_bytes: int | None = None,
                 now_ms: int = 0) -> tuple[MetadataResponse, list[str]]:
        """The response, and the names of topics it auto-created (for the event log): at most
        MAX_AUTO_CREATED_TOPICS, the first ones named. Raises AnswerTooLarge, having created
        nothing, when the answer (the topics it would create counted) cannot fit in
        `max_answer_bytes`: every topic and partition takes at least its floor on the wire."""
        if req.topics is None:
            names = sorted(self.partitions)
        else:
            names = list(dict.fromkeys(t.name for t in req.topics))  # a set, as in Kafka: each topic once
        by_id = {tid: self.named(tid) for tid in req.topic_ids}  # asked by id alone (v10+): never created
        unknown_ids = [tid for tid, name in by_id.items() if name is None]
        # Every topic in the store has a legal name (each way in checks it), so only the others are.
        illegal = {name for name in names if name not in self.partitions and topic_name_error(name) is not None}
        created: list[str] = []
        if req.topics is not None and req.allow_auto_topic_creation and self.config.auto_create_topics_enable:
            for name in names:
                if len(created) == MAX_AUTO_CREATED_TOPICS:
                    break
                if name not in self.partitions and name not in illegal:
                    created.append(name)
        if max_answer_bytes is not None:
            partitions = sum(map(self.partitions.get, names, repeat(0))) + len(created) * self.config.num_partitions
            floor = len(names) * floor_bytes(MetadataResponseTopic) + partitions * floor_bytes(MetadataResponsePartition)
            if floor > max_answer_bytes:
                raise AnswerTooLarge(floor, max_answer_bytes, exact=False)
        for name in created:
            self._make(name, self.config.num_partitions, now_ms)
        topics = [self._describe(name, name in illegal) for name in names]
        topics += [self._describe(name, False) for name in dict.fromkeys(n for n in by_id.values() if n is not None)
                   if name not in names]
        topics += [MetadataResponseTopic(name="", error_code=ErrorCode.UNKNOWN_TOPIC_ID, topic_id=tid)
                   for tid in unknown_ids]
        broker = MetadataResponseBroker(node_id=self.config.broker_id, host=self.host, port=self.port)
        return MetadataResponse(brokers=[broker], controller_id=self.config.broker_id, topics=topics), created

    def _describe(self, name: str, illegal: bool) -> MetadataResponseTopic:
        if illegal:
            return MetadataResponseTopic(name=name, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION)
        count = self.partitions.get(name)
        if count is None:
            return MetadataResponseTopic(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        leader = self.config.broker_id
        described = self._described.get(name)
        topic_id = self.topic_id(name)
        if (described is None or len(described.partitions) != count or described.topic_id != topic_id
                or (count and described.partitions[0].leader_id != leader)):
            described = MetadataResponseTopic(
                name=name, partitions=[MetadataResponsePartition(partition_index=p, leader_id=leader) for p in range(count)],
                topic_id=topic_id,
            )
            self._described[name] = described
        return described

    def create_topics(self, req: CreateTopicsRequest, now_ms: int = 0) -> CreateTopicsResponse:
        results = []
        counts: dict[str, int] = {}
        for t in req.topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        for t in req.topics:
            count = self.config.num_partitions if t.num_partitions == -1 else t.num_partitions
            code, message = ErrorCode.NONE, None
            if (err := topic_name_error(t.name)) is not None:
                code, message = ErrorCode.INVALID_TOPIC_EXCEPTION, err
            elif counts[t.name] > 1:
                code, message = ErrorCode.INVALID_REQUEST, f"topic {t.name!r} appears more than once in the request"
            elif t.name in self.partitions:
                code, message = ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists"
            elif not 1 <= count <= max_partitions_per_topic(self.config):
                code, message = ErrorCode.INVALID_PARTITIONS, (
                    f"number of partitions must be 1..{max_partitions_per_topic(self.config)} "
                    f"(what grouplab.response.max.bytes can describe), got {count}")
            elif t.replication_factor != -1 and not 1 <= t.replication_factor <= self.live_brokers():
                live = self.live_brokers()
                code, message = ErrorCode.INVALID_REPLICATION_FACTOR, (
                    "replication factor must be 1 (grouplab runs one broker)" if live == 1 else
                    f"replication factor must be between 1 and {live}, the live brokers (each holds every partition)")
            if code is ErrorCode.NONE and not req.validate_only:
                self._make(t.name, count, now_ms)
            results.append(CreatableTopicResult(name=t.name, error_code=code, error_message=message,
                                                num_partitions=count if code is ErrorCode.NONE else -1,
                                                topic_id=self.ids.get(t.name) if code is ErrorCode.NONE else None))
        return CreateTopicsResponse(topics=results)

    def create_partitions(self, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
        results = []
        for t in req.topics:
            current = self.partitions.get(t.name)
            code, message = ErrorCode.NONE, None
            if current is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {t.name!r} does not exist"
            elif t.count <= current:
                code, message = ErrorCode.INVALID_PARTITIONS, f"topic {t.name!r} has {current} partitions; the new count must be larger, got {t.count}"
            elif t.count > (most := max_partitions_per_topic(self.config)):
                code, message = ErrorCode.INVALID_PARTITIONS, (
                    f"at most {most} partitions per topic (what grouplab.response.max.bytes can describe)")
            if code is ErrorCode.NONE and not req.validate_only:
                self.partitions[t.name] = t.count
            results.append(CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message))
        return CreatePartitionsResponse(results=results)

    def deletions(self, req: DeleteTopicsRequest) -> list[DeletableTopicResult]:
        """DeleteTopics, decided and not done: each distinct name once, in first-seen order, NONE
        for a topic to delete (the broker removes it with `remove` once its logs are gone).
        Kafka's checks: delete.topic.enable false refuses every name (TOPIC_DELETION_DISABLED), a
        name given twice is INVALID_REQUEST, a name that is no topic (an illegal one included)
        UNKNOWN_TOPIC_OR_PARTITION, an id that is none UNKNOWN_TOPIC_ID. A topic named both by
        name and by id is named twice."""
        counts: dict[str, int] = {}
        for name in req.topic_names:
            counts[name] = counts.get(name, 0) + 1
        results = []
        named_by: dict[str, str] = {}
        for topic_id in dict.fromkeys(req.topic_ids):
            found = self.named(topic_id)
            if found is None or not self.config.delete_topic_enable:
                results.append(DeletableTopicResult(None, ErrorCode.UNKNOWN_TOPIC_ID if found is None else
                                                    ErrorCode.TOPIC_DELETION_DISABLED,
                                                    f"topic id {topic_id} does not exist" if found is None else
                                                    "topic deletion is disabled (delete.topic.enable=false)",
                                                    topic_id))
            else:
                counts[found] = counts.get(found, 0) + 1
                named_by[found] = topic_id
        for name, count in counts.items():
            code, message = ErrorCode.NONE, None
            if not self.config.delete_topic_enable:
                code, message = ErrorCode.TOPIC_DELETION_DISABLED, "topic deletion is disabled (delete.topic.enable=false)"
            elif count > 1:
                code, message = ErrorCode.INVALID_REQUEST, f"topic {name!r} appears more than once in the request"
            elif name not in self.partitions:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
            results.append(DeletableTopicResult(name, code, message, named_by.get(name)))
        return results

    def remove(self, name: str) -> int:
        """Forget a topic; returns how many partitions it had."""
        self._described.pop(name, None)
        self._names.pop(self.ids.pop(name, ""), None)
        return self.partitions.pop(name)
