"""consumer/assignors/java_order.py against what Java computes: the sticky assignors reproduce
Kafka's results only if these orders are Java's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from grouplab.consumer.assignors.java_order import (
    java_sorted,
    hashmap_order,
    hashset_first,
    java_key,
    partition_hash,
    string_hash,
    table_size,
)


def signed(h: int) -> int:
    return h - 2**32 if h >= 2**31 else h


def test_string_hash_is_javas() -> None:
    assert signed(string_hash("")) == 0
    assert signed(string_hash("a")) == 97
    assert signed(string_hash("hello")) == 99162322
    assert string_hash("Aa") == string_hash("BB") == 2112  # Java's classic collision
    assert signed(string_hash("polygenelubricants")) == -2**31  # Integer.MIN_VALUE
    assert signed(string_hash("\U0001F600")) == 0xD83D * 31 + 0xDE00  # hashed by UTF-16 code units


def test_compare_to_order_is_by_utf16_code_units() -> None:
    assert java_key("Z") < java_key("a") < java_key("b") < java_key("ba")
    # Python orders by code point: U+FFFF < U+1F600. Java compares the surrogate 0xD83D with 0xFFFF.
    assert "\uffff" < "\U0001F600"
    assert java_key("\U0001F600") < java_key("\uffff")


def test_hashmap_table_grows_past_three_quarters() -> None:
    assert [table_size(n) for n in (0, 12, 13, 24, 25, 2000)] == [16, 16, 32, 32, 64, 4096]


def test_hashmap_order() -> None:
    # "consumerN".hashCode() differ by one; spread and masked to 16 buckets they land in 12, 11,
    # 10, 9 -- so Java iterates consumer4 first (Kafka's testMaxQuotaConsumerMoreThan... relies on it).
    assert hashmap_order(["consumer1", "consumer2", "consumer3", "consumer4"]) == [
        "consumer4", "consumer3", "consumer2", "consumer1"]
    assert hashmap_order(["c", "a", "b"]) == ["a", "b", "c"]
    # Same bucket: Java keeps insertion order; grouplab breaks the tie by compareTo (documented).
    assert hashmap_order(["BB", "Aa"]) == ["Aa", "BB"]


def test_topic_partition_hash_and_hashset_first() -> None:
    h = string_hash("t")
    assert partition_hash(h, 0) == (31 * 31 + h) & 0xFFFFFFFF
    entries = {("t", p): (partition_hash(h, p), seq) for seq, p in enumerate([5, 1, 3])}
    # The bucket of each hash decides, not insertion order or partition number.
    first = hashset_first(entries, max_size=3)
    buckets = {e: (v[0] ^ (v[0] >> 16)) & 15 for e, v in entries.items()}
    assert buckets[first] == min(buckets.values())


@given(st.lists(st.one_of(st.text(max_size=6), st.text(alphabet="ab\ud7ff\ue000\uffff\U00010000", max_size=4))))
def test_java_sorted_is_compare_to_order(texts: list[str]) -> None:
    """ASCII sorted as it is, anything else by UTF-16 code units: String.compareTo either way
    (U+E000..U+FFFF sort after a supplementary character in Java, before it by code point)."""
    assert java_sorted(texts) == sorted(texts, key=java_key)
    assert java_sorted(["\ue000", "\U00010000"]) == ["\U00010000", "\ue000"]
