"""conntrack-full: a node's conntrack table is full, so new connections through it are dropped."""

from __future__ import annotations

from kpemu.faults.spec import FaultSpec
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep
from kpemu.plan.types import CONNTRACK_MAX


def plan(topo: Topology, f: Fault) -> FaultStep:
    """nf_conntrack_max set to `limit` (kernel-wide: in the guest only) and the node's table emptied."""
    node = f.node or ""
    return FaultStep(
        f.kind, node, netns_name(topo.name, node), commands=(("conntrack", "-F"),),
        kernel_wide=(CONNTRACK_MAX, str(f.limit)),
        change=f"nf_conntrack_max set to {f.limit} (kernel-wide, so in the guest kernel only) and {node}'s "
               f"conntrack table emptied: {node} keeps at most {f.limit} connections",
        symptom=f"once {node} tracks {f.limit} connections that conntrack may not evict (assured ones: answered "
                "TCP, closed ones in TIME_WAIT too), the first packet of every new connection through it is "
                "dropped in the netfilter hook (NETFILTER_DROP in nf_hook_slow, no rule involved; the kernel "
                "logs `nf_conntrack: table full, dropping packet`) and the client times out")


# the kernel-wide nf_conntrack_max is set only in kpemu's disposable guest: the probe says whether it may be
FAULT = FaultSpec("conntrack-full", {"node": "node: node2", "limit": "limit: 4"}, plan, features=("conntrack:max",))
