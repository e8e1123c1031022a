"""What `grouplab compare` prints: a table per change with a row per design, the totals, and a
few lines of conclusion drawn from the figures (never written in advance); or all of it as JSON.

`results` maps each design played (grouplab/compare/script.py DESIGNS, in that order) to its
figures, one per change of the script."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Group
from rich.table import Table

from grouplab.compare.script import DESIGNS, Change, Figures, Script

Results = dict[str, list[Figures]]


def _seconds(ms: int | None) -> str:
    return "not settled" if ms is None else f"{ms / 1000:.3f} s"


def _messages(f: Figures) -> str:
    if f.heartbeats is None:
        return f"{f.total} ({f.messages.get('reads', 0)} reads, {f.messages.get('writes', 0)} writes)"
    detail = ", ".join(f"{_api(api)} {n}" for api, n in sorted(f.messages.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{f.total}" + (f" ({detail})" if detail else "")


def _api(name: str) -> str:
    return "CGHeartbeat" if name == "ConsumerGroupHeartbeat" else name


def _rebalances(f: Figures) -> str:
    counts = f.rebalances
    if not counts:
        return "0"
    total = sum(counts.values())
    if len(set(counts.values())) == 1:
        return f"{total}: {next(iter(counts.values()))} each, {len(counts)} consumers"
    return f"{total}: " + ", ".join(f"{c} {n}" for c, n in counts.items())


COLUMNS = ("design", "requests / registry operations", "for offsets", "heartbeats", "settled after",
           "partition-s without a consumer", "rebalances per consumer", "failed (gave up)")


def _row(design: str, f: Figures) -> tuple[str, ...]:
    return (DESIGNS[design], _messages(f), str(f.offsets), "-" if f.heartbeats is None else str(f.heartbeats),
            _seconds(f.settle_ms), f"{f.idle_ms / 1000:.1f}", _rebalances(f),
            "-" if f.failed is None else f"{f.failed} ({f.gave_up})")


def _table(title: str, rows: list[tuple[str, ...]]) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for col in COLUMNS:
        table.add_column(col, justify="right" if col in ("for offsets", "heartbeats", "partition-s without a consumer")
                         else "left")
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


def conclusion(script: Script, results: Results) -> list[str]:
    """The lines under the tables: each design's totals, which design settled first after each
    change, and what the added partitions cost a classic group (its leader's metadata refresh)."""
    totals = {d: total(figs) for d, figs in results.items()}
    lines = ["Over the whole script: " + "; ".join(
        f"{DESIGNS[d]} {t.idle_ms / 1000:.1f} partition-s without a consumer, {t.total} "
        + ("registry operations" if t.heartbeats is None else "requests") for d, t in totals.items()) + "."]
    firsts = []
    for i, change in enumerate(script.changes):
        settled: dict[str, int] = {d: ms for d, figs in results.items() if (ms := figs[i].settle_ms) is not None}
        if not settled:
            firsts.append(f"{change.label()}: none settled")
            continue
        best = min(settled.values())
        near = [DESIGNS[d] for d, ms in settled.items() if ms - best <= max(100, best // 10)]
        firsts.append(f"{change.label()}: {' and '.join(near)} ({best / 1000:.1f} s)")
    lines.append("Settled first after each change — " + "; ".join(firsts) + ".")
    grow = next((i for i, c in enumerate(script.changes) if c.kind == "add_partitions"), None)
    classic = [d for d in ("eager", "cooperative") if d in results]
    if grow is not None and classic:
        d = classic[0]
        f, whole = results[d][grow], totals[d]
        age = script.settings.metadata_max_age_ms
        share = f" — {f.idle_ms / whole.idle_ms:.0%} of its whole script's" if whole.idle_ms else ""
        lines.append(
            f"Added partitions: a classic group learns of them only when its leader's metadata is refreshed "
            f"(metadata.max.age.ms = {age / 1000:g} s), so they waited {_seconds(f.settle_ms)} and cost "
            f"{f.idle_ms / 1000:.1f} partition-s{share}; the ZooKeeper-era consumers are told by a watch, and "
            f"KIP-848's coordinator notices at the members' next heartbeat. Lower --metadata-max-age-ms to see "
            f"the rest of the script without that wait.")
    return lines


def render(script: Script, results: Results, heading: str) -> Group:
    tables: list[Any] = []
    for i, change in enumerate(script.changes):
        tables.append(_table(f"{i + 1}. {_title(change, heading)}", [_row(d, figs[i]) for d, figs in results.items()]))
    tables.append(_table("all changes, summed", [_row(d, total(figs)) for d, figs in results.items()]))
    return Group(*tables)


def _title(change: Change, heading: str) -> str:
    return change.label() + (f" (at {change.at_ms / 1000:g} s)" if heading == "simulator" else "")


def as_json(script: Script, results: Results, mode: str, seed: int | None) -> dict[str, Any]:
    s = script.settings
    return {
        "mode": mode, "seed": seed, "designs": {d: DESIGNS[d] for d in results},
        "settings": {**asdict(s), "grow": list(s.grow)},
        "changes": [{"change": c.label(), "kind": c.kind, "at_ms": c.at_ms if mode == "simulator" else None,
                     "figures": {d: asdict(figs[i]) for d, figs in results.items()}}
                    for i, c in enumerate(script.changes)],
        "totals": {d: asdict(total(figs)) for d, figs in results.items()},
        "conclusion": conclusion(script, results),
    }
