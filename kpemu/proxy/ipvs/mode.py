"""IPVS mode's registry entry: its texts, how a node is programmed and read back, its facts."""

from __future__ import annotations

from kpemu.model.modes import MODE_FACTS
from kpemu.model.topology import KubeProxy, Topology
from kpemu.plan.batch import Step, batch_step, sysctl_steps
from kpemu.plan.types import Sysctl
from kpemu.proxy.ipvs.generate import DUMMY_DEVICE, ipvs_rules
from kpemu.proxy.ipvs.ipset_text import restore_input
from kpemu.proxy.proxymode import ProxyMode, iptables_readback, restore_step
from kpemu.proxy.save import ruleset_from_restore, save_text
from kpemu.proxy.versions import IPVS_DEPRECATION, flavour_for


def texts(topo: Topology, node: str) -> dict[str, str]:
    """`kpemu rules` formats: iptables-restore input and save text, `ipset save`, `ipvsadm -Sn`."""
    st = ipvs_rules(topo, node)
    restore = st.restore_text()
    return {
        "iptables-restore": restore,
        "iptables-save": save_text(ruleset_from_restore(restore), topo.kubeProxy.backend),
        "ipset": st.ipset_save_text(),
        "ipvs": st.ipvsadm_text(),
    }


def steps(topo: Topology, node: str, ns: str, kernel: tuple[int, int]) -> tuple[list[Step], list[dict]]:
    """One ipset restore, one iptables-restore, kube-ipvs0 with its addresses, sysctls, one ipvsadm -R."""
    state = ipvs_rules(topo, node, kernel=kernel)
    out = [
        Step("run", f"{node}: ipset restore", ns, ("ipset", "restore", "-exist"), restore_input(state.ipsets)),
        restore_step(f"{node}: kube-proxy rules", ns, state.restore_text(), topo.kubeProxy.backend),
        batch_step(f"{node}: {DUMMY_DEVICE}", ns, [f"link add {DUMMY_DEVICE} type dummy"]
                   + [f"addr add {ip}/32 dev {DUMMY_DEVICE}" for ip in state.bound_addresses]),
        *sysctl_steps(f"{node}: IPVS sysctls", (Sysctl(ns, k, v) for k, v in state.sysctls)),
        Step("run", f"{node}: ipvsadm -R", ns, ("ipvsadm", "-R"), state.ipvsadm_text()),
    ]
    return out, [
        iptables_readback(node, ruleset_from_restore(state.restore_text()), topo.kubeProxy.backend),
        {"node": node, "kind": "ipset", "expected": state.ipset_save_text(), "sets": [s.name for s in state.ipsets]},
        {"node": node, "kind": "ipvs", "expected": state.ipvsadm_text()},
    ]


def notice(kp: KubeProxy) -> str | None:
    """kube-proxy 1.35+ logs at startup that the IPVS proxier is deprecated (KEP-5495)."""
    return IPVS_DEPRECATION if flavour_for(kp).ipvs_deprecated else None


MODE = ProxyMode(
    MODE_FACTS["ipvs"], ("iptables-restore", "iptables-save", "ipset", "ipvs"), texts,
    steps=steps, saved=("iptables", "ipset", "ipvs"), trace="iptables-trace", oracle="ipvs",
    features=("ip_vs", "dummy", "ipset:hash:ip,port", "ipset:hash:ip,port,ip", "ipset:hash:ip,port,net",
              "ipset:bitmap:port", "match:set", "tool:ipset", "tool:ipvsadm"), notice=notice)
