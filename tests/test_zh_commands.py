"""`--lang zh` on the commands that were English only (issue 25, item 3): `simulate` (its timeline,
summary, delivery totals over seeds, a failing seed's report; `--protocol zk` too), `assign` (the
classic, ZooKeeper-era and consumer-protocol calculators), `replay`'s verdicts, and `topics`,
`configs` and `delete` against a running coordinator. Each is run in-process in both languages:
the Chinese output has no untranslated English sentence (tests/test_zh_output.py's check; Kafka's
names stay English) and says the same figures as the English one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from grouplab.cli import main
from tests.test_zh_output import untranslated

NUMBER = re.compile(r"\d[\d,.]*\d|\d")
COMMAND = re.compile(r"grouplab [a-z-]+(?: [!-~]+)*")  # a command to type is a name, not a sentence


def sentences(text: str, names: tuple[str, ...] = ()) -> list[str]:
    """The English sentences left in `text` once its commands and `names` are taken out."""
    for name in names:
        text = text.replace(name, "NAME")
    return untranslated(COMMAND.sub("COMMAND", text))


def said(capsys: pytest.CaptureFixture[str], args: list[str], lang: str, rc: int = 0) -> str:
    """What `grouplab ARGS --lang LANG` printed, stdout and stderr, after checking its exit code."""
    got = main([*args, "--lang", lang])
    out, err = capsys.readouterr()
    assert got == rc, out + err
    return out + err


def figures(text: str) -> Counter[str]:
    """The numbers a text says, however its sentences order them."""
    return Counter(NUMBER.findall(text))


def both(capsys: pytest.CaptureFixture[str], args: list[str], rc: int = 0, names: tuple[str, ...] = ()) -> tuple[str, str]:
    """The English and the Chinese output of one command: the Chinese without an English sentence
    (but `names`), with the same figures."""
    en, zh = said(capsys, args, "en", rc), said(capsys, args, "zh", rc)
    assert sentences(zh, names) == [], zh
    assert figures(zh) == figures(en), (en, zh)
    return en, zh


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """One line per sentence in both languages, so that a wrapped number stays one number."""
    from grouplab import cli

    monkeypatch.setattr(cli.console, "width", 400)
    monkeypatch.setattr(cli.err, "width", 400)


# ----------------------------------------------------------------------------- simulate


def test_simulate_one_seed_tells_its_timeline_and_summary_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    en, zh = both(capsys, ["simulate", "--scenario", "crash-storm", "--timeline-rows", "0"])
    rebalances = re.search(r"(\d+) rebalances", en)
    assert rebalances is not None and f"{rebalances[1]} 次再均衡" in zh
    for word in ("时刻（秒）", "第 1 代稳定", "注入故障", "成员被移除", "停顿的代价", "所有不变式都成立", "分区时间"):
        assert word in zh, word


def test_simulate_a_consumer_protocol_group_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    en, zh = both(capsys, ["simulate", "--scenario", "kip848-crash-storm", "--timeline-rows", "0"])
    epochs = re.search(r"(\d+) group epochs", en)
    assert epochs is not None and f"{epochs[1]} 次组纪元变化" in zh
    assert "纪元 1 稳定" in zh and "回到 Stable" in zh


def test_simulate_many_seeds_with_delivery_totals_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    en, zh = both(capsys, ["simulate", "--scenario", "delivery-at-least-once", "--seeds", "1-3"],
                  names=("delivery-at-least-once",))  # (the scenario's name)
    duplicated = re.search(r"duplicated ([\d,]+)", en)
    assert duplicated is not None and f"重复 {duplicated[1]}" in zh
    assert "运行 delivery-at-least-once 的 3 个种子" in zh and "交付：生产" in zh and "丢失 0" in zh


def test_a_failing_seeds_report_in_chinese(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A seed whose invariant broke (made to break here: every scenario holds its invariants): the
    line naming it, its last steps and the command that replays it, and the failed seeds."""
    from grouplab.sim import runner
    from grouplab.sim.invariants import Violation

    real = runner.run_seed

    def broken(scenario: Any, seed: int, *args: Any, **kwargs: Any) -> Any:
        result = real(scenario, seed, *args, **kwargs)
        if seed != 2:
            return result
        return dataclasses.replace(result, violation=Violation("one leader per generation", "generation 3 has leaders "
                                                               "m-1 and m-2", 4200, seed, ["t=4100 m-1 -> JoinGroup #7"]))

    monkeypatch.setattr(runner, "run_seed", broken)
    # (what the invariant saw is the simulator's own words: left as they are)
    en, zh = both(capsys, ["simulate", "--scenario", "clean-shutdown", "--seeds", "1-2"], rc=1,
                  names=("generation 3 has leaders m-1 and m-2",))
    assert "invariant 'one leader per generation' violated" in en and "failed seeds: [2]" in en
    assert "种子 2：不变式 '每一代只有一个领导者'" in zh and "最后几步：" in zh
    assert "重放： grouplab simulate --scenario clean-shutdown --seed 2" in zh and "失败的种子：[2]" in zh


def test_simulate_zk_tells_its_timeline_changes_and_zombies_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    en, zh = both(capsys, ["simulate", "--protocol", "zk", "--scenario", "zombie", "--timeline-rows", "0"])
    rebalances = re.search(r"(\d+) rebalances", en)
    assert rebalances is not None and f"{rebalances[1]} 次再均衡" in zh
    for word in ("完成再均衡", "会话过期", "每次变化的代价", "c-0 加入", "僵尸窗口", "所有不变式都成立"):
        assert word in zh, word
    both(capsys, ["simulate", "--protocol", "zk", "--scenario", "herd", "--seeds", "1-2"])


def test_a_broken_zk_invariant_in_chinese(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from grouplab.zk import simulate
    from grouplab.zk.sim import Violation

    def broken(scenario: Any, seed: int, *args: Any, **kwargs: Any) -> Any:
        raise Violation("one owner per partition", "t0-1 owned by c-1 and c-2", 5000, seed)

    monkeypatch.setattr(simulate, "run_zk_seed", broken)
    args = ["simulate", "--protocol", "zk", "--scenario", "herd", "--seeds", "1-2"]
    en, zh = said(capsys, args, "en", 1), said(capsys, args, "zh", 1)  # (the English names the seed twice)
    assert sentences(zh, ("one owner per partition", "t0-1 owned by c-1 and c-2")) == [], zh
    assert "seed 1: invariant one owner per partition broken at 5000 ms (seed 1)" in en
    assert "种子 1：不变式 one owner per partition 在 5000 毫秒时被打破" in zh and "失败的种子：[1, 2]" in zh


# ----------------------------------------------------------------------------- assign


@pytest.mark.parametrize("args", [
    ["--assignor", "range", "--topics", "t0:4,t1:3", "--member", "a=t0,t1", "--member", "b=t0"],
    ["--assignor", "cooperative-sticky", "--topics", "t0:6", "--member", "a=t0", "--member", "b=t0", "--member", "c=t0",
     "--owned", "a=t0:0,t0:1,t0:2", "--owned", "b=t0:3,t0:4,t0:5"],
    ["--assignor", "sticky", "--topics", "t0:6", "--member", "a=t0", "--member", "c=t0",
     "--owned", "a=t0:0,t0:1,t0:2", "--owned", "b=t0:3,t0:4,t0:5"],
    ["--assignor", "roundrobin", "--topics", "t0:4,t1:2", "--member", "C1=t0,t1", "--member", "C2=t0:1,t1:1", "--streams", "2"],
    ["--protocol", "consumer", "--assignor", "uniform", "--topics", "t0:6", "--member", "a=t0", "--member", "b=t0",
     "--member", "c=t0", "--owned", "a=t0:0,t0:1,t0:2", "--owned", "d=t0:3,t0:4,t0:5"],
], ids=["range", "withheld", "departed", "zk-threads", "consumer-protocol"])
def test_assign_in_chinese(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    en, zh = both(capsys, ["assign", *args])
    assert "┃ 分区" in zh and ("┃ 成员" in zh or "┃ 线程" in zh)
    if "moved" in en:
        assert "移动了" in zh
    if "left the group" in en:
        assert "离开了消费组：" in zh
    if "withheld" in en:
        assert "暂缓分配 2 个" in zh


def test_assign_json_is_the_same_in_every_language(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["assign", "--assignor", "range", "--topics", "t0:4", "--member", "a=t0", "--member", "b=t0", "--format", "json"]
    assert json.loads(said(capsys, args, "zh")) == json.loads(said(capsys, args, "en"))


# ----------------------------------------------------------------------------- replay


def test_replay_verdicts_in_chinese(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from grouplab.sim.runner import run_seed
    from grouplab.sim.scenario import load_scenario, resolve_scenario
    from grouplab.tracefile import trace_path

    run_seed(load_scenario(resolve_scenario("clean-shutdown")), 1, tmp_path)
    en, zh = both(capsys, ["replay", str(tmp_path)])
    assert "identical to the recording" in en and "与录制的完全相同" in zh

    events = tmp_path / "coordinator.jsonl"
    kept = events.read_text()
    events.unlink()  # the answers can still be compared; the note says the event log was not
    en, zh = both(capsys, ["replay", str(tmp_path)])
    assert "注意：" in zh and "没有比较事件日志的行" in zh
    events.write_text(kept)

    path = trace_path(tmp_path)
    lines = [json.loads(t) for t in path.read_text().splitlines()]
    i = next(i for i, line in enumerate(lines) if line["kind"] == "response" and line["api"] == "Heartbeat")
    lines[i]["body"]["error_code"] = 27
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    en, zh = both(capsys, ["replay", str(tmp_path)], rc=1)
    assert "the replay differs" in en
    assert "重放与录制不同" in zh and "录制的：" in zh and "重放的：" in zh


# ----------------------------------------------------------------------------- topics, configs, delete


@pytest.fixture
def bootstrap() -> Iterator[list[str]]:
    """A coordinator with topics t (2 partitions), u and v, and group g's committed offset of t-0."""
    from grouplab.admin import AdminClient
    from grouplab.protocol.types import TopicPartition
    from grouplab.testing import Cluster

    with Cluster(topics={"t": 2, "u": 1, "v": 1}, config={"broker.id": "4"}) as cluster:
        async def commit(group: str) -> None:
            async with AdminClient("127.0.0.1", cluster.grouplab_port) as admin:
                await admin.commit_offsets(group, {TopicPartition("t", 0): 1, TopicPartition("t", 1): 1})

        for group in ("g-en", "g-zh", "h-en", "h-zh"):
            asyncio.run(commit(group))
        yield ["--bootstrap-server", f"127.0.0.1:{cluster.grouplab_port}"]


def run_in(capsys: pytest.CaptureFixture[str], lang: str, args: list[str], rc: int = 0) -> str:
    return said(capsys, [a.replace("LANG", lang) for a in args], lang, rc)


def test_topics_configs_and_delete_in_chinese(bootstrap: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Each command once in English and once in Chinese (on names of their own where it changes
    something): the same figures, and no English sentence but Kafka's names and the broker's own
    error message."""
    steps: list[tuple[list[str], int, str]] = [
        (["topics", "create", "w-LANG", "--partitions", "3"], 0, "已创建主题 w-zh，3 个分区"),
        (["topics", "add-partitions", "w-LANG", "--partitions", "4"], 0, "主题 w-zh 现在有 4 个分区"),
        (["topics", "delete", "w-LANG"], 0, "已删除主题 w-zh"),
        (["topics", "delete", "nosuch", "w-LANG"], 1, "没能删除：'nosuch' 不存在（UNKNOWN_TOPIC_OR_PARTITION"),
        (["topics", "list"], 0, "u       1"),  # (rich expands the tab)
        (["configs"], 0, "broker 4 的配置"),
        (["configs", "--topic", "t"], 0, "┃ 配置项"),
        (["configs", "--topic", "nope"], 1, "主题 'nope' 不存在"),
        (["delete", "--group", "nope", "--group", "g-LANG"], 1, "已删除消费组 'g-zh'"),
        (["delete", "--group", "h-LANG", "--topic", "t:0"], 0, "已从消费组 'h-zh' 删除 t-0 的已提交 offset"),
        (["delete", "--group", "h-LANG", "--topic", "zz"], 1, "主题 'zz'：没有这个主题或分区"),
        (["delete", "--group", "nope", "--topic", "t"], 1, "消费组 'nope' 不存在（GROUP_ID_NOT_FOUND）"),
    ]
    for args, rc, chinese in steps:
        en = run_in(capsys, "en", [*args, *bootstrap], rc)
        zh = run_in(capsys, "zh", [*args, *bootstrap], rc)
        assert sentences(zh) == [], zh
        assert figures(zh.replace("zh", "")) == figures(en.replace("en", "")), (en, zh)
        assert chinese in zh, zh
    # The broker's own refusal is Kafka's text; the line around it is Chinese.
    zh = run_in(capsys, "zh", ["configs", "--broker", "0", *bootstrap], 1)
    assert "无法描述 broker 0：INVALID_REQUEST" in zh


def test_every_invariant_the_simulator_checks_has_its_chinese_name() -> None:
    """The names `fail("...")` gives in grouplab/sim/ (the ZooKeeper era's are identifiers, names)."""
    from grouplab.cli import _invariant_name
    from grouplab.teach.catalog import Catalog

    root = Path(__file__).resolve().parent.parent / "grouplab" / "sim"
    names = {m for path in root.glob("*.py") for m in re.findall(r'fail\(\s*"([^"]+)"', path.read_text())}
    assert len(names) >= 10
    for name in names:
        assert _invariant_name(name, Catalog("en")) == name
        assert untranslated(_invariant_name(name, Catalog("zh"))) == [], name
        assert _invariant_name(name, Catalog("zh")) != name, name


def test_the_plain_progress_line_of_many_seeds_in_chinese() -> None:
    """Off a terminal, `simulate --seeds` says how far it got every 10 s (tests/test_progress.py)."""
    import io

    from rich.console import Console

    from grouplab.progress import ProgressReport
    from grouplab.teach.catalog import Catalog

    c, out, now = Catalog("zh"), io.StringIO(), [0.0]
    with ProgressReport(Console(file=out, force_terminal=False, width=200), c.t("sim.progress", scenario="crash-storm"),
                        total=100, unit=c.t("sim.progress.unit"), clock=lambda: now[0], c=c) as progress:
        for _ in range(100):
            now[0] += 0.5
            progress.update(advance=1)
    lines = out.getvalue().splitlines()
    assert lines[0] == "20 / 100 个种子 · 10 秒 · 大约还要 40 秒 · crash-storm：种子"
    assert untranslated(out.getvalue()) == []
