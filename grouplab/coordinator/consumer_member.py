"""One member of a consumer-protocol group (KIP-848) as the coordinator keeps it, and its durable
form: the ConsumerMemberRecord of the group log (coordinator/group_log.py) holds its subscription,
its assignment with its epochs, and its target, so a restarted coordinator carries on where the
member was (Kafka keeps the same three things as three records per member in __consumer_offsets)."""

from __future__ import annotations

from dataclasses import dataclass, field

from grouplab.coordinator.consumer_reconcile import Assignment, MemberAssignment, normalized
from grouplab.coordinator.group_log import ConsumerMemberRecord
from grouplab.protocol.states import ConsumerMemberState


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
            pending_revocation=as_lists(p.pending_revocation), target=as_lists(target))

    @classmethod
    def from_record(cls, r: ConsumerMemberRecord) -> "ConsumerMember":
        progress = MemberAssignment(ConsumerMemberState(r.state), r.member_epoch, r.previous_member_epoch,
                                    normalized(r.assigned), normalized(r.pending_revocation))
        return cls(member_id=r.member_id, instance_id=r.instance_id, rack_id=r.rack_id, client_id=r.client_id,
                   client_host=r.client_host, rebalance_timeout_ms=r.rebalance_timeout_ms,
                   subscribed_topic_names=sorted(set(r.subscribed_topic_names)),
                   subscribed_topic_regex=r.subscribed_topic_regex, server_assignor=r.server_assignor, progress=progress)


def as_lists(assignment: Assignment) -> dict[str, list[int]]:
    """An assignment as the wire and the log spell it: topic -> sorted partitions, topics sorted."""
    return {t: sorted(ps) for t, ps in sorted(assignment.items())}
