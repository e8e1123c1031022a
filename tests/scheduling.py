"""How `scripts/test` hands test files to its xdist workers (`--dist loadfile`, tests/conftest.py).

Two changes to xdist's own file-by-file scheduling, both for the suite's wall time:

- The files whose tests use Spark are one unit: one worker runs them all in one JVM (the
  session's `spark` fixture), started and warmed once instead of on every worker that meets one.
- The longest units go first (the classic longest-first rule: a long file started last is the
  run's tail). xdist's own order is by the number of tests in a file, which says little of time.

LONGEST_FIRST is a hint measured with `--durations`; a file it does not name is handed out after,
in xdist's order. tests/test_scheduling.py checks every name in it still exists.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling

SPARK = "the Spark test files"
# Every file with a test or fixture that takes the `spark` fixture (tests/test_scheduling.py checks).
SPARK_FILES = frozenset({"tests/test_pipeline_analyze.py", "tests/test_pipeline_report.py",
                         "tests/test_pipeline_sweep.py", "tests/test_kafka_clients.py"})

# Longest first, by the summed durations of a full run (2026-11-29, three workers).
LONGEST_FIRST = (
    SPARK,
    "tests/test_delivery_cluster.py",
    "tests/test_cli_errors.py",
    "tests/test_sim.py",
    "tests/test_cli_run.py",
    "tests/test_doc_commands.py",
    "tests/test_kafka_wire_fuzz.py",
    "tests/test_compare.py",
    "tests/test_trace.py",
    "tests/test_delivery_demos.py",
    "tests/test_delivery_sim.py",
    "tests/test_packaging.py",
)


class SuiteScheduling(LoadFileScheduling):
    """LoadFileScheduling with the Spark files as one unit and the longest units first."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self._ordered = False

    def _split_scope(self, nodeid: str) -> str:
        path = super()._split_scope(nodeid)
        return SPARK if path in SPARK_FILES else path

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:  # the first call comes once the queue is complete
            self._ordered = True
            for scope in reversed(LONGEST_FIRST):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)
