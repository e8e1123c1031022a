"""What an acknowledged write survives (docs/durability.md): the harness behind
scripts/bench_durability.py and tests/test_durability.py.

- `powercut.py`: a model of a power cut: which bytes of a data directory were synced when the
  power went, and a copy of the directory holding only those.
- `load.py`: the load (the project's idempotent producer and offset commits over real sockets),
  the ledger of every acknowledged record and commit, and the check after a restart.
- `rounds.py`: one crash round against a real coordinator process (SIGKILL, and the power-cut
  copy of the same moment), the durability profiles, and the cost measurements.
"""
