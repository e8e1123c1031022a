"""KIP-848 server-side assignors: the coordinator computes a consumer-protocol group's target
assignment with one of these (group.consumer.assignors, default `uniform,range`)."""

from __future__ import annotations

from grouplab.coordinator.server_assignors.range import RangeAssignor
from grouplab.coordinator.server_assignors.spec import (MemberSpec, ServerAssignor, TargetAssignment,
                                                        UnknownServerAssignor)
from grouplab.coordinator.server_assignors.uniform import UniformAssignor

SERVER_ASSIGNORS: dict[str, ServerAssignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
DEFAULT_SERVER_ASSIGNORS = ("uniform", "range")  # Kafka's group.consumer.assignors default; first is used


def server_assignor(name: str) -> ServerAssignor:
    """The server-side assignor called `name`; UnknownServerAssignor (a KeyError) names the known ones."""
    try:
        return SERVER_ASSIGNORS[name]
    except KeyError:
        raise UnknownServerAssignor(f"unknown server-side assignor {name!r}; known: "
                                    f"{', '.join(SERVER_ASSIGNORS)}") from None


__all__ = ["DEFAULT_SERVER_ASSIGNORS", "MemberSpec", "RangeAssignor", "SERVER_ASSIGNORS", "ServerAssignor",
           "TargetAssignment", "UniformAssignor", "UnknownServerAssignor", "server_assignor"]
