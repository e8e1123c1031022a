"""Unit and property tests of the `sticky` (eager) and `cooperative-sticky` (KIP-429) assignors,
through the public API (`get_assignor(name).assign(...)`).

The worked examples come from the project's seed documents and docs/design.md and are written out as
explicit expected dicts. The property tests check Kafka's StickyAssignor contract (KIP-54): a valid
assignment, balanced first, sticky second; and the cooperative one (KIP-429): a partition never
goes straight from one member to another, and a follow-up round completes the move.

Helpers that compute expectations (claim resolution, the balance check, the withheld set) are
written here independently of `consumer/assignors/sticky.py`, so the tests do not simply re-run
the code under test.
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

from consumer.assignors import get_assignor
from consumer.assignors.base import RebalanceProtocol
from consumer.assignors.sticky import encode_user_data, is_balanced
from protocol.types import Subscription, TopicPartition

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


def reference_owners(partitions_per_topic, claims: Mapping[str, tuple[list[TopicPartition], int]]):
    """partition -> previous owner: of the claims on an existing partition, the single claim with
    the highest generation wins; two or more members tied at the highest generation cancel out.
    A claim on a topic its member no longer subscribes to still counts here: that member still
    holds the partition until it revokes it (so cooperative-sticky must not hand it on yet), and it
    outranks older claims; the member just does not keep it."""
    by_partition: dict[TopicPartition, dict[str, int]] = defaultdict(dict)
    for member, (parts, generation) in claims.items():
        for part in parts:
            if 0 <= part.partition < partitions_per_topic.get(part.topic, 0):
                by_partition[part][member] = generation
    owners = {}
    for part, gens in by_partition.items():
        top = max(gens.values())
        winners = [m for m, g in gens.items() if g == top]
        if len(winners) == 1:
            owners[part] = winners[0]
    return owners


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
    subscriptions = {
        "c1": Subscription(topics=["t0", "t1"], owned_partitions=SEED_FIRST["c1"], generation_id=1),
        "c2": Subscription(topics=["t0", "t1", "t2"], owned_partitions=SEED_FIRST["c2"], generation_id=1),
    }
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
    first = assign("sticky", {"t0": 3, "t1": 3}, subs(c0=["t0", "t1"], c1=["t0", "t1"]))
    check_valid({"t0": 3, "t1": 3}, subs(c0=["t0", "t1"], c1=["t0", "t1"]), first, complete=True)
    assert sorted(len(p) for p in first.values()) == [3, 3]
    assert first == {"c0": tps("t0", 0, 1, 2), "c1": tps("t1", 0, 1, 2)}

    subscriptions = owning(subs(c0=["t0", "t1"], c1=["t0", "t1"]), first, generation_id=1)
    subscriptions["c2"] = Subscription(topics=["t0", "t1"])
    second = assign("sticky", {"t0": 3, "t1": 3}, subscriptions)
    check_valid({"t0": 3, "t1": 3}, subscriptions, second, complete=True)
    assert [len(second[m]) for m in ("c0", "c1", "c2")] == [2, 2, 2]
    # Exactly the two partitions c2 needs move; c0 and c1 each keep two of their three.
    assert set(second["c0"]) < set(first["c0"])
    assert set(second["c1"]) < set(first["c1"])
    assert second == {
        "c0": tps("t0", 0, 1),
        "c1": tps("t1", 0, 1),
        "c2": [tp("t0", 2), tp("t1", 2)],
    }


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_design_example(name: str):
    # docs/design.md §5: the assignor API example.
    partitions_per_topic = {"t0": 3, "t1": 3}
    subscriptions = {
        "c0": Subscription(topics=["t0", "t1"]),
        "c1": Subscription(topics=["t0", "t1"], owned_partitions=[TopicPartition("t0", 2)], generation_id=4),
    }
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=True)
    assert [len(result["c0"]), len(result["c1"])] == [3, 3]
    assert tp("t0", 2) in result["c1"]
    assert is_balanced(result, subscriptions)


# ----------------------------------------------------------------------------- claims


def claim(topics, owned=(), generation=-1, **kw) -> Subscription:
    return Subscription(topics=list(topics), owned_partitions=list(owned), generation_id=generation, **kw)


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
    # a and b both claim t-2 in generation 4: neither keeps it, as if nobody owned it, so the
    # result is the no-history one (a: t-0, b: t-1, c: t-2) -- and it is complete and valid even
    # for cooperative-sticky (nothing is withheld: the partition has no previous owner).
    partitions_per_topic = {"t": 3}
    subscriptions = {"a": claim(["t"], tps("t", 2), 4), "b": claim(["t"], tps("t", 2), 4), "c": claim(["t"])}
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=True)
    assert result == {"a": tps("t", 0), "b": tps("t", 1), "c": tps("t", 2)}


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
def test_equal_generation_claimants_may_be_assigned_it_fresh(name: str):
    # Two members, one partition each would be the quota; both claim t-0 at generation 2.
    partitions_per_topic = {"t": 2}
    subscriptions = {"a": claim(["t"], tps("t", 0), 2), "b": claim(["t"], tps("t", 0), 2)}
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=True)
    assert result == {"a": tps("t", 0), "b": tps("t", 1)}


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
    # b is u's only subscriber, so the eager assignor gives it u-0 anyway -- but fresh, and the
    # cooperative one must wait until a has revoked it: a still holds it.
    partitions_per_topic = {"t": 1, "u": 1}
    subscriptions = {"a": claim(["t"], [tp("u", 0)], 5), "b": claim(["u"], [tp("u", 0)], 3)}
    result = assign(name, partitions_per_topic, subscriptions)
    if name == "sticky":
        assert result == {"a": tps("t", 0), "b": tps("u", 0)}
    else:
        assert result == {"a": tps("t", 0), "b": []}


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
    # Without history: a t-0, b t-1, c t-2. a and b both remember t-2; the later memory wins.
    def remembering(gen_a: int, gen_b: int) -> dict[str, Subscription]:
        return {"a": Subscription(topics=["t"], user_data=encode_user_data(tps("t", 2), gen_a)),
                "b": Subscription(topics=["t"], user_data=encode_user_data(tps("t", 2), gen_b)),
                "c": Subscription(topics=["t"])}
    assert assign("sticky", {"t": 3}, remembering(3, 2)) == {"a": tps("t", 2), "b": tps("t", 0), "c": tps("t", 1)}
    assert assign("sticky", {"t": 3}, remembering(2, 3)) == {"a": tps("t", 0), "b": tps("t", 2), "c": tps("t", 1)}
    assert assign("sticky", {"t": 3}, remembering(3, 3)) == {"a": tps("t", 0), "b": tps("t", 1), "c": tps("t", 2)}


def test_eager_sticky_falls_back_to_owned_partitions():
    subscriptions = {"a": Subscription(topics=["t"], owned_partitions=tps("t", 1), generation_id=5),
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
    msgpack.packb({"partitions": [["t", 1]]}),
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
def test_static_members_come_first(name: str):
    subscriptions = {
        "a-member": Subscription(topics=["t"]),
        "z-member": Subscription(topics=["t"], group_instance_id="a"),
        "m-member": Subscription(topics=["t"], group_instance_id="b"),
    }
    assert assign(name, {"t": 3}, subscriptions) == {
        "z-member": tps("t", 0), "m-member": tps("t", 1), "a-member": tps("t", 2),
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
    """(partitions_per_topic, subscriptions, claims) where claims[assignor][member] is the
    (partitions, generation) that assignor should read for that member.

    Up to `max_members` members (some static), up to 20 topics with 0..30 partitions, identical or
    mixed subscriptions (drawn from a few patterns, sometimes naming unknown topics), and random
    previous ownership: a random earlier owner per partition plus extra conflicting claims, random
    generations, claims of missing partitions, and (for the eager assignor) history carried in
    owned_partitions, in user_data, or lost to garbage user_data."""
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

    claims: dict[str, dict[str, tuple[list[TopicPartition], int]]] = {"sticky": {}, "cooperative-sticky": {}}
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
        transport = {m: rnd.choice(["owned", "owned", "user_data", "garbage"]) for m in members}

    subscriptions = {}
    for i, m in enumerate(members):
        kw = dict(topics=list(patterns[pattern_of[i]]),
                  group_instance_id=next(instance_ids) if static[i] else None)
        if transport[m] == "owned":
            sub = Subscription(owned_partitions=list(owned[m]), generation_id=generation[m], **kw)
            claims["sticky"][m] = claims["cooperative-sticky"][m] = (owned[m], generation[m])
        elif transport[m] == "user_data":
            # An eager member: revoked everything, remembers its assignment in user_data.
            sub = Subscription(user_data=encode_user_data(owned[m], generation[m]), **kw)
            claims["sticky"][m] = (owned[m], generation[m])
            claims["cooperative-sticky"][m] = ([], -1)
        else:
            sub = Subscription(user_data=b"\x93garbage" + bytes([i % 256]), **kw)
            claims["sticky"][m] = claims["cooperative-sticky"][m] = ([], -1)
        subscriptions[m] = sub
    return partitions_per_topic, subscriptions, claims


def for_cooperative(subscriptions: Mapping[str, Subscription]) -> dict[str, Subscription]:
    """The same group without user_data: what sticky would compute from owned_partitions, which is
    what cooperative-sticky reads."""
    return {m: Subscription(topics=list(s.topics), owned_partitions=list(s.owned_partitions),
                            generation_id=s.generation_id, group_instance_id=s.group_instance_id)
            for m, s in subscriptions.items()}


# Derandomized: the suite (and CI) runs the same examples every time, so a run never fails on an
# example no earlier run met; GROUPLAB_HYPOTHESIS_RANDOM=1 searches afresh (as when hunting issue 15).
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None,
                             derandomize=os.environ.get("GROUPLAB_HYPOTHESIS_RANDOM") != "1")


# ----------------------------------------------------------------------------- validity and balance


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups())
def test_property_validity(name: str, group):
    partitions_per_topic, subscriptions, claims = group
    result = assign(name, partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result, complete=(name == "sticky"))
    if name == "cooperative-sticky":
        # The unassigned partitions are exactly the withheld transfers: those the sticky target
        # gives to someone other than their (resolved) previous owner, who is still a member.
        target = assign("sticky", partitions_per_topic, for_cooperative(subscriptions))
        check_valid(partitions_per_topic, subscriptions, target, complete=True)
        before = reference_owners(partitions_per_topic, claims[name])
        withheld = {p for m, parts in target.items() for p in parts if before.get(p, m) != m}
        assert {m: [p for p in parts if p not in withheld] for m, parts in target.items()} == result
        assigned = {p for parts in result.values() for p in parts}
        assert expected_partitions(partitions_per_topic, subscriptions) - assigned == withheld


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
    """A valid, uncontested claim within quota is always kept (identical subscriptions: the quota
    is floor(P / M), every member can keep that many of its own)."""
    partitions_per_topic, subscriptions, claims = group
    result = assign("sticky", partitions_per_topic, subscriptions)
    before = reference_owners(partitions_per_topic, claims["sticky"])
    quota = len(expected_partitions(partitions_per_topic, subscriptions)) // len(subscriptions)
    for m, s in subscriptions.items():
        mine = {p for p, owner in before.items() if owner == m and p.topic in s.topics}
        kept = mine & set(result[m])
        assert len(kept) >= min(len(mine), quota), (m, sorted(mine), result[m])


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
    """After a member leaves, a partition moves between two remaining members only if balance
    needs it. Checked two ways that hold for any subscriptions:
    - moving any such partition back to where it was leaves the result unbalanced;
    - per topic, the moves form no cycle (X -> Y -> ... -> X could all be undone, keeping every
      count: Kafka's own stickiness check, PartitionMovements.isSticky).
    The simpler "X gives a partition to Y only if X ends with fewer partitions" does not hold in
    general: see test_member_leaves_balance_can_make_a_growing_member_give_one_up."""
    leaver = data.draw(st.sampled_from(sorted(group[1])))
    check_member_leaves(group, leaver)


def check_member_leaves(group, leaver: str) -> None:
    partitions_per_topic, subscriptions, old = group
    remaining = {m: s for m, s in subscriptions.items() if m != leaver}
    new = assign("sticky", partitions_per_topic, remaining)
    check_valid(partitions_per_topic, remaining, new, complete=True)
    assert balance_violations(new, remaining) == []

    moved = moves_between(old, new, remaining)
    for part, x, y in moved:
        undone = {m: list(parts) for m, parts in new.items()}
        undone[y].remove(part)
        undone[x].append(part)
        assert balance_violations(undone, remaining), f"{part} moved {x} -> {y} though balance did not need it"
    for topic in {part.topic for part, _, _ in moved}:
        assert not has_cycle([(x, y) for part, x, y in moved if part.topic == topic]), topic


@pytest.mark.xfail(strict=True, reason="issue 15: with different subscriptions grouplab's sticky moves t11-1 between two "
                                       "remaining members though balance does not need it (Kafka's general assignor "
                                       "would not); found by hypothesis")
def test_member_leaves_with_different_subscriptions_moves_only_what_balance_needs() -> None:
    data = json.loads((Path(__file__).parent / "data" / "sticky-member-leaves-issue-15.json").read_text())
    subscriptions = {m: Subscription(topics=v["topics"], owned_partitions=[tp(t, p) for t, p in v["owned"]],
                                     generation_id=v["generation"]) for m, v in data["members"].items()}
    old = {m: [tp(t, p) for t, p in parts] for m, parts in data["old"].items()}
    check_member_leaves((data["partitions_per_topic"], subscriptions, old), data["leaver"])


def test_member_leaves_balance_can_make_a_growing_member_give_one_up():
    # Found by hypothesis. L leaves; only b subscribes to t1 among the rest, so b must take L's
    # t1-0 and t1-2 (2 -> 4 partitions) and then give t0-1 to c (1 partition) to be balanced:
    # b gives a partition away although it ends with more than it had. Keeping t0-1 would leave
    # b at 4 and c at 1, which the balance rule forbids.
    partitions_per_topic = {"t0": 4, "t1": 3}
    old = {"L": [tp("t1", 0), tp("t1", 2)], "a": tps("t0", 2, 3), "b": [tp("t0", 1), tp("t1", 1)], "c": tps("t0", 0)}
    topics = {"L": ["t0", "t1"], "a": ["t0"], "b": ["t0", "t1"], "c": ["t0"]}
    assert balance_violations(old, {m: Subscription(topics=t) for m, t in topics.items()}) == []
    remaining = {m: Subscription(topics=topics[m], owned_partitions=old[m], generation_id=10) for m in "abc"}
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
    """A partition assigned to m was unowned before (after claim resolution) or owned by m (or
    owned by someone no longer in the group -- impossible here, every claimant is a member)."""
    partitions_per_topic, subscriptions, claims = group
    result = assign("cooperative-sticky", partitions_per_topic, subscriptions)
    before = reference_owners(partitions_per_topic, claims["cooperative-sticky"])
    for m, parts in result.items():
        for part in parts:
            assert before.get(part, m) == m or before[part] not in subscriptions, (part, m, before[part])


def cooperative_rounds(partitions_per_topic, subscriptions, max_rounds: int):
    """Run cooperative-sticky until a round assigns everything (at most `max_rounds` rounds); each
    round, members own what the previous one gave them, in the next generation. Checks after every
    round that no partition is owned by two members: a member gains only partitions that nobody
    else owns right now (owners revoke what they lose before anybody gets it)."""
    owner = reference_owners(partitions_per_topic,
                             {m: (s.owned_partitions, s.generation_id) for m, s in subscriptions.items()})
    generation = max(s.generation_id for s in subscriptions.values()) + 1
    everything = expected_partitions(partitions_per_topic, subscriptions)
    current, results = subscriptions, []
    for _ in range(max_rounds):
        result = assign("cooperative-sticky", partitions_per_topic, current)
        check_valid(partitions_per_topic, current, result, complete=False)
        for m, parts in result.items():
            for part in parts:
                assert owner.get(part, m) == m, f"{part} handed from {owner[part]} to {m} in one round"
        results.append(result)
        if {p for parts in result.values() for p in parts} == everything:
            break
        owner = owners_of(result)
        current = owning(current, result, generation)
        generation += 1
    return results


@PROPERTY_SETTINGS
@given(group=groups(identical=True))
def test_property_cooperative_rounds_identical_subscriptions_finish_in_two(group):
    """Identical subscriptions: the second round assigns everything, takes nothing back from what
    the first round handed out, and gives every member as many partitions as the sticky target.
    (Which new member gets which withheld partition may differ from the first target: see
    test_cooperative_second_round_may_hand_withheld_partitions_to_another_new_member.)"""
    partitions_per_topic, subscriptions, _ = group
    subscriptions = for_cooperative(subscriptions)
    target = assign("sticky", partitions_per_topic, subscriptions)
    results = cooperative_rounds(partitions_per_topic, subscriptions, max_rounds=2)
    final = results[-1]
    check_valid(partitions_per_topic, subscriptions, final, complete=True)
    for m in subscriptions:
        assert set(results[0][m]) <= set(target[m])
        assert set(results[0][m]) <= set(final[m])
        assert len(final[m]) == len(target[m])
    if len(results) == 1:
        assert final == target  # nothing had to be withheld


@PROPERTY_SETTINGS
@given(group=groups(identical=False))
def test_property_cooperative_rounds_converge(group):
    """Any subscriptions: the rounds reach a complete, balanced assignment with nothing owned twice
    along the way. Kafka's own CooperativeStickyAssignorTest allows up to 4 follow-up rebalances;
    with different subscriptions grouplab sometimes needs 2 (see the xfail test below)."""
    partitions_per_topic, subscriptions, _ = group
    subscriptions = for_cooperative(subscriptions)
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


@pytest.mark.xfail(strict=True, reason=(
    "_assign_general's greedy free-partition placement (ties go to the first member in order) can "
    "force a sticky partition off its owner although a balanced assignment keeping every owned "
    "partition exists, so the follow-up rebalance withholds again and a third round is needed"))
def test_cooperative_different_subscriptions_finish_in_two_rounds():
    # Found by hypothesis. Round one: a keeps t0-1, t0-2, t1-1; b, c, d wait for t0-0 and t1-0.
    # Round two: everyone owns round one's result; the first target (a 3, b 4, c 2, d 2) keeps
    # all of it and is balanced, but t0-0 goes to a (tie with b, a first), a reaches 4 > c + 1,
    # and a's t1-1 is moved to c -- withheld, so a third round is needed.
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
    results = cooperative_rounds(partitions_per_topic, subscriptions, max_rounds=3)
    assert len(results) <= 2
    assert results[-1] == target


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
