"""The orders consumer on kafka-python: a `KafkaConsumer` polled in a thread of its own, as an
application's worker would, committing after each batch it processed.

kafka-python (3.x) does its network I/O, its heartbeats and the rebalance listener's callbacks on
a background I/O thread; the poll thread only calls `poll()` and processes. A member whose poll
thread stops calling `poll()` for `max.poll.interval.ms` is made to leave the group by that
background thread (a LeaveGroup); the next `poll()` joins again.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from orders_app.misbehaviour import Crash, Misbehaviour
from orders_app.processing import OrderProcessor
from orders_app.records import Partition, RecordRef
from orders_app.settings import ConsumerSettings
from orders_app.store import TotalsStore

log = logging.getLogger("orders_app.kafka_python")

# How long one poll() waits for records. Not shorter: when kafka-python 3.0.12's poll() returns
# while its JoinGroup/SyncGroup is in flight and the answer arrives before the next poll(), that
# answer is dropped and the member joins again (a leader's second JoinGroup starts another
# rebalance); the longer each poll, the rarer.
POLL_TIMEOUT_MS = 1000


class KafkaPythonOrdersConsumer:
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
        self.consumer: KafkaConsumer | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "KafkaPythonOrdersConsumer":
        s = self.settings
        self.consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=s.group_id, client_id=s.client_id,
            group_instance_id=s.group_instance_id, enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=s.session_timeout_ms, heartbeat_interval_ms=s.heartbeat_interval_ms,
            max_poll_interval_ms=s.max_poll_interval_ms, request_timeout_ms=s.request_timeout_ms, **s.extra)
        self.consumer.subscribe([self.topic], listener=_Listener(self))
        self._thread = threading.Thread(target=self._run, name=f"orders-{s.client_id}", daemon=True)
        self._thread.start()
        return self

    @property
    def crashed(self) -> bool:
        return self.misbehaviour.crashed.is_set()

    def stop(self) -> None:
        """Stop polling, commit what was processed and close. After a crash there is nothing to
        commit or leave (the process is gone): the client is only closed, to free its sockets."""
        self._stop.set()
        self.misbehaviour.release()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.consumer is not None:
            if not self.crashed:
                self._commit()
            self.consumer.close(autocommit=False)

    # ------------------------------------------------------------------ the poll thread

    def _run(self) -> None:
        assert self.consumer is not None
        while not self._stop.is_set():
            try:
                batch = self.consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
                records = [(RecordRef(tp.topic, tp.partition, r.offset), r.value)
                           for tp, recs in batch.items() for r in recs]
                if records and self.misbehaviour.take_stall():
                    self.misbehaviour.wait_released()  # a downstream call that hangs
                self.processor.process(records)
                self._commit()
            except Crash:
                log.error("%s: crashed in the middle of a batch", self.client_id)
                return  # no commit, no close: the process is gone
            except KafkaError as exc:  # a poll that met a rebalance or a dropped connection: poll again
                log.warning("%s: poll failed: %r", self.client_id, exc)

    def _commit(self) -> None:
        """Commit what was processed since the last commit; a refused commit is retried after the
        next batch (and forgotten if the partition is revoked meanwhile)."""
        assert self.consumer is not None
        offsets = self.processor.to_commit(self.assigned)
        if not offsets:
            return
        try:
            self.consumer.commit({TopicPartition(*tp): OffsetAndMetadata(n, "", -1) for tp, n in offsets.items()})
        except KafkaError as exc:
            self.commit_failures.append(repr(exc))
            log.warning("%s: commit of %s refused: %r", self.client_id, offsets, exc)
        else:
            self.processor.committed(offsets)


class _Listener(ConsumerRebalanceListener):
    """kafka-python calls these on its I/O thread, inside the poll thread's `poll()` (so never
    while a batch is being processed). A blocking commit is not allowed there (it would wait on
    the very thread that runs it), so the revocation commits asynchronously: the OffsetCommit
    goes out on the coordinator's connection before the JoinGroup that follows, and the
    coordinator handles a connection's requests in order."""

    def __init__(self, app: KafkaPythonOrdersConsumer) -> None:
        self.app = app

    def on_partitions_revoked(self, revoked: Any) -> None:
        app = self.app
        offsets = app.processor.to_commit(app.assigned)
        if offsets and app.consumer is not None:
            app.consumer.commit_async({TopicPartition(*tp): OffsetAndMetadata(n, "", -1) for tp, n in offsets.items()},
                                      callback=self._committed)
        gone = {Partition(tp.topic, tp.partition) for tp in revoked}
        app.processor.forget(gone)
        app.assigned = [tp for tp in app.assigned if tp not in gone]
        log.info("%s: revoked %s", app.client_id, sorted((tp.topic, tp.partition) for tp in revoked))

    def on_partitions_lost(self, lost: Any) -> None:
        """Removed from the group (its session or poll interval ran out): another member may
        already own these partitions, so nothing is committed for them."""
        gone = {Partition(tp.topic, tp.partition) for tp in lost}
        self.app.processor.forget(gone)
        self.app.assigned = [tp for tp in self.app.assigned if tp not in gone]
        log.warning("%s: lost %s", self.app.client_id, sorted((tp.topic, tp.partition) for tp in lost))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.app.assigned = sorted(Partition(tp.topic, tp.partition) for tp in assigned)
        log.info("%s: assigned %s", self.app.client_id, self.app.assigned)

    def _committed(self, offsets: Any, response: Any) -> None:
        if isinstance(response, Exception):
            self.app.commit_failures.append(repr(response))
            log.warning("%s: commit on revocation refused: %r", self.app.client_id, response)
