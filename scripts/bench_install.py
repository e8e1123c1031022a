#!/usr/bin/env python3
"""Benchmark: the size of the environment `pip install grouplab` makes, beside `grouplab[all]` and
an empty virtual environment (docs/design.md §9). The aim (issue 20): a plain install under 60 MB.

Builds this tree's wheel (from a copy of pyproject.toml, README.md and grouplab/, so a stale build/
cannot add to it), then creates three venvs in a temporary directory with this Python's
`python -m venv` (pip and setuptools included, as a user gets them): empty; the wheel alone; the
wheel with [all]. Each is measured with `du` (disk use, MiB) and its distributions by the files
their RECORD lists (compiled .pyc included). pip downloads what its cache lacks. Prints the tables
and appends them, with the command, to docs/benchmarks.md.

    scripts/bench_install.py [--top 8] [--keep DIR] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from _bench import append_to_benchmarks, utc_stamp  # noqa: E402

MIB = 1 << 20
AIM_MB = 60
# Run inside each venv: every distribution's bytes, from the files its RECORD lists.
SIZES = """
import importlib.metadata as md, json
sizes = {}
for d in md.distributions():
    total = 0
    for f in d.files or []:
        try:
            total += f.locate().stat().st_size
        except OSError:
            pass
    sizes[d.metadata["Name"]] = total
print(json.dumps(sizes))
"""


@dataclass
class Measured:
    label: str
    command: str
    du_bytes: int
    dists: dict[str, int]  # distribution name -> bytes


def env() -> dict[str, str]:
    """This environment less what would let a venv see this tree or another venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def run(*args: str | Path, cwd: Path | None = None) -> str:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env(), cwd=cwd)
    if proc.returncode != 0:
        sys.exit(f"bench_install: {' '.join(map(str, args[:4]))} ... failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "grouplab", src / "grouplab", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--disable-pip-version-check",
        "-w", tmp / "dist", src, cwd=tmp)
    (wheel,) = (tmp / "dist").glob("grouplab-*.whl")
    return wheel


def measure(tmp: Path, label: str, command: str, requirement: str | None) -> Measured:
    venv = tmp / label
    run(sys.executable, "-m", "venv", venv)
    if requirement is not None:
        run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", requirement)
    du_kib = int(run("du", "-sk", venv).split()[0])
    dists = json.loads(run(venv / "bin" / "python", "-c", SIZES))
    print(f"{label}: {du_kib * 1024 / MIB:.1f} MiB, {len(dists)} distributions", file=sys.stderr)
    return Measured(label, command, du_kib * 1024, dists)


def mb(n: int) -> str:
    return f"{n / MIB:.1f}"


def tables(rows: list[Measured], top: int) -> str:
    empty = rows[0]
    out = ["| environment | venv MiB (du) | over an empty venv MiB | distributions added | biggest added (MiB) |",
           "|---|---:|---:|---:|---|"]
    for r in rows:
        added = {name: size for name, size in r.dists.items() if name not in empty.dists}
        biggest = ", ".join(f"{name} {mb(size)}" for name, size in sorted(added.items(), key=lambda x: -x[1])[:top])
        out.append(f"| {r.label}: `{r.command}` | {mb(r.du_bytes)} | {mb(r.du_bytes - empty.du_bytes)} | "
                   f"{len(added)} | {biggest or '-'} |")
    core = rows[1]
    verdict = "MET" if core.du_bytes < AIM_MB * 10**6 else "NOT MET"
    out += ["", f"Aim: a plain install under {AIM_MB} MB: {verdict} (the whole venv {mb(core.du_bytes)} MiB = "
            f"{core.du_bytes / 10**6:.1f} MB, pip and setuptools included; grouplab and its core dependencies "
            f"{mb(core.du_bytes - empty.du_bytes)} MiB of it)."]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=8, help="distributions listed per environment (default: 8)")
    ap.add_argument("--keep", metavar="DIR", help="make the venvs under DIR and keep them (default: a temporary directory)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to docs/benchmarks.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="grouplab-bench-install-") as scratch:
        tmp = Path(args.keep) if args.keep else Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        wheel = build_wheel(tmp)
        rows = [measure(tmp, "empty", "python -m venv", None),
                measure(tmp, "core", "pip install grouplab", str(wheel)),
                measure(tmp, "all", "pip install 'grouplab[all]'", f"{wheel}[all]")]
    text = tables(rows, args.top)
    print(text)
    if not args.no_write:
        pip_version = run(sys.executable, "-m", "pip", "--version").split()[1]
        command = "scripts/bench_install.py" + (f" --top {args.top}" if args.top != 8 else "")
        append_to_benchmarks(
            f"## Install size: `pip install grouplab` and its extras ({utc_stamp()})\n\n"
            f"`{command}` on {platform.system()} {platform.machine()}, Python {platform.python_version()}, "
            f"pip {pip_version} building the wheel, each venv with the pip `python -m venv` gives "
            f"({wheel.name}). MiB = 2^20 bytes of disk use (`du -sk`); a distribution's size is the "
            f"files its RECORD lists (compiled .pyc included), so the columns need not add up.\n\n{text}\n")


if __name__ == "__main__":
    main()
