"""Human views of the event log for a terminal: what `grouplab coordinator` and `grouplab consumer`
print while they run (the JSON lines go to `--run-dir` or, with `--log-json`, to stderr).

The coordinator's view is one line per decision a person wants to see (a member joins, a rebalance
starts and why, a member is removed and why, a commit is refused) and, when a group is stable again,
the rebalance's table (grouplab/display.py's, one per group). The consumer's view says what it owns
and, each time it joins again, why: the reason the member machine logged, in the same words
`explain` uses (grouplab/teach/reasons.py). Both are listeners on an EventLog: (node, LogEvent).
"""

from __future__ import annotations

import datetime
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text

from grouplab.display import RebalanceView, short_member
from grouplab.teach.catalog import Catalog
from grouplab.teach.narrate_cluster import leaders_summary
from grouplab.teach.reasons import say_reason, say_text, why_rejoin
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.states import ConsumerGroupState, ConsumerMemberState, MembershipState, RemovalReason
from grouplab.protocol.types import TopicPartition, format_partitions

WALL_CLOCK_MS = 10**12  # ts_ms beyond this is epoch time (a real run); below, virtual time from 0

# A group of 10,000 members must not print 10,000 lines: of each kind of per-member line (a join, a
# removal, a KIP-848 member's epoch), a group shows this many in full between two settlings (Stable),
# then counts the rest, saying how many at 100, 1,000, 10,000... and in one line when it settles.
BULK_SHOWN = 10
BULK_KEYS = frozenset({"view.joined", "view.joined.static", "view.removed", "view.refused", "view.commit_refused",
                       "view.cg.joined", "view.cg.epoch", "view.cg.target", "view.cg.owns", "view.cg.unrevoked",
                       "view.cg.unreleased", "view.cg.left", "view.cg.left.none", "view.cg.removed",
                       "view.cg.removed.none", "view.cg.rejected"})
# Member ids (and client ids) inside a text: the tokens looked up to shorten them (not a scan of
# every member known, which a group of thousands would make quadratic).
_ID_TOKEN = re.compile(r"[A-Za-z0-9._\-]+")


def clock_text(ts_ms: int) -> str:
    """Local time of day for a real run, seconds from the start for a simulated one."""
    if ts_ms >= WALL_CLOCK_MS:
        return datetime.datetime.fromtimestamp(ts_ms / 1000).strftime("%H:%M:%S.%f")[:-3]
    return f"+{ts_ms / 1000:.3f} s"


def _pairs(value: list[list[object]]) -> str:
    return format_partitions([TopicPartition(str(t), int(str(p))) for t, p in value])


class _KeyedCatalog(Catalog):
    """The view's catalogue, remembering whether the line it made is a per-member one (BULK_KEYS),
    and which (`bulk_key`, reset by the view for each event)."""

    def __init__(self, lang: str) -> None:
        super().__init__(lang)
        self.bulk_key = ""

    def t(self, key: str, /, **fields: Any) -> str:
        if key in BULK_KEYS:
            self.bulk_key = key
        return super().t(key, **fields)


@dataclass
class CoordinatorView:
    """`grouplab coordinator`'s terminal: decisions as lines, rebalances as tables, each rule's
    why once (the first time the run shows it), in the catalogue's language."""

    console: Console
    lang: str = "en"
    rebalances: RebalanceView = field(init=False)
    clients: dict[str, str] = field(default_factory=dict)
    told: set[str] = field(default_factory=set)
    session_ms: dict[str, str] = field(default_factory=dict)  # member -> its session timeout, once removed for it
    # (group, catalogue key) -> [lines shown since the group last settled, lines counted, not shown]
    bulk: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.c = _KeyedCatalog(self.lang)
        self.rebalances = RebalanceView(self.console, None, lang=self.lang)

    def __call__(self, node: str, ev: LogEvent) -> None:
        if node != "coordinator":
            return
        p = ev.payload
        group = getattr(p, "group_id", None)
        c = self.c
        c.bulk_key = ""
        if group is not None and self._settles(p):
            self._flush(group, settled=True)
        line: str | None = None
        why: str | None = None
        rule = ""  # the why's catalogue key: each rule is told once, for whichever member shows it first
        style = ""
        if isinstance(p, events.MemberJoined):
            self.clients[p.member_id] = p.client_id
            fields = dict(group=p.group_id, member=self._name(p.member_id), protocols=", ".join(p.protocols))
            line = (c.t("view.joined.static", instance=p.group_instance_id, **fields) if p.group_instance_id
                    else c.t("view.joined", **fields))
        elif isinstance(p, events.RebalanceStarted):
            line = c.t("view.rebalance", group=p.group_id, generation=p.generation_id,
                       trigger=self._short(say_text(p.trigger, c)))
            subject = self._subject(p)
            rule = f"why.rebalance.{p.cause.value}"
            why, style = c.t(rule, subject=subject,
                             session_ms=self.session_ms.get(subject, "?"), rebalance_ms="?"), "bold yellow"
        elif isinstance(p, events.MemberRemoved):
            line = c.t("view.removed", group=p.group_id, member=self._name(p.member_id), reason=p.reason.value,
                       detail=say_text(p.detail, c))
            style = "yellow"
            ms = re.search(r"(\d+) ms", p.detail)  # "no heartbeat for 10000 ms" (coordinator/group.py)
            if ms:
                self.session_ms[self._name(p.member_id)] = ms.group(1)
        elif isinstance(p, events.StaticMemberReplaced):
            self.clients[p.member_id] = self.clients.get(p.old_member_id, p.group_instance_id)
            line = c.t("view.replaced", group=p.group_id, instance=p.group_instance_id, member=self._name(p.member_id),
                       old=self._name(p.old_member_id))
            rule = "why.static_member_replaced"
            why = c.t(rule)
        elif isinstance(p, events.JoinRejected):
            line, style = c.t("view.refused", group=p.group_id, member=self._name(p.member_id), error=p.error,
                              reason=say_text(p.reason, c)), "red"
        elif isinstance(p, events.OffsetCommitRejected):
            line = c.t("view.commit_refused", group=p.group_id, member=self._name(p.member_id),
                       partitions=_pairs(p.partitions), error=p.error, request_generation=p.request_generation_id,
                       generation=p.generation_id)
            rule = f"why.OffsetCommit.{p.error}"
            why, style = (c.t(rule, request_generation=p.request_generation_id) if c.has(rule) else None), "red"
        elif isinstance(p, events.OffsetsExpired):
            line = c.t("view.offsets_expired", group=p.group_id, partitions=_pairs(p.partitions))
            rule, why = "why.offsets_expired", c.t("why.offsets_expired")
        elif isinstance(p, events.OffsetsDeleted):
            line = c.t("view.offsets_deleted", group=p.group_id, partitions=_pairs(p.partitions))
        elif isinstance(p, events.GroupDeleted):
            line = c.t("view.deleted." + ("expired" if p.reason == "expired" else "asked"), group=p.group_id,
                       count=p.offsets_deleted)
        elif isinstance(p, events.GroupLoaded):
            line = c.t("view.loaded", group=p.group_id, generation=p.generation_id, count=len(p.members))
        elif isinstance(p, events.TopicCreated):
            line = c.t("view.topic.auto" if p.auto else "view.topic", topic=p.topic, count=p.partition_count)
        elif isinstance(p, events.TransactionAborted):
            line, style = c.t("view.txn_aborted", tid=p.transactional_id, reason=say_reason(p.reason, c)), "yellow"
        elif isinstance(p, events.BadRequest):
            line, style = c.t("view.bad_request", peer=p.peer, error=p.error), "red"
        elif isinstance(p, (events.InternalError, events.LogWriteFailed, events.PartitionWriteFailed,
                            events.PartitionFlushFailed, events.MarkerWriteFailed)):
            line, style = c.t("view.failure", what=p.NAME, error=p.error), "bold red"
        elif isinstance(p, (events.BrokerStopped, events.BrokerStarted, events.LeadersMoved, events.CoordinatorMoved,
                            events.CoordinatorLoaded)):
            line, rule, style = self._cluster(p)
            why = c.t(rule, **self._move_fields(p)) if rule else None
        elif isinstance(p, events.ConsumerGroupEvent):
            said = self._consumer_group(p)
            if said is None:
                return
            line, rule, style = said
            why = c.t(rule, member=self._subject_of(p), session_ms=self.session_ms.get("consumer", "?")) if rule else None
        elif isinstance(p, events.GroupStable):
            self.rebalances(node, ev)
            return
        else:
            self.rebalances(node, ev)  # the tracker needs every group event to know each rebalance
            return
        self.rebalances(node, ev)
        if group is not None and not self._listed(group, c.bulk_key, ev.ts_ms):
            return
        self.console.print(Text(f"{clock_text(ev.ts_ms)}  {line}", style=style))
        if why and rule not in self.told:
            self.told.add(rule)
            self.console.print(Text(f"{'':14}{c.t('why.line', why=why)}", style="dim italic"))

    @staticmethod
    def _settles(p: object) -> bool:
        """A group settling ends its bulk: what was counted is said, the next lines show again."""
        return isinstance(p, events.GroupStable) or (
            isinstance(p, events.ConsumerGroupStateChanged) and p.to_state is ConsumerGroupState.STABLE)

    def _listed(self, group: str, key: str, ts_ms: int) -> bool:
        """Whether this line of `group` is printed: the first BULK_SHOWN of a per-member kind are,
        the rest counted (with a line at 100, 1,000, ...); any other line first says what was counted."""
        if not key:
            self._flush(group, settled=False)
            return True
        counts = self.bulk.setdefault((group, key), [0, 0])
        if counts[0] < BULK_SHOWN:
            counts[0] += 1
            return True
        counts[1] += 1
        total = counts[0] + counts[1]
        if total >= 100 and str(total).rstrip("0") == "1":  # 100, 1,000, 10,000, ...
            self.console.print(Text(f"{clock_text(ts_ms)}  " + self.c.t("view.bulk.so_far", group=group,
                                    what=self.c.t("bulk." + key), count=f"{total:,}"), style="dim"))
        return False

    def _flush(self, group: str, settled: bool) -> None:
        for (g, key), counts in self.bulk.items():
            if g == group and counts[1]:
                self.console.print(Text(f"{'':14}" + self.c.t("view.bulk.more", group=group, what=self.c.t("bulk." + key),
                                                              count=f"{counts[1]:,}", total=f"{counts[0] + counts[1]:,}"),
                                        style="dim"))
                counts[0] += counts[1]
                counts[1] = 0
        if settled:
            for k in [k for k in self.bulk if k[0] == group]:
                del self.bulk[k]

    def _cluster(self, p: events.Event) -> tuple[str, str, str]:
        """A cluster's event (docs/protocol.md §12) as (line, the why's catalogue key or "", style):
        one line per broker change and per coordinator move, leaders summed up per new leader."""
        c = self.c
        if isinstance(p, events.BrokerStopped):
            return (c.t(f"view.broker.{'shutdown' if p.how == 'shutdown' else 'killed'}", node=p.node_id,
                        live=", ".join(map(str, p.live)) or c.t("none")), "", "bold red")
        if isinstance(p, events.BrokerStarted):
            return c.t("view.broker.started", node=p.node_id, live=", ".join(map(str, p.live))), "why.cluster.up", "green"
        if isinstance(p, events.LeadersMoved):
            election = p.cause in ("preferred_election", "auto_leader_rebalance")  # else the broker line said why
            return (c.t("view.leaders.election" if election else "view.leaders", count=len(p.partitions),
                        cause=self._cause(p.cause, -1), moves=leaders_summary(c, p.partitions)), "", "")
        if isinstance(p, events.CoordinatorMoved):
            fields = self._move_fields(p)
            if p.to_node == -1:
                return c.t("view.coordinator.none", **fields), "why.cluster.moved.none", "bold red"
            rule = "why.cluster.moved.election" if p.cause in ("preferred_election", "auto_leader_rebalance") else \
                "why.cluster.moved"
            return c.t("view.coordinator.moved", **fields), rule, "bold yellow"
        assert isinstance(p, events.CoordinatorLoaded)
        return c.t("view.coordinator.loaded", groups=", ".join(p.groups), node=p.node_id), "", "green"

    def _move_fields(self, p: events.Event) -> dict[str, object]:
        if not isinstance(p, events.CoordinatorMoved):
            return {}
        return dict(groups=", ".join(p.groups), from_node=p.from_node, to_node=p.to_node, partition=p.partition,
                    topic="__consumer_offsets", load_ms=p.load_ms, cause=self._cause(p.cause, p.from_node))

    def _cause(self, cause: str, node: int) -> str:
        key = f"cluster.cause.{cause}"
        return self.c.t(key, node=node) if self.c.has(key) else cause

    def _consumer_group(self, p: events.ConsumerGroupEvent) -> tuple[str, str, str] | None:
        """A consumer-protocol group's event (KIP-848) as (line, the why's catalogue key or "",
        style), or None for one not worth a line."""
        c, g = self.c, p.group_id
        if isinstance(p, events.ConsumerClassicMemberJoined):
            self.clients[p.member_id] = p.client_id
            return c.t("view.cg.classic_joined", group=g, member=self._name(p.member_id),
                       topics=", ".join(p.subscribed_topic_names) or "-"), "why.cg.classic_joined", ""
        if isinstance(p, events.GroupConverted):
            return (c.t(f"view.cg.converted.{p.to_type}", group=g, epoch=p.group_epoch, count=len(p.members)),
                    f"why.cg.converted.{p.to_type}", "bold yellow")
        if isinstance(p, events.ConsumerMemberJoined):
            self.clients[p.member_id] = p.client_id
            topics = ", ".join(p.subscribed_topic_names) + (f" /{p.subscribed_topic_regex}/" if p.subscribed_topic_regex else "")
            return c.t("view.cg.joined", group=g, member=self._name(p.member_id), topics=topics or "-"), "", ""
        if isinstance(p, events.GroupEpochBumped):
            cause = c.t(f"cg.cause.{p.cause.value}", member=self._subject_of(p), detail=self._short(p.detail))
            return c.t("view.cg.epoch", group=g, epoch=p.group_epoch, cause=cause), "why.cg.epoch", "bold yellow"
        if isinstance(p, events.TargetAssignmentComputed):
            shown = [f"{self._name(m)} {_pairs(a) or '-'}" for m, a in itertools.islice(p.assignment.items(), BULK_SHOWN)]
            if len(p.assignment) > BULK_SHOWN:
                shown.append(c.t("view.cg.target.more", count=f"{len(p.assignment) - BULK_SHOWN:,}"))
            assignment = "; ".join(shown)
            return c.t("view.cg.target", group=g, epoch=p.assignment_epoch, assignor=p.assignor,
                       assignment=assignment or "-"), "", ""
        if isinstance(p, events.ConsumerMemberReconciled):
            fields = dict(group=g, member=self._name(p.member_id), epoch=p.member_epoch, partitions=_pairs(p.assigned) or "-")
            if p.member_state is ConsumerMemberState.UNREVOKED_PARTITIONS:
                return c.t("view.cg.unrevoked", revoke=_pairs(p.pending_revocation), **fields), "why.cg.unrevoked", "yellow"
            if p.member_state is ConsumerMemberState.UNRELEASED_PARTITIONS:
                return c.t("view.cg.unreleased", unreleased=_pairs(p.unreleased), **fields), "why.cg.unreleased", ""
            return c.t("view.cg.owns", **fields), "", ""
        if isinstance(p, events.ConsumerMemberRemoved):
            held = _pairs(p.partitions) if p.partitions else ""
            fields = dict(group=g, member=self._name(p.member_id), partitions=held)
            if p.reason is RemovalReason.LEFT:
                return c.t("view.cg.left" if held else "view.cg.left.none", **fields), "", ""
            ms = re.search(r"(\d+) ms", p.detail)  # "no heartbeat for 45000 ms" (coordinator/consumer_group.py)
            detail = c.t(f"cg.detail.{p.reason.value}", ms=ms.group(1)) if ms else p.detail
            if ms and p.reason is RemovalReason.SESSION_TIMEOUT:
                self.session_ms["consumer"] = ms.group(1)
            rule = "why.cg.session_timeout" if p.reason is RemovalReason.SESSION_TIMEOUT else ""
            return (c.t("view.cg.removed" if held else "view.cg.removed.none", reason=p.reason.value, detail=detail,
                        **fields), rule, "yellow")
        if isinstance(p, events.ConsumerHeartbeatRejected):
            return c.t("view.cg.rejected", group=g, member=self._name(p.member_id) if p.member_id else "?",
                       epoch=p.member_epoch, error=p.error, reason=p.reason), "", "red"
        if isinstance(p, events.ConsumerStaticMemberLeft):
            return c.t("view.cg.static_left", group=g, instance=p.instance_id, member=self._name(p.member_id)), "", ""
        if isinstance(p, events.ConsumerStaticMemberReplaced):
            self.clients[p.member_id] = self.clients.get(p.old_member_id, p.instance_id)
            return c.t("view.cg.static_replaced", group=g, instance=p.instance_id, member=self._name(p.member_id),
                       old=self._name(p.old_member_id)), "", ""
        if isinstance(p, events.ConsumerGroupStateChanged) and p.to_state is ConsumerGroupState.STABLE:
            return c.t("view.cg.stable", group=g, epoch=p.group_epoch), "", "bold green"
        if isinstance(p, events.ConsumerGroupLoaded):
            return c.t("view.cg.loaded", group=g, epoch=p.group_epoch, count=len(p.members)), "", ""
        return None

    def _subject_of(self, p: events.ConsumerGroupEvent) -> str:
        """The member a consumer-protocol group's event is about: its own field, or the one its
        detail names."""
        member_id = getattr(p, "member_id", None)
        if member_id:
            return self._name(member_id)
        named = [m for m in _ID_TOKEN.findall(getattr(p, "detail", "")) if m in self.clients]
        return self._name(max(named, key=len)) if named else "?"

    def _name(self, member_id: str) -> str:
        return short_member(member_id, self.clients)

    def _subject(self, p: events.RebalanceStarted) -> str:
        """The member the rebalance is about: the one its trigger names."""
        named = [m for m in _ID_TOKEN.findall(p.trigger) if m in self.clients]
        return self._name(max(named, key=len)) if named else "?"

    def _short(self, text: str) -> str:
        """Every member id the text names, shortened (looked up token by token)."""
        return _ID_TOKEN.sub(lambda m: self._name(m[0]) if m[0] in self.clients else m[0], text)


@dataclass
class GroupEpochs:
    """The last group epoch a consumer-protocol group reached: what a run's summary counts where a
    classic group's counts rebalances (a KIP-848 group has none)."""

    group_id: str
    last: int = 0

    def __call__(self, node: str, ev: LogEvent) -> None:
        p = ev.payload
        if isinstance(p, events.ConsumerGroupEvent) and p.group_id == self.group_id:
            self.last = max(self.last, p.group_epoch)


@dataclass
class ConsumerView:
    """`grouplab consumer`'s terminal: what it owns after each rebalance, what it gives up, and
    why it joins again. A consumer-protocol member (KIP-848) is told by member epoch: what each
    answer of the coordinator takes away and adds, what it revokes first and why, fencing, leaving.
    `by_node`: many members on one terminal (`grouplab run --group-protocol consumer`), each line
    led by the member's node name."""

    console: Console
    lang: str = "en"
    told: set[str] = field(default_factory=set)
    by_node: bool = False

    def __post_init__(self) -> None:
        self.c = Catalog(self.lang)
        self._node = ""

    def __call__(self, node: str, ev: LogEvent) -> None:
        p = ev.payload
        if not isinstance(p, events.MemberEvent):
            return
        self._node = f"{node}: " if self.by_node else ""
        if isinstance(p.state, MembershipState):
            self._consumer_protocol(p)
            return
        if self.by_node:
            return  # a classic member's lines: the run's rebalance tables tell them
        c = self.c
        if isinstance(p, events.PartitionsAssigned):
            self._say(c.t("member.owns", generation=p.generation_id, member=p.member_id, partitions=_pairs(p.owned)))
        elif isinstance(p, events.PartitionsRevoked):
            self._say(c.t("member.revoked", partitions=_pairs(p.partitions), reason=say_reason(p.reason, c)), "yellow")
        elif isinstance(p, events.PartitionsLost):
            self._say(c.t("member.lost", partitions=_pairs(p.partitions), reason=say_reason(p.reason, c)), "red")
        elif isinstance(p, events.JoinSent) and p.reason != "starting":
            self._say(c.t("member.rejoin", reason=say_reason(p.reason, c)), "yellow", why_rejoin(p.reason, c))
        elif isinstance(p, events.FatalError):
            self._say(f"fatal: {p.error} {p.message or ''}", "bold red")

    def _consumer_protocol(self, p: events.MemberEvent) -> None:
        """A ConsumerMembership's event (consumer/membership.py): generation_id is its member epoch."""
        c, epoch = self.c, p.generation_id
        if isinstance(p, events.ConsumerJoinSent):
            assignor = p.server_assignor or c.t("member.cp.any_assignor")
            key = "member.cp.join" if p.reason == "starting" else "member.cp.rejoin"
            self._say(c.t(key, topics=", ".join(p.subscribed_topic_names) or "-", assignor=assignor,
                          reason=say_reason(p.reason, c)),
                      "" if p.reason == "starting" else "yellow", c.t("why.member.cp_join"))
        elif isinstance(p, events.AssignmentReceived):
            self._say(c.t("member.cp.owns", epoch=epoch, member=short_member(p.member_id, {}),
                          partitions=_pairs(p.assignment) or "-"))
            if p.revoking:
                self._say(c.t("member.cp.revoking", epoch=epoch, partitions=_pairs(p.revoking)), "yellow",
                          c.t("why.member.cp_revoke_first"))
            if p.adding:
                self._say(c.t("member.cp.adding", partitions=_pairs(p.adding)), "green")
        elif isinstance(p, events.AssignmentAcknowledged):
            self._say(c.t("member.cp.acknowledged", epoch=epoch, partitions=_pairs(p.owned) or "-"), "dim")
        elif isinstance(p, events.PartitionsLost):
            self._say(c.t("member.lost", partitions=_pairs(p.partitions), reason=p.reason), "red")
        elif isinstance(p, events.MemberFenced):
            self._say(c.t("member.cp.fenced", error=p.error, epoch=p.fenced_epoch), "red", c.t("why.member.cp_fenced"))
        elif isinstance(p, events.ConsumerLeaveSent):
            why = c.t("why.member.cp_static_leave") if p.leave_epoch == -2 else None
            self._say(c.t("member.cp.leave", epoch=p.leave_epoch, reason=say_reason(p.reason, c)), "yellow", why)
        elif isinstance(p, events.PollTimeout):
            self._say(c.t("member.cp.poll_timeout", ms=p.max_poll_interval_ms), "red", c.t("why.member.poll_timeout"))
        elif isinstance(p, events.GroupError):
            self._say(c.t("member.cp.error", error=p.error, message=p.message or ""), "yellow")
        elif isinstance(p, events.FatalError):
            self._say(f"fatal: {p.error} {p.message or ''}", "bold red")

    def _say(self, line: str, style: str = "", why: str | None = None) -> None:
        self.console.print(Text(self._node + line, style=style))
        if why and why not in self.told:
            self.told.add(why)
            self.console.print(Text(f"  {self.c.t('why.line', why=why)}", style="dim italic"))
