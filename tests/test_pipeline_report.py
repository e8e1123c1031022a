"""`grouplab analyze`'s HTML report (grouplab/pipeline/report.py), from small tables written here
with the analyze job's column names and types: the summary numbers, the worst rebalance first with
its cause, one inline SVG per chart, the Gantt chart's capping note, escaping, and the empty cases
(no runs, no tables, a run of malformed lines only, a run without member logs)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import (BooleanType, IntegerType, LongType, StringType, StructField, StructType)

from grouplab.pipeline.report import write_report

S, L, I, B = StringType(), LongType(), IntegerType(), BooleanType()


def schema(*cols: tuple[str, Any]) -> StructType:
    return StructType([StructField(name, dtype, True) for name, dtype in cols])


SCHEMAS = {
    "runs": schema(("run", S), ("events", L), ("nodes", L), ("groups", L), ("first_ms", L), ("last_ms", L),
                   ("malformed_lines", L), ("rebalances", L), ("stable_generations", L), ("partitions_moved", L),
                   ("unowned_partition_ms", L), ("max_rebalance_ms", L), ("rebalance_p50_ms", L),
                   ("rebalance_p99_ms", L), ("delivery_mode", S), ("records", L), ("lost", L), ("duplicated", L),
                   ("consumed_partition_ms", L), ("assigned_not_consumed_ms", L)),
    "rebalances": schema(("run", S), ("group_id", S), ("generation", L), ("trigger", S), ("cause", S),
                         ("start_ms", L), ("join_end_ms", L), ("end_ms", L), ("duration_ms", L), ("join_ms", L),
                         ("sync_ms", L), ("members_before", I), ("members", I), ("protocol", S), ("leader", S),
                         ("outcome", S), ("partitions_moved", L), ("unowned_partition_ms", L), ("max_unowned_ms", L),
                         ("partitions_unowned", L), ("partitions_revoked", L), ("assigned_not_consumed_ms", L),
                         ("stops_repaired", L)),
    "ownership": schema(("run", S), ("group_id", S), ("client_id", S), ("member_id", S), ("generation", L),
                        ("topic", S), ("partition", I), ("start_ms", L), ("end_ms", L), ("duration_ms", L),
                        ("end_reason", S)),
    "movements": schema(("run", S), ("group_id", S), ("generation", L), ("topic", S), ("partition", I),
                        ("from_member", S), ("from_client", S), ("to_member", S), ("to_client", S),
                        ("from_generation", L), ("withheld", B), ("reason", S), ("cause", S)),
    "deliveries": schema(("run", S), ("mode", S), ("topic", S), ("partition", L), ("offset", L), ("processed", L),
                         ("output", L), ("committed", B), ("outcome", S)),
    "malformed": schema(("run", S), ("file", S), ("line", S)),
    "partition_time": schema(("run", S), ("group_id", S), ("topic", S), ("partition", I), ("state", S),
                             ("start_ms", L), ("end_ms", L), ("duration_ms", L), ("client_id", S), ("member_id", S),
                             ("generation", L), ("stall_id", I), ("ended_by", S)),
    "stalls": schema(("run", S), ("group_id", S), ("stall_id", I), ("client_id", S), ("member_id", S), ("fault", S),
                     ("detail", S), ("stopped_ms", L), ("until_ms", L), ("resumed_ms", L), ("partitions", I),
                     ("assigned_not_consumed_ms", L), ("unowned_after_ms", L), ("ended_ms", L), ("ended_by", S),
                     ("removed_ms", L), ("removal_reason", S), ("repaired_generation", L)),
}

EVIL = "<script>alert(1)</script>"
GROUP = "g&1"


def write_tables(spark, out: Path, **tables: list[tuple]) -> Path:
    """Every table of SCHEMAS under `out` (empty unless given), as analyze writes them."""
    for name, sch in SCHEMAS.items():
        spark.createDataFrame(tables.get(name, []), sch).coalesce(1).write.mode("overwrite").parquet(str(out / name))
    return out


def rebalance(gen: int, trigger: str, cause: str | None, start: int, join_ms: int, sync_ms: int | None,
              unowned_ms: int, outcome: str = "stable", moved: int = 1, revoked: int = 2, group: str = GROUP,
              run: str = "r1", idle_ms: int = 0) -> tuple:
    end = None if sync_ms is None else start + join_ms + sync_ms
    duration = None if end is None else end - start
    return (run, group, gen, trigger, cause, start, start + join_ms, end, duration, join_ms, sync_ms, 3, 3, "range",
            "m-0-1", outcome, moved, unowned_ms, unowned_ms // 2, 2, revoked, idle_ms, 1 if idle_ms else 0)


# Six rebalances; ranked by unowned partition-ms, then duration: g2, g5, g3 (ties g5 on unowned, shorter),
# g1, g4 (interrupted, 0.1 partition-s); g6 (nothing unowned) is left out of the top five.
REBALANCES = [
    rebalance(1, "member m-0-1 joined", "member_joined", 1_000, 3_000, 50, 6_000),
    rebalance(2, "m-1-2 removed: session_timeout", "session_timeout", 20_000, 10_000, 100, 123_400),
    rebalance(3, "member m-3-3 joined", "member_joined", 40_000, 2_000, 222, 45_600),
    rebalance(4, "member m-4-4 joined", None, 60_000, 2_000, None, 100, outcome="interrupted"),
    rebalance(5, "member metadata changed (m-0-1: ...)", "member_metadata_changed", 70_000, 5_500, 55, 45_600),
    rebalance(6, "member m-5-5 joined", "member_joined", 90_000, 900, 100, 0),
]
CLIENTS = ["c-0", EVIL, "$x$ {c}"]


def ownership_rows(partitions: int = 3) -> list[tuple]:
    """Each partition owned in turns by the three clients between the rebalances; the first client's
    intervals end in a crash."""
    out = []
    bounds = [(4_050, 20_000), (30_100, 40_000), (42_222, 60_000), (75_555, 90_000), (91_000, 100_000)]
    for p in range(partitions):
        for k, (a, b) in enumerate(bounds):
            client = CLIENTS[(p + k) % 3]
            reason = "crashed" if client == "c-0" else "end_of_log" if b == 100_000 else "revoked"
            out.append(("r1", GROUP, client, f"{client}-m", k + 1, "t", p, a + p, b, b - a - p, reason))
    return out


RUNS = [
    ("r1", 12_345, 4, 1, 0, 100_000, 2, 6, 5, 7, 220_700, 10_100, 3_050, 10_100, None, None, None, None, 60_000, 0),
    ("d1", 678, 3, 0, 0, 50_000, 0, 0, 0, 0, 0, None, None, None, "at-least-once", 10, 1, 2, None, None),
]
DELIVERIES = ([("d1", "at-least-once", "in", 0, o, 1, 1, True, "once") for o in range(7)]
              + [("d1", "at-least-once", "in", 1, 0, 1, 0, True, "lost")]
              + [("d1", "at-least-once", "in", 1, o, 2, 2, True, "duplicated") for o in (1, 2)])
MALFORMED = [("r1", "m-1.jsonl", "<b>not json</b> & more"), ("r1", "m-1.jsonl", '{"ts_ms": <img src=x onerror=1>')]
MOVEMENTS = [("r1", GROUP, 2, "t", p, "m-1-2", "c-1", "m-0-1", "c-0", 1, False, "owner_gone", "session_timeout")
             for p in range(3)]


@pytest.fixture(scope="module")
def full(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = write_tables(spark, tmp_path_factory.mktemp("report"), runs=RUNS, rebalances=REBALANCES,
                       ownership=ownership_rows(), movements=MOVEMENTS, deliveries=DELIVERIES, malformed=MALFORMED)
    path = write_report(spark, out)
    return {"out": out, "path": path, "page": path.read_text(encoding="utf-8")}


def section(page: str, run: str) -> str:
    start = page.index(f"<section id='run-{run}'>")
    return page[start:page.index("</section>", start)]


def hurt_generations(page: str) -> list[tuple[int, int]]:
    """(rank, generation) of the rows of the first 'rebalances that hurt' table."""
    table = re.search(r"<table class=hurt>.*?</table>", page, re.S)
    assert table, "no table of the rebalances that hurt"
    return [(int(a), int(b)) for a, b in
            re.findall(r"<tr[^>]*><td class=n>(\d+)</td><td class=n>(\d+)</td>", table.group(0))]


# ----------------------------------------------------------------------------- the full page


def test_writes_report_html_and_returns_its_path(full: dict[str, Any]) -> None:
    assert full["path"] == full["out"] / "report.html" and full["path"].is_file()
    page = full["page"]
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "<title>grouplab analyze: d1, r1</title>" in page
    # Self-contained: no scripts, nothing fetched from elsewhere (links inside the page only).
    assert not re.search(r"<(script|link|img|iframe|object)\b|<[^>]+\s(src|href)=['\"]?(https?:|//)|@import|url\((https?:|//)",
                         page)


def test_summary_table_has_the_runs_numbers(full: dict[str, Any]) -> None:
    page = full["page"]
    summary = page[page.index("<h2>Summary</h2>"):page.index("<section")]
    row = re.search(r"<tr><td><a href='#run-r1'>r1</a></td>(.*?)</tr>", summary).group(1)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
    # events, malformed, groups, span s, rebalances, stable, moved, unowned partition-s, assigned but not
    # consumed partition-s, p50, p99, max
    assert cells[:12] == ["12,345", "2", "1", "100.0", "6", "5", "7", "220.7", "0.00", "3,050", "10,100", "10,100"]
    d1 = re.search(r"<tr><td><a href='#run-d1'>d1</a></td>(.*?)</tr>", summary).group(1)
    assert re.findall(r"<td[^>]*>([^<]*)</td>", d1)[-4:] == ["at-least-once", "10", "1", "2"]  # lost, extra copies
    assert "<td class=bad>1</td><td class=bad>2</td>" in d1


def test_worst_rebalance_first_with_its_cause_and_trigger(full: dict[str, Any]) -> None:
    r1 = section(full["page"], "r1")
    assert hurt_generations(r1) == [(1, 2), (2, 5), (3, 3), (4, 1), (5, 4)]
    first_row = r1[r1.index("<tr class=worst>"):]
    first_row = first_row[:first_row.index("</tr>")]
    assert "<b>session_timeout</b><br>m-1-2 removed: session_timeout" in first_row
    assert "<b>10,100</b><br><span class=muted>join 10,000 + sync 100</span>" in first_row
    assert "<b>123.4</b>" in first_row and "c-1&nbsp;×3" in first_row  # unowned partition-s; moved from
    assert "never completed" in r1 and "<td class=bad>interrupted</td>" in r1  # g4
    assert "member m-5-5 joined" not in r1  # g6 did not hurt
    assert "worst disruption: generation <b>2</b>" in r1 and "56% of the run's" in r1  # 123.4 of 220.7
    assert "<h3>Group g&amp;1</h3>" in r1


def test_one_svg_per_chart_with_ids_unique_in_the_page(full: dict[str, Any]) -> None:
    page = full["page"]
    r1, d1 = section(page, "r1"), section(page, "d1")
    assert r1.count("<svg") == 3  # Gantt, durations, stop-the-world
    assert d1.count("<svg") == 2  # lost/duplicated per partition, processed histogram
    assert page.count("<svg") == 5
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        ET.fromstring(svg)  # well-formed
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert ids and len(ids) == len(set(ids))


def test_gantt_shows_every_client_and_is_not_capped_when_small(full: dict[str, Any]) -> None:
    r1 = section(full["page"], "r1")
    gantt = re.search(r"<svg.*?</svg>", r1, re.S).group(0)
    for label in ("t-0", "t-1", "t-2", "c-0", "&lt;script&gt;alert(1)&lt;/script&gt;", "$x$ {c}"):
        assert label in gantt, label
    assert "3 partitions, 15 ownership intervals, 3 clients shown" in r1
    assert "Capped" not in r1


def test_text_is_escaped_everywhere(full: dict[str, Any]) -> None:
    page = full["page"]
    assert "<script" not in page and "<img" not in page and "<b>not json" not in page
    assert "&lt;b&gt;not json&lt;/b&gt; &amp; more" in page  # a malformed line, as text
    assert "{&quot;ts_ms&quot;: &lt;img src=x onerror=1&gt;" in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 1


def test_delivery_and_malformed_sections(full: dict[str, Any]) -> None:

    d1 = section(full["page"], "d1")
    assert "<h3>Delivery (at-least-once)</h3>" in d1
    assert re.search(r"<th>once</th><th>lost</th><th>duplicated</th><th>unknown</th>.*?"
                     r"<td class=n>7</td><td class=bad>1</td><td class=bad>2</td><td class=n>0</td>", d1, re.S)
    assert "No consumer-group activity" in d1 and "None: every line of this run's logs parsed" in d1
    r1 = section(full["page"], "r1")
    assert "2 lines could not be parsed" in r1 and "<td>m-1.jsonl</td><td class=n>2</td>" in r1


# ----------------------------------------------------------------------------- assigned but not consumed


def test_the_time_a_stopped_members_partitions_were_not_consumed_is_shown_beside_unowned(spark, tmp_path: Path) -> None:
    """c-1 crashed at 10 s holding t-1; its partition sat assigned but not consumed until the
    session timeout removed it at 19 s, and generation 2's assignment gave it to c-0."""
    rebs = [rebalance(1, "member c-0-1 joined", "member_joined", 0, 1_000, 10, 2_000, group="g", run="idle"),
            rebalance(2, "c-1-1 removed: session_timeout", "session_timeout", 19_000, 100, 10, 110, group="g",
                      run="idle", idle_ms=9_000),
            rebalance(3, "member c-2-1 joined", "member_joined", 30_000, 500, 10, 1_020, group="g", run="idle")]
    own = [("idle", "g", "c-0", "c-0-1", 1, "t", 0, 1_010, 40_000, 38_990, "end_of_log"),
           ("idle", "g", "c-1", "c-1-1", 1, "t", 1, 1_010, 19_000, 17_990, "removed"),
           ("idle", "g", "c-0", "c-0-1", 2, "t", 1, 19_110, 40_000, 20_890, "end_of_log")]
    times = [("idle", "g", "t", 1, "assigned_not_consumed", 10_000, 19_000, 9_000, "c-1", "c-1-1", 1, 0, "session_timeout")]
    stops = [("idle", "g", 0, "c-1", "c-1-1", "crash", None, 10_000, None, None, 1, 9_000, 110, 19_000,
              "session_timeout", 19_000, "session_timeout", 2)]
    runs = [("idle", 500, 3, 1, 0, 40_000, 0, 3, 3, 1, 3_130, 1_020, 510, 1_020, None, None, None, None, 66_870, 9_000)]
    page = write_report(spark, write_tables(spark, tmp_path, runs=runs, rebalances=rebs, ownership=own,
                                            partition_time=times, stalls=stops)).read_text()
    idle = section(page, "idle")
    assert "<b>9.0</b> partition-seconds assigned but not consumed" in idle
    # g2 hurt most once its 9 s of idle partition time counts, though g1 ended more unowned time
    assert hurt_generations(idle) == [(1, 2), (2, 1), (3, 3)]
    row = idle[idle.index("<tr class=worst>"):]
    assert "<td class=n><b>0.1</b></td><td class=n>9.0</td>" in row[:row.index("</tr>")]
    gantt = re.search(r"<svg.*?</svg>", idle, re.S).group(0)
    assert "assigned but not consumed" in gantt and "crash c-1" in gantt
    assert "hatched = assigned but not consumed" in idle


# ----------------------------------------------------------------------------- capping


def test_gantt_is_capped_and_says_how(spark, full: dict[str, Any], tmp_path: Path) -> None:
    out = write_tables(spark, tmp_path, runs=RUNS[:1], rebalances=REBALANCES, ownership=ownership_rows(8))
    page = write_report(spark, out, title="capped", max_gantt_rows=3, max_gantt_intervals=6).read_text()
    note = re.search(r"<p class=cap>(.*?)</p>", page).group(1)
    assert "3 of 8 partitions" in note and "of 40 ownership intervals" in note
    assert "around generation 2, the worst rebalance" in note  # 15 intervals in 3 rows > 6: a window of time
    shown = int(re.search(r"(\d+) of 40 ownership intervals", note).group(1))
    assert 6 <= shown < 15
    gantt = re.search(r"<svg.*?</svg>", page, re.S).group(0)
    # The rows drawn are 3 of the 8 partitions (the least owned: each starts p ms later, so t-5..t-7).
    assert [p for p in range(8) if f">t-{p}<" in gantt] == [5, 6, 7]
    assert "<title>capped</title>" in page


# ----------------------------------------------------------------------------- empty inputs


def test_no_runs_at_all(spark, tmp_path: Path) -> None:
    page = write_report(spark, write_tables(spark, tmp_path)).read_text()
    assert "No runs: the tables hold no run" in page and "<svg" not in page
    assert "<title>grouplab analyze</title>" in page and "missing" not in page


def test_no_tables_in_the_directory(spark, tmp_path: Path) -> None:
    page = write_report(spark, tmp_path / "never-analyzed").read_text()
    assert "No runs" in page
    assert "Tables missing or unreadable under this directory, so left out: runs, rebalances, ownership" in page


def test_malformed_only_run_and_run_without_member_logs(spark, tmp_path: Path) -> None:
    runs = [("junk", 0, None, None, None, None, 7, 0, 0, 0, 0, None, None, None, None, None, None, None, None, None),
            ("coord", 40, 1, 1, 0, 30_000, 0, 2, 2, 1, 0, 3_000, 2_000, 3_000, None, None, None, None, None, None)]
    rebs = [rebalance(1, "member m-0-1 joined", "member_joined", 0, 2_000, 10, 0, run="coord", group="g"),
            rebalance(2, "member m-1-2 joined", "member_joined", 9_000, 2_900, 100, 0, run="coord", group="g")]
    bad = [("junk", "x.jsonl", f"line {i} <oops>") for i in range(7)]
    page = write_report(spark, write_tables(spark, tmp_path, runs=runs, rebalances=rebs, malformed=bad)).read_text()
    junk, coord = section(page, "junk"), section(page, "coord")
    assert "No consumer-group activity in this run's logs" in junk and "<svg" not in junk
    assert "7 lines could not be parsed" in junk
    assert junk.count("<pre>") == 5 and "line 0 &lt;oops&gt;" in junk and "line 5" not in junk
    assert "No ownership intervals for this group" in coord
    assert "stop-the-world time unknown (no member logs)" in coord
    assert "Unknown: the time partitions spent without an owner" in coord
    assert coord.count("<svg") == 1  # durations only
    assert hurt_generations(coord) == [(1, 2), (2, 1)]  # the longest first, when nothing is known unowned
