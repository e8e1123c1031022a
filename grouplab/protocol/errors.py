"""Kafka's error codes (numbers and names as in Kafka's protocol guide) and grouplab's typed errors.

Only the codes grouplab can return are listed; the numbers are Kafka's so that a reader who knows
Kafka recognises them, and so that a log line can be looked up in Kafka's own documentation.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    GROUP_AUTHORIZATION_FAILED = 30
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    KAFKA_STORAGE_ERROR = 56  # a log could not be written (Kafka: the log directory failed); retriable
    INVALID_CONFIG = 40
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70  # the Kafka-wire listener keeps no fetch sessions (KIP-227)
    UNSUPPORTED_COMPRESSION_TYPE = 76
    GROUP_SUBSCRIBED_TO_TOPIC = 86  # OffsetDelete: the group's members consume the topic
    NON_EMPTY_GROUP = 68
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    TOPIC_DELETION_DISABLED = 73  # DeleteTopics v3+ while delete.topic.enable is false
    FENCED_LEADER_EPOCH = 74  # a leader epoch older than the partition's (OffsetForLeaderEpoch)
    UNKNOWN_LEADER_EPOCH = 75  # a leader epoch newer than the partition's: the broker is behind
    UNKNOWN_TOPIC_ID = 100  # DeleteTopics v6 by topic id: grouplab's topics have none
    FENCED_MEMBER_EPOCH = 110  # KIP-848: a member epoch ahead of, or too far behind, the coordinator's
    UNRELEASED_INSTANCE_ID = 111  # KIP-848: a static member's instance id still held by a live member
    UNSUPPORTED_ASSIGNOR = 112  # KIP-848: a server assignor the coordinator does not have
    STALE_MEMBER_EPOCH = 113  # KIP-848: an offset commit/fetch with an old member epoch
    MISMATCHED_ENDPOINT_TYPE = 114  # DescribeCluster v1+ asking a broker for the controllers
    UNSUPPORTED_ENDPOINT_TYPE = 115  # DescribeCluster v1+ with an endpoint type Kafka does not know

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE

    @classmethod
    def from_code(cls, code: int) -> "ErrorCode":
        # (a dict of the values: Enum's own lookup by value is slow, and every answer is read through here)
        # (and the default a module constant: `cls.UNKNOWN_SERVER_ERROR` goes through EnumType's
        # __getattr__ hook on Python 3.11, several times a global's cost)
        return _BY_CODE.get(code, _UNKNOWN_SERVER_ERROR)


_BY_CODE: dict[int, ErrorCode] = {int(e): e for e in ErrorCode}
_UNKNOWN_SERVER_ERROR = ErrorCode.UNKNOWN_SERVER_ERROR

_RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.UNKNOWN_TOPIC_ID,
    }
)


class ProtocolError(Exception):
    """A request or frame that breaks the wire contract; carries the error code to answer with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class FrameTooLarge(ProtocolError):
    """A frame whose declared length exceeds the limit; the connection must close after the answer."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit
        self.frames: list[bytes] = []


# What to ask for instead, by API, when an answer is over grouplab.response.max.bytes.
_SMALLER_REQUEST = {
    "Metadata": "name fewer topics per request (no topic list asks for every topic)",
    "DescribeGroups": "describe fewer groups per request",
    "ListGroups": "list fewer groups at a time with states_filter",
    "OffsetFetch": "ask for fewer partitions per request (no topic list asks for every committed partition)",
    "Fetch": "fetch fewer partitions per request or lower max_bytes",
    "ListOffsets": "ask for fewer partitions per request",
    "Produce": "send fewer partitions per request",
    "OffsetCommit": "commit fewer partitions per request",
    "TxnOffsetCommit": "commit fewer partitions per request",
    "AddPartitionsToTxn": "add fewer partitions per request",
    "LeaveGroup": "remove fewer members per request",
    "CreateTopics": "create fewer topics per request",
    "CreatePartitions": "name fewer topics per request",
    "DeleteTopics": "delete fewer topics per request",
    "DescribeConfigs": "describe fewer resources per request, or name their configuration_keys",
    "JoinGroup": "the group's subscriptions are too large for one answer: fewer members or smaller subscriptions",
}


class AnswerTooLarge(ProtocolError):
    """An answer whose encoding would pass grouplab.response.max.bytes: `size` bytes (at least
    that many, when `exact` is false: packing stopped as soon as that was certain). It is not
    sent; the request is answered INVALID_REQUEST with `message_for(api)` instead (Kafka has no
    code for an answer too large; the request asked for too much, and asking again fails again)."""

    def __init__(self, size: int, limit: int, exact: bool = True) -> None:
        amount = f"{size}" if exact else f"at least {size}"
        super().__init__(ErrorCode.INVALID_REQUEST, f"the answer would take {amount} bytes, over the limit of "
                                                    f"{limit} bytes (grouplab.response.max.bytes)")
        self.size = size
        self.limit = limit
        self.exact = exact

    def message_for(self, api: str) -> str:
        hint = _SMALLER_REQUEST.get(api, "ask for less per request")
        return f"{api}: {self.message}: {hint}" if api else f"{self.message}: {hint}"
