"""The embedded registry: only what Kafka 0.8's consumers used of ZooKeeper, with ZooKeeper's
semantics, as a pure machine (docs/legacy.md §3). It stands in for a ZooKeeper server in the
simulator and for users without one; tests/test_registry_conformance.py runs the same operation
sequences on it and on a real ZooKeeper and compares what each client saw.

- hierarchical nodes with data and a version; `/` always exists;
- persistent and ephemeral nodes: an ephemeral node belongs to the session that created it, has
  no children, and vanishes when that session closes or expires;
- one-shot watches per session: a data watch (GetData, Exists — Exists also on a missing node)
  fires NodeCreated / NodeDataChanged / NodeDeleted; a child watch (GetChildren) fires
  NodeChildrenChanged or NodeDeleted; each fires once, to the session that set it, then is gone;
- conditional writes: SetData and Delete with a version other than -1 fail with BadVersion
  unless it matches;
- sessions with a timeout, negotiated into [2, 20] × tickTime as ZooKeeper does; any request or
  ping from the session keeps it alive; a session silent for its timeout expires.

Session states:

    open_session ──> ALIVE ──(silent for timeout_ms)──> EXPIRED ──> (forgotten; requests: SessionExpired)
                       │
                       └──(close_session)──> CLOSED (forgotten)

Outputs: `Reply(to, Result)` for each call, `Notify(session, WatchEvent)` for each watch that
fires (before the Reply of the call that fired it, as ZooKeeper orders them), `SessionExpiredNotice`
when the machine expires a session, timers, and LogEvents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Reply, StepOutputs, TimerKey
from grouplab.protocol.registry import (
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    RegistryError,
    RegistryOp,
    Result,
    SetData,
    Stat,
    WatchEvent,
    WatchType,
    check_path,
    parent_of,
)

TICK_TIME_MS = 2000  # ZooKeeper's tickTime in the shipped zoo.cfg


@dataclass(frozen=True, slots=True)
class Notify:
    """Deliver a fired watch to `session`."""

    session: int
    event: WatchEvent


@dataclass(frozen=True, slots=True)
class SessionExpiredNotice:
    """`session` expired: its client, when it next hears from the registry, learns so."""

    session: int


RegistryOutput = Reply | Notify | SessionExpiredNotice | ArmTimer | CancelTimer | LogEvent


@dataclass(slots=True)
class _Node:
    data: bytes
    ephemeral_owner: int = 0
    version: int = 0
    children: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Session:
    timeout_ms: int
    deadline_ms: int
    ephemerals: set[str] = field(default_factory=set)


class SessionGone(Exception):
    """A request from a session that expired, was closed or never existed."""


class Registry(StepOutputs):
    """The tree, the sessions and the watches. Session ids come from `first_session_id` upwards."""

    def __init__(self, tick_time_ms: int = TICK_TIME_MS, first_session_id: int = 1) -> None:
        self.tick_time_ms = tick_time_ms
        self.nodes: dict[str, _Node] = {"/": _Node(b"")}
        self.sessions: dict[int, _Session] = {}
        self.data_watches: dict[str, set[int]] = {}
        self.child_watches: dict[str, set[int]] = {}
        self._next_session = first_session_id
        self.ops = 0  # operations answered, for the herd-effect counts

    # ------------------------------------------------------------------ sessions

    def negotiate(self, timeout_ms: int) -> int:
        """ZooKeeper's bounds: minSessionTimeout 2 × tickTime, maxSessionTimeout 20 × tickTime."""
        return max(2 * self.tick_time_ms, min(20 * self.tick_time_ms, timeout_ms))

    def open_session(self, timeout_ms: int, now_ms: int) -> tuple[int, list[RegistryOutput]]:
        self._begin(now_ms)
        sid = self._next_session
        self._next_session += 1
        timeout = self.negotiate(timeout_ms)
        self.sessions[sid] = _Session(timeout, now_ms + timeout)
        self._out.append(ArmTimer(("session", sid), now_ms + timeout))
        self._log(events.RegistrySessionOpened(sid, timeout))
        return sid, self._end()

    def ping(self, session: int, now_ms: int) -> list[RegistryOutput]:
        """Keep `session` alive (ZooKeeper's clients ping every third of the timeout)."""
        self._begin(now_ms)
        try:
            self._touch(session)
        except SessionGone:
            pass  # the caller learns it from is_alive or its next call
        return self._end()

    def is_alive(self, session: int) -> bool:
        return session in self.sessions

    def timeout_of(self, session: int) -> int:
        return self.sessions[session].timeout_ms

    def close_session(self, session: int, now_ms: int) -> list[RegistryOutput]:
        self._begin(now_ms)
        if self.sessions.get(session) is not None:
            self._out.append(CancelTimer(("session", session)))
            self._end_session(session)
            self._log(events.RegistrySessionClosed(session))
        return self._end()

    def on_timer(self, key: TimerKey, now_ms: int) -> list[RegistryOutput]:
        self._begin(now_ms)
        sid = key[1]
        s = self.sessions.get(sid) if isinstance(sid, int) else None
        if s is not None and isinstance(sid, int):
            if now_ms >= s.deadline_ms:
                self._end_session(sid)
                self._out.append(SessionExpiredNotice(sid))
                self._log(events.RegistrySessionExpired(sid, s.timeout_ms))
            else:
                self._out.append(ArmTimer(key, s.deadline_ms))
        return self._end()

    def _touch(self, session: int) -> None:
        s = self.sessions.get(session)
        if s is None:
            raise SessionGone(session)
        s.deadline_ms = self._now + s.timeout_ms

    def _end_session(self, session: int) -> None:
        """Its watches go first: a session that ends hears nothing of its own ephemeral nodes
        vanishing (ZooKeeper drops a closed or expired session's watches)."""
        s = self.sessions.pop(session)
        for watches in (self.data_watches, self.child_watches):
            for path in list(watches):
                watches[path].discard(session)
                if not watches[path]:
                    del watches[path]
        for path in sorted(s.ephemerals, reverse=True):
            if path in self.nodes:
                self._remove(path)

    # ------------------------------------------------------------------ operations

    def call(self, to: Any, session: int, op: RegistryOp, now_ms: int) -> list[RegistryOutput]:
        """Answer `op` from `session` with a Reply to `to`, after the Notifies it causes."""
        self._begin(now_ms)
        self.ops += 1
        try:
            self._touch(session)
            check_path(op.path)
            result = self._apply(session, op)
        except SessionGone:
            result = Result(RegistryError.SESSION_EXPIRED)
        self._out.append(Reply(to, result))
        return self._end()

    def _apply(self, session: int, op: RegistryOp) -> Result:
        if isinstance(op, Create):
            return self._create(session, op)
        if isinstance(op, GetData):
            node = self.nodes.get(op.path)
            if node is None:
                return Result(RegistryError.NO_NODE)
            if op.watch:
                self.data_watches.setdefault(op.path, set()).add(session)
            return Result(data=node.data, stat=self._stat(node))
        if isinstance(op, Exists):
            node = self.nodes.get(op.path)
            if op.watch:
                self.data_watches.setdefault(op.path, set()).add(session)
            return Result(stat=None if node is None else self._stat(node))
        if isinstance(op, GetChildren):
            node = self.nodes.get(op.path)
            if node is None:
                return Result(RegistryError.NO_NODE)
            if op.watch:
                self.child_watches.setdefault(op.path, set()).add(session)
            return Result(children=sorted(node.children))
        if isinstance(op, SetData):
            node = self.nodes.get(op.path)
            if node is None:
                return Result(RegistryError.NO_NODE)
            if op.version not in (-1, node.version):
                return Result(RegistryError.BAD_VERSION)
            node.data = op.data
            node.version += 1
            self._fire(self.data_watches, op.path, WatchType.NODE_DATA_CHANGED)
            return Result(stat=self._stat(node))
        return self._delete(op)

    def _create(self, session: int, op: Create) -> Result:
        if op.path == "/" or op.path in self.nodes:
            return Result(RegistryError.NODE_EXISTS)
        parent = parent_of(op.path)
        missing: list[str] = []
        while parent not in self.nodes:
            missing.append(parent)
            parent = parent_of(parent)
        if missing and not op.makepath:
            return Result(RegistryError.NO_NODE)
        if self.nodes[parent].ephemeral_owner:
            return Result(RegistryError.NO_CHILDREN_FOR_EPHEMERALS)
        for path in reversed(missing):
            self._add(path, _Node(b""))
        owner = session if op.ephemeral else 0
        self._add(op.path, _Node(op.data, owner))
        if owner:
            self.sessions[session].ephemerals.add(op.path)
        return Result(path=op.path)

    def _delete(self, op: Delete) -> Result:
        node = self.nodes.get(op.path)
        if node is None or op.path == "/":
            return Result(RegistryError.NO_NODE)
        if op.version not in (-1, node.version):
            return Result(RegistryError.BAD_VERSION)
        if node.children:
            return Result(RegistryError.NOT_EMPTY)
        if node.ephemeral_owner:
            self.sessions[node.ephemeral_owner].ephemerals.discard(op.path)
        self._remove(op.path)
        return Result()

    # ------------------------------------------------------------------ the tree and its watches

    def _add(self, path: str, node: _Node) -> None:
        self.nodes[path] = node
        parent = parent_of(path)
        self.nodes[parent].children.add(path.rpartition("/")[2])
        self._fire(self.data_watches, path, WatchType.NODE_CREATED)
        self._fire(self.child_watches, parent, WatchType.NODE_CHILDREN_CHANGED)

    def _remove(self, path: str) -> None:
        del self.nodes[path]
        parent = parent_of(path)
        self.nodes[parent].children.discard(path.rpartition("/")[2])
        self._fire(self.data_watches, path, WatchType.NODE_DELETED)
        self._fire(self.child_watches, path, WatchType.NODE_DELETED)
        self._fire(self.child_watches, parent, WatchType.NODE_CHILDREN_CHANGED)

    def _fire(self, watches: dict[str, set[int]], path: str, kind: WatchType) -> None:
        sessions = watches.pop(path, None)
        for sid in sorted(sessions or ()):
            self._out.append(Notify(sid, WatchEvent(kind, path)))

    @staticmethod
    def _stat(node: _Node) -> Stat:
        return Stat(node.version, node.ephemeral_owner, len(node.children))

    def _log(self, event: events.Event) -> None:
        if self.log_events:
            self._emit_log(event)

    # ------------------------------------------------------------------ reading (invariants, displays)

    def children(self, path: str) -> list[str]:
        node = self.nodes.get(path)
        return sorted(node.children) if node is not None else []

    def data(self, path: str) -> bytes | None:
        node = self.nodes.get(path)
        return node.data if node is not None else None

    def owner_session(self, path: str) -> int:
        node = self.nodes.get(path)
        return node.ephemeral_owner if node is not None else 0
