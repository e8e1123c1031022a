"""A real ZooKeeper for the tests: Debian's `zookeeper` package (3.8) run standalone on a free
port with a temporary dataDir, installed by the test set-up when it runs as root (CI does).
(grouplab/zk/forwarder.py cuts a client off without closing its session: a crash.)"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
CONF_DIR = Path("/etc/zookeeper/conf")
INSTALL = "apt-get install -y zookeeper"


def missing() -> str | None:
    """Why a ZooKeeper server cannot be started here, or None."""
    if not ZOOKEEPER_JAR.exists():
        return f"Debian's zookeeper package is not installed ({ZOOKEEPER_JAR} is missing)"
    if shutil.which("java") is None:
        return "java is not on PATH (ZooKeeper needs a JRE; Debian's zookeeper package brings one)"
    return None


def install_if_root() -> None:
    """As root, install Debian's zookeeper package when it is missing (CI runs as root)."""
    if missing() is None or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    # scripts/test installs it before the tests start; this is for a bare `pytest` as root, where
    # parallel workers (pytest -n) take turns: apt holds one lock for everyone.
    with open(os.path.join(tempfile.gettempdir(), "grouplab-apt.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if missing() is None:
            return
        if subprocess.run(INSTALL.split(), **quiet).returncode != 0:  # type: ignore[call-overload]
            subprocess.run(["apt-get", "update"], **quiet)  # type: ignore[call-overload]
            subprocess.run(INSTALL.split(), **quiet)  # type: ignore[call-overload]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ZooKeeperServer:
    """`java ... ZooKeeperServerMain zoo.cfg`, standalone, tickTime 500 ms (sessions from 1 s)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="grouplab-zk-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        (self.dir / "data").mkdir()
        cfg = self.dir / "zoo.cfg"
        cfg.write_text(f"tickTime=500\ndataDir={self.dir / 'data'}\nclientPort={self.port}\n"
                       "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxSessionTimeout=60000\n")
        classpath = f"{CONF_DIR}:{ZOOKEEPER_JAR}"
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", classpath, f"-Dzookeeper.log.dir={self.dir}",
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
            stdout=open(self.dir / "server.log", "wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}: "
                                   f"{(self.dir / 'server.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
            except OSError:
                time.sleep(0.1)
                continue
            if self._answers(deadline):
                return
        self.stop()
        raise RuntimeError(f"ZooKeeper did not listen on {self.port} within {timeout_s} s")

    def _answers(self, deadline: float) -> bool:
        """Listening is not serving: a JVM still warming up lets a session wait past a client's
        connection timeout. Ready when a session opens."""
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(hosts=self.hosts)
        try:
            client.start(timeout=max(0.5, deadline - time.monotonic()))
            return True
        except KazooTimeoutError:
            return False
        finally:
            client.stop()
            client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
