"""A kafka-python consumer polling in a thread of its own, as an application's consumer loop
would: the tests of grouplab.testing drive real clients with it (a kafka-python consumer only
joins and rejoins its group inside poll())."""

from __future__ import annotations

import threading
from typing import Any

from kafka import KafkaConsumer


class PollingConsumer:
    """`KafkaConsumer(topics, **config)` polled (up to 1 s per poll) until `stop()`; `records`
    keeps (topic, partition, offset, value); `assigned` is its latest assignment."""

    def __init__(self, bootstrap: str, topics: list[str], group_id: str, client_id: str, commit: bool = True,
                 **config: Any) -> None:
        settings = dict(bootstrap_servers=bootstrap, group_id=group_id, client_id=client_id,
                        auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10000,
                        heartbeat_interval_ms=500, request_timeout_ms=5000, retry_backoff_ms=100,
                        reconnect_backoff_ms=50, reconnect_backoff_max_ms=500)
        settings.update(config)
        self.consumer = KafkaConsumer(*topics, **settings)
        self.commit = commit
        self.records: list[tuple[str, int, int, bytes]] = []
        self.assigned: list[tuple[str, int]] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"poll-{client_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._paused.is_set():  # a stuck application: no poll(), heartbeats go on
                self._stop.wait(0.05)
                continue
            try:
                # Not shorter: kafka-python 3.0.12 whose poll() returns while its join is in flight
                # can lose that join and its heartbeats (docs/kafka-wire.md §9); at 100 ms a loaded
                # machine hit it once in a few runs (the member removed at its session timeout).
                batch = self.consumer.poll(timeout_ms=1000)
                for tp, recs in batch.items():
                    self.records.extend((tp.topic, tp.partition, r.offset, r.value) for r in recs)
                if batch and self.commit:
                    self.consumer.commit()
                self.assigned = sorted((tp.topic, tp.partition) for tp in self.consumer.assignment())
            except Exception as exc:  # a commit refused by a rebalance, a dropped connection: go on polling
                self.errors.append(exc)

    def stop_polling(self) -> None:
        """The application stops calling poll() (its processing is stuck); the consumer's heartbeat
        thread goes on until max.poll.interval.ms, when it leaves the group itself."""
        self._paused.set()

    def stop(self, leave: bool = True) -> None:
        """`leave=True`: close() with LeaveGroup; False: the thread ends without closing (a crash:
        use it with the cluster's isolate, which cuts the connections)."""
        self._stop.set()
        self._thread.join(timeout=30)
        if leave:
            self.consumer.close()
