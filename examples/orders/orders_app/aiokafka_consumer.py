"""The orders consumer on aiokafka: an `AIOKafkaConsumer` and a task that calls `getmany()`,
processes and commits, in the application's event loop.

aiokafka heartbeats from a task of its own in the same loop, so a batch whose processing blocks
the loop (a synchronous call) stops the heartbeats too and the member is removed at its session
timeout; processing that awaits (a slow downstream call) lets them go on, and the member is made
to leave the group once `max.poll.interval.ms` passes without a `getmany()` (aiokafka's heartbeat
task sends the LeaveGroup). The next `getmany()` joins again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError

from orders_app.misbehaviour import Crash, Misbehaviour
from orders_app.processing import OrderProcessor
from orders_app.records import Partition, RecordRef
from orders_app.settings import ConsumerSettings
from orders_app.store import TotalsStore

log = logging.getLogger("orders_app.aiokafka")

POLL_TIMEOUT_MS = 500  # how long one getmany() waits for records


class AIOKafkaOrdersConsumer:
    """`await start()` subscribes and starts the consuming task; `await stop()` commits what was
    processed and stops (a LeaveGroup, unless the member is static). `misbehaviour` makes it crash
    or stall."""

    def __init__(self, bootstrap: str, settings: ConsumerSettings, store: TotalsStore, topic: str = "orders") -> None:
        self.bootstrap = bootstrap
        self.settings = settings
        self.topic = topic
        self.client_id = settings.client_id
        self.misbehaviour = Misbehaviour()
        self.processor = OrderProcessor(store, settings.client_id, self.misbehaviour)
        self.assigned: list[Partition] = []  # as the last rebalance left it
        self.commit_failures: list[str] = []  # why commits were refused, for logs and tests
        self.consumer: AIOKafkaConsumer | None = None
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> "AIOKafkaOrdersConsumer":
        s = self.settings
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=s.group_id, client_id=s.client_id,
            group_instance_id=s.group_instance_id, enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=s.session_timeout_ms, heartbeat_interval_ms=s.heartbeat_interval_ms,
            max_poll_interval_ms=s.max_poll_interval_ms, request_timeout_ms=s.request_timeout_ms, **s.extra)
        self.consumer.subscribe([self.topic], listener=_Listener(self))
        await self.consumer.start()
        self._task = asyncio.create_task(self._run(), name=f"orders-{s.client_id}")
        return self

    @property
    def crashed(self) -> bool:
        return self.misbehaviour.crashed.is_set()

    async def stop(self) -> None:
        """Stop consuming, commit what was processed and stop the client. After a crash there is
        nothing to commit or leave (the process is gone): the client is only stopped, to free its
        connections and tasks."""
        self._stopping = True
        self.misbehaviour.release()
        if self._task is not None:
            await self._task
        if self.consumer is None:
            return
        if not self.crashed:
            await self._commit()
        try:
            await self.consumer.stop()
        except (KafkaError, asyncio.CancelledError) as exc:
            # aiokafka 0.14's fetcher cancels its pending fetch tasks and then awaits them, so a
            # stop while a fetch is failing or backing off (after a crash: its connections were
            # cut) raises that fetch's error or CancelledError. Neither means this task was
            # cancelled; if it was, the cancellation goes on.
            task = asyncio.current_task()
            if isinstance(exc, asyncio.CancelledError) and task is not None and task.cancelling():
                raise
            log.info("%s: stopped; a fetch in flight ended with %r", self.client_id, exc)

    # ------------------------------------------------------------------ the consuming task

    async def _run(self) -> None:
        assert self.consumer is not None
        while not self._stopping:
            try:
                batch = await self.consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)
                records = [(RecordRef(tp.topic, tp.partition, r.offset), r.value)
                           for tp, recs in batch.items() for r in recs]
                if records and self.misbehaviour.take_stall():
                    # A downstream call that hangs: awaited, so heartbeats go on meanwhile.
                    await asyncio.to_thread(self.misbehaviour.wait_released)
                self.processor.process(records)
                await self._commit()
            except Crash:
                log.error("%s: crashed in the middle of a batch", self.client_id)
                return  # no commit, no stop: the process is gone
            except KafkaError as exc:  # a fetch that met a rebalance or a dropped connection: go on
                log.warning("%s: getmany failed: %r", self.client_id, exc)

    async def _commit(self) -> None:
        """Commit what was processed since the last commit; a refused commit is retried after the
        next batch (and forgotten if the partition is revoked meanwhile)."""
        assert self.consumer is not None
        offsets = self.processor.to_commit(self.assigned)
        if not offsets:
            return
        try:
            await self.consumer.commit({TopicPartition(*tp): n for tp, n in offsets.items()})
        except KafkaError as exc:
            self.commit_failures.append(repr(exc))
            log.warning("%s: commit of %s refused: %r", self.client_id, offsets, exc)
        else:
            self.processor.committed(offsets)


class _Listener(ConsumerRebalanceListener):
    """aiokafka awaits these in its coordination task, in the same loop as the consuming task
    (the processor's state changes only between awaits, so the two never see it half-updated).
    aiokafka has no `on_partitions_lost`: after the member was removed, the revocation's commit is
    refused and the partitions are forgotten all the same."""

    def __init__(self, app: AIOKafkaOrdersConsumer) -> None:
        self.app = app

    async def on_partitions_revoked(self, revoked: Any) -> None:
        app = self.app
        await app._commit()
        gone = {Partition(tp.topic, tp.partition) for tp in revoked}
        app.processor.forget(gone)
        app.assigned = [tp for tp in app.assigned if tp not in gone]
        log.info("%s: revoked %s", app.client_id, sorted(gone))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.app.assigned = sorted(Partition(tp.topic, tp.partition) for tp in assigned)
        log.info("%s: assigned %s", self.app.client_id, self.app.assigned)
