"""`--lang zh` says everything in Chinese (issue 25, item 3): the story of every lesson, the
coordinator's and a consumer's terminal views carry no English sentence. English that stays is
what Kafka names (APIs, error codes, configs, assignors, delivery modes, commands), allowed below;
a run of three or more other English words is an untranslated sentence."""

from __future__ import annotations

import os
import re

import pytest
from rich.console import Console

from grouplab.cli import main
from grouplab.readable import ConsumerView, CoordinatorView
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import load_scenario, resolve_scenario
from grouplab.teach.lessons import lesson_names

ENGLISH_RUN = re.compile(r"[A-Za-z][a-z]+(?:[ ,'-]+[a-z]+){2,}")
# Names that stay as Kafka spells them (a run made only of these words is not a sentence).
NAMES = {"at", "least", "most", "once", "exactly", "sticky", "roundrobin", "range", "cooperative", "uniform",
         "consumer", "classic", "kafka", "leader", "election", "sh", "type", "eager"}


def untranslated(text: str) -> list[str]:
    return sorted({m for m in ENGLISH_RUN.findall(text) if not set(re.findall(r"[a-z]+", m.lower())) <= NAMES})


@pytest.mark.parametrize("lesson", lesson_names())
def test_every_lesson_is_told_in_chinese(lesson: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", lesson, "--lang", "zh"]) == 0
    assert untranslated(capsys.readouterr().out) == []


@pytest.mark.parametrize("scenario, member", [("crash-storm", "m-1"), ("delivery-exactly-once", "m-0"),
                                              ("kip848-rolling-restart", "m-0"), ("coordinator-failover", "m-0")])
def test_the_terminal_views_speak_chinese(scenario: str, member: str) -> None:
    console = Console(width=140, record=True, color_system=None, force_terminal=False, file=open(os.devnull, "w"))
    coordinator, consumer = CoordinatorView(console, "zh"), ConsumerView(console, "zh")

    def listen(node: str, ev) -> None:
        coordinator(node, ev)
        if node == member:
            consumer(node, ev)

    run_seed(load_scenario(resolve_scenario(scenario)), 1, listener=listen)
    assert untranslated(console.export_text()) == []


def test_the_check_finds_an_english_sentence() -> None:
    assert untranslated("理由：the consumer is closing · 协议 cooperative-sticky · at-least-once") == [
        "the consumer is closing"]
