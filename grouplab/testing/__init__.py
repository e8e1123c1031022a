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
"""

from grouplab.testing.cluster import AsyncCluster, ClusterError
from grouplab.testing.sync import Cluster
from grouplab.testing.views import GroupView, MemberView, RebalanceView, WaitTimeout

__all__ = ["AsyncCluster", "Cluster", "ClusterError", "GroupView", "MemberView", "RebalanceView", "WaitTimeout"]
