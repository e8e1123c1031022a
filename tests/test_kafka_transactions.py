"""Consumer lag reaches 0 after transactions (issue 21), for kafka-python, aiokafka and
confluent-kafka (librdkafka) each: the library's own transactional producer commits, aborts and
commits again, so both partitions end in a transaction marker; then a read_committed and a
read_uncommitted consumer of that library, each in a group of its own, read everything
(read_committed only the committed records, in order), commit, and end with position ==
committed offset == log end offset on every partition, and `grouplab describe` on grouplab's own
port shows lag 0. Before, a Fetch left markers and aborted batches out: the clients stayed at the
first marker's offset and the lag stayed above 0 for ever.

The clients run in the test's thread (aiokafka on an event loop of its own) against
grouplab.testing's Cluster, whose coordinator runs on its own thread; every wait is on a
condition with a deadline, never on a sleep."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from grouplab.testing import Cluster

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent
TOPIC = "t"
DEADLINE_S = 60.0

# The transactions each library's producer runs, in order: (commit?, {partition: values}).
TRANSACTIONS = [
    (True, {0: [b"t1-a", b"t1-b"], 1: [b"t1-c"]}),
    (False, {0: [b"t2-a"], 1: [b"t2-b", b"t2-c"]}),
    (True, {0: [b"t3-a"]}),
]
# Each transaction's records, then its marker: partition 0 ends in a commit marker, 1 in an abort marker.
LOG_END = {0: 2 + 1 + 1 + 1 + 1 + 1, 1: 1 + 1 + 2 + 1}
COMMITTED = {p: [v for ok, parts in TRANSACTIONS if ok for v in parts.get(p, [])] for p in (0, 1)}
EVERYTHING = {p: [v for _ok, parts in TRANSACTIONS for v in parts.get(p, [])] for p in (0, 1)}


def until(done: Callable[[], bool], what: str, step: Callable[[], Any], seen: Callable[[], Any]) -> None:
    """Run `step` (a client's poll, which waits up to 1 s itself) until `done`; fail after
    DEADLINE_S saying what `seen` then returns."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {DEADLINE_S}s waiting for {what}; saw {seen()}")
        step()


# ----------------------------------------------------------------------------- the producers


def produce_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx-kafka-python")
    try:
        producer.init_transactions()
        for commit, parts in TRANSACTIONS:
            producer.begin_transaction()
            for p, values in parts.items():
                for v in values:
                    producer.send(TOPIC, v, partition=p)
            producer.flush()  # in the log before the marker, also when aborting
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()


def produce_aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx-aiokafka")
        await producer.start()
        try:
            for commit, parts in TRANSACTIONS:
                await producer.begin_transaction()
                for p, values in parts.items():
                    for v in values:
                        await producer.send_and_wait(TOPIC, v, partition=p)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())


def produce_confluent(bootstrap: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-confluent", "log_level": 0})
    producer.init_transactions(30)
    for commit, parts in TRANSACTIONS:
        producer.begin_transaction()
        for p, values in parts.items():
            for v in values:
                producer.produce(TOPIC, value=v, partition=p)
        assert producer.flush(30) == 0  # in the log before the marker, also when aborting
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


# ----------------------------------------------------------------------------- the consumers
#
# Each returns what it read per partition, its positions and the offsets it committed (as the
# library reports them), after reading everything its isolation level shows and committing.


def consume_kafka_python(bootstrap: str, group: str, isolation: str, want: dict[int, list[bytes]]) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group, isolation_level=isolation,
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10_000,
                             heartbeat_interval_ms=1_000)
    tps = [TopicPartition(TOPIC, p) for p in (0, 1)]
    got: dict[int, list[bytes]] = {0: [], 1: []}

    def poll() -> None:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            got[tp.partition] += [r.value for r in records]

    def read_to_end() -> bool:
        return (set(consumer.assignment()) == set(tps) and got == want
                and all(consumer.position(tp) == LOG_END[tp.partition] for tp in tps))

    try:
        until(read_to_end, f"kafka-python {isolation} to read {want} and reach {LOG_END}", poll,
              lambda: (got, {tp.partition: consumer.position(tp) for tp in consumer.assignment()}))
        consumer.commit()  # the positions
        return {"records": got, "positions": {tp.partition: consumer.position(tp) for tp in tps},
                "committed": {tp.partition: consumer.committed(tp) for tp in tps}}
    finally:
        consumer.close()


def consume_aiokafka(bootstrap: str, group: str, isolation: str, want: dict[int, list[bytes]]) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> dict[str, Any]:
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group, isolation_level=isolation,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
        await consumer.start()
        tps = [TopicPartition(TOPIC, p) for p in (0, 1)]
        got: dict[int, list[bytes]] = {0: [], 1: []}
        try:
            deadline = time.monotonic() + DEADLINE_S
            while True:
                if set(consumer.assignment()) == set(tps) and got == want:
                    positions = {tp.partition: await consumer.position(tp) for tp in tps}
                    if positions == LOG_END:
                        break
                if time.monotonic() > deadline:
                    seen = {tp.partition: await consumer.position(tp) for tp in consumer.assignment()}
                    raise AssertionError(f"timed out after {DEADLINE_S}s waiting for aiokafka {isolation} to "
                                         f"read {want} and reach {LOG_END}; saw {(got, seen)}")
                for tp, records in (await consumer.getmany(timeout_ms=1000)).items():
                    got[tp.partition] += [r.value for r in records]
            await consumer.commit()  # the positions
            return {"records": got, "positions": positions,
                    "committed": {tp.partition: await consumer.committed(tp) for tp in tps}}
        finally:
            await consumer.stop()

    return asyncio.run(run())


def consume_confluent(bootstrap: str, group: str, isolation: str, want: dict[int, list[bytes]]) -> dict[str, Any]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KTP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10_000, "log_level": 0})
    consumer.subscribe([TOPIC])
    tps = [KTP(TOPIC, p) for p in (0, 1)]
    got: dict[int, list[bytes]] = {0: [], 1: []}

    def poll() -> None:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            got[m.partition()].append(m.value())

    def positions() -> dict[int, int]:
        return {tp.partition: tp.offset for tp in consumer.position(tps)}

    def read_to_end() -> bool:
        return len(consumer.assignment()) == 2 and got == want and positions() == LOG_END

    try:
        until(read_to_end, f"confluent-kafka {isolation} to read {want} and reach {LOG_END}", poll,
              lambda: (got, positions()))
        consumer.commit(asynchronous=False)  # the stored offsets: past the last message, markers included
        return {"records": got, "positions": positions(),
                "committed": {tp.partition: tp.offset for tp in consumer.committed(tps, 30)}}
    finally:
        consumer.close()


LIBRARIES = {
    "kafka-python": (produce_kafka_python, consume_kafka_python),
    "aiokafka": (produce_aiokafka, consume_aiokafka),
    "confluent-kafka": (produce_confluent, consume_confluent),
}


# ----------------------------------------------------------------------------- the tests


def describe_lags(cluster: Cluster, group: str) -> dict[int, int]:
    """`grouplab describe --group G` on grouplab's own port, as a user runs it: lag per partition."""
    out = subprocess.run(
        [sys.executable, "-m", "grouplab.cli", "describe", "--group", group,
         "--bootstrap-server", f"127.0.0.1:{cluster.grouplab_port}", "--format", "json"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    (described,) = json.loads(out.stdout)
    return {row["partition"]: row["lag"] for row in described["offsets"] if row["topic"] == TOPIC}


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_after_transactions_each_consumer_reads_to_the_log_end_and_its_lag_is_zero(library: str) -> None:
    produce, consume = LIBRARIES[library]
    with Cluster(topics={TOPIC: 2}) as cluster:
        produce(cluster.bootstrap)
        ends = cluster.log_end_offsets(TOPIC)
        assert {tp.partition: end for tp, end in ends.items()} == LOG_END  # records and one marker per transaction
        for isolation, want in (("read_committed", COMMITTED), ("read_uncommitted", EVERYTHING)):
            group = f"{library}-{isolation}"
            seen = consume(cluster.bootstrap, group, isolation, want)
            assert seen["records"] == want  # read_committed: only the committed records, in order
            assert seen["positions"] == LOG_END == seen["committed"]
            assert {tp.partition: offset for tp, offset in cluster.committed(group).items()} == LOG_END
            assert describe_lags(cluster, group) == {0: 0, 1: 0}


@pytest.mark.parametrize("mode", ["at-least-once", "at-most-once", "exactly-once"])
async def test_grouplabs_own_consumer_also_commits_past_the_markers(mode: str) -> None:
    """grouplab's own consumer (a delivery app on the msgpack port) reading the same topic: it
    commits where the Fetch answer says to fetch next (next_offset), past the markers and the
    aborted records, so its lag reaches 0 too (it committed the last record's offset + 1, one
    short of the end, before)."""
    from grouplab.consumer.app import SimulatedConsumerApp
    from grouplab.consumer.config import ConsumerConfig
    from grouplab.consumer.delivery import DeliveryConfig, DeliveryMode
    from grouplab.testing import AsyncCluster

    async with AsyncCluster(topics={TOPIC: 2, "out": 2}) as cluster:
        await asyncio.to_thread(produce_kafka_python, cluster.bootstrap)
        group = f"grouplab-{mode}"
        config = ConsumerConfig(group_id=group, topics=[TOPIC], client_id=group, session_timeout_ms=10_000,
                                heartbeat_interval_ms=1_000)
        app = SimulatedConsumerApp(config, cluster.host, cluster.grouplab_port,
                                   delivery=DeliveryConfig(DeliveryMode(mode), "out"))
        await app.start()
        try:
            async def lag_zero() -> bool:
                return await cluster.lag(group, TOPIC) == {tp: 0 for tp in await cluster.log_end_offsets(TOPIC)}

            await cluster.wait_for(lag_zero, timeout=DEADLINE_S, what=f"{group}'s lag on {TOPIC} to reach 0")
        finally:
            await app.stop(leave=True)
        want = COMMITTED if mode == "exactly-once" else EVERYTHING  # exactly-once reads read_committed
        assert {tp.partition: n for tp, n in app.stats.processed.items()} == {p: len(v) for p, v in want.items()}
        assert {tp.partition: offset for tp, offset in (await cluster.committed(group)).items()} == LOG_END
