"""kube-proxy's health-check servers, served from the process that runs the lab (standard library only).

kube-proxy runs two kinds of HTTP server on every node (k8s.io/kubernetes pkg/proxy/healthcheck):

- the proxy's own, on `healthzBindAddress` (0.0.0.0:10256): `/healthz` (and, 1.28+, `/livez`), 200
  while its rules are in sync, a small JSON body with the times (read at 1.10, 1.13, 1.16-1.19,
  1.22-1.28, 1.30-1.37);
- one per Service that needs it (type LoadBalancer, externalTrafficPolicy Local) on its
  `healthCheckNodePort`, answering every path: 200 when the node has a local ready endpoint (and,
  1.27+, the proxy is healthy), else 503, the body naming the Service and `localEndpoints`, the number
  of distinct ready endpoint addresses on this node (terminating ones are not counted: the check fails
  on a node left with only those, which is how a load balancer drains it).

Go's net/http writes the response: status line in the request's protocol, the handler's headers
sorted, then Date and Content-Length, `Connection: close` when an HTTP/1.1 client asked for it
(checked against a Go 1.26 net/http server). `release_facts` is the one home of what changed by release.

Each connection is answered in its own thread and bounded by READ_TIMEOUT; `HealthServers.close()`
closes every socket (a socket holds its namespace, which outlives `ip netns del` until it closes).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

HEALTHZ_PORT = 10256
READ_TIMEOUT = 2.0
MAX_REQUEST = 8192
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}


@dataclass(frozen=True)
class ServiceCheck:
    """One Service's health check on one node: its name, healthCheckNodePort and local ready endpoints."""

    namespace: str
    name: str
    port: int
    endpoints: int

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "port": self.port, "endpoints": self.endpoints}


@dataclass(frozen=True)
class HealthSpec:
    """kube-proxy's health servers on one node: where they listen, which release answers, the checks."""

    ns: str
    node: str
    minor: int
    bind: tuple[str, ...] = ("0.0.0.0",)  # the service checks' addresses (nodePortAddresses)
    healthz: str = f"0.0.0.0:{HEALTHZ_PORT}"
    services: tuple[ServiceCheck, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"ns": self.ns, "node": self.node, "minor": self.minor, "bind": list(self.bind),
                "healthz": self.healthz, "services": [s.to_json() for s in self.services]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HealthSpec:
        """The spec `to_json` wrote (the detached lab server reads it back)."""
        return cls(ns=data["ns"], node=data["node"], minor=int(data["minor"]), bind=tuple(data["bind"]),
                   healthz=data["healthz"], services=tuple(ServiceCheck(**s) for s in data["services"]))


@dataclass(frozen=True)
class ReleaseFacts:
    """What kube-proxy's health servers send at one release (first release of each, as read upstream)."""

    nosniff: bool  # X-Content-Type-Options: nosniff on both servers (1.17)
    proxy_healthy: bool  # "serviceProxyHealthy" in the service check; 200 needs it too (1.27)
    weight: bool  # X-Load-Balancing-Endpoint-Weight: <local endpoints> (1.28)
    livez: bool  # /livez beside /healthz, and "nodeEligible" in /healthz (1.28)
    marshalled: bool  # /healthz and /livez as json.Marshal of ProxyHealth, with per-family status (1.33)
    node_addresses: bool  # the service checks listen on the node's nodePortAddresses, not on all (1.23)


def release_facts(minor: int) -> ReleaseFacts:
    """The health servers' behaviour at kube-proxy 1.`minor`."""
    return ReleaseFacts(nosniff=minor >= 17, proxy_healthy=minor >= 27, weight=minor >= 28, livez=minor >= 28,
                        marshalled=minor >= 33, node_addresses=minor >= 23)


def go_time_string(epoch_ns: int, mono_ns: int) -> str:
    """Go's time.Time.String() of a time.Now() in UTC: `2006-01-02 15:04:05.999999999 +0000 UTC m=+S.NNNNNNNNN`."""
    whole, nanos = divmod(epoch_ns, 1_000_000_000)
    frac = f".{nanos:09d}".rstrip("0").rstrip(".")
    return (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(whole)) + f"{frac} +0000 UTC "
            f"m=+{mono_ns // 1_000_000_000}.{mono_ns % 1_000_000_000:09d}")


def go_time_json(epoch_ns: int) -> str:
    """Go's JSON form of a UTC time.Time (RFC 3339 with trailing zeros of the nanoseconds dropped)."""
    whole, nanos = divmod(epoch_ns, 1_000_000_000)
    frac = f".{nanos:09d}".rstrip("0").rstrip(".")
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f"{frac}Z"


def service_body(check: ServiceCheck, facts: ReleaseFacts) -> str:
    """The service check's body: tab-indented JSON, as kube-proxy's dedented format string prints it."""
    lines = ["{", '\t"service": {', f'\t\t"namespace": {json.dumps(check.namespace)},',
             f'\t\t"name": {json.dumps(check.name)}', "\t},"]
    if facts.proxy_healthy:
        lines += [f'\t"localEndpoints": {check.endpoints},', '\t"serviceProxyHealthy": true']
    else:
        lines += [f'\t"localEndpoints": {check.endpoints}']
    return "\n".join([*lines, "}"])


def proxy_body(path: str, facts: ReleaseFacts, now: int, monotonic: int, synced: int) -> str:
    """The body of /healthz or /livez of a healthy, eligible kube-proxy at `now` (ns since the epoch;
    `monotonic` ns since it started), its rules synced at `synced`. 1.33+ lists one status per proxier:
    only IPv4 here, the family kpemu programs (a real node whose kernel also has IPv6 iptables runs a
    dual-stack proxier and lists IPv6 beside it)."""
    if facts.marshalled:
        doc: dict[str, Any] = {"lastUpdated": go_time_json(now), "currentTime": go_time_json(now)}
        if path == "/healthz":
            doc["nodeEligible"] = True
        doc.update(healthy=True, status={"IPv4": {"lastUpdated": go_time_json(synced), "healthy": True}})
        return json.dumps(doc, separators=(",", ":"))
    stamp = json.dumps(go_time_string(now, monotonic))
    if path == "/healthz" and facts.livez:
        return f'{{"lastUpdated": {stamp},"currentTime": {stamp}, "nodeEligible": true}}'
    return f'{{"lastUpdated": {stamp},"currentTime": {stamp}}}'


def _request_line(raw: bytes) -> tuple[str, str, str, dict[str, str]] | None:
    """(method, path without query, protocol, lower-cased headers) of an HTTP request head, None if it is none."""
    head = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    first, *rest = head.split("\r\n")
    parts = first.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1].startswith("/"):
        return None
    headers = {}
    for line in rest:
        name, sep, value = line.partition(":")
        if not sep:
            return None
        headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1].split("?", 1)[0], parts[2], headers


def respond(raw: bytes, check: ServiceCheck | None, facts: ReleaseFacts, now: int, monotonic: int,
            synced: int) -> tuple[bytes, bool]:
    """The bytes kube-proxy's server answers the request head `raw` with, and whether it keeps the
    connection open; `check` None: the proxy's own server (/healthz, /livez), else that Service's.
    Times in nanoseconds, as `proxy_body` takes them."""
    parsed = _request_line(raw)
    if parsed is None or (parsed[2] == "HTTP/1.1" and "host" not in parsed[3]):
        text = "400 Bad Request" if parsed is None else "400 Bad Request: missing required Host header"
        return (f"HTTP/1.1 {text}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
                f"{text}").encode(), False
    method, path, proto, headers = parsed
    wants_close = headers.get("connection", "").lower() == "close"
    keep = not wants_close if proto == "HTTP/1.1" else headers.get("connection", "").lower() == "keep-alive"
    names: dict[str, str] = {}
    if check is not None:
        status = 200 if check.endpoints > 0 else 503
        body = service_body(check, facts)
        names["Content-Type"] = "application/json"
        if facts.weight:
            names["X-Load-Balancing-Endpoint-Weight"] = str(check.endpoints)
    elif path == "/healthz" or (path == "/livez" and facts.livez):
        status, body = 200, proxy_body(path, facts, now, monotonic, synced)
        names["Content-Type"] = "application/json"
    else:
        status, body = 404, "404 page not found\n"
        names["Content-Type"] = "text/plain; charset=utf-8"
    if facts.nosniff or status == 404:
        names["X-Content-Type-Options"] = "nosniff"
    lines = [f"{proto} {status} {REASONS[status]}", *(f"{k}: {names[k]}" for k in sorted(names)),
             f"Date: {formatdate(now // 1_000_000_000, usegmt=True)}", f"Content-Length: {len(body.encode())}"]
    if proto == "HTTP/1.1" and wants_close:
        lines.append("Connection: close")
    elif proto == "HTTP/1.0" and keep:
        lines.append("Connection: keep-alive")
    payload = b"" if method == "HEAD" else body.encode()
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload, keep


class HealthServers:
    """Every node's health servers in this process: `add()` a node's sockets (opened in its namespace),
    `close()` them all."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.started = time.monotonic_ns()
        self.synced = time.time_ns()  # kube-proxy's last sync: the lab's rules were applied before this

    def add(self, spec: HealthSpec, sockets: list[tuple[ServiceCheck | None, socket.socket]]) -> None:
        """Serve `sockets` (each with the Service it checks, None for /healthz) of node `spec`."""
        facts = release_facts(spec.minor)
        for check, sock in sockets:
            self.sockets.append(sock)
            threading.Thread(target=self._accept, args=(sock, check, facts), daemon=True,
                             name=f"health-{spec.node}").start()

    def _accept(self, sock: socket.socket, check: ServiceCheck | None, facts: ReleaseFacts) -> None:
        with contextlib.suppress(OSError):  # closed by close()
            while True:
                conn, _ = sock.accept()
                threading.Thread(target=self._serve, args=(conn, check, facts), daemon=True).start()

    def _serve(self, conn: socket.socket, check: ServiceCheck | None, facts: ReleaseFacts) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(READ_TIMEOUT)
            buf = b""
            while len(buf) < MAX_REQUEST:
                if b"\r\n\r\n" not in buf:
                    chunk = conn.recv(MAX_REQUEST)
                    if not chunk:
                        return
                    buf += chunk
                    continue
                head, _, buf = buf.partition(b"\r\n\r\n")
                answer, keep = respond(head + b"\r\n\r\n", check, facts, time.time_ns(),
                                       time.monotonic_ns() - self.started, self.synced)
                conn.sendall(answer)
                if not keep:
                    return

    def close(self) -> None:
        """Close every socket (wakes the threads blocked in accept())."""
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.sockets.clear()


def _listen(address: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, port))
    s.listen(128)
    return s


def serve_health(specs: list[HealthSpec]) -> HealthServers:
    """Every node's health servers of `specs`, listening in its namespace; `close()` when done."""
    from kpemu.kernel import netns as nsmod

    health = HealthServers()
    try:
        for spec in specs:
            with nsmod.inside(spec.ns):
                health.add(spec, open_health_sockets(spec))
    except BaseException:
        health.close()
        raise
    return health


def open_health_sockets(spec: HealthSpec) -> list[tuple[ServiceCheck | None, socket.socket]]:
    """The listening sockets of one node's health servers, in the calling thread's network namespace."""
    host, _, port = spec.healthz.rpartition(":")
    out: list[tuple[ServiceCheck | None, socket.socket]] = [(None, _listen(host, int(port)))]
    for check in spec.services:
        out += [(check, _listen(address, check.port)) for address in spec.bind]
    return out
