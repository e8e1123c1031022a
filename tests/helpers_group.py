"""Helpers for tests/test_group.py: request builders, a deterministic member-id source, and
compact views of a Group's state and of the outputs one input produced."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable

from grouplab.coordinator.broker import SequentialMemberIds as MemberIds  # "<client>-<n>", one counter for all clients
from grouplab.coordinator.config import BrokerConfig
from grouplab.coordinator.group import Group, GroupState
from grouplab.coordinator.group_log import Persist
from grouplab.protocol.effects import ArmTimer, CancelTimer, LogEvent, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupRequestMember,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)

GROUP = "g"
SESSION = 10_000
REBALANCE = 30_000
DELAY = 3_000
MIN_SESSION = 1_000
MAX_SESSION = 60_000
PTYPE = "consumer"


def config(**overrides: Any) -> BrokerConfig:
    values: dict[str, Any] = dict(
        group_min_session_timeout_ms=MIN_SESSION,
        group_max_session_timeout_ms=MAX_SESSION,
        group_initial_rebalance_delay_ms=DELAY,
    )
    values.update(overrides)
    return BrokerConfig(**values)


def make_group(group_id: str = GROUP, **overrides: Any) -> Group:
    return Group(group_id, config(**overrides), MemberIds())


# ----------------------------------------------------------------------------- timer keys


def join_key(group_id: str = GROUP) -> tuple:
    return ("join", group_id)


def sync_key(generation: int, group_id: str = GROUP) -> tuple:
    return ("sync", group_id, generation)


def session_key(member_id: str, group_id: str = GROUP) -> tuple:
    return ("session", group_id, member_id)


def pending_key(member_id: str, group_id: str = GROUP) -> tuple:
    return ("pending", group_id, member_id)


# ----------------------------------------------------------------------------- requests


def meta(client: str, protocol: str) -> bytes:
    return f"{client}:{protocol}".encode()


def protos(client: str, *names: str) -> list[tuple[str, bytes]]:
    return [(n, meta(client, n)) for n in (names or ("range",))]


def join_req(
    member_id: str = "",
    protocols: Iterable[tuple[str, bytes]] | None = None,
    *,
    session: int = SESSION,
    rebalance: int = REBALANCE,
    instance: str | None = None,
    protocol_type: str = PTYPE,
    group_id: str = GROUP,
) -> JoinGroupRequest:
    plist = list(protocols) if protocols is not None else [("range", b"meta")]
    return JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        member_id=member_id,
        protocol_type=protocol_type,
        protocols=[JoinGroupRequestProtocol(n, m) for n, m in plist],
        group_instance_id=instance,
    )


def sync_req(
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
    *,
    instance: str | None = None,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    group_id: str = GROUP,
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=[SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()],
    )


def hb_req(member_id: str, generation: int, *, instance: str | None = None, group_id: str = GROUP) -> HeartbeatRequest:
    return HeartbeatRequest(group_id=group_id, generation_id=generation, member_id=member_id, group_instance_id=instance)


def leave_req(*member_ids: str, group_id: str = GROUP, instance: str | None = None) -> LeaveGroupRequest:
    return LeaveGroupRequest(group_id=group_id, members=[LeaveGroupRequestMember(m, instance) for m in member_ids])


# ----------------------------------------------------------------------------- responses


def jr(member: str, gen: int, leader: str, members: list[JoinGroupResponseMember] | None = None,
       pname: str = "range", ptype: str = PTYPE, skip: bool = False) -> JoinGroupResponse:
    """A successful JoinGroup response."""
    return JoinGroupResponse(generation_id=gen, protocol_type=ptype, protocol_name=pname, leader=leader,
                             member_id=member, members=members or [], skip_assignment=skip)


def jm(member_id: str, metadata: bytes, instance: str | None = None) -> JoinGroupResponseMember:
    return JoinGroupResponseMember(member_id=member_id, metadata=metadata, group_instance_id=instance)


def jerr(code: ErrorCode, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(error_code=code, member_id=member_id)


def sr(assignment: bytes, pname: str = "range", ptype: str = PTYPE) -> SyncGroupResponse:
    return SyncGroupResponse(protocol_type=ptype, protocol_name=pname, assignment=assignment)


def serr(code: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code)


def assignment_of(member_id: str) -> bytes:
    return f"assign:{member_id}".encode()


# ----------------------------------------------------------------------------- outputs


@dataclass
class Effects:
    """What one input asked the shell to do: replies by token, and the net effect on timers in
    output order (key -> deadline if armed, None if cancelled). Error messages of replies are
    blanked (free-form text); log events and persisted records are kept but not compared."""

    replies: dict[Any, Any] = field(default_factory=dict)
    timers: dict[tuple, int | None] = field(default_factory=dict)
    logs: list[LogEvent] = field(default_factory=list, compare=False)
    persisted: list[Any] = field(default_factory=list, compare=False)  # records of Persist outputs


NOTHING = Effects()


def effects(outputs: list) -> Effects:
    eff = Effects()
    for o in outputs:
        if isinstance(o, Reply):
            assert o.to not in eff.replies, f"two replies to {o.to!r} in one step: {outputs}"
            body = o.body
            if dataclasses.is_dataclass(body) and hasattr(body, "error_message"):
                body = dataclasses.replace(body, error_message=None)
            eff.replies[o.to] = body
        elif isinstance(o, ArmTimer):
            eff.timers[o.key] = o.deadline_ms
        elif isinstance(o, CancelTimer):
            eff.timers[o.key] = None
        elif isinstance(o, LogEvent):
            eff.logs.append(o)
        elif isinstance(o, Persist):
            eff.persisted.append(o.record)
        else:  # pragma: no cover
            raise AssertionError(f"unknown output {o!r}")
    return eff


# ----------------------------------------------------------------------------- state views


def M(member_id: str, join: Any = None, sync: Any = None, assignment: bytes = b"") -> tuple:
    """Expected (member id, parked join, parked sync, assignment) of one member."""
    return (member_id, join, sync, assignment)


def view(g: Group) -> dict[str, Any]:
    """The whole protocol-relevant state of a group; members in join order."""
    return {
        "state": g.state.value,
        "generation_id": g.generation_id,
        "leader_id": g.leader_id,
        "protocol_type": g.protocol_type,
        "protocol_name": g.protocol_name,
        "members": [M(m.member_id, m.join_reply, m.sync_reply, m.assignment) for m in g.members.values()],
        "pending_members": dict(g.pending_members),
        "pending_sync": set(g.pending_sync),
        "static_members": dict(g.static_members),
    }


def expect(state: str, gen: int, leader: str | None = None, pname: str | None = None,
           members: Iterable[tuple] = (), pending: dict[str, int] | None = None,
           pending_sync: Iterable[str] = (), static: dict[str, str] | None = None,
           ptype: str | None = "") -> dict[str, Any]:
    """The expected `view`. protocol_type defaults to PTYPE whenever a protocol name is given."""
    if ptype == "":
        ptype = PTYPE if pname is not None else None
    return {
        "state": state,
        "generation_id": gen,
        "leader_id": leader,
        "protocol_type": ptype,
        "protocol_name": pname,
        "members": list(members),
        "pending_members": dict(pending or {}),
        "pending_sync": set(pending_sync),
        "static_members": dict(static or {}),
    }


def snapshot(g: Group) -> dict[str, Any]:
    """Every dataclass field of the group (members in full, with heartbeats), deep-copied."""
    snap = {f.name: copy.deepcopy(getattr(g, f.name)) for f in dataclasses.fields(g)
            if f.name not in ("config", "new_member_id")}
    snap["member_order"] = list(g.members)
    return snap


# ----------------------------------------------------------------------------- flows


def require_id(g: Group, client: str, now: int, protocols: Any = None, **kw: Any) -> str:
    plist = protocols if protocols is not None else protos(client)
    out = effects(g.handle_join(join_req("", plist, **kw), f"{client}/id", now, client))
    [(tok, body)] = out.replies.items()
    assert body.error_code == ErrorCode.MEMBER_ID_REQUIRED, body
    return body.member_id


def _spec(spec: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(spec, str):
        return spec, {}
    client, kw = spec
    return client, dict(kw)


def form_generation(g: Group, specs: Iterable[Any], now: int = 0) -> tuple[list[str], Effects, int]:
    """From an Empty group: every client gets a member id and joins at `now`; the (possibly
    extended) initial delay elapses and generation 1 completes. Specs: client name, or (client,
    join_req kwargs) where kwargs may hold `protocols` (default `protos(client)`).
    Returns member ids, the effects of the completing timer firing, and the completion time."""
    ids = []
    deadline = None
    for spec in specs:
        client, kw = _spec(spec)
        plist = kw.pop("protocols", protos(client))
        if kw.get("instance") is not None:
            out = effects(g.handle_join(join_req("", plist, **kw), f"{client}/join", now, client))
            assert out.replies == {}, out
            mid = g.static_members[kw["instance"]]
        else:
            mid = require_id(g, client, now, protocols=plist, **kw)
            out = effects(g.handle_join(join_req(mid, plist, **kw), f"{client}/join", now, client))
        deadline = out.timers.get(join_key(g.group_id), deadline)
        ids.append(mid)
    assert deadline is not None
    while True:
        t = deadline
        eff = effects(g.on_timer(join_key(g.group_id), t))
        if g.state is not GroupState.PREPARING_REBALANCE:
            break
        deadline = eff.timers[join_key(g.group_id)]
    assert g.state is GroupState.COMPLETING_REBALANCE, view(g)
    return ids, eff, t


def form_stable(g: Group, specs: Iterable[Any], now: int = 0) -> tuple[list[str], int]:
    """form_generation, then the leader and every follower sync at the completion time.
    Returns member ids and that time; each member's assignment is `assignment_of(id)`."""
    specs = list(specs)
    ids, _, t = form_generation(g, specs, now)
    gen = g.generation_id
    leader = g.leader_id
    assert leader is not None
    instances = {mid: _spec(s)[1].get("instance") for mid, s in zip(ids, specs)}
    g.handle_sync(sync_req(leader, gen, {m: assignment_of(m) for m in ids}, instance=instances[leader]), "sync/leader", t)
    for m in ids:
        if m != leader:
            g.handle_sync(sync_req(m, gen, instance=instances[m]), f"sync/{m}", t)
    assert g.state is GroupState.STABLE and not g.pending_sync, view(g)
    return ids, t
