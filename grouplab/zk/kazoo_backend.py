"""A real ZooKeeper as a `RegistryBackend`, through kazoo (docs/legacy.md §3).

kazoo runs its own threads: results, watch events and session-state changes arrive on them. Each
is handed to the event loop with `call_soon_threadsafe`, in the order kazoo delivers them (one
callback thread, ZooKeeper's order), so the consumer's driver only ever runs on the loop. Nothing
here blocks the loop: the session is opened by kazoo's own connection thread, and closing it (which
waits for the server) runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable

from grouplab.protocol.registry import (
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    RegistryCallback,
    RegistryError,
    RegistryListener,
    RegistryOp,
    Result,
    SessionEvent,
    SessionState,
    SetData,
    Stat,
    WatchEvent,
    WatchType,
)


# kazoo reports every dropped connection on the root logger; the consumer hears of it as session
# states and says so in its own words.
logging.getLogger("kazoo").addHandler(logging.NullHandler())
logging.getLogger("kazoo").propagate = False


def kazoo_errors() -> dict[type, RegistryError]:
    from kazoo import exceptions as e

    return {e.NoNodeError: RegistryError.NO_NODE, e.NodeExistsError: RegistryError.NODE_EXISTS,
            e.BadVersionError: RegistryError.BAD_VERSION, e.NotEmptyError: RegistryError.NOT_EMPTY,
            e.NoChildrenForEphemeralsError: RegistryError.NO_CHILDREN_FOR_EPHEMERALS,
            e.SessionExpiredError: RegistryError.SESSION_EXPIRED}


_WATCH_TYPES = {"CREATED": WatchType.NODE_CREATED, "DELETED": WatchType.NODE_DELETED,
                "CHANGED": WatchType.NODE_DATA_CHANGED, "CHILD": WatchType.NODE_CHILDREN_CHANGED}


def to_stat(stat: Any) -> Stat:
    return Stat(stat.version, stat.ephemeralOwner, stat.numChildren)


class KazooBackend:
    """One kazoo client (one ZooKeeper session at a time) for one legacy consumer."""

    def __init__(self, hosts: str, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.hosts = hosts
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self.client: Any = None
        self.listener: RegistryListener | None = None
        self.closed = False
        self._errors = kazoo_errors()
        self._session_id = 0

    # ------------------------------------------------------------------ RegistryBackend

    def start(self, session_timeout_ms: int, listener: RegistryListener) -> None:
        from kazoo.client import KazooClient

        self.listener = listener
        self.client = KazooClient(hosts=self.hosts, timeout=session_timeout_ms / 1000,
                                  connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0})
        self.client.add_listener(self._state_changed)
        self.client.start_async()

    def call(self, op: RegistryOp, done: RegistryCallback) -> None:
        c = self.client
        if self.closed or c is None:
            return
        watch = self._watcher if getattr(op, "watch", False) else None
        try:
            if isinstance(op, Create):
                future = c.create_async(op.path, op.data, ephemeral=op.ephemeral, makepath=op.makepath)
                convert: Callable[[Any], Result] = lambda v: Result(path=v)
            elif isinstance(op, GetData):
                future = c.get_async(op.path, watch=watch)
                convert = lambda v: Result(data=v[0], stat=to_stat(v[1]))
            elif isinstance(op, SetData):
                future = c.set_async(op.path, op.data, version=op.version)
                convert = lambda v: Result(stat=to_stat(v))
            elif isinstance(op, GetChildren):
                future = c.get_children_async(op.path, watch=watch)
                convert = lambda v: Result(children=sorted(v))
            elif isinstance(op, Exists):
                future = c.exists_async(op.path, watch=watch)
                convert = lambda v: Result(stat=None if v is None else to_stat(v))
            elif isinstance(op, Delete):
                future = c.delete_async(op.path, version=op.version)
                convert = lambda v: Result()
            else:
                raise TypeError(f"not a registry operation: {op!r}")
        except Exception as exc:  # kazoo refuses at once when it is not connected
            self.loop.call_soon(done, Result(self._error(exc)))
            return

        def finished(async_result: Any) -> None:
            try:
                result = convert(async_result.get_nowait())
            except Exception as exc:
                result = Result(self._error(exc))
            self._post(lambda: done(result))

        future.rawlink(finished)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        client = self.client
        if client is not None:
            threading.Thread(target=_stop_and_close, args=(client,), daemon=True).start()

    # ------------------------------------------------------------------ kazoo's threads -> the loop

    def _error(self, exc: BaseException) -> RegistryError:
        for kind, error in self._errors.items():
            if isinstance(exc, kind):
                return error
        return RegistryError.CONNECTION_LOSS

    def _watcher(self, event: Any) -> None:
        kind = _WATCH_TYPES.get(str(event.type))
        if kind is not None and self.listener is not None:
            listener, watch = self.listener, WatchEvent(kind, event.path)
            self._post(lambda: listener(watch))

    def _state_changed(self, state: Any) -> None:
        listener = self.listener
        if listener is None:
            return
        name = str(state)
        if name == "LOST":
            expired, self._session_id = self._session_id, 0
            self._post(lambda: listener(SessionEvent(SessionState.EXPIRED, expired)))
        elif name == "SUSPENDED":
            self._post(lambda: listener(SessionEvent(SessionState.SUSPENDED, self._session_id)))
        elif name == "CONNECTED":
            # kazoo calls listeners before it has stored the new session id: read it on the loop
            self._post(self._connected)

    def _connected(self) -> None:
        client, listener = self.client, self.listener
        if client is None or listener is None or self.closed:
            return
        session = client.client_id[0] if client.client_id else 0
        if session and session != self._session_id:
            self._session_id = session
            listener(SessionEvent(SessionState.CONNECTED, session))

    def _post(self, action: Callable[[], None]) -> None:
        if not self.closed:
            try:
                self.loop.call_soon_threadsafe(self._run_if_open, action)
            except RuntimeError:
                pass  # the loop is closed: the run is over

    def _run_if_open(self, action: Callable[[], None]) -> None:
        if not self.closed:
            action()


def _stop_and_close(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception:
        pass
