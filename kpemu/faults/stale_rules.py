"""stale-rules: a pod is gone and kube-proxy did not sync, so its rules still send traffic to it."""

from __future__ import annotations

from kpemu.faults.spec import FaultSpec
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep


def plan(topo: Topology, f: Fault) -> FaultStep:
    """The pod's address released; kube-proxy's rules left as they are."""
    pod = next(p for p in topo.pods if p.name == f.pod)
    return FaultStep(
        f.kind, pod.name, netns_name(topo.name, pod.name), commands=(("ip", "address", "flush", "dev", "eth0"),),
        change=f"pod {pod.name} is gone (its address {pod.ip} released) and kube-proxy did not sync: its "
               "KUBE-SEP rules still DNAT to it",
        symptom=f"connections the Service sends to {pod.ip} are DNATed to an address nobody answers: the node's "
                "ARP for it fails (NEIGH_FAILED) and the client times out")


FAULT = FaultSpec("stale-rules", {"pod": "pod: web-1"}, plan)
