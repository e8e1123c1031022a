"""Every command README.md and docs/*.md show in their code blocks (issue 25): each one either runs
here and exits as documented, or is listed below as a server or a long example, with what it is and
how long it takes, and then at least parses (the flags it uses exist, their values are accepted).

Commands run in order, per file, in one working directory, so that a command may use what an earlier
one made (`grouplab plot runs/seed-7` after `grouplab simulate ... --run-dir runs/seed-7`). The
commands that talk to a coordinator on port 9192 (README's `topics`, `configs`, `describe`,
`delete`) get one, started as README starts it."""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from grouplab.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)

# Commands that run until stopped (servers, --forever, the dashboard) or take long: what they are,
# how long. They are parsed, not run; their behaviour has tests of its own (named).
LONG: dict[str, str] = {
    "scripts/test": "the whole suite, 8-9 minutes on 2 cores (it is what CI runs)",
    "scripts/demo": "README's demo, about 25 s; run by hand before each release, and in short form by tests/test_cli_run.py",
    "grouplab coordinator": "a server: runs until Ctrl-C (tests/test_readable.py starts and stops it)",
    "grouplab consumer": "a consumer: runs until Ctrl-C (tests/test_e2e.py)",
    "grouplab ui": "the dashboard: runs until Ctrl-C (tests/test_ui_web.py, tests/test_ui_browser.py)",
    "grouplab run --ui": "the dashboard over run's script: runs until Ctrl-C (tests/test_ui_browser.py)",
    "grouplab run --kafka-port 9092": "runs until Ctrl-C (--forever) for real clients (tests/test_kafka_clients.py)",
    "grouplab run --protocol zk --zookeeper": "needs a ZooKeeper on 127.0.0.1:2181 (tests/test_zk_e2e.py starts one)",
    "grouplab compare --real --zookeeper": "needs a ZooKeeper on 127.0.0.1:2181 (tests/test_compare.py)",
    "grouplab compare --real": "over real sockets, about 2 minutes (tests/test_compare.py runs each change)",
    "grouplab compare --scale 10,50,100": "the script under every design at 10, 50 and 100 consumers, about 15 s "
                                          "(tests/test_compare.py: 4,20, and 3,10 against a golden file)",
    "grouplab run": "the demo's script over sockets, 20 s to 70 s each (the crashes wait out a 45 s session "
                    "timeout); tests/test_cli_run.py, tests/test_delivery_demos.py",
    "grouplab sweep": "12,000 simulations on Spark, about 20 minutes on 2 cores (tests/test_pipeline_sweep.py: a small one)",
    "grouplab analyze": "Spark over run directories, about a minute (tests/test_pipeline_analyze.py)",
    "grouplab simulate --scenario crash-storm --seeds 1-500": "500 seeds, about 2 minutes",
    "grouplab simulate --scenario network-chaos --seeds 1-500": "500 seeds, about 2 minutes",
    "grouplab simulate --protocol zk --scenario session-expiry --seeds 1-200": "200 seeds, about a minute",
    "grouplab simulate --scenario delivery-": "100 seeds of a delivery scenario, 30-60 s each (tests/test_delivery_sim.py: 8 seeds)",
    "grouplab simulate --scenario partition --seeds 1-100": "100 seeds of 50 members, about 2 minutes",
    "grouplab simulate --scenario crash-storm --group-protocol consumer --seeds 1-100": "100 seeds, about a minute",
    "grouplab explain runs/seed-7 --step": "interactive: waits for Enter after each step",
    # Not long, but they need what README's `grouplab consumer` commands (servers, one per terminal)
    # make: group g with members or committed offsets.
    "grouplab describe --group g": "needs group g, made by README's consumers (tests/test_describe_coordinator.py)",
    "grouplab delete --group g": "needs group g, Empty, with committed offsets (tests/test_delete_groups.py, "
                                 "tests/test_offset_delete.py)",
}
# Documented mistakes: the exit code and words the block shows after them.
EXPECTED = {
    "grouplab assign --assignor roundrobin --topics t:5,u:2 --member C1=t:2,u:1": (
        2, "roundrobin needs the same stream count for every topic of a consumer"),
}
# Placeholders a reader fills in: not runnable as written.
TEMPLATES = ("my-scenario.toml", "runs/NAME", "$mode", "spark://head", "my.properties")


def doc_commands() -> list[tuple[str, str]]:
    """(file, command) for every `grouplab ...` or `scripts/...` line of a shell code block."""
    found = []
    for path in DOCS:
        for match in FENCE.finditer(path.read_text()):
            if match.group(1) not in ("bash", "sh", "shell", "console", ""):
                continue
            lines = match.group(2).splitlines()
            i = 0
            while i < len(lines):
                line = lines[i]
                while line.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line.rstrip()[:-1] + " " + lines[i].strip()
                text = line.strip().removeprefix("$ ")
                head = text.split(" ", 2)
                # `grouplab assign: roundrobin needs ...` is an error a block shows, not a command.
                if (text.startswith(("grouplab ", "scripts/")) and not head[1].endswith(":")
                        and not text.startswith("scripts/ ")):
                    found.append((path.relative_to(ROOT).as_posix(), text))
                i += 1
    return found


def argv_of(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    return words


def long_reason(command: str) -> str | None:
    return next((why for prefix, why in sorted(LONG.items(), key=lambda kv: -len(kv[0])) if command.startswith(prefix)),
                None)


COMMANDS = doc_commands()


def test_the_docs_have_commands_and_every_long_one_says_why() -> None:
    assert len(COMMANDS) > 80
    for prefix, why in LONG.items():
        assert why and any(c.startswith(prefix) for _f, c in COMMANDS), f"{prefix!r} is in no doc any more"


PARSED = [(f, c) for f, c in COMMANDS if c.startswith("grouplab ") and not any(t in c for t in TEMPLATES)]


@pytest.mark.parametrize("where, command", PARSED, ids=[f"{f}:{c[:60]}" for f, c in PARSED])
def test_every_documented_command_parses(where: str, command: str) -> None:
    argv = argv_of(command)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0 and "--help" in argv:  # it printed its help, as it should
            return
        pytest.fail(f"{where}: `{command}` does not parse (exit {exc.code})")


def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _coordinator_on_9192(cwd: Path, env: dict[str, str]) -> subprocess.Popen | None:
    """README's coordinator (its Kafka port off: the commands here need only grouplab's, and 9092
    stays free), or None if it cannot listen on 9192: something else holds the port, e.g. another
    suite's run of this test. Ours only once it says it listens: that another server's port is
    taken says nothing of which one took it (two suites' coordinators once started together, each
    saw 9192 taken, and both suites' commands went to the one that won)."""
    if not _free(9192):
        return None
    server = subprocess.Popen([sys.executable, "-m", "grouplab.cli", "coordinator", "--port", "9192", "--kafka-port",
                               "off"], cwd=cwd, env={**env, "GROUPLAB_LANG": "en"}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    first = server.stderr.readline() if select.select([server.stderr], [], [], 60)[0] else ""
    if "listening on 127.0.0.1:9192" not in first:
        server.kill()
        server.wait(30)
        return None
    # Its later lines (the requests it logs) drained, so that a full pipe never blocks it.
    threading.Thread(target=server.stderr.read, daemon=True).start()
    return server


def test_every_short_documented_command_runs(tmp_path: Path) -> None:
    """Run, in document order, every command not listed as long; a coordinator on 9192 for the
    commands that talk to one, as README's server section starts it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    server = _coordinator_on_9192(tmp_path, env)
    failures, ran = [], 0
    try:
        for where, command in COMMANDS:
            if long_reason(command) is not None or any(t in command for t in TEMPLATES):
                continue
            argv = argv_of(command)
            if argv[0] == "grouplab":
                argv = [sys.executable, "-m", "grouplab.cli", *argv[1:]]
            if server is None and any(w in argv for w in ("topics", "configs", "describe", "delete")):
                continue  # something else holds 9192 on this machine
            proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
                                  stdin=subprocess.DEVNULL)
            ran += 1
            out = proc.stdout + proc.stderr
            code, words = next((v for k, v in EXPECTED.items() if command.startswith(k)), (0, ""))
            if proc.returncode != code or words not in out or "Traceback" in out:
                failures.append(f"{where}: `{command}` exited {proc.returncode} (documented: {code}):\n{out[-1500:]}")
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)
            server.wait(30)
    assert not failures, "\n\n".join(failures)
    assert ran > 40
