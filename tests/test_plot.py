"""`grouplab plot` and its renderer (grouplab/plot.py), the one the Spark report's Gantt chart and
the dashboard's static export share: the chart's data model of a deterministic simulated run held
to a golden file (what is drawn, not the pixels), valid PNG and SVG files whose text names the
members and the "assigned but not consumed" legend, a live snapshot, and the command's errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grouplab.costs import CostTracker
from grouplab.plot import IDLE_LABEL, chart_from_costs, chart_from_run, save
from grouplab.sim.runner import run_seed
from grouplab.sim.scenario import parse_scenario

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "plot-faults.json"
UPDATE = os.environ.get("GROUPLAB_UPDATE_GOLDEN") == "1"

# Three members; m-1 crashes at 20 s (back at 45 s), m-2 hangs 4 s at 60 s, m-0 leaves at 80 s.
FAULTS = {
    "name": "plot-faults", "topics": {"t0": 4, "t1": 2}, "duration_ms": 100_000, "faults_from_ms": 0,
    "broker": {"group.initial.rebalance.delay.ms": 1000},
    "consumer": {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
    "members": [{"count": 3, "assignors": ["range"], "start_ms": [0, 0]}],
    "network": {"delay_ms": [1, 1]},
    "schedule": [{"at_ms": 20_000, "fault": "crash", "members": ["m-1"], "duration_ms": 25_000},
                 {"at_ms": 60_000, "fault": "hang", "members": ["m-2"], "duration_ms": 4_000},
                 {"at_ms": 80_000, "fault": "leave", "members": ["m-0"]}],
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plot") / "faults"
    result = run_seed(parse_scenario(dict(FAULTS)), 1, run_dir=out)
    assert result.ok, result.violation
    return out


def test_the_chart_model_of_a_simulated_run_is_the_golden_one(run_dir: Path) -> None:
    chart = chart_from_run(run_dir)
    model = json.dumps(chart.to_json(), indent=1, sort_keys=True) + "\n"
    if UPDATE:
        GOLDEN.write_text(model)
    assert model == GOLDEN.read_text(), "regenerate with GROUPLAB_UPDATE_GOLDEN=1 and review the diff"
    data = chart.to_json()
    assert data["lanes"] == ["t0-0", "t0-1", "t0-2", "t0-3", "t1-0", "t1-1"]
    # m-1's crash: its partitions idle from the crash until the session timeout removed it (~6 s).
    crashed = [i for i in data["idle"] if i["owner"] == "m-1"]
    assert crashed and all(i["start_ms"] == 20_000 and 4_000 <= i["end_ms"] - i["start_ms"] <= 6_000 for i in crashed)
    hung = [i for i in data["idle"] if i["owner"] == "m-2"]
    assert hung and all((i["start_ms"], i["end_ms"]) == (60_000, 64_000) for i in hung)  # resumed, no rebalance
    assert {f["label"] for f in data["faults"]} == {"crash m-1", "hang m-2", "leave m-0"}
    assert [b["label"] for b in data["bands"] if b["highlight"]]  # the rebalance that repaired the crash
    assert any(b["end"] == "removed" and b["owner"] == "m-1" for b in data["bars"])


def test_png_and_svg_files(run_dir: Path, tmp_path: Path) -> None:
    chart = chart_from_run(run_dir)
    png = save(chart, tmp_path / "timeline.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    from matplotlib.image import imread

    assert imread(str(tmp_path / "timeline.png")).shape[1] > 1000
    svg = save(chart, tmp_path / "timeline.svg").read_text()
    import xml.etree.ElementTree as ET

    ET.fromstring(svg)
    for text in ("m-0", "m-1", "m-2", IDLE_LABEL, "t0-3", "crash m-1", "rebalance"):
        assert text in svg, text


def test_a_live_snapshot_draws_what_is_open_up_to_now(run_dir: Path) -> None:
    from grouplab.runlog import read_run

    costs = CostTracker()
    for node, ev in read_run(run_dir).events:
        if ev.ts_ms > 23_000:
            break
        costs.feed(node, ev)
    chart = chart_from_costs(costs, "sim", now_ms=23_000)
    open_idle = [i for i in chart.idle if i.owner == "m-1"]
    assert open_idle and all((i.start_ms, i.end_ms) == (20_000, 23_000) for i in open_idle)  # still waiting
    assert max(b.end_ms for b in chart.bars) == 23_000


def test_the_command(run_dir: Path, tmp_path: Path) -> None:
    def plot(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "grouplab.cli", "plot", *args], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)

    ok = plot(str(run_dir), "--out", str(tmp_path / "t.svg"))
    assert ok.returncode == 0, ok.stderr
    assert "wrote" in ok.stdout and (tmp_path / "t.svg").is_file()
    for args, message in [((str(run_dir), "--out", str(tmp_path / "t.pdf")), "--out must end in .png or .svg"),
                          ((str(tmp_path / "nothing"), "--out", str(tmp_path / "t.png")), "no such run directory"),
                          ((str(run_dir), "--out", str(tmp_path / "t.png"), "--group", "other"), "no group 'other'")]:
        bad = plot(*args)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and message in bad.stderr, bad.stderr
        assert not (tmp_path / "t.png").exists() and not (tmp_path / "t.pdf").exists()


def test_a_deleted_topics_lanes_end_at_the_deletion_with_a_mark(tmp_path: Path) -> None:
    """tests/test_costs.py's run: a and b on t (4 partitions) and u (2); u deleted at 5 s, made
    again at 7 s with one partition, which b gets. u's bars end at the deletion with the
    deletion's mark, and the title counts no unowned time for u after it."""
    from tests.test_costs import u_made_again, write_run

    write_run(tmp_path / "run", u_made_again(stale=False))
    chart = chart_from_run(tmp_path / "run")
    data = chart.to_json()
    assert data["lanes"] == ["t-0", "t-1", "t-2", "t-3", "u-0", "u-1"]
    u0 = [(b["owner"], b["start_ms"], b["end_ms"], b["end"]) for b in data["bars"] if b["lane"] == "u-0"]
    assert u0 == [("a", 1_010, 5_000, "deleted")]  # (b's holding of the new u-0 begins at the log's end)
    assert [(b["start_ms"], b["end_ms"], b["end"]) for b in data["bars"] if b["lane"] == "u-1"] == [(1_010, 5_000, "deleted")]
    # The log ends at 8.01 s. Unowned: all six partitions until 1.01 s, t's four for the 300 ms of
    # the rebalance, the new u-0 from 7 s until b had it: 8.27 partition-s, of 4 × 8.01 (t) +
    # 2 × 5 (u until its deletion) + 1.01 (the new u-0).
    assert str(data["title"]).endswith("(0 stops), 8.3 unowned, of 43.0")
    svg = save(chart, tmp_path / "t.svg").read_text()
    assert "topic deleted" in svg and "removed or fenced" not in svg


def test_a_chart_in_chinese_has_no_english_sentence_and_no_missing_glyph(run_dir: Path, tmp_path: Path) -> None:
    """--lang zh (issue 25): the title, legend, axis and fault marks in Chinese, read from the figure's
    text objects (not pixels), drawn with a CJK font (no glyph missing: no empty boxes); the command too."""
    import warnings

    from matplotlib.text import Text

    from grouplab.plot import PlotFontError, cjk_font, draw
    from tests.test_zh_output import untranslated

    try:
        cjk_font()
    except PlotFontError as exc:  # scripts/test installs fonts-wqy-microhei as root; CI must draw it
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(str(exc))
    chart = chart_from_run(run_dir, lang="zh")
    assert chart.to_json()["bars"] == chart_from_run(run_dir).to_json()["bars"]  # the same model, other words
    fig = draw(chart)
    texts = [t for t in fig.findobj(Text) if t.get_text()]
    words = "\n".join(t.get_text() for t in texts)
    assert untranslated(words) == [], words
    assert "已分配但未消费" in words and "崩溃 m-1" in words and "距运行中第一个事件的秒数" in words
    assert all(cjk_font() in t.get_fontfamily() for t in texts if not t.get_text().isascii())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        png = save(chart, tmp_path / "zh.png")
    assert [str(w.message) for w in caught if "missing from font" in str(w.message)] == []
    assert png.read_bytes().startswith(b"\x89PNG")
    done = subprocess.run([sys.executable, "-m", "grouplab.cli", "plot", str(run_dir), "--out", str(tmp_path / "zh.svg"),
                           "--lang", "zh"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert untranslated(done.stdout.replace(str(tmp_path), "DIR")) == [] and "已写入" in done.stdout
    assert "无主" in (tmp_path / "zh.svg").read_text()
