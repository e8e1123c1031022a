"""Fault injection at the edge of the real asyncio server and clients (docs/faults.md).

- `FaultProxy` (proxy.py): a TCP proxy between consumers and coordinator that drops, delays,
  duplicates, holds, reorders or answers frames per API, direction and link, and partitions,
  disconnects or pauses links.
- `Rule`, `parse_spec` (rules.py): the rules and their text form, `grouplab run --faults SPEC`.
- `crash`, `hang`, `slow_processing` (members.py): member-level faults done to the shells.
"""

from grouplab.faults.members import Stall, crash, hang, slow_processing
from grouplab.faults.proxy import FaultProxy, Held, Link
from grouplab.faults.rules import FaultSpecError, Rule, parse_spec

__all__ = ["FaultProxy", "FaultSpecError", "Held", "Link", "Rule", "Stall", "crash", "hang", "parse_spec",
           "slow_processing"]
