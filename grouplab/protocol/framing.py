"""Length-prefixed msgpack frames, sans-IO: bytes in, frames out; objects in, bytes out.

A frame is a 4-byte unsigned big-endian length N, then N bytes of msgpack (docs/design.md §3).
`FrameReader` never blocks and never reads a socket; the asyncio shells feed it what arrived.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import msgpack

from grouplab.protocol import schema
from grouplab.protocol.errors import AnswerTooLarge, ErrorCode, FrameTooLarge, ProtocolError
from grouplab.protocol.messages import API, RequestHeader

DEFAULT_MAX_FRAME_BYTES = 1024 * 1024
_LEN = struct.Struct(">I")


class FrameReader:
    """Accumulates bytes and splits them into frame payloads.

    A declared length over `max_frame_bytes` raises FrameTooLarge before the body is buffered, so
    a client cannot make the server hold an arbitrary amount of memory; the complete frames that
    arrived before it ride along on the exception's `frames`.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames: list[bytes] = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if size > self.max_frame_bytes:
                del buf[:pos]
                error = FrameTooLarge(size, self.max_frame_bytes)
                error.frames = frames  # the complete frames before it still deserve answers
                raise error
            if len(buf) - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)


def pack(obj: Any, max_bytes: int | None = None) -> bytes:
    """msgpack bytes of a plain value or a message dataclass, with the length prefix. With
    `max_bytes`, a payload over it raises AnswerTooLarge: with its exact size, or, when the
    objects converted so far already cannot fit (schema.packing_hook), with that lower bound and
    before the rest is packed."""
    try:
        payload = msgpack.packb(obj, use_bin_type=True, default=schema.packing_hook(max_bytes))
    except schema.FloorExceeded as exc:
        assert max_bytes is not None
        raise AnswerTooLarge(exc.floor, max_bytes, exact=False) from None
    if max_bytes is not None and len(payload) > max_bytes:
        raise AnswerTooLarge(len(payload), max_bytes, exact=True)
    return _LEN.pack(len(payload)) + payload


def unpack(payload: bytes) -> Any:
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"frame is not valid msgpack: {type(exc).__name__}{(': ' + str(exc)) if str(exc) else ''}") from None


@dataclass
class DecodedRequest:
    header: RequestHeader
    body: Any  # the request dataclass named by header.api


class BadRequest(ProtocolError):
    """A request that cannot be served; `correlation_id` is set when the envelope was readable."""

    def __init__(self, code: ErrorCode, message: str, correlation_id: int = -1, api: str | None = None) -> None:
        super().__init__(code, message)
        self.correlation_id = correlation_id
        self.api = api


def decode_request(payload: bytes) -> DecodedRequest:
    """Validate one request frame completely (envelope, API, version, body) before anyone acts on it."""
    try:
        raw = unpack(payload)
    except ProtocolError as exc:
        raise BadRequest(exc.code, exc.message) from None
    if not isinstance(raw, dict):
        raise BadRequest(ErrorCode.INVALID_REQUEST, f"request must be a map, got {type(raw).__name__}")
    cid = raw.get("correlation_id")
    cid = cid if isinstance(cid, int) and not isinstance(cid, bool) else -1
    try:
        header = schema.decode(RequestHeader, raw)
    except ProtocolError as exc:
        raise BadRequest(exc.code, exc.message, cid) from None
    spec = API.get(header.api)
    if spec is None:
        raise BadRequest(
            ErrorCode.INVALID_REQUEST, f"unknown api {header.api!r}; known: {', '.join(sorted(API))}", cid, header.api
        )
    if not spec.min_version <= header.version <= spec.max_version:
        raise BadRequest(
            ErrorCode.UNSUPPORTED_VERSION,
            f"{header.api} version {header.version} is not supported (supported: {spec.min_version}..{spec.max_version})",
            cid,
            header.api,
        )
    body = raw.get("body", {})
    try:
        decoded: Any = schema.decode(spec.request, body, "body")
    except ProtocolError as exc:
        raise BadRequest(exc.code, f"{header.api}: {exc.message}", cid, header.api) from None
    return DecodedRequest(header, decoded)


def grouplab_correlation_id(payload: bytes) -> int | None:
    """The correlation id of a frame that reads as a grouplab request (a msgpack map with an `api`
    name and a correlation id), else None: how the Kafka-wire port recognises grouplab's own
    clients sent to the wrong port, to answer them in words they can read."""
    try:
        raw = unpack(payload)
    except ProtocolError:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("api"), str):
        return None
    cid = raw.get("correlation_id")
    return cid if isinstance(cid, int) and not isinstance(cid, bool) else None


# How the Kafka-wire port's answer to a grouplab request begins: grouplab's clients recognise it and
# stop with its words (any other answer keeps its API's meaning: a Heartbeat's is an error code alone).
WRONG_PORT = "this is grouplab's Kafka-wire port"


def wrong_port(body: Any) -> tuple[int, str] | None:
    """(error_code, error_message) of the Kafka-wire port's answer to a grouplab request, else None."""
    if isinstance(body, dict) and isinstance(body.get("error_code"), int):
        message = body.get("error_message")
        if isinstance(message, str) and message.startswith(WRONG_PORT):
            return body["error_code"], message
    return None


def encode_request(header: RequestHeader, body: Any) -> bytes:
    return pack(
        {
            "api": header.api,
            "version": header.version,
            "correlation_id": header.correlation_id,
            "client_id": header.client_id,
            "body": body,
        }
    )


def encode_response(correlation_id: int, body: Any, max_bytes: int | None = None) -> bytes:
    """A response frame; with `max_bytes` (grouplab.response.max.bytes), one whose payload would
    be larger raises AnswerTooLarge instead, having done at most about that much work."""
    return pack({"correlation_id": correlation_id, "body": body}, max_bytes)


def read_response(payload: bytes) -> tuple[int, Any]:
    """(correlation_id, raw body map) of a response, so a client can pick the body type by the id."""
    raw = unpack(payload)
    cid = raw.get("correlation_id") if isinstance(raw, dict) else None
    if not isinstance(cid, int) or isinstance(cid, bool):
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, "response is not a map with a correlation_id")
    return cid, raw.get("body")


def decode_response(payload: bytes, response_cls: type) -> tuple[int, Any]:
    """(correlation_id, typed body) of a response; for clients. Raises ProtocolError if malformed."""
    cid, body = read_response(payload)
    return cid, schema.decode(response_cls, body, "body")
