"""A small request/response client for the admin commands (describe, topics) and for tests that
speak the wire protocol directly: one connection, correlation ids matched, typed bodies back."""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

from protocol import schema
from protocol.errors import ErrorCode
from protocol.framing import encode_request, read_response
from protocol.messages import (
    API,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DescribeGroupsRequest,
    DescribedGroup,
    ListGroupsRequest,
    MetadataRequest,
    RequestHeader,
)


class AdminError(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        name = ErrorCode.from_code(code).name
        super().__init__(f"{name} ({code}): {message}" if message else f"{name} ({code})")
        self.code = code


def parse_bootstrap(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


class AdminClient:
    def __init__(self, host: str = "127.0.0.1", port: int = 9092, client_id: str = "grouplab-admin") -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)

    async def __aenter__(self) -> "AdminClient":
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except ConnectionError:
                pass

    async def request(self, api: str, body: Any, timeout_s: float = 30.0) -> Any:
        """Send one request and wait for its response (typed as the API's response class)."""
        assert self._reader is not None and self._writer is not None
        cid = next(self._ids)
        self._writer.write(encode_request(RequestHeader(api, API[api].max_version, cid, self.client_id), body))
        await self._writer.drain()
        while True:
            header = await asyncio.wait_for(self._reader.readexactly(4), timeout_s)
            payload = await asyncio.wait_for(self._reader.readexactly(struct.unpack(">I", header)[0]), timeout_s)
            got, raw = read_response(payload)
            if got in (cid, -1):
                return schema.decode(API[api].response, raw, "body")

    # ------------------------------------------------------------------ conveniences

    async def create_topics(self, topics: dict[str, int]) -> None:
        resp = await self.request("CreateTopics", CreateTopicsRequest([CreatableTopic(n, p) for n, p in topics.items()]))
        for r in resp.topics:
            if r.error_code:
                raise AdminError(r.error_code, r.error_message)

    async def create_partitions(self, topic: str, total: int) -> None:
        resp = await self.request("CreatePartitions", CreatePartitionsRequest([CreatePartitionsTopic(topic, total)]))
        for r in resp.results:
            if r.error_code:
                raise AdminError(r.error_code, r.error_message)

    async def topics(self) -> dict[str, int]:
        resp = await self.request("Metadata", MetadataRequest(topics=None))
        return {t.name: len(t.partitions) for t in resp.topics if t.error_code == 0}

    async def describe_groups(self, groups: list[str]) -> list[DescribedGroup]:
        resp = await self.request("DescribeGroups", DescribeGroupsRequest(groups))
        if resp.error_code:
            raise AdminError(resp.error_code, resp.error_message)
        return resp.groups

    async def list_groups(self) -> list[str]:
        resp = await self.request("ListGroups", ListGroupsRequest())
        return [g.group_id for g in resp.groups]
