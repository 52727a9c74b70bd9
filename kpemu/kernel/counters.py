"""Snapshots of per-rule packet counters in node namespaces (effects): `iptables-save -c`, and in
IPVS mode `ipvsadm -Ln --stats` + `ipvsadm -Sn`. Deltas between two snapshots are computed by
the pure kpemu.analyse.attribution.xtables.counter_deltas / ipvs_decisions."""

from __future__ import annotations

from kpemu.kernel.netns import outputs_in
from kpemu.pace import scaled
from kpemu.plan.tracing import CounterSnapshot
from kpemu.proxy.xtables import SAVE


def snapshot(nodes: dict[str, str], backend: str = "nft", ipvs: bool = False) -> CounterSnapshot:
    """Read every node's counters once."""
    cmds = [(ns, [SAVE.get(backend, "iptables-save"), "-c"]) for ns in nodes.values()]
    if ipvs:
        cmds += [(ns, ["ipvsadm", "-Ln", "--stats"]) for ns in nodes.values()]
    texts = outputs_in(cmds, timeout=scaled(10.0))
    return CounterSnapshot(iptables=dict(zip(nodes, texts, strict=False)),
                           ipvs_stats=dict(zip(nodes, texts[len(nodes):], strict=False)) if ipvs else {})
