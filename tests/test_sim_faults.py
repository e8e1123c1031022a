"""Scenario [[faults]]: the FaultProxy's rules, in its SPEC syntax, on the simulator's network.
Every action the proxy has runs in the simulator with the invariants held and replays byte for
byte from its seed; holding the leader's SyncGroup gets it removed (KAFKA-12890); a rule that
selects nothing changes nothing, not even the random draws; and `grouplab run --faults` and a
scenario's spec are read by the same parser, refused with the same message."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from grouplab.cli import main
from grouplab.faults.rules import FaultSpecError, parse_spec
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import FaultRule, ScenarioError, ScheduledFault, load_scenario, scenario_from_text
from grouplab.sim.world import SimResult
from grouplab.protocol.effects import LogEvent

ROOT = Path(__file__).resolve().parent.parent
SEEDS = range(1, 7)

BASE = """
name = "rules"
topics = { t0 = 6 }
duration_ms = 60_000

[broker]
"group.initial.rebalance.delay.ms" = 1000

[consumer]
"session.timeout.ms" = 10000
"heartbeat.interval.ms" = 1000
"request.timeout.ms" = 3000
"max.poll.interval.ms" = 10000
"metadata.max.age.ms" = 5000

[[members]]
count = 3
start_ms = [0, 1000]
"""


def scenario(*faults: str) -> Any:
    return scenario_from_text(BASE + "".join(f"\n[[faults]]\n{f}\n" for f in faults))


def run(sc: Any, seed: int, run_dir: Path | None = None) -> tuple[SimResult, list[tuple[str, LogEvent]]]:
    events: list[tuple[str, LogEvent]] = []
    result = run_seed(sc, seed, run_dir, listener=lambda node, ev: events.append((node, ev)))
    return result, events


def named(events: list[tuple[str, LogEvent]], event: str, node: str | None = None) -> list[LogEvent]:
    return [ev for n, ev in events if ev.event == event and (node is None or n == node)]


# ----------------------------------------------------------------------------- every action

ACTIONS = [
    ('spec = "Heartbeat:drop:0.3"', "drop"),
    ('spec = "*:drop:0.05:dir=response"', "drop"),
    ('spec = "*:delay:50-300:dir=both"', "delay"),
    ('spec = "JoinGroup:duplicate"', "duplicate"),
    ('spec = "SyncGroup:duplicate:dir=response"', "duplicate"),
    ('spec = "SyncGroup:hold:link=m-1:limit=1"\nhold_ms = 2000', "hold"),
    ('spec = "Heartbeat:hold:p=0.2"\nfrom_ms = 10000\nuntil_ms = 40000', "hold"),
    ('spec = "Heartbeat:error:REBALANCE_IN_PROGRESS:link=m-2:limit=2"\nfrom_ms = 15000', "error"),
    ('spec = "SyncGroup:error:REBALANCE_IN_PROGRESS:dir=response:limit=2"', "error"),
    ('spec = "*:reorder:100:p=0.2"', "reorder"),
    ('spec = "Metadata:reorder"', "reorder"),
    ('spec = "Heartbeat:disconnect:p=0.05"', "disconnect"),
    ('spec = "JoinGroup:disconnect:dir=response:limit=2"', "disconnect"),
    ('spec = "SyncGroup:disconnect:link=m-1:limit=1"', "disconnect"),
]


@pytest.mark.parametrize("fault,action", ACTIONS, ids=[a[0].split("\n")[0][8:-1] for a in ACTIONS])
def test_every_proxy_action_runs_in_the_simulator_and_holds_the_invariants(fault: str, action: str) -> None:
    sc = scenario(fault)
    for seed in SEEDS:
        result, events = run(sc, seed)
        assert result.ok, f"seed {seed}: {result.violation}"
        assert result.stats.faults.get(action, 0) > 0, f"seed {seed}: {action} never fired"
        logged = named(events, "fault_injected", "simulator")
        if action == "delay":  # counted, not logged one by one
            assert logged == []
        else:
            assert logged and all(ev.fields["fault"] == action and ev.fields["rule"] == parse_spec(
                sc.faults[0].spec, allow_hold=True).spec() for ev in logged)
            assert len(logged) == result.stats.faults[action]


@pytest.mark.parametrize("fault,action", ACTIONS[::2], ids=[a[0].split("\n")[0][8:-1] for a in ACTIONS[::2]])
def test_a_scenario_with_faults_replays_byte_for_byte(fault: str, action: str, tmp_path: Path) -> None:
    sc = scenario(fault)
    run_seed(sc, 4, tmp_path / "a")
    run_seed(sc, 4, tmp_path / "b")
    files = sorted(str(p.relative_to(tmp_path / "a")) for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(tmp_path / "b")) for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert {"simulator.jsonl", "trace/coordinator.jsonl"} <= set(files)  # the message trace replays exactly too
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_injected_errors_reach_the_member_as_the_coordinators_answer() -> None:
    rule = 'spec = "Heartbeat:error:REBALANCE_IN_PROGRESS:link=m-2:limit=2"\nfrom_ms = 15000'
    result, events = run(scenario(rule), 1)
    assert result.ok
    failed = [ev.fields["error"] for ev in named(events, "heartbeat_failed", "m-2")]
    assert failed[:2] == ["REBALANCE_IN_PROGRESS", "REBALANCE_IN_PROGRESS"]
    assert all(ev.ts_ms >= 15000 for ev in named(events, "fault_injected"))


DISCONNECT = 'spec = "Heartbeat:disconnect:link=m-1:limit=1"\nfrom_ms = 20000'


def test_a_disconnect_rule_closes_the_members_connection_and_it_reconnects_without_a_rebalance() -> None:
    """As the scenario's `disconnect` fault: m-1's connection closes once, the heartbeat it sent is
    lost with it, and m-1 reconnects after its back-off, well within its session, and heartbeats
    on in the same generation: nobody is removed, nothing rebalances."""
    for seed in SEEDS:
        result, events = run(scenario(DISCONNECT), seed)
        assert result.ok, f"seed {seed}: {result.violation}"
        [fault] = named(events, "fault_injected", "simulator")
        assert (fault.fields["fault"], fault.fields["api"], fault.fields["members"]) == ("disconnect", "Heartbeat",
                                                                                          ["m-1"])
        assert fault.ts_ms >= 20000 and result.stats.faults == {"disconnect": 1}
        [lost] = [ev for ev in named(events, "coordinator_disconnected", "m-1") if ev.ts_ms >= fault.ts_ms]
        assert lost.ts_ms == fault.ts_ms and lost.fields["previous_state"] == "stable"
        reconnected = [ev for ev in named(events, "coordinator_connected", "m-1") if ev.ts_ms > fault.ts_ms]
        assert reconnected and reconnected[0].ts_ms - fault.ts_ms < 10_000  # its back-off, not its session
        assert not named(events, "member_removed")
        assert not [ev for ev in named(events, "rebalance_started", "coordinator") if ev.ts_ms >= fault.ts_ms]


def test_a_disconnect_rule_and_the_disconnect_fault_at_the_same_moment_tell_the_same_story() -> None:
    """The rule closes the connection through the simulator's own `disconnect` fault: a run with
    the fault scheduled when the rule fired reconnects m-1 as often and completes as many
    generations."""
    for seed in SEEDS:
        ruled, events = run(scenario(DISCONNECT), seed)
        [fault] = named(events, "fault_injected", "simulator")
        sc = scenario()
        sc.schedule = [ScheduledFault(fault.ts_ms, "disconnect", ["m-1"], 0)]
        faulted, fault_events = run(sc, seed)
        assert ruled.ok and faulted.ok
        assert ruled.stats.generations == faulted.stats.generations
        assert len(named(fault_events, "coordinator_connected", "m-1")) == len(named(events, "coordinator_connected", "m-1"))


def test_a_disconnect_scenario_replays_byte_for_byte(tmp_path: Path) -> None:
    sc = scenario('spec = "Heartbeat:disconnect:p=0.1:dir=both"', 'spec = "SyncGroup:disconnect:limit=2"')
    for seed in (2, 5):
        first, second = run_seed(sc, seed, tmp_path / f"{seed}a"), run_seed(sc, seed, tmp_path / f"{seed}b")
        assert first.ok and second.ok and first.stats.faults["disconnect"] > 2
        for path in (tmp_path / f"{seed}a").rglob("*"):
            if path.is_file():
                name = path.relative_to(tmp_path / f"{seed}a")
                assert path.read_bytes() == (tmp_path / f"{seed}b" / name).read_bytes(), name


def test_drops_and_duplicates_count_as_lost_and_duplicated_messages() -> None:
    dropped, _ = run(scenario('spec = "Heartbeat:drop:0.3"'), 1)
    assert dropped.stats.messages_lost == dropped.stats.faults["drop"] > 0
    duplicated, events = run(scenario('spec = "JoinGroup:duplicate"'), 1)
    assert duplicated.stats.messages_duplicated == duplicated.stats.faults["duplicate"] > 0
    assert named(events, "duplicate_join_ignored", "coordinator")  # the first join's copy


def test_a_rule_fires_only_on_messages_sent_in_its_window() -> None:
    result, events = run(scenario('spec = "Heartbeat:drop:0.5"\nfrom_ms = 20000\nuntil_ms = 30000'), 2)
    assert result.ok
    times = [ev.ts_ms for ev in named(events, "fault_injected")]
    assert times and all(20000 <= t < 30000 for t in times)


def test_a_hold_is_released_when_its_window_ends_or_after_hold_ms() -> None:
    _, events = run(scenario('spec = "SyncGroup:hold:link=m-0:limit=1"\nuntil_ms = 4000'), 1)
    [held] = named(events, "fault_injected")
    assert held.ts_ms + held.fields["duration_ms"] == 4000
    _, events = run(scenario('spec = "SyncGroup:hold:link=m-0:limit=1"\nhold_ms = 700'), 1)
    [held] = named(events, "fault_injected")
    assert held.fields["duration_ms"] == 700


def test_the_faults_last_until_the_latest_window_ends() -> None:
    result, events = run(scenario('spec = "Heartbeat:drop:0.2"\nuntil_ms = 75000'), 1)
    assert result.ok
    [over] = named(events, "faults_over")
    assert over.ts_ms == 75000


def test_a_rule_that_selects_nothing_changes_nothing(tmp_path: Path) -> None:
    """No draw, no event: the run is byte for byte the run without the rule (golden logs rely on it)."""
    run_seed(scenario(), 5, tmp_path / "plain")
    run_seed(scenario('spec = "Heartbeat:drop:0.5:link=nobody"', 'spec = "*:delay:10-90:dir=response:link=none-*"'),
             5, tmp_path / "ruled")
    for path in (tmp_path / "plain").rglob("*"):
        if path.is_file():
            name = path.relative_to(tmp_path / "plain")
            assert path.read_bytes() == (tmp_path / "ruled" / name).read_bytes(), name


# ----------------------------------------------------------------------------- the held SyncGroup


def test_holding_the_leaders_sync_gets_it_removed_after_the_rebalance_timeout() -> None:
    """scenarios/held-sync.toml: the followers wait for the leader's assignment until the rebalance
    timeout (max.poll.interval.ms, 10 s), then the coordinator removes the leader (KAFKA-12890)."""
    held = load_scenario(ROOT / "grouplab" / "scenarios" / "held-sync.toml")
    plain = copy.deepcopy(held)
    plain.faults = []
    for seed in SEEDS:
        result, events = run(held, seed)
        assert result.ok, result.violation
        [fault] = named(events, "fault_injected")
        assert (fault.fields["fault"], fault.fields["api"], fault.fields["members"]) == ("hold", "SyncGroup",
                                                                                          ["leader0-0"])
        first = named(events, "generation_completed", "coordinator")[0]
        assert first.fields["leader"].startswith("leader0-0-")
        [removed] = named(events, "member_removed", "coordinator")
        assert (removed.fields["member_id"], removed.fields["reason"]) == (first.fields["leader"], "sync_timeout")
        assert removed.ts_ms - first.ts_ms >= 10_000
        assert named(events, "join_sent", "leader0-0")[-1].ts_ms > removed.ts_ms  # it comes back

        unheld, events = run(plain, seed)
        assert unheld.ok and not named(events, "member_removed")
        assert unheld.stats.generations < result.stats.generations


# ----------------------------------------------------------------------------- one parser


BAD_SPECS = ["Heartbeat", "Hearbeat:drop", "Heartbeat:drop:1.5", "JoinGroup:delay", "*:delay:500-200",
             "Heartbeat:error:999", "Heartbeat:error", "Heartbeat:drop:0.5:p=0.1", "Heartbeat:drop:colour=red",
             "SyncGroup:duplicate:3", "Heartbeat:drop:dir=sideways", "Heartbeat:drop:limit=0"]


def _refusal(text: str) -> str:
    """The parser's message in a command's stderr, with the console's line wrapping undone."""
    flat = " ".join(text.split())
    return flat[flat.index("bad fault spec"):]


@pytest.mark.parametrize("bad", BAD_SPECS)
def test_run_faults_and_scenario_faults_refuse_a_bad_spec_with_the_same_message(
        bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(FaultSpecError) as parsed:
        parse_spec(bad, allow_hold=True)
    assert main(["run", "--faults", bad]) == 2
    from_run = _refusal(capsys.readouterr().err)
    path = tmp_path / "bad.toml"
    path.write_text(BASE + f'\n[[faults]]\nspec = "{bad}"\n')
    assert main(["simulate", "--scenario", str(path), "--seed", "1"]) == 2
    from_scenario = capsys.readouterr().err
    assert f"faults[0]: bad fault spec {bad!r}" in " ".join(from_scenario.split())
    assert from_run == _refusal(from_scenario) == str(parsed.value)


def test_hold_is_refused_on_the_command_line_only() -> None:
    """Nothing could release a held frame in `grouplab run`; a scenario releases it itself. So the
    one difference: the list of known actions names hold in a scenario's refusal."""
    with pytest.raises(FaultSpecError, match="no command-line form"):
        parse_spec("SyncGroup:hold")
    assert FaultRule("SyncGroup:hold").rule().action == "hold"
    with pytest.raises(FaultSpecError) as cli:
        parse_spec("Heartbeat:explode")
    with pytest.raises(ScenarioError) as sc:
        scenario('spec = "Heartbeat:explode"')
    assert "known: drop, delay, duplicate, error, reorder" in str(cli.value)
    assert "known: drop, delay, duplicate, hold, error, reorder" in str(sc.value)


@pytest.mark.parametrize("table,why", [
    ('spec = 7', "spec must be a fault SPEC"),
    ('spec = "Heartbeat:drop"\nhold_ms = 100', "hold_ms is for hold rules only"),
    ('spec = "Heartbeat:drop"\nfrom_ms = 500\nuntil_ms = 500', "until_ms must be after from_ms"),
    ('spec = "Heartbeat:drop"\nfrom_ms = -1', "from_ms must be milliseconds"),
    ('spec = "Heartbeat:drop"\nwhen = 3', "unknown key"),
])
def test_bad_faults_tables_say_why(table: str, why: str) -> None:
    with pytest.raises(ScenarioError, match=why):
        scenario(table)
