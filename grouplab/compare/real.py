"""`grouplab compare --real`: the script over real sockets, every design at once in one event loop
— per coordinator design a coordinator and its consumers over loopback TCP (grouplab/cluster.py's
LocalCluster), and the ZooKeeper-era consumers on the embedded registry or a real ZooKeeper
(grouplab/zk/run.py's ZkCluster). Each change waits until its design has settled, then `hold_s`,
before the next; the figures are wall-clock."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Callable

from grouplab.compare.probe import CoordinatorProbe
from grouplab.compare.report import change_label, design_label
from grouplab.compare.script import CompareError, Figures, Script
from grouplab.compare.simulate import design_config, zk_figures
from grouplab.protocol.effects import wall_clock_ms
from grouplab.teach.catalog import Catalog

Say = Callable[[str], None]


async def run_real(script: Script, designs: list[str], zookeeper: str | None, timeout_s: float, hold_s: float,
                   say: Say, c: Catalog | None = None) -> dict[str, list[Figures]]:
    """The designs side by side; the first to fail (no ZooKeeper there, a change that does not
    settle within `timeout_s`) stops the others. `say` gets each settled change, in `c`'s language."""
    c = c or Catalog()
    try:
        async with asyncio.TaskGroup() as tasks:
            running = {d: tasks.create_task(_zookeeper(script, zookeeper, timeout_s, hold_s, say, c) if d == "zk"
                                            else _coordinator(script, d, timeout_s, hold_s, say, c)) for d in designs}
    except ExceptionGroup as group:
        first = group.exceptions[0]
        if isinstance(first, Exception) and len(group.exceptions) == 1:
            raise first from None
        raise
    return {d: task.result() for d, task in running.items()}


async def _until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _not_settled(design: str, label: str, timeout_s: float, c: Catalog) -> CompareError:
    return CompareError(c.t("cmp.real.not_settled", design=design, change=label, timeout=f"{timeout_s:g}"))


async def _coordinator(script: Script, design: str, timeout_s: float, hold_s: float, say: Say,
                       c: Catalog) -> list[Figures]:
    from grouplab.cluster import LocalCluster
    from grouplab.coordinator.config import BrokerConfig

    s = script.settings
    probe = CoordinatorProbe(s.group, set(script.consumers))
    consumer, broker, assignors = design_config(script, design)
    cluster = LocalCluster(dict(s.topics), s.group, assignors,
                           BrokerConfig().with_overrides(f"{k}={v}" for k, v in broker.items()),
                           consumer_overrides=[f"{k}={v}" for k, v in consumer.items()],
                           listeners=[probe.feed], trace_listeners=[probe.trace])
    await cluster.start()
    try:
        for change, live in zip(script.changes, script.live_after):
            probe.begin(wall_clock_ms(), live)
            if change.kind == "join":
                for name in change.members:
                    await cluster.add_consumer(name=name)
            elif change.kind in ("leave", "crash"):
                for name in change.members:
                    await cluster.stop_consumer(cluster.app(name), leave=change.kind == "leave")
            else:
                await cluster.add_partitions(change.topic, change.total)
                if not s.waits_for_max_age:  # the fair default: the classic leader hears of them at once
                    for app in cluster.apps:
                        app.client.driver.refresh_metadata()
            if not await _until(lambda: probe.settled, timeout_s):
                raise _not_settled(design_label(design, c), change_label(change, c), timeout_s, c)
            settled = probe.windows[-1].settled_ms
            say(c.t("cmp.real.settled", design=design_label(design, c), change=change_label(change, c),
                    ms=(settled or 0) - probe.windows[-1].start_ms))
            await asyncio.sleep(hold_s)
        return probe.finish(wall_clock_ms())
    finally:
        await cluster.close()


async def _zookeeper(script: Script, zookeeper: str | None, timeout_s: float, hold_s: float,
                     say: Say, c: Catalog) -> list[Figures]:
    from grouplab.zk.run import ZkCluster, ZkRunError

    s = script.settings
    cluster = ZkCluster(dict(s.topics), s.group, "range", 1,
                        [f"zookeeper.session.timeout.ms={s.zk_session_timeout_ms}"], zookeeper)
    try:
        await cluster.start()
    except ZkRunError as exc:
        raise CompareError(str(exc)) from None
    figures: list[Figures] = []
    try:
        for change in script.changes:
            began, start = time.monotonic(), cluster.counters()
            if change.kind == "join":
                for name in change.members:
                    cluster.add_consumer(name)
            elif change.kind in ("leave", "crash"):
                for name in change.members:
                    driver = next(d for d in cluster.drivers if d.consumer_id == name)
                    cluster.stop_consumer(driver, crash=change.kind == "crash")
            else:
                await cluster.add_partitions(change.topic, change.total)
            settle = await cluster.wait_settled(timeout_s, began=began)
            if settle is None:
                raise _not_settled(design_label("zk", c), change_label(change, c), timeout_s, c)
            say(c.t("cmp.real.settled", design=design_label("zk", c), change=change_label(change, c), ms=settle))
            # (what the quiet check after settling adds is nothing: no operation, no idle partition)
            figures.append(zk_figures(replace(cluster.counters().since(start, settled=True), settle_ms=settle)))
            await asyncio.sleep(hold_s)
        return figures
    finally:
        await cluster.close()
