"""`grouplab compare --scale 10,50,100`: the same script at several group sizes, one row per size
and design, its figures summed over the script (docs/legacy.md §7). What grows with the group is
the point: the ZooKeeper era's registry operations grow with the square of its consumers (each
one reads every registration on every change: the herd), a coordinator's requests with their
number; its claim conflicts and give-ups (rebalance.max.retries) are counted beside them.

Simulated only (a hundred consumers per design over sockets would measure the machine), on one
seed: the same table every time. The script at each size is the default one with that many
consumers (the partitions stay as given, so a large group has idle members, as a real one would).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from rich.table import Table

from grouplab.compare.report import design_label, total
from grouplab.compare.script import Figures, Settings, script, sim_names
from grouplab.compare.simulate import simulate
from grouplab.teach.catalog import Catalog

Scaled = dict[int, dict[str, Figures]]  # consumers -> design -> the script's figures summed


def parse_sizes(text: str) -> list[int]:
    """`--scale 10,50,100`: group sizes of at least 3 (the script needs one to leave, one to crash),
    each once, in increasing order."""
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--scale expects consumer counts such as 10,50,100, got {text!r}") from None
    if not sizes or sizes[0] < 3 or sizes[-1] > 500:
        raise ValueError(f"--scale {text}: give consumer counts from 3 to 500")
    return sizes


def run_scale(settings: Settings, sizes: list[int], seed: int, designs: list[str],
              done: Callable[[int, str], None] = lambda n, d: None) -> Scaled:
    """Every design at every size, on `seed`; `done(size, design)` after each (progress)."""
    out: Scaled = {}
    for n in sizes:
        s = script(replace(settings, consumers=n), sim_names(n), seed)
        out[n] = {}
        for d in designs:
            out[n][d] = total(simulate(s, seed, d))
            done(n, d)
    return out


COLUMNS = ("consumers", "design", "messages", "heartbeats", "settled", "idle", "rebalances", "failed")


def _messages(f: Figures, c: Catalog) -> str:
    if f.heartbeats is None:
        return c.t("cmp.scale.of", reads=f.messages.get("reads", 0), total=f.total)
    return str(f.total)


def render_scale(scaled: Scaled, seed: int, c: Catalog | None = None) -> Table:
    c = c or Catalog()
    table = Table(title=c.t("cmp.scale.title", seed=seed), title_justify="left", header_style="bold")
    for col in COLUMNS:
        table.add_column(c.t(f"cmp.scale.col.{col}"), justify="left" if col == "design" else "right")
    for n, by_design in scaled.items():
        for i, (d, f) in enumerate(by_design.items()):
            table.add_row(str(n) if i == 0 else "", design_label(d, c), _messages(f, c),
                          "-" if f.heartbeats is None else str(f.heartbeats),
                          c.t("cmp.table.not_settled") if f.settle_ms is None
                          else c.t("cmp.table.seconds", s=f"{f.settle_ms / 1000:.3f}"),
                          f"{f.idle_ms / 1000:.1f}", str(sum(f.rebalances.values())),
                          "-" if f.failed is None else f"{f.failed} ({f.gave_up})",
                          end_section=i == len(by_design) - 1)
    return table


def scale_lines(scaled: Scaled, c: Catalog) -> list[str]:
    """How each design's messages grew from the smallest group to the largest, and the herd."""
    sizes = list(scaled)
    if len(sizes) < 2:
        return []
    lo, hi = sizes[0], sizes[-1]
    grown = []
    for d in scaled[lo]:
        a, b = scaled[lo][d].total, scaled[hi][d].total
        grown.append(c.t("cmp.scale.grew", design=c.t(f"cmp.short.{d}"), low=a, high=b,
                         ratio=f"{b / max(a, 1):.1f}"))
    lines = [c.t("cmp.scale.growth", low=lo, high=hi, factor=f"{hi / lo:.1f}".rstrip("0").rstrip("."), designs=c.t("cmp.sep").join(grown))]
    if "zk" in scaled[hi]:
        f = scaled[hi]["zk"]
        lines.append(c.t("cmp.scale.herd", n=hi, rebalances=sum(f.rebalances.values()), failed=f.failed or 0,
                         gave_up=f.gave_up or 0, ops=f.total))
    return lines
