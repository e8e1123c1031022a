"""Which broker of a cluster may answer a request, and Kafka's refusal at the others (pure).

With more than one broker (coordinator/nodes.py), every request arrives at one node, named in its
RequestContext. Kafka's brokers refuse what is not theirs, and clients find the right one:

- a group's requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
  OffsetDelete, TxnOffsetCommit, ConsumerGroupHeartbeat) at another broker than the group's
  coordinator: NOT_COORDINATOR; at the coordinator while it loads the group:
  COORDINATOR_LOAD_IN_PROGRESS (a classic Heartbeat is answered NONE then, as Kafka does, brokers.py). DescribeGroups, DeleteGroups and ConsumerGroupDescribe name several
  groups and answer each: the coordinator's own groups are served, the others refused in place.
  ListGroups lists the groups this broker coordinates (admin clients ask every broker).
- a transaction's requests (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, a transactional
  InitProducerId) at another broker than its transaction coordinator: NOT_COORDINATOR.
- Produce, Fetch, ListOffsets and OffsetForLeaderEpoch name partitions: those this broker does not lead are answered
  NOT_LEADER_OR_FOLLOWER in place, the rest served (a request naming none it leads is answered
  without a step of the store).
- the rest (Metadata, ApiVersions, topics, configs, FindCoordinator) any broker answers.

`split` decides; the Broker runs the served part and `merge` puts the refused entries back into
its answer, in the request's order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from grouplab.protocol.errors import ErrorCode
from grouplab.protocol import messages as m

# Requests for one group, named by `body.group_id`.
GROUP_APIS = frozenset({"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
                        "OffsetDelete", "TxnOffsetCommit", "ConsumerGroupHeartbeat"})
# Requests for several groups: api -> (request field of ids, response field of results, result of a refused id).
BATCHED_GROUP_APIS: dict[str, tuple[str, str, Callable[[str, int, str], Any]]] = {
    "DescribeGroups": ("groups", "groups", lambda g, code, msg: m.DescribedGroup(group_id=g, error_code=code)),
    "DeleteGroups": ("groups_names", "results", lambda g, code, msg: m.DeletableGroupResult(group_id=g, error_code=code)),
    "ConsumerGroupDescribe": ("group_ids", "groups", lambda g, code, msg: m.ConsumerGroupDescribedGroup(
        group_id=g, error_code=code, error_message=msg)),
}
TXN_APIS = frozenset({"AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"})
PARTITION_APIS = frozenset({"Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch"})

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


@dataclass(slots=True)
class Split:
    """A request as this broker serves it: `body` the part it serves (None: nothing of it), and
    `refused` what to put back into the answer (`merge`), or `answer` a whole refusal."""

    body: Any
    refused: list[Any]
    answer: Any = None


def refusal(api: str, body: Any, code: ErrorCode, message: str) -> Any:
    """The whole answer refusing `body` with `code`, shaped as Kafka answers it: per partition where
    the answer has no error of its own (OffsetCommit, TxnOffsetCommit), else at the top."""
    if api in ("OffsetCommit", "TxnOffsetCommit"):
        topics = [m.OffsetCommitResponseTopic(t.name, [m.OffsetCommitResponsePartition(p.partition_index, code)
                                                       for p in t.partitions]) for t in body.topics]
        return m.API[api].response(error_code=code, topics=topics, error_message=message)
    if api == "AddPartitionsToTxn":
        results = [m.AddPartitionsToTxnTopicResult(t.name, [m.AddPartitionsToTxnPartitionResult(p, code)
                                                            for p in t.partitions]) for t in body.topics]
        return m.AddPartitionsToTxnResponse(error_code=code, results=results, error_message=message)
    return m.API[api].response(error_code=code, error_message=message)


def split_groups(api: str, body: Any, refuse: Callable[[str], tuple[ErrorCode, str] | None]) -> Split:
    """A batched group request: the ids this broker serves, and a refused result for each other."""
    ids_field, _, refused_result = BATCHED_GROUP_APIS[api]
    served: list[str] = []
    refused: list[Any] = []
    for group_id in getattr(body, ids_field):
        why = refuse(group_id)
        if why is None:
            served.append(group_id)
        else:
            refused.append(refused_result(group_id, why[0], why[1]))
    return Split(replace(body, **{ids_field: served}) if served else None, refused)


def split_partitions(api: str, body: Any, leads: Callable[[str, int], bool]) -> Split:
    """Produce, Fetch or ListOffsets: the partitions this broker leads, and NOT_LEADER_OR_FOLLOWER
    for each other, as its answer's entry for that partition."""
    if api == "Produce":
        topics, refused = _split(body.topic_data, "name", "partition_data", lambda p: p.index, leads,
                                 lambda t, ps: m.ProduceTopicResponse(t, [m.ProducePartitionResponse(p.index, NOT_LEADER)
                                                                          for p in ps]))
        return Split(replace(body, topic_data=topics) if topics else None, refused)
    if api == "Fetch":
        topics, refused = _split(body.topics, "topic", "partitions", lambda p: p.partition, leads,
                                 lambda t, ps: m.FetchTopicResponse(t, [m.FetchPartitionResponse(p.partition, NOT_LEADER)
                                                                        for p in ps]))
        return Split(replace(body, topics=topics) if topics else None, refused)
    if api == "OffsetForLeaderEpoch":
        topics, refused = _split(body.topics, "topic", "partitions", lambda p: p.partition, leads,
                                 lambda t, ps: m.OffsetForLeaderTopicResult(t, [m.EpochEndOffset(p.partition, NOT_LEADER)
                                                                                for p in ps]))
        return Split(replace(body, topics=topics) if topics else None, refused)
    topics, refused = _split(body.topics, "name", "partitions", lambda p: p.partition_index, leads,
                             lambda t, ps: m.ListOffsetsTopicResponse(
                                 t, [m.ListOffsetsPartitionResponse(p.partition_index, NOT_LEADER) for p in ps]))
    return Split(replace(body, topics=topics) if topics else None, refused)


def _split(topics: list[Any], name: str, parts: str, index: Callable[[Any], int], leads: Callable[[str, int], bool],
           refused_topic: Callable[[str, list[Any]], Any]) -> tuple[list[Any], list[Any]]:
    served, refused = [], []
    for topic in topics:
        mine = [p for p in getattr(topic, parts) if leads(getattr(topic, name), index(p))]
        others = [p for p in getattr(topic, parts) if not leads(getattr(topic, name), index(p))]
        if mine:
            served.append(topic if not others else replace(topic, **{parts: mine}))
        if others:
            refused.append(refused_topic(getattr(topic, name), others))
    return served, refused


def merge(api: str, answer: Any, refused: list[Any]) -> Any:
    """`answer` (the served part's) with the refused entries added: groups or results for a batched
    group request, topics for Produce, Fetch and ListOffsets (a topic in both gets its refused
    partitions appended, partitions sorted)."""
    if not refused:
        return answer
    if api in BATCHED_GROUP_APIS:
        results = BATCHED_GROUP_APIS[api][1]
        return replace(answer, **{results: [*getattr(answer, results), *refused]})  # (in_request_order puts them back)
    field, name, parts, index = {
        "Produce": ("responses", "name", "partition_responses", lambda p: p.index),
        "Fetch": ("responses", "topic", "partitions", lambda p: p.partition_index),
        "ListOffsets": ("topics", "name", "partitions", lambda p: p.partition_index),
        "OffsetForLeaderEpoch": ("topics", "topic", "partitions", lambda p: p.partition),
    }[api]
    topics = {getattr(t, name): t for t in getattr(answer, field)}
    for topic in refused:
        mine = topics.get(getattr(topic, name))
        if mine is None:
            topics[getattr(topic, name)] = topic
        else:
            topics[getattr(topic, name)] = replace(mine, **{parts: sorted([*getattr(mine, parts), *getattr(topic, parts)],
                                                                         key=index)})
    return replace(answer, **{field: list(topics.values())})


def in_request_order(api: str, body: Any, answer: Any) -> Any:
    """A batched group request's answer with its results in the order the request named the
    groups, as Kafka answers (served and refused ones were gathered apart)."""
    ids_field, results, _ = BATCHED_GROUP_APIS[api]
    where = {g: i for i, g in reversed(list(enumerate(getattr(body, ids_field))))}
    return replace(answer, **{results: sorted(getattr(answer, results), key=lambda r: where.get(r.group_id, len(where)))})


def refused_answer(api: str, refused: list[Any]) -> Any:
    """The whole answer when nothing of the request was served."""
    return merge(api, m.API[api].response(), refused)
