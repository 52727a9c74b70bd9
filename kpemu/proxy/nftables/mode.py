"""nftables mode's registry entry: its texts, how a node is programmed and read back, its facts."""

from __future__ import annotations

from kpemu.model.modes import MODE_FACTS
from kpemu.model.topology import Topology
from kpemu.plan.batch import Step
from kpemu.proxy.nftables.generate import nftables_transaction
from kpemu.proxy.nftables.listing import listing
from kpemu.proxy.proxymode import ProxyMode


def texts(topo: Topology, node: str) -> dict[str, str]:
    """`kpemu rules` formats: the transaction kube-proxy sends and what `nft list table` prints."""
    tx = nftables_transaction(topo, node)
    return {"nft": tx.text(), "nft-list": listing(tx.table())}


def steps(topo: Topology, node: str, ns: str, kernel: tuple[int, int]) -> tuple[list[Step], list[dict]]:
    """kube-proxy's first-sync transaction in one `nft -f -`, read back with `nft list table ip kube-proxy`."""
    tx = nftables_transaction(topo, node)
    return ([Step("run", f"{node}: kube-proxy's nftables transaction", ns, ("nft", "-f", "-"), tx.text())],
            [{"node": node, "kind": "nft", "expected": listing(tx.table())}])


MODE = ProxyMode(
    MODE_FACTS["nftables"], ("nft", "nft-list"), texts,
    steps=steps, saved=("iptables", "nft"), trace="nft-monitor", oracle="nftables",
    features=("tool:nft", "nftables"))
