"""calico in IPIP mode, as calico-node (felix, BIRD) and the calico CNI plugin program a node.

Per node: tunl0 (the kernel's fallback IPIP device) with the tunnel address /32 and MTU
underlay-20, a blackhole for the node's own block, remote blocks `via <node IP> dev tunl0 onlink
proto bird`. Per pod: `cali<sha1[:11]>` host veth (MAC ee:ee:ee:ee:ee:ee, proxy_arp, proxy_delay 0,
forwarding, route_localnet), a /32 route and a permanent neighbour on the host; inside the pod a /32
address and routes via 169.254.1.1, answered by proxy ARP (which needs the node's default route).
"""

from __future__ import annotations

import hashlib

from kpemu.cni.calico_ipip.devices import TUNNEL, tunnel_ip
from kpemu.cni.pods import pod_namespace
from kpemu.model.names import netns_name, stable_mac
from kpemu.model.topology import Topology
from kpemu.plan.parts import Parts
from kpemu.plan.types import Interface, Neighbour, Route, Rules, Sysctl, Tunnel

OVERHEAD = 20
HOST_MAC = "ee:ee:ee:ee:ee:ee"
LINK_LOCAL_GW = "169.254.1.1"


def calico_ifname(namespace: str, pod: str) -> str:
    """Calico's host-side veth name: cali + sha1("<namespace>.<pod>")[:11] (VethNameForWorkload)."""
    return "cali" + hashlib.sha1(f"{namespace}.{pod}".encode()).hexdigest()[:11]


def plan(topo: Topology, p: Parts) -> None:
    """Add calico's tunnel, routes, workload interfaces and NAT rule for every node."""
    mtu = topo.mtu - OVERHEAD
    for node in topo.nodes:
        ns = netns_name(topo.name, node.name)
        p.tunnels.append(Tunnel(ns, TUNNEL, mtu))
        p.address(ns, TUNNEL, f"{tunnel_ip(node)}/32")
        p.routes.append(Route(ns, node.podCIDR, type="blackhole", proto="bird"))
        p.interfaces.append(Interface(ns, TUNNEL, node.name, "tunnel", kind="raw"))
        for pod in topo.pods_on(node.name):
            pns = pod_namespace(topo, p, pod)
            host = calico_ifname(pod.namespace, pod.name)
            pod_mac = stable_mac(f"{topo.name}/{pod.namespace}/{pod.name}/eth0")
            p.veth(pns, "eth0", ns, host, mtu, mac=pod_mac, peer_mac=HOST_MAC)
            p.address(pns, "eth0", f"{pod.ip}/32")
            p.routes += [
                Route(pns, f"{LINK_LOCAL_GW}/32", dev="eth0", scope="link"),
                Route(pns, "default", via=LINK_LOCAL_GW, dev="eth0"),
                Route(ns, f"{pod.ip}/32", dev=host, scope="link"),
            ]
            p.neighbours.append(Neighbour(ns, host, pod.ip, pod_mac))
            p.sysctls += [
                Sysctl(ns, f"net/ipv4/conf/{host}/proxy_arp", "1"),
                Sysctl(ns, f"net/ipv4/neigh/{host}/proxy_delay", "0"),
                Sysctl(ns, f"net/ipv4/conf/{host}/forwarding", "1"),
                Sysctl(ns, f"net/ipv4/conf/{host}/route_localnet", "1"),
            ]
            p.interfaces.append(Interface(ns, host, node.name, "pod-veth"))
        for peer in topo.nodes:
            if peer.name != node.name:
                p.routes.append(
                    Route(ns, peer.podCIDR, via=peer.ip, dev=TUNNEL, onlink=True, proto="bird")
                )
        p.rules.append(Rules(ns, calico_nat_rules(), "calico"))


def calico_nat_rules() -> str:
    """felix's cali-POSTROUTING tunnel rule: host-sourced traffic leaving tunl0 takes tunl0's address."""
    return "\n".join([
        "*nat",
        ":cali-POSTROUTING - [0:0]",
        "-A POSTROUTING -j cali-POSTROUTING",
        f"-A cali-POSTROUTING -o {TUNNEL} -m addrtype ! --src-type LOCAL --limit-iface-out "
        "-m addrtype --src-type LOCAL -j MASQUERADE --random-fully",
        "COMMIT",
        "",
    ])
