"""Kafka's request and response framing over kafka-python's generated messages: the request
header (v1, or v2 with tagged fields for a flexible version; v0 is never sent by clients), the
body at the version asked, and responses with header v0 or v1 (ApiVersions always v0).

What Kafka refuses by closing the connection raises `CloseConnection`; ApiVersions at a version
this broker does not know is answered (v0, UNSUPPORTED_VERSION, the supported ranges) so that the
client can retry at one it does know (KIP-511).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from grouplab.coordinator.kafka_wire.apis import API_VERSIONS_KEY, APIS, KafkaApi
from grouplab.protocol.errors import ErrorCode

_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id: the same in every header version
_INT16 = struct.Struct(">h")
_FRAME_HEADER_V0 = struct.Struct(">ii")  # frame length, correlation id
_FRAME_HEADER_V1 = struct.Struct(">iiB")  # and no tagged fields


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
        client_id, start = _header_rest(frame, api.request.flexible_version_q(version))
        body = api.request.decode(memoryview(frame)[start:], version=version)
    except Exception as exc:  # noqa: BLE001 - kafka-python raises struct.error, ValueError, UnicodeDecodeError, ...
        raise CloseConnection(f"{api.name} v{version} request is malformed: {exc!r}") from None
    return KafkaRequest(api, version, correlation_id, client_id, body)


def _header_rest(frame: bytes, flexible: bool) -> tuple[str, int]:
    """The request header after its fixed prefix: client_id (a nullable string, not compact even in
    header v2), then for a flexible version the header's tagged fields (none is known: skipped).
    Returns the client id ("" for null) and where the body starts."""
    (length,) = _INT16.unpack_from(frame, _PREFIX.size)
    pos = _PREFIX.size + 2
    client_id = ""
    if length >= 0:
        end = pos + length
        if end > len(frame):
            raise ValueError(f"client_id of {length} bytes overruns the frame")
        client_id = frame[pos:end].decode("utf-8")
        pos = end
    elif length != -1:
        raise ValueError(f"client_id length {length}")
    if flexible:
        count, pos = _uvarint(frame, pos)
        for _ in range(count):
            _, pos = _uvarint(frame, pos)  # tag
            size, pos = _uvarint(frame, pos)
            pos += size
            if pos > len(frame):
                raise ValueError("a tagged field overruns the frame")
    return client_id, pos


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise ValueError("bad unsigned varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def encode_response(response: Any, correlation_id: int) -> bytes:
    """The framed response: length, header (v1 for a flexible version, v0 otherwise and for
    ApiVersions), body. The header is written here (a correlation id, and an empty tagged-field
    section for v1), the body by kafka-python."""
    return frame_response(response.encode(), header_v1(response), correlation_id)


def header_v1(response: Any) -> bool:
    """Does this response take header v1 (flexible versions; never ApiVersions, KIP-511)?"""
    return response.API_KEY != API_VERSIONS_KEY and response.flexible_version_q(response.API_VERSION)


def frame_response(body: bytes, flexible_header: bool, correlation_id: int) -> bytes:
    """An encoded response body, framed with its header for `correlation_id`."""
    if flexible_header:
        return _FRAME_HEADER_V1.pack(len(body) + 5, correlation_id, 0) + body
    return _FRAME_HEADER_V0.pack(len(body) + 4, correlation_id) + body


def api_versions_response(version: int, error: ErrorCode = ErrorCode.NONE) -> Any:
    api = APIS[API_VERSIONS_KEY]
    cls = api.response[version]
    return cls(error_code=error, throttle_time_ms=0, api_keys=[
        cls.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
        for a in sorted(APIS.values())])
