"""What the fault proxy reads and writes of Kafka's own frames, in its Kafka-wire mode
(`FaultProxy(wire="kafka")`, docs/faults.md): the API, version, correlation id and client id of a
request; the correlation id of a response (Kafka responses carry no API: the proxy remembers what
each correlation id asked); an `error` rule's answer, encoded at the request's version; and the
broker address in Metadata, FindCoordinator and DescribeCluster answers, rewritten to the proxy's
so that clients keep talking through it after they bootstrap (as any Kafka proxy must).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from grouplab.coordinator.kafka_wire.apis import APIS
from grouplab.coordinator.kafka_wire.codec import api_versions_response, encode_response
from grouplab.coordinator.kafka_wire.translate import GroupsFetched, View, to_kafka
from grouplab.protocol.errors import ErrorCode

_PREFIX = struct.Struct(">hhih")  # api key, version, correlation id, client id length


class KafkaRequestMeta(NamedTuple):
    api: str
    version: int
    correlation_id: int
    client_id: str


def request_meta(payload: bytes) -> KafkaRequestMeta | None:
    """The header of a Kafka request (v1 and v2 start alike), or None for what is not one we know."""
    if len(payload) < _PREFIX.size:
        return None
    key, version, cid, n = _PREFIX.unpack_from(payload)
    api = APIS.get(key)
    if api is None:
        return None
    client_id = ""
    if n > 0 and len(payload) >= _PREFIX.size + n:
        client_id = payload[_PREFIX.size:_PREFIX.size + n].decode("utf-8", "replace")
    return KafkaRequestMeta(api.name, version, cid, client_id)


def response_correlation_id(payload: bytes) -> int | None:
    return struct.unpack_from(">i", payload)[0] if len(payload) >= 4 else None


_BY_NAME = {api.name: api for api in APIS.values()}


def error_frame(api: str, version: int, correlation_id: int, body: Any, host: str, port: int,
                request: bytes | None = None, response: bytes | None = None) -> bytes | None:
    """An error rule's answer as a Kafka frame (grouplab's error body translated at `version`), or
    None when the API cannot carry it (then the rule drops the frame instead). `request`: the
    request it answers (its payload), or `response`: the answer it replaces, where the answer names
    what the request asked: an OffsetFetch v8+ answers each of its groups with the error."""
    spec = _BY_NAME.get(api)
    if spec is None or not spec.min_version <= version <= spec.max_version:
        return None
    if api == "ApiVersions":
        # As the listener's own error answer (KIP-511): at v0 whatever the version asked, which is
        # how clients read an ApiVersions error.
        return encode_response(api_versions_response(0, ErrorCode(body.error_code)), correlation_id)
    try:
        if api == "OffsetFetch" and version >= 8:
            if request is not None:
                groups = spec.request.decode(request, version=version, header=True).groups
            elif response is not None:
                groups = spec.response.decode(response, version=version, header=True).groups
            else:
                return None
            body = GroupsFetched([(g.group_id, body) for g in groups or []])
        return encode_response(to_kafka(spec, version, body, View(host, port)), correlation_id)
    except Exception:  # noqa: BLE001 - an API whose answer needs more than an error code
        return None


def rewrite_advertised(api: str, version: int, payload: bytes, host: str, port: int,
                       advertise: dict[int, tuple[str, int]] | None = None) -> bytes:
    """A Metadata, FindCoordinator or DescribeCluster answer naming the proxy instead of the
    coordinator (the payload, length prefix excluded); any other answer, or one that does not
    decode, unchanged. With `advertise` (a cluster, a proxy per broker), each broker is named by
    its own proxy's address."""
    if api not in ("Metadata", "FindCoordinator", "DescribeCluster"):
        return payload
    spec = _BY_NAME[api]

    def where(node: int, was: tuple[str, int]) -> tuple[str, int]:
        if advertise is None:
            return host, port
        return advertise.get(node, was)

    try:
        response = spec.response.decode(payload, version=version, header=True)
        if api in ("Metadata", "DescribeCluster"):
            for broker in response.brokers:
                node = broker.node_id if api == "Metadata" else broker.broker_id
                broker.host, broker.port = where(node, (broker.host, broker.port))
        elif version >= 4:
            for coordinator in response.coordinators:
                if coordinator.node_id >= 0:
                    coordinator.host, coordinator.port = where(coordinator.node_id, (coordinator.host, coordinator.port))
        elif response.node_id >= 0:
            response.host, response.port = where(response.node_id, (response.host, response.port))
        cid = response.header.correlation_id
        framed = encode_response(spec.response[version](**_fields(response)), cid)
    except Exception:  # noqa: BLE001 - not ours to judge: passed on as it came
        return payload
    return framed[4:]


def _fields(message: Any) -> dict[str, Any]:
    return {name: getattr(message, name) for name in message._struct.fields}
