#!/usr/bin/env python3
"""Compare two libraries for Kafka's binary encoding, for grouplab's Kafka-wire listener
(docs/kafka-wire.md): `kio` and kafka-python's `kafka.protocol` / `kafka.record` modules.

Correctness: messages in the versions current clients send (non-flexible and flexible), encoded by
one library and decoded by the other, must re-encode to the same bytes; the ApiVersions response
header quirk; record batches v2 with gzip, millisecond timestamps and CRC32C. Speed: decoding the
requests a consumer group sends most and encoding the responses to them, per call.

    python scripts/compare_kafka_codecs.py [--iterations N]

Prints a table; the findings are written up in docs/kafka-wire.md.
"""

from __future__ import annotations

import argparse
import datetime
import io
import time
from typing import Any, Callable

from kafka.protocol.consumer.fetch import FetchRequest as KpFetchRequest
from kafka.protocol.consumer.group import HeartbeatRequest as KpHeartbeatRequest
from kafka.protocol.consumer.group import JoinGroupRequest as KpJoinGroupRequest
from kafka.protocol.consumer.group import JoinGroupResponse as KpJoinGroupResponse
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kio.serial import entity_reader, entity_writer


def kio_module(name: str, version: int, kind: str) -> Any:
    import importlib
    return importlib.import_module(f"kio.schema.{name}.v{version}.{kind}")


def kio_encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def kio_decode(cls: type, data: bytes) -> Any:
    obj, size = entity_reader(cls)(data, 0)
    assert size == len(data), f"kio read {size} of {len(data)} bytes"
    return obj


def join_request_kp(version: int) -> Any:
    cls = KpJoinGroupRequest
    return cls[version](group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=30000, member_id="m-1",
                        group_instance_id="i-1" if version >= 5 else None, protocol_type="consumer",
                        protocols=[cls.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x03" + b"x" * 40),
                                   cls.JoinGroupRequestProtocol(name="cooperative-sticky", metadata=b"\x00\x03")],
                        reason="rebalance" if version >= 8 else None)


def heartbeat_request_kp(version: int) -> Any:
    return KpHeartbeatRequest[version](group_id="g", generation_id=7, member_id="m-1",
                                       group_instance_id="i-1" if version >= 3 else None)


def fetch_request_kp(version: int) -> Any:
    c = KpFetchRequest
    parts = [c.FetchTopic.FetchPartition(partition=p, fetch_offset=100 * p, log_start_offset=-1, partition_max_bytes=1 << 20,
                                         current_leader_epoch=-1) for p in range(6)]
    topic = c.FetchTopic(topic="t" if version < 13 else None, partitions=parts)
    if version >= 13:
        import uuid
        topic.topic_id = uuid.UUID(int=1)
    return c[version](replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, isolation_level=1,
                      session_id=0, session_epoch=-1, topics=[topic], forgotten_topics_data=[], rack_id="")


def join_response_kp(version: int) -> Any:
    c = KpJoinGroupResponse
    members = [c.JoinGroupResponseMember(member_id=f"m-{i}", group_instance_id=None, metadata=b"\x00\x03" + b"y" * 40)
               for i in range(10)]
    return c[version](throttle_time_ms=0, error_code=0, generation_id=3, protocol_type="consumer",
                      protocol_name="range", leader="m-0", skip_assignment=False, member_id="m-0", members=members)


CASES: list[tuple[str, str, int, str, Callable[[int], Any]]] = [
    # (label, kio schema name, version, kio kind, kafka-python builder)
    ("JoinGroup v5 request (aiokafka)", "join_group", 5, "request", join_request_kp),
    ("JoinGroup v9 request (librdkafka)", "join_group", 9, "request", join_request_kp),
    ("Heartbeat v1 request", "heartbeat", 1, "request", heartbeat_request_kp),
    ("Heartbeat v4 request", "heartbeat", 4, "request", heartbeat_request_kp),
    ("Fetch v11 request", "fetch", 11, "request", fetch_request_kp),
    ("Fetch v12 request (flexible)", "fetch", 12, "request", fetch_request_kp),
    ("JoinGroup v5 response", "join_group", 5, "response", join_response_kp),
    ("JoinGroup v9 response", "join_group", 9, "response", join_response_kp),
]


def kio_class(name: str, version: int, kind: str) -> type:
    module = kio_module(name, version, kind)
    return next(v for k, v in vars(module).items()
                if isinstance(v, type) and getattr(v, "__type__", None) is not None and v.__type__.name == kind)


def cross_check() -> list[tuple[str, str]]:
    rows = []
    for label, name, version, kind, build in CASES:
        kp_obj = build(version)
        kp_bytes = bytes(kp_obj.encode(version=version))
        cls = kio_class(name, version, kind)
        try:
            k_obj = kio_decode(cls, kp_bytes)
            ok = kio_encode(k_obj) == kp_bytes
            back = type(kp_obj).decode(kio_encode(k_obj), version=version)
            ok = ok and bytes(back.encode()) == kp_bytes
            rows.append((label, "same bytes both ways" if ok else "DIFFERENT bytes"))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            rows.append((label, f"error: {exc!r}"[:80]))
    return rows


def api_versions_header() -> tuple[str, str]:
    """An ApiVersions v3 response keeps response header v0 (no tagged fields in the header)."""
    resp = KpApiVersionsResponse[3](error_code=0, api_keys=[], throttle_time_ms=0)
    resp.with_header(correlation_id=9)
    kp = bytes(resp.encode(header=True))
    kp_ok = kp[:4] == b"\x00\x00\x00\x09" and kp[4:6] == b"\x00\x00"  # correlation id, then error_code at once
    cls = kio_class("api_versions", 3, "response")
    header = cls.__header_schema__.__name__ + " " + cls.__header_schema__.__module__.split(".")[-2]
    return ("ApiVersions v3 response header v0", f"kafka-python {'yes' if kp_ok else 'NO'}; kio declares {header}")


def record_batches() -> list[tuple[str, str]]:
    rows = []
    ts = 1_700_000_000_123
    for codec, label in ((0, "none"), (1, "gzip")):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(3):
            b.append(i, timestamp=ts + i, key=b"k", value=b"v%d" % i + b"." * 200, headers=[("h", b"1")])
        data = bytes(b.build())
        assert DefaultRecordBatch(data).compression_type == codec
        kp_batch = DefaultRecordBatch(data)
        kp_ok = kp_batch.validate_crc() and [r.timestamp for r in kp_batch] == [ts, ts + 1, ts + 2]
        try:
            from kio.records.readers import read_batch
            batch, _ = read_batch(data, 0)
            stamps = [int(r.timestamp.timestamp() * 1000) for r in batch.records]
            values = [r.value for r in batch.records]
            kio_res = "ok" if stamps == [ts, ts + 1, ts + 2] and values == [b"v%d" % i + b"." * 200 for i in range(3)] else \
                f"timestamps {stamps[:1]}... for {ts}, values {[(v or b'')[:4] for v in values[:1]]}..."
        except Exception as exc:  # noqa: BLE001
            kio_res = f"error: {exc!r}"[:60]
        rows.append((f"record batch v2, {label}", f"kafka-python {'ok' if kp_ok else 'WRONG'}; kio {kio_res}"))
    return rows


def timed(fn: Callable[[], object], n: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def speed(n: int) -> list[tuple[str, float, float]]:
    rows = []
    for label, name, version, kind, build in CASES:
        kp_obj = build(version)
        data = bytes(kp_obj.encode(version=version))
        cls = kio_class(name, version, kind)
        kp_cls = type(kp_obj)
        k_obj = kio_decode(cls, data)
        if kind == "request":
            rows.append((f"decode {label}", timed(lambda: kp_cls.decode(data, version=version), n),
                         timed(lambda: entity_reader(cls)(data, 0), n)))
        else:
            rows.append((f"encode {label}", timed(lambda: kp_obj.encode(version=version), n),
                         timed(lambda: kio_encode(k_obj), n)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20000)
    args = parser.parse_args()
    import kio
    from kafka import __version__ as kp_version
    print(f"kafka-python {kp_version}, kio {kio.__version__}\n")
    print("| check | result |\n|---|---|")
    for label, result in [*cross_check(), api_versions_header(), *record_batches()]:
        print(f"| {label} | {result} |")
    print(f"\n| per call, µs (mean of {args.iterations}) | kafka-python | kio |\n|---|---:|---:|")
    for label, kp_us, kio_us in speed(args.iterations):
        print(f"| {label} | {kp_us:.1f} | {kio_us:.1f} |")


if __name__ == "__main__":
    main()
