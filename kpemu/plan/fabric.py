"""plan_fabric: a topology becomes namespaces, links, addresses, routes and sysctls (pure).

Layout: one namespace per node, pod and external, plus `kp-<lab>-underlay`, a router that holds
the node network's bridge (`br0`, gateway address) and one bridge per external subnet, and routes
between them. Nodes reach externals through it, so nothing ever leaves the lab's namespaces. The
pods and the links between nodes are the CNI's: its planner (`kpemu.cni.cni_of(topo).plan`) is passed
in, so this floor imports nothing of the CNIs built on it.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Callable

from kpemu.model.names import netns_name, short_ifname
from kpemu.model.topology import External, Topology
from kpemu.plan.lbrules import LbTarget, balancer_rules
from kpemu.plan.parts import Parts
from kpemu.plan.types import Interface, Namespace, Plan, Route, Rules, Sysctl

UNDERLAY = "underlay"
# A CNI's planner (kpemu.cni.spec.Cni.plan): adds its devices, pod wiring, routes and rules on every node.
CniPlanner = Callable[[Topology, Parts], None]


def external_gateways(topo: Topology) -> dict[ipaddress.IPv4Network, str]:
    """The underlay router's address in each external subnet: the first host no external uses."""
    used = {e.ip for e in topo.externals} | {e.vip for e in topo.externals if e.vip}
    out: dict[ipaddress.IPv4Network, str] = {}
    for e in topo.externals:
        net = e.network
        if net not in out:
            out[net] = next(str(h) for h in net.hosts() if str(h) not in used)
    return out


def _namespace_sysctls(ns: str, forward: bool) -> list[Sysctl]:
    """Settings every lab namespace gets before its links exist (IPv6 off keeps captures quiet)."""
    return [
        Sysctl(ns, "net/ipv6/conf/all/disable_ipv6", "1", optional=True),
        Sysctl(ns, "net/ipv6/conf/default/disable_ipv6", "1", optional=True),
        Sysctl(ns, "net/ipv4/ip_forward", "1" if forward else "0"),
        Sysctl(ns, "net/ipv4/conf/all/rp_filter", "0"),
        Sysctl(ns, "net/ipv4/conf/default/rp_filter", "0"),
    ]


def plan_fabric(topo: Topology, cni: CniPlanner) -> Plan:
    """The whole desired kernel state of the lab (without kube-proxy's rules), its pods and overlay wired
    by `cni`."""
    p = Parts()
    lab = topo.name
    under = netns_name(lab, UNDERLAY)
    underlay = ipaddress.IPv4Network(topo.underlay)
    p.namespaces.append(Namespace(under, UNDERLAY, "underlay"))
    p.sysctls += _namespace_sysctls(under, forward=True)
    p.sysctls.append(Sysctl(under, "net/bridge/bridge-nf-call-iptables", "0", optional=True))
    p.bridge(under, "br0", topo.mtu)
    p.address(under, "br0", f"{topo.gateway}/{underlay.prefixlen}")
    p.interfaces.append(Interface(under, "br0", UNDERLAY, "underlay-bridge"))

    for node in topo.nodes:
        ns = netns_name(lab, node.name)
        p.namespaces.append(Namespace(ns, node.name, "node"))
        p.sysctls += _namespace_sysctls(ns, forward=True)
        port = short_ifname("n-", node.name)
        p.veth(ns, "eth0", under, port, topo.mtu)
        p.port(under, port, "br0")
        p.address(ns, "eth0", f"{node.ip}/{underlay.prefixlen}")
        p.routes.append(Route(ns, "default", via=topo.gateway, dev="eth0"))
        p.interfaces += [
            Interface(ns, "eth0", node.name, "node-eth0"),
            Interface(under, port, UNDERLAY, "underlay-port"),
        ]

    _plan_externals(topo, p, under)
    for r in topo.routes:
        via = topo.node(r.via).ip if r.via in {n.name for n in topo.nodes} else r.via
        p.routes.append(Route(under, r.dst, via=via, dev="br0"))

    cni(topo, p)
    return p.freeze(lab)


def _plan_externals(topo: Topology, p: Parts, under: str) -> None:
    gateways = external_gateways(topo)
    bridges: dict[ipaddress.IPv4Network, str] = {}
    members: dict[ipaddress.IPv4Network, list[External]] = defaultdict(list)
    for e in topo.externals:
        members[e.network].append(e)
    for i, (net, exts) in enumerate(members.items()):
        br = f"ext{i}"
        bridges[net] = br
        p.bridge(under, br, topo.mtu)
        p.address(under, br, f"{gateways[net]}/{net.prefixlen}")
        p.interfaces.append(Interface(under, br, UNDERLAY, "external-bridge"))
        for e in exts:
            ns = netns_name(topo.name, e.name)
            p.namespaces.append(Namespace(ns, e.name, "external"))
            p.sysctls += _namespace_sysctls(ns, forward=e.role == "loadbalancer")
            port = short_ifname("x-", e.name)
            p.veth(ns, "eth0", under, port, topo.mtu)
            p.port(under, port, br)
            p.address(ns, "eth0", f"{e.ip}/{net.prefixlen}")
            if e.vip:
                p.address(ns, "eth0", f"{e.vip}/{net.prefixlen}")
            p.routes.append(Route(ns, "default", via=gateways[net], dev="eth0"))
            p.interfaces += [
                Interface(ns, "eth0", e.name, "external-eth0"),
                Interface(under, port, UNDERLAY, "underlay-port"),
            ]
            if e.role == "loadbalancer":
                p.rules.append(Rules(ns, loadbalancer_rules(topo, e), "loadbalancer"))


def loadbalancer_targets(topo: Topology, lb: External) -> tuple[LbTarget, ...]:
    """Every node behind each NodePort of the balancer's Services, with the healthCheckNodePort it probes
    when kube-proxy health-checks the Service (type LoadBalancer, externalTrafficPolicy Local)."""
    out = []
    for key in lb.backends:
        svc = topo.service(key)
        assert svc is not None  # validated: every backend of a load balancer is a Service
        checked = svc.type == "LoadBalancer" and svc.externalTrafficPolicy == "Local"
        for port in svc.ports:
            if port.nodePort is None:
                continue
            out += [LbTarget(svc.key, port.port, port.protocol.lower(), node.name, node.ip, port.nodePort,
                             svc.healthCheckNodePort if checked else None) for node in topo.nodes]
    return tuple(out)


def loadbalancer_rules(topo: Topology, lb: External) -> str:
    """An external L4 load balancer (seed 002): VIP:port -> every node's NodePort, full NAT (kpemu.plan.lbrules)."""
    assert lb.vip is not None  # validated: a load balancer has a VIP
    return balancer_rules(lb.vip, loadbalancer_targets(topo, lb))


def capture_points(plan: Plan) -> set[str]:
    """Every interface of the plan a capture can be taken on, as "member/interface" (what a hop's `at` names)."""
    return {f"{i.member}/{i.name}" for i in plan.interfaces}
