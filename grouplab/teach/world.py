"""What the members' applications did with the records, told by offset: the lines of a delivery
run's story that the coordinator's trace cannot tell.

The trace shows commits and transactions, not records. The applications' own event logs do
(`batch_processed`: which input offsets a member processed, docs/events.md §4.5b), and the
simulator's account says how often each input record reached the output (`delivery_records`,
§4.6). Read together with the coordinator's commits, they say where a crash or a zombie left a
record processed twice or never: "m-1 processed in-1@40..44 and crashed before committing; m-0
processes in-1@40..44 again". Runs without a delivery application have none of these lines.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from grouplab.teach.narrate import Narrated, Narrator, Said

Range = tuple[str, int, int]  # input partition ("in-1"), first and last offset (inclusive)


@dataclass
class _Batch:
    ts_ms: int
    node: str  # the application's client id
    member_id: str
    ranges: list[Range]


@dataclass
class _Books:
    """The records' side of the run, as the story reaches each moment."""

    mode: str | None = None
    committed: dict[str, int] = field(default_factory=dict)  # input partition -> committed offset
    processed: dict[str, list[_Batch]] = field(default_factory=dict)  # input partition -> batches, in order
    last: dict[str, _Batch] = field(default_factory=dict)  # node -> its last batch
    member_ids: dict[str, str] = field(default_factory=dict)  # member id -> node

    def uncommitted(self, batch: _Batch) -> list[Range]:
        return [(tp, a, b) for tp, a, b in batch.ranges if self.committed.get(tp, 0) <= b]

    def highest(self, tp: str) -> int:
        return max((b for batch in self.processed.get(tp, []) for t, _, b in batch.ranges if t == tp), default=-1)


AFTER = 1  # told after the coordinator's steps of the same millisecond: it follows from one of them
BEFORE = 0  # told before them: what a member or the world did, which the coordinator then hears of

World = tuple[int, int, Callable[[], Narrated]]  # (time, BEFORE or AFTER, how to tell it)


def world_lines(run_dir: Path, narrator: Narrator) -> list[World]:
    """Each moment the records tell something; each is told when the story reaches it, with the
    narrator's names for the members at that point."""
    events = sorted(_read(run_dir), key=lambda e: (int(e["ts_ms"]), _ORDER.get(e["event"], 5)))
    if not any(e["event"] == "batch_processed" for e in events):
        return []
    books = _Books(mode=next((e["mode"] for e in events if e["event"] in ("delivery_account", "delivery_records")),
                             None))
    told: list[World] = []
    records: list[dict[str, Any]] = []
    for e in events:
        ts, kind = int(e["ts_ms"]), e["event"]
        said: Callable[[], Said] | None = None
        if kind == "offsets_committed":
            for (topic, p), offset in zip(e["partitions"], e["offsets"]):
                books.committed[f"{topic}-{p}"] = offset
        elif kind == "batch_processed":
            said = _processed(books, e, narrator)
        elif kind == "process_crashed" or (kind == "fault_injected" and e.get("fault") == "crash" and "rule" not in e):
            for node in [e["member"]] if kind == "process_crashed" else list(e.get("members") or []):
                if kind == "fault_injected" and books.mode != "exactly-once":
                    continue  # a plain crash outside a transaction: what is in hand is simply read again
                crashed = _crashed(books, node, e.get("point"), narrator)
                if crashed is not None:
                    told.append((ts, BEFORE, functools.partial(_narrated, ts, crashed)))
        elif kind == "offset_commit_rejected":
            said = _refused(books, e, narrator)
        elif kind == "transaction_aborted":
            said = _aborted(books, e, narrator)
        elif kind == "delivery_records":
            records.append(e)
            continue
        if said is not None:
            told.append((ts, AFTER if kind in _COORDINATOR_EVENTS else BEFORE, functools.partial(_narrated, ts, said)))
    if records:
        ts = int(records[-1]["ts_ms"])
        told.append((ts, AFTER, functools.partial(_narrated, ts, functools.partial(_account, records, narrator))))
    return told


_ORDER = {"offsets_committed": 0, "batch_processed": 1}
_COORDINATOR_EVENTS = {"offset_commit_rejected", "transaction_aborted"}


def _narrated(ts: int, said: Callable[[], Said]) -> Narrated:
    return Narrated(0, ts, [said()], False, None)


def _read(run_dir: Path) -> Iterator[dict[str, Any]]:
    wanted = {"batch_processed", "offsets_committed", "offset_commit_rejected", "transaction_aborted", "process_crashed",
              "fault_injected", "delivery_records", "delivery_account"}
    for path in sorted(run_dir.glob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for text in f:
                if any(f'"{name}"' in text for name in wanted):
                    line = json.loads(text)
                    if line.get("event") in wanted:
                        yield line


def ranges_text(ranges: list[Range]) -> str:
    """`in-1@40..44, in-2@10` : input partitions and the offsets in them."""
    return ", ".join(f"{tp}@{a}" if a == b else f"{tp}@{a}..{b}" for tp, a, b in ranges)


def _batch(e: dict[str, Any]) -> _Batch:
    ranges = [(f"{t}-{p}", a, b) for (t, p), a, b in zip(e["partitions"], e["first_offsets"], e["last_offsets"])]
    return _Batch(int(e["ts_ms"]), str(e["node"]), str(e.get("member_id") or ""), ranges)


def _processed(books: _Books, e: dict[str, Any], narrator: Narrator) -> Callable[[], Said] | None:
    """A batch: told when it processes records again (a duplicate in the making) or starts past
    records nobody processed (lost); a batch like any other is the steady hum and not told."""
    batch = _batch(e)
    again: list[Range] = []
    before: list[str] = []  # member ids that processed them first
    stale = True  # every record processed again was committed already: the batch is a zombie's
    skipped: list[Range] = []
    for tp, a, b in batch.ranges:
        earlier = [(x, y, other.member_id) for other in books.processed.get(tp, [])
                   for t, x, y in other.ranges if t == tp and x <= b and a <= y]
        if earlier:
            again.append((tp, max(a, min(x for x, _, _ in earlier)), min(b, max(y for _, y, _ in earlier))))
            before += [m for _, _, m in earlier if m not in before]
            stale = stale and books.committed.get(tp, 0) > again[-1][2]
        highest = books.highest(tp)
        if a > highest + 1:
            skipped.append((tp, highest + 1, a - 1))
    for tp, _, _ in batch.ranges:
        books.processed.setdefault(tp, []).append(batch)
    books.last[batch.node] = batch
    books.member_ids[batch.member_id] = batch.node
    c, mode = narrator.c, books.mode
    if again:
        key = "world.again.stale" if stale else "world.again.txn" if mode == "exactly-once" else "world.again"
        return lambda: Said(narrator.name(batch.member_id), "", c.t(
            key, ranges=ranges_text(again), before=", ".join(narrator.name(m) for m in before)), c.t("why." + key),
            kind="world")
    if skipped:
        return lambda: Said(narrator.name(batch.member_id), "", c.t(
            "world.skipped", ranges=ranges_text(skipped), start=", ".join(f"{tp}@{a}" for tp, a, _ in batch.ranges)),
            c.t("why.world.skipped"), kind="world")
    return None


def _crashed(books: _Books, node: str, point: str | None, narrator: Narrator) -> Callable[[], Said] | None:
    """A crash with records in hand: processed and not committed (at-least-once, exactly-once), or
    committed and not processed (at-most-once)."""
    c, batch = narrator.c, books.last.get(node)
    if point == "committed":  # at-most-once: the commit went through, the processing never happens
        lost = [(tp, books.highest(tp) + 1, offset - 1) for tp, offset in sorted(books.committed.items())
                if offset - 1 > books.highest(tp) and _owned_by(books, tp, node)]
        if not lost:
            return None
        member = books.processed[lost[0][0]][-1].member_id
        return lambda: Said(narrator.name(member), "", c.t(
            "world.crash.committed", ranges=ranges_text(lost), committed=", ".join(f"{tp}@{b + 1}" for tp, _, b in lost)),
            c.t("why.world.crash.committed"), kind="world")
    if batch is None:
        return None
    pending = books.uncommitted(batch)
    if not pending:
        return None
    committed = ", ".join(f"{tp}@{books.committed.get(tp, 0)}" for tp, _, _ in pending)
    key = "world.crash.txn" if books.mode == "exactly-once" else "world.crash.processed"
    return lambda: Said(narrator.name(batch.member_id), "", c.t(key, ranges=ranges_text(pending), committed=committed),
                        c.t("why." + key), kind="world")


def _owned_by(books: _Books, tp: str, node: str) -> bool:
    batches = books.processed.get(tp, [])
    return bool(batches) and batches[-1].node == node


def _refused(books: _Books, e: dict[str, Any], narrator: Narrator) -> Callable[[], Said] | None:
    """A commit refused to a member whose output for those partitions is written already: fenced
    from the group's offsets, but not from the output topic."""
    node = books.member_ids.get(str(e.get("member_id")))
    batch = books.last.get(node) if node else None
    refused = {f"{t}-{p}" for t, p in e.get("partitions") or []}
    if batch is None or batch.member_id != e.get("member_id"):
        return None
    ranges = [r for r in batch.ranges if r[0] in refused]
    if not ranges:
        return None
    c = narrator.c
    return lambda: Said(narrator.name(batch.member_id), "", c.t("world.refused", ranges=ranges_text(ranges)),
                        c.t("why.world.refused"), kind="world")


def _aborted(books: _Books, e: dict[str, Any], narrator: Narrator) -> Callable[[], Said] | None:
    """An aborted transaction that held a member's output: read_committed readers skip it."""
    tid = str(e.get("transactional_id") or "")
    node = next((n for n in books.last if tid in (f"{n}-txn", f"{n}-instance-txn")), None)
    batch = books.last.get(node) if node else None
    if batch is None:
        return None
    pending = books.uncommitted(batch)
    if not pending:
        return None
    c = narrator.c
    return lambda: Said(narrator.name(batch.member_id), "", c.t("world.aborted", ranges=ranges_text(pending)),
                        c.t("why.world.aborted"), kind="world")


def _account(records: list[dict[str, Any]], narrator: Narrator) -> Said:
    """The output topic read back at the end, record by record: which input offsets are missing or
    there more than once."""
    c = narrator.c
    twice: list[Range] = []
    missing: list[Range] = []
    produced = 0
    for r in records:
        tp = f"{r['topic']}-{r['partition']}"
        produced += int(r["produced"])
        for n, out in ((0, missing), (2, twice)):
            run_start: int | None = None
            counts = list(r["output_counts"]) + [1]
            for i, count in enumerate(counts):
                hit = count == 0 if n == 0 else count >= 2
                if hit and run_start is None:
                    run_start = i
                elif not hit and run_start is not None:
                    out.append((tp, run_start, i - 1))
                    run_start = None
    isolation = str(records[0].get("isolation"))
    found = []
    if missing:
        found.append(c.t("world.account.missing", ranges=ranges_text(missing)))
    if twice:
        found.append(c.t("world.account.twice", ranges=ranges_text(twice)))
    text = (c.t("world.account", isolation=isolation, found="; ".join(found)) if found
            else c.t("world.account.clean", isolation=isolation, produced=produced))
    return Said(c.t("world.output"), "", text, kind="world")
