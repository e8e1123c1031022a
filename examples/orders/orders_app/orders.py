"""The `orders` topic's record: one order as JSON, `{"order_id": ..., "customer": ..., "amount_cents": ...}`."""

from __future__ import annotations

import json
from dataclasses import dataclass

CUSTOMERS = ("ada", "grace", "linus")


@dataclass(frozen=True)
class Order:
    order_id: str
    customer: str
    amount_cents: int


def parse_order(value: bytes) -> Order:
    """An order from a record's value; ValueError if it is not one."""
    fields = json.loads(value)
    return Order(str(fields["order_id"]), str(fields["customer"]), int(fields["amount_cents"]))


def encode_order(order: Order) -> bytes:
    return json.dumps({"order_id": order.order_id, "customer": order.customer,
                       "amount_cents": order.amount_cents}).encode()


def make_orders(prefix: str, count: int) -> list[Order]:
    """`count` orders with ids `prefix-0`, `prefix-1`, ..., customers in turn, amounts that differ."""
    return [Order(f"{prefix}-{i}", CUSTOMERS[i % len(CUSTOMERS)], 100 * (i + 1)) for i in range(count)]


def totals_of(orders: list[Order]) -> dict[str, int]:
    """Each customer's total over these orders, each counted once: what the store should hold."""
    out: dict[str, int] = {}
    for o in {o.order_id: o for o in orders}.values():
        out[o.customer] = out.get(o.customer, 0) + o.amount_cents
    return out
