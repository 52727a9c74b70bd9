"""Apply kube-proxy's iptables rules in throwaway namespaces and compare iptables-save read-back
with kpemu's canonical text (seed 001 on the legacy and nft backends, the flannel topology's nodes,
and the rich rule set across releases)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kpemu.errors import ApplyError
from kpemu.kernel import netfilter, nfacct
from kpemu.kernel import netns as nsmod
from kpemu.model import load_topology
from kpemu.model.topology import Topology
from kpemu.proxy.iptables import iptables_rules, kube_proxy_chains, restore_text
from kpemu.proxy.save import save_text
from tests.conftest import ROOT, TOPOLOGIES, needs_root

pytestmark = [needs_root, pytest.mark.root]


@pytest.fixture
def scratch() -> Iterator[str]:
    name = "kp-h1-it"
    nsmod.create_netns(name)
    try:
        yield name
    finally:
        nsmod.delete_netns(name)
    assert name not in nsmod.list_netns("kp-h1-")


def _with(topo: Topology, **kp: object) -> Topology:
    return topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update=kp)})


def _apply(ns: str, topo: Topology, node: str) -> None:
    if nfacct.uses_counters(topo):
        nfacct.ensure_counters(ns)
    rs = iptables_rules(topo, node)
    backend = topo.kubeProxy.backend
    netfilter.apply_and_verify(ns, restore_text(rs), save_text(rs, backend), kube_proxy_chains(rs), backend)


@pytest.mark.parametrize("backend", ["legacy", "nft"])
def test_seed_001(scratch: str, backend: str) -> None:
    topo = _with(load_topology(TOPOLOGIES / "seed-001.yaml"), backend=backend)
    _apply(scratch, topo, "minikube")
    got = netfilter.save(scratch, backend)
    assert '-A KUBE-SVC-4N57TFCL4MD7ZTDA -m statistic --mode random --probability 0.50000000000' in got


@pytest.mark.parametrize("node", ["node1", "node2"])
def test_flannel_nodes(scratch: str, node: str) -> None:
    _apply(scratch, load_topology(TOPOLOGIES / "flannel-vxlan.yaml"), node)


@pytest.mark.parametrize("version", ["1.10", "1.14", "1.20", "1.23", "1.26", "1.33", "1.37"])
def test_rich_rule_set_across_releases(scratch: str, version: str) -> None:
    topo = _with(load_topology(ROOT / "tests" / "data" / "rich.yaml"), version=version)
    _apply(scratch, topo, "node2")


def test_mismatch_names_first_differing_line(scratch: str) -> None:
    topo = load_topology(TOPOLOGIES / "flannel-vxlan.yaml")
    rs = iptables_rules(topo, "node1")
    nfacct.ensure_counters(scratch)
    netfilter.restore(scratch, restore_text(rs), "nft")
    wrong = save_text(rs, "nft").replace("--probability 0.33333333349", "--probability 0.25000000000")
    with pytest.raises(ApplyError, match=r"expected '.*0\.25000000000.*', kernel has '.*0\.33333333349"):
        netfilter.verify(scratch, wrong, kube_proxy_chains(rs), "nft")


def test_random_fully_probe(scratch: str) -> None:
    assert netfilter.supports_random_fully(scratch, "nft") is True
    assert "KPEMU-RF-PROBE" not in netfilter.save(scratch, "nft", "nat")
