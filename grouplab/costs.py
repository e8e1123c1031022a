"""Honest costs: per partition, when it was consumed, when it was *assigned but not consumed* (its
owner had stopped: crashed, hung, stopped polling) and when it was *unowned*; and each stop
(a `Stall`) charged with what it cost. docs/events.md §6 defines the three states; this module is
the one place that computes them. A topic's deletion ends its partitions' time: they stop existing.

`CostTracker` is a pure fold over `(node, LogEvent)` pairs, like `RebalanceTracker` (which it
feeds and exposes as `.rebalances`, so one tracker serves both): give it a run's events in order,
live (the simulator's timeline, `grouplab run`'s display, the dashboard) or read back from a run
directory (grouplab/runlog.py: `grouplab plot`, the Spark pipeline's `partition_time` and `stalls`
tables). It never reads a clock: time is the events' `ts_ms`.

    costs = CostTracker()
    for node, ev in events:
        rebalance = costs.feed(node, ev)        # a completed Rebalance, as RebalanceTracker.feed
        for report in costs.take_reports():     # stalls whose cost is now known, once each
            print(describe_stall(report))       # grouplab/cost_sentences.py, in any language
    costs.finish(end_ms)                        # a whole run: close everything at the log's end
    costs.segments, costs.holdings, costs.stalls, costs.totals()

Live, without `finish`: `costs.open_segments(now_ms)`, `costs.totals(now_ms)`,
`costs.stall_cost(stall, now_ms)` and `costs.waiting(now_ms)` (stopped members the coordinator
has not removed yet) add what is still running up to `now_ms` without changing anything.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

from grouplab.rebalances import TRACKED_EVENTS, Rebalance, RebalanceTracker
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.types import TopicPartition

State = Literal["consumed", "assigned_not_consumed", "unowned"]
CONSUMED: State = "consumed"
ASSIGNED_NOT_CONSUMED: State = "assigned_not_consumed"
UNOWNED: State = "unowned"
STATES: tuple[State, ...] = (CONSUMED, ASSIGNED_NOT_CONSUMED, UNOWNED)

# The simulator's faults (`fault_injected.fault`) after which a member consumes nothing: for the
# rest of its process (crash, static_restart), or for `duration_ms` (hang, slow; the simulator also
# ends both at `faults_over`). Network faults (partition, disconnect, the rule actions) leave the
# application consuming; a clean `leave` revokes first; `crash_before/after_commit` only arm a
# crash, which `process_crashed` reports when it happens.
STOPPING_FAULTS = ("crash", "static_restart", "hang", "slow")
TIMED_FAULTS = ("hang", "slow")



@dataclass
class Stall:
    """A member process that stopped consuming: from `since_ms`, for good (its process is gone) or
    until `until_ms` (a hang or slow spell). Its partitions were assigned but not consumed until
    its holdings ended (the coordinator removed or fenced it, it gave them up, another member took
    them) or it resumed; what happened to them next is charged to it as well. The tracker fills
    in the fields after `since_ms` as the run goes on."""

    index: int  # position in CostTracker.stalls, which other records refer to
    group_id: str
    client_id: str  # the node: the member's client id
    member_id: str  # its member id when it stopped ("" if it had none)
    fault: str  # a STOPPING_FAULTS name, or process_crashed, process_exited, app_crashed
    detail: str | None  # process_crashed's point, process_exited's error
    since_ms: int
    until_ms: int | None  # when a hang or slow spell was due to end; None: for good
    resumed_ms: int | None = None  # when the hang or slow spell did end (it may be cut short)
    partitions: set[TopicPartition] = field(default_factory=set)  # assigned but not consumed because of it
    assigned_not_consumed_ms: int = 0  # partition-ms, in closed segments
    unowned_after_ms: int = 0  # partition-ms unowned right after, in closed segments
    ended_ms: int | None = None  # when the last of its partitions stopped being assigned-but-not-consumed
    ended_by: str | None = None  # why: see Segment.ended_by
    ended_detail: str | None = None  # the member's own words, for `lost` and `revoked`
    removed_ms: int | None = None  # when the coordinator removed its member id
    removal_reason: str | None = None
    consumer_protocol: bool = False  # removed from a consumer-protocol group (KIP-848): its timeouts' names differ
    repaired_generation: int | None = None  # whose assignment (stable after since_ms) got its partitions consumed again

    @property
    def span_ms(self) -> int | None:
        """From the stop to the end of the last partition's assigned-but-not-consumed time."""
        return None if self.ended_ms is None else self.ended_ms - self.since_ms


@dataclass(frozen=True, slots=True)
class Segment:
    """One partition in one state, from `start_ms` to `end_ms`."""

    group_id: str
    partition: TopicPartition
    state: State
    start_ms: int
    end_ms: int
    client_id: str | None  # consumed: the consuming holder; assigned_not_consumed: the stopped one
    member_id: str | None
    # consumed / assigned_not_consumed: the holder's generation (from its partitions_assigned);
    # unowned: the generation whose assignment ended it (None if nothing did: the log ended).
    generation: int | None
    stall: int | None  # Stall.index charged: every assigned_not_consumed one, and the unowned time right after
    # What ended it: assigned (a member got it), stopped (its consumer stopped), resumed, reassigned
    # (another member took it over), a removal reason (session_timeout, rebalance_timeout,
    # sync_timeout, left), fenced, revoked, closed, lost, deleted (its topic was: the lane ends for
    # good), end_of_log; "open" in a live snapshot.
    ended_by: str

    @property
    def duration_ms(self) -> int:
        return self.end_ms - self.start_ms


@dataclass(frozen=True, slots=True)
class Holding:
    """A member process holding a partition: from its `partitions_assigned` until `end_reason`:
    revoked, closed (revoked on close), lost, removed (the coordinator removed its member id),
    fenced (a static replacement took its id's place), reassigned (the same client was given it
    again: a later process or generation), deleted (its topic was deleted), end_of_log. A stopped
    process still holds."""

    group_id: str
    partition: TopicPartition
    client_id: str
    member_id: str
    generation: int
    start_ms: int
    end_ms: int
    end_reason: str


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault the run's logs record, for pictures: the simulator's `fault_injected` (not the
    per-message rule form), `coordinator_crashed`, `process_crashed`, `process_exited`, and a
    real run's `app_crashed`. Only some stop a member (see Stall)."""

    ts_ms: int
    group_id: str
    fault: str
    clients: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StallReport:
    """A stall whose assigned-but-not-consumed time is over, once: when the coordinator removed
    the member, with the rebalance that followed (ready when it completes); otherwise when its
    partitions were taken over, given up or consumed again, or the log ended."""

    stall: Stall
    ts_ms: int  # when the report became ready
    assigned_not_consumed_ms: int  # partition-ms up to then
    rebalance: Rebalance | None


@dataclass
class PartitionTime:
    """Partition-ms per state, over `partitions` partitions (a group's, or a whole run's). A
    partition whose topic was deleted counts with its time up to the deletion; one made again
    under the same name after that is another partition."""

    consumed_ms: int = 0
    assigned_not_consumed_ms: int = 0
    unowned_ms: int = 0
    partitions: int = 0

    @property
    def total_ms(self) -> int:
        return self.consumed_ms + self.assigned_not_consumed_ms + self.unowned_ms

    def add(self, state: State, ms: int) -> None:
        if state == CONSUMED:
            self.consumed_ms += ms
        elif state == ASSIGNED_NOT_CONSUMED:
            self.assigned_not_consumed_ms += ms
        else:
            self.unowned_ms += ms


# ----------------------------------------------------------------------------- the fold's working state


class _Process:
    """One process of a client: its member id, its current stop, the lanes it holds."""

    __slots__ = ("node", "group_id", "member_id", "stall", "lanes", "used")

    def __init__(self, node: str) -> None:
        self.node = node
        self.group_id = ""
        self.member_id = ""
        self.stall: Stall | None = None
        self.lanes: set[_Lane] = set()
        self.used = False  # had a member id, a holding or a stop: a new process is needed for more


class _Hold:
    __slots__ = ("process", "member_id", "generation", "start_ms")

    def __init__(self, process: _Process, member_id: str, generation: int, start_ms: int) -> None:
        self.process, self.member_id, self.generation, self.start_ms = process, member_id, generation, start_ms


class _Lane:
    """One partition of one group: who holds it, and the segment it is in."""

    __slots__ = ("group_id", "tp", "holders", "state", "since", "client", "member", "generation", "stall", "closed")

    def __init__(self, group_id: str, tp: TopicPartition, since: int) -> None:
        self.group_id, self.tp = group_id, tp
        self.holders: dict[str, _Hold] = {}  # node -> its holding
        self.state: State = UNOWNED
        self.since = since
        self.client: str | None = None
        self.member: str | None = None
        self.generation: int | None = None
        self.stall: Stall | None = None
        self.closed = PartitionTime(partitions=1)  # its closed segments, per state


class CostTracker:
    """The fold. See the module's docstring."""

    def __init__(self, rebalances: RebalanceTracker | None = None) -> None:
        self.rebalances = rebalances if rebalances is not None else RebalanceTracker()
        self.stalls: list[Stall] = []
        self.segments: list[Segment] = []  # closed ones, in the order they closed
        self.holdings: list[Holding] = []  # closed ones
        self.faults: list[Fault] = []
        self.completed: list[Rebalance] = []  # every rebalance completed, as feed returned them
        self.now = 0
        self.finished = False
        self._lanes: dict[tuple[str, TopicPartition], _Lane] = {}
        self._processes: dict[str, _Process] = {}  # node -> its current process
        self._by_member: dict[tuple[str, str], set[_Lane]] = {}  # (group, member id) -> lanes it holds
        self._stalls_of: dict[tuple[str, str], list[Stall]] = {}  # (group, member id) -> its stalls
        self._group_start: dict[str, int] = {}
        self._consumer_groups: set[str] = set()  # consumer-protocol groups (KIP-848): no rebalances to wait for
        self._created: dict[str, tuple[int, int]] = {}  # topic -> (partition count, ts of its latest growth)
        self._deleted: dict[str, int] = {}  # topic -> when it was deleted, until it is created again
        self._gone: list[_Lane] = []  # the lanes of deleted partitions: closed for good, still in totals
        self._stable_at: dict[tuple[str, int], int] = {}  # (group, generation) -> its group_stable ts
        self._resumes: list[tuple[int, int, Stall, _Process]] = []  # (until_ms, seq, ...): hang and slow ends
        self._timed: dict[int, tuple[Stall, _Process]] = {}  # the hang and slow spells still on
        self._seq = itertools.count()
        self._anc: dict[int, set[_Lane]] = {}  # stall index -> lanes assigned-not-consumed because of it
        self._pending: list[Stall] = []  # ended by a removal: reported with the next rebalance of the group
        self._reported: set[int] = set()
        self._ready: list[StallReport] = []

    # ------------------------------------------------------------------ feeding

    def feed(self, node: str, ev: LogEvent) -> Rebalance | None:
        """Take one event; return the rebalance it completed, if any (as RebalanceTracker.feed)."""
        ts = ev.ts_ms
        self._advance(ts)
        if ts > self.now:
            self.now = ts
        rebalance = self.rebalances.feed(node, ev)
        payload = ev.payload
        if node == "coordinator":
            handler = _COORDINATOR.get(type(payload))
        elif node == "simulator":
            handler = _SIMULATOR.get(type(payload))
        elif node == "run" and isinstance(payload, events.FreeFormEvent):
            handler = _RUN.get(payload.NAME)
        elif node in ("run", "proxy"):
            handler = None
        else:
            handler = _MEMBER.get(type(payload))
        if handler is not None:
            handler(self, node, ts, payload)
        if rebalance is not None:
            self.completed.append(rebalance)
            self._stable_at[(rebalance.group_id, rebalance.generation)] = rebalance.ended_ms
            self._report_removed(rebalance)
        return rebalance

    def take_reports(self) -> list[StallReport]:
        """The stall reports that became ready since the last call, in the order they did."""
        ready, self._ready = self._ready, []
        return ready

    def finish(self, end_ms: int | None = None) -> None:
        """The log ended at `end_ms` (default: the last event's): close every open segment and
        holding there, and report what is still pending."""
        if self.finished:
            return
        end = max(self.now, end_ms if end_ms is not None else self.now)
        self._advance(end)
        self.now = end
        for lane in self._lanes.values():
            for node in list(lane.holders):
                self._end_hold(lane, node, end, "end_of_log")
            self._close(lane, end, "end_of_log", None)
        for stall in self._pending:
            self._ready_report(stall, None)
        self._pending = []
        self.finished = True

    # ------------------------------------------------------------------ reading

    def open_segments(self, now_ms: int | None = None) -> list[Segment]:
        """Every lane's current segment, as if it ended at `now_ms` (ended_by "open"); a hang or
        slow spell due to end by then ends in it at its time, as `finish(now_ms)` would end it."""
        if self.finished:
            return []
        now = self.now if now_ms is None else max(now_ms, self.now)
        return [seg for lane in self._lanes.values() for seg in self._project(lane, now)]

    def _project(self, lane: _Lane, now: int) -> list[Segment]:
        """The lane's open segment up to `now`, split where a holder's timed stop ends."""
        def segment(start: int, end: int, state: State, hold: _Hold | None, stall: Stall | None,
                    ended_by: str) -> Segment:
            return Segment(lane.group_id, lane.tp, state, start, end, hold.process.node if hold else lane.client,
                           hold.member_id if hold else lane.member, hold.generation if hold else lane.generation,
                           stall.index if stall is not None else None, ended_by)

        ends = sorted({max(h.process.stall.until_ms, lane.since) for h in lane.holders.values()
                       if h.process.stall is not None and h.process.stall.until_ms is not None
                       and h.process.stall.until_ms <= now})
        if lane.state != ASSIGNED_NOT_CONSUMED or not ends:
            return [segment(lane.since, now, lane.state, None, lane.stall, "open")]
        out: list[Segment] = []
        start, state, stall = lane.since, lane.state, lane.stall
        hold: _Hold | None = None
        for t in ends:
            def stopped(p: _Process) -> Stall | None:
                st = p.stall
                return None if st is None or st.until_ms is not None and st.until_ms <= t else st
            new_state, new_hold, new_stall = _state_of(lane, stopped)
            if (new_state, new_stall) == (state, stall):
                continue
            if t > start:
                out.append(segment(start, t, state, hold, stall, "resumed"))
            start, state, hold, stall = t, new_state, new_hold, new_stall
        if now > start:
            out.append(segment(start, now, state, hold, stall, "open"))
        return out

    def open_holdings(self, now_ms: int | None = None) -> list[Holding]:
        """Every holding still open, as if it ended at `now_ms` (end_reason "open")."""
        if self.finished:
            return []
        now = self.now if now_ms is None else max(now_ms, self.now)
        return [Holding(lane.group_id, lane.tp, node, h.member_id, h.generation, h.start_ms, now, "open")
                for lane in self._lanes.values() for node, h in lane.holders.items()]

    def all_segments(self, now_ms: int | None = None) -> list[Segment]:
        return self.segments + self.open_segments(now_ms)

    def totals(self, now_ms: int | None = None, group_id: str | None = None) -> PartitionTime:
        """Partition-ms per state over every partition (of `group_id`), open segments up to `now_ms`."""
        out = PartitionTime()
        for lane in itertools.chain(self._lanes.values(), self._gone):
            if group_id is not None and lane.group_id != group_id:
                continue
            out.consumed_ms += lane.closed.consumed_ms
            out.assigned_not_consumed_ms += lane.closed.assigned_not_consumed_ms
            out.unowned_ms += lane.closed.unowned_ms
            out.partitions += 1
        for seg in self.open_segments(now_ms):
            if group_id is None or seg.group_id == group_id:
                out.add(seg.state, seg.duration_ms)
        return out

    def lane_totals(self, now_ms: int | None = None) -> dict[tuple[str, TopicPartition], tuple[PartitionTime, int]]:
        """Per (group, partition): its partition-ms per state, and when its accounting began."""
        out: dict[tuple[str, TopicPartition], tuple[PartitionTime, int]] = {}
        opened: dict[tuple[str, TopicPartition], int] = {}
        for seg in self.all_segments(now_ms):
            key = (seg.group_id, seg.partition)
            t = out.setdefault(key, (PartitionTime(partitions=1), 0))[0]
            t.add(seg.state, seg.duration_ms)
            opened[key] = min(opened.get(key, seg.start_ms), seg.start_ms)
        return {k: (t, opened[k]) for k, (t, _) in out.items()}

    def stall_cost(self, stall: Stall, now_ms: int | None = None) -> tuple[int, int]:
        """(assigned-but-not-consumed, unowned right after) partition-ms of `stall`, open segments
        up to `now_ms` included."""
        anc, after = stall.assigned_not_consumed_ms, stall.unowned_after_ms
        for seg in self.open_segments(now_ms):
            if seg.stall == stall.index:
                if seg.state == ASSIGNED_NOT_CONSUMED:
                    anc += seg.duration_ms
                elif seg.state == UNOWNED:
                    after += seg.duration_ms
        return anc, after

    def waiting(self, now_ms: int | None = None) -> list[Stall]:
        """Stalls whose partitions are assigned but not consumed now, with the member still in the
        group: what a session timeout (or the end of a hang) will end."""
        now = self.now if now_ms is None else now_ms
        return [s for s in self.stalls if self._anc.get(s.index) and s.removed_ms is None
                and (s.until_ms is None or s.until_ms > now)]

    # ------------------------------------------------------------------ coordinator events

    def _group_begins(self, node: str, ts: int, ev: events.RebalanceStarted | events.GroupLoaded) -> None:
        self._group_start.setdefault(ev.group_id, ts)

    def _topic_created(self, node: str, ts: int, ev: events.TopicCreated | events.PartitionsCreated) -> None:
        self._created[ev.topic] = (ev.partition_count, ts)
        self._deleted.pop(ev.topic, None)  # made again: its partitions are new ones, lanes start afresh

    def _topic_deleted(self, node: str, ts: int, ev: events.TopicDeleted) -> None:
        """A deleted partition stops existing: every lane of the topic, in every group, ends here
        (its holdings too, `deleted`), and no time accrues to it after, whatever the members say
        of it until a `topic_created` makes the name again."""
        self._deleted[ev.topic] = ts
        self._created.pop(ev.topic, None)
        for key in sorted((k for k in self._lanes if k[1].topic == ev.topic), key=lambda k: (k[0], k[1].partition)):
            lane = self._lanes.pop(key)
            for n in list(lane.holders):
                self._end_hold(lane, n, ts, "deleted", evaluate=False)
            self._close(lane, ts, "deleted", None)
            self._gone.append(lane)

    def _group_stable(self, node: str, ts: int, ev: events.GroupStable) -> None:
        raw: dict[str, Any] = ev.assignments
        for parts in raw.values():
            if isinstance(parts, list):
                for t, p in parts:
                    self._lane(ev.group_id, TopicPartition(t, p), ts)  # None: a deleted topic's (stale metadata)

    def _target_computed(self, node: str, ts: int, ev: events.TargetAssignmentComputed) -> None:
        """A consumer-protocol group's target (KIP-848) names the partitions the group consumes, as a
        classic group's stable assignment does: each one's lane opens (unowned until a member takes it)."""
        for parts in ev.assignment.values():
            for t, p in parts:
                self._lane(ev.group_id, TopicPartition(str(t), int(str(p))), ts)

    def _member_removed(self, node: str, ts: int, ev: events.MemberRemoved | events.ConsumerMemberRemoved) -> None:
        key = (ev.group_id, ev.member_id)
        reason = ev.reason.value
        for stall in self._stalls_of.get(key, ()):
            if stall.removed_ms is None:
                stall.removed_ms, stall.removal_reason = ts, reason
        for lane in sorted(self._by_member.get(key, ()), key=_lane_order):
            for n, hold in list(lane.holders.items()):
                if hold.member_id == ev.member_id:
                    self._end_hold(lane, n, ts, "removed", why=reason)

    def _consumer_group_begins(self, node: str, ts: int,
                               ev: events.ConsumerMemberJoined | events.ConsumerGroupLoaded) -> None:
        self._consumer_groups.add(ev.group_id)
        self._group_start.setdefault(ev.group_id, ts)

    def _consumer_member_removed(self, node: str, ts: int, ev: events.ConsumerMemberRemoved) -> None:
        """A consumer-protocol group's removal frees the member's partitions at once (the next
        target gives them to others); its stalls are reported now: no rebalance completes."""
        self._consumer_groups.add(ev.group_id)
        for stall in self._stalls_of.get((ev.group_id, ev.member_id), ()):
            stall.consumer_protocol = True
        self._member_removed(node, ts, ev)

    def _static_member_replaced(self, node: str, ts: int,
                                ev: events.StaticMemberReplaced | events.ConsumerStaticMemberReplaced) -> None:
        key = (ev.group_id, ev.old_member_id)
        for lane in sorted(self._by_member.get(key, ()), key=_lane_order):
            for n, hold in list(lane.holders.items()):
                if hold.member_id == ev.old_member_id:
                    self._end_hold(lane, n, ts, "fenced")

    # ------------------------------------------------------------------ simulator events

    def _fault_injected(self, node: str, ts: int, ev: events.FaultInjected) -> None:
        self.faults.append(Fault(ts, ev.group_id, ev.fault, tuple(ev.members)))
        if ev.fault not in STOPPING_FAULTS:
            return
        until = ts + ev.duration_ms if ev.fault in TIMED_FAULTS else None
        for member in ev.members:
            self._stop(member, ev.group_id, ts, ev.fault, None, until)

    def _coordinator_crashed(self, node: str, ts: int, ev: events.CoordinatorCrashed) -> None:
        self.faults.append(Fault(ts, ev.group_id, "coordinator_crashed", ()))

    def _process_crashed(self, node: str, ts: int, ev: events.ProcessCrashed) -> None:
        self.faults.append(Fault(ts, ev.group_id, "process_crashed", (ev.member,)))
        self._stop(ev.member, ev.group_id, ts, "process_crashed", ev.point, None)

    def _process_exited(self, node: str, ts: int, ev: events.ProcessExited) -> None:
        self.faults.append(Fault(ts, ev.group_id, "process_exited", (ev.member,)))
        self._stop(ev.member, ev.group_id, ts, "process_exited", ev.error, None)

    def _process_started(self, node: str, ts: int, ev: events.ProcessStarted) -> None:
        self._new_process(ev.member)

    def _faults_over(self, node: str, ts: int, ev: events.FaultsOver) -> None:
        for stall, proc in list(self._timed.values()):
            self._resume(proc, stall, ts)

    # ------------------------------------------------------------------ a real run's own faults

    def _member_fault(self, node: str, ts: int, ev: events.FreeFormEvent) -> None:
        """`grouplab run`'s hang, slow and partition (docs/ui.md §5): the member writes nothing
        while it lasts, so the harness's `run` line is the only word of it; until its
        `member_fault_over`. (A crash is the member's own `app_crashed`.)"""
        client = str(ev.values.get("client_id") or "")
        fault = str(ev.values.get("fault") or "")
        proc = self._process(client)
        self.faults.append(Fault(ts, proc.group_id, fault, (client,)))
        self._stop(client, proc.group_id, ts, fault, None, None)

    def _member_fault_over(self, node: str, ts: int, ev: events.FreeFormEvent) -> None:
        proc = self._processes.get(str(ev.values.get("client_id") or ""))
        if proc is not None and proc.stall is not None and ev.values.get("how") != "crashed":
            self._resume(proc, proc.stall, ts)

    # ------------------------------------------------------------------ member events

    def _member_other(self, node: str, ts: int, ev: Any) -> None:
        member_id = getattr(ev, "member_id", None)
        if member_id:
            proc = self._process(node)
            proc.member_id, proc.used = member_id, True
            proc.group_id = ev.group_id

    def _coordinator_connected(self, node: str, ts: int, ev: events.CoordinatorConnected) -> None:
        if not ev.member_id:
            self._new_process(node)  # a process's first line (or a reconnect before it had an id)
        else:
            self._member_other(node, ts, ev)

    def _partitions_assigned(self, node: str, ts: int, ev: events.PartitionsAssigned) -> None:
        self._member_other(node, ts, ev)
        proc = self._process(node)
        proc.used = True
        proc.group_id = ev.group_id
        for t, p in ev.partitions:
            lane = self._lane(ev.group_id, TopicPartition(t, p), ts)
            if lane is None:  # a deleted topic's, assigned from stale metadata: it does not exist
                continue
            if node in lane.holders:
                self._end_hold(lane, node, ts, "reassigned", evaluate=False)
            lane.holders[node] = _Hold(proc, ev.member_id, ev.generation_id, ts)
            proc.lanes.add(lane)
            self._by_member.setdefault((ev.group_id, ev.member_id), set()).add(lane)
            self._evaluate(lane, ts, "assigned", ev.generation_id)

    def _partitions_released(self, node: str, ts: int, ev: events.PartitionsRevoked | events.PartitionsLost) -> None:
        self._member_other(node, ts, ev)
        lost = type(ev) is events.PartitionsLost
        kind = "lost" if lost else "closed" if ev.reason == "closing" else "revoked"
        for t, p in ev.partitions:
            lane = self._lanes.get((ev.group_id, TopicPartition(t, p)))
            if lane is not None and node in lane.holders:
                self._end_hold(lane, node, ts, kind, detail=ev.reason)

    def _app_crashed(self, node: str, ts: int, ev: events.AppCrashed) -> None:
        self._member_other(node, ts, ev)
        self.faults.append(Fault(ts, ev.group_id, "app_crashed", (node,)))
        self._stop(node, ev.group_id, ts, "app_crashed", None, None)

    # ------------------------------------------------------------------ processes and stops

    def _process(self, node: str) -> _Process:
        proc = self._processes.get(node)
        if proc is None:
            proc = self._processes[node] = _Process(node)
        return proc

    def _new_process(self, node: str) -> None:
        proc = self._processes.get(node)
        if proc is None or proc.used:
            # The old process keeps its holdings (and its stop): a crashed process still holds
            # until the coordinator removes it.
            self._processes[node] = _Process(node)

    def _stop(self, node: str, group_id: str, ts: int, fault: str, detail: str | None, until: int | None) -> None:
        proc = self._process(node)
        if proc.stall is not None:
            self._resume(proc, proc.stall, ts, why="stopped")  # a slow member that crashes: a new stop
        stall = Stall(len(self.stalls), proc.group_id or group_id, node, proc.member_id, fault, detail, ts, until)
        self.stalls.append(stall)
        self._stalls_of.setdefault((stall.group_id, stall.member_id), []).append(stall)
        proc.stall, proc.used = stall, True
        if until is not None:
            heapq.heappush(self._resumes, (until, next(self._seq), stall, proc))
            self._timed[stall.index] = (stall, proc)
        for lane in sorted(proc.lanes, key=_lane_order):
            self._evaluate(lane, ts, "stopped", None)

    def _resume(self, proc: _Process, stall: Stall, ts: int, why: str = "resumed") -> None:
        self._timed.pop(stall.index, None)
        if proc.stall is not stall:
            return
        proc.stall = None
        stall.resumed_ms = ts
        for lane in sorted(proc.lanes, key=_lane_order):
            self._evaluate(lane, ts, why, None)

    def _advance(self, ts: int) -> None:
        """Hang and slow spells that ended by `ts`, at the time they ended."""
        resumes = self._resumes
        while resumes and resumes[0][0] <= ts:
            until, _, stall, proc = heapq.heappop(resumes)
            self._resume(proc, stall, until)

    # ------------------------------------------------------------------ lanes

    def _lane(self, group_id: str, tp: TopicPartition, ts: int) -> _Lane | None:
        """The lane of `tp` in the group, opened if new; None while its topic is deleted."""
        key = (group_id, tp)
        lane = self._lanes.get(key)
        if lane is None:
            if tp.topic in self._deleted:
                return None
            since = self._group_start.get(group_id, ts)
            created = self._created.get(tp.topic)
            if created is not None and created[1] <= ts:
                since = max(since, created[1])
            lane = self._lanes[key] = _Lane(group_id, tp, min(since, ts))
        return lane

    def _end_hold(self, lane: _Lane, node: str, ts: int, reason: str, why: str | None = None,
                  detail: str | None = None, evaluate: bool = True) -> None:
        hold = lane.holders.pop(node)
        hold.process.lanes.discard(lane)
        held = self._by_member.get((lane.group_id, hold.member_id))
        if held is not None and not any(h.member_id == hold.member_id for h in lane.holders.values()):
            held.discard(lane)
        self.holdings.append(Holding(lane.group_id, lane.tp, node, hold.member_id, hold.generation, hold.start_ms,
                                     ts, reason))
        if evaluate:
            self._evaluate(lane, ts, why or reason, None, detail)

    def _evaluate(self, lane: _Lane, ts: int, why: str, generation: int | None, detail: str | None = None) -> None:
        """The lane's state from its holders now; a new segment if it changed."""
        state, hold, stall = _state_of(lane, lambda p: p.stall)
        client = hold.process.node if hold else None
        member = hold.member_id if hold else None
        if (state, client, member, stall) == (lane.state, lane.client, lane.member, lane.stall):
            return
        self._close(lane, ts, why, generation, detail)
        lane.state, lane.client, lane.member, lane.stall = state, client, member, stall
        lane.generation = hold.generation if hold else None
        if state == ASSIGNED_NOT_CONSUMED and stall is not None:
            self._anc.setdefault(stall.index, set()).add(lane)

    def _close(self, lane: _Lane, ts: int, why: str, generation: int | None, detail: str | None = None) -> None:
        """End the lane's current segment at `ts` and charge it."""
        start, state, stall = lane.since, lane.state, lane.stall
        lane.since = ts
        gen = generation if state == UNOWNED else lane.generation
        if ts > start:
            ms = ts - start
            lane.closed.add(state, ms)
            if stall is not None and state == ASSIGNED_NOT_CONSUMED:
                stall.partitions.add(lane.tp)
                stall.assigned_not_consumed_ms += ms
            elif stall is not None and state == UNOWNED:
                stall.unowned_after_ms += ms
            self.segments.append(Segment(lane.group_id, lane.tp, state, start, ts, lane.client, lane.member, gen,
                                         stall.index if stall is not None else None, why))
        if stall is None or state == CONSUMED:
            return
        # A generation stable after the stall began that got its partition consumed again repaired it.
        if generation is not None and (state == UNOWNED or why == "assigned") and \
                self._stable_at.get((lane.group_id, generation), -1) >= stall.since_ms:
            stall.repaired_generation = generation
        if state == ASSIGNED_NOT_CONSUMED:
            anc = self._anc.get(stall.index)
            if anc is not None and lane in anc:
                anc.discard(lane)
                if not anc:
                    stall.ended_ms, stall.ended_by, stall.ended_detail = ts, why, detail
                    self._stall_ended(stall, ts)

    # ------------------------------------------------------------------ reports

    def _stall_ended(self, stall: Stall, ts: int) -> None:
        if stall.index in self._reported:
            return
        if stall.ended_by in REMOVAL_REASONS and stall.group_id not in self._consumer_groups:
            if stall not in self._pending:
                self._pending.append(stall)  # with the rebalance the removal starts
        else:
            self._ready_report(stall, None, ts)

    def _report_removed(self, rebalance: Rebalance) -> None:
        removed = {r.member_id for r in rebalance.removed}
        for stall in [s for s in self._pending if s.group_id == rebalance.group_id and s.member_id in removed]:
            self._pending.remove(stall)
            self._ready_report(stall, rebalance)

    def _ready_report(self, stall: Stall, rebalance: Rebalance | None, ts: int | None = None) -> None:
        if stall.index in self._reported or not stall.partitions:
            return
        self._reported.add(stall.index)
        when = rebalance.ended_ms if rebalance is not None else self.now if ts is None else ts
        self._ready.append(StallReport(stall, when, stall.assigned_not_consumed_ms, rebalance))


REMOVAL_REASONS = ("session_timeout", "rebalance_timeout", "sync_timeout", "left")


def _state_of(lane: _Lane, stopped: Callable[[_Process], Stall | None]) -> tuple[State, _Hold | None, Stall | None]:
    """A lane's state from its holders, given which processes have stopped: consumed by the
    latest live holder, else assigned-but-not-consumed by the latest one, else unowned (the time
    right after an assigned-but-not-consumed stretch is still that stall's)."""
    holders = lane.holders.values()
    live = [h for h in holders if stopped(h.process) is None]
    if live:
        return CONSUMED, max(live, key=lambda h: h.start_ms), None
    if holders:
        hold = max(holders, key=lambda h: h.start_ms)
        return ASSIGNED_NOT_CONSUMED, hold, stopped(hold.process)
    return UNOWNED, None, lane.stall if lane.state != CONSUMED else None


def _lane_order(lane: _Lane) -> tuple[str, str, int]:
    return (lane.group_id, lane.tp.topic, lane.tp.partition)


Handler = Callable[[CostTracker, str, int, Any], None]
_COORDINATOR: dict[type, Handler] = {
    events.RebalanceStarted: CostTracker._group_begins,
    events.GroupLoaded: CostTracker._group_begins,
    events.TopicCreated: CostTracker._topic_created,
    events.PartitionsCreated: CostTracker._topic_created,
    events.TopicDeleted: CostTracker._topic_deleted,
    events.GroupStable: CostTracker._group_stable,
    events.MemberRemoved: CostTracker._member_removed,
    events.StaticMemberReplaced: CostTracker._static_member_replaced,
    # A consumer-protocol group (KIP-848): its first member begins it, its target opens the lanes.
    events.ConsumerMemberJoined: CostTracker._consumer_group_begins,
    events.ConsumerGroupLoaded: CostTracker._consumer_group_begins,
    events.TargetAssignmentComputed: CostTracker._target_computed,
    events.ConsumerMemberRemoved: CostTracker._consumer_member_removed,
    events.ConsumerStaticMemberReplaced: CostTracker._static_member_replaced,
}
_SIMULATOR: dict[type, Handler] = {
    events.FaultInjected: CostTracker._fault_injected,  # not RuleFaultInjected: a message fault stops nobody
    events.CoordinatorCrashed: CostTracker._coordinator_crashed,
    events.ProcessCrashed: CostTracker._process_crashed,
    events.ProcessExited: CostTracker._process_exited,
    events.ProcessStarted: CostTracker._process_started,
    events.FaultsOver: CostTracker._faults_over,
}
_RUN: dict[str, Handler] = {  # by name: the harness's lines are free-form (docs/ui.md §5)
    "member_fault": CostTracker._member_fault,
    "member_fault_over": CostTracker._member_fault_over,
}
_MEMBER: dict[type, Handler] = {
    events.MemberIdReceived: CostTracker._member_other,  # these three only tell the member id
    events.Joined: CostTracker._member_other,
    events.SyncCompleted: CostTracker._member_other,
    events.CoordinatorConnected: CostTracker._coordinator_connected,
    events.PartitionsAssigned: CostTracker._partitions_assigned,
    events.PartitionsRevoked: CostTracker._partitions_released,
    events.PartitionsLost: CostTracker._partitions_released,
    events.AppCrashed: CostTracker._app_crashed,
    events.ConsumerJoinSent: CostTracker._member_other,  # a consumer-protocol member's id, from its first heartbeat
    events.AssignmentReceived: CostTracker._member_other,
}


def _names(types: Iterable[type]) -> set[str]:
    return {t.NAME for t in types}  # type: ignore[attr-defined]


# Every event the fold (and the RebalanceTracker it feeds) reads: a reader may hand it only these
# lines and get the same result (the Spark pipeline does, to keep its input small).
COST_EVENTS: frozenset[str] = frozenset(
    _names(_COORDINATOR) | _names(_SIMULATOR) | _names(_MEMBER) | set(_RUN) | TRACKED_EVENTS)
