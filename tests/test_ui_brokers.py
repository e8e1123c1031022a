"""The dashboard's brokers panel (grouplab/ui/brokers.py, the model's `brokers`; docs/ui.md): a pure
fold of the trace's start line and the cluster's events, checked step by step over the scripted
failover run (who is live, who coordinates the group and whether it loads, who leads each
partition of the grid); nothing with one broker; and the kill / restart routes, over a real
three-broker server, moving the coordinator as the panel then shows."""

from __future__ import annotations

import types
from pathlib import Path

import httpx
import pytest

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.runlog import read_run
from grouplab.teach.failover_run import T0, write_failover_run
from grouplab.tracefile import read_trace, trace_path
from grouplab.ui.controls import Controls
from grouplab.ui.hub import Hub
from grouplab.ui.model import DashboardModel
from grouplab.ui.web import create_app


def test_the_panel_follows_the_failover_run_step_by_step(tmp_path: Path) -> None:
    run = write_failover_run(tmp_path)
    model = DashboardModel("orders")
    start = next(iter(read_trace(trace_path(run))))
    model.trace(start)
    model.event("coordinator", "topic_created", T0, {"topic": "t", "partition_count": 3, "auto": False})
    seen: dict[int, dict] = {}
    checkpoints = [9_000, 10_500, 11_500, 17_500, 27_500, 28_500]
    pending = list(checkpoints)
    for node, ev in read_run(run).events:
        while pending and ev.ts_ms - T0 > pending[0]:
            at = pending.pop(0)
            seen[at] = model.snapshot(T0 + at)["brokers"]
        model.feed(node, ev)
    for at in pending:
        seen[at] = model.snapshot(T0 + at)["brokers"]

    def brief(b: dict) -> tuple:
        return ([n["id"] for n in b["nodes"] if n["live"]], b["coordinator"], b["loading"],
                [leader for _, _, leader in b["leaders"]])

    assert seen[9_000]["offsets_partition"] == 31
    assert brief(seen[9_000]) == ([0, 1, 2], 1, False, [0, 1, 2])
    assert brief(seen[10_500]) == ([0, 2], 2, True, [0, 2, 2])  # broker 1 killed: t-1 to 2, orders loading at 2
    assert brief(seen[11_500]) == ([0, 2], 2, False, [0, 2, 2])
    assert brief(seen[17_500]) == ([0, 1, 2], 2, False, [0, 2, 2])  # back, leading nothing yet
    assert brief(seen[27_500]) == ([0, 1, 2], 1, True, [0, 1, 2])  # the election gives it back
    assert brief(seen[28_500]) == ([0, 1, 2], 1, False, [0, 1, 2])
    assert [n["leads"] for n in seen[10_500]["nodes"]] == [1, 0, 2]
    assert [n["coordinator"] for n in seen[28_500]["nodes"]] == [False, True, False]


def test_one_broker_shows_no_panel() -> None:
    model = DashboardModel("g")
    model.trace({"ts_ms": 0, "kind": "start", "config": {}})
    assert model.snapshot(0)["brokers"] is None


async def test_kill_and_restart_a_broker_from_the_page() -> None:
    server = CoordinatorServer(BrokerConfig().with_overrides(["grouplab.coordinator.load.time.ms=100"]), "127.0.0.1",
                               0, brokers=3)
    await server.start()
    try:
        cluster = types.SimpleNamespace(server=server, group_id="orders")
        app = create_app(Hub("orders"), Controls(cluster))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dashboard") as client:
            resp = await client.post("/api/brokers/1/kill")
            assert resp.status_code == 200, resp.text
            assert resp.json()["message"] == ("killed broker 1: its connections are cut; orders's coordinator is "
                                              "broker 2")
            assert server.live_brokers() == [0, 2] and server.coordinator_of("orders") == 2
            again = await client.post("/api/brokers/1/kill")
            assert again.status_code == 400 and again.json()["message"] == "broker 1 is already down"
            resp = await client.post("/api/brokers/1/restart")
            assert resp.status_code == 200 and "broker 1 is back" in resp.json()["message"]
            assert server.live_brokers() == [0, 1, 2]
            for path, message in (("/api/brokers/x/kill", "a broker is a node id"),
                                  ("/api/brokers/1/explode", "unknown broker action"),
                                  ("/api/brokers/7/kill", "7")):
                bad = await client.post(path)
                assert bad.status_code == 400 and message in bad.json()["message"], bad.text
    finally:
        await server.stop()


@pytest.mark.parametrize("action", ["kill", "restart"])
async def test_one_broker_refuses_broker_actions(action: str) -> None:
    server = CoordinatorServer(BrokerConfig(), "127.0.0.1", 0)
    await server.start()
    try:
        controls = Controls(types.SimpleNamespace(server=server, group_id="g"))  # type: ignore[arg-type]
        app = create_app(Hub("g"), controls)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dashboard") as client:
            resp = await client.post(f"/api/brokers/0/{action}")
        assert resp.status_code == 400 and "one broker" in resp.json()["message"]
    finally:
        await server.stop()
