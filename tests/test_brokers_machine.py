"""A cluster of brokers under any sequence of brokers stopping, coming back and elections, with
commits and joins sent to any broker (hypothesis): after every step, a group is in memory only
where its coordinator is live and done loading (one coordinator per group at a time), a request at
another broker is refused and changes nothing, and no acknowledged commit is ever lost."""

from __future__ import annotations

from typing import Any

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.brokers import ELECTION_TIMER, LOAD_TIMER
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.placement import NO_LEADER
from grouplab.protocol.effects import ArmTimer, CancelTimer, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (ConsumerGroupHeartbeatRequest, OffsetCommitRequest,
                                        OffsetCommitRequestPartition, OffsetCommitRequestTopic, OffsetFetchRequest)

GROUPS = ["orders", "g", "a"]  # __consumer_offsets-31, 3, 47: preferred leaders 1, 0, 2
NODES = 3
T0 = 1_700_000_000_000
REFUSED = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


class ClusterMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.b = Broker(BrokerConfig(group_initial_rebalance_delay_ms=0, coordinator_load_time_ms=500),
                        SequentialMemberIds(), brokers=NODES)
        self.b.topics.partitions.update({"t": 2})
        self.now = T0
        self.timers: dict[tuple, int] = {}  # the cluster's own timers armed: load and election
        self.acked: dict[str, dict[int, int]] = {}  # group -> partition -> acknowledged offset
        self.joined: set[str] = set()

    # ------------------------------------------------------------------ driving

    def _apply(self, out: list[Any]) -> None:
        for o in out:
            if isinstance(o, ArmTimer) and o.key[0] in (LOAD_TIMER, ELECTION_TIMER[0]):
                self.timers[o.key] = o.deadline_ms
            elif isinstance(o, CancelTimer):
                self.timers.pop(o.key, None)

    def _send(self, node: int, api: str, body: Any) -> Any:
        self.now += 1
        out = self.b.handle(api, body, RequestContext("r", "c", "h", node), self.now)
        self._apply(out)
        replies = [o.body for o in out if isinstance(o, Reply) and o.to == "r"]
        return replies[0] if replies else None

    def _coordinator(self, group: str) -> int:
        return self.b.coordinator_node(group)

    def _loaded(self, group: str) -> bool:
        cluster = self.b.cluster
        assert cluster is not None
        return self._coordinator(group) != NO_LEADER and cluster.partition_of(group) not in cluster.loading

    # ------------------------------------------------------------------ rules

    @rule(group=st.sampled_from(GROUPS), node=st.integers(0, NODES - 1), partition=st.integers(0, 1),
          offset=st.integers(0, 1000))
    def commit(self, group: str, node: int, partition: int, offset: int) -> None:
        if group in self.joined:
            return  # a consumer group with members takes no simple commit
        before = dict(self._committed_now(group)) if self._loaded(group) else None
        req = OffsetCommitRequest(group, [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(partition, offset)])])
        answer = self._send(node, "OffsetCommit", req)
        if node not in self.b.cluster.nodes.live:  # type: ignore[union-attr]
            assert answer is None  # a stopped broker answers nothing
            return
        code = answer.topics[0].partitions[0].error_code
        if node == self._coordinator(group) and self._loaded(group):
            assert code == 0, answer
            self.acked.setdefault(group, {})[partition] = offset
        else:
            assert code in REFUSED, answer
            if before is not None:
                assert self._committed_now(group) == before  # refused: nothing changed

    @rule(node=st.integers(0, NODES - 1))
    def join(self, node: int) -> None:
        group = "g"
        if group in self.acked:
            return
        req = ConsumerGroupHeartbeatRequest(group, "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
                                            topic_partitions=[])
        answer = self._send(node, "ConsumerGroupHeartbeat", req)
        if node not in self.b.cluster.nodes.live:  # type: ignore[union-attr]
            assert answer is None
        elif node == self._coordinator(group) and self._loaded(group):
            assert answer.error_code == 0 and answer.member_epoch >= 1
            self.joined.add(group)
        else:
            assert answer.error_code in REFUSED

    @precondition(lambda self: len(self.b.cluster.nodes.live) > 0)
    @rule(node=st.integers(0, NODES - 1))
    def kill(self, node: int) -> None:
        if node in self.b.cluster.nodes.live:  # type: ignore[union-attr]
            self.now += 1
            self._apply(self.b.broker_down(node, self.now))

    @rule(node=st.integers(0, NODES - 1))
    def restart(self, node: int) -> None:
        if node not in self.b.cluster.nodes.live:  # type: ignore[union-attr]
            self.now += 1
            self._apply(self.b.broker_up(node, self.now))

    @rule()
    def elect(self) -> None:
        self.now += 1
        self._apply(self.b.elect_preferred_leaders(self.now))

    @rule()
    def time_passes(self) -> None:
        """Every due cluster timer fires, in deadline order (loads, the auto election)."""
        self.now += 400
        for key, deadline in sorted(self.timers.items(), key=lambda kv: kv[1]):
            if deadline <= self.now and self.timers.get(key) == deadline:
                del self.timers[key]
                self._apply(self.b.on_timer(key, deadline))

    # ------------------------------------------------------------------ invariants

    def _committed_now(self, group: str) -> dict[int, int]:
        holder = self.b.consumer_offsets.get(group) or self.b.groups.get(group)
        if holder is None:
            return {}
        return {tp.partition: c.offset for tp, c in holder.offsets.committed.items()}

    @invariant()
    def one_coordinator_per_group(self) -> None:
        for group in self.b.group_ids():
            assert self._loaded(group), (group, self._coordinator(group), self.b.cluster.loading)  # type: ignore[union-attr]

    @invariant()
    def no_acknowledged_commit_is_lost(self) -> None:
        for group, offsets in self.acked.items():
            if self._loaded(group):
                assert self._committed_now(group) == offsets, (group, offsets, self._committed_now(group))
                fetched = self._send(self._coordinator(group), "OffsetFetch", OffsetFetchRequest(group))
                got = {p.partition_index: p.committed_offset for t in fetched.topics for p in t.partitions}
                assert {p: o for p, o in got.items() if o >= 0} == offsets


TestCluster = ClusterMachine.TestCase
TestCluster.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
