"""The orders consumer on confluent-kafka: librdkafka's `Consumer` polled in a thread of its own,
as an application's worker would, committing after each batch it processed.

librdkafka does its network I/O and heartbeats on background threads of its own; the rebalance
callbacks run inside `consume()`, on the poll thread. A consumer whose poll thread stops calling
`consume()` for `max.poll.interval.ms` is made to leave the group by librdkafka (a LeaveGroup); the
next `consume()` returns a `_MAX_POLL_EXCEEDED` error and joins again.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from orders_app.misbehaviour import Crash, Misbehaviour
from orders_app.processing import OrderProcessor
from orders_app.records import Partition, RecordRef
from orders_app.settings import ConsumerSettings
from orders_app.store import TotalsStore

log = logging.getLogger("orders_app.confluent")

POLL_TIMEOUT_S = 0.5  # how long one consume() waits for records
BATCH_SIZE = 100  # records one consume() returns at most


class ConfluentOrdersConsumer:
    """`start()` subscribes and starts the poll thread; `stop()` commits what was processed and
    closes (a LeaveGroup, unless the member is static). `misbehaviour` makes it crash or stall."""

    def __init__(self, bootstrap: str, settings: ConsumerSettings, store: TotalsStore, topic: str = "orders") -> None:
        self.bootstrap = bootstrap
        self.settings = settings
        self.topic = topic
        self.client_id = settings.client_id
        self.misbehaviour = Misbehaviour()
        self.processor = OrderProcessor(store, settings.client_id, self.misbehaviour)
        self.assigned: list[Partition] = []  # as the last rebalance left it
        self.commit_failures: list[str] = []  # why commits were refused, for logs and tests
        self.errors: list[str] = []  # errors consume() returned (e.g. _MAX_POLL_EXCEEDED)
        self.consumer: Consumer | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "ConfluentOrdersConsumer":
        s = self.settings
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap, "group.id": s.group_id, "client.id": s.client_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": s.session_timeout_ms, "heartbeat.interval.ms": s.heartbeat_interval_ms,
            "max.poll.interval.ms": s.max_poll_interval_ms, "socket.timeout.ms": s.request_timeout_ms,
            **s.extra,
        }
        if s.group_instance_id is not None:
            config["group.instance.id"] = s.group_instance_id
        self.consumer = Consumer(config)
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)
        self._thread = threading.Thread(target=self._run, name=f"orders-{s.client_id}", daemon=True)
        self._thread.start()
        return self

    @property
    def crashed(self) -> bool:
        return self.misbehaviour.crashed.is_set()

    def stop(self) -> None:
        """Stop polling, commit what was processed and close. After a crash there is nothing to
        commit or leave (the process is gone): the client is only closed, to free its threads."""
        self._stop.set()
        self.misbehaviour.release()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.consumer is not None:
            if not self.crashed:
                self._commit()
            self.consumer.close()

    # ------------------------------------------------------------------ the poll thread

    def _run(self) -> None:
        assert self.consumer is not None
        while not self._stop.is_set():
            messages = self.consumer.consume(num_messages=BATCH_SIZE, timeout=POLL_TIMEOUT_S)
            records = []
            for m in messages:
                error = m.error()
                if error is not None:  # e.g. _MAX_POLL_EXCEEDED: librdkafka joins again by itself
                    self.errors.append(error.name())
                    log.warning("%s: consume: %s", self.client_id, error)
                    continue
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                assert topic is not None and partition is not None and offset is not None  # a record has them
                records.append((RecordRef(topic, partition, offset), m.value() or b""))
            if records and self.misbehaviour.take_stall():
                self.misbehaviour.wait_released()  # a downstream call that hangs
            try:
                self.processor.process(records)
            except Crash:
                log.error("%s: crashed in the middle of a batch", self.client_id)
                return  # no commit, no close: the process is gone
            self._commit()

    def _commit(self) -> None:
        """Commit what was processed since the last commit; a refused commit is retried after the
        next batch (and forgotten if the partition is revoked meanwhile)."""
        assert self.consumer is not None
        offsets = self.processor.to_commit(self.assigned)
        if not offsets:
            return
        try:
            answered = self.consumer.commit(offsets=[TopicPartition(t, p, n) for (t, p), n in offsets.items()],
                                            asynchronous=False)
        except KafkaException as exc:
            self.commit_failures.append(exc.args[0].name() if exc.args else repr(exc))
            log.warning("%s: commit of %s refused: %s", self.client_id, offsets, exc)
            return
        failed = {Partition(tp.topic, tp.partition) for tp in answered or [] if tp.error is not None}
        for tp in answered or []:
            if tp.error is not None:
                self.commit_failures.append(tp.error.name())
        self.processor.committed({tp: n for tp, n in offsets.items() if tp not in failed})

    # ------------------------------------------------------------------ rebalance callbacks (inside consume())

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._commit()
        gone = {Partition(tp.topic, tp.partition) for tp in partitions}
        self.processor.forget(gone)
        self.assigned = [tp for tp in self.assigned if tp not in gone]
        log.info("%s: revoked %s", self.client_id, sorted(gone))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Removed from the group (its session or poll interval ran out): another member may
        already own these partitions, so nothing is committed for them."""
        gone = {Partition(tp.topic, tp.partition) for tp in partitions}
        self.processor.forget(gone)
        self.assigned = [tp for tp in self.assigned if tp not in gone]
        log.warning("%s: lost %s", self.client_id, sorted(gone))

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned = sorted(Partition(tp.topic, tp.partition) for tp in partitions)
        log.info("%s: assigned %s", self.client_id, self.assigned)

