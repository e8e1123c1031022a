"""The producer state machine, step by step: sequence numbers, one batch in flight per partition,
retries with the same sequence after a lost answer, fencing, and the order of a transaction's
requests (AddPartitionsToTxn before Produce; EndTxn(commit) only after every ack and offset)."""

from __future__ import annotations

from grouplab.consumer.coordinator import Send
from grouplab.consumer.producer import Acked, ProducerConfig, ProducerFenced, ProducerMachine, ProducerState, TxnDone
from grouplab.protocol.effects import ArmTimer
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
    EndTxnResponse,
    InitProducerIdResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    ProducePartitionResponse,
    ProduceResponse,
    ProduceTopicResponse,
    Record,
    TxnOffsetCommitResponse,
)
from grouplab.protocol.types import TopicPartition

TP = TopicPartition("out", 0)
RECS = [Record(value=b"a"), Record(value=b"b")]


def sends(out: list) -> list[Send]:
    return [o for o in out if isinstance(o, Send)]


def produce_ok(offset: int) -> ProduceResponse:
    return ProduceResponse(responses=[ProduceTopicResponse("out", [ProducePartitionResponse(0, base_offset=offset)])])


def ready(transactional: bool = False) -> ProducerMachine:
    p = ProducerMachine(ProducerConfig(transactional_id="t" if transactional else None, request_timeout_ms=1000))
    [init] = sends(p.start(0))
    assert init.api == "InitProducerId" and init.body.transactional_id == ("t" if transactional else None)
    p.on_response(init.correlation_id, InitProducerIdResponse(producer_id=7, producer_epoch=2), 1)
    assert p.state is ProducerState.READY and (p.producer_id, p.producer_epoch) == (7, 2)
    return p


def test_sequences_count_records_and_one_batch_is_in_flight_per_partition() -> None:
    p = ready()
    _, out1 = p.send(TP, RECS, 2)
    _, out2 = p.send(TP, [Record(value=b"c")], 3)
    [first] = sends(out1)
    assert sends(out2) == []  # waits for the first
    batch = first.body.topic_data[0].partition_data[0].records
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 2, 0)
    out = p.on_response(first.correlation_id, produce_ok(0), 4)
    assert [o for o in out if isinstance(o, Acked)] == [Acked(TP, 1, 0, 2, False)]
    [second] = sends(out)
    assert second.body.topic_data[0].partition_data[0].records.base_sequence == 2


def test_a_lost_answer_is_retried_with_the_same_sequence() -> None:
    p = ready()
    _, out = p.send(TP, RECS, 2)
    [first] = sends(out)
    retry = sends(p.on_timer(("request", first.correlation_id), 1002))
    assert retry[0].body.topic_data[0].partition_data[0].records.base_sequence == 0
    # The late answer to the first attempt is ignored; the retry's answer acks the batch once.
    assert p.on_response(first.correlation_id, produce_ok(0), 1003) == []
    acked = [o for o in p.on_response(retry[0].correlation_id, produce_ok(0), 1004) if isinstance(o, Acked)]
    assert acked == [Acked(TP, 1, 0, 2, True)]


def test_a_fenced_producer_stops_for_good() -> None:
    p = ready()
    _, out = p.send(TP, RECS, 2)
    [first] = sends(out)
    bad = ProduceResponse(responses=[ProduceTopicResponse("out", [ProducePartitionResponse(0, ErrorCode.INVALID_PRODUCER_EPOCH)])])
    out = p.on_response(first.correlation_id, bad, 3)
    assert ProducerFenced(ErrorCode.INVALID_PRODUCER_EPOCH) in out and p.state is ProducerState.FENCED


def test_a_transaction_adds_partitions_first_and_commits_after_every_ack() -> None:
    p = ready(transactional=True)
    p.begin_transaction()
    _, out = p.send(TP, RECS, 2)
    [add] = sends(out)
    assert add.api == "AddPartitionsToTxn"
    ok = AddPartitionsToTxnResponse(results=[AddPartitionsToTxnTopicResult("out", [AddPartitionsToTxnPartitionResult(0)])])
    [produce] = sends(p.on_response(add.correlation_id, ok, 3))
    assert produce.api == "Produce" and produce.body.topic_data[0].partition_data[0].records.is_transactional
    [add_offsets] = sends(p.send_offsets_to_transaction({TopicPartition("in", 0): 10}, "g", 4, "m", 4))
    assert sends(p.commit_transaction(5)) == []  # not before the batch and the offsets are acked
    [txn_commit] = sends(p.on_response(add_offsets.correlation_id, AddOffsetsToTxnResponse(), 6))
    assert txn_commit.api == "TxnOffsetCommit" and (txn_commit.body.generation_id, txn_commit.body.member_id) == (4, "m")
    assert sends(p.on_response(produce.correlation_id, produce_ok(0), 7)) == []
    done = TxnOffsetCommitResponse(topics=[OffsetCommitResponseTopic("in", [OffsetCommitResponsePartition(0)])])
    [end] = sends(p.on_response(txn_commit.correlation_id, done, 8))
    assert end.api == "EndTxn" and end.body.committed
    out = p.on_response(end.correlation_id, EndTxnResponse(), 9)
    assert TxnDone(True) in out and p.state is ProducerState.READY


def test_a_refused_txn_offset_commit_aborts_the_transaction() -> None:
    p = ready(transactional=True)
    p.begin_transaction()
    _, out = p.send(TP, RECS, 2)
    [add] = sends(out)
    ok = AddPartitionsToTxnResponse(results=[AddPartitionsToTxnTopicResult("out", [AddPartitionsToTxnPartitionResult(0)])])
    p.on_response(add.correlation_id, ok, 3)
    [add_offsets] = sends(p.send_offsets_to_transaction({TopicPartition("in", 0): 10}, "g", 4, "m", 4))
    [txn_commit] = sends(p.on_response(add_offsets.correlation_id, AddOffsetsToTxnResponse(), 5))
    refused = TxnOffsetCommitResponse(topics=[OffsetCommitResponseTopic("in", [
        OffsetCommitResponsePartition(0, ErrorCode.ILLEGAL_GENERATION)])])
    p.commit_transaction(6)
    [end] = sends(p.on_response(txn_commit.correlation_id, refused, 7))
    assert end.api == "EndTxn" and end.body.committed is False  # KIP-447: a stale generation aborts


def test_a_storage_error_is_retried_with_the_same_sequence() -> None:
    """KAFKA_STORAGE_ERROR (56), what the coordinator answers when the disk refuses the batch, is
    retriable as in Kafka's producer: after retry.backoff.ms the same batch goes again."""
    p = ready()
    _, out = p.send(TP, RECS, 2)
    [first] = sends(out)
    refused = ProduceResponse(responses=[ProduceTopicResponse("out", [ProducePartitionResponse(
        0, ErrorCode.KAFKA_STORAGE_ERROR, error_message="writing the log failed")])])
    out = p.on_response(first.correlation_id, refused, 3)
    [timer] = [o for o in out if isinstance(o, ArmTimer) and o.key[0] == "retry"]
    [again] = sends(p.on_timer(timer.key, timer.deadline_ms))
    assert again.body.topic_data[0].partition_data[0].records.base_sequence == 0
    acked = [o for o in p.on_response(again.correlation_id, produce_ok(0), timer.deadline_ms + 1) if isinstance(o, Acked)]
    assert acked == [Acked(TP, 1, 0, 2, True)]
