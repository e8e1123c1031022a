"""grouplab.testing with a cluster of brokers (issue 24): `Cluster(brokers=3)`, the
`grouplab(brokers=3)` marker, `coordinator_of`, `kill_broker`, `restart_broker`, `elect_leaders`,
and `bootstrap` listing every live broker, each through its own fault proxy (a rule counts across
them). kafka-python consumers (tests/kafka_python_app.py) ride through their coordinator broker
dying; every wait is on a condition with a generous deadline."""

from __future__ import annotations

from pathlib import Path

import pytest

from grouplab.testing import Cluster, ClusterError
from tests.kafka_python_app import PollingConsumer

pytestmark = pytest.mark.e2e

FAST_GROUP = {"group.min.session.timeout.ms": 1000, "grouplab.coordinator.load.time.ms": 300}


@pytest.fixture
def cluster(tmp_path: Path):
    with Cluster(config=FAST_GROUP, topics={"orders": 3}, run_dir=tmp_path / "run", brokers=3) as c:
        yield c


def consumer(cluster: Cluster, client_id: str) -> PollingConsumer:
    return PollingConsumer(cluster.bootstrap, ["orders"], "app", client_id)


def test_a_group_rides_through_its_coordinator_broker_dying_and_coming_back(cluster: Cluster) -> None:
    assert len(cluster.bootstrap.split(",")) == 3
    apps = [consumer(cluster, "app-1"), consumer(cluster, "app-2")]
    try:
        cluster.produce("orders", [f"a{i}" for i in range(6)], partition=0)
        cluster.wait_stable("app", members=2, timeout=60)
        cluster.wait_for(lambda: sum(len(a.records) for a in apps) >= 6, timeout=60, what="the first records")
        first = cluster.coordinator_of("app")
        assert first in (0, 1, 2)

        cluster.kill_broker(first)
        assert cluster.live_brokers == sorted({0, 1, 2} - {first})
        assert len(cluster.bootstrap.split(",")) == 2
        moved = cluster.coordinator_of("app")
        assert moved not in (first, -1)
        cluster.wait_for(lambda: bool(cluster.events("app", event="group_loaded")), timeout=60,
                         what="the new coordinator to load the group")
        cluster.produce("orders", [f"b{i}" for i in range(6)], partition=1)
        cluster.wait_for(lambda: sum(len(a.records) for a in apps) >= 12, timeout=60,
                         what="records produced after the kill")
        cluster.wait_stable("app", members=2, timeout=60)
        moves = cluster.events(event="coordinator_moved")
        assert [(e["from_node"], e["to_node"]) for e in moves if "app" in e["groups"]] == [(first, moved)]

        cluster.restart_broker(first)
        assert cluster.coordinator_of("app") == moved  # leadership stays until an election
        cluster.elect_leaders()
        assert cluster.coordinator_of("app") == first
        cluster.wait_stable("app", members=2, timeout=60)
    finally:
        for a in apps:
            a.stop(leave=False)
            a.consumer.close(autocommit=False)


def test_a_rule_counts_across_the_brokers_proxies_and_bad_broker_ids_are_refused(cluster: Cluster) -> None:
    rule = cluster.error("Heartbeat", "REBALANCE_IN_PROGRESS", client_id="app-1", count=1)
    apps = [consumer(cluster, "app-1")]
    try:
        cluster.wait_stable("app", members=1, timeout=60)
        cluster.wait_for(lambda: rule.fired == 1, timeout=60, what="the one heartbeat error")
        with pytest.raises(ClusterError, match="no broker 7"):
            cluster.kill_broker(7)
        cluster.kill_broker(2)
        with pytest.raises(ClusterError, match="already down"):
            cluster.kill_broker(2)
        with pytest.raises(ClusterError, match="already running"):
            cluster.restart_broker(0)
    finally:
        for a in apps:
            a.stop(leave=False)
            a.consumer.close(autocommit=False)


def test_a_bad_broker_count_is_refused_before_anything_starts() -> None:
    with pytest.raises(ClusterError, match="brokers must be a number from 1 to 16"):
        Cluster(brokers=0)


@pytest.mark.grouplab(brokers=3, topics={"orders": 3}, config=FAST_GROUP)
def test_the_fixture_takes_a_broker_count_from_the_marker(grouplab_cluster: Cluster) -> None:
    assert grouplab_cluster.live_brokers == [0, 1, 2]
    assert len(grouplab_cluster.bootstrap.split(",")) == 3
    assert grouplab_cluster.coordinator_of("app") == 1  # __consumer_offsets-1 ("app"): preferred leader 1 % 3
