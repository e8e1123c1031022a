"""Issue 11, memory is bounded: what a client can make the coordinator keep has documented limits
(docs/protocol.md §4.12), each refused with Kafka's error and changing nothing (no group made, no
record persisted, the groups as they were)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from grouplab.coordinator.broker import Broker, RequestContext, SequentialMemberIds
from grouplab.coordinator.config import BrokerConfig, ConfigError
from grouplab.protocol import events
from grouplab.protocol.effects import LogEvent, Persist, Reply
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.messages import (
    AddOffsetsToTxnRequest,
    DeleteGroupsRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    TxnOffsetCommitRequest,
)

T0 = 1_700_000_000_000


def broker(**overrides: Any) -> Broker:
    b = Broker(BrokerConfig(group_initial_rebalance_delay_ms=0, **overrides), SequentialMemberIds())
    b.topics.partitions.update({"t": 1})
    return b


def handle(b: Broker, api: str, body: Any, client_id: str = "c") -> tuple[Any, list]:
    out = b.handle(api, body, RequestContext("r", client_id=client_id), T0)
    [reply] = [o.body for o in out if isinstance(o, Reply)]
    return reply, out


def join_req(group: str = "g", protocols: int = 1, instance: str | None = None, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(group, 10_000, 30_000, member_id, "consumer",
                            [JoinGroupRequestProtocol(f"p{i}", b"") for i in range(protocols)], group_instance_id=instance)


def commit_req(group: str, generation: int = -1) -> OffsetCommitRequest:
    return OffsetCommitRequest(group, [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 1)])], generation)


def snapshot(b: Broker) -> dict[str, Any]:
    return {gid: copy.deepcopy((g.state, g.generation_id, list(g.members), dict(g.pending_members),
                                dict(g.offsets.committed), dict(g.offsets.pending)))
            for gid, g in b.groups.items()}


def refused(b: Broker, api: str, body: Any, client_id: str = "c") -> tuple[Any, list]:
    """Handle a request that must be refused: returns the reply and outputs, and checks that it
    changed nothing and persisted nothing."""
    before = snapshot(b)
    reply, out = handle(b, api, body, client_id)
    assert snapshot(b) == before
    assert not [o for o in out if isinstance(o, Persist)]
    return reply, out


def test_the_defaults_are_documented_bounds() -> None:
    cfg = BrokerConfig()
    assert (cfg.group_max_size, cfg.max_groups, cfg.max_protocols_per_member, cfg.max_id_length) == (4096, 10_000, 32, 249)
    assert (cfg.offsets_retention_minutes, cfg.offsets_retention_check_interval_ms) == (10_080, 600_000)
    names = BrokerConfig.names()
    for name in ("group.max.size", "grouplab.max.groups", "grouplab.max.protocols.per.member", "grouplab.max.id.length",
                 "offsets.retention.minutes", "offsets.retention.check.interval.ms"):
        assert name in names


@pytest.mark.parametrize("name", ["grouplab.max.groups", "grouplab.max.protocols.per.member", "grouplab.max.id.length",
                                  "offsets.retention.minutes", "offsets.retention.check.interval.ms"])
def test_a_limit_below_one_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        BrokerConfig().with_overrides([f"{name}=0"])


# ----------------------------------------------------------------------------- grouplab.max.groups


def test_max_groups_refuses_a_new_group_whatever_would_make_it() -> None:
    b = broker(max_groups=2)
    assert handle(b, "JoinGroup", join_req("a"))[0].error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert handle(b, "OffsetCommit", commit_req("b"))[0].topics[0].partitions[0].error_code == 0
    assert set(b.groups) == {"a", "b"}

    reply, out = refused(b, "JoinGroup", join_req("c"))
    assert reply.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED and "grouplab.max.groups=2" in reply.error_message
    [ev] = [o.payload for o in out if isinstance(o, LogEvent)]
    assert isinstance(ev, events.JoinRejected) and (ev.group_id, ev.state.value, ev.error) == (
        "c", "Dead", "GROUP_MAX_SIZE_REACHED")

    reply, out = refused(b, "OffsetCommit", commit_req("c"))
    assert reply.topics[0].partitions[0].error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    [ev] = [o.payload for o in out if isinstance(o, LogEvent)]
    assert isinstance(ev, events.OffsetCommitRejected) and ev.error == "GROUP_MAX_SIZE_REACHED"
    # A commit the group would refuse anyway gets the group's own error.
    reply, _ = refused(b, "OffsetCommit", commit_req("c", generation=3))
    assert reply.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION

    # TxnOffsetCommit would make one too.
    pid = handle(b, "InitProducerId", InitProducerIdRequest("tx"))[0]
    assert handle(b, "AddOffsetsToTxn", AddOffsetsToTxnRequest("tx", pid.producer_id, pid.producer_epoch, "c"))[0].error_code == 0
    reply, _ = refused(b, "TxnOffsetCommit", TxnOffsetCommitRequest(
        "tx", "c", pid.producer_id, pid.producer_epoch, [OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 1)])]))
    assert reply.topics[0].partitions[0].error_code == ErrorCode.GROUP_MAX_SIZE_REACHED

    # The groups that exist carry on; once one is deleted, a new one may be made.
    assert handle(b, "OffsetCommit", commit_req("b"))[0].topics[0].partitions[0].error_code == 0
    assert handle(b, "DeleteGroups", DeleteGroupsRequest(["b"]))[0].results[0].error_code == 0
    assert handle(b, "JoinGroup", join_req("c"))[0].error_code == ErrorCode.MEMBER_ID_REQUIRED


# ----------------------------------------------------------------------------- group.max.size, protocols, ids


def test_group_max_size_refuses_the_extra_member() -> None:
    b = broker(group_max_size=1)
    assert handle(b, "JoinGroup", join_req())[0].error_code == ErrorCode.MEMBER_ID_REQUIRED
    reply, _ = refused(b, "JoinGroup", join_req())
    assert reply.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED and "group.max.size=1" in reply.error_message


def test_protocols_per_member() -> None:
    b = broker(max_protocols_per_member=4)
    reply, out = refused(b, "JoinGroup", join_req(protocols=5))
    assert reply.error_code == ErrorCode.INVALID_REQUEST and "grouplab.max.protocols.per.member=4" in reply.error_message
    assert b.groups == {}
    assert handle(b, "JoinGroup", join_req(protocols=4))[0].error_code == ErrorCode.MEMBER_ID_REQUIRED


def test_group_id_length() -> None:
    b = broker(max_id_length=10)
    reply, _ = refused(b, "JoinGroup", join_req("g" * 11))
    assert reply.error_code == ErrorCode.INVALID_GROUP_ID and "grouplab.max.id.length=10" in reply.error_message
    reply, _ = refused(b, "OffsetCommit", commit_req("g" * 11))
    assert reply.topics[0].partitions[0].error_code == ErrorCode.INVALID_GROUP_ID
    # Reads of an id no group can have answer as for any group that does not exist.
    reply, _ = refused(b, "OffsetFetch", OffsetFetchRequest("g" * 11, [OffsetFetchRequestTopic("t", [0])]))
    assert reply.error_code == 0 and reply.topics[0].partitions[0].committed_offset == -1
    assert b.groups == {}
    assert handle(b, "JoinGroup", join_req("g" * 10))[0].error_code == ErrorCode.MEMBER_ID_REQUIRED


def test_client_id_length() -> None:
    b = broker(max_id_length=10)
    reply, _ = refused(b, "JoinGroup", join_req(), client_id="c" * 11)
    assert reply.error_code == ErrorCode.INVALID_REQUEST and "client id" in reply.error_message
    assert handle(b, "JoinGroup", join_req(), client_id="c" * 10)[0].error_code == ErrorCode.MEMBER_ID_REQUIRED


@pytest.mark.parametrize("instance", ["", "i" * 250, "has space", "caf\u00e9", "a/b"])
def test_kafkas_rule_for_group_instance_id(instance: str) -> None:
    b = broker()
    reply, _ = refused(b, "JoinGroup", join_req(instance=instance))
    assert reply.error_code == ErrorCode.INVALID_REQUEST and "group.instance.id" in reply.error_message


def test_a_valid_group_instance_id_joins() -> None:
    b = broker()
    instance = "Az09._-" + "i" * 242  # 249 characters
    b.handle("JoinGroup", join_req(instance=instance), RequestContext("r"), T0)  # parked: the join phase
    assert b.groups["g"].static_members == {instance: next(iter(b.groups["g"].members))}


def test_a_refusal_inside_an_existing_group_changes_nothing() -> None:
    b = broker(max_protocols_per_member=2)
    first, _ = handle(b, "JoinGroup", join_req())
    reply, _ = refused(b, "JoinGroup", join_req(protocols=3, member_id=first.member_id))
    assert reply.error_code == ErrorCode.INVALID_REQUEST
