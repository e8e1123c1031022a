"""Delivery modes over real loopback sockets: consumers read an input topic, write an output
topic and commit; one crashes in the middle (no LeaveGroup, no commit), another takes over; then
every output record is counted."""

from __future__ import annotations

import pytest

from grouplab.consumer.delivery import DeliveryMode
from grouplab.coordinator.config import BrokerConfig
from grouplab.cli import _committed, _wait_drained
from grouplab.cluster import DeliveryRun, LocalCluster

pytestmark = pytest.mark.e2e

BROKER = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100"]
# A session of 3 s: the crash is noticed soon, and a member on a machine loaded by the rest of the
# suite is not removed for a slow second (1.5 s let a loaded run rebalance past the drain's minute).
CONSUMER = ["session.timeout.ms=3000", "heartbeat.interval.ms=100", "retry.backoff.ms=20", "request.timeout.ms=3000"]
DRAIN_S = 180  # generous: about 3 s here on a quiet machine
PARTITIONS, RECORDS = 3, 150


async def run(mode: DeliveryMode) -> tuple[dict, int]:
    delivery = DeliveryRun(mode, "in", RECORDS, processing_ms=10, max_records=5)
    cluster = LocalCluster({"in": PARTITIONS}, "g", ["range"], BrokerConfig().with_overrides(BROKER), CONSUMER,
                           delivery=delivery)
    await cluster.start()
    try:
        first = [await cluster.add_consumer() for _ in range(2)]
        await cluster.wait_stable(20)

        def processed() -> int:
            return sum(sum(a.stats.processed.values()) for a in cluster.apps + cluster.stopped)

        await cluster.recorder_wait(lambda: processed() >= PARTITIONS * RECORDS // 3, 20)
        await cluster.stop_consumer(first[0], leave=False)  # a crash in the middle of the input
        await cluster.add_consumer()
        await _wait_drained(cluster, delivery, DRAIN_S)
        committed = sum(_committed(cluster).values())
        assert committed == PARTITIONS * RECORDS, f"the input was not drained in {DRAIN_S} s: {committed} committed"
        account = await delivery.account(cluster.host, cluster.port, PARTITIONS)
        return account, processed()
    finally:
        await cluster.close()


async def test_at_least_once_over_sockets_loses_nothing() -> None:
    account, processed = await run(DeliveryMode.AT_LEAST_ONCE)
    assert account["produced"] == PARTITIONS * RECORDS and account["lost"] == 0
    assert processed >= account["produced"] + account["duplicated"]


async def test_at_most_once_over_sockets_duplicates_nothing() -> None:
    account, _ = await run(DeliveryMode.AT_MOST_ONCE)
    assert account["duplicated"] == 0


async def test_exactly_once_over_sockets_neither_loses_nor_duplicates() -> None:
    account, _ = await run(DeliveryMode.EXACTLY_ONCE)
    assert account["lost"] == 0 and account["duplicated"] == 0


async def test_the_account_waits_until_a_crashed_members_open_transaction_is_aborted() -> None:
    """A member that crashes after producing its output but before its offsets reach the
    transaction leaves nothing to block its successor: the input drains while the crashed
    transaction still holds the output's last stable offset back. The account reads the output
    read_committed, so it waits until transaction.timeout.ms aborts it (the README demo once
    counted 500 records lost here). A librdkafka producer stands in for the crashed member."""
    import asyncio

    from confluent_kafka import Producer

    timeout_ms = 10_000
    delivery = DeliveryRun(DeliveryMode.EXACTLY_ONCE, "in", 0)  # nothing to drain: only the transaction
    cluster = LocalCluster({"in": 1}, "g", ["range"], BrokerConfig().with_overrides(BROKER), CONSUMER,
                           delivery=delivery, kafka_port=0)
    await cluster.start()
    producer = Producer({"bootstrap.servers": f"{cluster.host}:{cluster.kafka_port}", "transactional.id": "crashed",
                         "transaction.timeout.ms": timeout_ms, "log_level": 0})

    def open_one() -> None:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(delivery.output_topic, value=b"never committed", partition=0)
        assert producer.flush(30) == 0  # in the log; no commit, no abort: the member is gone

    try:
        await asyncio.to_thread(open_one)
        assert await delivery.open_transactions(cluster.host, cluster.port, 1) == 1
        assert not await _wait_drained(cluster, delivery, 0.5)  # held back for up to 10 s yet
        assert await _wait_drained(cluster, delivery, DRAIN_S)
        assert await delivery.open_transactions(cluster.host, cluster.port, 1) == 0
    finally:
        await cluster.close()
