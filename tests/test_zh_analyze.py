"""`grouplab analyze --lang zh` (issue 25, item 3): its HTML report and its terminal table and lines
carry no untranslated English sentence (tests/test_zh_output.py's check; Kafka's names stay
English), and English is said as before. The report is drawn from hand-built rows
(tests/report_samples.py), without Spark; tests/test_pipeline_analyze.py runs the command itself.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from grouplab.pipeline.report import default_title, render
from grouplab.teach.catalog import Catalog
from tests.report_samples import sample_runs
from tests.test_zh_cli import text_of
from tests.test_zh_output import untranslated


def words_of(page: str) -> str:
    """Every word a reader sees: the page's text and the charts' <text> (a malformed line, quoted in
    <pre>, and a table's name in <code> are data, not prose)."""
    page = re.sub(r"<pre>.*?</pre>|<code>.*?</code>|<style>.*?</style>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "\n", page))


def test_the_analyze_report_speaks_chinese() -> None:
    runs = sample_runs()
    page = render(runs, default_title(runs, Catalog("zh")), Path("/tmp/out"), ["stalls"], lang="zh")
    assert page.startswith("<!doctype html><html lang=zh>")
    words = words_of(page)
    assert untranslated(words) == [], untranslated(words)
    for said in ("影响最大的再均衡", "谁在何时拥有哪个分区", "每一代的再均衡用时", "代（再均衡形成的那一代）",
                 "同步阶段", "已截取", "交付（at-least-once）", "被应用处理的次数", "无法解析的行", "成员 m-0 加入"):
        assert said in words, said


def test_an_empty_analyze_report_speaks_chinese() -> None:
    words = words_of(render([], default_title([]), Path("/tmp/out"), ["runs"], lang="zh"))
    assert untranslated(words) == [] and "没有运行" in words


def test_the_english_report_is_said_as_before() -> None:
    """English stays as it was: a few of its sentences, and `<html lang=en>`."""
    runs = sample_runs()
    page = render(runs, default_title(runs), Path("/tmp/out"), [])
    assert page.startswith("<!doctype html><html lang=en>")
    for said in ("The rebalances that hurt", "Who owned which partition, when", "member m-0 joined",
                 "generation (the one the rebalance formed)", "Lost and duplicated records per partition"):
        assert said in page, said


def test_the_analyze_table_and_lines_speak_chinese() -> None:
    from grouplab.cli import _runs_table

    rows = [{"run": "run-1", "events": 1234, "malformed_lines": 2, "rebalances": 3, "partitions_moved": 6,
             "unowned_partition_ms": 17000, "assigned_not_consumed_ms": 4500, "rebalance_p50_ms": 60,
             "rebalance_p99_ms": 220, "delivery_mode": "at-least-once", "lost": 1, "duplicated": 3}]
    c = Catalog("zh")
    said = "\n".join([text_of(_runs_table(rows, c)),
                      c.t("analyze.started", count=1, runs="run-1", master="local[2]"),
                      c.t("analyze.progress.reading"), c.t("analyze.progress.wrote", name="runs", rows="1"),
                      c.t("analyze.progress.report"), c.t("analyze.malformed_skipped", count="2", dir="OUT"),
                      c.t("analyze.done", tables="runs (1)", out="OUT", report="OUT")])
    assert untranslated(said) == [], said
    assert "再均衡" in said and "丢失 1" in said
