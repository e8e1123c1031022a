"""The optional extras (docs/design.md §9): which modules each brings, and the one error a command
raises when its extra is not installed.

`pip install grouplab` is the core: the coordinator, the consumers, the simulator, explain and
grouplab.testing, everything an application's test environment needs and nothing more. The few
commands that need more check for it with `require` before they start anything, so a missing
extra is one line that names it (the CLI prints `MissingExtra` as is, exit 1), never a traceback
from an import halfway through a command.
"""

from __future__ import annotations

from importlib.util import find_spec

# Extra -> the import names it brings (here each distribution's name too), as pyproject.toml's
# [project.optional-dependencies] lists them; tests/test_packaging.py holds the two together.
EXTRAS: dict[str, tuple[str, ...]] = {
    "plot": ("matplotlib",),
    "spark": ("pyspark", "matplotlib"),
    "ui": ("starlette", "uvicorn"),
    "zk": ("kazoo",),
}


class MissingExtra(Exception):
    """`command` needs `modules`, which the extra `extra` installs and this environment lacks.

    Not an ImportError: code that tries an optional import (`except ImportError`) must not swallow it."""

    def __init__(self, extra: str, modules: list[str], command: str) -> None:
        self.extra, self.modules, self.command = extra, modules, command
        super().__init__(f"grouplab {command} needs {' and '.join(modules)}: pip install 'grouplab[{extra}]'")


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that cannot be imported here (found without importing them)."""
    return [name for name in EXTRAS[extra] if find_spec(name) is None]


def require(extra: str, command: str) -> None:
    """Raise MissingExtra unless every module of `extra` is installed; `command` is what the user
    typed that needs it (`plot`, `run --ui`), for the message."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(extra, missing, command)


def extra_for(exc: ModuleNotFoundError, command: str) -> MissingExtra | None:
    """A ModuleNotFoundError for a module an extra brings, as that extra's MissingExtra (None for
    any other module): the CLI's safety net for an import that no `require` guarded."""
    root = (exc.name or "").partition(".")[0]
    extra = next((name for name, modules in EXTRAS.items() if root in modules), None)
    return MissingExtra(extra, [root], command) if extra is not None else None
