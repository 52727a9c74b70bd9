"""Apply the netfilter side of a lab: kube-proxy's state on every node, then the CNI's own rules.

kube-proxy's state is applied the way kube-proxy applies it (one iptables-restore --noflush with
all its tables, one ipset restore, IPVS through netlink) and read back; any difference from `kpemu rules`
fails the deploy, naming the first differing line. CNI rules (flannel, calico, the external load
balancer) follow, appended after kube-proxy's jumps as those daemons do on a real node.
"""

from __future__ import annotations

import importlib
import ipaddress
import os

from kpemu.kernel import netfilter
from kpemu.kernel.fabric import write_sysctls
from kpemu.model.names import netns_name
from kpemu.model.topology import Topology
from kpemu.plan.types import Plan, Sysctl
from kpemu.proxy.modes import mode_of
from kpemu.proxy.versions import flavour_for


def resolve_random_fully(topo: Topology, probe_ns: str) -> Topology:
    """randomFully: None means "what the node's iptables supports": ask it once, in a lab namespace."""
    kp = topo.kubeProxy
    if kp.randomFully is not None:
        return topo
    supported = netfilter.supports_random_fully(probe_ns, kp.backend)
    return topo.model_copy(update={"kubeProxy": kp.model_copy(update={"randomFully": supported})})


def kernel_release() -> tuple[int, int]:
    major, minor, *_ = (int("".join(c for c in p if c.isdigit()) or 0) for p in os.uname().release.split("."))
    return major, minor


def apply_kube_proxy(topo: Topology, node: str) -> None:
    """Program one node exactly as kube-proxy would, and verify the read-back (the mode registry
    names the function that does it for the topology's mode)."""
    module, _, func = mode_of(topo).apply.partition(":")
    getattr(importlib.import_module(module), func)(topo, node)


def apply_ipvs(topo: Topology, node: str) -> None:
    """IPVS mode: ipsets, iptables rules, then virtual servers through netlink."""
    from kpemu.kernel.ipset import apply_ipsets
    from kpemu.kernel.ipvs import apply_ipvs as apply_virtual_servers
    from kpemu.proxy.iptables import kube_proxy_chains
    from kpemu.proxy.ipvs import ipvs_rules
    from kpemu.proxy.save import ruleset_from_restore, save_text

    ns, backend = netns_name(topo.name, node), topo.kubeProxy.backend
    state = ipvs_rules(topo, node, kernel=kernel_release())
    apply_ipsets(ns, state.ipsets)
    rs = ruleset_from_restore(state.restore_text())
    netfilter.apply_and_verify(ns, state.restore_text(), save_text(rs, backend), kube_proxy_chains(rs), backend)
    apply_virtual_servers(ns, state)


def apply_iptables(topo: Topology, node: str) -> None:
    """iptables mode: one iptables-restore, read back with iptables-save; route_localnet if needed."""
    from kpemu.proxy.iptables import iptables_rules, kube_proxy_chains, restore_text
    from kpemu.proxy.save import save_text

    ns, backend = netns_name(topo.name, node), topo.kubeProxy.backend
    rs = iptables_rules(topo, node)
    netfilter.apply_and_verify(ns, restore_text(rs), save_text(rs, backend), kube_proxy_chains(rs), backend)
    if needs_route_localnet(topo):
        write_sysctls([Sysctl(ns, "net/ipv4/conf/all/route_localnet", "1")])


def needs_route_localnet(topo: Topology) -> bool:
    """iptables mode: always before 1.24; since then only with localhostNodePorts and loopback among
    the nodePortAddresses (an empty list means all addresses)."""
    kp = topo.kubeProxy
    loopback = not kp.nodePortAddresses or any(
        ipaddress.IPv4Address("127.0.0.1") in ipaddress.IPv4Network(c) for c in kp.nodePortAddresses
    )
    return flavour_for(kp).route_localnet_always or (kp.localhostNodePorts and loopback)


def apply_rules(topo: Topology, plan: Plan) -> None:
    """kube-proxy's state on every node, then CNI and load-balancer rules."""
    topo = resolve_random_fully(topo, netns_name(topo.name, topo.nodes[0].name))
    for node in topo.nodes:
        apply_kube_proxy(topo, node.name)
    for r in plan.rules:
        netfilter.restore(r.ns, r.text, topo.kubeProxy.backend)
