"""`grouplab assign --protocol consumer`: the KIP-848 server-side assignors from the command line,
run as a user runs it (a subprocess), beside `--protocol classic` (the default, unchanged)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def grouplab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grouplab.cli", "assign", *args], capture_output=True, text=True,
                          timeout=60, env=ENV, cwd=ROOT)


def as_json(*args: str) -> object:
    proc = grouplab(*args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_uniform_sticky_after_a_member_joins() -> None:
    # Kafka's testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics.
    got = as_json("--protocol", "consumer", "--assignor", "uniform", "--topics", "t1:3,t2:3",
                  "--member", "A=t1,t2", "--member", "B=t1,t2", "--member", "C=t1,t2",
                  "--owned", "A=t1:0,t1:2,t2:0", "--owned", "B=t1:1,t2:1,t2:2")
    assert got == {"A": [["t1", 0], ["t1", 2]], "B": [["t1", 1], ["t2", 1]], "C": [["t2", 0], ["t2", 2]]}


def test_range_and_a_member_subscribed_to_nothing() -> None:
    got = as_json("--protocol", "consumer", "--assignor", "range", "--topics", "t0:3,t1:2",
                  "--member", "a=t0,t1", "--member", "b=t0", "--member", "c=")
    assert got == {"a": [["t0", 0], ["t0", 1], ["t1", 0], ["t1", 1]], "b": [["t0", 2]], "c": []}


def test_uniform_heterogeneous() -> None:
    # Kafka's testFirstAssignmentTwoMembersTwoTopics (heterogeneous builder).
    got = as_json("--protocol", "consumer", "--assignor", "uniform", "--topics", "topic1:3,topic3:6",
                  "--member", "A=topic1,topic3", "--member", "B=topic3")
    assert got == {"A": [["topic1", 0], ["topic1", 1], ["topic1", 2], ["topic3", 4]],
                   "B": [["topic3", p] for p in (0, 1, 2, 3, 5)]}


def test_table_names_the_moves() -> None:
    proc = grouplab("--protocol", "consumer", "--assignor", "uniform", "--topics", "t0:3,t1:3",
                    "--member", "a=t0,t1", "--member", "b=t0,t1", "--member", "c=t0,t1",
                    "--owned", "a=t0:0,t0:2,t1:0", "--owned", "b=t0:1,t1:1,t1:2")
    assert proc.returncode == 0, proc.stderr
    assert "uniform (server-side, consumer protocol)" in proc.stdout  # the title wraps to the table's width
    assert "t0[0,2]" in proc.stdout and "t0[1] t1[1]" in proc.stdout and "t1[0,2]" in proc.stdout
    assert "moved 2: t1-0: a→c, t1-2: b→c" in proc.stdout
    assert "once the old owner has revoked it" in proc.stdout


def test_classic_is_the_default_and_unchanged() -> None:
    got = as_json("--assignor", "range", "--topics", "t0:3,t1:3", "--member", "c0=t0,t1", "--member", "c1=t0,t1")
    assert got == {"c0": [["t0", 0], ["t0", 1], ["t1", 0], ["t1", 1]], "c1": [["t0", 2], ["t1", 2]]}
    assert as_json("--protocol", "classic", "--assignor", "range", "--topics", "t0:3,t1:3",
                   "--member", "c0=t0,t1", "--member", "c1=t0,t1") == got


@pytest.mark.parametrize("args, words", [
    (["--protocol", "consumer", "--assignor", "sticky", "--member", "a=t0"], ["'sticky'", "client-side", "classic"]),
    (["--protocol", "consumer", "--assignor", "cooperative-sticky", "--member", "a=t0"], ["client-side"]),
    (["--protocol", "consumer", "--assignor", "bogus", "--member", "a=t0"], ["'bogus' is no assignor", "uniform, range"]),
    (["--assignor", "uniform", "--member", "a=t0"], ["'uniform'", "server-side", "--protocol consumer"]),
    (["--protocol", "classic", "--assignor", "uniform", "--member", "a=t0"], ["--protocol consumer"]),
    (["--assignor", "range", "--member", "a="], ["NAME=TOPIC"]),  # classic: a member needs a topic
    (["--protocol", "consumer", "--assignor", "uniform", "--member", "a=t9"], ["'t9'", "--topics"]),
    (["--protocol", "consumer", "--assignor", "uniform", "--member", "a=t0", "--owned", "a=t0:5"],
     ["no such partition"]),
    (["--protocol", "consumer", "--assignor", "uniform", "--member", "a=t0", "--member", "b=t0",
      "--owned", "a=t0:0", "--owned", "b=t0:0"], ["both"]),
    (["--protocol", "consumer", "--assignor", "range", "--member", "a=t0", "--streams", "2"], ["--streams"]),
    (["--protocol", "consumer", "--assignor", "range"], ["--member"]),
    (["--protocol", "zk", "--assignor", "range", "--member", "a=t0"], ["--protocol"]),
])
def test_mistakes_are_one_line(args: list[str], words: list[str]) -> None:
    proc = grouplab("--topics", "t0:1", *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 or args[:2] == ["--protocol", "zk"], proc.stderr  # argparse's own: usage + message
    for word in words:
        assert word in proc.stderr, proc.stderr
