"""LocalCluster's operations for the dashboard's buttons, over real loopback sockets: crash, hang,
slow down, resume, partition from the coordinator, add a member, add partitions, restart the
coordinator, switch a member's assignor; and the trace listeners (grouplab/cluster.py)."""

from __future__ import annotations

from typing import Any

import pytest

from grouplab.coordinator.config import BrokerConfig
from grouplab.cluster import ClusterError, LocalCluster

from conftest import EventRecorder

pytestmark = pytest.mark.e2e

BROKER = BrokerConfig().with_overrides(["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100"])
CONSUMER = ["session.timeout.ms=1500", "heartbeat.interval.ms=100", "retry.backoff.ms=20", "request.timeout.ms=1000"]
WAIT_S = 30.0


async def cluster_of(recorder: EventRecorder, cleanup: Any, members: int = 2, **kw: Any) -> LocalCluster:
    cluster = LocalCluster({"t0": 2, "t1": 2}, "g", broker_config=BROKER, consumer_overrides=CONSUMER,
                           listeners=[recorder.record], **kw)
    cleanup.push_async_callback(cluster.close)
    await cluster.start()
    for _ in range(members):
        await cluster.add_consumer()
    await cluster.wait_stable(WAIT_S)
    return cluster


def run_notes(recorder: EventRecorder, name: str) -> list[dict[str, Any]]:
    return [ev.fields for ev in recorder.events(name, node="run")]


async def test_trace_listeners_see_every_line_without_a_run_dir(recorder: EventRecorder, cleanup: Any) -> None:
    lines: list[dict[str, Any]] = []
    await cluster_of(recorder, cleanup, members=1, trace_listeners=[lines.append])
    assert lines[0]["kind"] == "start"
    assert any(line["kind"] == "request" and line["api"] == "JoinGroup" for line in lines)
    assert any(line["kind"] == "response" and line["api"] == "SyncGroup" for line in lines)


async def test_crash_is_noticed_at_the_session_timeout(recorder: EventRecorder, cleanup: Any) -> None:
    cluster = await cluster_of(recorder, cleanup)
    victim = cluster.apps[0]
    member_id = victim.client.member_id
    await cluster.crash_consumer("consumer-1")
    assert run_notes(recorder, "member_crashed") == [
        {"client_id": "consumer-1", "member_id": member_id, "session_timeout_ms": 1500}]
    await recorder.wait_until(lambda: bool(recorder.events("member_removed", member_id=member_id,
                                                           reason="session_timeout")), WAIT_S, "the removal")
    await cluster.wait_stable(WAIT_S)
    assert [a.client.config.client_id for a in cluster.apps] == ["consumer-2"]
    with pytest.raises(ClusterError, match="no running member 'consumer-1'"):
        await cluster.crash_consumer("consumer-1")


async def test_hang_and_resume_and_refusals(recorder: EventRecorder, cleanup: Any) -> None:
    cluster = await cluster_of(recorder, cleanup)
    cluster.hang_consumer("consumer-2")
    with pytest.raises(ClusterError, match="already hung"):
        cluster.slow_consumer("consumer-2")
    await recorder.wait_until(lambda: bool(recorder.events("member_removed", reason="session_timeout")), WAIT_S,
                              "the hung member's removal")
    cluster.resume_consumer("consumer-2")
    # Woken, it finds itself removed and joins again as a new member.
    await cluster.wait_stable(WAIT_S)
    assert [n["fault"] for n in run_notes(recorder, "member_fault")] == ["hang"]
    assert run_notes(recorder, "member_fault_over") == [{"client_id": "consumer-2", "fault": "hang", "how": "resumed"}]
    with pytest.raises(ClusterError, match="running normally"):
        cluster.resume_consumer("consumer-2")
    with pytest.raises(ClusterError, match="no fault proxy"):
        cluster.partition_consumer("consumer-1", 1)


async def test_slow_member_keeps_heartbeating_until_resumed(recorder: EventRecorder, cleanup: Any) -> None:
    cluster = await cluster_of(recorder, cleanup)
    cluster.slow_consumer("consumer-1")
    note = run_notes(recorder, "member_fault")[0]
    assert note["fault"] == "slow" and note["max_poll_interval_ms"] == 300000
    cluster.resume_consumer("consumer-1")
    assert not cluster.member_faults


async def test_partition_from_the_coordinator_heals_by_itself(recorder: EventRecorder, cleanup: Any) -> None:
    cluster = await cluster_of(recorder, cleanup, proxy=True)
    assert cluster.proxy is not None and not cluster.proxy.rules
    with pytest.raises(ClusterError, match="from more than 0 to 3600"):
        cluster.partition_consumer("consumer-1", 0)
    cluster.partition_consumer("consumer-1", 2.5)
    assert cluster.proxy.is_partitioned("consumer-1")
    await recorder.wait_until(lambda: bool(recorder.events("member_removed", reason="session_timeout")), WAIT_S,
                              "the cut-off member's removal")
    await recorder.wait_until(lambda: bool(run_notes(recorder, "member_fault_over")), WAIT_S, "the heal")
    assert not cluster.proxy.is_partitioned("consumer-1")
    await cluster.wait_stable(WAIT_S)


async def test_add_member_and_partitions(recorder: EventRecorder, cleanup: Any) -> None:
    cluster = await cluster_of(recorder, cleanup, members=1)
    await cluster.add_member()
    await cluster.add_partitions("t0", 4)
    assert cluster.topics["t0"] == 4
    await cluster.wait_stable(WAIT_S)  # every partition owned: the new ones included
    assert sorted(tp for a in cluster.apps for tp in a.client.assignment if tp.topic == "t0")[-1].partition == 3
    with pytest.raises(ClusterError, match="give a larger total"):
        await cluster.add_partitions("t0", 4)
    with pytest.raises(ClusterError, match="unknown topic 'nope'"):
        await cluster.add_partitions("nope", 9)
    assert [n["topic"] for n in run_notes(recorder, "partitions_added")] == ["t0"]


async def test_restart_coordinator_in_memory_then_members_rejoin(recorder: EventRecorder, cleanup: Any) -> None:
    cluster = await cluster_of(recorder, cleanup, proxy=True)
    port = cluster.port
    await cluster.restart_coordinator()
    assert cluster.port == port and len(recorder.events("coordinator_started")) == 2
    assert cluster.server is not None and cluster.server.broker.topics.partitions == {"t0": 2, "t1": 2}
    await cluster.wait_stable(WAIT_S)
    assert run_notes(recorder, "coordinator_restart") == [{"durable": False}]


async def test_switch_assignor_restarts_the_member_under_its_name(recorder: EventRecorder, cleanup: Any) -> None:
    cluster = await cluster_of(recorder, cleanup)
    with pytest.raises(ClusterError, match="unknown assignor"):
        await cluster.switch_assignor("consumer-2", ["nope"])
    await cluster.switch_assignor("consumer-2", ["roundrobin", "range"])
    app = cluster.app("consumer-2")
    assert app.client.config.assignors == ["roundrobin", "range"]
    await cluster.wait_stable(WAIT_S)  # range is the one protocol both support
    group = cluster.group_state()
    assert group.protocol_name == "range"


async def test_a_restarted_coordinators_trace_is_refused_by_replay(recorder: EventRecorder, cleanup: Any,
                                                                    tmp_path: Any) -> None:
    from grouplab.replay import ReplayRefused, replay

    cluster = await cluster_of(recorder, cleanup, members=1, run_dir=tmp_path)
    await cluster.restart_coordinator()
    await cluster.wait_stable(WAIT_S)
    await cluster.close()
    with pytest.raises(ReplayRefused, match="a second `start` line"):
        replay(tmp_path)


async def test_a_cluster_of_brokers_has_a_fault_proxy_per_broker(recorder: EventRecorder, cleanup: Any) -> None:
    """`run --brokers 3 --faults ...` and the dashboard's partition button on a cluster: each broker
    has its own proxy, whose answers name the other brokers' proxies, so every connection a member
    opens (to its coordinator, after a move too) goes through one; a rule counts across them."""
    cluster = await cluster_of(recorder, cleanup, brokers=3, faults=["Heartbeat:delay:5"])
    proxies = cluster.proxy
    assert proxies is not None and len(getattr(proxies, "proxies", {})) == 3
    assert cluster.bootstrap == [(cluster.host, p.port) for p in proxies.proxies.values()]
    old = cluster.coordinator_of_group()
    await cluster.kill_broker(old)
    await recorder.wait_until(lambda: cluster.coordinator_of_group() != old and cluster.is_stable(), WAIT_S,
                              "the group Stable at its new coordinator")
    new = cluster.coordinator_of_group()
    # The members reached the new coordinator through its proxy: its address came from the answers.
    assert proxies.proxies[new].forwarded[("Heartbeat", "request")] > 0
    (rule,) = list(proxies.rules)
    assert (rule.spec(), rule.fired > 0) == ("Heartbeat:delay:5", True)
    cluster.partition_consumer("consumer-1", 2.5)
    assert proxies.is_partitioned("consumer-1")
    await recorder.wait_until(lambda: bool(run_notes(recorder, "member_fault_over")), WAIT_S, "the heal")
    await cluster.wait_stable(WAIT_S)
