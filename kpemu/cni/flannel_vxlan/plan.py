"""flannel's VXLAN backend plus the bridge CNI plugin (cni0), as flanneld and the plugin do it.

Per node: flannel.1 (VNI 1, port 8472, nolearning, local node IP, MTU underlay-50, <podCIDR>.0/32),
cni0 with .1, pod veths on the bridge with hairpin; per remote node, in flannel's order, the
permanent neighbour, the FDB entry and the onlink route; flannel's masquerade and forward rules.
"""

from __future__ import annotations

import hashlib
import ipaddress

from kpemu.cni.flannel_vxlan.devices import BRIDGE, PORT, VNI, VTEP, addresses
from kpemu.cni.pods import pod_namespace
from kpemu.model.names import netns_name, stable_mac
from kpemu.model.topology import Node, Topology
from kpemu.plan.parts import Parts
from kpemu.plan.types import Fdb, Interface, Neighbour, Route, Rules, Sysctl, Vxlan

OVERHEAD = 50
KUBE_PROXY_MARK = "0x4000/0x4000"


def flannel_ifname(namespace: str, pod: str) -> str:
    """The bridge plugin's host-side veth: veth + 8 hex (random upstream; derived here, so stable)."""
    return "veth" + hashlib.sha1(f"{namespace}/{pod}".encode()).hexdigest()[:8]


def vtep_mac(topo: Topology, node: Node) -> str:
    """flannel.1's MAC (random upstream, kept in the node annotation; derived here)."""
    return stable_mac(f"{topo.name}/{node.name}/{VTEP}")


def plan(topo: Topology, p: Parts) -> None:
    """Add flannel's devices, pod wiring, per-peer entries and rules for every node."""
    mtu = topo.mtu - OVERHEAD
    network = topo.pod_network
    for node in topo.nodes:
        ns = netns_name(topo.name, node.name)
        cidr = ipaddress.IPv4Network(node.podCIDR)
        vtep_ip, gw = addresses(node)
        p.vxlans.append(Vxlan(ns, VTEP, VNI, PORT, node.ip, "eth0", mtu, vtep_mac(topo, node)))
        p.address(ns, VTEP, f"{vtep_ip}/32")
        p.bridge(ns, BRIDGE, mtu)
        p.address(ns, BRIDGE, f"{gw}/{cidr.prefixlen}")
        p.sysctls.append(Sysctl(ns, "net/bridge/bridge-nf-call-iptables", "1", optional=True))
        p.interfaces += [
            Interface(ns, VTEP, node.name, "vxlan"),
            Interface(ns, BRIDGE, node.name, "cni0"),
        ]
        for pod in topo.pods_on(node.name):
            pns = pod_namespace(topo, p, pod)
            host = flannel_ifname(pod.namespace, pod.name)
            p.veth(pns, "eth0", ns, host, mtu)
            p.port(ns, host, BRIDGE, hairpin=True)
            p.address(pns, "eth0", f"{pod.ip}/{cidr.prefixlen}")
            p.routes.append(Route(pns, "default", via=gw, dev="eth0"))
            if network != cidr:
                p.routes.append(Route(pns, str(network), via=gw, dev="eth0"))
            p.interfaces.append(Interface(ns, host, node.name, "pod-veth"))
        for peer in topo.nodes:
            if peer.name == node.name:
                continue
            peer_cidr = ipaddress.IPv4Network(peer.podCIDR)
            mac = vtep_mac(topo, peer)
            p.neighbours.append(Neighbour(ns, VTEP, str(peer_cidr.network_address), mac))
            p.fdb.append(Fdb(ns, VTEP, mac, peer.ip))
            p.routes.append(
                Route(ns, str(peer_cidr), via=str(peer_cidr.network_address), dev=VTEP, onlink=True)
            )
        p.rules.append(flannel_rules(ns, str(network), str(cidr)))


def flannel_rules(ns: str, network: str, pod_cidr: str) -> Rules:
    """FLANNEL-POSTRTG and FLANNEL-FWD as current flanneld installs them (iptables-restore input)."""
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
        f"-A FLANNEL-POSTRTG -s {network} ! -d 224.0.0.0/4 {masq} -j MASQUERADE --random-fully",
        f"-A FLANNEL-POSTRTG ! -s {network} -d {network} {masq} -j MASQUERADE --random-fully",
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
