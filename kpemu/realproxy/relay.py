"""A node's way to the API server: a TCP relay listening on the loopback of the node's namespace and
joining each connection to the API server on the host's loopback.

A socket belongs to the namespace it was made in (setns(2) for its socket() only, kpemu.kernel.netns),
so the listener lives in the node's namespace and the outgoing sockets in this process's: no interface,
route or rule is added to the lab or the host, and no control-plane packet crosses a lab interface or
enters a capture. The relay is threads of the process that runs the lab: it ends with that process.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from kpemu.kernel import netns

CHUNK = 65536


class Relay:
    """Accepts on 127.0.0.1:`port` in namespace `ns` and carries bytes both ways to `target`."""

    def __init__(self, ns: str, port: int, target: tuple[str, int]):
        self.ns, self.port, self.target = ns, port, target
        with netns.inside(ns):
            self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(16)
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.connections = 0
        # made here, in this process's namespace: the threads' own sockets are made there too
        threading.Thread(target=self._accept, name=f"relay {ns}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                inner, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                outer = socket.create_connection(self.target, timeout=10)
                outer.settimeout(None)
            except OSError:
                inner.close()
                continue
            with self._lock:
                if self._closed:
                    inner.close()
                    outer.close()
                    return
                self._open |= {inner, outer}
                self.connections += 1
            for a, b in ((inner, outer), (outer, inner)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Stop listening and cut every connection."""
        with self._lock:
            self._closed = True
            open_now, self._open = self._open, set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for s in open_now:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def get_in(ns: str, port: int, path: str, timeout: float = 5.0) -> str:
    """The body of `GET http://127.0.0.1:port/path` asked from inside namespace `ns` (kube-proxy's metrics),
    over a socket made there; OSError when nothing answers."""
    with netns.inside(ns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with sock:
        sock.settimeout(timeout)
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        chunks = []
        while data := sock.recv(CHUNK):
            chunks.append(data)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    if " 200 " not in status + " ":
        raise OSError(f"GET {path}: {status or 'no answer'}")
    return body.decode(errors="replace")
