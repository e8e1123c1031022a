"""The dashboard's buttons, checked and carried out on the LocalCluster, one at a time; and what
only the processes know (records processed, lag, which apps run) for the page.

Each action returns a one-line message for the page, or raises ActionError (the web layer answers
400 with it): an unknown member, a bad number, a fault the cluster refuses. Nothing half-done.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from grouplab.consumer.assignors import UnknownAssignor, assignor_names
from grouplab.cluster import ClusterError, LocalCluster
from grouplab.coordinator.nodes import NodeError
from grouplab.protocol.types import TopicPartition

DEFAULT_PARTITION_S = 15.0


class ActionError(ValueError):
    """A request the dashboard refuses: one line saying why; nothing was changed."""


def _text(params: dict[str, Any], key: str, default: str | None = None) -> str:
    value = params.get(key, default)
    if value is None:
        raise ActionError(f"missing {key!r}")
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    if not isinstance(value, str):
        raise ActionError(f"{key!r} must be text, got {value!r}")
    return value


def _number(params: dict[str, Any], key: str, default: float | None = None) -> float:
    value = params.get(key, default)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ActionError(f"{key!r} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ActionError(f"{key!r} must be a number, got {value!r}")
    return float(value)


def _assignors(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ActionError(f"give one or more assignors: {', '.join(assignor_names())}")
    return names


class Controls:
    """The actions the page can ask for, by name (docs/ui.md §3)."""

    MEMBER_ACTIONS = ("kill", "hang", "slow", "resume", "partition", "assignor")

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self._lock = asyncio.Lock()  # one action at a time: a restart is not interleaved with a kill

    async def member(self, name: str, action: str, params: dict[str, Any]) -> str:
        if action not in self.MEMBER_ACTIONS:
            raise ActionError(f"unknown member action {action!r}; known: {', '.join(self.MEMBER_ACTIONS)}")
        c = self.cluster
        async with self._lock:
            try:
                if action == "kill":
                    await c.crash_consumer(name)
                    return f"killed {name}: no LeaveGroup; the coordinator removes it after its session timeout"
                if action == "hang":
                    c.hang_consumer(name)
                    return f"{name} hangs: no heartbeats, no polls; resume it, or wait for its session timeout"
                if action == "slow":
                    c.slow_consumer(name)
                    return f"{name} stopped polling (heartbeats go on): it leaves after max.poll.interval.ms"
                if action == "resume":
                    c.resume_consumer(name)
                    return f"{name} resumed"
                if action == "partition":
                    seconds = _number(params, "seconds", DEFAULT_PARTITION_S)
                    c.partition_consumer(name, seconds)
                    return f"{name} is cut off from the coordinator for {seconds:g} s"
                assignors = _assignors(_text(params, "assignors"))
                await c.switch_assignor(name, assignors)
                return f"{name} restarted with assignors {','.join(assignors)}"
            except (ClusterError, UnknownAssignor) as exc:
                raise ActionError(str(exc)) from None

    async def add_member(self, params: dict[str, Any]) -> str:
        raw = params.get("assignors")
        assignors = _assignors(_text(params, "assignors")) if raw not in (None, "", []) else None
        async with self._lock:
            try:
                if assignors is not None:
                    from grouplab.consumer.assignors import get_assignor

                    for a in assignors:
                        get_assignor(a)
                app = await self.cluster.add_member(assignors)
            except (ClusterError, UnknownAssignor) as exc:
                raise ActionError(str(exc)) from None
        return f"added {app.client.config.client_id}"

    async def add_partitions(self, topic: str, params: dict[str, Any]) -> str:
        total = _number(params, "partitions")
        if total != int(total) or not 1 <= total <= 10_000:
            raise ActionError(f"'partitions' is the new total, a whole number from 1 to 10000, not {total:g}")
        async with self._lock:
            try:
                await self.cluster.add_partitions(topic, int(total))
            except ClusterError as exc:
                raise ActionError(str(exc)) from None
        return f"{topic} now has {int(total)} partitions; the leader will notice and rebalance"

    BROKER_ACTIONS = ("kill", "restart")

    async def broker(self, node_text: str, action: str) -> str:
        """Kill or restart one broker of a cluster (CoordinatorServer.kill_broker / restart_broker):
        its partitions move, and the group's coordinator with its __consumer_offsets partition."""
        if action not in self.BROKER_ACTIONS:
            raise ActionError(f"unknown broker action {action!r}; known: {', '.join(self.BROKER_ACTIONS)}")
        try:
            node = int(node_text)
        except ValueError:
            raise ActionError(f"a broker is a node id, not {node_text!r}") from None
        server = self.cluster.server
        if server is None or server.broker.cluster is None:
            raise ActionError("this coordinator is one broker: start a cluster of brokers to kill one")
        async with self._lock:
            try:
                if action == "kill":
                    await server.kill_broker(node)
                    after = server.coordinator_of(self.cluster.group_id)
                    where = f"broker {after}" if after >= 0 else "no broker (none is live)"
                    return f"killed broker {node}: its connections are cut; {self.cluster.group_id}'s coordinator is {where}"
                await server.restart_broker(node)
                return (f"broker {node} is back: it leads nothing until the next preferred-leader election "
                        "(auto.leader.rebalance.enable)")
            except NodeError as exc:
                raise ActionError(str(exc)) from None

    async def restart_coordinator(self) -> str:
        async with self._lock:
            try:
                await self.cluster.restart_coordinator()
            except OSError as exc:
                raise ActionError(f"the coordinator could not listen again on port {self.cluster.port}: "
                                  f"{exc.strerror or exc}") from None
        if self.cluster.data_dir is None:
            return ("coordinator restarted without a data directory: groups, offsets and records are gone; "
                    "the members rejoin from scratch")
        return "coordinator restarted from its data directory: groups and offsets are back"


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
