"""`uniform` when every member subscribes to the same topics (Kafka's
UniformHomogeneousAssignmentBuilder; OptimizedUniformAssignmentBuilder before it).

With P partitions over N members each member's quota is P // N, and P % N of them may hold one
more. In member order (member id), each member keeps as much of its current assignment as its
quota allows — topics by name, lowest partition numbers first — and gives up the rest. A member
that kept a full quota + 1 claims one of the extra places; the others leave theirs for later.
Then the unassigned partitions (never owned, topic by topic, then the given-up ones in the order
they were given up) fill the members below quota in member order, the last ones taking the
extra places still open. So only what balance requires moves.

Kafka takes members and topics in hash-map order (member ids in the tests' tree maps); here it is
always member id and topic name, so the same input gives the same answer.
"""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import Mapping

from grouplab.coordinator.server_assignors.spec import MemberSpec, TargetAssignment


def assign_homogeneous(members: Mapping[str, MemberSpec], partitions_per_topic: Mapping[str, int],
                       topics: frozenset[str]) -> TargetAssignment:
    member_ids = sorted(members)
    known = sorted(t for t in topics if t in partitions_per_topic)
    result: TargetAssignment = {m: {} for m in member_ids}
    if not known or not member_ids:
        return result
    total = sum(partitions_per_topic[t] for t in known)
    min_quota, extras = divmod(total, len(member_ids))

    owned: dict[str, set[int]] = {t: set() for t in known}  # claimed by some member (first claim wins)
    kept: list[dict[str, list[int]]] = []
    given_up: list[tuple[str, int]] = []
    unfilled: list[list[int]] = []  # [member index, remaining quota]
    for index, member_id in enumerate(member_ids):
        quota = min_quota + 1 if extras > 0 else min_quota
        with_extra = extras > 0
        mine: dict[str, list[int]] = {}
        current = members[member_id].assignment
        for topic in sorted(current) if current else ():
            if topic not in owned:
                continue  # unsubscribed or unknown topic: dropped
            count = partitions_per_topic[topic]
            claimed = owned[topic]
            for p in sorted(current[topic]):
                if p >= count or p in claimed:
                    continue
                claimed.add(p)
                if quota > 0:
                    mine.setdefault(topic, []).append(p)
                    quota -= 1
                else:
                    given_up.append((topic, p))
        kept.append(mine)
        if quota > 0 and with_extra:
            quota -= 1  # it did not fill quota + 1: leave the extra place to another member
            with_extra = False
        if quota == 0 and with_extra:
            extras -= 1
        if quota > 0 or (extras > 0 and not with_extra):
            unfilled.append([index, quota])

    # The last members still unfilled take the extra places left.
    for entry in reversed(unfilled):
        if extras <= 0:
            break
        entry[1] += 1
        extras -= 1

    # The unassigned partitions as runs of one topic, in hand-out order: never-owned ones topic by
    # topic, then the given-up ones in the order they were given up.
    runs: list[tuple[str, list[int]]] = []
    for t in known:
        claimed = owned[t]
        free = [p for p in range(partitions_per_topic[t]) if p not in claimed] if claimed else \
            list(range(partitions_per_topic[t]))
        if free:
            runs.append((t, free))
    for topic, run in groupby(given_up, itemgetter(0)):
        runs.append((topic, [p for _, p in run]))
    run_index, offset = 0, 0
    for index, remaining in unfilled:
        mine = kept[index]
        while remaining > 0 and run_index < len(runs):
            topic, free = runs[run_index]
            taken = free[offset:offset + remaining]
            mine.setdefault(topic, []).extend(taken)
            remaining -= len(taken)
            offset += len(taken)
            if offset == len(free):
                run_index, offset = run_index + 1, 0
    if run_index < len(runs):
        raise AssertionError("partitions left unassigned")  # cannot happen: the quotas add up to the total
    for index, member_id in enumerate(member_ids):
        result[member_id] = {t: frozenset(ps) for t, ps in sorted(kept[index].items())}
    return result
