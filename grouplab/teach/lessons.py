"""The built-in lessons: small scenarios (grouplab/scenarios/lessons/*.toml), each with a `[lesson]` table
and a title and introduction in every message catalogue, told by `grouplab explain <lesson>`.

A lesson is a scenario like any other, so `grouplab simulate` runs it too; what makes it a lesson
is the seed it is always told with (the same story every time), the moment it narrows the story to
(`from_s`/`to_s`/`generation`), and, for a comparison, its variants: the same scenario run again
with one thing changed (the assignor, the delivery mode) and told side by side, followed by what
each variant cost, measured from its run's event logs.

Lessons live in their own folder so that `grouplab simulate --scenario NAME` and the test suite's
sweep over the built-in scenarios do not pick them up; `lesson_names()` lists them.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grouplab.costs import CONSUMED, CostTracker, Segment
from grouplab.runlog import read_run
from grouplab.sim.scenario import (LessonSpec, Scenario, ScenarioError, builtin_scenarios_dir, parse_scenario,
                                   variant_raw)
from grouplab.teach.catalog import Catalog
from grouplab.teach.explain import Filter, Story, markdown, narrate_run, select
from grouplab.teach.narrate import Narrated
from grouplab.protocol import events
from grouplab.protocol.types import TopicPartition


def lessons_dir() -> Path:
    return builtin_scenarios_dir() / "lessons"


def lesson_names() -> list[str]:
    folder = lessons_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def find_lesson(name: str) -> Path | None:
    """A built-in lesson by name (`crash-timeout`), or None."""
    if "/" in name or "\\" in name:
        return None
    path = lessons_dir() / (name if name.endswith(".toml") else f"{name}.toml")
    return path if path.is_file() else None


@dataclass
class Lesson:
    name: str
    raw: dict[str, Any]  # the file's table: variants are built from it
    scenario: Scenario
    spec: LessonSpec

    def title(self, c: Catalog) -> str:
        key = f"lesson.{self.name}.title"
        return c.t(key) if c.has(key) else self.scenario.description or self.name

    def intro(self, c: Catalog) -> str | None:
        key = f"lesson.{self.name}.intro"
        return c.t(key) if c.has(key) else None

    def variant_title(self, label: str, c: Catalog) -> str:
        key = f"lesson.{self.name}.variant.{label}"
        return c.t(key) if c.has(key) else label

    def variants(self) -> list[tuple[str | None, Scenario]]:
        """(label, scenario) per variant; a lesson without variants is its one scenario."""
        if not self.spec.variants:
            return [(None, self.scenario)]
        return [(str(v["label"]), parse_scenario(variant_raw(self.raw, v), f"{self.name}: {v['label']}"))
                for v in self.spec.variants]

    def filter(self, f: Filter) -> Filter:
        """The user's window where given, else the lesson's own moment."""
        return Filter(self.spec.from_s if f.from_s is None else f.from_s, self.spec.to_s if f.to_s is None else f.to_s,
                      self.spec.generation if f.generation is None else f.generation)


def load_lesson(path: str | Path) -> Lesson:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    raw.setdefault("name", path.stem)
    scenario = parse_scenario(raw, str(path))
    return Lesson(path.stem, raw, scenario, scenario.lesson or LessonSpec())


@dataclass
class Measures:
    """What a variant cost, from its run's event logs, within the lesson's window."""

    rebalances: int = 0  # generations formed
    epochs: int = 0  # group epoch moves of a consumer-protocol group (KIP-848: no generations)
    revoked: int = 0  # partitions members gave up or lost (a crashed member's count too)
    idle_s: float = 0.0  # partition-seconds without a consumer, after being taken from one
    longest_s: float = 0.0  # the longest any one partition waited
    lost: int | None = None  # delivery runs: input records missing from the output
    duplicated: int | None = None  # and there more than once


@dataclass
class Told:
    label: str | None
    story: Story
    steps: list[Narrated]
    measures: Measures = field(default_factory=Measures)
    variant: str | None = None  # the variant's label in the lesson's file (`eager`), for file names


def tell(lesson: Lesson, seed: int, lang: str, f: Filter, workdir: Path) -> list[Told]:
    """Run every variant of the lesson on `seed` (into `workdir`) and narrate it."""
    from grouplab.sim.runner import run_seed

    told = []
    window = lesson.filter(f)
    variants = lesson.variants()
    for i, (label, scenario) in enumerate(variants):
        run_dir = workdir / f"variant-{i}"
        run_seed(scenario, seed, run_dir)
        story = narrate_run(run_dir, lang)
        measures = measure(run_dir, story.start_ms, window) if len(variants) > 1 else Measures()  # compared only
        title = lesson.variant_title(label, Catalog(lang)) if label is not None else None
        told.append(Told(title, story, select(story, window), measures, label))
    return told


def measure(run_dir: Path, start_ms: int, window: Filter) -> Measures:
    """Rebalances, partitions taken away and how long partitions went without a consumer, from the
    run directory's events (grouplab/runlog.py) folded by the one cost fold (grouplab/costs.py), so
    a lesson's table and `grouplab plot` agree: a crashed member's partitions are without a
    consumer from the crash (assigned but not consumed, then unowned) until a live member has them."""
    lo = start_ms + int((window.from_s or 0) * 1000)
    hi = start_ms + int(window.to_s * 1000) if window.to_s is not None else None

    def inside(ts: int) -> bool:
        return lo <= ts and (hi is None or ts <= hi)

    m = Measures()
    costs = CostTracker()
    for node, ev in read_run(run_dir).events:
        costs.feed(node, ev)
        p = ev.payload
        if isinstance(p, events.GenerationCompleted) and inside(ev.ts_ms):
            m.rebalances += 1
        elif isinstance(p, events.GroupEpochBumped) and inside(ev.ts_ms):
            m.epochs += 1
        elif isinstance(p, (events.SimDeliveryAccount, events.RunDeliveryAccount)):
            m.lost, m.duplicated = p.lost, p.duplicated
        elif isinstance(p, (events.PartitionsRevoked, events.PartitionsLost)) and inside(ev.ts_ms):
            m.revoked += len(p.partitions)
    costs.finish()
    # A crashed process revokes nothing: what it held is taken from it all the same.
    m.revoked += sum(len(s.partitions) for s in costs.stalls if s.fault in CRASHES and inside(s.since_ms))
    idle_ms = 0
    for stretch in without_consumer(costs.segments):
        clipped = min(stretch[1], hi if hi is not None else stretch[1]) - max(stretch[0], lo)
        if clipped > 0:
            idle_ms += clipped
            m.longest_s = max(m.longest_s, clipped / 1000)
    m.idle_s = round(idle_ms / 1000, 3)
    return m


CRASHES = ("crash", "process_crashed")  # the stops after which the process is gone without revoking


def without_consumer(segments: list[Segment]) -> list[tuple[int, int]]:
    """Each partition's stretches (start, end) without a consumer after it first had one: its
    assigned-but-not-consumed and unowned segments run together (the time before a group first
    hands a partition out is the group forming, not a wait). A deletion of its topic ends its
    lane (the fold's `deleted`): a stretch ends there, and a topic made again under the name is a
    new partition, forming anew."""
    lanes: dict[tuple[str, TopicPartition], list[Segment]] = {}
    for seg in segments:
        lanes.setdefault((seg.group_id, seg.partition), []).append(seg)
    out: list[tuple[int, int]] = []
    for segs in lanes.values():
        open_at: int | None = None
        consumed = False
        last_end: int | None = None
        for seg in sorted(segs, key=lambda s: s.start_ms):
            if last_end is not None and seg.start_ms > last_end:  # gone between: deleted, made again
                if open_at is not None:
                    out.append((open_at, last_end))
                open_at, consumed = None, False
            last_end = seg.end_ms
            if seg.state == CONSUMED:
                if open_at is not None:
                    out.append((open_at, seg.start_ms))
                open_at, consumed = None, True
            elif consumed and open_at is None:
                open_at = seg.start_ms
        if open_at is not None:
            out.append((open_at, max(s.end_ms for s in segs)))
    return out


ROWS = ("rebalances", "revoked", "idle_s", "longest_s")
DELIVERY_ROWS = ("lost", "duplicated")


def comparison(told: list[Told], c: Catalog) -> tuple[list[str], list[list[str]]]:
    """The comparison's header and rows: one column per variant, one row per measure (a delivery
    lesson compares what reached the output; the others, what the rebalances cost)."""
    delivery = all(t.measures.lost is not None for t in told)
    header = [c.t("compare.measure")] + [t.label or "" for t in told]
    rows = []
    names: tuple[str, ...] = DELIVERY_ROWS if delivery else ROWS
    if not delivery and any(t.measures.epochs for t in told):  # a consumer-protocol variant: its epochs too
        names = names[:1] + ("epochs",) + names[1:]
    for name in names:
        values = [getattr(t.measures, name) for t in told]
        rows.append([c.t(f"compare.{name}")] + [f"{v:.3f}" if isinstance(v, float) else str(v) for v in values])
    return header, rows


def comparison_text(told: list[Told], c: Catalog) -> list[str]:
    header, rows = comparison(told, c)
    widths = [max(_width(r[i]) for r in [header] + rows) for i in range(len(header))]
    out = []
    for r in [header] + rows:
        pads = [" " * (widths[i] - _width(cell)) for i, cell in enumerate(r)]
        out.append("  ".join(cell + pad if i == 0 else pad + cell for i, (cell, pad) in enumerate(zip(r, pads))).rstrip())
    return out


def comparison_markdown(told: list[Told], c: Catalog) -> str:
    header, rows = comparison(told, c)
    out = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _width(text: str) -> int:
    """Columns a string takes in a terminal: CJK characters take two."""
    return sum(2 if "\u1100" <= ch and (ch <= "\u115f" or "\u2e80" <= ch <= "\ua4cf" or "\uac00" <= ch <= "\ud7a3"
                                        or "\uf900" <= ch <= "\ufaff" or "\uff00" <= ch <= "\uff60") else 1
               for ch in text)


def markdown_page(told: list[Told], c: Catalog, title: str, intro: str | None = None, show_all: bool = False) -> str:
    """The page: the title and introduction, then the story; a lesson told in variants has each as
    a section, and the comparison after them."""
    if len(told) == 1:
        return markdown(told[0].story, told[0].steps, c, title, intro=intro, show_all=show_all)
    out = [f"# {title}", ""] + ([intro, ""] if intro else [])
    for t in told:
        out.append(markdown(t.story, t.steps, c, t.label or "", show_all=show_all, level=2))
    out += [f"## {c.t('compare.title')}", "", comparison_markdown(told, c)]
    return "\n".join(out).rstrip() + "\n"
