"""`kpemu rules`: the state kube-proxy would program on one node, as text.

Formats: iptables-restore (the restore input kpemu applies), iptables-save (canonical
`iptables-save` text of kube-proxy's and kubelet's chains), ipset (`ipset save`), ipvs
(`ipvsadm -Sn`), nft (the transaction kube-proxy's nftables mode pipes to `nft -f -`), nft-list
(what `nft list table ip kube-proxy` then prints), all (each of them under a `# ---` heading).
Which formats a mode fills is the mode registry's business (kpemu.proxy.modes); the others are a
single comment line.
"""

from __future__ import annotations

from kpemu.errors import InputError
from kpemu.model.topology import Topology
from kpemu.proxy.modes import ALL_FORMATS, node_state, node_texts

FORMATS = (*ALL_FORMATS, "all")


def _check(topo: Topology, node: str, fmt: str) -> None:
    topo.require_node(node)
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")


def rules_texts(topo: Topology, node: str, fmt: str) -> dict[str, str]:
    """The texts of `fmt` (every format for "all") for `node`, from one generation of its state;
    InputError names --node / --format when they are wrong."""
    _check(topo, node, fmt)
    texts = node_texts(topo, node, node_state(topo, node))
    return texts if fmt == "all" else {fmt: texts[fmt]}


def render_rules(topo: Topology, node: str, fmt: str) -> str:
    """The text of `fmt` for `node` ("all": each format under a `# --- name ---` heading)."""
    texts = rules_texts(topo, node, fmt)
    if fmt != "all":
        return texts[fmt]
    return "".join(f"# --- {name} ---\n{texts[name]}" for name in ALL_FORMATS)
