"""The built-in lessons (issue 12): every lesson runs, and its story says the rule it teaches, in
every language; three lessons' pages are pinned in golden files (tests/golden/lessons/); the
lessons are listed, kept apart from the built-in scenarios, and a wrong name is one line; and the
scenario format's two additions (member `names`, the `[lesson]` table and its variants) are
checked like the rest of the format."""

from __future__ import annotations

import os
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import ScenarioError, builtin_scenario_names, resolve_scenario, scenario_from_text
from grouplab.teach import compare_lesson
from grouplab.teach.catalog import Catalog, languages, load
from grouplab.teach.explain import Filter, text_lines
from grouplab.teach.lessons import Lesson, find_lesson, lesson_names, load_lesson, markdown_page, measure, tell
from grouplab.teach.notes import GAP_FAULTS
from tests.golden_files import GOLDEN, compare

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}

# What each lesson must say: catalogue keys (their words, in the language told) and literal names
# (KIPs, Kafka's error and config names, offsets) that are the same in every language.
RULES: dict[str, tuple[list[str], list[str]]] = {
    "first-join": (["why.JoinGroup.MEMBER_ID_REQUIRED", "why.initial_delay", "note.delay_extended"],
                   ["MEMBER_ID_REQUIRED", "KIP-394", "KIP-134", "group.initial.rebalance.delay.ms"]),
    "join-stable": (["dec.rebalance.member_joined", "why.Heartbeat.REBALANCE_IN_PROGRESS", "req.gave_up"],
                    ["REBALANCE_IN_PROGRESS"]),
    "clean-leave": (["why.rebalance.member_left", "note.gap.direct", "why.gap.leave"], ["LeaveGroup"]),
    "crash-timeout": (["why.rebalance.session_timeout", "note.gap", "why.gap.crash"], ["session.timeout.ms"]),
    "leader-leaves": (["note.new_leader", "why.new_leader"], []),
    "protocol-vote": (["why.protocol_vote", "vote.tally.excluded"], ["roundrobin 2"]),
    "eager-vs-cooperative": (["note.cooperative", "why.cooperative", "why.member.cooperative_followup", "req.owned", "req.gave_up",
                              "compare.rebalances", "compare.revoked"], ["KIP-429"]),
    "static-restart": (["dec.static_member_replaced", "why.static_member_replaced", "why.gap.static_restart"],
                       ["KIP-345", "group.instance.id"]),
    "zombie-commit": (["dec.commit_rejected", "why.OffsetCommit.UNKNOWN_MEMBER_ID", "world.again.stale",
                       "world.refused"], ["UNKNOWN_MEMBER_ID", "in-2@65..69"]),
    "partitions-added": (["fault.add_partitions", "why.fault.add_partitions", "why.rejoin.partitions"],
                         ["metadata.max.age.ms"]),
    "idle-consumers": (["note.idle", "why.idle"], []),
    "coordinator-moves": (["dec.cluster.moved", "why.cluster.moved", "note.cluster.found", "note.cluster.blind",
                           "why.cluster.blind", "why.cluster.moved.election", "why.cluster.NOT_COORDINATOR.moved"],
                          ["__consumer_offsets", "FindCoordinator", "NOT_COORDINATOR"]),
    "kip848-join": (["dec.cg.epoch", "dec.cg.target", "dec.cg.unrevoked", "dec.cg.unreleased", "why.cg.unreleased"],
                    ["KIP-848", "uniform"]),
    "kip848-crash": (["dec.cg.removed", "why.cg.removed.session_timeout", "note.gap.cg", "why.gap.cg.crash"],
                     ["group.consumer.session.timeout.ms"]),
    "kip848-slow-revoker": (["dec.cg.unrevoked", "why.cg.removed.rebalance_timeout", "why.ConsumerGroupHeartbeat.UNKNOWN_MEMBER_ID"],
                            ["rebalance_timeout", "UNKNOWN_MEMBER_ID"]),
    "classic-vs-consumer": (["compare.rebalances", "compare.epochs", "note.cooperative", "dec.cg.target", "note.gap.cg"],
                            ["KIP-848", "KIP-429"]),
    "delivery-semantics": (["world.crash.committed", "world.skipped", "world.crash.processed", "world.again",
                            "world.crash.txn", "world.aborted", "world.account.missing", "world.account.twice",
                            "world.account.clean", "compare.lost", "compare.duplicated"],
                           ["in-1@35..39", "KIP-447", "read_committed"]),
    "zk-vs-coordinator": (["cmp.why.first_join", "cmp.why.notify", "cmp.why.crash", "cmp.why.grow.on_change",
                           "cmp.costs.herd_all", "cmp.lesson.summary"],
                          ["group.initial.rebalance.delay.ms", "rebalance.max.retries", "KIP-848", "ZooKeeper"]),
}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grouplab.cli", *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=180)


def words(template: str) -> str:
    """The longest stretch of a catalogue text between its placeholders: what must show in a
    sentence made from it, whatever was filled in."""
    parts = [literal for literal, _, _, _ in string.Formatter().parse(template)]
    return max((p.strip(" :;,.·—") for p in parts), key=len)


def told_text(lesson: Lesson, lang: str, tmp: Path) -> str:
    c = Catalog(lang)
    if lesson.spec.compare:  # told through grouplab compare (grouplab/teach/compare_lesson.py)
        told = compare_lesson.play(lesson.scenario, lesson.spec.seed)
        return compare_lesson.markdown(told, c, c.t("title.lesson", title=lesson.title(c)), lesson.intro(c)) + \
            "\n".join(line for _, line in compare_lesson.text_lines(told, c))
    told = tell(lesson, lesson.spec.seed, lang, Filter(), tmp)
    return markdown_page(told, c, c.t("title.lesson", title=lesson.title(c)), lesson.intro(c)) + "\n".join(
        line for t in told for _, line in text_lines(t.story, t.steps, c))


# ----------------------------------------------------------------------------- the lessons


def test_every_lesson_of_the_issue_is_there_and_apart_from_the_scenarios() -> None:
    assert lesson_names() == sorted(RULES)
    assert not set(lesson_names()) & set(builtin_scenario_names())
    for name in lesson_names():
        with pytest.raises(ScenarioError):
            resolve_scenario(name)  # `simulate --scenario NAME` does not see the lessons
        path = find_lesson(name)
        assert path is not None and path.parent.name == "lessons"
        lesson = load_lesson(path)
        assert lesson.scenario.lesson is not None, f"{name} has no [lesson] table"
        assert lesson.scenario.duration_ms <= 60_000 and sum(lesson.scenario.topics.values()) <= 8
        assert 2 <= lesson.scenario.member_count <= 4
        assert lesson.scenario.schedule or lesson.spec.variants or lesson.scenario.faults or name in (
            "first-join", "protocol-vote", "idle-consumers", "join-stable", "kip848-join")
        assert not any(getattr(lesson.scenario.random, k) for k in ("crash", "hang", "leave", "partition"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_lesson_has_a_title_and_an_introduction(lang: str) -> None:
    c = Catalog(lang)
    for name in lesson_names():
        lesson = load_lesson(find_lesson(name) or "")
        assert c.texts.get(f"lesson.{name}.title") and c.texts.get(f"lesson.{name}.intro"), (lang, name)
        for variant in lesson.spec.variants:
            assert c.texts.get(f"lesson.{name}.variant.{variant['label']}"), (lang, name, variant["label"])


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_lesson_runs_and_says_its_rule(name: str, tmp_path: Path) -> None:
    keys, literals = RULES[name]
    lesson = load_lesson(find_lesson(name) or "")
    for lang in ("en", "zh"):
        text = told_text(lesson, lang, tmp_path / lang)
        c = Catalog(lang)
        for key in keys:
            assert words(c.texts[key]) in text, (name, lang, key, words(c.texts[key]))
        for literal in literals:
            assert literal in text, (name, lang, literal)
        if lang == "zh":
            assert "the coordinator" not in text and "had no consumer" not in text  # no English sentence leaks


def test_the_comparisons_measure_what_the_lessons_claim(tmp_path: Path) -> None:
    coop = tell(load_lesson(find_lesson("eager-vs-cooperative") or ""), 1, "en", Filter(), tmp_path / "coop")
    eager, cooperative = (t.measures for t in coop)
    assert (eager.rebalances, cooperative.rebalances) == (1, 2)
    assert eager.revoked == 6 and cooperative.revoked == 2  # eager gives up everything, cooperative only what moves
    assert cooperative.longest_s > eager.longest_s  # the moving partitions wait for the second rebalance
    delivery = tell(load_lesson(find_lesson("delivery-semantics") or ""), 1, "en", Filter(), tmp_path / "delivery")
    assert [(t.measures.lost, t.measures.duplicated) for t in delivery] == [(5, 0), (0, 5), (0, 0)]


def test_classic_and_consumer_protocol_compare_as_the_lesson_says(tmp_path: Path) -> None:
    """A join then a crash: eager gives up everything twice, cooperative and KIP-848 only what
    moves (m-2's two, then the crashed m-0's two); KIP-848 has no rebalance, two group epochs; and
    the crash's session timeout is the longest wait in all three."""
    told = tell(load_lesson(find_lesson("classic-vs-consumer") or ""), 1, "en", Filter(), tmp_path)
    eager, cooperative, consumer = (t.measures for t in told)
    assert (eager.rebalances, cooperative.rebalances, consumer.rebalances) == (2, 3, 0)
    assert (eager.epochs, cooperative.epochs, consumer.epochs) == (0, 0, 2)
    assert (eager.revoked, cooperative.revoked, consumer.revoked) == (12, 4, 4)
    assert all(10 <= m.longest_s <= 10 + 3 + 1 for m in (eager, cooperative, consumer))


def test_a_crash_costs_its_session_timeout(tmp_path: Path) -> None:
    lesson = load_lesson(find_lesson("crash-timeout") or "")
    run_seed(lesson.scenario, lesson.spec.seed, tmp_path)
    m = measure(tmp_path, 0, Filter(from_s=19))
    # m-1's two partitions die with it; range is eager, so the other two members give up their four too
    assert m.revoked == 6 and m.rebalances == 1
    assert 8 < m.longest_s <= 10 + 3  # m-1's: noticed within a session of the crash, then one rebalance


def test_a_deleted_topic_made_again_is_not_waiting_for_a_consumer(tmp_path: Path) -> None:
    """tests/test_costs.py's run: u deleted at 5 s and made again at 7 s; b has the new u-0 at
    8.01 s. Only t's four partitions waited (300 ms of rebalance each): the new u-0 is forming,
    and the old one stopped existing."""
    from tests.test_costs import u_made_again, write_run

    write_run(tmp_path, u_made_again(stale=False))
    m = measure(tmp_path, 0, Filter())
    assert (m.idle_s, m.longest_s, m.rebalances) == (1.2, 0.3, 3)


# ----------------------------------------------------------------------------- golden pages


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", ["crash-timeout", "eager-vs-cooperative", "delivery-semantics", "zombie-commit",
                                  "kip848-join", "kip848-crash", "kip848-slow-revoker", "classic-vs-consumer", "coordinator-moves"])
def test_lesson_page_is_identical_to_golden(name: str, lang: str, tmp_path: Path) -> None:
    lesson = load_lesson(find_lesson(name) or "")
    c = Catalog(lang)
    told = tell(lesson, lesson.spec.seed, lang, Filter(), tmp_path)
    page = markdown_page(told, c, c.t("title.lesson", title=lesson.title(c)), lesson.intro(c))
    compare(page.encode(), GOLDEN / "lessons" / f"{name}-{lang}.md")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_zk_vs_coordinator_page_is_identical_to_golden(lang: str) -> None:
    """Told through grouplab compare: every change under every design with its cause, then the
    verdict naming the design and what the ZooKeeper era's speed cost."""
    lesson = load_lesson(find_lesson("zk-vs-coordinator") or "")
    c = Catalog(lang)
    told = compare_lesson.play(lesson.scenario, lesson.spec.seed)
    assert list(told.results) == ["zk", "eager", "cooperative", "consumer"] and len(told.script.changes) == 5
    page = compare_lesson.markdown(told, c, c.t("title.lesson", title=lesson.title(c)), lesson.intro(c))
    compare(page.encode(), GOLDEN / "lessons" / f"zk-vs-coordinator-{lang}.md")


def test_the_zk_vs_coordinator_lesson_runs_from_the_command_line() -> None:
    for args in (["explain", "zk-vs-coordinator"], ["explain", "--lesson", "zk-vs-coordinator", "--lang", "zh"]):
        out = cli(*args)
        assert out.returncode == 0, out.stderr
        assert "ZooKeeper" in out.stdout and "KIP-848" in out.stdout
    out = cli("explain", "zk-vs-coordinator", "--format", "mermaid")
    assert out.returncode == 2 and "no message diagram" in out.stderr


# ----------------------------------------------------------------------------- the command line


def test_lessons_are_listed_with_their_titles_in_either_language() -> None:
    for args, title in ((["lessons"], "A crash and its session timeout"),
                        (["explain", "--lessons", "--lang", "zh"], "崩溃与会话超时")):
        out = cli(*args)
        assert out.returncode == 0, out.stderr
        listed = [line.split()[0] for line in out.stdout.splitlines()]
        assert listed == lesson_names()
        assert title in out.stdout


def test_explain_a_lesson_prints_its_title_and_introduction_first() -> None:
    out = cli("explain", "crash-timeout")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "Lesson: A crash and its session timeout"
    first = next(i for i, line in enumerate(lines) if re.match(r"\s+(\+\d+\.\d{3} s|…)", line))
    assert " ".join(lines[1:first]).startswith("Three members are Stable; at 20 s m-1 crashes")  # the introduction
    assert re.match(r"\s+\+20\.000 s  fault → m-1: m-1 crashes", lines[first])  # the lesson's moment: from 19 s
    md = cli("explain", "crash-timeout", "--format", "markdown", "--lang", "zh", "--from", "27")
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("# 课程：崩溃与会话超时\n\n三个成员处于 Stable")
    assert "+20.000 s" not in md.stdout  # --from overrides the lesson's own window


def test_a_lesson_told_in_variants_ends_with_the_comparison() -> None:
    out = cli("explain", "eager-vs-cooperative")
    assert out.returncode == 0, out.stderr
    assert out.stdout.index("── eager: range ──") < out.stdout.index("── cooperative: cooperative-sticky ──")
    table = out.stdout.split("── side by side ──")[1].splitlines()
    assert re.fullmatch(r"rebalances\s+1\s+2", table[2].strip())


def test_an_unknown_lesson_is_one_line_and_exit_2() -> None:
    out = cli("explain", "no-such-lesson")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "not a run directory, a scenario or a lesson" in out.stderr and "crash-timeout" in out.stderr


def test_a_lesson_runs_as_a_scenario_too(tmp_path: Path) -> None:
    out = cli("simulate", "--scenario", str(ROOT / "grouplab" / "scenarios" / "lessons" / "static-restart.toml"), "--seed", "1",
              "--run-dir", str(tmp_path), "--timeline-rows", "0")
    assert out.returncode == 0, out.stderr
    assert "all invariants held" in out.stdout
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == ["coordinator.jsonl", "m-0.jsonl", "m-1.jsonl",
                                                               "m-2.jsonl", "simulator.jsonl"]


# ----------------------------------------------------------------------------- the texts


def test_every_text_the_lessons_and_the_world_lines_use_exists() -> None:
    source = "".join((ROOT / "grouplab" / "teach" / name).read_text() for name in ("world.py", "lessons.py", "notes.py", "narrate.py"))
    literal = set(re.findall(r'\bt\("([a-zA-Z_.]+)"', source)) | set(re.findall(r'"(world\.[a-z.]+)"', source))
    made = ({f"gap.what.{f}" for f in GAP_FAULTS} | {f"why.gap.{f}" for f in GAP_FAULTS}
            | {f"why.{k}" for k in literal if k.startswith("world.crash.") or k.startswith("world.again")}
            | {f"compare.{row}" for row in ("rebalances", "revoked", "idle_s", "longest_s", "lost", "duplicated")})
    texts = load("en")
    literal = {k for k in literal if not k.endswith(".")}  # `t("why." + key)`: the keys made above
    assert literal and sorted(k for k in literal | made if k not in texts) == []
    assert set(languages()) >= {"en", "zh"}


# ----------------------------------------------------------------------------- the scenario format


BASE = """
topics = { t0 = 2 }
duration_ms = 10_000
[[members]]
names = ["a", "b"]
count = 2
"""


def test_members_can_be_named() -> None:
    scenario = scenario_from_text(BASE + '[[members]]\nnames = ["c"]\nstart_ms = 5000\n')
    assert [m.names for m in scenario.members] == [["a", "b"], ["c"]]
    resized = scenario.with_members(4)
    assert all(m.names is None for m in resized.members if m.count != len(m.names or []))
    with pytest.raises(ScenarioError, match="must list 3 client id"):
        scenario_from_text(BASE.replace("count = 2", "count = 3"))
    with pytest.raises(ScenarioError, match="given twice"):
        scenario_from_text(BASE + '[[members]]\nnames = ["a"]\n')


def test_the_lesson_table_is_checked_like_the_rest() -> None:
    lesson = scenario_from_text(BASE + "[lesson]\nseed = 3\nfrom_s = 2.5\n").lesson
    assert lesson is not None and (lesson.seed, lesson.from_s, lesson.to_s) == (3, 2.5, None)
    for bad, message in (("[lesson]\nsed = 3\n", "unknown key"),
                         ("[lesson]\nfrom_s = -1\n", "seconds >= 0"),
                         ("[[lesson.variants]]\nassignors = ['range']\n", "needs a label"),
                         ("[[lesson.variants]]\nlabel = 'x'\nassignors = ['nope']\n", "nope"),
                         ("[[lesson.variants]]\nlabel = 'x'\ndelivery = { mode = 'twice' }\n", "delivery")):
        with pytest.raises((ScenarioError, ValueError), match=message):
            scenario_from_text(BASE + bad)


def test_a_variant_is_the_lesson_with_one_thing_changed(tmp_path: Path) -> None:
    path = tmp_path / "l.toml"
    path.write_text(BASE + "[lesson]\n[[lesson.variants]]\nlabel = 'coop'\nassignors = ['cooperative-sticky']\n"
                    "[[lesson.variants]]\nlabel = 'slow'\nconsumer = { 'session.timeout.ms' = 20000 }\n")
    (_, coop), (_, slow) = load_lesson(path).variants()
    assert [m.assignors for m in coop.members] == [["cooperative-sticky"]] and coop.members[0].names == ["a", "b"]
    assert slow.consumer == {"session.timeout.ms": 20000} and slow.members[0].assignors == ["range"]
    assert coop.lesson is None and slow.topics == {"t0": 2}
