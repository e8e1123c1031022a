"""grouplab.testing's Cluster and AsyncCluster (docs/testing.md) with real Kafka clients over
loopback: every observation (the group, committed offsets, lag, the rebalance history and its
costs, the event log and the trace, the failure report) and every fault (drop, delay, error,
hold, disconnect, isolate and heal, a coordinator restart), sync and async."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer

from grouplab.coordinator.config import ConfigError
from grouplab.faults.rules import FaultSpecError
from grouplab.protocol.types import TopicPartition
from grouplab.testing import AsyncCluster, Cluster, ClusterError, WaitTimeout
from tests.kafka_python_app import PollingConsumer

pytestmark = pytest.mark.e2e

FAST_GROUP = {"group.min.session.timeout.ms": 1000}


def orders(n: int = 3) -> list[TopicPartition]:
    return [TopicPartition("orders", p) for p in range(n)]


@pytest.fixture
def cluster(tmp_path: Path):
    with Cluster(config=FAST_GROUP, topics={"orders": 3}, run_dir=tmp_path / "run") as c:
        yield c


@pytest.fixture
def consumers(cluster: Cluster):
    made: list[PollingConsumer] = []

    def start(client_id: str, **config) -> PollingConsumer:
        made.append(PollingConsumer(cluster.bootstrap, ["orders"], "app", client_id, **config))
        return made[-1]

    yield start
    for c in made:
        c.stop(leave=False)
        c.consumer.close(autocommit=False)


# ----------------------------------------------------------------------------- starting and stopping


def test_a_cluster_starts_on_free_ports_and_stops_cleanly(tmp_path: Path) -> None:
    threads = threading.active_count()
    with Cluster(topics={"a": 2}) as one, Cluster() as two:
        assert one.bootstrap.startswith("127.0.0.1:") and one.bootstrap != two.bootstrap
        assert one.topics() == {"a": 2} and two.topics() == {}
        run_dir = one.run_dir
        assert run_dir is not None and (run_dir / "coordinator.jsonl").exists()
    assert threading.active_count() == threads  # both loop threads joined
    assert not run_dir.exists()  # its own temporary run directory is removed; a given one is kept
    with Cluster(run_dir=tmp_path / "kept"):
        pass
    assert (tmp_path / "kept" / "trace" / "coordinator.jsonl").exists()


def test_bad_settings_fail_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match="unknown config 'group.max.sise'"):
        Cluster(config={"group.max.sise": 3})
    with pytest.raises(FaultSpecError):
        Cluster(faults=["SyncGroup:explode"])
    with pytest.raises(ClusterError, match="not started"):
        Cluster().group("g")
    with Cluster(topics={"t": 2}) as c:
        with pytest.raises(ClusterError, match="exists with 2 partitions, not 3"):
            c.create_topic("t", partitions=3)
        with pytest.raises(ClusterError, match="CreatePartitions refused"):
            c.add_partitions("t", 1)
        assert c.topics() == {"t": 2}


def test_broker_settings_by_kafkas_names_and_the_test_defaults() -> None:
    with Cluster(config={"group.max.size": 2, "auto.create.topics.enable": False}) as c:
        config = c.cluster.broker_config
        assert config.group_max_size == 2 and config.auto_create_topics_enable is False
        assert config.group_initial_rebalance_delay_ms == 0  # a test broker's default
    with Cluster(config=["group.initial.rebalance.delay.ms=3000"]) as c:
        assert c.cluster.broker_config.group_initial_rebalance_delay_ms == 3000  # Kafka's, when asked


# ----------------------------------------------------------------------------- observation


def test_a_group_its_offsets_lag_and_rebalances_as_a_test_sees_them(cluster: Cluster, consumers) -> None:
    for p in range(3):
        cluster.produce("orders", [f"{p}-{i}" for i in range(p + 2)], partition=p)
    assert cluster.log_end_offsets("orders") == dict(zip(orders(), [2, 3, 4]))
    first = consumers("app-1")
    group = cluster.wait_stable("app", members=1, timeout=30)
    assert group.state == "Stable" and group.protocol == "range" and group.generation >= 1
    (member,) = group.members
    assert member.client_id == "app-1" and member.member_id.startswith("app-1-") and group.leader == member.member_id
    assert group.assignments == {member.member_id: orders()} and group.partitions_of("app-1") == orders()

    cluster.wait_for(lambda: len(first.records) == 9, timeout=30, what="all 9 records consumed")
    deadline = time.monotonic() + 30
    while cluster.committed("app") != dict(zip(orders(), [2, 3, 4])):
        assert time.monotonic() < deadline, cluster.committed("app")
        time.sleep(0.05)
    assert cluster.lag("app") == dict.fromkeys(orders(), 0)
    cluster.produce("orders", ["late"], partition=1)
    assert cluster.lag("app")[TopicPartition("orders", 1)] in (0, 1)  # 1 until the consumer commits it

    second = consumers("app-2")
    two = cluster.wait_stable("app", members=2, timeout=30, after_generation=group.generation)
    assert sorted(two.clients) == ["app-1", "app-2"]
    assert sorted(tp for ps in two.assignments.values() for tp in ps) == orders()
    history = cluster.rebalances("app")
    last = history[-1]
    assert last.generation == two.generation and last.cause == "member_joined" and "joined" in (last.trigger or "")
    assert last.duration_ms is not None and last.duration_ms >= 0 and last.partitions_moved >= 1
    assert {m.to_member for m in last.moved} <= set(two.assignments)
    assert second is not None

    # The event log and the trace, as the run directory has them.
    stable = cluster.events(group_id="app", event="group_stable")
    assert [e["generation_id"] for e in stable][-1] == two.generation and stable[-1]["node"] == "coordinator"
    assert any(line.get("api") == "JoinGroup" for line in cluster.trace())
    joined = cluster.requests("app-2", apis=["JoinGroup", "SyncGroup"])
    assert set(joined) == {"JoinGroup", "SyncGroup"} and "OffsetCommit" not in joined
    assert len(cluster.requests()) > len(cluster.requests("app-2"))  # app-1's and the admin's too
    run_dir = cluster.run_dir
    assert run_dir is not None and (run_dir / "app-1.jsonl").exists()  # what the real client held
    report = cluster.report("app")
    assert "group 'app': Stable" in report and "last rebalances:" in report and "app-2" in report
    assert cluster.groups() == ["app"]
    assert cluster.group("nobody").state == "Dead"


def test_a_removed_member_is_named_by_its_client_id(cluster: Cluster, consumers) -> None:
    """A rebalance's `clients` are its own generation's; the members it removed are named through
    `removed_clients` (and in the report), not by their member ids alone."""
    consumers("app-1")
    leaving = consumers("app-2")
    group = cluster.wait_stable("app", members=2, timeout=30)
    member_id = group.member("app-2").member_id
    leaving.stop(leave=True)
    cluster.wait_stable("app", members=1, timeout=30, after_generation=group.generation)
    last = cluster.rebalances("app")[-1]
    assert [r.member_id for r in last.removed] == [member_id] and member_id not in last.clients
    assert last.removed_clients == [("app-2", "left")] and last.client_of(member_id) == "app-2"
    assert "removed app-2 (left)" in cluster.report("app")


def test_a_wait_that_times_out_shows_the_group_and_its_history(cluster: Cluster, consumers) -> None:
    consumers("app-1")
    cluster.wait_stable("app", members=1, timeout=30)
    with pytest.raises(WaitTimeout) as failed:
        cluster.wait_stable("app", members=2, timeout=0.5)
    message = str(failed.value)
    assert message.startswith("group 'app' Stable with 2 members did not hold within 0.5 s")
    assert "group 'app': Stable, generation" in message and "(client app-1)" in message
    assert "last rebalances:\n  generation 1" in message
    assert "what the coordinator did, most recent last:" in message and "app-1" in message
    assert isinstance(failed.value, AssertionError)


# ----------------------------------------------------------------------------- faults


def test_an_error_rule_by_client_and_count_makes_that_client_rejoin(cluster: Cluster, consumers) -> None:
    """The leader (the first to join) told REBALANCE_IN_PROGRESS rejoins, and a leader's JoinGroup
    starts a rebalance (a follower rejoining unchanged would get its generation back)."""
    consumers("app-1")
    group = cluster.wait_stable("app", members=1, timeout=30)
    consumers("app-2")
    group = cluster.wait_stable("app", members=2, timeout=30, after_generation=group.generation)
    rule = cluster.error("Heartbeat", "REBALANCE_IN_PROGRESS", client_id="app-1", count=1)
    after = cluster.wait_stable("app", members=2, timeout=30, after_generation=group.generation)
    assert rule.fired == 1 and rule.spec() == "Heartbeat:error:27:link=app-1:limit=1"
    assert after.generation > group.generation and rule not in cluster.faults  # spent


def test_a_held_sync_group_keeps_the_group_completing_until_released(cluster: Cluster, consumers) -> None:
    rule = cluster.hold("SyncGroup", client_id="app-1")
    consumers("app-1")
    cluster.wait_for(lambda: cluster.held("SyncGroup") == 1, timeout=30, what="a SyncGroup held")
    assert cluster.group("app").state == "CompletingRebalance"
    cluster.remove_fault(rule)
    assert cluster.release("SyncGroup", client_id="app-1") == 1
    assert cluster.wait_stable("app", members=1, timeout=30).members[0].client_id == "app-1"


def test_a_dropped_sync_group_is_retried_after_the_clients_request_timeout(cluster: Cluster, consumers) -> None:
    rule = cluster.add_fault("SyncGroup:drop:link=app-1:limit=1")
    consumers("app-1", request_timeout_ms=2000)
    group = cluster.wait_stable("app", members=1, timeout=30)
    assert rule.fired == 1 and group.members[0].client_id == "app-1"


def test_a_delay_rule_and_a_rule_removed_while_clients_run(cluster: Cluster, consumers) -> None:
    rule = cluster.delay("JoinGroup", 200)
    consumers("app-1")
    cluster.wait_stable("app", members=1, timeout=30)
    assert rule.fired >= 1
    cluster.remove_fault(rule)
    fired = rule.fired
    consumers("app-2")
    cluster.wait_stable("app", members=2, timeout=30)
    assert rule.fired == fired and cluster.faults == []


def test_disconnect_now_and_a_disconnect_rule_leave_the_group_as_it_was(cluster: Cluster, consumers) -> None:
    app = consumers("app-1")
    # Not before the client has its partitions: kafka-python's leader joins again once the topic's
    # metadata arrives, and a connection reset in the middle of that join is another scenario.
    cluster.wait_for(lambda: app.assigned == [tuple(tp) for tp in orders()], timeout=30, what="app-1 assigned")
    group = cluster.wait_stable("app", members=1, timeout=30)
    assert cluster.disconnect("app-1") >= 1
    rule = cluster.add_fault("Heartbeat:disconnect:link=app-1:limit=1")
    cluster.wait_for(lambda: rule.fired == 1, timeout=30, what="a heartbeat answered by a disconnect")
    again = cluster.disconnect_on("Heartbeat", client_id="app-1", count=1)
    assert again.spec() == "Heartbeat:disconnect:link=app-1:limit=1"
    cluster.wait_for(lambda: again.fired == 1, timeout=30, what="another heartbeat answered by a disconnect")
    cluster.wait_for(lambda: len(cluster.events(node="proxy", event="link_opened")) >= 4, timeout=30,
                     what="the client reconnected")
    assert cluster.group("app").generation == group.generation  # reconnected within its session


def test_isolate_is_a_crash_to_the_group_and_heal_lets_it_back(cluster: Cluster, consumers) -> None:
    consumers("app-1")
    # 6 s, not less: on a machine loaded to 20 a 2 s session expired before the isolation did (its
    # heartbeat thread starved), and the cost the test reads was then another removal's.
    consumers("app-2", session_timeout_ms=6000)
    group = cluster.wait_stable("app", members=2, timeout=30)
    cluster.isolate("app-2")
    alone = cluster.wait_stable("app", members=1, timeout=30, after_generation=group.generation)
    assert [m.client_id for m in alone.members] == ["app-1"]
    last = cluster.rebalances("app")[-1]
    assert [r.reason for r in last.removed] == ["session_timeout"]
    assert last.assigned_not_consumed_ms > 0  # app-2's partitions, until its session timed out
    assert cluster.partition_time("app").assigned_not_consumed_ms >= last.assigned_not_consumed_ms
    assert "isolated: app-2" in cluster.report("app")
    cluster.heal("app-2")
    back = cluster.wait_stable("app", members=2, timeout=30, after_generation=alone.generation)
    assert sorted(back.clients) == ["app-1", "app-2"]


def test_a_coordinator_restart_keeps_groups_offsets_and_records(cluster: Cluster, consumers) -> None:
    cluster.produce("orders", ["a", "b"], partition=0)
    app = consumers("app-1")
    group = cluster.wait_stable("app", members=1, timeout=30)
    cluster.wait_for(lambda: len(app.records) == 2, timeout=30, what="2 records consumed")
    deadline = time.monotonic() + 30
    while cluster.committed("app").get(TopicPartition("orders", 0)) != 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    cluster.restart_coordinator()
    assert cluster.committed("app")[TopicPartition("orders", 0)] == 2
    assert cluster.log_end_offsets("orders")[TopicPartition("orders", 0)] == 2
    assert cluster.group("app").generation == group.generation  # loaded, not rebalanced
    cluster.produce("orders", ["c"], partition=0)
    cluster.wait_for(lambda: len(app.records) == 3, timeout=30, what="the record produced after the restart")
    assert [e["event"] for e in cluster.events(node="run")] == ["coordinator_restart"]


# ----------------------------------------------------------------------------- async


async def test_the_async_cluster_in_the_tests_own_loop_with_aiokafka(tmp_path: Path) -> None:
    async with AsyncCluster(config=FAST_GROUP, topics={"orders": 3}) as cluster:
        await cluster.produce("orders", ["x", "y"], partition=2)
        consumer = AIOKafkaConsumer("orders", bootstrap_servers=cluster.bootstrap, group_id="app", client_id="aio-1",
                                    auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10000,
                                    heartbeat_interval_ms=500, request_timeout_ms=5000)
        await consumer.start()
        try:
            batch = {}
            while sum(len(v) for v in batch.values()) < 2:
                for tp, recs in (await consumer.getmany(timeout_ms=200)).items():
                    batch.setdefault(tp, []).extend(recs)
            await consumer.commit()

            async def caught_up() -> bool:  # a wait may await what the cluster reads over its admin client
                return not any((await cluster.lag("app")).values())
            await cluster.wait_for(caught_up, timeout=30, what="the group's lag at 0")
            group = await cluster.wait_stable("app", members=1, timeout=30)
            assert group.partitions_of("aio-1") == orders()
            assert (await cluster.committed("app"))[TopicPartition("orders", 2)] == 2
            assert await cluster.lag("app") == dict.fromkeys(orders(), 0)
            rule = cluster.error("Heartbeat", 27, client_id="aio-1", count=1)
            again = await cluster.wait_stable("app", members=1, timeout=30, after_generation=group.generation)
            assert rule.fired == 1 and again.generation > group.generation
            with pytest.raises(WaitTimeout, match="group 'app' Stable with 3 members did not hold within 0.3 s"):
                await cluster.wait_stable("app", members=3, timeout=0.3)
            await cluster.produce("orders", ["z"], partition=0)  # nobody consumes it
            with pytest.raises(WaitTimeout, match="the group's lag at 0 did not hold within 0.3 s"):
                await cluster.wait_for(caught_up, timeout=0.3, what="the group's lag at 0")
            assert [r.generation for r in cluster.rebalances("app")][-1] == again.generation
        finally:
            await consumer.stop()
        await asyncio.sleep(0)


async def test_async_faults_hold_isolate_and_a_restart_with_aiokafka() -> None:
    async with AsyncCluster(config=FAST_GROUP, topics={"orders": 2}) as cluster:
        def consumer(client_id: str, session_timeout_ms: int = 10000) -> AIOKafkaConsumer:
            return AIOKafkaConsumer("orders", bootstrap_servers=cluster.bootstrap, group_id="app", client_id=client_id,
                                    session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=200,
                                    request_timeout_ms=5000, retry_backoff_ms=100)

        async def poll(c: AIOKafkaConsumer, stop: asyncio.Event) -> None:
            while not stop.is_set():
                await c.getmany(timeout_ms=100)

        stop = asyncio.Event()
        held = cluster.hold("SyncGroup", client_id="aio-1")
        one = consumer("aio-1")
        starting = asyncio.create_task(one.start())  # aiokafka's start() waits for its first assignment
        await cluster.wait_for(lambda: cluster.held("SyncGroup") == 1, timeout=30, what="aio-1's SyncGroup held")
        assert cluster.group("app").state == "CompletingRebalance" and not starting.done()
        cluster.remove_fault(held)
        assert cluster.release() == 1
        await asyncio.wait_for(starting, 30)
        polling = [asyncio.create_task(poll(one, stop))]
        first = await cluster.wait_stable("app", members=1, timeout=30)

        two = consumer("aio-2", session_timeout_ms=6000)  # isolated below: the group notices in 6 s (2 s was a margin)
        await two.start()
        polling.append(asyncio.create_task(poll(two, stop)))
        both = await cluster.wait_stable("app", members=2, timeout=30, after_generation=first.generation)
        cluster.isolate("aio-2")
        alone = await cluster.wait_stable("app", members=1, timeout=30, after_generation=both.generation)
        assert [m.client_id for m in alone.members] == ["aio-1"]
        assert [r.reason for r in cluster.rebalances("app")[-1].removed] == ["session_timeout"]
        cluster.heal("aio-2")
        back = await cluster.wait_stable("app", members=2, timeout=30, after_generation=alone.generation)

        await cluster.restart_coordinator()
        assert cluster.group("app").generation == back.generation  # loaded from the data directory
        await cluster.wait_for(lambda: len(cluster.events(node="coordinator", event="group_loaded")) == 1, timeout=30)
        stop.set()
        await asyncio.gather(*polling)
        await one.stop()
        await two.stop()
