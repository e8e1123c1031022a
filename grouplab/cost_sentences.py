"""The honest costs (grouplab/costs.py) in sentences, in any catalogue's language: what one stop
cost (`describe_stall`) and how a run's partition time split (`describe_partition_time`). Shown by
`grouplab run` (and `ui`) as the costs become known and at the end, and by the simulator's
timeline. Kept apart from the fold so that the fold stays arithmetic; the words are the
catalogue's `cost.*` texts (grouplab/teach/catalog/<lang>.toml), English byte for byte as before.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from grouplab.costs import PartitionTime, Stall, StallReport
from grouplab.teach.catalog import Catalog
from grouplab.teach.reasons import say_reason

# What ended a stall's assigned-but-not-consumed time (Segment.ended_by) -> its catalogue phrase;
# the rest (lost, revoked, closed, session_timeout, a consumer group's rebalance_timeout) take
# fields and are said in `_until`.
_UNTIL = {"rebalance_timeout": "cost.until.rebalance_timeout", "sync_timeout": "cost.until.sync_timeout",
          "left": "cost.until.left", "fenced": "cost.until.fenced", "reassigned": "cost.until.reassigned",
          "assigned": "cost.until.assigned", "resumed": "cost.until.resumed", "stopped": "cost.until.stopped",
          "deleted": "cost.until.deleted"}


def seconds(ms: int, origin_ms: int = 0) -> str:
    """`12.0`: a time in seconds since `origin_ms`, the number a sentence puts before its unit."""
    return f"{(ms - origin_ms) / 1000:.1f}"


def verb(stall: Stall, c: Catalog) -> str:
    """What happened, for sentences: `crashed`, `hung`, `crashed (processed)`, `exited (FENCED_INSTANCE_ID)`."""
    key = f"cost.verb.{stall.fault}"
    said = c.t(key) if c.has(key) else stall.fault
    if stall.detail and stall.fault == "process_crashed":
        point = f"cost.point.{stall.detail}"
        return c.t("cost.verb.detail", verb=said,
                   detail=c.t(point) if c.has(point) else stall.detail.replace("_", " "))
    if stall.detail and stall.fault == "process_exited":
        return c.t("cost.verb.detail", verb=said, detail=stall.detail)
    return said


def _until(stall: Stall, session_timeout_ms: int | None, c: Catalog) -> str:
    by = stall.ended_by
    if by == "session_timeout":
        name = "group.consumer.session.timeout.ms" if stall.consumer_protocol else "session.timeout.ms"
        setting = c.t("cost.until.setting", name=name, ms=session_timeout_ms) if session_timeout_ms else ""
        return c.t("cost.until.session_timeout", setting=setting)
    if by == "rebalance_timeout" and stall.consumer_protocol:
        return c.t("cost.until.rebalance_timeout.cg")
    if by in ("lost", "revoked", "closed"):
        why = c.t("cost.until.why", detail=say_reason(stall.ended_detail, c)) if stall.ended_detail else ""
        return c.t("cost.until.lost" if by == "lost" else "cost.until.revoked", why=why)
    return c.t(_UNTIL.get(by or "", "cost.until.end_of_log"))


def describe_stall(report: StallReport, origin_ms: int = 0, session_timeout_ms: int | None = None,
                   lang: str = "en") -> str:
    """`m-3 crashed at 12.0 s; its 4 partitions were assigned but not consumed for 10.0 s until the
    session timeout (session.timeout.ms=10000) removed it; the rebalance then took 30 ms`: the cost
    of the fault, where a rebalance's own duration alone would say 30 ms."""
    c = Catalog(lang)
    s = report.stall
    n = len(s.partitions)
    span = s.span_ms if s.span_ms is not None else report.ts_ms - s.since_ms
    text = c.t("cost.stall.one" if n == 1 else "cost.stall.many", client=s.client_id, verb=verb(s, c),
               at=seconds(s.since_ms, origin_ms), count=n, span=f"{span / 1000:.1f}",
               until=_until(s, session_timeout_ms, c))
    if n > 1 and report.assigned_not_consumed_ms != n * span:
        text += c.t("cost.in_all", total=f"{report.assigned_not_consumed_ms / 1000:,.1f}")
    r = report.rebalance
    if r is not None and s.removed_ms is not None:
        if r.started_ms is not None and r.started_ms < s.removed_ms:
            text += c.t("cost.rebalance.under_way", since=seconds(r.started_ms, origin_ms),
                        ms=f"{r.ended_ms - s.removed_ms:,}")
        else:
            text += c.t("cost.rebalance.then", ms=f"{r.ended_ms - s.removed_ms:,}")
    return text


def describe_partition_time(t: PartitionTime, stalls: Iterable[Stall] = (), lang: str = "en") -> str:
    """`partition time (24 partitions, 15,130.7 partition-s): 80.7% consumed · 47.2 partition-s
    assigned but not consumed (charged to 3 stops: crash ×3) · 2,874.3 partition-s unowned`."""
    c = Catalog(lang)
    if not t.total_ms:
        return c.t("cost.time.none")
    charged = [s for s in stalls if s.partitions]
    kinds = Counter(c.t(f"cost.fault.{s.fault}") if c.has(f"cost.fault.{s.fault}") else s.fault.replace("_", " ")
                    for s in charged)
    which = ", ".join(f"{k} ×{n}" for k, n in sorted(kinds.items()))
    return c.t("cost.time", partitions=t.partitions, total=f"{t.total_ms / 1000:,.1f}",
               consumed=f"{t.consumed_ms / t.total_ms:.1%}",
               not_consumed=f"{t.assigned_not_consumed_ms / 1000:,.1f}",
               charged=(c.t("cost.time.charged.one" if len(charged) == 1 else "cost.time.charged.many",
                            count=len(charged), which=which) if charged else ""),
               unowned=f"{t.unowned_ms / 1000:,.1f}")
