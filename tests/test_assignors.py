"""Unit and property tests of the `range` and `roundrobin` assignors, through the public API.

The worked examples come from the project's seed documents and are written out as explicit
expected dicts, so that a reader can check each one against the seed text by eye.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.consumer.assignors import UnknownAssignor, assignor_names, get_assignor
from grouplab.protocol.types import Subscription, TopicPartition

ASSIGNORS = ["range", "roundrobin"]


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def subs(**topics_by_member: list[str]) -> dict[str, Subscription]:
    return {member: Subscription(topics=list(topics)) for member, topics in topics_by_member.items()}


def assign(name: str, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]):
    return get_assignor(name).assign(partitions_per_topic=partitions_per_topic, subscriptions=subscriptions)


# ----------------------------------------------------------------------------- seed examples


def test_range_two_members_two_topics():
    result = assign("range", {"t0": 3, "t1": 3}, subs(c0=["t0", "t1"], c1=["t0", "t1"]))
    assert result == {
        "c0": [tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)],
        "c1": [tp("t0", 2), tp("t1", 2)],
    }


def test_roundrobin_two_members_two_topics():
    result = assign("roundrobin", {"t0": 3, "t1": 3}, subs(c0=["t0", "t1"], c1=["t0", "t1"]))
    assert result == {
        "c0": [tp("t0", 0), tp("t0", 2), tp("t1", 1)],
        "c1": [tp("t0", 1), tp("t1", 0), tp("t1", 2)],
    }


def test_range_one_topic_five_partitions_three_members():
    result = assign("range", {"t": 5}, subs(c0=["t"], c1=["t"], c2=["t"]))
    assert result == {
        "c0": [tp("t", 0), tp("t", 1)],
        "c1": [tp("t", 2), tp("t", 3)],
        "c2": [tp("t", 4)],
    }


def test_range_sorts_members_by_id_and_first_gets_the_extra():
    # Members given in unsorted order; 10 % 3 == 1 so only the first in sorted order gets an extra.
    subscriptions = {
        "ccc": Subscription(topics=["t"]),
        "aaa": Subscription(topics=["t"]),
        "bbb": Subscription(topics=["t"]),
    }
    result = assign("range", {"t": 10}, subscriptions)
    assert result == {
        "aaa": [tp("t", p) for p in (0, 1, 2, 3)],
        "bbb": [tp("t", p) for p in (4, 5, 6)],
        "ccc": [tp("t", p) for p in (7, 8, 9)],
    }


def test_range_three_members_two_topics_two_partitions_each():
    result = assign("range", {"Ta": 2, "Tb": 2}, subs(Ca=["Ta", "Tb"], Cb=["Ta", "Tb"], Cc=["Ta", "Tb"]))
    assert result == {
        "Ca": [tp("Ta", 0), tp("Tb", 0)],
        "Cb": [tp("Ta", 1), tp("Tb", 1)],
        "Cc": [],
    }


def test_roundrobin_three_members_two_topics_two_partitions_each():
    result = assign("roundrobin", {"Ta": 2, "Tb": 2}, subs(Ca=["Ta", "Tb"], Cb=["Ta", "Tb"], Cc=["Ta", "Tb"]))
    assert result == {
        "Ca": [tp("Ta", 0), tp("Tb", 1)],
        "Cb": [tp("Ta", 1)],
        "Cc": [tp("Tb", 0)],
    }


def test_roundrobin_different_subscriptions_is_not_very_optimal():
    """The seed calls this result "not very optimal": c2 gets four partitions while c0 and c1 get
    one each, because round robin skips members not subscribed to a partition's topic instead of
    balancing."""
    result = assign(
        "roundrobin",
        {"t0": 1, "t1": 2, "t2": 3},
        subs(c0=["t0"], c1=["t0", "t1"], c2=["t0", "t1", "t2"]),
    )
    assert result == {
        "c0": [tp("t0", 0)],
        "c1": [tp("t1", 0)],
        "c2": [tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)],
    }


def test_range_over_consumer_threads_seed_004():
    # Old ZooKeeper consumer, seed 004: two consumers with two threads each on a 5-partition topic.
    # The seed text has a typo, "P3 -> C2_1", for the last pair; the correct pair is P4 -> C2_1
    # (P3 already went to C2_0).
    members = ["C1_0", "C1_1", "C2_0", "C2_1"]
    result = assign("range", {"T": 5}, {m: Subscription(topics=["T"]) for m in members})
    assert result == {
        "C1_0": [tp("T", 0), tp("T", 1)],
        "C1_1": [tp("T", 2)],
        "C2_0": [tp("T", 3)],
        "C2_1": [tp("T", 4)],
    }


@pytest.mark.parametrize("partitions", [0, 1, 2, 5, 7, 10, 13, 31])
@pytest.mark.parametrize("members", [1, 2, 3, 4, 7, 10])
def test_range_formula(partitions: int, members: int):
    """Member i gets n+1 partitions if i < r else n, starting at n*i + min(i, r), where
    n = P // C and r = P % C."""
    ids = [f"m{i:02d}" for i in range(members)]  # zero-padded so sorted order == index order
    result = assign("range", {"t": partitions}, {m: Subscription(topics=["t"]) for m in ids})
    n, r = divmod(partitions, members)
    for i, member in enumerate(ids):
        start = n * i + min(i, r)
        length = n + 1 if i < r else n
        assert result[member] == [tp("t", p) for p in range(start, start + length)]


# ----------------------------------------------------------------------------- other unit tests


@pytest.mark.parametrize("name", ASSIGNORS)
def test_topic_absent_from_partitions_per_topic_is_skipped(name: str):
    result = assign(name, {"t0": 2}, subs(c0=["t0", "ghost"], c1=["ghost"]))
    assert result == {"c0": [tp("t0", 0), tp("t0", 1)], "c1": []}


@pytest.mark.parametrize("name", ASSIGNORS)
def test_member_subscribed_to_nothing_gets_empty_list(name: str):
    result = assign(name, {"t0": 2}, subs(c0=["t0"], c1=[]))
    assert result["c1"] == []
    assert result["c0"] == [tp("t0", 0), tp("t0", 1)]


@pytest.mark.parametrize("name", ASSIGNORS)
def test_every_member_is_present_in_result(name: str):
    subscriptions = subs(a=["t0"], b=["t1"], c=[], d=["missing"], e=["t0"], f=["t0"])
    result = assign(name, {"t0": 1, "t1": 0}, subscriptions)
    assert set(result) == set(subscriptions)


@pytest.mark.parametrize("name", ASSIGNORS)
def test_no_members_gives_empty_result(name: str):
    assert assign(name, {"t0": 3}, {}) == {}


@pytest.mark.parametrize("name", ASSIGNORS)
def test_static_members_come_first_by_instance_id(name: str):
    subscriptions = {
        "a-member": Subscription(topics=["t"]),
        "z-member": Subscription(topics=["t"], group_instance_id="a"),
        "m-member": Subscription(topics=["t"], group_instance_id="b"),
    }
    result = assign(name, {"t": 3}, subscriptions)
    # Order: z-member (instance "a"), m-member (instance "b"), then dynamic a-member.
    assert result == {
        "z-member": [tp("t", 0)],
        "m-member": [tp("t", 1)],
        "a-member": [tp("t", 2)],
    }


def test_static_member_gets_range_first_range():
    subscriptions = {
        "a-member": Subscription(topics=["t"]),
        "z-member": Subscription(topics=["t"], group_instance_id="a"),
    }
    result = assign("range", {"t": 5}, subscriptions)
    assert result == {"z-member": [tp("t", p) for p in (0, 1, 2)], "a-member": [tp("t", 3), tp("t", 4)]}


def test_unknown_assignor_raises_listing_available_names():
    with pytest.raises(UnknownAssignor) as info:
        get_assignor("nope")
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "nope" in message
    for name in assignor_names():
        assert name in message
    assert "range" in message and "roundrobin" in message


@pytest.mark.parametrize(
    "kafka_name, protocol_name",
    [
        ("org.apache.kafka.clients.consumer.RangeAssignor", "range"),
        ("org.apache.kafka.clients.consumer.RoundRobinAssignor", "roundrobin"),
    ],
)
def test_kafka_class_names_resolve(kafka_name: str, protocol_name: str):
    assert get_assignor(kafka_name).name == protocol_name


@pytest.mark.parametrize("name", ASSIGNORS)
def test_assignor_name_is_protocol_name(name: str):
    assert get_assignor(name).name == name


def test_get_assignor_returns_fresh_instances():
    assert get_assignor("range") is not get_assignor("range")


# ----------------------------------------------------------------------------- properties

TOPIC_NAMES = [f"t{i}" for i in range(8)]


@st.composite
def groups(draw, identical_subscriptions: bool = False):
    """(partitions_per_topic, subscriptions): up to 30 members, up to 8 topics with 0..20
    partitions, random subsets of subscriptions (sometimes naming topics the cluster lacks),
    some members static with unique instance ids."""
    topics = draw(st.lists(st.sampled_from(TOPIC_NAMES), unique=True, max_size=8))
    partitions_per_topic = {t: draw(st.integers(min_value=0, max_value=20)) for t in topics}
    member_ids = draw(
        st.lists(st.text(alphabet="abcdefgh-0123456789", min_size=1, max_size=6), unique=True, max_size=30)
    )
    instance_ids = iter(draw(st.permutations([f"i{i:02d}" for i in range(len(member_ids))])))
    subscribable = TOPIC_NAMES + ["unknown"]
    shared = draw(st.lists(st.sampled_from(subscribable), unique=True, max_size=9))
    subscriptions = {}
    for member in member_ids:
        member_topics = shared if identical_subscriptions else draw(
            st.lists(st.sampled_from(subscribable), unique=True, max_size=9)
        )
        instance = next(instance_ids) if draw(st.booleans()) else None
        subscriptions[member] = Subscription(topics=list(member_topics), group_instance_id=instance)
    return partitions_per_topic, subscriptions


PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)


@pytest.mark.parametrize("name", ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups())
def test_property_validity(name: str, group):
    partitions_per_topic, subscriptions = group
    result = get_assignor(name).assign(partitions_per_topic, subscriptions)

    assert set(result) == set(subscriptions)
    subscribed = set().union(*(s.topics for s in subscriptions.values())) if subscriptions else set()
    expected = {
        tp(topic, p) for topic in subscribed if topic in partitions_per_topic for p in range(partitions_per_topic[topic])
    }
    assigned = [p for parts in result.values() for p in parts]
    counts = Counter(assigned)
    assert all(c == 1 for c in counts.values()), f"assigned more than once: {[p for p, c in counts.items() if c > 1]}"
    assert set(assigned) == expected
    for member, parts in result.items():
        for part in parts:
            assert part.topic in subscriptions[member].topics


@pytest.mark.parametrize("name", ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups(), data=st.data())
def test_property_determinism(name: str, group, data):
    partitions_per_topic, subscriptions = group
    first = get_assignor(name).assign(partitions_per_topic, subscriptions)
    second = get_assignor(name).assign(partitions_per_topic, subscriptions)
    assert first == second

    shuffled_members = data.draw(st.permutations(list(subscriptions)))
    shuffled = {m: subscriptions[m] for m in shuffled_members}
    shuffled_topics = data.draw(st.permutations(list(partitions_per_topic)))
    shuffled_ppt = {t: partitions_per_topic[t] for t in shuffled_topics}
    assert get_assignor(name).assign(shuffled_ppt, shuffled) == first


@PROPERTY_SETTINGS
@given(group=groups())
def test_property_range_balance_per_topic(group):
    partitions_per_topic, subscriptions = group
    result = get_assignor("range").assign(partitions_per_topic, subscriptions)
    for topic, count in partitions_per_topic.items():
        subscribers = [m for m, s in subscriptions.items() if topic in s.topics]
        if not subscribers:
            continue
        per_member = [sum(1 for p in result[m] if p.topic == topic) for m in subscribers]
        assert max(per_member) - min(per_member) <= 1, (topic, per_member)
        assert sum(per_member) == count


@PROPERTY_SETTINGS
@given(group=groups(identical_subscriptions=True))
def test_property_roundrobin_balance_identical_subscriptions(group):
    partitions_per_topic, subscriptions = group
    result = get_assignor("roundrobin").assign(partitions_per_topic, subscriptions)
    if not result:
        return
    totals = [len(parts) for parts in result.values()]
    assert max(totals) - min(totals) <= 1, totals


@PROPERTY_SETTINGS
@given(group=groups(identical_subscriptions=True))
def test_property_roundrobin_slices_deal_as_the_one_at_a_time_deal(group):
    """Everyone subscribed to everything: the sliced deal (issue 26's speed) hands out exactly what
    dealing one partition at a time does."""
    from grouplab.consumer.assignors.base import empty_assignment, member_order
    from grouplab.consumer.assignors.roundrobin import _dealt, _sliced

    partitions_per_topic, subscriptions = group
    members = member_order(subscriptions)
    if not members:
        return
    topic_sets = {m: set(subscriptions[m].topics) for m in members}
    topics = sorted(set().union(*topic_sets.values()))
    assert _sliced(empty_assignment(subscriptions), members, topics, partitions_per_topic) == \
        _dealt(empty_assignment(subscriptions), members, topic_sets, topics, partitions_per_topic)
