"""The dashboard speaks its language (issue 25, item 3; docs/ui.md §1): every word the page shows is
a catalogue text (grouplab/ui/texts.py), index.html's English is the en catalogue's word for word,
the zh page, its state's free texts, its answers and the cluster's refusals carry no English
sentence, and the en page, state and answers read as they did."""

from __future__ import annotations

import json
import re
import string
from typing import Any

import pytest

from grouplab.protocol import events as E
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.states import (ConsumerGroupState as CS, ConsumerMemberState as MS, GroupEpochCause, MemberState,
                                      MembershipState, RebalanceCause, RemovalReason)
from grouplab.teach.catalog import Catalog, load
from grouplab.ui.controls import REFUSALS, say_refusal
from grouplab.ui.model import DashboardModel, say_trigger
from grouplab.ui.texts import PREFIX, page_texts, render_page
from grouplab.ui.web import STATIC
from tests.test_ui_model import A, B, G, PREPARING, coordinator, run_note, two_members
from tests.test_zh_output import untranslated

HTML = (STATIC / "index.html").read_text(encoding="utf-8")
JS = (STATIC / "app.js").read_text(encoding="utf-8")

# The values the page puts into words with word(group, value) (app.js), by group.
WORDS = {
    "fault": ["crash", "hang", "slow", "partition"],  # model.fault_kind: a member's fault, its status
    "kind": ["crash", "hang", "slow", "partition"],  # the same, as a noun (the faults table, cluster.member_faults)
    "reason": [r.value for r in RemovalReason],
    "pstate": ["consumed", "not_consumed", "assigned", "unowned"],  # model.partition_states
    "app": sorted({s.value for s in MemberState} | {s.value for s in MembershipState}),  # a client's state
}


def html_keys() -> set[str]:
    return set(re.findall(r'data-t(?:-title)?="([\w.]+)"', HTML))


def js_keys() -> set[str]:
    """The keys app.js asks t() and tNodes() for: literals, both sides of a `?:`, and the computed
    `status.` + a partition state and `group.value` of word()."""
    keys = set()
    for call in re.findall(r'\b(?:t|tNodes)\(([^()]*?)(?:,\s*\{|\))', JS):
        keys.update(PREFIX + k for k in re.findall(r'(?<!=== )"([a-z_]+(?:\.[a-z_]+)+|[a-z_]+)"', call))
    assert 'status." + p.state' in JS
    keys.update(f"{PREFIX}status.{s}" for s in WORDS["pstate"] if s != "consumed")
    assert set(re.findall(r'\bword\("(\w+)"', JS)) == set(WORDS), "a word() group the test does not know"
    keys.update(f"{PREFIX}{group}.{value}" for group, values in WORDS.items() for value in values)
    return keys


def test_every_key_the_page_uses_is_in_both_catalogues_and_every_page_key_is_used() -> None:
    used = html_keys() | js_keys()
    for lang in ("en", "zh"):
        missing = sorted(k for k in used if k not in load(lang))
        assert missing == [], f"{lang}.toml lacks {missing}"
    unused = sorted(k for k in load("en") if k.startswith(PREFIX) and k not in used)
    assert unused == [], f"page texts nobody shows: {unused}"


def test_page_templates_hold_plain_names_the_page_can_fill() -> None:
    for lang in ("en", "zh"):
        for key, text in page_texts(lang).items():
            for _, name, spec, conversion in string.Formatter().parse(text):
                assert name is None or (re.fullmatch(r"\w+", name) and not spec and conversion is None), (lang, key)


def test_the_pages_english_is_the_en_catalogues_word_for_word() -> None:
    """index.html keeps its English (it is what the page shows before app.js runs and what a reader
    of the file sees): each data-t element's text is the en template, a data-slot child its {name}."""
    en = load("en")
    marked = re.findall(r'<(\w+)[^>]*\sdata-t="([\w.]+)"[^>]*>(.*?)</\1>', HTML, re.S)
    assert len(marked) == len(re.findall(r'\sdata-t="', HTML))
    for _, key, inner in marked:
        text = re.sub(r'<span[^>]*data-slot="(\w+)"[^>]*></span>', r"{\1}", inner)
        assert " ".join(text.split()) == en[key], key
    for key, title in re.findall(r'title="([^"]*)"\s+data-t-title="([\w.]+)"', HTML):
        assert en[title] == key, title
    assert len(re.findall(r"data-t-title=", HTML)) == 3


def test_the_zh_page_has_no_english_sentence_and_says_its_language() -> None:
    texts = page_texts("zh")
    assert {k: untranslated(v) for k, v in texts.items() if untranslated(v)} == {}
    page = render_page(HTML, "zh")
    assert '<html lang="zh">' in page
    sent = json.loads(re.search(r'<script id="texts" type="application/json">(.*?)</script>', page, re.S)[1])
    assert sent == {"lang": "zh", "texts": texts} and sent["texts"]["ui.page.btn.add_member"] == "添加成员"
    # A template holding "</script>" cannot end the script early.
    assert "</" not in render_page(HTML, "zh").split('id="texts"', 1)[1].split("</script>", 1)[0]


def test_the_en_page_is_the_file_with_its_words() -> None:
    page = render_page(HTML, "en")
    assert page.replace(re.search(r'<script id="texts" type="application/json">.*?</script>', page)[0],
                        '<script id="texts" type="application/json">{}</script>') == HTML


def killed_and_removed(model: DashboardModel) -> dict[str, Any]:
    """Two members, one killed and removed at its session timeout, a rebalance under way."""
    two_members(model)
    run_note(model, 4000, "member_crashed", client_id="consumer-2", member_id=B, session_timeout_ms=6000)
    model.feed("consumer-2", LogEvent(4000, E.AppCrashed(G, B)))
    coordinator(model, 9000, E.MemberRemoved(G, 1, PREPARING, B, RemovalReason.SESSION_TIMEOUT, "no heartbeat"))
    coordinator(model, 9000, E.RebalanceStarted(G, 1, PREPARING, f"{B} removed: session_timeout",
                                                RebalanceCause.SESSION_TIMEOUT, [A]))
    return model.snapshot(9050)


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def test_the_zh_state_carries_no_english_sentence_and_the_en_state_its_own_words() -> None:
    zh = killed_and_removed(DashboardModel(G, "zh"))
    assert [s for s in strings(zh) if untranslated(s)] == []
    assert zh["rebalance_trigger"] == f"{B} 被移除：session_timeout"
    assert zh["rebalances"][0]["trigger"] == f"成员 {A} 加入"
    en = killed_and_removed(DashboardModel(G))
    assert en["rebalance_trigger"] == f"{B} removed: session_timeout"
    assert en["rebalances"][0]["trigger"] == f"member {A} joined"
    assert {k: v for k, v in en.items() if k not in ("rebalance_trigger", "rebalances")} == \
           {k: v for k, v in zh.items() if k not in ("rebalance_trigger", "rebalances")}


@pytest.mark.parametrize("cause, detail", [
    (GroupEpochCause.MEMBER_JOINED, f"member {A} joined"),
    (GroupEpochCause.SESSION_TIMEOUT, f"{A} removed: no heartbeat for 45000 ms"),
    (GroupEpochCause.SUBSCRIPTION_CHANGED, f"member {A} subscribes to ['t0', 't1']"),
    (GroupEpochCause.ASSIGNOR_CHANGED, f"member {A} asks for assignor range"),
    (GroupEpochCause.METADATA_CHANGED, "subscribed topics now {'t0': 3}"),
])
def test_a_consumer_groups_epoch_move_is_said_by_its_cause(cause: GroupEpochCause, detail: str) -> None:
    model = DashboardModel(G, "zh")
    coordinator(model, 10, E.ConsumerMemberJoined(G, 0, CS.EMPTY, A, None, "c1", ["t0"], None))
    coordinator(model, 10, E.GroupEpochBumped(G, 1, CS.EMPTY, cause, detail))
    said = model.snapshot(20)["rebalance_trigger"]
    assert untranslated(said) == [] and (A in said or "t0" in said), said
    assert say_trigger(detail, cause.value, Catalog("en")) == detail


REFUSED = [  # what grouplab/cluster.py, coordinator/nodes.py, server.py and the assignors' registry say
    "no running member 'nope' (running: consumer-1, consumer-2)",
    "no running member 'nope' (running: none)",
    "consumer-2 is already hung; resume it first",
    "consumer-2 is already slowed down; resume it first",
    "consumer-2 is already partitioned from the coordinator; resume it first",
    "no fault proxy in this cluster: start it with proxy=True (grouplab ui does)",
    "a partition lasts from more than 0 to 3600 seconds, not -1",
    "consumer-2 is running normally: nothing to resume",
    "unknown topic 'nope' (topics: t0, t1)",
    "t0 has 2 partitions: give a larger total, not 1",
    "CreatePartitions t0 -> 9 refused: INVALID_PARTITIONS",
    "give at least one assignor",
    "unknown assignor 'nope'; available: range, roundrobin",
    "no broker 7: this cluster's brokers are 0..2",
    "broker 1 is already down",
    "broker 1 is already running",
    "this coordinator is one broker (start it with --brokers N for a cluster)",
]


@pytest.mark.parametrize("message", REFUSED)
def test_the_clusters_refusals_read_as_before_in_en_and_in_chinese_in_zh(message: str) -> None:
    assert say_refusal(message, Catalog("en")) == message
    said = say_refusal(message, Catalog("zh"))
    assert said != message and untranslated(said) == [], said


def test_every_refusal_pattern_is_tried() -> None:
    assert {key for pattern, key in REFUSALS} == {
        next(key for pattern, key in REFUSALS if pattern.fullmatch(m)) for m in REFUSED}


def test_every_answer_and_refusal_in_zh_is_chinese() -> None:
    zh = load("zh")
    for key in (k for k in zh if k.startswith(("ui.answer.", "ui.refused."))):
        assert untranslated(zh[key]) == [], key
