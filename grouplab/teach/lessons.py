"""The built-in lessons: small scenarios (scenarios/lessons/*.toml), each with a `[lesson]` table
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

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grouplab.sim.scenario import (LessonSpec, Scenario, ScenarioError, builtin_scenarios_dir, parse_scenario,
                                   variant_raw)
from grouplab.teach.catalog import Catalog
from grouplab.teach.explain import Filter, Story, markdown, narrate_run, select
from grouplab.teach.narrate import Narrated


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
        told.append(Told(title, story, select(story, window), measures))
    return told


def measure(run_dir: Path, start_ms: int, window: Filter) -> Measures:
    """Rebalances, partitions taken away and how long they waited for a consumer again, read from
    the coordinator's and the members' event logs; records lost and duplicated from the simulator's
    account."""
    lo = start_ms + int((window.from_s or 0) * 1000)
    hi = start_ms + int(window.to_s * 1000) if window.to_s is not None else None

    def inside(ts: int) -> bool:
        return lo <= ts and (hi is None or ts <= hi)

    m = Measures()
    lines: list[dict[str, Any]] = []
    for path in sorted(run_dir.glob("*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            lines += [json.loads(text) for text in fh if text.strip()]
    lines.sort(key=lambda e: int(e["ts_ms"]))
    owners: dict[tuple[str, int], set[str]] = {}  # partition -> the processes that have it
    waiting: dict[tuple[str, int], int] = {}  # partition -> since when nobody has it

    def release(node: str, partitions: list[tuple[str, int]], ts: int) -> None:
        for tp in partitions:
            owners.setdefault(tp, set()).discard(node)
            if inside(ts):
                m.revoked += 1
                if not owners[tp]:
                    waiting[tp] = ts

    for e in lines:
        ts, kind = int(e["ts_ms"]), e["event"]
        if kind == "generation_completed" and inside(ts):
            m.rebalances += 1
        elif kind == "delivery_account":
            m.lost, m.duplicated = int(e["lost"]), int(e["duplicated"])
        elif kind in ("partitions_revoked", "partitions_lost"):
            release(str(e["node"]), [(t, p) for t, p in e["partitions"]], ts)
        elif kind == "process_crashed" or (kind == "fault_injected" and e.get("fault") == "crash"):
            for node in [e["member"]] if kind == "process_crashed" else list(e.get("members") or []):
                release(node, [tp for tp, who in owners.items() if node in who], ts)  # no revocation: it just died
        elif kind == "partitions_assigned":
            for t, p in e["partitions"]:
                owners.setdefault((t, p), set()).add(str(e["node"]))
                since = waiting.pop((t, p), None)
                if since is not None:
                    m.idle_s += (ts - since) / 1000
                    m.longest_s = max(m.longest_s, (ts - since) / 1000)
    m.idle_s = round(m.idle_s, 3)
    return m


ROWS = ("rebalances", "revoked", "idle_s", "longest_s")
DELIVERY_ROWS = ("lost", "duplicated")


def comparison(told: list[Told], c: Catalog) -> tuple[list[str], list[list[str]]]:
    """The comparison's header and rows: one column per variant, one row per measure (a delivery
    lesson compares what reached the output; the others, what the rebalances cost)."""
    delivery = all(t.measures.lost is not None for t in told)
    header = [c.t("compare.measure")] + [t.label or "" for t in told]
    rows = []
    for name in DELIVERY_ROWS if delivery else ROWS:
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
