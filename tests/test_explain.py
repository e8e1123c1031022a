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
    for line in body:  # every statement is a message between known participants, or a note
        m = re.fullmatch(r"    (P\d+)(->>|-->>)(P\d+): (.+)", line) or re.fullmatch(r"    Note over (P\d+(,P\d+)*): (.+)", line)
        assert m, line
        assert ";" not in line and "#" not in line
        for alias in re.findall(r"P\d+", line.split(":")[0]):
            assert alias in aliases, line
    assert any("->>" in line and "JoinGroup" in line for line in body)
    assert any("-->>" in line and "SyncGroup answered" in line for line in body)


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
