"""The narration of consumer-protocol groups (KIP-848) for grouplab/teach/narrate.py: what a
ConsumerGroupHeartbeat says, what its timers mean, and the coordinator's decisions (group epochs
and why they moved, the target, each member's reconciliation and why a partition waits, removals),
each with the rule that made it. The Narrator calls it; it keeps no state of its own but the
Narrator's names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grouplab.coordinator.broker import Broker
from grouplab.protocol import events
from grouplab.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from grouplab.protocol.states import ConsumerMemberState, RemovalReason
from grouplab.protocol.types import TopicPartition

if TYPE_CHECKING:
    from grouplab.teach.narrate import Narrator, Said

CONSUMER_EVENTS = (events.ConsumerGroupEvent,)
TIMERS = ("consumer-session", "consumer-rebalance")


def request_text(n: "Narrator", body: ConsumerGroupHeartbeatRequest, broker: Broker | None) -> str:
    """The heartbeat as its member meant it: join, leave, or its epoch and the partitions it says it
    owns (named: the Kafka wire names them by topic id)."""
    c = n.c
    if body.member_epoch == -1:
        return c.t("req.cgh.leave", member=n.name(body.member_id))
    if body.member_epoch == -2:
        return c.t("req.cgh.static_leave", member=n.name(body.member_id), instance=body.instance_id or "?")
    if body.member_epoch == 0:
        topics = ", ".join(body.subscribed_topic_names or []) or (f"/{body.subscribed_topic_regex}/"
                                                                   if body.subscribed_topic_regex else c.t("none"))
        text = c.t("req.cgh.join", topics=topics)
        if body.server_assignor:
            text += c.t("req.cgh.assignor", assignor=body.server_assignor)
        if body.instance_id:
            text += c.t("req.static", instance=body.instance_id)
        return text
    text = c.t("req.cgh.heartbeat", epoch=body.member_epoch)
    if body.topic_partitions is not None:
        owned = [TopicPartition(_topic(tp.topic, tp.topic_id, broker), p) for tp in body.topic_partitions
                 for p in tp.partitions]
        text += c.t("req.cgh.owns", partitions=n.compact(owned) or c.t("none"))
    return text


def _topic(name: str, topic_id: str | None, broker: Broker | None) -> str:
    if name or topic_id is None:
        return name
    return (broker.topics.named(topic_id) if broker is not None else None) or topic_id


def response_text(n: "Narrator", body: ConsumerGroupHeartbeatResponse) -> str:
    if body.assignment is None:
        return n.c.t("resp.cgh", epoch=body.member_epoch)
    owned = [TopicPartition(t, p) for t, ps in sorted(body.assignment.items()) for p in ps]
    return n.c.t("resp.cgh.assignment", epoch=body.member_epoch, partitions=n.compact(owned) or n.c.t("none"))


def timer_text(n: "Narrator", key: list[Any], broker: Broker | None) -> str:
    member = n.name(key[2]) if len(key) > 2 else "?"
    if key[0] == "consumer-session":
        session = broker.config.consumer_session_timeout_ms if broker is not None else "?"
        return n.c.t("timer.cgh.session", member=member, session_ms=session)
    return n.c.t("timer.cgh.rebalance", member=member)


def decision(n: "Narrator", p: events.ConsumerGroupEvent, broker: Broker | None) -> "Said | None":
    """One decision of the coordinator about a consumer-protocol group, with its why; None for an
    event that is not worth a line of the story."""
    from grouplab.teach.narrate import COORDINATOR, Said

    c, g = n.c, p.group_id

    def said(key: str, why: str | None = None, **fields: Any) -> Said:
        return Said(COORDINATOR, g, c.t(key, **fields), why, kind="decision")

    if isinstance(p, events.ConsumerMemberJoined):
        n.learn_member(p.member_id, p.client_id)
        return None  # the request line said it
    if isinstance(p, events.ConsumerClassicMemberJoined):
        n.learn_member(p.member_id, p.client_id)
        return said("dec.cg.classic_joined", c.t("why.cg.classic_joined"), member=n.name(p.member_id))
    if isinstance(p, events.GroupConverted):
        return said(f"dec.cg.converted.{p.to_type}", c.t(f"why.cg.converted.{p.to_type}"), epoch=p.group_epoch,
                    members=n.names(p.members))
    if isinstance(p, events.GroupEpochBumped):
        subject = _subject(n, p.detail)
        cause = c.t(f"cg.cause.{p.cause.value}", member=subject, detail=p.detail)
        return said("dec.cg.epoch", c.t("why.cg.epoch"), epoch=p.group_epoch, cause=cause)
    if isinstance(p, events.TargetAssignmentComputed):
        parts = "; ".join(f"{n.name(m)} ← {n.pairs(a)}" for m, a in p.assignment.items()) or c.t("none")
        return said("dec.cg.target", c.t("why.cg.target", assignor=p.assignor), epoch=p.assignment_epoch,
                    assignor=p.assignor, assignment=parts)
    if isinstance(p, events.ConsumerMemberReconciled):
        fields: dict[str, Any] = dict(member=n.name(p.member_id), epoch=p.member_epoch, partitions=n.pairs(p.assigned))
        if p.member_state is ConsumerMemberState.UNREVOKED_PARTITIONS:
            return said("dec.cg.unrevoked", c.t("why.cg.unrevoked"), revoke=n.pairs(p.pending_revocation), **fields)
        if p.member_state is ConsumerMemberState.UNRELEASED_PARTITIONS:
            return said("dec.cg.unreleased", c.t("why.cg.unreleased"), waiting=_holders(n, g, p.unreleased, broker),
                        **fields)
        return said("dec.cg.owns", **fields)
    if isinstance(p, events.ConsumerMemberRemoved):
        held = n.pairs(p.partitions)
        if p.reason is RemovalReason.LEFT:
            return said("dec.cg.left", member=n.name(p.member_id), partitions=held)
        why = c.t(f"why.cg.removed.{p.reason.value}", member=n.name(p.member_id),
                  session_ms=broker.config.consumer_session_timeout_ms if broker is not None else "?")
        return said("dec.cg.removed", why, member=n.name(p.member_id), reason=p.reason.value, partitions=held)
    if isinstance(p, events.ConsumerHeartbeatRejected):
        return said("dec.cg.rejected", n.error_why("ConsumerGroupHeartbeat", p.error, {"request_epoch": p.member_epoch}),
                    member=n.name(p.member_id) if p.member_id else c.t("nobody"), epoch=p.member_epoch, error=p.error)
    if isinstance(p, events.ConsumerStaticMemberLeft):
        return said("dec.cg.static_left", c.t("why.cg.static_left"), instance=p.instance_id, member=n.name(p.member_id))
    if isinstance(p, events.ConsumerStaticMemberReplaced):
        n.learn_member(p.member_id, n.name(p.old_member_id))
        return said("dec.cg.static_replaced", instance=p.instance_id, member=n.name(p.member_id),
                    old=n.name(p.old_member_id))
    if isinstance(p, events.ConsumerGroupStateChanged) and p.to_state.value == "Stable":
        return said("dec.cg.stable", epoch=p.group_epoch)
    if isinstance(p, events.ConsumerGroupLoaded):
        return said("dec.cg.loaded", epoch=p.group_epoch, members=n.names(p.members))
    return None


def _subject(n: "Narrator", detail: str) -> str:
    named = [m for m in n.members if m in detail]
    return n.name(max(named, key=len)) if named else "?"


def _holders(n: "Narrator", group_id: str, unreleased: list[list[object]], broker: Broker | None) -> str:
    """Each waited-for partition with the member that still holds it (the group after the step)."""
    group = broker.consumer_groups.get(group_id) if broker is not None else None
    by_holder: dict[str, list[TopicPartition]] = {}
    for t, p in unreleased:
        holder = group.holders.get((str(t), int(str(p)))) if group is not None else None
        by_holder.setdefault(n.name(holder) if holder else "?", []).append(TopicPartition(str(t), int(str(p))))
    return "; ".join(n.c.t("cg.held_by", partitions=n.compact(tps), member=who) for who, tps in by_holder.items())
