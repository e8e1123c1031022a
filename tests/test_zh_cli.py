"""`--lang zh` on the commands that print tables and reports (issue 25, item 3): `run`'s lines and
summary tables, `describe`, `compare` (its tables, its scaling table, its JSON conclusion) and
`sweep`'s table and HTML report carry no untranslated English sentence (tests/test_zh_output.py's
check; Kafka's names stay English). The plot's words are checked in tests/test_plot.py, the cost
sentences (grouplab/cost_sentences.py) in tests/test_costs.py and, through run, here.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from grouplab.cli import main
from tests.test_zh_output import untranslated

def text_of(*renderables: object) -> str:
    console = Console(width=300, record=True, color_system=None, file=open(os.devnull, "w"))
    for r in renderables:
        console.print(r)
    return console.export_text()


def test_run_speaks_chinese_without_ui(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A short run with a crash, a delivery mode and a fault rule: the banner, the steps, the
    countdown, each rebalance, the summary, the delivery account and the faults fired, in Chinese."""
    rc = main(["run", "--lang", "zh", "--consumers", "2", "--topics", "in:2", "--delivery", "at-least-once",
               "--records", "200", "--processing-ms", "1", "--crash", "--faults", "*:delay:1", "--fault-seed", "1",
               "--config", "group.initial.rebalance.delay.ms=0", "--config", "group.min.session.timeout.ms=100",
               "--consumer-config", "heartbeat.interval.ms=100", "--consumer-config", "session.timeout.ms=2000",
               "--hold", "0.1", "--timeout", "30", "--run-dir", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert rc == 0, out
    # (a command to type is a command's name, not a sentence; a path, wrapped or not, is a name too)
    words = re.sub(r"/\S+", "PATH", out.replace("grouplab describe --bootstrap-server", "COMMAND"))
    assert untranslated(words) == [], out
    for said in ("启动 2 个消费者", "让 consumer-1 在刚处理完一批之后崩溃", "等待会话超时", "故障代理", "起因",
                 "次再均衡", "交付：at-least-once", "成立", "触发的故障", "事件日志", "代价："):
        assert said in out, said


def test_describe_speaks_chinese() -> None:
    """The classic and consumer-protocol member tables and the offsets table, and the command's
    own lines, against a coordinator with a committed offset and a group it does not have."""
    from grouplab.admin import AdminClient
    from grouplab.coordinator.config import BrokerConfig
    from grouplab.coordinator.server import CoordinatorServer
    from grouplab.describe import ClassicGroupAt, ConsumerGroupAt, Coordinator
    from grouplab.display import consumer_group_table, describe_table, offsets_table
    from grouplab.protocol.consumer_protocol import Assignment, decode_assignment, encode_assignment
    from grouplab.protocol.messages import ConsumerGroupDescribedMember, DescribedGroupMember
    from grouplab.protocol.types import TopicPartition
    from grouplab.teach.catalog import Catalog

    c = Catalog("zh")
    at = Coordinator(0, "127.0.0.1", 9092)
    classic = ClassicGroupAt("orders", group_state="Stable", protocol_type="consumer", protocol_data="range",
                             generation_id=3, leader="c-1-aaaa", coordinator=at,
                             members=[DescribedGroupMember("c-1-aaaa", None, "c-1", "/127.0.0.1",
                                                           member_assignment=encode_assignment(Assignment([TopicPartition("t", 0)])))])
    consumer = ConsumerGroupAt("kip848", group_state="Reconciling", group_epoch=4, assignment_epoch=4,
                               assignor_name="uniform", coordinator=at,
                               members=[ConsumerGroupDescribedMember("m1", 3, client_id="c-2", client_host="/127.0.0.1",
                                                                     assignment={"t": [0, 1]}, target_assignment={"t": [0]},
                                                                     member_state="unrevoked_partitions")])
    rows = [{"topic": "t", "partition": 0, "committed_offset": 5, "log_end_offset": 9, "lag": 4, "member_id": "c-1-aaaa",
             "client_id": "c-1", "host": "/127.0.0.1"}]
    tables = text_of(describe_table(classic, decode_assignment, c), consumer_group_table(consumer, c),
                     offsets_table(classic, rows, c))
    assert untranslated(tables) == [], tables
    assert "静态成员 id" in tables and "目标纪元" in tables and "总 lag 4" in tables

    async def described() -> subprocess.CompletedProcess[str]:
        server = CoordinatorServer(BrokerConfig(), "127.0.0.1", 0)
        await server.start()
        try:
            async with AdminClient("127.0.0.1", server.port) as admin:
                await admin.create_topics({"t": 1})
                await admin.commit_offsets("g", {TopicPartition("t", 0): 1})
            return await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "grouplab.cli", "describe", "--lang", "zh",
                                 "--bootstrap-server", f"127.0.0.1:{server.port}", "--group", "g", "--group", "nope"],
                capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "250"})
        finally:
            await server.stop()

    said = asyncio.run(described())
    assert said.returncode == 1  # group nope does not exist
    assert untranslated(said.stdout + said.stderr) == [], said
    assert "消费组 g" in said.stdout and "消费组 'nope' 不存在" in said.stderr


def without_options(text: str) -> str:
    """An option to type with its value (`--metadata-refresh max-age`) is a name, not a sentence."""
    return re.sub(r"--[a-z-]+ [a-z-]+", "OPTION", text)


def test_compare_speaks_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    """The simulated comparison (every design), its scaling table and its JSON conclusion."""
    assert main(["compare", "--lang", "zh", "--consumers", "3", "--gap-ms", "20000"]) == 0
    out = capsys.readouterr().out
    assert untranslated(without_options(out)) == [], out
    assert "所有变化合计" in out and "ZooKeeper 时代" in out
    assert main(["compare", "--lang", "zh", "--scale", "3,4", "--designs", "zk,consumer"]) == 0
    out = capsys.readouterr().out
    assert untranslated(out) == [], out
    assert "每种规模下的整个脚本" in out
    assert main(["compare", "--lang", "zh", "--consumers", "3", "--designs", "eager,consumer", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["changes"][0]["kind"] == "join"  # the data keeps its names
    assert untranslated(without_options("\n".join(report["conclusion"]))) == [], report["conclusion"]


def test_the_sweep_report_and_table_speak_chinese(tmp_path: Path) -> None:
    """sweep's HTML report (written without Spark from its rows) and its terminal table."""
    import html

    from grouplab.cli import _sweep_table
    from grouplab.pipeline.sweep import write_report
    from grouplab.teach.catalog import Catalog

    summary = [{"assignor": "range", "members": 3, "seeds": 2, "rebalances_per_seed": 4.0, "violations": 1,
                "partitions_moved_per_seed": 2.0, "unowned_partition_s_per_seed": 1.5, "imbalance_mean": 0.5,
                "imbalance_max": 1, "rebalance_p50_ms": 12.0, "rebalance_p99_ms": 40.0, "events": 100}]
    failed = [{"assignor": "range", "members": 3, "seed": 2, "violation": "single_owner",
               "violation_detail": "t0-1 owned by a and b"}]
    report = tmp_path / "report.html"
    write_report(report, summary, failed, scenario_name="crash-storm", scenario_arg="crash-storm",
                 assignors=["range"], sizes=[3], seeds=[1, 5], elapsed_s=1.0, lang="zh")
    page = report.read_text()
    assert page.startswith("<!doctype html><html lang=zh>")
    # Every word a reader sees: the page's text and the charts' <text> (the violation's own detail,
    # the simulator's words, and the replay command are quoted, not prose).
    page = re.sub(r"<pre>.*?</pre>|<code>.*?</code>|<style>.*?</style>", "", page, flags=re.S)
    words = html.unescape(re.sub(r"<[^>]+>", "\n", page))
    assert untranslated(words) == [], words
    assert "每个种子的再均衡次数" in words and "3 个成员" in words and "2 个种子" in words
    table = text_of(_sweep_table("crash-storm", summary, Catalog("zh")))
    assert untranslated(table) == [] and "分配器" in table
