"""The dashboard's message timeline: each trace line (docs/events.md §7) as one sentence, each
answer tied to its request so a click shows both raw, and the run's faults and the group's turning
points (a member removed, a rebalance begun, a generation stable) between them.

`describe` makes the sentence. It is one function on purpose: the narrator `grouplab explain`
uses (grouplab/teach/) can take its place without anything else changing (`Timeline(narrate=...)`).
Pure, like the model: lines in, entries out.
"""

from __future__ import annotations

import base64
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from grouplab.teach.catalog import Catalog, placeholders
from grouplab.protocol.consumer_protocol import decode_assignment
from grouplab.protocol.errors import ProtocolError
from grouplab.protocol.types import TopicPartition, format_partitions

from grouplab.ui.model import error_name

# Requests that come every few seconds from every member: hidden on the page unless they failed.
ROUTINE_APIS = frozenset({"Heartbeat", "Metadata", "Fetch", "Produce", "ListOffsets", "OffsetCommit", "OffsetFetch",
                          "ApiVersions", "FindCoordinator"})
MAX_ENTRIES = 5000
# A generated member id is `<client id>-<uuid4>`: shown as `<client id>-<4 hex digits>`.
_MEMBER_UUID = re.compile(r"-([0-9a-f]{4})[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")

Narrate = Callable[[dict[str, Any], "Names"], str | None]


@dataclass
class Names:
    """What the timeline knows to make sentences short: who each connection and member is."""

    conn_client: dict[str, str] = field(default_factory=dict)  # connection -> client id
    member_client: dict[str, str] = field(default_factory=dict)  # member id -> client id

    def member(self, member_id: Any) -> str:
        """`consumer-1-0f3a` for `consumer-1-0f3a9c…`; `(new)` for the empty id of a first join."""
        if not member_id:
            return "(new)"
        text = str(member_id)
        client = self.member_client.get(text)
        if client and text.startswith(client + "-"):
            return f"{client}-{text[len(client) + 1:][:4]}"
        text = self.shorten(text)
        return text if len(text) <= 24 else text[:24] + "…"

    def shorten(self, text: Any) -> str:
        """Every generated member id in a free text (a rebalance's trigger) made short."""
        return _MEMBER_UUID.sub(r"-\1", str(text))


def _bytes(value: Any) -> bytes | None:
    if isinstance(value, dict) and "$bytes" in value:
        try:
            return base64.b64decode(value["$bytes"])
        except ValueError:
            return None
    return None


def _assignment(value: Any) -> str:
    raw = _bytes(value)
    if not raw:
        return "nothing"
    try:
        return format_partitions(decode_assignment(raw).partitions) or "nothing"
    except (ProtocolError, ValueError, TypeError):
        return f"{len(raw)} bytes"


def _request_text(api: str, body: dict[str, Any], names: Names) -> str:
    gen = body.get("generation_id")
    if api == "JoinGroup":
        protocols = ",".join(str(p.get("name")) for p in body.get("protocols") or [] if isinstance(p, dict))
        reason = f", reason: {body['reason']}" if body.get("reason") else ""
        return (f"JoinGroup as {names.member(body.get('member_id'))} "
                f"(session {body.get('session_timeout_ms')} ms, assignors {protocols}{reason})")
    if api == "SyncGroup":
        given = body.get("assignments") or []
        what = f", hands out {len(given)} assignments (the leader)" if given else ""
        return f"SyncGroup for generation {gen}{what}"
    if api == "Heartbeat":
        return f"Heartbeat, generation {gen}"
    if api == "LeaveGroup":
        members = body.get("members") or []
        reasons = "; ".join(str(m.get("reason")) for m in members if isinstance(m, dict) and m.get("reason"))
        return "LeaveGroup" + (f" ({reasons})" if reasons else "")
    if api == "OffsetCommit":
        parts = sum(len(t.get("partitions") or []) for t in body.get("topics") or [] if isinstance(t, dict))
        return f"OffsetCommit, generation {gen}, {parts} partitions"
    if api == "Metadata":
        topics = body.get("topics")
        return "Metadata for " + (", ".join(str(t.get("name")) for t in topics if isinstance(t, dict)) if topics
                                  else "every topic")
    if api == "CreatePartitions":
        return "CreatePartitions " + ", ".join(f"{t.get('name')} -> {t.get('count')}" for t in body.get("topics") or []
                                               if isinstance(t, dict))
    return api


def _response_text(api: str, body: dict[str, Any], names: Names) -> str:
    error = error_name(body.get("error_code"))
    if api == "JoinGroup":
        if error == "MEMBER_ID_REQUIRED":
            return f"MEMBER_ID_REQUIRED: join again as {names.member(body.get('member_id'))}"
        if error:
            return error
        members = body.get("members") or []
        role = f"you lead, {len(members)} members to assign" if members else f"leader is {names.member(body.get('leader'))}"
        return f"generation {body.get('generation_id')}, protocol {body.get('protocol_name')}, {role}"
    if api == "SyncGroup":
        return error or f"your partitions: {_assignment(body.get('assignment'))}"
    if api == "LeaveGroup":
        return error or "left"
    return error or "ok"


def describe(line: dict[str, Any], names: Names) -> str | None:
    """One trace line as one short sentence, or None for a line not worth one."""
    kind = line.get("kind")
    if kind == "request":
        client = str(line.get("client_id") or line.get("conn"))
        return f"{client} → coordinator: {_request_text(str(line.get('api')), line.get('body') or {}, names)}"
    if kind == "response":
        client = names.conn_client.get(str(line.get("conn")), str(line.get("conn")))
        return f"coordinator → {client}: {line.get('api')} {_response_text(str(line.get('api')), line.get('body') or {}, names)}"
    if kind == "timer":
        key = line.get("key") or []
        what = str(key[0]) if key else "?"
        if what == "session" and len(key) > 2:
            return (f"timer: session check of {names.member(key[2])} "
                    "(removed if not heard from for session.timeout.ms)")
        if what == "join":
            return "timer: the join phase's deadline (members that did not rejoin are removed)"
        if what == "sync":
            return "timer: the sync deadline (members that sent no SyncGroup are removed)"
        return f"timer: {what} " + " ".join(names.shorten(k) for k in key[1:])
    if kind == "member_id":
        return None  # the MEMBER_ID_REQUIRED answer that follows says it
    if kind == "start":
        return f"coordinator started on {line.get('host')}:{line.get('port')}"
    if kind in ("crash", "restart"):
        return f"coordinator {kind}"
    return None


# The teacher's own actions, in the catalogues' words (grouplab/teach/catalog/<lang>.toml: ui.run.*):
# the run node's event name, or for member_fault the fault, -> catalogue key.
_RUN_EVENTS = frozenset({"member_crashed", "member_added", "partitions_added", "coordinator_restart",
                         "assignor_switched", "member_fault_over"})
_FAULTS = frozenset({"hang", "slow", "partition"})


def describe_event(node: str, name: str, f: dict[str, Any], names: Names, c: Catalog | None = None) -> str | None:
    """The run's faults (in the catalogue's language) and the group's turning points, for the
    timeline; None for the rest."""
    c = c or Catalog()
    values = {k: (",".join(map(str, v)) if isinstance(v, list) else v) for k, v in f.items()}
    if node == "run":
        if name == "member_fault":
            fault = str(f.get("fault"))
            return _say(c, f"ui.fault.{fault}", {"seconds": 0, **values}) if fault in _FAULTS else None
        return _say(c, f"ui.run.{name}", values) if name in _RUN_EVENTS else None
    if node != "coordinator":
        return None
    if name == "member_removed":
        return f"coordinator removes {names.member(f.get('member_id'))} ({f.get('reason')}: {f.get('detail')})"
    if name == "rebalance_started":
        return f"rebalance begins: {names.shorten(f.get('trigger'))}"
    if name == "group_stable":
        assignments = f.get("assignments") or {}
        parts = "; ".join(f"{names.member(m)}: {format_partitions([TopicPartition(t, p) for t, p in ps]) or '-'}"
                          for m, ps in assignments.items() if isinstance(ps, list))
        return f"generation {f.get('generation_id')} is stable ({f.get('protocol_name')}): {parts}"
    if name == "coordinator_stopped":
        return "coordinator stopped"
    return None


def _say(c: Catalog, key: str, values: dict[str, Any]) -> str:
    """The catalogue's sentence with a `?` for any field the line did not carry."""
    wanted = placeholders(c.texts.get(key) or c.fallback[key])
    return c.t(key, **{name: values.get(name, "?") for name in wanted})


class Timeline:
    """Entries for the page, newest last, at most MAX_ENTRIES; `raw(id)` is the request and answer
    of a message entry as traced.

    Two ways to make the sentences: `narrate` (default `describe`) tells each trace line as it
    comes; with `narrate=None` the trace lines only keep names and raw messages, and `told` takes
    the steps grouplab explain's narrator made of them (grouplab/ui/narration.py)."""

    def __init__(self, narrate: Narrate | None = describe, lang: str = "en") -> None:
        self.catalog = Catalog(lang)
        self.narrate = narrate
        self.names = Names()
        self.entries: deque[dict[str, Any]] = deque(maxlen=MAX_ENTRIES)
        self._raw: dict[int, Any] = {}  # entry id -> a pair's key, or the raw dict itself
        self._pairs: dict[tuple[str, int], dict[str, Any]] = {}  # (conn, correlation id) -> request, response
        self._told_why: set[str] = set()
        self._next = 1

    def trace(self, line: dict[str, Any]) -> dict[str, Any] | None:
        kind = line.get("kind")
        conn, cid = str(line.get("conn", "")), int(line.get("correlation_id", -1))
        key = (conn, cid)
        if kind == "request":
            self.names.conn_client[conn] = str(line.get("client_id") or conn)
            if conn != "internal":
                self._pairs[key] = {"request": line, "response": None}
                if len(self._pairs) > 2 * MAX_ENTRIES:
                    self._pairs.pop(next(iter(self._pairs)))
        elif kind == "response" and key in self._pairs:
            self._pairs[key]["response"] = line
        elif kind == "member_id":
            self.names.member_client[str(line.get("member_id"))] = str(line.get("client_id"))
        if self.narrate is None:
            return None
        text = self.narrate(line, self.names)
        if text is None:
            return None
        api = line.get("api")
        error = error_name((line.get("body") or {}).get("error_code")) if kind == "response" else None
        entry = self._add(int(line.get("ts_ms", 0)), str(kind), text, api=api, error=error,
                          client=self.names.conn_client.get(conn) if kind in ("request", "response") else None,
                          routine=api in ROUTINE_APIS and error is None)
        self._raw[entry["id"]] = key if kind in ("request", "response") and key in self._pairs else {"line": line}
        return entry

    def told(self, narrated: Any, after: str | None = None) -> list[dict[str, Any]]:
        """A step as the narrator told it (grouplab/teach/narrate.py's Narrated): one entry per line,
        each rule's why on the first line that needs it, then the group's state if it changed."""
        added = []
        for said in narrated.lines:
            arrow = (f"{said.sender} → {said.receiver}" if said.kind in ("request", "response", "fault")
                     else f"coordinator ⇒ {said.receiver}" if said.kind == "decision" else "coordinator ⏰")
            raw = said.raw or {}
            key = (str(raw.get("conn", "")), int(raw.get("correlation_id", -1)))
            error = error_name((raw.get("body") or {}).get("error_code")) if raw.get("kind") == "response" else None
            why = said.why if said.why and said.why not in self._told_why else None
            if why:
                self._told_why.add(why)
            kind = {"decision": "event", "coordinator": "event"}.get(said.kind, said.kind)
            entry = self._add(int(narrated.ts_ms), kind, f"{arrow}: {said.text}", api=raw.get("api") or narrated.api,
                              error=error, client=None, routine=bool(narrated.routine), why=why)
            self._raw[entry["id"]] = key if key in self._pairs else ({"line": raw} if raw else {"said": said.text})
            added.append(entry)
        if after:
            entry = self._add(int(narrated.ts_ms), "event", after, api=None, error=None, client=None, routine=False)
            self._raw[entry["id"]] = {"said": after}
            added.append(entry)
        return added

    def event(self, node: str, name: str, ts_ms: int, fields: dict[str, Any]) -> dict[str, Any] | None:
        """The run's faults, and (when the trace lines are told one by one) the group's turning points."""
        if node == "coordinator" and name == "group_stable":
            self.names.member_client.update(fields.get("clients") or {})
        if node != "run" and self.narrate is None:
            return None  # the narrator tells the coordinator's decisions itself
        text = describe_event(node, name, fields, self.names, self.catalog)
        if text is None:
            return None
        entry = self._add(ts_ms, "fault" if node == "run" else "event", text, api=None, error=None, client=None,
                          routine=False)
        self._raw[entry["id"]] = {"event": {"ts_ms": ts_ms, "event": name, "node": node, **fields}}
        return entry

    def raw(self, entry_id: int) -> dict[str, Any] | None:
        ref = self._raw.get(entry_id)
        if isinstance(ref, tuple):
            return self._pairs.get(ref)
        return ref

    def since(self, entry_id: int) -> list[dict[str, Any]]:
        return [e for e in self.entries if e["id"] > entry_id]

    def _add(self, ts_ms: int, kind: str, text: str, **extra: Any) -> dict[str, Any]:
        entry = {"id": self._next, "ts_ms": ts_ms, "kind": kind, "text": text, **extra}
        self._next += 1
        if len(self.entries) == self.entries.maxlen:
            self._raw.pop(self.entries[0]["id"], None)
        self.entries.append(entry)
        return entry
