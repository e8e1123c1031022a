"""The KIP-848 server-side assignors `uniform` and `range` (grouplab/coordinator/server_assignors/).

The concrete cases are Kafka's own unit tests of the group-coordinator module, named as Kafka
names them (UniformHomogeneousAssignmentBuilderTest, UniformHeterogeneousAssignmentBuilderTest,
RangeAssignorTest), with topic1..topic4 and members A, B, C as there. Where Kafka's expected answer
depends on the iteration order of its hash set of topic ids, the comment says so and the expected
answer is the one our fixed order (topic name) gives; every other expected answer is Kafka's.
Then hypothesis properties over random groups.
"""

from __future__ import annotations

from typing import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.coordinator.server_assignors import (SERVER_ASSIGNORS, MemberSpec, RangeAssignor, TargetAssignment,
                                                   UniformAssignor, UnknownServerAssignor, server_assignor)

T1, T2, T3, T4 = "topic1", "topic2", "topic3", "topic4"


def member(*topics: str, instance_id: str | None = None, **assignment: list[int] | tuple[int, ...]) -> MemberSpec:
    """A member subscribed to `topics` with current assignment given as topic1=[0, 1], ..."""
    return MemberSpec(subscribed_topics=frozenset(topics),
                      assignment={t: frozenset(ps) for t, ps in assignment.items()}, instance_id=instance_id)


def expect(**per_member: dict[str, list[int]]) -> TargetAssignment:
    return {m: {t: frozenset(ps) for t, ps in got.items()} for m, got in per_member.items()}


def uniform(members: Mapping[str, MemberSpec], topics: Mapping[str, int]) -> TargetAssignment:
    return UniformAssignor().assign(members, topics)


def range_(members: Mapping[str, MemberSpec], topics: Mapping[str, int]) -> TargetAssignment:
    return RangeAssignor().assign(members, topics)


def sizes(result: TargetAssignment) -> dict[str, int]:
    return {m: sum(len(ps) for ps in got.values()) for m, got in result.items()}


# ----------------------------------------------------------------------------- registry


def test_registry_names_and_default_order() -> None:
    assert list(SERVER_ASSIGNORS) == ["uniform", "range"]  # group.consumer.assignors default: uniform,range
    assert server_assignor("uniform").name == "uniform"
    assert server_assignor("range").name == "range"
    with pytest.raises(KeyError) as info:
        server_assignor("sticky")
    assert isinstance(info.value, UnknownServerAssignor)
    assert str(info.value) == "unknown server-side assignor 'sticky'; known: uniform, range"


# ----------------------------------------------------------------------------- uniform, homogeneous
# Kafka's UniformHomogeneousAssignmentBuilderTest (members in a TreeMap: A, B, C).


def test_homogeneous_testOneMemberNoTopicSubscription() -> None:
    assert uniform({"A": member()}, {T1: 3}) == {"A": {}}


def test_homogeneous_testOneMemberSubscribedToNonexistentTopic() -> None:
    # Kafka throws PartitionAssignorException; a topic missing from the metadata is skipped here.
    assert uniform({"A": member(T2)}, {T1: 3}) == {"A": {}}


def test_homogeneous_testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks() -> None:
    # Kafka expects A: topic3 0-1, B: topic1 0-2 — its hash set of topic ids lists topic3 first.
    # Taking topics by name, A (quota 2) takes topic1 0-1 and B (quota 3, the extra place goes
    # to the last unfilled member) topic1 2 and topic3 0-1.
    result = uniform({"A": member(T1, T3), "B": member(T1, T3)}, {T1: 3, T3: 2})
    assert result == expect(A={T1: [0, 1]}, B={T1: [2], T3: [0, 1]})


def test_homogeneous_testFirstAssignmentNumMembersGreaterThanTotalNumPartitions() -> None:
    result = uniform({"A": member(T3), "B": member(T3), "C": member(T3)}, {T3: 2})
    assert result == expect(A={}, B={T3: [0]}, C={T3: [1]})


def test_homogeneous_testValidityAndBalanceForLargeSampleSet() -> None:
    topics = {f"topic-{i}": 3 for i in range(1, 101)}
    members = {f"member{i}": member(*topics) for i in range(1, 50)}
    result = uniform(members, topics)
    check_valid(members, topics, result)
    assert max(sizes(result).values()) - min(sizes(result).values()) <= 1


def test_homogeneous_testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment() -> None:
    members = {"A": member(T1, T2, topic1=[0, 1], topic2=[0, 1]), "B": member(T1, T2, topic1=[2], topic2=[2])}
    result = uniform(members, {T1: 3, T2: 3})
    assert result == expect(A={T1: [0, 1], T2: [0]}, B={T1: [2], T2: [1, 2]})


def test_homogeneous_testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics() -> None:
    # Kafka expects A: topic1 0,2 + topic2 0,3,4 and B: topic1 1,3,4,5 + topic2 1,2 — its hash set
    # lists topic2 before topic1, so A's two open places take topic2 3-4. By name they take topic1 3-4.
    members = {"A": member(T1, T2, topic1=[0, 2], topic2=[0]), "B": member(T1, T2, topic1=[1], topic2=[1, 2])}
    result = uniform(members, {T1: 6, T2: 5})
    assert result == expect(A={T1: [0, 2, 3, 4], T2: [0]}, B={T1: [1, 5], T2: [1, 2, 3, 4]})


def test_homogeneous_testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    members = {"A": member(T1, T2, topic1=[0, 2], topic2=[0]), "B": member(T1, T2, topic1=[1], topic2=[1, 2]),
               "C": member(T1, T2)}
    result = uniform(members, {T1: 3, T2: 3})
    assert result == expect(A={T1: [0, 2]}, B={T1: [1], T2: [1]}, C={T2: [0, 2]})


def test_homogeneous_testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics() -> None:
    # Kafka expects A to take topic2 2 and B topic1 2 (its hash set lists topic2 first); by name
    # A takes topic1 2 and B topic2 2.
    members = {"A": member(T1, T2, topic1=[0], topic2=[0]), "B": member(T1, T2, topic1=[1], topic2=[1])}
    result = uniform(members, {T1: 3, T2: 3})
    assert result == expect(A={T1: [0, 2], T2: [0]}, B={T1: [1], T2: [1, 2]})


def test_homogeneous_testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    members = {"A": member(T2, topic1=[0], topic2=[0]), "B": member(T2, topic1=[1], topic2=[1])}
    result = uniform(members, {T1: 2, T2: 2})
    assert result == expect(A={T2: [0]}, B={T2: [1]})


def test_homogeneous_extra_place_stays_with_the_member_that_holds_it() -> None:
    # 5 partitions over 2 members: B already holds 3, so B keeps the extra place and nothing
    # moves (Kafka's quotaHasExtraPartition rule; the older builder handed the extra place to
    # the first member in order and moved one of B's partitions to A).
    members = {"A": member(T1, topic1=[0, 1]), "B": member(T1, topic1=[2, 3, 4])}
    assert uniform(members, {T1: 5}) == expect(A={T1: [0, 1]}, B={T1: [2, 3, 4]})


# ----------------------------------------------------------------------------- uniform, heterogeneous
# Kafka's UniformHeterogeneousAssignmentBuilderTest (its TestGroupSpecImpl sorts members; topic ids
# there sort as the names do, so every expected answer below is Kafka's own).


def test_heterogeneous_testTwoMembersNoTopicSubscription() -> None:
    assert uniform({"A": member(), "B": member()}, {T1: 3}) == {"A": {}, "B": {}}


def test_heterogeneous_testTwoMembersSubscribedToNonexistentTopics() -> None:
    # Kafka throws; here both topics are skipped.
    assert uniform({"A": member(T3), "B": member(T2)}, {T1: 3}) == {"A": {}, "B": {}}


def test_heterogeneous_testFirstAssignmentTwoMembersTwoTopics() -> None:
    result = uniform({"A": member(T1, T3), "B": member(T3)}, {T1: 3, T3: 6})
    assert result == expect(A={T1: [0, 1, 2], T3: [4]}, B={T3: [0, 1, 2, 3, 5]})


def test_heterogeneous_testFirstAssignmentNumMembersGreaterThanTotalNumPartitions() -> None:
    result = uniform({"A": member(T3), "B": member(T3), "C": member(T1)}, {T3: 1, T1: 2})
    assert result == expect(A={T3: [0]}, B={}, C={T1: [0, 1]})


def test_heterogeneous_testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment() -> None:
    members = {"A": member(T1, topic1=[0, 1, 2]),
               "B": member(T1, T2, topic1=[3], topic2=[0]),
               "C": member(T1, T2, T3, topic1=[4, 5], topic2=[1, 2, 3], topic3=[0, 1, 2, 3])}
    result = uniform(members, {T1: 6, T2: 4, T3: 4})
    assert result == expect(A={T1: [0, 1, 2, 5]}, B={T1: [3], T2: [0, 1, 2, 3]}, C={T1: [4], T3: [0, 1, 2, 3]})


def test_heterogeneous_testReassignmentWhenPartitionsAreAddedForTwoMembers() -> None:
    members = {"A": member(T1, T3, topic1=[0, 1, 2, 3], topic3=[0, 1]),
               "B": member(T1, T2, T3, T4, topic2=[0, 1, 2], topic4=[0, 1, 2])}
    result = uniform(members, {T1: 6, T2: 5, T3: 3, T4: 3})
    assert result == expect(A={T1: [0, 1, 2, 3, 4, 5], T3: [0, 1, 2]}, B={T2: [0, 1, 2, 3, 4], T4: [0, 1, 2]})


def test_heterogeneous_testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics() -> None:
    members = {"A": member(T1, topic1=[0, 2], topic2=[0]), "B": member(T1, T2, topic1=[1], topic2=[1, 2]),
               "C": member(T1, T2)}
    result = uniform(members, {T1: 6, T2: 7})
    assert result == expect(A={T1: [0, 2, 3, 4, 5]}, B={T1: [1], T2: [1, 2, 6]}, C={T2: [0, 3, 4, 5]})


def test_heterogeneous_testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics() -> None:
    members = {"A": member(T1, T3, topic1=[0, 1, 2], topic3=[0, 1]), "B": member(T2, topic2=[3, 4, 5, 6])}
    result = uniform(members, {T1: 3, T2: 8, T3: 3})
    assert result == expect(A={T1: [0, 1, 2], T3: [0, 1, 2]}, B={T2: list(range(8))})


def test_heterogeneous_testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    members = {"A": member(T1, topic1=[0, 2], topic2=[1, 3]), "B": member(T1, T2, topic1=[1], topic2=[0, 2, 4])}
    result = uniform(members, {T1: 3, T2: 5})
    assert result == expect(A={T1: [0, 1, 2]}, B={T2: [0, 1, 2, 3, 4]})


def test_heterogeneous_testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions() -> None:
    members = {"A": member(T1, T2, T3, topic1=[0, 1], topic2=[0, 1], topic3=[0, 1]), "B": member(T1, T2, T3)}
    # Homogeneous subscriptions, so the homogeneous builder runs here (Kafka's test forces the
    # heterogeneous one): A keeps its first 3 by topic name, B gets the rest.
    result = uniform(members, {T1: 2, T2: 2, T3: 2})
    assert result == expect(A={T1: [0, 1], T2: [0]}, B={T2: [1], T3: [0, 1]})
    # The heterogeneous builder itself, as Kafka's test runs it:
    from grouplab.coordinator.server_assignors.heterogeneous import assign_heterogeneous
    assert assign_heterogeneous(members, {T1: 2, T2: 2, T3: 2}) == expect(
        A={T2: [0], T3: [0, 1]}, B={T1: [0, 1], T2: [1]})


def test_heterogeneous_testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions() -> None:
    result = uniform({"A": member(T1), "B": member()}, {T1: 3})
    assert result == expect(A={T1: [0, 1, 2]}, B={})


# ----------------------------------------------------------------------------- range
# Kafka 4's RangeAssignorTest (the server-side range, group-coordinator module).


def test_range_testOneMemberNoTopic() -> None:
    assert range_({"A": member()}, {T1: 3}) == {"A": {}}


def test_range_testOneMemberSubscribedToNonExistentTopic() -> None:
    assert range_({"A": member(T2)}, {T1: 3}) == {"A": {}}  # Kafka throws; skipped here


def test_range_testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions() -> None:
    result = range_({"A": member(T1, T3), "B": member(T1, T3)}, {T1: 3, T3: 2})
    assert result == expect(A={T1: [0, 1], T3: [0]}, B={T1: [2], T3: [1]})


def test_range_testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions() -> None:
    result = range_({"A": member(T1, T2), "B": member(T3), "C": member(T2, T3)}, {T1: 3, T2: 3, T3: 2})
    assert result == expect(A={T1: [0, 1, 2], T2: [0, 1]}, B={T3: [0]}, C={T2: [2], T3: [1]})


def test_range_testFirstAssignmentNumMembersGreaterThanNumPartitions() -> None:
    result = range_({"A": member(T1, T3), "B": member(T1, T3), "C": member(T1, T3)}, {T1: 3, T3: 2})
    assert result == expect(A={T1: [0], T3: [0]}, B={T1: [1], T3: [1]}, C={T1: [2]})


def test_range_testStaticMembership() -> None:
    topics = {T1: 3}
    before = range_({"A": member(T1, instance_id="instanceA"), "B": member(T1, instance_id="instanceB")}, topics)
    after = range_({"B": member(T1, instance_id="instanceB"), "memberA1": member(T1, instance_id="instanceA")}, topics)
    assert after["memberA1"] == before["A"] and after["B"] == before["B"]
    assert before == expect(A={T1: [0, 1]}, B={T1: [2]})


def test_range_testMixedStaticMembership() -> None:
    topics = {T1: 5}
    before = range_({"A": member(T1, instance_id="instanceA"), "C": member(T1, instance_id="instanceC"),
                     "B": member(T1)}, topics)
    after = range_({"memberA1": member(T1, instance_id="instanceA"), "C": member(T1, instance_id="instanceC"),
                    "B": member(T1)}, topics)
    assert after["memberA1"] == before["A"] and after["B"] == before["B"] and after["C"] == before["C"]
    # Static members first (by instance id), then the dynamic one.
    assert before == expect(A={T1: [0, 1]}, C={T1: [2, 3]}, B={T1: [4]})


def test_range_testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded() -> None:
    members = {"A": member(T1, T2, topic1=[0], topic2=[0]), "B": member(T1, T2, topic1=[1], topic2=[1]),
               "C": member(T1, T2)}
    result = range_(members, {T1: 2, T2: 2})
    assert result == expect(A={T1: [0], T2: [0]}, B={T1: [1], T2: [1]}, C={})


def test_range_testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics() -> None:
    members = {"A": member(T1, T2, topic1=[0, 1], topic2=[0, 1]), "B": member(T1, T2, topic1=[2], topic2=[2])}
    result = range_(members, {T1: 4, T2: 4})
    assert result == expect(A={T1: [0, 1], T2: [0, 1]}, B={T1: [2, 3], T2: [2, 3]})


def test_range_testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    # Kafka 4's range reads no current assignment: B moves from partition 2 to partition 1.
    members = {"A": member(T1, T2, topic1=[0, 1], topic2=[0, 1]), "B": member(T1, T2, topic1=[2], topic2=[2]),
               "C": member(T1, T2)}
    result = range_(members, {T1: 3, T2: 3})
    assert result == expect(A={T1: [0], T2: [0]}, B={T1: [1], T2: [1]}, C={T1: [2], T2: [2]})


def test_range_testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    members = {"A": member(T1, T2, topic1=[0, 1], topic2=[0, 1]), "B": member(T1, T2, topic1=[2], topic2=[2]),
               "C": member(T1)}
    result = range_(members, {T1: 4, T2: 3})
    assert result == expect(A={T1: [0, 1], T2: [0, 1]}, B={T1: [2], T2: [2]}, C={T1: [3]})


def test_range_testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    result = range_({"B": member(T1, T2, topic1=[2], topic2=[2])}, {T1: 3, T2: 3})
    assert result == expect(B={T1: [0, 1, 2], T2: [0, 1, 2]})


def test_range_testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics() -> None:
    members = {"A": member(T1, topic1=[0, 1, 2], topic2=[0]), "B": member(T1, T2, T3, topic2=[1]),
               "C": member(T2, topic2=[2], topic3=[0, 1])}
    result = range_(members, {T1: 3, T2: 3, T3: 2})
    assert result == expect(A={T1: [0, 1]}, B={T1: [2], T2: [0, 1], T3: [0, 1]}, C={T2: [2]})


# ----------------------------------------------------------------------------- properties


def check_valid(members: Mapping[str, MemberSpec], topics: Mapping[str, int], result: TargetAssignment) -> None:
    """Every member present; only subscribed, known topics and existing partitions; every partition
    of a topic someone subscribes to assigned exactly once."""
    assert set(result) == set(members)
    seen: dict[tuple[str, int], str] = {}
    for m, got in result.items():
        for t, ps in got.items():
            assert t in members[m].subscribed_topics and t in topics, (m, t)
            assert ps, (m, t)
            for p in ps:
                assert 0 <= p < topics[t]
                assert (t, p) not in seen, f"{t}:{p} to {seen[(t, p)]} and {m}"
                seen[(t, p)] = m
    wanted = {(t, p) for spec in members.values() for t in spec.subscribed_topics if t in topics
              for p in range(topics[t])}
    assert set(seen) == wanted


TOPIC_NAMES = ["a", "b", "c", "d"]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool = False) -> tuple[dict[str, MemberSpec], dict[str, int]]:
    """A group with random subscriptions (some to a topic missing from metadata) and random current
    assignments (overlapping, stale, out of range: the assignors must cope)."""
    topics = {t: draw(st.integers(0, 9)) for t in draw(st.sets(st.sampled_from(TOPIC_NAMES), min_size=1))}
    names = draw(st.lists(st.text("abcxyz0", min_size=1, max_size=3), min_size=1, max_size=7, unique=True))
    shared = frozenset(draw(st.sets(st.sampled_from(TOPIC_NAMES + ["missing"]))))
    members = {}
    for name in names:
        subscribed = shared if homogeneous else frozenset(draw(st.sets(st.sampled_from(TOPIC_NAMES + ["missing"]))))
        current = draw(st.dictionaries(st.sampled_from(TOPIC_NAMES), st.frozensets(st.integers(0, 10), max_size=5),
                                       max_size=3))
        members[name] = MemberSpec(subscribed_topics=subscribed, assignment=current,
                                   instance_id=draw(st.none() | st.sampled_from(["i1", "i2", "i3"])))
    return members, topics


def rerun(assignor_name: str, members: Mapping[str, MemberSpec], topics: Mapping[str, int],
          result: TargetAssignment) -> TargetAssignment:
    again = {m: MemberSpec(spec.subscribed_topics, result[m], spec.instance_id) for m, spec in members.items()}
    return server_assignor(assignor_name).assign(again, topics)


@pytest.mark.parametrize("name", ["uniform", "range"])
@settings(max_examples=300, deadline=None)
@given(group=groups())
def test_valid_deterministic_and_stable(name: str, group: tuple[dict[str, MemberSpec], dict[str, int]]) -> None:
    members, topics = group
    result = server_assignor(name).assign(members, topics)
    check_valid(members, topics, result)
    reordered = dict(reversed(list(members.items())))
    assert server_assignor(name).assign(reordered, dict(reversed(list(topics.items())))) == result
    # Stickiness: with its own answer as the current assignment, nothing moves.
    assert rerun(name, members, topics, result) == result


@settings(max_examples=300, deadline=None)
@given(group=groups(homogeneous=True))
def test_uniform_homogeneous_balanced(group: tuple[dict[str, MemberSpec], dict[str, int]]) -> None:
    members, topics = group
    result = server_assignor("uniform").assign(members, topics)
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 1


@settings(max_examples=200, deadline=None)
@given(group=groups(homogeneous=True), leavers=st.integers(0, 3), joiners=st.integers(0, 2))
def test_uniform_homogeneous_moves_only_what_balance_needs(group: tuple[dict[str, MemberSpec], dict[str, int]],
                                                           leavers: int, joiners: int) -> None:
    """After members leave or join, the partitions taken from staying members are as few as any
    balanced assignment allows: each keeps up to the minimum quota, and the members already holding
    more take the extra places while there are some."""
    members, topics = group
    first = server_assignor("uniform").assign(members, topics)
    stay = sorted(members)[leavers:]
    if not stay:
        return
    subscribed = next(iter(members.values())).subscribed_topics
    second_members = {m: MemberSpec(subscribed, first[m]) for m in stay}
    second_members.update({f"new{i}": MemberSpec(subscribed, {}) for i in range(joiners)})
    second = server_assignor("uniform").assign(second_members, topics)
    total = sum(topics[t] for t in subscribed if t in topics)
    quota, extra = divmod(total, len(second_members))
    held = [sum(len(ps) for ps in first[m].values()) for m in stay]
    can_keep = sum(min(h, quota) for h in held) + min(extra, sum(h > quota for h in held))
    lost = sum(len({(t, p) for t, ps in first[m].items() for p in ps}
                   - {(t, p) for t, ps in second[m].items() for p in ps}) for m in stay)
    assert lost == sum(held) - can_keep


def test_uniform_heterogeneous_balances_each_topics_subscribers() -> None:
    # Two groups of subscribers sharing nothing: each balanced within itself.
    members = {f"m{i}": member(T1 if i % 2 else T2) for i in range(6)}
    result = uniform(members, {T1: 7, T2: 9})
    check_valid(members, {T1: 7, T2: 9}, result)
    assert sorted(sizes(result)[m] for m in ("m1", "m3", "m5")) == [2, 2, 3]
    assert sorted(sizes(result)[m] for m in ("m0", "m2", "m4")) == [3, 3, 3]
