"""What a simulation run counts (grouplab/sim/world.py keeps one SimStats per run; its plugins,
grouplab/sim/delivery.py, invariants.py and fault_rules.py, add to it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SimStats:
    events: int = 0
    messages_sent: int = 0
    messages_delivered: int = 0
    messages_lost: int = 0
    messages_duplicated: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    generations: int = 0
    rebalance_durations_ms: list[int] = field(default_factory=list)
    partitions_moved: int = 0
    # A consumer-protocol group (KIP-848) has no generations: its group epoch moves (each with a
    # cause) and it converges back to Stable (grouplab/epochs.py). `partitions_moved` counts its
    # moves too: a partition the coordinator gave to another member than its last holder.
    group_epochs: int = 0
    epoch_causes: dict[str, int] = field(default_factory=dict)
    convergence_durations_ms: list[int] = field(default_factory=list)  # first epoch move -> Stable again
    unowned_partition_ms: int = 0
    settled_at_ms: int | None = None
    quiet_at_ms: int = 0
    final_imbalance: int | None = None
    # Delivery runs only (scenario [delivery]): input records and what became of them.
    produced: int | None = None
    processed: int | None = None
    committed: int | None = None
    lost: int | None = None
    duplicated: int | None = None
    duplicated_uncommitted: int | None = None  # the same count as a read_uncommitted reader would make
