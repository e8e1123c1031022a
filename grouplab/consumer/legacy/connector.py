"""The ZooKeeper-era consumer as a pure machine: Kafka 0.8's ZookeeperConsumerConnector and its
ZKRebalancerListener, with no thread, socket or clock (docs/legacy.md §4).

Inputs: `on_session` (the registry session's state), `on_watch` (a fired one-shot watch),
`on_result` (a registry call's answer), `on_timer`, `close`, each with `now_ms`. Outputs: registry
calls, fetcher start and stop, timers, events, and closing the session.

    start ──CONNECTED──> REGISTERING ──> REBALANCING ──(claimed)──> FETCHING ──(watch fires)──> REBALANCING
                                             │   ^                                                 ...
                                 (conflict)  v   │ (back-off rebalance.backoff.ms)
                                          BACKING_OFF ──(rebalance.max.retries attempts)──> GAVE_UP (idle until a watch)
    any ──EXPIRED──> (ownership gone, fetchers run on: the zombie window) ──CONNECTED──> REGISTERING ──> REBALANCING (step 1 stops them)
    any ──close──> (stop fetchers, commit) ──> CLOSED (the session closes: ephemeral nodes vanish)

A rebalance is the notes' steps, in order (`_attempt`): stop the fetchers and clear the queues;
commit the consumed offsets to the registry; release ownership (delete the owner nodes); read the
consumers and the partitions (re-arming the watches); compute the whole assignment over thread
ids; claim this consumer's partitions with ephemeral owner nodes (a node that still exists means
its previous owner has not released it: undo this attempt's claims, back off, try again, give up
after rebalance.max.retries attempts); read the committed offsets and restart the fetchers there.

The steps are a generator that yields each registry operation (or a back-off) and is sent its
result: one operation in flight at a time, the order of the notes readable top to bottom. A watch
that fires while a task runs is remembered and starts the next rebalance when it ends, as the old
consumer's watcher thread did.

The fetchers are synthetic: a partition's consumed offset grows at `records_per_s` from where its
fetcher started, so offsets committed and re-read show what a rebalance re-delivers. The logs they
read are synthetic too: every partition has been written at `records_per_s` since `log_start_ms`,
so a partition with no committed offset starts, by `auto.offset.reset`, at 0 (smallest) or at that
log end (largest, Kafka 0.8's default).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Generator, Mapping

from grouplab.consumer.legacy.assignors import RoundRobinRefused, get_legacy_assignor
from grouplab.consumer.legacy.config import LegacyConfig
from grouplab.consumer.legacy.threads import ThreadAssignment
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, StepOutputs, TimerKey
from grouplab.protocol.registry import (
    BROKER_TOPICS,
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Layout,
    Registration,
    RegistryError,
    RegistryOp,
    Result,
    SessionEvent,
    SessionState,
    SetData,
    WatchEvent,
    WatchType,
    decode_topic,
    is_write,
    topic_path,
)
from grouplab.protocol.types import TopicPartition

RECORDS_PER_S = 100


class Phase(Enum):
    WAITING_FOR_SESSION = "waiting_for_session"
    REGISTERING = "registering"
    REBALANCING = "rebalancing"
    BACKING_OFF = "backing_off"
    FETCHING = "fetching"
    GAVE_UP = "gave_up"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class RegistryCall:
    """Carry out `op` on the registry; its Result comes back as `on_result(op_id, ...)`."""

    op_id: int
    op: RegistryOp


@dataclass(frozen=True, slots=True)
class StartFetchers:
    """Start fetching these partitions from these offsets (thread id per partition)."""

    offsets: dict[TopicPartition, int]
    threads: dict[TopicPartition, str]


@dataclass(frozen=True, slots=True)
class StopFetchers:
    """Stop every fetcher and clear the queues (the partitions they read)."""

    partitions: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class CloseSession:
    """Close the registry session (shutdown): the ephemeral nodes vanish at once."""


LegacyOutput = RegistryCall | StartFetchers | StopFetchers | CloseSession | ArmTimer | CancelTimer | LogEvent


@dataclass(frozen=True, slots=True)
class _Sleep:
    ms: int


class _AttemptFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class _Fetcher:
    thread: str
    start_offset: int
    start_ms: int


Task = Generator[RegistryOp | _Sleep, Result | None, None]

BACKOFF_KEY = "rebalance_backoff"
AUTOCOMMIT_KEY = "auto_commit"


class LegacyConsumer(StepOutputs):
    def __init__(self, config: LegacyConfig, records_per_s: int = RECORDS_PER_S, log_start_ms: int = 0) -> None:
        self.config = config
        self.layout = Layout(config.group_id)
        self.records_per_s = records_per_s
        self.log_start_ms = log_start_ms  # when the synthetic logs began to be written
        self.phase = Phase.WAITING_FOR_SESSION
        self.session_id = 0
        self.owned: dict[TopicPartition, str] = {}  # claimed in this session: partition -> thread id
        self.fetchers: dict[TopicPartition, _Fetcher] = {}
        self.committed: dict[TopicPartition, int] = {}  # what this consumer last wrote or read
        self.assignment: ThreadAssignment | None = None  # the last whole assignment it computed
        self.assignment_topics: dict[str, int] = {}  # the partition counts it computed it over
        self.rebalances = 0  # rebalances that ended with the claims in place
        self.gave_up = 0  # rebalances abandoned after rebalance.max.retries attempts
        self.attempts_failed = 0  # attempts that failed (a claim conflict, the registry read changing under it)
        self.reads = 0
        self.writes = 0
        self._task: Task | None = None
        self._task_kind = ""
        self._awaiting = 0  # the op id the task waits for (0: none)
        self._op_seq = 0
        self._sleep_seq = 0
        self._pending_trigger: str | None = None

    # ------------------------------------------------------------------ inputs

    def on_session(self, event: SessionEvent, now_ms: int) -> list[LegacyOutput]:
        self._begin(now_ms)
        if self.phase is not Phase.CLOSED:
            if event.state is SessionState.EXPIRED:
                self._session_expired()
            elif event.state is SessionState.CONNECTED and event.session_id != self.session_id:
                self.session_id = event.session_id
                self._run(self._register(), "register")
        return self._end()

    def on_watch(self, event: WatchEvent, now_ms: int) -> list[LegacyOutput]:
        self._begin(now_ms)
        if self.phase is not Phase.CLOSED:
            self._log(events.ZkWatchFired, watch=event.type.value, path=event.path)
            if self._wants(event):
                self._request_rebalance(f"{event.type.value} {event.path}")
        return self._end()

    def on_result(self, op_id: int, result: Result, now_ms: int) -> list[LegacyOutput]:
        self._begin(now_ms)
        if op_id == self._awaiting and self._task is not None:
            self._awaiting = 0
            if result.error is RegistryError.SESSION_EXPIRED:
                self._session_expired()
            else:
                self._resume(result)
        return self._end()

    def on_timer(self, key: TimerKey, now_ms: int) -> list[LegacyOutput]:
        self._begin(now_ms)
        if key[0] == BACKOFF_KEY and key[1] == self._sleep_seq and self._task is not None:
            self._resume(None)
        elif key[0] == AUTOCOMMIT_KEY and self.phase is Phase.FETCHING and self._task is None:
            self._run(self._auto_commit(), "auto_commit")
        return self._end()

    def close(self, now_ms: int) -> list[LegacyOutput]:
        """Shut down as Kafka 0.8 did: stop the fetchers, commit, close the session."""
        self._begin(now_ms)
        if self.phase is not Phase.CLOSED:
            self._task = None
            self._awaiting = 0
            self._out += [CancelTimer((AUTOCOMMIT_KEY,)), CancelTimer((BACKOFF_KEY, self._sleep_seq))]
            self._run(self._shutdown(), "shutdown")
        return self._end()

    # ------------------------------------------------------------------ what others read

    def consumed_offset(self, tp: TopicPartition, now_ms: int) -> int:
        f = self.fetchers[tp]
        return f.start_offset + max(0, now_ms - f.start_ms) * self.records_per_s // 1000

    def log_end(self, now_ms: int) -> int:
        """The synthetic logs' end: written at records_per_s since log_start_ms."""
        return max(0, now_ms - self.log_start_ms) * self.records_per_s // 1000

    @property
    def busy(self) -> bool:
        """A task runs or waits, or a rebalance is requested."""
        return self._task is not None or self._pending_trigger is not None

    # ------------------------------------------------------------------ running tasks

    def _run(self, task: Task, kind: str) -> None:
        self._task, self._task_kind = task, kind
        self._advance(task, None)

    def _resume(self, value: Result | None) -> None:
        assert self._task is not None
        self._advance(self._task, value)

    def _advance(self, task: Task, value: Result | None) -> None:
        """Run the task to its next registry operation or back-off, and ask for it."""
        try:
            step = task.send(value)
        except StopIteration:
            self._task = None
            self._after_task()
            return
        if isinstance(step, _Sleep):
            self._sleep_seq += 1
            self._out.append(ArmTimer((BACKOFF_KEY, self._sleep_seq), self._now + step.ms))
            return
        self._op_seq += 1
        self._awaiting = self._op_seq
        if is_write(step):
            self.writes += 1
        else:
            self.reads += 1
        self._out.append(RegistryCall(self._op_seq, step))

    def _after_task(self) -> None:
        if self.phase is Phase.CLOSED:
            return
        if self._pending_trigger is not None:
            trigger, self._pending_trigger = self._pending_trigger, None
            self._run(self._rebalance(trigger), "rebalance")

    def _request_rebalance(self, trigger: str) -> None:
        if self.phase in (Phase.WAITING_FOR_SESSION, Phase.REGISTERING):
            return  # registering ends in a rebalance that reads the registry afresh
        if self._task is None:
            self._run(self._rebalance(trigger), "rebalance")
        elif self._pending_trigger is None:
            self._pending_trigger = trigger

    def _wants(self, event: WatchEvent) -> bool:
        if event.path == self.layout.ids:
            return event.type in (WatchType.NODE_CHILDREN_CHANGED, WatchType.NODE_DELETED)
        return event.path.startswith(BROKER_TOPICS + "/") and event.path.rpartition("/")[2] in self.config.topic_count

    def _session_expired(self) -> None:
        """The session's ephemeral nodes (registration, ownership) are gone: forget them and wait
        for the new session (Kafka's handleNewSession registers again and rebalances). As in Kafka
        0.8 (resetState clears the ownership record, not the fetchers), the fetchers run on until
        the new session's rebalance stops them in its step 1, and what they consumed is not
        committed: partitions the others may already fetch. That is the zombie window."""
        if self.session_id == 0:
            return  # heard of already (from a result and from the session's own event)
        self._log(events.ZkSessionExpired, session_id=self.session_id,
                  fetching=_pairs(self.fetchers))
        self._task = None
        self._awaiting = 0
        self._pending_trigger = None
        self._out.append(CancelTimer((AUTOCOMMIT_KEY,)))
        self.owned = {}
        self.session_id = 0
        self.phase = Phase.WAITING_FOR_SESSION

    # ------------------------------------------------------------------ the tasks

    def _register(self) -> Task:
        self.phase = Phase.REGISTERING
        cfg = self.config
        reg = Registration(dict(sorted(cfg.topic_count.items())), self._now)
        result = yield Create(self.layout.consumer(cfg.consumer_id), reg.encode(), ephemeral=True, makepath=True)
        assert result is not None
        if result.error is RegistryError.NODE_EXISTS:  # the previous session's node, not yet expired
            yield Delete(self.layout.consumer(cfg.consumer_id))
            yield Create(self.layout.consumer(cfg.consumer_id), reg.encode(), ephemeral=True, makepath=True)
        self._log(events.ZkRegistered, session_id=self.session_id, subscription=reg.subscription)
        yield from self._rebalance("registered")

    def _rebalance(self, trigger: str) -> Task:
        """syncedRebalance: up to rebalance.max.retries attempts, rebalance.backoff.ms apart."""
        cfg = self.config
        reads, writes = self.reads, self.writes
        self.phase = Phase.REBALANCING
        reason = ""
        for attempt in range(1, cfg.rebalance_max_retries + 1):
            self._log(events.ZkRebalanceBegun, attempt=attempt, trigger=trigger)
            try:
                yield from self._attempt(attempt)
            except _AttemptFailed as failed:
                reason = failed.reason
                self.attempts_failed += 1
                self._stop_fetchers()
                self._log(events.ZkRebalanceAttemptFailed, attempt=attempt, reason=reason,
                          backoff_ms=cfg.rebalance_backoff_ms)
                self.phase = Phase.BACKING_OFF
                yield _Sleep(cfg.rebalance_backoff_ms)
                self.phase = Phase.REBALANCING
                continue
            self.rebalances += 1
            self.phase = Phase.FETCHING
            self._log(events.ZkRebalanceDone, attempt=attempt, partitions=_pairs(self.owned),
                      reads=self.reads - reads, writes=self.writes - writes)
            if cfg.auto_commit_enable:
                self._out.append(ArmTimer((AUTOCOMMIT_KEY,), self._now + cfg.auto_commit_interval_ms))
            return
        self.gave_up += 1
        self.phase = Phase.GAVE_UP
        self._log(events.ZkRebalanceFailed, attempts=cfg.rebalance_max_retries, reason=reason)

    def _attempt(self, attempt: int) -> Task:
        cfg, layout = self.config, self.layout
        # 1. stop the fetchers and clear the queues; 2. commit what they consumed (of partitions it
        # still owns: a zombie's fetchers, after its session expired, own nothing)
        offsets = self._stop_fetchers()
        if cfg.auto_commit_enable:
            yield from self._commit({tp: o for tp, o in offsets.items() if tp in self.owned})
        # 3. release ownership
        if self.owned:
            released = sorted(self.owned)
            for tp in released:
                yield Delete(layout.owner(tp.topic, tp.partition))  # NoNode: already gone (expired)
            self.owned = {}
            self._log(events.ZkOwnershipReleased, partitions=_pairs(released))
        # 4. read the consumers and the partitions, re-arming the watches
        children = yield GetChildren(layout.ids, watch=True)
        assert children is not None
        if children.error is not None:
            raise _AttemptFailed(f"cannot read {layout.ids}: {children.error.value}")
        subscriptions: dict[str, dict[str, int]] = {}
        for consumer in children.children or []:
            got = yield GetData(layout.consumer(consumer))
            assert got is not None
            if got.error is not None or got.data is None:
                raise _AttemptFailed(f"consumer {consumer} vanished while the registry was read")
            try:
                subscriptions[consumer] = Registration.decode(got.data).subscription
            except ValueError as exc:
                raise _AttemptFailed(str(exc)) from None
        if cfg.consumer_id not in subscriptions:
            raise _AttemptFailed("this consumer's own registration is missing")
        counts: dict[str, int] = {}
        for topic in sorted(cfg.topic_count):
            got = yield GetData(topic_path(topic), watch=True)
            assert got is not None
            if got.error is RegistryError.NO_NODE:
                yield Exists(topic_path(topic), watch=True)  # a topic created later triggers a rebalance
                continue
            try:
                counts[topic] = decode_topic(got.data or b"")
            except ValueError as exc:
                raise _AttemptFailed(str(exc)) from None
        # 5. compute the whole assignment, every consumer for itself
        try:
            assignment = get_legacy_assignor(cfg.assignment_strategy)(counts, subscriptions)
        except RoundRobinRefused as refused:
            raise _AttemptFailed(str(refused)) from None
        self.assignment, self.assignment_topics = assignment, counts
        self._log(events.ZkAssignmentComputed, attempt=attempt, consumers=sorted(subscriptions),
                  assignment={t: _pairs(ps) for t, ps in assignment.items() if ps})
        mine = {tp: thread for thread, tps in assignment.items()
                if thread.rpartition("-")[0] == cfg.consumer_id for tp in tps}
        # 6. claim ownership; a node still there means its previous owner has not released it yet
        claimed: list[TopicPartition] = []
        conflicts: list[TopicPartition] = []
        for tp in sorted(mine):
            got = yield Create(layout.owner(tp.topic, tp.partition), mine[tp].encode(), ephemeral=True, makepath=True)
            assert got is not None
            (claimed if got.ok else conflicts).append(tp)
        if conflicts:
            for tp in claimed:
                yield Delete(layout.owner(tp.topic, tp.partition))
            self._log(events.ZkClaimConflict, attempt=attempt, partitions=_pairs(conflicts))
            raise _AttemptFailed(f"{len(conflicts)} partition(s) still owned by another consumer thread")
        self.owned = mine
        self._log(events.ZkOwnershipClaimed, attempt=attempt, partitions=_pairs(claimed))
        # 7. restart the fetchers at the committed offsets (none: auto.offset.reset)
        start: dict[TopicPartition, int] = {}
        reset: list[list[Any]] = []
        for tp in sorted(mine):
            got = yield GetData(layout.offset(tp.topic, tp.partition))
            assert got is not None
            committed = _offset(got)
            if committed is None:
                committed = 0 if cfg.auto_offset_reset == "smallest" else self.log_end(self._now)
                reset.append([tp.topic, tp.partition, committed])
            start[tp] = self.committed[tp] = committed  # (0.8 checkpointed where it started: no commit until it moves)
        if reset:
            self._log(events.ZkOffsetsReset, policy=cfg.auto_offset_reset, offsets=reset)
        self.fetchers = {tp: _Fetcher(mine[tp], start[tp], self._now) for tp in start}
        self._out.append(StartFetchers(start, dict(mine)))
        self._log(events.ZkFetchersStarted, offsets=[[tp.topic, tp.partition, o] for tp, o in sorted(start.items())])

    def _auto_commit(self) -> Task:
        offsets = {tp: self.consumed_offset(tp, self._now) for tp in self.fetchers}
        yield from self._commit(offsets)
        if self.phase is Phase.FETCHING:
            self._out.append(ArmTimer((AUTOCOMMIT_KEY,), self._now + self.config.auto_commit_interval_ms))

    def _shutdown(self) -> Task:
        offsets = self._stop_fetchers()
        if self.config.auto_commit_enable and self.owned:
            yield from self._commit(offsets)
        self.phase = Phase.CLOSED
        self.owned = {}
        self._out.append(CloseSession())

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> Task:
        """Write each changed offset to /consumers/<group>/offsets/<topic>/<partition> (Kafka
        0.8.2 skipped unchanged ones)."""
        written: list[list[Any]] = []
        for tp, offset in sorted(offsets.items()):
            if self.committed.get(tp) == offset:
                continue
            path = self.layout.offset(tp.topic, tp.partition)
            got = yield SetData(path, str(offset).encode())
            assert got is not None
            if got.error is RegistryError.NO_NODE:
                got = yield Create(path, str(offset).encode(), makepath=True)
                assert got is not None
                if got.error is RegistryError.NODE_EXISTS:
                    yield SetData(path, str(offset).encode())
            self.committed[tp] = offset
            written.append([tp.topic, tp.partition, offset])
        if written:
            self._log(events.ZkOffsetsCommitted, offsets=written)

    def _stop_fetchers(self) -> dict[TopicPartition, int]:
        """Stop every fetcher; the offsets they had consumed."""
        offsets = {tp: self.consumed_offset(tp, self._now) for tp in self.fetchers}
        if self.fetchers:
            self._out.append(StopFetchers(sorted(self.fetchers)))
            self._log(events.ZkFetchersStopped, partitions=_pairs(self.fetchers))
            self.fetchers = {}
        return offsets

    def _log(self, cls: Any, **fields: Any) -> None:
        if self.log_events:
            self._emit_log(cls(self.config.group_id, self.config.consumer_id, **fields))


def _pairs(partitions: Any) -> list[list[Any]]:
    return [[tp.topic, tp.partition] for tp in sorted(partitions)]


def _offset(result: Result) -> int | None:
    """The committed offset in an offsets node, None if there is none."""
    if result.error is None and result.data is not None and result.data.strip().isdigit():
        return int(result.data)
    return None
