"""The assignor API (docs/design.md §5): a named, pure function from topic sizes and members'
subscriptions to every member's partitions. Assignors run on the group leader only."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from enum import Enum
from itertools import repeat
from typing import Callable, Iterable, Mapping

from grouplab.protocol.memory import gc_paused

from grouplab.protocol.types import Subscription, TopicPartition

AssignmentMap = dict[str, list[TopicPartition]]


class RebalanceProtocol(Enum):
    """EAGER: revoke everything before rejoining. COOPERATIVE: keep what you own (KIP-429)."""

    EAGER = "eager"
    COOPERATIVE = "cooperative"


class Assignor(ABC):
    name: str = ""
    rebalance_protocol: RebalanceProtocol = RebalanceProtocol.EAGER

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Every assignor's `assign` runs with the cyclic collector paused: an assignment builds
        partitions by the hundred thousand (tuples and lists, never a cycle), and the collections
        their allocation set off walked them all again: at 2,000 × 100,000 more than half of
        roundrobin's time (issue 26). Reference counting frees them as ever."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("assign")
        if own is not None and not getattr(own, "_gc_paused", False):
            setattr(cls, "assign", _with_gc_paused(own))

    @abstractmethod
    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> AssignmentMap:
        """Every member in `subscriptions` is a key of the result, with [] if it gets nothing.

        Topics missing from `partitions_per_topic` (unknown to the cluster) are skipped."""

    def subscription_user_data(self, previous: list[TopicPartition], generation_id: int) -> bytes | None:
        """What a member puts in its subscription's user_data for this assignor (its memory of the
        last assignment, for an eager sticky assignor); None for the stateless ones."""
        return None

    def __repr__(self) -> str:
        return f"<assignor {self.name}>"


def _with_gc_paused(assign: Callable[..., AssignmentMap]) -> Callable[..., AssignmentMap]:
    @functools.wraps(assign)
    def paused(*args: object, **kwargs: object) -> AssignmentMap:
        with gc_paused():
            return assign(*args, **kwargs)

    paused._gc_paused = True  # type: ignore[attr-defined]
    return paused


def member_order(subscriptions: Mapping[str, Subscription], members: Iterable[str] | None = None) -> list[str]:
    """Kafka's member order (KIP-345): static members first by group.instance.id, then the rest by
    member id. A restarted static member gets a new member id but keeps its place, and so its
    partitions."""
    ids = subscriptions.keys() if members is None else members

    def key(member_id: str) -> tuple[int, str, str]:
        instance = subscriptions[member_id].group_instance_id
        return (0, instance, member_id) if instance is not None else (1, member_id, "")

    return sorted(ids, key=key)


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    return as_partitions(zip(repeat(topic), range(count)))


def as_partitions(pairs: Iterable[Iterable[object]]) -> list[TopicPartition]:
    """TopicPartitions from (topic, number) pairs that are known to be well formed, built in C:
    an assignment of 100,000 partitions builds them by the hundred thousand."""
    return list(map(tuple.__new__, repeat(TopicPartition), pairs))


def empty_assignment(subscriptions: Mapping[str, Subscription]) -> AssignmentMap:
    return {member: [] for member in subscriptions}
