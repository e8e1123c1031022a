"""Partition assignors by their protocol names (docs/design.md §5).

    from grouplab.consumer.assignors import get_assignor
    get_assignor("range").assign(partitions_per_topic, subscriptions)
"""

from __future__ import annotations

from grouplab.consumer.assignors.base import AssignmentMap, Assignor, RebalanceProtocol, member_order
from grouplab.consumer.assignors.range import RangeAssignor
from grouplab.consumer.assignors.roundrobin import RoundRobinAssignor
from grouplab.consumer.assignors.sticky import CooperativeStickyAssignor, StickyAssignor

_ASSIGNORS: dict[str, type[Assignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


class UnknownAssignor(ValueError):
    pass


def assignor_names() -> list[str]:
    return list(_ASSIGNORS)


def get_assignor(name: str) -> Assignor:
    """A fresh assignor for a protocol name; Kafka's class names are accepted too."""
    key = name.strip()
    key = _KAFKA_CLASS_NAMES.get(key, key)
    try:
        return _ASSIGNORS[key]()
    except KeyError:
        raise UnknownAssignor(
            f"unknown assignor {name!r}; available: {', '.join(_ASSIGNORS)}"
        ) from None


_KAFKA_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

__all__ = ["AssignmentMap", "Assignor", "RebalanceProtocol", "UnknownAssignor", "assignor_names", "get_assignor", "member_order"]
