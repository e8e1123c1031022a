"""Broker settings as a test gives them, light enough for the pytest plugin to import at start."""

from __future__ import annotations

from typing import Iterable, Mapping


def config_pairs(config: Mapping[str, object] | Iterable[str] | None) -> list[str]:
    """Broker settings by Kafka's names, as a mapping (`{"group.max.size": 3}`) or NAME=VALUE
    strings (grouplab's `--config`), as NAME=VALUE strings."""
    if config is None:
        return []
    if isinstance(config, Mapping):
        return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in config.items()]
    if isinstance(config, str):
        raise TypeError("config is a mapping or a list of NAME=VALUE strings, not one string")
    return list(config)
