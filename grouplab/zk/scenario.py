"""ZooKeeper-era scenarios as TOML (docs/legacy.md §5), in the coordinator scenarios' conventions
(docs/simulator.md: `name`, `description`, `topics`, `duration_ms`, a config table under Kafka's
names, `[[members]]` groups of identical consumers, `[network]`, `[random]`, `[[schedule]]` with
`fault`, `at_ms`, `members`, `duration_ms`, `topic` and `partitions`), read into the ZooKeeper-era
simulator's ZkScenario. Every key is checked when the file is loaded, so a typo fails loudly:

    name = "herd"
    description = "..."
    group_id = "grouplab"               # default "grouplab"
    topics = { t0 = 6, t1 = 4 }         # name = partitions
    duration_ms = 60_000                # the run ends then

    [consumer]                          # Kafka 0.8 consumer config names, for every consumer
    "zookeeper.session.timeout.ms" = 6000

    [[members]]                         # a group of identical consumers (repeatable)
    count = 6
    name = "c"                          # consumer ids c-0 ... c-5 (with several groups: c0-0, ...)
    topics = { t0 = 1, t1 = 2 }         # topicCountMap, topic = streams; or a list (1 stream
                                        #   each); default: every topic, 1 stream
    start_ms = [0, 2000]                # each joins at a moment drawn from the seed in this range

    [network]
    delay_ms = [1, 5]                   # each consumer's channel to the registry: a delay drawn per consumer

    [random]
    faults = 6                          # pause, delay_watches or slow_release faults drawn from the seed

    [[schedule]]                        # changes and faults at fixed times (repeatable)
    at_ms = 20_000
    fault = "crash"                     # join, leave, crash, add_partitions, pause, partition, delay_watches,
                                        #   slow_release
    members = ["c-1"]                   # consumer ids (join: new ones, or `count`)
    count = 1                           # join: that many new consumers, burst-N as the coordinator's join_burst
    duration_ms = 9000                  # pause, partition: how long; delay_watches, slow_release: how long they last
    delay_ms = 3000                     # delay_watches, slow_release: the delay
    topic = "t0"                        # add_partitions: `topic` grows by `partitions`
    partitions = 2
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grouplab.consumer.config import ConsumerConfigError
from grouplab.consumer.legacy.config import LegacyConfig
from grouplab.sim.scenario import ScenarioError, _build, _kafka_value, _range, builtin_scenarios_dir
from grouplab.zk.sim import KINDS, Change, ZkScenario

@dataclass
class ZkMemberSpec:
    count: int = 1
    name: str = "c"
    topics: Any = None  # {topic: streams}, [topic, ...] (1 stream each), or None: every topic, 1 stream
    start_ms: Any = 0


@dataclass
class ZkNetworkSpec:
    delay_ms: Any = field(default_factory=lambda: [1, 5])


@dataclass
class ZkRandomSpec:
    faults: int = 0


@dataclass
class ZkScheduled:
    at_ms: int
    fault: str
    members: list[str] = field(default_factory=list)
    count: int = 0
    duration_ms: int = 0
    delay_ms: int = 0
    topic: str = ""
    partitions: int = 0


@dataclass
class ZkScenarioFile:
    name: str = "scenario"
    description: str = ""
    group_id: str = "grouplab"
    topics: dict[str, int] = field(default_factory=lambda: {"t0": 6})
    duration_ms: int = 60_000
    consumer: dict[str, Any] = field(default_factory=dict)
    members: list[Any] = field(default_factory=list)
    network: Any = None
    random: Any = None
    schedule: list[Any] = field(default_factory=list)


def parse_zk_scenario(raw: dict[str, Any], source: str = "<scenario>") -> ZkScenario:
    raw = dict(raw)
    members = [_build(ZkMemberSpec, m, f"{source}: members[{i}]") for i, m in enumerate(raw.pop("members", [{"count": 3}]))]
    network = _build(ZkNetworkSpec, raw.pop("network", {}), f"{source}: network")
    randoms = _build(ZkRandomSpec, raw.pop("random", {}), f"{source}: random")
    schedule = [_build(ZkScheduled, s, f"{source}: schedule[{i}]") for i, s in enumerate(raw.pop("schedule", []))]
    spec = _build(ZkScenarioFile, raw, source)
    if not spec.topics or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in spec.topics.values()):
        raise ScenarioError(f"{source}: topics must map names to partition counts >= 1")
    overrides = [f"{k}={_kafka_value(v)}" for k, v in spec.consumer.items()]
    try:
        LegacyConfig(spec.group_id, "check", {t: 1 for t in spec.topics}).with_overrides(overrides)
    except ConsumerConfigError as exc:
        raise ScenarioError(f"{source}: consumer: {exc}") from None
    changes: list[Change] = []
    live: set[str] = set()  # (the first members count as live from the start)
    for g, m in enumerate(members):
        where = f"{source}: members[{g}]"
        topics = _topic_count(m.topics, spec.topics, where)
        lo, hi = _range(m.start_ms, f"{where}.start_ms")
        for k in range(m.count):
            name = f"{m.name}{g}-{k}" if len(members) > 1 else f"{m.name}-{k}"
            live.add(name)
            changes.append(Change(lo, "join", name, topics, spread_ms=hi - lo))
    sizes = dict(spec.topics)
    every = {t: 1 for t in spec.topics}
    joined = len(live)
    for i, s in sorted(enumerate(schedule), key=lambda e: e[1].at_ms):
        step = _scheduled(s, f"{source}: schedule[{i}]", live, joined, sizes, every)
        joined += sum(1 for c in step if c.kind == "join")
        changes += step
    lo, hi = _range(network.delay_ms, f"{source}: network.delay_ms")
    if spec.duration_ms < 0 or randoms.faults < 0:
        raise ScenarioError(f"{source}: duration_ms and random.faults must be >= 0")
    return ZkScenario(spec.name, dict(spec.topics), changes, spec.duration_ms, group=spec.group_id, config=overrides,
                      delay_ms=(lo, hi), random_faults=randoms.faults, description=spec.description)


def _topic_count(value: Any, topics: dict[str, int], where: str) -> dict[str, int]:
    if value is None:
        return {t: 1 for t in topics}
    counts = {t: 1 for t in value} if isinstance(value, list) else value
    if not isinstance(counts, dict) or not counts:
        raise ScenarioError(f"{where}.topics: expected {{topic = streams}} or a list of topics, got {value!r}")
    for t, n in counts.items():
        if t not in topics:
            raise ScenarioError(f"{where} subscribes to unknown topic {t!r}")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ScenarioError(f"{where}.topics: {t} needs 1 or more streams, got {n!r}")
    return dict(counts)


def _scheduled(s: ZkScheduled, where: str, live: set[str], joined: int, sizes: dict[str, int],
               every: dict[str, int]) -> list[Change]:
    """The changes of one `[[schedule]]` entry, checked against the consumers live by then."""
    if s.fault not in KINDS:
        raise ScenarioError(f"{where}: unknown fault {s.fault!r}; known: {', '.join(KINDS)}")
    for key in ("at_ms", "count", "duration_ms", "delay_ms", "partitions"):
        value = getattr(s, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ScenarioError(f"{where}: {key} must be a whole number >= 0, got {value!r}")
    if not isinstance(s.members, list) or not all(isinstance(m, str) and m and "/" not in m for m in s.members):
        raise ScenarioError(f"{where}: members must be a list of consumer ids, got {s.members!r}")
    if s.fault == "add_partitions":
        if s.topic not in sizes or s.partitions < 1:
            raise ScenarioError(f"{where}: add_partitions needs a known topic and partitions >= 1")
        sizes[s.topic] += s.partitions
        return [Change(s.at_ms, "add_partitions", topic=s.topic, count=sizes[s.topic])]
    if s.fault == "join":
        names = list(s.members) or [f"burst-{joined + k}" for k in range(s.count)]
        if not names:
            raise ScenarioError(f"{where}: join needs members (new consumer ids) or count >= 1")
        running = [m for m in names if m in live]
        if running:
            raise ScenarioError(f"{where}: consumer {running[0]!r} is already running")
        live.update(names)
        return [Change(s.at_ms, "join", m, dict(every)) for m in names]
    if not s.members:
        raise ScenarioError(f"{where}: {s.fault} needs members, a list of consumer ids")
    unknown = [m for m in s.members if m not in live]
    if unknown:
        raise ScenarioError(f"{where}: no running consumer {unknown[0]!r} by then "
                            f"(running: {', '.join(sorted(live)) or 'none'})")
    if s.fault in ("leave", "crash"):
        live.difference_update(s.members)
    if s.fault in ("delay_watches", "slow_release") and (s.delay_ms < 1 or s.duration_ms < 1):
        raise ScenarioError(f"{where}: {s.fault} needs delay_ms and duration_ms >= 1")
    if s.fault in ("pause", "partition") and s.duration_ms < 1:
        raise ScenarioError(f"{where}: {s.fault} needs duration_ms >= 1")
    ms = s.duration_ms if s.fault in ("pause", "partition") else s.delay_ms
    return [Change(s.at_ms, s.fault, m, ms=ms, duration_ms=s.duration_ms) for m in s.members]


def builtin_zk_dir() -> Path:
    return builtin_scenarios_dir() / "zk"


def builtin_zk_names() -> list[str]:
    folder = builtin_zk_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def load_zk_scenario(name_or_path: str | Path) -> ZkScenario:
    """An existing file, or a built-in name (`herd` -> grouplab/scenarios/zk/herd.toml)."""
    path = Path(name_or_path)
    if not path.is_file():
        text = str(name_or_path)
        builtin = builtin_zk_dir() / (text if text.endswith(".toml") else f"{text}.toml")
        if "/" in text or "\\" in text or not builtin.is_file():
            raise ScenarioError(f"no ZooKeeper-era scenario file or built-in scenario {text!r} "
                                f"(built-in: {', '.join(builtin_zk_names()) or 'none'})")
        path = builtin
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    raw.setdefault("name", path.stem)
    return parse_zk_scenario(raw, str(path))
