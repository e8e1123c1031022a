"""Delivery semantics over many simulation seeds, with crashes exactly between processing and
committing, lost produce acknowledgements and a zombie: at-least-once loses nothing, at-most-once
duplicates nothing, exactly-once neither loses nor duplicates in the read_committed output; and
the account is checked against what happened."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.consumer.delivery import DeliveryApp
from grouplab.sim.runner import run_seed
from grouplab.coordinator.consumer_group import ConsumerGroup
from grouplab.coordinator.group import Group
from grouplab.protocol.errors import ErrorCode
from grouplab.sim.scenario import load_scenario, scenario_from_text

ROOT = Path(__file__).resolve().parent.parent
SEEDS = range(1, 13)


def scenario(mode: str):
    return load_scenario(ROOT / "grouplab" / "scenarios" / f"delivery-{mode}.toml")


def run_all(sc) -> list:
    results = [run_seed(sc, seed) for seed in SEEDS]
    failures = [f"seed {r.seed}: {r.violation}" for r in results if not r.ok]
    assert failures == []
    for r in results:
        s = r.stats
        assert s.produced == 6 * 300 and s.committed == s.produced  # everything consumed in the end
    return [r.stats for r in results]


def test_at_least_once_loses_nothing_and_counts_its_duplicates() -> None:
    stats = run_all(scenario("at-least-once"))
    assert all(s.lost == 0 for s in stats)
    assert sum(s.duplicated for s in stats) > 0  # crashes before a commit were reprocessed
    # Every duplicate in the output was processed twice (a batch can also be processed and its
    # output lost with a crash before the write, so processing may exceed this).
    assert all(s.processed >= s.produced + s.duplicated for s in stats)


def test_at_most_once_duplicates_nothing_and_counts_its_losses() -> None:
    stats = run_all(scenario("at-most-once"))
    assert all(s.duplicated == 0 for s in stats)
    assert sum(s.lost for s in stats) > 0  # crashes after a commit lost their batch
    assert all(s.processed >= s.produced - s.lost for s in stats)


def test_exactly_once_neither_loses_nor_duplicates_in_the_committed_output() -> None:
    stats = run_all(scenario("exactly-once"))
    assert all(s.lost == 0 and s.duplicated == 0 for s in stats)
    # It did redo work (aborted transactions), and those writes are in the log, invisible only
    # to read_committed readers: the zombie's and the crashed members' writes never became visible.
    assert sum(s.processed - s.produced for s in stats) > 0
    assert sum(s.duplicated_uncommitted for s in stats) > 0


def test_a_retried_produce_is_written_once() -> None:
    """No crashes, only lost Produce acknowledgements: the idempotent producer retries the same
    sequence and the broker writes each batch once, so even at-least-once has no duplicate."""
    sc = copy.deepcopy(scenario("at-least-once"))
    sc.random.crash = sc.random.crash_before_commit = 0
    sc.schedule = []
    sc.delivery.produce_ack_loss = 0.3
    stats = [run_seed(sc, seed).stats for seed in range(1, 6)]
    assert sum(s.messages_lost for s in stats) > 0
    assert all(s.lost == 0 and s.duplicated == 0 for s in stats)


def test_a_broken_guarantee_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """An 'at-least-once' app that secretly commits first (at-most-once) loses records: the
    checker must say so, with the seed."""
    from grouplab.consumer.delivery import DeliveryMode

    original = DeliveryApp._start_batch

    def commit_first(self: DeliveryApp) -> None:
        mode, self.delivery.mode = self.delivery.mode, DeliveryMode.AT_MOST_ONCE
        try:
            original(self)
        finally:
            self.delivery.mode = mode

    monkeypatch.setattr(DeliveryApp, "_start_batch", commit_first)
    sc = scenario("at-least-once")
    sc.random.crash_after_commit, sc.random.crash_before_commit = sc.random.crash_before_commit, 0
    results = [run_seed(sc, seed) for seed in SEEDS]
    broken = [r for r in results if r.violation is not None and r.violation.invariant == "delivery guarantee"]
    assert broken and "lost" in broken[0].violation.detail


def test_summary_json_and_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    proc = subprocess.run([sys.executable, "-m", "grouplab.cli", "simulate", "--scenario",
                           str(ROOT / "grouplab" / "scenarios" / "delivery-at-most-once.toml"), "--seeds", "1-3",
                           "--summary-json", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    for row in data["seeds"]:
        assert {"produced", "processed", "committed", "lost", "duplicated"} <= set(row)
    assert data["totals"]["produced"] == 3 * 1800
    # Issue 25: the multi-seed summary says what each mode costs, as README promises it.
    line = next(line for line in proc.stdout.splitlines() if line.startswith("delivery: "))
    assert line.startswith("delivery: 5,400 records produced, ") and " · duplicated 0" in line, line
    lost = data["totals"]["lost"]
    assert f"· lost {lost:,}" in line and (lost == 0 or " of 3 seeds)" in line), line


def test_a_multi_seed_run_prints_the_duplicates_at_least_once_costs() -> None:
    proc = subprocess.run([sys.executable, "-m", "grouplab.cli", "simulate", "--scenario", "delivery-at-least-once",
                           "--seeds", "1-8"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("delivery: "))
    assert "· lost 0 ·" in line and re.search(r"duplicated [1-9][\d,]* \(in [1-8] of 8 seeds\)", line), line


def _zombie_commit(protocol: str):
    """The zombie-commit lesson: m-1 hangs while the group moves on, then commits."""
    text = (ROOT / "grouplab" / "scenarios" / "lessons" / "zombie-commit.toml").read_text()
    if protocol == "consumer":
        text = text.replace('"session.timeout.ms" = 30000\n"heartbeat.interval.ms" = 3000\n',
                            '"group.protocol" = "consumer"\n')
        assert '"group.protocol"' in text
    return scenario_from_text(text)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_coordinator_that_lets_a_fenced_member_commit_is_caught(protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Invariant 8 checks each accepted commit against what the coordinator knew of its member when
    it asked: a coordinator that forgets to fence (a removed classic member, a KIP-848 member's old
    epoch) is reported, with the member and its generation."""
    sc = _zombie_commit(protocol)
    assert all(run_seed(sc, seed).ok for seed in (2, 5))  # the real coordinator fences the zombie
    if protocol == "classic":
        original = Group.validate_commit

        def forgets_removed_members(self: Group, member_id: str, instance_id: str | None, generation_id: int,
                                    transactional: bool = False):
            error = original(self, member_id, instance_id, generation_id, transactional)
            return None if error is ErrorCode.UNKNOWN_MEMBER_ID else error

        monkeypatch.setattr(Group, "validate_commit", forgets_removed_members)
    else:
        monkeypatch.setattr(ConsumerGroup, "validate_offset_commit", lambda self, *args, **kwargs: None)
    caught = [r.violation for r in (run_seed(sc, seed) for seed in (1, 2, 5)) if r.violation is not None]
    assert caught and {v.invariant for v in caught} == {"a fenced generation never commits"}
    assert "m-1-" in caught[0].detail
