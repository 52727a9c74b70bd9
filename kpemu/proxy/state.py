"""A lab's kube-proxy state, generated once per node and reused: what `kpemu rules` prints, the steps
that program the node, what the kernel must read back, and what the offline oracle walks (pure).

Each mode's `build(topo, node, kernel)` (kpemu.proxy.<mode>.mode) makes one `NodeProxyState`;
kpemu.proxy.modes.proxy_state makes them for every node of a lab, and the plan carries the result
(kpemu.labplan.LabPlan.proxy) to the job that applies it and to the analysis that explains a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpemu.plan.batch import Step
    from kpemu.proxy.ipvs.ipvsadm_text import VirtualServer
    from kpemu.proxy.nftables.tx import Table
    from kpemu.proxy.rules import RuleSet


@dataclass(frozen=True)
class IpvsModel:
    """IPVS-mode extras: ipset members by set name (with types) and virtual servers."""

    sets: Mapping[str, tuple[str, tuple[str, ...]]]  # name -> (type, members)
    virtual_servers: tuple[VirtualServer, ...] = ()


@dataclass(frozen=True)
class Walk:
    """What the offline oracle walks on a node: kube-proxy's iptables rules (with IPVS's sets and virtual
    servers when it balances with IPVS), or its nftables table."""

    rules: RuleSet | None = None
    ipvs: IpvsModel | None = None
    nft: Table | None = None
    local: frozenset[str] = frozenset()  # addresses the mode itself makes local (kube-ipvs0's, the node's)


@dataclass(frozen=True)
class NodeProxyState:
    """One node's kube-proxy state in every form kpemu uses it."""

    node: str
    texts: Mapping[str, str]  # `kpemu rules` format -> text (the mode's formats only)
    steps: tuple[Step, ...]  # how the node is programmed (kpemu.plan.batch.Step)
    readback: tuple[dict, ...]  # one expectation per kind read back: {"node", "kind", "expected", ...}
    walk: Walk
    # what kubelet writes on the node before kube-proxy starts (its KUBE-FIREWALL chain and jumps): the part
    # of `steps` a lab still needs when the real kube-proxy programs the node (kpemu.realproxy)
    kubelet_steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class ProxyState:
    """Every node's kube-proxy state of one lab, for one kernel (IPVS sysctls depend on it)."""

    mode: str
    kernel: tuple[int, int] | None
    nodes: Mapping[str, NodeProxyState] = field(default_factory=dict)

    def node(self, name: str) -> NodeProxyState:
        return self.nodes[name]
