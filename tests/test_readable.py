"""A readable coordinator and consumer (issue 12): `grouplab coordinator` on a terminal tells each
decision in words and shows each rebalance as a table, `--log-json` keeps the JSON lines; a
consumer says why it joins again. The views of seeded simulator runs are golden; the real commands
are run over loopback."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from grouplab.readable import ConsumerView, CoordinatorView
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import load_scenario
from grouplab.teach.catalog import Catalog
from grouplab.teach.reasons import OWN_REASONS, why_rejoin
from grouplab.protocol.effects import LogEvent
from tests.golden_files import GOLDEN, compare

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "NO_COLOR": "1", "TERM": "dumb"}


def views_of(scenario: str, seed: int, member: str, lang: str = "en") -> str:
    console = Console(width=140, record=True, color_system=None, force_terminal=False, file=open(os.devnull, "w"))
    coordinator, consumer = CoordinatorView(console, lang), ConsumerView(console, lang)

    def listen(node: str, ev: LogEvent) -> None:
        coordinator(node, ev)
        if node == member:
            consumer(node, ev)

    run_seed(load_scenario(ROOT / "grouplab" / "scenarios" / f"{scenario}.toml"), seed, listener=listen)
    return console.export_text()


@pytest.mark.parametrize("scenario, seed, member, lang", [
    ("crash-storm", 3, "m-1", "en"), ("static-members", 1, "m-0", "en"), ("clean-shutdown", 1, "m-2", "zh")])
def test_views_are_identical_to_golden(scenario: str, seed: int, member: str, lang: str) -> None:
    compare(views_of(scenario, seed, member, lang).encode(), GOLDEN / "readable" / f"{scenario}-{lang}.txt")


def test_a_crash_is_told_with_its_cost_and_the_table_follows() -> None:
    text = views_of("crash-storm", 3, "m-1")
    removed = re.search(r"(m-\d-\d+) removed — session_timeout", text)
    assert removed, text[:2000]
    assert f"The coordinator heard nothing from {removed.group(1)} for session.timeout.ms (10000 ms)" in text
    assert "that wait is the cost of a crash" in text
    assert text.count("that wait is the cost of a crash") == 1  # each rule once
    assert re.search(r"generation \d+ · protocol range · leader", text) and "┃ member" in text
    assert "rejoining: " in text and "why: " in text


def test_every_reason_the_member_machine_gives_has_words() -> None:
    """Each literal reason in consumer/coordinator.py (`_request_rejoin("...")`, `rejoin_reason =
    "..."`) is in OWN_REASONS; a reason `API: ERROR` is read through the error sentences."""
    tree = ast.parse((ROOT / "grouplab" / "consumer" / "coordinator.py").read_text())
    literals = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "_request_rejoin" \
                and isinstance(node.args[0], ast.Constant):
            literals.add(node.args[0].value)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "attr", getattr(t, "id", "")) == "rejoin_reason" for t in targets) \
                    and isinstance(node.value, ast.Constant):
                literals.add(node.value.value)
    assert literals and literals <= set(OWN_REASONS), literals - set(OWN_REASONS)
    c = Catalog("en")
    assert "heartbeat is how a member learns" in (why_rejoin("Heartbeat: REBALANCE_IN_PROGRESS", c) or "")
    assert "zombie" in (why_rejoin("Heartbeat: ILLEGAL_GENERATION", c) or "")
    assert why_rejoin("Heartbeat: SOMETHING_NEW", c) is None


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "grouplab.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)


def _port(proc: subprocess.Popen[str]) -> int:
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "listening on" in line:
            return int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])
    raise AssertionError("the coordinator did not say where it listens")


def _lines_until(proc: subprocess.Popen[str], words: str, deadline_s: float = 120) -> str:
    """Its stdout up to the first line with `words`; after `deadline_s` it is killed, which ends the
    read (a loaded machine is slow, never a reason to fail; a process that never says it, is)."""
    assert proc.stdout is not None
    watchdog = threading.Timer(deadline_s, proc.kill)
    watchdog.start()
    said: list[str] = []
    try:
        for line in proc.stdout:
            said.append(line)
            if words in line:
                break
    finally:
        watchdog.cancel()
    return "".join(said)


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130 and "Traceback" not in err, err
    return out, err


@pytest.mark.e2e
@pytest.mark.parametrize("log_json", [False, True])
def test_the_coordinator_command_speaks_to_a_person_or_in_json(log_json: bool) -> None:
    server = _start("coordinator", "--port", "0", "--kafka-port", "off", "--config", "group.initial.rebalance.delay.ms=0",
                    *(["--log-json"] if log_json else []))
    try:
        port = _port(server)
        consumer = _start("consumer", "--bootstrap-server", f"127.0.0.1:{port}", "--group", "g", "--topics", "t",
                          "--client-id", "reader")
        try:
            said = _lines_until(consumer, "owns t[0]")
        finally:
            c_out, _ = _stop(consumer)
        assert "owns t[0]" in said + c_out
    finally:
        _, err = _stop(server)
    if log_json:
        lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
        assert {"member_joined", "group_stable", "member_removed"} <= {line["event"] for line in lines}
        assert "joins (protocols" not in err
    else:
        assert "g: reader-" in err and "joins (protocols range)" in err
        assert "rebalance starts in generation 0" in err and "why: " in err
        assert "removed — left" in err and "┃ member" in err
        assert not any(line.startswith("{") for line in err.splitlines())


def consumer_group_story(lang: str) -> str:
    """The coordinator's view of a scripted consumer-protocol group (KIP-848): two members join,
    the first revokes what moves, a third is removed by its session timeout, one leaves."""
    from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
    from grouplab.coordinator.config import BrokerConfig
    from grouplab.protocol.effects import ArmTimer
    from grouplab.protocol.messages import ConsumerGroupHeartbeatRequest as Hb
    from grouplab.protocol.messages import ConsumerGroupHeartbeatTopicPartitions as Tps

    console = Console(width=160, record=True, color_system=None, force_terminal=False, file=open(os.devnull, "w"))
    view = CoordinatorView(console, lang)
    b = Broker(BrokerConfig(), SequentialMemberIds())
    b.topics.partitions["orders"] = 4
    timers: dict[tuple, int] = {}

    def step(out: list) -> object:
        answer = None
        for o in out:
            if isinstance(o, LogEvent):
                view("coordinator", o)
            elif isinstance(o, ArmTimer):
                timers[o.key] = o.deadline_ms
            elif hasattr(o, "body"):
                answer = o.body
        return answer

    def hb(client: str, req: Hb, now: int) -> object:
        return step(b.handle("ConsumerGroupHeartbeat", req, RequestContext(client, client_id=client), now))

    def owned(*ps: int) -> list[Tps]:
        return [Tps("orders", list(ps))]

    a = hb("app-a", Hb("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["orders"], topic_partitions=[]), 0)
    bb = hb("app-b", Hb("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["orders"], topic_partitions=[]),
            1_000)
    hb("app-a", Hb("g", a.member_id, 1, topic_partitions=owned(0, 1, 2, 3)), 2_000)  # told to revoke two
    hb("app-a", Hb("g", a.member_id, 1, topic_partitions=owned(0, 1)), 3_000)  # revoked: epoch 2
    hb("app-b", Hb("g", bb.member_id, 2, topic_partitions=[]), 4_000)  # takes the released two
    c = hb("app-c", Hb("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["orders"], topic_partitions=[]),
           5_000)
    del c  # app-c never heartbeats again
    session = [k for k in timers if k[0] == "consumer-session" and k[2] not in (a.member_id, bb.member_id)]
    step(b.on_timer(session[0], timers[session[0]]))
    hb("app-b", Hb("g", bb.member_id, -1), 60_000)
    return console.export_text()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_coordinator_tells_a_consumer_protocol_group(lang: str) -> None:
    text = consumer_group_story(lang)
    compare(text.encode(), GOLDEN / "readable" / f"consumer-protocol-{lang}.txt")
    if lang == "en":
        assert "app-a-1 must give up orders[2,3] first; its epoch stays 1" in text
        assert "group epoch 4 — app-c-3's session timed out" in text
        assert "for group.consumer.session.timeout.ms (45000 ms)" in text
        assert text.count("Revoke first:") == 1 and text.count("KIP-848: there is no JoinGroup") == 1
        assert "removed — session_timeout" in text and "Stable at epoch" in text


@pytest.mark.parametrize("lang, upgrade, downgrade", [
    ("en", "the classic group becomes a consumer-protocol group at epoch 3, keeping its 2 members",
     "the group becomes classic again with its 1 members"),
    ("zh", "经典组在纪元 3 变为 consumer 协议的组", "组变回经典组")])
def test_the_coordinator_tells_an_online_migration(lang: str, upgrade: str, downgrade: str) -> None:
    from grouplab.protocol import events as E
    from grouplab.protocol.states import ConsumerGroupState as CS

    console = Console(width=200, record=True, color_system=None, force_terminal=False, file=open(os.devnull, "w"))
    view = CoordinatorView(console, lang)
    view("coordinator", LogEvent(1, E.GroupConverted("g", 3, CS.STABLE, "classic", "consumer", ["a", "b"], "join")))
    view("coordinator", LogEvent(2, E.ConsumerClassicMemberJoined("g", 3, CS.STABLE, "c-1", None, "c", ["t"], ["range"],
                                                                  10_000, 30_000)))
    view("coordinator", LogEvent(3, E.GroupConverted("g", 4, CS.ASSIGNING, "consumer", "classic", ["c-1"], "left")))
    text = console.export_text()
    assert upgrade in text and downgrade in text and text.count("why" if lang == "en" else "原因") == 3


def _big_group(protocol: str, members: int) -> str:
    consumer = '"group.protocol" = "consumer"' if protocol == "consumer" else '"session.timeout.ms" = 10000'
    text = f"""
name = "big"
topics = {{ t0 = 50 }}
duration_ms = 30_000
[broker]
"group.initial.rebalance.delay.ms" = 0
"group.max.size" = 5000
[consumer]
{consumer}
[[members]]
count = {members}
start_ms = [0, 2000]
"""
    from grouplab.sim.scenario import scenario_from_text

    console = Console(width=140, record=True, color_system=None, force_terminal=False, file=open(os.devnull, "w"))
    view = CoordinatorView(console, "en")
    run_seed(scenario_from_text(text), 1, listener=view)
    return console.export_text()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_of_hundreds_is_told_in_summaries_not_a_line_per_member(protocol: str) -> None:
    """Issue 26: the coordinator's console stays readable at scale. Of each per-member kind of line a
    group shows the first few, then a line at 100, 1,000, ... and one saying how many it did not
    list; a rebalance's table lists 20 members and a row counting the rest."""
    text = _big_group(protocol, 300)
    lines = text.splitlines()
    assert len(lines) < 200, f"{len(lines)} lines"
    joined = "members joined"
    assert f"{joined}: 100 so far" in text
    more = re.findall(rf"{joined}: ([\d,]+) more not listed \(([\d,]+) in all\)", text)
    assert more and int(more[-1][1].replace(",", "")) <= 300
    shown = len(re.findall(r": m-\d+-\d+ joins" if protocol == "classic" else r": m-\d+-\S+ joins the consumer", text))
    assert 10 <= shown <= 30  # the first ten of each burst
    if protocol == "classic":
        rows = re.findall(r"│ … ([\d,]+) more\s+│", text)
        assert rows and int(rows[-1].replace(",", "")) == 300 - 20


def test_member_ids_in_a_trigger_are_shortened_by_lookup() -> None:
    console = Console(width=140, record=True, color_system=None, force_terminal=False, file=open(os.devnull, "w"))
    view = CoordinatorView(console, "en")
    view.clients = {f"c{i}-{i:08x}-0000": f"c{i}" for i in range(2000)}
    assert view._short("member c17-00000011-0000 joined; c3-00000003-0000 left") == "member c17-0000 joined; c3-0000 left"
