"""What the pipeline's HTML reports share (`grouplab sweep`'s and `grouplab analyze`'s): a
matplotlib figure as inline SVG text, ids made unique per chart, numbers formatted for a table.

The pages are single self-contained files: charts are inline SVG, so a report opens anywhere,
mails well and needs no scripts, fonts or stylesheets from elsewhere.
"""

from __future__ import annotations

import io
import math
import re
from typing import Any, Callable


def localized_svg(build: Callable[[], Any], lang: str, prefix: str) -> str:
    """figure_svg of the Figure `build()` makes with its text in `lang` (the font is fixed when a
    text is made, so the figure is built inside plot.font_context)."""
    from grouplab.plot import font_context

    with font_context(lang):
        return figure_svg(build(), prefix)


def figure_svg(fig: Any, prefix: str) -> str:
    """A matplotlib `Figure` (object API, no pyplot, so no GUI backend) as an `<svg>` element to
    inline in a page; its ids prefixed with `prefix`, which must be unique within the page."""
    import matplotlib

    buf = io.StringIO()
    # Text as <text>, not paths (a tenth of the size); a fixed salt, so the same data gives the same page.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "grouplab"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    return namespace_ids(svg[svg.index("<svg"):], prefix)


def namespace_ids(svg: str, prefix: str) -> str:
    """Prefix every id and reference to one: matplotlib numbers its ids per figure (figure_1,
    patch_1, ...), so several charts inlined in one page would otherwise share ids."""
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", svg)
    return re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', svg)


def fmt(value: Any) -> str:
    """A table cell's text: thousands separated, floats to 1-2 decimals, a dash for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
