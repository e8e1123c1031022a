"""The load a durability round puts on a coordinator, the ledger of what was acknowledged, and the
check that a restarted coordinator still has it.

- `ProducerClient`: the project's idempotent producer (consumer/producer.py's ProducerMachine,
  acks=-1, one batch in flight per partition) on one socket, sending batch after batch; every
  acknowledged record goes into the ledger with the offset it was acknowledged at.
- `commit_loop`: a simple consumer's OffsetCommits (generation -1), one at a time, each of a higher
  offset than the last; the ledger keeps the highest acknowledged and the highest sent.
- `verify`: reads every partition from offset 0 and every group's committed offsets, and counts
  acknowledged records that are missing or changed, and commits that went back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from grouplab.consumer.coordinator import Send
from grouplab.consumer.producer import Acked, ProduceFailed, ProducerConfig, ProducerFenced, ProducerMachine, ProducerReady
from grouplab.admin import AdminClient, AdminError
from grouplab.protocol import schema
from grouplab.protocol.effects import ArmTimer, CancelTimer, wall_clock_ms
from grouplab.protocol.framing import FrameReader, encode_request, read_response
from grouplab.protocol.messages import API, Record, RequestHeader
from grouplab.protocol.types import TopicPartition

CommitKey = tuple[str, str, int]  # (group, topic, partition)
_CLIENT_ERRORS = (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, EOFError)


@dataclass
class Ledger:
    """Everything a round's clients were told was done."""

    records: dict[TopicPartition, dict[int, bytes]] = field(default_factory=dict)  # offset -> value
    commits: dict[CommitKey, int] = field(default_factory=dict)  # highest acknowledged offset
    sent: dict[CommitKey, int] = field(default_factory=dict)  # highest offset ever sent
    commit_requests: int = 0  # acknowledged OffsetCommit requests
    commit_ms: list[float] = field(default_factory=list)  # their round trips
    batch_ms: list[float] = field(default_factory=list)  # produce batches: send to acknowledgement
    failed_batches: int = 0

    def record_count(self) -> int:
        return sum(len(r) for r in self.records.values())


@dataclass
class Losses:
    """What a restarted coordinator no longer has of a ledger."""

    records_checked: int = 0
    records_lost: int = 0  # acknowledged, and missing or different at its offset
    commit_keys_checked: int = 0
    commits_lost: int = 0  # (group, partition) whose committed offset is below the last acknowledged one
    commits_phantom: int = 0  # committed offset above anything ever sent: not lost, wrong
    errors: list[str] = field(default_factory=list)

    def add(self, other: "Losses") -> None:
        self.records_checked += other.records_checked
        self.records_lost += other.records_lost
        self.commit_keys_checked += other.commit_keys_checked
        self.commits_lost += other.commits_lost
        self.commits_phantom += other.commits_phantom
        self.errors += other.errors[:5]


class ProducerClient(asyncio.Protocol):
    """ProducerMachine over one loopback connection, producing to `partitions` until closed."""

    def __init__(self, ledger: Ledger, partitions: list[TopicPartition], batch_records: int = 20,
                 value_bytes: int = 100, client_id: str = "durability-producer") -> None:
        self.ledger = ledger
        self.partitions = partitions
        self.batch_records = batch_records
        self.value_bytes = value_bytes
        self.client_id = client_id
        self.machine = ProducerMachine(ProducerConfig(client_id=client_id), log_events=False)
        self.closed = asyncio.Event()
        self._transport: asyncio.Transport | None = None
        self._reader = FrameReader(64 * 1024 * 1024)
        self._apis: dict[int, str] = {}
        self._timers: dict[Any, asyncio.TimerHandle] = {}
        self._batches: dict[int, tuple[list[bytes], float]] = {}  # batch id -> values, send time
        self._sequence = 0

    async def start(self, host: str, port: int) -> "ProducerClient":
        await asyncio.get_running_loop().create_connection(lambda: self, host, port)
        self._carry(self.machine.start(wall_clock_ms()))
        return self

    def close(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        if self._transport is not None:
            self._transport.abort()

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        for frame in self._reader.feed(data):
            cid, raw = read_response(frame)
            api = self._apis.pop(cid, None)
            if api is not None:
                body: Any = schema.decode(API[api].response, raw, "body")
                self._carry(self.machine.on_response(cid, body, wall_clock_ms()))

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self.closed.set()

    # ------------------------------------------------------------------ the machine's outputs

    def _carry(self, outputs: list[Any]) -> None:
        for out in outputs:
            if isinstance(out, Send):
                if self._transport is not None:
                    self._apis[out.correlation_id] = out.api
                    header = RequestHeader(out.api, API[out.api].max_version, out.correlation_id, self.client_id)
                    self._transport.write(encode_request(header, out.body))
            elif isinstance(out, ArmTimer):
                old = self._timers.pop(out.key, None)
                if old is not None:
                    old.cancel()
                delay = max(0, out.deadline_ms - wall_clock_ms()) / 1000
                self._timers[out.key] = asyncio.get_running_loop().call_later(delay, self._fire, out.key)
            elif isinstance(out, CancelTimer):
                handle = self._timers.pop(out.key, None)
                if handle is not None:
                    handle.cancel()
            elif isinstance(out, ProducerReady):
                for tp in self.partitions:
                    self._send_next(tp)
            elif isinstance(out, Acked):
                values, sent = self._batches.pop(out.batch_id)
                self.ledger.batch_ms.append((time.perf_counter() - sent) * 1000)
                log = self.ledger.records.setdefault(out.tp, {})
                for i, value in enumerate(values):
                    log[out.base_offset + i] = value
                self._send_next(out.tp)
            elif isinstance(out, ProduceFailed):
                self._batches.pop(out.batch_id, None)
                self.ledger.failed_batches += 1
                self._send_next(out.tp)
            elif isinstance(out, ProducerFenced):
                self.close()

    def _fire(self, key: Any) -> None:
        self._timers.pop(key, None)
        self._carry(self.machine.on_timer(key, wall_clock_ms()))

    def _send_next(self, tp: TopicPartition) -> None:
        if self._transport is None:
            return
        values = []
        for _ in range(self.batch_records):
            self._sequence += 1
            values.append(f"{self.client_id}/{tp.topic}-{tp.partition}/{self._sequence}/".encode()
                          .ljust(self.value_bytes, b"."))
        batch_id, outputs = self.machine.send(tp, [Record(value=v) for v in values], wall_clock_ms())
        self._batches[batch_id] = (values, time.perf_counter())
        self._carry(outputs)


async def commit_loop(host: str, port: int, ledger: Ledger, group: str, partitions: list[TopicPartition],
                      first_offset: int = 1, count: int | None = None) -> None:
    """Commit `first_offset`, `first_offset + 1`, ... for every partition, one OffsetCommit at a
    time, until the connection fails, `count` commits were answered, or the task is cancelled."""
    offset = first_offset
    with contextlib.suppress(*_CLIENT_ERRORS):
        async with AdminClient(host, port, client_id=f"committer-{group}") as admin:
            while count is None or offset < first_offset + count:
                keys = [(group, tp.topic, tp.partition) for tp in partitions]
                for key in keys:
                    ledger.sent[key] = offset
                started = time.perf_counter()
                codes = await admin.commit_offsets(group, {tp: offset for tp in partitions})
                ledger.commit_ms.append((time.perf_counter() - started) * 1000)
                if all(code == 0 for code in codes.values()):
                    ledger.commit_requests += 1
                    for key in keys:
                        ledger.commits[key] = offset
                offset += 1


async def read_partition(admin: AdminClient, tp: TopicPartition) -> tuple[dict[int, bytes | None], str | None]:
    """Every record of a partition from offset 0, and what stopped the read early, if anything."""
    records: dict[int, bytes | None] = {}
    offset = 0
    while True:
        try:
            part = await admin.fetch(tp.topic, tp.partition, offset)
        except AdminError as exc:
            return records, f"{tp}: Fetch error {exc}"
        if part.error_code:
            return records, f"{tp}: Fetch error {part.error_code}"
        if not part.records:
            return records, None
        for r in part.records:
            records[r.offset] = r.value
        offset = part.records[-1].offset + 1


async def verify(host: str, port: int, ledger: Ledger) -> Losses:
    """Count what the coordinator at host:port no longer has of `ledger` (later commits may win)."""
    losses = Losses()
    async with AdminClient(host, port, client_id="durability-check") as admin:
        for tp, acked in ledger.records.items():
            found, error = await read_partition(admin, tp)
            if error is not None and acked:
                losses.errors.append(error)
            losses.records_checked += len(acked)
            losses.records_lost += sum(1 for offset, value in acked.items() if found.get(offset) != value)
        groups: dict[str, list[TopicPartition]] = {}
        for group, topic, partition in ledger.sent:
            groups.setdefault(group, []).append(TopicPartition(topic, partition))
        for group, tps in groups.items():
            try:
                committed = await admin.fetch_offsets(group, tps)
            except AdminError as exc:
                losses.errors.append(f"{group}: OffsetFetch error {exc}")
                committed = {}
            for tp in tps:
                key = (group, tp.topic, tp.partition)
                got = committed.get(tp, -1)
                if key in ledger.commits:
                    losses.commit_keys_checked += 1
                    losses.commits_lost += got < ledger.commits[key]
                losses.commits_phantom += got > ledger.sent[key]
    return losses
