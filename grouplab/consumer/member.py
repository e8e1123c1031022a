"""What the two member machines share: the classic protocol's ConsumerCoordinator
(consumer/coordinator.py) and the consumer protocol's ConsumerMembership (consumer/membership.py,
KIP-848). Their outputs (one vocabulary for every member driver: consumer/driver.py) and the steps
they take alike: numbering requests, arming timers, handing partitions to the rebalance listener
(revoked in order, or lost), and logging with the member's fields first.

A machine that mixes in MemberSteps has `config`, `state`, `member_id`, `owned`, and says which
number its events carry as `generation_id` (`_logged_generation`: a consumer-protocol member's is
its member epoch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Concatenate

from grouplab.consumer.config import ConsumerConfig
from grouplab.protocol import events
from grouplab.protocol.effects import ArmTimer, CancelTimer, StepOutputs, TimerKey
from grouplab.protocol.types import TopicPartition


@dataclass(slots=True)
class Send:
    correlation_id: int
    api: str
    body: Any


@dataclass(slots=True)
class PartitionsRevoked:
    partitions: list[TopicPartition]


@dataclass(slots=True)
class PartitionsAssigned:
    partitions: list[TopicPartition]


@dataclass(slots=True)
class PartitionsLost:
    partitions: list[TopicPartition]


@dataclass(slots=True)
class Reconnect:
    """The coordinator stopped answering: drop the connection and open a new one."""

    reason: str


class MemberSteps(StepOutputs):
    """The steps both member machines take the same way (see the module docstring)."""

    config: ConsumerConfig
    member_id: str
    owned: list[TopicPartition]
    _next_cid: int
    _inflight: dict[int, str]  # correlation id -> what the request was for

    def _logged_generation(self) -> int:
        raise NotImplementedError

    def _logged_state(self) -> events.AnyMemberState:
        raise NotImplementedError

    def _send(self, body: Any, api: str, purpose: str) -> int:
        self._next_cid += 1
        self._inflight[self._next_cid] = purpose
        self._out.append(Send(self._next_cid, api, body))
        return self._next_cid

    def _arm(self, key: TimerKey, deadline_ms: int) -> None:
        self._out.append(ArmTimer(key, deadline_ms))

    def _cancel(self, key: TimerKey) -> None:
        self._out.append(CancelTimer(key))

    def _poll_overdue(self, timer: TimerKey, last_poll_ms: int) -> bool:
        """The poll timer fired: True if max.poll.interval.ms has passed since the last poll (logged,
        `poll_timeout`); else it is armed again for the deadline the last poll set."""
        overdue = self._now - last_poll_ms
        if overdue < self.config.max_poll_interval_ms:
            self._arm(timer, last_poll_ms + self.config.max_poll_interval_ms)
            return False
        self._log(events.PollTimeout, since_last_poll_ms=overdue, max_poll_interval_ms=self.config.max_poll_interval_ms)
        return True

    def _revoke(self, partitions: list[TopicPartition], reason: str) -> None:
        """Give `partitions` up in order (Kafka's onPartitionsRevoked: the application may still commit them)."""
        if partitions:
            gone = set(partitions)
            self.owned = [tp for tp in self.owned if tp not in gone]
            self._out.append(PartitionsRevoked(sorted(partitions)))
            self._log(events.PartitionsRevoked, partitions=tps(partitions), reason=reason)

    def _revoke_all(self, reason: str) -> None:
        self._revoke(list(self.owned), reason)

    def _lose_all(self, reason: str) -> None:
        """Our membership is gone: what we owned may already belong to someone else (Kafka's
        onPartitionsLost: no commit is possible for them)."""
        if self.owned:
            lost, self.owned = self.owned, []
            self._out.append(PartitionsLost(lost))
            self._log(events.PartitionsLost, partitions=tps(lost), reason=reason)

    def _log(self, event: Callable[Concatenate[str, str, int, Any, events.Fields], events.MemberEvent], /,
             *args: events.Fields.args, **fields: events.Fields.kwargs) -> None:
        """Log `event` with the member's M fields first (docs/events.md §4.4)."""
        if self.log_events:
            self._emit_log(event(self.config.group_id, self.member_id, self._logged_generation(), self._logged_state(),
                                 *args, **fields))


def tps(partitions: list[TopicPartition]) -> list[list[Any]]:
    """Partitions as the event log writes them: sorted `[topic, partition]` pairs."""
    return [[tp.topic, tp.partition] for tp in sorted(partitions)]
