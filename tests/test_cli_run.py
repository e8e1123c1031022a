"""`grouplab run` as a user runs it: a subprocess, real sockets, output read back; and Ctrl-C."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

FAST = [
    "--config", "group.initial.rebalance.delay.ms=0",
    "--consumer-config", "heartbeat.interval.ms=100",
    "--consumer-config", "session.timeout.ms=6000",
    "--hold", "0.2", "--timeout", "30",
]


def grouplab(*args: str) -> list[str]:
    return [sys.executable, "-m", "grouplab.cli", *args]


def test_run_shows_three_rebalances_and_a_summary(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.run(grouplab("run", "--consumers", "3", "--topics", "t0:3,t1:3", "--assignor", "range",
                                   "--run-dir", str(run_dir), *FAST),
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # The initial generation, the one after a consumer leaves, the one after a consumer is added.
    assert out.count("protocol range") >= 3, out
    assert "stopping consumer-1" in out and "adding a consumer" in out
    assert "rebalances" in out and "4 consumers ran" in out
    lines = [json.loads(line) for line in (run_dir / "coordinator.jsonl").read_text().splitlines()]
    stable = [ev for ev in lines if ev["event"] == "group_stable"]
    assert len(stable) >= 3
    counts = [len(ev["assignments"]) for ev in stable]
    assert counts[-2:] == [2, 3] and 3 in counts[:-2], counts  # 3 members, one leaves, one joins
    # Every partition of t0 and t1 is owned exactly once in the last stable generation.
    owned = [tuple(tp) for parts in stable[-1]["assignments"].values() for tp in parts]
    assert sorted(owned) == [(t, p) for t in ("t0", "t1") for p in range(3)]
    for name in ("consumer-1", "consumer-2", "consumer-3", "consumer-4"):
        assert (run_dir / f"{name}.jsonl").exists()


def test_ctrl_c_exits_cleanly_with_a_summary() -> None:
    proc = subprocess.Popen(grouplab("run", "--consumers", "2", "--forever", *FAST), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"})
    try:
        deadline = time.monotonic() + 60
        seen = []
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            if "running until Ctrl-C" in line:
                break
        else:
            raise AssertionError("never reached the steady state: " + "".join(seen))
        # The command it printed reaches it from another terminal (issue 25: a random port, said).
        said = next(line for line in seen if "from another terminal: grouplab describe" in line)
        describe = subprocess.run(grouplab(*said.split("grouplab ", 1)[1].split()), capture_output=True, text=True,
                                  timeout=60, env={**os.environ, "COLUMNS": "200"})
        assert describe.returncode == 0 and "consumer-1" in describe.stdout, describe.stdout + describe.stderr
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err  # Ctrl-C: the shell's convention, 128 + SIGINT
    assert "interrupted" in rest and "rebalances" in rest
    assert "Traceback" not in err


def test_bad_flags_give_a_clear_error() -> None:
    proc = subprocess.run(grouplab("run", "--assignor", "nope"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown assignor 'nope'" in proc.stderr
    proc = subprocess.run(grouplab("run", "--config", "no.such.config=1"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown config 'no.such.config'" in proc.stderr
    proc = subprocess.run(grouplab("run", "--topics", "t0"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "TOPIC:PARTITIONS" in proc.stderr


def test_assign_calculator_json() -> None:
    proc = subprocess.run(grouplab("assign", "--assignor", "range", "--topics", "t0:3,t1:3",
                                   "--member", "c0=t0,t1", "--member", "c1=t0,t1", "--format", "json"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "c0": [["t0", 0], ["t0", 1], ["t1", 0], ["t1", 1]],
        "c1": [["t0", 2], ["t1", 2]],
    }


def test_a_crash_shows_what_each_delivery_mode_costs() -> None:
    """`run --delivery MODE --crash` crashes the first consumer where the mode's cost shows: right
    after processing a batch and before committing it (at-least-once processes it again), or right
    after committing and before processing (at-most-once loses it)."""
    counts = {}
    for mode in ("at-least-once", "at-most-once"):
        proc = subprocess.run(grouplab("run", "--consumers", "3", "--topics", "in:3", "--delivery", mode,
                                       "--records", "2000", "--processing-ms", "5", "--crash", *FAST),
                              capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
        assert proc.returncode == 0, proc.stderr
        assert "crashing consumer-1 right after it" in proc.stdout, proc.stdout
        row = next(line for line in proc.stdout.splitlines() if line.startswith("│") and "held" in line)
        produced, processed, lost, duplicated = (int(x) for x in row.strip("│ ").split("│")[:4])
        counts[mode] = (produced, processed, lost, duplicated)
    alo, amo = counts["at-least-once"], counts["at-most-once"]
    assert alo[2] == 0 and alo[3] > 0 and alo[1] == alo[0] + alo[3]  # nothing lost, a batch twice
    assert amo[3] == 0 and amo[2] > 0 and amo[1] == amo[0] - amo[2]  # nothing twice, a batch lost


def test_a_crash_is_counted_down_and_charged_its_session_timeout(tmp_path: Path) -> None:
    """`--crash`: the screen says how long the session has left, then what the crash cost before
    the rebalance that followed (not just the rebalance's few milliseconds)."""
    import re

    run_dir = tmp_path / "run"
    proc = subprocess.run(grouplab("run", "--consumers", "3", "--topics", "t0:3,t1:3", "--crash", "--run-dir",
                                   str(run_dir), *FAST),
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"waiting for session timeout: consumer-1 removed in ~[56] s", out), out
    cost = re.search(r"cost: consumer-1 crashed at [\d.]+ s; its 2 partitions were assigned but not consumed for "
                     r"([\d.]+) s until the session timeout \(session\.timeout\.ms=6000\) removed it; the rebalance "
                     r"then took \d+ ms", out)
    assert cost is not None, out
    assert 5.5 <= float(cost.group(1)) <= 6.1
    assert re.search(r"partition time \(6 partitions, .*\): .* ([\d.]+) partition-s assigned but not consumed "
                     r"\(charged to 1 stop: app crashed ×1\)", out), out
    crashed = [json.loads(x) for x in (run_dir / "consumer-1.jsonl").read_text().splitlines()]
    assert crashed[-1]["event"] == "app_crashed"  # its last line


def test_the_first_generation_says_it_waited_for_more_members() -> None:
    """With the default group.initial.rebalance.delay.ms (3 s) the first rebalance takes seconds: the
    screen says why (KIP-134) instead of leaving a bare 'took 6011 ms'."""
    proc = subprocess.run(grouplab("run", "--consumers", "2", "--hold", "0.1", "--timeout", "30",
                                   "--consumer-config", "session.timeout.ms=6000"),
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("group.initial.rebalance.delay.ms (3000 ms)") == 1, proc.stdout  # the first one only


KIP848_FAST = [
    "--config", "group.consumer.heartbeat.interval.ms=300",
    "--config", "group.consumer.min.heartbeat.interval.ms=100",
    "--hold", "0.2", "--timeout", "30",
]


def test_run_with_the_consumer_protocol_tells_epochs_and_revocations_and_plots(tmp_path: Path) -> None:
    """`run --group-protocol consumer`: every consumer speaks KIP-848; the live view tells joins,
    group epochs, revoke-first and what each member owns at which epoch; the run plots."""
    run_dir = tmp_path / "run"
    proc = subprocess.run(grouplab("run", "--group-protocol", "consumer", "--group-remote-assignor", "range",
                                   "--consumers", "3", "--topics", "t0:3,t1:3", "--run-dir", str(run_dir), *KIP848_FAST),
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "group.protocol consumer (KIP-848) · server assignor range" in out
    assert "joining at member epoch 0" in out and "joins the consumer-protocol group" in out
    assert "revoking" in out and "first" in out, out  # the fourth's partitions were revoked from others first
    assert "leaving with member epoch -1" in out and "Stable at epoch" in out
    assert "stopping consumer-1" in out and re.search(r"group epoch \d+ · 4 consumers ran", out), out
    assert "rebalances ·" not in out  # a consumer-protocol group has none: its summary counts group epochs
    member_events = [json.loads(line)["event"] for line in (run_dir / "consumer-4.jsonl").read_text().splitlines()]
    assert "consumer_join_sent" in member_events and "partitions_assigned" in member_events
    assert "join_sent" not in member_events  # no JoinGroup
    coordinator = [json.loads(line) for line in (run_dir / "coordinator.jsonl").read_text().splitlines()]
    assert any(ev["event"] == "consumer_member_reconciled" for ev in coordinator)
    assert not any(ev["event"] == "group_stable" for ev in coordinator)
    plot = subprocess.run(grouplab("plot", str(run_dir), "--out", str(tmp_path / "t.png")),
                          capture_output=True, text=True, timeout=120)
    assert plot.returncode == 0, plot.stderr
    intervals = int(plot.stdout.split(" ownership intervals")[0].rsplit(" ", 1)[1])
    assert intervals >= 6, plot.stdout  # every partition owned, some twice over the run


def test_consumer_protocol_flags_refuse_classic_settings() -> None:
    for args, words in ((["--group-protocol", "consumer", "--assignor", "roundrobin"], "--group-remote-assignor"),
                        (["--group-remote-assignor", "range"], "--group-protocol consumer"),
                        (["--group-protocol", "consumer", "--consumer-config", "session.timeout.ms=10000"],
                         "session.timeout.ms cannot be set when group.protocol=consumer")):
        proc = subprocess.run(grouplab("run", *args), capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert words in proc.stderr, proc.stderr


def test_run_on_a_cluster_kills_the_coordinator_broker_and_the_group_follows(tmp_path: Path) -> None:
    """`run --brokers 3 --kill-coordinator`: the group's coordinator broker is killed, the consumers
    find the new one (no rebalance: the group is loaded in its generation), the broker comes back and
    an election hands the group back; then the usual script (one leaves, one joins)."""
    run_dir = tmp_path / "run"
    proc = subprocess.run(grouplab("run", "--brokers", "3", "--kill-coordinator", "--consumers", "3",
                                   "--run-dir", str(run_dir), *FAST),
                          capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "3 brokers on 127.0.0.1:" in out and "killing broker 0, the coordinator of group grouplab" in out
    assert "broker 1 is the coordinator now" in out and "restarting broker 0" in out
    assert "removed: left" in out  # the clean leave reached the coordinator after the move back
    lines = [json.loads(line) for line in (run_dir / "coordinator.jsonl").read_text().splitlines()]
    moves = [(ev["from_node"], ev["to_node"]) for ev in lines if ev["event"] == "coordinator_moved"]
    assert moves == [(0, 1), (1, 0)]
    found = [json.loads(line) for line in (run_dir / "consumer-2.jsonl").read_text().splitlines()
             if '"coordinator_found"' in line]
    assert [ev["node_id"] for ev in found] == [0, 1, 0]


def test_kill_coordinator_needs_a_cluster() -> None:
    proc = subprocess.run(grouplab("run", "--kill-coordinator"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--kill-coordinator needs a cluster: --brokers 2 or more" in proc.stderr
