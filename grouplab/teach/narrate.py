"""A run told message by message: each replayed step (grouplab/replay.py) as who sent what, what
the coordinator decided, what it answered, and one sentence of why, in a catalogue's language.

The narrator reads three things a step carries: the input trace line (a request, a timer, the
simulator's crash or restart), the Broker's event-log lines for it (its decisions: a rebalance
started, a generation formed, a member removed, a commit refused) and its answers; and, after the
step, the group's state and generation read from the replayed Broker itself. Nothing is canned:
every sentence is filled from those, and every rule is named where the run shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grouplab.coordinator.broker import Broker
from grouplab.coordinator.trace import from_json, request_body
from grouplab.replay import Step
from grouplab.teach import narrate_consumer as consumer
from grouplab.teach.narrate_cluster import CLUSTER_EVENTS, ClusterStory
from grouplab.teach.catalog import Catalog
from grouplab.teach.notes import Notes
from grouplab.teach.reasons import say_reason
from grouplab.teach.notes import compact as _compact
from grouplab.protocol import events
from grouplab.protocol.consumer_protocol import decode_assignment
from grouplab.protocol.errors import ErrorCode, ProtocolError
from grouplab.protocol.messages import API
from grouplab.protocol.schema import decode
from grouplab.protocol.types import TopicPartition

COORDINATOR = "coordinator"

# Events that are part of the steady hum too: a step whose events are all of these (a commit, a
# transaction's bookkeeping) folds like a heartbeat unless it is asked for (`--all`).
ROUTINE_EVENTS = (events.OffsetsCommitted, events.TxnOffsetsStaged, events.TransactionStarted,
                  events.PartitionsAddedToTxn, events.TransactionCommitted, events.ProducerIdAssigned,
                  events.ProducerIdAllocated, events.DuplicateBatchAcked)

# Requests that, answered NONE and deciding nothing, are the steady hum of a group: folded into one
# line between the steps that matter unless asked for (`--all`).
ROUTINE_APIS = frozenset({"Heartbeat", "OffsetCommit", "OffsetFetch", "Fetch", "ListOffsets", "Produce", "Metadata",
                          "ApiVersions", "DescribeGroups", "ListGroups", "InitProducerId", "AddPartitionsToTxn",
                          "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn", "CreateTopics", "ConsumerGroupHeartbeat",
                          "ConsumerGroupDescribe"})


@dataclass
class Said:
    """One line of the story: a message from `sender` to `receiver`, or a decision of the
    coordinator (`receiver` is the group), with the sentence of why where there is one."""

    sender: str
    receiver: str
    text: str
    why: str | None = None
    kind: str = "message"  # "request", "response", "decision", "timer", "coordinator"; a cluster's "broker", "cluster"
    raw: dict[str, Any] | None = None  # the trace line, for a reader who wants the message itself


@dataclass
class Narrated:
    index: int  # the input's line number in the trace
    ts_ms: int
    lines: list[Said]
    routine: bool
    api: str | None  # the request's API, or None for a timer, crash or restart
    group: str | None = None
    state: str | None = None  # the group's state after the step
    generation: int | None = None  # and its generation
    changed: bool = False  # the state or generation differs from before the step
    members: dict[str, str] = field(default_factory=dict)  # member id -> name, after the step
    state_key: str = "state.after"  # the catalogue's line for state and generation (or group epoch)


@dataclass
class _Member:
    name: str
    session_ms: int = 0
    rebalance_ms: int = 0
    protocols: list[str] = field(default_factory=list)
    instance: str | None = None


class Narrator:
    """Feed it a run's steps in order (`narrate(step)`); it keeps who is who (member ids to client
    ids, each member's session timeout and protocols) and each group's last state."""

    def __init__(self, lang: str = "en") -> None:
        self.c = Catalog(lang)
        self.members: dict[str, _Member] = {}
        self.conn_client: dict[str, str] = {}
        self.last: dict[str, tuple[str, int]] = {}  # group -> (state, generation) after the last step
        self.initial_delay: dict[str, bool] = {}
        self.incarnations: dict[str, int] = {}  # client id -> member ids seen
        self.notes = Notes(self)  # what a step means beyond its messages (notes.py)
        self.cluster = ClusterStory(self)  # a cluster of brokers: moves, loads, who found the new coordinator
        self._broker: Broker | None = None  # the replayed Broker of the step being told
        self._line: dict[str, Any] = {}  # and its input line

    # ------------------------------------------------------------------ names

    def name(self, member_id: str | None) -> str:
        if not member_id:
            return self.c.t("nobody")
        m = self.members.get(member_id)
        return m.name if m is not None else member_id

    def session_ms(self, member_id: str) -> int:
        m = self.members.get(member_id)
        return m.session_ms if m is not None else 0

    def names(self, member_ids: list[str]) -> str:
        return ", ".join(self.name(m) for m in member_ids) or self.c.t("nobody")

    # ------------------------------------------------------------------ one step

    def narrate(self, step: Step) -> Narrated:
        line = step.line
        kind = line["kind"]
        lines: list[Said] = []
        api: str | None = None
        group_id: str | None = None
        subject: str | None = None  # the member the input is about
        body: Any = None
        self._broker = step.broker
        self._line = line
        if kind == "request":
            api = line["api"]
            body = request_body(api, line["body"])
            group_id = getattr(body, "group_id", None)
            sender = self._sender(line, body)
            self.conn_client[line["conn"]] = sender
            subject = getattr(body, "member_id", None) or None
            if api == "LeaveGroup" and body.members:
                subject = body.members[0].member_id
            at = (self.cluster.broker_name(int(line.get("node", 0))) if self.cluster.active(step.broker)
                  else COORDINATOR)  # in a cluster, the broker it reached
            lines.append(Said(sender, at, self._request_text(api, body), kind="request", raw=line))
        elif kind == "timer":
            key = line["key"]
            group_id = key[1] if len(key) > 1 and key[0] in ("join", "sync", "session", "pending", *consumer.TIMERS) else None
            subject = key[2] if key[0] in ("session", "pending", *consumer.TIMERS) and len(key) > 2 else None
            text = (consumer.timer_text(self, key, step.broker) if key[0] in consumer.TIMERS
                    else self.cluster.timer_text(key, step.broker) or self._timer_text(key, group_id))
            lines.append(Said(COORDINATOR, COORDINATOR, text, kind="timer", raw=line))
        elif kind == "broker":
            lines.append(self.cluster.input_line(line))
        elif kind == "crash":
            lines.append(Said(COORDINATOR, COORDINATOR, self.c.t("crash"), self.c.t("why.crash"), kind="coordinator"))
        else:
            lines.append(Said(COORDINATOR, COORDINATOR, self.c.t("restart"), self.c.t("why.restart"), kind="coordinator"))

        for written in step.written:  # member ids first: names for what follows
            if written["kind"] == "member_id":
                self.learn_member(written["member_id"], written["client_id"])
        if api == "JoinGroup" and body is not None and body.member_id:
            self._learn_join(body.member_id, line.get("client_id") or "", body)
        elif api == "JoinGroup" and body is not None and body.group_instance_id:  # a static member's first join
            given = next((w["member_id"] for w in step.written if w["kind"] == "member_id"), None)
            if given:
                self._learn_join(given, line.get("client_id") or "", body)

        if api == "ConsumerGroupHeartbeat" and body is not None and body.member_id and body.member_epoch == 0:
            self.learn_member(body.member_id, line.get("client_id") or "")  # an id the client made (KIP-1082)
        if kind == "request" and not subject:  # a new member: the id the Broker gave it in this step
            subject = next((w["member_id"] for w in step.written if w["kind"] == "member_id"), None)
        decided = self._decisions(step, subject, group_id, lines)
        if group_id is None:
            group_id = next((getattr(ev.payload, "group_id", None) for ev in step.events
                             if isinstance(ev.payload, events.GroupEvent)), None)

        answered_errors = []
        for written in step.written:
            if written["kind"] != "response":
                continue
            said = self._response(written, api, body, decided)
            if said is not None:
                if kind == "request" and lines[0].receiver != COORDINATOR:
                    said.sender = lines[0].receiver  # a cluster's broker answers
                elif group_id is not None and self.cluster.active(step.broker):  # a held answer, from its coordinator
                    said.sender = self.cluster.coordinator_name(step.broker, group_id)
                lines.append(said)
                if said.kind == "response-error":
                    answered_errors.append(said)
                    said.kind = "response"

        answered = any(w["kind"] == "response" for w in step.written)
        told_cluster = (self.cluster.after_request(step, api, body, lines[0].sender, answered)
                        if kind == "request" and api is not None else [])
        unanswered = any(s.kind == "cluster" and s.receiver == lines[0].sender for s in told_cluster)
        if api in ("JoinGroup", "SyncGroup") and not answered and not unanswered:
            lines[0].text += self.c.t(f"parked.{api}")  # answered later, when the phase ends
        if api == "JoinGroup" and body is not None and lines[0].why is None:
            lines[0].why = self.notes.reason_why(body.reason or "")
        lines += [Said(COORDINATOR, n.group or group_id or COORDINATOR, n.text, n.why, kind="decision")
                  for n in self.notes.after(step, api, body)]
        lines += told_cluster

        quiet = all(isinstance(ev.payload, ROUTINE_EVENTS) for ev in step.events)
        routine = (quiet and not answered_errors and not told_cluster and
                   ((kind == "request" and api in ROUTINE_APIS) or (kind == "timer" and len(lines) == 1)))
        narrated = Narrated(step.index, int(line["ts_ms"]), lines, routine, api, group_id)
        self._state_after(step.broker, narrated)
        return narrated

    def fault(self, line: dict[str, Any]) -> Narrated:
        """A fault the simulator injected (its `fault_injected` line), told as the world's doing."""
        fault, members = str(line.get("fault")), list(line.get("members") or [])
        key = f"fault.{fault}" if self.c.has(f"fault.{fault}") else "fault.other"
        who = ", ".join(members) or self.c.t("coordinator")
        fields = {"members": who, "fault": fault, "duration_s": round(int(line.get("duration_ms") or 0) / 1000, 3),
                  "topic": line.get("topic") or "", "api": line.get("api") or ""}
        if fault == "crash" and not line.get("duration_ms"):
            key = "fault.crash.forever"
        elif line.get("api") and self.c.has(f"fault.{fault}.api"):  # a [[faults]] rule on one API's messages
            key = f"fault.{fault}.api"
        why_key = f"why.fault.{fault}"
        self.notes.fault(fault, members, int(line["ts_ms"]))
        said = Said(self.c.t("world"), who, self.c.t(key, **fields),
                    self.c.t(why_key, **fields) if self.c.has(why_key) else None, kind="fault", raw=line)
        return Narrated(0, int(line["ts_ms"]), [said], False, None)

    # ------------------------------------------------------------------ inputs

    def _sender(self, line: dict[str, Any], body: Any) -> str:
        member_id = getattr(body, "member_id", None)
        if member_id and member_id in self.members:
            return self.members[member_id].name
        client = line.get("client_id") or line.get("conn") or "?"
        return str(client)

    def learn_member(self, member_id: str, client_id: str) -> _Member:
        """A member is named by its client id; a client's later member ids (it restarted, or was
        removed and joined again) get `·2`, `·3`, so two incarnations in one group stay apart."""
        m = self.members.get(member_id)
        if m is None:
            base = client_id or member_id
            n = self.incarnations[base] = self.incarnations.get(base, 0) + 1
            m = self.members[member_id] = _Member(base if n == 1 else f"{base}·{n}")
        return m

    def _learn_join(self, member_id: str, client_id: str, body: Any) -> None:
        m = self.learn_member(member_id, client_id)
        m.session_ms, m.rebalance_ms = body.session_timeout_ms, body.rebalance_timeout_ms
        m.protocols = [p.name for p in body.protocols]
        m.instance = body.group_instance_id

    def _request_text(self, api: str, body: Any) -> str:
        c = self.c
        if api == "JoinGroup":
            protocols = ", ".join(p.name for p in body.protocols)
            text = (c.t("req.JoinGroup.known", member=self.name(body.member_id), protocols=protocols)
                    if body.member_id else
                    c.t("req.JoinGroup.new", protocols=protocols, session_ms=body.session_timeout_ms))
            if body.group_instance_id:
                text += c.t("req.static", instance=body.group_instance_id)
            text += self.notes.join_text(body)
            if body.reason:
                text += c.t("req.reason", reason=say_reason(body.reason, c))
            return text
        if api == "SyncGroup":
            if body.assignments:
                parts = "; ".join(f"{self.name(a.member_id)} ← {self._partitions(a.assignment)}" for a in body.assignments)
                return c.t("req.SyncGroup.leader", generation=body.generation_id, assignment=parts)
            return c.t("req.SyncGroup.follower", generation=body.generation_id)
        if api == "Heartbeat":
            return c.t("req.Heartbeat", generation=body.generation_id)
        if api == "LeaveGroup":
            reasons = [m.reason for m in body.members if m.reason]
            return c.t("req.LeaveGroup", members=self.names([m.member_id for m in body.members])) + (
                c.t("req.reason", reason=say_reason(reasons[0], c)) if reasons else "")
        if api == "OffsetCommit":
            offsets = ", ".join(f"{t.name}-{p.partition_index}@{p.committed_offset}"
                                for t in body.topics for p in t.partitions)
            return c.t("req.OffsetCommit", generation=body.generation_id, offsets=offsets)
        if api == "DeleteTopics":
            return c.t("req.DeleteTopics", topics=", ".join(body.topic_names))
        if api == "FindCoordinator":
            return self.cluster.find_request(body)
        if api == "ConsumerGroupHeartbeat":
            return consumer.request_text(self, body, self._broker)
        return c.t("req.generic", api=api)

    def _timer_text(self, key: list[Any], group_id: str | None) -> str:
        c = self.c
        if key[0] == "session" and len(key) > 2:
            m = self.members.get(key[2])
            return c.t("timer.session", member=self.name(key[2]), session_ms=m.session_ms if m else "?")
        if key[0] == "join":
            return c.t("timer.join", group=group_id)
        if key[0] == "sync" and len(key) > 2:
            return c.t("timer.sync", generation=key[2])
        if key[0] == "pending" and len(key) > 2:
            return c.t("timer.pending", member=self.name(key[2]))
        if key[0] == "txn" and len(key) > 1:
            return c.t("timer.txn", tid=key[1])
        return c.t("timer.other", key=key)

    # ------------------------------------------------------------------ decisions

    def _decisions(self, step: Step, subject: str | None, group_id: str | None, lines: list[Said]) -> set[str]:
        """The step's event-log lines that are decisions, as sentences; returns what was explained
        (so an answer does not say the same why again)."""
        c = self.c
        explained: set[str] = set()
        subject_name = self.name(subject) if subject else lines[0].sender
        for ev in step.events:
            p = ev.payload
            said: Said | None = None
            if isinstance(p, events.RebalanceStarted):
                cause = p.cause.value
                m = self.members.get(subject or "")
                said = Said(COORDINATOR, p.group_id, c.t(f"dec.rebalance.{cause}", subject=subject_name),
                            c.t(f"why.rebalance.{cause}", subject=subject_name,
                                session_ms=m.session_ms if m else "?", rebalance_ms=m.rebalance_ms if m else "?"),
                            kind="decision")
                broker = step.broker
                if broker is not None and p.group_id in broker.groups and broker.groups[p.group_id].initial_delay_active:
                    said.why = (said.why or "") + c.t("why.join") + c.t(
                        "why.initial_delay", delay_ms=broker.config.group_initial_rebalance_delay_ms)
                    self.initial_delay[p.group_id] = True
                explained.add("rebalance")
            elif isinstance(p, events.GenerationCompleted):
                if step.line["kind"] == "timer" and self.initial_delay.pop(p.group_id, False):
                    why = c.t("why.generation_completed.initial_delay")
                elif step.line["kind"] == "timer":
                    why = c.t("why.generation_completed.deadline")
                else:
                    why = c.t("why.generation_completed.all_joined")
                self.initial_delay.pop(p.group_id, None)
                vote = self._vote(p.members, p.protocol_name)
                if vote:
                    why += c.t("why.join") + vote
                said = Said(COORDINATOR, p.group_id, c.t(
                    "dec.generation_completed", generation=p.generation_id, leader=self.name(p.leader),
                    protocol=p.protocol_name or "—", members=self.names(p.members)), why, kind="decision")
            elif isinstance(p, events.GroupStable):
                parts = "; ".join(f"{self.name(m)} ← {self.pairs(a)}" for m, a in p.assignments.items())
                said = Said(COORDINATOR, p.group_id, c.t("dec.group_stable", generation=p.generation_id,
                                                         assignment=parts), c.t("why.group_stable"), kind="decision")
            elif isinstance(p, events.MemberRemoved):
                m = self.members.get(p.member_id)
                said = Said(COORDINATOR, p.group_id, c.t("dec.member_removed", member=self.name(p.member_id)),
                            c.t(f"why.removed.{p.reason.value}", session_ms=m.session_ms if m else "?",
                                rebalance_ms=m.rebalance_ms if m else "?"), kind="decision")
            elif isinstance(p, events.StaticMemberReplaced):
                self.learn_member(p.member_id, self.name(p.old_member_id))
                said = Said(COORDINATOR, p.group_id, c.t("dec.static_member_replaced", instance=p.group_instance_id,
                                                         member=self.name(p.member_id), old=self.name(p.old_member_id)),
                            c.t("why.static_member_replaced"), kind="decision")
            elif isinstance(p, events.JoinRejected):
                said = Said(COORDINATOR, p.group_id, c.t("dec.join_rejected", member=self.name(p.member_id),
                                                         error=p.error), self.error_why("JoinGroup", p.error, {}),
                            kind="decision")
                explained.add(p.error)
            elif isinstance(p, events.PendingMemberExpired):
                said = Said(COORDINATOR, p.group_id, c.t("dec.pending_member_expired", member=self.name(p.member_id)),
                            c.t("why.pending_member_expired"), kind="decision")
            elif isinstance(p, events.OffsetCommitRejected):
                said = Said(COORDINATOR, p.group_id, c.t(
                    "dec.commit_rejected", member=self.name(p.member_id), partitions=self.pairs(p.partitions),
                    error=p.error), self.error_why("OffsetCommit", p.error, {
                        "request_generation": p.request_generation_id, "generation": p.generation_id}),
                    kind="decision")
                explained.add(p.error)
            elif isinstance(p, events.GroupLoaded):
                said = Said(COORDINATOR, p.group_id, c.t("dec.group_loaded", generation=p.generation_id,
                                                         members=self.names(p.members)), kind="decision")
            elif isinstance(p, events.TopicDeleted):
                said = Said(COORDINATOR, COORDINATOR, c.t("dec.topic_deleted", topic=p.topic, n=p.partition_count),
                            c.t("why.topic_deleted"), kind="decision")
            elif isinstance(p, events.TopicOffsetsDeleted):
                gone = sorted({(t, n) for t, n in [*p.partitions, *p.staged_partitions]})
                said = Said(COORDINATOR, p.group_id, c.t("dec.topic_offsets_deleted", group=p.group_id,
                                                         partitions=self.pairs(gone)),
                            c.t("why.topic_offsets_deleted"), kind="decision")
            elif isinstance(p, (events.TransactionCommitted, events.TransactionAborted)):
                key = "dec.transaction_committed" if isinstance(p, events.TransactionCommitted) else "dec.transaction_aborted"
                said = Said(COORDINATOR, COORDINATOR, c.t(key, tid=p.transactional_id, reason=say_reason(p.reason, c),
                                                          partitions=self.pairs(p.partitions)), kind="decision")
            elif isinstance(p, CLUSTER_EVENTS):
                said = self.cluster.decision(p, ev.ts_ms)
            elif isinstance(p, events.ConsumerGroupEvent):
                said = consumer.decision(self, p, step.broker)
                if isinstance(p, events.ConsumerHeartbeatRejected):
                    explained.add(p.error)
            if said is not None:
                lines.append(said)
        return explained

    def _vote(self, members: list[str], chosen: str | None) -> str:
        lists = [self.members[m].protocols for m in members if m in self.members and self.members[m].protocols]
        if chosen is None or len(lists) < 2 or all(lst == lists[0] for lst in lists):
            return ""
        tally = self.notes.tally({self.name(m): self.members[m].protocols for m in members if m in self.members})
        return self.c.t("why.protocol_vote", protocol=chosen) + self.c.t("why.join") + tally

    # ------------------------------------------------------------------ answers

    def _response(self, written: dict[str, Any], api: str | None, request: Any, explained: set[str]) -> Said | None:
        c = self.c
        api = written.get("api") or api or "?"
        receiver = self.conn_client.get(written["conn"]) or self._receiver(written, request)
        if written["conn"] == "internal":
            return None
        spec = API.get(api)
        try:
            body = decode(spec.response, from_json(written["body"])) if spec is not None else None
        except ProtocolError:
            body = None
        code = getattr(body, "error_code", 0) or 0
        if code:
            error = ErrorCode.from_code(code).name
            why = None if error in explained else (
                self.cluster.error_why(error, getattr(request, "group_id", None), int(self._line.get("node", 0)),
                                       int(self._line["ts_ms"]), self._broker)
                or self.error_why(api, error, {"request_generation": getattr(request, "generation_id", "?")}))
            said = Said(COORDINATOR, receiver, c.t("resp.error", api=api, error=error), why, kind="response-error",
                        raw=written)
            return said
        if api == "JoinGroup" and body is not None:
            if body.leader == body.member_id and body.members:
                members = "; ".join(f"{self.name(m.member_id)} ({self._subscription(m.metadata)})" for m in body.members)
                text = c.t("resp.JoinGroup.leader", generation=body.generation_id, protocol=body.protocol_name,
                           members=members)
                why = c.t("why.JoinGroup.leader")
            elif body.leader == body.member_id and body.skip_assignment:
                text, why = c.t("resp.JoinGroup.skip", generation=body.generation_id), c.t("why.JoinGroup.skip")
            else:
                text = c.t("resp.JoinGroup.follower", generation=body.generation_id, protocol=body.protocol_name,
                           leader=self.name(body.leader))
                why = None
            return Said(COORDINATOR, receiver, text, why, kind="response", raw=written)
        if api == "SyncGroup" and body is not None:
            return Said(COORDINATOR, receiver, c.t("resp.SyncGroup", partitions=self._partitions(body.assignment)),
                        kind="response", raw=written)
        if api == "ConsumerGroupHeartbeat" and body is not None:
            return Said(COORDINATOR, receiver, consumer.response_text(self, body), kind="response", raw=written)
        if api == "FindCoordinator" and body is not None:
            return Said(COORDINATOR, receiver, self.cluster.find_response(body), kind="response", raw=written)
        if api == "DeleteTopics" and body is not None:  # one error per name: a refused one is told as such
            results = ", ".join(f"{r.name} {ErrorCode.from_code(r.error_code).name}" for r in body.responses)
            return Said(COORDINATOR, receiver, c.t("resp.DeleteTopics", results=results), kind="response", raw=written)
        return Said(COORDINATOR, receiver, c.t("resp.ok", api=api), kind="response", raw=written)

    def _receiver(self, written: dict[str, Any], request: Any) -> str:
        member_id = getattr(request, "member_id", None)
        if member_id and member_id in self.members:
            return self.members[member_id].name
        body = written.get("body") or {}
        if isinstance(body, dict) and body.get("member_id") in self.members:
            return self.members[body["member_id"]].name
        return str(written.get("conn", "?")).split("#")[0]

    def error_why(self, api: str, error: str, fields: dict[str, Any]) -> str | None:
        for key in (f"why.{api}.{error}", f"why.error.{error}"):
            if self.c.has(key):
                return self.c.t(key, **fields)
        return None

    # ------------------------------------------------------------------ values

    def _partitions(self, assignment: bytes) -> str:
        if not assignment:
            return self.c.t("none")
        try:
            parts = decode_assignment(assignment).partitions
        except (ProtocolError, ValueError):
            return self.c.t("opaque_bytes", n=len(assignment))
        return _compact(parts) or self.c.t("none")

    def _subscription(self, metadata: bytes) -> str:
        from grouplab.protocol.consumer_protocol import decode_subscription

        try:
            sub = decode_subscription(metadata)
        except (ProtocolError, ValueError):
            return self.c.t("opaque_bytes", n=len(metadata))
        owned = _compact(sub.owned_partitions)
        return ", ".join(sub.topics) + (self.c.t("owned", partitions=owned) if owned else "")

    def pairs(self, value: Any) -> str:
        if isinstance(value, dict):  # {"bytes": n} for an undecodable assignment
            return self.c.t("opaque_bytes", n=next(iter(value.values()), 0))
        return _compact([TopicPartition(t, p) for t, p in value]) or self.c.t("none")

    def compact(self, partitions: list[TopicPartition]) -> str:
        return _compact(partitions)

    def _state_after(self, broker: Broker | None, n: Narrated) -> None:
        if broker is None or n.group is None:
            return
        consumer_group = broker.consumer_groups.get(n.group)
        if consumer_group is not None:  # KIP-848: the group epoch stands where a generation would
            n.state, n.generation, n.state_key = consumer_group.state.value, consumer_group.group_epoch, "state.after.cg"
            n.changed = self.last.get(n.group) != (n.state, n.generation)
            self.last[n.group] = (n.state, n.generation)
            n.members = {m: self.name(m) for m in consumer_group.members}
            return
        group = broker.groups.get(n.group)
        if group is None:
            return
        n.state, n.generation = group.state.value, group.generation_id
        n.changed = self.last.get(n.group) != (n.state, n.generation)
        self.last[n.group] = (n.state, n.generation)
        n.members = {m: self.name(m) for m in group.members}
