"""What every benchmark script shares: the dated section it appends to docs/benchmarks.md."""

from __future__ import annotations

import argparse
import os
import statistics
from datetime import datetime, timezone
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def utc_stamp() -> str:
    """When a section was measured, as its heading shows it."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def append_to_benchmarks(section: str) -> Path:
    """Append a section (heading, description, tables) to docs/benchmarks.md and say so."""
    if not BENCHMARKS.exists():
        BENCHMARKS.write_text("# Benchmarks\n\nEach section is one run of a script under `scripts/`; newest last.\n")
    text = BENCHMARKS.read_text()
    newlines = len(text) - len(text.rstrip("\n"))  # a hand-edited end may have lost its blank line
    with BENCHMARKS.open("a") as f:
        f.write("\n" * max(0, 2 - newlines) + section + "\n")
    print(f"\nappended to {BENCHMARKS}")
    return BENCHMARKS


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """`--sizes 1000x10000,5000x50000`: (members, partitions) pairs, for the assignor benchmarks."""
    sizes = []
    for item in text.split(","):
        members, sep, partitions = item.strip().replace("×", "x").replace("_", "").partition("x")
        if not sep:
            raise argparse.ArgumentTypeError(f"not MEMBERSxPARTITIONS: {item!r}")
        sizes.append((int(members), int(partitions)))
    return sizes


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """Median [min–max] of what finished; '-' if nothing did."""
    if not values:
        return "-"
    med = fmt.format(statistics.median(values))
    return med if len(values) == 1 else f"{med} [{fmt.format(min(values))}–{fmt.format(max(values))}]"


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc), -1 if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return -1.0
