"""RuleSet.decide, the one decision the FaultProxy and the simulator's network both take for every
message: selection by API, direction and link, probability, limits and counters, how delay and
duplicate compose with the fates, and that nothing is drawn from the generator unless a rule with
a probability or a delay range selects the message (the simulator's replays rely on it)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grouplab.faults.rules import (DELIVER, Decision, Envelope, Fate, FaultSpecError, LinkId, Rule, RuleSet, error_response,
                                   parse_spec)
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import API, HeartbeatResponse, SyncGroupResponse

REQUEST = Envelope("Heartbeat", "request")
LINK = LinkId("consumer-1", "consumer-1#2")
APIS = ["JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "Metadata"]


def decide(rules: list[Rule], message: Envelope = REQUEST, link: LinkId = LINK, seed: int = 0,
           **kw: bool) -> Decision:
    return RuleSet(rules).decide(message, link, random.Random(seed), **kw)


def state(rng: random.Random) -> object:
    return rng.getstate()


# ----------------------------------------------------------------------------- selection


@settings(max_examples=200, deadline=None)
@given(rule_api=st.sampled_from(["*", *APIS]), api=st.sampled_from(APIS),
       rule_dir=st.sampled_from(["request", "response", "both"]), direction=st.sampled_from(["request", "response"]),
       glob=st.sampled_from(["*", "consumer-1", "consumer-*", "consumer-1#2", "consumer-1#1", "consumer-2", "other*"]))
def test_a_rule_fires_exactly_on_the_messages_it_selects(rule_api: str, api: str, rule_dir: str, direction: str,
                                                          glob: str) -> None:
    rule = Rule("drop", api=rule_api, direction=rule_dir, link=glob)
    rng = random.Random(1)
    before = state(rng)
    d = RuleSet([rule]).decide(Envelope(api, direction), LINK, rng)
    selected = (rule_api in ("*", api) and rule_dir in ("both", direction)
                and glob in ("*", "consumer-1", "consumer-*", "consumer-1#2"))
    assert (d.fate is Fate.DROP) == selected
    assert (rule.matched, rule.fired) == ((1, 1) if selected else (0, 0))
    assert d.fired == ((rule,) if selected else ())
    assert state(rng) == before  # p = 1: nothing drawn, selected or not


def test_an_unreadable_message_is_selected_by_no_rule() -> None:
    rule = Rule("drop")
    assert decide([rule], Envelope(None, "request")) is DELIVER and rule.matched == 0


def test_no_rule_selecting_draws_nothing_from_the_generator() -> None:
    rules = [Rule("drop", api="JoinGroup", p=0.5), Rule("delay", api="*", link="other", delay_ms=(1, 100)),
             Rule("duplicate", direction="response", p=0.1)]
    rng = random.Random(7)
    before = state(rng)
    for _ in range(50):
        assert RuleSet(rules).decide(REQUEST, LINK, rng) is DELIVER
    assert state(rng) == before


# ----------------------------------------------------------------------------- probability, limit, counters


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 60))
def test_probability_zero_never_fires_and_one_always_does(seed: int, n: int) -> None:
    never, always = Rule("drop", p=0.0), Rule("duplicate", p=1.0)
    rng = random.Random(seed)
    for _ in range(n):
        d = RuleSet([never, always]).decide(REQUEST, LINK, rng)
        assert d.fate is Fate.DELIVER and d.copies == 2
    assert (never.matched, never.fired) == (n, 0)
    assert (always.matched, always.fired) == (n, n)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32), p=st.floats(0.0, 1.0), limit=st.none() | st.integers(1, 10), n=st.integers(0, 40))
def test_counters_and_limit(seed: int, p: float, limit: int | None, n: int) -> None:
    rule = Rule("drop", p=p, limit=limit)
    rng = random.Random(seed)
    drops = sum(RuleSet([rule]).decide(REQUEST, LINK, rng).fate is Fate.DROP for _ in range(n))
    assert drops == rule.fired <= rule.matched <= n
    if limit is None or rule.fired < limit:
        assert rule.matched == n
    else:  # exhausted: it selects nothing more, so it stops counting matches too
        matched = rule.matched
        assert RuleSet([rule]).decide(REQUEST, LINK, rng) is DELIVER and rule.matched == matched


def test_an_exhausted_rule_lets_the_next_one_decide() -> None:
    first, second = Rule("error", error_code=27, limit=1), Rule("drop")
    assert decide([first, second]).fate is Fate.ERROR
    d = decide([first, second])
    assert d.fate is Fate.DROP and d.rule is second
    assert (first.matched, first.fired, second.matched, second.fired) == (1, 1, 1, 1)


def test_the_same_seed_gives_the_same_decisions() -> None:
    def run(seed: int) -> list[tuple[Fate, int, int]]:
        rules = [parse_spec("*:delay:0-100:p=0.7"), parse_spec("Heartbeat:duplicate:p=0.3"),
                 parse_spec("Heartbeat:drop:0.4")]
        rng = random.Random(seed)
        return [(d.fate, d.delay_ms, d.copies) for d in (RuleSet(rules).decide(REQUEST, LINK, rng) for _ in range(200))]

    assert run(5) == run(5) != run(6)


# ----------------------------------------------------------------------------- actions


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32), lo=st.integers(0, 500), span=st.integers(0, 500))
def test_a_delay_is_a_whole_number_of_ms_within_its_range(seed: int, lo: int, span: int) -> None:
    if lo == span == 0:
        span = 1
    d = decide([Rule("delay", delay_ms=(lo, lo + span))], seed=seed)
    assert d.fate is Fate.DELIVER and isinstance(d.delay_ms, int) and lo <= d.delay_ms <= lo + span


def test_delays_and_duplicates_compose_and_a_fate_ends_the_evaluation() -> None:
    delay, dup, drop, never = Rule("delay", delay_ms=50), Rule("duplicate"), Rule("drop"), Rule("duplicate")
    d = decide([delay, Rule("delay", delay_ms=(20, 20)), dup])
    assert (d.fate, d.delay_ms, d.copies, d.rule) == (Fate.DELIVER, 70, 2, None)
    d = decide([delay, dup, drop, never])
    assert (d.fate, d.rule, d.fired) == (Fate.DROP, drop, (delay, dup, drop))
    assert never.matched == 0


def test_each_fate_and_its_rule() -> None:
    for spec, fate in [("Heartbeat:drop", Fate.DROP), ("Heartbeat:hold", Fate.HOLD), ("Heartbeat:error:27", Fate.ERROR),
                       ("Heartbeat:reorder:300", Fate.REORDER), ("Heartbeat:disconnect", Fate.DISCONNECT)]:
        rule = parse_spec(spec, allow_hold=True)
        d = decide([rule])
        assert d.fate is fate and d.rule is rule and d.fired == (rule,)
    assert decide([parse_spec("Heartbeat:reorder:300")]).rule.wait_ms == 300
    assert decide([parse_spec("Heartbeat:error:27")]).rule.error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_disconnect_decides_the_fate_after_the_delays_and_copies_before_it() -> None:
    """The caller resets the link when it sees the message: the delay and copies the rules before
    it added are reported (so they are counted) but have nothing left to act on."""
    delay, dup, disconnect, never = Rule("delay", delay_ms=50), Rule("duplicate"), Rule("disconnect"), Rule("drop")
    d = decide([delay, dup, disconnect, never])
    assert (d.fate, d.rule, d.fired) == (Fate.DISCONNECT, disconnect, (delay, dup, disconnect))
    assert never.matched == 0


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32), p=st.floats(0.0, 1.0), limit=st.none() | st.integers(1, 5),
       directions=st.lists(st.sampled_from(["request", "response"]), max_size=30))
def test_disconnect_fires_at_most_limit_times_on_the_direction_it_selects(seed: int, p: float, limit: int | None,
                                                                          directions: list[str]) -> None:
    rule = Rule("disconnect", api="Heartbeat", direction="response", p=p, limit=limit)
    rng = random.Random(seed)
    fates = [RuleSet([rule]).decide(Envelope("Heartbeat", d), LINK, rng).fate for d in directions]
    resets = [d for d, fate in zip(directions, fates) if fate is Fate.DISCONNECT]
    assert set(resets) <= {"response"} and len(resets) == rule.fired <= (limit if limit is not None else len(directions))
    assert all(fate in (Fate.DELIVER, Fate.DISCONNECT) for fate in fates)


def test_disconnect_with_p_one_draws_nothing() -> None:
    rng = random.Random(3)
    before = state(rng)
    assert decide([Rule("disconnect", link="consumer-*")]).fate is Fate.DISCONNECT
    assert RuleSet([Rule("disconnect")]).decide(REQUEST, LINK, rng).fate is Fate.DISCONNECT
    assert state(rng) == before


def test_reorder_does_not_fire_on_the_message_a_kept_one_waits_for() -> None:
    rule = Rule("reorder")
    d = decide([rule], reorder_waiting=True)
    assert d is DELIVER and (rule.matched, rule.fired) == (1, 0)


def test_error_does_not_fire_on_an_api_without_a_response_type() -> None:
    rule = Rule("error", error_code=15)
    assert decide([rule], Envelope("Frobnicate", "request")) is DELIVER and rule.fired == 0


def test_error_response_is_that_apis_body_with_the_code() -> None:
    body = error_response("SyncGroup", 27, "a test")
    assert isinstance(body, SyncGroupResponse) and body.error_code == 27
    assert isinstance(error_response("Heartbeat", 25, "a test"), HeartbeatResponse)
    for api in API:
        assert error_response(api, 15, "a test").error_code == 15
    with_message = [api for api in API if hasattr(error_response(api, 15, "x"), "error_message")]
    for api in with_message:
        assert error_response(api, 15, "a test").error_message == "injected by a test: COORDINATOR_NOT_AVAILABLE"


def test_a_rule_set_is_ordered_and_removable() -> None:
    a, b = Rule("drop", api="JoinGroup"), Rule("drop")
    rules = RuleSet([a])
    rules.add(b)
    assert list(rules) == [a, b] and len(rules) == 2 and b in rules
    rules.remove(a)
    assert list(rules) == [b]
    with pytest.raises(ValueError):
        rules.remove(a)


# ----------------------------------------------------------------------------- Kafka's own APIs


def test_the_kafka_wire_names_are_the_apis_the_listener_answers_itself() -> None:
    from grouplab.coordinator.kafka_wire import translate
    from grouplab.coordinator.kafka_wire.apis import APIS as KAFKA_APIS
    from grouplab.faults.rules import KAFKA_WIRE_APIS

    # Every API the Kafka port advertises is translated to a Broker step, except these and ApiVersions.
    untranslated = sorted(a.name for a in KAFKA_APIS.values() if a.name not in translate._RESPONSES)  # noqa: SLF001
    assert sorted([*KAFKA_WIRE_APIS, "ApiVersions"]) == untranslated


def test_find_coordinator_is_a_rule_name_with_every_action_but_error() -> None:
    rule = parse_spec("FindCoordinator:drop:dir=response:limit=1")
    assert rule.kafka_wire_only and rule.spec() == "FindCoordinator:drop:dir=response:limit=1"
    assert decide([rule], Envelope("FindCoordinator", "response")).fate is Fate.DROP
    assert decide([rule], Envelope("FindCoordinator", "response")) is DELIVER  # its limit
    for spec in ("FindCoordinator:delay:300", "FindCoordinator:duplicate", "FindCoordinator:reorder"):
        assert parse_spec(spec).kafka_wire_only
    assert not any(parse_spec(spec).kafka_wire_only for spec in ("*:drop", "JoinGroup:drop", "ApiVersions:drop"))
    disconnect = parse_spec("FindCoordinator:disconnect:dir=response:limit=1")  # needs no answer body
    assert disconnect.kafka_wire_only and decide([disconnect], Envelope("FindCoordinator", "response")).fate is Fate.DISCONNECT
    with pytest.raises(ValueError, match=r"FindCoordinator takes drop, delay, duplicate, reorder or disconnect \(and hold, "
                                         r"from a test\), not error"):
        parse_spec("FindCoordinator:error:COORDINATOR_NOT_AVAILABLE")


def test_an_unknown_api_is_refused_with_every_name_there_is() -> None:
    with pytest.raises(ValueError, match=r"unknown API 'FindCoordinater'; known: \*, ApiVersions, .*JoinGroup.*; on the Kafka-wire "
                                         r"proxy also FindCoordinator"):
        parse_spec("FindCoordinater:drop")


def test_the_msgpack_proxy_the_simulator_and_a_run_without_kafka_port_refuse_find_coordinator() -> None:
    from grouplab.cluster import LocalCluster
    from grouplab.faults.proxy import FaultProxy
    from grouplab.sim.scenario import ScenarioError, scenario_from_text

    msgpack = FaultProxy("127.0.0.1", 1)
    with pytest.raises(ValueError, match="FindCoordinator is Kafka's own API, served only on the Kafka-wire port"):
        msgpack.add_spec("FindCoordinator:drop")
    assert len(msgpack.rules) == 0
    kafka = FaultProxy("127.0.0.1", 1, wire="kafka")
    assert kafka.add_spec("FindCoordinator:drop") in kafka.rules
    with pytest.raises(ScenarioError, match="the simulator's members speak grouplab's protocol"):
        scenario_from_text('name = "x"\ntopics = { t0 = 1 }\nduration_ms = 1000\n[[members]]\ncount = 1\n'
                           '[[faults]]\nspec = "FindCoordinator:delay:50"\n')
    with pytest.raises(ValueError, match="needs --kafka-port"):
        LocalCluster({"t": 1}, faults=["FindCoordinator:drop"])
    cluster = LocalCluster({"t": 1}, faults=["FindCoordinator:drop", "Heartbeat:drop:0.1"], kafka_port=0)
    assert [r.kafka_wire_only for r in cluster.fault_rules] == [True, False]


def test_an_api_versions_error_on_the_kafka_wire_is_the_listeners_own_answer_with_the_code() -> None:
    """ApiVersions is both protocols' API; on Kafka's wire its error answer is built as the listener
    builds its own, at v0 (an error rule on it used to be dropped instead)."""
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse

    from grouplab.faults.kafka_frames import error_frame

    for version in (0, 3):
        frame = error_frame("ApiVersions", version, 7, error_response("ApiVersions", 35, "a test"), "h", 1)
        assert frame is not None
        resp = ApiVersionsResponse.decode(frame[4:], version=version, header=True)  # read as v0 on an error
        assert (resp.header.correlation_id, resp.error_code) == (7, 35) and resp.api_keys


# ----------------------------------------------------------------------------- the SPEC text form


RULE_APIS = st.sampled_from(["*", "Heartbeat", "JoinGroup", "SyncGroup", "ApiVersions", "FindCoordinator"])


@st.composite
def rules(draw: st.DrawFn) -> Rule:
    """Any valid rule: every action, with its argument and any options."""
    action = draw(st.sampled_from(["drop", "delay", "duplicate", "hold", "error", "reorder", "disconnect"]))
    api = draw(RULE_APIS)
    if action == "error" and api == "FindCoordinator":
        api = "Heartbeat"
    kw: dict = {"action": action, "api": api, "direction": draw(st.sampled_from(["request", "response", "both"])),
                "link": draw(st.sampled_from(["*", "consumer-2", "consumer-*", "c1#2", "leader"])),
                "p": draw(st.sampled_from([1.0, 0.5, 0.25, 0.0, 0.125])), "limit": draw(st.none() | st.integers(1, 99))}
    if action == "delay":
        lo = draw(st.integers(0, 500))
        kw["delay_ms"] = (lo, lo + draw(st.integers(0 if lo else 1, 500)))
    elif action == "error":
        kw["error_code"] = draw(st.sampled_from([15, 16, 25, 27]))
    elif action == "reorder":
        kw["wait_ms"] = draw(st.integers(0, 5000))
    return Rule(**kw)


def _fields(rule: Rule) -> tuple:
    return (rule.action, rule.api, rule.direction, rule.link, rule.p, rule.delay_ms, rule.error_code, rule.limit,
            rule.wait_ms)


@settings(max_examples=300, deadline=None)
@given(rule=rules())
def test_every_rule_prints_as_a_spec_that_parses_back_to_it(rule: Rule) -> None:
    back = parse_spec(rule.spec(), allow_hold=True)
    assert _fields(back) == _fields(rule) and back.spec() == rule.spec()


def test_disconnect_specs_parse_with_every_option() -> None:
    rule = parse_spec("Heartbeat:disconnect:link=consumer-2:limit=1")
    assert (rule.action, rule.api, rule.link, rule.limit, rule.p, rule.direction) == (
        "disconnect", "Heartbeat", "consumer-2", 1, 1.0, "request")
    assert rule.spec() == "Heartbeat:disconnect:link=consumer-2:limit=1"
    rule = parse_spec("*:disconnect:p=0.25:dir=both")
    assert (rule.api, rule.p, rule.direction) == ("*", 0.25, "both") and rule.spec() == "*:disconnect:p=0.25:dir=both"
    assert parse_spec("SyncGroup:DISCONNECT:dir=response").spec() == "SyncGroup:disconnect:dir=response"


@pytest.mark.parametrize("bad,why", [
    ("Heartbeat:disconnect:0.5", "disconnect takes no argument, got '0.5'"),
    ("Heartbeat:disconnect:p=2", "probability must be within 0..1, got 2"),
    ("Heartbeat:disconnect:dir=sideways", "unknown direction 'sideways'"),
    ("Heartbeat:disconnect:limit=0", "limit must be at least 1, got 0"),
    ("Heartbeat:disconnect:limit=x", "limit needs a whole number"),
    ("Heartbeat:disconnect:link=", "link glob must not be empty"),
    ("Heartbeat:disconnect:limit=1:limit=2", "option limit given twice"),
    ("Heartbeat:disconect", "unknown action 'disconect'; known: drop, delay, duplicate, error, reorder, disconnect"),
    ("Hearbeat:disconnect", "unknown API 'Hearbeat'"),
])
def test_a_bad_disconnect_spec_is_refused_in_one_line_that_says_why(bad: str, why: str) -> None:
    with pytest.raises(FaultSpecError) as exc:
        parse_spec(bad)
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"bad fault spec {bad!r}: {why}")


def test_a_cluster_proxy_names_each_broker_by_its_own_proxy_in_grouplab_answers() -> None:
    """Metadata and FindCoordinator on grouplab's protocol: every broker named is rewritten to its
    proxy's address (faults/proxy_group.py); what names no known broker passes unchanged."""
    from grouplab.faults.proxy import _readvertised
    from grouplab.protocol.framing import encode_response, read_response

    advertise = {0: ("127.0.0.1", 7000), 1: ("127.0.0.1", 7001)}
    metadata = {"brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 9000},
                            {"node_id": 1, "host": "127.0.0.1", "port": 9001}], "controller_id": 0, "topics": []}
    out = _readvertised(5, metadata, advertise, b"unused")
    assert read_response(out[4:]) == (5, {"brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 7000},
                                                      {"node_id": 1, "host": "127.0.0.1", "port": 7001}],
                                          "controller_id": 0, "topics": []})
    found = {"error_code": 0, "node_id": 1, "host": "h", "port": 9001,
             "coordinators": [{"key": "g", "node_id": 1, "host": "h", "port": 9001}]}
    cid, body = read_response(_readvertised(6, found, advertise, b"unused")[4:])
    assert (cid, body["port"], body["coordinators"][0]["port"]) == (6, 7001, 7001)
    frame = encode_response(7, {"error_code": 15, "node_id": -1, "host": "", "port": -1})
    assert _readvertised(7, {"error_code": 15, "node_id": -1, "host": "", "port": -1}, advertise, frame) == frame
