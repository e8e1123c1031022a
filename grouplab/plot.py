"""The ownership chart: who held which partition when, with the rebalances, the faults and the
time partitions were *assigned but not consumed* marked (docs/events.md §6). One renderer for
every picture of it: `grouplab plot RUN_DIR --out timeline.png|svg`, the Spark report's Gantt
chart (grouplab/pipeline/report.py) and the dashboard's static export.

It takes plain data, an `OwnershipChart`, never a Spark DataFrame: lanes (one per partition, top to
bottom), bars (a client holding a partition), idle spans (assigned but not consumed, hatched over
the bar), bands (rebalances, start to end) and fault marks. `chart_from_costs` builds one from the
cost fold (grouplab/costs.py), live or finished; `chart_from_run` from a run directory, no Spark.
`OwnershipChart.to_json()` is the model as data, which the tests hold to a golden file (not the
pixels).

Its words (title, legend, axis, fault marks) are in the chart's `lang`, from the catalogue
(grouplab/teach/catalog/); a chart in Chinese is drawn with a CJK font found on the machine
(`cjk_font`), and refused with a one-line error rather than drawn as empty boxes when there is none.
"""

from __future__ import annotations

import io
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from grouplab.costs import ASSIGNED_NOT_CONSUMED, CostTracker
from grouplab.runlog import read_run
from grouplab.teach.catalog import Catalog

BAND_COLOR = "#9aa0a6"  # a rebalance
HURT_COLOR = "#d62728"  # a highlighted rebalance, two owners at once
IDLE_HATCH = "////"
IDLE_EDGE = "#1a1a1a"
FAULT_COLOR = "#8c2d04"
IDLE_LABEL = "assigned but not consumed"
END_MARKS = ("removed", "fenced")  # a holding the coordinator ended: an × at its end
DELETED = "deleted"  # a holding its topic's deletion ended: a bar across the lane at its end (the lane ends there)
MAX_LANES = 100  # partitions drawn by chart_from_costs: more is not readable
FORMATS = (".png", ".svg")
AXES_WIDTH = 0.74  # of the figure's 13 inches; the legend takes the right


@dataclass(frozen=True, slots=True)
class Bar:
    """`owner` (a client id) held partition `lane` from `start_ms` to `end_ms`."""

    lane: str
    start_ms: int
    end_ms: int
    owner: str
    end: str | None = None  # how it ended (Holding.end_reason); END_MARKS get an ×, DELETED a bar


@dataclass(frozen=True, slots=True)
class Idle:
    """`lane` was assigned to `owner` but not consumed: its consumer had stopped."""

    lane: str
    start_ms: int
    end_ms: int
    owner: str | None


@dataclass(frozen=True, slots=True)
class Band:
    """A rebalance, from its start to its end; `highlight`ed ones are red and labelled."""

    start_ms: int
    end_ms: int
    label: str | None = None
    highlight: bool = False


@dataclass(frozen=True, slots=True)
class FaultMark:
    ts_ms: int
    label: str  # `crash m-3`


@dataclass
class OwnershipChart:
    lanes: list[str]  # top to bottom: `t0-3`
    bars: list[Bar]
    idle: list[Idle] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    faults: list[FaultMark] = field(default_factory=list)
    origin_ms: int = 0  # time zero of the x axis
    window: tuple[int, int] | None = None  # the x range drawn; None: everything
    title: str | None = None
    colors: dict[str, Any] = field(default_factory=dict)  # owner -> color; missing ones from client_colors
    highlight_label: str = "rebalance after a stop (gN)"  # what the highlighted bands are, for the legend
    lang: str = "en"  # of the words drawn (not part of the model's data)

    def to_json(self) -> dict[str, Any]:
        """The model as plain data (what is drawn, not how): sorted, so that the same run gives
        the same document."""
        return {"title": self.title, "origin_ms": self.origin_ms, "window": list(self.window) if self.window else None,
                "lanes": self.lanes,
                "bars": sorted([asdict(b) for b in self.bars], key=lambda b: (b["lane"], b["start_ms"], b["owner"])),
                "idle": sorted([asdict(i) for i in self.idle], key=lambda i: (i["lane"], i["start_ms"])),
                "bands": sorted([asdict(b) for b in self.bands], key=lambda b: (b["start_ms"], b["end_ms"])),
                "faults": sorted([asdict(f) for f in self.faults], key=lambda f: (f["ts_ms"], f["label"]))}


# ----------------------------------------------------------------------------- helpers the report shares


def natural_key(text: Any) -> list[Any]:
    """`r2` before `r10`, `m-9` before `m-10`."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", str(text))]


def lane_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def mpl(text: Any, limit: int = 28) -> str:
    """Text for matplotlib: `$` would start mathtext (and an unbalanced one raises); long ids cut."""
    text = str(text)
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return text.replace("$", r"\$")


def client_colors(clients: Iterable[str]) -> dict[str, Any]:
    """A stable color per client of a run: Tableau 10 up to ten clients, Tableau 20 beyond,
    reused round-robin past twenty (the bars are then labelled where they are wide enough)."""
    import matplotlib

    ordered = sorted(set(clients), key=natural_key)
    palette = matplotlib.colormaps["tab10" if len(ordered) <= 10 else "tab20"].colors  # type: ignore[attr-defined]  # a ListedColormap
    return {c: palette[i % len(palette)] for i, c in enumerate(ordered)}


def text_color(rgb: Any) -> str:
    r, g, b = rgb[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


# ----------------------------------------------------------------------------- drawing


# Font families with the Chinese glyphs, the first one installed wins: Debian's fonts-wqy-microhei
# (5 MB, what scripts/test installs), fonts-wqy-zenhei, fonts-noto-cjk, Adobe's Source Han Sans.
CJK_FAMILIES = ("WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Noto Sans CJK SC", "Noto Sans CJK JP",
                "Source Han Sans SC", "Source Han Sans CN", "Droid Sans Fallback")
CJK_FILES = re.compile(r"wqy|cjk|sourcehan|droidsansfallback", re.IGNORECASE)


class PlotFontError(RuntimeError):
    """A chart in a language no installed font can draw (it would come out as empty boxes)."""


def cjk_font() -> str:
    """The family of an installed CJK font; one installed since matplotlib's font cache was built
    is added to it first."""
    import logging

    from matplotlib import font_manager

    # These families have no bold face: matplotlib says so at every bold text (the rebalance tags,
    # Latin letters drawn from DejaVu Sans Bold anyway); a fact about the font, not news to a user.
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)

    def known() -> str | None:
        names = {f.name for f in font_manager.fontManager.ttflist}
        return next((family for family in CJK_FAMILIES if family in names), None)

    found = known()
    if found is None:
        for path in font_manager.findSystemFonts():
            if CJK_FILES.search(Path(path).name):
                font_manager.fontManager.addfont(path)
        found = known()
    if found is None:
        raise PlotFontError("no font with Chinese glyphs is installed, so a --lang zh chart would show empty boxes: "
                            "install one (Debian: apt-get install fonts-wqy-microhei) or draw it with --lang en")
    return found


def font_context(lang: str) -> Any:
    """matplotlib settings for text in `lang`: for anything but English, a CJK font behind the
    default one (Latin letters look as in English charts, the rest comes from the CJK font)."""
    import contextlib

    import matplotlib

    if lang == "en":
        return contextlib.nullcontext()
    return matplotlib.rc_context({"font.family": ["DejaVu Sans", cjk_font()]})


def draw(chart: OwnershipChart) -> Any:
    """The chart as a matplotlib Figure (object API, no pyplot: no GUI backend); its text in the
    chart's language (the font is fixed when a text is made, so the figure saves alike anywhere)."""
    with font_context(chart.lang):
        return _draw(chart, Catalog(chart.lang))


def _draw(chart: OwnershipChart, c: Catalog) -> Any:
    from matplotlib.collections import PolyCollection
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    lanes = chart.lanes
    nrows = max(len(lanes), 1)
    row_of = {lane: i for i, lane in enumerate(lanes)}
    # Room above the axes: the highlighted rebalances' tags, then the faults' labels, then the title.
    top_in = 0.35 + (0.45 if chart.faults else 0.0) + (0.3 if chart.title else 0.0)
    height_in = min(0.2 * nrows + 0.8 + top_in, 14.0)
    fig = Figure(figsize=(13, height_in))
    ax = fig.add_axes((0.075, 0.8 / height_in, AXES_WIDTH, 1 - (0.8 + top_in) / height_in))
    if chart.title:
        fig.suptitle(mpl(chart.title, 160), x=0.075, y=1 - 0.08 / height_in, ha="left", va="top", fontsize=9)
    origin = chart.origin_ms

    def sec(ms: int) -> float:
        return (ms - origin) / 1000.0

    if chart.window:
        lo_ms, hi_ms = chart.window
    else:
        lo_ms = min([origin] + [b.start_ms for b in chart.bars])
        hi_ms = max([b.end_ms for b in chart.bars] + [b.end_ms for b in chart.bands] + [f.ts_ms for f in chart.faults]
                    + [lo_ms + 1])
    x0, x1 = sec(lo_ms), sec(hi_ms)
    ax.set_xlim(x0, x1)
    ax.set_ylim(nrows - 0.5, -0.5)
    axes_w_pt = 13 * AXES_WIDTH * 72
    pt_per_s = axes_w_pt / max(x1 - x0, 1e-9)

    # Rebalances: grey bands, the highlighted ones red and labelled above the chart.
    tags: list[tuple[float, str]] = []
    for band in chart.bands:
        a, b = sec(band.start_ms), sec(band.end_ms)
        if b < x0 or a > x1:
            continue
        ax.axvspan(a, max(b, a + (x1 - x0) / 2000), color=HURT_COLOR if band.highlight else BAND_COLOR,
                   alpha=0.22 if band.highlight else 0.25, lw=0, zorder=0)
        if band.highlight and band.label:
            tags.append(((a + b) / 2, band.label))
    last_pt: list[float] = [-1e9, -1e9]
    for x, tag in sorted(tags):
        x_pt = (x - x0) * pt_per_s
        level = 0 if x_pt - last_pt[0] >= 26 else 1 if x_pt - last_pt[1] >= 26 else 0
        last_pt[level] = x_pt
        ax.annotate(mpl(tag, 12), (x, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2 + 9 * level),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7, color=HURT_COLOR,
                    fontweight="bold", annotation_clip=False)

    # The holdings: one rectangle each, colored by client, labelled where there is room.
    colors = {**client_colors(b.owner for b in chart.bars), **chart.colors}
    row_pt = (height_in - 0.8 - top_in) * 72 / nrows
    label_size = 6.5
    polys, faces, labels = [], [], []
    ends_x, ends_y = [], []
    gone_x, gone_y = [], []
    for bar in chart.bars:
        y = row_of.get(bar.lane)
        if y is None:
            continue
        a, b = max(sec(bar.start_ms), x0), min(sec(bar.end_ms), x1)
        if b < a:
            continue
        polys.append([(a, y - 0.4), (b, y - 0.4), (b, y + 0.4), (a, y + 0.4)])
        color = colors.get(bar.owner, (0.5, 0.5, 0.5))
        faces.append(color)
        if bar.end in END_MARKS and sec(bar.end_ms) <= x1:
            ends_x.append(b)
            ends_y.append(y)
        elif bar.end == DELETED and sec(bar.end_ms) <= x1:
            gone_x.append(b)
            gone_y.append(y)
        name = mpl(bar.owner, 12)
        if row_pt >= label_size + 2 and (b - a) * pt_per_s >= len(name) * label_size * 0.62 + 4:
            labels.append(((a + b) / 2, y, name, text_color(color)))
    ax.add_collection(PolyCollection(polys, facecolors=faces, edgecolors="none", zorder=2))

    # Two holders at once (a zombie that had not heard it was fenced): red hatching over both.
    by_row: dict[int, list[tuple[float, float]]] = {}
    for p in polys:
        by_row.setdefault(int(round(p[0][1] + 0.4)), []).append((p[0][0], p[1][0]))
    overlaps = []
    for y, spans in by_row.items():
        spans.sort()
        reach = None
        for a, b in spans:
            if reach is not None and a < reach:
                overlaps.append([(a, y - 0.4), (min(b, reach), y - 0.4), (min(b, reach), y + 0.4), (a, y + 0.4)])
            reach = b if reach is None else max(reach, b)
    if overlaps:
        ax.add_collection(PolyCollection(overlaps, facecolors="none", edgecolors=HURT_COLOR, hatch="\\\\\\\\",
                                         linewidths=0.6, zorder=3))

    # Assigned but not consumed: the holder's bar washed out and hatched in black.
    idle_polys = []
    for span in chart.idle:
        y = row_of.get(span.lane)
        if y is None:
            continue
        a, b = max(sec(span.start_ms), x0), min(sec(span.end_ms), x1)
        if b <= a:
            continue
        idle_polys.append([(a, y - 0.4), (b, y - 0.4), (b, y + 0.4), (a, y + 0.4)])
    if idle_polys:
        ax.add_collection(PolyCollection(idle_polys, facecolors=(1, 1, 1, 0.55), edgecolors=IDLE_EDGE, hatch=IDLE_HATCH,
                                         linewidths=0.0, zorder=3.5))
    for x, y, name, tc in labels:
        ax.text(x, y, name, ha="center", va="center", fontsize=label_size, color=tc, zorder=4, clip_on=True)
    if ends_x:
        ax.scatter(ends_x, ends_y, marker="x", s=14, linewidths=0.9, color="#222222", zorder=5)
    if gone_x:
        ax.scatter(gone_x, gone_y, marker="|", s=40, linewidths=1.6, color="#222222", zorder=5)

    # Faults: a dashed line through every lane, a label above the tags on a free level.
    fault_levels: list[float] = [-1e9, -1e9, -1e9]
    shown_faults = 0
    for mark in sorted(chart.faults, key=lambda f: f.ts_ms):
        x = sec(mark.ts_ms)
        if x < x0 or x > x1:
            continue
        shown_faults += 1
        ax.axvline(x, color=FAULT_COLOR, lw=0.8, ls=(0, (3, 2)), zorder=4.5)
        x_pt = (x - x0) * pt_per_s
        free = [i for i, last in enumerate(fault_levels) if x_pt - last >= 60]
        if not free:
            continue
        level = free[0]
        fault_levels[level] = x_pt
        ax.annotate(mpl(mark.label, 18), (x, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2, 21 + 8 * level), textcoords="offset points", ha="left", va="bottom", fontsize=6.5,
                    color=FAULT_COLOR, annotation_clip=False)

    fs = 8 if nrows <= 30 else 6.5 if nrows <= 45 else 5.5
    ax.set_yticks(range(len(lanes)), [mpl(lane, 20) for lane in lanes], fontsize=fs)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xlabel(c.t("plot.xlabel"), fontsize=8)
    ax.grid(axis="x", alpha=0.25, zorder=1)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    owners = sorted({b.owner for b in chart.bars}, key=natural_key)
    handles: list[Any] = [Patch(color=colors[c], label=mpl(c)) for c in owners[:24]]
    if len(owners) > 24:
        handles.append(Patch(color="white", label=c.t("plot.more_clients", count=len(owners) - 24)))
    handles.append(Patch(facecolor="#bbbbbb", edgecolor=IDLE_EDGE, hatch=IDLE_HATCH, lw=0, label=c.t("plot.idle")))
    handles.append(Patch(facecolor="white", edgecolor="#bbbbbb", lw=0.6, label=c.t("plot.unowned")))
    handles.append(Patch(color=BAND_COLOR, alpha=0.35, label=c.t("plot.rebalance")))
    if any(b.highlight for b in chart.bands):
        handles.append(Patch(color=HURT_COLOR, alpha=0.3, label=chart.highlight_label))
    if shown_faults:
        handles.append(Line2D([], [], color=FAULT_COLOR, lw=0.8, ls=(0, (3, 2)), label=c.t("plot.fault")))
    if ends_x:
        handles.append(Line2D([], [], marker="x", ls="none", color="#222222", markersize=5,
                              label=c.t("plot.removed")))
    if gone_x:
        handles.append(Line2D([], [], marker="|", ls="none", color="#222222", markersize=7, markeredgewidth=1.6,
                              label=c.t("plot.deleted")))
    if overlaps:
        handles.append(Patch(facecolor="none", edgecolor=HURT_COLOR, hatch="\\\\\\\\", label=c.t("plot.two_owners")))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5, frameon=False,
              ncols=1 if len(handles) <= max(nrows * row_pt / 14, 12) else 2, borderaxespad=0)
    return fig


def chart_svg(chart: OwnershipChart, prefix: str) -> str:
    """The chart as an `<svg>` element to inline in a page (ids prefixed with `prefix`)."""
    from grouplab.pipeline.html import figure_svg

    return figure_svg(draw(chart), prefix)


class PlotFormatError(ValueError):
    """An output file whose extension names no format we write."""


def save(chart: OwnershipChart, out: str | Path) -> Path:
    """Write the chart to `out`, PNG or SVG by its extension."""
    import matplotlib

    path = Path(out)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise PlotFormatError(f"--out must end in .png or .svg (got {str(out)!r})")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = draw(chart)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "grouplab"}):
        if suffix == ".svg":
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None})
            path.write_text(buf.getvalue(), encoding="utf-8")
        else:
            fig.savefig(path, format="png", dpi=150, metadata={"Software": None})
    return path


# ----------------------------------------------------------------------------- building the model


FAULT_WORDS = {"crash": "crash", "static_restart": "static restart", "hang": "hang", "slow": "slow",
               "leave": "leave", "process_crashed": "crash", "process_exited": "exit", "app_crashed": "crash",
               "coordinator_crashed": "coordinator down", "coordinator_restart": "", "add_partitions": "+partitions"}


def fault_word(fault: str, c: Catalog) -> str:
    """A fault's mark on the chart (FAULT_WORDS in the catalogue's language; other faults by their name)."""
    key = f"plot.fault.{fault}"
    return c.t(key) if fault != "coordinator_restart" and c.has(key) else FAULT_WORDS.get(fault, fault.replace("_", " "))


def chart_from_costs(costs: CostTracker, group_id: str, now_ms: int | None = None, origin_ms: int = 0,
                     title: str | None = None, max_lanes: int = MAX_LANES, lang: str = "en") -> OwnershipChart:
    """The chart of one group from the cost fold: finished, or live up to `now_ms` (the holdings
    and idle spans still open end there). More than `max_lanes` partitions: the ones consumed the
    least are drawn (the title says so)."""
    c = Catalog(lang)
    holdings = [h for h in costs.holdings + costs.open_holdings(now_ms) if h.group_id == group_id]
    segments = [s for s in costs.all_segments(now_ms) if s.group_id == group_id]
    partitions = {s.partition for s in segments} | {h.partition for h in holdings}
    order = sorted(partitions, key=lambda tp: (natural_key(tp.topic), tp.partition))
    if len(order) > max_lanes:
        consumed: dict[Any, int] = {}
        for s in segments:
            if s.state == "consumed":
                consumed[s.partition] = consumed.get(s.partition, 0) + s.duration_ms
        keep = set(sorted(order, key=lambda tp: (consumed.get(tp, 0), natural_key(tp.topic), tp.partition))[:max_lanes])
        title = f"{title + ' · ' if title else ''}{c.t('plot.capped', shown=max_lanes, total=len(order))}"
        order = [tp for tp in order if tp in keep]
    shown = set(order)
    bars = [Bar(lane_name(*h.partition), h.start_ms, h.end_ms, h.client_id, h.end_reason)
            for h in holdings if h.partition in shown and h.end_ms > h.start_ms]
    idle = [Idle(lane_name(*s.partition), s.start_ms, s.end_ms, s.client_id)
            for s in segments if s.partition in shown and s.state == ASSIGNED_NOT_CONSUMED]
    # The rebalances that got a stopped member's partitions consumed again are the ones to see.
    repaired = {s.repaired_generation for s in costs.stalls if s.group_id == group_id and s.partitions}
    bands = [Band(r.started_ms, r.ended_ms, f"g{r.generation}", r.generation in repaired) for r in costs.completed
             if r.group_id == group_id and r.started_ms is not None]
    faults = []
    for f in costs.faults:
        if f.group_id != group_id:
            continue
        word = fault_word(f.fault, c)
        if f.fault == "coordinator_restart":
            continue  # `coordinator_crashed` marks it
        faults.append(FaultMark(f.ts_ms, f"{word} {', '.join(f.clients)}".strip()))
    return OwnershipChart(lanes=[lane_name(*tp) for tp in order], bars=bars, idle=idle, bands=bands, faults=faults,
                          origin_ms=origin_ms, title=title, highlight_label=c.t("plot.highlight"), lang=lang)


def chart_from_run(run_dir: str | Path, group_id: str | None = None, title: str | None = None,
                   lang: str = "en") -> OwnershipChart:
    """Read a run directory (grouplab/runlog.py) through the cost fold and build its chart: the
    group `group_id`, or the run's group with the most partitions."""
    c = Catalog(lang)
    log = read_run(run_dir)
    costs = CostTracker()
    for node, ev in log.events:
        costs.feed(node, ev)
    costs.finish(log.end_ms)
    groups: dict[str, set[Any]] = {}
    for s in costs.segments:
        groups.setdefault(s.group_id, set()).add(s.partition)
    if group_id is None:
        if not groups:
            raise ValueError(f"{run_dir}: no partition was ever assigned in this run's logs")
        group_id = max(sorted(groups), key=lambda g: len(groups[g]))
    elif group_id not in groups:
        known = ", ".join(sorted(groups)) or "none"
        raise ValueError(f"{run_dir}: no group {group_id!r} with partitions in this run (groups: {known})")
    origin = min((ev.ts_ms for _, ev in log.events), default=0)
    stalls = [s for s in costs.stalls if s.group_id == group_id and s.partitions]
    t = costs.totals(group_id=group_id)
    head = title or f"{Path(run_dir).name} · {c.t('run.group', group=group_id)}"
    summary = c.t("plot.summary.one" if len(stalls) == 1 else "plot.summary", idle=f"{t.assigned_not_consumed_ms / 1000:,.1f}",
                  stops=len(stalls), unowned=f"{t.unowned_ms / 1000:,.1f}", total=f"{t.total_ms / 1000:,.1f}")
    return chart_from_costs(costs, group_id, origin_ms=origin, title=f"{head} · {summary}", lang=lang)
