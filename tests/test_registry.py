"""The embedded registry machine step by step (coordinator/registry.py): exact outputs, rejected
operations change nothing, sessions expire only when silent for their timeout."""

from __future__ import annotations

import copy

from grouplab.coordinator.registry import Notify, Registry, SessionExpiredNotice
from grouplab.protocol.effects import ArmTimer, Reply
from grouplab.protocol.registry import Create, Delete, GetChildren, RegistryError, Result, SetData, WatchEvent, WatchType


def reply(outs: list) -> Result:
    (r,) = [o for o in outs if type(o) is Reply]
    return r.body


def test_session_timeout_is_negotiated_and_expiry_removes_ephemerals_and_fires_watches() -> None:
    reg = Registry(tick_time_ms=2000)
    a, outs = reg.open_session(100, 0)
    assert ArmTimer(("session", a), 4000) in outs  # raised to 2 × tickTime
    b, _ = reg.open_session(999_999, 0)
    assert reg.timeout_of(b) == 40_000  # lowered to 20 × tickTime
    assert reply(reg.call("x", a, Create("/e", b"1", ephemeral=True), 10)).path == "/e"
    reg.call("y", b, GetChildren("/", watch=True), 10)
    reg.ping(a, 3000)  # alive until 7000
    assert reg.on_timer(("session", a), 4000) == [ArmTimer(("session", a), 7000)]
    outs = reg.on_timer(("session", a), 7000)
    assert Notify(b, WatchEvent(WatchType.NODE_CHILDREN_CHANGED, "/")) in outs
    assert SessionExpiredNotice(a) in outs
    assert "/e" not in reg.nodes and not reg.is_alive(a)
    assert reply(reg.call("z", a, GetChildren("/"), 7001)).error is RegistryError.SESSION_EXPIRED


def test_rejected_operations_change_nothing() -> None:
    reg = Registry()
    s, _ = reg.open_session(6000, 0)
    reg.call(1, s, Create("/a/b", b"x", makepath=True), 0)
    reg.call(2, s, GetChildren("/a", watch=True), 0)
    before = (copy.deepcopy(reg.nodes), copy.deepcopy(reg.child_watches), copy.deepcopy(reg.data_watches))
    for op, error in [(Create("/a"), RegistryError.NODE_EXISTS), (Create("/q/r"), RegistryError.NO_NODE),
                      (SetData("/a", b"y", version=7), RegistryError.BAD_VERSION),
                      (Delete("/a"), RegistryError.NOT_EMPTY), (Delete("/nope"), RegistryError.NO_NODE)]:
        outs = reg.call(3, s, op, 1)
        assert outs == [Reply(3, Result(error))]
    assert (reg.nodes, reg.child_watches, reg.data_watches) == before


def test_a_watch_fires_once_and_before_the_reply() -> None:
    reg = Registry()
    s, _ = reg.open_session(6000, 0)
    reg.call(1, s, Create("/g"), 0)
    reg.call(2, s, GetChildren("/g", watch=True), 0)
    outs = reg.call(3, s, Create("/g/c"), 0)
    assert outs == [Notify(s, WatchEvent(WatchType.NODE_CHILDREN_CHANGED, "/g")), Reply(3, Result(path="/g/c"))]
    assert reg.call(4, s, Create("/g/d"), 0) == [Reply(4, Result(path="/g/d"))]


def test_a_session_that_ends_hears_nothing_of_its_own_nodes_vanishing() -> None:
    """ZooKeeper drops an ended session's watches: a consumer whose session expired learns it from
    the expiry, never from a watch on its own registration (which would start a rebalance that
    stops its fetchers early, hiding Kafka 0.8's zombie window)."""
    for end in ("expires", "closes"):
        reg = Registry(tick_time_ms=2000)
        a, _ = reg.open_session(6000, 0)
        b, _ = reg.open_session(6000, 0)
        reg.call(1, a, Create("/ids/a", ephemeral=True, makepath=True), 0)
        for s in (a, b):
            reg.call(2, s, GetChildren("/ids", watch=True), 0)
        outs = reg.on_timer(("session", a), 6000) if end == "expires" else reg.close_session(a, 6000)
        assert [o.session for o in outs if type(o) is Notify] == [b], end
