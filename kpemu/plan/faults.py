"""Classic misconfigurations as data (pure): what each fault of a scenario changes in the lab's
own namespaces, and the symptom it produces, for kernel/faults.py to apply and the report to show.

Every change stays inside one lab namespace (a node's or a pod's): a sysctl, an MTU, a route, a
link removed, kube-proxy rules deleted. Nothing touches the root namespace.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kpemu.cni import cni_of
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology

# the nat chains whose MASQUERADE rules no-masquerade removes: kube-proxy's, flannel's, calico's
MASQUERADE_CHAINS = ("KUBE-POSTROUTING", "FLANNEL-POSTRTG", "cali-nat-outgoing")


@dataclass(frozen=True)
class FaultStep:
    """One fault, ready to apply: commands run in `netns`, rules deleted there, and its story."""

    kind: str
    member: str
    netns: str
    commands: tuple[tuple[str, ...], ...] = ()  # argv run inside the namespace, in order
    delete_rules: tuple[str, tuple[str, ...], str] | None = None  # (table, chains, -j target): rules removed
    change: str = ""  # what was changed, in words
    symptom: str = ""  # what it breaks, and how the report shows it

    def to_json(self) -> dict:
        return asdict(self)


def _sysctl(key: str, value: str) -> tuple[str, ...]:
    return ("sysctl", "-q", "-w", f"{key}={value}")


def plan_fault(topo: Topology, f: Fault) -> FaultStep:
    """The step for one fault of a validated scenario."""
    if f.kind == "stale-rules":
        pod = next(p for p in topo.pods if p.name == f.pod)
        return FaultStep(
            f.kind, pod.name, netns_name(topo.name, pod.name), commands=(("ip", "address", "flush", "dev", "eth0"),),
            change=f"pod {pod.name} is gone (its address {pod.ip} released) and kube-proxy did not sync: its "
                   "KUBE-SEP rules still DNAT to it",
            symptom=f"connections the Service sends to {pod.ip} are DNATed to an address nobody answers: the node's "
                    "ARP for it fails (NEIGH_FAILED) and the client times out")
    node = f.node or ""
    ns = netns_name(topo.name, node)
    if f.kind == "mtu-mismatch":
        return FaultStep(
            f.kind, node, ns, commands=(("ip", "link", "set", "dev", f.device, "mtu", str(f.mtu)),),
            change=f"{node}/{f.device} MTU set to {f.mtu}; every other interface keeps its MTU",
            symptom=f"the handshake and small packets pass; a packet larger than {f.mtu} bytes that must leave "
                    f"{node} by {f.device} with Don't Fragment set is dropped (PKT_TOO_BIG) and its sender gets "
                    "ICMP fragmentation needed")
    if f.kind == "rp-filter":
        dev = cni_of(topo).pod_device  # where a route "sent astray" points
        return FaultStep(
            f.kind, node, ns,
            commands=(_sysctl("net.ipv4.conf.all.rp_filter", "1"), _sysctl("net.ipv4.conf.eth0.rp_filter", "1"),
                      ("ip", "route", "replace", str(f.source), "dev", dev)),
            change=f"strict reverse-path filtering (rp_filter=1) on {node}, and a route to {f.source} via {dev}: "
                   "the way back to those clients is not the way their packets come in",
            symptom=f"packets from {f.source} arriving on {node}'s eth0 fail the reverse-path check (the route back "
                    f"leaves by {dev}): the kernel drops them on input (IP_RPFILTER) after nat PREROUTING, before "
                    "any filter rule")
    if f.kind == "no-masquerade":
        return FaultStep(
            f.kind, node, ns, delete_rules=("nat", MASQUERADE_CHAINS, "MASQUERADE"),
            change=f"every MASQUERADE rule of {node} removed (kube-proxy's in KUBE-POSTROUTING, and the CNI's, which "
                   "would otherwise masquerade traffic into the pod network too): forwarded packets keep the client's "
                   "source address",
            symptom="the backend answers the client's own address directly: the reply leaves by the backend's node, "
                    "not by the node the client connected to, so nothing reverses the DNAT and it is dropped on the "
                    "wrong way home (conntrack there never saw the request: INVALID; or the client has no socket "
                    "for the pod's address)")
    # no-br-netfilter
    return FaultStep(
        f.kind, node, ns, commands=(_sysctl("net.bridge.bridge-nf-call-iptables", "0"),),
        change=f"bridge netfilter off on {node} (net.bridge.bridge-nf-call-iptables=0)",
        symptom="packets between two pods on the same bridge skip iptables: a pod that reaches a Service whose "
                "backend is on the same node gets the reply straight from the backend's address, without the "
                "reverse DNAT; its socket never asked for that tuple (NO_SOCKET) and the connection fails")


def plan_faults(topo: Topology, faults: list[Fault]) -> list[FaultStep]:
    """The steps for a scenario's faults, in the order written."""
    return [plan_fault(topo, f) for f in faults]
