"""A hypothesis state machine over a mixed consumer group (coordinator/consumer_classic.py): clients
of both protocols join, heartbeat, revoke, leave, crash and come back, in any order, with time
passing. Classic clients are eager, as kafka-python's and librdkafka's default assignors: on
REBALANCE_IN_PROGRESS they give up everything, then rejoin and sync. Checked after every step: no
partition is held by two clients, and the coordinator's holders match its members; after a
convergence every subscribed partition is held by exactly one live client; and the group log the
steps wrote restores the group as it is, classic members' metadata included (docs/protocol.md §11.8). The policy is `upgrade`
here, so the group stays a consumer group (the downgrade is the Broker's, tests/test_consumer_migration.py)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event as note_event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from grouplab.coordinator import consumer_classic
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.consumer_group import ConsumerGroup
from grouplab.coordinator.server_assignors import server_assignor
from grouplab.protocol import consumer_protocol
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Persist, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatTopicPartitions,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    SyncGroupRequest,
)
from grouplab.protocol.types import Subscription
from tests.test_consumer_group import durable_view, records_of

G = "g"
CLIENTS = 4  # 0, 1 classic; 2, 3 consumer protocol
TOPICS = {"a": 3, "b": 3}
CLASSIC_SESSION_MS = 10_000


@dataclass
class Client:
    classic: bool
    member_id: str = ""
    epoch: int = 0
    joined: bool = False
    crashed: bool = False
    held: set[tuple[str, int]] = field(default_factory=set)
    revoking: set[tuple[str, int]] = field(default_factory=set)

    def drop_all(self) -> None:
        self.held.clear()
        self.revoking.clear()
        self.joined, self.epoch = False, 0


class MixedGroupMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        counter = itertools.count(1)
        self.g = ConsumerGroup(G, BrokerConfig(consumer_migration_policy="upgrade"),
                               {"uniform": server_assignor("uniform"), "range": server_assignor("range")},
                               lambda client_id: f"{client_id}-{next(counter)}")
        self.now = 0
        self.clients = [Client(classic=i < 2) for i in range(CLIENTS)]
        self.timers: dict[tuple, int] = {}
        self.by_member: dict[str, Client] = {}
        self.log: list = []  # the records the group wrote: its group log

    # ---- plumbing

    def run(self, outputs: list) -> Any:
        answer = None
        for o in outputs:
            if isinstance(o, ArmTimer):
                self.timers[o.key] = o.deadline_ms
            elif isinstance(o, CancelTimer):
                self.timers.pop(o.key, None)
            elif isinstance(o, Reply):
                answer = o.body
            elif isinstance(o, Persist):
                self.log.append(o.record)
            elif isinstance(o, LogEvent) and o.event == "consumer_member_removed":
                gone = self.by_member.pop(o.fields["member_id"], None)
                if gone is not None:
                    gone.drop_all()
        return answer

    def classic_rejoin(self, c: Client) -> None:
        """Eager: give everything up, then JoinGroup (twice for a new member: MEMBER_ID_REQUIRED) and SyncGroup."""
        c.held.clear()
        meta = consumer_protocol.encode_subscription(Subscription(topics=sorted(TOPICS)))
        for _ in range(2):
            req = JoinGroupRequest(G, CLASSIC_SESSION_MS, 30_000, c.member_id, "consumer",
                                   [JoinGroupRequestProtocol("range", meta)])
            answer = self.run(consumer_classic.handle_join(self.g, req, "j", "k", "h", self.now, TOPICS))
            if answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                c.member_id = answer.member_id
                continue
            break
        assert answer.error_code == ErrorCode.NONE, answer
        c.member_id, c.epoch, c.joined = answer.member_id, answer.generation_id, True
        self.by_member[c.member_id] = c
        synced = self.run(consumer_classic.handle_sync(self.g, SyncGroupRequest(G, c.epoch, c.member_id), "s", self.now))
        if synced.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
            return  # its next heartbeat says rejoin too
        assert synced.error_code == ErrorCode.NONE, synced
        c.held = {(tp.topic, tp.partition) for tp in consumer_protocol.decode_assignment(synced.assignment).partitions}

    def classic_heartbeat(self, c: Client) -> None:
        answer = self.run(consumer_classic.handle_heartbeat(self.g, HeartbeatRequest(G, c.epoch, c.member_id), "h", self.now))
        if answer.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
            note_event("a classic member told to rejoin")
            self.classic_rejoin(c)
        elif answer.error_code:
            assert answer.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION), answer
            self.by_member.pop(c.member_id, None)
            c.drop_all()
            c.member_id = ""

    def consumer_send(self, c: Client, req: ConsumerGroupHeartbeatRequest) -> None:
        answer = self.run(self.g.heartbeat(req, "r", "client", "host", self.now, TOPICS))
        if answer.error_code:
            assert answer.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID), answer
            self.by_member.pop(c.member_id, None)
            c.drop_all()
            return
        if req.member_epoch < 0:
            self.by_member.pop(c.member_id, None)
            c.drop_all()
            return
        c.member_id, c.epoch, c.joined = answer.member_id, answer.member_epoch, True
        self.by_member[c.member_id] = c
        if answer.assignment is not None:
            given = {(t, p) for t, ps in answer.assignment.items() for p in ps}
            c.revoking |= c.held - given
            c.held |= given

    def consumer_heartbeat(self, c: Client) -> None:
        owned: dict[str, list[int]] = {}
        for t, p in sorted(c.held):
            owned.setdefault(t, []).append(p)
        self.consumer_send(c, ConsumerGroupHeartbeatRequest(G, c.member_id, c.epoch, topic_partitions=[
            ConsumerGroupHeartbeatTopicPartitions(t, ps) for t, ps in owned.items()]))

    def beat(self, c: Client) -> None:
        if c.classic:
            self.classic_heartbeat(c)
        else:
            self.consumer_heartbeat(c)

    def advance(self, ms: int) -> None:
        self.now += ms
        while True:
            due = sorted((deadline, key) for key, deadline in self.timers.items() if deadline <= self.now)
            if not due:
                return
            deadline, key = due[0]
            del self.timers[key]
            self.run(self.g.timer(key, deadline))

    # ---- rules

    @rule(i=st.integers(0, CLIENTS - 1))
    def join(self, i: int) -> None:
        c = self.clients[i]
        if c.joined:
            return
        c.crashed = False
        if c.classic:
            c.member_id = ""
            self.classic_rejoin(c)
        else:
            self.consumer_send(c, ConsumerGroupHeartbeatRequest(G, "", 0, rebalance_timeout_ms=30_000,
                                                                subscribed_topic_names=sorted(TOPICS), topic_partitions=[]))

    @rule(i=st.integers(0, CLIENTS - 1))
    def heartbeat(self, i: int) -> None:
        c = self.clients[i]
        if c.joined and not c.crashed:
            self.beat(c)

    @rule(i=st.integers(2, CLIENTS - 1))
    def finish_revocation(self, i: int) -> None:
        c = self.clients[i]
        c.held -= c.revoking
        c.revoking.clear()

    @rule(i=st.integers(0, CLIENTS - 1))
    def leave(self, i: int) -> None:
        c = self.clients[i]
        if not c.joined or c.crashed:
            return
        if c.classic:
            c.held.clear()
            self.run(consumer_classic.handle_leave(self.g, LeaveGroupRequest(G, [LeaveGroupRequestMember(c.member_id)]), "l", self.now))
            self.by_member.pop(c.member_id, None)
            c.drop_all()
        else:
            self.consumer_send(c, ConsumerGroupHeartbeatRequest(G, c.member_id, -1))

    @rule(i=st.integers(0, CLIENTS - 1))
    def crash(self, i: int) -> None:
        c = self.clients[i]
        if c.joined:
            c.crashed = True
            c.held.clear()
            c.revoking.clear()

    @rule(ms=st.sampled_from([1_000, 5_000, 20_000, 50_000]))
    def time_passes(self, ms: int) -> None:
        for c in self.clients:
            if c.joined and not c.crashed:
                self.beat(c)
        self.advance(ms)

    @rule()
    def converge(self) -> None:
        for _ in range(12):
            for c in self.clients:
                if c.joined and not c.crashed:
                    c.held -= c.revoking
                    c.revoking.clear()
                    self.beat(c)
            self.advance(5_000)
        live = [c for c in self.clients if c.joined and not c.crashed]
        assert {c.member_id for c in live} == set(self.g.members)
        if not live:
            return
        note_event(f"converged with {sum(c.classic for c in live)} classic and {sum(not c.classic for c in live)} consumer members")
        assert self.g.state.value == "Stable", self.g.state
        owned = sorted(tp for c in live for tp in c.held)
        assert owned == sorted((t, p) for t, n in TOPICS.items() for p in range(n))

    # ---- invariants

    @invariant()
    def no_partition_has_two_holders(self) -> None:
        if not hasattr(self, "g"):
            return
        seen: dict[tuple[str, int], str] = {}
        for mid, m in self.g.members.items():
            for t, ps in m.progress.held().items():
                for p in ps:
                    assert (t, p) not in seen, f"{t}-{p} held by {seen[(t, p)]} and {mid}"
                    seen[(t, p)] = mid
        assert seen == self.g.holders
        clients: dict[tuple[str, int], int] = {}
        for i, c in enumerate(self.clients):
            for tp in c.held:
                assert tp not in clients, f"{tp} held by clients {clients[tp]} and {i}"
                clients[tp] = i
            if c.joined and not c.crashed:
                assert c.held <= {(t, p) for t, ps in self.g.members[c.member_id].progress.held().items() for p in ps}


    @invariant()
    def the_log_restores_the_group(self) -> None:
        if not hasattr(self, "g") or not self.log:
            return
        restored = ConsumerGroup(G, self.g.config, self.g.assignors, self.g.new_member_id)
        restored.restore(*records_of(self.log), self.now, TOPICS)
        assert durable_view(restored) == durable_view(self.g)
        assert {m: r.classic for m, r in restored.members.items()} == {m: r.classic for m, r in self.g.members.items()}


TestMixedGroupRandomSequences = MixedGroupMachine.TestCase
TestMixedGroupRandomSequences.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
