"""nftables mode's registry entry: a node's texts, apply step, read-back and oracle walk, and its facts."""

from __future__ import annotations

from kpemu.model.modes import MODE_FACTS
from kpemu.model.names import netns_name
from kpemu.model.topology import Topology
from kpemu.plan.batch import Step
from kpemu.proxy.nftables.eras import MASQUERADING
from kpemu.proxy.nftables.generate import nftables_transaction
from kpemu.proxy.nftables.hooks import explain_hooks
from kpemu.proxy.nftables.listing import listing
from kpemu.proxy.nftables.tx import FAMILY, TABLE
from kpemu.proxy.proxymode import ProxyMode, conntrack_steps
from kpemu.proxy.state import NodeProxyState, Walk


def build(topo: Topology, node: str, kernel: tuple[int, int] | None = None) -> NodeProxyState:
    """kube-proxy's first-sync transaction in one `nft -f -`, read back with `nft list table ip kube-proxy`."""
    tx = nftables_transaction(topo, node)
    table = tx.table()
    texts = {"nft": tx.text(), "nft-list": listing(table)}
    step = Step("run", f"{node}: kube-proxy's nftables transaction", netns_name(topo.name, node), ("nft", "-f", "-"),
                texts["nft"])
    readback = ({"node": node, "kind": "nft", "expected": texts["nft-list"]},)
    return NodeProxyState(node, texts, (step, *conntrack_steps(topo, node)), readback,
                          Walk(nft=table))


MODE = ProxyMode(
    MODE_FACTS["nftables"], ("nft", "nft-list"), build,
    saved=("iptables", "nft"), trace="nft-monitor", walks="nft", features=("tool:nft", "nftables"),
    explain_hooks=explain_hooks, masquerade_chains=(), masquerade_nft=(FAMILY, TABLE, MASQUERADING, "masquerade"))
