"""No client hurts another on the Kafka port (issue 22, cases 3-5): a produced batch is checked
against message.max.bytes and an inflation budget before any record is built; a connection that
never reads its answers is muted, its queued bytes bounded; a malformed frame is refused cheaply.
Unit tests of the bounded decode here; end-to-end tests, with a protected group of kafka-python
consumers and a bystander heartbeating beside the hostile client, below them. The msgpack port's
own hostile-input tests: tests/test_answer_limits.py, tests/test_server_queues.py."""

from __future__ import annotations

import gzip
from typing import Any

import pytest

from grouplab.coordinator.kafka_wire import records as records_module
from grouplab.coordinator.kafka_wire.records import BadRecords, decode_batch, inflate_budget
from grouplab.protocol.errors import ErrorCode

from hostile_kafka import empty_records, one_record, raw_batch

LIMIT = 100_000  # message.max.bytes in the unit tests


class _Spy:
    """Counts the records decode_batch builds and the bytes the gzip inflater hands back."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.records = 0
        self.inflated = 0
        real_record = records_module.Record
        real_gunzip = records_module._INFLATERS[1]

        def record(*args: Any, **kwargs: Any) -> Any:
            self.records += 1
            return real_record(*args, **kwargs)

        def gunzip(payload: Any, limit: int) -> bytes:
            out = real_gunzip[2](payload, limit)
            self.inflated += len(out)
            return out

        monkeypatch.setattr(records_module, "Record", record)
        monkeypatch.setitem(records_module._INFLATERS, 1, (real_gunzip[0], real_gunzip[1], gunzip))


def _refused(data: bytes, limit: int = LIMIT) -> BadRecords:
    with pytest.raises(BadRecords) as refused:
        decode_batch(data, limit)
    return refused.value


def test_a_header_count_that_cannot_fit_is_refused_before_inflating(monkeypatch: pytest.MonkeyPatch) -> None:
    """Case 3a in small: many empty records compress to almost nothing; their count alone says the
    stored batch would pass message.max.bytes, so nothing is inflated and no record is built."""
    spy = _Spy(monkeypatch)
    count = LIMIT // records_module.MIN_STORED_RECORD_BYTES + 1
    data = raw_batch(empty_records(count), count, codec=1)
    assert len(data) < LIMIT // 2
    refused = _refused(data)
    assert refused.code == ErrorCode.MESSAGE_TOO_LARGE and f"{count} records" in refused.message
    assert spy.inflated == 0 and spy.records == 0


def test_a_record_that_inflates_past_the_budget_is_refused_after_at_most_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Case 3b in small: one record of 20 MB of zeros (about 20 KB gzipped): inflating stops one
    byte past the budget, and no record is built."""
    spy = _Spy(monkeypatch)
    data = raw_batch(one_record(bytes(20_000_000)), 1, codec=1)
    assert len(data) < LIMIT
    refused = _refused(data)
    assert refused.code == ErrorCode.MESSAGE_TOO_LARGE
    assert spy.inflated == inflate_budget(1, LIMIT) + 1 and spy.records == 0


def test_a_legal_compressed_batch_is_accepted_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Spy(monkeypatch)
    values = [bytes([i]) * 100 for i in range(50)]
    records = b"".join(one_record(v) for v in values)  # offset deltas all 0: kafka-python does not check them
    batch = decode_batch(raw_batch(records, len(values), codec=1), LIMIT)
    assert [r.value for r in batch.records] == values
    assert spy.records == len(values) and spy.inflated == len(records)


def test_a_batch_just_within_the_budget_is_inflated() -> None:
    value = bytes(LIMIT - 100)
    batch = decode_batch(raw_batch(one_record(value), 1, codec=1), LIMIT)
    assert batch.records[0].value == value


def test_concatenated_gzip_members_are_read_as_one_stream() -> None:
    """Java's GZIPInputStream reads concatenated members; so does the bounded inflater."""
    first, second = one_record(b"a" * 10), one_record(b"b" * 10)
    payload = gzip.compress(first) + gzip.compress(second)
    assert records_module.inflate(1, payload, 10_000) == first + second


def test_a_torn_gzip_stream_is_corrupt_message() -> None:
    whole = raw_batch(one_record(b"x" * 1000), 1, codec=1)
    payload = whole[61:-8]  # the gzip trailer and part of the stream cut off
    with pytest.raises(BadRecords) as refused:
        records_module.inflate(1, payload, 10_000)
    assert refused.value.code == ErrorCode.CORRUPT_MESSAGE


def test_garbage_that_is_not_gzip_is_corrupt_message() -> None:
    with pytest.raises(BadRecords) as refused:
        records_module.inflate(1, b"not gzip at all" * 10, 10_000)
    assert refused.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("count", [0, -1])
def test_a_record_count_below_one_is_invalid_record_as_kafka(count: int) -> None:
    """Kafka's LogValidator.validateBatch: 'Invalid reported count for record batch'."""
    assert _refused(raw_batch(b"", count)).code == ErrorCode.INVALID_RECORD


def test_a_batch_over_message_max_bytes_as_sent_is_message_too_large() -> None:
    """Kafka checks the batch as sent (compressed or not) against max.message.bytes."""
    data = raw_batch(one_record(bytes(2000)), 1)
    assert _refused(data, limit=len(data) - 1).code == ErrorCode.MESSAGE_TOO_LARGE
    assert decode_batch(data, len(data)) is not None


def test_more_records_than_the_header_says_is_corrupt() -> None:
    assert _refused(raw_batch(empty_records(3), 2, codec=1)).code == ErrorCode.CORRUPT_MESSAGE
    assert _refused(raw_batch(empty_records(2), 3, codec=1)).code == ErrorCode.CORRUPT_MESSAGE


def test_heavy_batches_are_the_compressed_and_the_large() -> None:
    assert records_module.is_heavy(raw_batch(one_record(b"x"), 1, codec=1))
    assert not records_module.is_heavy(raw_batch(one_record(b"x"), 1))
    assert records_module.is_heavy(raw_batch(one_record(bytes(records_module.HEAVY_BATCH_BYTES)), 1))
    assert not records_module.is_heavy(None) and not records_module.is_heavy(b"short")
