"""What the simulator's plugins (grouplab/sim/delivery.py, invariants.py, fault_rules.py) use of
the simulation they are plugged into: `SimHost`, which grouplab/sim/world.py's Simulation is.

The plugins are typed against this protocol rather than the Simulation class, so that world.py
imports them and none of them imports world.py: no import circle (tests/test_import_graph.py).
Where the host hands out a plugin, it is named by the narrow protocol of what the other plugins
use of it (`InvariantsHook`, `DeliveryHook`), not by the plugin's class.
"""

from __future__ import annotations

from collections import deque
from random import Random
from typing import Any, Callable, Concatenate, Protocol

from grouplab.coordinator.broker import Broker
from grouplab.coordinator.group import Group
from grouplab.coordinator.consumer_group import ConsumerGroup
from grouplab.sim.member import SimMember
from grouplab.sim.scenario import Scenario
from grouplab.sim.stats import SimStats
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent
from grouplab.protocol.types import TopicPartition


class InvariantsHook(Protocol):
    """What the delivery plugin uses of the invariants (grouplab/sim/invariants.py)."""

    dirty: bool  # set by anything that can change whether the group has settled

    def fail(self, invariant: str, detail: str) -> None:
        """Raise the Violation of `invariant`."""
        ...


class DeliveryHook(Protocol):
    """What the invariants use of the delivery plugin (grouplab/sim/delivery.py)."""

    def drained(self) -> bool:
        """Every input record committed."""
        ...


class SimHost(Protocol):
    """The simulation as its plugins see it: its state (read-only here; stats, members and the
    broker are mutable objects) and the operations they call."""

    @property
    def scenario(self) -> Scenario: ...

    @property
    def seed(self) -> int: ...

    @property
    def now(self) -> int:
        """Virtual time, in ms."""
        ...

    @property
    def rng(self) -> Random:
        """The run's one random generator: every random draw of the run is from it."""
        ...

    @property
    def stats(self) -> SimStats: ...

    @property
    def trace(self) -> deque[tuple]:
        """The last steps, as tuples (invariants.format_step turns one into text)."""
        ...

    @property
    def emit(self) -> Callable[[str, LogEvent], None] | None:
        """The event log's sink, (node, LogEvent), or None for no event log."""
        ...

    @property
    def members(self) -> list[SimMember]: ...

    @property
    def broker(self) -> Broker | None:
        """The coordinator's Broker, None while the coordinator is down."""
        ...

    @property
    def faults_on(self) -> bool:
        """Until the last fault ends: random loss and duplication apply only meanwhile."""
        ...

    @property
    def invariants(self) -> InvariantsHook: ...

    @property
    def delivery(self) -> DeliveryHook | None:
        """The delivery plugin, for a scenario with [delivery]."""
        ...

    def live_members(self) -> list[SimMember]:
        """Members with a process running that is not ending for good."""
        ...

    def all_partitions(self) -> set[TopicPartition]:
        """Every partition of the topics the members subscribe to."""
        ...

    def group_state(self) -> Group | None:
        """The scenario's group on the coordinator, None while it is down or before it exists."""
        ...

    def consumer_group_state(self) -> ConsumerGroup | None:
        """The scenario's group if it is a consumer-protocol one (KIP-848), else None."""
        ...

    # ------------------------------------------------------------------ operations

    def push(self, at: int, kind: int, *payload: Any) -> None:
        """Put an event of heap kind `kind` on the heap, due at `at`."""
        ...

    def at(self, at: int, action: Callable[[], None]) -> None:
        """Run `action` at virtual time `at` (now, if that has passed)."""
        ...

    def on_wire(self, kind: int, payload: tuple, extra_ms: int = 0) -> int:
        """Put a message on the network (its delay, maybe a duplicate); returns when the last copy
        arrives."""
        ...

    def log_sim(self, event: Callable[Concatenate[str, int, events.Fields], events.SimulatorEvent], /,
                *args: events.Fields.args, **fields: events.Fields.kwargs) -> None:
        """Note what the simulator did, in the trace and (with an event log) as an event."""
        ...

    def admin_request(self, api: str, body: Any, node: int = 0) -> None:
        """A request the simulator itself makes of the coordinator (an admin's CreatePartitions,
        the delivery input's Produce): through its driver, so the message trace has it as it has
        every other input. Its answer goes nowhere. Nothing happens while the coordinator is down.
        `node`: the cluster's broker it reaches (a Produce goes to the partition's leader)."""
        ...

    def stop_process(self, m: SimMember, clean: bool) -> None:
        """End the member's running process: closing it (LeaveGroup) if `clean`, else a crash."""
        ...

    def restart_later(self, m: SimMember, duration_ms: int) -> None:
        """Start a new process of the member after `duration_ms`; with 0, it stays down for good."""
        ...

    def reset_connection(self, m: SimMember, epoch: int) -> None:
        """Close the member's connection number `epoch` under it, as the `disconnect` fault does,
        right after the step in progress, if it is still open then."""
        ...
