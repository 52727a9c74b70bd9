"""The proxy-mode registry: one entry per kube-proxy mode, saying everything the rest of kpemu asks.

For each mode: the releases that have it, the `kpemu rules` formats it produces and how to make
them for a node, the steps that program a node as kube-proxy does (one ipset restore, one
iptables-restore with all tables, one `ipvsadm -R`, one `nft -f`: kpemu.plan.batch.Step, run by the
lab's job on whichever kernel) with what the kernel must read back, how its packets are traced,
what the offline oracle walks and which probed features the kernel must have. All pure. Adding a
mode is its own package plus one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kpemu.errors import InputError
from kpemu.model.topology import NEWEST_NFT_MINOR, OLDEST_NFT_MINOR, Topology
from kpemu.plan.batch import Step, batch_step, sysctl_steps
from kpemu.plan.types import Sysctl

Texts = Callable[[Topology, str], dict[str, str]]
# (topology, node, its namespace, the kernel's (major, minor)) -> the steps, and one read-back
# expectation per kind the kernel is asked back for: {"node", "kind", "expected", ...} (kpemu.jobs.verify)
Steps = Callable[[Topology, str, str, tuple[int, int]], tuple[list[Step], list[dict]]]
RESTORE = {"nft": "iptables-nft-restore", "legacy": "iptables-legacy-restore"}


@dataclass(frozen=True)
class ProxyMode:
    """What one kube-proxy mode generates, how it is applied, traced and modelled."""

    name: str
    first_minor: int  # oldest kube-proxy release (1.<minor>) kpemu models the mode for
    last_minor: int | None  # newest one, None: every modelled release
    formats: tuple[str, ...]  # `kpemu rules --format` values that carry this mode's state
    texts: Texts  # node -> {format: text}; formats not in `formats` say the mode has none
    steps: Steps  # how a node is programmed, and what it must read back as
    saved: tuple[str, ...]  # what is read back from each node (kpemu.capture.snapshot.RULE_KINDS)
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


def restore_step(what: str, ns: str, text: str, backend: str) -> Step:
    """One `iptables-{nft,legacy}-restore --noflush` of `text` (all its tables) in `ns`."""
    return Step("run", what, ns, (RESTORE[backend], "--noflush", "--wait"), text)


def _iptables_readback(node: str, rs: object, backend: str) -> dict:
    from kpemu.proxy.iptables import kube_proxy_chains
    from kpemu.proxy.save import save_text

    return {"node": node, "kind": "iptables", "expected": save_text(rs, backend),  # type: ignore[arg-type]
            "chains": {t: sorted(c) for t, c in kube_proxy_chains(rs).items()}}  # type: ignore[arg-type]


def _iptables_steps(topo: Topology, node: str, ns: str, kernel: tuple[int, int]) -> tuple[list[Step], list[dict]]:
    """kube-proxy's nfacct counters (1.30+, when used), one iptables-restore, route_localnet if needed."""
    from kpemu.proxy.iptables import iptables_rules, needs_route_localnet, restore_text, uses_nfacct

    rs = iptables_rules(topo, node)
    steps = [Step("nfacct", f"{node}: kube-proxy's nfacct counters", ns)] if uses_nfacct(topo) else []
    steps.append(restore_step(f"{node}: kube-proxy rules", ns, restore_text(rs), topo.kubeProxy.backend))
    if needs_route_localnet(topo):
        steps += sysctl_steps(f"{node}: route_localnet", [Sysctl(ns, "net/ipv4/conf/all/route_localnet", "1")])
    return steps, [_iptables_readback(node, rs, topo.kubeProxy.backend)]


def _ipvs_steps(topo: Topology, node: str, ns: str, kernel: tuple[int, int]) -> tuple[list[Step], list[dict]]:
    """One ipset restore, one iptables-restore, kube-ipvs0 with its addresses, sysctls, one ipvsadm -R."""
    from kpemu.proxy.ipset_text import restore_input
    from kpemu.proxy.ipvs import DUMMY_DEVICE, ipvs_rules
    from kpemu.proxy.save import ruleset_from_restore

    state = ipvs_rules(topo, node, kernel=kernel)
    steps = [
        Step("run", f"{node}: ipset restore", ns, ("ipset", "restore", "-exist"), restore_input(state.ipsets)),
        restore_step(f"{node}: kube-proxy rules", ns, state.restore_text(), topo.kubeProxy.backend),
        batch_step(f"{node}: {DUMMY_DEVICE}", ns, [f"link add {DUMMY_DEVICE} type dummy"]
                   + [f"addr add {ip}/32 dev {DUMMY_DEVICE}" for ip in state.bound_addresses]),
        *sysctl_steps(f"{node}: IPVS sysctls", (Sysctl(ns, k, v) for k, v in state.sysctls)),
        Step("run", f"{node}: ipvsadm -R", ns, ("ipvsadm", "-R"), state.ipvsadm_text()),
    ]
    return steps, [
        _iptables_readback(node, ruleset_from_restore(state.restore_text()), topo.kubeProxy.backend),
        {"node": node, "kind": "ipset", "expected": state.ipset_save_text(), "sets": [s.name for s in state.ipsets]},
        {"node": node, "kind": "ipvs", "expected": state.ipvsadm_text()},
    ]


def _nftables_steps(topo: Topology, node: str, ns: str, kernel: tuple[int, int]) -> tuple[list[Step], list[dict]]:
    """kube-proxy's first-sync transaction in one `nft -f -`, read back with `nft list table ip kube-proxy`."""
    from kpemu.proxy.nftables import listing, nftables_transaction

    tx = nftables_transaction(topo, node)
    return ([Step("run", f"{node}: kube-proxy's nftables transaction", ns, ("nft", "-f", "-"), tx.text())],
            [{"node": node, "kind": "nft", "expected": listing(tx.table())}])


def _nftables_texts(topo: Topology, node: str) -> dict[str, str]:
    from kpemu.proxy.nftables import listing, nftables_transaction

    tx = nftables_transaction(topo, node)
    return {"nft": tx.text(), "nft-list": listing(tx.table())}


MODES: dict[str, ProxyMode] = {
    "iptables": ProxyMode(
        "iptables", 10, None, ("iptables-restore", "iptables-save"), _iptables_texts,
        steps=_iptables_steps, saved=("iptables", "ipset"), trace="iptables-trace", oracle="iptables",
        features=("match:statistic",)),
    "ipvs": ProxyMode(
        "ipvs", 11, None, ("iptables-restore", "iptables-save", "ipset", "ipvs"), _ipvs_texts,
        steps=_ipvs_steps, saved=("iptables", "ipset", "ipvs"), trace="iptables-trace", oracle="ipvs",
        features=("ip_vs", "dummy", "ipset:hash:ip,port", "ipset:hash:ip,port,ip", "ipset:hash:ip,port,net",
                  "ipset:bitmap:port", "match:set", "tool:ipset", "tool:ipvsadm")),
    "nftables": ProxyMode(
        "nftables", OLDEST_NFT_MINOR, NEWEST_NFT_MINOR, ("nft", "nft-list"), _nftables_texts,
        steps=_nftables_steps, saved=("iptables", "nft"), trace="nft-monitor", oracle="nftables",
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
