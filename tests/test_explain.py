"""`grouplab explain` (issue 12): a run told message by message from its replayed trace, in every
catalogue's language. The narration of a seeded simulator run is deterministic, so it is pinned in
golden files (tests/golden/explain/, both languages); the catalogues are held to each other and to
the keys the narrator uses; the mermaid form is checked for its structure; and a user's mistakes
get one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import load_scenario
from grouplab.teach.catalog import Catalog, languages, load, placeholders
from grouplab.teach.explain import Filter, markdown, mermaid, narrate_run, select
from grouplab.protocol.states import RebalanceCause, RemovalReason
from tests.golden_files import GOLDEN, compare

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grouplab.cli", *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=180, input=stdin)


@pytest.fixture(scope="module")
def static_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("static")
    run_seed(load_scenario(ROOT / "grouplab" / "scenarios" / "static-members.toml"), 1, run_dir)
    return run_dir


# ----------------------------------------------------------------------------- catalogues


def test_every_language_has_every_text_with_the_same_placeholders() -> None:
    english = load("en")
    assert set(languages()) >= {"en", "zh"}
    for lang in languages():
        texts = load(lang)
        assert set(texts) == set(english), (lang, set(texts) ^ set(english))
        for key, text in english.items():
            assert placeholders(texts[key]) == placeholders(text), (lang, key)


def test_every_key_the_narrator_asks_for_exists() -> None:
    source = "".join((ROOT / "grouplab" / "teach" / name).read_text() for name in ("narrate.py", "explain.py"))
    literal = set(re.findall(r'\bt\("([a-zA-Z_.]+)"', source)) | set(re.findall(r'has\("([a-zA-Z_.]+)"\)', source))
    made = ({f"dec.rebalance.{c.value}" for c in RebalanceCause} | {f"why.rebalance.{c.value}" for c in RebalanceCause}
            | {f"why.removed.{r.value}" for r in RemovalReason} | {"parked.JoinGroup", "parked.SyncGroup"})
    texts = load("en")
    assert literal, "the pattern found no keys: it no longer matches the code"
    assert sorted(k for k in literal | made if k not in texts) == []


def test_an_unknown_language_is_one_line() -> None:
    out = cli("explain", "held-sync", "--lang", "fr")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--lang 'fr': choose one of en, zh" in out.stderr


# ----------------------------------------------------------------------------- golden narrations


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("scenario", ["static-members", "held-sync", "clean-shutdown"])
def test_narration_is_identical_to_golden(scenario: str, lang: str, tmp_path: Path) -> None:
    run_seed(load_scenario(ROOT / "grouplab" / "scenarios" / f"{scenario}.toml"), 1, tmp_path)
    story = narrate_run(tmp_path, lang)
    c = Catalog(lang)
    text = markdown(story, story.steps, c, c.t("title.run", group=story.group, run=f"{scenario}, seed 1"))
    compare(text.encode(), GOLDEN / "explain" / f"{scenario}-{lang}.md")


def test_the_terminal_form_names_the_rules_a_crash_shows(tmp_path: Path) -> None:
    out = cli("explain", "crash-storm", "--seed", "1")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for rule in ("MEMBER_ID_REQUIRED", "KIP-394", "group.initial.rebalance.delay.ms", "KIP-134",
                 "crashes: the process dies without a LeaveGroup", "session.timeout.ms",
                 "that wait is the cost of a crash", "REBALANCE_IN_PROGRESS", "you are the leader",
                 "routine messages: Heartbeat"):
        assert rule in text, rule
    # A rule is stated once, where the run first shows it.
    assert text.count("must join again with it: if its first JoinGroup were retried") == 1


def test_chinese_narration_of_the_same_run(tmp_path: Path) -> None:
    out = cli("explain", "crash-storm", "--seed", "1", "--lang", "zh", "--to", "60")
    assert out.returncode == 0, out.stderr
    assert "崩溃" in out.stdout and "再均衡" in out.stdout and "MEMBER_ID_REQUIRED" in out.stdout
    assert "the process dies" not in out.stdout  # no English sentence leaks through


# ----------------------------------------------------------------------------- choosing steps


def test_generation_filter_keeps_the_rebalance_that_formed_it(static_run: Path) -> None:
    story = narrate_run(static_run)
    chosen = select(story, Filter(generation=1))
    assert chosen and all(s.generation in (0, 1) for s in chosen if s.generation is not None)
    said = " ".join(line.text for s in chosen for line in s.lines)
    assert "generation 1 formed" in said and "Stable in generation 1" in said
    assert "generation 2 formed" not in said


def test_time_window(static_run: Path) -> None:
    story = narrate_run(static_run)
    chosen = select(story, Filter(from_s=5, to_s=7))
    assert chosen and all(5 <= (s.ts_ms - story.start_ms) / 1000 <= 7 for s in chosen)


def test_an_empty_selection_says_so_and_exits_1(static_run: Path) -> None:
    out = cli("explain", str(static_run), "--generation", "99")
    assert out.returncode == 1 and "no step of this run matches" in out.stderr and "Traceback" not in out.stderr


def test_step_mode_waits_for_enter_and_q_quits(static_run: Path) -> None:
    out = cli("explain", str(static_run), "--step", stdin="\n\nq\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("Enter: next step") == 3
    assert len(re.findall(r"\+\d+\.\d{3} s  ", out.stdout)) == 3  # three steps, then q


# ----------------------------------------------------------------------------- mermaid


def test_mermaid_is_a_sequence_diagram_of_the_run(static_run: Path) -> None:
    story = narrate_run(static_run)
    text = mermaid(story, story.steps, Catalog("en"))
    lines = text.splitlines()
    assert lines[0] == "sequenceDiagram"
    participants = [re.fullmatch(r"    participant (P\d+) as (\S+)", line) for line in lines if "participant" in line]
    assert all(participants) and participants[0] and participants[0].group(2) == "coordinator"
    aliases = {m.group(1) for m in participants if m}
    assert len(aliases) >= 1 + 6  # the coordinator and the scenario's six members (and a static member's new process)
    body = lines[1 + len(aliases):]
    depth = 0
    for line in body:  # every statement is a message between known participants, a note, or a block
        if line.startswith("    rect "):
            depth += 1
            continue
        if line == "    end":
            depth -= 1
            assert depth >= 0, "a block closed that was not open"
            continue
        m = re.fullmatch(r"    (P\d+)(->>|-->>)(P\d+): (.+)", line) or re.fullmatch(r"    Note over (P\d+(,P\d+)*): (.+)", line)
        assert m, line
        assert ";" not in line and "#" not in line
        for alias in re.findall(r"P\d+", line.split(":")[0]):
            assert alias in aliases, line
    assert depth == 0, "every block is closed"
    assert any("->>" in line and "JoinGroup" in line for line in body)
    assert any("-->>" in line and "SyncGroup answered" in line for line in body)
    # Issue 25: times where time passed, and each rebalance shaded as a block.
    assert re.search(r"Note over P0,P\d+: ⏱ \+\d+\.\d{3} s \(\d+\.\d s later\)", text)
    assert any(line.startswith("    rect ") for line in body)


def test_a_crashed_member_has_its_own_lifeline_and_the_handout_embeds_the_diagram() -> None:
    """Issue 25, item 5: the crash is a note over the crashed member's lifeline (it was one over the
    coordinator), and the markdown page carries the diagram."""
    out = cli("explain", "crash-timeout", "--format", "mermaid")
    assert out.returncode == 0, out.stderr
    alias = re.search(r"participant (P\d+) as m-1\n", out.stdout)
    assert alias, out.stdout[:500]
    assert re.search(rf"Note over {alias.group(1)}: ⚡ m-1 crashes", out.stdout)
    page = cli("explain", "crash-timeout", "--format", "markdown")
    assert page.returncode == 0 and "```mermaid\nsequenceDiagram\n" in page.stdout


def test_mermaid_draws_every_variant_of_a_lesson(tmp_path: Path) -> None:
    """Issue 25, item 5: a lesson told in variants has a diagram per variant (it was the first's
    only): on stdout each after a `%%` comment naming it, with --out one file per variant."""
    out = cli("explain", "eager-vs-cooperative", "--format", "mermaid")
    assert out.returncode == 0, out.stderr
    assert re.findall(r"^%% (.*)$", out.stdout, re.M) == ["eager: range", "cooperative: cooperative-sticky"]
    assert out.stdout.count("sequenceDiagram\n") == 2
    written = cli("explain", "eager-vs-cooperative", "--format", "mermaid", "--out", str(tmp_path / "lesson.mmd"))
    assert written.returncode == 0, written.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lesson-cooperative.mmd", "lesson-eager.mmd"]
    assert all(p.read_text().startswith("sequenceDiagram\n") for p in tmp_path.iterdir())


def test_markdown_and_mermaid_to_a_file(static_run: Path, tmp_path: Path) -> None:
    for fmt in ("markdown", "mermaid"):
        out_file = tmp_path / f"story.{fmt}"
        out = cli("explain", str(static_run), "--format", fmt, "--out", str(out_file))
        assert out.returncode == 0, out.stderr
        assert out_file.read_text().startswith("# How group" if fmt == "markdown" else "sequenceDiagram")


# ----------------------------------------------------------------------------- mistakes


def test_a_target_that_is_neither_a_run_nor_a_scenario(tmp_path: Path) -> None:
    out = cli("explain", "no-such-thing")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "not a run directory" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_a_run_directory_without_a_trace(tmp_path: Path) -> None:
    (tmp_path / "coordinator.jsonl").write_text("")
    out = cli("explain", str(tmp_path))
    assert out.returncode == 1 and "no message trace" in out.stderr and "Traceback" not in out.stderr


# ----------------------------------------------------------------------------- a topic deleted


async def test_a_topic_deletion_is_told_with_what_went_in_every_language(tmp_path: Path) -> None:
    """A run over loopback: topics t and u, group g's committed offsets of u, then DeleteTopics of
    u and an unknown name. The story tells the request, the deletion and its rule, the group's
    offsets going, and the answer per name."""
    from grouplab.admin import AdminClient
    from grouplab.coordinator.config import BrokerConfig
    from grouplab.coordinator.server import CoordinatorServer
    from grouplab.eventlog import run_dir_log
    from grouplab.protocol.types import TopicPartition
    from grouplab.teach.explain import text_lines
    from grouplab.tracefile import TraceFile, trace_path

    events, trace = run_dir_log(tmp_path, "coordinator"), TraceFile(trace_path(tmp_path))
    server = await CoordinatorServer(BrokerConfig(), "127.0.0.1", 0, events=events, trace=trace).start()
    try:
        async with AdminClient("127.0.0.1", server.port) as admin:
            await admin.create_topics({"t": 1, "u": 2})
            await admin.commit_offsets("g", {TopicPartition("u", 0): 3, TopicPartition("u", 1): 5})
            await admin.delete_topics(["u", "nosuch"])
    finally:
        await server.stop()
        events.close()
        trace.close()
    told = {
        "en": ["DeleteTopics of u, nosuch", "topic u is deleted: its 2 partitions and their records are gone",
               "no time is counted for it from now on", "group g's offsets of u-0,1 are deleted",
               "As Kafka's group coordinator does for deleted partitions",
               "DeleteTopics answered: u NONE, nosuch UNKNOWN_TOPIC_OR_PARTITION"],
        "zh": ["DeleteTopics：删除 u, nosuch", "主题 u 被删除：它的 2 个分区及其中的记录都不复存在", "不再为它计算任何时间",
               "组 g 在 u-0,1 上的 offset 被删除", "DeleteTopics 的答复：u NONE, nosuch UNKNOWN_TOPIC_OR_PARTITION"],
    }
    for lang, sentences in told.items():
        story = narrate_run(tmp_path, lang)
        text = "\n".join(line for _, line in text_lines(story, story.steps, Catalog(lang)))
        for sentence in sentences:
            assert sentence in text, (lang, sentence, text)
        if lang == "zh":
            assert "is deleted" not in text and "answered" not in text  # no English sentence leaks through


def test_a_crash_gap_forgets_the_partitions_of_a_topic_deleted_meanwhile() -> None:
    """b crashed holding t-1 and u-0; u is deleted; the next generation gives t-1 to a: b's
    partitions have a consumer again (u-0 no longer exists), so the gap is told then."""
    from grouplab.coordinator.group import GroupState
    from grouplab.protocol import events
    from grouplab.protocol.effects import LogEvent
    from grouplab.protocol.types import TopicPartition
    from grouplab.replay import Step
    from grouplab.teach.narrate import Narrator

    narrator = Narrator("en")
    notes = narrator.notes
    narrator.learn_member("a-1", "a")
    narrator.learn_member("b-1", "b")
    notes.assigned = {"a-1": {TopicPartition("t", 0)}, "b-1": {TopicPartition("t", 1), TopicPartition("u", 0)}}
    notes.fault("crash", ["b"], 1_000)

    def step(ts: int, payload: events.Event) -> Step:
        return Step(1, {"kind": "timer", "ts_ms": ts, "key": ["other"]}, [], [LogEvent(ts, payload)], None)

    assert notes.after(step(2_000, events.TopicDeleted("u", 1, 1)), None, None) == []
    assert [g.partitions for g in notes.gaps] == [{TopicPartition("t", 1)}]
    assert notes.assigned["b-1"] == {TopicPartition("t", 1)}
    stable = events.GroupStable("g", 2, GroupState.STABLE, "a-1", "range", {"a-1": [["t", 0], ["t", 1]]}, {"a-1": "a"})
    (note,) = notes.after(step(7_000, stable), None, None)
    assert "t-1" in note.text and "6.000" in note.text and not notes.gaps


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_wording_agrees_with_the_story(lang: str) -> None:
    """Issue 25, item 4: a cooperative member gives up its moving partitions after its SyncGroup,
    not before its JoinGroup; its follow-up rejoin changed its owned partitions, not (only) its
    subscription; at-most-once crashes after the commit, before processing."""
    c = Catalog(lang)
    why = c.t("why.Heartbeat.REBALANCE_IN_PROGRESS")
    assert ("SyncGroup" in why) and why.index("SyncGroup") > why.index("JoinGroup")
    changed = c.t("dec.rebalance.member_metadata_changed", subject="m-1")
    assert ("owns" in changed) if lang == "en" else ("拥有" in changed)
    intro = c.t("lesson.delivery-semantics.intro")
    assert ("crashes after the commit and before processing" in intro) if lang == "en" else ("提交之后、处理之前崩溃" in intro)
