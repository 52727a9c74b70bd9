"""no-br-netfilter: bridged packets on a node skip iptables."""

from __future__ import annotations

from kpemu.faults.spec import FaultSpec
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep, sysctl


def plan(topo: Topology, f: Fault) -> FaultStep:
    """net.bridge.bridge-nf-call-iptables=0 on the node."""
    node = f.node or ""
    return FaultStep(
        f.kind, node, netns_name(topo.name, node), commands=(sysctl("net.bridge.bridge-nf-call-iptables", "0"),),
        change=f"bridge netfilter off on {node} (net.bridge.bridge-nf-call-iptables=0)",
        symptom="packets between two pods on the same bridge skip iptables: a pod that reaches a Service whose "
                "backend is on the same node gets the reply straight from the backend's address, without the "
                "reverse DNAT; its socket never asked for that tuple (NO_SOCKET) and the connection fails")


FAULT = FaultSpec("no-br-netfilter", {"node": "node: node2"}, plan)
