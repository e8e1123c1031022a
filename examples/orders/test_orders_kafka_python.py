"""The orders application on kafka-python (orders_app/kafka_python_consumer.py: a KafkaConsumer
polled in a thread) against a grouplab coordinator, in five scenarios: a crash mid-batch, a batch
stuck past max.poll.interval.ms, a coordinator restart, a lost SyncGroup, and a static member's
restart. Each test says what the group and the application must do; docs/testing.md explains the
protocol behind each."""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from grouplab.protocol.types import TopicPartition
from grouplab.testing import Cluster
from orders_app import ConsumerSettings, Order, TotalsStore, encode_order, make_orders, totals_of
from orders_app.kafka_python_consumer import KafkaPythonOrdersConsumer

GROUP = "orders-app"
P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
pytestmark = [
    pytest.mark.e2e,
    # A broker refuses sessions shorter than group.min.session.timeout.ms (Kafka's default: 6 s);
    # lowered so that a crashed consumer is noticed after 2 s.
    pytest.mark.grouplab(config={"group.min.session.timeout.ms": 1000}, topics={"orders": 2}),
]

# Timeouts small enough for each scenario to take seconds: a 10 s session for consumers that must
# not be removed (a loaded machine can starve a client's heartbeats for seconds), 2 s for one a
# test lets die. The tests wait for what happens, never for a clock.
SETTINGS = ConsumerSettings(
    client_id="", group_id=GROUP, session_timeout_ms=10000, heartbeat_interval_ms=300, request_timeout_ms=5000,
    extra={"retry_backoff_ms": 100, "reconnect_backoff_max_ms": 500})

Start = Callable[..., KafkaPythonOrdersConsumer]


@pytest.fixture
def start_app(grouplab_cluster: Cluster, store: TotalsStore) -> Iterator[Start]:
    """`start_app("orders-2", session_timeout_ms=2000)`: an instance of the application with that
    client id and settings, writing to the test's store; all are stopped when the test ends."""
    apps: list[KafkaPythonOrdersConsumer] = []

    def start(client_id: str, **settings: object) -> KafkaPythonOrdersConsumer:
        app = KafkaPythonOrdersConsumer(grouplab_cluster.bootstrap,
                                        SETTINGS.replace(client_id=client_id, **settings), store)
        apps.append(app.start())
        return app

    yield start
    for app in reversed(apps):
        app.stop()


def produce(cluster: Cluster, tp: TopicPartition, orders: list[Order]) -> None:
    """One Produce: one record batch, which a consumer's fetch returns whole."""
    cluster.produce(tp.topic, [encode_order(o) for o in orders], partition=tp.partition)


def wait_all_committed(cluster: Cluster) -> None:
    """Until the group has committed every record of `orders` (lag 0 on every partition)."""
    cluster.wait_for(lambda: not any(cluster.lag(GROUP, "orders").values()), timeout=30,
                     what="every order committed")



def test_a_crash_mid_batch_is_processed_again_from_the_last_commit(grouplab_cluster: Cluster, start_app: Start,
                                                                    store: TotalsStore) -> None:
    cluster = grouplab_cluster
    survivor = start_app("orders-1")
    victim = start_app("orders-2", session_timeout_ms=2000)
    group = cluster.wait_stable(GROUP, members=2, timeout=30)
    assert group.partitions_of("orders-2") == [P1]
    first = make_orders("first", 3)
    produce(cluster, P1, first)
    wait_all_committed(cluster)

    victim.misbehaviour.crash_after(2)
    second = make_orders("second", 4)
    produce(cluster, P1, second)
    cluster.wait_for(lambda: victim.crashed, timeout=30, what="orders-2 to crash")
    cluster.isolate("orders-2")  # a dead process sends nothing: cut off its heartbeat thread
    assert cluster.committed(GROUP)[P1] == 3  # its last commit, before the second batch
    assert victim.processor.uncommitted() == {P1: range(3, 5)}  # processed, never committed

    alone = cluster.wait_stable(GROUP, members=1, timeout=30, after_generation=group.generation)
    assert alone.clients == {"orders-1": [P0, P1]}
    removal = cluster.rebalances(GROUP)[-1]
    assert removal.cause == "session_timeout"
    assert removal.removed_clients == [("orders-2", "session_timeout")]
    assert removal.assigned_not_consumed_ms > 0  # orders-2's partition, idle from its crash to its removal

    wait_all_committed(cluster)
    assert survivor.assigned == [P0, P1]
    assert store.processed_by("orders-1") == [o.order_id for o in second]  # from the last commit on
    processed = store.times_processed()
    assert {o.order_id: processed[o.order_id] for o in first + second} == {
        "first-0": 1, "first-1": 1, "first-2": 1,
        "second-0": 2, "second-1": 2,  # processed by orders-2 before it died, and again by orders-1
        "second-2": 1, "second-3": 1,
    }
    assert store.totals() == totals_of(first + second)  # none lost, the twice-processed counted once


def test_a_consumer_stuck_past_max_poll_interval_leaves_and_rejoins(grouplab_cluster: Cluster, start_app: Start,
                                                                    store: TotalsStore) -> None:
    cluster = grouplab_cluster
    start_app("orders-1")
    slow = start_app("orders-2", max_poll_interval_ms=2000)
    group = cluster.wait_stable(GROUP, members=2, timeout=30)
    assert group.partitions_of("orders-2") == [P1]

    slow.misbehaviour.stall_next_batch()
    stuck = make_orders("stuck", 3)
    produce(cluster, P1, stuck)
    cluster.wait_for(slow.misbehaviour.stalled.is_set, timeout=30, what="orders-2 stuck in its batch")

    # No poll() for max.poll.interval.ms: kafka-python's heartbeat thread sends a LeaveGroup.
    alone = cluster.wait_stable(GROUP, members=1, timeout=30, after_generation=group.generation)
    assert alone.clients == {"orders-1": [P0, P1]}
    left = cluster.rebalances(GROUP)[-1]
    assert left.cause == "member_left" and left.removed_clients == [("orders-2", "left")]
    wait_all_committed(cluster)  # orders-1 took the stuck batch over from the last commit
    assert store.processed_by("orders-1") == [o.order_id for o in stuck]

    slow.misbehaviour.release()
    back = cluster.wait_stable(GROUP, members=2, timeout=30, after_generation=alone.generation)
    assert back.clients == {"orders-1": [P0], "orders-2": [P1]}
    # orders-2 finished its batch after it had left: the commit was refused, the work done twice.
    assert store.processed_by("orders-2") == [o.order_id for o in stuck]
    assert slow.commit_failures and "CommitFailedError" in slow.commit_failures[0]
    assert store.totals() == totals_of(stuck)
    wait_all_committed(cluster)


def test_a_coordinator_restart_keeps_the_group_and_its_offsets(grouplab_cluster: Cluster, start_app: Start,
                                                               store: TotalsStore) -> None:
    cluster = grouplab_cluster
    start_app("orders-1")
    start_app("orders-2")
    group = cluster.wait_stable(GROUP, members=2, timeout=30)
    before = make_orders("before", 4)
    produce(cluster, P0, before[:2])
    produce(cluster, P1, before[2:])
    wait_all_committed(cluster)
    committed = cluster.committed(GROUP)
    rebalances = len(cluster.rebalances(GROUP))

    cluster.restart_coordinator()  # same port, same data directory: the connections are closed
    assert cluster.committed(GROUP) == committed == {P0: 2, P1: 2}
    assert [e["generation_id"] for e in cluster.events(GROUP, event="group_loaded")] == [group.generation]

    after = make_orders("after", 4)
    produce(cluster, P0, after[:2])
    produce(cluster, P1, after[2:])
    wait_all_committed(cluster)  # the consumers reconnected, fetched and committed
    now = cluster.group(GROUP)
    # Their heartbeats carry on in the loaded generation: same members, no rebalance.
    assert now.generation == group.generation and now.assignments == group.assignments
    assert len(cluster.rebalances(GROUP)) == rebalances
    assert set(store.times_processed().values()) == {1}  # nothing lost, nothing twice
    assert store.totals() == totals_of(before + after)


def test_a_lost_sync_group_is_sent_again_after_the_request_timeout(grouplab_cluster: Cluster, start_app: Start,
                                                                   store: TotalsStore) -> None:
    cluster = grouplab_cluster
    rule = cluster.add_fault("SyncGroup:drop:link=orders-1:limit=1")
    start_app("orders-1", request_timeout_ms=2000)
    group = cluster.wait_stable(GROUP, members=1, timeout=30)
    assert rule.fired == 1 and group.generation == 1
    # The first JoinGroup gets a member id (MEMBER_ID_REQUIRED), the second generation 1; the
    # SyncGroup after it is dropped. When it times out kafka-python joins again with its member
    # id, and the coordinator, still waiting for that SyncGroup, answers with generation 1 again.
    assert cluster.requests("orders-1", apis=("JoinGroup", "SyncGroup")) == [
        "JoinGroup", "JoinGroup", "JoinGroup", "SyncGroup"]
    orders = make_orders("o", 3)
    produce(cluster, P0, orders)
    wait_all_committed(cluster)
    assert store.totals() == totals_of(orders)


def test_a_static_member_restarts_without_a_rebalance(grouplab_cluster: Cluster, start_app: Start,
                                                      store: TotalsStore) -> None:
    cluster = grouplab_cluster
    static = dict(session_timeout_ms=10000)  # the time a static member has to come back
    start_app("orders-1", group_instance_id="orders-a", **static)
    first = cluster.wait_stable(GROUP, members=1, timeout=30)
    b = start_app("orders-2", group_instance_id="orders-b", **static)
    group = cluster.wait_stable(GROUP, members=2, timeout=30, after_generation=first.generation)
    before = group.member("orders-2")
    assert list(before.partitions) == [P1]
    produce(cluster, P1, make_orders("before", 2))
    wait_all_committed(cluster)
    rebalances = len(cluster.rebalances(GROUP))

    b.stop()  # a static member's close sends no LeaveGroup: it stays in the group
    assert cluster.group(GROUP).member("orders-2") == before
    again = start_app("orders-2", group_instance_id="orders-b", **static)
    cluster.wait_for(lambda: again.assigned == [P1], timeout=30, what="orders-2 back with its partition")
    now = cluster.group(GROUP)
    assert now.generation == group.generation and len(cluster.rebalances(GROUP)) == rebalances
    assert now.partitions_of("orders-2") == [P1]
    assert now.member("orders-2").member_id != before.member_id  # a new member id took the old one's place
    assert [e["group_instance_id"] for e in cluster.events(GROUP, event="static_member_replaced")] == ["orders-b"]
    assert "LeaveGroup" not in {line.get("api") for line in cluster.trace()}

    after = make_orders("after", 2)
    produce(cluster, P1, after)
    wait_all_committed(cluster)
    assert store.processed_by("orders-2") == ["before-0", "before-1", "after-0", "after-1"]  # from its commit on
