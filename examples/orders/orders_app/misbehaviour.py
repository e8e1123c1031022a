"""What a test can make a consumer do wrong, armed from the test's thread and consulted by the
consumer's loop: die in the middle of a batch, or get stuck in one.

- `crash_after(n)`: after processing its next `n` records the consumer dies before committing
  them: its loop ends on `Crash` without a commit, a close or a LeaveGroup, as a killed process
  would. (The client object lives on in the test's process, and so do its background heartbeats:
  the test cuts its connections with grouplab's `cluster.isolate(client_id)`.)
- `stall_next_batch()`: the next batch's processing blocks (a downstream call that hangs) until
  `release()`; the loop calls no poll meanwhile, so `max.poll.interval.ms` runs out.
"""

from __future__ import annotations

import threading


class Crash(Exception):
    """The consumer's process dies here (raised inside processing; the front end's loop ends on it)."""


class Misbehaviour:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._crash_countdown: int | None = None
        self._stall_armed = False
        self._released = threading.Event()
        self.stalled = threading.Event()  # set while the loop is blocked in a stalled batch
        self.crashed = threading.Event()  # set once the loop has died on Crash

    # ------------------------------------------------------------------ the test's side

    def crash_after(self, records: int) -> None:
        if records < 1:
            raise ValueError("crash_after needs at least one record processed before the crash")
        with self._lock:
            self._crash_countdown = records

    def stall_next_batch(self) -> None:
        with self._lock:
            self._stall_armed = True
            self._released.clear()

    def release(self) -> None:
        """Unblock a stalled batch (the front ends also call it when they stop)."""
        self._released.set()

    # ------------------------------------------------------------------ the consumer loop's side

    def after_record(self) -> None:
        """Called after each record processed: raises Crash when the armed count is reached."""
        with self._lock:
            if self._crash_countdown is None:
                return
            self._crash_countdown -= 1
            if self._crash_countdown > 0:
                return
            self._crash_countdown = None
        self.crashed.set()
        raise Crash("the consumer died in the middle of a batch (crash_after)")

    def take_stall(self) -> bool:
        """True once after `stall_next_batch`: this batch is the one that blocks."""
        with self._lock:
            armed, self._stall_armed = self._stall_armed, False
        if armed:
            self.stalled.set()
        return armed

    def wait_released(self) -> None:
        """Block the calling thread until `release()` (a thread front end's stall)."""
        self._released.wait()
        self.stalled.clear()
