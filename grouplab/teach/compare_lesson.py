"""A lesson told through `grouplab compare` (`[lesson] compare = true`: zk-vs-coordinator): the
lesson's members, topics and changes become compare's script, played in the simulators under the
ZooKeeper era, the classic protocol (eager, cooperative) and KIP-848 on the lesson's seed; each
change is told with what each design did (compare's figures, not computed a second time) and why
(the same catalogue sentences as compare's conclusion), then the verdict and what the ZooKeeper
era's speed cost.

The script keeps compare's own spacing of the changes (each far enough after the last for every
design to settle), so its times are not the scenario file's; the file's schedule says which
changes, in which order. Added partitions reach every design when they are made (compare's fair
default)."""

from __future__ import annotations

from dataclasses import dataclass

from grouplab.compare.report import SIDES, Results, cause, change_label, costs, verdict
from grouplab.compare.script import DESIGNS, Figures, Script, Settings, script, sim_names
from grouplab.compare.simulate import simulate
from grouplab.teach.catalog import Catalog

GAP_MS = 15_000  # between one change settling everywhere and the next: shorter than compare's 30 s


@dataclass
class ComparedLesson:
    script: Script
    results: Results


def lesson_settings(scenario: object) -> Settings:
    """compare's Settings from a lesson's scenario: its member count, topics, session timeout and
    the partitions its schedule adds."""
    from grouplab.sim.scenario import Scenario

    assert isinstance(scenario, Scenario)
    grow = next(f for f in scenario.schedule if f.fault == "add_partitions")
    session = int(scenario.consumer.get("session.timeout.ms", 10_000))
    return Settings(consumers=scenario.member_count, topics=dict(scenario.topics),
                    grow=(grow.topic, scenario.topics[grow.topic] + grow.partitions), session_timeout_ms=session,
                    zk_session_timeout_ms=session, gap_ms=GAP_MS, group=scenario.group_id)


def play(scenario: object, seed: int) -> ComparedLesson:
    settings = lesson_settings(scenario)
    s = script(settings, sim_names(settings.consumers), seed)
    return ComparedLesson(s, {d: simulate(s, seed, d) for d in DESIGNS})


def _row(design: str, f: Figures, c: Catalog) -> str:
    name = c.t(f"cmp.short.{design}")
    if f.settle_ms is None:
        return c.t("cmp.lesson.row.unsettled", design=name)
    common = dict(design=name, seconds=f"{f.settle_ms / 1000:.1f}", ops=f.total, idle=f"{f.idle_ms / 1000:.1f}",
                  rebalances=sum(f.rebalances.values()))
    if SIDES[design] == "zk":
        return c.t("cmp.lesson.row.zk", reads=f.messages.get("reads", 0), failed=f.failed or 0, **common)
    return c.t("cmp.lesson.row.coordinator", heartbeats=f.heartbeats or 0, **common)


def sections(told: ComparedLesson, c: Catalog) -> list[tuple[str, list[str]]]:
    """(heading, lines) per change, then the summary: what every format prints."""
    s, results = told.script, told.results
    out = []
    for i, change in enumerate(s.changes):
        heading = c.t("cmp.lesson.change", i=i + 1, change=change_label(change, c), at=f"{change.at_ms / 1000:g}")
        lines = [_row(d, figs[i], c) for d, figs in results.items()]
        lines.append(c.t("cmp.lesson.why", why=cause(s, results, i, c)))
        out.append((heading, lines))
    summary = [line for line in (verdict(s, results, c), costs(s, results, c)) if line is not None]
    return out + [(c.t("cmp.lesson.summary"), summary)]


def text_lines(told: ComparedLesson, c: Catalog) -> list[tuple[str | None, str]]:
    """(style, line) for the terminal."""
    out: list[tuple[str | None, str]] = []
    for heading, lines in sections(told, c):
        out.append(("bold", f"\n── {heading} ──"))
        out += [(None, line) for line in lines]
    return out


def markdown(told: ComparedLesson, c: Catalog, title: str, intro: str | None) -> str:
    out = [f"# {title}", ""] + ([intro, ""] if intro else [])
    for heading, lines in sections(told, c):
        out += [f"## {heading}", ""] + [f"- {line}" for line in lines] + [""]
    return "\n".join(out).rstrip() + "\n"

