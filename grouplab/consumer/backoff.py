"""Kafka's exponential backoff (KIP-580), without the jitter so that runs replay: the first retry
waits the initial delay, each further failure doubles it up to the maximum, a success starts over.

Kafka's clients use it for reconnects (reconnect.backoff.ms / reconnect.backoff.max.ms) and for
retried requests (retry.backoff.ms / retry.backoff.max.ms); their 20% jitter is left out."""

from __future__ import annotations


class ExponentialBackoff:
    __slots__ = ("initial_ms", "max_ms", "delay_ms")

    def __init__(self, initial_ms: int, max_ms: int) -> None:
        self.initial_ms = initial_ms
        self.max_ms = max(max_ms, initial_ms)
        self.delay_ms = initial_ms

    def failed(self) -> int:
        """The delay to wait after this failure; the next one waits twice as long (capped)."""
        delay = self.delay_ms
        self.delay_ms = min(self.delay_ms * 2, self.max_ms)
        return delay

    def reset(self) -> None:
        self.delay_ms = self.initial_ms
