"""`grouplab coordinator --brokers N`'s terminal: commands typed on stdin that stop, restart and
re-elect the cluster's brokers while clients run (docs/protocol.md §12).

    kill N      broker N stops at once: its listeners close, its connections are cut
    stop N      broker N shuts down (the same here: leadership moves, then it is gone)
    restart N   broker N listens again on its ports
    elect       a preferred-leader election now (kafka-leader-election.sh --election-type PREFERRED)
    status      the live brokers and, per group, its coordinator

A line that is none of these is answered with this list and changes nothing. Read through the
event loop's reader on stdin, so nothing blocks; end of input (stdin closed, or /dev/null) just
stops listening for commands.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from grouplab.coordinator.nodes import NodeError

HELP = "commands: kill N · stop N · restart N · elect · status"


class BrokerConsole:
    """Reads commands from stdin and runs them on a CoordinatorServer of several brokers."""

    def __init__(self, server: Any, out: Any, stream: Any = None) -> None:
        self.server = server
        self.out = out  # a rich Console
        self.stream = stream if stream is not None else sys.stdin
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buffer = ""
        self._tasks: set[asyncio.Task[str]] = set()

    def start(self) -> None:
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            return  # no stdin to read (a test harness, a closed stream)
        self._loop = asyncio.get_running_loop()
        try:
            self._loop.add_reader(fd, self._readable)
        except (OSError, ValueError, NotImplementedError):
            self._loop = None  # a regular file cannot be watched: no commands, the server runs on
            return
        self.out.print(f"  {HELP}")

    def stop(self) -> None:
        if self._loop is not None:
            try:
                self._loop.remove_reader(self.stream.fileno())
            except (OSError, ValueError):
                pass
            self._loop = None

    def _readable(self) -> None:
        import os

        try:
            data = os.read(self.stream.fileno(), 4096)
        except OSError:
            data = b""
        if not data:
            self.stop()
            return
        self._buffer += data.decode("utf-8", "replace")
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            if line.strip():
                task = asyncio.ensure_future(self.run(line))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def run(self, line: str) -> str:
        """Run one command line; returns (and prints) what it did, or why not."""
        words = line.split()
        verb, args = words[0].lower(), words[1:]
        try:
            if verb in ("kill", "stop", "restart") and len(args) == 1 and args[0].lstrip("-").isdigit():
                node = int(args[0])
                if verb == "restart":
                    await self.server.restart_broker(node)
                    said = f"broker {node} restarted"
                else:
                    await self.server.kill_broker(node, "killed" if verb == "kill" else "shutdown")
                    said = f"broker {node} {'killed' if verb == 'kill' else 'shut down'}"
            elif verb == "elect" and not args:
                self.server.elect_leaders()
                said = "preferred-leader election done"
            elif verb == "status" and not args:
                said = self.status()
            else:
                said = f"{line.strip()!r}: not a command; {HELP}"
        except NodeError as exc:
            said = str(exc)
        self.out.print(f"[cyan]» {said}[/]")
        return said

    def status(self) -> str:
        live = self.server.live_brokers()
        groups = sorted({*self.server.broker.group_ids()})
        where = ", ".join(f"{g} → broker {self.server.coordinator_of(g)}" for g in groups) or "no groups"
        return f"live brokers {live}; coordinators: {where}"
