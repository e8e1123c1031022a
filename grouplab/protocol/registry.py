"""The registry contract of the ZooKeeper-era consumer (docs/legacy.md §3): the operations the old
consumer used, their results, ZooKeeper's error names, watch events and session states, the
registry layout of Kafka 0.8, and the one small interface both back ends offer a consumer.

Two back ends implement `RegistryBackend`: a real ZooKeeper through kazoo
(grouplab/zk/kazoo_backend.py) and the embedded registry (coordinator/registry.py, the pure
machine, driven by grouplab/zk/embedded.py on the event loop and by the simulator on virtual
time). The legacy consumer (consumer/legacy/) sees only this module, so it cannot tell them apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Protocol


class RegistryError(Enum):
    """ZooKeeper's error names (KeeperException.Code), for the errors the old consumer could meet."""

    NO_NODE = "NoNode"
    NODE_EXISTS = "NodeExists"
    BAD_VERSION = "BadVersion"
    NOT_EMPTY = "NotEmpty"
    NO_CHILDREN_FOR_EPHEMERALS = "NoChildrenForEphemerals"
    SESSION_EXPIRED = "SessionExpired"
    CONNECTION_LOSS = "ConnectionLoss"


class WatchType(Enum):
    """ZooKeeper's Watcher.Event.EventType names."""

    NODE_CREATED = "NodeCreated"
    NODE_DELETED = "NodeDeleted"
    NODE_DATA_CHANGED = "NodeDataChanged"
    NODE_CHILDREN_CHANGED = "NodeChildrenChanged"


class SessionState(Enum):
    """What a client hears of its session: CONNECTED (a session, new or kept), SUSPENDED (the
    connection dropped; the session may still live on the server), EXPIRED (the server ended it:
    its ephemeral nodes and watches are gone; the client starts a new session)."""

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A one-shot watch fired: delivered once to the session that set it, then forgotten."""

    type: WatchType
    path: str


@dataclass(frozen=True, slots=True)
class SessionEvent:
    state: SessionState
    session_id: int = 0


@dataclass(frozen=True, slots=True)
class Stat:
    """The part of ZooKeeper's Stat the old consumer read: the data version (conditional writes),
    the owning session of an ephemeral node (0 if persistent) and the number of children."""

    version: int
    ephemeral_owner: int
    num_children: int

    @property
    def ephemeral(self) -> bool:
        return self.ephemeral_owner != 0


# ----------------------------------------------------------------------------- operations


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    makepath: bool = False  # create missing parents, persistent (kazoo's makepath)


@dataclass(frozen=True, slots=True)
class GetData:
    path: str
    watch: bool = False  # fires on NodeDataChanged or NodeDeleted; not set if the node is missing


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int = -1  # -1: any version; else BadVersion unless it matches


@dataclass(frozen=True, slots=True)
class GetChildren:
    path: str
    watch: bool = False  # fires on NodeChildrenChanged or NodeDeleted; not set if the node is missing


@dataclass(frozen=True, slots=True)
class Exists:
    path: str
    watch: bool = False  # set even on a missing node: fires on NodeCreated, NodeDataChanged, NodeDeleted


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


RegistryOp = Create | GetData | SetData | GetChildren | Exists | Delete
READ_OPS = (GetData, GetChildren, Exists)
WRITE_OPS = (Create, SetData, Delete)


def is_write(op: RegistryOp) -> bool:
    return isinstance(op, WRITE_OPS)


@dataclass(frozen=True, slots=True)
class Result:
    """One operation's answer: `error`, or the value of its kind (`path` of a create, `data` and
    `stat` of a get, `stat` of a set or an exists — None if the node is missing —, `children`
    sorted by name)."""

    error: RegistryError | None = None
    path: str | None = None
    data: bytes | None = None
    stat: Stat | None = None
    children: list[str] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def check_path(path: str) -> None:
    """ZooKeeper's path rule: absolute, no empty or relative component, no trailing slash."""
    if not path.startswith("/") or (path != "/" and (path.endswith("/") or "//" in path)) or any(
            part in (".", "..") for part in path.split("/")):
        raise ValueError(f"not a ZooKeeper path: {path!r}")


def parent_of(path: str) -> str:
    parent = path.rpartition("/")[0]
    return parent or "/"


def join(*parts: str | int) -> str:
    return "/" + "/".join(str(p).strip("/") for p in parts if str(p).strip("/"))


# ----------------------------------------------------------------------------- the consumer's interface


RegistryCallback = Callable[[Result], None]
RegistryListener = Callable[[WatchEvent | SessionEvent], None]


class RegistryBackend(Protocol):
    """One client session's view of a registry, as the legacy consumer's driver uses it. Every
    callback runs on the driver's own thread of control (the event loop, the simulator), results
    and watch events of one session in the order the registry produced them."""

    def start(self, session_timeout_ms: int, listener: RegistryListener) -> None:
        """Open a session; `listener` hears SessionEvents (CONNECTED first) and WatchEvents. After
        EXPIRED the back end opens a new session by itself and reports CONNECTED again."""

    def call(self, op: RegistryOp, done: RegistryCallback) -> None:
        """Carry out `op` in the current session; `done` gets its Result (SessionExpired or
        ConnectionLoss if the session cannot)."""

    def close(self) -> None:
        """Close the session: its ephemeral nodes vanish now and the watchers of them hear it."""


# ----------------------------------------------------------------------------- Kafka 0.8's layout


@dataclass(frozen=True, slots=True)
class Layout:
    """Kafka 0.8's registry paths (ZkUtils): where a learner looks with zkCli.sh."""

    group: str

    @property
    def ids(self) -> str:
        return f"/consumers/{self.group}/ids"

    def consumer(self, consumer_id: str) -> str:
        return f"{self.ids}/{consumer_id}"

    @property
    def owners(self) -> str:
        return f"/consumers/{self.group}/owners"

    def owner(self, topic: str, partition: int) -> str:
        return f"{self.owners}/{topic}/{partition}"

    @property
    def offsets(self) -> str:
        return f"/consumers/{self.group}/offsets"

    def offset(self, topic: str, partition: int) -> str:
        return f"{self.offsets}/{topic}/{partition}"


BROKER_TOPICS = "/brokers/topics"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


@dataclass(frozen=True, slots=True)
class Registration:
    """A consumer's /consumers/<group>/ids/<consumer> data, as Kafka 0.8 wrote it:
    `{"version":1,"subscription":{"topic":streams},"pattern":"static","timestamp":"..."}`."""

    subscription: dict[str, int] = field(default_factory=dict)
    timestamp_ms: int = 0

    def encode(self) -> bytes:
        return json.dumps({"version": 1, "subscription": self.subscription, "pattern": "static",
                           "timestamp": str(self.timestamp_ms)}, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> "Registration":
        """Raises ValueError on data that is not a registration."""
        try:
            doc = json.loads(data)
            subscription = {str(t): int(n) for t, n in doc["subscription"].items()}
            return cls(subscription, int(doc.get("timestamp", 0)))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a consumer registration: {data[:80]!r} ({exc})") from None


def encode_topic(partitions: int, broker_id: int = 0) -> bytes:
    """/brokers/topics/<topic> as Kafka 0.8 wrote it: each partition's replica list (one broker here)."""
    return json.dumps({"version": 1, "partitions": {str(p): [broker_id] for p in range(partitions)}},
                      separators=(",", ":")).encode()


def decode_topic(data: bytes) -> int:
    """The partition count of a /brokers/topics/<topic> node; ValueError if it is not one."""
    try:
        return len(json.loads(data)["partitions"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a topic node: {data[:80]!r} ({exc})") from None
