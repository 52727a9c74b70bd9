"""rp-filter: strict reverse-path filtering on a node whose route back to some clients is another way."""

from __future__ import annotations

from kpemu import cni as cni_registry
from kpemu.faults.spec import FaultSpec
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep, sysctl


def plan(topo: Topology, f: Fault) -> FaultStep:
    """rp_filter=1 on the node, and its route to `source` sent by the CNI's pod device."""
    node = f.node or ""
    dev = cni_registry.cni_of(topo).pod_device  # where a route "sent astray" points
    return FaultStep(
        f.kind, node, netns_name(topo.name, node),
        commands=(sysctl("net.ipv4.conf.all.rp_filter", "1"), sysctl("net.ipv4.conf.eth0.rp_filter", "1"),
                  ("ip", "route", "replace", str(f.source), "dev", dev)),
        change=f"strict reverse-path filtering (rp_filter=1) on {node}, and a route to {f.source} via {dev}: "
               "the way back to those clients is not the way their packets come in",
        symptom=f"packets from {f.source} arriving on {node}'s eth0 fail the reverse-path check (the route back "
                f"leaves by {dev}): the kernel drops them on input (IP_RPFILTER) after nat PREROUTING, before "
                "any filter rule")


FAULT = FaultSpec("rp-filter", {"node": "node: node2", "source": "source: 10.242.72.0/24"}, plan)
