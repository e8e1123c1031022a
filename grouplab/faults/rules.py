"""Fault rules and their text form, one language for the FaultProxy (`grouplab run --faults SPEC`)
and the simulator (a scenario's `[[faults]] spec = SPEC`).

A rule picks frames by API name (or `*`), by direction (`request`, `response` or `both`) and by link
(a glob over the client id, or over the link name `client-id#n`), fires with probability `p`, at
most `limit` times, and does one thing to the frame: drop, delay, duplicate, hold, error, reorder
or disconnect. Rules never look inside a body beyond the envelope; the protocol logic never sees
them.

SPEC, the text form:

    API:ACTION[:ARG][:OPTION=VALUE...]

    API     an API name (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, Metadata, ApiVersions, ...) or
            *; on the Kafka-wire proxy also FindCoordinator (Kafka's own, answered by the Kafka-wire
            listener: grouplab's msgpack protocol and the simulator have none)
    ACTION  drop[:P]              never forward it (with probability P, default 1)
            delay:MS | delay:MIN-MAX
                                  forward it MS (or uniformly MIN..MAX) ms later; on a socket the
                                  order on the link is kept, as network latency keeps it (the
                                  simulator's network never kept order: the delay adds to its own)
            duplicate             forward it twice
            error:CODE            answer the request with this Kafka error code (a number or a
                                  name such as REBALANCE_IN_PROGRESS) in that API's response body,
                                  never forwarding it; on dir=response: replace the response
            reorder[:WAIT_MS]     send it after the next frame on the same link and direction
                                  (or after WAIT_MS, default 1000, if none comes)
            hold                  park it until released: by the test (FaultProxy.release), or in a
                                  scenario's [[faults]] when the window ends or after hold_ms;
                                  not on the command line
            disconnect            never forward it, and reset the connection it came on, both
                                  sides, as a broker or a network resets one: what else is in
                                  flight on it is lost, and the client reconnects with its back-off
    OPTION  p=P (0..1)  dir=request|response|both  link=GLOB  limit=N

Examples: `Heartbeat:drop:0.2`, `JoinGroup:delay:200-500`, `SyncGroup:duplicate`, `*:delay:50`,
`Heartbeat:error:27`, `Heartbeat:error:REBALANCE_IN_PROGRESS:link=consumer-2:limit=1`,
`Heartbeat:disconnect:link=consumer-2:limit=1`.

`RuleSet.decide` is the one place where rules meet a message, for the socket proxy and for the
simulator's network alike: pure (no clock, no I/O, randomness from the caller's generator), it
says what to do with the message and leaves the doing, and any waiting, to the caller.
"""

from __future__ import annotations

import dataclasses
import enum
import fnmatch
import random
from dataclasses import dataclass, field
from typing import Any, Iterator

from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import API

ACTIONS = ("drop", "delay", "duplicate", "hold", "error", "reorder", "disconnect")
# Kafka's APIs the Kafka-wire listener answers itself, without a step of the Broker (docs/kafka-wire.md
# §1; its other one, ApiVersions, is answered at every version before anything else): a rule may
# name them, and only a FaultProxy(wire="kafka") applies it (grouplab's own clients find no
# coordinator: they are given its address). `error` is not offered on them: the fault proxy builds
# error answers from the translation of grouplab's response bodies, which the listener does not use.
KAFKA_WIRE_APIS = ("FindCoordinator",)
DIRECTIONS = ("request", "response", "both")
DEFAULT_REORDER_WAIT_MS = 1000


class FaultSpecError(ValueError):
    """A rule or SPEC that cannot be used; the message says what is wrong and what is allowed."""


def error_code_of(value: int | str | ErrorCode) -> int:
    if isinstance(value, ErrorCode):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        code = value
    elif isinstance(value, str) and value.lstrip("-").isdigit():
        code = int(value)
    elif isinstance(value, str) and value.upper() in ErrorCode.__members__:
        return int(ErrorCode[value.upper()])
    else:
        raise FaultSpecError(f"error needs a Kafka error code (a number or a name such as REBALANCE_IN_PROGRESS), got {value!r}")
    try:
        ErrorCode(code)
    except ValueError:
        raise FaultSpecError(f"unknown Kafka error code {code}; known: "
                             f"{', '.join(f'{int(c)} {c.name}' for c in ErrorCode if c is not ErrorCode.NONE)}") from None
    if code == 0:
        raise FaultSpecError("error code 0 is NONE: that is no fault")
    return code


def delay_range(value: int | float | tuple[int, int] | list[int] | str) -> tuple[int, int]:
    if isinstance(value, str):
        lo, sep, hi = value.partition("-")
        try:
            pair = (int(lo), int(hi)) if sep else (int(lo), int(lo))
        except ValueError:
            raise FaultSpecError(f"delay needs MS or MIN-MAX in milliseconds, got {value!r}") from None
    elif isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise FaultSpecError(f"delay range needs (MIN, MAX), got {value!r}")
        pair = (int(value[0]), int(value[1]))
    else:
        pair = (int(value), int(value))
    if pair[0] < 0 or pair[1] < pair[0]:
        raise FaultSpecError(f"delay needs 0 <= MIN <= MAX, got {pair[0]}-{pair[1]}")
    return pair


@dataclass(eq=False)
class Rule:
    """One fault rule. `fired` counts the frames it acted on, `matched` the frames it selected
    (before its probability roll and limit)."""

    action: str
    api: str = "*"
    direction: str = "request"
    link: str = "*"
    p: float = 1.0
    delay_ms: tuple[int, int] = (0, 0)
    error_code: int | None = None
    limit: int | None = None
    wait_ms: int = DEFAULT_REORDER_WAIT_MS
    fired: int = 0
    matched: int = 0
    _removed: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise FaultSpecError(f"unknown action {self.action!r}; known: {', '.join(ACTIONS)}")
        if self.api != "*" and self.api not in API and self.api not in KAFKA_WIRE_APIS:
            raise FaultSpecError(f"unknown API {self.api!r}; known: *, {', '.join(API)}; on the Kafka-wire proxy "
                                 f"also {', '.join(KAFKA_WIRE_APIS)}")
        if self.kafka_wire_only and self.action == "error":
            offered = [a for a in ACTIONS if a not in ("error", "hold")]
            raise FaultSpecError(f"{self.api} takes {', '.join(offered[:-1])} or {offered[-1]} (and hold, from a "
                                 f"test), not error (the proxy answers errors with grouplab's response bodies, and "
                                 f"{self.api} has none)")
        if self.direction not in DIRECTIONS:
            raise FaultSpecError(f"unknown direction {self.direction!r}; known: {', '.join(DIRECTIONS)}")
        if not 0.0 <= float(self.p) <= 1.0:
            raise FaultSpecError(f"probability must be within 0..1, got {self.p}")
        self.p = float(self.p)
        self.delay_ms = delay_range(self.delay_ms)
        if self.action == "delay" and self.delay_ms == (0, 0):
            raise FaultSpecError("delay needs a positive MS or MIN-MAX")
        if self.action == "error":
            if self.error_code is None:
                raise FaultSpecError("error needs a Kafka error code, e.g. Heartbeat:error:27")
            self.error_code = error_code_of(self.error_code)
        if self.limit is not None and self.limit < 1:
            raise FaultSpecError(f"limit must be at least 1, got {self.limit}")
        if self.wait_ms < 0:
            raise FaultSpecError(f"reorder wait must be >= 0 ms, got {self.wait_ms}")
        if not self.link:
            raise FaultSpecError("link glob must not be empty (use * for every link)")

    # ------------------------------------------------------------------ matching

    def selects(self, api: str | None, direction: str, client_id: str, link_name: str) -> bool:
        """Does this rule pick a frame (before its probability and limit)? Frames whose API is not
        known (unparseable, or a response to an unknown request) are picked by no rule."""
        if self._removed or api is None:
            return False
        if self.direction != "both" and self.direction != direction:
            return False
        if self.api != "*" and self.api != api:
            return False
        return link_matches(self.link, client_id, link_name)

    @property
    def kafka_wire_only(self) -> bool:
        """Names an API only the Kafka-wire listener serves (KAFKA_WIRE_APIS)."""
        return self.api in KAFKA_WIRE_APIS

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.fired >= self.limit

    # ------------------------------------------------------------------ text form

    def spec(self) -> str:
        """This rule in SPEC form (what `parse_spec` reads back)."""
        parts = [self.api, self.action]
        if self.action == "drop" and self.p < 1.0:
            parts.append(_num(self.p))
        elif self.action == "delay":
            lo, hi = self.delay_ms
            parts.append(str(lo) if lo == hi else f"{lo}-{hi}")
        elif self.action == "error":
            parts.append(str(self.error_code))
        elif self.action == "reorder" and self.wait_ms != DEFAULT_REORDER_WAIT_MS:
            parts.append(str(self.wait_ms))
        if self.p < 1.0 and self.action != "drop":
            parts.append(f"p={_num(self.p)}")
        if self.direction != "request":
            parts.append(f"dir={self.direction}")
        if self.link != "*":
            parts.append(f"link={self.link}")
        if self.limit is not None:
            parts.append(f"limit={self.limit}")
        return ":".join(parts)

    def __str__(self) -> str:
        return self.spec()


def _num(x: float) -> str:
    return f"{x:g}"


# ----------------------------------------------------------------------------- deciding


class Fate(enum.Enum):
    """What becomes of a message. `delay` and `duplicate` rules do not decide a fate: they add to a
    delivered message's latency and copies, and the next rules are tried."""

    DELIVER = "deliver"
    DROP = "drop"
    HOLD = "hold"  # parked until the caller releases it
    ERROR = "error"  # answered (request) or replaced (response) with the rule's error code
    REORDER = "reorder"  # kept back until the next message on its link and direction, or the rule's wait_ms
    DISCONNECT = "disconnect"  # not forwarded, and the link it travels on is reset, both sides


_FATES = {"drop": Fate.DROP, "hold": Fate.HOLD, "error": Fate.ERROR, "reorder": Fate.REORDER,
          "disconnect": Fate.DISCONNECT}


@dataclass(frozen=True, slots=True)
class Envelope:
    """What rules look at in a message: its API (None when it could not be read, or answers an
    unknown request: no rule selects it) and its direction, `request` or `response`."""

    api: str | None
    direction: str


@dataclass(frozen=True, slots=True)
class LinkId:
    """The connection a message travels on: the client id and the link's name (`consumer-1#2`)."""

    client_id: str
    name: str


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of `RuleSet.decide`. `delay_ms` and `copies` apply to a delivered message (and
    `delay_ms` to an error answer); `rule` is the rule that decided any other fate (its
    `error_code`, `wait_ms`); `fired` lists every rule that fired on the message, in order."""

    fate: Fate = Fate.DELIVER
    delay_ms: int = 0
    copies: int = 1
    rule: Rule | None = None
    fired: tuple[Rule, ...] = ()


DELIVER = Decision()


class RuleSet:
    """Rules in the order they were added; `decide` tries them in that order."""

    def __init__(self, rules: list[Rule] | None = None) -> None:
        self.rules: list[Rule] = list(rules or [])

    def add(self, rule: Rule) -> None:
        self.rules.append(rule)

    def remove(self, rule: Rule) -> None:
        self.rules.remove(rule)

    def __iter__(self) -> Iterator[Rule]:
        return iter(list(self.rules))

    def __len__(self) -> int:
        return len(self.rules)

    def __contains__(self, rule: object) -> bool:
        return rule in self.rules

    def decide(self, message: Envelope, link: LinkId, rng: random.Random, reorder_waiting: bool = False) -> Decision:
        """What to do with `message` on `link`. A rule that selects it and is below its `limit`
        counts it in `matched` and rolls its probability (a draw from `rng` only when p < 1); if it
        fires (`fired` + 1): `delay` adds its delay (a ranged one drawn from `rng`) and `duplicate`
        a copy, and the next rules are tried; `drop`, `hold`, `error`, `reorder` and `disconnect`
        decide the fate and end the evaluation (a `disconnect` ignores the delays before it: the
        connection is reset when the message is seen, not when it would have been delivered). A
        `reorder` does not fire while `reorder_waiting` (the caller keeps a message back on this
        link and direction already: this one is the next it waits for); an `error` does not fire
        on an API without a response type."""
        delay_ms, copies = 0, 1
        fired: list[Rule] = []
        for rule in self.rules:
            if rule.exhausted or not rule.selects(message.api, message.direction, link.client_id, link.name):
                continue
            rule.matched += 1
            if rule.p < 1.0 and rng.random() >= rule.p:
                continue
            action = rule.action
            if action == "delay":
                lo, hi = rule.delay_ms
                delay_ms += lo if lo == hi else lo + int(rng.random() * (hi - lo + 1))
            elif action == "duplicate":
                copies += 1
            elif action == "reorder" and reorder_waiting or action == "error" and message.api not in API:
                continue
            else:
                rule.fired += 1
                fired.append(rule)
                return Decision(_FATES[action], delay_ms, copies, rule, tuple(fired))
            rule.fired += 1
            fired.append(rule)
        return Decision(Fate.DELIVER, delay_ms, copies, None, tuple(fired)) if fired else DELIVER


def error_response(api: str, error_code: int, injected_by: str) -> Any:
    """The body an `error` rule answers with: that API's response with the error code, every other
    field at its default, and an `error_message` (where the body has one) saying who injected it."""
    spec = API[api].response
    body = spec(error_code=error_code)
    if "error_message" in {f.name for f in dataclasses.fields(spec)}:
        body.error_message = f"injected by {injected_by}: {ErrorCode.from_code(error_code).name}"
    return body


def link_matches(pattern: str, client_id: str, link_name: str) -> bool:
    """A link glob matches the link's client id (`consumer-*`) or its name (`consumer-1#2`)."""
    return pattern == "*" or fnmatch.fnmatchcase(client_id, pattern) or fnmatch.fnmatchcase(link_name, pattern)


_OPTIONS = ("p", "dir", "link", "limit")


def parse_spec(text: str, allow_hold: bool = False) -> Rule:
    """`Heartbeat:drop:0.2` -> Rule(action="drop", api="Heartbeat", p=0.2). Raises FaultSpecError
    with the reason and the syntax."""
    try:
        return _parse(text, allow_hold)
    except FaultSpecError as exc:
        raise FaultSpecError(f"bad fault spec {text!r}: {exc} (syntax: API:ACTION[:ARG][:p=P][:dir=request|response|both]"
                             f"[:link=GLOB][:limit=N]; e.g. Heartbeat:drop:0.2, JoinGroup:delay:200-500, "
                             f"SyncGroup:duplicate, *:delay:50, Heartbeat:error:27, "
                             f"Heartbeat:disconnect:limit=1)") from None


def _parse(text: str, allow_hold: bool) -> Rule:
    tokens = [t.strip() for t in text.strip().split(":")]
    if len(tokens) < 2 or not tokens[0] or not tokens[1]:
        raise FaultSpecError("expected at least API:ACTION")
    api, action, rest = tokens[0], tokens[1].lower(), tokens[2:]
    if action not in ACTIONS:
        raise FaultSpecError(f"unknown action {action!r}; known: {', '.join(a for a in ACTIONS if allow_hold or a != 'hold')}")
    if action == "hold" and not allow_hold:
        raise FaultSpecError("hold parks frames until a test releases them (FaultProxy.release); it has no command-line form")
    arg = None
    if rest and "=" not in rest[0]:
        arg, rest = rest[0], rest[1:]
    kwargs: dict = {"action": action, "api": api}
    for option in rest:
        name, sep, value = option.partition("=")
        name = name.strip().lower()
        if not sep or name not in _OPTIONS:
            raise FaultSpecError(f"unknown option {option!r}; options: p=P, dir=request|response|both, link=GLOB, limit=N")
        if _key(name) in kwargs:
            raise FaultSpecError(f"option {name} given twice")
        if name == "p":
            kwargs["p"] = _probability(value)
        elif name == "dir":
            kwargs["direction"] = value.strip().lower()
        elif name == "link":
            kwargs["link"] = value.strip()
        elif name == "limit":
            if not value.strip().isdigit():
                raise FaultSpecError(f"limit needs a whole number, got {value!r}")
            kwargs["limit"] = int(value)
    if action == "drop":
        if arg is not None:
            if "p" in kwargs:
                raise FaultSpecError("drop's probability given twice (drop:P and p=P)")
            kwargs["p"] = _probability(arg)
    elif action == "delay":
        if arg is None:
            raise FaultSpecError("delay needs MS or MIN-MAX, e.g. delay:50 or delay:200-500")
        kwargs["delay_ms"] = delay_range(arg)
    elif action == "error":
        if arg is None:
            raise FaultSpecError("error needs a Kafka error code, e.g. error:27 or error:REBALANCE_IN_PROGRESS")
        kwargs["error_code"] = error_code_of(arg)
    elif action == "reorder":
        if arg is not None:
            if not arg.isdigit():
                raise FaultSpecError(f"reorder's wait needs milliseconds, got {arg!r}")
            kwargs["wait_ms"] = int(arg)
    elif arg is not None:
        raise FaultSpecError(f"{action} takes no argument, got {arg!r}")
    return Rule(**kwargs)


def _key(option: str) -> str:
    return {"dir": "direction"}.get(option, option)


def _probability(value: str) -> float:
    try:
        p = float(value)
    except ValueError:
        raise FaultSpecError(f"probability must be a number within 0..1, got {value!r}") from None
    if not 0.0 <= p <= 1.0:
        raise FaultSpecError(f"probability must be within 0..1, got {value}")
    return p
