"""`grouplab assign --protocol consumer`: the KIP-848 server-side assignors as a calculator.

In the consumer protocol the coordinator computes the target assignment itself from every member's
subscription and current target assignment (`--owned` here); a moved partition reaches its new
owner only after the old one has revoked it (KIP-848 reconciliation), so nothing is withheld from
the target as the cooperative client-side assignors withhold it.
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Mapping

from rich.console import Console

from grouplab.coordinator.server_assignors import MemberSpec, TargetAssignment, server_assignor
from grouplab.protocol.types import TopicPartition
from grouplab.teach.catalog import Catalog


def member_specs(topics_by_member: Mapping[str, list[str]],
                 owned: Mapping[str, list[TopicPartition]]) -> dict[str, MemberSpec]:
    """The calculator's members as the assignor takes them: `--owned` is the current target assignment."""
    specs: dict[str, MemberSpec] = {}
    for name, topics in topics_by_member.items():
        current: dict[str, set[int]] = {}
        for tp in owned.get(name, []):
            current.setdefault(tp.topic, set()).add(tp.partition)
        specs[name] = MemberSpec(subscribed_topics=frozenset(topics),
                                 assignment={t: frozenset(ps) for t, ps in current.items()})
    return specs


def as_partitions(result: TargetAssignment) -> dict[str, list[TopicPartition]]:
    return {m: sorted(TopicPartition(t, p) for t, ps in got.items() for p in ps) for m, got in result.items()}


def print_server_assignment(console: Console, assignor: str, topics_text: str, sizes: Mapping[str, int],
                            topics_by_member: Mapping[str, list[str]], owned: Mapping[str, list[TopicPartition]],
                            output_format: str, departed: Mapping[str, list[TopicPartition]] | None = None,
                            c: Catalog | None = None) -> int:
    """`departed`: members that left, with what they owned; their partitions go to the others and
    count as moved (the coordinator drops a member it removed from the target assignment)."""
    departed = departed or {}
    c = c or Catalog()
    result = as_partitions(server_assignor(assignor).assign(member_specs(topics_by_member, owned), sizes))
    if output_format == "json":
        print(json.dumps({m: [[tp.topic, tp.partition] for tp in ps] for m, ps in result.items()}))
        return 0
    from grouplab.display import assignment_table, print_departed

    previous = {tp: m for m, ps in chain(owned.items(), departed.items()) for tp in ps}
    owner = {tp: m for m, ps in result.items() for tp in ps}
    moved = [tp for tp in sorted(owner) if previous.get(tp) not in (None, owner[tp])]
    moved_to: dict[str, int] = {}
    for tp in moved:
        moved_to[owner[tp]] = moved_to.get(owner[tp], 0) + 1
    console.print(assignment_table(result, moved=moved_to if previous else None,
                                   title=c.t("assign.server.title", assignor=assignor, topics=topics_text), c=c))
    print_departed(console, departed, c)
    if previous:
        console.print(c.t("assign.moved", count=len(moved),
                          moves=", ".join(f"{tp}: {previous[tp]}→{owner[tp]}" for tp in moved) or "-"))
        if moved:
            console.print(c.t("assign.server.revoke_first"))
    return 0
