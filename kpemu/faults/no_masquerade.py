"""no-masquerade: a node forwards packets without masquerading them."""

from __future__ import annotations

from kpemu import cni as cni_registry
from kpemu.faults.spec import FaultSpec
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep
from kpemu.proxy.modes import mode_of
from kpemu.proxy.nftables.eras import MASQUERADING
from kpemu.proxy.nftables.tx import FAMILY, TABLE

SYMPTOM = ("the backend answers the client's own address directly: the reply leaves by the backend's node, not by "
           "the node the client connected to, so nothing reverses the DNAT and it is dropped on the wrong way home "
           "(conntrack there never saw the request: INVALID; or the client has no socket for the pod's address)")


def plan(topo: Topology, f: Fault) -> FaultStep:
    """Every MASQUERADE rule of the node removed: kube-proxy's (iptables and IPVS mode: KUBE-POSTROUTING;
    nftables mode: the masquerade rules of its `masquerading` chain) and every CNI's (iptables)."""
    node = f.node or ""
    ns = netns_name(topo.name, node)
    if mode_of(topo).walks == "nft":
        return FaultStep(
            f.kind, node, ns, delete_rules=("nat", cni_registry.masquerade_chains(), "MASQUERADE"),
            delete_nft=(FAMILY, TABLE, MASQUERADING, "masquerade"),
            change=f"every masquerade rule of {node} removed (kube-proxy's in its nft chain {FAMILY} {TABLE} "
                   f"{MASQUERADING}, and the CNI's iptables MASQUERADE rules, which would otherwise masquerade "
                   "traffic into the pod network too): forwarded packets keep the client's source address",
            symptom=SYMPTOM)
    return FaultStep(
        f.kind, node, ns,
        delete_rules=("nat", ("KUBE-POSTROUTING", *cni_registry.masquerade_chains()), "MASQUERADE"),
        change=f"every MASQUERADE rule of {node} removed (kube-proxy's in KUBE-POSTROUTING, and the CNI's, which "
               "would otherwise masquerade traffic into the pod network too): forwarded packets keep the client's "
               "source address",
        symptom=SYMPTOM)


FAULT = FaultSpec("no-masquerade", {"node": "node: node2"}, plan)
