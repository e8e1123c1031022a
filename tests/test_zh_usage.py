"""The command line's own words in Chinese (issue 25, item 3): `--help` of every command, usage
errors (argparse's and grouplab's), one-line failures and the line Ctrl-C prints during a Spark
command, with `--lang zh` on the command line or GROUPLAB_LANG=zh in the environment
(grouplab/cli_text.py, grouplab/teach/catalog/cli/zh.toml)."""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from grouplab import cli
from grouplab.cli import build_parser, interrupted_line, main
from grouplab.cli_text import cli_texts, lang_of, wrap_cells
from tests.test_zh_output import untranslated

ROOT = Path(__file__).resolve().parent.parent

ZH = cli_texts("zh")


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    found = {"grouplab": parser}
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            found.update(action.choices)
    return found


def _help_texts() -> list[str]:
    texts: list[str] = []
    for parser in _parsers().values():
        texts += [t for t in (parser.description, parser.epilog) if t]
        texts += [g.title for g in parser._action_groups if g.title]  # noqa: SLF001
        for action in parser._actions:  # noqa: SLF001
            if action.help and action.help != argparse.SUPPRESS:
                texts.append(action.help)
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                texts += [c.help for c in action._choices_actions if c.help]  # noqa: SLF001
    return sorted(set(texts))


def prose(text: str) -> str:
    """`text` without what is a name in any language: option names, metavars, quoted values,
    commands, paths and lists of names (lessons, scenarios, choices)."""
    return re.sub(r"'[^']*'|`[^`]*`|grouplab [\w-]+|--?[a-z][a-z0-9-]*|\b[A-Z][A-Z_:,.\[\]-]+\b|\S+[/.,]\S+"
                  r"|(?:[a-z0-9][\w.-]*, )+[a-z0-9][\w.-]*", " ", text)


def test_every_help_text_has_its_chinese() -> None:
    assert [t for t in _help_texts() if not ZH.knows(t)] == []


def _error_templates() -> list[str]:
    """Every message cli.py raises or prints as a usage error or failure, its values as `{}`."""

    def template(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = template(node.left), template(node.right)
            return None if left is None or right is None else left + right
        return None  # a catalogue text (c.t(...)) or an exception passed on

    found: set[str] = set()
    for node in ast.walk(ast.parse(Path(cli.__file__).read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and node.args:
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            if name in ("UsageError", "CliError", "ArgumentTypeError", "fail"):
                text = template(node.args[-1] if name == "fail" else node.args[0])
                if text:
                    found.add(" ".join(text.split()))
    return sorted(found)


def test_every_usage_error_and_failure_in_cli_has_its_chinese() -> None:
    templates = _error_templates()
    assert len(templates) > 60  # the walk finds them (it would pass vacuously if it found none)
    missing = [t for t in templates if "unrecognized arguments" not in t  # said in parts: see below
               and ZH.say(t.replace("{}", "'v'")) == t.replace("{}", "'v'")]
    assert missing == []


@pytest.mark.parametrize("command", sorted(_parsers()))
def test_every_commands_help_is_in_chinese(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ([] if command == "grouplab" else [command]) + ["--help", "--lang", "zh"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("用法：")
    assert untranslated(prose(out)) == []
    # Wrapped by cells, not characters (a Chinese character takes two); English examples keep their lines.
    assert all(cell_len(line) <= 100 for line in out.splitlines() if cell_len(line) != len(line))


BAD_COMMANDS = [
    ["bogus"],
    ["simulate"],
    ["run", "--consumers", "x"],
    ["run", "--port", "99999"],
    ["run", "--timeout", "0"],
    ["run", "--ui-port", "9000"],
    ["run", "--brokers", "99"],
    ["run", "--protocol", "zk", "--delivery", "at-least-once"],
    ["describe", "--port", "9999"],
    ["coordinator", "--bootstrap-server", "127.0.0.1:9092"],
    ["describe", "--format", "yaml"],
    ["explain", "no-such-lesson"],
    ["simulate", "--scenario", "no-such-scenario"],
    ["simulate", "--scenario", "crash-storm", "--seeds", "x"],
    ["simulate", "--scenario", "crash-storm", "--seed", "1", "--seeds", "1-3"],
    ["assign", "--assignor", "range", "--topics", "t0:3"],
    ["assign", "--assignor", "nope", "--topics", "t0:3", "--member", "a=t0"],
    ["assign", "--assignor", "range", "--topics", "t0", "--member", "a=t0"],
    ["coordinator", "--config", "no.such.config=1", "--port", "0"],
    ["plot", "run-dir", "--out", "x.gif"],
]


@pytest.mark.parametrize("argv", BAD_COMMANDS, ids=lambda a: " ".join(a))
def test_usage_errors_are_said_in_chinese(argv: list[str], capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def run(args: list[str]) -> tuple[int, str]:
        try:
            code = main(args)
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, capsys.readouterr().err

    monkeypatch.delenv("GROUPLAB_LANG", raising=False)
    en_code, en = run(argv)
    zh_code, zh = run([*argv, "--lang", "zh"])
    monkeypatch.setenv("GROUPLAB_LANG", "zh")
    env_code, by_env = run(argv)
    assert en_code == zh_code == env_code == 2, (en, zh)
    assert len(zh.strip().splitlines()) == 1 and "Traceback" not in zh
    assert untranslated(prose(zh)) == [], zh
    assert by_env == zh
    # English stays English (said without Chinese: a short error has no three-word run to find)
    assert en != zh and not re.search(r"[\u3000-\u9fff\uff00-\uffef]", en), en


def test_the_language_is_read_before_argparse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUPLAB_LANG", "zh_CN.UTF-8")  # a locale's spelling names its language
    assert lang_of(["run"]) == "zh"
    monkeypatch.setenv("GROUPLAB_LANG", "fr")
    assert lang_of(["run"]) == "en"
    monkeypatch.delenv("GROUPLAB_LANG")
    assert lang_of(["run", "--lang", "zh"]) == "zh"
    assert lang_of(["run", "--lang=zh"]) == "zh"
    assert lang_of(["run", "--lang", "fr"]) == "en"  # the command then refuses --lang fr itself
    assert lang_of(["explain", "--", "--lang", "zh"]) == "en"


def test_the_line_ctrl_c_prints_during_spark_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_LANG", "zh")
    for done in ("writing 2 table(s): rebalances, assignments", "3 of 40 Spark tasks", "starting Spark", ""):
        line = interrupted_line("analyze", done)
        assert line.startswith("grouplab analyze: ") and untranslated(line) == [], line
    assert "rebalances, assignments" in interrupted_line("analyze", "writing 2 table(s): rebalances, assignments")
    monkeypatch.setattr(cli, "_LANG", "en")
    assert interrupted_line("sweep", "starting Spark") == "grouplab sweep: interrupted after starting Spark; Spark stopped"


def test_chinese_help_wraps_by_cells_and_never_inside_a_name() -> None:
    lines = wrap_cells("配合 --group-protocol consumer，指定请求的服务端分配器（默认：由协调者按其 "
                       "group.consumer.assignors 选择）", 30)
    assert all(cell_len(line) <= 32 for line in lines)  # a closing mark may hang over by one
    assert "--group-protocol" in "".join(lines) and "group.consumer.assignors" in " ".join(lines)
    assert not any(line.startswith(("，", "）", "：")) or line.endswith("（") for line in lines)


def test_english_help_is_unchanged(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROUPLAB_LANG", raising=False)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: grouplab run") and "\noptions:\n" in out and "(default: t0:3,t1:3)" in out


async def _line_with(stream: asyncio.StreamReader, word: str, seen: list[str]) -> str:
    while True:
        line = (await asyncio.wait_for(stream.readline(), 60)).decode()
        assert line, f"the stream ended before a line with {word!r}: {seen}"
        seen.append(line)
        if word in line:
            return line


def test_coordinator_and_consumer_say_their_lines_in_chinese(tmp_path: Path) -> None:
    """What `coordinator` and `consumer` print around their views: where they listen, what they
    restored, that Ctrl-C stopped them."""

    async def scene() -> tuple[list[str], list[str]]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "GROUPLAB_LANG": "zh"}  # the environment's language
        start = (sys.executable, "-m", "grouplab.cli")
        coordinator = await asyncio.create_subprocess_exec(
            *start, "coordinator", "--port", "0", "--kafka-port", "0", "--data-dir", str(tmp_path), env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        said: list[str] = []
        heard: list[str] = []
        try:
            assert coordinator.stderr is not None
            listening = await _line_with(coordinator.stderr, "监听", said)
            port = re.search(r"127\.0\.0\.1:(\d+)", listening)
            assert port, listening
            consumer = await asyncio.create_subprocess_exec(
                *start, "consumer", "--bootstrap-server", f"127.0.0.1:{port.group(1)}", "--topics", "t0", "--group", "g", env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            assert consumer.stdout is not None
            await _line_with(consumer.stdout, "正在加入", heard)
            await _line_with(consumer.stdout, "代", heard)  # its view of the generation it joined
            consumer.send_signal(signal.SIGINT)
            out, _ = await asyncio.wait_for(consumer.communicate(), 60)
            heard += out.decode().splitlines()
            assert consumer.returncode == 130
        finally:
            coordinator.send_signal(signal.SIGINT)
            out, err = await asyncio.wait_for(coordinator.communicate(), 60)
            said += err.decode().splitlines()
        assert coordinator.returncode == 130
        return said, heard

    said, heard = asyncio.run(scene())
    assert untranslated(prose("\n".join(said))) == [] and untranslated(prose("\n".join(heard))) == []
    assert "已中断：协调者已停止" in said[-1] and any("已离开消费组" in line for line in heard)
