"""A readable timeline of a simulated run: faults as they were injected, rebalances as they
completed, members the coordinator removed, and when the group settled."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.table import Table

from protocol.effects import LogEvent
from protocol.events import GroupEvent, GroupStable, MemberRemoved, RebalanceStarted, SimulatorEvent


@dataclass
class Timeline:
    group_id: str
    rows: list[tuple[int, str, str]] = field(default_factory=list)
    _rebalance_from: int | None = None
    _trigger: str = ""
    _clients: dict[str, str] = field(default_factory=dict)

    def __call__(self, node: str, ev: LogEvent) -> None:
        e = ev.payload
        if isinstance(e, SimulatorEvent):
            detail = ", ".join(f"{k}={v}" for k, v in ev.fields.items() if k not in ("group_id", "seed") and v not in (None, [], ""))
            self.rows.append((ev.ts_ms, ev.event.replace("_", " "), detail))
        elif isinstance(e, GroupEvent) and e.group_id == self.group_id:
            if isinstance(e, RebalanceStarted) and self._rebalance_from is None:
                self._rebalance_from, self._trigger = ev.ts_ms, e.trigger
            elif isinstance(e, MemberRemoved):
                self.rows.append((ev.ts_ms, "member removed", f"{e.member_id} ({e.reason.value})"))
            elif isinstance(e, GroupStable):
                took = ev.ts_ms - self._rebalance_from if self._rebalance_from is not None else 0
                sizes = sorted(len(p) for p in e.assignments.values() if isinstance(p, list))
                spread = f"{sizes[0]}-{sizes[-1]} partitions each" if sizes else "no partitions"
                self.rows.append((ev.ts_ms, f"generation {e.generation_id} stable",
                                  f"{len(e.assignments)} members, {spread}, {e.protocol_name}, "
                                  f"took {took} ms; trigger: {self._trigger}"))
                self._rebalance_from = None

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
