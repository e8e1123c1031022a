"""Heavy work on the Kafka port takes turns (issue 22), asserted without a clock: with a turn's
budget spent by the first piece (TURN_S at 0), each loop turn runs one piece, the lanes alternate,
and what other connections asked meanwhile (a light request: a callback scheduled by the loop) runs
between two pieces. Before the turns, a burst of wide requests ran back to back and a bystander's
heartbeat waited for all of them (tests/test_kafka_port_load.py shows the end-to-end case)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from grouplab.coordinator.kafka_wire import listener as listener_module
from grouplab.coordinator.kafka_wire.listener import KafkaListener


async def test_heavy_pieces_alternate_lanes_and_let_light_requests_in_between(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listener_module, "TURN_S", 0.0)
    listener = KafkaListener(host=Any, max_frame_bytes=1 << 20, node_id=0)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    ran: list[str] = []
    done = asyncio.Event()

    def heavy(name: str) -> Any:
        def work() -> None:
            ran.append(name)
            loop.call_soon(ran.append, f"light after {name}")  # a request read meanwhile
            if name == "frame-3":
                done.set()
        return work

    for i in (1, 2, 3):
        listener.in_turn(heavy(f"frame-{i}"))
    for i in (1, 2):
        listener.in_turn(heavy(f"step-{i}"), lane="steps")
    await asyncio.wait_for(done.wait(), 60)
    await asyncio.sleep(0)
    heavy_order = [name for name in ran if not name.startswith("light")]
    assert heavy_order == ["frame-1", "step-1", "frame-2", "step-2", "frame-3"]
    # Every piece's light request ran before the next piece.
    for name in heavy_order[:-1]:
        assert ran.index(f"light after {name}") < ran.index(heavy_order[heavy_order.index(name) + 1]), ran
