"""The coordinator's message trace and `grouplab replay` (docs/events.md §7, issue 12).

A trace records every input the Broker saw and every answer it gave; replaying it through a fresh
Broker must give the same answers and event-log lines. Held here for every built-in scenario on two
seeds (coordinator restarts and delivery included), for a run over real sockets, against tampering
(a replay that cannot fail would prove nothing) and for the refusals a user can meet."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
from grouplab.coordinator.trace import SHELL_EVENTS, from_json, to_json
from grouplab.admin import AdminClient
from grouplab.replay import ReplayRefused, replay
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import load_scenario
from grouplab.tracefile import trace_path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "grouplab" / "scenarios").glob("*.toml"))
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grouplab.cli", *args], capture_output=True, text=True,
                          env=ENV, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_scenario_replays_to_the_same_answers_and_events(path: Path, seed: int, tmp_path: Path) -> None:
    result = run_seed(load_scenario(path), seed, tmp_path)
    assert result.ok, result.violation
    replayed = replay(tmp_path)
    assert replayed.identical, replayed.difference
    assert replayed.requests > 0 and replayed.responses > 0 and replayed.events > 0
    if path.stem == "coordinator-restart":
        assert replayed.restarts > 0


def test_trace_lines_say_who_sent_what_and_when(tmp_path: Path) -> None:
    run_seed(load_scenario(ROOT / "grouplab" / "scenarios" / "static-members.toml"), 1, tmp_path)
    lines = [json.loads(t) for t in trace_path(tmp_path).read_text().splitlines()]
    assert lines[0]["kind"] == "start" and lines[0]["version"] == 1 and lines[0]["recovered"] is False
    first_join = next(line for line in lines if line["kind"] == "request" and line["api"] == "JoinGroup")
    assert set(first_join) == {"ts_ms", "kind", "conn", "correlation_id", "client_id", "client_host", "api", "body"}
    assert first_join["conn"].startswith(first_join["client_id"] + "#")
    answer = next(line for line in lines if line["kind"] == "response" and line["conn"] == first_join["conn"]
                  and line["correlation_id"] == first_join["correlation_id"])
    assert answer["api"] == "JoinGroup" and answer["ts_ms"] >= first_join["ts_ms"]
    times = [line["ts_ms"] for line in lines]
    assert times == sorted(times)  # one total order: the order the Broker saw its inputs in


@pytest.mark.parametrize("tamper", ["response", "request", "drop member id"])
def test_a_tampered_trace_is_caught(tamper: str, tmp_path: Path) -> None:
    run_seed(load_scenario(ROOT / "grouplab" / "scenarios" / "crash-storm.toml"), 1, tmp_path)
    path = trace_path(tmp_path)
    lines = [json.loads(t) for t in path.read_text().splitlines()]
    if tamper == "response":  # the recording claims an answer the Broker never gave
        i = next(i for i, line in enumerate(lines) if line["kind"] == "response" and line["api"] == "Heartbeat")
        lines[i]["body"]["error_code"] = 27
    elif tamper == "request":  # a heartbeat from a generation that never existed
        i = next(i for i, line in enumerate(lines) if line["kind"] == "request" and line["api"] == "Heartbeat"
                 and line["body"]["generation_id"] > 0)
        lines[i]["body"]["generation_id"] += 100
    else:
        i = next(i for i, line in enumerate(lines) if line["kind"] == "member_id")
        del lines[i]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = replay(tmp_path)
    assert not result.identical and result.difference is not None
    assert result.difference.what == "trace line" and result.difference.index <= i + 2

    out = cli("replay", str(tmp_path))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "the replay differs" in out.stdout and "recorded:" in out.stdout and "replayed:" in out.stdout


def test_a_changed_event_log_line_is_caught(tmp_path: Path) -> None:
    run_seed(load_scenario(ROOT / "grouplab" / "scenarios" / "clean-shutdown.toml"), 1, tmp_path)
    log = tmp_path / "coordinator.jsonl"
    lines = log.read_text().splitlines()
    edited = json.loads(lines[5])
    edited["generation_id"] = 99
    lines[5] = json.dumps(edited)
    log.write_text("\n".join(lines) + "\n")
    result = replay(tmp_path)
    assert result.difference is not None and result.difference.what == "event-log line" and result.difference.index == 6


def test_replay_of_a_real_socket_run_from_the_command_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    made = cli("run", "--consumers", "3", "--run-dir", str(run_dir), "--config", "group.initial.rebalance.delay.ms=0")
    assert made.returncode == 0, made.stderr
    out = cli("replay", str(run_dir))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "identical to the recording" in out.stdout and "event-log lines" in out.stdout


async def test_a_run_on_a_data_directory_with_state_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    lines: list[dict] = []
    async with CoordinatorServer(BrokerConfig(), port=0, data_dir=data, trace=lines.append) as server:
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"t": 2})
    assert lines[0]["recovered"] is False  # an empty data directory replays like a run in memory

    lines.clear()
    async with CoordinatorServer(BrokerConfig(), port=0, data_dir=data, trace=lines.append):
        pass
    assert lines[0]["recovered"] is True
    run_dir = tmp_path / "run"
    trace_path(run_dir).parent.mkdir(parents=True)
    trace_path(run_dir).write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(ReplayRefused, match="only runs that started empty can be replayed"):
        replay(run_dir)


@pytest.mark.parametrize("content, message", [
    (None, "no message trace"),
    ('{"kind": "start", "version": 1, "ts_ms": 0\n', "not a JSON line"),
    ('{"ts_ms": 0, "kind": "request"}\n', "does not begin with its `start` line"),
    ('{"ts_ms": 0, "kind": "start", "version": 99, "config": {}}\n', "format version 99"),
])
def test_unreadable_traces_get_one_line(content: str | None, message: str, tmp_path: Path) -> None:
    if content is not None:
        trace_path(tmp_path).parent.mkdir(parents=True)
        trace_path(tmp_path).write_text(content)
    out = cli("replay", str(tmp_path))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_shell_events_are_exactly_those_the_server_writes() -> None:
    """The replay leaves out of its comparison the lines coordinator/server.py writes itself; a new
    one written there must be named in SHELL_EVENTS, or every replay of a real run would differ."""
    tree = ast.parse((ROOT / "grouplab" / "coordinator" / "server.py").read_text())
    written = {node.func.attr for node in ast.walk(tree)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and isinstance(node.func.value, ast.Name) and node.func.value.id == "events"}
    assert written == {cls.__name__ for cls in SHELL_EVENTS}


wire_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text() | st.binary(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20)


@given(wire_values)
def test_bytes_survive_the_json_trace(value: object) -> None:
    assert from_json(json.loads(json.dumps(to_json(value)))) == value
