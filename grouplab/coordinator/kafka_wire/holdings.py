"""What each Kafka client holds, as the wire shows it, written as the member lines grouplab's own
consumers write about themselves (docs/kafka-wire.md §6a, docs/events.md §6).

A real Kafka client keeps no grouplab event log, so without these lines the cost fold, `grouplab
plot` and `grouplab analyze` would see its partitions as unowned while it consumed them. The
listener sees three moments of Kafka's consumer protocol, and each says what the client holds:

- its **SyncGroup answer** gives it an assignment: what it held and is not given any more it
  revokes (`partitions_revoked`, reason `reassigned`: a cooperative client), what is new it takes
  (`partitions_assigned`, as grouplab's consumer writes only the added ones);
- its **JoinGroup** lists, in its subscription's owned partitions (ConsumerProtocol v1+, KIP-429),
  what it still holds: the rest it revoked before it sent the request (`partitions_revoked`,
  reason `rejoining`; an eager client lists nothing, so it revoked everything, as Kafka's eager
  protocol makes it);
- its **LeaveGroup** ends all it holds (`partitions_revoked`, reason `closing`).

A client that just disappears keeps its partitions until the coordinator removes its member id,
which the readers of the log already take from `member_removed`. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grouplab.protocol import consumer_protocol, events
from grouplab.protocol.messages import JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest, SyncGroupResponse
from grouplab.protocol.states import MemberState
from grouplab.protocol.types import TopicPartition

# Node names that are not consumers in a run directory (grouplab/runlog.py): a Kafka client that
# calls itself one of these is written under `kafka-client-<name>` instead.
_RESERVED = ("coordinator", "simulator", "run", "proxy", "kafka-proxy")


def client_node(client_id: str) -> str:
    """The event-log node of a Kafka client's lines: its client id, as for grouplab's consumers."""
    return client_id if client_id and client_id not in _RESERVED else f"kafka-client-{client_id or 'anonymous'}"


@dataclass
class _Held:
    generation_id: int
    partitions: set[TopicPartition]


@dataclass
class WireHoldings:
    """The partitions each (group, member id) of the Kafka clients holds; each method returns the
    member events its moment means, in order (empty when nothing changed hands)."""

    held: dict[tuple[str, str], _Held] = field(default_factory=dict)

    def joining(self, req: JoinGroupRequest) -> list[events.Event]:
        key = (req.group_id, req.member_id)
        had = self.held.get(key)
        if not req.member_id or had is None or not had.partitions:
            return []
        owned: set[TopicPartition] = set()
        if req.protocol_type == "consumer" and req.protocols:
            try:
                owned = set(consumer_protocol.decode_subscription(req.protocols[0].metadata).owned_partitions)
            except Exception:  # noqa: BLE001 - metadata the coordinator will judge; nothing owned to say
                owned = set()
        revoked = had.partitions - owned
        if not revoked:
            return []
        had.partitions -= revoked
        return [events.PartitionsRevoked(req.group_id, req.member_id, had.generation_id, MemberState.JOINING,
                                         partitions=_pairs(revoked), reason="rejoining")]

    def synced(self, req: SyncGroupRequest, resp: SyncGroupResponse) -> list[events.Event]:
        if resp.error_code != 0 or not req.member_id:
            return []
        try:
            new = set(consumer_protocol.decode_assignment(resp.assignment).partitions)
        except Exception:  # noqa: BLE001 - not ConsumerProtocol (another protocol type): nothing to say
            return []
        key = (req.group_id, req.member_id)
        had = self.held.get(key)
        old = had.partitions if had is not None else set()
        out: list[events.Event] = []
        state = MemberState.STABLE
        if old - new:
            out.append(events.PartitionsRevoked(req.group_id, req.member_id, req.generation_id, state,
                                                partitions=_pairs(old - new), reason="reassigned"))
        out.append(events.PartitionsAssigned(req.group_id, req.member_id, req.generation_id, state,
                                             partitions=_pairs(new - old), owned=_pairs(new)))
        self.held[key] = _Held(req.generation_id, new)
        return out

    def leaving(self, req: LeaveGroupRequest) -> list[events.Event]:
        out: list[events.Event] = []
        for member in req.members:
            had = self.held.pop((req.group_id, member.member_id), None)
            if had is not None and had.partitions:
                out.append(events.PartitionsRevoked(req.group_id, member.member_id, had.generation_id,
                                                    MemberState.CLOSED, partitions=_pairs(had.partitions),
                                                    reason="closing"))
        return out


def _pairs(partitions: set[TopicPartition]) -> list[list[object]]:
    return [[tp.topic, tp.partition] for tp in sorted(partitions)]
