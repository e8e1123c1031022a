"""grouplab's pytest plugin, registered through the `pytest11` entry point: installing grouplab
is enough for an application's tests to ask for a coordinator (docs/testing.md).

Fixtures:
- `grouplab_cluster`: a started `Cluster` for one test; its broker settings, topics, data
  directory and faults come from the `grouplab` marker (`@pytest.mark.grouplab(config={...},
  topics={...})`, on the test, its class or its module; the closest wins) over the ini option
  `grouplab_config` (NAME=VALUE lines, for every cluster of the session).
- `grouplab_cluster_factory`: `make(**kwargs)` starts a `Cluster` with those arguments (more
  than one per test, or settings computed in the test); all are closed when the test ends.
- `grouplab_session_cluster`: one `Cluster` for the whole session (settings from the ini only),
  for suites whose tests use groups and topics of their own.
- `grouplab_async_cluster`: a started `AsyncCluster` in the test's event loop, for
  pytest-asyncio tests (needs pytest-asyncio).

When a test using one of them fails, its report gets a section "grouplab" with each group's state,
its last rebalances, what the coordinator did recently and the run directory (event log and
message trace: `grouplab explain RUN_DIR`), kept under pytest's temporary directory; with
`--grouplab-artifacts DIR` it is also copied to DIR/<test id>/ for CI to keep.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterator

import pytest

from grouplab.testing.settings import config_pairs

if TYPE_CHECKING:
    from grouplab.testing.cluster import AsyncCluster
    from grouplab.testing.sync import Cluster

try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - grouplab_async_cluster then says what to install
    pytest_asyncio = None  # type: ignore[assignment]

_MARKER_ARGS = ("config", "topics", "data_dir", "faults", "fault_seed", "brokers")
_CLUSTERS = pytest.StashKey[list[Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("grouplab").addoption(
        "--grouplab-artifacts", metavar="DIR", default=None,
        help="copy the run directory (event log, message trace) of each failing test's grouplab clusters into "
             "DIR/<test id>/, for CI to keep; `grouplab explain` reads it")
    parser.addini("grouplab_config", type="linelist", default=[],
                  help="broker settings for every grouplab cluster (NAME=VALUE lines, Kafka's config names)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "grouplab(config=None, topics=None, data_dir=None, faults=(), fault_seed=None, brokers=1): "
                   "settings of the grouplab_cluster fixture's coordinator (docs/testing.md)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    # A failed wait's own message is the report already; any other failure gets it as a section.
    views = sys.modules.get("grouplab.testing.views")  # not loaded: no cluster was used
    if views is not None and report.failed and report.when in ("call", "setup") and not (
            call.excinfo is not None and call.excinfo.errisinstance(views.WaitTimeout)):
        registered: list[Any] = item.stash.get(_CLUSTERS, [])
        clusters = list(registered)
        shared = getattr(item, "funcargs", {}).get("grouplab_session_cluster")
        if shared is not None:
            clusters.append(shared)
        for cluster in clusters:
            try:
                text = cluster.report()
            except Exception as exc:  # a cluster that cannot report says so instead of hiding the failure
                text = f"(grouplab could not describe the cluster: {exc})"
            report.sections.append(("grouplab", text))
    artifacts = item.config.getoption("--grouplab-artifacts", None)
    if artifacts and report.failed and report.when in ("call", "setup"):
        _keep_run_dirs(item, Path(artifacts))


def _keep_run_dirs(item: pytest.Item, artifacts: Path) -> None:
    """Copy each cluster's run directory, as it is now, to ARTIFACTS/<test id>/[<n>]."""
    registered: list[Any] = item.stash.get(_CLUSTERS, [])
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in item.nodeid)
    for n, cluster in enumerate(registered):
        run_dir = cluster.run_dir
        if run_dir is not None and Path(run_dir).is_dir():
            target = artifacts / safe / (str(n) if n else "")
            shutil.copytree(run_dir, target, dirs_exist_ok=True)


def _settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The marker's arguments, closest last, over the ini's broker settings."""
    kwargs: dict[str, Any] = {}
    for mark in reversed(list(request.node.iter_markers("grouplab"))):
        if mark.args:
            raise pytest.UsageError(f"@pytest.mark.grouplab takes keyword arguments only ({', '.join(_MARKER_ARGS)})")
        unknown = sorted(set(mark.kwargs) - set(_MARKER_ARGS))
        if unknown:
            raise pytest.UsageError(f"@pytest.mark.grouplab got unknown argument(s) {', '.join(unknown)}; "
                                    f"it takes {', '.join(_MARKER_ARGS)}")
        kwargs.update(mark.kwargs)
    return {**kwargs, "config": _merged_config(request.config, kwargs.get("config"))}


def _merged_config(config: pytest.Config, given: Any) -> list[str]:
    return [*config.getini("grouplab_config"), *config_pairs(given)]


def _register(request: pytest.FixtureRequest, cluster: Any) -> None:
    request.node.stash.setdefault(_CLUSTERS, []).append(cluster)


@pytest.fixture
def grouplab_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A started grouplab Cluster for this test (settings: the `grouplab` marker)."""
    from grouplab.testing.sync import Cluster

    cluster = Cluster(run_dir=tmp_path_factory.mktemp("grouplab-run"), **_settings(request)).start()
    _register(request, cluster)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def grouplab_cluster_factory(request: pytest.FixtureRequest,
                             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Cluster]]:
    """`make(config=..., topics=..., ...)`: a started Cluster with Cluster's arguments (over the
    ini's `grouplab_config`), closed when the test ends."""
    from grouplab.testing.sync import Cluster

    made: list[Cluster] = []

    def make(**kwargs: Any) -> Cluster:
        kwargs["config"] = _merged_config(request.config, kwargs.get("config"))
        kwargs.setdefault("run_dir", tmp_path_factory.mktemp("grouplab-run"))
        cluster = Cluster(**kwargs).start()
        made.append(cluster)
        _register(request, cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.close()


@pytest.fixture(scope="session")
def grouplab_session_cluster(request: pytest.FixtureRequest,
                             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One Cluster for the whole session (settings: the ini's `grouplab_config`). Tests share it:
    give each test its own group ids and topics."""
    from grouplab.testing.sync import Cluster

    cluster = Cluster(config=_merged_config(request.config, None),
                      run_dir=tmp_path_factory.mktemp("grouplab-session-run")).start()
    try:
        yield cluster
    finally:
        cluster.close()


if pytest_asyncio is not None:
    @pytest_asyncio.fixture
    async def grouplab_async_cluster(request: pytest.FixtureRequest,
                                     tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[AsyncCluster]:
        """A started AsyncCluster in this test's event loop (settings: the `grouplab` marker)."""
        from grouplab.testing.cluster import AsyncCluster

        cluster = AsyncCluster(run_dir=tmp_path_factory.mktemp("grouplab-run"), **_settings(request))
        await cluster.start()
        _register(request, cluster)
        try:
            yield cluster
        finally:
            await cluster.close()
else:  # pragma: no cover
    @pytest.fixture
    def grouplab_async_cluster() -> None:
        pytest.fail("grouplab_async_cluster needs pytest-asyncio: pip install pytest-asyncio "
                    "(or use grouplab_cluster, whose Cluster runs in a thread of its own)", pytrace=False)
