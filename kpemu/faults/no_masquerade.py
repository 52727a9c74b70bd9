"""no-masquerade: a node forwards packets without masquerading them."""

from __future__ import annotations

from kpemu import cni as cni_registry
from kpemu.faults.spec import FaultSpec
from kpemu.model.names import netns_name
from kpemu.model.scenario import Fault
from kpemu.model.topology import Topology
from kpemu.plan.faultstep import FaultStep
from kpemu.proxy.modes import mode_of


def plan(topo: Topology, f: Fault) -> FaultStep:
    """Every masquerade rule of the node removed: kube-proxy's (iptables and IPVS mode: KUBE-POSTROUTING's
    MASQUERADE; nftables mode: the masquerade rules of its `masquerading` chain, as its registry entry says)
    and every CNI's (iptables)."""
    node = f.node or ""
    m = mode_of(topo)
    nft = m.masquerade_nft
    if nft is not None:
        family, table, chain, _ = nft
        kube_proxy = f"kube-proxy's in its nft chain {family} {table} {chain}"
    else:
        kube_proxy = f"kube-proxy's in {', '.join(m.masquerade_chains)}"
    return FaultStep(
        f.kind, node, netns_name(topo.name, node),
        delete_rules=("nat", (*m.masquerade_chains, *cni_registry.masquerade_chains()), "MASQUERADE"),
        delete_nft=nft,
        change=f"every masquerade rule of {node} removed ({kube_proxy}, and the CNI's, which would otherwise "
               "masquerade traffic into the pod network too): forwarded packets keep the client's source address",
        symptom="the backend answers the client's own address directly: the reply leaves by the backend's node, "
                "not by the node the client connected to, so nothing reverses the DNAT and it is dropped on the "
                "wrong way home (conntrack there never saw the request: INVALID; or the client has no socket "
                "for the pod's address)")


FAULT = FaultSpec("no-masquerade", {"node": "node: node2"}, plan)
