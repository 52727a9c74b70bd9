"""Apply kube-proxy's nftables transaction inside a node namespace and verify the read-back.

Effects only: the text comes from kpemu.proxy.nftables. The whole transaction goes to one
`nft -f -` in the namespace, as kube-proxy's knftables does per sync; the read-back is
`nft list table ip kube-proxy` in the same namespace, compared line by line with the listing the
pure code predicts (first differing line named; elements of interval sets, which the kernel lists
in its own order, compared as a set).
"""

from __future__ import annotations

from kpemu.errors import ApplyError
from kpemu.kernel.netns import run_in
from kpemu.kernel.readback import check_readback
from kpemu.model.names import netns_name
from kpemu.model.topology import Topology
from kpemu.proxy.nftables.listing import without_interval_order

LIST_TABLE = ["nft", "list", "table", "ip", "kube-proxy"]


def load(ns: str, text: str) -> None:
    """`nft -f -` of `text` in netns `ns`; ApplyError with nft's message when it is refused."""
    res = run_in(ns, ["nft", "-f", "-"], input=text)
    if res.returncode != 0:
        raise ApplyError(f"{ns}: nft -f refused kube-proxy's transaction: {res.stderr.strip()}")


def list_table(ns: str) -> str:
    """`nft list table ip kube-proxy` in netns `ns`."""
    res = run_in(ns, LIST_TABLE)
    if res.returncode != 0:
        raise ApplyError(f"{ns}: {' '.join(LIST_TABLE)} failed: {res.stderr.strip()}")
    return res.stdout


def apply_and_verify(ns: str, transaction: str, expected_listing: str) -> None:
    """Load the transaction, then compare the kernel's listing with `expected_listing`."""
    load(ns, transaction)
    check_readback(f"{ns}: {' '.join(LIST_TABLE)}", without_interval_order(expected_listing),
                   without_interval_order(list_table(ns)))


def apply_node(topo: Topology, node: str) -> None:
    """nftables mode: kube-proxy's first-sync transaction on `node`, read back with `nft list`."""
    from kpemu.proxy.nftables import listing, nftables_transaction

    tx = nftables_transaction(topo, node)
    apply_and_verify(netns_name(topo.name, node), tx.text(), listing(tx.table()))
