"""docs/events.md and protocol/events.py describe the same lines.

The page is the contract readers rely on; the classes are what the code writes. This test reads
the page's §4 (the `#### \\`name\\`` sections' field tables, with G/M/T/P/S expanded, and the
table-form sections) and fails if an event is documented with other fields, in another order or
of another type than its class has, or if a class is not documented at all.
"""

from __future__ import annotations

import re
import types
import typing
from collections import Counter
from enum import Enum
from pathlib import Path

from grouplab.protocol import events
from grouplab.protocol.states import GroupState, RemovalReason

DOC = Path(__file__).resolve().parent.parent / "docs" / "events.md"


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end)]


def _cells(row: str) -> list[str]:
    """A markdown table row's cells (`\\|` inside a cell is a literal bar)."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def _name(cell: str) -> str:
    match = re.fullmatch(r"(?:#### )?`(\w+)`", cell)
    assert match is not None, f"not an event name: {cell!r}"
    return match.group(1)


def _without_parentheses(text: str) -> str:
    while (stripped := re.sub(r"\([^()]*\)", "", text)) != text:
        text = stripped
    return text


def _abbreviations(events_section: str) -> dict[str, list[tuple[str, str]]]:
    """§4's opening paragraph: `"G" stands for the group fields \\`group_id\\` (str), ...`."""
    intro = events_section[:events_section.index("\n### ")]
    parts = re.split(r'"([A-Z])" stands for', intro)
    return {letter: re.findall(r"`(\w+)`\s+\(([^,:)]+)", body) for letter, body in zip(parts[1::2], parts[2::2])}


def documented() -> list[tuple[str, list[tuple[str, str | None]]]]:
    """(event name, [(field, doc type or None)]) for every event §4 documents, in page order."""
    text = DOC.read_text(encoding="utf-8")
    section = _section(text, "## 4. Events", "## 5.")
    abbreviations = _abbreviations(section)
    out: list[tuple[str, list[tuple[str, str | None]]]] = []
    for block in re.split(r"\n(?=#{3,4} )", section)[1:]:
        heading, _, body = block.partition("\n")
        rows = [_cells(line) for line in body.splitlines() if line.startswith("|")][2:]  # no header, no rule
        if heading.startswith("#### "):
            fields: list[tuple[str, str | None]] = []
            for cells in rows:
                if cells[0] in abbreviations:
                    fields += abbreviations[cells[0]]
                    continue
                names = re.findall(r"`(\w+)`", cells[0])
                doc_types = [cells[1]] if len(names) == 1 else [t.strip() for t in cells[1].split(",")]
                fields += zip(names, doc_types if len(doc_types) == len(names) else doc_types * len(names))
            out.append((_name(heading.strip()), fields))
        elif rows:  # a table-form section: | Event | When | Fields |, each line carrying the base it names
            carried = re.search(r"carr(?:y|ies) ([A-Z])\b", body)
            base = abbreviations[carried.group(1)] if carried else []
            for cells in rows:
                names = re.findall(r"`(\w+)`", _without_parentheses(cells[2]))
                out.append((_name(cells[0]), [*base, *((n, None) for n in names)]))
    return out


def _doc_kind(doc_type: str) -> str:
    t = doc_type.replace(" ", "")
    nullable = t.endswith("|null") and t != "null"
    base = t.removesuffix("|null") if nullable else t
    kind = "list" if base.startswith("[") else "map" if base.startswith("map") else base
    return kind + ("|null" if nullable else "")


def _is_enum(annotation: object) -> bool:
    """An enumeration, or a union of them (M's `state`: a classic or a consumer-protocol member's)."""
    if isinstance(annotation, types.UnionType):
        return all(_is_enum(a) for a in typing.get_args(annotation))
    return isinstance(annotation, type) and issubclass(annotation, Enum)


def _class_kind(annotation: object) -> str:
    if _is_enum(annotation):
        return "str"  # written as its value
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return _class_kind(inner) + "|null"
    origin = typing.get_origin(annotation) or annotation
    if origin is type(None):
        return "null"
    if isinstance(origin, type) and issubclass(origin, Enum):
        return "str"  # written as its value
    return {list: "list", dict: "map"}.get(origin, getattr(origin, "__name__", str(origin)))  # type: ignore[call-overload]


def _hints(cls: type) -> dict[str, object]:
    return typing.get_type_hints(cls, globalns=vars(events))


def test_every_documented_event_has_a_class_with_those_fields_in_that_order():
    classes = Counter((cls.NAME, cls.FIELDS) for cls in events.EVENT_TYPES)
    docs = Counter((name, tuple(f for f, _ in fields)) for name, fields in documented())
    assert len(docs) > 80
    assert sorted(docs - classes) == [], "documented in docs/events.md, but no class in protocol/events.py has these fields"
    assert sorted(classes - docs) == [], "a class in protocol/events.py that docs/events.md does not document"


def test_documented_types_are_the_classes_types():
    by_shape = {(cls.NAME, cls.FIELDS): cls for cls in events.EVENT_TYPES}
    wrong = []
    for name, fields in documented():
        cls = by_shape.get((name, tuple(f for f, _ in fields)))
        if cls is None:
            continue  # the test above reports it
        hints = _hints(cls)
        for field, doc_type in fields:
            if doc_type is not None and _doc_kind(doc_type) != _class_kind(hints[field]):
                wrong.append(f"{name}.{field}: docs/events.md says {doc_type}, {cls.__name__} has {hints[field]}")
    assert wrong == []


def test_every_event_is_listed_with_its_emitter():
    """§3 names each emitter's events (the simulator's by reference to §4.6)."""
    text = DOC.read_text(encoding="utf-8")
    emitters = _section(text, "## 3.", "## 4.")
    simulator = {cls.NAME for cls in events.EVENT_TYPES if issubclass(cls, events.SimulatorEvent)}
    run_account = {cls.NAME for cls in events.EVENT_TYPES if cls.__name__.startswith("Run")}
    listed = set(re.findall(r"`(\w+)`", emitters))
    assert {cls.NAME for cls in events.EVENT_TYPES} - simulator - run_account - listed == set()


def test_enumerations_are_written_as_their_values():
    for cls in events.EVENT_TYPES:
        hints = _hints(cls)
        assert cls.ENUM_FIELDS == tuple(f for f in cls.FIELDS if _is_enum(hints[f]))


def test_a_line_is_written_as_its_class_says():
    ev = events.MemberRemoved("g", 3, GroupState.STABLE, member_id="m-1", reason=RemovalReason.SESSION_TIMEOUT,
                              detail="no heartbeat for 1000 ms")
    assert ev.log_fields() == {"group_id": "g", "generation_id": 3, "state": "Stable", "member_id": "m-1",
                               "reason": "session_timeout", "detail": "no heartbeat for 1000 ms"}
    assert list(ev.log_fields()) == list(events.MemberRemoved.FIELDS)
