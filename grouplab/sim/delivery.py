"""Delivery semantics in the simulator: the input a scenario's members consume, the faults that
hit exactly between processing and committing, lost produce acknowledgements, and the final
account of every input record (produced, processed, committed, lost, duplicated).

The guarantee checked at the end depends on the mode:
- at-most-once: no input record appears twice in the output (losses are allowed and counted);
- at-least-once: every input record appears in the output (duplicates allowed and counted);
- exactly-once: every input record appears exactly once in the read_committed output.
Committed offsets must never go backwards, in every mode, at every step, and no acknowledged commit
is ever lost: the group's stored offsets are at least the acknowledged ones whenever the group is in
memory at its coordinator (checked at each acknowledgement, each time a coordinator loads the group's
offsets, after a restart or a cluster's coordinator move, and at the end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

from grouplab.consumer.delivery import (AppOutput, Committed, CrashNow, DeliveryApp, DeliveryConfig, DeliveryMode, OutputLedger,
                               Processed, input_value)
from grouplab.protocol import events
from grouplab.protocol.messages import (ProducePartitionData, ProduceRequest, ProduceResponse, ProduceTopicData, Record,
                               RecordBatch)
from grouplab.protocol.types import TopicPartition

if TYPE_CHECKING:
    from grouplab.sim.scenario import DeliverySpec
    from grouplab.sim.host import SimHost
    from grouplab.sim.member import SimMember

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION_NAMES = {READ_UNCOMMITTED: "read_uncommitted", READ_COMMITTED: "read_committed"}


class DeliveryWorld:
    def __init__(self, sim: "SimHost", spec: "DeliverySpec") -> None:
        self.sim = sim
        self.spec = spec
        self.mode = DeliveryMode(spec.mode)
        self.partitions = sim.scenario.topics[spec.input_topic]
        self.committed: dict[TopicPartition, int] = {}
        self.processed = 0
        self.crash_restart_ms: dict[int, int] = {}  # member index -> restart delay after an armed crash

    # ------------------------------------------------------------------ set-up

    def write_input(self) -> None:
        """The input, written before any member starts: `records` per partition, each value naming
        its own partition and offset so the output can be checked record by record."""
        broker = self.sim.broker
        cluster = broker.cluster if broker is not None else None
        for p in range(self.partitions):
            records = [Record(value=input_value(self.spec.input_topic, p, i)) for i in range(self.spec.records)]
            leader = cluster.nodes.leader(self.spec.input_topic, p) if cluster is not None else 0
            for start in range(0, len(records), 100):
                batch = RecordBatch(records=records[start:start + 100])
                self.sim.admin_request("Produce", ProduceRequest(
                    [ProduceTopicData(self.spec.input_topic, [ProducePartitionData(p, batch)])], acks=-1), leader)
        self.sim.stats.produced = self.partitions * self.spec.records

    def new_app(self, m: "SimMember") -> DeliveryApp:
        config = DeliveryConfig(self.mode, self.spec.output_topic, max_records=self.spec.max_records,
                                processing_ms=self.spec.processing_ms)
        return DeliveryApp(m.config, config, log_events=self.sim.emit is not None)

    # ------------------------------------------------------------------ during the run

    def on_output(self, m: "SimMember", out: AppOutput) -> None:
        """Account for one of the app's outputs; on CrashNow the process ends there (its driver
        drops the rest of the step)."""
        if type(out) is Processed:
            self.processed += out.records
        elif type(out) is Committed:
            before = self.committed.get(out.tp, 0)
            if out.offset < before:
                self.sim.invariants.fail("committed offsets never go backwards",
                                         f"{m.name} committed {out.tp} at {out.offset} after {before}")
            self.committed[out.tp] = out.offset
            self.check_commits_kept([out.tp])
            self.sim.invariants.dirty = True  # the input may now be drained
        elif type(out) is CrashNow:
            self.sim.log_sim(events.ProcessCrashed, member=m.name, point=out.point)
            self.sim.stop_process(m, clean=False)
            if m.zombie:
                m.permanently_down = True  # a fenced zombie is gone for good
            else:
                self.sim.restart_later(m, self.crash_restart_ms.pop(m.index, 1000))

    def check_commits_kept(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """No acknowledged commit lost: the offset the group's coordinator holds for each partition
        is at least the last one acknowledged to a member (offsets only go forward here). Nothing to
        look at while the group is not in memory (a coordinator down, or loading it)."""
        broker = self.sim.broker
        if broker is None:
            return
        group_id = self.sim.scenario.group_id
        holder = broker.consumer_offsets.get(group_id) or broker.groups.get(group_id)
        if holder is None:
            return
        for tp in (partitions if partitions is not None else sorted(self.committed)):
            acked = self.committed[tp]
            stored = holder.offsets.get(tp)
            if stored is None or stored.offset < acked:
                self.sim.invariants.fail("no acknowledged commit lost",
                                         f"{tp} was acknowledged committed at {acked}, its coordinator holds "
                                         f"{stored.offset if stored is not None else 'nothing'}")

    def arm_crash(self, m: "SimMember", point: str, restart_after_ms: int) -> None:
        if isinstance(m.machine, DeliveryApp):
            m.machine.crash_at = point
            self.crash_restart_ms[m.index] = max(restart_after_ms, 1)

    def ack_lost(self, body: Any) -> bool:
        """A Produce answer lost on the way back: the producer retries the same sequence."""
        p = self.spec.produce_ack_loss
        if p and self.sim.faults_on and type(body) is ProduceResponse and self.sim.rng.random() < p:
            self.sim.stats.messages_lost += 1
            return True
        return False

    def drained(self) -> bool:
        """Every input record committed."""
        return all(self.committed.get(TopicPartition(self.spec.input_topic, p), 0) >= self.spec.records
                   for p in range(self.partitions))

    def drain_bound_ms(self) -> int:
        """Extra liveness time to consume the input: a fetch cycle per 50 records, with slack."""
        per_batch = self.spec.processing_ms + 200
        return (self.spec.records // max(self.spec.max_records, 1) + 1) * self.partitions * per_batch

    # ------------------------------------------------------------------ the account

    def _ledger(self, isolation: int) -> OutputLedger:
        """The output topic read back at `isolation`, counted per input record."""
        broker = self.sim.broker
        assert broker is not None

        def values() -> Iterator[bytes | None]:
            for p in range(self.partitions):
                log = broker.logs.log(self.spec.output_topic, p)
                offset = log.log_start_offset
                while records := log.read(offset, 1 << 20, isolation):
                    yield from (r.value for r in records)
                    offset = records[-1].offset + 1

        return OutputLedger.from_output(self.spec.input_topic, self.partitions, self.spec.records, values())

    def finish(self) -> None:
        """Read the output topic and check the mode's guarantee; record the figures."""
        self.check_commits_kept()
        isolation = READ_COMMITTED if self.mode is DeliveryMode.EXACTLY_ONCE else READ_UNCOMMITTED
        ledger = self._ledger(isolation)
        lost, duplicated = ledger.lost, ledger.duplicated
        stats = self.sim.stats
        # What a read_uncommitted reader would see: aborted writes are in the log all the same.
        stats.duplicated_uncommitted = self._ledger(READ_UNCOMMITTED).duplicated
        stats.processed, stats.lost, stats.duplicated = self.processed, lost, duplicated
        stats.committed = sum(self.committed.values())
        committed = {tp.partition: offset for tp, offset in self.committed.items() if tp.topic == self.spec.input_topic}
        for fields in ledger.record_events(self.mode.value, ISOLATION_NAMES[isolation], committed):
            self.sim.log_sim(events.SimDeliveryRecords, **fields)
        broken = {
            DeliveryMode.AT_MOST_ONCE: duplicated > 0,
            DeliveryMode.AT_LEAST_ONCE: lost > 0,
            DeliveryMode.EXACTLY_ONCE: lost > 0 or duplicated > 0,
        }[self.mode]
        self.sim.log_sim(events.SimDeliveryAccount, mode=self.mode.value, produced=ledger.produced, processed=self.processed,
                          committed=stats.committed, lost=lost, duplicated=duplicated)
        if broken:
            self.sim.invariants.fail("delivery guarantee", f"{self.mode.value}: {lost} input records lost, "
                                                           f"{duplicated} duplicated in the output")
