"""The states and reasons the machines hold as enumerations and the contract writes as values: in
event-log lines (docs/events.md) and, for a group's state, in DescribeGroups and ListGroups
(docs/protocol.md). They live here, with the other contracts, so that protocol/events.py can type
its fields with them without importing the machines that use them."""

from __future__ import annotations

from enum import Enum

# ----------------------------------------------------------------------------- coordinator: groups


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class RebalanceCause(Enum):
    """Why a rebalance started, as a value a program may rely on (the `trigger` text is for people)."""

    MEMBER_JOINED = "member_joined"
    STATIC_MEMBER_JOINED = "static_member_joined"
    STATIC_MEMBER_REJOINED = "static_member_rejoined"
    LEADER_REJOINED = "leader_rejoined"
    MEMBER_METADATA_CHANGED = "member_metadata_changed"
    MEMBER_LEFT = "member_left"
    SESSION_TIMEOUT = "session_timeout"
    SYNC_TIMEOUT = "sync_timeout"


class RemovalReason(Enum):
    LEFT = "left"
    SESSION_TIMEOUT = "session_timeout"
    REBALANCE_TIMEOUT = "rebalance_timeout"  # did not rejoin in time
    SYNC_TIMEOUT = "sync_timeout"  # did not send SyncGroup in time (KAFKA-12890)


# ----------------------------------------------------------------------------- coordinator: consumer-protocol groups (KIP-848)


class ConsumerGroupState(Enum):
    """Kafka's ConsumerGroup states: Assigning while the group epoch is ahead of the target
    assignment's, Reconciling while a member is not yet at the target epoch or not stable."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerMemberState(Enum):
    """Kafka's MemberState of a consumer-protocol member (CurrentAssignmentBuilder)."""

    STABLE = "stable"  # has its target assignment at the target epoch
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # must give partitions up first: its epoch waits
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # at the target epoch, waiting for others to let go


class GroupEpochCause(Enum):
    """Why a consumer-protocol group's epoch moved, as a value a program may rely on."""

    MEMBER_JOINED = "member_joined"
    MEMBER_LEFT = "member_left"
    SESSION_TIMEOUT = "session_timeout"
    REBALANCE_TIMEOUT = "rebalance_timeout"
    SUBSCRIPTION_CHANGED = "subscription_changed"
    ASSIGNOR_CHANGED = "assignor_changed"
    METADATA_CHANGED = "metadata_changed"


# ----------------------------------------------------------------------------- coordinator: transactions


class TxnState(Enum):
    """Kafka's transaction states. PrepareCommit/PrepareAbort: the outcome is decided and durable,
    some partition still lacks its marker (the coordinator retries it, docs/protocol.md §3.21)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


# ----------------------------------------------------------------------------- clients


class MemberState(Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"
    SYNCING = "syncing"
    STABLE = "stable"
    CLOSED = "closed"
    FAILED = "failed"  # a fatal error: the application must look at `fatal_error`


class MembershipState(Enum):
    """A consumer-protocol member's state (KIP-848, consumer/membership.py), Kafka's client
    MemberState by name. Its listener calls are outputs of the same step, so Kafka's RECONCILING
    (callbacks running) and FENCED (onPartitionsLost running) pass within one step here."""

    UNSUBSCRIBED = "unsubscribed"  # not started
    JOINING = "joining"  # a heartbeat with epoch 0 and the full subscription is out
    ACKNOWLEDGING = "acknowledging"  # reconciled an assignment; the heartbeat that reports it is due or out
    STABLE = "stable"  # owns what the coordinator last gave it, and said so
    STALE = "stale"  # left after a poll timeout: rejoins on the next poll
    CLOSED = "closed"
    FATAL = "fatal"  # a fatal error: the application must look at `fatal_error`


class ProducerState(Enum):
    INIT = "init"  # waiting for a producer id
    READY = "ready"
    IN_TXN = "in_txn"
    COMMITTING = "committing"
    ABORTING = "aborting"
    FENCED = "fenced"  # a newer instance took over: fatal, as in Kafka
