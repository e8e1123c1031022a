"""What a step means beyond its messages and decisions, where a lesson turns on it: the owned
partitions a cooperative member keeps and an eager one gives up, the protocol vote counted, a new
leader, members left without a partition, partitions a cooperative rebalance holds back, the
initial delay starting again, a rejoin's reason, and how long a fault's partitions had no consumer.

The Narrator (narrate.py) keeps one `Notes` and asks it at each step; a note is a sentence and its
why, from the catalogue, that the Narrator tells as the coordinator's. Notes keeps what it needs to
remember across steps: who owned what after each generation, each group's leader, and the
partitions a fault left without a consumer until they are handed out again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from grouplab.coordinator.trace import from_json
from grouplab.replay import Step
from grouplab.teach.catalog import Catalog
from grouplab.teach.reasons import OWN_REASONS
from grouplab.protocol import events
from grouplab.protocol.consumer_protocol import decode_assignment, decode_subscription
from grouplab.protocol.errors import ProtocolError
from grouplab.protocol.messages import API
from grouplab.protocol.schema import decode
from grouplab.protocol.types import TopicPartition

COOPERATIVE_FOLLOWUP = "why.member.cooperative_followup"

# Faults after which a member's partitions have no consumer until they are handed out again.
GAP_FAULTS = ("crash", "leave", "static_restart", "hang", "partition")


class Names(Protocol):
    """What Notes asks of the Narrator: the catalogue, and a member's name and session timeout."""

    c: Catalog

    def name(self, member_id: str | None) -> str: ...

    def session_ms(self, member_id: str) -> int: ...


@dataclass
class Note:
    group: str
    text: str
    why: str | None


@dataclass
class _Gap:
    """Partitions a fault left without a consumer: since when, and when the coordinator noticed."""

    member: str  # the client id the fault hit
    fault: str
    since_ms: int
    partitions: set[TopicPartition]
    member_ids: set[str]
    noticed_ms: int | None = None
    session_ms: int = 0
    consumer_protocol: bool = False  # removed from a KIP-848 group: no rebalance, the next epoch hands on


def compact(parts: list[TopicPartition]) -> str:
    """`t0-0,1,2 t1-3` rather than six names: partitions grouped by topic, in order."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(parts):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}-{','.join(map(str, ps))}" for t, ps in by_topic.items())


def owned(body: Any) -> list[TopicPartition]:
    """The partitions a JoinGroup says its member still owns (cooperative members keep them through
    the rebalance, KIP-429; eager ones have given them all up)."""
    for p in body.protocols[:1]:
        try:
            return list(decode_subscription(p.metadata).owned_partitions)
        except (ProtocolError, ValueError):
            return []
    return []


def _s(ms: int) -> str:
    return f"{ms / 1000:.3f}"


@dataclass
class Notes:
    who: Names
    owned_at_join: dict[str, list[TopicPartition]] = field(default_factory=dict)  # member id -> per its JoinGroup
    assigned: dict[str, set[TopicPartition]] = field(default_factory=dict)  # member id -> per the coordinator
    leaders: dict[str, str] = field(default_factory=dict)  # group -> leader of its last generation
    gaps: list[_Gap] = field(default_factory=list)

    # ------------------------------------------------------------------ inside other sentences

    def join_text(self, body: Any) -> str:
        """What a JoinGroup's member still owns (cooperative), or gave up to send it (eager)."""
        c, still = self.who.c, owned(body)
        if still:
            return c.t("req.owned", partitions=compact(still))
        if self.assigned.get(body.member_id):
            return c.t("req.gave_up", partitions=compact(sorted(self.assigned[body.member_id])))
        return ""

    def tally(self, lists: dict[str, list[str]]) -> str:
        """Who voted for what (member name -> its protocols, most preferred first), and which
        protocols were out of the running: Kafka's vote, counted from the members' own lists."""
        c = self.who.c
        candidates = set.intersection(*(set(p) for p in lists.values()))
        votes: dict[str, list[str]] = {}
        for who, protocols in lists.items():
            first = next((p for p in protocols if p in candidates), None)
            if first is not None:
                votes.setdefault(first, []).append(who)
        counted = "; ".join(c.t("vote.count", protocol=p, n=len(w), members=", ".join(w))
                            for p, w in sorted(votes.items(), key=lambda kv: -len(kv[1])))
        out = [p for p in dict.fromkeys(p for ps in lists.values() for p in ps) if p not in candidates]
        if not out:
            return c.t("vote.tally", votes=counted)
        return c.t("vote.tally.excluded", votes=counted, excluded=", ".join(out))

    def reason_why(self, reason: str) -> str | None:
        """The rule behind a rejoin the member gave a reason for (KIP-800 JoinGroup reasons), where
        the reason is one a lesson turns on."""
        if reason.startswith("partition count changed"):
            return self.who.c.t("why.rejoin.partitions")
        if OWN_REASONS.get(reason) == COOPERATIVE_FOLLOWUP:  # the readable consumer's sentence (reasons.py)
            return self.who.c.t(COOPERATIVE_FOLLOWUP)
        return None

    # ------------------------------------------------------------------ after a step

    def after(self, step: Step, api: str | None, body: Any) -> list[Note]:
        now = int(step.line["ts_ms"])
        notes: list[Note] = []
        if api == "JoinGroup" and body is not None:
            member = body.member_id or next((w["member_id"] for w in step.written if w["kind"] == "member_id"), "")
            self.owned_at_join[member] = owned(body)
        elif step.line["kind"] == "request" and api != "LeaveGroup":  # a member alive after all: no gap
            member = getattr(body, "member_id", None)
            self.gaps = [g for g in self.gaps if member not in g.member_ids or g.noticed_ms is not None]
        if step.line["kind"] == "timer" and step.line["key"][0] == "join" and not step.events:
            notes += self._delay_extended(step)
        handed: dict[str, set[TopicPartition]] = {}  # member id -> partitions handed to it in this step
        for ev in step.events:
            p = ev.payload
            if isinstance(p, (events.MemberRemoved, events.ConsumerMemberRemoved)):
                for gap in self.gaps:
                    if p.member_id in gap.member_ids and gap.noticed_ms is None:
                        gap.noticed_ms = now
                        if isinstance(p, events.ConsumerMemberRemoved):  # the broker's session, not the member's
                            gap.consumer_protocol = True
                            if step.broker is not None:
                                gap.session_ms = step.broker.config.consumer_session_timeout_ms
                self.assigned.pop(p.member_id, None)
            elif isinstance(p, events.ConsumerMemberReconciled):
                # KIP-848: each member takes its part on its own heartbeat; a gap closes once the
                # members the fault did not hit own all of it.
                self.assigned[p.member_id] = {TopicPartition(t, n) for t, n in p.assigned}
                gone = set().union(*(g.member_ids for g in self.gaps)) if self.gaps else set()
                handed.update({m: parts for m, parts in self.assigned.items() if m not in gone})
            elif isinstance(p, events.GenerationCompleted) and p.leader:
                notes += self._new_leader(p)
            elif isinstance(p, events.TopicDeleted):
                self._forget_topic(p.topic)
            elif isinstance(p, events.GroupStable):
                new = {m: {TopicPartition(t, n) for t, n in a} for m, a in p.assignments.items() if isinstance(a, list)}
                notes += self._cooperative(p.group_id, p.protocol_name, new) + self._idle(p.group_id, new)
                self.assigned.update(new)
                handed.update(new)
        if not handed:
            handed = self._synced(step, body)
        if handed:
            notes += self._gaps_closed(now, handed, getattr(body, "group_id", None) or "")
        return notes

    def fault(self, fault: str, members: list[str], ts_ms: int) -> None:
        """A fault hit `members` (client ids): their partitions have no consumer from now on."""
        if fault not in GAP_FAULTS:
            return
        for client in members:
            ids = {m for m in self.assigned if self.who.name(m).split("·")[0] == client}
            parts = set().union(*(self.assigned[m] for m in ids)) if ids else set()
            if parts:
                session = max(self.who.session_ms(m) for m in ids)
                self.gaps.append(_Gap(client, fault, ts_ms, parts, ids, session_ms=session))

    def _forget_topic(self, topic: str) -> None:
        """A deleted topic's partitions stop existing: nobody owns them, and no gap waits for them
        to be handed out again (a gap left with none is over, untold)."""
        self.assigned = {m: {tp for tp in parts if tp.topic != topic} for m, parts in self.assigned.items()}
        for gap in self.gaps:
            gap.partitions = {tp for tp in gap.partitions if tp.topic != topic}
        self.gaps = [g for g in self.gaps if g.partitions]

    # ------------------------------------------------------------------ each note

    def _synced(self, step: Step, body: Any) -> dict[str, set[TopicPartition]]:
        """A static member back without a rebalance gets its partitions from its own SyncGroup."""
        member = getattr(body, "member_id", None)
        for written in step.written:
            if written["kind"] == "response" and written.get("api") == "SyncGroup" and member:
                try:
                    parts = decode_assignment(decode(API["SyncGroup"].response, from_json(written["body"])).assignment)
                except (ProtocolError, ValueError, KeyError, TypeError):
                    continue
                if parts.partitions:
                    self.assigned[member] = set(parts.partitions)
                    return {member: set(parts.partitions)}
        return {}

    def _delay_extended(self, step: Step) -> list[Note]:
        """The initial delay ran out but members joined meanwhile: it starts again (KIP-134), up to
        the rebalance timeout, so members starting one by one still make one first generation."""
        group_id = step.line["key"][1]
        broker = step.broker
        group = broker.groups.get(group_id) if broker is not None else None
        if broker is None or group is None or not group.initial_delay_active:
            return []
        c = self.who.c
        return [Note(group_id, c.t("note.delay_extended", delay_ms=broker.config.group_initial_rebalance_delay_ms),
                     c.t("why.delay_extended"))]

    def _new_leader(self, p: events.GenerationCompleted) -> list[Note]:
        before, self.leaders[p.group_id] = self.leaders.get(p.group_id), str(p.leader)
        if before is None or before == p.leader or before in p.members:
            return []
        c = self.who.c
        return [Note(p.group_id, c.t("note.new_leader", leader=self.who.name(p.leader), old=self.who.name(before)),
                     c.t("why.new_leader"))]

    def _idle(self, group: str, new: dict[str, set[TopicPartition]]) -> list[Note]:
        """Members with no partition because the group has more members than partitions (not a
        cooperative hold-back, which leaves partitions unassigned on purpose)."""
        idle = [m for m, parts in new.items() if not parts]
        total = len(set().union(*new.values())) if new else 0
        if not idle or len(new) <= total:
            return []
        c = self.who.c
        return [Note(group, c.t("note.idle", members=", ".join(self.who.name(m) for m in idle), n_members=len(new),
                                n_partitions=total), c.t("why.idle"))]

    def _cooperative(self, group: str, protocol: str, new: dict[str, set[TopicPartition]]) -> list[Note]:
        """In a cooperative rebalance (KIP-429) a partition that moves is only taken away: nobody
        gets it in this generation; its owner revokes it and a follow-up rebalance hands it on."""
        c = self.who.c
        moving = {m: sorted(set(self.owned_at_join.get(m, [])) - parts) for m, parts in new.items()}
        moving = {m: parts for m, parts in moving.items() if parts}
        if not moving:
            return []
        kept = {m: sorted(set(self.owned_at_join.get(m, [])) & parts) for m, parts in new.items()}
        gives = "; ".join(c.t("coop.gives", member=self.who.name(m), partitions=compact(parts),
                              kept=compact(kept[m]) or c.t("none")) for m, parts in moving.items())
        return [Note(group, c.t("note.cooperative", protocol=protocol, moves=gives), c.t("why.cooperative"))]

    def _gaps_closed(self, now: int, handed: dict[str, set[TopicPartition]], group: str) -> list[Note]:
        """The partitions a fault left without a consumer, once every one of them has one again:
        for how long, and where that time went."""
        c, notes, given = self.who.c, [], set().union(*handed.values())
        for gap in list(self.gaps):
            if not gap.partitions <= given:
                continue
            self.gaps.remove(gap)
            owners = ", ".join(self.who.name(m) for m, parts in handed.items() if parts & gap.partitions)
            fields = {"partitions": compact(sorted(gap.partitions)), "seconds": _s(now - gap.since_ms),
                      "what": c.t(f"gap.what.{gap.fault}", member=gap.member), "owners": owners}
            if gap.noticed_ms is not None and gap.fault != "leave" and gap.consumer_protocol:
                text = c.t("note.gap.cg", noticed=_s(gap.noticed_ms - gap.since_ms), handed=_s(now - gap.noticed_ms),
                           **fields)
            elif gap.noticed_ms is not None and gap.fault != "leave":  # a LeaveGroup is noticed at once
                text = c.t("note.gap", noticed=_s(gap.noticed_ms - gap.since_ms), rebalance=_s(now - gap.noticed_ms),
                           **fields)
            else:
                text = c.t("note.gap.direct", **fields)
            # A crashed static member back within its session is a restart, not a crash, to the group.
            restarted = gap.noticed_ms is None and gap.fault == "crash"
            why = "why.gap.static_restart" if restarted else f"why.gap.{gap.fault}"
            if gap.consumer_protocol and c.has(f"why.gap.cg.{gap.fault}"):
                why = f"why.gap.cg.{gap.fault}"
            notes.append(Note(group, text, c.t(why, session_ms=gap.session_ms)))
        return notes
