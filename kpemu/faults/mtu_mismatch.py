"""mtu-mismatch: one node interface gets a smaller MTU than the rest of the path."""

from __future__ import annotations

from kpemu.faults.spec import FaultSpec
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep


def plan(topo: Topology, f: Fault) -> FaultStep:
    """`ip link set mtu` on the node's interface (`device`, eth0 by default)."""
    node = f.node or ""
    return FaultStep(
        f.kind, node, netns_name(topo.name, node),
        commands=(("ip", "link", "set", "dev", f.device, "mtu", str(f.mtu)),),
        change=f"{node}/{f.device} MTU set to {f.mtu}; every other interface keeps its MTU",
        symptom=f"the handshake and small packets pass; a packet larger than {f.mtu} bytes that must leave "
                f"{node} by {f.device} with Don't Fragment set is dropped (PKT_TOO_BIG) and its sender gets "
                "ICMP fragmentation needed")


FAULT = FaultSpec("mtu-mismatch", {"node": "node: node2", "mtu": "mtu: 1400"}, plan)
