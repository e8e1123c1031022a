"""A TCP forwarder to a ZooKeeper server that can be cut: the way to crash a kazoo client without
it closing its session (kazoo keeps pinging from its own thread while its process lives). `cut()`
drops every connection and refuses new ones, so the server hears nothing more from that client and
expires its session after the timeout, as it would a crashed consumer's."""

from __future__ import annotations

import socket
import threading


class CuttableForwarder:
    """127.0.0.1:port -> the server, until `cut()`: then every connection is dropped and new ones
    are refused, so a client behind it goes silent without closing its session."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream_port = upstream_port
        self.upstream_host = upstream_host
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.cut_off = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.cut_off:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((self.upstream_host, self.upstream_port))
            except OSError:
                client.close()
                continue
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                if self.cut_off:
                    return
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        self.cut_off = True
        self.listener.close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
