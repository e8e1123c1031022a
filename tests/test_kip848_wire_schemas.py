"""KIP-848's two APIs on the Kafka wire (ConsumerGroupHeartbeat 68, ConsumerGroupDescribe 69):
kafka-python ships no classes for them, so grouplab gives its schema reader Kafka's schemas
(grouplab/coordinator/kafka_wire/schemas/). The bytes are checked field by field against Kafka's
flexible encoding (compact strings and arrays: length + 1 as an unsigned varint; a tagged-field
count after each struct), so a field out of order or of the wrong type fails here."""

from __future__ import annotations

import uuid

import pytest

from grouplab.coordinator.kafka_wire.kip848 import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")


def compact(text: str | None) -> bytes:
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


def test_a_heartbeat_request_v1_is_kafkas_bytes() -> None:
    R = ConsumerGroupHeartbeatRequest
    request = R[1](group_id="g", member_id="m1", member_epoch=0, instance_id=None, rack_id="r",
                   rebalance_timeout_ms=300000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
                   server_assignor="uniform", topic_partitions=[R.TopicPartitions(topic_id=TOPIC, partitions=[0, 2])])
    expected = (compact("g") + compact("m1") + (0).to_bytes(4, "big") + compact(None) + compact("r")
                + (300000).to_bytes(4, "big") + b"\x02" + compact("t") + compact(None) + compact("uniform")
                + b"\x02" + TOPIC.bytes + b"\x03" + (0).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\x00"
                + b"\x00")
    assert bytes(request.encode()) == expected
    assert R[1].decode(expected).to_dict() == request.to_dict()


def test_v0_has_no_regex_and_nulls_mean_unchanged() -> None:
    R = ConsumerGroupHeartbeatRequest
    request = R[0](group_id="g", member_id="m1", member_epoch=3)
    assert bytes(request.encode()) == (compact("g") + compact("m1") + (3).to_bytes(4, "big") + compact(None)
                                       + compact(None) + (-1).to_bytes(4, "big", signed=True) + b"\x00"
                                       + compact(None) + b"\x00" + b"\x00")


@pytest.mark.parametrize("version", [0, 1])
def test_a_heartbeat_answer_and_a_describe_round_trip(version: int) -> None:
    S = ConsumerGroupHeartbeatResponse
    answer = S[version](throttle_time_ms=0, error_code=0, member_id="m1", member_epoch=5, heartbeat_interval_ms=5000,
                        assignment=S.Assignment(topic_partitions=[S.Assignment.TopicPartitions(topic_id=TOPIC,
                                                                                               partitions=[1])]))
    assert S[version].decode(answer.encode()).to_dict() == answer.to_dict()
    assert S[version].decode(S[version](error_code=25, member_epoch=-1, heartbeat_interval_ms=0).encode()).assignment is None
    Q = ConsumerGroupDescribeRequest
    assert Q[version].decode(Q[version](group_ids=["g"], include_authorized_operations=False).encode()).group_ids == ["g"]
    D = ConsumerGroupDescribeResponse
    G = D.DescribedGroup
    M = G.Member
    A = M.Assignment
    member = M(member_id="m1", member_epoch=5, client_id="c", client_host="/127.0.0.1", subscribed_topic_names=["t"],
               assignment=A(topic_partitions=[A.TopicPartitions(topic_id=TOPIC, topic_name="t", partitions=[0])]),
               target_assignment=A(topic_partitions=[]), member_type=1)
    described = D[version](groups=[G(error_code=0, group_id="g", group_state="Stable", group_epoch=5,
                                     assignment_epoch=5, assignor_name="uniform", members=[member])])
    back = D[version].decode(described.encode()).groups[0].members[0]
    assert back.assignment.topic_partitions[0].topic_name == "t"
    assert back.member_type == (1 if version >= 1 else -1)  # v0 has no member type: its default
