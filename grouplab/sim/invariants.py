"""Invariants the simulator checks after every event (docs/design.md §8).

1. No partition owned by two members of the same generation (except a static member's fenced
   predecessor, KIP-345's zombie, until it learns it is fenced).
2. No partition owned by two members at the same instant, among the members the coordinator
   counts in the group (a member it has removed may still believe it owns partitions: Kafka's
   zombie, fenced by generation checks; that one is not a violation).
3. Generation ids only go up (within one life of the group: a deleted group's id may start again
   from 0, `group_deleted`), except where Kafka itself goes back: a group loaded from the group log
   (a restarted coordinator, or a cluster's new coordinator after a move, `group_loaded`) is in the
   generation it last wrote. A rebalance in progress at the move had completed its join phase in
   memory only (generation g+1, never written: the write comes with the SyncGroup), so the loaded
   group is in g and its next rebalance makes g+1 again: the number is reused, as in Kafka. What a
   load may never do is go below a generation that was written; a generation that became Stable
   was written, so the load's generation is checked against the last Stable one.
4. At most one leader per generation.
5. Every member's assignment is the one the leader of its generation produced.
6. Liveness: after the faults stop the group is Stable again within a bound derived from the
   timeouts, every live member Stable in it, every subscribed partition owned exactly once.
7. (A cluster of brokers) at most one coordinator per group: the group is in memory only while its
   `__consumer_offsets` partition's leader is live and has loaded it.
8. A fenced generation never commits: an offset commit (plain, or a transaction's staged offsets)
   of a classic group's member is accepted only in a generation at least the last Stable one, and
   each accepted commit request carried what the coordinator knew of its member when the request
   reached it: a classic member its group's generation, a consumer-protocol member (KIP-848) its
   current member epoch, a member the group still counts (a removed or fenced one never commits). With
   [delivery] (grouplab/sim/delivery.py): no acknowledged commit is lost (across a coordinator move
   too), committed offsets never go backwards, and the mode's guarantee holds at the end.

Checks are incremental (on each assignment, on each coordinator event), so a 1,000-member run does
not pay for a full scan after every message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grouplab.consumer.coordinator import MemberState
from grouplab.protocol.states import ConsumerGroupState, MembershipState
from grouplab.coordinator.group import GroupState
from grouplab.epochs import EpochTracker
from grouplab.rebalances import Rebalance, RebalanceTracker
from grouplab.protocol import events
from grouplab.protocol.messages import (OffsetCommitRequest, OffsetCommitResponse, TxnOffsetCommitRequest,
                                        TxnOffsetCommitResponse)
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.types import TopicPartition

if TYPE_CHECKING:
    from grouplab.coordinator.consumer_group import ConsumerGroup
    from grouplab.sim.host import SimHost
    from grouplab.sim.member import SimMember


class Violation(Exception):
    def __init__(self, invariant: str, detail: str, now_ms: int, seed: int, trace: list[str]) -> None:
        super().__init__(f"invariant '{invariant}' violated at t={now_ms} ms (seed {seed}): {detail}")
        self.invariant = invariant
        self.detail = detail
        self.now_ms = now_ms
        self.seed = seed
        self.trace = trace


def format_step(step: tuple) -> str:
    """One trace step as a line: `t=1234 m-3 -> JoinGroup #7`, `t=1250 m-3 <- JoinGroupResponse #7 error=0`."""
    now, who, what, *rest = step
    if what == "->":
        return f"t={now} {who} -> coordinator {rest[0]} #{rest[1]}"
    if what == "<-":
        body, cid = rest
        return f"t={now} coordinator -> {who} {type(body).__name__} #{cid} error={getattr(body, 'error_code', 0)}"
    return f"t={now} {who} {what} {' '.join(map(str, rest))}".rstrip()


class Invariants:
    def __init__(self, sim: "SimHost") -> None:
        self.sim = sim
        self.owners: dict[TopicPartition, set[int]] = {}  # partition -> indexes of members owning it
        self.max_generation = 0
        self.stable_generation = 0  # the last generation that became Stable (and so was written)
        # Leaders, the leader's assignment of each generation, static replacements: one fold
        # over the coordinator's events, shared with the timeline and `grouplab run`.
        self.tracker = RebalanceTracker()
        self.group = self.tracker.group(sim.scenario.group_id)
        # The same for a consumer-protocol group: its epochs, moves and convergences.
        self.epochs = EpochTracker()
        self.every_partition: set[TopicPartition] | None = None  # all_partitions(), once known (read per event)
        self.owned_count = 0  # partitions with at least one owner
        self._blocker: "SimMember | None" = None
        # Set by anything that can change whether the group has settled; heartbeats do not.
        self.dirty = True
        # 8.: commits on their way, by reply address: what the coordinator knew of the committer
        # (generation or member epoch; None: not a member) when the request reached it.
        self._commits: dict[tuple, tuple[str, int, int | None]] = {}
        self._cluster = sim.scenario.brokers > 1  # 7. applies (read after every event)
        self._group_id = sim.scenario.group_id

    # ------------------------------------------------------------------ events from the world

    def fail(self, invariant: str, detail: str) -> None:
        raise Violation(invariant, detail, self.sim.now, self.sim.seed, [format_step(s) for s in self.sim.trace])

    def on_assigned(self, m: "SimMember", partitions: list[TopicPartition]) -> None:
        machine = m.machine
        assert machine is not None
        group = self.sim.group_state() or self.sim.consumer_group_state()
        in_group = group.members if group is not None else {}  # (a dict: looked up, never copied)
        # A consumer-protocol member (KIP-848) has a member epoch, not a generation shared by the
        # group: only "one owner at a time" applies to it, and no leader assigned its partitions.
        kip848 = isinstance(machine.state, MembershipState)
        self.dirty = True
        for tp in partitions:
            holders = self.owners.setdefault(tp, set())
            if not holders:
                self.owned_count += 1
            for o in holders:
                if o == m.index:
                    continue
                other = self.sim.members[o]
                if other.machine is None:
                    continue
                # A zombie under an id a static replacement fenced may own what its replacement
                # now owns, in the same generation, until its next request is refused with
                # FENCED_INSTANCE_ID. Kafka accepts that; so do we.
                fenced = other.machine.member_id in self.group.fenced
                if other.machine.generation_id == machine.generation_id and not fenced and not kip848:
                    self.fail("one owner per generation", f"{tp} assigned to {m.name} while {other.name} owns it "
                                                          f"in the same generation {machine.generation_id}")
                if machine.member_id in in_group and other.machine.member_id in in_group:
                    self.fail("one owner at a time", f"{tp} assigned to {m.name} ({machine.member_id}) while "
                                                      f"{other.name} ({other.machine.member_id}) still owns it, both "
                                                      f"members of the group")
            holders.add(m.index)
        if not kip848:
            self._check_from_leader(m)

    def on_released(self, m: "SimMember", partitions: list[TopicPartition]) -> None:
        self.dirty = True
        for tp in partitions:
            holders = self.owners.get(tp)
            if holders and m.index in holders:
                holders.discard(m.index)
                if not holders:
                    self.owned_count -= 1

    def on_member_gone(self, m: "SimMember") -> None:
        """The process died or closed: whatever it owned, nobody processes any more."""
        if m.machine is not None:
            self.on_released(m, list(m.machine.owned))

    def on_commit_request(self, to: tuple, body: OffsetCommitRequest | TxnOffsetCommitRequest) -> None:
        """8.: note, as the request reaches the coordinator, the generation (classic) or member epoch
        (KIP-848) its member has there; checked against the request if the answer accepts it."""
        if not body.member_id or body.group_id != self.group.group_id:
            return  # a simple consumer's or an admin's commit, or another group's
        knows: int | None = None
        consumer_group = self.sim.consumer_group_state()
        if consumer_group is not None:
            member = consumer_group.members.get(body.member_id)
            knows = member.member_epoch if member is not None else None
        else:
            group = self.sim.group_state()
            if group is not None and body.member_id in group.members:
                knows = group.generation_id
        self._commits[to] = (body.member_id, body.generation_id, knows)

    def on_commit_answer(self, to: tuple, body: OffsetCommitResponse | TxnOffsetCommitResponse) -> None:
        sent = self._commits.pop(to, None)
        if sent is None or body.error_code or not any(p.error_code == 0 for t in body.topics for p in t.partitions):
            return
        member_id, generation, knows = sent
        if knows is None:
            self.fail("a fenced generation never commits",
                      f"{member_id} committed in generation {generation}, not a member of the group when it asked")
        elif generation != knows:
            self.fail("a fenced generation never commits",
                      f"{member_id} committed in generation (member epoch) {generation}, the coordinator's was {knows}")

    def on_topics_changed(self) -> None:
        self.every_partition = None
        self.dirty = True

    def on_coordinator_event(self, ev: LogEvent) -> None:
        payload = ev.payload
        if getattr(payload, "group_id", None) != self.group.group_id:
            return
        self.dirty = True
        if isinstance(payload, events.GroupDeleted):
            self.max_generation = self.stable_generation = 0  # a group made again under this id starts from 0
        elif isinstance(payload, events.GroupStable):
            self.stable_generation = max(self.stable_generation, payload.generation_id)
        elif isinstance(payload, events.GroupLoaded):
            # 3.: a load is in the generation the group last wrote (see the module docstring).
            if payload.generation_id < self.stable_generation:
                self.fail("generations only go up", f"the group was loaded in generation {payload.generation_id}, "
                                                    f"below generation {self.stable_generation}, which was Stable")
            self.max_generation = payload.generation_id
        elif isinstance(payload, (events.OffsetsCommitted, events.TxnOffsetsStaged)):
            if payload.member_id and payload.generation_id < self.stable_generation:
                self.fail("a fenced generation never commits",
                          f"{payload.member_id} committed in generation {payload.generation_id} after generation "
                          f"{self.stable_generation} became Stable")
        if type(payload) is events.GroupConverted:
            # The group changed type (online migration): a classic group it becomes again has
            # generations of its own (from 0 after an Empty consumer group, as in Kafka), so the
            # leaders and assignments of the classic one before are another group's.
            self.max_generation = self.stable_generation = 0
            self.tracker.groups.pop(self.group.group_id, None)
            self.group = self.tracker.group(self.group.group_id)
        if type(payload) is events.GenerationCompleted:
            gen, leader = payload.generation_id, payload.leader
            known = self.group.leaders.get(gen)
            if leader is not None and known is not None and known != leader:
                self.fail("one leader per generation", f"generation {gen} has leaders {known} and {leader}")
            self.sim.stats.generations += 1
        if isinstance(payload, events.ConsumerGroupEvent):
            self._epoch_event(ev)
            return
        rebalance = self.tracker.feed("coordinator", ev)
        if rebalance is not None:
            self._check_one_owner(rebalance)
            if rebalance.duration_ms is not None:
                self.sim.stats.rebalance_durations_ms.append(rebalance.duration_ms)
            self.sim.stats.partitions_moved += len(rebalance.moved)

    def _epoch_event(self, ev: LogEvent) -> None:
        stats, epochs = self.sim.stats, self.epochs
        moves, count = epochs.moves, epochs.epochs
        convergence = epochs.feed("coordinator", ev)
        if epochs.epochs != count:
            stats.group_epochs = epochs.epochs
            stats.epoch_causes = dict(sorted(epochs.causes.items()))
        stats.partitions_moved += epochs.moves - moves
        if convergence is not None:
            stats.convergence_durations_ms.append(convergence.duration_ms)

    def _check_one_owner(self, rebalance: Rebalance) -> None:
        """The leader gave no partition to two members (cheap unless it did: then find which)."""
        if len(rebalance.owners) == sum(len(parts) for parts in rebalance.assignments.values()):
            return
        seen: dict[TopicPartition, str] = {}
        for member, parts in rebalance.assignments.items():
            for tp in parts:
                if tp in seen:
                    self.fail("one owner per generation", f"the leader of generation {rebalance.generation} gave {tp} "
                                                          f"to both {seen[tp]} and {member}")
                seen[tp] = member

    # ------------------------------------------------------------------ per step

    def check(self) -> None:
        if self._cluster:
            self._check_one_coordinator()
        broker = self.sim.broker  # (group_state(), inlined: this runs after every event)
        group = broker.groups.get(self._group_id) if broker is not None else None
        if group is None:
            if self.sim.consumer_group_state() is not None:
                # The group changed type (online migration): a classic group made again from it starts
                # its own generations (one converted from an Empty consumer group starts at 0, as in Kafka).
                self.max_generation = 0
            return
        if group.generation_id < self.max_generation:
            self.fail("generations only go up", f"generation went from {self.max_generation} to {group.generation_id}")
        self.max_generation = group.generation_id

    def _check_one_coordinator(self) -> None:
        """7. At most one coordinator per group (a cluster): the Broker holds the group in memory
        only while its `__consumer_offsets` partition has a live leader that has loaded it."""
        broker = self.sim.broker
        if broker is None or broker.cluster is None:
            return
        group_id = self.sim.scenario.group_id
        if group_id not in broker.groups and group_id not in broker.consumer_groups:
            return
        cluster = broker.cluster
        partition = cluster.partition_of(group_id)
        if cluster.coordinator_of(group_id) not in cluster.nodes.live or partition in cluster.loading:
            self.fail("one coordinator per group", f"group {group_id} is in memory while __consumer_offsets-{partition} "
                                                   f"has no live, loaded leader")

    def _check_from_leader(self, m: "SimMember") -> None:
        machine = m.machine
        assert machine is not None
        assigned = self.group.assignment_of(machine.generation_id, machine.member_id)
        if assigned is None:
            return  # e.g. a generation restored by a restarted coordinator
        if sorted(assigned) != sorted(machine.owned):
            self.fail("assignment from the leader", f"{m.name} owns {sorted(machine.owned)} in generation "
                                                   f"{machine.generation_id}, the leader assigned {sorted(assigned)}")

    # ------------------------------------------------------------------ liveness and metrics

    def all_partitions(self) -> set[TopicPartition]:
        if self.every_partition is None:
            self.every_partition = self.sim.all_partitions()
        return self.every_partition

    def settled(self) -> bool:
        if not self.dirty:
            return False
        self.dirty = False
        consumer_group = self.sim.consumer_group_state()
        if consumer_group is not None:
            return self._consumer_group_settled(consumer_group)
        group = self.sim.group_state()
        if group is None or group.state is not GroupState.STABLE or group.pending_members:
            return False
        if self.owned_count != len(self.all_partitions()):
            return False

        def unsettled(m: "SimMember") -> bool:
            return (m.machine is None or m.hung or m.machine.state is not MemberState.STABLE
                    or m.machine.generation_id != group.generation_id)

        # The member that held things up last time usually still does: look at it first.
        blocker = self._blocker
        if blocker is not None and blocker.up and not blocker.permanently_down and unsettled(blocker):
            return False
        live = self.sim.live_members()
        self._blocker = next((m for m in live if unsettled(m)), None)
        if self._blocker is not None:
            return False
        machines = [m.machine for m in live if m.machine is not None]  # every live member has one
        if {machine.member_id for machine in machines} != set(group.members):
            return False
        owned = [tp for machine in machines for tp in machine.owned]
        if len(owned) != len(set(owned)) or set(owned) != self.all_partitions():
            return False
        return self.sim.delivery is None or self.sim.delivery.drained()

    def _consumer_group_settled(self, group: "ConsumerGroup") -> bool:
        """A consumer-protocol group is Stable, its members are the live ones (of either protocol),
        each stable at the target assignment's epoch, and every partition is owned once."""
        if group.state is not ConsumerGroupState.STABLE or self.owned_count != len(self.all_partitions()):
            return False
        live = self.sim.live_members()
        # A classic member inside the group (online migration) is stable as a classic member is, its
        # generation the member epoch its JoinGroup answer gave it.
        if any(m.machine is None or m.hung or m.machine.state not in (MembershipState.STABLE, MemberState.STABLE)
               or m.machine.generation_id != group.assignment_epoch for m in live):
            self.dirty = True  # members converge on their own heartbeats: look again after the next step
            return False
        machines = [m.machine for m in live if m.machine is not None]
        if {machine.member_id for machine in machines} != set(group.members):
            self.dirty = True
            return False
        owned = [tp for machine in machines for tp in machine.owned]
        if len(owned) != len(set(owned)) or set(owned) != self.all_partitions():
            return False
        return self.sim.delivery is None or self.sim.delivery.drained()

    def unowned_count(self) -> int:
        return len(self.all_partitions()) - self.owned_count

    def imbalance(self) -> int:
        counts = [len(m.machine.owned) for m in self.sim.live_members() if m.machine is not None]
        return max(counts) - min(counts) if counts else 0
