"""mypy over every package (pyproject's [tool.mypy]: grouplab/protocol/, coordinator/, consumer/ and all of
grouplab/, the CLI and the Spark pipeline included). A wrong event field, a missing case of an
output union or a None that slipped through fails here, in the suite `scripts/test` runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the config's `files` are relative to the working directory
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                      "--cache-dir", str(ROOT / ".mypy_cache")])
    assert status == 0, stdout + stderr
