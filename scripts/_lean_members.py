"""A lean load generator for scripts/bench_scale.py (issue 26): many classic-protocol members of one
group, as Kafka's perf tools are to Kafka's clients.

Each member is a non-blocking socket, its own loopback TCP connection, that speaks what
GroupMemberClient speaks to `grouplab coordinator`, with the same encodings (framing.encode_request
of the same request dataclasses; Kafka's ConsumerProtocol Subscription v3 and Assignment bytes):
JoinGroup with no member id, again with the id MEMBER_ID_REQUIRED gave it, SyncGroup (the leader's
carrying the `range` assignor's assignment of the members its JoinGroup answer listed), then a
Heartbeat every heartbeat.interval.ms; REBALANCE_IN_PROGRESS on a Heartbeat or a SyncGroup sends it
back to JoinGroup, as Kafka's eager consumer does. What it leaves out is what the coordinator never
sees: no event log, no rebalance listener, no poll loop, no Metadata request (the leader is told the
topic's partition count), request bytes made once per member and generation.

The members are spread over worker processes (2 cores: the coordinator is its own process, the
members may use the other). `time_to_stable` starts them all at once and returns when every member
holds a SyncGroup answer of the same generation, that generation's leader listed all of them, and
their assignments cover every partition exactly once (checked, not assumed).
"""

from __future__ import annotations

import heapq
import itertools
import multiprocessing as mp
import os
import select
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

import msgpack

from grouplab.consumer.assignors import get_assignor
from grouplab.protocol import consumer_protocol
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.framing import encode_request
from grouplab.protocol.messages import (
    API,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    RequestHeader,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from grouplab.protocol.types import Assignment, Subscription, TopicPartition

_LEN = struct.Struct(">I")
JOIN, SYNC, HEARTBEAT = 0, 1, 2  # a correlation id's kind is its value modulo 3
ASSIGNOR = "range"
CONNECTS_IN_FLIGHT = 3_500  # of all workers together: within the accept queue of 4096 (Worker.connect_more)


@dataclass(frozen=True)
class Plan:
    """What every worker is told: where, which group, and its share of the members."""

    port: int
    group: str
    topic: str
    partitions: int
    first: int  # index of this worker's first member (client ids m<first>...)
    count: int
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000  # max.poll.interval.ms, as GroupMemberClient sends it
    heartbeat_interval_ms: int = 3_000
    window: int = 1_000  # connects at most in flight (see Worker.connect_more)


@dataclass(frozen=True)
class Result:
    """Seconds from the start until one Stable generation, which one, and the leader's view of it."""

    s: float
    generation: int
    members: int
    members_cpu_s: float  # CPU of the worker processes from the start until their last SyncGroup answer


def _request(api: str, cid: int, client_id: str, body: Any) -> bytes:
    return encode_request(RequestHeader(api, API[api].max_version, cid, client_id), body)


class Member:
    """One member's connection and its few states: joining, syncing, stable."""

    def __init__(self, worker: "Worker", index: int) -> None:
        self.w = worker
        self.client_id = f"m{index}"
        self.member_id = ""
        self.generation = -1
        self.assignment = b""
        self.leader_members = 0  # as leader: how many members its JoinGroup answer listed
        self.seq = 0
        self.expect: dict[int, int] = {}  # correlation id -> kind, of requests still unanswered
        self.buf = bytearray()
        self.out = b""  # what the socket did not take yet
        self.connected = False
        self.beat_seq = 0  # the heartbeat timer armed last; an older one that fires does nothing
        self.first_join = worker.first_join(3, self.client_id)  # made before the start: the first cid is 3
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio's transports do
        self.fd = self.sock.fileno()

    # ------------------------------------------------------------------ sending

    def _cid(self, kind: int) -> int:
        self.seq += 1
        cid = self.seq * 3 + kind
        self.expect[cid] = kind
        return cid

    def _send(self, frame: bytes) -> None:
        if self.out:
            self.out += frame
            return
        try:
            sent = self.sock.send(frame)
        except BlockingIOError:
            sent = 0
        if sent < len(frame):
            self.out = frame[sent:]
            self.w.poller.modify(self.fd, select.EPOLLIN | select.EPOLLOUT)

    def flush(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except BlockingIOError:
            return
        self.out = self.out[sent:]
        if not self.out:
            self.w.poller.modify(self.fd, select.EPOLLIN)

    def join(self) -> None:
        self.beat_seq += 1  # no heartbeats while joining
        self.expect = {c: k for c, k in self.expect.items() if k == HEARTBEAT}  # answers to those are ignored
        cid = self._cid(JOIN)
        if not self.member_id and cid == 3:
            self._send(self.first_join)
            return
        p = self.w.plan
        self._send(_request("JoinGroup", cid, self.client_id, JoinGroupRequest(
            p.group, p.session_timeout_ms, p.rebalance_timeout_ms, self.member_id, consumer_protocol.PROTOCOL_TYPE,
            [JoinGroupRequestProtocol(ASSIGNOR, self.w.metadata(self.generation))])))

    def sync(self, assignments: list[SyncGroupRequestAssignment]) -> None:
        self._send(_request("SyncGroup", self._cid(SYNC), self.client_id, SyncGroupRequest(
            self.w.plan.group, self.generation, self.member_id, None, consumer_protocol.PROTOCOL_TYPE, ASSIGNOR,
            assignments)))

    def arm_heartbeat(self) -> None:
        self.beat_seq += 1
        self.w.later(self.w.plan.heartbeat_interval_ms / 1000, self, self.beat_seq)

    def beat(self, seq: int) -> None:
        if seq != self.beat_seq:
            return
        self._send(_request("Heartbeat", self._cid(HEARTBEAT), self.client_id,
                            HeartbeatRequest(self.w.plan.group, self.generation, self.member_id)))
        self.arm_heartbeat()

    # ------------------------------------------------------------------ receiving

    def on_connected(self) -> None:
        error = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            self.w.fail(f"{self.client_id}: connect failed ({os.strerror(error)})")
            return
        self.connected = True
        self.w.poller.modify(self.fd, select.EPOLLIN)
        self.join()

    def on_readable(self) -> None:
        try:
            data = self.sock.recv(262144)
        except BlockingIOError:
            return
        if not data:
            self.w.fail(f"{self.client_id}: the coordinator closed the connection")
            return
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            raw = msgpack.unpackb(buf[pos + 4 : pos + 4 + size], raw=False, strict_map_key=False)
            pos += 4 + size
            kind = self.expect.pop(raw["correlation_id"], None)
            if kind == JOIN:
                self.on_join(raw["body"])
            elif kind == SYNC:
                self.on_sync(raw["body"])
            elif kind == HEARTBEAT:
                self.on_heartbeat(raw["body"])
        del buf[:pos]

    def on_join(self, body: dict[str, Any]) -> None:
        code = body["error_code"]
        if code == ErrorCode.MEMBER_ID_REQUIRED.value:
            self.member_id = body["member_id"]
            self.join()
            self.w.answered += 1
            self.w.connect_more()
            return
        if code != 0:
            self.w.fail(f"{self.client_id}: JoinGroup answered {ErrorCode.from_code(code).name}")
            return
        self.generation = body["generation_id"]
        self.w.unsynced(self)
        if body["leader"] == self.member_id:
            self.leader_members = len(body["members"])
            self.sync(self.w.assign(body["members"]))
        else:
            self.sync([])

    def on_sync(self, body: dict[str, Any]) -> None:
        code = body["error_code"]
        if code == ErrorCode.REBALANCE_IN_PROGRESS.value:
            self.join()
            return
        if code != 0:
            self.w.fail(f"{self.client_id}: SyncGroup answered {ErrorCode.from_code(code).name}")
            return
        self.assignment = body["assignment"]
        self.arm_heartbeat()
        self.w.synced(self)

    def on_heartbeat(self, body: dict[str, Any]) -> None:
        code = body["error_code"]
        if code == ErrorCode.REBALANCE_IN_PROGRESS.value:
            self.join()
        elif code != 0:
            self.w.fail(f"{self.client_id}: Heartbeat answered {ErrorCode.from_code(code).name}")


class Worker:
    """One process's members on one epoll loop (no asyncio: no transport, future or task per
    connection); tells the parent each time all of them hold answers of one generation."""

    def __init__(self, plan: Plan, pipe: Connection) -> None:
        self.plan = plan
        self.pipe = pipe
        self.poller = select.epoll()
        self.closing = False
        self.cpu0 = 0.0
        self.started = self.answered = 0  # connects started; members with an answer to their first JoinGroup
        self.timers: list[tuple[float, int, Member, int]] = []  # (due, tie-break, member, its beat_seq)
        self._order = itertools.count()
        self._metadata: dict[int, bytes] = {}
        self._first = self.metadata(-1)
        self.members = [Member(self, plan.first + i) for i in range(plan.count)]
        self.by_fd = {m.fd: m for m in self.members}
        self.synced_in: dict[int, int] = {}  # member index -> generation of its last SyncGroup answer
        self.in_generation: Counter[int] = Counter()
        self.index = {id(m): i for i, m in enumerate(self.members)}

    def metadata(self, generation: int) -> bytes:
        """Subscription v3 to the one topic, owning nothing (eager: revoked before rejoining)."""
        data = self._metadata.get(generation)
        if data is None:
            data = self._metadata[generation] = consumer_protocol.encode_subscription(
                Subscription(topics=[self.plan.topic], generation_id=generation))
        return data

    def first_join(self, cid: int, client_id: str) -> bytes:
        p = self.plan
        return _request("JoinGroup", cid, client_id, JoinGroupRequest(
            p.group, p.session_timeout_ms, p.rebalance_timeout_ms, "", consumer_protocol.PROTOCOL_TYPE,
            [JoinGroupRequestProtocol(ASSIGNOR, self._first)]))

    def assign(self, members: list[dict[str, Any]]) -> list[SyncGroupRequestAssignment]:
        """The leader's work, as GroupMemberClient does it: read every subscription, run `range`."""
        subs = {m["member_id"]: consumer_protocol.decode_subscription(m["metadata"], m.get("group_instance_id"))
                for m in members}
        result = get_assignor(ASSIGNOR).assign({self.plan.topic: self.plan.partitions}, subs)
        return [SyncGroupRequestAssignment(m, consumer_protocol.encode_assignment(Assignment(sorted(ps))))
                for m, ps in result.items()]

    def later(self, delay_s: float, member: Member, seq: int) -> None:
        heapq.heappush(self.timers, (time.monotonic() + delay_s, next(self._order), member, seq))

    def unsynced(self, m: Member) -> None:
        was = self.synced_in.pop(self.index[id(m)], None)
        if was is not None:
            self.in_generation[was] -= 1

    def synced(self, m: Member) -> None:
        i = self.index[id(m)]
        self.unsynced(m)
        self.synced_in[i] = m.generation
        self.in_generation[m.generation] += 1
        if self.in_generation[m.generation] == len(self.members):
            self.pipe.send(("synced", m.generation, time.perf_counter(), time.process_time() - self.cpu0))

    def fail(self, why: str) -> None:
        if not self.closing:
            self.closing = True
            self.pipe.send(("failed", why, 0.0, 0.0))

    def report(self) -> list[tuple[str, str, int, int, bytes]]:
        return [(m.client_id, m.member_id, m.generation, m.leader_members, m.assignment) for m in self.members]

    def connect_more(self) -> None:
        """Start connects while fewer than `plan.window` of this worker's members have no answer to
        their first JoinGroup yet. 10,000 connects at once overflow the kernel's accept queue
        (net.core.somaxconn, 4096 here) before the coordinator can accept them; the dropped SYNs
        are sent again only 1 s, then 3 s, later, and that wait, not the coordinator, would be
        measured. An answer proves the coordinator accepted the connection."""
        address = ("127.0.0.1", self.plan.port)
        while self.started < len(self.members) and self.started - self.answered < self.plan.window:
            m = self.members[self.started]
            self.started += 1
            m.sock.connect_ex(address)  # EINPROGRESS: writable once connected
            self.poller.register(m.fd, select.EPOLLOUT)

    def run(self) -> None:
        """Until the parent says stop: sockets, heartbeat timers and the parent's questions."""
        control = self.pipe.fileno()
        self.poller.register(control, select.EPOLLIN)
        while True:
            timeout = max(0.0, self.timers[0][0] - time.monotonic()) if self.timers else -1
            for fd, mask in self.poller.poll(timeout):
                if fd == control:
                    if self.pipe.recv() == "report":
                        self.pipe.send(("report", self.report(), 0.0, 0.0))
                        continue
                    return
                m = self.by_fd[fd]
                if self.closing:
                    self.poller.unregister(fd)
                elif not m.connected:
                    m.on_connected()
                else:
                    if mask & select.EPOLLOUT:
                        m.flush()
                    if mask & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
                        m.on_readable()
            now = time.monotonic()
            while self.timers and self.timers[0][0] <= now:
                _, _, m, seq = heapq.heappop(self.timers)
                if not self.closing:
                    m.beat(seq)

    def close(self) -> None:
        self.closing = True
        for m in self.members:
            m.sock.close()
        self.poller.close()


def _worker_main(plan: Plan, pipe: Connection, go: Any) -> None:
    import gc

    worker = Worker(plan, pipe)
    gc.freeze()  # the members live until the end: no collector passes over them
    pipe.send(("ready", 0, 0.0, 0.0))
    go.wait()
    worker.cpu0 = time.process_time()
    worker.connect_more()
    try:
        worker.run()
    finally:
        worker.close()


def check(reports: list[tuple[str, str, int, int, bytes]], n: int, partitions: int, topic: str) -> tuple[int, int]:
    """(generation, members the leader listed) if the reports are one Stable generation covering
    every partition once; raises AssertionError saying what is wrong otherwise."""
    generations = Counter(r[2] for r in reports)
    assert len(reports) == n and len(generations) == 1, f"not one generation: {dict(generations)}"
    ids = {r[1] for r in reports}
    assert len(ids) == n, f"{n} members but {len(ids)} distinct member ids"
    leaders = [r[3] for r in reports if r[3]]
    owners: Counter[TopicPartition] = Counter()
    for r in reports:
        owners.update(consumer_protocol.decode_assignment(r[4]).partitions)
    wanted = {TopicPartition(topic, p) for p in range(partitions)}
    assert set(owners) == wanted and all(c == 1 for c in owners.values()), \
        f"assignment does not cover {partitions} partitions once: {len(owners)} distinct, {sum(owners.values())} held"
    generation = next(iter(generations))
    listed = max(leaders, default=0)
    assert listed == n, f"the leader of generation {generation} listed {listed} members, not {n}"
    return generation, listed


def time_to_stable(port: int, n: int, group: str, topic: str, partitions: int, procs: int = 2,
                   heartbeat_interval_ms: int = 3_000, timeout_s: float = 120.0) -> Result:
    """Seconds from the start of n lean members (over `procs` processes) until one Stable generation."""
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    shares = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    pipes: list[Connection] = []
    workers = []
    first = 0
    for count in shares:
        if not count:
            continue
        mine, theirs = ctx.Pipe()
        plan = Plan(port, group, topic, partitions, first, count, heartbeat_interval_ms=heartbeat_interval_ms,
                    window=max(1, CONNECTS_IN_FLIGHT // procs))
        p = ctx.Process(target=_worker_main, args=(plan, theirs, go), daemon=True)
        p.start()
        pipes.append(mine)
        workers.append(p)
        first += count
    try:
        for pipe in pipes:
            assert pipe.recv()[0] == "ready"
        t0 = time.perf_counter()
        go.set()
        latest: dict[int, tuple[int, float, float]] = {}  # worker -> (generation all its members synced in, when, CPU)
        deadline = t0 + timeout_s
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"{n} lean members not Stable within {timeout_s:.0f} s: {latest}")
            for ready in wait(pipes, left):
                assert isinstance(ready, Connection)
                what, value, when, cpu = ready.recv()
                if what == "failed":
                    raise RuntimeError(f"lean member failed: {value}")
                latest[pipes.index(ready)] = (value, when, cpu)
            gens = {g for g, _, _ in latest.values()}
            if len(latest) == len(pipes) and len(gens) == 1:
                reports = []
                for i, pipe in enumerate(pipes):
                    pipe.send("report")
                    what, value, when, cpu = pipe.recv()
                    while what != "report":  # news sent before the question: a later generation, or a failure
                        if what == "failed":
                            raise RuntimeError(f"lean member failed: {value}")
                        latest[i] = (value, when, cpu)
                        what, value, when, cpu = pipe.recv()
                    reports.extend(value)
                if len({r[2] for r in reports}) != 1:
                    continue
                generation, listed = check(reports, n, partitions, topic)
                return Result(max(w for _, w, _ in latest.values()) - t0, generation, listed,
                              sum(c for _, _, c in latest.values()))
    finally:
        for pipe in pipes:
            try:
                pipe.send("stop")
            except OSError:
                pass
        for p in workers:
            p.join(10)
            if p.is_alive():
                p.terminate()
