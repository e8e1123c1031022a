"""`grouplab coordinator --brokers N`'s terminal (readable.CoordinatorView) over a cluster's events:
one line per broker stopping or starting, per coordinator move and per load, leaders moving summed
up per new leader (hundreds of partitions are a count, not a flood), each rule's why once. The
scripted three-broker run's view is golden in both languages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rich.console import Console

from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.readable import CoordinatorView
from grouplab.runlog import read_run
from grouplab.teach.failover_run import T0, write_failover_run
from tests.golden_files import GOLDEN, compare


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_failover_run(tmp_path_factory.mktemp("failover"))


def console() -> Console:
    return Console(width=200, record=True, color_system=None, force_terminal=False, file=open(os.devnull, "w"))


def view_of(run: Path, lang: str) -> str:
    out = console()
    view = CoordinatorView(out, lang)
    for node, ev in read_run(run).events:
        view(node, LogEvent(ev.ts_ms - T0, ev.payload))  # seconds from the start, not a time of day
    return out.export_text()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_failover_view_is_identical_to_golden(run: Path, lang: str) -> None:
    compare(view_of(run, lang).encode(), GOLDEN / "readable" / f"coordinator-failover-{lang}.txt")


def test_one_line_per_broker_change_move_and_load(run: Path) -> None:
    text = view_of(run, "en")
    lines = text.splitlines()
    for said in ("+10.000 s  broker 1 killed · live brokers: 0, 2",
                 "+10.000 s  18 partitions have a new leader: broker 2 ← t-1, 17 of __transaction_state",
                 "+10.000 s  orders: coordinator moves from broker 1 to broker 2 (broker 1 stopped) · __consumer_offsets-31 "
                 "· loading for 1000 ms",
                 "+11.000 s  orders: broker 2 has loaded the group and coordinates it now",
                 "+17.000 s  broker 1 started again · live brokers: 0, 1, 2",
                 "+27.000 s  18 partitions go back to their preferred leader (the automatic preferred-leader election)",
                 "+27.000 s  orders: coordinator moves from broker 2 to broker 1 (the automatic preferred-leader election)"):
        assert any(line.startswith(said) for line in lines), said
    assert sum("coordinator moves from" in line for line in lines) == 2
    assert text.count("A group's coordinator is the leader of its partition") == 1  # each rule once


def test_a_flood_of_leader_moves_is_one_line() -> None:
    out = console()
    view = CoordinatorView(out, "en")
    moved = [["big", p, 0, 1 + p % 2, 1] for p in range(500)]
    view("coordinator", LogEvent(5_000, events.BrokerStopped(0, [1, 2], "shutdown")))
    view("coordinator", LogEvent(5_000, events.LeadersMoved("broker_stopped", moved)))
    lines = [line for line in out.export_text().splitlines() if line.strip()]
    assert lines == ["+5.000 s  broker 0 shut down · live brokers: 1, 2",
                     "+5.000 s  500 partitions have a new leader: broker 1 ← 250 partitions of users' topics; "
                     "broker 2 ← 250 partitions of users' topics"]
