"""`grouplab delete --group G --topic T[:P,P...]`: delete some committed offsets of one group, like
`kafka-consumer-groups --delete-offsets --group G --topic T[:P,P...]`, with OffsetDelete
(docs/protocol.md §3.26). A topic without partitions means each partition it has (from Metadata,
as kafka-consumer-groups asks for the topic's description); a topic that does not exist is
reported, not sent. The command's body lives here, not in cli.py (docs/design.md: one command per
module as cli.py is split).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grouplab.admin import AdminClient, AdminError
from grouplab.protocol.errors import ErrorCode
from grouplab.protocol.types import TopicPartition
from grouplab.teach.catalog import Catalog

# What each answer means to the person who asked (kafka-consumer-groups names only the error); the
# catalogue says each as `delete.offsets.meaning.<ERROR>` (English the same as here).
MEANING = {
    ErrorCode.GROUP_ID_NOT_FOUND: "does not exist (GROUP_ID_NOT_FOUND)",
    ErrorCode.NON_EMPTY_GROUP: "has members and is not a consumer group; stop them first (NON_EMPTY_GROUP)",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "the group's members consume it; stop them or change their "
                                         "subscription first (GROUP_SUBSCRIBED_TO_TOPIC)",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "no such topic or partition (UNKNOWN_TOPIC_OR_PARTITION)",
}


class TopicSpecError(ValueError):
    """A --topic value that is neither TOPIC nor TOPIC:P,P,..."""


def parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """`t` -> ("t", None): every partition; `t:0,2` -> ("t", [0, 2])."""
    name, colon, parts = spec.partition(":")
    if not name:
        raise TopicSpecError(f"--topic {spec!r}: expected TOPIC or TOPIC:PARTITION,PARTITION,...")
    if not colon:
        return name, None
    try:
        partitions = [int(p) for p in parts.split(",")]
    except ValueError:
        raise TopicSpecError(f"--topic {spec!r}: partitions are numbers separated by commas, e.g. {name}:0,1") from None
    if any(p < 0 for p in partitions):
        raise TopicSpecError(f"--topic {spec!r}: a partition number is 0 or more")
    return name, partitions


@dataclass
class Outcome:
    deleted: list[TopicPartition] = field(default_factory=list)  # answered 0: no committed offset left
    refused: dict[TopicPartition, int] = field(default_factory=dict)  # partition -> error code
    missing_topics: list[str] = field(default_factory=list)  # named without partitions, and not there

    def problems(self, group: str, c: Catalog | None = None) -> list[str]:
        c = c or Catalog()

        def meaning(code: int) -> str:
            known = ErrorCode.from_code(code)
            return c.t(f"delete.offsets.meaning.{known.name}") if known in MEANING else str(AdminError(code, None))

        lines = [c.t("delete.offsets.missing_topic", topic=repr(t), meaning=meaning(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                 for t in self.missing_topics]
        by_code: dict[int, list[TopicPartition]] = {}
        for tp, code in self.refused.items():
            by_code.setdefault(code, []).append(tp)
        for code, tps in by_code.items():
            lines.append(f"{', '.join(f'{tp.topic}-{tp.partition}' for tp in tps)}: {meaning(code)}")
        return lines


async def delete_offsets(admin: AdminClient, group: str, specs: list[str]) -> Outcome:
    """One OffsetDelete for `group` of the partitions `specs` name. Raises TopicSpecError for a bad
    spec (before anything is sent) and AdminError when the whole request is refused."""
    parsed = [parse_topic(spec) for spec in specs]
    outcome = Outcome()
    sizes = await admin.topics() if any(parts is None for _, parts in parsed) else {}
    partitions: list[TopicPartition] = []
    for name, parts in parsed:
        if parts is None:
            if name not in sizes:
                outcome.missing_topics.append(name)
                continue
            parts = list(range(sizes[name]))
        partitions += [TopicPartition(name, p) for p in parts]
    partitions = list(dict.fromkeys(partitions))
    if not partitions:
        return outcome
    for tp, code in (await admin.delete_offsets(group, partitions)).items():
        if code:
            outcome.refused[tp] = code
        else:
            outcome.deleted.append(tp)
    return outcome
