"""One real Kafka consumer in its own process, for tests/test_kafka_clients.py and
scripts/bench_kafka_wire.py: kafka-python, aiokafka or confluent-kafka (librdkafka), in a group
on grouplab's Kafka-wire listener.

    python tests/kafka_client_worker.py '{"client": "ck", "bootstrap": "127.0.0.1:9092", ...}'

It prints JSON lines on stdout: {"assigned": [[topic, partition], ...]} whenever its assignment
changes, {"records": [[topic, partition, offset, value], ...]} for what each poll returned (then
committed synchronously), {"revoked": [...]} when librdkafka's rebalance callback takes partitions
away, {"closed": true} when it left, {"error": "..."} when kafka-python's poll() raised a retriable
error (it then polls again). A line "stop" on stdin makes it close
cleanly (LeaveGroup, except a static member); SIGKILL is a crash without leaving. "options" are passed to the client's constructor as they are
(its own config names).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

STOP = threading.Event()


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def watch_stdin() -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    STOP.set()  # "stop", or the test went away


class Tracker:
    def __init__(self) -> None:
        self.assigned: list[list[Any]] | None = None

    def update(self, partitions: Any) -> None:
        now = sorted([tp[0], tp[1]] for tp in partitions)
        if now != self.assigned:
            self.assigned = now
            emit(assigned=now)


def run_kafka_python(o: dict[str, Any]) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.errors import RetriableError

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}
    c = KafkaConsumer(o["topic"], bootstrap_servers=o["bootstrap"], group_id=o["group"], client_id=o["client_id"],
                      group_instance_id=o.get("instance_id"), auto_offset_reset="earliest", enable_auto_commit=False,
                      partition_assignment_strategy=[assignors[o["assignor"]]],
                      session_timeout_ms=o["session_ms"], heartbeat_interval_ms=o["heartbeat_ms"],
                      metadata_max_age_ms=5000, **o.get("options", {}))
    t = Tracker()
    while not STOP.is_set():
        # Not shorter: kafka-python 3.0.12 can lose its join when poll() times out while its
        # SyncGroup is in flight ("timeout in ensure_active_group; returning early"): the answer
        # arrives, heartbeats stay disabled and the member is removed at its session timeout.
        try:
            batch = c.poll(1000)
        except RetriableError as exc:
            # kafka-python 3.0.12's poll() raises when it can reach no broker to find its
            # coordinator: the lookup fails and so does the metadata refresh it then awaits
            # (ensure_coordinator_ready_async catches only a timeout there). The error is
            # retriable; an application polls again, as Kafka's Java client retries by itself.
            emit(error=repr(exc))
            continue
        t.update([(tp.topic, tp.partition) for tp in c.assignment()])
        recs = [[r.topic, r.partition, r.offset, r.value.decode()] for rs in batch.values() for r in rs]
        if recs:
            c.commit()
            emit(records=recs)
    c.close()


def run_aiokafka(o: dict[str, Any]) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor}

    async def main() -> None:
        c = AIOKafkaConsumer(o["topic"], bootstrap_servers=o["bootstrap"], group_id=o["group"],
                             client_id=o["client_id"], group_instance_id=o.get("instance_id"),
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             partition_assignment_strategy=[assignors[o["assignor"]]],
                             session_timeout_ms=o["session_ms"], heartbeat_interval_ms=o["heartbeat_ms"],
                             metadata_max_age_ms=5000, **o.get("options", {}))
        await c.start()
        t = Tracker()
        while not STOP.is_set():
            batch = await c.getmany(timeout_ms=200)
            t.update([(tp.topic, tp.partition) for tp in c.assignment()])
            recs = [[r.topic, r.partition, r.offset, r.value.decode()] for rs in batch.values() for r in rs]
            if recs:
                await c.commit()
                emit(records=recs)
        await c.stop()

    asyncio.run(main())


def run_confluent(o: dict[str, Any]) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    conf = {"bootstrap.servers": o["bootstrap"], "group.id": o["group"], "client.id": o["client_id"],
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "partition.assignment.strategy": o["assignor"], "session.timeout.ms": o["session_ms"],
            "heartbeat.interval.ms": o["heartbeat_ms"], "topic.metadata.refresh.interval.ms": 5000}
    if o.get("instance_id"):
        conf["group.instance.id"] = o["instance_id"]
    conf.update(o.get("options", {}))
    c = Consumer(conf)

    def on_revoke(consumer: Any, partitions: Any) -> None:
        emit(revoked=sorted([tp.topic, tp.partition] for tp in partitions))

    c.subscribe([o["topic"]], on_revoke=on_revoke)
    t = Tracker()
    owed = False  # a commit failed: the positions consumed since are committed on the next turn
    while not STOP.is_set():
        msgs = c.consume(100, 0.2)
        t.update([(tp.topic, tp.partition) for tp in c.assignment()])
        recs = [[m.topic(), m.partition(), m.offset(), m.value().decode()] for m in msgs if m.error() is None]
        if recs or owed:
            # librdkafka's synchronous commit does not retry (Java's commitSync does, until its
            # timeout): e.g. while its coordinator moves it fails, and with no more records to
            # consume nothing would commit them again. An application retries; so does this one.
            try:
                c.commit(asynchronous=False)
                owed = False
            except KafkaException as exc:  # the records stay consumed (at least once)
                owed = exc.args[0].code() != KafkaError._NO_OFFSET  # (nothing of ours left to commit)
                emit(error=repr(exc))
        if recs:
            emit(records=recs)
    c.close()


def main() -> None:
    o = json.loads(sys.argv[1])
    if o.get("debug"):
        import logging
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    o.setdefault("client_id", o["client"])
    o.setdefault("session_ms", 6000)
    o.setdefault("heartbeat_ms", 300)
    threading.Thread(target=watch_stdin, daemon=True).start()
    {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent-kafka": run_confluent}[o["client"]](o)
    emit(closed=True)


if __name__ == "__main__":
    main()
