"""The orders Kafka's Java assignor walks things in, so grouplab can walk them the same way.

Kafka's sticky assignors sort with `String.compareTo` (UTF-16 code units) and, in a few places,
simply iterate a `java.util.HashMap` or `HashSet`. Where that iteration decides the result (which
members keep the larger quota, which of two equal-generation claims is met first, which moved
partition a swap takes back), grouplab reproduces Java's order instead of picking its own, so the
result is the one a Kafka leader would compute. docs/assignors.md says where this matters.

What is not reproduced: entries that share a hash bucket keep insertion order in Java, which for
the leader is the JoinGroup member order; grouplab breaks those (rare) ties by `compareTo` order,
so the result does not depend on the order of the caller's dict. Buckets of 8+ colliding entries
(Java turns them into trees) are treated like short ones.
"""

from __future__ import annotations

import sys
from array import array
from typing import Hashable, Iterable, Mapping, TypeVar

K = TypeVar("K", bound=Hashable)

_MASK = 0xFFFFFFFF


def java_key(text: str) -> bytes:
    """A sort key equal to `String.compareTo`: UTF-16 code units, compared as unsigned numbers."""
    return text.encode("utf-16-be", "surrogatepass")


def java_sorted(texts: Iterable[str]) -> list[str]:
    """`texts` sorted by `String.compareTo`. ASCII strings (member ids and topic names, nearly
    always) compare the same by code point, so they are sorted as they are, without a key: the
    sticky assignors sort a thousand member ids more than once per assignment."""
    texts = list(texts)
    if all(map(str.isascii, texts)):
        texts.sort()
    else:
        texts.sort(key=java_key)
    return texts


def string_hash(text: str) -> int:
    """`String.hashCode()` as an unsigned 32-bit number."""
    units = array("H", text.encode(_UTF16_NATIVE, "surrogatepass"))
    h = 0
    for u in units:
        h = 31 * h + u  # a short Python int; reduced once at the end
    return h & _MASK


_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def partition_hash(topic_hash: int, partition: int) -> int:
    """`TopicPartition.hashCode()` (31 * (31 + partition) + topic.hashCode()), unsigned."""
    return (31 * (31 + partition) + topic_hash) & _MASK


def _spread(h: int) -> int:
    return h ^ (h >> 16)


def table_size(entries: int) -> int:
    """The bucket count of a default HashMap after `entries` puts: 16, doubled past 3/4 full."""
    size = 16
    while entries > size * 3 // 4:
        size *= 2
    return size


def hashmap_order(keys: Iterable[str]) -> list[str]:
    """String keys in the order a default `HashMap` filled with them iterates."""
    keys = list(keys)
    mask = table_size(len(keys)) - 1
    return sorted(keys, key=lambda k: (_spread(string_hash(k)) & mask, java_key(k)))


def hashset_first(entries: Mapping[K, tuple[int, int]], max_size: int) -> K:
    """The element `HashSet.iterator().next()` returns. `entries` maps each element to (its
    hashCode, its insertion sequence); `max_size` is the most the set ever held (a HashSet never
    shrinks its table)."""
    mask = table_size(max_size) - 1
    return min(entries, key=lambda e: (_spread(entries[e][0]) & mask, entries[e][1]))
