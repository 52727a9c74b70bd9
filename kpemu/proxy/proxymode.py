"""What a kube-proxy mode is to the rest of kpemu (`ProxyMode`), and the step helpers its packages share.

Each mode package (kpemu.proxy.iptables, .ipvs, .nftables) builds its own `MODE`; the registry
(kpemu.proxy.modes) lists them. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kpemu.model.modes import ModeFacts
from kpemu.model.names import netns_name
from kpemu.model.topology import KubeProxy, Topology
from kpemu.plan.batch import Step, sysctl_steps
from kpemu.plan.types import Sysctl
from kpemu.proxy.hookprose import Explainer
from kpemu.proxy.rules import RuleSet
from kpemu.proxy.state import NodeProxyState
from kpemu.proxy.xtables import RESTORE

# (topology, node, the kernel's (major, minor) or None for any) -> everything the node's kube-proxy state is
Build = Callable[[Topology, str, "tuple[int, int] | None"], NodeProxyState]


def _no_notice(kp: KubeProxy) -> str | None:
    return None


@dataclass(frozen=True)
class ProxyMode:
    """What one kube-proxy mode generates, how it is applied, traced and modelled."""

    facts: ModeFacts  # its name, the releases that have it, whether kubeProxy.scheduler applies
    formats: tuple[str, ...]  # `kpemu rules --format` values that carry this mode's state
    build: Build  # a node's texts, apply steps, read-back expectations and what the oracle walks
    saved: tuple[str, ...]  # what is read back from each node (kpemu.kernel.snapshot.RULE_KINDS)
    trace: str  # how packets are traced and hops explained: "iptables-trace" (xtables-monitor) or "nft-monitor"
    walks: str  # what the offline oracle walks and a node's dumps hold: "xtables" (iptables rules) or "nft"
    features: tuple[str, ...]  # kernel.probe feature names the mode needs
    nfacct: bool = False  # its rules may name kube-proxy's nfacct counters (kubeProxy.nfacct applies)
    notice: Callable[[KubeProxy], str | None] = _no_notice  # what kube-proxy logs at startup, e.g. a deprecation
    explain_hooks: Explainer | None = None  # why a traced packet's hooks match the claims (kpemu.analyse.hooks)
    # where kube-proxy masquerades (the no-masquerade fault removes it): the iptables nat chains of its
    # MASQUERADE rules, and (family, table, chain, statement) of its nft masquerade rules
    masquerade_chains: tuple[str, ...] = ("KUBE-POSTROUTING",)
    masquerade_nft: tuple[str, str, str, str] | None = None

    @property
    def name(self) -> str:
        return self.facts.name

    def accepts(self, minor: int) -> bool:
        """Whether kpemu models this mode for release 1.<minor>."""
        return self.facts.accepts(minor)


def restore_step(what: str, ns: str, text: str, backend: str) -> Step:
    """One `iptables-{nft,legacy}-restore --noflush` of `text` (all its tables) in `ns`."""
    return Step("run", what, ns, (RESTORE[backend], "--noflush", "--wait"), text)


def iptables_readback(node: str, rs: RuleSet, saved: str) -> dict:
    """What `iptables-save` must print (`saved`, the canonical text of `rs`) for kube-proxy's chains on `node`
    (kpemu.jobs.verify)."""
    return {"node": node, "kind": "iptables", "expected": saved,
            "chains": {name: sorted(c.name for c in t.user_chains) for name, t in rs.tables.items()}}


def conntrack_steps(topo: Topology, node: str) -> list[Step]:
    """The conntrack sysctls kube-proxy sets at start-up that kpemu models: conntrack.tcpBeLiberal
    sets net.netfilter.nf_conntrack_tcp_be_liberal=1 (cmd/kube-proxy/app/server_linux.go), every mode."""
    if not topo.kubeProxy.tcpBeLiberal:
        return []
    ns = netns_name(topo.name, node)
    return sysctl_steps(f"{node}: conntrack.tcpBeLiberal",
                        [Sysctl(ns, "net/netfilter/nf_conntrack_tcp_be_liberal", "1")])
