"""The dashboard's buttons, checked and carried out on the LocalCluster, one at a time; and what
only the processes know (records processed, lag, which apps run) for the page.

Each action returns a one-line message for the page, or raises ActionError (the web layer answers
400 with it): an unknown member, a bad number, a fault the cluster refuses. Nothing half-done. The
messages are the catalogue's `ui.answer.*` texts in the dashboard's language; a refusal the
cluster words itself (ClusterError, NodeError, UnknownAssignor) is said again from `ui.refused.*`
(`say_refusal`), so grouplab/cluster.py keeps one language.
"""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

from grouplab.consumer.assignors import UnknownAssignor, assignor_names
from grouplab.cluster import ClusterError, LocalCluster
from grouplab.coordinator.nodes import NodeError
from grouplab.protocol.types import TopicPartition
from grouplab.teach.catalog import Catalog

DEFAULT_PARTITION_S = 15.0


class ActionError(ValueError):
    """A request the dashboard refuses: one line saying why; nothing was changed."""


# The cluster's own refusals (grouplab/cluster.py, coordinator/nodes.py, server.py, the assignors'
# registry) -> catalogue key; the en templates say them exactly as written (tests/test_ui_texts.py).
REFUSALS = [
    (re.compile(r"no running member '(?P<name>[^']*)' \(running: (?P<known>.*)\)"), "ui.refused.no_member"),
    (re.compile(r"(?P<name>\S+) is already hung; resume it first"), "ui.refused.already.hang"),
    (re.compile(r"(?P<name>\S+) is already slowed down; resume it first"), "ui.refused.already.slow"),
    (re.compile(r"(?P<name>\S+) is already partitioned from the coordinator; resume it first"),
     "ui.refused.already.partition"),
    (re.compile(r"no fault proxy in this cluster: start it with proxy=True \(grouplab ui does\)"), "ui.refused.no_proxy"),
    (re.compile(r"a partition lasts from more than 0 to 3600 seconds, not (?P<seconds>\S+)"),
     "ui.refused.partition_seconds"),
    (re.compile(r"(?P<name>\S+) is running normally: nothing to resume"), "ui.refused.not_faulted"),
    (re.compile(r"unknown topic '(?P<topic>[^']*)' \(topics: (?P<topics>.*)\)"), "ui.refused.unknown_topic"),
    (re.compile(r"(?P<topic>\S+) has (?P<current>\d+) partitions: give a larger total, not (?P<total>-?\d+)"),
     "ui.refused.smaller_total"),
    (re.compile(r"CreatePartitions (?P<topic>\S+) -> (?P<total>\d+) refused: (?P<error>.*)"), "ui.refused.create_partitions"),
    (re.compile(r"give at least one assignor"), "ui.refused.no_assignor"),
    (re.compile(r"unknown assignor '(?P<name>[^']*)'; available: (?P<names>.*)"), "ui.refused.unknown_assignor"),
    (re.compile(r"no broker (?P<node>-?\d+): this cluster's brokers are 0\.\.(?P<last>\d+)"), "ui.refused.no_broker"),
    (re.compile(r"broker (?P<node>-?\d+) is already down"), "ui.refused.broker_down"),
    (re.compile(r"broker (?P<node>-?\d+) is already running"), "ui.refused.broker_running"),
    (re.compile(r"this coordinator is one broker \(start it with --brokers N for a cluster\)"),
     "ui.refused.one_broker_server"),
]


def say_refusal(text: str, c: Catalog) -> str:
    """A refusal of the cluster's in the catalogue's language; one it does not know, as it came."""
    for pattern, key in REFUSALS:
        m = pattern.fullmatch(text)
        if m is not None:
            fields = m.groupdict()
            if fields.get("known") == "none":
                fields["known"] = c.t("none")
            return c.t(key, **fields)
    return text


def _text(params: dict[str, Any], key: str, c: Catalog, default: str | None = None) -> str:
    value = params.get(key, default)
    if value is None:
        raise ActionError(c.t("ui.answer.missing", key=key))
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    if not isinstance(value, str):
        raise ActionError(c.t("ui.answer.not_text", key=key, value=repr(value)))
    return value


def _number(params: dict[str, Any], key: str, c: Catalog, default: float | None = None) -> float:
    value = params.get(key, default)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ActionError(c.t("ui.answer.not_number", key=key, value=repr(value))) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ActionError(c.t("ui.answer.not_number", key=key, value=repr(value)))
    return float(value)


def _assignors(text: str, c: Catalog) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ActionError(c.t("ui.answer.no_assignors", names=", ".join(assignor_names())))
    return names


class Controls:
    """The actions the page can ask for, by name (docs/ui.md §3)."""

    MEMBER_ACTIONS = ("kill", "hang", "slow", "resume", "partition", "assignor")

    def __init__(self, cluster: LocalCluster, lang: str = "en") -> None:
        self.cluster = cluster
        self.c = Catalog(lang)
        self._lock = asyncio.Lock()  # one action at a time: a restart is not interleaved with a kill

    async def member(self, name: str, action: str, params: dict[str, Any]) -> str:
        say = self.c.t
        if action not in self.MEMBER_ACTIONS:
            raise ActionError(say("ui.answer.unknown_action", action=repr(action), known=", ".join(self.MEMBER_ACTIONS)))
        c = self.cluster
        async with self._lock:
            try:
                if action == "kill":
                    await c.crash_consumer(name)
                    return say("ui.answer.killed", name=name)
                if action == "hang":
                    c.hang_consumer(name)
                    return say("ui.answer.hangs", name=name)
                if action == "slow":
                    c.slow_consumer(name)
                    return say("ui.answer.slow", name=name)
                if action == "resume":
                    c.resume_consumer(name)
                    return say("ui.answer.resumed", name=name)
                if action == "partition":
                    seconds = _number(params, "seconds", self.c, DEFAULT_PARTITION_S)
                    c.partition_consumer(name, seconds)
                    return say("ui.answer.partitioned", name=name, seconds=seconds)
                assignors = _assignors(_text(params, "assignors", self.c), self.c)
                await c.switch_assignor(name, assignors)
                return say("ui.answer.switched", name=name, assignors=",".join(assignors))
            except (ClusterError, UnknownAssignor) as exc:
                raise ActionError(say_refusal(str(exc), self.c)) from None

    async def add_member(self, params: dict[str, Any]) -> str:
        raw = params.get("assignors")
        assignors = _assignors(_text(params, "assignors", self.c), self.c) if raw not in (None, "", []) else None
        async with self._lock:
            try:
                if assignors is not None:
                    from grouplab.consumer.assignors import get_assignor

                    for a in assignors:
                        get_assignor(a)
                app = await self.cluster.add_member(assignors)
            except (ClusterError, UnknownAssignor) as exc:
                raise ActionError(say_refusal(str(exc), self.c)) from None
        return self.c.t("ui.answer.added", client=app.client.config.client_id)

    async def add_partitions(self, topic: str, params: dict[str, Any]) -> str:
        total = _number(params, "partitions", self.c)
        if total != int(total) or not 1 <= total <= 10_000:
            raise ActionError(self.c.t("ui.answer.bad_total", total=total))
        async with self._lock:
            try:
                await self.cluster.add_partitions(topic, int(total))
            except ClusterError as exc:
                raise ActionError(say_refusal(str(exc), self.c)) from None
        return self.c.t("ui.answer.partitions_added", topic=topic, total=int(total))

    BROKER_ACTIONS = ("kill", "restart")

    async def broker(self, node_text: str, action: str) -> str:
        """Kill or restart one broker of a cluster (CoordinatorServer.kill_broker / restart_broker):
        its partitions move, and the group's coordinator with its __consumer_offsets partition."""
        say = self.c.t
        if action not in self.BROKER_ACTIONS:
            raise ActionError(say("ui.answer.unknown_broker_action", action=repr(action),
                                  known=", ".join(self.BROKER_ACTIONS)))
        try:
            node = int(node_text)
        except ValueError:
            raise ActionError(say("ui.answer.not_a_node", node=repr(node_text))) from None
        server = self.cluster.server
        if server is None or server.broker.cluster is None:
            raise ActionError(say("ui.answer.one_broker"))
        async with self._lock:
            try:
                if action == "kill":
                    await server.kill_broker(node)
                    after = server.coordinator_of(self.cluster.group_id)
                    where = say("ui.answer.where", node=after) if after >= 0 else say("ui.answer.where_none")
                    return say("ui.answer.broker_killed", node=node, group=self.cluster.group_id, where=where)
                await server.restart_broker(node)
                return say("ui.answer.broker_back", node=node)
            except NodeError as exc:
                raise ActionError(say_refusal(str(exc), self.c)) from None

    async def restart_coordinator(self) -> str:
        async with self._lock:
            try:
                await self.cluster.restart_coordinator()
            except OSError as exc:
                raise ActionError(self.c.t("ui.answer.listen_again", port=self.cluster.port,
                                           error=exc.strerror or exc)) from None
        if self.cluster.data_dir is None:
            return self.c.t("ui.answer.restarted_lost")
        return self.c.t("ui.answer.restarted_durable")


def cluster_info(cluster: LocalCluster) -> dict[str, Any]:
    """What only the processes know, read-only and cheap: which apps run and what each processed,
    which are faulted, and per partition the committed offset, log end offset and lag (read from
    the in-process broker)."""
    apps = [{"client_id": a.client.config.client_id, "member_id": a.client.member_id,
             "assignors": list(a.client.config.assignors), "processed": sum(a.stats.processed.values()),
             "fault": (cluster.member_faults[a.client.config.client_id].kind
                       if a.client.config.client_id in cluster.member_faults else None),
             "state": a.client.state.value}
            for a in cluster.apps]
    offsets: list[dict[str, Any]] = []
    server = cluster.server
    if server is not None:
        broker = server.broker
        group = broker.groups.get(cluster.group_id)
        for topic, count in sorted(broker.topics.partitions.items()):
            for p in range(count):
                log = broker.logs.existing(topic, p)
                end = log.log_end_offset if log is not None else 0
                om = group.offsets.get(TopicPartition(topic, p)) if group is not None else None
                committed = om.offset if om is not None else None
                offsets.append({"topic": topic, "partition": p, "log_end_offset": end, "committed": committed,
                                "lag": None if committed is None else max(0, end - committed)})
    return {"apps": apps, "stopped": [a.client.config.client_id for a in cluster.stopped],
            "proxy": cluster.proxy is not None, "data_dir": None if cluster.data_dir is None else str(cluster.data_dir),
            "restarts": cluster.restarts, "port": cluster.port, "assignors": assignor_names(), "offsets": offsets}
