"""The suite's scheduling hint (tests/scheduling.py) names files that exist."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.scheduling import BUSY, FIRST, SPARK, SPARK_FILES, WAITING, SuiteScheduling

ROOT = Path(__file__).resolve().parent.parent


def test_every_file_the_hint_names_exists() -> None:
    named = [*SPARK_FILES, *BUSY, *WAITING]
    assert [f for f in named if not (ROOT / f).is_file()] == []
    assert len(set(FIRST)) == len(FIRST) == 1 + len(BUSY) + len(WAITING)


def test_the_spark_files_are_one_unit_and_others_one_per_file() -> None:
    split = SuiteScheduling.__new__(SuiteScheduling)._split_scope  # (no config needed for this)
    assert {split(f"{f}::test_x") for f in SPARK_FILES} == {SPARK}
    assert split("tests/test_sim.py::TestX::test_y") == "tests/test_sim.py"


def test_every_file_that_uses_the_spark_fixture_is_in_the_spark_unit() -> None:
    """Else it starts a second JVM on another worker, warm-up and all."""
    def uses_spark(path: Path) -> bool:
        return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and "spark" in [a.arg for a in node.args.args]
                   for node in ast.walk(ast.parse(path.read_text())))
    found = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py") if uses_spark(p)}
    assert found == set(SPARK_FILES)
