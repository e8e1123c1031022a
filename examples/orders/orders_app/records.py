"""Where a record is, in the application's own terms (each client library has its own
TopicPartition; the processing core and the store use these)."""

from __future__ import annotations

from typing import NamedTuple


class Partition(NamedTuple):
    topic: str
    partition: int


class RecordRef(NamedTuple):
    topic: str
    partition: int
    offset: int

    @property
    def tp(self) -> Partition:
        return Partition(self.topic, self.partition)
