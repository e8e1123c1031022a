"""Kafka 4's server-side `uniform` assignor (group-coordinator `UniformAssignor`), the default of
group.consumer.assignors: balanced, then sticky. One builder when every member subscribes to the
same topics (homogeneous.py), another when they differ (heterogeneous.py). Topics missing from the
metadata are skipped (Kafka fails the assignment; the caller resolves subscriptions first).
"""

from __future__ import annotations

from typing import Mapping

from grouplab.coordinator.server_assignors.heterogeneous import assign_heterogeneous
from grouplab.coordinator.server_assignors.homogeneous import assign_homogeneous
from grouplab.coordinator.server_assignors.spec import MemberSpec, TargetAssignment


class UniformAssignor:
    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec],
               partitions_per_topic: Mapping[str, int]) -> TargetAssignment:
        subscriptions = {spec.subscribed_topics for spec in members.values()}
        if len(subscriptions) == 1:
            return assign_homogeneous(members, partitions_per_topic, subscriptions.pop())
        return assign_heterogeneous(members, partitions_per_topic)
