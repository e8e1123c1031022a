"""One consumer-protocol member's next step toward its target assignment (KIP-848), pure: Kafka's
CurrentAssignmentBuilder. Given the member's assignment state, the group's target for it (and that
target's epoch), the partitions it says it owns and who else holds what, it returns the member's
next state. No clock, no I/O, no group: consumer_group.py calls it on each of the member's heartbeats.

The rules, per state:

    STABLE ──target epoch moved──▶ next step (below)
    UNREVOKED_PARTITIONS ──still owns a partition pending revocation (or did not say)──▶ unchanged
                         ──revoked them all──▶ next step
    UNRELEASED_PARTITIONS ──▶ next step (takes what was released since)

    next step:  keep       = assigned ∩ target
                revoke     = assigned − keep
                to assign  = target − keep − (held by another member)
      revoke non-empty and still owned  → UNREVOKED_PARTITIONS, epoch unchanged, assigned = keep
      else                              → target epoch; assigned = keep + to assign;
                                          UNRELEASED_PARTITIONS if some of the target is held
                                          elsewhere, else STABLE

A partition is "held" by a member while it is assigned to it or pending its revocation: it goes
to its next owner only after the previous one stopped reporting it (revoke first, then assign).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from grouplab.protocol.states import ConsumerMemberState

# topic -> partitions; kept without empty sets, so that two equal assignments compare equal.
Assignment = Mapping[str, frozenset[int]]


def normalized(assignment: Mapping[str, Iterable[int]]) -> dict[str, frozenset[int]]:
    return {topic: frozenset(ps) for topic, ps in sorted(assignment.items()) if ps}


def pairs(assignment: Assignment) -> list[list[object]]:
    """The event log's `[[topic, partition], ...]`, sorted."""
    return [[topic, p] for topic in sorted(assignment) for p in sorted(assignment[topic])]


def union(a: Assignment, b: Assignment) -> dict[str, frozenset[int]]:
    return normalized({t: a.get(t, frozenset()) | b.get(t, frozenset()) for t in set(a) | set(b)})


def is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    """Kafka's isSubset: False when the member did not report what it owns."""
    return owned is not None and all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Kafka's ownsRevokedPartitions: a member that did not report its partitions still owns them."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


@dataclass(frozen=True)
class MemberAssignment:
    """What the coordinator knows of one member's assignment (Kafka's ConsumerGroupMember fields)."""

    state: ConsumerMemberState = ConsumerMemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def held(self) -> dict[str, frozenset[int]]:
        return union(self.assigned, self.pending_revocation)


def reconcile(member: MemberAssignment, target_epoch: int, target: Assignment, owned: Assignment | None,
              held_by_other: Callable[[str, int], bool]) -> MemberAssignment:
    """The member's next state (the same object if it cannot move). `held_by_other(topic, p)`:
    is the partition assigned to, or pending revocation by, another member?"""
    if member.state is ConsumerMemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
    elif member.state is ConsumerMemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member
    return _next_step(member, target_epoch, target, owned, held_by_other)


def unreleased(member: MemberAssignment, target: Assignment, held_by_other: Callable[[str, int], bool]) -> dict[str, frozenset[int]]:
    """The member's target partitions it does not have because another member still holds them."""
    return normalized({t: {p for p in ps - member.assigned.get(t, frozenset()) if held_by_other(t, p)}
                       for t, ps in target.items()})


def _next_step(member: MemberAssignment, target_epoch: int, target: Assignment, owned: Assignment | None,
               held_by_other: Callable[[str, int], bool]) -> MemberAssignment:
    keep: dict[str, frozenset[int]] = {}
    revoke: dict[str, frozenset[int]] = {}
    to_assign: dict[str, frozenset[int]] = {}
    waiting = False
    for topic in sorted(set(target) | set(member.assigned)):
        wanted = target.get(topic, frozenset())
        current = member.assigned.get(topic, frozenset())
        keep[topic] = current & wanted
        revoke[topic] = current - keep[topic]
        mine = member.pending_revocation.get(topic, frozenset())
        free = {p for p in wanted - keep[topic] if p in mine or not held_by_other(topic, p)}
        waiting = waiting or len(free) < len(wanted - keep[topic])
        to_assign[topic] = frozenset(free)
    keep, revoke, to_assign = normalized(keep), normalized(revoke), normalized(to_assign)
    if revoke and owns_any(owned, revoke):
        return MemberAssignment(ConsumerMemberState.UNREVOKED_PARTITIONS, member.member_epoch, member.member_epoch,
                                keep, revoke)
    state = ConsumerMemberState.UNRELEASED_PARTITIONS if waiting else ConsumerMemberState.STABLE
    return MemberAssignment(state, target_epoch, member.member_epoch, union(keep, to_assign), {})
