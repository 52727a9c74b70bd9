"""The real kube-proxy of every node of a running lab: started in the node's namespace behind its relay,
waited for until its metrics say it has synced, checked for a resync after the traffic, stopped.

Each process is started from the calling (main) thread with a parent-death SIGKILL and recorded by a
pid file under the lab's scratch directory, so `destroy NAME` and `destroy --all` stop it after a kill
(kpemu.controlplane.procs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kpemu.controlplane import procs
from kpemu.errors import EnvironmentProblem
from kpemu.realproxy import metrics
from kpemu.realproxy.config import METRICS_PORT, RELAY_PORT
from kpemu.realproxy.relay import Relay, get_in

SYNC_LIMIT = 120.0  # seconds from start to every node's first sync; seconds on an idle host
# A sync counts once it stays the last for this long: its informers' events may still queue another one
# a moment after the first (milliseconds on an idle host).
STABLE = 0.5


@dataclass
class RealNode:
    """One node's kube-proxy: its process, relay, files, and when it synced."""

    node: str
    ns: str
    proc: procs.Proc
    relay: Relay
    config: Path
    started: float = field(default_factory=time.monotonic)
    synced_in: float | None = None
    sync: dict[str, metrics.Sync] = field(default_factory=dict)

    def metrics_text(self) -> str:
        return get_in(self.ns, METRICS_PORT, "/metrics")


def start(binary: str, configs: dict[str, dict[str, Any]], nodes: dict[str, str], kubeconfig: dict[str, Any],
          api: tuple[str, int], root: Path) -> list[RealNode]:
    """kube-proxy `binary` in each node's namespace (`nodes`: node -> namespace) with its configuration,
    its files under `root/<node>/`; every one started is stopped again if one fails to start."""
    started: list[RealNode] = []
    try:
        for node, ns in nodes.items():
            d = root / node
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
            (d / "kubeconfig").write_text(json.dumps(kubeconfig, indent=1) + "\n")
            config = d / "config.json"
            config.write_text(json.dumps({**configs[node], "clientConnection": {
                **configs[node]["clientConnection"], "kubeconfig": str(d / "kubeconfig")}}, indent=1) + "\n")
            relay = Relay(ns, RELAY_PORT, api)
            try:
                argv = ["ip", "netns", "exec", ns, binary, "--config", str(config), "-v", "2"]
                proc = procs.start("kube-proxy", argv, d / "kube-proxy.log", d / "kube-proxy.pid")
            except BaseException:
                relay.close()
                raise
            started.append(RealNode(node, ns, proc, relay, config))
    except BaseException:
        stop(started)
        raise
    return started


def wait_synced(real: list[RealNode], say: Callable[[str], None], limit: float = SYNC_LIMIT) -> None:
    """Until every node's kube-proxy says (its metrics) that it wrote its IPv4 rules with nothing pending,
    and that stays so for STABLE seconds; EnvironmentProblem with the end of its log when one exits or the
    limit passes."""
    deadline = time.monotonic() + limit
    waiting = list(real)
    seen: dict[str, tuple[metrics.Sync, float]] = {}  # node -> a done sync, and when it was first seen
    while waiting:
        for r in list(waiting):
            if not r.proc.running():
                raise EnvironmentProblem(f"kube-proxy of {r.node} exited (code {r.proc.popen.returncode}) before "
                                         f"its sync: {r.proc.log_tail(1)}; the end of {r.proc.log}:\n    "
                                         f"{r.proc.log_tail()}")
            try:
                done = metrics.synced(r.metrics_text())
            except OSError:
                done = None  # not listening yet
            if done is None:
                continue
            before = seen.setdefault(r.node, (done, time.monotonic()))
            if before[0] != done:  # it synced again: an event of its informers queued one
                seen[r.node] = (done, time.monotonic())
            elif time.monotonic() - before[1] >= STABLE:
                r.synced_in = time.monotonic() - r.started
                r.sync = metrics.syncs(r.metrics_text())
                waiting.remove(r)
                say(f"kube-proxy of {r.node}: synced {r.synced_in:.1f}s after its start")
        if waiting and time.monotonic() > deadline:
            r = waiting[0]
            raise EnvironmentProblem(f"kube-proxy of {r.node} had not synced {limit:.0f}s after its start: "
                                     f"{r.proc.log_tail(1)}; the end "
                                     f"of {r.proc.log}:\n    {r.proc.log_tail()}")
        if waiting:
            time.sleep(0.1)  # the poll interval: the metrics end the wait


def resynced(real: list[RealNode]) -> list[str]:
    """The nodes whose kube-proxy wrote its rules again since its first sync (what a traffic run must not
    see: the API is frozen and syncPeriod is an hour), each with what its metrics say now."""
    out = []
    for r in real:
        try:
            now = metrics.syncs(r.metrics_text())
        except OSError as e:
            out.append(f"{r.node}: its metrics no longer answer ({e})")
            continue
        for family, before in r.sync.items():
            after = now.get(family)
            if after is not None and after.last != before.last:
                out.append(f"{r.node}: {family} rules written again {after.last - before.last:.1f}s after the "
                           "first sync")
    return out


def stop(real: list[RealNode]) -> None:
    """SIGTERM each kube-proxy (its rules stay, as a real one's do) and close its relay."""
    for r in real:
        procs.stop(r.proc)
        r.relay.close()
