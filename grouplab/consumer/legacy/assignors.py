"""The old assignors by the names `partition.assignment.strategy` took in Kafka 0.8.2."""

from __future__ import annotations

from typing import Callable, Mapping

from grouplab.consumer.legacy.range import assign_range
from grouplab.consumer.legacy.roundrobin import RoundRobinRefused, assign_roundrobin
from grouplab.consumer.legacy.threads import Subscriptions, ThreadAssignment

LegacyAssignor = Callable[[Mapping[str, int], Subscriptions], ThreadAssignment]

LEGACY_ASSIGNORS: dict[str, LegacyAssignor] = {"range": assign_range, "roundrobin": assign_roundrobin}


class UnknownLegacyAssignor(ValueError):
    pass


def get_legacy_assignor(name: str) -> LegacyAssignor:
    try:
        return LEGACY_ASSIGNORS[name.strip()]
    except KeyError:
        raise UnknownLegacyAssignor(
            f"unknown assignor {name!r} for the ZooKeeper-era consumer; it had: {', '.join(LEGACY_ASSIGNORS)}") from None


__all__ = ["LEGACY_ASSIGNORS", "LegacyAssignor", "RoundRobinRefused", "UnknownLegacyAssignor", "get_legacy_assignor"]
