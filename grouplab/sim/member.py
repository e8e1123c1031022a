"""A simulated member: the MemberDriver (consumer/driver.py) of one client id's processes, one
after another, plus what faults do to it. The simulated world (grouplab/sim/world.py) builds it,
with its clock, its schedule and its shell, the member's end of the simulated network."""

from __future__ import annotations

from typing import Callable, Protocol

from grouplab.consumer.config import ConsumerConfig
from grouplab.consumer.coordinator import ConsumerCoordinator
from grouplab.consumer.delivery import DeliveryApp
from grouplab.consumer.membership import ConsumerMembership
from grouplab.consumer.driver import MemberDriver, MemberListener, MemberTransport
from grouplab.protocol.effects import TimerKey
from grouplab.protocol.kernel import Clock, EventSink, Schedule

SimMachine = ConsumerCoordinator | ConsumerMembership | DeliveryApp


class SimMemberShell(MemberTransport, MemberListener, Protocol):
    """A member's end of the simulated world: its driver's transport and listener both."""


class SimMember(MemberDriver[SimMachine]):
    """A simulated member: the driver of its processes, one after another (consumer/driver.py:
    each one's machine and timers, and the member's connection, whose epoch numbers connections
    across processes so that messages of an older one are lost), plus what faults do to it."""

    def __init__(self, index: int, name: str, config: ConsumerConfig, clock: Clock, schedule: Schedule,
                 shell: Callable[[SimMember], SimMemberShell], events: EventSink | None) -> None:
        end = shell(self)
        super().__init__(config.group_id, clock, schedule, end, end, events)
        self.index = index
        self.name = name  # client.id, stable across restarts
        self.config = config
        self.closed_epoch = -1  # a connection closed cleanly: what it sent before closing still arrives
        self.hung = False
        self.held: list[tuple] = []  # events that reached a hung member
        self.slow = False
        self.partitioned = False
        self.permanently_down = False
        self.zombie = False  # a static member's old process, replaced while still running
        # The process's armed timers as the simulator keeps them (key -> the token of the agenda
        # event that fires it), which its member step arms and cancels itself.
        self.armed: dict[TimerKey, int] = {}

    @property
    def up(self) -> bool:
        return self.machine is not None
