"""The model oracle (pure): walk kube-proxy's generated state for one packet, without a kernel.

One walker per kind of state a mode's node holds (`ProxyMode.walks`): iptables rules, with IPVS's
sets and virtual servers when the mode balances with IPVS (kpemu.analyse.oracle.iptables), or
kube-proxy's nftables table (kpemu.analyse.oracle.nft). Both speak kpemu.analyse.oracle.types;
kpemu.analyse.oracle.compare checks a kernel trace against what they predict.
"""

from __future__ import annotations

from collections.abc import Callable

from kpemu.analyse.oracle.iptables import predict
from kpemu.analyse.oracle.nft import predict_nft
from kpemu.analyse.oracle.types import Packet, Prediction
from kpemu.cni import node_addresses
from kpemu.model.topology import Topology
from kpemu.proxy.modes import mode_of
from kpemu.proxy.state import NodeProxyState, Walk

# (what the node's state gives to walk, the packet, the node's own addresses, the node, the masquerade mark)
Walker = Callable[[Walk, Packet, set[str], str, int], Prediction]


def _walk_iptables(walk: Walk, pkt: Packet, local: set[str], node: str, masq_mark: int) -> Prediction:
    return predict(walk.rules, pkt, local, node, walk.ipvs)  # type: ignore[arg-type]


def _walk_nft(walk: Walk, pkt: Packet, local: set[str], node: str, masq_mark: int) -> Prediction:
    return predict_nft(walk.nft, pkt, local, node, masq_mark)  # type: ignore[arg-type]


# ProxyMode.walks -> its walker
WALKERS: dict[str, Walker] = {"xtables": _walk_iptables, "nft": _walk_nft}


def node_local_addresses(topo: Topology, node: str) -> set[str]:
    """Addresses local to a node in the lab: loopback, its underlay IP and the CNI's addresses on it."""
    return {"127.0.0.1", *node_addresses(topo, node)}


def predict_for_topology(topo: Topology, node: str, pkt: Packet, state: NodeProxyState) -> Prediction:
    """All outcomes of `pkt` on `node` as kpemu generates it: the node's kube-proxy `state` (a run's lab
    plan's, or `node_state` outside a run) walked by its mode's walker."""
    walk = state.walk
    local = node_local_addresses(topo, node) | walk.local
    return WALKERS[mode_of(topo).walks](walk, pkt, local, node, 1 << topo.kubeProxy.masqueradeBit)
