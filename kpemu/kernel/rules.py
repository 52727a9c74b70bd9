"""Apply the netfilter side of a lab: kube-proxy's state per node, then the CNI's own rules."""

from __future__ import annotations

from kpemu.errors import ApplyError
from kpemu.kernel import netns as nsmod
from kpemu.model.topology import Topology
from kpemu.plan.types import Plan

RESTORE = {"nft": "iptables-nft-restore", "legacy": "iptables-legacy-restore"}


def restore(ns: str, text: str, backend: str = "nft") -> None:
    """Feed restore input to iptables-restore --noflush inside `ns`."""
    res = nsmod.run_in(ns, [RESTORE[backend], "--noflush", "--wait"], input=text)
    if res.returncode != 0:
        raise ApplyError(f"{ns}: iptables-restore failed: {res.stderr.strip()}\n--- input ---\n{text}")


def apply_rules(topo: Topology, plan: Plan) -> None:
    """kube-proxy's iptables/ipset/IPVS state on every node, then CNI and load-balancer rules."""
    backend = topo.kubeProxy.backend
    for r in plan.rules:
        restore(r.ns, r.text, backend)
