"""A readable timeline of a simulated run: faults as they were injected, rebalances as they
completed, members the coordinator removed, and when the group settled."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.table import Table

from grouplab.rebalances import RebalanceTracker
from protocol import events
from protocol.effects import LogEvent


@dataclass
class Timeline:
    group_id: str
    rows: list[tuple[int, str, str]] = field(default_factory=list)
    rebalances: RebalanceTracker = field(default_factory=RebalanceTracker)

    def __call__(self, node: str, ev: LogEvent) -> None:
        if node == "simulator":
            detail = ", ".join(f"{k}={v}" for k, v in ev.fields.items()
                               if k not in ("group_id", "seed") and v not in (None, [], ""))
            self.rows.append((ev.ts_ms, ev.event.replace("_", " "), detail))
            return
        rebalance = self.rebalances.feed(node, ev)
        payload = ev.payload
        if node != "coordinator" or getattr(payload, "group_id", None) != self.group_id:
            return
        if type(payload) is events.MemberRemoved:
            self.rows.append((ev.ts_ms, "member removed", f"{payload.member_id} ({payload.reason.value})"))
        elif rebalance is not None:
            sizes = sorted(len(parts) for parts in rebalance.assignments.values())
            spread = f"{sizes[0]}-{sizes[-1]} partitions each" if sizes else "no partitions"
            self.rows.append((rebalance.ended_ms, f"generation {rebalance.generation} stable",
                              f"{len(rebalance.members)} members, {spread}, {rebalance.protocol}, "
                              f"took {rebalance.duration_ms or 0} ms; trigger: {rebalance.trigger or ''}"))

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
            style = "yellow" if what.startswith(("fault", "coordinator crashed", "process exited")) else None
            table.add_row(f"{ts / 1000:.3f}", what, detail, style=style)
        return table
