"""Message catalogues: every sentence `explain` says, in every language it speaks.

The texts live in catalog/<lang>.toml (flat keys, `str.format` placeholders), not in code, so a
translator edits one file and tests/test_explain.py checks that every language has every key with
the same placeholders. A key missing from a language falls back to English rather than failing a
lesson.
"""

from __future__ import annotations

import string
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

CATALOG_DIR = Path(__file__).with_name("catalog")
DEFAULT_LANG = "en"


def languages() -> list[str]:
    return sorted(p.stem for p in CATALOG_DIR.glob("*.toml"))


@lru_cache(maxsize=None)
def load(lang: str) -> dict[str, str]:
    path = CATALOG_DIR / f"{lang}.toml"
    if not path.is_file():
        raise ValueError(f"no catalogue for language {lang!r}; known: {', '.join(languages())}")
    with open(path, "rb") as f:
        data = tomllib.load(f)
    return {str(k): str(v) for k, v in data.items()}


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


class Catalog:
    """`t(key, **fields)`: the sentence for `key` in this language, its placeholders filled."""

    def __init__(self, lang: str = DEFAULT_LANG) -> None:
        self.lang = lang
        self.texts = load(lang)
        self.fallback = load(DEFAULT_LANG) if lang != DEFAULT_LANG else self.texts

    def has(self, key: str) -> bool:
        return key in self.texts or key in self.fallback

    def t(self, key: str, /, **fields: Any) -> str:
        template = self.texts.get(key) or self.fallback.get(key)
        if template is None:
            raise KeyError(f"no text {key!r} in the {self.lang} catalogue")
        return template.format(**fields)
