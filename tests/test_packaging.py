"""grouplab as someone else installs it (docs/design.md §9): `pip install grouplab`, no extras, in
a fresh virtual environment, from the wheel this tree builds.

- The install adds one import name, `grouplab`, and none of the extras' packages; every command
  that needs no extra works, built-in scenarios included; every command that needs one says which
  in one line, exit 1, no traceback; every module but the extras' few imports.
- An application with its own `consumer.py` and `protocol.py` at its root installs grouplab beside
  them and its suite passes, with grouplab's pytest fixture.

Slow (a wheel build, a venv, a few pip installs: about 30 s, most of it pip), so the venv is made
once for the module. It needs the package registry for the core dependencies (pip's cache makes
that quick): without a network it skips and says so, except under CI=true, where it must run.
The first two tests are fast and need none of that: the extras' table against pyproject.toml, and
no import in grouplab/ of a package that neither the core nor an extra installs.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grouplab.extras import EXTRAS

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
IMPORT_NAMES = {"kafka-python": "kafka"}  # a distribution whose import name is not its own name
# What a plain install must not bring: the extras' packages (and what they pull in), the dev tools.
NOT_IN_CORE = {"matplotlib", "numpy", "pyspark", "py4j", "starlette", "uvicorn", "kazoo", "httpx", "playwright",
               "pytest", "hypothesis", "mypy", "aiokafka", "confluent-kafka", "kio"}
# Imports a module may make beyond the core and the extras: the pytest plugin runs only inside pytest.
PYTEST_ONLY = {"grouplab/testing/plugin.py": {"pytest", "pytest_asyncio"}}
# Top-level names an application uses for its own modules (grouplab had the first three until issue 20).
APP_NAMES = {"protocol", "consumer", "coordinator", "scenarios", "tests", "scripts", "docs"}
# pip's words for a registry it cannot reach: only these make the venv tests skip (never under CI=true).
OFFLINE = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
           "Network is unreachable", "ConnectTimeoutError", "Max retries exceeded")


def requirement_name(spec: str) -> str:
    """`matplotlib>=3.8` -> `matplotlib`; `grouplab[plot,ui]` -> `grouplab`."""
    for stop in "<>=!~[; ":
        spec = spec.split(stop)[0]
    return spec.strip().lower()


def test_the_extras_table_is_pyprojects() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    for name, modules in EXTRAS.items():
        assert {requirement_name(r) for r in extras[name]} == set(modules), name
    assert extras["all"] == [f"grouplab[{','.join(EXTRAS)}]"]
    assert set(extras) == set(EXTRAS) | {"all", "dev"}


def test_grouplab_imports_only_the_core_and_the_extras() -> None:
    """Every import in grouplab/ of something outside the standard library is grouplab itself, a
    core dependency or a module of an extra: a dev tool (httpx, playwright) only in tests/, pytest
    only in the pytest plugin, which pytest alone loads."""
    core = {IMPORT_NAMES.get(n, n) for n in map(requirement_name, PYPROJECT["project"]["dependencies"])}
    allowed = core | {"grouplab"} | {m for modules in EXTRAS.values() for m in modules}
    found: dict[str, str] = {}
    for path in sorted((ROOT / "grouplab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                root = name.partition(".")[0]
                where = path.relative_to(ROOT).as_posix()
                if root not in sys.stdlib_module_names | allowed | PYTEST_ONLY.get(where, set()):
                    found[f"{where}:{node.lineno}"] = name
    assert found == {}, "add it to pyproject.toml's dependencies or an extra (and grouplab/extras.py)"


# ----------------------------------------------------------------------------- a fresh install


@dataclass
class Venv:
    """A virtual environment outside this tree, and what its first install added."""

    path: Path
    work: Path  # a directory outside this tree to run commands in
    added: set[str] = field(default_factory=set)  # site-packages entries the grouplab install added
    record: list[str] = field(default_factory=list)  # the installed grouplab's RECORD paths
    site: set[str] = field(default_factory=set)  # site-packages entries after it
    packages: dict[str, str] = field(default_factory=dict)  # `pip list` after it: name -> version

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def run(self, *args: str | Path, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                              cwd=cwd or self.work, env=clean_env(), stdin=subprocess.DEVNULL)

    def grouplab(self, *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.run(self.path / "bin" / "grouplab", *args, timeout=timeout)

    def pip(self, *args: str | Path) -> None:
        """pip in this venv; a registry out of reach skips the tests (fails them under CI=true)."""
        proc = self.run(self.python, "-m", "pip", *args, "--disable-pip-version-check", timeout=300)
        check_pip(proc, f"pip {' '.join(map(str, args))}")


def clean_env() -> dict[str, str]:
    """This environment less what would let the venv see this tree or the dev venv."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV", "PYTEST_ADDOPTS",
            "PYTEST_PLUGINS", "COLUMNS"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def check_pip(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode == 0:
        return
    output = proc.stdout + proc.stderr
    message = f"{what} failed (exit {proc.returncode}):\n{output[-3000:]}"
    if os.environ.get("CI") != "true" and any(word in output for word in OFFLINE):
        pytest.skip(f"no package registry to install grouplab's core dependencies from: {what}")
    pytest.fail(message)


def site_packages(venv: Venv) -> Path:
    out = venv.run(venv.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    return Path(out.stdout.strip())


def build_wheel(out: Path) -> Path:
    """The wheel of this tree, built from a copy of what goes into it (a stale build/ in the tree
    would add modules that no longer exist; the tree is left untouched)."""
    src = out / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "grouplab", src / "grouplab", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                           "-w", str(out / "dist"), str(src)],  # a path, never a bare name pip looks up
                          capture_output=True, text=True, timeout=300, env=clean_env(), cwd=out)
    check_pip(proc, "pip wheel (setuptools for the isolated build)")
    (wheel,) = (out / "dist").glob("grouplab-*.whl")
    return wheel


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """`pip install grouplab-VERSION.whl` into a new venv, and what that added."""
    tmp = tmp_path_factory.mktemp("packaging")
    wheel = build_wheel(tmp)
    env = Venv(tmp / "venv", tmp / "work")
    env.work.mkdir()
    proc = subprocess.run([sys.executable, "-m", "venv", str(env.path)], capture_output=True, text=True,
                          timeout=120, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    site = site_packages(env)
    before = {p.name for p in site.iterdir()}
    env.pip("install", "--quiet", wheel)
    env.site = {p.name for p in site.iterdir()}
    env.added = env.site - before
    (dist_info,) = site.glob("grouplab-*.dist-info")
    env.record = [line.rsplit(",", 2)[0] for line in (dist_info / "RECORD").read_text().splitlines() if line]
    listing = env.run(env.python, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check")
    env.packages = {p["name"].lower(): p["version"] for p in json.loads(listing.stdout)}
    return env


@pytest.fixture(scope="module")
def simulated_run(venv: Venv) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`grouplab simulate --scenario crash-storm --seed 1` in the venv, outside this tree, and its run directory."""
    run_dir = venv.work / "runs" / "crash-storm-1"
    return venv.grouplab("simulate", "--scenario", "crash-storm", "--seed", "1", "--run-dir", run_dir), run_dir


def no_traceback(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc.stderr


@pytest.mark.slow
def test_the_install_adds_one_import_name_and_no_extra(venv: Venv) -> None:
    tops = {path.split("/")[0] for path in venv.record if not path.startswith("..")}  # (../../bin/grouplab)
    assert tops == {"grouplab", f"grouplab-{VERSION}.dist-info"}, tops
    assert not venv.site & APP_NAMES, venv.site & APP_NAMES
    # The rest of what the install added: the core dependencies (and what they need).
    others = {name for name in venv.added if not name.startswith(("grouplab", "__pycache__"))}
    assert others, "the core dependencies were already in the new venv?"
    assert {"msgpack", "structlog", "rich", "kafka", "crc32c"} <= others, others
    assert not set(venv.packages) & NOT_IN_CORE, sorted(venv.packages)
    assert venv.packages["grouplab"] == VERSION


@pytest.mark.slow
def test_version_and_help(venv: Venv) -> None:
    proc = venv.grouplab("--version")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"grouplab {VERSION}"), proc.stderr
    proc = venv.grouplab("--help")
    assert proc.returncode == 0 and "simulate" in proc.stdout, proc.stderr


@pytest.mark.slow
def test_simulate_finds_the_builtin_scenarios_in_the_package(simulated_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, run_dir = simulated_run
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "all invariants held" in " ".join(proc.stdout.split())
    assert (run_dir / "trace" / "coordinator.jsonl").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ["replay", "{run}"],
    ["explain", "{run}", "--generation", "2"],
    ["explain", "eager-vs-cooperative", "--lang", "zh"],
    ["lessons"],
    ["assign", "--assignor", "cooperative-sticky", "--topics", "t0:3", "--member", "c0=t0", "--member", "c1=t0"],
    ["compare"],
    ["simulate", "--protocol", "zk", "--scenario", "slow-release", "--seed", "3"],
])
def test_commands_that_need_no_extra_work(venv: Venv, simulated_run: tuple[subprocess.CompletedProcess[str], Path],
                                          args: list[str]) -> None:
    proc = venv.grouplab(*(a.format(run=simulated_run[1]) for a in args))
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_the_coordinator_protocol_over_sockets(venv: Venv) -> None:
    """`grouplab run`: a coordinator, consumers and the Kafka-wire listener over loopback."""
    proc = venv.grouplab("run", "--consumers", "2", "--port", "0", "--kafka-port", "0", "--hold", "0",
                         "--config", "group.initial.rebalance.delay.ms=0", "--timeout", "60")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert " rebalances · 3 consumers ran" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("args, said, extra", [
    (["plot", "{run}", "--out", "timeline.png"], "plot", "plot"),
    (["analyze", "{run}", "--out", "analysis"], "analyze", "spark"),
    (["sweep", "--scenario", "crash-storm", "--seeds", "1", "--out", "sweep"], "sweep", "spark"),
    (["ui", "--port", "0", "--kafka-port", "0", "--ui-port", "0"], "ui", "ui"),
    (["run", "--ui", "--port", "0", "--kafka-port", "0", "--ui-port", "0"], "run --ui", "ui"),
    (["run", "--protocol", "zk", "--zookeeper", "127.0.0.1:2181"], "run --zookeeper", "zk"),
    (["compare", "--real", "--zookeeper", "127.0.0.1:2181"], "compare --zookeeper", "zk"),
])
def test_a_command_that_needs_an_extra_names_it(venv: Venv, simulated_run: tuple[subprocess.CompletedProcess[str], Path],
                                                args: list[str], said: str, extra: str) -> None:
    proc = venv.grouplab(*(a.format(run=simulated_run[1]) for a in args), timeout=60)
    (line,) = no_traceback(proc).splitlines()
    assert proc.returncode == 1
    assert line.startswith(f"grouplab {said} needs ") and line.endswith(f": pip install 'grouplab[{extra}]'"), line


@pytest.mark.slow
def test_every_module_but_the_extras_imports(venv: Venv) -> None:
    """What a core path may import, imports: only the Spark pipeline's modules and the dashboard's
    web server need their extra to be imported at all (and grouplab.testing's pytest plugin, pytest)."""
    script = textwrap.dedent("""
        import importlib, json, pkgutil, grouplab
        failed = {}
        for m in pkgutil.walk_packages(grouplab.__path__, "grouplab."):
            try:
                importlib.import_module(m.name)
            except ModuleNotFoundError as exc:
                failed[m.name] = exc.name
        print(json.dumps(failed))
    """)
    proc = venv.run(venv.python, "-c", script)
    assert proc.returncode == 0, proc.stderr
    failed = json.loads(proc.stdout)
    allowed = {m for modules in EXTRAS.values() for m in modules}
    assert {m: n for m, n in failed.items() if n.partition(".")[0] not in allowed
            and not (m.startswith("grouplab.testing") and n == "pytest")} == {}
    assert {m for m in failed if not m.startswith("grouplab.testing")} == {
        "grouplab.pipeline.analyze", "grouplab.pipeline.report", "grouplab.pipeline.schema",
        "grouplab.pipeline.sweep", "grouplab.pipeline.tables", "grouplab.ui.web"}


# ----------------------------------------------------------------------------- an application beside it


APP_FILES = {
    "consumer.py": '''
        """The application's own consumer: what it does with a record."""

        def handle(value: bytes) -> bytes:
            return value.upper()
    ''',
    "protocol.py": '''
        """The application's own wire format version."""

        VERSION = "orders-v1"
    ''',
    "pyproject.toml": '''
        [tool.pytest.ini_options]
        pythonpath = ["."]
        testpaths = ["tests"]
    ''',
    "tests/test_modules.py": '''
        from pathlib import Path

        import consumer
        import protocol
        from consumer import handle
        from protocol import VERSION

        from grouplab.consumer.assignors import get_assignor
        from grouplab.protocol.types import Subscription, TopicPartition

        ROOT = Path(__file__).resolve().parent.parent


        def test_its_own_modules_beside_grouplabs() -> None:
            assert Path(consumer.__file__).parent == ROOT and Path(protocol.__file__).parent == ROOT
            assert handle(b"order") == b"ORDER" and VERSION == "orders-v1"
            got = get_assignor("range").assign(partitions_per_topic={"orders": 3},
                                               subscriptions={"app-1": Subscription(topics=["orders"])})
            assert got == {"app-1": [TopicPartition("orders", p) for p in range(3)]}
    ''',
    "tests/test_app.py": '''
        import time

        from consumer import handle
        from kafka import KafkaConsumer
        from protocol import VERSION


        def test_app_against_grouplab(grouplab_cluster) -> None:
            grouplab_cluster.create_topic("orders", partitions=3)
            c = KafkaConsumer("orders", bootstrap_servers=grouplab_cluster.bootstrap, group_id="app",
                              client_id="app-1", auto_offset_reset="earliest", enable_auto_commit=False)
            try:
                deadline = time.monotonic() + 30
                while not c.assignment() and time.monotonic() < deadline:
                    c.poll(timeout_ms=1000)  # joins the group; no records yet
                group = grouplab_cluster.wait_stable("app", members=1, timeout=30)
                assert group.generation >= 1 and len(group.members) == 1
                assert sorted(p for ps in group.assignments.values() for p in ps) == [
                    ("orders", 0), ("orders", 1), ("orders", 2)]
            finally:
                c.close()
            assert handle(b"x") == b"X" and VERSION == "orders-v1"


        def test_a_cluster_in_a_with_block() -> None:
            from grouplab.testing import Cluster

            with Cluster() as c:
                assert c.bootstrap.startswith("127.0.0.1:")
    ''',
}


@pytest.fixture(scope="module")
def app(venv: Venv) -> Path:
    """An application's project beside the install: its own consumer.py and protocol.py at its
    root, its tests, and pytest installed into the venv as the application would."""
    root = venv.work / "orders-app"
    for name, text in APP_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip())
    venv.pip("install", "--quiet", "pytest")
    return root


def app_pytest(venv: Venv, app: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return venv.run(venv.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, cwd=app, timeout=180)


@pytest.mark.slow
def test_an_app_with_its_own_consumer_and_protocol_modules(venv: Venv, app: Path) -> None:
    proc = app_pytest(venv, app, "tests/test_modules.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


@pytest.mark.slow
def test_an_apps_suite_passes_with_the_grouplab_cluster_fixture(venv: Venv, app: Path) -> None:
    proc = app_pytest(venv, app)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "3 passed" in proc.stdout, proc.stdout[-3000:]


def test_the_first_install_says_what_it_is_doing() -> None:
    """Issue 25, item 7: the first `scripts/demo` or `scripts/test` is not a silent minute. The
    install says its size first, a line per package as pip collects it, and the size at the end;
    pip's own output is kept in .venv/pip.log and shown if it fails."""
    env = (ROOT / "scripts" / "_env.sh").read_text()
    install = env[env.index("installing the project"):env.index(".installed-$HASH-$1\"\n", env.index("installing the project"))]
    assert "about 750 MB" in install and "grep --line-buffered -E '^Collecting '" in install
    assert "pip.log" in install and "tail -n 30" in install
    assert "-e \"$ROOT[dev]\"" in install and "--quiet -e" not in install
