"""`grouplab explain`: a run's narrated steps, chosen and written as text, Markdown or a mermaid
sequence diagram. The narration is grouplab/teach/narrate.py's, over grouplab/replay.py's steps, so
what it tells is what the coordinator's state machine did, input by input."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from grouplab.replay import Replay
from grouplab.runlog import parse_line
from grouplab.teach.catalog import Catalog
from grouplab.teach.narrate import COORDINATOR, Narrated, Narrator
from grouplab.teach.world import BEFORE, World, world_lines
from grouplab.protocol import events


@dataclass
class Filter:
    """Which steps to tell: a time window in seconds from the run's start, one generation (the
    rebalance that formed it and its life until the next one starts), and routine ones or not."""

    from_s: float | None = None
    to_s: float | None = None
    generation: int | None = None

    def active(self) -> bool:
        return self.from_s is not None or self.to_s is not None or self.generation is not None


@dataclass
class Story:
    start_ms: int
    steps: list[Narrated]
    group: str | None


def narrate_run(run_dir: str | Path, lang: str = "en") -> Story:
    """Replay RUN_DIR's trace (ReplayRefused if it cannot be) and narrate every step, with the
    simulator's faults (RUN_DIR/simulator.jsonl, when there is one) told where they happened: the
    trace shows only what reached the coordinator, and a crash is exactly what does not."""
    run = Replay(run_dir)
    narrator = Narrator(lang)
    # The world's doings, told in time order among the steps, each when the narrator reaches it
    # (so that it knows the group as it was then): the faults, and what the members' applications
    # did with the records (grouplab/teach/world.py).
    world: list[World] = [(int(line["ts_ms"]), BEFORE, functools.partial(narrator.fault, line))
                          for line in _faults(Path(run_dir))]
    world += world_lines(Path(run_dir), narrator)
    world.sort(key=lambda w: (w[0], w[1]))  # stable: a fault before what the applications did at the same time
    steps: list[Narrated] = []
    i = 0
    for step in run:
        ts = int(step.line["ts_ms"])
        while i < len(world) and (world[i][0], world[i][1]) <= (ts, BEFORE):
            steps.append(world[i][2]())
            i += 1
        steps.append(narrator.narrate(step))
    steps += [tell() for _, _, tell in world[i:]]
    group = next((s.group for s in steps if s.group), None)
    return Story(int(run.start["ts_ms"]), steps, group)


def _faults(run_dir: Path) -> list[dict[str, Any]]:
    """The simulator's `fault_injected` lines, read as every run reader reads them
    (grouplab/runlog.py), as the line's fields for the narrator."""
    path = run_dir / "simulator.jsonl"
    if not path.is_file():
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        parsed = [parse_line(text) for text in f if text.strip()]
    return [{"ts_ms": ev.ts_ms, "node": node, "event": ev.event, **ev.fields} for node, ev in filter(None, parsed)
            if isinstance(ev.payload, events.FaultInjected)]


def extent(story: Story) -> tuple[int, int, float]:
    """The generations a story's steps belong to (lowest, highest) and its length in seconds: what
    --generation, --from and --to may ask of it."""
    epochs, epoch = [], 0
    for s in story.steps:
        if s.generation is not None:
            epoch = s.generation + 1 if s.state == "PreparingRebalance" else s.generation
        epochs.append(epoch)
    end = max((s.ts_ms for s in story.steps), default=story.start_ms)
    return min(epochs, default=0), max(epochs, default=0), (end - story.start_ms) / 1000


def select(story: Story, f: Filter) -> list[Narrated]:
    chosen = []
    epoch = 0  # the generation a step belongs to: the one it lives in, or the one it starts forming
    for s in story.steps:
        if s.generation is not None:
            epoch = s.generation + 1 if s.state == "PreparingRebalance" else s.generation
        at = (s.ts_ms - story.start_ms) / 1000
        if f.from_s is not None and at < f.from_s:
            continue
        if f.to_s is not None and at > f.to_s:
            continue
        if f.generation is not None and epoch != f.generation:
            continue
        chosen.append(s)
    return chosen


def chunks(steps: list[Narrated], show_all: bool) -> Iterator[Narrated | list[Narrated]]:
    """The steps with each run of routine ones folded into a list (unless `show_all`)."""
    run: list[Narrated] = []
    for s in steps:
        if s.routine and not show_all:
            run.append(s)
            continue
        if run:
            yield run
            run = []
        yield s
    if run:
        yield run


def routine_kinds(run: list[Narrated]) -> str:
    counts = Counter(s.api or "timer" for s in run)
    return ", ".join(f"{k} ×{n}" for k, n in counts.most_common())


def seconds(story: Story, ts_ms: int) -> str:
    return f"+{(ts_ms - story.start_ms) / 1000:.3f} s"


# ----------------------------------------------------------------------------- text


def text_lines(story: Story, steps: list[Narrated], c: Catalog, show_all: bool = False,
               on_step: Callable[[], bool] | None = None) -> Iterator[tuple[str, str]]:
    """(style, line) pairs for a terminal; `on_step` is called after each told step and returns
    False to stop (the `--step` prompt)."""
    told: set[str] = set()
    for chunk in chunks(steps, show_all):
        if isinstance(chunk, list):
            yield "dim", f"{'':12}" + c.t("routine", count=len(chunk), kinds=routine_kinds(chunk))
            continue
        s = chunk
        when = seconds(story, s.ts_ms)
        for i, said in enumerate(s.lines):
            arrow = (f"{said.sender} → {said.receiver}" if said.kind in ("request", "response", "fault")
                     else f"{COORDINATOR} ⇒ {said.receiver}" if said.kind == "decision"
                     else f"{said.sender} ⇒ {said.receiver}" if said.kind == "cluster"
                     else f"{said.sender} ⚡" if said.kind == "broker"
                     else f"{said.sender} ◆" if said.kind == "world" else f"{COORDINATOR} ⏰")
            style = {"request": "bold", "response": "", "decision": "yellow", "timer": "cyan",
                     "coordinator": "red", "fault": "bold red", "world": "magenta", "broker": "bold red",
                     "cluster": "yellow"}.get(said.kind, "")
            yield style, f"{when if i == 0 else '':>12}  {arrow}: {said.text}"
            if said.why and (show_all or said.why not in told):  # each rule once, where the run first shows it
                told.add(said.why)
                yield "italic dim", f"{'':14}{c.t('why.line', why=said.why)}"
        if s.changed and s.group is not None:
            yield "green", f"{'':14}⇒ " + c.t(s.state_key, group=s.group, state=s.state, generation=s.generation)
        if on_step is not None and not on_step():
            return


# ----------------------------------------------------------------------------- markdown


def markdown(story: Story, steps: list[Narrated], c: Catalog, title: str, intro: str | None = None,
             show_all: bool = False, level: int = 1) -> str:
    """The page; `level` is its heading's (a lesson's variants are sections of the lesson's page)."""
    out = [f"{'#' * level} {title}", ""]
    if intro:
        out += [intro, ""]
    told: set[str] = set()
    for chunk in chunks(steps, show_all):
        if isinstance(chunk, list):
            out += [f"_{c.t('routine', count=len(chunk), kinds=routine_kinds(chunk))}_", ""]
            continue
        s = chunk
        out.append(f"**{seconds(story, s.ts_ms)}**")
        out.append("")
        for said in s.lines:
            who = (f"`{said.sender}` → `{said.receiver}`" if said.kind in ("request", "response", "fault")
                   else f"`{COORDINATOR}` ⇒ `{said.receiver}`" if said.kind == "decision"
                   else f"`{said.sender}` ⇒ `{said.receiver}`" if said.kind == "cluster"
                   else f"`{said.sender}` ⚡" if said.kind == "broker"
                   else f"`{said.sender}` ◆" if said.kind == "world" else f"`{COORDINATOR}` ⏰")
            out.append(f"- {who}: {_md(said.text)}")
            if said.why and (show_all or said.why not in told):
                told.add(said.why)
                out.append(f"  > {_md(said.why)}")
        if s.changed and s.group is not None:
            out.append(f"- *{c.t(s.state_key, group=s.group, state=s.state, generation=s.generation)}*")
        out.append("")
    # The same story as a sequence diagram, which Markdown viewers that know mermaid draw.
    out += [f"{'#' * (level + 1)} {c.t('markdown.diagram')}", "", "```mermaid",
            mermaid(story, steps, c, show_all).rstrip(), "```", ""]
    return "\n".join(out).rstrip() + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


# ----------------------------------------------------------------------------- mermaid


# Group states in which a rebalance is under way: the diagram shades them as one block.
_REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})
TIME_NOTE_MS = 1000  # a pause at least this long between two steps gets a note with the time


def mermaid(story: Story, steps: list[Narrated], c: Catalog, show_all: bool = False) -> str:
    """A mermaid `sequenceDiagram`: the coordinator and each member a participant (a crashed one
    too: its crash is a note over its own lifeline), requests and answers as arrows, decisions and
    state changes as notes over the coordinator, the time wherever a second or more passed (the
    initial delay, a session timeout's silence), and each rebalance a shaded block from its start
    to Stable (the whys are left to the text and Markdown forms: a diagram is for the shape)."""
    names = [COORDINATOR]  # a participant per process: a client's later member ids (`m-1·2`) are the same lifeline
    for s in steps:
        for said in s.lines:
            if said.kind in ("request", "response"):
                who_all = [said.sender, said.receiver]
            elif said.kind == "fault":  # a member it strikes (a crash) has a lifeline of its own
                who_all = [m for m in said.receiver.split(", ") if m not in (COORDINATOR, "simulator")]
            else:
                who_all = []
            for who in who_all:
                if _process(who) not in names:
                    names.append(_process(who))
    alias = {name: f"P{i}" for i, name in enumerate(names)}
    out = ["sequenceDiagram"] + [f"    participant {alias[n]} as {_mm(n)}" for n in names]
    coordinator = alias[COORDINATOR]
    everyone = f"{coordinator},{alias[names[-1]]}" if len(names) > 1 else coordinator
    last_ms: int | None = None
    shaded = False
    for chunk in chunks(steps, show_all):
        if isinstance(chunk, list):
            out.append(f"    Note over {coordinator}: {_mm(c.t('mermaid.routine', count=len(chunk)))}")
            continue
        if last_ms is None or chunk.ts_ms - last_ms >= TIME_NOTE_MS:
            later = "" if last_ms is None else " " + c.t("mermaid.later", seconds=f"{(chunk.ts_ms - last_ms) / 1000:.1f}")
            out.append(f"    Note over {everyone}: ⏱ {_mm(seconds(story, chunk.ts_ms) + later)}")
        last_ms = chunk.ts_ms
        for said in chunk.lines:
            if said.kind == "fault":
                where = ",".join(alias[_process(m)] for m in said.receiver.split(", ") if _process(m) in alias) or coordinator
                out.append(f"    Note over {where}: ⚡ {_mm(said.text)}")
            elif said.kind == "world":
                where = alias.get(_process(said.sender), coordinator)
                out.append(f"    Note over {where}: ◆ {_mm(said.text)}")
            elif said.kind == "broker":
                out.append(f"    Note over {coordinator}: ⚡ {_mm(said.text)}")
            elif said.kind == "request":  # to the coordinator, or in a cluster the broker it reached
                out.append(f"    {alias[_process(said.sender)]}->>{alias[_process(said.receiver)]}: {_mm(said.text)}")
            elif said.kind == "response":
                out.append(f"    {alias[_process(said.sender)]}-->>{alias[_process(said.receiver)]}: {_mm(said.text)}")
            else:
                out.append(f"    Note over {coordinator}: {_mm(said.text)}")
        if chunk.changed and chunk.group is not None:
            out.append(f"    Note over {coordinator}: "
                       + _mm(c.t(chunk.state_key, group=chunk.group, state=chunk.state, generation=chunk.generation)))
            if chunk.state in _REBALANCING and not shaded:
                out.append("    rect rgba(255, 190, 0, 0.12)")
                out.append(f"    Note over {everyone}: {_mm(c.t('mermaid.rebalance'))}")
                shaded = True
            elif chunk.state not in _REBALANCING and shaded:
                out.append("    end")
                shaded = False
    if shaded:
        out.append("    end")
    return "\n".join(out) + "\n"


def _process(name: str) -> str:
    return name.split("·", 1)[0]


def _mm(text: str) -> str:
    """Text mermaid reads as one message: no statement separators, no entity or comment starts."""
    return " ".join(text.replace(";", ",").replace("#", "＃").replace("%%", "%").split())


def participants(lines: Iterable[str]) -> list[str]:
    return [line.split(" as ", 1)[1] for line in lines if line.strip().startswith("participant ")]
