"""Fixtures of the orders example's tests. The grouplab fixtures (`grouplab_cluster`,
`grouplab_async_cluster`, the `grouplab` marker) come from grouplab's pytest plugin, which
installing grouplab registers.

This folder goes first on sys.path, so `import orders_app` works without installing the example,
whether pytest runs here (`cd examples/orders && pytest`) or from grouplab's repository root.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402

from orders_app import TotalsStore  # noqa: E402


@pytest.fixture
def store() -> TotalsStore:
    """The application's store, shared by every consumer a test starts (as their database would be)."""
    return TotalsStore()
