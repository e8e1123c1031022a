"""The processing core every front end shares: apply a batch of `orders` records to the store, and
keep what has been processed apart from what has been committed, so that a front end commits
exactly what it processed (at-least-once) and a test can see what a crash left uncommitted.

No client library here: a front end turns its library's records into `(RecordRef, value)` and its
`to_commit()` into its library's commit call.
"""

from __future__ import annotations

import logging
from typing import Collection, Iterable

from orders_app.misbehaviour import Misbehaviour
from orders_app.orders import parse_order
from orders_app.records import Partition, RecordRef
from orders_app.store import TotalsStore

log = logging.getLogger("orders_app")


class OrderProcessor:
    """Processes records in order, one at a time, and remembers per partition the next offset to
    process (what a commit should say) and the last offset committed. Not locked: it is used by
    one thing at a time, the consumer's loop or its client's rebalance callbacks, which run while
    that loop waits in a poll (in asyncio: at one of the loop's awaits)."""

    def __init__(self, store: TotalsStore, consumer: str, misbehaviour: Misbehaviour) -> None:
        self.store = store
        self.consumer = consumer  # the client id, written beside each processing
        self.misbehaviour = misbehaviour
        self._next: dict[Partition, int] = {}  # next offset to process, per partition processed
        self._first: dict[Partition, int] = {}  # the first offset processed since the partition came
        self._committed: dict[Partition, int] = {}

    def process(self, records: Iterable[tuple[RecordRef, bytes]]) -> None:
        """Each record into the store, in order. Raises `Crash` where a test made the consumer
        die (after the record it has just processed, before any commit)."""
        for ref, value in records:
            try:
                order = parse_order(value)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s: skipping %s, not an order: %s", self.consumer, ref, exc)
            else:
                self.store.apply(ref, order, self.consumer)
            self._first.setdefault(ref.tp, ref.offset)
            self._next[ref.tp] = ref.offset + 1
            self.misbehaviour.after_record()

    def to_commit(self, owned: Collection[Partition]) -> dict[Partition, int]:
        """Per partition this consumer owns, the offset to commit now (the next one to process),
        where it is ahead of the last commit. A partition processed but no longer owned (revoked
        while its batch was being processed) is forgotten: its new owner commits it."""
        self.forget([tp for tp in self._next if tp not in owned])
        return {tp: n for tp, n in self._next.items() if self._committed.get(tp) != n}

    def committed(self, offsets: dict[Partition, int]) -> None:
        """The commit of these offsets succeeded."""
        self._committed.update(offsets)

    def forget(self, partitions: Iterable[Partition]) -> None:
        """The partitions went to another consumer: what this one knew of them no longer counts."""
        for tp in partitions:
            self._next.pop(tp, None)
            self._first.pop(tp, None)
            self._committed.pop(tp, None)

    def uncommitted(self) -> dict[Partition, range]:
        """Per partition, the offsets processed since the last commit (those a crash now would
        have processed for nothing: whoever takes the partition processes them again)."""
        out = {}
        for tp, n in self._next.items():
            start = self._committed.get(tp, self._first[tp])
            if n > start:
                out[tp] = range(start, n)
        return out

