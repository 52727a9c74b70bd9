"""kube-proxy's nftables mode (1.29+): the transaction it sends, the table it leaves, its listing.

Pure code: `nftables_transaction(topo, node)` is one first sync on a clean node
(kpemu.proxy.nftables.generate); `Transaction.table()` the objects afterwards;
`listing(table)` what `nft list table ip kube-proxy` prints. The mode's registry entry
(kpemu.proxy.nftables.mode) makes the `nft -f -` apply step and names the read-back, which the
lab's job runs (kpemu.kernel.snapshot reads the table back).
"""

from kpemu.proxy.nftables.generate import nftables_transaction, settings_for
from kpemu.proxy.nftables.listing import listing
from kpemu.proxy.nftables.mode import MODE
from kpemu.proxy.nftables.tx import Table, Transaction, sort_transaction

__all__ = ["MODE", "Table", "Transaction", "listing", "nftables_transaction", "settings_for", "sort_transaction"]
