"""What every CNI plan does for a pod before wiring it: its namespace."""

from __future__ import annotations

from kpemu.model.names import netns_name
from kpemu.model.topology import Pod, Topology
from kpemu.plan.parts import Parts
from kpemu.plan.types import Interface, Namespace, Sysctl


def pod_namespace(topo: Topology, p: Parts, pod: Pod) -> str:
    """Create the pod's namespace entry (IPv6 off, no forwarding) and return its name."""
    ns = netns_name(topo.name, pod.name)
    p.namespaces.append(Namespace(ns, pod.name, "pod", node=pod.node))
    p.sysctls += [
        Sysctl(ns, "net/ipv6/conf/all/disable_ipv6", "1", optional=True),
        Sysctl(ns, "net/ipv6/conf/default/disable_ipv6", "1", optional=True),
        Sysctl(ns, "net/ipv4/ip_forward", "0"),
    ]
    p.interfaces.append(Interface(ns, "eth0", pod.name, "pod-eth0"))
    return ns
