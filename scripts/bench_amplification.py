#!/usr/bin/env python3
"""Benchmark (issue 11): does any answer hold the coordinator long enough to starve heartbeats?

A coordinator runs in its own process; in this one, a group of three real consumers
(session.timeout.ms=6000, heartbeat.interval.ms=500) heartbeats over loopback while a separate raw
connection replays the issue's amplifying requests and their worst cases with distinct entries,
each just under socket.request.max.bytes, one at a time, a second apart. For each request: its
size, the answer's size (or the error that replaced it), how long it took to be answered, and the
longest any member's heartbeat waited (sent → answered) while it was in the coordinator. The
target: no heartbeat waits 1 s. Prints a table and appends it to docs/benchmarks.md.

With --baseline REF, the same replay against the coordinator of git REF (its own code, in a
temporary worktree), after this tree's, and both tables side by side.

    scripts/bench_amplification.py [--rounds 1] [--no-write]
    scripts/bench_amplification.py --baseline 50f61af [--rounds 1] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

from grouplab.consumer.client import GroupMemberClient  # noqa: E402
from grouplab.consumer.config import ConsumerConfig  # noqa: E402
from grouplab.consumer.coordinator import MemberState  # noqa: E402
from grouplab.admin import AdminClient, AdminError  # noqa: E402
import msgpack  # noqa: E402

from grouplab.protocol import schema  # noqa: E402
from grouplab.protocol.framing import encode_request, encode_response, read_response  # noqa: E402
from grouplab.protocol.messages import (  # noqa: E402
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FetchedRecord,
    FetchPartitionResponse,
    FetchResponse,
    FetchTopicResponse,
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    RecordHeader,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    MetadataRequest,
    MetadataRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    Record,
    RecordBatch,
    RequestHeader,
)

REQUEST_LIMIT = 1024 * 1024  # socket.request.max.bytes, the default of both trees
SETUP = ["group.initial.rebalance.delay.ms=0"]
WIDE_PARTITIONS = 90_000  # a topic whose Metadata answer (~3.9 MB) is just under this tree's limit
BURST = 20
LONG = "x" * 249  # the longest legal topic name


# ----------------------------------------------------------------------------- the requests


def just_under_the_limit(api: str, make: Callable[[int], Any]) -> tuple[Any, int]:
    """make(n) for the largest n whose frame fits socket.request.max.bytes (entries of one size:
    two encodings past msgpack's largest array header tell the size of one), and n."""
    def size(n: int) -> int:
        return len(encode_request(RequestHeader(api, 0, 1, "amplifier"), make(n))) - 4

    base = 1 << 16
    n = base + (REQUEST_LIMIT - size(base)) // (size(base + 1) - size(base))
    while size(n) > REQUEST_LIMIT:
        n -= 1
    return make(n), n


@dataclass
class Case:
    name: str
    frames: list[bytes]  # sent together; the last answer ends the case


def cases() -> list[Case]:
    out: list[Case] = []

    def add(name: str, api: str, make: Callable[[int], Any]) -> None:
        body, n = just_under_the_limit(api, make)
        out.append(Case(name.format(n=f"{n:,}"), [encode_request(RequestHeader(api, 0, len(out) + 1, "amplifier"), body)]))

    def add_one(name: str, api: str, body: Any) -> None:
        out.append(Case(name, [encode_request(RequestHeader(api, 0, len(out) + 1, "amplifier"), body)]))

    first = 1 << 16  # partition numbers of one msgpack size
    add("Metadata: one topic × {n}", "Metadata", lambda n: MetadataRequest([MetadataRequestTopic("t")] * n))
    add("Metadata: {n} distinct new topics (auto-create on)", "Metadata",
        lambda n: MetadataRequest([MetadataRequestTopic(f"new{i:07d}") for i in range(n)]))
    add("Metadata: {n} distinct unknown topics (no auto-create)", "Metadata",
        lambda n: MetadataRequest([MetadataRequestTopic(f"unk{i:07d}") for i in range(n)], allow_auto_topic_creation=False))
    add_one("Metadata: one topic of 1,000,000 partitions", "Metadata", MetadataRequest([MetadataRequestTopic("big")]))
    add("DescribeGroups: one id × {n}", "DescribeGroups", lambda n: DescribeGroupsRequest(["g"] * n))
    add("DescribeGroups: {n} distinct ids", "DescribeGroups", lambda n: DescribeGroupsRequest([f"{i:07d}" for i in range(n)]))
    add("OffsetFetch: partition [0] × {n}", "OffsetFetch",
        lambda n: OffsetFetchRequest("other", [OffsetFetchRequestTopic("t", [0] * n)]))
    add("OffsetFetch: {n} distinct partitions", "OffsetFetch",
        lambda n: OffsetFetchRequest("other", [OffsetFetchRequestTopic("t", list(range(first, first + n)))]))
    add("Fetch: one partition × {n}, max_bytes 1", "Fetch",
        lambda n: FetchRequest([FetchTopic("t", [FetchPartition(0, 0)] * n)], max_bytes=1))
    add("Fetch: {n} distinct partitions of an unknown topic", "Fetch",
        lambda n: FetchRequest([FetchTopic(LONG, [FetchPartition(p, 0, 0) for p in range(first, first + n)])]))
    add("Produce: {n} partitions of an unknown topic", "Produce", lambda n: ProduceRequest([ProduceTopicData(LONG, [
        ProducePartitionData(p, RecordBatch([Record(None)])) for p in range(first, first + n)])]))
    add("LeaveGroup: {n} distinct unknown members", "LeaveGroup",
        lambda n: LeaveGroupRequest("other", [LeaveGroupRequestMember(f"{i:07d}") for i in range(n)]))
    wide = MetadataRequest([MetadataRequestTopic("wide")])
    out.append(Case(f"{BURST} × Metadata of a {WIDE_PARTITIONS:,}-partition topic, pipelined",
                    [encode_request(RequestHeader("Metadata", 0, len(out) + 1 + i, "amplifier"), wide) for i in range(BURST)]))
    return out


# ----------------------------------------------------------------------------- the coordinator and the group

# The coordinator of a given tree, in its own process: prints its port, serves until killed.
_SERVE = """
import asyncio, sys
tree = sys.argv[1]
sys.path.insert(0, tree)
import grouplab
assert grouplab.__file__.startswith(tree), grouplab.__file__
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.server import CoordinatorServer
async def main():
    server = await CoordinatorServer(BrokerConfig().with_overrides(sys.argv[2:]), port=0).start()
    print(server.port, flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


class Coordinator:
    def __init__(self, tree: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVE, str(tree), *SETUP], stdout=subprocess.PIPE, text=True)

    def __enter__(self) -> int:
        assert self.proc.stdout is not None
        return int(self.proc.stdout.readline())

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class HeartbeatWaits:
    """Each member's heartbeats, sent → answered (perf_counter), read at the client's driver. A
    heartbeat never answered (the member gave up on it, or dropped the connection) waited until
    it was given up."""

    def __init__(self) -> None:
        self.sent: dict[tuple[int, int], float] = {}
        self.done: list[tuple[float, float]] = []

    def _give_up(self, client: GroupMemberClient) -> None:
        now = time.perf_counter()
        for key in [k for k in self.sent if k[0] == id(client)]:
            self.done.append((self.sent.pop(key), now))

    def watch(self, client: GroupMemberClient) -> None:
        driver, shell, waits = client.driver, client.driver.transport, self

        class Tap:
            def send(self, epoch: int, request: Any) -> None:
                if request.api == "Heartbeat":
                    waits._give_up(client)  # one in flight at a time: a new one replaces an unanswered one
                    waits.sent[(id(client), request.correlation_id)] = time.perf_counter()
                shell.send(epoch, request)

            def disconnect(self) -> None:
                waits._give_up(client)
                shell.disconnect()

            def connect(self, done: Any) -> None:
                shell.connect(done)

        driver.transport = Tap()
        on_response = driver.on_response

        def answered(correlation_id: int, body: Any) -> None:
            sent = waits.sent.pop((id(client), correlation_id), None)
            if sent is not None:
                waits.done.append((sent, time.perf_counter()))
            on_response(correlation_id, body)

        driver.on_response = answered  # type: ignore[method-assign]

    def longest_during(self, start: float, end: float) -> float:
        """The longest wait of a heartbeat that was waiting at some moment in [start, end]."""
        now = time.perf_counter()
        spans = self.done + [(sent, now) for sent in self.sent.values()]
        return max([b - a for a, b in spans if a <= end and b >= start] or [0.0])


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, int]:
    """(size, error_code) of the next answer. Only small ones are decoded (every error is): this
    process is also the members', whose heartbeats must not wait for it to decode megabytes."""
    (size,) = struct.unpack(">I", await asyncio.wait_for(reader.readexactly(4), 300))
    payload = await asyncio.wait_for(reader.readexactly(size), 300)
    if size > 65_536:
        return size, 0
    _, body = read_response(payload)
    return size, body.get("error_code", 0) if isinstance(body, dict) else 0


class MemberEvents:
    """The members' event-log lines that tell why a group rebalanced."""

    WATCHED = ("request_timed_out", "heartbeat_failed", "coordinator_disconnected", "heartbeat_session_expired")

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def emit(self, ev: Any) -> None:
        if ev.event in self.WATCHED:
            self.seen[ev.event] = self.seen.get(ev.event, 0) + 1


@dataclass
class Row:
    name: str
    request_bytes: int
    answer_bytes: int
    answer: str
    seconds: float
    heartbeat_wait: float
    rebalanced: bool


async def replay(port: int, rounds: int) -> tuple[list[Row], float, int, dict[str, int]]:
    the_cases = cases()  # before the members start: encoding them holds this process for seconds
    async with AdminClient("127.0.0.1", port) as admin:
        await admin.create_topics({"t": 3, "wide": WIDE_PARTITIONS})
        try:
            await admin.create_topics({"big": 1_000_000})
        except AdminError as exc:  # a tree that never makes a topic no Metadata answer can describe
            print(f"  (this tree refuses the 1,000,000-partition topic at creation: {exc}; Metadata then "
                  "auto-creates 'big' with num.partitions)", flush=True)
        for _ in range(10):
            await admin.produce("t", 0, [b"x" * 1000] * 90)  # ~900 KB to fetch
    config = dict(group_id="g", topics=["t"], session_timeout_ms=6000, heartbeat_interval_ms=500)
    member_events = MemberEvents()
    clients = [GroupMemberClient(ConsumerConfig(client_id=f"member-{i}", **config), port=port, events=member_events)
               for i in range(3)]
    waits = HeartbeatWaits()
    for c in clients:
        waits.watch(c)
    await asyncio.gather(*(c.start() for c in clients))
    await asyncio.gather(*(c.wait_for(lambda c: c.state is MemberState.STABLE, 30) for c in clients))
    generation = clients[0].generation_id
    rows: dict[str, Row] = {}
    await asyncio.sleep(1.0)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _ in range(rounds):
            for case in the_cases:
                before = [c.generation_id for c in clients]
                start = time.perf_counter()
                for data in case.frames:
                    writer.write(data)
                await writer.drain()
                answer_bytes, answer = 0, ""
                for _frame in case.frames:
                    size, code = await read_answer(reader)
                    answer_bytes = max(answer_bytes, size)
                    answer = "answered" if code == 0 else f"error {code}"
                seconds = time.perf_counter() - start
                await asyncio.sleep(1.0)  # the heartbeats sent meanwhile are answered; the next starts apart
                wait = waits.longest_during(start, start + seconds)
                rebalanced = [c.generation_id for c in clients] != before or any(
                    c.state is not MemberState.STABLE for c in clients)
                row = Row(case.name, sum(len(f) - 4 for f in case.frames), answer_bytes, answer, seconds, wait, rebalanced)
                old = rows.get(case.name)
                if old is None or row.heartbeat_wait > old.heartbeat_wait:
                    rows[case.name] = row
                print(f"  {row.name}: {row.answer_bytes:,} bytes ({row.answer}) in {row.seconds:.3f} s; "
                      f"longest heartbeat wait {row.heartbeat_wait:.3f} s{' (rebalanced)' if rebalanced else ''}", flush=True)
    finally:
        writer.close()
        await asyncio.gather(*(c.close(leave=False) for c in clients))
    longest = max((b - a for a, b in waits.done), default=0.0)  # (those in flight at the end not counted)
    return list(rows.values()), longest, clients[0].generation_id - generation, member_events.seen


def table(rows: list[Row]) -> str:
    out = ["| request (just under 1 MiB) | request bytes | answer bytes | answer | answered in s | longest heartbeat wait s |",
           "|---|---:|---:|---|---:|---:|"]
    for r in rows:
        out.append(f"| {r.name} | {r.request_bytes:,} | {r.answer_bytes:,} | {r.answer} | {r.seconds:.3f} | "
                   f"{r.heartbeat_wait:.3f}{' (rebalanced)' if r.rebalanced else ''} |")
    return "\n".join(out)


def side_by_side(ref: str, base: list[Row], this: list[Row]) -> str:
    out = [f"| request (just under 1 MiB) | {ref}: answer bytes | {ref}: answered in s | {ref}: longest heartbeat wait s "
           f"| this tree: answer bytes | this tree: answered in s | this tree: longest heartbeat wait s |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    by_name = {r.name: r for r in base}
    for t in this:
        b = by_name[t.name]
        out.append(f"| {t.name} | {b.answer_bytes:,} ({b.answer}) | {b.seconds:.3f} | {b.heartbeat_wait:.3f}"
                   f"{' (rebalanced)' if b.rebalanced else ''} | {t.answer_bytes:,} ({t.answer}) | {t.seconds:.3f} | "
                   f"{t.heartbeat_wait:.3f}{' (rebalanced)' if t.rebalanced else ''} |")
    return "\n".join(out)


# ----------------------------------------------------------------------------- encoding at the limit


def _at_the_limit(limit: int, entry: Callable[[int], Any], body: Callable[[list[Any]], Any]) -> tuple[Any, int]:
    """(body(entries), how many) whose encoding is as close under `limit` as whole entries allow."""
    one = len(encode_response(0, body([entry(1 << 16)] * 2))) - len(encode_response(0, body([entry(1 << 16)])))
    n = limit // one
    while len(encode_response(0, body([entry((1 << 16) + i) for i in range(n)]))) - 4 > limit:
        n -= n // 100 + 1
    return body([entry((1 << 16) + i) for i in range(n)]), n


def _timed(action: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def encoding_at_the_limit(limit: int, repeat: int = 3) -> str:
    """How long encoding an answer of `limit` bytes holds the loop, by the shape of its entries
    (the smaller the entries, the more objects per byte), with the packing hook and as before
    (schema.encode, then packb); each the best of `repeat`."""
    def records(es: list[Any]) -> FetchResponse:
        return FetchResponse(responses=[FetchTopicResponse("t", [FetchPartitionResponse(0, records=es)])])

    shapes = [
        ("Metadata partitions", _at_the_limit(limit, lambda i: MetadataResponsePartition(i, 0),
                                              lambda es: MetadataResponse(topics=[MetadataResponseTopic("t", partitions=es)]))),
        ("DescribeGroups groups (Dead)", _at_the_limit(limit, lambda i: DescribedGroup(f"{i:07d}", group_state="Dead"),
                                                       lambda es: DescribeGroupsResponse(groups=es))),
        ("OffsetFetch partitions", _at_the_limit(limit, lambda i: OffsetFetchResponsePartition(i, -1),
                                                 lambda es: OffsetFetchResponse(topics=[OffsetFetchResponseTopic("t", es)]))),
        ("Fetch records of 1-byte values", _at_the_limit(limit, lambda i: FetchedRecord(i, 1_700_000_000_000, b"x"), records)),
        # Only Fetch answers hold record headers, and it keeps its records within half the limit.
        ("empty record headers (the smallest message), half the limit: Fetch's bound", _at_the_limit(
            limit // 2, lambda i: RecordHeader("", None), lambda es: records([FetchedRecord(0, 0, None, None, es)]))),
    ]
    rows = [f"| an answer of at most {limit:,} bytes made of | entries | bytes each | packing hook, s | "
            f"as before (schema.encode + packb), s |", "|---|---:|---:|---:|---:|"]
    for name, (body, n) in shapes:
        size = len(encode_response(0, body)) - 4
        new = min(_timed(lambda: encode_response(0, body, limit)) for _ in range(repeat))
        old = min(_timed(lambda: msgpack.packb(schema.encode({"correlation_id": 0, "body": body}), use_bin_type=True))
                  for _ in range(repeat))
        rows.append(f"| {name} | {n:,} | {size / n:.0f} | {new:.3f} | {old:.3f} |")
        print(f"  {rows[-1]}", flush=True)
    return "\n".join(rows)


def measure(tree: Path, rounds: int) -> tuple[list[Row], float, int, dict[str, int]]:
    with Coordinator(tree) as port:
        return asyncio.run(replay(port, rounds))


def _logged(seen: dict[str, int]) -> str:
    return "; the members logged " + ", ".join(f"{n} × {name}" for name, n in sorted(seen.items())) if seen else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1, help="replays of the whole list; each row keeps its worst")
    ap.add_argument("--baseline", metavar="REF", help="also replay against the coordinator of git REF")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    limit = 4 * 1024 * 1024  # grouplab.response.max.bytes' default
    print(f"encoding an answer of {limit:,} bytes:", flush=True)
    encoding = encoding_at_the_limit(limit)
    print("this tree:", flush=True)
    rows, longest, rebalances, seen = measure(ROOT, args.rounds)
    text = table(rows) + (f"\n\nLongest heartbeat wait over the whole replay: {longest:.3f} s; "
                          f"rebalances of the heartbeating group: {rebalances}{_logged(seen)}.")
    command = f"scripts/bench_amplification.py --rounds {args.rounds}"
    if args.baseline:
        command += f" --baseline {args.baseline}"
        with tempfile.TemporaryDirectory(prefix="bench-amplification-base-") as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), args.baseline],
                           check=True)
            try:
                print(f"{args.baseline}:", flush=True)
                base_rows, base_longest, base_rebalances, base_seen = measure(tree, args.rounds)
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        text = (side_by_side(args.baseline, base_rows, rows)
                + f"\n\nLongest heartbeat wait over the whole replay: {args.baseline} {base_longest:.3f} s "
                  f"({base_rebalances} rebalances of the group{_logged(base_seen)}), this tree {longest:.3f} s "
                  f"({rebalances}{_logged(seen)}).")
    print()
    print(text)
    print()
    print(encoding)
    if not args.no_write:
        append_to_benchmarks(
            f"\n## Amplified requests and heartbeats ({utc_stamp()})\n\n"
            f"`{command}` on {os.cpu_count()} cores, Python {platform.python_version()}. The coordinator "
            f"(default configuration but group.initial.rebalance.delay.ms=0) runs in its own process; three "
            f"consumers (session.timeout.ms=6000, heartbeat.interval.ms=500) heartbeat over loopback while one "
            f"raw connection sends each request below, a second apart (the last one: {BURST} small requests "
            f"written at once, each answered with ~3.9 MB). *Answered in* is from the first byte sent to the "
            f"last byte of the (last) answer read; *longest heartbeat wait* is the longest any member's "
            f"heartbeat waited for its answer while the request was in the coordinator. Target: under 1 s.\n\n"
            + text + "\n\nEncoding an answer at the default grouplab.response.max.bytes, in this process, by the "
            "size of its entries (more objects per byte cost more; the empty record header is the smallest "
            "message there is), the best of three:\n\n" + encoding)


if __name__ == "__main__":
    main()
