"""sticky_shapes.UserDataReader against sticky_claims.decode_user_data: for any run of user data
bytes read by one reader (so that shapes are learnt, then met again with a field changed), every
answer equals the topic-by-topic decoder's."""

from __future__ import annotations

import os
import struct

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.consumer.assignors import get_assignor
from grouplab.consumer.assignors import sticky_shapes
from grouplab.consumer.assignors.sticky import sticky_assign
from grouplab.consumer.assignors.sticky_claims import decode_user_data, encode_user_data
from grouplab.consumer.assignors.sticky_shapes import UserDataReader
from grouplab.protocol.types import Subscription, TopicPartition

SETTINGS = settings(max_examples=int(os.environ.get("GROUPLAB_HYPOTHESIS_EXAMPLES", "200")), deadline=None)

TOPICS = ["t", "t1", "topic-00", "topic-01", "тема", ""]


@st.composite
def kafka_user_data(draw: st.DrawFn) -> bytes:
    """Kafka's StickyAssignor user data, sometimes bent: a topic split over two entries, negative or
    huge numbers, no generation, a trailing byte, a truncation, one byte flipped."""
    entries = draw(st.lists(st.tuples(st.sampled_from(TOPICS), st.lists(st.integers(-2**31, 2**31 - 1), max_size=3)),
                            max_size=4))
    out = [struct.pack(">i", len(entries))]
    for name, numbers in entries:
        raw = name.encode("utf-8")
        out.append(struct.pack(f">h{len(raw)}si{len(numbers)}i", len(raw), raw, len(numbers), *numbers))
    if draw(st.booleans()):
        out.append(struct.pack(">i", draw(st.integers(-2**31, 2**31 - 1))))
    data = b"".join(out)
    bend = draw(st.sampled_from(["none", "none", "trailing", "truncate", "flip"]))
    if bend == "trailing":
        data += draw(st.binary(min_size=1, max_size=5))
    elif bend == "truncate" and data:
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif bend == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
    return data


def encoded(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(st.builds(TopicPartition, st.sampled_from(TOPICS[:4]), st.integers(0, 3)), max_size=6))
    return encode_user_data(parts, draw(st.integers(-1, 3)))


user_data = st.one_of(
    kafka_user_data(),
    st.composite(encoded)(),
    st.binary(max_size=40),
    st.builds(lambda parts, g: msgpack.packb({"partitions": parts, "generation": g}),
              st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 3)).map(list), max_size=3), st.integers(0, 3)),
)


@SETTINGS
@given(runs=st.lists(st.lists(user_data, min_size=1, max_size=4).flatmap(
    lambda group: st.lists(st.sampled_from(group), min_size=1, max_size=12)), min_size=1, max_size=4))
def test_reader_equals_decoder(runs: list[list[bytes]]) -> None:
    """Runs of repeated bytes (so shapes are learnt and hit), one reader over all of them."""
    read = UserDataReader()
    for run in runs:
        for data in run:
            assert read(data) == decode_user_data(data)


def test_a_repeated_shape_is_read_in_one_unpack_and_a_changed_field_is_not() -> None:
    read = UserDataReader()
    first = encode_user_data([TopicPartition("a", 1), TopicPartition("b", 2)], 3)
    second = encode_user_data([TopicPartition("a", 7), TopicPartition("b", 9)], 4)
    renamed = encode_user_data([TopicPartition("a", 7), TopicPartition("c", 9)], 4)  # same length, other topic
    assert read(first) == ([TopicPartition("a", 1), TopicPartition("b", 2)], 3)
    assert read(second) == ([TopicPartition("a", 7), TopicPartition("b", 9)], 4)
    assert read.hits == 1
    assert read(renamed) == ([TopicPartition("a", 7), TopicPartition("c", 9)], 4)
    assert (read.hits, read.misses) == (1, 2)


def test_varied_shapes_stop_the_learning() -> None:
    """Every member of its own shape: after MISSES_ALLOWED misses the reader reads topic by topic only."""
    read = UserDataReader()
    for i in range(sticky_shapes.MISSES_ALLOWED + 5):
        data = encode_user_data([TopicPartition("t" * (i + 1), 0)], 1)
        assert read(data) == decode_user_data(data)
    assert not read.learning and not read.shapes


def test_sticky_round_two_is_unchanged_by_the_reader() -> None:
    """A round 2 of a group whose user data share shapes: the same assignment as with the
    member-by-member decoder."""
    ppt = {f"topic-{t}": 30 for t in range(5)}
    members = [f"m{i:03d}" for i in range(40)]
    sticky = get_assignor("sticky")
    first = sticky.assign(ppt, {m: Subscription(topics=sorted(ppt)) for m in members})
    subs = {m: Subscription(topics=sorted(ppt), user_data=encode_user_data(first[m], 1))
            for m in members[::3] + members[1::3]}
    with_reader = sticky_assign(ppt, subs, sticky.members_reader())  # type: ignore[attr-defined]
    plain = sticky_assign(ppt, subs, sticky.member_data)  # type: ignore[attr-defined]
    assert with_reader.assignment == plain.assignment == sticky.assign(ppt, subs)
    assert with_reader.claims.owned == plain.claims.owned


@SETTINGS
@given(data=st.data(), first=st.composite(encoded)())
def test_a_learnt_shape_meets_its_bytes_with_any_byte_changed(data: st.DataObject, first: bytes) -> None:
    """The shape of `first` is learnt; the same bytes with any one byte changed (a number, a count,
    a length, a name, the topic count, the generation) read as the decoder reads them."""
    read = UserDataReader()
    assert read(first) == decode_user_data(first)
    at = data.draw(st.integers(0, len(first) - 1))
    changed = first[:at] + bytes([first[at] ^ data.draw(st.integers(1, 255))]) + first[at + 1:]
    assert read(changed) == decode_user_data(changed)
    assert read(first) == decode_user_data(first)
