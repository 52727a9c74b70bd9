"""Snapshots of per-rule packet counters in node namespaces (effects): `iptables-save -c`, and in
IPVS mode `ipvsadm -Ln --stats` + `ipvsadm -Sn`. Deltas between two snapshots are computed by
the pure kpemu.analyse.attribution.counter_deltas / ipvs_stat_deltas."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from kpemu.kernel.netns import run_in

SAVE = {"nft": "iptables-nft-save", "legacy": "iptables-legacy-save"}


@dataclass
class CounterSnapshot:
    """Per node: iptables-save -c text; IPVS stats and service text when `ipvs`."""

    iptables: dict[str, str] = field(default_factory=dict)
    ipvs_stats: dict[str, str] = field(default_factory=dict)
    ipvs_services: dict[str, str] = field(default_factory=dict)


def _out(ns: str, argv: list[str]) -> str:
    try:
        res = run_in(ns, argv, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return res.stdout if res.returncode == 0 else ""


def snapshot(nodes: dict[str, str], backend: str = "nft", ipvs: bool = False) -> CounterSnapshot:
    """Read every node's counters once."""
    snap = CounterSnapshot()
    for node, ns in nodes.items():
        snap.iptables[node] = _out(ns, [SAVE.get(backend, "iptables-save"), "-c"])
        if ipvs:
            snap.ipvs_stats[node] = _out(ns, ["ipvsadm", "-Ln", "--stats"])
            snap.ipvs_services[node] = _out(ns, ["ipvsadm", "-Sn"])
    return snap
