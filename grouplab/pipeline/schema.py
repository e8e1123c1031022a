"""The explicit Spark schema of grouplab's event log (docs/events.md, docs/pipeline.md).

One struct for every event: the union of the fields the pipeline reads. A field an event does not
have is null; a field the pipeline does not read is not in the schema and is ignored (the event log
may grow, readers must not break). The JSON reader keeps what parses: a field whose value has
another type (e.g. `partitions`, a count on `partition_logs_recovered`) is null on that line.
A line is *malformed* when it is not a JSON object with an integer `ts_ms` and string `event` and
`node`: it is counted and kept aside, never fatal.
"""

from __future__ import annotations

from pyspark.sql import types as T

# [[topic, partition], ...]: JSON arrays of mixed type, read as strings; the pipeline casts the
# partition back to an integer where it explodes them.
PAIRS = T.ArrayType(T.ArrayType(T.StringType()))
STRINGS = T.ArrayType(T.StringType())
LONGS = T.ArrayType(T.LongType())

_FIELDS: list[tuple[str, T.DataType]] = [
    # common (docs/events.md §2)
    ("ts_ms", T.LongType()),
    ("event", T.StringType()),
    ("node", T.StringType()),
    ("group_id", T.StringType()),
    ("generation_id", T.LongType()),
    ("member_id", T.StringType()),
    ("state", T.StringType()),
    ("partitions", PAIRS),
    # coordinator: group and offsets (§4.1, §4.1a)
    ("trigger", T.StringType()),
    ("cause", T.StringType()),
    ("members", STRINGS),
    ("protocol_name", T.StringType()),
    ("leader", T.StringType()),
    ("assignments", T.MapType(T.StringType(), PAIRS)),
    ("clients", T.MapType(T.StringType(), T.StringType())),
    ("reason", T.StringType()),
    ("group_instance_id", T.StringType()),
    ("client_id", T.StringType()),
    ("old_member_id", T.StringType()),
    ("protocols", STRINGS),
    ("offsets", LONGS),
    ("producer_id", T.LongType()),
    # coordinator: server (§4.3)
    ("data_dir", T.StringType()),
    # members (§4.4, §4.5b)
    ("owned", PAIRS),
    ("error", T.StringType()),
    ("records", T.LongType()),
    ("first_offsets", LONGS),
    ("last_offsets", LONGS),
    # simulator and run accounts (§4.6, §4.7)
    ("seed", T.LongType()),
    ("member", T.StringType()),
    ("incarnation", T.LongType()),
    ("fault", T.StringType()),
    ("duration_ms", T.LongType()),
    ("point", T.StringType()),
    ("mode", T.StringType()),
    ("topic", T.StringType()),
    ("partition", T.LongType()),
    ("produced", T.LongType()),
    ("processed", T.LongType()),
    ("lost", T.LongType()),
    ("duplicated", T.LongType()),
    ("committed_offset", T.LongType()),
    ("isolation", T.StringType()),
    ("output_counts", LONGS),
]

EVENT_SCHEMA = T.StructType([T.StructField(name, dtype, nullable=True) for name, dtype in _FIELDS])
REQUIRED = ("ts_ms", "event", "node")

# Nodes that are not consumers: their files are not members' logs.
NON_MEMBER_NODES = ("coordinator", "simulator", "run", "proxy")
