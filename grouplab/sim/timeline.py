"""A readable timeline of a simulated run: faults as they were injected, rebalances as they
completed, members the coordinator removed, what each stop cost (grouplab/costs.py: its
partitions assigned but not consumed until the coordinator removed it or it resumed), and when
the group settled. Its words come from the catalogue of `lang` (`sim.tl.*` keys); the simulator's
event names and their fields stay as the event log spells them where no text is given."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sized
from dataclasses import dataclass, field

from rich.table import Table

from grouplab.cost_sentences import describe_partition_time, describe_stall
from grouplab.costs import CostTracker, StallReport
from grouplab.epochs import Convergence, EpochTracker
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.teach.catalog import Catalog
from grouplab.teach.reasons import say_text

# The rows drawn in yellow: a fault and what it did, and a stop's cost (catalogue keys).
WARN_KEYS = ("sim.tl.event.fault_injected", "sim.tl.event.faults_over", "sim.tl.event.coordinator_crashed",
             "sim.tl.event.process_exited", "sim.tl.stop_cost")


@dataclass
class Timeline:
    group_id: str
    rows: list[tuple[int, str, str]] = field(default_factory=list)
    costs: CostTracker = field(default_factory=CostTracker)
    session_timeout_ms: int | None = None  # the members' session.timeout.ms, when they all share one
    # (a consumer-protocol group's: the broker's group.consumer.session.timeout.ms)
    epochs: EpochTracker = field(default_factory=EpochTracker)  # a consumer-protocol group's epochs
    reports: list[StallReport] = field(default_factory=list)
    lang: str = "en"  # of the rows' words and the cost sentences

    def __post_init__(self) -> None:
        self.c = Catalog(self.lang)

    def __call__(self, node: str, ev: LogEvent) -> None:
        rebalance = self.costs.feed(node, ev)
        if node == "simulator":
            detail = self.c.t("sim.tl.field_sep").join(f"{k}={v}" for k, v in ev.fields.items()
                                                        if k not in ("group_id", "seed") and v not in (None, [], ""))
            key = f"sim.tl.event.{ev.event}"
            self.rows.append((ev.ts_ms, self.c.t(key) if self.c.has(key) else ev.event.replace("_", " "), detail))
            self._costs()
            return
        payload = ev.payload
        if node != "coordinator" or getattr(payload, "group_id", None) != self.group_id:
            return
        convergence = self.epochs.feed(node, ev)
        c = self.c
        if type(payload) is events.MemberRemoved or type(payload) is events.ConsumerMemberRemoved:
            self.rows.append((ev.ts_ms, c.t("sim.tl.member_removed"), f"{payload.member_id} ({payload.reason.value})"))
        elif convergence is not None:
            self.rows.append((convergence.ended_ms, c.t("sim.tl.epoch_stable", epoch=convergence.epoch),
                              _convergence(convergence, c)))
        elif rebalance is not None:
            self.rows.append((rebalance.ended_ms, c.t("sim.tl.generation_stable", generation=rebalance.generation),
                              c.t("sim.tl.generation_detail", members=len(rebalance.members),
                                  spread=_spread(rebalance.assignments.values(), c), protocol=rebalance.protocol,
                                  ms=rebalance.duration_ms or 0,
                                  trigger=say_text(rebalance.trigger, c) if rebalance.trigger else "")))
        self._costs()

    def _costs(self) -> None:
        """A row for each stall whose cost is known: at the rebalance its removal started, or when
        it ended otherwise (a hang's end comes to light at the next event: the row goes in its place)."""
        for report in self.costs.take_reports():
            if report.stall.group_id != self.group_id:
                continue
            self.reports.append(report)
            row = (report.ts_ms, self.c.t("sim.tl.stop_cost"),
                   describe_stall(report, session_timeout_ms=self.session_timeout_ms, lang=self.lang))
            bisect.insort(self.rows, row, key=lambda r: r[0])

    def finish(self, end_ms: int) -> str:
        """The run ended at `end_ms`: the stalls still open are costed to there. Returns the
        run's partition time as a line for the summary."""
        self.costs.finish(end_ms)
        self._costs()
        return describe_partition_time(self.costs.totals(group_id=self.group_id),
                                       (s for s in self.costs.stalls if s.group_id == self.group_id), self.lang)

    def render(self, limit: int = 60, title: str = "timeline") -> Table:
        c = self.c
        table = Table(title=title, title_justify="left", header_style="bold")
        table.add_column(c.t("sim.tl.col.t"), justify="right")
        table.add_column(c.t("sim.tl.col.what"))
        table.add_column(c.t("sim.tl.col.detail"))
        rows = self.rows
        if limit and len(rows) > limit:
            head = rows[: (limit + 1) // 2]  # limit 1 keeps the first row, not none
            tail = rows[len(rows) - limit // 2:]
            more = c.t("sim.tl.more_rows", count=len(self.rows) - len(head) - len(tail))
            rows = head + [(head[-1][0], "…", more)] + tail
        warn = tuple(c.t(key) for key in WARN_KEYS)
        for ts, what, detail in rows:
            style = "yellow" if what.startswith(warn) else None
            table.add_row(f"{ts / 1000:.3f}", what, detail, style=style)
        return table


def _spread(assignments: Iterable[Sized], c: Catalog) -> str:
    """`2-4 partitions each`: the fewest and the most partitions a member has."""
    sizes = sorted(len(parts) for parts in assignments)
    return c.t("sim.tl.spread", low=sizes[0], high=sizes[-1]) if sizes else c.t("sim.tl.no_partitions")


def _convergence(conv: Convergence, c: Catalog) -> str:
    """`3 members, 4-4 partitions each, uniform, 2 partitions moved, took 1,020 ms from the first
    epoch move; causes: member_joined x2`."""
    causes: dict[str, int] = {}
    for cause in conv.causes:
        causes[cause] = causes.get(cause, 0) + 1
    told = ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in causes.items())
    return c.t("sim.tl.epoch_detail", members=len(conv.assignment), spread=_spread(conv.assignment.values(), c),
               assignor=conv.assignor or "?", moved=len(conv.moved), ms=f"{conv.duration_ms:,}", causes=told)
