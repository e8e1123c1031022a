"""Fault injection at the edge of the real asyncio server and clients (docs/faults.md).

- `FaultProxy` (proxy.py): a TCP proxy between consumers and coordinator that drops, delays,
  duplicates, holds, reorders or answers frames, or resets their link, per API, direction and
  link, and partitions, disconnects, isolates or pauses links.
- `Rule`, `parse_spec`, `RuleSet` (rules.py): the rules, their text form (`grouplab run --faults
  SPEC`, a scenario's `[[faults]]`) and `RuleSet.decide`, the decision the proxy and the
  simulator's network both take for every message.
- `crash`, `hang`, `slow_processing` (members.py): member-level faults done to the shells.
"""

from grouplab.faults.members import Stall, crash, hang, slow_processing
from grouplab.faults.proxy import FaultProxy, Held, Link
from grouplab.faults.rules import Decision, Envelope, Fate, FaultSpecError, LinkId, Rule, RuleSet, parse_spec

__all__ = ["Decision", "Envelope", "FaultProxy", "FaultSpecError", "Fate", "Held", "Link", "LinkId", "Rule", "RuleSet",
           "Stall", "crash", "hang", "parse_spec", "slow_processing"]
