"""A scenario's `[[faults]]` on the simulated network: every message between a member and the
coordinator is put to `RuleSet.decide` (grouplab/faults/rules.py), the decision the FaultProxy
takes for a frame on a real socket, and the decision is carried out on virtual time.

As in the proxy: a request is picked by its API, a response by the API of the request it answers;
`drop` loses the message, `delay` adds to its network delay, `duplicate` sends another copy,
`error` answers a request in the coordinator's place (or replaces a response) with that API's
error body, `reorder` keeps a message back until the next one on its link and direction has been
sent (it then arrives right after that one) or `wait_ms` passed. Unlike the proxy, a `hold` needs
no test to release it: the message goes on when the rule's window ends, or `hold_ms` after it was
held. `disconnect` loses the message and closes the member's connection it travels on, as the
scenario's `disconnect` fault does (grouplab/sim/world.py): the member hears of it and reconnects
with its back-off, and what else is in flight on that connection is lost. Messages of a
connection that closed meanwhile are lost on arrival, as any other.

A link is `client-id#epoch`, the member's connection number (grouplab/sim/world.py). Every random
draw is from the simulation's one generator, and only while some rule selects a message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grouplab.faults.rules import Decision, Envelope, Fate, LinkId, Rule, RuleSet, error_response
from grouplab.sim.scenario import FaultRule
from grouplab.protocol import events
from grouplab.protocol.messages import RESPONSE_API

if TYPE_CHECKING:
    from grouplab.sim.host import SimHost
    from grouplab.sim.member import SimMember

INJECTED_BY = "a fault rule of the scenario"


@dataclass(frozen=True, slots=True)
class _Window:
    rule: Rule
    start_ms: int
    end_ms: int
    hold_ms: int | None


class SimFaultRules:
    """The rules of one run (fresh counters), and what they keep back: reordered messages."""

    def __init__(self, sim: "SimHost", faults: list[FaultRule], faults_end_ms: int, to_broker: int,
                 to_member: int) -> None:
        self.sim = sim
        self.to_broker, self.to_member = to_broker, to_member  # the agenda kinds of the two directions
        self.windows = [_Window(f.rule(), f.from_ms, f.until_ms if f.until_ms is not None else faults_end_ms, f.hold_ms)
                        for f in faults]
        self.active = RuleSet()
        self._active_windows: dict[Rule, _Window] = {}
        self._next_change_ms: float = 0
        self._stash: dict[tuple[int, int], tuple[int, tuple]] = {}  # (member index, kind) -> reordered message

    def transmit(self, m: "SimMember", kind: int, payload: tuple) -> None:
        """Send one message (already past the link's partition and loss) through the rules."""
        sim = self.sim
        if sim.now >= self._next_change_ms:
            self._activate(sim.now)
        if not self.active:
            sim.on_wire(kind, payload)
            return
        request = kind == self.to_broker
        if request:
            message = Envelope(payload[2].api, "request")
        else:
            message = Envelope(RESPONSE_API.get(type(payload[3])), "response")
        key = (m.index, kind)
        decision = self.active.decide(message, LinkId(m.name, f"{m.name}#{payload[1]}"), sim.rng,
                                      reorder_waiting=key in self._stash)
        if decision.fired:
            self._account(m, message, decision)
        fate = decision.fate
        if fate is Fate.DELIVER:
            due = max(sim.on_wire(kind, payload, decision.delay_ms) for _ in range(decision.copies))
            sim.stats.messages_duplicated += decision.copies - 1
            stashed = self._stash.pop(key, None)
            if stashed is not None:
                sim.push(due, stashed[0], *stashed[1])  # right after this one
            return
        rule = decision.rule
        assert rule is not None
        if fate is Fate.DROP:
            sim.stats.messages_lost += 1
        elif fate is Fate.ERROR:
            assert rule.error_code is not None and message.api is not None
            idx, epoch = payload[0], payload[1]
            cid = payload[2].correlation_id if request else payload[2]
            body = error_response(message.api, rule.error_code, INJECTED_BY)
            sim.on_wire(self.to_member, (idx, epoch, cid, body), decision.delay_ms)
        elif fate is Fate.HOLD:
            sim.at(self._release_at(rule), lambda: self._release(kind, payload))
        elif fate is Fate.REORDER:
            entry = (kind, payload)
            self._stash[key] = entry
            sim.at(sim.now + rule.wait_ms, lambda: self._flush(key, entry))
        else:  # Fate.DISCONNECT
            sim.stats.messages_lost += 1
            sim.reset_connection(m, payload[1])

    # ------------------------------------------------------------------ internals

    def _activate(self, now: int) -> None:
        """The rules whose window holds `now`; recomputed only when a window opens or closes."""
        self._active_windows = {w.rule: w for w in self.windows if w.start_ms <= now < w.end_ms}
        self.active = RuleSet(list(self._active_windows))
        self._next_change_ms = min((t for w in self.windows for t in (w.start_ms, w.end_ms) if t > now),
                                   default=math.inf)

    def _release_at(self, rule: Rule) -> int:
        w = self._active_windows[rule]
        return w.end_ms if w.hold_ms is None else min(self.sim.now + w.hold_ms, w.end_ms)

    def _release(self, kind: int, payload: tuple) -> None:
        """A held message goes on, through the network but past the rules, as the proxy releases it."""
        self.sim.on_wire(kind, payload)

    def _flush(self, key: tuple[int, int], entry: tuple[int, tuple]) -> None:
        """No next message came within the reorder rule's wait: the kept one goes on alone."""
        if self._stash.get(key) is entry:
            del self._stash[key]
            self.sim.on_wire(*entry)

    def _account(self, m: "SimMember", message: Envelope, decision: Decision) -> None:
        """Every firing counts in stats.faults under its action; all but delays (which fire on
        nearly every message) are logged as `fault_injected`, as the proxy logs them."""
        sim = self.sim
        for rule in decision.fired:
            sim.stats.faults[rule.action] = sim.stats.faults.get(rule.action, 0) + 1
            if rule.action == "delay":
                continue
            duration_ms = 0
            if rule is decision.rule and decision.fate is Fate.HOLD:
                duration_ms = self._release_at(rule) - sim.now
            elif rule is decision.rule and decision.fate is Fate.REORDER:
                duration_ms = rule.wait_ms
            sim.log_sim(events.RuleFaultInjected, fault=rule.action, members=[m.name], duration_ms=duration_ms, topic=None,
                         rule=rule.spec(), api=message.api, direction=message.direction)
