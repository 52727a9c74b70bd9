"""The server every pod runs: `python -m kpemu.traffic.server --name POD --tcp 80 --udp 53`.

Each TCP connection gets one line back, `<marker>:reply:<pod>`, after which the server waits
(bounded) for the client to close first, so every connection ends the same way on the wire.
UDP datagrams are answered the same way. Prints `ready` once every socket is bound.
Standard library only: it starts in tens of milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import threading

from kpemu.traffic.markers import reply_text

READ_TIMEOUT = 2.0
MAX_LINE = 256


def _answer(data: bytes, name: str) -> bytes:
    marker = data.split(b"\n", 1)[0].decode(errors="replace").strip() or "kpemu:?:?"
    return (reply_text(marker, name) + "\n").encode()


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
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=_serve_tcp_conn, args=(conn, name), daemon=True).start()


def _udp_loop(sock: socket.socket, name: str) -> None:
    while True:
        data, peer = sock.recvfrom(MAX_LINE)
        with contextlib.suppress(OSError):
            sock.sendto(_answer(data, name), peer)


def main(argv: list[str] | None = None) -> int:
    """Bind every port, print `ready`, serve until killed."""
    ap = argparse.ArgumentParser(prog="kpemu.traffic.server")
    ap.add_argument("--name", required=True)
    ap.add_argument("--tcp", type=int, action="append", default=[])
    ap.add_argument("--udp", type=int, action="append", default=[])
    args = ap.parse_args(argv)
    threads = []
    for port in args.tcp:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(128)
        threads.append(threading.Thread(target=_tcp_loop, args=(s, args.name), daemon=True))
    for port in args.udp:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", port))
        threads.append(threading.Thread(target=_udp_loop, args=(s, args.name), daemon=True))
    for t in threads:
        t.start()
    print("ready", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
