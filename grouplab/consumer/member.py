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
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from grouplab.protocol.types import TopicPartition


@dataclass(slots=True)
class Send:
    correlation_id: int
    api: str
    body: Any
    # Which broker: None, the one connection to the coordinator (one broker, as before clusters);
    # in a cluster (ConsumerConfig.bootstrap_nodes), the node id of the broker to send it to. The
    # driver keeps one connection per node (consumer/driver.py).
    node: int | None = None


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
    node: int | None = None  # the connection to drop (None: the one to the coordinator, as Send.node)


FIND_COORDINATOR_TIMER: TimerKey = ("find_coordinator",)
LOOKUP = "find_coordinator"  # the purpose of a FindCoordinator in flight
COORDINATOR_GONE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_CANCELS: dict[TimerKey, CancelTimer] = {}  # MemberSteps._cancel's outputs, by key (bounded)


class MemberSteps(StepOutputs):
    """The steps both member machines take the same way (see the module docstring).

    In a cluster (`config.bootstrap_nodes`), the member finds its coordinator as Kafka's
    AbstractCoordinator does: FindCoordinator to a bootstrap broker (each in turn), group requests
    to the node named; NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a dropped connection or a
    request timeout mark it unknown and it asks again (`_coordinator_ready` then resumes what was
    in flight). With one broker `coordinator_node` stays None and every Send goes on the one
    connection."""

    config: ConsumerConfig
    member_id: str
    owned: list[TopicPartition]
    _next_cid: int
    _inflight: dict[int, str]  # correlation id -> what the request was for
    coordinator_node: int | None = None
    _lookup_cid: int | None = None
    _lookup_since: int | None = None
    _lookup_turn: int = 0
    _sent_to: dict[int, int] | None = None  # correlation id -> node (in a cluster)

    @property
    def in_cluster(self) -> bool:
        return bool(self.config.bootstrap_nodes)

    def _coordinator_ready(self) -> None:
        """The coordinator is known again: send what waited for it (each machine its own)."""
        raise NotImplementedError

    def _coordinator_missing(self) -> bool:
        """In a cluster with no coordinator known: look it up (once) and say so; the caller sends nothing."""
        if self.coordinator_node is not None or not self.config.bootstrap_nodes:  # (in_cluster, without the call)
            return False
        self._find_coordinator()
        return True

    def _find_coordinator(self) -> None:
        if self._lookup_cid is not None:
            return
        if self._lookup_since is None:
            self._lookup_since = self._now
        nodes = self.config.bootstrap_nodes
        node = nodes[self._lookup_turn % len(nodes)]
        self._lookup_turn += 1
        self._lookup_cid = self._send(FindCoordinatorRequest(self.config.group_id, 0), "FindCoordinator", LOOKUP, node)
        self._arm(FIND_COORDINATOR_TIMER, self._now + self.config.request_timeout_ms)

    def _mark_coordinator_unknown(self, reason: str, reconnect: bool = False) -> None:
        """Kafka's markCoordinatorUnknown: forget the coordinator and what is in flight to it, and
        find it again. `reconnect`: also drop the connection (it stopped answering)."""
        node = self.coordinator_node
        if node is None:
            self._find_coordinator()
            return
        self.coordinator_node = None
        self._log(events.CoordinatorUnknown, node_id=node, reason=reason)
        self._forget_node(node)
        if reconnect:
            self._out.append(Reconnect(reason, node))
        self._find_coordinator()

    def _forget_node(self, node: int) -> list[str]:
        """Requests in flight to `node` will not be answered: forget them; returns their purposes."""
        sent_to = self._sent_to
        if sent_to is None:
            return []
        gone = [cid for cid, n in sent_to.items() if n == node]
        purposes = []
        for cid in gone:
            del sent_to[cid]
            purpose = self._inflight.pop(cid, None)
            if purpose is not None:
                purposes.append(purpose)
            if cid == self._lookup_cid:
                self._lookup_cid = None
                self._arm(FIND_COORDINATOR_TIMER, self._now + self.config.retry_backoff_ms)
        return purposes

    def _on_lookup_timer(self) -> None:
        """The lookup went unanswered (request.timeout.ms) or its back-off passed: ask again."""
        if self.coordinator_node is None and self.in_cluster:
            if self._lookup_cid is not None:
                self._inflight.pop(self._lookup_cid, None)
                self._lookup_cid = None
            self._find_coordinator()

    def _on_lookup_response(self, correlation_id: int, resp: FindCoordinatorResponse) -> None:
        if correlation_id != self._lookup_cid:
            return
        self._lookup_cid = None
        self._cancel(FIND_COORDINATOR_TIMER)
        if resp.error_code or resp.node_id < 0:
            self._arm(FIND_COORDINATOR_TIMER, self._now + self.config.retry_backoff_ms)
            return
        self.coordinator_node = resp.node_id
        since = self._lookup_since if self._lookup_since is not None else self._now
        self._lookup_since = None
        self._log(events.CoordinatorFound, node_id=resp.node_id, took_ms=self._now - since)
        self._coordinator_ready()

    def _lost_node(self, node: int | None) -> bool:
        """A connection of a cluster member dropped: forget what went to it. True if it was the
        coordinator's (it is then unknown and being looked up)."""
        if node is None or not self.in_cluster:
            return True
        if node == self.coordinator_node:
            self.coordinator_node = None
            self._log(events.CoordinatorUnknown, node_id=node, reason="coordinator connection lost")
            self._forget_node(node)
            self._find_coordinator()
            return True
        self._forget_node(node)
        return False

    def _logged_generation(self) -> int:
        raise NotImplementedError

    def _logged_state(self) -> events.AnyMemberState:
        raise NotImplementedError

    def _send(self, body: Any, api: str, purpose: str, node: int | None = None) -> int:
        """Send to `node`, or (None) to the coordinator: in a cluster its node, else the one connection."""
        self._next_cid += 1
        self._inflight[self._next_cid] = purpose
        to = node if node is not None else self.coordinator_node
        if to is not None:
            if self._sent_to is None:
                self._sent_to = {}
            self._sent_to[self._next_cid] = to
        self._out.append(Send(self._next_cid, api, body, to))
        return self._next_cid

    def _arm(self, key: TimerKey, deadline_ms: int) -> None:
        self._out.append(ArmTimer(key, deadline_ms))

    def _cancel(self, key: TimerKey) -> None:
        # A member's timer keys are a few constants: each one's CancelTimer made once and handed
        # out again (outputs are read, never changed), rather than one per cancel (a rejoin cancels
        # three to five timers).
        out = _CANCELS.get(key)
        if out is None:
            out = CancelTimer(key)
            if len(_CANCELS) < 64:
                _CANCELS[key] = out
        self._out.append(out)

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
