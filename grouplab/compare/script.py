"""The script `grouplab compare` plays under each design (docs/legacy.md §7): membership changes in
order — N consumers join, one leaves, one crashes, partitions are added, one joins — with the
settings both designs share, and what one change cost under one design (`Figures`).

In the simulators every change happens at a fixed virtual time, far enough after the previous
one that both designs can settle: `gap_ms` after it, plus the session timeout after a crash (the
group cannot notice sooner) and, when the classic consumers wait for their periodic metadata
refresh (`metadata_refresh = "max-age"`), their `metadata.max.age.ms` after added partitions,
plus up to JITTER_MS drawn from the seed, so that a change does not always fall at the same moment
of the heartbeats' and pings' cycles. Over real sockets each change waits until both designs have
settled.

How the designs hear of added partitions (`MetadataRefresh`): the ZooKeeper-era consumers watch
the topic's node and are told at once; KIP-848's coordinator knows its topics itself and tells
each member at its next heartbeat; a classic group learns of them only when its leader's metadata
is refreshed, which Kafka's client does every `metadata.max.age.ms` (300000 by default; Kafka's
ConsumerCoordinator then rejoins: "cached metadata has changed"). By default the comparison is fair
(ON_CHANGE): the classic consumers refresh their metadata when the partitions are made, so every
design starts at the same moment and the figures compare how each rebalances. MAX_AGE keeps
Kafka's client behaviour, and the report shows that wait on a line of its own, with its cause.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

KINDS = ("join", "leave", "crash", "add_partitions")
JITTER_MS = 5000

# Settings.metadata_refresh: when a classic group's leader hears of added partitions.
ON_CHANGE = "on-change"  # when they are made, as every other design does (the fair default)
MAX_AGE = "max-age"  # at its next periodic refresh, every metadata.max.age.ms (Kafka's client)
METADATA_REFRESHES = (ON_CHANGE, MAX_AGE)


# The designs `grouplab compare` plays the script under, in the order of its tables: the ZooKeeper
# era, the classic coordinator protocol with an eager and with the cooperative assignor, and KIP-848's
# consumer protocol (the coordinator assigns, with its `uniform` assignor).
DESIGNS: dict[str, str] = {
    "zk": "ZooKeeper era",
    "eager": "classic, eager (range)",
    "cooperative": "classic, cooperative-sticky",
    "consumer": "KIP-848 consumer protocol",
}
COORDINATOR_DESIGNS = ("eager", "cooperative", "consumer")


def parse_designs(text: str) -> list[str]:
    """`--designs zk,eager,...`: known names, each once, in DESIGNS' order."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in DESIGNS]
    if unknown or not names:
        raise ValueError(f"--designs: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(DESIGNS)}")
    return [d for d in DESIGNS if d in names]


class CompareError(Exception):
    """A run that cannot be compared (an invariant broken, a change that never settles over
    sockets, no ZooKeeper there): one line for the user."""


@dataclass(frozen=True)
class Change:
    kind: str  # one of KINDS
    members: tuple[str, ...] = ()  # who joins, leaves or crashes
    topic: str = ""  # add_partitions: the topic that grows ...
    total: int = 0  # ... to this many partitions
    at_ms: int = 0  # in the simulators

    def label(self) -> str:
        if self.kind == "add_partitions":
            return f"{self.topic} grows to {self.total} partitions"
        if len(self.members) == 1:
            return f"{self.members[0]} " + {"join": "joins", "leave": "leaves (clean shutdown)", "crash": "crashes"}[self.kind]
        return f"{len(self.members)} consumers {self.kind}"


@dataclass(frozen=True)
class Settings:
    """What both designs are given. The session timeouts default to one value for both, so that
    what differs is the design (Kafka's own defaults: session.timeout.ms 45000 since 3.0,
    zookeeper.session.timeout.ms 6000)."""

    consumers: int = 5
    topics: dict[str, int] = field(default_factory=lambda: {"t0": 6, "t1": 6})
    grow: tuple[str, int] = ("t0", 8)  # add_partitions: topic, new total
    session_timeout_ms: int = 10_000  # the coordinator protocol's session.timeout.ms
    zk_session_timeout_ms: int = 10_000  # zookeeper.session.timeout.ms
    metadata_max_age_ms: int = 300_000  # Kafka's default
    gap_ms: int = 30_000  # the simulators: quiet time after each change (beyond the timeouts above)
    group: str = "grouplab"
    metadata_refresh: str = ON_CHANGE  # see the module docstring

    @property
    def waits_for_max_age(self) -> bool:
        """A classic group hears of added partitions only at its leader's periodic refresh."""
        return self.metadata_refresh == MAX_AGE

    def __post_init__(self) -> None:
        if self.metadata_refresh not in METADATA_REFRESHES:
            raise ValueError(f"--metadata-refresh {self.metadata_refresh}: choose {' or '.join(METADATA_REFRESHES)}")
        if self.consumers < 3:
            raise ValueError("the script needs at least 3 consumers (one leaves, one crashes, one stays)")
        topic, total = self.grow
        if topic not in self.topics:
            raise ValueError(f"--add {topic}:{total}: {topic} is not in --topics")
        if total <= self.topics[topic]:
            raise ValueError(f"--add {topic}:{total}: {topic} already has {self.topics[topic]} partitions; "
                             "give a larger total")


@dataclass(frozen=True)
class Script:
    settings: Settings
    changes: tuple[Change, ...]
    end_ms: int  # the simulators run until then

    @property
    def live_after(self) -> list[set[str]]:
        """The consumers that should be in the group once each change has settled."""
        live: set[str] = set()
        out = []
        for c in self.changes:
            if c.kind == "join":
                live |= set(c.members)
            elif c.kind in ("leave", "crash"):
                live -= set(c.members)
            out.append(set(live))
        return out

    @property
    def consumers(self) -> list[str]:
        return [m for c in self.changes if c.kind == "join" for m in c.members]


def script(settings: Settings, names: list[str], seed: int | None = None) -> Script:
    """The default script over `names` (settings.consumers + 1 of them: the last joins at the end),
    its times jittered by `seed` (None: none, as over real sockets, where time has its own).
    The simulators' names are the coordinator simulator's (`m-0`, ..., the newcomer `burst-N`, as
    its join_burst fault names it); the real run's are `consumer-1`, ... as `grouplab run`'s."""
    n = settings.consumers
    assert len(names) == n + 1
    s = settings
    topic, total = s.grow
    steps = [Change("join", tuple(names[:n])), Change("leave", (names[0],)), Change("crash", (names[1],)),
             Change("add_partitions", topic=topic, total=total), Change("join", (names[n],))]
    rng = random.Random(seed)
    timed, at = [], 0
    for c in steps:
        timed.append(Change(c.kind, c.members, c.topic, c.total, at))
        wait = {"crash": max(s.session_timeout_ms, s.zk_session_timeout_ms),
                "add_partitions": s.metadata_max_age_ms if s.waits_for_max_age else 0}.get(c.kind, 0)
        at += s.gap_ms + wait + (rng.randrange(JITTER_MS) if seed is not None else 0)
    return Script(settings, tuple(timed), at)


def sim_names(consumers: int) -> list[str]:
    return [f"m-{i}" for i in range(consumers)] + [f"burst-{consumers}"]


def real_names(consumers: int) -> list[str]:
    return [f"consumer-{i}" for i in range(1, consumers + 2)]


@dataclass
class Figures:
    """What one change cost under one design, counted from the change until the group settled
    (every live consumer in it, every partition consumed by the one it is assigned to), or, if
    it never did, until the next change."""

    settle_ms: int | None  # None: not settled before the next change (or the end)
    messages: dict[str, int]  # coordinator: requests by API, heartbeats apart; ZooKeeper: reads, writes
    offsets: int  # of the messages, those reading or writing committed offsets
    heartbeats: int | None  # coordinator: Heartbeat requests; ZooKeeper: None (pings are not counted)
    idle_ms: int  # partition-milliseconds without a consumer
    rebalances: dict[str, int]  # consumer -> rebalances it went through
    failed: int | None  # ZooKeeper: failed rebalance attempts (claim conflicts); coordinator: None
    gave_up: int | None  # ZooKeeper: rebalances abandoned after rebalance.max.retries
    # A classic group: from the change until its leader saw the new metadata (metadata_changed),
    # and the partition-ms without a consumer meanwhile; None where nobody had to look.
    metadata_wait_ms: int | None = None
    metadata_wait_idle_ms: int = 0

    @property
    def total(self) -> int:
        return sum(self.messages.values())
