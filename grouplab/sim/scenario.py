"""Scenarios: a small declarative description of a simulated run, loaded from TOML.

    name = "crash-storm"
    topics = { t0 = 12, t1 = 12 }
    duration_ms = 600_000              # random faults happen in [faults_from_ms, duration_ms]
    [broker]                           # Kafka broker config names
    "group.initial.rebalance.delay.ms" = 3000
    [consumer]                         # Kafka consumer config names, defaults for every member
    "session.timeout.ms" = 10000
    [[members]]                        # groups of identical members
    count = 10
    assignors = ["range"]
    [network]                          # every member <-> coordinator link, while faults are on
    delay_ms = [1, 20]
    loss = 0.01
    [random]                           # fault rates per hour of virtual time
    crash = 30
    [[schedule]]                       # and/or faults at fixed times
    at_ms = 60000
    fault = "partition"
    members = 2                        # a count (picked by the seed) or a list of member names
    duration_ms = 30000
    [[faults]]                         # fault rules on every message, in `grouplab run --faults` SPEC form
    spec = "SyncGroup:hold:link=m-0"
    from_ms = 20000                    # optional window; default: from the start until the faults end
    until_ms = 90000
    hold_ms = 40000                    # hold only: release after this long (default: when the window ends)
    [lesson]                           # optional: how `grouplab explain` tells it as a lesson
    seed = 1                           #   (grouplab/teach/lessons.py; the simulator ignores it)

Every name here is checked when the file is loaded, so a typo fails loudly instead of silently
running a different scenario.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from grouplab.faults.rules import FaultSpecError, Rule, parse_spec

FAULT_KINDS = (
    "crash",  # process gone, no LeaveGroup; restarts after duration_ms (or never if omitted/0)
    "hang",  # alive and connected, does nothing for duration_ms, then resumes
    "slow",  # the application stops polling for duration_ms (beyond max.poll.interval.ms: it leaves)
    "leave",  # clean shutdown with LeaveGroup; restarts after duration_ms (or never)
    "partition",  # the member's link drops everything both ways for duration_ms, then heals
    "disconnect",  # the member's connection closes; it reconnects
    "coordinator_restart",  # the coordinator crashes and comes back after duration_ms from its durable log
    "static_restart",  # a static member restarts (new process, same group.instance.id) after duration_ms
    "zombie",  # a static member is replaced by a new process while the old one keeps running for duration_ms
    "add_partitions",  # `topic` grows by `partitions`
    "join_burst",  # `count` new members join at once
    "leave_burst",  # `count` members leave at once (clean shutdown)
    "refresh_metadata",  # every running member's client refreshes its metadata now (not at metadata.max.age.ms)
    "crash_before_commit",  # delivery: crash right after processing a batch, before committing it
    "crash_after_commit",  # delivery: crash right after committing a batch, before processing it
    "kill_broker",  # a cluster's broker `node` (an id, or "coordinator": the group's) is killed, back after duration_ms
    "restart_broker",  # a cluster's broker `node` shuts down cleanly and starts again after duration_ms
    "elect_leaders",  # a preferred-leader election (kafka-leader-election.sh --election-type PREFERRED)
)
BROKER_KINDS = ("kill_broker", "restart_broker", "elect_leaders")

RANDOM_KINDS = ("crash", "hang", "slow", "leave", "partition", "disconnect", "coordinator_restart", "static_restart",
                "crash_before_commit", "crash_after_commit")
DELIVERY_MODES = ("at-most-once", "at-least-once", "exactly-once")


class ScenarioError(ValueError):
    pass


@dataclass
class MemberSpec:
    count: int = 1
    name: str = "m"
    topics: list[str] | None = None  # None: every topic of the scenario
    assignors: list[str] = field(default_factory=lambda: ["range"])
    static: bool = False
    start_ms: list[int] = field(default_factory=lambda: [0, 0])  # uniform in [lo, hi]
    config: dict[str, Any] = field(default_factory=dict)  # Kafka consumer names
    names: list[str] | None = None  # the members' client ids, one per member; default <name><group>-<k>


@dataclass
class NetworkSpec:
    delay_ms: list[int] = field(default_factory=lambda: [1, 5])
    loss: float = 0.0
    duplicate: float = 0.0


@dataclass
class RandomFaults:
    """Expected faults per hour of virtual time, by kind, and how long each lasts."""

    crash: float = 0.0
    hang: float = 0.0
    slow: float = 0.0
    leave: float = 0.0
    partition: float = 0.0
    disconnect: float = 0.0
    coordinator_restart: float = 0.0
    static_restart: float = 0.0
    crash_before_commit: float = 0.0
    crash_after_commit: float = 0.0
    duration_ms: list[int] = field(default_factory=lambda: [1_000, 20_000])


@dataclass
class ScheduledFault:
    at_ms: int
    fault: str
    members: Any = 1  # a count picked by the seed, or a list of member names
    duration_ms: int = 0
    topic: str = ""
    partitions: int = 0
    count: int = 0
    node: Any = "coordinator"  # kill_broker, restart_broker: a node id, or "coordinator" (the group's)


@dataclass
class FaultRule:
    """A `[[faults]]` entry: a fault rule in the SPEC form of `grouplab run --faults` (hold allowed),
    applied to every message between a member and the coordinator sent in [from_ms, until_ms)
    (until_ms None: until the faults end). A held message is released when the window ends, or
    `hold_ms` after it was held if that comes first."""

    spec: str = ""
    from_ms: int = 0
    until_ms: int | None = None
    hold_ms: int | None = None

    def rule(self) -> Rule:
        """A new Rule for one run: each run counts its own `matched` and `fired`."""
        return parse_spec(self.spec, allow_hold=True)


@dataclass
class DeliverySpec:
    """Members run a delivery-semantics application (grouplab/consumer/delivery.py) instead of a plain
    consumer: they read `input_topic`, write every record to `output_topic`, and commit in `mode`."""

    mode: str = "at-least-once"
    input_topic: str = "in"
    output_topic: str = "out"
    records: int = 200  # input records per partition, written before the members start
    produce_ack_loss: float = 0.0  # probability a Produce answer is lost while faults are on
    max_records: int = 50  # records per partition per fetch
    processing_ms: int = 0  # time the application spends on each fetched batch


@dataclass
class LessonSpec:
    """A `[lesson]` table: how `grouplab explain` tells this scenario as a lesson (grouplab/teach/
    lessons.py). The simulator ignores it; it lives in the scenario so that a lesson is one file."""

    seed: int = 1  # the seed the lesson is told with, so its story is always the same
    from_s: float | None = None  # the default --from/--to/--generation: the lesson's moment
    to_s: float | None = None
    generation: int | None = None
    # The same scenario run more than once and told side by side: each a partial scenario (its
    # tables merged into this one, its other keys replacing this one's) with a `label`, and
    # `assignors` to set every member's assignor list.
    variants: list[dict[str, Any]] = field(default_factory=list)
    # Told through `grouplab compare` instead: the scenario's members, topics and changes played
    # under the ZooKeeper era and every coordinator design, each change narrated with what each
    # design did and why (grouplab/teach/compare_lesson.py).
    compare: bool = False


@dataclass
class Scenario:
    name: str = "scenario"
    description: str = ""
    group_id: str = "sim"
    brokers: int = 1  # a cluster of brokers 0..brokers-1 over one store (coordinator/brokers.py)
    topics: dict[str, int] = field(default_factory=lambda: {"t0": 6})
    duration_ms: int = 600_000
    faults_from_ms: int = 10_000
    broker: dict[str, Any] = field(default_factory=dict)
    consumer: dict[str, Any] = field(default_factory=dict)
    members: list[MemberSpec] = field(default_factory=lambda: [MemberSpec(count=3)])
    network: NetworkSpec = field(default_factory=NetworkSpec)
    random: RandomFaults = field(default_factory=RandomFaults)
    schedule: list[ScheduledFault] = field(default_factory=list)
    faults: list[FaultRule] = field(default_factory=list)
    settle_ms: int | None = None  # liveness bound after the last fault; None: derived from the timeouts
    delivery: DeliverySpec | None = None
    lesson: LessonSpec | None = None

    @property
    def member_count(self) -> int:
        return sum(m.count for m in self.members)

    def session_timeout_ms(self) -> int | None:
        """The members' `session.timeout.ms`, if they all have the same one (for sentences that
        name it); None when member specs differ."""
        from grouplab.consumer.config import ConsumerConfig

        values = {ConsumerConfig(group_id=self.group_id, topics=list(self.topics)).with_overrides(
            f"{k}={_kafka_value(v)}" for k, v in {**self.consumer, **m.config}.items()).session_timeout_ms
            for m in self.members}
        return values.pop() if len(values) == 1 else None

    def group_protocol(self) -> str:
        """`consumer` if any member speaks KIP-848's protocol (`group.protocol`), else `classic`."""
        protocols = {str({**self.consumer, **m.config}.get("group.protocol", "classic")) for m in self.members}
        return "consumer" if "consumer" in protocols else "classic"

    def coordinator_session_timeout_ms(self) -> int | None:
        """The session timeout that removes a silent member: the members' `session.timeout.ms`
        (classic), or the broker's `group.consumer.session.timeout.ms` (consumer protocol)."""
        if self.group_protocol() == "classic":
            return self.session_timeout_ms()
        from grouplab.coordinator.config import BrokerConfig

        return BrokerConfig().with_overrides(f"{k}={_kafka_value(v)}" for k, v in self.broker.items()).consumer_session_timeout_ms

    def with_members(self, count: int) -> "Scenario":
        """The same scenario with `count` members in total (sweeps vary the size)."""
        import copy

        out = copy.deepcopy(self)
        total = self.member_count
        out.members = []
        left = count
        for i, spec in enumerate(self.members):
            share = count - sum(m.count for m in out.members) if i == len(self.members) - 1 else round(count * spec.count / total)
            spec = copy.deepcopy(spec)
            if spec.count != max(share, 0):
                spec.names = None  # names are per member: a resized group gets the default ones
            spec.count = max(share, 0)
            left -= spec.count
            out.members.append(spec)
        return out

    def with_group_protocol(self, protocol: str) -> "Scenario":
        """The same scenario with every member on `protocol` (`group.protocol`, as Kafka spells it).
        To `consumer` (KIP-848): the classic-only settings leave the members (session.timeout.ms,
        heartbeat.interval.ms: the coordinator decides those) and become the broker's
        group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms, where the
        scenario does not set them, so the timing the scenario was written for holds; the
        members' client-side assignors are unused (the coordinator's group.consumer.assignors
        assign). To `classic`: group.protocol and group.remote.assignor leave the members."""
        import copy

        if protocol not in ("classic", "consumer"):
            raise ScenarioError(f"group.protocol: expected classic or consumer, got {protocol!r}")
        out = copy.deepcopy(self)
        tables = [out.consumer] + [m.config for m in out.members]
        if protocol == "classic":
            for t in tables:
                t.pop("group.protocol", None)
                t.pop("group.remote.assignor", None)
            return out
        moved = {"session.timeout.ms": "group.consumer.session.timeout.ms",
                 "heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms"}
        for name, broker_name in moved.items():
            values = {t[name] for t in tables if name in t}
            if values and broker_name not in out.broker:
                value = max(values) if name == "session.timeout.ms" else min(values)
                out.broker[broker_name] = value
                low = broker_name.replace("group.consumer.", "group.consumer.min.")
                out.broker[low] = min(value, int(out.broker.get(low, value)))
            for t in tables:
                t.pop(name, None)
        for t in tables:
            t.pop("partition.assignment.strategy", None)
        out.consumer["group.protocol"] = "consumer"
        for m in out.members:
            m.config.pop("group.protocol", None)
        return out

    def with_assignors(self, assignors: list[str]) -> "Scenario":
        import copy

        out = copy.deepcopy(self)
        for spec in out.members:
            spec.assignors = list(assignors)
        return out


def _build(cls: type, raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a table, got {type(raw).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = set(raw) - known
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
    return cls(**raw)


def _range(value: Any, where: str) -> list[int]:
    if isinstance(value, int):
        return [value, value]
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value) and value[0] <= value[1]:
        return list(value)
    raise ScenarioError(f"{where}: expected an integer or [low, high], got {value!r}")


def parse_scenario(raw: dict[str, Any], source: str = "<scenario>") -> Scenario:
    raw_all = raw
    raw = dict(raw)
    members = [_build(MemberSpec, m, f"{source}: members[{i}]") for i, m in enumerate(raw.pop("members", [{"count": 3}]))]
    network = _build(NetworkSpec, raw.pop("network", {}), f"{source}: network")
    random_faults = _build(RandomFaults, raw.pop("random", {}), f"{source}: random")
    schedule = [_build(ScheduledFault, s, f"{source}: schedule[{i}]") for i, s in enumerate(raw.pop("schedule", []))]
    faults = [_build(FaultRule, f, f"{source}: faults[{i}]") for i, f in enumerate(raw.pop("faults", []))]
    delivery = _build(DeliverySpec, raw.pop("delivery"), f"{source}: delivery") if "delivery" in raw else None
    lesson = _build(LessonSpec, raw.pop("lesson"), f"{source}: lesson") if "lesson" in raw else None
    scenario = _build(Scenario, raw, source)
    scenario.delivery, scenario.lesson = delivery, lesson
    scenario.members, scenario.network, scenario.random, scenario.schedule = members, network, random_faults, schedule
    scenario.faults = faults
    _validate(scenario, source)
    if lesson is not None:
        _validate_lesson(raw_all, lesson, source)
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ScenarioError(f"no scenario file {path}") from None
    return scenario_from_text(text, str(path), default_name=path.stem)


def scenario_from_text(text: str, source: str = "<scenario>", default_name: str | None = None) -> Scenario:
    """A scenario from its TOML text: what a Spark worker parses, since it may not have the file."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
    if default_name is not None:
        raw.setdefault("name", default_name)
    return parse_scenario(raw, source)


def builtin_scenarios_dir() -> Path:
    """grouplab/scenarios/: the built-in scenarios, shipped inside the package."""
    return Path(__file__).resolve().parents[1] / "scenarios"


def builtin_scenario_names() -> list[str]:
    folder = builtin_scenarios_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def resolve_scenario(name_or_path: str | Path) -> Path:
    """An existing file wins; else a built-in name (`crash-storm` -> grouplab/scenarios/crash-storm.toml), so
    `--scenario crash-storm` works from any directory."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    text = str(name_or_path)
    if "/" not in text and "\\" not in text:
        builtin = builtin_scenarios_dir() / (text if text.endswith(".toml") else f"{text}.toml")
        if builtin.is_file():
            return builtin
    names = builtin_scenario_names()
    known = f"built-in: {', '.join(names)}" if names else f"no built-in scenarios found in {builtin_scenarios_dir()}"
    raise ScenarioError(f"no scenario file or built-in scenario {text!r} ({known})")


def _validate(s: Scenario, source: str) -> None:
    from grouplab.consumer.assignors import get_assignor
    from grouplab.consumer.config import ConsumerConfig
    from grouplab.coordinator.config import BrokerConfig

    if not s.topics or any(not isinstance(n, int) or n < 1 for n in s.topics.values()):
        raise ScenarioError(f"{source}: topics must map names to partition counts >= 1")
    BrokerConfig().with_overrides(f"{k}={_kafka_value(v)}" for k, v in s.broker.items())
    names: set[str] = set()
    for i, m in enumerate(s.members):
        m.start_ms = _range(m.start_ms, f"{source}: members[{i}].start_ms")
        if m.names is not None:
            if (not isinstance(m.names, list) or len(m.names) != m.count
                    or not all(isinstance(n, str) and n for n in m.names)):
                raise ScenarioError(f"{source}: members[{i}].names must list {m.count} client id(s), one per member")
            if names & set(m.names) or len(set(m.names)) != len(m.names):
                raise ScenarioError(f"{source}: members[{i}].names: a client id is given twice")
            names |= set(m.names)
        for a in m.assignors:
            get_assignor(a)
        for t in m.topics or []:
            if t not in s.topics:
                raise ScenarioError(f"{source}: members[{i}] subscribes to unknown topic {t!r}")
        ConsumerConfig(group_id=s.group_id, topics=m.topics or list(s.topics)).with_overrides(
            f"{k}={_kafka_value(v)}" for k, v in {**s.consumer, **m.config}.items())
    s.network.delay_ms = _range(s.network.delay_ms, f"{source}: network.delay_ms")
    s.random.duration_ms = _range(s.random.duration_ms, f"{source}: random.duration_ms")
    for p in ("loss", "duplicate"):
        if not 0.0 <= getattr(s.network, p) < 1.0:
            raise ScenarioError(f"{source}: network.{p} must be in [0, 1)")
    for i, f in enumerate(s.schedule):
        if f.fault not in FAULT_KINDS:
            raise ScenarioError(f"{source}: schedule[{i}]: unknown fault {f.fault!r}; known: {', '.join(FAULT_KINDS)}")
        if not (isinstance(f.members, int) and not isinstance(f.members, bool)
                or isinstance(f.members, list) and all(isinstance(m, str) for m in f.members)):
            raise ScenarioError(f"{source}: schedule[{i}]: members must be a count or a list of member names, "
                                f"got {f.members!r}")
        if f.fault in BROKER_KINDS and s.brokers < 2:
            raise ScenarioError(f"{source}: schedule[{i}]: {f.fault} needs brokers >= 2")
        if f.fault in BROKER_KINDS and not (f.node == "coordinator" or isinstance(f.node, int)
                                            and not isinstance(f.node, bool) and 0 <= f.node < s.brokers):
            raise ScenarioError(f"{source}: schedule[{i}]: node must be a broker id below {s.brokers} "
                                f"or \"coordinator\", got {f.node!r}")
        if f.fault == "coordinator_restart" and s.brokers > 1:
            raise ScenarioError(f"{source}: schedule[{i}]: coordinator_restart is the one-broker fault; "
                                f"a cluster kills a broker (kill_broker)")
        if f.fault == "add_partitions" and (f.topic not in s.topics or f.partitions < 1):
            raise ScenarioError(f"{source}: schedule[{i}]: add_partitions needs a known topic and partitions >= 1")
    for i, rule in enumerate(s.faults):
        _validate_fault_rule(rule, f"{source}: faults[{i}]")
    if not isinstance(s.brokers, int) or isinstance(s.brokers, bool) or s.brokers < 1:
        raise ScenarioError(f"{source}: brokers must be an integer >= 1, got {s.brokers!r}")
    if s.brokers > 1 and s.random.coordinator_restart:
        raise ScenarioError(f"{source}: random.coordinator_restart is the one-broker fault")
    if s.delivery is not None:
        d = s.delivery
        if d.mode not in DELIVERY_MODES:
            raise ScenarioError(f"{source}: delivery.mode must be one of {', '.join(DELIVERY_MODES)}, got {d.mode!r}")
        if d.input_topic not in s.topics or d.output_topic not in s.topics:
            raise ScenarioError(f"{source}: delivery topics must be listed in topics")
        if s.topics[d.input_topic] != s.topics[d.output_topic]:
            raise ScenarioError(f"{source}: delivery input and output topics need the same partition count")
        if d.records < 0 or not 0.0 <= d.produce_ack_loss < 1.0:
            raise ScenarioError(f"{source}: delivery.records must be >= 0 and produce_ack_loss in [0, 1)")
    if s.duration_ms < 0 or s.faults_from_ms < 0:
        raise ScenarioError(f"{source}: duration_ms and faults_from_ms must be >= 0")


def variant_raw(raw: dict[str, Any], variant: dict[str, Any]) -> dict[str, Any]:
    """A lesson variant's scenario table: the lesson's own, without its `[lesson]`, with the
    variant's tables merged in and its other keys in place of the lesson's (`label` dropped;
    `assignors` set on every `[[members]]`)."""
    import copy

    out = copy.deepcopy({k: v for k, v in raw.items() if k != "lesson"})
    for key, value in variant.items():
        if key == "label":
            continue
        if key == "assignors":
            for m in out.setdefault("members", [{"count": 3}]):
                m["assignors"] = list(value)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **copy.deepcopy(value)}
        else:
            out[key] = copy.deepcopy(value)
    return out


def _validate_lesson(raw: dict[str, Any], lesson: LessonSpec, source: str) -> None:
    for key in ("from_s", "to_s"):
        value = getattr(lesson, key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            raise ScenarioError(f"{source}: lesson.{key} must be seconds >= 0, got {value!r}")
    if not isinstance(lesson.seed, int) or isinstance(lesson.seed, bool):
        raise ScenarioError(f"{source}: lesson.seed must be an integer, got {lesson.seed!r}")
    if not isinstance(lesson.variants, list):
        raise ScenarioError(f"{source}: lesson.variants must be a list of tables")
    if not isinstance(lesson.compare, bool):
        raise ScenarioError(f"{source}: lesson.compare must be true or false, got {lesson.compare!r}")
    if lesson.compare and lesson.variants:
        raise ScenarioError(f"{source}: a lesson told through grouplab compare plays every design itself: no variants")
    for i, variant in enumerate(lesson.variants):
        where = f"{source}: lesson.variants[{i}]"
        if not isinstance(variant, dict) or not isinstance(variant.get("label"), str) or not variant["label"]:
            raise ScenarioError(f"{where}: every variant needs a label")
        if "lesson" in variant:
            raise ScenarioError(f"{where}: a variant cannot hold a lesson")
        parse_scenario(variant_raw(raw, variant), where)  # a variant is a scenario: checked as one


def _validate_fault_rule(f: FaultRule, where: str) -> None:
    if not isinstance(f.spec, str) or not f.spec:
        raise ScenarioError(f"{where}: spec must be a fault SPEC such as \"Heartbeat:drop:0.2\"")
    try:
        rule = f.rule()
    except FaultSpecError as exc:
        raise ScenarioError(f"{where}: {exc}") from None
    if rule.kafka_wire_only:
        raise ScenarioError(f"{where}: {rule.api} is Kafka's own API, sent only by real Kafka clients to the "
                            "Kafka-wire listener; the simulator's members speak grouplab's protocol, which has none "
                            "(such a rule belongs to grouplab run --kafka-port --faults)")
    for key in ("from_ms", "until_ms", "hold_ms"):
        value = getattr(f, key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ScenarioError(f"{where}: {key} must be milliseconds >= 0, got {value!r}")
    if f.until_ms is not None and f.until_ms <= f.from_ms:
        raise ScenarioError(f"{where}: until_ms must be after from_ms")
    if f.hold_ms is not None and rule.action != "hold":
        raise ScenarioError(f"{where}: hold_ms is for hold rules only, not {rule.action}")


def _kafka_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)
