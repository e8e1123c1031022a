"""The process's memory, for work that makes many objects at once: pause the cyclic collector
while they live, hand freed heap back to the system after.

- `gc_paused()`: decoding a Fetch over 20,000 partitions or computing a sticky assignment makes
  hundreds of thousands of small objects, none in a cycle, all freed by reference counting when
  the work ends; the cyclic collector would only rescan them (full collections of 50-230 ms in
  the middle of a burst of wide Fetches, issue 22).
- `gc_relaxed()`: a long loop that makes and frees many short-lived objects a step (the
  simulator: messages, outputs, timers) and almost no cycles; collections every 700 allocations
  rescan its long-lived state (a 1,000-member world) and took a fifth of a run (issue 26). Cycles
  are still collected, a hundred times less often. `grouplab coordinator` serves inside it too:
  10,000 members joining make objects that mostly live on (members, connections, timers) and few
  cycles, and the collections that kept rescanning them were a third of its CPU (issue 26).
- `trim_heap()`: glibc's malloc keeps freed memory in its arenas, so a process whose peak was
  hundreds of MB stays that large after the objects are gone; malloc_trim(0) returns the free
  pages. Elsewhere (no glibc) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from contextlib import contextmanager
from typing import Any, Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block (as it was after; nested blocks are fine)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def gc_relaxed(first_generation: int = 70_000) -> Iterator[None]:
    """The cyclic collector's youngest generation collected after `first_generation` allocations
    (CPython's default: 700) for the block; the thresholds as they were after."""
    before = gc.get_threshold()
    gc.set_threshold(max(first_generation, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


_libc: Any = None


def trim_heap() -> bool:
    """Return malloc's free pages to the system (glibc's malloc_trim(0)); False where there is
    no such call."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    if _libc is False:
        return False
    _libc.malloc_trim(0)
    return True
