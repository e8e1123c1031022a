"""orders_app: a small Kafka consumer application of the usual kind, with one processing core and
three front ends, one per client library.

It reads `orders` records (JSON: order id, customer, amount in cents), adds each order to its
customer's total in a store, and commits a partition's offset only after the records before it
are processed: at-least-once. A record processed and not yet committed when the consumer dies is
processed again by whoever takes its partition; the store counts an order once however often it
is processed (an upsert keyed by order id), so the totals stay right.

- `orders.py`: the record format; `records.py`: where a record is; `store.py`: the totals;
  `processing.py`: what every front end does with a batch (and what it has processed but not
  committed); `misbehaviour.py`: what a test can make a consumer do wrong; `settings.py`: the
  consumer settings an operator tunes.
- Front ends: `kafka_python_consumer.py` (kafka-python's `KafkaConsumer` polled in a thread),
  `aiokafka_consumer.py` (`AIOKafkaConsumer` in asyncio), `confluent_consumer.py`
  (confluent-kafka's librdkafka `Consumer` polled in a thread).
"""

from orders_app.misbehaviour import Crash, Misbehaviour
from orders_app.orders import Order, encode_order, make_orders, parse_order, totals_of
from orders_app.processing import OrderProcessor
from orders_app.records import Partition, RecordRef
from orders_app.settings import ConsumerSettings
from orders_app.store import Processing, TotalsStore

__all__ = ["ConsumerSettings", "Crash", "Misbehaviour", "Order", "OrderProcessor", "Partition", "Processing",
           "RecordRef", "TotalsStore", "encode_order", "make_orders", "parse_order", "totals_of"]
