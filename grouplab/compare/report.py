"""What `grouplab compare` prints: a table per change, the two designs side by side, the totals,
and one line of conclusion drawn from the figures (never written in advance); or all of it as
JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Group
from rich.table import Table

from grouplab.compare.script import Change, Figures, Script

COORDINATOR, ZOOKEEPER = "coordinator protocol", "ZooKeeper era"


def _seconds(ms: int | None) -> str:
    return "not settled" if ms is None else f"{ms / 1000:.3f} s"


def _messages(f: Figures) -> str:
    if f.heartbeats is None:
        return f"{f.total} ({f.messages.get('reads', 0)} reads, {f.messages.get('writes', 0)} writes)"
    detail = ", ".join(f"{api} {n}" for api, n in sorted(f.messages.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{f.total}" + (f" ({detail})" if detail else "")


def _rebalances(f: Figures) -> str:
    counts = f.rebalances
    if not counts:
        return "0"
    total = sum(counts.values())
    if len(set(counts.values())) == 1:
        return f"{total}: {next(iter(counts.values()))} each, {len(counts)} consumers"
    return f"{total}: " + ", ".join(f"{c} {n}" for c, n in counts.items())


def _rows(co: Figures, zk: Figures) -> list[tuple[str, str, str]]:
    return [
        ("requests to the coordinator / registry operations", _messages(co), _messages(zk)),
        ("  of which for committed offsets", str(co.offsets), str(zk.offsets)),
        ("  heartbeats (ZooKeeper's pings are not counted)", str(co.heartbeats), "-"),
        ("time to a settled assignment", _seconds(co.settle_ms), _seconds(zk.settle_ms)),
        ("partition-seconds without a consumer", f"{co.idle_ms / 1000:.1f}", f"{zk.idle_ms / 1000:.1f}"),
        ("rebalances per consumer", _rebalances(co), _rebalances(zk)),
        ("failed rebalance attempts (gave up)", "- (the coordinator hands partitions out)",
         f"{zk.failed} ({zk.gave_up})"),
    ]


def _table(title: str, rows: list[tuple[str, str, str]]) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("")
    table.add_column(COORDINATOR)
    table.add_column(ZOOKEEPER)
    for row in rows:
        table.add_row(*row)
    return table


def total(figures: list[Figures]) -> Figures:
    """The script's figures summed (a change that never settled makes the total not settled)."""
    rebalances: dict[str, int] = {}
    messages: dict[str, int] = {}
    for f in figures:
        for c, n in f.rebalances.items():
            rebalances[c] = rebalances.get(c, 0) + n
        for k, n in f.messages.items():
            messages[k] = messages.get(k, 0) + n
    settles = [f.settle_ms for f in figures]

    def add(values: list[int | None]) -> int | None:
        return None if any(v is None for v in values) else sum(v or 0 for v in values)

    return Figures(settle_ms=None if None in settles else sum(s or 0 for s in settles),
                   messages=dict(sorted(messages.items())), offsets=sum(f.offsets for f in figures),
                   heartbeats=add([f.heartbeats for f in figures]), idle_ms=sum(f.idle_ms for f in figures),
                   rebalances=dict(sorted(rebalances.items())), failed=add([f.failed for f in figures]),
                   gave_up=add([f.gave_up for f in figures]))


def conclusion(script: Script, co: list[Figures], zk: list[Figures]) -> str:
    c, z = total(co), total(zk)
    zk_core, co_core = z.total - z.offsets, c.total - c.offsets
    ratio = f": {zk_core / co_core:.1f}× as many" if co_core else ""
    text = (f"The ZooKeeper era made {z.total} registry operations ({zk_core} leaving out committed offsets) where "
            f"the coordinator protocol made {c.total} requests ({c.offsets} for offsets), heartbeats aside{ratio}; "
            f"{z.failed} failed rebalance attempts and {z.gave_up} give-ups; "
            f"{z.idle_ms / 1000:.1f} partition-seconds without a consumer against {c.idle_ms / 1000:.1f}.")
    verdicts: dict[str, list[str]] = {"sooner": [], "later": [], "about as soon": []}
    for change, a, b in zip(script.changes, co, zk):
        verdicts[_verdict(b.settle_ms, a.settle_ms)].append(change.label())
    said = [f"{verdict} after {', '.join(labels)}" for verdict, labels in verdicts.items() if labels]
    return text + " It settled " + "; ".join(said) + "."


def _verdict(a: int | None, b: int | None) -> str:
    """Whether `a` settled sooner than `b`, later, or about as soon (within 10 % or 100 ms);
    never settling is the latest."""
    if a is None or b is None:
        return "about as soon" if a is None and b is None else ("later" if a is None else "sooner")
    if abs(a - b) <= max(100, max(a, b) // 10):
        return "about as soon"
    return "sooner" if a < b else "later"


def render(script: Script, co: list[Figures], zk: list[Figures], heading: str) -> Group:
    tables: list[Any] = []
    for i, (change, a, b) in enumerate(zip(script.changes, co, zk), 1):
        tables.append(_table(f"{i}. {_title(change, heading)}", _rows(a, b)))
    tables.append(_table("all changes, summed", _rows(total(co), total(zk))))
    return Group(*tables)


def _title(change: Change, heading: str) -> str:
    return change.label() + (f" (at {change.at_ms / 1000:g} s)" if heading == "simulator" else "")


def as_json(script: Script, co: list[Figures], zk: list[Figures], mode: str, seed: int | None) -> dict[str, Any]:
    s = script.settings
    return {
        "mode": mode, "seed": seed,
        "settings": {**asdict(s), "grow": list(s.grow)},
        "changes": [{"change": c.label(), "kind": c.kind, "at_ms": c.at_ms if mode == "simulator" else None,
                     "coordinator": asdict(a), "zookeeper": asdict(b)} for c, a, b in zip(script.changes, co, zk)],
        "totals": {"coordinator": asdict(total(co)), "zookeeper": asdict(total(zk))},
        "conclusion": conclusion(script, co, zk),
    }
