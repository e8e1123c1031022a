"""`Cluster`: the AsyncCluster for synchronous tests, in an event loop on a thread of its own.

Every method runs the AsyncCluster's counterpart in that loop and waits for it, so a test (and
the Kafka clients it drives: kafka-python's threads, librdkafka's) never shares a loop with the
coordinator, and what the test reads is a snapshot taken between two of the coordinator's steps.
The thread is a daemon and is joined at close; a test that fails or is interrupted still closes
the cluster through the context manager or the pytest fixture.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping, TypeVar

from grouplab.costs import PartitionTime
from grouplab.faults.rules import Rule
from grouplab.protocol.types import TopicPartition
from grouplab.testing.cluster import AsyncCluster, ClusterError
from grouplab.testing.views import GroupView, RebalanceView, WaitTimeout

T = TypeVar("T")
# How much longer than an operation's own timeout the caller waits for the loop thread to answer.
_MARGIN_S = 30.0


class Cluster:
    """A grouplab coordinator for tests: `with Cluster(topics={"orders": 3}) as cluster:`, then
    `cluster.bootstrap` for Kafka clients. Takes AsyncCluster's arguments (docs/testing.md)."""

    def __init__(
        self,
        config: Mapping[str, object] | Iterable[str] | None = None,
        topics: Mapping[str, int] | None = None,
        data_dir: str | Path | None = None,
        run_dir: str | Path | None = None,
        keep_run_dir: bool = False,
        host: str = "127.0.0.1",
        fault_seed: int | None = None,
        faults: Iterable[str] = (),
        brokers: int = 1,
    ) -> None:
        # Built here, in the caller's thread: a bad setting fails at once (ConfigError, FaultSpecError).
        self.cluster = AsyncCluster(config, topics, data_dir, run_dir, keep_run_dir, host, fault_seed, faults, brokers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "Cluster":
        if self._thread is not None:
            raise ClusterError("this cluster is already started")
        loop = self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            # Whatever the cluster left running (a client's handler, a proxy task) ends here.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="grouplab-cluster", daemon=True)
        self._thread.start()
        ready.wait()
        try:
            self._call(self.cluster.start)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop everything and join the loop's thread. Safe to call twice."""
        if self._thread is None or self._loop is None:
            return
        try:
            if not self.cluster.closed and self._loop.is_running():
                self._call(self.cluster.close)
        finally:
            loop, thread = self._loop, self._thread
            self._thread = None
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[..., Awaitable[T]], *args: Any, timeout: float = 60.0, **kwargs: Any) -> T:
        __tracebackhide__ = True  # pytest shows the test's line, not the way through the loop thread
        if self._loop is None or self._thread is None:
            raise ClusterError("the cluster is not started: use it as a context manager, or call start()")
        if threading.current_thread() is self._thread:
            raise ClusterError(f"{fn.__name__} called from the cluster's own loop thread (it would wait for itself)")
        future = asyncio.run_coroutine_threadsafe(_call(fn, *args, **kwargs), self._loop)
        try:
            return future.result(timeout + _MARGIN_S)
        except (WaitTimeout, ClusterError, ValueError) as exc:
            # What a test is told (a wait that failed, a refused operation, a bad setting) is raised
            # here, in its own thread, without the frames of the loop thread it came through.
            raise exc.with_traceback(None) from None
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ClusterError(f"the cluster's loop did not answer {fn.__name__} within {timeout + _MARGIN_S:g} s") from None

    def _sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A synchronous method of the AsyncCluster, run in its loop (it reads the coordinator's state)."""
        __tracebackhide__ = True
        async def run() -> T:
            return fn(*args, **kwargs)
        return self._call(run)

    # ------------------------------------------------------------------ what the AsyncCluster offers

    @property
    def bootstrap(self) -> str:
        """"host:port" for Kafka clients' bootstrap.servers (every live broker's, with several)."""
        if self.cluster.brokers > 1 and self._thread is not None:
            return self._sync(lambda: self.cluster.bootstrap)
        return self.cluster.bootstrap

    @property
    def run_dir(self) -> Path | None:
        return self.cluster.run_dir

    @property
    def data_dir(self) -> Path | None:
        return self.cluster.data_dir

    @property
    def grouplab_port(self) -> int:
        return self.cluster.grouplab_port

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self._call(self.cluster.create_topic, name, partitions)

    def create_topics(self, topics: Mapping[str, int]) -> None:
        self._call(self.cluster.create_topics, topics)

    def add_partitions(self, topic: str, total: int) -> None:
        self._call(self.cluster.add_partitions, topic, total)

    def delete_topic(self, name: str) -> None:
        self._call(self.cluster.delete_topic, name)

    def topics(self) -> dict[str, int]:
        return self._sync(self.cluster.topics)

    def produce(self, topic: str, values: Iterable[bytes | str], partition: int = 0) -> int:
        return self._call(self.cluster.produce, topic, list(values), partition)

    def group(self, group_id: str) -> GroupView:
        return self._sync(self.cluster.group, group_id)

    def groups(self) -> list[str]:
        return self._sync(self.cluster.groups)

    def committed(self, group_id: str) -> dict[TopicPartition, int]:
        return self._call(self.cluster.committed, group_id)

    def log_end_offsets(self, topic: str) -> dict[TopicPartition, int]:
        return self._call(self.cluster.log_end_offsets, topic)

    def lag(self, group_id: str, topic: str | None = None) -> dict[TopicPartition, int]:
        return self._call(self.cluster.lag, group_id, topic)

    def rebalances(self, group_id: str) -> list[RebalanceView]:
        return self._sync(self.cluster.rebalances, group_id)

    def partition_time(self, group_id: str | None = None) -> PartitionTime:
        return self._sync(self.cluster.partition_time, group_id)

    def events(self, group_id: str | None = None, node: str | None = None, event: str | None = None) -> list[dict[str, Any]]:
        return self._sync(self.cluster.events, group_id, node, event)

    def trace(self) -> list[dict[str, Any]]:
        return self._sync(self.cluster.trace)

    def requests(self, client_id: str | None = None, apis: Iterable[str] | None = None) -> list[str]:
        return self._sync(self.cluster.requests, client_id, None if apis is None else list(apis))

    def story(self, lines: int = 40) -> str:
        return self._sync(self.cluster.story, lines)

    def report(self, group_id: str | None = None) -> str:
        return self._sync(self.cluster.report, group_id)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
        """Until `predicate()` holds: it runs in the caller's thread (so it may read the test's own
        state and call this cluster's methods), after every event the cluster logs and every
        100 ms. WaitTimeout, with the cluster's report, if it does not within `timeout` seconds."""
        __tracebackhide__ = True
        changed = threading.Event()
        self._sync(self.cluster.change_listeners.append, changed.set)
        try:
            deadline = time.monotonic() + timeout
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeout(f"{what} did not hold within {timeout:g} s\n" + self.report())
                changed.clear()
                changed.wait(min(remaining, 0.1))
        finally:
            self._sync(self.cluster.change_listeners.remove, changed.set)

    def wait_stable(self, group_id: str, members: int | None = None, timeout: float = 30.0,
                    after_generation: int | None = None) -> GroupView:
        __tracebackhide__ = True
        return self._call(self.cluster.wait_stable, group_id, members, timeout, after_generation, timeout=timeout)

    def wait_rebalances(self, group_id: str, count: int, timeout: float = 30.0) -> list[RebalanceView]:
        __tracebackhide__ = True
        return self._call(self.cluster.wait_rebalances, group_id, count, timeout, timeout=timeout)

    def add_fault(self, spec: str) -> Rule:
        return self._sync(self.cluster.add_fault, spec)

    def remove_fault(self, rule: Rule) -> None:
        self._sync(self.cluster.remove_fault, rule)

    def clear_faults(self) -> None:
        self._sync(self.cluster.clear_faults)

    @property
    def faults(self) -> list[Rule]:
        return self._sync(lambda: self.cluster.faults)

    def drop(self, api: str, client_id: str = "*", count: int | None = None, p: float = 1.0,
             direction: str = "request") -> Rule:
        return self._sync(self.cluster.drop, api, client_id, count, p, direction)

    def delay(self, api: str, ms: int | tuple[int, int], client_id: str = "*", count: int | None = None,
              direction: str = "request") -> Rule:
        return self._sync(self.cluster.delay, api, ms, client_id, count, direction)

    def error(self, api: str, code: int | str, client_id: str = "*", count: int | None = None,
              direction: str = "request") -> Rule:
        return self._sync(self.cluster.error, api, code, client_id, count, direction)

    def hold(self, api: str, client_id: str = "*", count: int | None = None, direction: str = "request") -> Rule:
        return self._sync(self.cluster.hold, api, client_id, count, direction)

    def disconnect_on(self, api: str, client_id: str = "*", count: int | None = None,
                      direction: str = "request") -> Rule:
        return self._sync(self.cluster.disconnect_on, api, client_id, count, direction)

    def release(self, api: str | None = None, client_id: str = "*") -> int:
        return self._sync(self.cluster.release, api, client_id)

    def held(self, api: str | None = None, client_id: str = "*") -> int:
        return self._sync(self.cluster.held, api, client_id)

    def disconnect(self, client_id: str = "*") -> int:
        return self._sync(self.cluster.disconnect, client_id)

    def isolate(self, client_id: str) -> None:
        self._sync(self.cluster.isolate, client_id)

    def heal(self, client_id: str | None = None) -> None:
        self._sync(self.cluster.heal, client_id)

    def pause(self) -> None:
        self._sync(self.cluster.pause)

    def resume(self) -> None:
        self._sync(self.cluster.resume)

    def coordinator_of(self, group_id: str) -> int:
        return self._sync(self.cluster.coordinator_of, group_id)

    @property
    def live_brokers(self) -> list[int]:
        return self._sync(lambda: self.cluster.live_brokers)

    def kill_broker(self, node_id: int) -> None:
        self._call(self.cluster.kill_broker, node_id)

    def stop_broker(self, node_id: int) -> None:
        self._call(self.cluster.stop_broker, node_id)

    def restart_broker(self, node_id: int) -> None:
        self._call(self.cluster.restart_broker, node_id)

    def elect_leaders(self) -> None:
        self._sync(self.cluster.elect_leaders)

    def restart_coordinator(self, downtime: float = 0.0) -> None:
        self._call(self.cluster.restart_coordinator, downtime, timeout=60.0 + downtime)


async def _call(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    return await fn(*args, **kwargs)
