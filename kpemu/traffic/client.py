"""The client a flow runs in its source namespace: N sequential connections, one result each.

In-process (`connections()`, called with the thread inside the source namespace) or as
`python -m kpemu.traffic.client --flow F --dst IP --port P --proto tcp --connections N --timeout T`,
which prints one JSON line per connection.

Every connection is bounded by `--timeout`; the client binds its socket before connecting so the
local port is known even when the connection fails (the ledger finds the SYN by it).
Standard library only.
"""

from __future__ import annotations

import errno
import functools
import json
import socket
import sys
import time
from collections.abc import Iterator

from kpemu.traffic import http
from kpemu.traffic.markers import parse_reply, request_marker


def _payload(marker: str, size: int) -> bytes:
    """The marker line, padded after its newline to `size` bytes (the server answers the first line)."""
    line = (marker + "\n").encode()
    return line + b"." * max(0, size - len(line))


def _tcp(dst: str, port: int, marker: str, timeout: float, path: str | None = None,
         candidates: list[str] | None = None, size: int = 0, proto: int = 0) -> dict:
    """One TCP connection (SCTP association with `proto` IPPROTO_SCTP, a one-to-one socket): the marker
    line (or, with `path`, an HTTP GET) and what comes back."""
    out: dict = {"connected": False, "reply": None, "backend": None, "outcome": "dropped"}
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 0))
    out["sport"] = s.getsockname()[1]
    s.settimeout(timeout)
    try:
        s.connect((dst, port))
        out["connected"] = True
        if path is not None:
            _http(out, s, http.request(dst, port, path, marker), candidates or [])
            return out
        s.sendall(_payload(marker, size))
        buf = b""
        while b"\n" not in buf and len(buf) < 512:
            chunk = s.recv(512)
            if not chunk:
                break
            buf += chunk
        _reply(out, buf)
    except ConnectionRefusedError:
        out["outcome"] = "refused"
    except TimeoutError:
        out["outcome"] = "dropped" if not out["connected"] else "no-reply"
    except OSError as e:
        out["outcome"] = "unreachable" if e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH) else "error"
        out["error"] = str(e)
    finally:
        s.close()
    return out


def _http(out: dict, s: socket.socket, req: bytes, candidates: list[str]) -> None:
    """Send the GET, read the response until the server closes (bounded), parse status and body."""
    status, body = http.parse_response(http.exchange(s, req))
    out.update(status=status, reply=body.strip() or None, backend=http.pod_named(body, candidates),
               outcome="reply" if status is not None else "no-reply")


def _udp(dst: str, port: int, marker: str, timeout: float, size: int = 0, sport: int = 0) -> dict:
    """One datagram and its answer; from `sport` when given (else an ephemeral port)."""
    out: dict = {"connected": False, "reply": None, "backend": None, "outcome": "dropped"}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", sport))
    out["sport"] = s.getsockname()[1]
    s.settimeout(timeout)
    try:
        s.connect((dst, port))
        s.send(_payload(marker, size))
        _reply(out, s.recv(512))
        out["connected"] = out["outcome"] == "reply"
    except ConnectionRefusedError:
        out["outcome"] = "refused"
    except TimeoutError:
        out["outcome"] = "dropped"
    except OSError as e:  # an ICMP error that came back (host unreachable) ends a connected UDP socket's wait
        out["outcome"] = "unreachable" if e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH) else "error"
        out["error"] = str(e)
    finally:
        s.close()
    return out


def _reply(out: dict, buf: bytes) -> None:
    text = buf.decode(errors="replace").strip()
    out["reply"] = text or None
    parsed = parse_reply(text)
    if parsed:
        out["backend"] = parsed[1]
        out["outcome"] = "reply"
    else:
        out["outcome"] = "no-reply"


def main(argv: list[str] | None = None) -> int:
    """Run the connections; print one JSON object per connection."""
    import argparse

    ap = argparse.ArgumentParser(prog="kpemu.traffic.client")
    ap.add_argument("--flow", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--proto", choices=["tcp", "udp", "sctp"], default="tcp")
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--gap", type=float, default=0.0, help="seconds to wait between connections (at most 1)")
    ap.add_argument("--http", metavar="PATH", help="send an HTTP GET of PATH instead of the marker line (TCP)")
    ap.add_argument("--candidates", default="", help="comma-separated pods an HTTP answer may name")
    ap.add_argument("--size", type=int, default=0, help="request bytes (the marker line, padded)")
    ap.add_argument("--sport", type=int, default=0, help="UDP: send every datagram from this local port")
    args = ap.parse_args(argv)
    candidates = [c for c in args.candidates.split(",") if c]
    for res in connections(args.flow, args.dst, args.port, args.proto, args.connections, args.timeout, args.gap,
                           args.http, candidates, args.size, args.sport):
        print(json.dumps(res), flush=True)
    return 0


MAX_CONNECTIONS = 64


def connections(flow: str, dst: str, port: int, proto: str, count: int, timeout: float, gap: float = 0.0,
                http_path: str | None = None, candidates: list[str] | None = None, size: int = 0,
                sport: int = 0) -> Iterator[dict]:
    """Make `count` (1 to 64) sequential connections, `gap` (at most 1) seconds apart; yield each result.
    With `http_path`, each TCP connection is an HTTP GET (the reply names one of `candidates`); otherwise
    the marker line is padded to `size` bytes. UDP with `sport` sends every datagram from that port.

    Sockets are created in the calling thread's network namespace. Bounded: count x (timeout + gap).
    """
    run = functools.partial(_tcp, size=size) if proto == "tcp" else \
        functools.partial(_tcp, size=size, proto=socket.IPPROTO_SCTP) if proto == "sctp" else \
        functools.partial(_udp, size=size, sport=sport)
    if http_path is not None:
        run = functools.partial(_tcp, path=http_path, candidates=candidates or [])
    gap = max(0.0, min(gap, 1.0))
    for i in range(max(1, min(count, MAX_CONNECTIONS))):
        if i and gap:
            time.sleep(gap)
        marker = request_marker(flow, i)
        started = time.monotonic_ns()
        res = run(dst, port, marker, timeout)
        ended = time.monotonic_ns()  # the window a kernel drop read without its packet is joined by
        res.update(index=i, marker=marker, duration=round((ended - started) / 1e9, 6), window=[started, ended])
        yield res


if __name__ == "__main__":
    sys.exit(main())
