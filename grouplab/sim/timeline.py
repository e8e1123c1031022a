"""A readable timeline of a simulated run: faults as they were injected, rebalances as they
completed, members the coordinator removed, what each stop cost (grouplab/costs.py: its
partitions assigned but not consumed until the coordinator removed it or it resumed), and when
the group settled."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from rich.table import Table

from grouplab.cost_sentences import describe_partition_time, describe_stall
from grouplab.costs import CostTracker, StallReport
from grouplab.epochs import Convergence, EpochTracker
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent


@dataclass
class Timeline:
    group_id: str
    rows: list[tuple[int, str, str]] = field(default_factory=list)
    costs: CostTracker = field(default_factory=CostTracker)
    session_timeout_ms: int | None = None  # the members' session.timeout.ms, when they all share one
    # (a consumer-protocol group's: the broker's group.consumer.session.timeout.ms)
    epochs: EpochTracker = field(default_factory=EpochTracker)  # a consumer-protocol group's epochs
    reports: list[StallReport] = field(default_factory=list)

    def __call__(self, node: str, ev: LogEvent) -> None:
        rebalance = self.costs.feed(node, ev)
        if node == "simulator":
            detail = ", ".join(f"{k}={v}" for k, v in ev.fields.items()
                               if k not in ("group_id", "seed") and v not in (None, [], ""))
            self.rows.append((ev.ts_ms, ev.event.replace("_", " "), detail))
            self._costs()
            return
        payload = ev.payload
        if node != "coordinator" or getattr(payload, "group_id", None) != self.group_id:
            return
        convergence = self.epochs.feed(node, ev)
        if type(payload) is events.MemberRemoved or type(payload) is events.ConsumerMemberRemoved:
            self.rows.append((ev.ts_ms, "member removed", f"{payload.member_id} ({payload.reason.value})"))
        elif convergence is not None:
            self.rows.append((convergence.ended_ms, f"epoch {convergence.epoch} stable", _convergence(convergence)))
        elif rebalance is not None:
            sizes = sorted(len(parts) for parts in rebalance.assignments.values())
            spread = f"{sizes[0]}-{sizes[-1]} partitions each" if sizes else "no partitions"
            self.rows.append((rebalance.ended_ms, f"generation {rebalance.generation} stable",
                              f"{len(rebalance.members)} members, {spread}, {rebalance.protocol}, "
                              f"took {rebalance.duration_ms or 0} ms; trigger: {rebalance.trigger or ''}"))
        self._costs()

    def _costs(self) -> None:
        """A row for each stall whose cost is known: at the rebalance its removal started, or when
        it ended otherwise (a hang's end comes to light at the next event: the row goes in its place)."""
        for report in self.costs.take_reports():
            if report.stall.group_id != self.group_id:
                continue
            self.reports.append(report)
            row = (report.ts_ms, "stop cost",
                   describe_stall(report, session_timeout_ms=self.session_timeout_ms))
            bisect.insort(self.rows, row, key=lambda r: r[0])

    def finish(self, end_ms: int) -> str:
        """The run ended at `end_ms`: the stalls still open are costed to there. Returns the
        run's partition time as a line for the summary."""
        self.costs.finish(end_ms)
        self._costs()
        return describe_partition_time(self.costs.totals(group_id=self.group_id),
                                       (s for s in self.costs.stalls if s.group_id == self.group_id))

    def render(self, limit: int = 60, title: str = "timeline") -> Table:
        table = Table(title=title, title_justify="left", header_style="bold")
        table.add_column("t (s)", justify="right")
        table.add_column("what")
        table.add_column("detail")
        rows = self.rows
        if limit and len(rows) > limit:
            head = rows[: (limit + 1) // 2]  # limit 1 keeps the first row, not none
            tail = rows[len(rows) - limit // 2:]
            rows = head + [(head[-1][0], "…", f"{len(self.rows) - len(head) - len(tail)} more rows")] + tail
        for ts, what, detail in rows:
            style = "yellow" if what.startswith(("fault", "coordinator crashed", "process exited", "stop cost")) else None
            table.add_row(f"{ts / 1000:.3f}", what, detail, style=style)
        return table


def _convergence(c: Convergence) -> str:
    """`3 members, 4-4 partitions each, uniform, 2 partitions moved, took 1,020 ms from the first
    epoch move; causes: member_joined x2`."""
    sizes = sorted(len(parts) for parts in c.assignment.values())
    spread = f"{sizes[0]}-{sizes[-1]} partitions each" if sizes else "no partitions"
    causes: dict[str, int] = {}
    for cause in c.causes:
        causes[cause] = causes.get(cause, 0) + 1
    told = ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in causes.items())
    return (f"{len(c.assignment)} members, {spread}, {c.assignor or '?'}, {len(c.moved)} partitions moved, "
            f"took {c.duration_ms:,} ms from the first epoch move; causes: {told}")
