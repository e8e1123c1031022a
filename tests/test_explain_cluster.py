"""`explain` of a cluster of brokers (issue 24): a scripted three-broker run of the pure Broker
(grouplab/teach/failover_run.py: orders' coordinator broker killed, restarted, the automatic
preferred-leader election giving the group back) replays identically and is told in both
languages, pinned in golden files (tests/golden/explain/coordinator-failover-*.md); the sentences
the brief names are in the terminal form; leaders moving by the hundred are summed up; the
catalogues have every key the cluster narration asks for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grouplab.replay import replay
from grouplab.teach.catalog import Catalog, load
from grouplab.teach.explain import markdown, mermaid, narrate_run, text_lines
from grouplab.teach.failover_run import write_failover_run
from grouplab.teach.narrate import Narrator
from tests.golden_files import GOLDEN, compare

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_failover_run(tmp_path_factory.mktemp("failover"))


def terminal(run: Path, lang: str) -> str:
    story = narrate_run(run, lang)
    return "\n".join(line for _, line in text_lines(story, story.steps, Catalog(lang)))


def test_the_scripted_run_replays_identically(run: Path) -> None:
    result = replay(run)
    assert result.identical, result.difference
    assert result.events_compared and result.requests > 30


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_failover_story_is_identical_to_golden(run: Path, lang: str) -> None:
    story = narrate_run(run, lang)
    c = Catalog(lang)
    text = markdown(story, story.steps, c, c.t("title.run", group=story.group, run="coordinator-failover"))
    compare(text.encode(), GOLDEN / "explain" / f"coordinator-failover-{lang}.md")


def test_the_story_tells_the_move_the_load_who_found_it_and_the_election(run: Path) -> None:
    text = terminal(run, "en")
    for said in (
        "+10.000 s  cluster ⚡: broker 1 is killed",
        "cluster ⇒ brokers: live brokers: 0, 2",
        "18 partitions get a new leader: broker 2 ← t-1, 17 of __transaction_state",  # a summary, not 18 names
        "the coordinator of orders moves from broker 1 to broker 2, the new leader of __consumer_offsets-31",
        "broker 2 loads it for 1000 ms",
        "m-0 → broker 2: Heartbeat for generation 1",
        "broker 2 → m-0: Heartbeat answered NONE",
        "broker 2 is still loading orders, yet answers this Heartbeat NONE",
        '"blindly"',
        "OffsetCommit answered COORDINATOR_LOAD_IN_PROGRESS",
        "(790 ms to go)",
        "m-0 reaches the new coordinator of orders, broker 2, 0.060 s after the move",
        "m-1 reaches the new coordinator of orders, broker 2, 0.210 s after the move",
        "broker 2 has loaded orders from __consumer_offsets-31, 1000 ms after the move",
        "broker 1 starts again",
        "auto.leader.rebalance.enable's check",
        "the coordinator of orders moves from broker 2 to broker 1",
        "Heartbeat answered NOT_COORDINATOR",
        "The coordinator of group orders moved from broker 2 to broker 1 0.100 s ago (the automatic preferred-leader "
        "election)",
        "m-1 reaches the new coordinator of orders, broker 1, 1.260 s after the move",
        "FindCoordinator answered: broker 1 at 127.0.0.1:9193",
    ):
        assert said in text, said
    # Each client is said to find the new coordinator once per move, at its first request there.
    assert text.count("m-0 reaches the new coordinator") == 2 and text.count("m-1 reaches the new coordinator") == 2


def test_the_chinese_story_says_it_in_chinese(run: Path) -> None:
    text = terminal(run, "zh")
    for said in ("broker 1 被杀死", "orders 的协调者从 broker 1 移到 broker 2", "却对这个 Heartbeat 答复 NONE",
                 "m-0 在移动之后 0.060 秒找到了 orders 的新协调者 broker 2", "COORDINATOR_LOAD_IN_PROGRESS"):
        assert said in text, said
    for english in ("is killed", "moves from", "reaches the new coordinator", "still loading", "answered"):
        assert english not in text, english


def test_mermaid_draws_each_broker_as_a_participant(run: Path) -> None:
    story = narrate_run(run, "en")
    diagram = mermaid(story, story.steps, Catalog("en"))
    names = re.findall(r"participant P\d+ as (.+)", diagram)
    assert {"broker 0", "broker 1", "broker 2", "m-0", "m-1"} <= set(names)
    assert "Note over P0: ⚡ broker 1 is killed" in diagram


def test_hundreds_of_moved_leaders_are_counted_per_new_leader() -> None:
    narrator = Narrator("en")
    moved = [["big", p, 1, 2 if p % 2 else 0, 1] for p in range(300)] + [["__transaction_state", 7, 1, 2, 1]]
    text = narrator.cluster.leaders_text(moved)
    assert text == ("broker 0 ← 150 partitions of users' topics; "
                    "broker 2 ← 150 partitions of users' topics, 1 of __transaction_state")
    assert narrator.cluster.leaders_text([["t", 0, 1, -1, 1]]) == "no broker ← t-0"


def test_every_key_the_cluster_narration_asks_for_exists() -> None:
    source = (ROOT / "grouplab" / "teach" / "narrate_cluster.py").read_text()
    literal = set(re.findall(r'\bt\("([a-zA-Z_.]+)"', source))
    made = {f"{k}.{how}" for k in ("cluster.down", "why.cluster.down") for how in ("killed", "shutdown")} | {
        f"cluster.cause.{cause}" for cause in ("broker_stopped", "broker_started", "preferred_election",
                                               "auto_leader_rebalance")}
    assert literal
    for lang in ("en", "zh"):
        texts = load(lang)
        assert sorted(k for k in literal | made if k not in texts) == [], lang
