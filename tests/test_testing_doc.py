"""docs/testing.md stays true: every excerpt it quotes from examples/ is still in that file word for
word, and its first test passes as a user would run it (in a pytest of its own, with grouplab's
plugin loaded through its entry point)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "testing.md"
# A python block right after `<!-- excerpt: PATH -->` (quoted from PATH) or `<!-- doc-test: NAME -->` (run here).
BLOCK = re.compile(r"<!-- (?:excerpt: (?P<path>\S+)|doc-test: (?P<name>\S+)) -->\n```python\n(?P<code>.*?)\n```", re.S)


def blocks() -> list[re.Match[str]]:
    return list(BLOCK.finditer(DOC.read_text()))


def test_every_excerpt_is_in_its_file_word_for_word() -> None:
    excerpts = [m for m in blocks() if m["path"]]
    assert len(excerpts) >= 7  # the front end's loop, the tests' setup, the five scenarios
    for m in excerpts:
        assert m["code"] in (ROOT / m["path"]).read_text(), (
            f"docs/testing.md quotes {m['path']} as it no longer is; its excerpt begins:\n{m['code'][:300]}")


@pytest.mark.e2e
def test_the_first_test_of_the_guide_passes(pytester: pytest.Pytester) -> None:
    (first,) = [m["code"] for m in blocks() if m["name"] == "first"]
    pytester.makeini("[pytest]\nfilterwarnings = ignore::DeprecationWarning\n")
    pytester.makepyfile(test_first=first)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
