"""The server every pod runs, in-process (`PodServers`) or as `python -m kpemu.traffic.server --name POD
--tcp 80 --udp 53`.

Each TCP connection gets one line back, `<marker>:reply:<pod>`, after which the server waits
(bounded) for the client to close first, so every connection ends the same way on the wire.
UDP datagrams are answered the same way. The command prints `ready` once every socket is bound.
Standard library only. A run serves every pod from the one process that executes it: sockets are
opened inside each pod's namespace and keep it, so no process per pod has to start (seconds each
in a software-emulated guest).
"""

from __future__ import annotations

import contextlib
import re
import socket
import sys
import threading

from kpemu.traffic.markers import reply_text

READ_TIMEOUT = 2.0
MAX_LINE = 256


_HTTP_REQUEST = re.compile(r"^[A-Z]+ \S+ HTTP/1\.[01]$")


def _answer(data: bytes, name: str) -> bytes:
    """The reply to a request line: the marker and the pod's name; to an HTTP request (curl on a lab
    deployed with --serve) the same as an HTTP/1.0 response's body."""
    line = data.split(b"\n", 1)[0].decode(errors="replace").strip()
    if _HTTP_REQUEST.match(line):
        body = (reply_text("kpemu:http", name) + "\n").encode()
        return (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                % len(body)) + body
    return (reply_text(line or "kpemu:?:?", name) + "\n").encode()


def _serve_tcp_conn(conn: socket.socket, name: str) -> None:
    with conn:
        conn.settimeout(READ_TIMEOUT)
        buf = b""
        with contextlib.suppress(OSError):
            while b"\n" not in buf and len(buf) < MAX_LINE:
                chunk = conn.recv(MAX_LINE)
                if not chunk:
                    break
                buf += chunk
            conn.sendall(_answer(buf, name))
            while conn.recv(MAX_LINE):  # wait for the client's FIN (bounded by READ_TIMEOUT)
                pass


def _tcp_loop(sock: socket.socket, name: str) -> None:
    with contextlib.suppress(OSError):  # closed by PodServers.close()
        while True:
            conn, _ = sock.accept()
            threading.Thread(target=_serve_tcp_conn, args=(conn, name), daemon=True).start()


def _udp_loop(sock: socket.socket, name: str) -> None:
    with contextlib.suppress(OSError):
        while True:
            data, peer = sock.recvfrom(MAX_LINE)
            if not data:  # shut down (clients never send empty datagrams)
                return
            with contextlib.suppress(OSError):
                sock.sendto(_answer(data, name), peer)


def open_sockets(tcp: list[int], udp: list[int], sctp: tuple[int, ...] | list[int] = ()
                 ) -> list[tuple[str, socket.socket]]:
    """Bound (and, for TCP and SCTP, listening) sockets in the calling thread's network namespace; SCTP
    sockets are one-to-one (SOCK_STREAM), answered as TCP connections are."""
    out = []
    streams = [(port, 0) for port in tcp] + [(port, socket.IPPROTO_SCTP) for port in sctp]
    for port, proto in streams:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(128)
        out.append(("tcp", s))
    for port in udp:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", port))
        out.append(("udp", s))
    return out


class PodServers:
    """Servers for many pods in this process: `add()` sockets opened in a pod's namespace, `close()` all.

    Closing matters: a socket holds its namespace, which outlives `ip netns del` until it closes.
    """

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []

    def add(self, name: str, sockets: list[tuple[str, socket.socket]]) -> None:
        for kind, sock in sockets:
            self.sockets.append(sock)
            loop = _tcp_loop if kind == "tcp" else _udp_loop
            threading.Thread(target=loop, args=(sock, name), daemon=True, name=f"serve-{name}").start()

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()/recvfrom()
            sock.close()
        self.sockets.clear()


def main(argv: list[str] | None = None) -> int:
    """Bind every port, print `ready`, serve until killed."""
    import argparse

    ap = argparse.ArgumentParser(prog="kpemu.traffic.server")
    ap.add_argument("--name", required=True)
    ap.add_argument("--tcp", type=int, action="append", default=[])
    ap.add_argument("--udp", type=int, action="append", default=[])
    args = ap.parse_args(argv)
    servers = PodServers()
    servers.add(args.name, open_sockets(args.tcp, args.udp))
    print("ready", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())


def kernel_has_sctp() -> bool:
    """Whether this kernel opens SCTP sockets (module sctp), tried with a socket as a flow would open one."""
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP).close()
    except OSError:
        return False
    return True


def serve_pods(pods: list[tuple[str, str, list[int], list[int], list[int]]]) -> PodServers:
    """Serve every (pod name, netns, TCP ports, UDP ports, SCTP ports) from this process; `close()` when done."""
    from kpemu.kernel import netns as nsmod

    servers = PodServers()
    for name, ns, tcp, udp, sctp in pods:
        with nsmod.inside(ns):
            servers.add(name, open_sockets(tcp, udp, sctp))
    return servers
