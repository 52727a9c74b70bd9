"""Trace one flow's packets through nftables in node namespaces with `nft monitor trace` (effects).

nftables mode's equivalent of kernel/trace.py: a table `ip kpemu-trace` with prerouting and
output chains at priority -350 (before conntrack and every kube-proxy chain) whose rules set
`meta nftrace set 1` for the flow's packets only (the tuples of trace.trace_rule_args: client ->
service, -> each backend, and the replies), then `nft monitor trace` in every node namespace,
confirmed subscribed to the trace multicast group before traffic is sent. Stopping deletes the
table, so nothing else in the namespace is touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kpemu.errors import ApplyError
from kpemu.kernel.netns import popen_in, run_in
from kpemu.kernel.trace import CONFIRM_TIMEOUT, DRAIN_SECONDS, FlowMatch, _monitor_socket_ready
from kpemu.pace import scaled

TRACE_TABLE = "kpemu-trace"


def trace_table_text(m: FlowMatch) -> str:
    """`nft -f` input creating the trace table for one flow (pure)."""
    p = m.proto.lower()
    syn = " tcp flags & syn == syn" if m.syn_only and p == "tcp" else ""
    matches = [
        f"{f'ip saddr {m.client} ' if m.client else ''}ip daddr {m.dst} {p} dport {m.dport}",
        f"ip saddr {m.dst} {f'ip daddr {m.client} ' if m.client else ''}{p} sport {m.dport}",
    ]
    for ip, port in m.backends:
        matches += [f"ip daddr {ip} {p} dport {port}", f"ip saddr {ip} {p} sport {port}"]
    lines = [f"add table ip {TRACE_TABLE}"]
    for chain, hook in (("pre", "prerouting"), ("out", "output")):
        lines.append(f"add chain ip {TRACE_TABLE} {chain} {{ type filter hook {hook} priority -350 ; }}")
        lines += [f"add rule ip {TRACE_TABLE} {chain} {x}{syn} meta nftrace set 1" for x in matches]
    return "\n".join(lines) + "\n"


@dataclass
class NftTraceSession:
    """`nft monitor trace` running in node namespaces for one flow; `stop()` returns their output."""

    match: FlowMatch
    nodes: dict[str, str]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    installed: list[str] = field(default_factory=list)
    unavailable: str | None = None
    output: dict[str, str] = field(default_factory=dict)

    def stop(self) -> dict[str, str]:
        """Let the last events arrive, stop the monitors, delete the trace tables; node -> text."""
        if self.procs:
            time.sleep(DRAIN_SECONDS)
        for node, proc in self.procs.items():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=2)
            path = self.files[node]
            self.output[node] = path.read_text(errors="replace") if path.exists() else ""
            path.unlink(missing_ok=True)
        self.procs.clear()
        for node in list(self.installed):
            run_in(self.nodes[node], ["nft", "delete", "table", "ip", TRACE_TABLE])
            self.installed.remove(node)
        return dict(self.output)

    def __enter__(self) -> NftTraceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_nft_tracing(nodes: dict[str, str], match: FlowMatch) -> NftTraceSession:
    """Install the flow's trace table and start a confirmed `nft monitor trace` in every namespace."""
    session = NftTraceSession(match, dict(nodes))
    argv = ["nft", "monitor", "trace"]
    stdbuf = shutil.which("stdbuf")
    if stdbuf:  # nft writes through stdio: line-buffer it so nothing is lost at SIGTERM
        argv = [stdbuf, "-oL", *argv]
    try:
        text = trace_table_text(match)
        for node, ns in nodes.items():
            res = run_in(ns, ["nft", "-f", "-"], input=text)
            if res.returncode != 0:
                raise ApplyError(f"{ns}: could not add the nftrace table: {res.stderr.strip()}")
            session.installed.append(node)
        for node, ns in nodes.items():
            fd, name = tempfile.mkstemp(prefix=f"kpemu-nfttrace-{node}-", suffix=".txt")
            session.files[node] = Path(name)
            with os.fdopen(fd, "w") as out:
                session.procs[node] = popen_in(ns, argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + scaled(CONFIRM_TIMEOUT)
        waiting = set(session.procs)
        while waiting and time.monotonic() < deadline:
            waiting = {n for n in waiting if not _monitor_socket_ready(session.procs[n].pid)}
            if waiting:
                time.sleep(0.01)
        if waiting:
            raise ApplyError(f"nft monitor trace did not start listening in {', '.join(sorted(waiting))} "
                             f"within {scaled(CONFIRM_TIMEOUT)}s")
    except BaseException:
        session.stop()
        raise
    return session
