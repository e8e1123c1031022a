"""Crash rounds against a real coordinator process, and what each durability profile costs.

A round starts `grouplab coordinator --data-dir` in its own process under the power-cut model's
sync journal, loads it with a producer and committers over loopback, and at a random moment
stops it with SIGSTOP: from that instant it writes and answers nothing more, and the answers it
had sent still arrive. The data directory is then copied as a power cut at that instant would
leave it (powercut.py), the process is killed with SIGKILL, and two fresh coordinators check the
round's ledger: one on the killed process's own directory (what kill -9 leaves: everything the
process had written, in the OS page cache) and one on the power-cut copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from grouplab.admin import AdminClient
from grouplab.durability.load import Ledger, Losses, ProducerClient, commit_loop, verify
from grouplab.durability.powercut import CutReport, SyncTracker
from grouplab.protocol.types import TopicPartition

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
TOPIC = "durability"
_LISTENING = re.compile(r"listening on \S+:(\d+)")


@dataclass(frozen=True)
class Profile:
    """A set of durability settings (`--config NAME=VALUE` overrides of the defaults)."""

    name: str
    overrides: tuple[str, ...]
    what: str


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("defaults", (), "grouplab.log.fsync=always; partition logs never forced (Kafka's default)"),
    Profile("fsync-never", ("grouplab.log.fsync=never",), "group log not synced; partition logs never forced"),
    Profile("flush-messages-1", ("log.flush.interval.messages=1",), "group log synced; every batch synced"),
    Profile("flush-ms-1000", ("log.flush.interval.ms=1000",), "group log synced; partition logs synced each second"),
)}


class CoordinatorProcess:
    """`grouplab coordinator --port 0 --data-dir DIR` in its own process; with `journal`, under
    the power-cut model's sync journal (python -m grouplab.durability.powercut)."""

    def __init__(self, data_dir: Path, overrides: Sequence[str], run_dir: Path, journal: Path | None = None) -> None:
        self.data_dir, self.overrides, self.run_dir, self.journal = data_dir, overrides, run_dir, journal
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    async def start(self, timeout_s: float = 60.0) -> int:
        """Start it and return the port it listens on."""
        entry = ["-m", "grouplab.durability.powercut", str(self.journal)] if self.journal else ["-m", "grouplab.cli"]
        args = [sys.executable, *entry, "coordinator", "--port", "0", "--kafka-port", "off", "--data-dir", str(self.data_dir),
                "--run-dir", str(self.run_dir), *[a for o in self.overrides for a in ("--config", o)]]
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        proc = self.proc = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env={**os.environ, "COLUMNS": "1000", "PYTHONPATH": path})
        assert proc.stderr is not None
        said: list[str] = []
        deadline = time.monotonic() + timeout_s
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), max(0.1, deadline - time.monotonic()))).decode()
            if not line:
                await self.kill()
                raise RuntimeError(f"the coordinator exited before listening: {''.join(said)}")
            said.append(line)
            m = _LISTENING.search(line)
            if m:
                break
        self._drain = asyncio.create_task(_drain(proc.stderr))
        return int(m.group(1))

    def freeze(self) -> None:
        """SIGSTOP: from now on the process writes nothing and answers nothing."""
        if self.proc is not None and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    async def kill(self) -> None:
        """SIGKILL (kill -9), and wait for it."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


@dataclass
class RoundResult:
    ledger: Ledger
    crash_after_s: float
    killed: Losses  # kill -9: a restart on the process's own directory
    powercut: Losses | None = None  # the modelled power cut: a restart on the copy
    cut: CutReport | None = None


async def crash_round(profile: Profile, workdir: Path, rng: random.Random, crash_window: tuple[float, float] = (0.05, 1.0),
                      partitions: int = 4, committers: int = 2, powercut: bool = True,
                      torn: bool = False) -> RoundResult:
    """Load a fresh coordinator, crash it at a random moment in `crash_window` (seconds after the
    load started), and check the ledger after kill -9 and, with `powercut`, after the modelled cut."""
    data = workdir / "data"
    journal = workdir / "syncs.jsonl" if powercut else None
    proc = CoordinatorProcess(data, profile.overrides, workdir / "run", journal)
    port = await proc.start()
    ledger = Ledger()
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    producer = ProducerClient(ledger, tps)
    tasks: list[asyncio.Task[None]] = []
    cut: CutReport | None = None
    after = rng.uniform(*crash_window)
    try:
        async with AdminClient(HOST, port) as admin:
            await admin.create_topics({TOPIC: partitions})
        await producer.start(HOST, port)
        tasks = [asyncio.create_task(commit_loop(HOST, port, ledger, f"group-{i}", tps)) for i in range(committers)]
        await asyncio.sleep(after)
        proc.freeze()
        await asyncio.sleep(0.2)  # answers already sent arrive; nothing else can
        if journal is not None:
            cut = SyncTracker.from_journal(journal).cut(data, workdir / "powercut", random.Random(rng.random()) if torn else None)
    finally:
        await proc.kill()
        producer.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    result = RoundResult(ledger, after, await check(data, profile, workdir / "run-killed", ledger))
    if cut is not None:
        result.cut = cut
        result.powercut = await check(workdir / "powercut", profile, workdir / "run-powercut", ledger)
    return result


async def check(data_dir: Path, profile: Profile, run_dir: Path, ledger: Ledger) -> Losses:
    """Start a coordinator on `data_dir` and count what it lost of `ledger`."""
    proc = CoordinatorProcess(data_dir, profile.overrides, run_dir)
    port = await proc.start()
    try:
        return await verify(HOST, port, ledger)
    finally:
        await proc.kill()


@dataclass
class Cost:
    records: int
    seconds: float
    batch_ms: list[float] = field(default_factory=list)  # produce: batch sent to acknowledged
    commit_ms: list[float] = field(default_factory=list)  # one partition's OffsetCommit round trip

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


async def measure_cost(profile: Profile, workdir: Path, produce_s: float = 3.0, partitions: int = 8,
                       commits: int = 1000) -> Cost:
    """On a fresh coordinator process: `commits` sequential one-partition OffsetCommits with nothing
    else going on, then `produce_s` seconds of producing (one idempotent producer, a batch in flight
    per partition). Commits first: on ext4 a sync also writes out other files' unsynced data, so
    commits right after the produce phase would pay for its page cache too."""
    proc = CoordinatorProcess(workdir / "data", profile.overrides, workdir / "run")
    port = await proc.start()
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        async with AdminClient(HOST, port) as admin:
            await admin.create_topics({TOPIC: partitions})
        commit_ledger = Ledger()
        await commit_loop(HOST, port, commit_ledger, "cost", tps[:1], count=commits)
        ledger = Ledger()
        producer = ProducerClient(ledger, tps)
        started = time.perf_counter()
        await producer.start(HOST, port)
        await asyncio.sleep(produce_s)
        records, seconds = ledger.record_count(), time.perf_counter() - started
        producer.close()
        return Cost(records, seconds, ledger.batch_ms, commit_ledger.commit_ms)
    finally:
        await proc.kill()


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]
