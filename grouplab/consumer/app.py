"""A simulated consumer application: polls, "processes" its partitions, and reacts to rebalances.

Two kinds of work:
- without a delivery mode, each poll "processes" a fixed number of synthetic records per owned
  partition, so a run shows who worked on what and how much a rebalance interrupted;
- with a delivery mode (consumer/delivery.py), it really reads the input topic's records, writes
  each one to the output topic and commits its offsets at-most-once, at-least-once or
  exactly-once; `stats.processed` then counts real records.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from grouplab.consumer.client import GroupMemberClient
from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.delivery import Committed, CrashNow, DeliveryApp, DeliveryConfig, Processed
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent, wall_clock_ms
from grouplab.protocol.types import TopicPartition


@dataclass
class AppStats:
    processed: Counter = field(default_factory=Counter)  # TopicPartition -> records
    revoked: int = 0
    assigned: int = 0
    lost: int = 0
    committed: dict = field(default_factory=dict)  # TopicPartition -> next offset (delivery modes)


class SimulatedConsumerApp:
    """One consumer process's application loop. `records_per_poll` per owned partition per poll."""

    def __init__(
        self,
        config: ConsumerConfig,
        host: str,
        port: int,
        events: Any = None,
        poll_interval_ms: int = 100,
        records_per_poll: int = 10,
        clock: Callable[[], int] = wall_clock_ms,
        delivery: DeliveryConfig | None = None,
        on_step: Callable[[], None] | None = None,
        nodes: dict[int, tuple[str, int]] | None = None,
    ) -> None:
        self.stats = AppStats()
        self.events = events
        self.clock = clock
        self.poll_interval_ms = poll_interval_ms
        self.records_per_poll = records_per_poll
        self.delivery = delivery
        machine = DeliveryApp(config, delivery, log_events=events is not None) if delivery is not None else None
        self.client = GroupMemberClient(config, host, port, listener=self, events=events, clock=clock, machine=machine,
                                        on_step=on_step, nodes=nodes)  # (nodes: a cluster's, consumer/client.py)
        self.crashed = False
        self._crashing: asyncio.Task | None = None  # the stop a CrashNow began
        self._task: asyncio.Task | None = None

    # RebalanceListener ---------------------------------------------------------------

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.stats.revoked += len(partitions)

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.stats.assigned += len(partitions)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.stats.lost += len(partitions)

    def on_output(self, out: Any) -> None:
        """The delivery app's reports: what it processed and committed; a crash it asked for."""
        if type(out) is Processed:
            self.stats.processed[out.tp] += out.records
        elif type(out) is Committed:
            self.stats.committed[out.tp] = out.offset
        elif type(out) is CrashNow:
            self.crashed = True
            # A task, not a call here: the machine is mid-step. It runs at the loop's next turn.
            self._crashing = asyncio.get_event_loop().create_task(self._crash(out.point))

    # lifecycle -----------------------------------------------------------------------

    async def start(self) -> "SimulatedConsumerApp":
        await self.client.start()
        self._task = asyncio.ensure_future(self._run())
        return self

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval_ms / 1000)
            self.client.poll()
            if self.delivery is None:
                for tp in self.client.assignment:
                    self.stats.processed[tp] += self.records_per_poll

    async def crash_at(self, point: str, timeout_s: float,
                       armed: Callable[[], Awaitable[None]] | None = None) -> bool:
        """Crash at a delivery app's `point` ("processed": after processing a batch, before its
        commit; "committed": after a commit, before processing what it covers), where a crash
        shows what the delivery mode costs. `armed` runs once the point is set (the caller may
        now give it input to reach it). True if it crashed there within `timeout_s`; else it is
        crashed now, wherever it is."""
        machine = self.client.machine
        if not isinstance(machine, DeliveryApp):
            raise TypeError("crash_at needs a consumer running a delivery app")
        machine.crash_at = point
        if armed is not None:
            await armed()
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not self.crashed and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        if not self.crashed:
            machine.crash_at = None
            await self.stop(leave=False)
            return False
        if self._crashing is not None:
            # Back only once the crash is done and logged (AppCrashed): what runs next, e.g. the
            # countdown to the session timeout, must see the member stopped.
            await self._crashing
        return True

    async def _crash(self, point: str) -> None:
        """The crash a CrashNow asked for. Exactly-once, "processed" is the zombie transaction:
        the batch's output records and offsets are in the transaction, its EndTxn never sent. The
        machine stops short of EndTxn in the step that processed the batch, but the records and
        offsets are still on their way (AddPartitionsToTxn, then Produce; AddOffsetsToTxn, then
        TxnOffsetCommit), so the crash waits until the producer has nothing in flight (at most a
        request timeout). Crashing at once left it to the loop's timing how far they got: the
        README demo sometimes showed the aborted transaction and sometimes had nothing to abort."""
        machine = self.client.machine
        if point == "processed" and isinstance(machine, DeliveryApp) and machine.producer.transactional:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + machine.producer.config.request_timeout_ms / 1000
            while not machine.producer.idle() and loop.time() < deadline:
                await asyncio.sleep(0.005)
        await self.stop(leave=False)

    async def stop(self, leave: bool = True) -> None:
        """`leave=True`: a clean shutdown with LeaveGroup; `leave=False`: a crash."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self.events is not None:
            # A crash is written too (as this process's last line), so that readers know from when
            # its partitions were assigned but not consumed (docs/events.md §6).
            kind = events.AppStopping if leave else events.AppCrashed
            self.events.emit(LogEvent(self.clock(), kind(self.client.config.group_id, self.client.member_id)))
        await self.client.close(leave=leave)
