"""Load kube-proxy's nftables transaction with `nft -f` in throwaway namespaces and compare
`nft list table ip kube-proxy` with the listing kpemu predicts (upstream's fixture, the
reference's worked example, a rich rule set in every modelled release), and check that a
difference or a refused transaction fails naming the first differing line / nft's message."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kpemu.errors import ApplyError
from kpemu.kernel import netns as nsmod
from kpemu.kernel import nftables as nft
from kpemu.model import load_topology
from kpemu.model.topology import Topology
from kpemu.proxy.nftables import listing, nftables_transaction
from tests.conftest import ROOT, needs_root

pytestmark = [needs_root, pytest.mark.root]
DATA = ROOT / "tests" / "data"


@pytest.fixture
def scratch() -> Iterator[str]:
    name = "kp-nft-it"
    nsmod.create_netns(name)
    try:
        yield name
    finally:
        nsmod.delete_netns(name)
    assert name not in nsmod.list_netns("kp-nft-")


def _apply(ns: str, topo: Topology, node: str) -> None:
    tx = nftables_transaction(topo, node)
    nft.apply_and_verify(ns, tx.text(), listing(tx.table()))


def _nft(topo: Topology, version: str) -> Topology:
    return topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update={"mode": "nftables",
                                                                                  "version": version})})


def test_upstream_overall_fixture(scratch: str) -> None:
    _apply(scratch, load_topology(DATA / "nftables" / "overall.yaml"), "test-node")
    got = nft.list_table(scratch)
    assert "\t\tip saddr != 203.0.113.0/25 drop\n" in got
    assert "\t\tflags dynamic,timeout\n\t\ttimeout 3h\n" in got


def test_worked_example_listing_is_the_reference(scratch: str) -> None:
    _apply(scratch, load_topology(DATA / "nftables" / "worked-1.33.yaml"), "node-a")
    assert nft.list_table(scratch) == (DATA / "nftables" / "worked-1.33.list").read_text()


@pytest.mark.parametrize("version", ["1.29", "1.30", "1.31", "1.32", "1.33", "1.34", "1.35"])
@pytest.mark.parametrize("node", ["node1", "node2"])
def test_rich_rule_set_across_releases(scratch: str, version: str, node: str) -> None:
    _apply(scratch, _nft(load_topology(DATA / "rich.yaml"), version), node)


def test_readback_difference_names_the_first_line(scratch: str) -> None:
    tx = nftables_transaction(load_topology(DATA / "nftables" / "worked-1.33.yaml"), "node-a")
    expected = listing(tx.table()).replace("masquerade fully-random", "masquerade")
    first = r"line \d+: expected '\\t\\tmasquerade', kernel has '\\t\\tmasquerade fully-random'"
    with pytest.raises(ApplyError, match=r"nft list table ip kube-proxy read back differs from the plan: " + first):
        nft.apply_and_verify(scratch, tx.text(), expected)


def test_refused_transaction_is_an_apply_error(scratch: str) -> None:
    with pytest.raises(ApplyError, match="nft -f refused"):
        nft.load(scratch, "add rule ip kube-proxy no-such-chain drop\n")
