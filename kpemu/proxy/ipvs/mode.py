"""IPVS mode's registry entry: a node's texts, apply steps, read-back and oracle walk, and its facts."""

from __future__ import annotations

from kpemu.model.modes import MODE_FACTS
from kpemu.model.names import netns_name
from kpemu.model.topology import KubeProxy, Topology
from kpemu.plan.batch import Step, batch_step, sysctl_steps
from kpemu.plan.types import Sysctl
from kpemu.proxy.ipvs.generate import DUMMY_DEVICE, ipvs_rules
from kpemu.proxy.ipvs.hooks import explain_hooks
from kpemu.proxy.ipvs.ipset_text import restore_input
from kpemu.proxy.proxymode import ProxyMode, conntrack_steps, iptables_readback, restore_step
from kpemu.proxy.save import ruleset_from_restore, save_text
from kpemu.proxy.state import IpvsModel, NodeProxyState, Walk
from kpemu.proxy.versions import IPVS_DEPRECATION, flavour_for


def build(topo: Topology, node: str, kernel: tuple[int, int] | None = None) -> NodeProxyState:
    """One ipset restore, one iptables-restore, kube-ipvs0 with its addresses, sysctls (some depend on
    `kernel`), one ipvsadm -R; `kpemu rules` shows iptables-restore/-save, `ipset save`, `ipvsadm -Sn`."""
    ns, backend = netns_name(topo.name, node), topo.kubeProxy.backend
    state = ipvs_rules(topo, node, kernel=kernel)
    restore = state.restore_text()
    rs = ruleset_from_restore(restore)
    texts = {"iptables-restore": restore, "iptables-save": save_text(rs, backend),
             "ipset": state.ipset_save_text(), "ipvs": state.ipvsadm_text()}
    steps = (
        Step("run", f"{node}: ipset restore", ns, ("ipset", "restore", "-exist"), restore_input(state.ipsets)),
        restore_step(f"{node}: kube-proxy rules", ns, restore, backend),
        batch_step(f"{node}: {DUMMY_DEVICE}", ns, [f"link add {DUMMY_DEVICE} type dummy"]
                   + [f"addr add {ip}/32 dev {DUMMY_DEVICE}" for ip in state.bound_addresses]),
        *sysctl_steps(f"{node}: IPVS sysctls", (Sysctl(ns, k, v) for k, v in state.sysctls)),
        Step("run", f"{node}: ipvsadm -R", ns, ("ipvsadm", "-R"), texts["ipvs"]),
        *conntrack_steps(topo, node),
    )
    readback = (
        iptables_readback(node, rs, texts["iptables-save"]),
        {"node": node, "kind": "ipset", "expected": texts["ipset"], "sets": [s.name for s in state.ipsets]},
        {"node": node, "kind": "ipvs", "expected": texts["ipvs"]},
    )
    walk = Walk(rules=rs, ipvs=IpvsModel({s.name: (s.type, s.members) for s in state.ipsets}, state.virtual_servers),
                local=frozenset(state.bound_addresses) | frozenset(state.node_addresses))
    return NodeProxyState(node, texts, steps, readback, walk)


def notice(kp: KubeProxy) -> str | None:
    """kube-proxy 1.35+ logs at startup that the IPVS proxier is deprecated (KEP-5495)."""
    return IPVS_DEPRECATION if flavour_for(kp).ipvs_deprecated else None


MODE = ProxyMode(
    MODE_FACTS["ipvs"], ("iptables-restore", "iptables-save", "ipset", "ipvs"), build,
    saved=("iptables", "ipset", "ipvs"), trace="iptables-trace", walks="xtables",
    features=("ip_vs", "dummy", "ipset:hash:ip,port", "ipset:hash:ip,port,ip", "ipset:hash:ip,port,net",
              "ipset:bitmap:port", "match:set", "tool:ipset", "tool:ipvsadm"),
    notice=notice, explain_hooks=explain_hooks)
