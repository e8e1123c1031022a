"""The dashboard's endpoints on a real LocalCluster (httpx over ASGI, in the test's own loop), its
event stream and server over a real socket, and `grouplab ui` / `run --ui` as a user starts them
(grouplab/ui/web.py, grouplab/ui/controls.py, grouplab/cli.py; docs/ui.md §3, §5)."""

from __future__ import annotations

import asyncio
import errno
import os
import re
import signal
import socket
import subprocess
import sys
import time
from typing import Any, AsyncIterator

import httpx
import pytest

from grouplab.coordinator.config import BrokerConfig
from grouplab.cluster import LocalCluster
from grouplab.ui.controls import Controls, cluster_info
from grouplab.ui.hub import Hub
from grouplab.ui.web import STATIC, UiServer, create_app

pytestmark = pytest.mark.e2e

BROKER = BrokerConfig().with_overrides(["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100"])
CONSUMER = ["session.timeout.ms=2000", "heartbeat.interval.ms=100", "retry.backoff.ms=20", "request.timeout.ms=1000"]
WAIT_S = 30.0


@pytest.fixture
async def live(cleanup: Any) -> AsyncIterator[tuple[LocalCluster, Hub, httpx.AsyncClient]]:
    hub = Hub("g")
    cluster = LocalCluster({"t0": 2, "t1": 2}, "g", broker_config=BROKER, consumer_overrides=CONSUMER,
                           listeners=[hub.on_event], trace_listeners=[hub.on_trace], proxy=True)
    hub.extras = lambda: cluster_info(cluster)
    cleanup.push_async_callback(cluster.close)
    await cluster.start()
    for _ in range(2):
        await cluster.add_consumer()
    await cluster.wait_stable(WAIT_S)
    transport = httpx.ASGITransport(app=create_app(hub, Controls(cluster)))
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        yield cluster, hub, client


async def test_the_page_and_its_files_fetch_nothing_from_elsewhere(live: Any) -> None:
    _, _, client = live
    page = await client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert '<script src="/static/app.js">' in page.text
    for name in ("app.js", "style.css"):
        resp = await client.get(f"/static/{name}")
        assert resp.status_code == 200
    for path in STATIC.iterdir():
        assert not re.search(r"(https?:)?//[a-z]", path.read_text()), f"{path.name} refers to another host"


async def test_state_shows_the_live_group(live: Any) -> None:
    _, _, client = live
    state = (await client.get("/api/state")).json()
    assert state["state"] == "Stable" and state["generation"] >= 1
    assert sorted(m["client_id"] for m in state["members"]) == ["consumer-1", "consumer-2"]
    assert {p["state"] for p in state["partitions"]} == {"consumed"}
    assert [a["client_id"] for a in state["cluster"]["apps"]] == ["consumer-1", "consumer-2"]
    assert state["cluster"]["proxy"] is True and len(state["cluster"]["offsets"]) == 4


async def test_kill_then_the_members_partitions_are_not_consumed(live: Any, recorder: Any) -> None:
    cluster, hub, client = live
    resp = await client.post("/api/members/consumer-1/kill")
    assert resp.status_code == 200 and resp.json()["ok"] and "session timeout" in resp.json()["message"]
    state = (await client.get("/api/state")).json()
    killed = next(m for m in state["members"] if m["client_id"] == "consumer-1")
    assert killed["fault"] == "crash" and killed["removal"]["by"] == "session.timeout.ms"
    assert {p["state"] for p in state["partitions"] if p["client"] == "consumer-1"} == {"not_consumed"}
    again = await client.post("/api/members/consumer-1/kill")
    assert again.status_code == 400 and again.json() == {
        "ok": False, "message": "no running member 'consumer-1' (running: consumer-2)"}
    await cluster.wait_stable(WAIT_S)  # the session timeout, then the rebalance


@pytest.mark.parametrize("path, body, message", [
    ("/api/members/nope/hang", None, "no running member 'nope'"),
    ("/api/members/consumer-2/frob", None, "unknown member action 'frob'"),
    ("/api/members/consumer-2/partition", {"seconds": "soon"}, "'seconds' must be a number"),
    ("/api/members/consumer-2/partition", {"seconds": -1}, "from more than 0 to 3600 seconds"),
    ("/api/members/consumer-2/assignor", {"assignors": "nope"}, "unknown assignor 'nope'"),
    ("/api/members/consumer-2/assignor", {}, "missing 'assignors'"),
    ("/api/members", {"assignors": "nope"}, "unknown assignor 'nope'"),
    ("/api/topics/t0/partitions", {"partitions": 1}, "give a larger total"),
    ("/api/topics/t0/partitions", {"partitions": 2.5}, "a whole number"),
    ("/api/topics/nope/partitions", {"partitions": 9}, "unknown topic 'nope'"),
    ("/api/members/consumer-2/resume", None, "running normally"),
])
async def test_bad_requests_get_400_and_one_line(live: Any, path: str, body: Any, message: str) -> None:
    _, _, client = live
    resp = await client.post(path, json=body) if body is not None else await client.post(path)
    assert resp.status_code == 400, resp.text
    answer = resp.json()
    assert answer["ok"] is False and message in answer["message"] and "\n" not in answer["message"]


async def test_a_body_that_is_not_a_json_object_is_refused(live: Any) -> None:
    _, _, client = live
    for content in (b"{not json", b"[1, 2]"):
        resp = await client.post("/api/members/consumer-2/hang", content=content)
        assert resp.status_code == 400 and "JSON" in resp.json()["message"]


async def test_every_button_does_what_it_says(live: Any) -> None:
    cluster, hub, client = live

    async def ok(path: str, body: Any = None) -> str:
        resp = await client.post(path, json=body or {})
        assert resp.status_code == 200, resp.text
        return str(resp.json()["message"])

    assert "hangs" in await ok("/api/members/consumer-2/hang")
    assert cluster.member_faults["consumer-2"].kind == "hang"
    await ok("/api/members/consumer-2/resume")
    assert "stopped polling" in await ok("/api/members/consumer-2/slow")
    await ok("/api/members/consumer-2/resume")
    assert "for 5 s" in await ok("/api/members/consumer-2/partition", {"seconds": 5})
    await ok("/api/members/consumer-2/resume")
    assert await ok("/api/members", {"assignors": "range"}) == "added consumer-3"
    assert "now has 3 partitions" in await ok("/api/topics/t1/partitions", {"partitions": 3})
    assert "roundrobin,range" in await ok("/api/members/consumer-1/assignor", {"assignors": "roundrobin,range"})
    await cluster.wait_stable(WAIT_S)
    assert "without a data directory" in await ok("/api/coordinator/restart")
    await cluster.wait_stable(WAIT_S)
    state = (await client.get("/api/state")).json()
    assert state["topics"]["t1"] == 3 and len(state["members"]) == 3
    kinds = [f["kind"] for f in state["faults"]]
    assert kinds == ["hang", "slow", "partition"] and all(f["ended_ms"] for f in state["faults"])


async def test_a_zh_dashboard_answers_in_chinese(live: Any) -> None:
    """`--lang zh`: the page comes with its Chinese words, and the buttons' answers and refusals
    (the cluster's own included) are Chinese; en's stay as the tests above read them."""
    from tests.test_zh_output import untranslated

    cluster, _, _ = live
    app = create_app(Hub("g", lang="zh"), Controls(cluster, "zh"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dashboard") as client:
        page = (await client.get("/")).text
        assert '<html lang="zh">' in page and '"ui.page.btn.add_member": "添加成员"' in page
        texts = (await client.get("/api/texts")).json()
        assert texts["lang"] == "zh" and texts["texts"]["ui.page.btn.kill"] == "杀掉"
        said = []
        for path, body, status in [("/api/members/consumer-2/hang", None, 200), ("/api/members/consumer-2/hang", None, 400),
                                   ("/api/members/consumer-2/resume", None, 200), ("/api/members/nope/kill", None, 400),
                                   ("/api/members/consumer-2/partition", {"seconds": "soon"}, 400),
                                   ("/api/topics/t0/partitions", {"partitions": 1}, 400),
                                   ("/api/members", b"[1]", 400)]:
            resp = await (client.post(path, content=body) if isinstance(body, bytes) else client.post(path, json=body))
            assert resp.status_code == status, (path, resp.text)
            said.append(resp.json()["message"])
    assert said[0].startswith("consumer-2 卡住了") and said[3].startswith("没有正在运行的成员 'nope'"), said
    assert [m for m in said if untranslated(m)] == []


async def test_a_timeline_entry_gives_its_raw_request_and_answer(live: Any) -> None:
    _, hub, client = live
    join = next(e for e in hub.timeline.entries if e.get("api") == "JoinGroup" and e["kind"] == "request")
    raw = (await client.get(f"/api/messages/{join['id']}")).json()
    assert raw["request"]["api"] == "JoinGroup" and raw["response"]["kind"] == "response"
    assert (await client.get("/api/messages/999999999")).status_code == 404
    assert (await client.get("/api/messages/x")).status_code == 400


async def test_a_defect_is_a_500_with_one_line(live: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, client = live

    async def broken(*args: Any) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(Controls, "member", broken)
    resp = await client.post("/api/members/consumer-1/kill")
    assert resp.status_code == 500 and resp.json() == {"ok": False, "message": "internal error: RuntimeError('boom')"}


async def test_the_stream_over_a_real_socket_and_a_busy_port(live: Any) -> None:
    _, hub, _ = live
    server = await UiServer(hub, None, port=0).start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            async with client.stream("GET", "/api/stream") as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                names: list[str] = []
                async for line in stream.aiter_lines():
                    if line.startswith("event: "):
                        names.append(line[7:])
                    if names.count("state") == 2:
                        break
                assert names[:2] == ["state", "timeline"]
            refused = await client.post("/api/coordinator/restart")
            assert refused.status_code == 400 and "no cluster" in refused.json()["message"]
        with pytest.raises(OSError) as busy:
            await UiServer(hub, None, port=server.port).start()
        assert busy.value.errno == errno.EADDRINUSE
    finally:
        await server.stop()


# ----------------------------------------------------------------------------- the commands


def grouplab(*args: str) -> list[str]:
    return [sys.executable, "-m", "grouplab.cli", *args]


FAST = ["--config", "group.initial.rebalance.delay.ms=0", "--consumer-config", "heartbeat.interval.ms=100",
        "--consumer-config", "session.timeout.ms=6000"]


def test_ui_prints_its_url_serves_it_and_exits_130_on_ctrl_c() -> None:
    proc = subprocess.Popen(grouplab("ui", "--ui-port", "0", "--consumers", "2", *FAST), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"})
    try:
        assert proc.stdout is not None
        seen, url = [], None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            if match := re.search(r"dashboard on (http://127\.0\.0\.1:(\d+)/)", line):
                url = match.group(1)
                assert match.group(2) != "0"
            if "running until Ctrl-C" in line:
                break
        assert url is not None, "".join(seen)
        state = httpx.get(url + "api/state", timeout=10).json()
        assert state["group_id"] == "grouplab" and state["coordinator_up"]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err


def test_ui_on_a_busy_port_is_one_line_and_exit_1() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = subprocess.run(grouplab("ui", "--ui-port", str(port), "--consumers", "0"), capture_output=True,
                              text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"grouplab ui: cannot serve the dashboard on 127.0.0.1:{port}: the port is already in use; "
                     "pick another --ui-port (0: any free port)"]


def test_run_ui_options_need_ui() -> None:
    proc = subprocess.run(grouplab("run", "--ui-port", "0"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--ui-port and --open only apply with --ui" in proc.stderr
    for command in ("ui", "run"):  # --lang is the whole output's language, with or without --ui
        proc = subprocess.run(grouplab(command, "--lang", "fr"), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "--lang 'fr': choose one of en, zh" in proc.stderr, proc.stderr


def test_run_with_ui_serves_the_dashboard_while_its_script_goes_on() -> None:
    proc = subprocess.run(grouplab("run", "--ui", "--ui-port", "0", "--consumers", "2", "--hold", "0.2",
                                   "--timeout", "30", *FAST),
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"dashboard on http://127\.0\.0\.1:\d+/", proc.stdout)
    assert "adding a consumer" in proc.stdout and "3 consumers ran" in proc.stdout


@pytest.mark.parametrize("lang, stable, why", [
    ("en", "the group is Stable in generation", "Only the leader gets the members' subscriptions"),
    ("zh", "组在第", "只有 leader 会收到所有成员的订阅信息"),
])
async def test_the_timeline_is_told_by_explains_narrator(cleanup: Any, lang: str, stable: str, why: str) -> None:
    holder: dict[str, LocalCluster] = {}
    hub = Hub("g", lang=lang, broker=lambda: holder["c"].server.broker if holder["c"].server else None)
    cluster = holder["c"] = LocalCluster({"t0": 2}, "g", broker_config=BROKER, consumer_overrides=CONSUMER,
                                         listeners=[hub.on_event], trace_listeners=[hub.on_trace])
    cleanup.push_async_callback(cluster.close)
    await cluster.start()
    for _ in range(2):
        await cluster.add_consumer()
    await cluster.wait_stable(WAIT_S)
    await asyncio.sleep(0.05)  # the last step is told when the loop turns
    texts = [e["text"] for e in hub.timeline.entries]
    whys = [e["why"] for e in hub.timeline.entries if e.get("why")]
    assert any("JoinGroup" in t for t in texts) and any(stable in t for t in texts), texts
    assert any(why in w for w in whys), whys
    assert len(whys) == len(set(whys))  # each rule's why once, where the run first shows it
    join = next(e for e in hub.timeline.entries if e["api"] == "JoinGroup" and e["kind"] == "request")
    raw = hub.timeline.raw(join["id"])
    assert raw is not None and raw["request"]["api"] == "JoinGroup" and raw["response"] is not None
