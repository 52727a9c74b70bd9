"""flannel's VXLAN backend plus the bridge CNI plugin (cni0), as flanneld and the plugin do it.

Per node: flannel.1 (VNI 1, port 8472, nolearning, local node IP, MTU underlay-50, <podCIDR>.0/32),
cni0 with .1, pod veths on the bridge with hairpin; per remote node, in flannel's order, the
permanent neighbour, the FDB entry and the onlink route; flannel's masquerade and forward rules.
"""

from __future__ import annotations

import ipaddress

from kpemu.model.names import flannel_ifname, netns_name
from kpemu.model.topology import Node, Topology
from kpemu.plan.cni import pod_namespace
from kpemu.plan.parts import Parts
from kpemu.plan.types import Fdb, Interface, Neighbour, Route, Rules, Sysctl, Vxlan

VNI = 1
PORT = 8472
OVERHEAD = 50
KUBE_PROXY_MARK = "0x4000/0x4000"


def vtep_mac(topo: Topology, node: Node) -> str:
    """flannel.1's MAC (random upstream, kept in the node annotation; derived here)."""
    from kpemu.plan.fabric import stable_mac

    return stable_mac(f"{topo.name}/{node.name}/flannel.1")


def plan(topo: Topology, p: Parts) -> None:
    """Add flannel's devices, pod wiring, per-peer entries and rules for every node."""
    mtu = topo.mtu - OVERHEAD
    network = topo.pod_network
    for node in topo.nodes:
        ns = netns_name(topo.name, node.name)
        cidr = ipaddress.IPv4Network(node.podCIDR)
        gw = cidr.network_address + 1
        p.vxlans.append(Vxlan(ns, "flannel.1", VNI, PORT, node.ip, "eth0", mtu, vtep_mac(topo, node)))
        p.address(ns, "flannel.1", f"{cidr.network_address}/32")
        p.bridge(ns, "cni0", mtu)
        p.address(ns, "cni0", f"{gw}/{cidr.prefixlen}")
        p.sysctls.append(Sysctl(ns, "net/bridge/bridge-nf-call-iptables", "1", optional=True))
        p.interfaces += [
            Interface(ns, "flannel.1", node.name, "vxlan"),
            Interface(ns, "cni0", node.name, "cni0"),
        ]
        for pod in topo.pods_on(node.name):
            pns = pod_namespace(topo, p, pod)
            host = flannel_ifname(pod.namespace, pod.name)
            p.veth(pns, "eth0", ns, host, mtu)
            p.port(ns, host, "cni0", hairpin=True)
            p.address(pns, "eth0", f"{pod.ip}/{cidr.prefixlen}")
            p.routes.append(Route(pns, "default", via=str(gw), dev="eth0"))
            if network != cidr:
                p.routes.append(Route(pns, str(network), via=str(gw), dev="eth0"))
            p.interfaces.append(Interface(ns, host, node.name, "pod-veth"))
        for peer in topo.nodes:
            if peer.name == node.name:
                continue
            peer_cidr = ipaddress.IPv4Network(peer.podCIDR)
            mac = vtep_mac(topo, peer)
            p.neighbours.append(Neighbour(ns, "flannel.1", str(peer_cidr.network_address), mac))
            p.fdb.append(Fdb(ns, "flannel.1", mac, peer.ip))
            p.routes.append(
                Route(ns, str(peer_cidr), via=str(peer_cidr.network_address), dev="flannel.1", onlink=True)
            )
        p.rules.append(flannel_rules(ns, str(network), str(cidr)))


def flannel_rules(ns: str, network: str, pod_cidr: str, random_fully: bool = True) -> Rules:
    """FLANNEL-POSTRTG and FLANNEL-FWD as current flanneld installs them (iptables-restore input)."""
    rf = " --random-fully" if random_fully else ""
    masq = '-m comment --comment "flanneld masq"'
    fwd = '-m comment --comment "flanneld forward"'
    nat = "\n".join([
        "*nat",
        ":FLANNEL-POSTRTG - [0:0]",
        f"-A POSTROUTING {masq} -j FLANNEL-POSTRTG",
        f"-A FLANNEL-POSTRTG -m mark --mark {KUBE_PROXY_MARK} {masq} -j RETURN",
        f"-A FLANNEL-POSTRTG -s {pod_cidr} -d {network} {masq} -j RETURN",
        f"-A FLANNEL-POSTRTG -s {network} -d {pod_cidr} {masq} -j RETURN",
        f"-A FLANNEL-POSTRTG ! -s {network} -d {pod_cidr} {masq} -j RETURN",
        f"-A FLANNEL-POSTRTG -s {network} ! -d 224.0.0.0/4 {masq} -j MASQUERADE{rf}",
        f"-A FLANNEL-POSTRTG ! -s {network} -d {network} {masq} -j MASQUERADE{rf}",
        "COMMIT",
        "",
    ])
    filt = "\n".join([
        "*filter",
        ":FLANNEL-FWD - [0:0]",
        f"-A FORWARD {fwd} -j FLANNEL-FWD",
        f"-A FLANNEL-FWD -s {network} {fwd} -j ACCEPT",
        f"-A FLANNEL-FWD -d {network} {fwd} -j ACCEPT",
        "COMMIT",
        "",
    ])
    return Rules(ns, nat + filt, "flannel")
