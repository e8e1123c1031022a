"""A cluster of brokers over the Broker's one store, pure (docs/protocol.md §12).

The Broker (broker.py) holds every topic and group, as if every partition were replicated to all
brokers. `BrokerSet` is what a cluster adds: which broker each request reached (RequestContext's
`node_id`), whether that broker may answer it (routing.py), and what happens when a broker stops,
comes back, or leadership moves back to the preferred leaders (nodes.py):

- the partitions it led get new leaders (`leaders_moved`);
- the groups whose `__consumer_offsets` partition it led leave the Broker's memory, as they leave
  the old coordinator's, and the new coordinator loads them from the group log after
  grouplab.coordinator.load.time.ms, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile
  (`coordinator_moved`, then `coordinator_loaded` and each group's `group_loaded`). A load is the
  same restore a restarted coordinator does: members get fresh sessions from the load, a rebalance
  in progress is gone (its joins were held on the old coordinator's connections), a group never
  written (no member ever synced) does not exist on the new coordinator.

The group log here is the replicated `__consumer_offsets`: `_replica` keeps the latest record of
each group key the Broker persisted (as compaction keeps them), fed from every step's `Persist`
outputs, so a load needs no I/O. Transactional state is not moved: a transactional id's requests
go to its transaction coordinator (the leader of its `__transaction_state` partition), which has
it at once.

State diagram of one `__consumer_offsets` partition p:

    led by n, loaded --(n stops, or an election)--> led by n', loading until t (ArmTimer)
    loading --(timer t)--> led by n', loaded          loading --(n' stops)--> led by n'', loading
    led by n --(every broker down)--> no leader --(a broker starts)--> led by it, loading
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Protocol

from grouplab.coordinator import routing
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group_log import TOMBSTONES, Persist, Record, TopicRecord, TopicTombstone, TxnRecord, live
from grouplab.coordinator.nodes import LeaderMove, Nodes, all_partitions
from grouplab.coordinator.placement import (GROUP_METADATA_TOPIC, NO_LEADER, TRANSACTION_STATE_TOPIC,
                                            partition_for)
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Output, Reply, TimerKey
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (API, DescribeClusterBroker, DescribeClusterResponse, FindCoordinatorRequest,
                                        FindCoordinatorResponse, FoundCoordinator, HeartbeatResponse, ListGroupsResponse,
                                        MetadataResponse, MetadataResponseBroker)

LOAD_TIMER = "coordinator_load"  # ("coordinator_load", partition): the partition's groups are loaded
ELECTION_TIMER: TimerKey = ("leader_rebalance",)  # auto.leader.rebalance.enable's check
INTERNAL_TOPICS = (GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC)
GROUP_KEY, TXN_KEY = 0, 1  # FindCoordinator's key types


class StoreHost(Protocol):
    """What BrokerSet needs of the Broker that holds the store and the groups."""

    config: BrokerConfig

    def topic_partitions(self) -> dict[str, int]: ...

    def handle_here(self, api: str, body: Any, ctx: Any, now_ms: int) -> list[Output]: ...

    def group_ids(self) -> Iterable[str]: ...

    def unload_groups(self, group_ids: list[str]) -> None: ...

    def load_groups(self, records: list[Record], now_ms: int) -> list[Output]: ...


class BrokerSet:
    """Brokers 0..count-1 over one store: routing, leadership, coordinator moves and loads."""

    def __init__(self, store: StoreHost, count: int) -> None:
        self.store = store
        self.config = store.config
        self.nodes = Nodes(count)
        # Each broker's address on grouplab's own protocol (Metadata and FindCoordinator name it),
        # set by the shell once it listens; the Kafka-wire listener maps nodes to its own ports.
        self.addresses: dict[int, tuple[str, int]] = {n: ("127.0.0.1", 0) for n in range(count)}
        self.loading: dict[int, int] = {}  # __consumer_offsets partition -> when its load completes
        self._replica: dict[tuple, Record] = {}
        self._election_armed = False

    # ------------------------------------------------------------------ placement

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def coordinator_of(self, key: str, key_type: int = GROUP_KEY) -> int:
        """The broker that coordinates group `key` (key type 0) or transactional id `key` (1):
        the leader of its partition of `__consumer_offsets` (or `__transaction_state`), or -1."""
        if key_type == TXN_KEY:
            return self.nodes.leader(TRANSACTION_STATE_TOPIC,
                                     partition_for(key, self.config.transaction_state_log_num_partitions))
        return self.nodes.leader(GROUP_METADATA_TOPIC, self.partition_of(key))

    def group_refusal(self, group_id: str, node: int) -> tuple[ErrorCode, str] | None:
        """Why broker `node` may not answer for `group_id` now, or None."""
        partition = self.partition_of(group_id)
        leader = self.nodes.leader(GROUP_METADATA_TOPIC, partition)
        if leader != node:
            where = f"broker {leader} is" if leader != NO_LEADER else "no broker is (none is live)"
            return ErrorCode.NOT_COORDINATOR, f"broker {node} is not the coordinator of group {group_id!r}: {where}"
        if partition in self.loading:
            return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    f"broker {node} is loading group {group_id!r} ({GROUP_METADATA_TOPIC}-{partition})")
        return None

    def leads(self, node: int, topic: str, partition: int) -> bool:
        """Does `node` lead this partition? A partition that does not exist is the store's to refuse."""
        count = self.store.topic_partitions().get(topic)
        return count is None or not 0 <= partition < count or self.nodes.leader(topic, partition) == node

    def all_partitions(self) -> list[tuple[str, int]]:
        return list(all_partitions({**self.store.topic_partitions(),
                                    GROUP_METADATA_TOPIC: self.config.offsets_topic_num_partitions,
                                    TRANSACTION_STATE_TOPIC: self.config.transaction_state_log_num_partitions}))

    # ------------------------------------------------------------------ requests

    def handle(self, api: str, body: Any, ctx: Any, now_ms: int) -> list[Output]:
        node = ctx.node_id
        if node not in self.nodes.live:
            return []  # sent to a broker that stopped: its connections are gone, nothing answers
        out = self._route(api, body, ctx, node, now_ms)
        self.replicate(out)
        return out

    def _route(self, api: str, body: Any, ctx: Any, node: int, now_ms: int) -> list[Output]:
        if api in routing.GROUP_APIS:
            why = self.group_refusal(body.group_id, node)
            if why is not None and api == "Heartbeat" and why[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                # Kafka's coordinator answers a classic heartbeat NONE while the group loads ("the
                # group is still loading, so respond just blindly"): the session starts at the load.
                return [Reply(ctx.reply_to, HeartbeatResponse())]
            if why is not None:
                return [Reply(ctx.reply_to, routing.refusal(api, body, *why))]
            return self.store.handle_here(api, body, ctx, now_ms)
        if api in routing.BATCHED_GROUP_APIS:
            out = self._served(api, body, routing.split_groups(api, body, lambda g: self.group_refusal(g, node)),
                               ctx, now_ms)
            return [replace(o, body=routing.in_request_order(api, body, o.body))
                    if isinstance(o, Reply) and o.to == ctx.reply_to and type(o.body) is API[api].response else o
                    for o in out]
        if api in routing.TXN_APIS or (api == "InitProducerId" and body.transactional_id is not None):
            leader = self.coordinator_of(body.transactional_id, TXN_KEY)
            if leader != node:
                message = f"broker {node} is not the transaction coordinator of {body.transactional_id!r}: broker {leader} is"
                return [Reply(ctx.reply_to, routing.refusal(api, body, ErrorCode.NOT_COORDINATOR, message))]
            return self.store.handle_here(api, body, ctx, now_ms)
        if api in routing.PARTITION_APIS:
            split = routing.split_partitions(api, body, lambda t, p: self.leads(node, t, p))
            if split.body is None and api == "Produce" and body.acks == 0:
                return []
            return self._served(api, body, split, ctx, now_ms)
        if api == "FindCoordinator":
            return [Reply(ctx.reply_to, self.find_coordinator(body))]
        out = self.store.handle_here(api, body, ctx, now_ms)
        if api in ("Metadata", "ListGroups", "DescribeCluster"):
            return [replace(o, body=self._as_cluster(api, o.body, node))
                    if isinstance(o, Reply) and o.to == ctx.reply_to else o for o in out]
        return out

    def _served(self, api: str, body: Any, split: routing.Split, ctx: Any, now_ms: int) -> list[Output]:
        if split.body is None:
            return [Reply(ctx.reply_to, routing.refused_answer(api, split.refused))]
        out = self.store.handle_here(api, split.body, ctx, now_ms)
        return [replace(o, body=routing.merge(api, o.body, split.refused))
                if isinstance(o, Reply) and o.to == ctx.reply_to and type(o.body) is API[api].response else o for o in out]

    def _as_cluster(self, api: str, body: Any, node: int) -> Any:
        """A cluster-wide answer as this broker gives it: Metadata and DescribeCluster name every
        live broker and each partition's leader; ListGroups lists the groups this one coordinates."""
        if isinstance(body, MetadataResponse):
            for topic in body.topics:
                for p in topic.partitions:
                    if not p.error_code:
                        p.leader_id = self.nodes.leader(topic.name, p.partition_index)
            return replace(body, brokers=[MetadataResponseBroker(n, *self.addresses[n]) for n in sorted(self.nodes.live)],
                           controller_id=self.controller())
        if isinstance(body, DescribeClusterResponse):
            return replace(body, controller_id=self.controller(),
                           brokers=[DescribeClusterBroker(n, *self.addresses[n]) for n in sorted(self.nodes.live)])
        if isinstance(body, ListGroupsResponse):
            loading = [p for p in self.loading if self.nodes.leader(GROUP_METADATA_TOPIC, p) == node]
            if loading:
                return ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                          error_message=f"broker {node} is loading groups")
            return replace(body, groups=[g for g in body.groups if self.coordinator_of(g.group_id) == node])
        return body

    def controller(self) -> int:
        """The active controller: the lowest live broker (KRaft's is a quorum's; grouplab's any)."""
        return min(self.nodes.live) if self.nodes.live else NO_LEADER

    def find_coordinator(self, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
        """Each key's coordinator, as Kafka's FindCoordinator v4 answers a batch (one key before
        v4: the top-level fields); COORDINATOR_NOT_AVAILABLE while its partition has no leader."""
        keys = req.coordinator_keys or [req.key]
        found = []
        for key in keys:
            node = self.coordinator_of(key, req.key_type)
            if node == NO_LEADER:
                found.append(FoundCoordinator(key, -1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                              "no live broker leads its partition"))
            else:
                found.append(FoundCoordinator(key, node, *self.addresses[node]))
        first = found[0]
        return FindCoordinatorResponse(first.error_code, first.node_id, first.host, first.port, found,
                                       first.error_message)

    # ------------------------------------------------------------------ the replicated group log

    def replicate(self, out: Iterable[Output]) -> None:
        """Keep the latest record of each group key the step persisted (what a load reads)."""
        for o in out:
            if isinstance(o, Persist):
                self._keep(o.record)

    def replicate_records(self, records: Iterable[Record]) -> None:
        for record in records:
            self._keep(record)

    def _keep(self, record: Record) -> None:
        if isinstance(record, (TopicRecord, TopicTombstone, TxnRecord)):
            return
        if isinstance(record, TOMBSTONES):
            self._replica.pop(record.key, None)
        else:
            self._replica[record.key] = record

    # ------------------------------------------------------------------ brokers stopping and starting

    def stop(self, node: int, now_ms: int, how: str = "killed") -> list[Output]:
        """Broker `node` stops (`how`: killed or shut down). Raises NodeError if it cannot."""
        moves = self.nodes.down(node, self.all_partitions())
        out: list[Output] = [LogEvent(now_ms, events.BrokerStopped(node, sorted(self.nodes.live), how))]
        return out + self._after(moves, "broker_stopped", now_ms)

    def start(self, node: int, now_ms: int) -> list[Output]:
        """Broker `node` is back. Its preferred partitions come back to it at the next election
        (auto.leader.rebalance.enable: armed now, leader.imbalance.check.interval.seconds away)."""
        moves = self.nodes.up(node, self.all_partitions())
        out: list[Output] = [LogEvent(now_ms, events.BrokerStarted(node, sorted(self.nodes.live)))]
        out += self._after(moves, "broker_started", now_ms)
        if self.config.auto_leader_rebalance_enable and not self._election_armed and self.nodes.imbalanced():
            self._election_armed = True
            out.append(ArmTimer(ELECTION_TIMER, now_ms + self.config.leader_imbalance_check_interval_seconds * 1000))
        return out

    def elect_preferred_leaders(self, now_ms: int, cause: str = "preferred_election") -> list[Output]:
        """Every partition whose preferred leader is live goes back to it (kafka-leader-election.sh
        --election-type PREFERRED, or the auto.leader.rebalance.enable timer)."""
        return self._after(self.nodes.elect_preferred(self.all_partitions()), cause, now_ms)

    def on_timer(self, key: TimerKey, now_ms: int) -> list[Output]:
        if key == ELECTION_TIMER:
            self._election_armed = False
            return self.elect_preferred_leaders(now_ms, "auto_leader_rebalance")
        partition = key[1]
        assert isinstance(partition, int), key
        return self._load(partition, now_ms)

    def _after(self, moves: list[LeaderMove], cause: str, now_ms: int) -> list[Output]:
        out: list[Output] = []
        data = [[mv.topic, mv.partition, mv.old, mv.new, mv.epoch] for mv in moves if mv.topic != GROUP_METADATA_TOPIC]
        if data:
            out.append(LogEvent(now_ms, events.LeadersMoved(cause, data)))
        load_ms = self.config.coordinator_load_time_ms
        for mv in moves:
            if mv.topic != GROUP_METADATA_TOPIC:
                continue
            groups = sorted(g for g in {*self.store.group_ids(), *(k[1] for k in self._replica)}
                            if self.partition_of(g) == mv.partition)
            self.store.unload_groups(groups)
            key = (LOAD_TIMER, mv.partition)
            if mv.new == NO_LEADER:
                self.loading.pop(mv.partition, None)
                out.append(CancelTimer(key))
            else:
                self.loading[mv.partition] = now_ms + load_ms
                out.append(ArmTimer(key, now_ms + load_ms))
            if groups:
                out.append(LogEvent(now_ms, events.CoordinatorMoved(mv.partition, mv.old, mv.new, groups, load_ms, cause)))
        return out

    def _load(self, partition: int, now_ms: int) -> list[Output]:
        if self.loading.pop(partition, None) is None:
            return []
        records = [r for key, r in self._replica.items() if self.partition_of(key[1]) == partition]
        kept = live(records)
        out = self.store.load_groups(kept, now_ms)
        groups = sorted({r.key[1] for r in kept})
        if groups:
            node = self.nodes.leader(GROUP_METADATA_TOPIC, partition)
            out.append(LogEvent(now_ms, events.CoordinatorLoaded(partition, node, groups)))
        self.replicate(out)
        return out
