"""Online migration end to end (issue 23, docs/protocol.md §11.8): real confluent-kafka consumers,
classic ones (`group.protocol=classic`, eager range) and a KIP-848 one (`group.protocol=consumer`),
in one group on grouplab's Kafka port. A Stable classic group upgrades when the consumer-protocol
member joins: the classic members are served inside the consumer group, every consumer ends with
partitions, no partition is held by two consumers at once (checked at every callback), the
committed offsets stay. When the consumer-protocol member leaves, the group is classic again and
the classic consumers keep consuming. A classic consumer can also join a consumer group. Every wait
is on a condition with a deadline."""

from __future__ import annotations

from typing import Any, Callable

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient

from grouplab.testing import Cluster

pytestmark = pytest.mark.e2e
TOPIC = "t"
PARTITIONS = 6
RECORDS = 30
TIMEOUT_S = 90.0
BROKER = {"group.consumer.session.timeout.ms": 6000, "group.consumer.min.session.timeout.ms": 1000,
          "group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 100,
          "group.initial.rebalance.delay.ms": 0}


class Holdings:
    """Who holds which partition, as the consumers' callbacks say; a partition given to one while
    another still holds it is recorded as a violation."""

    def __init__(self) -> None:
        self.by_member: dict[str, set[int]] = {}
        self.violations: list[str] = []

    def assign(self, name: str, partitions: set[int]) -> None:
        for other, held in self.by_member.items():
            if other != name and held & partitions:
                self.violations.append(f"{sorted(held & partitions)} given to {name} while {other} holds them")
        self.by_member.setdefault(name, set()).update(partitions)

    def revoke(self, name: str, partitions: set[int]) -> None:
        self.by_member.setdefault(name, set()).difference_update(partitions)


class Member:
    """One in-process consumer of either protocol; its callbacks report to the shared Holdings."""

    def __init__(self, cluster: Cluster, holdings: Holdings, name: str, protocol: str) -> None:
        self.name, self.holdings = name, holdings
        self.records: list[tuple[int | None, int | None]] = []
        config = {"bootstrap.servers": cluster.bootstrap, "group.id": "g", "client.id": name, "group.protocol": protocol,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0}
        if protocol == "classic":
            config.update({"session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
        self.consumer = Consumer(config)
        self.consumer.subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke)
        self.closed = False

    @property
    def held(self) -> set[int]:
        return self.holdings.by_member.get(self.name, set())

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self.holdings.assign(self.name, {p.partition for p in partitions})

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.holdings.revoke(self.name, {p.partition for p in partitions})

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.records.append((msg.partition(), msg.offset()))

    def commit(self) -> None:
        if self.held:
            self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def poll_until(members: list[Member], predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            state = {m.name: sorted(m.held) for m in members if not m.closed}
            raise AssertionError(f"not within {TIMEOUT_S} s: {what}; holdings: {state}")
        for m in members:
            if not m.closed:
                m.poll()


def partition_all(members: list[Member]) -> bool:
    held = [m.held for m in members]
    return all(held) and sorted(p for h in held for p in h) == list(range(PARTITIONS))


def produce(cluster: Cluster, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    for i in range(count):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0


def group_type(admin: AdminClient) -> Any:
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(TIMEOUT_S).valid}
    return listed["g"].type if "g" in listed else None


@pytest.fixture
def cluster() -> Any:
    with Cluster(config=BROKER, topics={TOPIC: PARTITIONS}) as c:
        yield c


@pytest.fixture
def members() -> Any:
    made: list[Member] = []
    yield made
    for m in made:
        m.close()


def test_a_classic_group_upgrades_when_a_consumer_member_joins_and_downgrades_when_it_leaves(
        cluster: Cluster, members: list[Member]) -> None:
    holdings = Holdings()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    classic = [Member(cluster, holdings, f"classic{i}", "classic") for i in range(2)]
    members += classic
    poll_until(members, lambda: partition_all(classic), "two classic consumers share the six partitions")
    produce(cluster, RECORDS)
    poll_until(members, lambda: sum(len(m.records) for m in classic) >= RECORDS, "the classic consumers consume")
    for m in classic:
        m.commit()
    committed = cluster.committed("g")
    assert sum(committed.values()) == RECORDS
    assert group_type(admin) == ConsumerGroupType.CLASSIC

    newcomer = Member(cluster, holdings, "kip848", "consumer")
    members.append(newcomer)
    poll_until(members, lambda: partition_all(members), "all three consumers hold partitions")
    converted = cluster.events("g", event="group_converted")
    assert [(e["from_type"], e["to_type"]) for e in converted] == [("classic", "consumer")]
    assert group_type(admin) == ConsumerGroupType.CONSUMER
    assert cluster.committed("g") == committed  # the offsets are the consumer group's now
    described = admin.describe_consumer_groups(["g"])["g"].result(TIMEOUT_S)
    assert described.type == ConsumerGroupType.CONSUMER
    assert sorted(m.client_id for m in described.members) == ["classic0", "classic1", "kip848"]

    newcomer.close()
    poll_until(members, lambda: partition_all(classic), "the classic consumers take the partitions back")
    converted = cluster.events("g", event="group_converted")
    assert [(e["from_type"], e["to_type"]) for e in converted] == [("classic", "consumer"), ("consumer", "classic")]
    assert group_type(admin) == ConsumerGroupType.CLASSIC
    before = sum(len(m.records) for m in classic)
    produce(cluster, RECORDS)
    poll_until(members, lambda: sum(len(m.records) for m in classic) >= before + RECORDS,
               "the classic consumers keep consuming")
    assert holdings.violations == []
    # `grouplab explain` tells both conversions, with their why (the run as traced so far).
    from grouplab.teach.catalog import Catalog
    from grouplab.teach.explain import narrate_run, text_lines

    story = narrate_run(cluster.run_dir)  # type: ignore[arg-type]
    text = "\n".join(line for _, line in text_lines(story, story.steps, Catalog()))
    upgrade = text.index("the classic group becomes a consumer-protocol group at epoch")
    assert "Online upgrade (group.consumer.migration.policy)" in text
    assert text.index("the group becomes classic again at generation", upgrade) > upgrade


def test_a_classic_consumer_joins_a_consumer_group(cluster: Cluster, members: list[Member]) -> None:
    holdings = Holdings()
    first = Member(cluster, holdings, "kip848", "consumer")
    members.append(first)
    poll_until(members, lambda: partition_all(members), "the consumer-protocol member holds every partition")
    joining = Member(cluster, holdings, "classic0", "classic")
    members.append(joining)
    poll_until(members, lambda: partition_all(members), "both consumers hold partitions")
    joined = cluster.events("g", event="consumer_classic_member_joined")
    assert [e["client_id"] for e in joined] == ["classic0"]
    assert cluster.events("g", event="group_converted") == []  # it stays a consumer group
    produce(cluster, RECORDS)
    poll_until(members, lambda: sum(len(m.records) for m in members) >= RECORDS, "every record consumed")
    joining.close()
    poll_until(members, lambda: first.held == set(range(PARTITIONS)), "the consumer-protocol member holds all again")
    assert holdings.violations == []
