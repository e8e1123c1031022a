"""The command line's own words in the user's language: `--help`, usage errors, one-line failures.

These are English in the code (argparse's help strings, the messages of `UsageError` and
`CliError`, argparse's own errors), so a translation is looked up by the English text, as gettext
does: `catalog/cli/<lang>.toml` maps each English message to its translation. A message built with
values is listed once as a template whose `{}` holes match anything; its translation puts the
values back in order (`{}`) or by position (`{0}`, `{1}`). A message with no translation stays
English, so a new message never breaks a command; tests/test_zh_usage.py finds the ones missing.

The language is chosen before argparse runs, since argparse prints help and errors before any
command reads its `--lang`: the `--lang` on the command line, else $GROUPLAB_LANG, else English.
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from grouplab.teach.catalog import CATALOG_DIR, DEFAULT_LANG, languages

CLI_CATALOG_DIR = CATALOG_DIR / "cli"
LANG_ENV = "GROUPLAB_LANG"


def default_lang() -> str:
    """Every `--lang` defaults to $GROUPLAB_LANG when it names a language (a locale's spelling,
    zh_CN.UTF-8, names zh), else English."""
    lang = os.environ.get(LANG_ENV, "").split(".")[0].split("_")[0].lower()
    return lang if lang in languages() else DEFAULT_LANG


def lang_of(argv: list[str]) -> str:
    """The language a command line asks for, read before argparse (which speaks first)."""
    lang = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--lang" and i + 1 < len(argv):
            lang = argv[i + 1]
        elif arg.startswith("--lang="):
            lang = arg.split("=", 1)[1]
    return lang if lang in languages() else default_lang()


@dataclass(frozen=True)
class Template:
    pattern: re.Pattern[str]
    translation: str


@dataclass(frozen=True)
class CliTexts:
    """One language's translations of the command line's English messages."""

    exact: dict[str, str]
    templates: tuple[Template, ...]

    def say(self, english: str) -> str:
        """`english` in this language; unchanged when there is no translation."""
        if english in self.exact:
            return self.exact[english]
        for template in self.templates:
            found = template.pattern.fullmatch(english)
            if found:
                return template.translation.format(*(self._value(v) for v in found.groups()))
        return english

    def _value(self, text: str) -> str:
        """A value put back in a template: a sentence inside (an option's own error) is said too,
        a word (a name, a choice) is not, even when it happens to be a translated heading."""
        return self.say(text) if " " in text else text

    def knows(self, english: str) -> bool:
        return english in self.exact or any(t.pattern.fullmatch(english) for t in self.templates)


def _template(english: str) -> re.Pattern[str]:
    parts = english.split("{}")
    return re.compile("(.+?)".join(re.escape(p) for p in parts), re.DOTALL)


@lru_cache(maxsize=None)
def cli_texts(lang: str) -> CliTexts:
    path = CLI_CATALOG_DIR / f"{lang}.toml"
    if lang == DEFAULT_LANG or not path.is_file():
        return CliTexts({}, ())
    with open(path, "rb") as f:
        data = {str(k): str(v) for k, v in tomllib.load(f).items()}
    exact = {k: v for k, v in data.items() if "{}" not in k}
    # Longer templates first: "argument {}: invalid choice: {} (choose from {})" before "argument {}: {}".
    templates = tuple(Template(_template(k), v) for k, v in sorted(data.items(), key=lambda kv: -len(kv[0]))
                      if "{}" in k)
    return CliTexts(exact, templates)


def localize_parser(parser: argparse.ArgumentParser, lang: str) -> None:
    """Translate every help string, description, epilog and heading of `parser` and its commands."""
    texts = cli_texts(lang)
    if not texts.exact and not texts.templates:
        return
    seen: set[int] = set()

    def walk(p: argparse.ArgumentParser) -> None:
        if id(p) in seen:
            return
        seen.add(id(p))
        p.description = texts.say(p.description) if p.description else p.description
        p.epilog = texts.say(p.epilog) if p.epilog else p.epilog
        for group in p._action_groups:  # noqa: SLF001 - argparse keeps its headings here
            group.title = texts.say(group.title) if group.title else group.title
        for action in p._actions:  # noqa: SLF001
            if action.help and action.help != argparse.SUPPRESS:
                action.help = texts.say(action.help)
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for choice in action._choices_actions:  # noqa: SLF001
                    choice.help = texts.say(choice.help) if choice.help else choice.help
                for command in action.choices.values():
                    walk(command)

    walk(parser)


_NO_LINE_START = set("，。、：；！？）》」』")  # Chinese punctuation that never begins a line
_NO_LINE_END = set("（《「『")  # nor ends one
_WRAP_TOKEN = re.compile(r"[\x21-\x7e]+|\s+|.", re.DOTALL)  # an ASCII word, a space run, or one other character


def wrap_cells(text: str, width: int) -> list[str]:
    """Lines of at most `width` terminal cells, for help text that mixes Chinese and ASCII.

    argparse wraps with textwrap, which counts characters (a Chinese character takes two cells)
    and, finding no spaces in a Chinese sentence, cuts it anywhere, inside option names too. Here
    a line may break between two Chinese characters or at a space, never inside an ASCII word."""
    from rich.cells import cell_len

    lines: list[str] = []
    line = ""
    for token in _WRAP_TOKEN.findall(" ".join(text.split())):
        if token.isspace():
            if line:
                line += " "
            continue
        if line and cell_len(line.rstrip() + token) > width and token not in _NO_LINE_START:
            carried = ""
            if line[-1] in _NO_LINE_END:  # an opening bracket goes down with what it opens
                line, carried = line[:-1], line[-1]
            if line.strip():
                lines.append(line.rstrip())
            line = carried
        line += token
    if line.strip():
        lines.append(line.rstrip())
    return lines


def has_wide(text: str) -> bool:
    """Whether `text` holds characters that take two terminal cells (Chinese, full-width punctuation)."""
    from rich.cells import cell_len

    return cell_len(text) != len(text)
