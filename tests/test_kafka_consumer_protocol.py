"""KIP-848 end to end (issue 23): confluent-kafka consumers with `group.protocol=consumer` on
grouplab's Kafka port. The coordinator assigns (server-side `uniform` or `range`); each member
converges on its own with ConsumerGroupHeartbeat: a group of three forms and every record is
consumed once; a fourth joins and only the partitions that move are revoked; one closes and its
partitions move; one is killed (SIGKILL) and is removed after the session timeout; AdminClient
describes the group as type CONSUMER and lists it. Every wait is on a condition with a deadline.

librdkafka refuses session.timeout.ms, heartbeat.interval.ms and partition.assignment.strategy
with group.protocol=consumer (they are the broker's): the cluster's group.consumer.* settings are
lowered instead, so the session-timeout test is short."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient

from grouplab.testing import Cluster

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent
TOPIC = "t"
PARTITIONS = 6
RECORDS = 60
TIMEOUT_S = 60.0
SESSION_TIMEOUT_MS = 6000
BROKER = {"group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS, "group.consumer.min.session.timeout.ms": 1000,
          "group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 100}

# A consumer in its own process, for the kill: it says "assigned" once it has partitions, then polls until killed.
KILLED_WORKER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "client.id": "doomed",
              "group.protocol": "consumer", "group.remote.assignor": "uniform", "log_level": 0})
c.subscribe([sys.argv[3]])
said = False
while True:
    c.poll(0.1)
    if c.assignment() and not said:
        print("assigned", flush=True)
        said = True
"""


class Member:
    """One in-process consumer and what its callbacks said: the incremental assignments and
    revocations (KIP-848 rebalances are incremental), the partitions it holds, its records."""

    def __init__(self, cluster: Cluster, group: str, name: str, assignor: str) -> None:
        self.name = name
        self.held: set[int] = set()
        self.assigned: list[set[int]] = []
        self.revoked: list[set[int]] = []
        self.records: list[tuple[int | None, int | None]] = []  # (partition, offset): always set on a record
        self.consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "client.id": name,
                                  "group.protocol": "consumer", "group.remote.assignor": assignor,
                                  "auto.offset.reset": "earliest", "log_level": 0})
        self.consumer.subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke)
        self.closed = False

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        added = {p.partition for p in partitions}
        self.assigned.append(added)
        self.held |= added

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        gone = {p.partition for p in partitions}
        self.revoked.append(gone)
        self.held -= gone

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.records.append((msg.partition(), msg.offset()))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def poll_until(members: list[Member], predicate: Callable[[], bool], what: str) -> None:
    """Poll every open member (callbacks and records arrive in poll) until `predicate` holds."""
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            state = {m.name: (sorted(m.held), m.assigned, m.revoked) for m in members}
            raise AssertionError(f"not within {TIMEOUT_S} s: {what}; members: {state}")
        for m in members:
            if not m.closed:
                m.poll()


def partition_all(members: list[Member]) -> bool:
    """Every partition held by exactly one member, each member holding some."""
    held = [m.held for m in members]
    return all(held) and sorted(p for h in held for p in h) == list(range(PARTITIONS))


def produce(cluster: Cluster, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    for i in range(count):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0


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


def test_uniform_three_form_a_fourth_joins_and_one_closes(cluster: Cluster, members: list[Member]) -> None:
    members += [Member(cluster, "g", f"c{i}", "uniform") for i in range(3)]
    poll_until(members, lambda: partition_all(members), "three members share the six partitions")
    produce(cluster, RECORDS)
    poll_until(members, lambda: sum(len(m.records) for m in members) >= RECORDS, "every record consumed")
    consumed = [r for m in members for r in m.records]
    assert len(consumed) == RECORDS and len(set(consumed)) == RECORDS  # each record once

    before = {m.name: set(m.held) for m in members}
    revoked_before = {m.name: len(m.revoked) for m in members}
    members.append(Member(cluster, "g", "c3", "uniform"))
    poll_until(members, lambda: partition_all(members), "four members share the six partitions")
    for m in members[:3]:
        revoked = set().union(*m.revoked[revoked_before[m.name]:])
        assert revoked == before[m.name] - m.held, m.name  # only what moved was revoked: what it kept, never
        assert m.held <= before[m.name], m.name  # a uniform rebalance on a join takes, never gives
    assert members[3].assigned and members[3].held

    leaving = members[0]
    moved = set(leaving.held)
    leaving.close()
    rest = members[1:]
    poll_until(rest, lambda: partition_all(rest), "the closed member's partitions move to the others")
    assert moved <= set().union(*(m.held for m in rest))


def test_range_group_is_described_and_listed_as_a_consumer_group(cluster: Cluster, members: list[Member]) -> None:
    members += [Member(cluster, "rg", f"r{i}", "range") for i in range(3)]
    # range: contiguous pairs, once every revocation is done (all six can be held, each once, while
    # a member still holds a partition its next owner waits for)
    poll_until(members, lambda: sorted(sorted(m.held) for m in members) == [[0, 1], [2, 3], [4, 5]],
               "three range members hold contiguous pairs")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})

    def described() -> Any:
        return admin.describe_consumer_groups(["rg"])["rg"].result(TIMEOUT_S)

    poll_until(members, lambda: described().state == ConsumerGroupState.STABLE, "the group described Stable")
    group = described()
    assert group.type == ConsumerGroupType.CONSUMER
    assert group.partition_assignor == "range"
    by_client = {m.client_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in group.members}
    assert by_client == {m.name: sorted(m.held) for m in members}
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(TIMEOUT_S).valid}
    assert listed["rg"].type == ConsumerGroupType.CONSUMER and listed["rg"].state == ConsumerGroupState.STABLE
    only_classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(TIMEOUT_S).valid
    assert "rg" not in {g.group_id for g in only_classic}


def test_a_killed_member_is_removed_after_the_session_timeout(cluster: Cluster, members: list[Member]) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    doomed = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, cluster.bootstrap, "kg", TOPIC],
                              stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert doomed.stdout is not None
        assert doomed.stdout.readline().strip() == "assigned"  # before the survivor: nothing in-process waits unpolled
        members.append(Member(cluster, "kg", "survivor", "uniform"))
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})

        def clients() -> list[str]:
            return sorted(m.client_id for m in admin.describe_consumer_groups(["kg"])["kg"].result(TIMEOUT_S).members)

        poll_until(members, lambda: clients() == ["doomed", "survivor"] and 0 < len(members[0].held) < PARTITIONS,
                   "both members hold partitions")
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(TIMEOUT_S)
        poll_until(members, lambda: clients() == ["survivor"], "the killed member removed")
        poll_until(members, lambda: members[0].held == set(range(PARTITIONS)), "the survivor holds every partition")
        removed = cluster.events("kg", event="consumer_member_removed")
        assert [e["reason"] for e in removed] == ["session_timeout"]  # not a leave: the process said nothing
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait(TIMEOUT_S)


def test_a_regex_subscription_is_resolved_by_the_coordinator(cluster: Cluster) -> None:
    """ConsumerGroupHeartbeat v1's SubscribedTopicRegex: librdkafka sends a `^` subscription to the
    coordinator, which matches it against the topics (those it does not match are not assigned)."""
    cluster.create_topic("tb", 1)
    cluster.create_topic("x", 1)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rx", "group.protocol": "consumer",
                         "log_level": 0})
    try:
        consumer.subscribe(["^t.*"])
        wanted = {(TOPIC, p) for p in range(PARTITIONS)} | {("tb", 0)}
        deadline = time.monotonic() + TIMEOUT_S
        while {(p.topic, p.partition) for p in consumer.assignment()} != wanted:
            assert time.monotonic() < deadline, f"assignment {consumer.assignment()}, wanted {sorted(wanted)}"
            consumer.poll(0.1)
    finally:
        consumer.close()


def test_the_group_survives_a_coordinator_restart(cluster: Cluster, members: list[Member]) -> None:
    """The group log keeps the consumer group (epochs, members, assignments): after a restart the
    members heartbeat their epochs and carry on. No member is fenced, none loses its partitions,
    and librdkafka does not fail fatally (GROUP_ID_NOT_FOUND would, for a forgotten group)."""
    members += [Member(cluster, "dg", f"d{i}", "uniform") for i in range(2)]
    poll_until(members, lambda: partition_all(members), "two members share the six partitions")
    held = {m.name: set(m.held) for m in members}
    cluster.restart_coordinator()
    loaded = cluster.events("dg", event="consumer_group_loaded")
    assert len(loaded) == 1 and len(loaded[0]["members"]) == 2
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})

    def stable_again() -> bool:
        group = admin.describe_consumer_groups(["dg"])["dg"].result(TIMEOUT_S)
        return group.state == ConsumerGroupState.STABLE and len(group.members) == 2

    poll_until(members, stable_again, "the group Stable again with both members after the restart")
    produce(cluster, RECORDS)
    poll_until(members, lambda: sum(len(m.records) for m in members) >= RECORDS, "every record consumed")
    assert {m.name: m.held for m in members} == held  # nothing moved
    assert not cluster.events("dg", event="consumer_member_removed")
    assert not cluster.events("dg", event="consumer_heartbeat_rejected")


def test_grouplab_describe_shows_a_consumer_protocol_group(cluster: Cluster, members: list[Member],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`grouplab describe` asks ConsumerGroupDescribe first (as Kafka 4's Admin client does): a
    consumer group shows its type, epochs, assignor and each member's epoch and assignment; a
    classic group beside it is still described by DescribeGroups."""
    import json

    from grouplab.cli import main

    members += [Member(cluster, "desc", f"x{i}", "uniform") for i in range(2)]
    poll_until(members, lambda: partition_all(members), "two members share the six partitions")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    poll_until(members, lambda: admin.describe_consumer_groups(["desc"])["desc"].result(TIMEOUT_S).state
               == ConsumerGroupState.STABLE, "the group Stable")
    bootstrap = f"127.0.0.1:{cluster.grouplab_port}"
    capsys.readouterr()
    assert main(["describe", "--group", "desc", "--format", "json", "--bootstrap-server", bootstrap]) == 0
    (group,) = json.loads(capsys.readouterr().out)
    assert (group["type"], group["state"], group["assignor"]) == ("consumer", "Stable", "uniform")
    assert group["group_epoch"] == group["assignment_epoch"] == 2
    by_client = {m["client_id"]: {p for _, p in m["assignment"]} for m in group["members"]}
    assert by_client == {m.name: m.held for m in members}
    assert all(m["member_epoch"] == 2 and m["member_state"] == "stable" for m in group["members"])
    assert main(["describe", "--group", "desc", "--bootstrap-server", bootstrap]) == 0
    text = capsys.readouterr().out
    assert "type consumer" in text and "group epoch 2" in text and "assignor uniform" in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_explain_tells_why_each_epoch_moved_and_why_a_partition_waits(members: list[Member], tmp_path: Path,
                                                                     lang: str) -> None:
    """`grouplab explain` of a real run: a second member joins, waits for the partitions the first
    still holds, the first revokes them first; every line says which epoch and why."""
    from grouplab.teach.catalog import Catalog
    from grouplab.teach.explain import narrate_run, text_lines

    with Cluster(config=BROKER, topics={TOPIC: 4}, run_dir=tmp_path / "run") as cluster:
        members.append(Member(cluster, "eg", "first", "uniform"))
        poll_until(members, lambda: members[0].held == {0, 1, 2, 3}, "the first member holds every partition")
        members.append(Member(cluster, "eg", "second", "uniform"))
        poll_until(members, lambda: members[0].held and members[1].held and
                   members[0].held | members[1].held == {0, 1, 2, 3}, "two members share the partitions")
        for m in members:
            m.close()
    story = narrate_run(tmp_path / "run", lang)
    text = "\n".join(line for _, line in text_lines(story, story.steps, Catalog(lang)))
    moved = ",".join(str(p) for p in sorted(members[1].assigned[-1]))
    if lang == "en":
        expected = ["ConsumerGroupHeartbeat at epoch 0: joins, subscribing to t", "the group epoch moves to 2: second joined",
                    f"second reaches epoch 2, owning none; it waits for t-{moved}, still held by first",
                    f"first must first give up t-{moved}: it stays at epoch 1",
                    "the group is Stable at epoch 2", "eg: Stable, group epoch 2", "first leaves the group"]
    else:
        expected = ["纪元 0 的 ConsumerGroupHeartbeat：加入，订阅 t", "组纪元变为 2：second 加入",
                    f"它在等 t-{moved}（仍由 first 持有）", f"first 必须先交出 t-{moved}：它停在纪元 1",
                    "组在纪元 2 达到 Stable", "eg：Stable，组纪元 2"]
    at = 0
    for sentence in expected:  # in this order
        found = text.find(sentence, at)
        assert found >= 0, f"{sentence!r} not after position {at} in:\n{text}"
        at = found
