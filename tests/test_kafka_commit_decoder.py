"""kafka_wire/commit_decoder.py against the general path (kafka-python's decoding, then
translate.to_grouplab): on any OffsetCommit request kafka-python writes, v2-v9, the direct reader
gives the same request, header and grouplab body; on bent bytes it either gives what the general
path gives or steps aside (None), and where the general path refuses the frame it always steps
aside."""

from __future__ import annotations

import os
import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.group import OffsetCommitRequest

from grouplab.coordinator.kafka_wire.codec import CloseConnection, KafkaRequest, decode_request
from grouplab.coordinator.kafka_wire.commit_decoder import decode_offset_commit
from grouplab.coordinator.kafka_wire.translate import View, to_grouplab

SETTINGS = settings(max_examples=int(os.environ.get("GROUPLAB_HYPOTHESIS_EXAMPLES", "200")), deadline=None)
TOPIC = OffsetCommitRequest.OffsetCommitRequestTopic
PARTITION = TOPIC.OffsetCommitRequestPartition

names = st.text(max_size=8) | st.text(min_size=64, max_size=70)  # past 127 bytes: a two-byte compact length
int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, bytes]:
    """(version, the whole frame without its length) as kafka-python writes it."""
    version = draw(st.integers(2, 9))
    topics = [TOPIC(name=draw(names), partitions=[
        PARTITION(partition_index=draw(int32), committed_offset=draw(int64), committed_leader_epoch=draw(int32),
                  commit_timestamp=-1, committed_metadata=draw(st.none() | names))
        for _ in range(draw(st.integers(0, 3)))]) for _ in range(draw(st.integers(0, 3)))]
    request = OffsetCommitRequest[version](
        group_id=draw(names), generation_id_or_member_epoch=draw(int32), member_id=draw(names),
        group_instance_id=draw(st.none() | names), retention_time_ms=draw(int64), topics=topics)
    request.with_header(correlation_id=draw(int32), client_id=draw(st.none() | names))
    return version, bytes(request.encode(header=True))


def general(frame: bytes) -> tuple[KafkaRequest, Any] | None:
    """What the listener does without the direct reader; None where it closes the connection."""
    try:
        request = decode_request(frame)
    except CloseConnection:
        return None
    assert isinstance(request, KafkaRequest)
    try:
        body = to_grouplab(request.api, request.version, request.body, View(host="h", port=1))
    except Exception:  # noqa: BLE001 - a value translation cannot take: refused, as the listener does
        return None
    return request, body


def same(direct: tuple[KafkaRequest, Any], expected: tuple[KafkaRequest, Any]) -> None:
    got, want = direct[0], expected[0]
    assert (got.api, got.version, got.correlation_id, got.client_id) == (
        want.api, want.version, want.correlation_id, want.client_id)
    assert direct[1] == expected[1]


@SETTINGS
@given(requests())
def test_every_request_reads_as_the_general_path_reads_it(case: tuple[int, bytes]) -> None:
    version, frame = case
    direct = decode_offset_commit(frame)
    expected = general(frame)
    assert expected is not None and direct is not None
    same(direct, expected)


@SETTINGS
@given(requests(), st.data())
def test_bent_bytes_read_the_same_or_step_aside(case: tuple[int, bytes], data: st.DataObject) -> None:
    """A byte changed, bytes cut or added: the direct reader never answers differently, and never
    takes on a frame the general path refuses."""
    _, frame = case
    how = data.draw(st.sampled_from(["flip", "cut", "extend"]))
    if how == "flip":
        at = data.draw(st.integers(0, len(frame) - 1))
        frame = frame[:at] + bytes([frame[at] ^ data.draw(st.integers(1, 255))]) + frame[at + 1:]
    elif how == "cut":
        frame = frame[:data.draw(st.integers(0, len(frame) - 1))]
    else:
        frame += data.draw(st.binary(min_size=1, max_size=4))
    direct = decode_offset_commit(frame)
    if direct is None:
        return
    expected = general(frame)
    assert expected is not None, "the direct reader took on a frame the general path refuses"
    same(direct, expected)


def test_other_apis_and_versions_step_aside() -> None:
    request = OffsetCommitRequest[9](group_id="g", generation_id_or_member_epoch=1, member_id="m",
                                     group_instance_id=None, topics=[])
    request.with_header(correlation_id=7, client_id="c")
    frame = bytes(request.encode(header=True))
    assert decode_offset_commit(frame) is not None
    assert decode_offset_commit(struct.pack(">h", 12) + frame[2:]) is None  # Heartbeat's key
    assert decode_offset_commit(frame[:2] + struct.pack(">h", 10) + frame[4:]) is None  # v10: topic ids
    assert decode_offset_commit(b"") is None


def test_a_long_member_id_is_read_too() -> None:
    """A string of 127 bytes or more has a two-byte compact length (v8+): read by the general
    reader of this module, not handed back."""
    member = "m" * 300
    request = OffsetCommitRequest[9](group_id="g", generation_id_or_member_epoch=1, member_id=member,
                                     group_instance_id=None, topics=[TOPIC(name="t", partitions=[PARTITION(
                                         partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                         commit_timestamp=-1, committed_metadata="")])])
    request.with_header(correlation_id=7, client_id="c")
    frame = bytes(request.encode(header=True))
    direct = decode_offset_commit(frame)
    assert direct is not None and direct[1].member_id == member
    expected = general(frame)
    assert expected is not None
    same(direct, expected)
