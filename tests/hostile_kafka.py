"""Hand-made record batches a hostile producer sends (tests/test_kafka_port_hostile.py): a records
section of any size and a header record count of any value, with a correct CRC, which kafka-python's
batch builder would take minutes to make (3,000,000 records) or refuses to make (a false count).
The same in scripts/probe_kafka_hostile.py, which runs outside the test tree."""

from __future__ import annotations

import gzip
import struct

from kafka.record.util import calc_crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")  # batch v2 header, 61 bytes


def empty_records(count: int) -> bytes:
    """`count` records with no key, value or headers, offset deltas 0..count-1, as a producer writes them."""
    out = bytearray()
    for i in range(count):
        delta = _varint(i)
        body = b"\x00\x00" + delta + b"\x01\x01\x00"  # attributes, timestamp delta, offset delta, key -1, value -1, no headers
        out += _varint(len(body)) + body
    return bytes(out)


def one_record(value: bytes) -> bytes:
    body = b"\x00\x00\x00\x01" + _varint(len(value)) + value + b"\x00"
    return _varint(len(body)) + body


def raw_batch(records: bytes, count: int, codec: int = 0) -> bytes:
    """A batch v2 holding `records` (compressed with gzip when codec is 1) under a header that says `count`."""
    payload = gzip.compress(records, compresslevel=9) if codec == 1 else records
    header = _HEADER.pack(0, 0, -1, 2, 0, codec, max(count - 1, 0), 0, 0, -1, -1, -1, count)
    data = bytearray(header + payload)
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def _varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)
