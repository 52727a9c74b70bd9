"""The proxy-mode registry: one entry per kube-proxy mode, saying everything the rest of kpemu asks.

For each mode: the releases that have it, the `kpemu rules` formats it produces and how to make
them for a node (pure), the kernel side that applies it and reads it back (named as
"module:function" and imported only by kernel code, so this pure module never imports kernel
code), how its packets are traced, what the offline oracle walks and which probed features the
kernel must have. Adding a mode is its own package plus one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kpemu.errors import InputError
from kpemu.model.topology import NEWEST_NFT_MINOR, OLDEST_NFT_MINOR, Topology

Texts = Callable[[Topology, str], dict[str, str]]


@dataclass(frozen=True)
class ProxyMode:
    """What one kube-proxy mode generates, how it is applied, traced and modelled."""

    name: str
    first_minor: int  # oldest kube-proxy release (1.<minor>) kpemu models the mode for
    last_minor: int | None  # newest one, None: every modelled release
    formats: tuple[str, ...]  # `kpemu rules --format` values that carry this mode's state
    texts: Texts  # node -> {format: text}; formats not in `formats` say the mode has none
    apply: str  # "module:function(topo, node)" on the kernel side
    trace: str  # how hops are explained: "iptables-trace" (xtables-monitor) or "nft-monitor"
    oracle: str  # what the offline oracle walks: "iptables", "ipvs" or "nftables"
    features: tuple[str, ...]  # kernel.probe feature names the mode needs

    def accepts(self, minor: int) -> bool:
        """Whether kpemu models this mode for release 1.<minor>."""
        return minor >= self.first_minor and (self.last_minor is None or minor <= self.last_minor)


def _iptables_texts(topo: Topology, node: str) -> dict[str, str]:
    from kpemu.proxy.iptables import iptables_rules, restore_text
    from kpemu.proxy.save import save_text

    rs = iptables_rules(topo, node)
    return {"iptables-restore": restore_text(rs), "iptables-save": save_text(rs, topo.kubeProxy.backend)}


def _ipvs_texts(topo: Topology, node: str) -> dict[str, str]:
    from kpemu.proxy.ipvs import ipvs_rules
    from kpemu.proxy.save import ruleset_from_restore, save_text

    st = ipvs_rules(topo, node)
    restore = st.restore_text()
    return {
        "iptables-restore": restore,
        "iptables-save": save_text(ruleset_from_restore(restore), topo.kubeProxy.backend),
        "ipset": st.ipset_save_text(),
        "ipvs": st.ipvsadm_text(),
    }


def _nftables_texts(topo: Topology, node: str) -> dict[str, str]:
    from kpemu.proxy.nftables import listing, nftables_transaction

    tx = nftables_transaction(topo, node)
    return {"nft": tx.text(), "nft-list": listing(tx.table())}


MODES: dict[str, ProxyMode] = {
    "iptables": ProxyMode(
        "iptables", 10, None, ("iptables-restore", "iptables-save"), _iptables_texts,
        apply="kpemu.kernel.rules:apply_iptables", trace="iptables-trace", oracle="iptables",
        features=("match:statistic",)),
    "ipvs": ProxyMode(
        "ipvs", 11, None, ("iptables-restore", "iptables-save", "ipset", "ipvs"), _ipvs_texts,
        apply="kpemu.kernel.rules:apply_ipvs", trace="iptables-trace", oracle="ipvs",
        features=("ip_vs", "dummy", "ipset:hash:ip,port", "ipset:hash:ip,port,ip", "ipset:hash:ip,port,net",
                  "ipset:bitmap:port", "match:set", "tool:ipset", "tool:ipvsadm")),
    "nftables": ProxyMode(
        "nftables", OLDEST_NFT_MINOR, NEWEST_NFT_MINOR, ("nft", "nft-list"), _nftables_texts,
        apply="kpemu.kernel.nftables:apply_node", trace="nft-monitor", oracle="nftables",
        features=("tool:nft", "nftables")),
}
# Every `kpemu rules --format` value, in the order `--format all` prints them.
ALL_FORMATS = ("iptables-restore", "iptables-save", "ipset", "ipvs", "nft", "nft-list")


def mode(name: str) -> ProxyMode:
    """The registry entry for `name`; InputError naming kubeProxy.mode for an unknown one."""
    try:
        return MODES[name]
    except KeyError:
        raise InputError(f"kubeProxy.mode {name!r} is not a kube-proxy mode kpemu models; expected one of "
                         f"{', '.join(MODES)}") from None


def mode_of(topo: Topology) -> ProxyMode:
    """The registry entry of a topology's kubeProxy.mode."""
    return mode(topo.kubeProxy.mode)


def node_texts(topo: Topology, node: str) -> dict[str, str]:
    """Every `kpemu rules` format for `node`; formats of other modes say this mode has no such state."""
    m = mode_of(topo)
    texts = m.texts(topo, node)
    none = f"# kube-proxy mode {m.name}: node {node} has no {{}} state\n"
    return {f: texts.get(f, none.format(f)) for f in ALL_FORMATS}
