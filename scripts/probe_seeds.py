"""Requests of any Kafka API and version with every field filled (scripts/probe_kafka_hostile.py,
case 5): each array holds `n` entries, every string is "t", numbers 0 (partition indexes 1), so
that a mutation has lengths, counts and names to hit, as a real client's request has."""

from __future__ import annotations

import uuid
from typing import Any


def _value(type_str: str, name: str) -> Any:
    if type_str.startswith(("int", "uint")):
        return 1 if "partition" in name or "index" in name else 0
    return {"float64": 0.0, "string": "t", "bool": False, "bytes": b"x", "records": None,
            "uuid": uuid.UUID(int=0)}[type_str]


def _q(x: Any) -> Any:
    return x() if callable(x) else x


def _fields(struct: Any, version: int, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, f in struct.fields.items():
        if not f.for_version_q(version):
            continue
        if _q(f.is_struct_array):
            out[name] = [f.data_class(**_fields(f.array_of, version, n)) for _ in range(n)]
        elif _q(f.is_struct):
            out[name] = f.data_class(**_fields(f, version, n))
        elif _q(f.is_array):
            out[name] = [_value(f.array_of.type_str, name)] * n
        else:
            out[name] = _value(f.type_str, name)
    return out


def seeded_request(request_class: Any, version: int, n: int = 2) -> Any:
    """kafka-python's request `request_class[version]` with every field of that version filled."""
    cls = request_class[version]
    return cls(**_fields(cls._struct, version, n))  # noqa: SLF001
