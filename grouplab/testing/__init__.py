"""grouplab inside an application's own tests (docs/testing.md): a coordinator with Kafka's wire
protocol on free loopback ports, faults at run time, and what the group did, for assertions.

    from grouplab.testing import Cluster

    with Cluster(topics={"orders": 3}) as cluster:
        consumer = KafkaConsumer("orders", bootstrap_servers=cluster.bootstrap, group_id="app")
        ...
        group = cluster.wait_stable("app", members=1)

`AsyncCluster` is the same in the caller's event loop (`async with`); the pytest plugin
(grouplab/testing/plugin.py, registered through the pytest11 entry point) gives the fixtures
`grouplab_cluster`, `grouplab_cluster_factory`, `grouplab_session_cluster` and
`grouplab_async_cluster`.

The names are imported when first used (PEP 562): pytest imports the plugin in every session of
an environment grouplab is installed in, and that must not load the coordinator.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grouplab.testing.cluster import AsyncCluster, ClusterError
    from grouplab.testing.sync import Cluster
    from grouplab.testing.views import GroupView, MemberView, RebalanceView, WaitTimeout

_WHERE = {"AsyncCluster": "cluster", "ClusterError": "cluster", "Cluster": "sync", "GroupView": "views",
          "MemberView": "views", "RebalanceView": "views", "WaitTimeout": "views"}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'grouplab.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"grouplab.testing.{module}"), name)
