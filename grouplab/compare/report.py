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
from grouplab.teach.catalog import Catalog

Results = dict[str, list[Figures]]


def _seconds(ms: int | None, c: Catalog) -> str:
    return c.t("cmp.table.not_settled") if ms is None else c.t("cmp.table.seconds", s=f"{ms / 1000:.3f}")


def _messages(f: Figures, c: Catalog) -> str:
    if f.heartbeats is None:
        return c.t("cmp.table.ops", total=f.total, reads=f.messages.get("reads", 0), writes=f.messages.get("writes", 0))
    detail = ", ".join(f"{_api(api)} {n}" for api, n in sorted(f.messages.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{f.total}" + (f" ({detail})" if detail else "")


def _api(name: str) -> str:
    return "CGHeartbeat" if name == "ConsumerGroupHeartbeat" else name


def _rebalances(f: Figures, c: Catalog) -> str:
    counts = f.rebalances
    if not counts:
        return "0"
    total = sum(counts.values())
    if len(set(counts.values())) == 1:
        return c.t("cmp.table.each", total=total, each=next(iter(counts.values())), consumers=len(counts))
    return f"{total}: " + ", ".join(f"{name} {n}" for name, n in counts.items())


COLUMNS = ("design", "messages", "offsets", "heartbeats", "settled", "idle", "rebalances", "failed")


def design_label(design: str, c: Catalog) -> str:
    """The design as a table row names it (script.py's DESIGNS, in the catalogue's language)."""
    return c.t(f"cmp.table.design.{design}")


def _row(design: str, f: Figures, c: Catalog) -> tuple[str, ...]:
    return (design_label(design, c), _messages(f, c), str(f.offsets), "-" if f.heartbeats is None else str(f.heartbeats),
            _seconds(f.settle_ms, c), f"{f.idle_ms / 1000:.1f}", _rebalances(f, c),
            "-" if f.failed is None else f"{f.failed} ({f.gave_up})")


def _table(title: str, rows: list[tuple[str, ...]], c: Catalog) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for col in COLUMNS:
        table.add_column(c.t(f"cmp.table.col.{col}"), justify="right" if col in ("offsets", "heartbeats", "idle")
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
                   gave_up=add([f.gave_up for f in figures]),
                   metadata_wait_ms=None if all(f.metadata_wait_ms is None for f in figures)
                   else sum(f.metadata_wait_ms or 0 for f in figures),
                   metadata_wait_idle_ms=sum(f.metadata_wait_idle_ms for f in figures))


# Who a design's sentences name, and which family of waits explains it (cmp.why.* say them).
SIDES = {"zk": "zk", "eager": "classic", "cooperative": "classic", "consumer": "kip848"}


def design_name(design: str, c: Catalog) -> str:
    """The design as the verdict names it: "the group coordinator (classic protocol, eager range)"."""
    return c.t(f"cmp.design.{design}")


def _near(values: dict[str, int]) -> list[str]:
    """The designs within 10 % (or 100 ms) of the smallest value, in DESIGNS' order."""
    best = min(values.values())
    return [d for d, v in values.items() if v - best <= max(100, best // 10)]


def _joined(names: list[str], c: Catalog) -> str:
    return c.t("cmp.and").join(names)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def change_label(change: Change, c: Catalog) -> str:
    """Change.label() in the catalogue's language."""
    if change.kind == "add_partitions":
        return c.t("cmp.change.grow", topic=change.topic, total=change.total)
    if len(change.members) == 1:
        return c.t(f"cmp.change.{change.kind}", member=change.members[0])
    return c.t(f"cmp.change.{change.kind}_many", n=len(change.members))


def verdict(script: Script, results: Results, c: Catalog) -> str:
    """The design that settled soonest over the whole script, by name, and the others' times."""
    totals = {d: total(figs).settle_ms for d, figs in results.items()}
    settled = {d: ms for d, ms in totals.items() if ms is not None}
    if not settled:
        return c.t("cmp.verdict.none")
    first = _near(settled)
    others = [c.t("cmp.verdict.other", design=design_name(d, c), seconds=f"{ms / 1000:.1f}")
              for d, ms in settled.items() if d not in first]
    others += [c.t("cmp.verdict.unsettled", design=design_name(d, c)) for d, ms in totals.items() if ms is None]
    line = _cap(c.t("cmp.verdict", designs=_joined([design_name(d, c) for d in first], c),
                    seconds=f"{settled[first[0]] / 1000:.1f}",
                    others=c.t("cmp.sep").join(others) if others else c.t("cmp.verdict.alone")))
    messages = {d: total(figs).total for d, figs in results.items()}
    if len(messages) > 1:
        fewest, most = min(messages, key=lambda d: messages[d]), max(messages, key=lambda d: messages[d])
        line += c.t("cmp.verdict.cheapest", design=_cap(design_name(fewest, c)), ops=messages[fewest],
                    most=messages[most], costliest=design_name(most, c))
    return line


def cause(script: Script, results: Results, i: int, c: Catalog) -> str:
    """Why the designs settled in the order they did after change `i`: what each one waited for."""
    s, change = script.settings, script.changes[i]
    if change.kind == "join" and i == 0:
        return c.t("cmp.why.first_join", n=len(change.members))
    if change.kind in ("join", "leave"):
        return c.t("cmp.why.notify")
    if change.kind == "crash":
        return c.t("cmp.why.crash")
    if s.waits_for_max_age:
        waits = [f.metadata_wait_ms for d, figs in results.items() if SIDES[d] == "classic"
                 if (f := figs[i]).metadata_wait_ms is not None]
        return c.t("cmp.why.grow.max_age", age=s.metadata_max_age_ms,
                   wait=f"{max(waits) / 1000:.1f}" if waits else "?")
    return c.t("cmp.why.grow.on_change")


def firsts(script: Script, results: Results, c: Catalog) -> list[str]:
    """Per change: the design(s) that settled first, and why."""
    out = []
    for i, change in enumerate(script.changes):
        settled = {d: ms for d, figs in results.items() if (ms := figs[i].settle_ms) is not None}
        if not settled:
            out.append(c.t("cmp.first.none", change=change_label(change, c)))
            continue
        best = _near(settled)
        out.append(c.t("cmp.first", change=change_label(change, c), designs=_joined([c.t(f"cmp.short.{d}") for d in best], c),
                       seconds=f"{settled[best[0]] / 1000:.1f}", why=cause(script, results, i, c)))
    return out


def costs(script: Script, results: Results, c: Catalog) -> str | None:
    """What the ZooKeeper era paid for its watches, beside a coordinator design: registry
    operations against requests, the herd (every consumer rebalancing on every change) and its
    claim conflicts and give-ups."""
    if "zk" not in results:
        return None
    other = next((d for d in ("eager", "cooperative", "consumer") if d in results), None)
    if other is None:
        return None
    zk, co = total(results["zk"]), total(results[other])
    heard = [f for f in results["zk"]]
    everyone = all(set(f.rebalances) >= live for f, live in zip(heard, script.live_after))
    return c.t("cmp.costs", ops=zk.total, reads=zk.messages.get("reads", 0), design=design_name(other, c),
               requests=co.total, ratio=f"{zk.total / max(co.total, 1):.1f}",
               herd=c.t("cmp.costs.herd_all") if everyone else c.t("cmp.costs.herd_most"),
               zk_rebalances=sum(zk.rebalances.values()), rebalances=sum(co.rebalances.values()),
               failed=zk.failed or 0, gave_up=zk.gave_up or 0)


def metadata_line(script: Script, results: Results, c: Catalog) -> str | None:
    """What the added partitions waited for: shown with its cause under Kafka's client behaviour,
    or how to see it under the fair default."""
    s = script.settings
    grow = next((i for i, ch in enumerate(script.changes) if ch.kind == "add_partitions"), None)
    classic = [d for d in results if SIDES[d] == "classic"]
    if grow is None or not classic:
        return None
    if not s.waits_for_max_age:
        return c.t("cmp.metadata.on_change", age=s.metadata_max_age_ms)
    d = classic[0]
    f, whole = results[d][grow], total(results[d])
    wait = f.metadata_wait_ms if f.metadata_wait_ms is not None else f.settle_ms
    share = f"{f.metadata_wait_idle_ms / whole.idle_ms:.0%}" if whole.idle_ms else "0%"
    return c.t("cmp.metadata.max_age", age=s.metadata_max_age_ms, design=design_name(d, c),
               wait="?" if wait is None else f"{wait / 1000:.1f}", idle=f"{f.metadata_wait_idle_ms / 1000:.1f}",
               share=share)


def conclusion(script: Script, results: Results, c: Catalog | None = None) -> list[str]:
    """The lines under the tables: each design's totals, the verdict naming the design that settled
    soonest, which settled first after each change and why, what the ZooKeeper era's speed cost,
    and how the added partitions reached each design."""
    c = c or Catalog("en")
    totals = {d: total(figs) for d, figs in results.items()}
    lines = [c.t("cmp.totals", designs=c.t("cmp.sep").join(
        c.t("cmp.totals.zk" if t.heartbeats is None else "cmp.totals.coordinator", design=design_label(d, c),
            idle=f"{t.idle_ms / 1000:.1f}", ops=t.total) for d, t in totals.items()))]
    lines.append(verdict(script, results, c))
    lines += firsts(script, results, c)
    for line in (costs(script, results, c), metadata_line(script, results, c)):
        if line is not None:
            lines.append(line)
    return lines


def _wait_row(script: Script, f: Figures, c: Catalog) -> list[tuple[str, ...]]:
    """Under Kafka's client behaviour, a classic group's wait for its leader's metadata refresh,
    on a line of its own beneath the design's: part of the row above, shown with its cause."""
    s = script.settings
    if not s.waits_for_max_age or f.metadata_wait_ms is None:
        return []
    label = c.t("cmp.wait.row", age=s.metadata_max_age_ms)
    return [(label, "", "", "", _seconds(f.metadata_wait_ms, c), f"{f.metadata_wait_idle_ms / 1000:.1f}", "", "")]


def _rows(script: Script, results: Results, pick: Any, c: Catalog) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for d, figs in results.items():
        f = pick(figs)
        rows.append(_row(d, f, c))
        rows += _wait_row(script, f, c)
    return rows


def render(script: Script, results: Results, heading: str, c: Catalog | None = None) -> Group:
    c = c or Catalog()
    tables: list[Any] = []
    for i, change in enumerate(script.changes):
        tables.append(_table(f"{i + 1}. {_title(change, heading, c)}", _rows(script, results, lambda figs: figs[i], c), c))
    tables.append(_table(c.t("cmp.table.summed"), _rows(script, results, total, c), c))
    return Group(*tables)


def _title(change: Change, heading: str, c: Catalog) -> str:
    label = change_label(change, c)
    return c.t("cmp.table.at", change=label, s=f"{change.at_ms / 1000:g}") if heading == "simulator" else label


def as_json(script: Script, results: Results, mode: str, seed: int | None, c: Catalog | None = None) -> dict[str, Any]:
    """Figures and kinds are data (English keys, as the script names them); the conclusion is text,
    in the catalogue's language."""
    s = script.settings
    return {
        "mode": mode, "seed": seed, "designs": {d: DESIGNS[d] for d in results},
        "settings": {**asdict(s), "grow": list(s.grow)},
        "changes": [{"change": c.label(), "kind": c.kind, "at_ms": c.at_ms if mode == "simulator" else None,
                     "figures": {d: asdict(figs[i]) for d, figs in results.items()}}
                    for i, c in enumerate(script.changes)],
        "totals": {d: asdict(total(figs)) for d, figs in results.items()},
        "conclusion": conclusion(script, results, c),
    }
