"""One member of a consumer-protocol group (KIP-848) as the coordinator keeps it, and its durable
form: the ConsumerMemberRecord of the group log (coordinator/group_log.py) holds its subscription,
its assignment with its epochs, and its target, so a restarted coordinator carries on where the
member was (Kafka keeps the same three things as three records per member in __consumer_offsets).
A member that speaks the classic protocol inside the group (online migration, consumer_classic.py)
also keeps its ClassicMemberMetadata, in the same record."""

from __future__ import annotations

from dataclasses import dataclass, field

from grouplab.coordinator.consumer_reconcile import Assignment, MemberAssignment, normalized
from grouplab.coordinator.group_log import ConsumerMemberRecord
from grouplab.protocol import consumer_protocol
from grouplab.protocol.states import ConsumerMemberState
from grouplab.protocol.types import Assignment as ProtocolAssignment
from grouplab.protocol.types import TopicPartition


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a classic member has beyond a consumer member (Kafka's ClassicMemberMetadata of
    ConsumerGroupMemberMetadataValue): its session timeout and its JoinGroup's protocols."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), preferred first

    @property
    def protocol_name(self) -> str:
        """The protocol its JoinGroup answer names (Kafka: the first it supports)."""
        return self.protocols[0][0]

    def assignment(self, partitions: Assignment) -> bytes:
        """`partitions` as the ConsumerProtocolAssignment it reads: in its subscription's version."""
        version = consumer_protocol.subscription_version(self.protocols[0][1])
        tps = [TopicPartition(t, p) for t in sorted(partitions) for p in sorted(partitions[t])]
        return consumer_protocol.encode_assignment(ProtocolAssignment(partitions=tps), version)


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] = field(default_factory=list)  # sorted, without duplicates
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    regex_topics: frozenset[str] = frozenset()  # the topics its regex matched when last resolved
    progress: MemberAssignment = field(default_factory=MemberAssignment)
    last_heartbeat_ms: int = 0
    # A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside this group:
    # its own session timeout and supported protocols (consumer_classic.py); None for a
    # ConsumerGroupHeartbeat member.
    classic: ClassicMemberMetadata | None = None

    @property
    def member_epoch(self) -> int:
        return self.progress.member_epoch

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(self.subscribed_topic_names) | self.regex_topics

    def record(self, group_id: str, target: Assignment) -> ConsumerMemberRecord:
        """What the group log keeps of this member (not its heartbeat time: a restart gives every
        member a new session, and not its regex's matches: resolved again against the topics)."""
        p = self.progress
        return ConsumerMemberRecord(
            group_id=group_id, member_id=self.member_id, instance_id=self.instance_id, rack_id=self.rack_id,
            client_id=self.client_id, client_host=self.client_host, rebalance_timeout_ms=self.rebalance_timeout_ms,
            subscribed_topic_names=list(self.subscribed_topic_names), subscribed_topic_regex=self.subscribed_topic_regex,
            server_assignor=self.server_assignor, state=p.state.value, member_epoch=p.member_epoch,
            previous_member_epoch=p.previous_member_epoch, assigned=as_lists(p.assigned),
            pending_revocation=as_lists(p.pending_revocation), target=as_lists(target),
            classic_session_timeout_ms=None if self.classic is None else self.classic.session_timeout_ms,
            classic_protocols=None if self.classic is None else [(n, m) for n, m in self.classic.protocols])

    @classmethod
    def from_record(cls, r: ConsumerMemberRecord) -> "ConsumerMember":
        progress = MemberAssignment(ConsumerMemberState(r.state), r.member_epoch, r.previous_member_epoch,
                                    normalized(r.assigned), normalized(r.pending_revocation))
        return cls(member_id=r.member_id, instance_id=r.instance_id, rack_id=r.rack_id, client_id=r.client_id,
                   client_host=r.client_host, rebalance_timeout_ms=r.rebalance_timeout_ms,
                   subscribed_topic_names=sorted(set(r.subscribed_topic_names)),
                   subscribed_topic_regex=r.subscribed_topic_regex, server_assignor=r.server_assignor, progress=progress,
                   classic=None if r.classic_session_timeout_ms is None or not r.classic_protocols else
                   ClassicMemberMetadata(r.classic_session_timeout_ms, tuple(r.classic_protocols)))


def as_lists(assignment: Assignment) -> dict[str, list[int]]:
    """An assignment as the wire and the log spell it: topic -> sorted partitions, topics sorted."""
    return {t: sorted(ps) for t, ps in sorted(assignment.items())}
