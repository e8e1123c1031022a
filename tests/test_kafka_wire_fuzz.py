"""Every response the Kafka-wire listener can send, at every version it advertises, built from
generated answers and encoded (issue 21): a response that fails to encode is found here, not as a
closed connection in the field (the listener closes the connection when encoding fails, as
DescribeGroups v3+ did for confluent-kafka's describe_consumer_groups).

The answers are grouplab's response dataclasses (grouplab/protocol/messages.py), generated from
their type hints, with integers in the ranges grouplab's Broker can put in each field: error codes
are grouplab's ErrorCode values, Kafka's int8 enums (config sources and types) fit an int8, epochs
Kafka's int16, offsets, timestamps and producer ids Kafka's int64, the rest int32. Each is translated by `to_kafka` at the version, encoded by
kafka-python, and decoded back to the same response. The server's ErrorResponse (a step that
failed) is translated at every version too, and so are the two answers the listener writes itself
(ApiVersions, FindCoordinator).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grouplab.coordinator.kafka_wire import translate
from grouplab.coordinator.kafka_wire.apis import APIS, KafkaApi
from grouplab.coordinator.kafka_wire.codec import api_versions_response, encode_response
from grouplab.coordinator.kafka_wire.translate import GroupsFetched, View, find_coordinator_response, to_kafka
from grouplab.coordinator.topics import topic_id_text
from grouplab.protocol import messages as m
from grouplab.protocol.errors import ErrorCode

INT8 = (-1, 2**7 - 1)
INT16 = (-1, 2**15 - 1)
INT32 = (-1, 2**31 - 1)
INT64 = (-1, 2**63 - 1)
ANSWERED_BY_LISTENER = {"ApiVersions", "FindCoordinator"}
BROKER_APIS = sorted((api for api in APIS.values() if api.name not in ANSWERED_BY_LISTENER), key=lambda a: a.key)
CASES = [(api, v) for api in BROKER_APIS for v in range(api.min_version, api.max_version + 1)]
VIEW = View(host="127.0.0.1", port=9092)
ASKED = st.sets(st.sampled_from(["group", "topic", "cluster"])).map(frozenset)


def int_range(name: str) -> tuple[int, int]:
    """The values grouplab can put in an int field of this name: Kafka's width for it."""
    if name in ("resource_type", "config_source", "source", "config_type"):  # Kafka's enums on the wire
        return INT8
    if "epoch" in name:
        return INT16
    if any(word in name for word in ("offset", "timestamp", "producer_id", "_time_ms")):
        return INT64
    return INT32


def strategy(hint: Any, name: str) -> st.SearchStrategy[Any]:
    """Values of type `hint` for a field called `name`."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(strategy(arg, name) for arg in typing.get_args(hint)))
    if origin is list:
        (item,) = typing.get_args(hint)
        return st.lists(strategy(item, name), max_size=3)
    if hint is type(None):
        return st.none()
    if dataclasses.is_dataclass(hint):
        return answers(hint)  # type: ignore[arg-type]
    if hint is bool:
        return st.booleans()
    if hint is int:
        if name == "error_code":
            return st.sampled_from([int(code) for code in ErrorCode])
        lo, hi = int_range(name)
        return st.one_of(st.integers(lo, min(hi, 100)), st.integers(lo, hi))
    if hint is str:
        if name == "topic_id":  # grouplab's ids are Kafka's text form of a UUID
            return st.uuids().map(topic_id_text)
        return st.text(max_size=12)
    if hint is bytes:
        return st.binary(max_size=24)
    raise TypeError(f"no strategy for {name}: {hint!r}")


def answers(cls: type) -> st.SearchStrategy[Any]:
    if cls in SPECIAL:
        return SPECIAL[cls]()
    hints = typing.get_type_hints(cls, vars(m))
    return st.builds(cls, **{f.name: strategy(hints[f.name], f.name) for f in dataclasses.fields(cls)})


@st.composite
def fetched_records(draw: st.DrawFn) -> list[m.FetchedRecord]:
    """What a partition log returns: increasing offsets (gaps where markers or aborted records were)."""
    base = draw(st.integers(0, 2**62))
    deltas = draw(st.lists(st.integers(0, 1000), max_size=4, unique=True))
    record = answers(m.FetchedRecord)
    return [dataclasses.replace(draw(record), offset=base + d) for d in sorted(deltas)]


@st.composite
def fetched_batches(draw: st.DrawFn) -> list[m.FetchedBatch]:
    """Stored batches one after another, each of records at consecutive offsets from its base (a
    marker: one record)."""
    offset = draw(st.integers(0, 2**62))
    batches = []
    for _ in range(draw(st.integers(0, 3))):
        batch = draw(answers(m.FetchedBatch))
        count = 1 if batch.is_control else draw(st.integers(1, 3))
        records = [dataclasses.replace(draw(answers(m.FetchedRecord)), offset=offset + i) for i in range(count)]
        batches.append(dataclasses.replace(batch, base_offset=offset, records=records))
        offset += count
    return batches


def fetch_partitions() -> st.SearchStrategy[m.FetchPartitionResponse]:
    hints = typing.get_type_hints(m.FetchPartitionResponse, vars(m))
    fields = {f.name: strategy(hints[f.name], f.name) for f in dataclasses.fields(m.FetchPartitionResponse)}
    return st.builds(m.FetchPartitionResponse, **{**fields, "records": fetched_records(), "batches": fetched_batches()})


ASSIGNMENTS = st.dictionaries(st.text(max_size=12), st.lists(st.integers(0, 2**31 - 1), max_size=3), max_size=3)


@st.composite
def heartbeat_answers(draw: st.DrawFn) -> m.ConsumerGroupHeartbeatResponse:
    """A KIP-848 heartbeat answer: the Broker names the id of every topic of its assignment."""
    hints = typing.get_type_hints(m.ConsumerGroupHeartbeatResponse, vars(m))
    answer = draw(st.builds(m.ConsumerGroupHeartbeatResponse, **{
        f.name: strategy(hints[f.name], f.name) for f in dataclasses.fields(m.ConsumerGroupHeartbeatResponse)
        if f.name not in ("assignment", "topic_ids")}))
    answer.assignment = draw(st.none() | ASSIGNMENTS)
    answer.topic_ids = {t: draw(st.uuids().map(topic_id_text)) for t in answer.assignment or {}}
    return answer


@st.composite
def described_consumer_groups(draw: st.DrawFn) -> m.ConsumerGroupDescribedGroup:
    """A described consumer group: the Broker names the id of every topic its members' assignments name."""
    hints = typing.get_type_hints(m.ConsumerGroupDescribedGroup, vars(m))
    group = draw(st.builds(m.ConsumerGroupDescribedGroup, **{
        f.name: strategy(hints[f.name], f.name) for f in dataclasses.fields(m.ConsumerGroupDescribedGroup)
        if f.name not in ("members", "topic_ids")}))
    member_hints = typing.get_type_hints(m.ConsumerGroupDescribedMember, vars(m))
    members = st.builds(m.ConsumerGroupDescribedMember, **{
        f.name: ASSIGNMENTS if f.name in ("assignment", "target_assignment") else strategy(member_hints[f.name], f.name)
        for f in dataclasses.fields(m.ConsumerGroupDescribedMember)})
    group.members = draw(st.lists(members, max_size=3))
    topics = {t for x in group.members for t in (*x.assignment, *x.target_assignment)}
    group.topic_ids = {t: draw(st.uuids().map(topic_id_text)) for t in sorted(topics)}
    return group


SPECIAL: dict[type, Any] = {m.FetchPartitionResponse: fetch_partitions, m.ConsumerGroupHeartbeatResponse: heartbeat_answers,
                            m.ConsumerGroupDescribedGroup: described_consumer_groups}


def round_trip(response: Any) -> None:
    """Encodes (as the listener does, framed); the body decodes and encodes again to the same bytes."""
    framed = encode_response(response, correlation_id=7)
    assert len(framed) > 8
    body = bytes(response.encode())
    assert bytes(type(response).decode(body, version=response.version).encode()) == body


def several_groups(api: KafkaApi, version: int) -> bool:
    """OffsetFetch v8+: the listener asks each group's queue and answers them together."""
    return api.name == "OffsetFetch" and version >= 8


def answer_of(api: KafkaApi, version: int) -> st.SearchStrategy[Any]:
    """What the listener translates for this request: the Broker's answer, or for an OffsetFetch of
    several groups the answers of each group's step (an offset answer, or the server's error)."""
    if several_groups(api, version):
        each = st.one_of(answers(m.OffsetFetchResponse), answers(m.ErrorResponse))
        return st.builds(GroupsFetched, st.lists(st.tuples(st.text(max_size=8), each), max_size=3))
    return answers(m.API[api.name].response)


@pytest.mark.parametrize("api,version", CASES, ids=[f"{a.name}-v{v}" for a, v in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_answer_encodes_at_every_version(api: KafkaApi, version: int, data: st.DataObject) -> None:
    view = View(host="127.0.0.1", port=9092, asked_operations=data.draw(ASKED, label="authorized operations asked"))
    round_trip(to_kafka(api, version, data.draw(answer_of(api, version), label="answer"), view))


@pytest.mark.parametrize("api,version", CASES, ids=[f"{a.name}-v{v}" for a, v in CASES])
@pytest.mark.parametrize("code", [ErrorCode.NOT_COORDINATOR, ErrorCode.INVALID_REQUEST])
def test_a_failed_step_is_an_answer_at_every_version(api: KafkaApi, version: int, code: ErrorCode) -> None:
    failed = m.ErrorResponse(code, "the step failed")
    if several_groups(api, version):  # each group's step answers for its group
        failed = GroupsFetched([("g1", failed), ("g2", m.OffsetFetchResponse())])  # type: ignore[assignment]
    round_trip(to_kafka(api, version, failed, VIEW))


@pytest.mark.parametrize("version", range(APIS[18].min_version, APIS[18].max_version + 1))
def test_api_versions_at_every_version(version: int) -> None:
    round_trip(api_versions_response(version))
    round_trip(api_versions_response(0, ErrorCode.UNSUPPORTED_VERSION))


FIND_COORDINATOR = APIS[10]


@pytest.mark.parametrize("version", range(FIND_COORDINATOR.min_version, FIND_COORDINATOR.max_version + 1))
@settings(max_examples=25, deadline=None)
@given(keys=st.lists(st.text(max_size=12), min_size=1, max_size=3), host=st.text(min_size=1, max_size=20),
       port=st.integers(1, 65535), node_id=st.integers(0, 2**31 - 1))
def test_find_coordinator_at_every_version(version: int, keys: list[str], host: str, port: int, node_id: int) -> None:
    request = FIND_COORDINATOR.request[version](key=keys[0], key_type=0, coordinator_keys=keys)
    response = find_coordinator_response(FIND_COORDINATOR, version, request, View(host, port, node_id))
    round_trip(response)
    if version >= 4:
        assert [c.key for c in response.coordinators] == keys


def test_every_api_the_broker_answers_is_translated() -> None:
    """A new API cannot be advertised without a translation this file then fuzzes."""
    assert {api.name for api in BROKER_APIS} <= set(translate._RESPONSES)  # noqa: SLF001
    assert {api.name for api in BROKER_APIS} <= set(m.API)
