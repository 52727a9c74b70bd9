"""iptables mode's registry entry: a node's texts, apply steps, read-back and oracle walk, and its facts."""

from __future__ import annotations

from kpemu.model.modes import MODE_FACTS
from kpemu.model.names import netns_name
from kpemu.model.topology import Topology
from kpemu.plan.batch import Step, sysctl_steps
from kpemu.plan.types import Sysctl
from kpemu.proxy.iptables.generate import (
    iptables_rules,
    kubelet_rules,
    needs_route_localnet,
    restore_text,
    uses_nfacct,
)
from kpemu.proxy.iptables.hooks import explain_hooks
from kpemu.proxy.proxymode import ProxyMode, conntrack_steps, iptables_readback, restore_step
from kpemu.proxy.save import save_text
from kpemu.proxy.state import NodeProxyState, Walk


def build(topo: Topology, node: str, kernel: tuple[int, int] | None = None) -> NodeProxyState:
    """kube-proxy's nfacct counters (1.30+, when used), one iptables-restore, route_localnet if needed;
    `kpemu rules` shows the restore input and what iptables-save prints back."""
    ns, backend = netns_name(topo.name, node), topo.kubeProxy.backend
    rs = iptables_rules(topo, node)
    texts = {"iptables-restore": restore_text(rs), "iptables-save": save_text(rs, backend)}
    steps = [Step("nfacct", f"{node}: kube-proxy's nfacct counters", ns)] if uses_nfacct(topo) else []
    steps.append(restore_step(f"{node}: kube-proxy rules", ns, texts["iptables-restore"], backend))
    steps += conntrack_steps(topo, node)  # after the rules, which load nf_conntrack in the namespace
    if needs_route_localnet(topo):
        steps += sysctl_steps(f"{node}: route_localnet", [Sysctl(ns, "net/ipv4/conf/all/route_localnet", "1")])
    kubelet = kubelet_rules(rs)
    before = (restore_step(f"{node}: kubelet's rules", ns, restore_text(kubelet), backend),) if kubelet.tables else ()
    return NodeProxyState(node, texts, tuple(steps), (iptables_readback(node, rs, texts["iptables-save"]),),
                          Walk(rules=rs), kubelet_steps=before)


MODE = ProxyMode(
    MODE_FACTS["iptables"], ("iptables-restore", "iptables-save"), build,
    saved=("iptables", "ipset"), trace="iptables-trace", walks="xtables", features=("match:statistic",),
    nfacct=True,
    explain_hooks=explain_hooks)
