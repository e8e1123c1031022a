"""The embedded registry behaves as ZooKeeper does for what the old consumer used
(docs/legacy.md §3): the same operation sequences run on it (coordinator/registry.py through
grouplab/zk/embedded.py) and on a real ZooKeeper (through kazoo, grouplab/zk/kazoo_backend.py),
both behind the one RegistryBackend interface, and every answer and every watch event each client
saw must be the same: errors by ZooKeeper's names, data, versions, ephemeral or not, children,
one-shot watches, ephemeral nodes vanishing when their session closes and when it expires."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable

import pytest

from grouplab.zk.embedded import RegistryServer, loop_post
from grouplab.zk.forwarder import CuttableForwarder
from grouplab.zk.kazoo_backend import KazooBackend
from grouplab.protocol.effects import wall_clock_ms
from grouplab.protocol.registry import (
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    RegistryBackend,
    RegistryOp,
    Result,
    SessionEvent,
    SessionState,
    SetData,
    WatchEvent,
)
from tests.zk_server import ZooKeeperServer

WAIT_S = 15.0


class Probe:
    """One client session: the answers it got and the watch events it heard, paths made relative."""

    def __init__(self, backend: RegistryBackend, base: str) -> None:
        self.backend = backend
        self.base = base
        self.watches: list[tuple[str, str]] = []
        self.connected = asyncio.Event()
        self.changed = asyncio.Event()

    async def open(self, timeout_ms: int) -> None:
        self.backend.start(timeout_ms, self._hear)
        await asyncio.wait_for(self.connected.wait(), WAIT_S)

    def _hear(self, event: WatchEvent | SessionEvent) -> None:
        if isinstance(event, SessionEvent):
            if event.state is SessionState.CONNECTED:
                self.connected.set()
            return
        self.watches.append((event.type.value, event.path.removeprefix(self.base)))
        self.changed.set()

    async def do(self, op: RegistryOp) -> tuple[Any, ...]:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self.backend.call(op, lambda r: future.done() or future.set_result(r))
        r = await asyncio.wait_for(future, WAIT_S)
        stat = None if r.stat is None else (r.stat.version, r.stat.ephemeral, r.stat.num_children)
        return (r.error.value if r.error else None, r.path and r.path.removeprefix(self.base), r.data, stat, r.children)

    async def heard(self, count: int) -> None:
        async def wait() -> None:
            while len(self.watches) < count:
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(wait(), WAIT_S)


SETTLE_S = 0.15  # for kazoo's callback thread (see step below)


async def script(make: Callable[[str], RegistryBackend], crash: Callable[[RegistryBackend], None], base: str) -> list[Any]:
    """The sequence, as the record of what each client saw."""
    g = base + "/g"
    a, b, c = Probe(make("a"), base), Probe(make("b"), base), Probe(make("c"), base)
    for p in (a, b, c):
        await p.open(6000 if p is not c else 1000)
    log: list[Any] = []

    async def step(p: Probe, op: RegistryOp) -> None:
        log.append((p is a and "a" or p is b and "b" or "c", type(op).__name__, await p.do(op)))
        await b.do(Exists("/"))  # ZooKeeper's order: B hears what A caused before this answer
        # ...on the wire; kazoo hands watch events to its own callback thread, which may run after
        # the answer's, so give it a moment (a heavily loaded machine once compared too early).
        await asyncio.sleep(SETTLE_S)
        log.append(("b heard", list(b.watches)))

    await step(a, Create(base, makepath=True))
    await step(a, Create(g))
    await step(a, Create(g + "/a/b"))                      # NoNode: no parent
    await step(a, Create(g + "/a/b", b"ab", makepath=True))
    await step(a, Create(g + "/a"))                        # NodeExists
    await step(b, Exists(g + "/x", watch=True))            # watch on a missing node
    await step(b, GetChildren(g, watch=True))
    await step(b, GetData(g + "/a", watch=True))
    await step(b, GetData(g + "/missing", watch=True))     # NoNode: no watch set
    await step(a, Create(g + "/x", b"1", ephemeral=True))  # B: NodeCreated, NodeChildrenChanged
    await step(a, Create(g + "/x/y"))                      # NoChildrenForEphemerals
    await step(a, SetData(g + "/a", b"v1", version=5))     # BadVersion
    await step(a, SetData(g + "/a", b"v1", version=0))     # B: NodeDataChanged
    await step(a, SetData(g + "/a", b"v2"))                # no event: the watch was one-shot
    await step(a, Create(g + "/missing"))                  # no event: no watch was set
    await step(a, Delete(g + "/a"))                        # NotEmpty
    await step(a, Delete(g + "/a/b", version=3))           # BadVersion
    await step(a, Delete(g + "/a/b", version=0))
    await step(b, GetChildren(g, watch=True))
    await step(b, GetChildren(g, watch=True))              # the same watch twice fires once
    await step(b, GetData(g + "/x", watch=True))
    await step(b, GetData(g + "/a"))
    a.backend.close()                                       # B: NodeDeleted /g/x, NodeChildrenChanged /g
    await b.heard(5)
    log.append(("b heard after a closed", sorted(b.watches)))
    await step(b, Exists(g + "/x"))
    await step(c, Create(g + "/e", b"c", ephemeral=True))
    await step(b, Exists(g + "/e", watch=True))
    crash(c.backend)                                        # silent: the session expires after 1 s
    await b.heard(6)
    log.append(("b heard after c's session expired", sorted(b.watches)))
    await step(b, Exists(g + "/e"))
    await step(b, GetChildren(g))
    b.backend.close()
    return log


async def run_embedded(base: str) -> list[Any]:
    loop = asyncio.get_running_loop()
    server = RegistryServer(wall_clock_ms, loop_post(loop), tick_time_ms=500)  # the test server's tickTime
    return await script(lambda name: server.client(name), lambda backend: backend.crash(), base)  # type: ignore[attr-defined]


async def run_zookeeper(zookeeper: ZooKeeperServer, base: str) -> list[Any]:
    forwarders: dict[int, CuttableForwarder] = {}
    backends: list[KazooBackend] = []

    def make(name: str) -> RegistryBackend:
        if name == "c":  # behind a forwarder that can be cut: a crash, no close-session
            forwarder = CuttableForwarder(zookeeper.port)
            backend = KazooBackend(forwarder.hosts)
            forwarders[id(backend)] = forwarder
        else:
            backend = KazooBackend(zookeeper.hosts)
        backends.append(backend)
        return backend

    def crash(backend: RegistryBackend) -> None:
        forwarders[id(backend)].cut()

    try:
        return await script(make, crash, base)
    finally:
        for backend in backends:
            backend.close()


@pytest.mark.e2e
async def test_embedded_registry_answers_as_zookeeper_does(zookeeper: ZooKeeperServer) -> None:
    base = f"/conformance-{uuid.uuid4().hex[:8]}"
    real = await run_zookeeper(zookeeper, base)
    embedded = await run_embedded(base)
    for i, (got, want) in enumerate(zip(embedded, real)):
        assert got == want, f"step {i}: embedded {got} != ZooKeeper {want}"
    assert len(embedded) == len(real)
    assert ("a", "Create", ("NoChildrenForEphemerals", None, None, None, None)) in real


async def test_embedded_registry_script_alone() -> None:
    """The same script without ZooKeeper: it runs everywhere and pins the embedded answers."""
    log = await run_embedded("/alone")
    assert ("a", "SetData", ("BadVersion", None, None, None, None)) in log
    heard = [entry for entry in log if entry[0] == "b heard after c's session expired"]
    assert heard and ("NodeDeleted", "/g/e") in heard[0][1]
