"""HTTP for flows with `http: PATH`: the request a client sends and what is read from the answer
(shared by the namespace client, the balancers' health checks and the container client's output; only
`exchange` does I/O, on a socket it is given)."""

from __future__ import annotations

import re
import socket

STATUS = re.compile(r"HTTP/\d(?:\.\d)?\s+(\d{3})")
MAX_BODY = 512
MAX_RESPONSE = 65536


def exchange(s: socket.socket, req: bytes, limit: int = MAX_RESPONSE) -> bytes:
    """Send `req` on the connected socket and read the answer until the server closes, at most `limit` bytes
    (the socket's own timeout bounds each read)."""
    s.sendall(req)
    buf = b""
    while len(buf) < limit:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def request(dst: str, port: int, path: str, marker: str) -> bytes:
    """An HTTP/1.0 GET carrying the connection's marker (in User-Agent) so the payload names it."""
    return (f"GET {path} HTTP/1.0\r\nHost: {dst}:{port}\r\nUser-Agent: {marker}\r\n"
            "Accept: */*\r\nConnection: close\r\n\r\n").encode()


def parse_response(raw: bytes) -> tuple[int | None, str]:
    """(status, body) of an HTTP response; status None when it is not one."""
    text = raw.decode(errors="replace")
    head, _, body = text.partition("\r\n\r\n")
    m = STATUS.match(head)
    return (int(m.group(1)) if m else None), body[:MAX_BODY]


def status_in(text: str) -> int | None:
    """The last HTTP status line in a client's output (wget -S / curl -i print the headers)."""
    found = STATUS.findall(text)
    return int(found[-1]) if found else None


def pod_named(text: str, candidates: list[str]) -> str | None:
    """The candidate pod whose name the answer carries (a page naming the pod), if exactly one does."""
    named = [c for c in candidates if re.search(rf"(?<![\w.-]){re.escape(c)}(?![\w.-])", text)]
    return named[0] if len(named) == 1 else None
