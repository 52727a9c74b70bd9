"""iptables mode's registry entry: its texts, how a node is programmed and read back, its facts."""

from __future__ import annotations

from kpemu.model.modes import MODE_FACTS
from kpemu.model.topology import Topology
from kpemu.plan.batch import Step, sysctl_steps
from kpemu.plan.types import Sysctl
from kpemu.proxy.iptables.generate import iptables_rules, needs_route_localnet, restore_text, uses_nfacct
from kpemu.proxy.proxymode import ProxyMode, iptables_readback, restore_step
from kpemu.proxy.save import save_text


def texts(topo: Topology, node: str) -> dict[str, str]:
    """`kpemu rules` formats: the iptables-restore input and what iptables-save prints back."""
    rs = iptables_rules(topo, node)
    return {"iptables-restore": restore_text(rs), "iptables-save": save_text(rs, topo.kubeProxy.backend)}


def steps(topo: Topology, node: str, ns: str, kernel: tuple[int, int]) -> tuple[list[Step], list[dict]]:
    """kube-proxy's nfacct counters (1.30+, when used), one iptables-restore, route_localnet if needed."""
    rs = iptables_rules(topo, node)
    out = [Step("nfacct", f"{node}: kube-proxy's nfacct counters", ns)] if uses_nfacct(topo) else []
    out.append(restore_step(f"{node}: kube-proxy rules", ns, restore_text(rs), topo.kubeProxy.backend))
    if needs_route_localnet(topo):
        out += sysctl_steps(f"{node}: route_localnet", [Sysctl(ns, "net/ipv4/conf/all/route_localnet", "1")])
    return out, [iptables_readback(node, rs, topo.kubeProxy.backend)]


MODE = ProxyMode(
    MODE_FACTS["iptables"], ("iptables-restore", "iptables-save"), texts,
    steps=steps, saved=("iptables", "ipset"), trace="iptables-trace", oracle="iptables",
    features=("match:statistic",), nfacct=True)
