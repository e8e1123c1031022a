"""A slow, literal model of Kafka's sticky assignment for unequal subscriptions, for tests only.

It follows Kafka's published steps the plain way, as Kafka's Java does them: "is it balanced?" by
scanning every member's every subscribable partition, "least loaded subscriber" by walking all
members in (count, member id) order, an owner map rebuilt from the assignment. It shares nothing
with consumer/assignors/sticky_general.py but Java's orders (java_order.py), so the fast
implementation can be held to it on random groups (tests/test_sticky_model.py).
"""

from __future__ import annotations

from typing import Mapping

from grouplab.consumer.assignors.java_order import hashmap_order, hashset_first, java_key, partition_hash, string_hash
from grouplab.consumer.assignors.sticky import decode_user_data
from grouplab.protocol.types import Subscription, TopicPartition


def member_claim(sub: Subscription, name: str) -> tuple[list[TopicPartition], int]:
    if name == "sticky":
        decoded = decode_user_data(sub.user_data) if sub.user_data else None
        if decoded is None:
            return [], -1
        return decoded[0], -1 if decoded[1] is None else decoded[1]
    return list(sub.owned_partitions), sub.generation_id


def model_general(partitions_per_topic: Mapping[str, int], subs: Mapping[str, Subscription],
                  name: str) -> dict[str, list[TopicPartition]]:
    ppt = {t: n for t, n in partitions_per_topic.items() if any(t in s.topics for s in subs.values())}
    exists = {TopicPartition(t, p) for t, n in ppt.items() for p in range(n)}
    order = hashmap_order(subs)
    claims = {m: member_claim(subs[m], name) for m in order}

    # Claims, met in HashMap order.
    owned: dict[str, list[TopicPartition]] = {m: [] for m in order}
    holder: dict[TopicPartition, str] = {}
    for m in order:
        parts, gen = claims[m]
        for p in dict.fromkeys(parts):
            if p not in exists:
                continue
            if p not in holder:
                owned[m].append(p)
                holder[p] = m
                continue
            other = subs[holder[p]].generation_id
            if gen < other:
                continue
            if p in owned[holder[p]]:
                owned[holder[p]].remove(p)
            if gen > other:
                owned[m].append(p)
            holder[p] = m
    max_gen = max([g for _, g in claims.values()] + [-1])
    prev: dict[TopicPartition, tuple[str, int]] = {}
    for m in order:
        parts, gen = claims[m]
        if gen < max_gen:
            for p in parts:
                if p in exists and (p not in prev or gen > prev[p][1]):
                    prev[p] = (m, gen)

    topics_of = {m: [t for t in dict.fromkeys(subs[m].topics) if t in ppt] for m in subs}
    members = sorted(subs, key=java_key)
    current = {m: [p for p in owned[m] if p.topic in topics_of[m]] for m in members}
    revocation_required = any(p.topic not in topics_of[m] for m in members for p in owned[m])
    initializing = all(not ps for ps in current.values())
    subscribers = {t: [m for m in members if t in topics_of[m]] for t in ppt}

    def owner_of() -> dict[TopicPartition, str]:
        return {p: m for m, ps in current.items() for p in ps}

    def key(m: str) -> tuple[int, bytes]:
        return (len(current[m]), java_key(m))

    sorted_topics = sorted(ppt, key=lambda t: (len(subscribers[t]), java_key(t)))
    all_parts = [TopicPartition(t, p) for t in sorted_topics for p in range(ppt[t])]
    taken = set(owner_of())
    unassigned = [p for p in all_parts if p not in taken]
    for p in unassigned:
        if subscribers[p.topic]:
            m = min(subscribers[p.topic], key=key)
            current[m].append(p)

    live = {t for t in ppt if len(subscribers[t]) >= 2}
    participants = [m for m in members
                    if len(current[m]) < sum(ppt[t] for t in topics_of[m]) or any(p.topic in live for p in current[m])]
    moves_of: dict[TopicPartition, tuple[str, str]] = {}
    sets: dict[str, dict[tuple[str, str], dict[TopicPartition, tuple[int, int]]]] = {}
    sizes: dict[tuple[str, tuple[str, str]], int] = {}
    seq = [0]

    def balanced() -> bool:
        owner = owner_of()
        for c in participants:
            for t in topics_of[c]:
                for i in range(ppt[t]):
                    p = TopicPartition(t, i)
                    if p not in current[c] and len(current[c]) + 1 < len(current[owner[p]]):
                        return False
        return True

    def record(p: TopicPartition, pair: tuple[str, str]) -> None:
        s = sets.setdefault(p.topic, {}).setdefault(pair, {})
        if not s:
            sizes[(p.topic, pair)] = 0
        seq[0] += 1
        s[p] = (partition_hash(string_hash(p.topic), p.partition), seq[0])
        sizes[(p.topic, pair)] = max(sizes[(p.topic, pair)], len(s))
        moves_of[p] = pair

    def move(p: TopicPartition, new: str) -> None:
        old = owner_of()[p]
        if p in moves_of:
            a, b = moves_of.pop(p)
            del sets[p.topic][(a, b)][p]
            if not sets[p.topic][(a, b)]:
                del sets[p.topic][(a, b)]
            if a != new:
                record(p, (a, new))
        else:
            record(p, (old, new))
        current[old].remove(p)
        current[new].append(p)

    def reassign(p: TopicPartition, new: str) -> None:
        src = moves_of[p][0] if p in moves_of else owner_of()[p]
        reverse = sets.get(p.topic, {}).get((new, src))
        move(hashset_first(reverse, sizes[(p.topic, (new, src))]) if reverse else p, new)

    def perform(parts: list[TopicPartition]) -> bool:
        done = False
        while True:
            modified = False
            for p in parts:
                if balanced():
                    break
                c = owner_of()[p]
                pm = prev.get(p, (None, 0))[0]
                if pm is not None and pm in participants and p.topic in topics_of[pm] \
                        and len(current[c]) > len(current[pm]) + 1:
                    reassign(p, pm)
                    done = modified = True
                    continue
                if any(len(current[c]) > len(current[o]) + 1 for o in subscribers[p.topic]):
                    reassign(p, min((m for m in participants if p.topic in topics_of[m]), key=key))
                    done = modified = True
            if not modified:
                return done

    def score() -> int:
        counts = [len(current[m]) for m in participants]
        return sum(abs(a - b) for i, a in enumerate(counts) for b in counts[i + 1:])

    before = {m: list(ps) for m, ps in current.items()}
    before_score = score()
    performed = False
    if not revocation_required:
        performed = perform([p for p in unassigned if p.topic in live])
    performed = perform([p for p in all_parts if p.topic in live]) or performed
    if not initializing and performed and score() >= before_score:
        current.clear()
        current.update(before)
    return {m: sorted(current[m]) for m in subs}


def model_constrained(partitions_per_topic: Mapping[str, int], subs: Mapping[str, Subscription],
                      name: str) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
    """Kafka's assignment for identical subscriptions, one partition at a time: (assignment,
    partitions transferring ownership)."""
    ppt = {t: n for t, n in partitions_per_topic.items() if any(t in s.topics for s in subs.values())}
    exists = {TopicPartition(t, p) for t, n in ppt.items() for p in range(n)}
    order = hashmap_order(subs)
    owned: dict[str, list[TopicPartition]] = {m: [] for m in order}
    holder: dict[TopicPartition, str] = {}
    doubly: set[TopicPartition] = set()
    for m in order:
        parts, gen = member_claim(subs[m], name)
        for p in dict.fromkeys(parts):
            if p not in exists:
                continue
            if p in holder:
                other = subs[holder[p]].generation_id
                if gen < other:
                    continue
                if p in owned[holder[p]]:
                    owned[holder[p]].remove(p)
                if gen == other:
                    doubly.add(p)
                else:
                    owned[m].append(p)
            else:
                owned[m].append(p)
            holder[p] = m

    total = len(exists)
    low, over_wanted = divmod(total, len(order))
    high = low + (1 if over_wanted else 0)
    over = 0
    assignment: dict[str, list[TopicPartition]] = {}
    under: list[str] = []
    at_min: list[str] = []
    revoked: set[TopicPartition] = set()
    for m in order:
        mine = sorted((p for p in owned[m] if p not in doubly), key=lambda p: (p.partition, java_key(p.topic)))
        if len(mine) < low:
            assignment[m] = mine
            under.append(m)
        elif len(mine) >= high and over < over_wanted:
            over += 1
            if over == over_wanted:
                at_min.clear()
            assignment[m] = mine[:high]
            revoked.update(mine[high:])
        else:
            assignment[m] = mine[:low]
            revoked.update(mine[low:])
            if over < over_wanted:
                at_min.append(m)
    kept = {p for ps in assignment.values() for p in ps}
    free = [TopicPartition(t, p) for t in sorted(ppt, key=java_key) for p in range(ppt[t])
            if TopicPartition(t, p) not in kept]
    under.sort(key=java_key)
    at_min.sort(key=java_key)
    transferring: dict[TopicPartition, str] = {}
    i = 0  # the iterator's position in `under`
    for p in free:
        if i < len(under):
            m = under[i]
            i += 1
        elif not under:
            m = at_min.pop(0)
        else:
            i = 0
            m = under[i]
            i += 1
        assignment[m].append(p)
        if p in revoked or p in doubly:
            transferring[p] = m
        if len(assignment[m]) == low and m in under:
            i -= 1
            under.remove(m)
            at_min.append(m)
    return {m: sorted(assignment[m]) for m in subs}, transferring
