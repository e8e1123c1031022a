"""The emulated broker, pure: routes each decoded request to the topic store or to its group's
state machine and returns the outputs. One place that knows which API touches which state.

The asyncio server (coordinator/server.py) and the simulator both drive this class; `group_key`
tells a shell which requests must be serialized on which group's queue.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator import consumer_classic
from grouplab.coordinator.consumer_checks import Refusal
from grouplab.coordinator.consumer_group import TIMER_KINDS as CONSUMER_TIMER_KINDS
from grouplab.coordinator.consumer_group import ConsumerGroup
from grouplab.coordinator.group import Group, GroupState
from grouplab.coordinator.server_assignors import server_assignor
from grouplab.coordinator.transactions import TransactionCoordinator
from grouplab.coordinator.group_log import (ConsumerGroupRecord, ConsumerMemberRecord, GroupMetadataRecord,
                                            OffsetCommitRecord, Persist, Record, TopicRecord, TopicTombstone, TxnRecord,
                                            live)
from grouplab.coordinator.data_plane import (
    handle_fetch,
    handle_init_producer_id,
    handle_list_offsets,
    handle_offset_for_leader_epoch,
    handle_produce,
)
from grouplab.coordinator.describe_configs import describe_configs
from grouplab.coordinator.partition_log import LogStore, MemoryLogStore
from grouplab.coordinator.offsets import OffsetAndMetadata, OffsetStore
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Output, Reply, TimerKey
from grouplab.coordinator.topics import CLUSTER_ID, TopicStore
from grouplab.coordinator.brokers import ELECTION_TIMER, LOAD_TIMER, BrokerSet
from grouplab.coordinator.nodes import NodeError
from grouplab.protocol.errors import AnswerTooLarge, ErrorCode
from grouplab.protocol.types import TopicPartition
from grouplab.protocol.messages import (
    API,
    ApiVersionsResponse,
    ApiVersionsResponseKey,
    ConsumerGroupDescribedGroup,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
    DeletableGroupResult,
    DeletableTopicResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribedGroupMember,
    ErrorResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FoundCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveGroupResponseMember,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
)
from grouplab.protocol.schema import floor_bytes

GROUP_APIS = frozenset({"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"})
# KIP-848's heartbeat, serialized on its group's queue too (its empty group id is INVALID_REQUEST).
CONSUMER_GROUP_APIS = frozenset({"ConsumerGroupHeartbeat"})
# Also serialized on their group's queue (a commit is a heartbeat; a fetch sees earlier commits;
# a deletion comes between them as sent), but an empty group_id is valid for them, as in Kafka.
OFFSET_APIS = frozenset({"OffsetCommit", "OffsetFetch", "OffsetDelete"})
# ListGroups' types_filter (KIP-848): a classic group's type and a consumer-protocol group's.
GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
# GroupState.EMPTY as a module constant for _watch, which every group request reaches (on Python 3.11
# an Enum class's attribute goes through EnumType's __getattr__ hook, several times a global's cost).
_EMPTY = GroupState.EMPTY
# The broker's own timer: the retention check (offsets.retention.check.interval.ms).
EXPIRY_TIMER: TimerKey = ("offsets_expiry",)


@dataclass(slots=True)
class RequestContext:
    """Who sent a request and how to answer it: `reply_to` is the shell's opaque token."""

    reply_to: Any
    client_id: str = ""
    client_host: str = ""
    node_id: int = 0  # the broker of a cluster the request reached (brokers.py); 0 with one broker


def uuid_member_ids(client_id: str) -> str:
    """Kafka's form of a member id: `client.id-UUID`."""
    return f"{client_id}-{uuid.uuid4()}"


class SequentialMemberIds:
    """Deterministic member ids for virtual-time drivers: `client.id-N`, a counter shared by all
    clients instead of a UUID, zero-padded to `digits` (the simulator's `client-000001`; the
    tests' `c0-1`)."""

    __slots__ = ("digits", "n")

    def __init__(self, digits: int = 0) -> None:
        self.digits = digits
        self.n = 0

    def __call__(self, client_id: str) -> str:
        self.n += 1
        return f"{client_id}-{self.n:0{self.digits}d}"


class Broker:
    def __init__(
        self,
        config: BrokerConfig | None = None,
        new_member_id: Callable[[str], str] = uuid_member_ids,
        host: str = "127.0.0.1",
        port: int = 0,
        logs: LogStore | None = None,
        brokers: int = 1,
    ) -> None:
        self.config = config or BrokerConfig()
        self.new_member_id = new_member_id
        self.topics = TopicStore(self.config, host, port)
        # The partition logs (coordinator/partition_log.py): in memory unless the shell hands in a
        # FileLogStore (CoordinatorServer with a data_dir).
        self.logs: LogStore = logs if logs is not None else MemoryLogStore(self.config)
        self.groups: dict[str, Group] = {}
        # KIP-848 consumer-protocol groups (coordinator/consumer_group.py). A group id is of one
        # type: an id is in `groups` or in `consumer_groups`, never both. A consumer group's
        # committed offsets are kept by a classic `Group` used only as its offset store (the same
        # OffsetStore and records as a classic group's), in `consumer_offsets` under the same id.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.consumer_offsets: dict[str, Group] = {}
        # The groups the retention check looks at, in the order they became so (a dict:
        # deterministic): classic groups Empty with no pending member id after their last step,
        # consumer groups Empty or with committed offsets. It is armed while there is one.
        self._watched: dict[str, None] = {}
        # A cluster: offsets transactions staged for groups whose coordinator is moving (unloaded,
        # not yet loaded), by group: Kafka's transactional offset records in __consumer_offsets,
        # pending until their marker, which the next coordinator reads (offsets.staged_entries).
        self._staged_moving: dict[str, list[tuple[int, TopicPartition, OffsetAndMetadata, bool]]] = {}
        self._expiry_armed = False
        self.txn = TransactionCoordinator(
            allocate_producer_id=lambda: self.logs.allocate_producer_id(),  # the store the shell set, read per call
            # The coordinator's markers are authoritative: they end the transaction on the
            # partition whatever epoch it last saw for the producer (coordinator/transactions.py).
            write_marker=self._write_marker,
            complete_offsets=self._complete_txn_offsets,
            partition_exists=lambda tp: 0 <= tp.partition < self.topics.partitions.get(tp.topic, 0),
            persist=Persist,
            max_timeout_ms=self.config.transaction_max_timeout_ms,
            txn_open=self._txn_open,
        )
        self._handlers: dict[str, Callable[[Any, RequestContext, int], list[Output]]] = {
            api: getattr(self, f"_on_{api}") for api in API}
        # More than one broker (brokers.py): which may answer what, leadership, coordinator moves.
        self.cluster: BrokerSet | None = BrokerSet(self, brokers) if brokers > 1 else None
        if self.cluster is not None:
            live = self.cluster.nodes.live
            self.topics.live_brokers = lambda: len(live)

    @staticmethod
    def group_key(api: str, body: Any) -> str | None:
        """The group whose queue must serialize this request, or None for cluster-wide requests."""
        return body.group_id if api in GROUP_APIS or api in OFFSET_APIS or api in CONSUMER_GROUP_APIS else None

    @staticmethod
    def timer_key_queue(key: TimerKey) -> str | None:
        """The queue a fired timer goes through (its group's, or its transactional id's), or None
        for the broker's own (the retention check, a cluster's loads and elections), which run at once."""
        return key[1] if len(key) > 1 and key[0] != LOAD_TIMER else None  # type: ignore[return-value]

    def group(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id, self.config, self.new_member_id)
        return g

    def handle(self, api: str, body: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        if self.cluster is not None:
            return self.cluster.handle(api, body, ctx, now_ms)
        return self.handle_here(api, body, ctx, now_ms)

    def handle_here(self, api: str, body: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        """The request, served by this store (a cluster's routing has let it through)."""
        if api in GROUP_APIS and not body.group_id:
            response = API[api].response(error_code=ErrorCode.INVALID_GROUP_ID, error_message="group_id must not be empty")
            return [Reply(ctx.reply_to, response)]
        out = self._handlers[api](body, ctx, now_ms)
        if api in GROUP_APIS or api in OFFSET_APIS or api in CONSUMER_GROUP_APIS or api == "TxnOffsetCommit":
            self._watch(body.group_id, out, now_ms)
        return out

    def restore(self, records: list[Record], now_ms: int) -> list[Output]:
        """Rebuild topics and groups from a replayed log (only the latest record of each counts).
        Call it on a new Broker before it handles anything; the outputs arm the restored members'
        session timers and log `group_loaded` per group."""
        kept = live(records)
        for record in kept:
            if isinstance(record, TopicRecord):
                self.topics.partitions[record.name] = record.partition_count
                if record.topic_id is not None:
                    self.topics.set_id(record.name, record.topic_id)
        if self.cluster is not None:
            self.cluster.replicate_records(kept)
        out = self.load_groups(kept, now_ms, transactions=True)
        out += self.txn.end_dangling(
            ((TopicPartition(t, p), pid) for (t, p), log in sorted(self.logs.logs().items()) for pid in log.open_txns),
            now_ms)
        return out

    def load_groups(self, kept: list[Record], now_ms: int, transactions: bool = False) -> list[Output]:
        """The groups in `kept` (records as `live` keeps them; others are skipped), loaded into
        memory after the topics: at start (restore, with the `transactions` too, in log order), or
        by a cluster's new coordinator (brokers.py)."""
        out: list[Output] = []
        offsets: dict[str, list[OffsetCommitRecord]] = {}  # by group, in log order
        consumer_groups: dict[str, tuple[ConsumerGroupRecord, list[ConsumerMemberRecord]]] = {}
        loaded: list[str] = []
        for record in kept:  # a consumer group's record first, its members' after it (whatever the log's order)
            if isinstance(record, ConsumerGroupRecord):
                consumer_groups[record.group_id] = (record, [])
        for record in kept:
            if isinstance(record, GroupMetadataRecord):
                group = self.groups[record.group_id] = Group(record.group_id, self.config, self.new_member_id)
                out += group.restore(record, now_ms)
                loaded.append(record.group_id)
            elif isinstance(record, OffsetCommitRecord):
                offsets.setdefault(record.group_id, []).append(record)
            elif isinstance(record, ConsumerMemberRecord):
                consumer_groups[record.group_id][1].append(record)  # (`live` keeps only a consumer group's)
            elif isinstance(record, TxnRecord) and transactions:
                out += self.txn.restore(record, now_ms)
        for group_id, (group_record, members) in consumer_groups.items():  # after the topics: regexes resolve
            consumer_group = self._new_consumer_group(group_id)
            self.consumer_groups[group_id] = consumer_group
            self.consumer_offsets[group_id] = Group(group_id, self.config, self.new_member_id)
            out += consumer_group.restore(group_record, members, now_ms, self.topics.partitions)
            loaded.append(group_id)
        for group_id, group_offsets in offsets.items():  # after the groups, into them (or a simple consumer's, Empty)
            holder = self.consumer_offsets.get(group_id) or self.group(group_id)
            out += holder.restore_offsets(group_offsets, now_ms)
            loaded.append(group_id)
        for group_id in dict.fromkeys(loaded):  # what transactions staged before a move, pending again
            staged = self._staged_moving.pop(group_id, None)
            owner = self.consumer_offsets.get(group_id) or self.groups.get(group_id)
            if staged and owner is not None:
                owner.offsets.restage(staged)
        for group_id in dict.fromkeys(loaded):
            self._watch(group_id, out, now_ms)
        return out

    # ------------------------------------------------------------------ what a cluster (brokers.py) asks of the store

    def topic_partitions(self) -> dict[str, int]:
        return self.topics.partitions

    def group_ids(self) -> list[str]:
        return [*self.groups, *self.consumer_groups]

    def unload_groups(self, group_ids: list[str]) -> None:
        """Forget these groups, as a coordinator that is no longer theirs does (they live on in the
        group log); their timers still armed find no group and do nothing."""
        for group_id in group_ids:
            holder = self.groups.get(group_id) or self.consumer_offsets.get(group_id)
            staged = holder.offsets.staged_entries() if holder is not None else []
            if staged:
                self._staged_moving[group_id] = staged
            self.groups.pop(group_id, None)
            self.consumer_groups.pop(group_id, None)
            self.consumer_offsets.pop(group_id, None)
            self._watched.pop(group_id, None)

    def broker_down(self, node: int, now_ms: int, how: str = "killed") -> list[Output]:
        """Broker `node` of a cluster stops (brokers.py); NodeError if there is none such or it is down."""
        return self._cluster().stop(node, now_ms, how)

    def broker_up(self, node: int, now_ms: int) -> list[Output]:
        return self._cluster().start(node, now_ms)

    def elect_preferred_leaders(self, now_ms: int) -> list[Output]:
        return self._cluster().elect_preferred_leaders(now_ms)

    def coordinator_node(self, key: str, key_type: int = 0) -> int:
        """The broker coordinating group (key_type 0) or transactional id (1) `key` (-1: none)."""
        return self.config.broker_id if self.cluster is None else self.cluster.coordinator_of(key, key_type)

    def _cluster(self) -> BrokerSet:
        if self.cluster is None:
            raise NodeError("this coordinator is one broker (start it with --brokers N for a cluster)")
        return self.cluster

    def on_timer(self, key: tuple, now_ms: int) -> list[Output]:
        if self.cluster is not None:
            if key[0] in (LOAD_TIMER, ELECTION_TIMER[0]):
                return self.cluster.on_timer(key, now_ms)
            out = self._on_timer(key, now_ms)
            self.cluster.replicate(out)
            return out
        return self._on_timer(key, now_ms)

    def _on_timer(self, key: tuple, now_ms: int) -> list[Output]:
        if key == EXPIRY_TIMER:
            return self._check_expiry(now_ms)
        if key[0] == "txn":
            return self.txn.on_timer(key, now_ms)
        if key[0] in CONSUMER_TIMER_KINDS:
            consumer_group = self.consumer_groups.get(key[1])
            if consumer_group is None:
                return []
            out = self._after_consumer_step(consumer_group, consumer_group.timer(key, now_ms), now_ms)
            self._watch(key[1], out, now_ms)
            return out
        group = self.groups.get(key[1])
        if group is None:
            return []
        out = group.on_timer(key, now_ms)
        self._watch(key[1], out, now_ms)
        return out

    # ------------------------------------------------------------------ expiry (docs/protocol.md §4.15)

    def _watch(self, group_id: str, out: list[Output], now_ms: int) -> None:
        """After a step of `group_id`: an Empty group is one the retention check must look at;
        arm the check (appended to `out`) if it is not armed. Not while a member id is pending
        (the dynamic join's first step: the group may be about to have members); the step that
        ends the pending id (its expiry, LeaveGroup) comes back here. A consumer-protocol group is
        looked at while it is Empty or has committed offsets (`_expire_consumer_group`)."""
        consumer_group = self.consumer_groups.get(group_id)
        group = self.groups.get(group_id)
        if consumer_group is not None:
            watched = not consumer_group.members or bool(self.consumer_offsets[group_id].offsets.committed)
        else:
            watched = group is not None and group.state is _EMPTY and not group.pending_members
        if not watched:
            self._watched.pop(group_id, None)
            return
        self._watched[group_id] = None
        if not self._expiry_armed:
            self._expiry_armed = True
            out.append(ArmTimer(EXPIRY_TIMER, now_ms + self.config.offsets_retention_check_interval_ms))

    def _check_expiry(self, now_ms: int) -> list[Output]:
        """The retention check: every watched group expires what is due (Group.expire_offsets, and
        `_expire_consumer_group`), and a group left with nothing is dropped. Armed again while a
        watched group remains."""
        self._expiry_armed = False
        out: list[Output] = []
        retention_ms = self.config.offsets_retention_ms
        for group_id in list(self._watched):
            group = self.groups.get(group_id)
            if group_id in self.consumer_groups:
                out += self._expire_consumer_group(group_id, now_ms)
            elif group is not None and group.state is GroupState.EMPTY:
                out += group.expire_offsets(now_ms, retention_ms)
                if group.dead:
                    del self.groups[group_id]
            self._watch(group_id, out, now_ms)
        return out

    def _expire_consumer_group(self, group_id: str, now_ms: int) -> list[Output]:
        """Kafka's cleanupGroupMetadata for a consumer-protocol group: offsets of topics no member
        subscribes to expire after their commit; an Empty group left with no offsets is deleted
        (its offsets' holder writes the group's tombstone)."""
        consumer_group, holder = self.consumer_groups[group_id], self.consumer_offsets[group_id]
        subscribed = frozenset().union(*(m.subscribed_topics() for m in consumer_group.members.values()))
        out = holder.expire_unsubscribed_offsets(now_ms, self.config.offsets_retention_ms, subscribed)
        if not consumer_group.members and holder.deletable:
            out += holder.delete(now_ms)
            del self.consumer_groups[group_id], self.consumer_offsets[group_id]
        return out

    # ------------------------------------------------------------------ group APIs

    def _on_JoinGroup(self, req: JoinGroupRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None and consumer_group.members:
            # Kafka 4: a classic member joins the consumer group (online migration, consumer_classic.py).
            out = consumer_classic.handle_join(consumer_group, req, ctx.reply_to, ctx.client_id, ctx.client_host, now_ms,
                                             self.topics.partitions)
            return self._after_consumer_step(consumer_group, out, now_ms)
        if consumer_group is not None:
            self._to_classic(req.group_id)
        existed = req.group_id in self.groups
        refusal = None if existed else self._new_group_refusal(req.group_id)
        if refusal is not None:
            code, message = refusal
            return [Reply(ctx.reply_to, JoinGroupResponse(error_code=code, member_id=req.member_id, error_message=message)),
                    LogEvent(now_ms, events.JoinRejected(req.group_id, 0, GroupState.DEAD, req.member_id, code.name,
                                                         message))]
        group = self.group(req.group_id)
        out = group.handle_join(req, ctx.reply_to, now_ms, ctx.client_id, ctx.client_host)
        if not existed and not group.members and not group.pending_members:
            del self.groups[req.group_id]  # a rejected join leaves no phantom Empty group behind
        return out

    def _on_SyncGroup(self, req: SyncGroupRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            return self._after_consumer_step(consumer_group, consumer_classic.handle_sync(consumer_group, req, ctx.reply_to, now_ms), now_ms)
        group = self.groups.get(req.group_id)
        if group is None:
            return [Reply(ctx.reply_to, SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))]
        return group.handle_sync(req, ctx.reply_to, now_ms)

    def _on_Heartbeat(self, req: HeartbeatRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            return self._after_consumer_step(consumer_group, consumer_classic.handle_heartbeat(consumer_group, req, ctx.reply_to, now_ms),
                                             now_ms)
        group = self.groups.get(req.group_id)
        if group is None:
            return [Reply(ctx.reply_to, HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))]
        return group.handle_heartbeat(req, ctx.reply_to, now_ms)

    def _on_LeaveGroup(self, req: LeaveGroupRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            return self._after_consumer_step(consumer_group, consumer_classic.handle_leave(consumer_group, req, ctx.reply_to, now_ms), now_ms)
        group = self.groups.get(req.group_id)
        if group is None:
            members = [LeaveGroupResponseMember(m.member_id, m.group_instance_id, ErrorCode.UNKNOWN_MEMBER_ID) for m in req.members]
            return [Reply(ctx.reply_to, LeaveGroupResponse(members=members))]
        return group.handle_leave(req, ctx.reply_to, now_ms)

    def _on_OffsetCommit(self, req: OffsetCommitRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            return self._consumer_offset_commit(consumer_group, req, ctx, now_ms)
        group = self._offsets_group(req.group_id)
        out = group.handle_offset_commit(req, ctx.reply_to, now_ms, self.topics.partitions,
                                         self._commit_refusal(group, req, transactional=False))
        return self._keep_if_created(group, out)

    def _on_OffsetFetch(self, req: OffsetFetchRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None and not (req.member_id is None and req.member_epoch < 0):
            # Kafka's ConsumerGroup.validateOffsetFetch: a member's fetch names it at its epoch.
            refusal = consumer_group.validate_offset_commit(req.member_id or "", req.member_epoch)
            if refusal is not None:
                return [Reply(ctx.reply_to, OffsetFetchResponse(error_code=refusal))]
        try:
            holder = self.consumer_offsets.get(req.group_id) or self._offsets_group(req.group_id)
            return holder.handle_offset_fetch(req, ctx.reply_to, now_ms)
        except AnswerTooLarge as exc:
            return self._answer_too_large("OffsetFetch", exc, ctx, now_ms)

    def _on_OffsetDelete(self, req: OffsetDeleteRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        """Kafka's OffsetDelete (protocol.md §3.26): the group's rules (Group.handle_offset_delete),
        over the topics that exist. A group that does not exist is answered by its Dead stand-in
        (GROUP_ID_NOT_FOUND) and is not kept."""
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:  # Kafka: a topic a member subscribes to is GROUP_SUBSCRIBED_TO_TOPIC
            subscribed = frozenset().union(*(m.subscribed_topics() for m in consumer_group.members.values()))
            return self.consumer_offsets[req.group_id].handle_offset_delete(
                req, ctx.reply_to, now_ms, self.topics.partitions, subscribed.__contains__)
        return self._offsets_group(req.group_id).handle_offset_delete(req, ctx.reply_to, now_ms, self.topics.partitions)

    def _offsets_group(self, group_id: str) -> Group:
        """The group an offset request goes to; for a group that does not exist, a Dead stand-in."""
        group = self.groups.get(group_id)
        return group if group is not None else Group.absent(group_id, self.config, self.new_member_id)

    def _new_group_refusal(self, group_id: str) -> tuple[ErrorCode, str] | None:
        """Why a group may not be made under `group_id` now (docs/protocol.md §4.12), or None: an
        id longer than grouplab.max.id.length (INVALID_GROUP_ID), or grouplab.max.groups reached
        (GROUP_MAX_SIZE_REACHED: not retriable, so a client stops and says so, where
        COORDINATOR_NOT_AVAILABLE would have it retry for ever)."""
        cfg = self.config
        if len(group_id) > cfg.max_id_length:
            return ErrorCode.INVALID_GROUP_ID, (f"group id of {len(group_id)} characters exceeds "
                                                f"grouplab.max.id.length={cfg.max_id_length}")
        if len(self.groups) + len(self.consumer_groups) >= cfg.max_groups:
            return ErrorCode.GROUP_MAX_SIZE_REACHED, (
                f"the coordinator holds grouplab.max.groups={cfg.max_groups} groups; delete some (DeleteGroups) "
                f"or let them expire (offsets.retention.minutes)")
        return None

    def _commit_refusal(self, group: Group, req: OffsetCommitRequest | TxnOffsetCommitRequest,
                        transactional: bool) -> ErrorCode | None:
        """A commit that would make a new group (a stand-in it would accept) is refused as a
        JoinGroup would be (`_new_group_refusal`)."""
        if group.state is not GroupState.DEAD:
            return None
        if group.validate_commit(req.member_id, req.group_instance_id, req.generation_id, transactional) is not None:
            return None  # refused anyway, with the group's own error
        refusal = self._new_group_refusal(group.group_id)
        return refusal[0] if refusal is not None else None

    def _keep_if_created(self, group: Group, out: list[Output]) -> list[Output]:
        """Keep a stand-in the step made a group (a simple consumer stored offsets)."""
        if group.state is not GroupState.DEAD:
            self.groups.setdefault(group.group_id, group)
        return out

    # ------------------------------------------------------------------ consumer-protocol groups (KIP-848)

    def _on_ConsumerGroupHeartbeat(self, req: ConsumerGroupHeartbeatRequest, ctx: RequestContext,
                                   now_ms: int) -> list[Output]:
        """Kafka's GroupMetadataManager.consumerGroupHeartbeat, the group's side in
        coordinator/consumer_group.py. A join (epoch 0) makes the group, or converts a classic
        group of that id (its committed offsets kept): an Empty one always, one with members if
        Kafka's validateOnlineUpgrade allows (consumer_classic.py), else GROUP_ID_NOT_FOUND with
        its message. Any other epoch for an id that is no consumer group is GROUP_ID_NOT_FOUND."""
        def refuse(code: ErrorCode, message: str) -> list[Output]:
            return [Reply(ctx.reply_to, ConsumerGroupHeartbeatResponse(error_code=code, error_message=message))]

        gid = req.group_id
        if not gid.strip():
            return refuse(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        group = self.consumer_groups.get(gid)
        if group is not None:
            out = group.heartbeat(self._named(req), ctx.reply_to, ctx.client_id, ctx.client_host, now_ms,
                                  self.topics.partitions)
            return [self._with_topic_ids(o) for o in self._after_consumer_step(group, out, now_ms)]
        classic = self.groups.get(gid)
        if req.member_epoch != 0:
            return refuse(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group." if classic is not None
                          else f"Consumer group {gid} not found.")
        refusal = None if classic is not None else self._new_group_refusal(gid)
        if refusal is not None:
            return refuse(*refusal)
        group = self._new_consumer_group(gid)
        converted: list[Output] = []
        if classic is not None and classic.members:  # Kafka's online upgrade
            message = consumer_classic.upgrade_refusal(classic, self.config)
            if message is not None:
                return refuse(ErrorCode.GROUP_ID_NOT_FOUND, message)
            try:
                members = consumer_classic.members_from_classic(classic, now_ms)
            except Refusal as exc:
                return refuse(exc.code, exc.message)
            converted = consumer_classic.adopt_members(group, members, classic.generation_id, self.topics.partitions, now_ms)
        out = group.heartbeat(self._named(req), ctx.reply_to, ctx.client_id, ctx.client_host, now_ms,
                              self.topics.partitions)
        if not _accepted(out, ctx.reply_to):  # a refused join leaves no group behind, and converts nothing
            return out
        self.consumer_groups[gid] = group
        self.groups.pop(gid, None)
        self._watched.pop(gid, None)
        handed: list[Output] = classic.hand_over(now_ms) if classic is not None and classic.members else []
        self.consumer_offsets[gid] = classic if classic is not None else Group(gid, self.config, self.new_member_id)
        return [*handed, *converted, *[self._with_topic_ids(o) for o in out]]

    def _new_consumer_group(self, group_id: str) -> ConsumerGroup:
        return ConsumerGroup(group_id, self.config, {n: server_assignor(n) for n in self.config.consumer_assignor_names},
                             self.new_member_id)

    def _on_ConsumerGroupDescribe(self, req: ConsumerGroupDescribeRequest, ctx: RequestContext,
                                  now_ms: int) -> list[Output]:
        """Kafka's consumerGroupDescribe: each id in order; GROUP_ID_NOT_FOUND for an unknown id or
        a classic group, INVALID_GROUP_ID for an empty one."""
        described = []
        for gid in req.group_ids:
            group = self.consumer_groups.get(gid)
            if group is not None:
                described.append(self._topic_ids_of(group.describe()))
            elif not gid:
                described.append(ConsumerGroupDescribedGroup(gid, error_code=ErrorCode.INVALID_GROUP_ID, group_state=""))
            else:
                message = f"Group {gid} is not a consumer group." if gid in self.groups else f"Group {gid} not found."
                described.append(ConsumerGroupDescribedGroup(gid, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                                             error_message=message, group_state=""))
        return [Reply(ctx.reply_to, ConsumerGroupDescribeResponse(groups=described))]

    def _named(self, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatRequest:
        """The owned partitions by topic name: an id (the Kafka wire's) is named, one that is no
        topic is dropped, as Kafka ignores an unknown topic id in a member's owned partitions."""
        if req.topic_partitions is None or all(tp.topic_id is None for tp in req.topic_partitions):
            return req
        owned = []
        for tp in req.topic_partitions:
            name = tp.topic if tp.topic_id is None else self.topics.named(tp.topic_id)
            if name:
                owned.append(ConsumerGroupHeartbeatTopicPartitions(name, tp.partitions))
        return replace(req, topic_partitions=owned)

    def _with_topic_ids(self, out: Output) -> Output:
        """A heartbeat's answer names each topic of its assignment's id too (the Kafka wire's form)."""
        if isinstance(out, Reply) and isinstance(out.body, ConsumerGroupHeartbeatResponse) and out.body.assignment:
            out.body.topic_ids = {t: self.topics.topic_id(t) for t in out.body.assignment}
        return out

    def _topic_ids_of(self, described: ConsumerGroupDescribedGroup) -> ConsumerGroupDescribedGroup:
        topics = {t for m in described.members for t in (*m.assignment, *m.target_assignment)}
        described.topic_ids = {t: self.topics.topic_id(t) for t in sorted(topics)}
        return described

    def _after_consumer_step(self, group: ConsumerGroup, out: list[Output], now_ms: int) -> list[Output]:
        """After a step of a consumer group: if only classic members remain and the policy allows it
        (ConsumerGroup.downgrade), the group becomes a classic one (Kafka's convertToClassicGroup):
        its offset store takes the members, Stable at generation = the group epoch, and rebalances."""
        if group.downgrade is None:
            return out
        gid = group.group_id
        members = consumer_classic.classic_members(group, now_ms)
        for m in members:  # the consumer group's timers for them no longer apply
            out += [CancelTimer(key) for key in (group.timers.session(m.member_id), group.timers.rebalance(m.member_id),
                                                 group.timers.join(m.member_id), group.timers.sync(m.member_id))]
        del self.consumer_groups[gid]
        classic = self.consumer_offsets.pop(gid)
        self.groups[gid] = classic
        return out + classic.adopt(members, group.group_epoch, group.downgrade.trigger, group.downgrade.cause, now_ms)

    def _to_classic(self, group_id: str) -> None:
        """An Empty consumer group becomes a classic one (Kafka: a classic JoinGroup for it): its
        offsets' holder is the classic group, kept if it has offsets."""
        del self.consumer_groups[group_id]
        holder = self.consumer_offsets.pop(group_id)
        if not holder.dead:
            self.groups[group_id] = holder

    def _consumer_offset_commit(self, group: ConsumerGroup, req: OffsetCommitRequest, ctx: RequestContext,
                                now_ms: int) -> list[Output]:
        """OffsetCommit to a consumer-protocol group: the generation is the member epoch
        (ConsumerGroup.validate_offset_commit: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); the offsets
        go to the group's offset store, as a classic group's."""
        refusal = group.validate_offset_commit(req.member_id, req.generation_id)
        as_store = replace(req, member_id="", generation_id=-1, group_instance_id=None)
        return self.consumer_offsets[req.group_id].handle_offset_commit(as_store, ctx.reply_to, now_ms,
                                                                        self.topics.partitions, refusal)

    # ------------------------------------------------------------------ data plane (coordinator/data_plane.py)

    def _on_Produce(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        return handle_produce(self, req, ctx.reply_to, now_ms)

    def _on_Fetch(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        return handle_fetch(self, req, ctx.reply_to, now_ms)

    def _on_ListOffsets(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        return handle_list_offsets(self, req, ctx.reply_to, now_ms)

    def _on_OffsetForLeaderEpoch(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        cluster = self.cluster
        epoch = (lambda t, p: 0) if cluster is None else cluster.nodes.leader_epoch
        return handle_offset_for_leader_epoch(self, req, ctx.reply_to, epoch)

    def _on_InitProducerId(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        if req.transactional_id is not None:
            return self.init_transactional_producer_id(req, ctx, now_ms)
        return handle_init_producer_id(self, req, ctx.reply_to, now_ms)

    def init_transactional_producer_id(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        """InitProducerId with a transactional_id: the transaction coordinator's producer id,
        epoch bump and fencing (coordinator/transactions.py)."""
        return self.txn.init_producer_id(req, ctx.reply_to, now_ms)

    # ------------------------------------------------------------------ transactions (coordinator/transactions.py)

    def _on_AddPartitionsToTxn(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        return self.txn.add_partitions(req, ctx.reply_to, now_ms)

    def _on_AddOffsetsToTxn(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        return self.txn.add_offsets(req, ctx.reply_to, now_ms)

    def _on_EndTxn(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        return self.txn.end_txn(req, ctx.reply_to, now_ms)

    def _on_TxnOffsetCommit(self, req: TxnOffsetCommitRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        """Offsets inside a transaction: the producer must be the current instance of an Ongoing
        transaction that added this group (AddOffsetsToTxn); the member checks are KIP-447's."""
        precheck = self.txn.check_producer(req.transactional_id, req.producer_id, req.producer_epoch)
        txn = self.txn.txns.get(req.transactional_id)
        if precheck is None and txn is not None and req.group_id not in txn.groups:
            precheck = ErrorCode.INVALID_TXN_STATE
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:  # the member checks are the consumer group's; the offsets its store's
            precheck = precheck or consumer_group.validate_offset_commit(req.member_id, req.generation_id,
                                                                         req.group_instance_id, transactional=True)
            as_store = replace(req, member_id="", generation_id=-1, group_instance_id=None)
            return self.consumer_offsets[req.group_id].handle_txn_offset_commit(
                as_store, ctx.reply_to, now_ms, self.topics.partitions, precheck)
        group = self._offsets_group(req.group_id)
        precheck = precheck or self._commit_refusal(group, req, transactional=True)
        out = group.handle_txn_offset_commit(req, ctx.reply_to, now_ms, self.topics.partitions, precheck)
        return self._keep_if_created(group, out)

    def _write_marker(self, tp: TopicPartition, producer_id: int, epoch: int, commit: bool, now_ms: int) -> None:
        """The transaction coordinator's markers are authoritative: they end the transaction on the
        partition whatever epoch it last saw for the producer (coordinator/transactions.py). A
        partition whose topic is gone gets none (and no new log), as Kafka skips a deleted one."""
        if 0 <= tp.partition < self.topics.partitions.get(tp.topic, 0):
            self.logs.log(tp.topic, tp.partition).append_marker(producer_id, epoch, commit, now_ms, authoritative=True)

    def _txn_open(self, tp: TopicPartition, producer_id: int) -> bool:
        """Does the partition's log hold an open transaction of `producer_id` (one its marker
        has not ended)? The restart sweep writes only those markers."""
        log = self.logs.existing(tp.topic, tp.partition)
        return log is not None and producer_id in log.open_txns

    def _complete_txn_offsets(self, group_id: str, producer_id: int, commit: bool, now_ms: int) -> list[Output]:
        group = self.groups.get(group_id) or self.consumer_offsets.get(group_id)
        if group is None and group_id in self._staged_moving:
            return self._complete_moving_txn(group_id, producer_id, commit)
        return group.on_txn_completed(producer_id, commit, now_ms) if group is not None else []

    def _complete_moving_txn(self, group_id: str, producer_id: int, commit: bool) -> list[Output]:
        """A transaction ends while its group's coordinator moves (the group unloaded): its marker
        is in __consumer_offsets all the same, so its staged offsets become committed records
        (the ones a plain commit did not supersede), which the next coordinator loads."""
        staged = self._staged_moving[group_id]
        mine = [e for e in staged if e[0] == producer_id]
        self._staged_moving[group_id] = [e for e in staged if e[0] != producer_id]
        if not commit:
            return []
        store = OffsetStore(group_id)
        return [Persist(store.record_of(tp, om)) for _, tp, om, later in mine if later]

    def _on_DescribeGroups(self, req: DescribeGroupsRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        ids = list(dict.fromkeys(req.groups))  # each id once, first-seen order (Kafka de-duplicates)
        found = [self.groups.get(gid) for gid in ids]
        members = sum(len(g.members) for g in found if g is not None)
        floor = len(ids) * floor_bytes(DescribedGroup) + members * floor_bytes(DescribedGroupMember)
        if floor > self.config.response_max_bytes:
            return self._answer_too_large("DescribeGroups", AnswerTooLarge(floor, self.config.response_max_bytes, exact=False),
                                          ctx, now_ms)
        # A consumer-protocol group is not a classic group: Kafka's DescribeGroups v0-5 answers it
        # Dead, as an unknown id (v6, not served, says GROUP_ID_NOT_FOUND "... is not a classic group.").
        described = [group.describe() if group is not None else DescribedGroup(group_id=gid, group_state=GroupState.DEAD.value)
                     for gid, group in zip(ids, found)]
        return [Reply(ctx.reply_to, DescribeGroupsResponse(groups=described))]

    def _on_DeleteGroups(self, req: DeleteGroupsRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        """Kafka's DeleteGroups: each distinct group, in first-seen order, is deleted if Empty
        (NONE; tombstones for its offsets and itself are persisted before the answer), else
        NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND if there is none, INVALID_GROUP_ID if its id is longer
        than any group's may be. `""` is a valid id here, as in Kafka (a simple consumer's group)."""
        persisted: list[Output] = []
        rest: list[Output] = []  # the events and cancelled timers, after the answer
        results = []
        for gid in dict.fromkeys(req.groups_names):
            group = self.groups.get(gid)
            consumer_group = self.consumer_groups.get(gid)
            if len(gid) > self.config.max_id_length:
                code = ErrorCode.INVALID_GROUP_ID
            elif consumer_group is not None:
                code = ErrorCode.NON_EMPTY_GROUP if consumer_group.members else ErrorCode.NONE
                if not consumer_group.members:  # its offsets go as a classic group's do
                    for o in self.consumer_offsets.pop(gid).delete(now_ms):
                        (persisted if isinstance(o, Persist) else rest).append(o)
                    del self.consumer_groups[gid]
            elif group is None:
                code = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY:
                code = ErrorCode.NON_EMPTY_GROUP
            else:
                code = ErrorCode.NONE
                for o in group.delete(now_ms):
                    (persisted if isinstance(o, Persist) else rest).append(o)
                del self.groups[gid]
                self._watched.pop(gid, None)
            results.append(DeletableGroupResult(gid, code))
        return [*persisted, Reply(ctx.reply_to, DeleteGroupsResponse(results=results)), *rest]

    def _on_ListGroups(self, req: ListGroupsRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        """Kafka's filters: states compared case-insensitively (trimmed), types too (KIP-848):
        "classic" for the classic groups, "consumer" for the consumer-protocol ones (listed with
        protocol type "consumer", as Kafka 4 lists them)."""
        wanted = {s.strip().lower() for s in req.states_filter}
        types = {t.strip().lower() for t in req.types_filter}
        listed = []
        if not types or GROUP_TYPE in types:
            listed += [ListedGroup(group_id=g.group_id, protocol_type=g.current_protocol_type or "",
                                   group_state=g.state.value, group_type=GROUP_TYPE)
                       for g in self.groups.values() if not wanted or g.state.value.lower() in wanted]
        if not types or CONSUMER_GROUP_TYPE in types:  # Kafka's ConsumerGroup: protocol type "consumer"
            listed += [ListedGroup(group_id=g.group_id, protocol_type="consumer", group_state=g.state.value,
                                   group_type=CONSUMER_GROUP_TYPE)
                       for g in self.consumer_groups.values() if not wanted or g.state.value.lower() in wanted]
        floor = len(listed) * floor_bytes(ListedGroup)
        if floor > self.config.response_max_bytes:
            return self._answer_too_large("ListGroups", AnswerTooLarge(floor, self.config.response_max_bytes, exact=False),
                                          ctx, now_ms)
        return [Reply(ctx.reply_to, ListGroupsResponse(groups=listed))]

    def _answer_too_large(self, api: str, exc: AnswerTooLarge, ctx: RequestContext, now_ms: int) -> list[Output]:
        """Refuse a request whose answer cannot fit in grouplab.response.max.bytes, before building
        it (and before changing anything): INVALID_REQUEST saying so, as the shell answers one that
        turns out too large when encoded (docs/protocol.md §1)."""
        return [Reply(ctx.reply_to, ErrorResponse(error_code=exc.code, error_message=exc.message_for(api))),
                LogEvent(now_ms, events.ResponseTooLarge(api, ctx.client_id, exc.size, exc.limit, exc.exact))]

    # ------------------------------------------------------------------ cluster APIs

    def _on_ApiVersions(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        keys = [ApiVersionsResponseKey(name, spec.min_version, spec.max_version) for name, spec in API.items()]
        return [Reply(ctx.reply_to, ApiVersionsResponse(api_keys=keys))]

    def _on_FindCoordinator(self, req: FindCoordinatorRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        """One broker coordinates everything (a cluster answers in brokers.py)."""
        node, host, port = self.config.broker_id, self.topics.host, self.topics.port
        found = [FoundCoordinator(key, node, host, port) for key in req.coordinator_keys or [req.key]]
        return [Reply(ctx.reply_to, FindCoordinatorResponse(0, node, host, port, found))]

    def _on_Metadata(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        try:
            response, created = self.topics.metadata(req, self.config.response_max_bytes, now_ms)
        except AnswerTooLarge as exc:
            return self._answer_too_large("Metadata", exc, ctx, now_ms)
        out: list[Output] = [self._persist_topic(t, now_ms) for t in created]
        out.append(Reply(ctx.reply_to, response))
        out += [LogEvent(now_ms, events.TopicCreated(t, self.topics.partitions[t], auto=True)) for t in created]
        return out

    def _on_CreateTopics(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        response = self.topics.create_topics(req, now_ms)
        out: list[Output] = []
        if not req.validate_only:
            out += [self._persist_topic(r.name, now_ms) for r in response.topics if r.error_code == 0]
        out.append(Reply(ctx.reply_to, response))
        if not req.validate_only:
            out += [LogEvent(now_ms, events.TopicCreated(r.name, r.num_partitions, auto=False))
                    for r in response.topics if r.error_code == 0]
        return out

    def _on_CreatePartitions(self, req: Any, ctx: RequestContext, now_ms: int) -> list[Output]:
        response = self.topics.create_partitions(req)
        out: list[Output] = []
        if not req.validate_only:
            out += [self._persist_topic(r.name, now_ms) for r in response.results if r.error_code == 0]
        out.append(Reply(ctx.reply_to, response))
        if not req.validate_only:
            out += [LogEvent(now_ms, events.PartitionsCreated(r.name, self.topics.partitions[r.name]))
                    for r in response.results if r.error_code == 0]
        return out

    def _on_DeleteTopics(self, req: DeleteTopicsRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        """Kafka's DeleteTopics (docs/protocol.md §3.23): each distinct name, in first-seen order. A
        topic deleted loses its partition logs (the store's; on disk too), its committed and staged
        offsets in every group (Kafka's coordinator on partition deletion) and its place in open
        transactions; a tombstone is persisted before the answer, so a restart does not bring it
        back. Group members see the change in their next Metadata, as on Kafka. A disk that will not
        let its logs go answers KAFKA_STORAGE_ERROR for that topic and deletes nothing of it."""
        persisted: list[Output] = []
        rest: list[Output] = []
        results = self.topics.deletions(req)
        floor = sum(floor_bytes(DeletableTopicResult) + len(r.name or r.topic_id or "") + len(r.error_message or "") for r in results)
        if floor > self.config.response_max_bytes:  # refused before anything is deleted
            return self._answer_too_large("DeleteTopics", AnswerTooLarge(floor, self.config.response_max_bytes,
                                                                         exact=False), ctx, now_ms)
        for result in results:
            name = result.name
            if result.error_code != ErrorCode.NONE or name is None:
                continue
            try:
                logs = self.logs.delete_topic(name)
            except OSError as exc:
                result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                result.error_message = f"removing the partition logs failed: {exc!r}"
                continue
            count = self.topics.remove(name)
            self.txn.forget_topic(name)
            persisted.append(Persist(TopicTombstone(name, now_ms)))
            rest.append(LogEvent(now_ms, events.TopicDeleted(name, count, logs)))
            for holder in self.consumer_offsets.values():
                for o in holder.delete_topic_offsets(name, now_ms):
                    (persisted if isinstance(o, Persist) else rest).append(o)
            for group_id, group in list(self.groups.items()):
                for o in group.delete_topic_offsets(name, now_ms):
                    (persisted if isinstance(o, Persist) else rest).append(o)
                self._watch(group_id, rest, now_ms)  # an Empty group left with nothing goes at the next check
        return [*persisted, Reply(ctx.reply_to, DeleteTopicsResponse(responses=results)), *rest]

    def _on_DescribeConfigs(self, req: DescribeConfigsRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        """The broker's and topics' configs, as Kafka describes them (coordinator/describe_configs.py)."""
        try:
            response = describe_configs(req, self.config, self.topics.partitions, self.config.response_max_bytes)
        except AnswerTooLarge as exc:
            return self._answer_too_large("DescribeConfigs", exc, ctx, now_ms)
        return [Reply(ctx.reply_to, response)]

    def _on_DescribeCluster(self, req: DescribeClusterRequest, ctx: RequestContext, now_ms: int) -> list[Output]:
        """The one broker, as Metadata names it; cluster id `grouplab`; controller broker.id. No
        authorizer, no authorized operations: Kafka's INT32_MIN whether asked or not."""
        broker = DescribeClusterBroker(self.config.broker_id, self.topics.host, self.topics.port)
        return [Reply(ctx.reply_to, DescribeClusterResponse(cluster_id=CLUSTER_ID, controller_id=self.config.broker_id,
                                                            brokers=[broker]))]

    def _persist_topic(self, name: str, now_ms: int) -> Persist:
        """Topic metadata is durable before the request that changed it is answered."""
        return Persist(TopicRecord(name, self.topics.partitions[name], now_ms, self.topics.topic_id(name)))


def _accepted(out: list[Output], reply_to: Any) -> bool:
    """Did a ConsumerGroupHeartbeat's step answer without an error?"""
    return any(isinstance(o, Reply) and o.to == reply_to and isinstance(o.body, ConsumerGroupHeartbeatResponse)
               and o.body.error_code == ErrorCode.NONE for o in out)
