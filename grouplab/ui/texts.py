"""The dashboard page's words, in the dashboard's language (docs/ui.md §1): the catalogue's
`ui.page.*` templates (grouplab/teach/catalog/<lang>.toml), sent inside the page itself so that
it shows no English before they arrive and asks nothing more of the server. The page fills their
`{name}` placeholders itself (app.js's `t`), so a page template holds plain names only, no format
specs; index.html's static words carry their keys (`data-t`, `data-t-title`) and keep the English
text, which the en catalogue repeats word for word (tests/test_ui_texts.py).
"""

from __future__ import annotations

import json
import re

from grouplab.teach.catalog import Catalog, load

PREFIX = "ui.page."
# index.html's slot for the texts, and its language.
_SLOT = '<script id="texts" type="application/json">{}</script>'
_LANG = re.compile(r'<html lang="[a-z]+">')


def page_texts(lang: str) -> dict[str, str]:
    """Every `ui.page.*` template in `lang` (English where the language lacks one), by key."""
    c = Catalog(lang)
    return {key: c.texts.get(key) or template for key, template in load("en").items() if key.startswith(PREFIX)}


def render_page(html: str, lang: str) -> str:
    """index.html with its language and its words in it: the texts as JSON in the page's
    `<script id="texts">` (a `</` inside a text cannot end the script)."""
    if _SLOT not in html:
        raise ValueError("index.html has no texts slot: " + _SLOT)
    data = json.dumps({"lang": lang, "texts": page_texts(lang)}, ensure_ascii=False).replace("</", "<\\/")
    return _LANG.sub(f'<html lang="{lang}">', html, count=1).replace(
        _SLOT, f'<script id="texts" type="application/json">{data}</script>')
