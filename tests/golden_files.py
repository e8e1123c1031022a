"""Golden files: what a person reads, pinned byte for byte under tests/golden/.

After a deliberate change, regenerate with `GROUPLAB_UPDATE_GOLDEN=1 scripts/test FILE` and review
the diff like code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("GROUPLAB_UPDATE_GOLDEN") == "1"


def compare(actual: bytes, golden: Path) -> None:
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(actual)
        return
    assert golden.exists(), f"{golden} missing; regenerate with GROUPLAB_UPDATE_GOLDEN=1"
    expected = golden.read_bytes()
    if actual != expected:
        a, e = actual.decode().splitlines(), expected.decode().splitlines()
        first = next((i for i, (x, y) in enumerate(zip(a, e)) if x != y), min(len(a), len(e)))
        pytest.fail(f"{golden.relative_to(ROOT)} differs first at line {first + 1}:\n"
                    f"  golden: {e[first] if first < len(e) else '<end>'}\n"
                    f"  actual: {a[first] if first < len(a) else '<end>'}")
