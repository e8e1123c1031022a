"""Unit and property tests of the `sticky` (eager) and `cooperative-sticky` (KIP-429) assignors,
through the public API (`get_assignor(name).assign(...)`).

The worked examples come from the project's seed documents and docs/design.md and are written out as
explicit expected dicts, with Kafka's results (tests/test_sticky_kafka.py carries Kafka's own unit
tests). The property tests check Kafka's StickyAssignor contract (KIP-54): a valid assignment,
balanced first, sticky second; and the cooperative one (KIP-429): a member never gets a partition
it did not own while another member still owns it, and follow-up rounds complete the moves.

Helpers that compute expectations (claim resolution by Kafka's rules, the balance check) are
written here independently of `consumer/assignors/sticky*.py`, so the tests do not simply re-run
the code under test; only Java's HashMap order is shared (tests/test_java_order.py holds it to
values Java computes).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Mapping

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.consumer.assignors import get_assignor
from grouplab.consumer.assignors.base import RebalanceProtocol
from grouplab.consumer.assignors.java_order import hashmap_order
from grouplab.consumer.assignors.sticky import decode_user_data, encode_user_data, is_balanced
from grouplab.protocol.types import Subscription, TopicPartition

STICKY_ASSIGNORS = ["sticky", "cooperative-sticky"]


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


def subs(**topics_by_member: list[str]) -> dict[str, Subscription]:
    return {member: Subscription(topics=list(topics)) for member, topics in topics_by_member.items()}


def assign(name: str, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]):
    return get_assignor(name).assign(partitions_per_topic=partitions_per_topic, subscriptions=subscriptions)


def owning(subscriptions: Mapping[str, Subscription], result: Mapping[str, list[TopicPartition]],
           generation_id: int) -> dict[str, Subscription]:
    """The next round's subscriptions: same topics, each member owning what `result` gave it."""
    return {
        m: Subscription(topics=list(s.topics), owned_partitions=list(result.get(m, [])),
                        user_data=encode_user_data(result.get(m, []), generation_id),
                        generation_id=generation_id, group_instance_id=s.group_instance_id)
        for m, s in subscriptions.items()
    }


# ----------------------------------------------------------------------------- independent checks


def expected_partitions(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]):
    """Every partition of every subscribed topic that exists."""
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    return {tp(t, p) for t in subscribed if t in partitions_per_topic for p in range(partitions_per_topic[t])}


def check_valid(partitions_per_topic, subscriptions, result, complete: bool) -> None:
    """At most once, only to a subscriber, only existing partitions; exactly once if `complete`."""
    assert set(result) == set(subscriptions)
    assigned = [p for parts in result.values() for p in parts]
    counts = Counter(assigned)
    assert all(c == 1 for c in counts.values()), f"assigned twice: {[p for p, c in counts.items() if c > 1]}"
    expected = expected_partitions(partitions_per_topic, subscriptions)
    assert set(assigned) <= expected, f"not assignable: {set(assigned) - expected}"
    if complete:
        assert set(assigned) == expected, f"unassigned: {sorted(expected - set(assigned))}"
    for member, parts in result.items():
        for part in parts:
            assert part.topic in subscriptions[member].topics, (member, part)


def balance_violations(result, subscriptions) -> list[tuple[str, TopicPartition, str]]:
    """(X, p, Y): partition p owned by X could move to Y, a subscriber of p's topic, with
    count(X) > count(Y) + 1 -- moving it would make the assignment more balanced."""
    count = {m: len(parts) for m, parts in result.items()}
    subscribers = defaultdict(list)
    for m, s in subscriptions.items():
        for t in set(s.topics):
            subscribers[t].append(m)
    return [
        (x, part, y)
        for x, parts in result.items()
        for part in parts
        for y in subscribers[part.topic]
        if y != x and count[x] > count[y] + 1
    ]


def read_claim(sub: Subscription, name: str) -> tuple[set[TopicPartition], int]:
    """What a member claims as the assignor reads it: the eager one only its user data, the
    cooperative one only its subscription's owned partitions and generation."""
    if name == "sticky":
        decoded = decode_user_data(sub.user_data) if sub.user_data else None
        if decoded is None:
            return set(), -1
        parts, generation = decoded
        return set(parts), -1 if generation is None else generation
    return set(sub.owned_partitions), sub.generation_id


def kafka_claims(partitions_per_topic, subscriptions, name: str):
    """(kept, doubly) by Kafka's rules: members are met in the leader's HashMap order; the first
    claim of a partition holds it; a later claim from a higher generation than the holder's
    *subscription* generation takes it over, an equal one invalidates it (doubly claimed: the
    holder loses it, and the later one holds it without keeping it), a lower one is ignored."""
    exists = expected_partitions(partitions_per_topic, subscriptions)
    holder: dict[TopicPartition, str] = {}
    kept: dict[str, set[TopicPartition]] = defaultdict(set)
    doubly: set[TopicPartition] = set()
    for m in hashmap_order(subscriptions):
        parts, generation = read_claim(subscriptions[m], name)
        for part in parts & exists:
            if part in holder:
                other = subscriptions[holder[part]].generation_id
                if generation < other:
                    continue
                kept[holder[part]].discard(part)
                if generation == other:
                    doubly.add(part)
                else:
                    kept[m].add(part)
            else:
                kept[m].add(part)
            holder[part] = m
    return kept, doubly


def owners_of(result) -> dict[TopicPartition, str]:
    return {part: m for m, parts in result.items() for part in parts}


# ----------------------------------------------------------------------------- seed examples


def test_names_and_protocols():
    assert get_assignor("sticky").name == "sticky"
    assert get_assignor("cooperative-sticky").name == "cooperative-sticky"
    assert get_assignor("sticky").rebalance_protocol is RebalanceProtocol.EAGER
    assert get_assignor("cooperative-sticky").rebalance_protocol is RebalanceProtocol.COOPERATIVE
    assert get_assignor("org.apache.kafka.clients.consumer.StickyAssignor").name == "sticky"
    assert get_assignor("org.apache.kafka.clients.consumer.CooperativeStickyAssignor").name == "cooperative-sticky"


SEED_TOPICS = {"t0": 1, "t1": 2, "t2": 3}
SEED_FIRST = {
    "c0": tps("t0", 0),
    "c1": tps("t1", 0, 1),
    "c2": tps("t2", 0, 1, 2),
}


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_seed_three_members_different_subscriptions(name: str):
    # Seed 003: where roundrobin gives c2 four partitions, sticky balances to 1/2/3.
    result = assign(name, SEED_TOPICS, subs(c0=["t0"], c1=["t0", "t1"], c2=["t0", "t1", "t2"]))
    assert result == SEED_FIRST


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_seed_c0_leaves(name: str):
    # Seed 003, c0 leaves and the others pass the first result as owned partitions (generation 1).
    # The seed text has a typo here ("c1: t0p0, t1p0; c2: t1p0, t2p0, t2p1, t2p2", t1p0 twice and
    # t1p1 nowhere); the corrected result is below: c1 takes t0p0 and keeps both t1 partitions,
    # c2 keeps its three, and nothing moves between c1 and c2.
    subscriptions = {"c1": claim(["t0", "t1"], SEED_FIRST["c1"], 1), "c2": claim(["t0", "t1", "t2"], SEED_FIRST["c2"], 1)}
    result = assign(name, SEED_TOPICS, subscriptions)
    assert result == {
        "c1": [tp("t0", 0), tp("t1", 0), tp("t1", 1)],
        "c2": tps("t2", 0, 1, 2),
    }


def test_seed_c0_leaves_eager_user_data():
    # The same rebalance as the eager sticky assignor sees it: members have revoked everything
    # (owned_partitions is empty) and remember their last assignment in user_data.
    subscriptions = {
        "c1": Subscription(topics=["t0", "t1"], user_data=encode_user_data(SEED_FIRST["c1"], 1)),
        "c2": Subscription(topics=["t0", "t1", "t2"], user_data=encode_user_data(SEED_FIRST["c2"], 1)),
    }
    assert assign("sticky", SEED_TOPICS, subscriptions) == {
        "c1": [tp("t0", 0), tp("t1", 0), tp("t1", 1)],
        "c2": tps("t2", 0, 1, 2),
    }


def test_two_members_then_a_third_joins():
    # Kafka deals the sorted partitions round-robin, so each member gets a share of each topic.
    first = assign("sticky", {"t0": 3, "t1": 3}, subs(c0=["t0", "t1"], c1=["t0", "t1"]))
    check_valid({"t0": 3, "t1": 3}, subs(c0=["t0", "t1"], c1=["t0", "t1"]), first, complete=True)
    assert first == {"c0": [tp("t0", 0), tp("t0", 2), tp("t1", 1)], "c1": [tp("t0", 1), tp("t1", 0), tp("t1", 2)]}

    subscriptions = owning(subs(c0=["t0", "t1"], c1=["t0", "t1"]), first, generation_id=1)
    subscriptions["c2"] = Subscription(topics=["t0", "t1"])
    second = assign("sticky", {"t0": 3, "t1": 3}, subscriptions)
    check_valid({"t0": 3, "t1": 3}, subscriptions, second, complete=True)
    assert [len(second[m]) for m in ("c0", "c1", "c2")] == [2, 2, 2]
    # Exactly the two partitions c2 needs move; c0 and c1 each keep two of their three: the ones
    # with the lowest partition numbers (Kafka sorts owned partitions by number, then topic), so
    # each keeps one partition of each topic and c2 gets one of each.
    assert set(second["c0"]) < set(first["c0"])
    assert set(second["c1"]) < set(first["c1"])
    assert second == {
        "c0": [tp("t0", 0), tp("t1", 1)],
        "c1": [tp("t0", 1), tp("t1", 0)],
        "c2": [tp("t0", 2), tp("t1", 2)],
    }


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_design_example(name: str):
    # docs/design.md §5: the assignor API example.
    partitions_per_topic = {"t0": 3, "t1": 3}
    subscriptions = {
        "c0": Subscription(topics=["t0", "t1"]),
        "c1": claim(["t0", "t1"], [TopicPartition("t0", 2)], 4),
    }
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=True)
    assert [len(result["c0"]), len(result["c1"])] == [3, 3]
    assert tp("t0", 2) in result["c1"]
    assert is_balanced(result, subscriptions)


# ----------------------------------------------------------------------------- claims


def claim(topics, owned=(), generation=-1, **kw) -> Subscription:
    """What a current client sends (Kafka's "V2 and above" subscription): owned partitions and
    generation in the subscription, and, for the eager sticky assignor, the same in user data."""
    user_data = encode_user_data(list(owned), generation) if owned or generation != -1 else None
    return Subscription(topics=list(topics), owned_partitions=list(owned), generation_id=generation,
                        user_data=user_data, **kw)


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_higher_generation_wins(name: str):
    # Without history: a gets t-0, b gets t-1. Both claim t-1; the higher generation keeps it.
    assert assign(name, {"t": 2}, {"a": claim(["t"]), "b": claim(["t"])}) == {"a": tps("t", 0), "b": tps("t", 1)}
    a_newer = {"a": claim(["t"], tps("t", 1), 5), "b": claim(["t"], tps("t", 0, 1), 3)}
    assert assign(name, {"t": 2}, a_newer) == {"a": tps("t", 1), "b": tps("t", 0)}
    b_newer = {"a": claim(["t"], tps("t", 0, 1), 3), "b": claim(["t"], tps("t", 0), 5)}
    assert assign(name, {"t": 2}, b_newer) == {"a": tps("t", 1), "b": tps("t", 0)}


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_equal_generations_cancel(name: str):
    # a and b both claim t-2 in generation 4: neither keeps it, so the target is the no-history
    # one (a: t-0, b: t-1, c: t-2). But both may still be consuming it: cooperative-sticky hands
    # it to nobody in this rebalance (Kafka counts it as transferring ownership) and c gets it in
    # the follow-up, once a and b have revoked it.
    partitions_per_topic = {"t": 3}
    subscriptions = {"a": claim(["t"], tps("t", 2), 4), "b": claim(["t"], tps("t", 2), 4), "c": claim(["t"])}
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=(name == "sticky"))
    if name == "sticky":
        assert result == {"a": tps("t", 0), "b": tps("t", 1), "c": tps("t", 2)}
    else:
        assert result == {"a": tps("t", 0), "b": tps("t", 1), "c": []}
        follow_up = assign(name, partitions_per_topic, owning(subscriptions, result, 5))
        assert follow_up == {"a": tps("t", 0), "b": tps("t", 1), "c": tps("t", 2)}


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_equal_generation_claimants_may_be_assigned_it_fresh(name: str):
    # Two members, one partition each would be the quota; both claim t-0 at generation 2. The
    # target hands t-0 back to a (dealt afresh), but cooperative-sticky still withholds it while b
    # may be consuming it -- even from a, which claimed it: Kafka withholds every doubly claimed
    # partition that is dealt, whoever gets it.
    partitions_per_topic = {"t": 2}
    subscriptions = {"a": claim(["t"], tps("t", 0), 2), "b": claim(["t"], tps("t", 0), 2)}
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=(name == "sticky"))
    assert result == ({"a": tps("t", 0), "b": tps("t", 1)} if name == "sticky" else {"a": [], "b": tps("t", 1)})


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_claims_of_missing_partitions_are_ignored(name: str):
    # b claims a partition past the topic's end, a deleted topic, and a negative index.
    partitions_per_topic = {"t": 2}
    subscriptions = {
        "a": claim(["t"]),
        "b": claim(["t", "gone"], [tp("t", 5), tp("gone", 0), tp("t", -1)], 7),
    }
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=True)
    assert result == {"a": tps("t", 0), "b": tps("t", 1)}


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_claims_of_unsubscribed_topics_are_ignored(name: str):
    # a owned u-0 and u-1 but now subscribes only to t: it does not keep them, b (the only
    # subscriber of u) gets them, and balance gives a both t partitions.
    partitions_per_topic = {"t": 2, "u": 2}
    subscriptions = {
        "a": claim(["t"], [tp("u", 0), tp("u", 1), tp("t", 1)], 3),
        "b": claim(["t", "u"]),
    }
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=(name == "sticky"))
    if name == "sticky":
        assert result == {"a": tps("t", 0, 1), "b": tps("u", 0, 1)}
    else:
        # a still holds u-0 and u-1 until it revokes them, so they are withheld from b this round.
        assert result == {"a": tps("t", 0, 1), "b": []}


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_unsubscribed_claim_still_outranks_an_older_claim(name: str):
    # a took u-0 in generation 5 and has since dropped u; b's claim on u-0 is from generation 3.
    # b is u's only subscriber, so it gets u-0. Kafka's cooperative assignor withholds only a
    # partition handed to a member that did not list it as owned; b listed u-0 (its older claim),
    # so b gets it at once, while a has not revoked it yet -- for a moment both consume it. That is
    # Kafka's behaviour (docs/assignors.md, "Withholding").
    partitions_per_topic = {"t": 1, "u": 1}
    subscriptions = {"a": claim(["t"], [tp("u", 0)], 5), "b": claim(["u"], [tp("u", 0)], 3)}
    result = assign(name, partitions_per_topic, subscriptions)
    assert result == {"a": tps("t", 0), "b": tps("u", 0)}


def test_eager_sticky_reads_user_data():
    # a's memory is in user_data (it has revoked everything, so owned_partitions is empty).
    subscriptions = {"a": Subscription(topics=["t"], user_data=encode_user_data(tps("t", 1), 5)),
                     "b": Subscription(topics=["t"])}
    assert assign("sticky", {"t": 2}, subscriptions) == {"a": tps("t", 1), "b": tps("t", 0)}


def test_eager_sticky_prefers_user_data_over_owned_partitions():
    subscriptions = {
        "a": Subscription(topics=["t"], user_data=encode_user_data(tps("t", 2), 5),
                          owned_partitions=tps("t", 0), generation_id=5),
        "b": Subscription(topics=["t"]),
        "c": Subscription(topics=["t"]),
    }
    assert assign("sticky", {"t": 3}, subscriptions)["a"] == tps("t", 2)


def test_eager_sticky_user_data_generation_resolves_conflicts():
    # Without history: a t-0, b t-1, c t-2. a and b both remember t-2 (and, as current clients
    # do, send the same generation in the subscription): the later memory wins, equal ones cancel.
    def remembering(gen_a: int, gen_b: int) -> dict[str, Subscription]:
        return {"a": Subscription(topics=["t"], user_data=encode_user_data(tps("t", 2), gen_a), generation_id=gen_a),
                "b": Subscription(topics=["t"], user_data=encode_user_data(tps("t", 2), gen_b), generation_id=gen_b),
                "c": Subscription(topics=["t"])}
    assert assign("sticky", {"t": 3}, remembering(3, 2)) == {"a": tps("t", 2), "b": tps("t", 0), "c": tps("t", 1)}
    assert assign("sticky", {"t": 3}, remembering(2, 3)) == {"a": tps("t", 0), "b": tps("t", 2), "c": tps("t", 1)}
    assert assign("sticky", {"t": 3}, remembering(3, 3)) == {"a": tps("t", 0), "b": tps("t", 1), "c": tps("t", 2)}


def test_eager_sticky_compares_with_the_earlier_claimants_subscription_generation():
    # Kafka compares a member's user-data generation with the *subscription* generation of the
    # member that claimed the partition before it (met in HashMap order: a, then b). An old client
    # sends no subscription generation (-1), so b's claim wins even from an older generation.
    subscriptions = {"a": Subscription(topics=["t"], user_data=encode_user_data(tps("t", 2), 3)),
                     "b": Subscription(topics=["t"], user_data=encode_user_data(tps("t", 2), 2)),
                     "c": Subscription(topics=["t"])}
    assert hashmap_order(subscriptions) == ["a", "b", "c"]
    assert assign("sticky", {"t": 3}, subscriptions) == {"a": tps("t", 0), "b": tps("t", 2), "c": tps("t", 1)}


def test_eager_sticky_ignores_owned_partitions():
    # Kafka's StickyAssignor reads history from user data only: an eager member owns nothing by
    # the time it rejoins, so owned_partitions without user data is no history at all.
    subscriptions = {"a": Subscription(topics=["t"], owned_partitions=tps("t", 1), generation_id=5),
                     "b": Subscription(topics=["t"])}
    assert assign("sticky", {"t": 2}, subscriptions) == {"a": tps("t", 0), "b": tps("t", 1)}


def test_eager_sticky_reads_grouplabs_earlier_user_data():
    # grouplab's members wrote msgpack before they wrote Kafka's format; a member from an older
    # grouplab still has history (with or without a generation).
    subscriptions = {"a": Subscription(topics=["t"], user_data=msgpack.packb({"partitions": [["t", 1]]})),
                     "b": Subscription(topics=["t"])}
    assert assign("sticky", {"t": 2}, subscriptions) == {"a": tps("t", 1), "b": tps("t", 0)}


def test_cooperative_sticky_ignores_user_data():
    subscriptions = {"a": Subscription(topics=["t"], user_data=encode_user_data(tps("t", 1), 5)),
                     "b": Subscription(topics=["t"])}
    assert assign("cooperative-sticky", {"t": 2}, subscriptions) == {"a": tps("t", 0), "b": tps("t", 1)}


def test_user_data_round_trips_through_subscription_user_data():
    sticky, cooperative = get_assignor("sticky"), get_assignor("cooperative-sticky")
    assert cooperative.subscription_user_data(tps("t", 1), 3) is None
    data = sticky.subscription_user_data(tps("t", 1), 3)
    assert isinstance(data, bytes)
    result = sticky.assign({"t": 2}, {"a": Subscription(topics=["t"], user_data=data), "b": Subscription(topics=["t"])})
    assert result == {"a": tps("t", 1), "b": tps("t", 0)}


GARBAGE_USER_DATA = [
    b"",
    b"\x00\xffnot msgpack\xc1",
    b"\xc1",
    msgpack.packb([1, 2, 3]),
    msgpack.packb({"partitions": "t-1", "generation": 1}),
    msgpack.packb({"partitions": [["t", "one"]], "generation": 1}),
    msgpack.packb({"partitions": [["t"]], "generation": 1}),
    msgpack.packb({"partitions": [["t", 1]], "generation": None}),
    msgpack.packb({"partitions": [["t", 1]], "generation": 1}) + b"trailing",
    bytes(range(256)),
]


@pytest.mark.parametrize("user_data", GARBAGE_USER_DATA)
def test_eager_sticky_garbage_user_data_is_no_history(user_data: bytes):
    subscriptions = {"a": Subscription(topics=["t"], user_data=user_data), "b": Subscription(topics=["t"])}
    assert assign("sticky", {"t": 2}, subscriptions) == {"a": tps("t", 0), "b": tps("t", 1)}


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_edge_cases(name: str):
    assert assign(name, {"t": 3}, {}) == {}
    assert assign(name, {"t": 0}, subs(a=["t"], b=["t"])) == {"a": [], "b": []}
    assert assign(name, {}, subs(a=["ghost"], b=[])) == {"a": [], "b": []}
    assert assign(name, {"t0": 2}, subs(c0=["t0", "ghost"], c1=["ghost"])) == {"c0": tps("t0", 0, 1), "c1": []}


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_members_in_member_id_order_static_or_not(name: str):
    # Unlike range and roundrobin (KIP-345), Kafka's sticky assignors sort members by member id
    # only; a static member keeps its partitions through its history, not through its place.
    subscriptions = {
        "a-member": Subscription(topics=["t"]),
        "z-member": Subscription(topics=["t"], group_instance_id="a"),
        "m-member": Subscription(topics=["t"], group_instance_id="b"),
    }
    assert assign(name, {"t": 3}, subscriptions) == {
        "z-member": tps("t", 2), "m-member": tps("t", 1), "a-member": tps("t", 0),
    }


# ----------------------------------------------------------------------------- cooperative


def test_cooperative_new_member_waits_for_revocation():
    partitions_per_topic = {"t": 6}
    subscriptions = {
        "a": claim(["t"], tps("t", 0, 1, 2), 3),
        "b": claim(["t"], tps("t", 3, 4, 5), 3),
        "c": claim(["t"]),
    }
    target = assign("sticky", partitions_per_topic, subscriptions)
    assert target == {"a": tps("t", 0, 1), "b": tps("t", 3, 4), "c": [tp("t", 2), tp("t", 5)]}

    first = assign("cooperative-sticky", partitions_per_topic, subscriptions)
    # c gets nothing yet: t-2 and t-5 are withheld until a and b have revoked them.
    assert first == {"a": tps("t", 0, 1), "b": tps("t", 3, 4), "c": []}

    second = assign("cooperative-sticky", partitions_per_topic, owning(subscriptions, first, generation_id=4))
    assert second == target
    assert second["c"] == target["c"]
    for m in ("a", "b"):
        assert second[m] == first[m]  # nothing else moves


def test_cooperative_only_withholds_partitions_of_present_owners():
    # d owned t-5 but has left the group (so nobody claims it): t-5 goes to c at once;
    # t-2 and t-3 are still a's, so b and c wait for them.
    partitions_per_topic = {"t": 6}
    subscriptions = {
        "a": claim(["t"], tps("t", 0, 1, 2, 3), 3),
        "b": claim(["t"], tps("t", 4), 3),
        "c": claim(["t"]),
    }
    target = assign("sticky", partitions_per_topic, subscriptions)
    assert target == {"a": tps("t", 0, 1), "b": tps("t", 2, 4), "c": tps("t", 3, 5)}
    first = assign("cooperative-sticky", partitions_per_topic, subscriptions)
    assert first == {"a": tps("t", 0, 1), "b": tps("t", 4), "c": tps("t", 5)}
    second = assign("cooperative-sticky", partitions_per_topic, owning(subscriptions, first, generation_id=4))
    assert second == target


# ----------------------------------------------------------------------------- strategies

TOPIC_NAMES = [f"t{i}" for i in range(20)]
MEMBER_ALPHABET = "abcdefgh-0123456789"


@st.composite
def groups(draw, identical: bool | None = None, history: bool = True, max_members: int = 50):
    """(partitions_per_topic, subscriptions, transports) where transports[member] says how the
    member sent its history ("both": owned partitions, generation and user data, as a current
    client; "owned": no user data, so the eager assignor sees none; "user_data": an old eager
    client, no subscription generation; "garbage": unreadable user data).

    Up to `max_members` members (some static), up to 20 topics with 0..30 partitions, identical or
    mixed subscriptions (drawn from a few patterns, sometimes naming unknown topics), and random
    previous ownership: a random earlier owner per partition plus extra conflicting claims, random
    generations, claims of missing partitions, and history carried in the subscription, in
    user_data, in both, or lost to garbage user_data."""
    # Hypothesis draws the shape (sizes, shares, how many subscription patterns); a seeded stdlib
    # Random fills in the details, since hundreds of partitions would otherwise mean hundreds of
    # hypothesis draws per example, which makes generation slow and examples tiny.
    n_members = draw(st.sampled_from([1, 2, 3, 5, 8, 13, 25, max_members]) | st.integers(1, max_members))
    n_topics = draw(st.sampled_from([1, 2, 3, 5, 10, len(TOPIC_NAMES)]) | st.integers(0, len(TOPIC_NAMES)))
    max_partitions = draw(st.sampled_from([3, 10, 30, 1]))
    static_share = draw(st.sampled_from([0.0, 0.3, 1.0]))
    if identical is None:
        identical = draw(st.booleans())
    n_patterns = 1 if identical else draw(st.integers(2, 5))
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))

    topics = rnd.sample(TOPIC_NAMES, n_topics)
    partitions_per_topic = {t: rnd.randint(0, max_partitions) for t in topics}
    members: list[str] = []
    while len(members) < n_members:
        member = "".join(rnd.choice(MEMBER_ALPHABET) for _ in range(rnd.randint(1, 6)))
        if member not in members:
            members.append(member)
    instance_ids = iter(rnd.sample([f"i{i:02d}" for i in range(n_members)], n_members))
    static = [rnd.random() < static_share for _ in members]

    subscribable = sorted(partitions_per_topic) + ["unknown"]
    sizes = [len(subscribable), len(subscribable) - 1, len(subscribable) // 2, rnd.randint(0, len(subscribable))]
    patterns = [rnd.sample(subscribable, rnd.choice(sizes)) for _ in range(n_patterns)]
    pattern_of = [rnd.randrange(n_patterns) for _ in members]

    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    generation: dict[str, int] = {m: -1 for m in members}
    transport = {m: "owned" for m in members}
    if history:
        universe = [tp(t, p) for t in sorted(partitions_per_topic) for p in range(partitions_per_topic[t] + 1)]
        universe += [tp("gone", 0), tp("gone", 1)]
        unowned_share = draw(st.sampled_from([0.0, 0.2, 0.6, 1.0]))
        for part in universe:
            if rnd.random() >= unowned_share:
                owned[rnd.choice(members)].append(part)
        for _ in range(draw(st.sampled_from([0, 3, 30]))):  # conflicting claims
            owner, part = rnd.choice(members), rnd.choice(universe)
            if part not in owned[owner]:
                owned[owner].append(part)
        max_generation = draw(st.sampled_from([-1, 1, 6]))
        generation = {m: rnd.randint(-1, max_generation) for m in members}
        transport = {m: rnd.choice(["both", "both", "owned", "user_data", "garbage"]) for m in members}

    subscriptions = {}
    for i, m in enumerate(members):
        kw = dict(topics=list(patterns[pattern_of[i]]),
                  group_instance_id=next(instance_ids) if static[i] else None)
        if transport[m] == "owned":
            sub = Subscription(owned_partitions=list(owned[m]), generation_id=generation[m], **kw)
        elif transport[m] == "both":
            sub = Subscription(owned_partitions=list(owned[m]), generation_id=generation[m],
                               user_data=encode_user_data(owned[m], generation[m]), **kw)
        elif transport[m] == "user_data":
            # An old eager member: revoked everything, remembers its assignment in user_data.
            sub = Subscription(user_data=encode_user_data(owned[m], generation[m]), **kw)
        else:
            sub = Subscription(user_data=b"\x93garbage" + bytes([i % 256]), **kw)
        subscriptions[m] = sub
    return partitions_per_topic, subscriptions, transport


# Derandomized: the suite (and CI) runs the same examples every time, so a run never fails on an
# example no earlier run met; GROUPLAB_HYPOTHESIS_RANDOM=1 searches afresh (as when hunting issue 15).
# GROUPLAB_HYPOTHESIS_EXAMPLES=N runs N examples per property instead of 200.
PROPERTY_SETTINGS = settings(max_examples=int(os.environ.get("GROUPLAB_HYPOTHESIS_EXAMPLES", "200")), deadline=None,
                             derandomize=os.environ.get("GROUPLAB_HYPOTHESIS_RANDOM") != "1")


# ----------------------------------------------------------------------------- validity and balance


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups())
def test_property_validity(name: str, group):
    partitions_per_topic, subscriptions, _ = group
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=(name == "sticky"))
    if name == "cooperative-sticky":
        # The result is the target minus withheld partitions, and every withheld partition is
        # being revoked by a member that listed it as owned and is not its target owner.
        target = get_assignor(name).compute(partitions_per_topic, subscriptions).assignment
        check_valid(partitions_per_topic, subscriptions, target, complete=True)
        for m in subscriptions:
            assert set(result[m]) <= set(target[m])
        withheld = {p for parts in target.values() for p in parts} - {p for parts in result.values() for p in parts}
        target_owner = owners_of(target)
        for p in withheld:
            assert any(p in s.owned_partitions and target_owner[p] != m for m, s in subscriptions.items()), p


@PROPERTY_SETTINGS
@given(group=groups(identical=False))
def test_property_sticky_is_balanced(group):
    partitions_per_topic, subscriptions, _ = group
    result = assign("sticky", partitions_per_topic, subscriptions)
    assert balance_violations(result, subscriptions) == []
    assert is_balanced(result, subscriptions)


@PROPERTY_SETTINGS
@given(group=groups(identical=True))
def test_property_sticky_identical_subscriptions_differ_by_at_most_one(group):
    partitions_per_topic, subscriptions, _ = group
    result = assign("sticky", partitions_per_topic, subscriptions)
    counts = [len(parts) for parts in result.values()]
    assert max(counts) - min(counts) <= 1, counts
    assert balance_violations(result, subscriptions) == []
    assert is_balanced(result, subscriptions)


def test_balance_checks_agree_on_an_unbalanced_assignment():
    # The independent check and is_balanced both reject c0 holding 3 while c1 holds 1.
    subscriptions = subs(c0=["t"], c1=["t"])
    bad = {"c0": tps("t", 0, 1, 2), "c1": tps("t", 3)}
    assert not is_balanced(bad, subscriptions)
    assert balance_violations(bad, subscriptions) != []
    # c0 holds 3 of u, which only it subscribes to: nothing can move, so it is balanced.
    subscriptions = subs(c0=["t", "u"], c1=["t"])
    fine = {"c0": tps("u", 0, 1, 2), "c1": []}
    assert is_balanced(fine, subscriptions)
    assert balance_violations(fine, subscriptions) == []


@PROPERTY_SETTINGS
@given(group=groups(identical=True))
def test_property_sticky_keeps_within_quota_with_identical_history(group):
    """A claim that Kafka's rules let a member keep is kept within quota (identical subscriptions:
    the quota is floor(P / M), every member can keep that many of its own)."""
    partitions_per_topic, subscriptions, _ = group
    result = assign("sticky", partitions_per_topic, subscriptions)
    kept_claims, doubly = kafka_claims(partitions_per_topic, subscriptions, "sticky")
    quota = len(expected_partitions(partitions_per_topic, subscriptions)) // len(subscriptions)
    for m, s in subscriptions.items():
        mine = {p for p in kept_claims[m] - doubly if p.topic in s.topics}
        kept = mine & set(result[m])
        assert len(kept) >= min(len(mine), quota), (m, sorted(mine), result[m])


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups(identical=True))
def test_property_identical_subscriptions_move_the_fewest(name: str, group):
    """Identical subscriptions, any history: only what the quotas force moves. A member whose kept
    claims k exceed its quota gives up the excess, and the P mod M larger quotas go to members that
    can fill them from their own claims, so exactly
    sum(max(0, k - min)) - min(P mod M, #members with k >= max) claimed partitions change hands."""
    partitions_per_topic, subscriptions, _ = group
    target = get_assignor(name).compute(partitions_per_topic, subscriptions).assignment
    kept, doubly = kafka_claims(partitions_per_topic, subscriptions, name)
    total = len(expected_partitions(partitions_per_topic, subscriptions))
    low, extra = divmod(total, len(subscriptions))
    high = low + (1 if extra else 0)
    k = {m: len(kept[m] - doubly) for m in subscriptions}
    fewest = sum(max(0, n - low) for n in k.values()) - (min(extra, sum(n >= high for n in k.values())) if extra else 0)
    moved = sum(len((kept[m] - doubly) - set(target[m])) for m in subscriptions)
    assert moved == fewest


# ----------------------------------------------------------------------------- stickiness


@st.composite
def settled_groups(draw, identical: bool | None = None):
    """A group, the sticky result it settled on (from its random history), and the next
    generation's subscriptions with every member owning that result."""
    partitions_per_topic, subscriptions, _ = draw(groups(identical=identical))
    settled = assign("sticky", partitions_per_topic, subscriptions)
    return partitions_per_topic, owning(subscriptions, settled, generation_id=10), settled


def moves_between(old, new, members) -> list[tuple[TopicPartition, str, str]]:
    """(p, X, Y): partition p went from X to Y, both in `members`."""
    before = owners_of(old)
    return [(p, before[p], y) for y, parts in new.items() for p in parts
            if before.get(p, y) != y and before[p] in members]


def has_cycle(edges: list[tuple[str, str]]) -> bool:
    graph: dict[str, set[str]] = defaultdict(set)
    for x, y in edges:
        graph[x].add(y)
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(u: str) -> bool:
        state[u] = 1
        for v in graph[u]:
            if state.get(v) == 1 or (v not in state and visit(v)):
                return True
        state[u] = 2
        return False

    return any(u not in state and visit(u) for u in list(graph))


@PROPERTY_SETTINGS
@given(group=settled_groups(identical=False), data=st.data())
def test_property_member_leaves_only_balance_moves_partitions(group, data):
    """After a member leaves, the result is valid and balanced, and per topic the moves between
    remaining members form no cycle (X -> Y -> ... -> X could all be undone, keeping every count:
    Kafka's own stickiness check, PartitionMovements.isSticky, looks for cycles of two).
    The stronger "moving any such partition back leaves the result unbalanced" holds for identical
    subscriptions (test_property_identical_subscriptions_move_the_fewest) but not for Kafka's
    general assignment, which grouplab reproduces: see
    test_member_leaves_kafka_may_move_what_balance_does_not_need. The simpler "X gives a partition
    to Y only if X ends with fewer partitions" does not hold either: see
    test_member_leaves_balance_can_make_a_growing_member_give_one_up."""
    leaver = data.draw(st.sampled_from(sorted(group[1])))
    check_member_leaves(group, leaver, strict=False)


def check_member_leaves(group, leaver: str, strict: bool = True) -> None:
    partitions_per_topic, subscriptions, old = group
    remaining = {m: s for m, s in subscriptions.items() if m != leaver}
    new = assign("sticky", partitions_per_topic, remaining)
    check_valid(partitions_per_topic, remaining, new, complete=True)
    assert balance_violations(new, remaining) == []

    moved = moves_between(old, new, remaining)
    for part, x, y in moved if strict else ():
        assert unneeded(new, remaining, part, x, y) is False, f"{part} moved {x} -> {y} though balance did not need it"
    for topic in {part.topic for part, _, _ in moved}:
        assert not has_cycle([(x, y) for part, x, y in moved if part.topic == topic]), topic


def unneeded(new, subscriptions, part: TopicPartition, x: str, y: str) -> bool:
    """Whether `part`, moved from x to y, could go back with the result still balanced."""
    undone = {m: list(parts) for m, parts in new.items()}
    undone[y].remove(part)
    undone[x].append(part)
    return not balance_violations(undone, subscriptions)


def load_member_leaves(name: str):
    data = json.loads((Path(__file__).parent / "data" / name).read_text())
    subscriptions = {m: claim(v["topics"], [tp(t, p) for t, p in v["owned"]], v["generation"])
                     for m, v in data["members"].items()}
    old = {m: [tp(t, p) for t, p in parts] for m, parts in data["old"].items()}
    return (data["partitions_per_topic"], subscriptions, old), data["leaver"]


def test_member_leaves_kafka_may_move_what_balance_does_not_need() -> None:
    # Found by hypothesis. When 4a0c leaves, Kafka's general assignment hands its partitions out
    # greedily and then walks the partitions moving any whose owner has two more than some other
    # subscriber *at that moment*; on the way it moves t1-4 from gh9 to a, and by the end gh9 has
    # 24 and a 25, so t1-4 could go back and the result would still be balanced. grouplab gives
    # Kafka's result (the same as a literal model of Kafka's steps, tests/kafka_sticky_model.py),
    # valid, balanced and without cycles, rather than a stickier one Kafka would not compute.
    from kafka_sticky_model import model_general

    group, leaver = load_member_leaves("sticky-member-leaves-kafka-moves.json")
    partitions_per_topic, subscriptions, old = group
    remaining = {m: s for m, s in subscriptions.items() if m != leaver}
    new = assign("sticky", partitions_per_topic, remaining)
    assert new == model_general(partitions_per_topic, remaining, "sticky")
    check_member_leaves(group, leaver, strict=False)
    assert (tp("t1", 4), "gh9", "a") in moves_between(old, new, remaining)
    assert unneeded(new, remaining, tp("t1", 4), "gh9", "a")


def test_member_leaves_with_different_subscriptions_moves_only_what_balance_needs() -> None:
    # Found by hypothesis while grouplab's own general assignment moved t11-1 between two remaining
    # members that balance did not need (issue 15); Kafka's does not.
    group, leaver = load_member_leaves("sticky-member-leaves-issue-15.json")
    check_member_leaves(group, leaver)


def test_member_leaves_balance_can_make_a_growing_member_give_one_up():
    # Found by hypothesis. L leaves; only b subscribes to t1 among the rest, so b must take L's
    # t1-0 and t1-2 (2 -> 4 partitions) and then give t0-1 to c (1 partition) to be balanced:
    # b gives a partition away although it ends with more than it had. Keeping t0-1 would leave
    # b at 4 and c at 1, which the balance rule forbids.
    partitions_per_topic = {"t0": 4, "t1": 3}
    old = {"L": [tp("t1", 0), tp("t1", 2)], "a": tps("t0", 2, 3), "b": [tp("t0", 1), tp("t1", 1)], "c": tps("t0", 0)}
    topics = {"L": ["t0", "t1"], "a": ["t0"], "b": ["t0", "t1"], "c": ["t0"]}
    assert balance_violations(old, {m: Subscription(topics=t) for m, t in topics.items()}) == []
    remaining = {m: claim(topics[m], old[m], 10) for m in "abc"}
    new = assign("sticky", partitions_per_topic, remaining)
    assert new == {"a": tps("t0", 2, 3), "b": tps("t1", 0, 1, 2), "c": tps("t0", 0, 1)}
    assert moves_between(old, new, remaining) == [(tp("t0", 1), "b", "c")]
    assert len(new["b"]) > len(old["b"])


@PROPERTY_SETTINGS
@given(group=settled_groups(identical=True), data=st.data())
def test_property_member_leaves_identical_subscriptions_everyone_keeps_all(group, data):
    partitions_per_topic, subscriptions, old = group
    leaver = data.draw(st.sampled_from(sorted(subscriptions)))
    remaining = {m: s for m, s in subscriptions.items() if m != leaver}
    new = assign("sticky", partitions_per_topic, remaining)
    check_valid(partitions_per_topic, remaining, new, complete=True)
    for m in remaining:
        assert set(old[m]) <= set(new[m]), (m, old[m], new[m])
    counts = [len(parts) for parts in new.values()]
    assert not counts or max(counts) - min(counts) <= 1


@PROPERTY_SETTINGS
@given(group=settled_groups(identical=True), data=st.data())
def test_property_member_joins_identical_subscriptions_moves_only_its_share(group, data):
    partitions_per_topic, subscriptions, old = group
    template = subscriptions[data.draw(st.sampled_from(sorted(subscriptions)))]
    # "~" sorts after every generated member id, "!" before; a static joiner goes first of all.
    joiner, instance = data.draw(st.sampled_from([("~joiner", None), ("!joiner", None), ("~joiner", "!static")]))
    assert joiner not in subscriptions
    joined = dict(subscriptions)
    joined[joiner] = Subscription(topics=list(template.topics), group_instance_id=instance)
    new = assign("sticky", partitions_per_topic, joined)
    check_valid(partitions_per_topic, joined, new, complete=True)
    counts = [len(parts) for parts in new.values()]
    assert max(counts) - min(counts) <= 1

    for m in subscriptions:
        assert set(new[m]) <= set(old[m]), (m, old[m], new[m])
    before = owners_of(old)
    moved = [p for m, parts in new.items() for p in parts if before.get(p) != m]
    assert sorted(moved) == sorted(new[joiner])
    total = len(expected_partitions(partitions_per_topic, joined))
    assert len(new[joiner]) <= math.ceil(total / len(joined))


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=settled_groups())
def test_property_settled_group_stays_put(name: str, group):
    """Rebalancing a group whose members own a complete, balanced sticky result changes nothing."""
    partitions_per_topic, subscriptions, settled = group
    assert assign(name, partitions_per_topic, subscriptions) == settled


# ----------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups(), data=st.data())
def test_property_determinism(name: str, group, data):
    partitions_per_topic, subscriptions, _ = group
    first = assign(name, partitions_per_topic, subscriptions)
    assert assign(name, partitions_per_topic, subscriptions) == first

    shuffled = {m: subscriptions[m] for m in data.draw(st.permutations(list(subscriptions)))}
    shuffled_ppt = {t: partitions_per_topic[t] for t in data.draw(st.permutations(list(partitions_per_topic)))}
    assert assign(name, shuffled_ppt, shuffled) == first

    # The order of topics and owned partitions inside each subscription does not matter either.
    reordered = {
        m: Subscription(topics=list(reversed(s.topics)), user_data=s.user_data,
                        owned_partitions=list(reversed(s.owned_partitions)), generation_id=s.generation_id,
                        group_instance_id=s.group_instance_id)
        for m, s in subscriptions.items()
    }
    assert assign(name, partitions_per_topic, reordered) == first


# ----------------------------------------------------------------------------- cooperative rounds


@PROPERTY_SETTINGS
@given(group=groups())
def test_property_cooperative_never_hands_over_directly(group):
    """A member gets a partition it did not list as owned only if no other member lists it: every
    owner revokes before anybody new gets it. (A member that listed it, say from an older
    generation, may get it back at once: Kafka's rule, see test_unsubscribed_claim_still_outranks_an_older_claim.)"""
    partitions_per_topic, subscriptions, _ = group
    result = assign("cooperative-sticky", partitions_per_topic, subscriptions)
    check_never_handed_over(subscriptions, result)


def check_never_handed_over(subscriptions: Mapping[str, Subscription], result) -> None:
    listed_by: dict[TopicPartition, set[str]] = defaultdict(set)
    for m, s in subscriptions.items():
        for p in s.owned_partitions:
            listed_by[p].add(m)
    for m, parts in result.items():
        for part in parts:
            others = listed_by.get(part, set()) - {m}
            assert m in listed_by.get(part, ()) or not others, f"{part} handed to {m} while {sorted(others)} own it"


def cooperative_rounds(partitions_per_topic, subscriptions, max_rounds: int):
    """Run cooperative-sticky until a round revokes nothing (at most `max_rounds` rounds); each
    round, members own what the previous one gave them, in the next generation. Checks after every
    round that a member gains only partitions that nobody else owns right now (owners revoke what
    they lose before anybody gets it)."""
    generation = max(s.generation_id for s in subscriptions.values()) + 1
    everything = expected_partitions(partitions_per_topic, subscriptions)
    current, results = subscriptions, []
    for _ in range(max_rounds):
        result = assign("cooperative-sticky", partitions_per_topic, current)
        check_valid(partitions_per_topic, current, result, complete=False)
        check_never_handed_over(current, result)
        results.append(result)
        revoked = any(set(s.owned_partitions) - set(result[m]) for m, s in current.items())
        if not revoked and {p for parts in result.values() for p in parts} == everything:
            break
        current = owning(current, result, generation)
        generation += 1
    return results


@PROPERTY_SETTINGS
@given(group=groups(identical=True))
def test_property_cooperative_rounds_identical_subscriptions_finish_in_two(group):
    """Identical subscriptions: the second round assigns everything and takes nothing back from
    what the first round handed out.
    (Which new member gets which withheld partition may differ from the first target: see
    test_cooperative_second_round_may_hand_withheld_partitions_to_another_new_member.)"""
    partitions_per_topic, subscriptions, _ = group
    target = get_assignor("cooperative-sticky").compute(partitions_per_topic, subscriptions).assignment
    results = cooperative_rounds(partitions_per_topic, subscriptions, max_rounds=3)
    final = results[-1]
    check_valid(partitions_per_topic, subscriptions, final, complete=True)
    assert len(results) <= 2
    for m in subscriptions:
        assert set(results[0][m]) <= set(target[m])
        assert set(results[0][m]) <= set(final[m])
    # The same counts overall (they follow from P and M), though not necessarily the same members
    # at the larger quota: round two gives the extra places in Kafka's order again.
    assert sorted(map(len, final.values())) == sorted(map(len, target.values()))
    if len(results) == 1:
        assert final == target  # nothing had to be withheld


@PROPERTY_SETTINGS
@given(group=groups(identical=False))
def test_property_cooperative_rounds_converge(group):
    """Any subscriptions: the rounds reach a complete, balanced assignment with nothing owned twice
    along the way. Kafka's own CooperativeStickyAssignorTest allows up to 4 follow-up rebalances;
    with different subscriptions Kafka sometimes needs 2 (see
    test_cooperative_different_subscriptions_can_take_three_rounds)."""
    partitions_per_topic, subscriptions, _ = group
    results = cooperative_rounds(partitions_per_topic, subscriptions, max_rounds=5)
    final = results[-1]
    check_valid(partitions_per_topic, subscriptions, final, complete=True)
    assert balance_violations(final, subscriptions) == []
    assert is_balanced(final, subscriptions)


def test_cooperative_second_round_may_hand_withheld_partitions_to_another_new_member():
    # a owned t-0..t-3, t-4 was nobody's. Target: b gets t-2 (from a) and t-4, c gets t-3 (from a).
    # Round one gives b only t-4; in round two b is already at the minimum quota, so c is served
    # first (t-2) and b gets the extra (t-3). Same counts, nothing taken back, no third round.
    partitions_per_topic = {"t": 5}
    subscriptions = {"a": claim(["t"], tps("t", 0, 1, 2, 3), 1), "b": claim(["t"]), "c": claim(["t"])}
    target = assign("sticky", partitions_per_topic, subscriptions)
    assert target == {"a": tps("t", 0, 1), "b": tps("t", 2, 4), "c": tps("t", 3)}
    first, second = cooperative_rounds(partitions_per_topic, subscriptions, max_rounds=2)
    assert first == {"a": tps("t", 0, 1), "b": tps("t", 4), "c": []}
    assert second == {"a": tps("t", 0, 1), "b": tps("t", 3, 4), "c": tps("t", 2)}


def test_cooperative_different_subscriptions_can_take_three_rounds():
    # Found by hypothesis (a grouplab xfail before issue 15, which expected two rounds). Kafka's
    # general assignment needs three here. Round one: a keeps t0-1, t0-2, t1-1; b, c, d wait for
    # t0-0 and t1-0 (a owned them). Round two: t0-0 goes to a (tie with b at 3: a sorts first),
    # t1-0 to d; now a has 4 and c 2, so the balancing walk moves a's t1-1 to c -- withheld again,
    # and a third round hands it over.
    partitions_per_topic = {"t0": 6, "t1": 5}
    subscriptions = {
        "a": claim(["t0", "t1"], [tp("t0", 0), tp("t0", 1), tp("t0", 2), tp("t1", 0), tp("t1", 1)], 1),
        "b": claim(["t0"]),
        "c": claim(["t1"]),
        "d": claim(["t1"]),
    }
    target = assign("sticky", partitions_per_topic, subscriptions)
    assert target == {"a": [tp("t0", 1), tp("t0", 2), tp("t1", 1)], "b": tps("t0", 0, 3, 4, 5),
                      "c": tps("t1", 2, 4), "d": tps("t1", 0, 3)}
    first, second, third = cooperative_rounds(partitions_per_topic, subscriptions, max_rounds=4)
    assert first == {"a": [tp("t0", 1), tp("t0", 2), tp("t1", 1)], "b": tps("t0", 3, 4, 5), "c": tps("t1", 2, 4),
                     "d": tps("t1", 3)}
    assert second == {"a": tps("t0", 0, 1, 2), "b": tps("t0", 3, 4, 5), "c": tps("t1", 2, 4), "d": tps("t1", 0, 3)}
    assert third == {"a": tps("t0", 0, 1, 2), "b": tps("t0", 3, 4, 5), "c": tps("t1", 1, 2, 4), "d": tps("t1", 0, 3)}


# ----------------------------------------------------------------------------- scale


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_scale_smoke(name: str):
    """1,000 members x 10 topics x 1,000 partitions with identical subscriptions: completes, valid,
    balanced (not a timing test). Then one member leaves and everyone else keeps what it had."""
    topics = [f"topic-{i}" for i in range(10)]
    partitions_per_topic = {t: 1000 for t in topics}
    subscriptions = {f"member-{i:04d}": Subscription(topics=topics) for i in range(1000)}
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=True)
    assert {len(parts) for parts in result.values()} == {10}
    assert is_balanced(result, subscriptions)

    remaining = owning(subscriptions, result, generation_id=1)
    del remaining["member-0500"]
    after = assign(name, partitions_per_topic, remaining)
    check_valid(partitions_per_topic, remaining, after, complete=True)
    assert {len(parts) for parts in after.values()} == {10, 11}
    for m in remaining:
        assert set(result[m]) <= set(after[m])
