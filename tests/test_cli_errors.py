"""Issue 11: every user mistake is one line on stderr, a non-zero exit and no traceback; Ctrl-C
ends a command with exit 130 within two seconds; --help shows defaults; --version."""

from __future__ import annotations

import os
import signal
import socket
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.spark_settings import TEST_SPARK_CONF

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("COLUMNS", None)


def grouplab(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grouplab.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV, cwd=ROOT)


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def busy_port() -> object:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def test_port_in_use(busy_port: int) -> None:
    for command in ("coordinator", "run"):
        one_line_error(grouplab(command, "--port", str(busy_port), "--kafka-port", "0"), 1, "already in use", "--port")
        one_line_error(grouplab(command, "--port", "0", "--kafka-port", str(busy_port)), 1, "already in use",
                       "--kafka-port")


@pytest.mark.parametrize("command", ["coordinator", "run"])
def test_a_data_dir_under_a_file_is_said_to_be_the_data_dir(command: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    one_line_error(grouplab(command, "--port", "0", "--data-dir", str(tmp_path / "file" / "data")), 1,
                   "cannot use the data directory", "Not a directory")


@pytest.mark.parametrize("command", ["coordinator", "run"])
def test_port_out_of_range(command: str) -> None:
    one_line_error(grouplab(command, "--port", "99999"), 2, "--port", "0 to 65535")


@pytest.mark.parametrize("args, words", [
    (["--consumers", "0"], ["--consumers 0", "--forever"]),
    (["--consumers", "-1"], ["--consumers"]),
    (["--consumer-config", "no.such=1"], ["no.such"]),
    (["--records", "5"], ["--delivery"]),
    (["--topics", "t0"], ["TOPIC:PARTITIONS"]),
    (["--assignor", "nope"], ["nope"]),
    (["--timeout", "x"], ["--timeout"]),
])
def test_run_mistakes(args: list[str], words: list[str]) -> None:
    one_line_error(grouplab("run", *args, timeout=20), 2, *words)


@pytest.mark.parametrize("args, words", [
    (["--member", "c0=t0", "--member", "c1=t9"], ["'t9'", "--topics"]),
    (["--member", "c0=t0", "--member", "c0=t0"], ["twice"]),
    (["--member", "c0=t0", "--owned", "c0=t0:7"], ["t0:7", "no such partition"]),
    (["--member", "c0=t0", "--owned", "c0=t5:0"], ["not in --topics"]),
    (["--member", "c0=t0", "--member", "c1=t0", "--owned", "c0=t0:0", "--owned", "c1=t0:0"], ["both"]),
    ([], ["--member"]),
])
def test_assign_mistakes(args: list[str], words: list[str]) -> None:
    one_line_error(grouplab("assign", "--assignor", "sticky", "--topics", "t0:1", *args), 2, *words)


@pytest.mark.parametrize("args, words", [
    (["--scenario", "crash-storm", "--seed", "3", "--seeds", "1-5"], ["--seed", "--seeds"]),
    (["--scenario", "no-such-scenario"], ["no-such-scenario"]),
    (["--scenario", "crash-storm", "--seeds", "x"], ["'x'"]),
    (["--scenario", "crash-storm", "--seeds", "1-3", "--run-dir", "/tmp/x"], ["--run-dir"]),
    (["--scenario", "crash-storm", "--assignor", "nope"], ["nope"]),
    (["--protocol", "zk", "--scenario", "nope"], ["'nope'", "herd"]),
    (["--protocol", "zk", "--scenario", "crash-storm"], ["'crash-storm'", "herd"]),
    (["--protocol", "zk", "--scenario", "herd", "--members", "3"], ["--members"]),
])
def test_simulate_mistakes(args: list[str], words: list[str]) -> None:
    one_line_error(grouplab("simulate", *args), 2, *words)


@pytest.mark.parametrize("args, code, words", [
    (["--consumers", "2"], 2, ["--consumers", "3 or more"]),
    (["--add", "t9:3"], 2, ["t9", "--topics"]),
    (["--add", "t0:2"], 2, ["already has 6", "larger"]),
    (["--add", "t0"], 2, ["TOPIC:TOTAL"]),
    (["--zookeeper", "127.0.0.1:2181"], 2, ["--real"]),
    (["--real", "--seed", "3"], 2, ["--seed", "simulators"]),
    (["--real", "--zookeeper", "nohost"], 2, ["HOST:PORT"]),
    (["--session-timeout-ms", "1000"], 2, ["heartbeat.interval.ms"]),
    (["--session-timeout-ms", "5000"], 2, ["6000", "group.min.session.timeout.ms"]),
    (["--zk-session-timeout-ms", "100"], 2, ["tickTime", "4000"]),
    (["--real", "--zookeeper", "127.0.0.1:1"], 1, ["cannot reach ZooKeeper", "zookeeper.connection.timeout.ms"]),
])
def test_compare_mistakes(args: list[str], code: int, words: list[str]) -> None:
    one_line_error(grouplab("compare", *args, timeout=60), code, *words)


def test_no_server() -> None:
    one_line_error(grouplab("describe", "--group", "g", "--bootstrap-server", "127.0.0.1:1"), 1, "cannot connect")
    one_line_error(grouplab("consumer", "--group", "g", "--topics", "t0", "--bootstrap-server", "127.0.0.1:1"),
                   1, "cannot connect")
    one_line_error(grouplab("topics", "list", "--bootstrap-server", "127.0.0.1:1"), 1, "cannot connect")


def test_describe_unknown_group() -> None:
    server = subprocess.Popen([sys.executable, "-m", "grouplab.cli", "coordinator", "--port", "0", "--kafka-port", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        assert server.stderr is not None
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            line = server.stderr.readline()
            if "listening on" in line:
                port = line.split("listening on ")[1].split()[0].rsplit(":", 1)[1]
        assert port, "the coordinator did not start"
        one_line_error(grouplab("describe", "--group", "nosuch", "--bootstrap-server", f"127.0.0.1:{port}"), 1,
                       "'nosuch' does not exist")
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=5) == 130
    finally:
        if server.poll() is None:
            server.kill()


def test_unknown_command_and_bad_value_are_one_line() -> None:
    one_line_error(grouplab("nope"), 2, "nope")
    one_line_error(grouplab("topics", "create", "t", "--partitions", "0", "--bootstrap-server", "127.0.0.1:1"),
                   2, "--partitions")


def test_version() -> None:
    from importlib.metadata import version

    proc = grouplab("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"grouplab {version('grouplab')}"


@pytest.mark.parametrize("command, expected", [
    ("run", ["(default: 3)", "(default: t0:3,t1:3)", "(default: 0)", "(default: 120.0)"]),
    ("coordinator", ["(default: 9192)", "(default: 9092)", "(default: 127.0.0.1)"]),
    ("simulate", ["(default: 1)", "(default: 60)"]),
    ("sweep", ["(default: 1-100)"]),
    ("compare", ["(default: 5)", "(default: t0:6,t1:6)", "(default: 10000)", "(default: 300000)", "(default: 30000)"]),
])
def test_help_shows_defaults(command: str, expected: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "grouplab.cli", command, "--help"], capture_output=True, text=True,
                          timeout=30, env={**ENV, "COLUMNS": "400"}, cwd=ROOT)
    assert proc.returncode == 0
    for text in expected:
        assert text in proc.stdout, (text, proc.stdout)


def test_piped_tables_are_not_cut() -> None:
    """Piped, without COLUMNS, a table is laid out wide (not rich's 80 columns), so a cell stays whole."""
    proc = grouplab("assign", "--assignor", "range", "--topics", "a-rather-long-topic-name:40",
                    "--member", "c0=a-rather-long-topic-name")
    assert proc.returncode == 0, proc.stderr
    whole = "a-rather-long-topic-name[" + ",".join(map(str, range(40))) + "]"
    assert whole in proc.stdout and "…" not in proc.stdout, proc.stdout


# Ctrl-C must stop the work, not hang: what a test can tell without a timing margin is that the
# command said it was interrupted part way (what it had done) and exited 130, well before the
# minutes its work would take. How fast it stops is not the test's to time on a loaded machine.
NO_HANG_S = 30.0


def interrupt(args: list[str], ready: str | None, wait_s: float) -> tuple[int, float, str, str]:
    """Start grouplab, wait for `ready` on stderr (or `wait_s`), send SIGINT; (exit code, seconds to exit, out, err)."""
    proc = subprocess.Popen([sys.executable, "-m", "grouplab.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        seen = ""
        if ready is not None:
            assert proc.stderr is not None
            deadline = time.monotonic() + 60
            while ready not in seen and time.monotonic() < deadline:
                seen += proc.stderr.readline()
        time.sleep(wait_s)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=2 * NO_HANG_S)
        return proc.returncode, time.monotonic() - sent, out, seen + err
    finally:
        if proc.poll() is None:
            proc.kill()


def test_ctrl_c_in_simulate_seeds() -> None:
    code, took, out, err = interrupt(["simulate", "--scenario", "crash-storm", "--seeds", "1-100000"], "running", 1.0)
    assert code == 130 and took < NO_HANG_S, (code, took, err)
    assert "Traceback" not in err
    assert "interrupted after" in err and "seed(s)" in out  # what was done so far


# The test session's Spark settings (tests/spark_settings.py), as a user passes their own: what Ctrl-C
# does does not depend on them, and the JVM starts with less CPU.
SPARK_CONF = [arg for key, value in TEST_SPARK_CONF.items() for arg in ("--conf", f"{key}={value}")]


def test_ctrl_c_in_sweep_stops_spark_quietly(tmp_path: Path) -> None:
    # Interrupted while its job runs (it says its size first, then that Spark started).
    code, took, _out, err = interrupt(["sweep", "--scenario", "crash-storm", "--seeds", "1-5000",
                                       "--out", str(tmp_path / "sweep"), *SPARK_CONF], "Spark local", 1.0)
    assert code == 130 and took < NO_HANG_S, (code, took, err)
    assert "Traceback" not in err and "py4j" not in err.lower()
    assert "grouplab sweep: interrupted" in err


def test_ctrl_c_in_analyze_stops_spark_quietly(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    made = subprocess.run([sys.executable, "-m", "grouplab.cli", "simulate", "--scenario", "crash-storm", "--seed", "1",
                           "--run-dir", str(run_dir)], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert made.returncode == 0, made.stderr
    # Interrupted while Spark reads the logs and writes the tables (it prints its banner first).
    code, took, _out, err = interrupt(["analyze", str(run_dir), "--out", str(tmp_path / "out"), *SPARK_CONF],
                                      "grouplab analyze", 0.5)
    assert code == 130 and took < NO_HANG_S, (code, took, err)
    assert "Traceback" not in err and "py4j" not in err.lower()
    assert "grouplab analyze: interrupted" in err


@pytest.mark.parametrize("argv, prog", [
    (["compare", "--bogus"], "grouplab compare"),
    (["run", "--duration", "5"], "grouplab run"),
    (["topics", "list", "--bogus"], "grouplab topics list"),
])
def test_unrecognized_arguments_name_the_command(argv: list[str], prog: str) -> None:
    # argparse used to blame the top-level parser: "grouplab: unrecognized arguments".
    one_line_error(grouplab(*argv), 2, f"{prog}: unrecognized arguments", f"see {prog} --help")


@pytest.mark.parametrize("argv, hint", [
    (["describe", "--group", "g", "--port", "9999"], "takes --bootstrap-server HOST:PORT (servers listen on --port): "
                                                     "--bootstrap-server 127.0.0.1:9999"),
    (["topics", "list", "--port=9193"], "--bootstrap-server 127.0.0.1:9193"),
    (["coordinator", "--bootstrap-server", "127.0.0.1:9192"], "it listens on --port PORT (clients take --bootstrap-server)"),
])
def test_the_other_port_spelling_gets_a_hint(argv: list[str], hint: str) -> None:
    """Servers listen on --port, clients reach them with --bootstrap-server (issue 25, item 6)."""
    one_line_error(grouplab(*argv), 2, "unrecognized arguments", hint)


@pytest.mark.parametrize("command", ["coordinator", "run", "consumer", "simulate"])
def test_a_run_dir_that_cannot_be_written_is_named(command: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    extra = {"consumer": ["--group", "g", "--topics", "t0"], "simulate": ["--scenario", "hang"]}.get(command, [])
    # (run once said "cannot listen on 127.0.0.1:0: Not a directory; check --host and --port")
    one_line_error(grouplab(command, *extra, "--run-dir", str(tmp_path / "file" / "run")), 1,
                   "cannot use --run-dir", "Not a directory")
    one_line_error(grouplab(command, *extra, "--run-dir", str(tmp_path / "file")), 1,
                   "cannot use --run-dir", "not a directory")


def test_a_missing_config_file_is_named() -> None:
    one_line_error(grouplab("coordinator", "--config-file", "/nonexistent/server.properties"), 2,
                   "cannot read --config-file /nonexistent/server.properties", "No such file")


def test_a_consumer_flag_that_is_not_true_or_false_is_refused() -> None:
    # ConsumerConfig read anything but "true" as false; the ZooKeeper-era config already refused it.
    one_line_error(grouplab("consumer", "--group", "g", "--topics", "t0", "--consumer-config",
                            "allow.auto.create.topics=yes", "--bootstrap-server", "127.0.0.1:1"),
                   2, "allow.auto.create.topics", "true or false")


# A command whose extra is not installed (docs/design.md §9): one line naming the extra, exit 1,
# before anything starts. Here the extras are installed, so they are hidden from grouplab.extras;
# tests/test_packaging.py runs the same commands in a real install without them.
@pytest.mark.parametrize("argv, said, extra, modules", [
    (["plot", "no-such-run", "--out", "t.png"], "plot", "plot", ["matplotlib"]),
    (["analyze", "no-such-run", "--out", "out"], "analyze", "spark", ["pyspark", "matplotlib"]),
    (["sweep", "--scenario", "crash-storm", "--seeds", "1", "--out", "out"], "sweep", "spark", ["pyspark", "matplotlib"]),
    (["ui", "--port", "0", "--kafka-port", "0", "--ui-port", "0"], "ui", "ui", ["starlette", "uvicorn"]),
    (["run", "--ui", "--port", "0", "--kafka-port", "0", "--ui-port", "0"], "run --ui", "ui", ["starlette", "uvicorn"]),
    (["run", "--protocol", "zk", "--zookeeper", "127.0.0.1:1"], "run --zookeeper", "zk", ["kazoo"]),
    (["compare", "--real", "--zookeeper", "127.0.0.1:1"], "compare --zookeeper", "zk", ["kazoo"]),
])
def test_a_missing_extra_is_named_in_one_line(argv: list[str], said: str, extra: str, modules: list[str],
                                               monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    import grouplab.extras
    from grouplab.cli import main

    real_find_spec = grouplab.extras.find_spec
    monkeypatch.setattr(grouplab.extras, "find_spec",
                        lambda name: None if name in modules else real_find_spec(name))
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"grouplab {said} needs {' and '.join(modules)}: pip install 'grouplab[{extra}]'"]
    assert list(tmp_path.iterdir()) == []  # refused before anything started or was written


def test_an_unguarded_import_of_an_extra_is_still_one_line(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The safety net: an extra's ModuleNotFoundError that no require() caught names the extra."""
    import grouplab.cli

    def lost(args: object) -> int:
        raise ModuleNotFoundError("No module named 'kazoo'", name="kazoo.client")

    monkeypatch.setattr(grouplab.cli, "cmd_lessons", lost)
    assert grouplab.cli.main(["lessons"]) == 1
    assert capsys.readouterr().err.splitlines() == ["grouplab lessons needs kazoo: pip install 'grouplab[zk]'"]


@pytest.mark.parametrize("command", [
    ["describe", "--all-groups"], ["describe", "--group", "g"], ["delete", "--group", "g"], ["topics", "list"],
    ["topics", "create", "t", "--partitions", "2"], ["topics", "add-partitions", "t", "--partitions", "3"],
    ["topics", "delete", "t"], ["configs"], ["configs", "--topic", "t"],
    ["consumer", "--group", "g", "--topics", "t"],
], ids=lambda c: " ".join(c[:2]))
def test_a_grouplab_tool_on_the_kafka_port_is_told_which_port_in_one_line(command: list[str]) -> None:
    """The Kafka-wire port answers grouplab's own msgpack clients in their protocol, naming grouplab's
    port, and the tool exits 1 with that line (it printed a traceback, or a consumer retried for ever)."""
    from grouplab.testing import Cluster

    with Cluster() as cluster:
        kafka_port, grouplab_port = cluster.cluster.port, cluster.grouplab_port
        proc = grouplab(*command, "--bootstrap-server", f"127.0.0.1:{kafka_port}", timeout=30)
        assert "Traceback" not in proc.stderr + proc.stdout and proc.returncode == 1, (proc.returncode, proc.stderr)
        said = [line for line in (proc.stderr + proc.stdout).splitlines() if "Kafka-wire port" in line]
        assert len(said) == 1 and f"its port {grouplab_port} (--port)" in said[0], proc.stderr + proc.stdout
        assert cluster.topics() == {}  # nothing was done on its behalf


def test_a_server_that_closes_without_answering_is_one_line(unused_tcp_port_closer: int) -> None:
    """A real Kafka broker (or an older grouplab) closes the connection instead: still one line."""
    one_line_error(grouplab("topics", "list", "--bootstrap-server", f"127.0.0.1:{unused_tcp_port_closer}"), 1,
                   "closed the connection without answering Metadata")


@pytest.fixture
def unused_tcp_port_closer() -> object:
    """A server that reads a request and closes the connection without a word."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_an_explain_filter_that_matches_nothing_names_the_command_and_the_valid_range() -> None:
    """Issue 25, item 7: `--generation 999` names what was asked and what there is to ask for."""
    proc = grouplab("explain", "join-stable", "--generation", "999")
    assert proc.returncode == 1
    line = " ".join(proc.stderr.split())
    assert re.search(r"grouplab explain join-stable --generation 999: no step of this run matches; its generations "
                     r"run from 0 to \d+ \(--generation\), its time from 0 to [\d.]+ s \(--from, --to\)", line), line


def test_assign_owned_by_a_member_that_left_counts_as_moved() -> None:
    """Issue 25, item 5: --owned for a member without --member is a member that left: what it owned
    goes to the others and counts as moved (it was refused, and "moved" read 0)."""
    proc = grouplab("assign", "--assignor", "range", "--topics", "t0:4", "--member", "a=t0", "--member", "b=t0",
                    "--owned", "a=t0:0,t0:1", "--owned", "c=t0:2,t0:3")
    assert proc.returncode == 0, proc.stderr
    assert "left the group: c (owned t0[2,3])" in proc.stdout
    assert "moved 2: t0-2: c→b, t0-3: c→b" in proc.stdout


def test_assign_owned_by_a_member_that_left_the_consumer_protocol_group() -> None:
    """The same for KIP-848's server-side assignors: the coordinator drops a removed member from
    the target assignment, and its partitions count as moved."""
    proc = grouplab("assign", "--protocol", "consumer", "--assignor", "uniform", "--topics", "t0:4",
                    "--member", "a=t0", "--member", "b=t0", "--owned", "a=t0:0,t0:1", "--owned", "c=t0:2,t0:3")
    assert proc.returncode == 0, proc.stderr
    assert "left the group: c (owned t0[2,3])" in proc.stdout
    assert "moved 2: t0-2: c→b, t0-3: c→b" in proc.stdout
