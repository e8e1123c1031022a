"""Kafka's request and response framing over kafka-python's generated messages: the request
header (v1, or v2 with tagged fields for a flexible version; v0 is never sent by clients), the
body at the version asked, and responses with header v0 or v1 (ApiVersions always v0).

What Kafka refuses by closing the connection raises `CloseConnection`; ApiVersions at a version
this broker does not know is answered (v0, UNSUPPORTED_VERSION, the supported ranges) so that the
client can retry at one it does know (KIP-511).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_header import RequestHeader

from coordinator.kafka_wire.apis import API_VERSIONS_KEY, APIS, KafkaApi
from protocol.errors import ErrorCode

_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id: the same in every header version


class CloseConnection(Exception):
    """Kafka's answer to this frame is a closed connection; the message says why (for the log)."""


@dataclass
class KafkaRequest:
    api: KafkaApi
    version: int
    correlation_id: int
    client_id: str
    body: Any  # kafka-python's request object


@dataclass
class UnsupportedApiVersions:
    """ApiVersions at a version above the ones supported: answered at v0 with error 35."""

    correlation_id: int


def looks_like_kafka(frame: bytes) -> bool:
    """Is this a Kafka request header (a known API key, a plausible version, a client id length
    that fits)? The msgpack port uses it to tell a misdirected Kafka client what to do: a msgpack
    request is a map, whose first byte is never 0x00."""
    if len(frame) < _PREFIX.size + 2 or frame[0] != 0:
        return False
    key, version, _ = _PREFIX.unpack_from(frame)
    (client_id_length,) = struct.unpack_from(">h", frame, _PREFIX.size)
    return key in APIS and 0 <= version < 100 and -1 <= client_id_length <= len(frame) - _PREFIX.size - 2


def decode_request(frame: bytes) -> KafkaRequest | UnsupportedApiVersions:
    if len(frame) < _PREFIX.size:
        raise CloseConnection(f"a request of {len(frame)} bytes has no header")
    key, version, correlation_id = _PREFIX.unpack_from(frame)
    api = APIS.get(key)
    if api is None:
        raise CloseConnection(f"unknown API key {key}")
    if not api.min_version <= version <= api.max_version:
        if key == API_VERSIONS_KEY and version > api.max_version:
            return UnsupportedApiVersions(correlation_id)
        raise CloseConnection(f"{api.name} v{version} is not supported (v{api.min_version}-{api.max_version})")
    try:
        stream = io.BytesIO(frame)
        header = RequestHeader.decode(stream, flexible=api.request.flexible_version_q(version))
        body = api.request.decode(memoryview(frame)[stream.tell():], version=version)
    except Exception as exc:  # noqa: BLE001 - kafka-python raises struct.error, ValueError, UnicodeDecodeError, ...
        raise CloseConnection(f"{api.name} v{version} request is malformed: {exc!r}") from None
    return KafkaRequest(api, version, correlation_id, header.client_id or "", body)


def encode_response(response: Any, correlation_id: int) -> bytes:
    """The framed response: length, header (v1 for a flexible version, v0 otherwise and for
    ApiVersions), body."""
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


def api_versions_response(version: int, error: ErrorCode = ErrorCode.NONE) -> Any:
    api = APIS[API_VERSIONS_KEY]
    cls = api.response[version]
    return cls(error_code=error, throttle_time_ms=0, api_keys=[
        cls.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
        for a in sorted(APIS.values())])
