"""Terminal output with rich: rebalance tables for `grouplab run`, group descriptions, summaries."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from grouplab.teach.catalog import Catalog
from grouplab.teach.reasons import say_text
from grouplab.cost_sentences import describe_partition_time, describe_stall
from grouplab.costs import CostTracker
from grouplab.rebalances import Rebalance
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.types import TopicPartition, format_partitions


def short_member(member_id: str, clients: dict[str, str] | None = None) -> str:
    """`consumer-1-0f3a`: the client id and the first characters of the UUID part (or of an id the
    client made itself); a sequential id (the simulator's `m-4-000012`) keeps its number, so a
    client's two member ids stay apart."""
    client = (clients or {}).get(member_id)
    if client and member_id.startswith(client + "-"):
        suffix = member_id[len(client) + 1:]
        return f"{client}-{int(suffix)}" if suffix.isdigit() else f"{client}-{suffix[:4]}"
    if client:  # an id the client made itself (a KIP-848 consumer's UUID, KIP-1082)
        return f"{client}-{member_id[:4]}"
    return member_id if len(member_id) <= 24 else member_id[:24] + "…"


def assignment_table(assignments: dict[str, list[TopicPartition]], leader: str | None = None,
                     clients: dict[str, str] | None = None, moved: dict[str, int] | None = None,
                     title: str | None = None, unit: str = "member", max_rows: int | None = None,
                     c: Catalog | None = None) -> Table:
    """One row per member; with `max_rows`, at most that many (the leader among them) and a row
    counting the rest, so that a group of thousands stays one screen."""
    said = (lambda key, default: c.t(key) if c is not None else default)  # noqa: E731 - the headers' words
    table = Table(title=title, title_justify="left", show_edge=True, header_style="bold")
    table.add_column(said("table.col.member", unit) if unit == "member" else unit)
    table.add_column(said("table.col.role", "role"))
    table.add_column("#", justify="right")
    table.add_column(said("table.col.partitions", "partitions"))
    if moved is not None:
        table.add_column(said("table.col.moved_in", "moved in"), justify="right")
    members = sorted(assignments, key=lambda m: (clients or {}).get(m, m))
    rest: list[str] = []
    if max_rows is not None and len(members) > max_rows:
        # The leader stays in view; the rows past the limit become one line of counts.
        shown = members[:max_rows - 1] + ([leader] if leader in members[max_rows - 1:] else members[max_rows - 1:max_rows])
        kept = set(shown)
        rest = [m for m in members if m not in kept]
        members = [m for m in members if m in kept]
    for member in members:
        parts = assignments[member]
        row = [short_member(member, clients), said("table.leader_role", "leader") if member == leader else "",
               str(len(parts)), format_partitions(parts)]
        if moved is not None:
            row.append(str(moved.get(member, 0)))
        table.add_row(*row)
    if rest:
        counts = [len(assignments[m]) for m in rest]
        more, total = f"{len(rest):,}", f"{sum(counts):,}"
        row = [c.t("table.more", count=more) if c is not None else f"… {more} more", "",
               f"{min(counts)}–{max(counts)}" if min(counts) != max(counts) else str(min(counts)),
               c.t("table.more_partitions", count=total) if c is not None else f"{total} partitions"]
        if moved is not None:
            row.append(f"{sum(moved.get(m, 0) for m in rest):,}")
        table.add_row(*row, style="dim")
    return table


TABLE_ROWS = 20  # members a rebalance's table lists; a larger group gets a row counting the rest


@dataclass(frozen=True)
class RebalanceRecord:
    """A completed rebalance as `grouplab run` shows it."""

    rebalance: Rebalance
    trigger: str  # with the member ids known then shortened

    @property
    def generation_id(self) -> int:
        return self.rebalance.generation

    @property
    def protocol(self) -> str:
        return self.rebalance.protocol or ""

    @property
    def leader(self) -> str:
        return self.rebalance.leader or ""

    @property
    def assignments(self) -> dict[str, list[TopicPartition]]:
        """Every member, with [] for one whose assignment is not a partition list."""
        return {m: self.rebalance.assignments.get(m, []) for m in self.rebalance.members}

    @property
    def duration_ms(self) -> int:
        return self.rebalance.duration_ms or 0

    @property
    def moved(self) -> int:
        return len(self.rebalance.moved)

    @property
    def eager_revoked(self) -> int:
        """What an eager protocol revokes: everything owned before."""
        return len(self.rebalance.previous_owners)

    @property
    def revoked(self) -> int:
        """Partitions members gave up for this rebalance: eager members revoke everything before
        rejoining, cooperative ones only what moves away."""
        if self.protocol == "cooperative-sticky":
            return self.eager_revoked - self.rebalance.kept
        return self.eager_revoked

    @property
    def withheld(self) -> int:
        """Cooperative: taken from their owner, handed out in the follow-up rebalance."""
        return len(self.rebalance.unowned)


@dataclass
class RebalanceView:
    """Listens to the events and prints each completed rebalance as it happens (of one group, or
    with group_id None, the coordinator's own view, of every group, named), with what a member that
    stopped consuming cost before it (grouplab/costs.py): its partitions assigned but not consumed
    while the coordinator waited for its session to time out."""

    console: Console
    group_id: str | None
    session_timeout_ms: int | None = None  # the consumers' session.timeout.ms, to name it and count down
    records: list[RebalanceRecord] = field(default_factory=list)
    costs: CostTracker = field(default_factory=CostTracker)
    origin_ms: int | None = None  # the first event's ts_ms: time zero of "crashed at 4.2 s"
    initial_delay_ms: int | None = None  # group.initial.rebalance.delay.ms, from coordinator_started
    lang: str = "en"  # of the rebalance lines and tables and the cost sentences

    def __post_init__(self) -> None:
        self.c = Catalog(self.lang)

    def __call__(self, node: str, ev: LogEvent) -> None:
        if self.origin_ms is None:
            self.origin_ms = ev.ts_ms
        if isinstance(ev.payload, events.CoordinatorStarted):
            delay = ev.payload.config.get("group.initial.rebalance.delay.ms")
            self.initial_delay_ms = delay if isinstance(delay, int) else None
        rebalance = self.costs.feed(node, ev)
        if rebalance is not None and self.group_id in (None, rebalance.group_id):
            self._show(rebalance)
        self._costs()

    def _costs(self) -> None:
        """A line for each stop whose cost is known (grouplab/costs.py's sentence)."""
        for report in self.costs.take_reports():
            if self.group_id in (None, report.stall.group_id):
                sentence = describe_stall(report, self.origin_ms or 0, self.session_timeout_ms, self.lang)
                self.console.print(f"[yellow]{escape(self.c.t('cost.line', sentence=sentence))}[/]")

    def _show(self, rebalance: Rebalance) -> None:
        clients = self.costs.rebalances.group(rebalance.group_id).clients  # every member id seen so far
        trigger = say_text(rebalance.trigger, self.c) if rebalance.trigger else "?"
        for member_id in clients:
            trigger = trigger.replace(member_id, short_member(member_id, clients))
        record = RebalanceRecord(rebalance, trigger)
        self.records.append(record)
        moved_to = Counter(move.to_member for move in rebalance.moved)
        c = self.c
        self.console.print(
            ("" if self.group_id is not None else f"\n[bold]{escape(rebalance.group_id)}[/]")
            + f"\n[bold cyan]{c.t('table.generation', generation=record.generation_id)}[/] · "
            f"{c.t('table.protocol')} [bold]{record.protocol}[/] · "
            f"{c.t('table.leader', leader=short_member(record.leader, rebalance.clients))} · "
            f"{c.t('table.members', count=len(rebalance.members))} · {c.t('table.took', ms=record.duration_ms)} · "
            f"{c.t('table.moved', count=record.moved)} · "
            f"{c.t('table.revoked', count=record.revoked, eager=record.eager_revoked)}"
            + (f" · [yellow]{c.t('table.withheld', count=record.withheld)}[/]" if record.withheld else "")
            + f"\n[dim]{c.t('table.trigger', trigger=record.trigger)}[/]"
            + (f"\n[dim]{c.t('table.initial_delay', delay_ms=self.initial_delay_ms)}[/]"
               if self._initial(rebalance) else ""))
        self._costs()  # the stops this rebalance's removals ended: their cost came before it began
        self.console.print(assignment_table(record.assignments, record.leader, rebalance.clients, moved_to,
                                            max_rows=TABLE_ROWS, c=self.c))

    def _initial(self, rebalance: Rebalance) -> bool:
        """Did this rebalance form a group from empty, so that the initial delay was part of it?"""
        return bool(self.initial_delay_ms) and not rebalance.previous_owners and rebalance.cause in (
            "member_joined", "static_member_joined")

    def countdown(self, now_ms: int) -> str | None:
        """`waiting for session timeout: consumer-1 removed in ~7 s`, while a member that stopped
        is still in the group with its partitions (None otherwise). An upper bound: the coordinator
        counts from the member's last heartbeat, which came before it stopped."""
        waiting = [s for s in self.costs.waiting(now_ms) if self.group_id in (None, s.group_id)]
        if not waiting or self.session_timeout_ms is None:
            return None
        parts = [self.c.t("table.countdown.member", client=s.client_id,
                          s=max(0, math.ceil((s.since_ms + self.session_timeout_ms - now_ms) / 1000)))
                 for s in waiting]
        return self.c.t("table.countdown", members=", ".join(parts))

    def finish(self, end_ms: int) -> str:
        """The run is over: the stops still open are costed to `end_ms`; returns the partitions'
        time, split, as a line."""
        self.costs.finish(end_ms)
        self._costs()
        return describe_partition_time(self.costs.totals(group_id=self.group_id),
                                       (s for s in self.costs.stalls if s.group_id == self.group_id), self.lang)


def summary_table(records: list[RebalanceRecord], c: Catalog | None = None) -> Table:
    c = c or Catalog()
    table = Table(title=c.t("summary.title"), title_justify="left", header_style="bold")
    # The revocation columns matter when a cooperative protocol ran; an eager run revokes everything.
    cooperative = any(r.protocol == "cooperative-sticky" for r in records)
    extra = ("revoked", "eager_revokes", "withheld") if cooperative else ()
    numeric = ("generation", "members", "duration_ms", "moved", *extra)
    for col in ("generation", "members", "protocol", "duration_ms", "moved", *extra, "trigger"):
        table.add_column(c.t(f"summary.col.{col}"), justify="right" if col in numeric else "left")
    for r in records:
        cells = [str(r.revoked), str(r.eager_revoked), str(r.withheld)] if cooperative else []
        table.add_row(str(r.generation_id), str(len(r.assignments)), r.protocol, str(r.duration_ms), str(r.moved),
                      *cells, r.trigger)
    return table


def _coordinator(group: Any, c: Catalog) -> str:
    """` · coordinator HOST:PORT (ID)` for a group `grouplab describe` found its coordinator of
    (kafka-consumer-groups' COORDINATOR (ID) column), else nothing."""
    found = getattr(group, "coordinator", None)
    return f" · {c.t('describe.coordinator', coordinator=found)}" if found is not None else ""


def describe_table(group: Any, decode_assignment: Any, c: Catalog | None = None) -> Table:
    """kafka-consumer-groups --describe, the members view, plus generation and leader."""
    c = c or Catalog()
    clients = {m.member_id: m.client_id for m in group.members}
    title = (c.t("describe.title.classic", group=f"[bold]{group.group_id}[/]", state=f"[bold]{group.group_state}[/]",
                 generation=group.generation_id, protocol=group.protocol_data or "-", type=group.protocol_type or "-",
                 leader=short_member(group.leader, clients) if group.leader else "-", count=len(group.members))
             + _coordinator(group, c))
    table = Table(title=title, title_justify="left", header_style="bold")
    for col in ("member_id", "instance_id", "client_id", "host", "count", "assignment"):
        table.add_column(c.t(f"describe.col.{col}"))
    for m in group.members:
        parts = decode_assignment(m.member_assignment).partitions if m.member_assignment else []
        table.add_row(m.member_id, m.group_instance_id or "-", m.client_id, m.client_host, str(len(parts)),
                      format_partitions(parts) if m.member_assignment else "-")
    return table


def consumer_group_table(group: Any, c: Catalog | None = None) -> Table:
    """A consumer-protocol group (KIP-848, ConsumerGroupDescribe): its epochs and assignor, and each
    member's epoch and state, what it owns and, where it differs, the target it is moving to."""
    c = c or Catalog()
    title = (c.t("describe.title.consumer", group=f"[bold]{group.group_id}[/]", state=f"[bold]{group.group_state}[/]",
                 epoch=group.group_epoch, target=group.assignment_epoch, assignor=group.assignor_name or "-",
                 count=len(group.members)) + _coordinator(group, c))
    table = Table(title=title, title_justify="left", header_style="bold")
    moving = any(m.assignment != m.target_assignment for m in group.members)
    for col in ("member_id", "instance_id", "client_id", "host", "epoch", "member_state", "count", "assignment",
                *(("target",) if moving else ())):
        table.add_column(c.t(f"describe.col.{col}"), justify="right" if col in ("epoch", "count") else "left")

    def text(assignment: dict[str, list[int]]) -> str:
        parts = [TopicPartition(t, p) for t in sorted(assignment) for p in assignment[t]]
        return format_partitions(parts) if parts else "-"

    for m in group.members:
        count = sum(len(ps) for ps in m.assignment.values())
        target = (text(m.target_assignment) if m.target_assignment != m.assignment else "=",) if moving else ()
        table.add_row(m.member_id, m.instance_id or "-", m.client_id, m.client_host, str(m.member_epoch), m.member_state,
                      str(count), text(m.assignment), *target)
    return table


def offsets_table(group: Any, rows: list[dict[str, Any]], c: Catalog | None = None) -> Table:
    """kafka-consumer-groups --describe, the offsets view: per partition the committed offset, the
    log end offset and the lag between them ("-" where unknown), and the member that owns it."""
    c = c or Catalog()
    clients = {m.member_id: m.client_id for m in group.members}
    known = [r["lag"] for r in rows if r["lag"] is not None]
    total = c.t("describe.offsets.lag", lag=sum(known)) if known else c.t("describe.offsets.lag_unknown")
    table = Table(title=c.t("describe.offsets.title", group=f"[bold]{group.group_id}[/]", total=total),
                  title_justify="left", header_style="bold")
    for col in ("topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host", "client_id"):
        table.add_column(c.t(f"describe.offsets.col.{col}"),
                         justify="right" if col in ("partition", "current_offset", "log_end_offset", "lag") else "left")

    def cell(value: Any) -> str:
        return "-" if value is None else str(value)

    for r in rows:
        member = short_member(r["member_id"], clients) if r["member_id"] else None
        table.add_row(r["topic"], str(r["partition"]), cell(r["committed_offset"]), cell(r["log_end_offset"]),
                      cell(r["lag"]), cell(member), cell(r["host"]), cell(r["client_id"]))
    return table


CONFIG_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                  4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}


def configs_table(title: str, configs: list[Any], c: Catalog | None = None) -> Table:
    """kafka-configs --describe --all: each config, its value and where the value comes from."""
    c = c or Catalog()
    table = Table(title=title, title_justify="left", header_style="bold")
    for col in ("config", "value", "source"):
        table.add_column(c.t(f"configs.col.{col}"))
    for e in configs:
        table.add_row(escape(e.name), escape("-" if e.value is None else e.value),
                      CONFIG_SOURCES.get(e.config_source, str(e.config_source)))
    return table


def print_departed(console: Console, departed: Mapping[str, list[TopicPartition]], c: Catalog | None = None) -> None:
    """`grouplab assign`'s line for members given --owned but no --member: they left the group."""
    c = c or Catalog()
    if departed:
        console.print(c.t("assign.departed", members="; ".join(
            c.t("assign.departed.member", member=m, partitions=format_partitions(sorted(ps)))
            for m, ps in sorted(departed.items()))))
