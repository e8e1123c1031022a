"""A power cut, modelled: what of a data directory is on the device when the power goes.

A power cut (or a kernel crash) loses whatever the OS had not yet written to the device. A
program knows something *is* on the device only from a sync that returned: `fsync`/`fdatasync` of
a file covers its bytes, and `fsync` of a directory covers its names (POSIX promises a created,
renamed or removed name only once its directory is synced). This model takes the worst case those
rules allow:

- a file keeps exactly the length it had at its last successful sync (nothing if never synced);
- a directory keeps exactly the names it had at its last successful sync (none if never synced);
  the data directory itself is assumed to be there.

Not modelled: what the OS writes back without being asked (Linux writes dirty pages back after
about 30 s, so a real cut usually keeps more: `cut(..., torn=rng)` keeps a random part of each
unsynced tail, its end possibly zeros, to exercise recovery on such tails), a device that
acknowledges syncs it has not done (a volatile write cache without flushes), and damage inside
synced bytes. A synced name whose file has since been replaced or removed (a rename whose
directory was not synced yet) cannot be rebuilt from the live directory: it is listed in
`CutReport.unmodelled` rather than guessed.

The tracker learns of syncs in one of two ways: `install()` wraps `os.fsync` and `os.fdatasync` in
this process; `python -m grouplab.durability.powercut JOURNAL coordinator ...` runs the grouplab
CLI with them wrapped and appends each sync to JOURNAL as a JSON line, which `from_journal` reads
back after the process has been stopped (SIGSTOP: the moment of the cut).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

FileKey = tuple[int, int]  # (st_dev, st_ino): a file is tracked by inode, so renames keep its syncs


@dataclass
class CutReport:
    """What a modelled cut kept and dropped."""

    files: int = 0  # files in the copy
    kept_bytes: int = 0
    dropped_bytes: int = 0  # unsynced tails, and the whole of files whose names were not synced
    dropped_names: list[str] = field(default_factory=list)  # live names a cut loses (directory not synced since)
    unmodelled: list[str] = field(default_factory=list)  # synced names whose contents are gone from the live directory


class SyncTracker:
    """What was synced, per file (bytes) and per directory (names), as of each one's last sync."""

    def __init__(self) -> None:
        self.files: dict[FileKey, int] = {}
        self.dirs: dict[FileKey, dict[str, FileKey]] = {}
        self.syncs = 0
        self._journal_fd: int | None = None
        self._saved: tuple[Callable[[Any], None], Callable[[Any], None]] | None = None

    # ------------------------------------------------------------------ learning of syncs

    def note(self, fd: int) -> None:
        """Record what a sync of `fd` that just returned made durable."""
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        self.syncs += 1
        line: dict[str, Any]
        if stat.S_ISDIR(st.st_mode):
            names = _names(fd)
            self.dirs[key] = names
            line = {"dir": key, "names": names}
        elif stat.S_ISREG(st.st_mode):
            self.files[key] = st.st_size
            line = {"file": key, "size": st.st_size}
        else:
            return
        if self._journal_fd is not None:
            os.write(self._journal_fd, (json.dumps(line) + "\n").encode())

    def install(self, journal: str | Path | None = None) -> "SyncTracker":
        """Wrap os.fsync and os.fdatasync in this process (and append each sync to `journal`)."""
        if self._saved is not None:
            raise RuntimeError("already installed")
        if journal is not None:
            self._journal_fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        real_fsync, real_fdatasync = os.fsync, os.fdatasync
        self._saved = (real_fsync, real_fdatasync)

        def wrap(real: Callable[[Any], None]) -> Callable[[Any], None]:
            def synced(fd: Any) -> None:
                real(fd)  # only a sync that returned counts
                self.note(fd if isinstance(fd, int) else fd.fileno())
            return synced

        setattr(os, "fsync", wrap(real_fsync))  # setattr: the wrappers take what the originals take
        setattr(os, "fdatasync", wrap(real_fdatasync))
        return self

    def uninstall(self) -> None:
        if self._saved is not None:
            setattr(os, "fsync", self._saved[0])
            setattr(os, "fdatasync", self._saved[1])
            self._saved = None
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None

    def __enter__(self) -> "SyncTracker":
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    @classmethod
    def from_journal(cls, path: str | Path) -> "SyncTracker":
        """The tracker a journal describes (a torn last line, a sync cut short, is ignored)."""
        tracker = cls()
        with contextlib.suppress(FileNotFoundError):
            for raw in Path(path).read_text().splitlines():
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                tracker.syncs += 1
                if "dir" in line:
                    tracker.dirs[_key(line["dir"])] = {n: _key(k) for n, k in line["names"].items()}
                else:
                    tracker.files[_key(line["file"])] = line["size"]
        return tracker

    # ------------------------------------------------------------------ the cut

    def cut(self, root: str | Path, dest: str | Path, torn: random.Random | None = None) -> CutReport:
        """Copy `root` to `dest` (which must not exist) as the device would hold it after a power
        cut now: synced names, synced bytes. `torn`: also keep a random part of each unsynced tail."""
        report = CutReport()
        Path(dest).mkdir(parents=True)
        self._cut_dir(Path(root), Path(dest), report, torn)
        return report

    def _cut_dir(self, src: Path, dst: Path, report: CutReport, torn: random.Random | None) -> None:
        st = src.stat()
        kept = self.dirs.get((st.st_dev, st.st_ino), {})
        with contextlib.closing(_OpenDir(src)) as d:
            live = _names(d.fd)
        for name in sorted(live.keys() - kept.keys()):
            report.dropped_names.append(str(src / name))
            report.dropped_bytes += _tree_size(src / name)
        for name, key in sorted(kept.items()):
            path = src / name
            if live.get(name) != key:
                report.unmodelled.append(str(path))
                continue
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode):
                (dst / name).mkdir()
                self._cut_dir(path, dst / name, report, torn)
            elif stat.S_ISREG(mode):
                self._cut_file(path, key, dst / name, report, torn)

    def _cut_file(self, path: Path, key: FileKey, out: Path, report: CutReport, torn: random.Random | None) -> None:
        with path.open("rb") as f:
            data = f.read()
        keep = min(self.files.get(key, 0), len(data))
        kept = data[:keep]
        if torn is not None and len(data) > keep:
            extra = data[keep:keep + torn.randint(0, len(data) - keep)]
            zeros = torn.randint(0, len(extra)) if torn.random() < 0.5 else 0  # the size reached the disk, not the data
            kept += extra[:len(extra) - zeros] + b"\0" * zeros
        out.write_bytes(kept)
        report.files += 1
        report.kept_bytes += len(kept)
        report.dropped_bytes += len(data) - len(kept)


class _OpenDir:
    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)

    def close(self) -> None:
        os.close(self.fd)


def _key(pair: list[int]) -> FileKey:
    return pair[0], pair[1]


def _names(dir_fd: int) -> dict[str, FileKey]:
    """Each name in the directory open as `dir_fd` and the inode it names."""
    names: dict[str, FileKey] = {}
    for name in os.listdir(dir_fd):
        with contextlib.suppress(FileNotFoundError):
            s = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            names[name] = (s.st_dev, s.st_ino)
    return names


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str]) -> int:
    """`python -m grouplab.durability.powercut JOURNAL ARGS...`: the grouplab CLI with ARGS, its
    syncs appended to JOURNAL."""
    SyncTracker().install(argv[0])
    from grouplab.cli import main as cli_main

    return cli_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
