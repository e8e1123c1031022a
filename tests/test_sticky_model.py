"""The fast general assignment (consumer/assignors/sticky_general.py) against a slow, literal model
of Kafka's steps (tests/kafka_sticky_model.py) on random groups with unequal subscriptions and
random histories: the bookkeeping that makes grouplab fast must not change a single partition."""

from __future__ import annotations

import pytest
from hypothesis import given

from grouplab.consumer.assignors import get_assignor
from kafka_sticky_model import model_constrained, model_general
from test_sticky import PROPERTY_SETTINGS, STICKY_ASSIGNORS, groups


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups(identical=False, max_members=12))
def test_property_general_assignment_is_kafkas(name: str, group) -> None:
    partitions_per_topic, subscriptions, _ = group
    result = get_assignor(name).compute(partitions_per_topic, subscriptions)  # type: ignore[attr-defined]
    if result.transferring is not None:
        return  # every member's topics are equal after all: the constrained path
    assert result.assignment == model_general(partitions_per_topic, subscriptions, name)


@pytest.mark.parametrize("name", STICKY_ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups(identical=True))
def test_property_constrained_assignment_is_kafkas(name: str, group) -> None:
    partitions_per_topic, subscriptions, _ = group
    result = get_assignor(name).compute(partitions_per_topic, subscriptions)  # type: ignore[attr-defined]
    assert (result.assignment, result.transferring) == model_constrained(partitions_per_topic, subscriptions, name)
