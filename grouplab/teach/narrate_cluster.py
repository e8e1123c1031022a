"""The narration of a cluster of brokers for grouplab/teach/narrate.py (docs/protocol.md §12): a
broker stopping or coming back, leaders moving (summed up per new leader, not listed by the
hundred), a group's coordinator moving with its `__consumer_offsets` partition and the load that
follows (COORDINATOR_LOAD_IN_PROGRESS meanwhile, a classic Heartbeat answered NONE "blindly" as
Kafka's coordinator does), who reached the new coordinator when, and NOT_COORDINATOR told as the
move it is. With one broker (`Broker.cluster` None) none of this says anything.

The Narrator keeps one `ClusterStory`: it remembers each group's last move and which clients have
reached the new coordinator since."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grouplab.coordinator.broker import Broker
from grouplab.coordinator.brokers import ELECTION_TIMER, LOAD_TIMER
from grouplab.coordinator.placement import GROUP_METADATA_TOPIC, NO_LEADER
from grouplab.protocol import events
from grouplab.protocol.types import TopicPartition
from grouplab.teach.catalog import Catalog
from grouplab.teach.notes import compact

if TYPE_CHECKING:
    from grouplab.replay import Step
    from grouplab.teach.narrate import Narrator, Said

CLUSTER_EVENTS = (events.BrokerStopped, events.BrokerStarted, events.LeadersMoved, events.CoordinatorMoved,
                  events.CoordinatorLoaded)
ELECTIONS = ("preferred_election", "auto_leader_rebalance")
SHOWN = 6  # a new leader's partitions of users' topics named up to this many; beyond, counted


def leaders_summary(c: Catalog, moved: list[list[Any]]) -> str:
    """`leaders_moved`'s partitions per new leader: those of users' topics it took (named when few,
    else counted) and how many of each internal topic: `broker 2 ← t-1, 17 of __transaction_state`.
    A broker stopping in a real cluster moves hundreds; a line names who took how many."""
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for topic, partition, _old, new, _epoch in moved:
        by_leader.setdefault(int(new), []).append((str(topic), int(partition)))
    out = []
    for leader, parts in sorted(by_leader.items()):
        users = [TopicPartition(t, p) for t, p in parts if not t.startswith("__")]
        internal: dict[str, int] = {}
        for t, _ in parts:
            if t.startswith("__"):
                internal[t] = internal.get(t, 0) + 1
        what = [compact(users) if len(users) <= SHOWN else c.t("cluster.count", count=len(users))] if users else []
        what += [c.t("cluster.internal", count=k, topic=t) for t, k in sorted(internal.items())]
        who = c.t("cluster.nobody") if leader == NO_LEADER else c.t("cluster.broker", node=leader)
        out.append(c.t("cluster.leads", who=who, partitions=", ".join(what)))
    return "; ".join(out)


@dataclass
class _Move:
    ts_ms: int
    partition: int
    from_node: int
    to_node: int
    cause: str
    load_ms: int
    found: set[str] = field(default_factory=set)  # clients whose group request reached to_node since


@dataclass
class ClusterStory:
    n: "Narrator"
    moves: dict[str, _Move] = field(default_factory=dict)  # group -> its coordinator's last move

    @staticmethod
    def active(broker: Broker | None) -> bool:
        return broker is not None and broker.cluster is not None

    def broker_name(self, node: int) -> str:
        return self.n.c.t("cluster.broker", node=node)

    def coordinator_name(self, broker: Broker | None, group_id: str) -> str:
        from grouplab.teach.narrate import COORDINATOR

        if broker is None or broker.cluster is None:
            return COORDINATOR
        node = broker.cluster.coordinator_of(group_id)
        return self.broker_name(node) if node != NO_LEADER else COORDINATOR

    # ------------------------------------------------------------------ inputs

    def input_line(self, line: dict[str, Any]) -> "Said":
        """The trace's `broker` line: a broker stopped or came back, or an election was asked for."""
        from grouplab.teach.narrate import Said

        c, op, node = self.n.c, str(line["op"]), int(line["node"])
        if op == "down":
            how = "shutdown" if line.get("how") == "shutdown" else "killed"
            return Said(c.t("cluster"), "", c.t(f"cluster.down.{how}", node=node), c.t(f"why.cluster.down.{how}"),
                        kind="broker", raw=line)
        if op == "up":
            return Said(c.t("cluster"), "", c.t("cluster.up", node=node), c.t("why.cluster.up"), kind="broker", raw=line)
        return Said(c.t("cluster"), "", c.t("cluster.elect"), c.t("why.cluster.elect"), kind="broker", raw=line)

    def timer_text(self, key: list[Any], broker: Broker | None) -> str | None:
        c = self.n.c
        if tuple(key) == ELECTION_TIMER:
            return c.t("timer.cluster.election")
        if key and key[0] == LOAD_TIMER and len(key) > 1 and broker is not None and broker.cluster is not None:
            node = broker.cluster.nodes.leader(GROUP_METADATA_TOPIC, int(key[1]))
            return c.t("timer.cluster.load", node=node, topic=GROUP_METADATA_TOPIC, partition=key[1])
        return None

    def live_after(self, step: "Step") -> str:
        broker = step.broker
        live = sorted(broker.cluster.nodes.live) if broker is not None and broker.cluster is not None else []
        return ", ".join(map(str, live)) or self.n.c.t("none")

    # ------------------------------------------------------------------ decisions

    def decision(self, p: events.Event, ts_ms: int) -> "Said | None":
        from grouplab.teach.narrate import Said

        c = self.n.c
        if isinstance(p, (events.BrokerStopped, events.BrokerStarted)):
            live = ", ".join(map(str, p.live)) or c.t("none")
            return Said(c.t("cluster"), c.t("cluster.brokers"), c.t("cluster.live", live=live), kind="cluster")
        if isinstance(p, events.LeadersMoved):
            return Said(c.t("cluster"), c.t("cluster.leaders"), c.t("dec.cluster.leaders", count=len(p.partitions),
                                                                     moves=self.leaders_text(p.partitions)),
                        c.t("why.cluster.leaders"), kind="cluster")
        if isinstance(p, events.CoordinatorMoved):
            groups = ", ".join(p.groups)
            fields = dict(groups=groups, from_node=p.from_node, to_node=p.to_node, topic=GROUP_METADATA_TOPIC,
                          partition=p.partition, load_ms=p.load_ms)
            for g in p.groups:
                self.moves[g] = _Move(ts_ms, p.partition, p.from_node, p.to_node, p.cause, p.load_ms)
            if p.to_node == NO_LEADER:
                key, why = "dec.cluster.moved.none", "why.cluster.moved.none"
            elif p.from_node == NO_LEADER:
                key, why = "dec.cluster.moved.back_up", "why.cluster.moved"
            else:
                key = "dec.cluster.moved"
                why = "why.cluster.moved.election" if p.cause in ELECTIONS else "why.cluster.moved"
            return Said(c.t("cluster"), groups, c.t(key, **fields), c.t(why, **fields), kind="cluster")
        if isinstance(p, events.CoordinatorLoaded):
            move = next((self.moves[g] for g in p.groups if g in self.moves), None)
            took = ts_ms - move.ts_ms if move is not None else 0
            return Said(c.t("cluster"), ", ".join(p.groups), c.t(
                "dec.cluster.loaded", node=p.node_id, groups=", ".join(p.groups), topic=GROUP_METADATA_TOPIC,
                partition=p.partition, took_ms=took), c.t("why.cluster.loaded"), kind="cluster")
        return None

    def leaders_text(self, moved: list[list[Any]]) -> str:
        return leaders_summary(self.n.c, moved)

    # ------------------------------------------------------------------ answers and notes

    def error_why(self, error: str, group_id: str | None, node: int, ts_ms: int, broker: Broker | None) -> str | None:
        """NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS as the move they come from."""
        if group_id is None or broker is None or broker.cluster is None:
            return None
        c, move = self.n.c, self.moves.get(group_id)
        if error == "NOT_COORDINATOR":
            leader = broker.cluster.coordinator_of(group_id)
            if move is not None and move.to_node == leader and move.from_node == node:
                return c.t("why.cluster.NOT_COORDINATOR.moved", group=group_id, node=node, from_node=move.from_node,
                           to_node=move.to_node, cause=c.t(f"cluster.cause.{move.cause}", node=move.from_node),
                           ago_s=f"{(ts_ms - move.ts_ms) / 1000:.3f}")
            return c.t("why.cluster.NOT_COORDINATOR", group=group_id, node=node, leader=leader,
                       topic=GROUP_METADATA_TOPIC, partition=broker.cluster.partition_of(group_id))
        if error == "COORDINATOR_LOAD_IN_PROGRESS" and move is not None:
            return c.t("why.cluster.COORDINATOR_LOAD_IN_PROGRESS", group=group_id, node=node,
                       topic=GROUP_METADATA_TOPIC, partition=move.partition, ago_ms=ts_ms - move.ts_ms,
                       left_ms=max(0, move.ts_ms + move.load_ms - ts_ms))
        return None

    def after_request(self, step: "Step", api: str, body: Any, client: str, answered: bool) -> list["Said"]:
        """What a request at a broker of a cluster shows beyond its answer: nobody answered (its
        broker is down), a Heartbeat answered NONE while the group loads, and the first request of
        each client that reached its group's new coordinator."""
        from grouplab.teach.narrate import Said

        broker, c = step.broker, self.n.c
        if broker is None or broker.cluster is None:
            return []
        node = int(step.line.get("node", 0))
        out: list[Said] = []
        if node not in broker.cluster.nodes.live:
            return [Said(self.broker_name(node), client, c.t("note.cluster.unanswered", node=node), c.t("why.cluster.unanswered"),
                         kind="cluster")]
        group_id = getattr(body, "group_id", None)
        if not isinstance(group_id, str) or not group_id:
            return out
        partition = broker.cluster.partition_of(group_id)
        loading = partition in broker.cluster.loading and broker.cluster.coordinator_of(group_id) == node
        move = self.moves.get(group_id)
        if move is not None and node == move.to_node and client not in move.found:
            move.found.add(client)
            out.append(Said(self.broker_name(node), group_id, c.t("note.cluster.found", client=client, group=group_id, node=node,
                                                       after_s=f"{(int(step.line['ts_ms']) - move.ts_ms) / 1000:.3f}"),
                            c.t("why.cluster.found"), kind="cluster"))
        if api == "Heartbeat" and loading and answered:
            out.append(Said(self.broker_name(node), group_id, c.t("note.cluster.blind", node=node, group=group_id),
                            c.t("why.cluster.blind"), kind="cluster"))
        return out

    # ------------------------------------------------------------------ FindCoordinator

    def find_request(self, body: Any) -> str:
        keys = ", ".join(body.coordinator_keys or [body.key])
        return self.n.c.t("req.FindCoordinator.txn" if body.key_type == 1 else "req.FindCoordinator", keys=keys)

    def find_response(self, body: Any) -> str:
        c = self.n.c
        found = body.coordinators or []
        if len(found) <= 1:
            return c.t("resp.FindCoordinator", found=c.t("resp.FindCoordinator.at", node=body.node_id, host=body.host,
                                                         port=body.port))
        named = [f"{f.key}: " + (c.t("resp.FindCoordinator.at", node=f.node_id, host=f.host, port=f.port)
                                 if not f.error_code else c.t("resp.FindCoordinator.none")) for f in found]
        return c.t("resp.FindCoordinator", found="; ".join(named))
