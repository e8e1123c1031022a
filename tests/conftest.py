"""Shared test fixtures: an event recorder that any number of EventLogs feed, condition waits that
wake on those events, an AsyncExitStack for cleaning up servers and clients, and a factory of
fault-injecting proxies (docs/faults.md)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Callable

import pytest

from grouplab.eventlog import EventLog
from grouplab.protocol.effects import LogEvent

DEFAULT_TIMEOUT_S = 10.0


class EventRecorder:
    """Collects (node, LogEvent) from every EventLog made by `log(node)`; `wait_until` re-checks a
    condition after every recorded event (and on a short tick, for state that changes silently)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, LogEvent]] = []
        self._changed = asyncio.Event()

    def log(self, node: str) -> EventLog:
        log = EventLog(node)
        log.listeners.append(self.record)
        return log

    def record(self, node: str, ev: LogEvent) -> None:
        self.records.append((node, ev))
        self._changed.set()

    def events(self, event: str | None = None, node: str | None = None, **fields: Any) -> list[LogEvent]:
        return [
            ev for n, ev in self.records
            if (event is None or ev.event == event) and (node is None or n == node)
            and all(ev.fields.get(k) == v for k, v in fields.items())
        ]

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float = DEFAULT_TIMEOUT_S,
                         what: str = "condition") -> None:
        async def loop() -> None:
            while not predicate():
                self._changed.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), 0.05)
        try:
            await asyncio.wait_for(loop(), timeout_s)
        except asyncio.TimeoutError:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}") from None


@pytest.fixture
def recorder() -> EventRecorder:
    return EventRecorder()


@pytest.fixture
async def cleanup():
    """An AsyncExitStack unwound after the test (register stops/closes with push_async_callback)."""
    async with contextlib.AsyncExitStack() as stack:
        yield stack


@pytest.fixture
async def fault_proxy(recorder: EventRecorder, cleanup: contextlib.AsyncExitStack):
    """A factory: `proxy = await fault_proxy(server.port, seed=7)` starts a FaultProxy in front of
    that port (events logged as node "proxy" into `recorder`); it is stopped at teardown, on the
    `cleanup` stack, so clients made after it are closed before it and servers made before it
    are stopped after it."""
    from grouplab.faults import FaultProxy

    async def start(upstream_port: int, upstream_host: str = "127.0.0.1", seed: int | None = 0,
                    **kwargs: Any) -> FaultProxy:
        proxy = FaultProxy(upstream_host, upstream_port, seed=seed, events=recorder.log("proxy"), **kwargs)
        await proxy.start()
        cleanup.push_async_callback(proxy.stop)
        return proxy

    return start


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession for the whole test session (starting one costs seconds):
    two cores, small. The tests' queries are many and their data tiny, so planning and compiling
    cost more CPU than running them; every setting (tests/spark_settings.py) cuts that and none
    changes a result: the JVM compiles with its quick compiler only (C1: the optimizing
    compiler's warm-up never pays back), one shuffle partition, no adaptive re-planning (a job per query stage), no code
    generation (whole-stage: a Java compile per stage; per expression, Spark's interpreted path,
    which its own tests hold equal to the generated one) and the serial garbage collector. C1
    alone gets a 48 MB code cache, which a session's many generated classes filled: the JVM then
    stopped compiling ("CodeCache is full") and interpreted the rest, so the cache is 256 MB.
    The JVM's own CPU for one analyze and report of a 10-member simulated run
    (`scripts/bench_spark_settings.py`, docs/benchmarks.md): 78 s under grouplab's defaults, 44 s
    under these before code generation was off; warm, 52 s and 38 s. Without code generation a
    warm analyze took 14-15 s of JVM CPU against 19-23 s with it (docs/benchmarks.md). The wall
    time is about the same on a quiet machine (the defaults' optimizing JIT compiles on the other
    core), but the suite has no core to spare."""
    from grouplab.pipeline.session import spark_session
    from tests.spark_settings import TEST_SPARK_CONF

    session = spark_session("local[2]", {**TEST_SPARK_CONF, "spark.driver.memory": "2g"}, app_name="grouplab-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def zookeeper():
    """A real ZooKeeper server for the whole test session (tests/zk_server.py): its `host:port`.
    Installed first if missing and the tests run as root. Where it cannot run, the tests that need
    it say why and skip — except under CI=true, where they fail: CI must run them."""
    import os

    from tests.zk_server import INSTALL, ZooKeeperServer, install_if_root, missing

    install_if_root()
    reason = missing()
    if reason is not None:
        message = f"no ZooKeeper for this test: {reason}; install it with `sudo {INSTALL}`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    server = ZooKeeperServer()
    server.start()
    yield server
    server.stop()


@pytest.hookimpl(optionalhook=True)  # (a run with `-p no:xdist` has no such hook)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` (scripts/test): the Spark files on one worker, the longest files first
    (tests/scheduling.py). Any other --dist is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.scheduling import SuiteScheduling

    return SuiteScheduling(config, log)
