"""Where the application writes what it computed: each customer's total. In a real deployment this
is a database shared by every instance of the consumer; here it is in memory and shared by the
instances a test starts, so the test can read it."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from orders_app.orders import Order
from orders_app.records import RecordRef


@dataclass(frozen=True)
class Processing:
    """One time a consumer processed one record."""

    record: RecordRef
    order_id: str
    consumer: str  # the client id of the consumer that processed it


class TotalsStore:
    """Each customer's total, written once per order id (an upsert: an order processed twice,
    as at-least-once delivery allows, is counted once), and a log of every processing, for tests.
    Thread-safe: consumers in threads write while a test reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: Counter[str] = Counter()
        self._orders: set[str] = set()
        self._log: list[Processing] = []

    def apply(self, record: RecordRef, order: Order, consumer: str) -> None:
        with self._lock:
            self._log.append(Processing(record, order.order_id, consumer))
            if order.order_id not in self._orders:
                self._orders.add(order.order_id)
                self._totals[order.customer] += order.amount_cents

    def totals(self) -> dict[str, int]:
        with self._lock:
            return dict(self._totals)

    def log(self) -> list[Processing]:
        with self._lock:
            return list(self._log)

    def times_processed(self) -> Counter[str]:
        """order id -> how many times it was processed (by any consumer)."""
        return Counter(p.order_id for p in self.log())

    def processed_by(self, consumer: str) -> list[str]:
        """The order ids `consumer` processed, in order."""
        return [p.order_id for p in self.log() if p.consumer == consumer]
