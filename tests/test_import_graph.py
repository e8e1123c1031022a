"""Dependencies point one way and there are no import circles (docs/design.md §1): the module
import graph of the project, read from the source with `ast`, has no cycle through
`grouplab/protocol/`, `grouplab/coordinator/` or `grouplab/consumer/`, and those three import only
what the layering allows; the rest of `grouplab` is the application layer above them.

Every `import` and `from ... import` counts, wherever it stands: at the top, inside
`if TYPE_CHECKING:` or inside a function. A circle hidden from the interpreter that way is still a
circle in the design (two modules that can only be understood together), so it is one here.
Only the modules named are edges; the parent packages an import initialises are not (their
`__init__.py` files import nothing, `grouplab/__init__.py` included, so that importing
`grouplab.protocol` does not pull in the application layer).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The three layers under the application: a module's layer is the longest of these its name starts with.
LAYERS = ("grouplab.protocol", "grouplab.coordinator", "grouplab.consumer")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / "grouplab").rglob("*.py"))}


def layer(module: str) -> str:
    """`grouplab.protocol`, `grouplab.coordinator`, `grouplab.consumer`, or `grouplab` (the rest)."""
    return next((name for name in LAYERS if module == name or module.startswith(name + ".")), "grouplab")


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import mod` imports the module pkg.mod; `from mod import name`, mod itself.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def find_cycle(graph: dict[str, set[str]], within: str) -> list[str] | None:
    """A cycle through a module whose name starts with `within`, as the list of modules on it
    (the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                if any(m == within or m.startswith(within + ".") for m in cycle):
                    return cycle
            elif nxt not in state:
                found = visit(nxt)
                if found is not None:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found is not None:
                return found
    return None


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imported(name, path, modules) for name, path in modules.items()}


@pytest.mark.parametrize("package", LAYERS)
def test_no_import_cycle_through(package: str) -> None:
    cycle = find_cycle(import_graph(), package)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# What each layer may import of the project: `protocol` ← `coordinator`, `consumer` ← the application.
ALLOWED = {"grouplab.protocol": {"grouplab.protocol"},
           "grouplab.coordinator": {"grouplab.protocol", "grouplab.coordinator"},
           "grouplab.consumer": {"grouplab.protocol", "grouplab.consumer"}}


def test_dependencies_point_one_way() -> None:
    wrong = [f"{name} imports {target}" for name, targets in sorted(import_graph().items())
             for target in sorted(targets)
             if layer(name) in ALLOWED and layer(target) not in ALLOWED[layer(name)]]
    assert wrong == []


def test_the_package_init_imports_nothing() -> None:
    """`import grouplab.protocol.types` (an assignor user, a test) runs grouplab/__init__.py first."""
    tree = ast.parse((ROOT / "grouplab" / "__init__.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_no_import_cycle_through_the_simulator() -> None:
    cycle = find_cycle(import_graph(), "grouplab.sim")
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_graph_sees_imports_under_type_checking_and_inside_functions(tmp_path: Path) -> None:
    src = tmp_path / "pkg"
    src.mkdir()
    (src / "__init__.py").write_text("")
    (src / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n")
    (src / "b.py").write_text("def f():\n    from pkg import c\n")
    (src / "c.py").write_text("from . import a\n")
    modules = {"pkg": src / "__init__.py", **{f"pkg.{m}": src / f"{m}.py" for m in "abc"}}
    graph = {name: imported(name, path, modules) for name, path in modules.items()}
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}}
    assert find_cycle(graph, "pkg") == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    assert find_cycle({"x": {"y"}, "y": set()}, "x") is None
