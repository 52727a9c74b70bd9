"""Trace one flow's packets through netfilter in node namespaces (effects).

For each node namespace: raw-table TRACE rules (PREROUTING and OUTPUT) that match only the
flow's packets and their replies (the original tuple, the tuple after DNAT to any candidate
backend, and the reverse of both), each tagged with a `kpemu-trace:<tag>` comment so stopping
removes exactly them; then `xtables-monitor --trace` in the namespace, confirmed subscribed to
the nftables trace multicast group (NFNLGRP_NFTRACE) before any traffic is sent.

TRACE with the nft backend sets `meta nftrace`, and every nftables chain the packet then
traverses (iptables-nft's tables included) reports a trace event to the monitor. With the
legacy backend TRACE logs through nf_log into the kernel log, which inside a non-initial
namespace stays silent unless `net.netfilter.nf_log_all_netns` is set in the root namespace,
which kpemu never touches: tracing therefore needs the nft backend (`kubeProxy.backend: nft`,
the default); with legacy, `start_tracing` returns a session whose `unavailable` says so, and
the counter deltas (kernel/snapshot.py) remain the attribution.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kpemu.errors import ApplyError
from kpemu.kernel.netns import popen_in, run_in
from kpemu.kernel.runowner import dies_with_parent
from kpemu.pace import scaled
from kpemu.plan.tracing import FlowMatch, trace_restore_text
from kpemu.proxy.xtables import RESTORE

NETLINK_NETFILTER = 12
NFNLGRP_NFTRACE_BIT = 1 << (9 - 1)  # groups bitmask in /proc/net/netlink
CONFIRM_TIMEOUT = 3.0
DRAIN_SECONDS = 0.15  # no new trace line for this long (scaled) and the monitors have caught up
DRAIN_LIMIT = 3.0  # seconds (scaled) to wait for that at most


def _monitor_socket_ready(pid: int) -> bool:
    """Whether process `pid` holds a NETLINK_NETFILTER socket subscribed to NFNLGRP_NFTRACE."""
    try:
        inodes = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        rows = Path(f"/proc/{pid}/net/netlink").read_text().splitlines()[1:]
    except OSError:
        return False
    for row in rows:
        f = row.split()
        if len(f) >= 10 and f[1] == str(NETLINK_NETFILTER) and f[9] in inodes and int(f[3], 16) & NFNLGRP_NFTRACE_BIT:
            return True
    return False


@dataclass
class Monitors:
    """One trace monitor per node namespace, each writing into a file of the lab's scratch directory."""

    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)

    def start(self, nodes: dict[str, str], argv: list[str], workdir: Path, what: str) -> None:
        """Start `argv` (line-buffered) in every namespace; ApplyError unless each is subscribed to the
        trace group within the (scaled) confirm timeout."""
        stdbuf = shutil.which("stdbuf")
        if stdbuf:  # the monitors write through stdio: line-buffer them so nothing is lost at SIGTERM
            argv = [stdbuf, "-oL", *argv]
        workdir.mkdir(parents=True, exist_ok=True)
        for node, ns in nodes.items():
            fd, name = tempfile.mkstemp(prefix=f"trace-{node}-", suffix=".txt", dir=workdir)
            self.files[node] = Path(name)
            with os.fdopen(fd, "w") as out:
                self.procs[node] = popen_in(ns, dies_with_parent(argv), stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + scaled(CONFIRM_TIMEOUT)
        waiting = set(self.procs)
        while waiting and time.monotonic() < deadline:
            waiting = {n for n in waiting if not _monitor_socket_ready(self.procs[n].pid)}
            if any(self.procs[n].poll() is not None for n in waiting):
                break
            if waiting:
                time.sleep(0.01)
        if waiting:
            raise ApplyError(f"{what} did not start listening in {', '.join(sorted(waiting))} "
                             f"within {scaled(CONFIRM_TIMEOUT)}s")

    def stop(self) -> dict[str, str]:
        """Let the last events arrive, stop the monitors, remove their files; node -> what each printed."""
        if self.procs:
            self._drain()
        out = {}
        for node, proc in self.procs.items():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=2)
            path = self.files[node]
            out[node] = path.read_text(errors="replace") if path.exists() else ""
            path.unlink(missing_ok=True)
        self.procs.clear()
        return out

    def _drain(self) -> None:
        """Wait until the output stops growing: under emulation the monitors print far behind the traffic."""
        quiet, deadline = scaled(DRAIN_SECONDS), time.monotonic() + scaled(DRAIN_LIMIT)
        sizes: dict[str, int] = {}
        still = time.monotonic()
        while time.monotonic() < deadline:
            now = {n: p.stat().st_size if p.exists() else 0 for n, p in self.files.items()}
            if now != sizes:
                sizes, still = now, time.monotonic()
            elif time.monotonic() - still >= quiet:
                return
            time.sleep(0.02)


@dataclass
class TraceSession:
    """One flow's tracing in node namespaces: what was installed, the monitors; `stop()` returns their output.

    `remove(ns)` undoes the installation in one namespace (the TRACE rules, or nftables' trace table).
    """

    match: FlowMatch
    nodes: dict[str, str]  # node -> netns
    remove: Callable[[str], None]
    monitors: Monitors = field(default_factory=Monitors)
    installed: list[str] = field(default_factory=list)
    unavailable: str | None = None
    output: dict[str, str] = field(default_factory=dict)

    def stop(self) -> dict[str, str]:
        """Stop the monitors, then remove what was installed; node -> trace text."""
        self.output.update(self.monitors.stop())
        for node in list(self.installed):
            self.remove(self.nodes[node])
            self.installed.remove(node)
        return dict(self.output)

    def __enter__(self) -> TraceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def install(session: TraceSession, argv: list[str], text: str, what: str) -> None:
    """Run `argv` with `text` in every node namespace (recording each for `stop`); ApplyError if refused."""
    for node, ns in session.nodes.items():
        res = run_in(ns, argv, input=text)
        if res.returncode != 0:
            raise ApplyError(f"{ns}: could not add {what}: {res.stderr.strip()}")
        session.installed.append(node)


def start_tracing(nodes: dict[str, str], match: FlowMatch, backend: str = "nft", *, workdir: Path) -> TraceSession:
    """Install the flow's TRACE rules and start a confirmed monitor in every node namespace.

    The monitors write into temporary files in `workdir` (the lab's scratch directory,
    kpemu/statedir.py), which `destroy` removes with the lab if this process is killed.
    """
    restore = [RESTORE[backend], "--noflush", "--wait"]

    def remove(ns: str) -> None:
        run_in(ns, restore, input=trace_restore_text(match, "-D"))

    session = TraceSession(match, dict(nodes), remove)
    if backend != "nft":
        session.unavailable = ("rule tracing needs the nft iptables backend (kubeProxy.backend: nft): with "
                               "legacy, TRACE goes to the kernel log, which namespaces other than the root "
                               "one do not reach; counter deltas are used instead")
        return session
    monitor = shutil.which("xtables-monitor") or shutil.which("xtables-nft-multi")
    if monitor is None:
        session.unavailable = "xtables-monitor is not installed (Debian package iptables)"
        return session
    argv = [monitor, "--trace"] if monitor.endswith("monitor") else [monitor, "xtables-monitor", "--trace"]
    try:
        install(session, restore, trace_restore_text(match, "-A"), "TRACE rules")
        session.monitors.start(nodes, argv, workdir, "xtables-monitor")
    except BaseException:
        session.stop()
        raise
    return session
