"""kube-proxy's local-traffic detector for one node (pkg/proxy/util/localdetector.go and
cmd/kube-proxy/app/server_linux.go getLocalDetectors): the match words that say "from a pod of this
cluster (node)" and "not from one", in iptables argv and in nft expression words.

- ClusterCIDR (the default): `-s <clusterCIDR>` / `ip saddr <clusterCIDR>`; no detector without a CIDR;
- NodeCIDR: the same with the node's podCIDR;
- BridgeInterface: `-i <bridge>` / `iifname <bridge>`;
- InterfaceNamePrefix: `-i <prefix>+` / `iifname <prefix>*`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpemu.model.topology import Topology


@dataclass(frozen=True)
class LocalDetector:
    """IfLocal / IfNotLocal (iptables argv) and IfLocalNFT / IfNotLocalNFT (nft words, space-joined)."""

    if_local: tuple[str, ...]
    if_not_local: tuple[str, ...]
    if_local_nft: str
    if_not_local_nft: str


def _by_cidr(cidr: str) -> LocalDetector:
    return LocalDetector(("-s", cidr), ("!", "-s", cidr), f"ip saddr {cidr}", f"ip saddr != {cidr}")


def _by_interface(name: str) -> LocalDetector:
    return LocalDetector(("-i", name), ("!", "-i", name), f"iifname {name}", f"iifname != {name}")


def local_detector(topo: Topology, node: str) -> LocalDetector | None:
    """The detector kube-proxy on `node` uses; None when it has none (ClusterCIDR without a CIDR)."""
    kp = topo.kubeProxy
    how = kp.detectLocalMode or "ClusterCIDR"
    if how == "NodeCIDR":
        return _by_cidr(topo.require_node(node).podCIDR)
    if how == "BridgeInterface" and kp.bridgeInterface:
        return _by_interface(kp.bridgeInterface)
    if how == "InterfaceNamePrefix" and kp.interfaceNamePrefix:
        p = kp.interfaceNamePrefix
        return LocalDetector(("-i", f"{p}+"), ("!", "-i", f"{p}+"), f"iifname {p}*", f"iifname != {p}*")
    return _by_cidr(kp.clusterCIDR) if how == "ClusterCIDR" and kp.clusterCIDR else None
