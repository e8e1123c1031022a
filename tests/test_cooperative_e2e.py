"""Incremental cooperative rebalancing (KIP-429) over real sockets, checked from the rebalance
listeners' own callbacks: a partition is never owned by two members at once, and a member that
keeps a partition is never told to revoke it."""

from __future__ import annotations

import pytest

from grouplab.consumer.client import GroupMemberClient
from conftest import EventRecorder
from grouplab.protocol.types import TopicPartition
from test_e2e import ALL_PARTITIONS, Env, assert_partitioned, env  # noqa: F401  (env is a fixture)

pytestmark = pytest.mark.e2e


class Ownership:
    """One ownership ledger shared by every member's listener. All callbacks run on one event loop,
    so the ledger sees them in the order they happened."""

    def __init__(self) -> None:
        self.owner: dict[TopicPartition, str] = {}
        self.violations: list[str] = []
        self.revoked: dict[str, list[TopicPartition]] = {}
        self.assigned: dict[str, list[TopicPartition]] = {}

    def listener(self, name: str) -> "MemberListener":
        return MemberListener(self, name)


class MemberListener:
    def __init__(self, ledger: Ownership, name: str) -> None:
        self.ledger, self.name = ledger, name

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            holder = self.ledger.owner.get(tp)
            if holder is not None and holder != self.name:
                self.ledger.violations.append(f"{tp} assigned to {self.name} while {holder} owns it")
            self.ledger.owner[tp] = self.name
        self.ledger.assigned.setdefault(self.name, []).extend(partitions)

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self._release(partitions)
        self.ledger.revoked.setdefault(self.name, []).extend(partitions)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self._release(partitions)

    def _release(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            if self.ledger.owner.get(tp) == self.name:
                del self.ledger.owner[tp]


async def start(env: Env, ledger: Ownership, names: list[str], assignors: tuple[str, ...]) -> list[GroupMemberClient]:
    return [await env.consumer(n, assignors=assignors, listener=ledger.listener(n)) for n in names]


async def all_owned(env: Env, clients: list[GroupMemberClient], after_generation: int = -1) -> int:
    """Wait for a Stable generation in which the members own every partition (the follow-up
    rebalance of a cooperative round included); returns the generation."""
    await env.recorder.wait_until(
        lambda: env.stable(clients) and env.group().generation_id > after_generation
        and sorted(tp for c in clients for tp in c.assignment) == sorted(ALL_PARTITIONS),
        what="every partition owned in a stable generation")
    return env.group().generation_id


async def test_a_member_joins_a_stable_cooperative_group(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    ledger = Ownership()
    clients = await start(env, ledger, ["c0", "c1"], ("cooperative-sticky",))
    before = await all_owned(env, clients)
    kept_before = {c.config.client_id: set(c.assignment) for c in clients}
    ledger.revoked.clear()

    clients += await start(env, ledger, ["c2"], ("cooperative-sticky",))
    after = await all_owned(env, clients, before)

    assert ledger.violations == []
    assert_partitioned(clients, ALL_PARTITIONS)
    assert sorted(len(c.assignment) for c in clients) == [2, 2, 2]
    assert after >= before + 2, "a cooperative hand-over takes a rebalance and its follow-up"
    for c in clients[:2]:
        name = c.config.client_id
        kept = kept_before[name] & set(c.assignment)
        # A member gave up exactly what moved to c2 and was never told to revoke what it kept.
        assert set(ledger.revoked.get(name, [])) == kept_before[name] - set(c.assignment)
        assert not kept & set(ledger.revoked.get(name, []))
    assert set(clients[2].assignment) == set().union(*ledger.revoked.values())
    # The first rebalance withheld the partitions in transfer: c2 got nothing yet.
    first = [ev for ev in recorder.events("sync_completed", node="c2")][0]
    assert first.fields["partitions"] == []


async def test_eager_sticky_revokes_everything_yet_keeps_ownership(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    ledger = Ownership()
    clients = await start(env, ledger, ["c0", "c1"], ("sticky",))
    before = await all_owned(env, clients)
    kept_before = {c.config.client_id: set(c.assignment) for c in clients}
    ledger.revoked.clear()
    clients += await start(env, ledger, ["c2"], ("sticky",))
    await all_owned(env, clients, before)
    assert ledger.violations == []
    for c in clients[:2]:
        name = c.config.client_id
        assert set(ledger.revoked[name]) == kept_before[name]  # eager: everything, every time
        assert set(c.assignment) <= kept_before[name]  # ...but sticky gives most of it back
        assert len(kept_before[name] - set(c.assignment)) == 1


async def test_upgrade_from_eager_to_cooperative_follows_the_vote(env: Env, recorder: EventRecorder) -> None:
    await env.start_server()
    ledger = Ownership()
    # A group on range; members are rolled to "cooperative-sticky,range" one by one (still eager),
    # then to "cooperative-sticky" alone.
    clients = await start(env, ledger, ["c0", "c1"], ("range",))
    gen = await all_owned(env, clients)
    assert env.group().protocol_name == "range"

    await clients[0].close()
    clients[0] = (await start(env, ledger, ["c0"], ("cooperative-sticky", "range")))[0]
    gen = await all_owned(env, clients, gen)
    assert env.group().protocol_name == "range"  # c1 supports only range

    await clients[1].close()
    clients[1] = (await start(env, ledger, ["c1"], ("cooperative-sticky", "range")))[0]
    gen = await all_owned(env, clients, gen)
    assert env.group().protocol_name == "cooperative-sticky"  # everyone votes for it now

    for i in (0, 1):
        await clients[i].close()
        clients[i] = (await start(env, ledger, [f"c{i}"], ("cooperative-sticky",)))[0]
        gen = await all_owned(env, clients, gen)
        assert env.group().protocol_name == "cooperative-sticky"
    assert ledger.violations == []
