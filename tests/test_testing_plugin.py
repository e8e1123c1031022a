"""grouplab's pytest plugin (grouplab/testing/plugin.py), tested with pytest's own pytester:
generated test files that use its fixtures run in a pytest of their own, with the plugin loaded
as an application's pytest loads it, through the `pytest11` entry point."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.e2e
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


@pytest.fixture(autouse=True)
def _ini(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)

JOIN = '''
from kafka import KafkaConsumer

def join(cluster, group, client_id, topic="orders"):
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, client_id=client_id,
                             session_timeout_ms=10000, heartbeat_interval_ms=500, request_timeout_ms=5000,
                             enable_auto_commit=False)
    cluster.wait_for(lambda: consumer.poll(timeout_ms=1000) is not None and bool(consumer.assignment()),
                     timeout=30, what=f"{client_id} assigned")
    return consumer
'''


def test_the_plugin_is_registered_by_its_entry_point(pytester: pytest.Pytester) -> None:
    listed = pytester.runpytest("--fixtures").stdout.str()
    for fixture in ("grouplab_cluster", "grouplab_cluster_factory", "grouplab_session_cluster [session scope]",
                    "grouplab_async_cluster"):
        assert f"{fixture} -- " in listed, fixture
    markers = pytester.runpytest("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.grouplab(config=None, topics=None, *"])


def test_a_test_using_the_fixture_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(JOIN + '''
def test_one_consumer(grouplab_cluster):
    grouplab_cluster.create_topic("orders", partitions=3)
    consumer = join(grouplab_cluster, "app", "app-1")
    group = grouplab_cluster.wait_stable("app", members=1, timeout=30)
    assert group.generation >= 1 and group.leader == group.members[0].member_id
    assert sorted(tp for ps in group.assignments.values() for tp in ps) == [("orders", 0), ("orders", 1), ("orders", 2)]
    consumer.close()
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_wait_that_cannot_be_met_fails_with_the_readable_message(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(JOIN + '''
def test_waits_for_two(grouplab_cluster):
    grouplab_cluster.create_topic("orders", partitions=2)
    consumer = join(grouplab_cluster, "app", "app-1")
    try:
        grouplab_cluster.wait_stable("app", members=2, timeout=1)
    finally:
        consumer.close()
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*WaitTimeout: group 'app' Stable with 2 members did not hold within 1 s",
        "*group 'app': Stable, generation *, protocol range, 1 member",
        "*(client app-1): orders[[]0,1[]]",
        "*last rebalances:",
        "*generation 1: *",
        "*what the coordinator did, most recent last:",
        "*run directory: *grouplab-run*",
    ])
    out = result.stdout.str()
    assert "grouplab/testing" not in out  # the test's own line, not the way through grouplab's thread
    assert "- grouplab -" not in out  # the message says it all: no section repeating it


def test_any_other_failure_gets_the_cluster_in_a_report_section(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(JOIN + '''
def test_asserts(grouplab_cluster):
    grouplab_cluster.create_topic("orders", partitions=2)
    consumer = join(grouplab_cluster, "app", "app-1")
    consumer.close()
    assert grouplab_cluster.group("app").state == "Stable"
''')
    result = pytester.runpytest("-p", "no:cacheprovider", "--grouplab-artifacts", "ci-artifacts")
    result.assert_outcomes(failed=1)
    kept = pytester.path / "ci-artifacts" / "test_any_other_failure_gets_the_cluster_in_a_report_section.py__test_asserts"
    assert (kept / "coordinator.jsonl").exists() and (kept / "trace" / "coordinator.jsonl").exists()
    assert "member_removed" in (kept / "coordinator.jsonl").read_text()
    result.stdout.fnmatch_lines(["*AssertionError*", "*- grouplab -*", "group 'app': Empty, generation *",
                                 "last rebalances:", "*generation 1: *", "run directory: *"])


def test_the_marker_gives_broker_settings_topics_and_faults(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI + "grouplab_config =\n    group.max.size=5\n    group.min.session.timeout.ms=1000\n")
    pytester.makepyfile('''
import pytest

@pytest.mark.grouplab(config={"group.max.size": 2}, topics={"orders": 4}, faults=["SyncGroup:delay:10"])
def test_marked(grouplab_cluster):
    config = grouplab_cluster.cluster.broker_config
    assert config.group_max_size == 2                    # the marker over the ini
    assert config.group_min_session_timeout_ms == 1000   # the ini
    assert grouplab_cluster.topics() == {"orders": 4}
    assert [r.spec() for r in grouplab_cluster.faults] == ["SyncGroup:delay:10"]

def test_unmarked(grouplab_cluster):
    assert grouplab_cluster.cluster.broker_config.group_max_size == 5
    assert grouplab_cluster.topics() == {}

def test_factory(grouplab_cluster_factory):
    one = grouplab_cluster_factory(topics={"a": 1})
    two = grouplab_cluster_factory(config={"group.max.size": 3})
    assert one.bootstrap != two.bootstrap and one.topics() == {"a": 1}
    assert two.cluster.broker_config.group_max_size == 3

def test_session_one(grouplab_session_cluster):
    grouplab_session_cluster.create_topic("shared", partitions=1)

def test_session_two(grouplab_session_cluster):
    assert "shared" in grouplab_session_cluster.topics()   # the same cluster

@pytest.mark.grouplab(partitions=3)
def test_misspelt_marker(grouplab_cluster):
    pass
''')
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=5, errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.grouplab got unknown argument(s) partitions; it takes config, *"])


def test_the_async_fixture_in_a_pytest_asyncio_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile('''
import pytest
from aiokafka import AIOKafkaConsumer

@pytest.mark.asyncio
@pytest.mark.grouplab(topics={"orders": 2})
async def test_async(grouplab_async_cluster):
    consumer = AIOKafkaConsumer("orders", bootstrap_servers=grouplab_async_cluster.bootstrap, group_id="app",
                                client_id="aio-1", session_timeout_ms=10000, heartbeat_interval_ms=500)
    await consumer.start()
    try:
        await consumer.getmany(timeout_ms=100)
        group = await grouplab_async_cluster.wait_stable("app", members=1, timeout=30)
        assert group.partitions_of("aio-1") == [("orders", 0), ("orders", 1)]
    finally:
        await consumer.stop()
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
