"""`grouplab simulate --protocol zk`: one seed of a ZooKeeper-era scenario (grouplab/zk/scenario.py)
with its event logs (one file per node, as the coordinator simulator writes them) and a readable
timeline, or many seeds with the invariants checked in each (docs/legacy.md §5). Its words come
from the catalogue (`sim.zk.*` keys); a change the catalogue has no sentence for (a fault's own
name, `delay_watches c-1 300 ms`) keeps the simulator's words."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.table import Table

from grouplab.sim.runner import RunDirEvents
from grouplab.sim.timeline import Timeline
from grouplab.zk.sim import Violation, ZkResult, ZkScenario, ZkSimulation
from grouplab.protocol.effects import LogEvent
from grouplab.teach.catalog import Catalog


# Why a ZooKeeper-era rebalance attempt failed (consumer/legacy/connector.py's texts) -> catalogue key.
ATTEMPT_REASONS = [
    (re.compile(r"(?P<count>\d+) partition\(s\) still owned by another consumer thread"), "sim.zk.reason.still_owned"),
    (re.compile(r"consumer (?P<consumer>\S+) vanished while the registry was read"), "sim.zk.reason.vanished"),
    (re.compile(r"this consumer's own registration is missing"), "sim.zk.reason.own_missing"),
    (re.compile(r"cannot read (?P<path>\S+): (?P<error>\S+)"), "sim.zk.reason.cannot_read"),
]


def say_reason(reason: str, c: Catalog) -> str:
    """A failed attempt's reason in the catalogue's words; one it does not know as it came."""
    for pattern, key in ATTEMPT_REASONS:
        m = pattern.fullmatch(reason)
        if m is not None:
            return c.t(key, **m.groupdict())
    return reason


def _pairs(partitions: list[list[object]], c: Catalog) -> str:
    by_topic: dict[str, list[str]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(str(topic), []).append(str(partition))
    return " ".join(f"{t}[{','.join(ps)}]" for t, ps in by_topic.items()) or c.t("sim.zk.nothing")


@dataclass
class ZkTimeline(Timeline):
    """The simulator's changes and faults as the coordinator simulator's timeline shows them, and
    what the consumers did about them: rebalances done (the herd), claim conflicts, give-ups,
    sessions that expired."""

    def __call__(self, node: str, ev: LogEvent) -> None:
        f, c = ev.fields, self.c
        if node == "simulator":
            super().__call__(node, ev)
        elif ev.event == "registry_session_expired":
            self.rows.append((ev.ts_ms, c.t("sim.zk.registry_session_expired"),
                              c.t("sim.zk.registry_session_expired.detail", session=f["session_id"], ms=f["timeout_ms"])))
        elif ev.event == "zk_session_expired":
            running = c.t("sim.zk.fetchers_run_on", partitions=_pairs(f["fetching"], c)) if f["fetching"] else ""
            self.rows.append((ev.ts_ms, c.t("sim.zk.session_expired"),
                              c.t("sim.zk.session_expired.detail", node=node, running=running)))
        elif ev.event == "zk_rebalance_done":
            self.rows.append((ev.ts_ms, c.t("sim.zk.rebalanced"),
                              c.t("sim.zk.rebalanced.detail", node=node, partitions=_pairs(f["partitions"], c),
                                  attempt=f["attempt"], reads=f["reads"], writes=f["writes"])))
        elif ev.event == "zk_claim_conflict":
            self.rows.append((ev.ts_ms, c.t("sim.zk.claim_conflict"),
                              c.t("sim.zk.claim_conflict.detail", node=node, partitions=_pairs(f["partitions"], c),
                                  attempt=f["attempt"])))
        elif ev.event == "zk_rebalance_failed":
            self.rows.append((ev.ts_ms, c.t("sim.zk.gave_up"),
                              c.t("sim.zk.gave_up.detail", node=node, attempts=f["attempts"],
                                  reason=say_reason(f["reason"], c))))


def run_zk_seed(scenario: ZkScenario, seed: int, run_dir: str | Path | None = None,
                listener: Callable[[str, LogEvent], None] | None = None) -> ZkResult:
    """One seed; its event log into `run_dir` (one JSON-lines file per node) and to `listener`.
    A broken invariant raises Violation, naming the seed."""
    sink = RunDirEvents(run_dir) if run_dir is not None else None

    def emit(node: str, ev: LogEvent) -> None:
        if sink is not None:
            sink(node, ev)
        if listener is not None:
            listener(node, ev)

    try:
        return ZkSimulation(scenario, seed, emit if sink is not None or listener is not None else None).run()
    finally:
        if sink is not None:
            sink.close()


CHANGE_COLUMNS = ("at", "settled", "reads", "writes", "offsets", "rebalances", "failed", "gave_up", "unowned")
# A change as the simulator names it (`join c-1`, `add_partitions t to 8`) -> its catalogue sentence.
CHANGE_WORDS = {"join": "sim.zk.change.join", "leave": "sim.zk.change.leave", "crash": "sim.zk.change.crash"}


def say_change(what: str, c: Catalog) -> str:
    """`join c-1; crash c-2` in the catalogue's words; a change it has no sentence for as it came."""
    said = []
    for part in what.split("; "):
        kind, _, rest = part.partition(" ")
        topic, to, total = rest.partition(" to ")
        if kind in CHANGE_WORDS and rest and " " not in rest:
            said.append(c.t(CHANGE_WORDS[kind], member=rest))
        elif kind == "add_partitions" and to and total.isdigit():
            said.append(c.t("sim.zk.change.add_partitions", topic=topic, total=total))
        elif len(words := rest.split(" ")) == 3 and words[1].isdigit() and words[2] == "ms":  # a fault: `pause c-1 9000 ms`
            said.append(c.t("sim.zk.change.fault", fault=kind, member=words[0], ms=words[1]))
        else:
            said.append(part)
    return "; ".join(said)


def changes_table(result: ZkResult, title: str, c: Catalog | None = None) -> Table:
    """Each change's cost, a fault's too (changes at one moment are one), as `grouplab compare`
    counts it."""
    c = c or Catalog()
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column(c.t("sim.zk.col.change"))
    for col in CHANGE_COLUMNS:
        table.add_column(c.t(f"sim.zk.col.{col}"), justify="right")
    for ch in result.changes:
        table.add_row(say_change(ch.what, c), f"{ch.at_ms / 1000:.3f}",
                      c.t("sim.zk.not_settled") if ch.settle_ms is None else f"{ch.settle_ms / 1000:.3f}",
                      str(ch.reads), str(ch.writes), str(ch.offset_ops), str(sum(ch.rebalances.values())),
                      str(ch.attempts_failed), str(ch.gave_up), f"{ch.unowned_ms / 1000:.1f}")
    return table


def summary_line(scenario: ZkScenario, results: list[ZkResult], failed: list[Violation], c: Catalog | None = None) -> str:
    c = c or Catalog()
    return (c.t("sim.zk.summary", scenario=scenario.name, seeds=len(results) + len(failed),
                events=f"{sum(r.events for r in results):,}", rebalances=sum(r.rebalances for r in results),
                reads=sum(r.reads for r in results), writes=sum(r.writes for r in results),
                failed=sum(r.attempts_failed for r in results), gave_up=sum(r.gave_up for r in results),
                unowned=f"{sum(r.unowned_partition_ms for r in results) / 1000:,.1f}")
            + _zombies(results, c)
            + (c.t("sim.held") if not failed else c.t("sim.failed_seeds", seeds=[v.seed for v in failed])))


def _zombies(results: list[ZkResult], c: Catalog) -> str:
    """The zombie windows, said whenever there were any (docs/legacy.md §4)."""
    windows = [w for r in results for w in r.zombie_windows]
    if not windows:
        return ""
    longest = max(windows, key=lambda w: w.ms)
    return c.t("sim.zk.zombies", count=len(windows), consumer=longest.consumer, s=f"{longest.ms / 1000:.3f}",
               start=f"{longest.from_ms / 1000:.3f}",
               fetched=f"{sum(r.zombie_partition_ms for r in results) / 1000:,.1f}",
               twice=f"{sum(r.double_fetch_ms for r in results) / 1000:,.1f}")
