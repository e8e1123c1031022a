"""What a client knows of a cluster's partition leaders, from Metadata (pure data, no outputs).

Kafka's clients (the producer's Sender, the consumer's Fetcher) send each partition's requests to
its leader as the last Metadata answer named it. A NOT_LEADER_OR_FOLLOWER, or the leader's
connection closing, makes that leader unknown and asks for a Metadata refresh; the request waits
until the refresh names a leader, and refreshes are at least `retry.backoff.ms` apart. The owner
machine (consumer/producer.py, consumer/delivery.py) sends the Metadata request itself (it numbers
its requests); this table says when one is due, to which broker, and what the answer taught.

Metadata goes to the bootstrap brokers in turn, so a broker the client sends to is always one it
was given or one a Metadata answer named (the socket shell learns addresses from those answers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from grouplab.protocol.messages import MetadataRequest, MetadataRequestTopic, MetadataResponse
from grouplab.protocol.types import TopicPartition

METADATA_TIMER = ("metadata",)  # the owner's timer: a refresh waiting for its back-off, or unanswered


@dataclass
class PartitionLeaders:
    bootstrap_nodes: tuple[int, ...]
    retry_backoff_ms: int
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    topics: set[str] = field(default_factory=set)  # what the refresh asks about
    stale: bool = False  # a refresh is wanted
    inflight: int | None = None  # the correlation id of the refresh in flight
    inflight_node: int | None = None
    last_sent_ms: int | None = None
    _turn: int = 0

    def leader(self, tp: TopicPartition) -> int | None:
        """The leader to send `tp`'s requests to, or None (unknown: a refresh is wanted)."""
        self.topics.add(tp.topic)
        node = self.leaders.get(tp)
        if node is None:
            self.stale = True
        return node

    def by_leader(self, partitions: Iterable[TopicPartition]) -> tuple[dict[int, list[TopicPartition]], list[TopicPartition]]:
        """`partitions` grouped by their known leader (in node order), and those with none known."""
        known: dict[int, list[TopicPartition]] = {}
        unknown: list[TopicPartition] = []
        for tp in partitions:
            node = self.leader(tp)
            if node is None:
                unknown.append(tp)
            else:
                known.setdefault(node, []).append(tp)
        return dict(sorted(known.items())), unknown

    def not_leader(self, tp: TopicPartition) -> None:
        """NOT_LEADER_OR_FOLLOWER (or an unknown partition) for `tp`: forget its leader, refresh."""
        self.leaders.pop(tp, None)
        self.stale = True

    def node_lost(self, node: int) -> bool:
        """`node`'s connection closed: forget what it led (refresh); True if it led anything or
        answered the refresh in flight (which is then lost)."""
        led = [tp for tp, n in self.leaders.items() if n == node]
        for tp in led:
            del self.leaders[tp]
        lost_refresh = self.inflight is not None and self.inflight_node == node
        if lost_refresh:
            self.inflight = self.inflight_node = None
        if led or lost_refresh:
            self.stale = True
        return bool(led) or lost_refresh

    def due_at(self, now_ms: int) -> int | None:
        """When a refresh may go out (now_ms or later), or None if none is wanted or one is in flight."""
        if not self.stale or self.inflight is not None:
            return None
        if self.last_sent_ms is None:
            return now_ms
        return max(now_ms, self.last_sent_ms + self.retry_backoff_ms)

    def request(self, now_ms: int) -> tuple[int, MetadataRequest]:
        """The refresh to send now, and the broker to send it to (the bootstrap brokers in turn)."""
        node = self.bootstrap_nodes[self._turn % len(self.bootstrap_nodes)]
        self._turn += 1
        self.last_sent_ms = now_ms
        self.inflight_node = node
        return node, MetadataRequest([MetadataRequestTopic(t) for t in sorted(self.topics)], allow_auto_topic_creation=False)

    def sent(self, correlation_id: int) -> None:
        self.inflight = correlation_id

    def answered(self, correlation_id: int, resp: MetadataResponse) -> bool:
        """The refresh's answer: learn every partition's leader (-1: none live yet, still stale).
        False if it is not the refresh in flight."""
        if correlation_id != self.inflight:
            return False
        self.inflight = self.inflight_node = None
        self.stale = False
        for topic in resp.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code == 0 and p.leader_id >= 0:
                    self.leaders[tp] = p.leader_id
                else:
                    self.leaders.pop(tp, None)
                    if topic.name in self.topics:
                        self.stale = True
        if resp.error_code:
            self.stale = True
        return True

    def unanswered(self) -> None:
        """The refresh in flight got no answer in time: ask again (the next bootstrap broker)."""
        self.inflight = self.inflight_node = None
        self.stale = True
