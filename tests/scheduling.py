"""How `scripts/test` hands test files to its xdist workers (`--dist loadfile`, tests/conftest.py).

Two changes to xdist's own file-by-file scheduling, both for the suite's wall time:

- The files whose tests use Spark are one unit: one worker runs them all in one JVM (the
  session's `spark` fixture), started and warmed once instead of on every worker that meets one.
- The long units go first (a long file started last is the run's tail), a busy one and a waiting
  one in turn. Three workers share two cores, so the cores stay full while one worker waits (on
  session timeouts, real clients, a ZooKeeper) and two compute. Taken longest first alone, the
  waiting files came together (test_cli_run, test_compare and test_delivery_demos one after the
  other beside the Spark unit) and a core idled for minutes; so did the end of the run, where the
  waiting files xdist had not been told about came last. xdist's own order is by the number of
  tests in a file, which says little of time.

BUSY and WAITING are hints, each longest first by the wall time of a full run (2026-11-29, CPU
against wall per file: WAITING's files compute for under a third of their time). A file neither
names is handed out after, in xdist's order: short ones, mostly computing, which fill the end.
tests/test_scheduling.py checks every name still exists.
"""

from __future__ import annotations

from itertools import chain, zip_longest
from typing import Any

from xdist.scheduler import LoadFileScheduling

SPARK = "the Spark test files"
# Every file with a test or fixture that takes the `spark` fixture (tests/test_scheduling.py checks).
SPARK_FILES = frozenset({"tests/test_pipeline_analyze.py", "tests/test_pipeline_report.py",
                         "tests/test_pipeline_sweep.py", "tests/test_kafka_clients.py"})

BUSY = (
    "tests/test_sim.py",
    "tests/test_trace.py",
    "tests/test_kafka_wire_fuzz.py",
    "tests/test_cli_errors.py",
    "tests/test_doc_commands.py",
    "tests/test_delivery_cluster.py",
    "tests/test_packaging.py",
    "tests/test_answer_limits.py",
    "tests/test_delivery_sim.py",
    "tests/test_kafka_port_hostile.py",
    "tests/test_lessons.py",
    "tests/test_server_assignors.py",
    "tests/test_explain.py",
    "tests/test_sticky.py",
)
WAITING = (
    "tests/test_compare.py",
    "tests/test_delivery_demos.py",
    "tests/test_cli_run.py",
    "tests/test_kafka_port_load.py",
    "tests/test_testing_cluster.py",
    "tests/test_zk_e2e.py",
    "tests/test_ui_browser.py",
    "tests/test_delivery_e2e.py",
    "examples/orders/test_orders_confluent.py",
    "examples/orders/test_orders_kafka_python.py",
    "tests/test_registry_conformance.py",
    "tests/test_faults_e2e.py",
    "tests/test_kafka_consumer_protocol.py",
    "examples/orders/test_orders_aiokafka.py",
    "tests/test_cluster_ops.py",
)
# The Spark unit (its JVM computes, its clients wait), then busy and waiting in turn.
FIRST = (SPARK, *(f for f in chain.from_iterable(zip_longest(BUSY, WAITING)) if f is not None))


class SuiteScheduling(LoadFileScheduling):
    """LoadFileScheduling with the Spark files as one unit and FIRST's units first, in its order."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self._ordered = False

    def _split_scope(self, nodeid: str) -> str:
        path = super()._split_scope(nodeid)
        return SPARK if path in SPARK_FILES else path

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:  # the first call comes once the queue is complete
            self._ordered = True
            for scope in reversed(FIRST):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)
