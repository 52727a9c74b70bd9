"""A real node's `nft list ruleset` read back by check-node and trace: kube-proxy's transaction
(every modelled release, the rich topology) loaded with `nft -f` into a throwaway namespace beside
other tables, listed by the kernel's nft, read by kpemu.dumps.nft.read, equal to what kube-proxy would
program, and walked by the oracle exactly like the generated table."""

from __future__ import annotations

import pytest

from kpemu.analyse.oracle.types import Packet
from kpemu.dumps.nft.drift import check_node_nft
from kpemu.dumps.nft.read import parse_nft
from kpemu.dumps.nft.trace import nft_node, run_nft_trace
from kpemu.inputs.topology import load_topology
from kpemu.kernel import netns as nsmod
from kpemu.model.modes import NEWEST_NFT_MINOR, OLDEST_NFT_MINOR
from kpemu.model.topology import Topology
from kpemu.proxy.nftables import nftables_transaction
from tests.helpers import DATA, needs_root

pytestmark = [needs_root, pytest.mark.root]


def _ruleset(ns: str, topo: Topology, node: str) -> str:
    """`nft list ruleset` of a node holding flannel's and a distribution's tables and kube-proxy's."""
    for text in ((DATA / "nft-dump" / "other-tables.nft").read_text(), nftables_transaction(topo, node).text()):
        res = nsmod.run_in(ns, ["nft", "-f", "-"], input=text, capture_output=True, text=True, check=False)
        assert res.returncode == 0, res.stderr
    return nsmod.output_in(ns, ["nft", "list", "ruleset"])


def _flows(topo: Topology) -> list[Packet]:
    """A SYN to every ClusterIP and NodePort of the topology, from outside."""
    out = []
    for s in topo.services:
        for p in s.ports:
            out.append(Packet("10.242.72.50", s.clusterIP, p.port, p.protocol.lower()))
            if p.nodePort:
                out.append(Packet("10.242.72.50", topo.nodes[0].ip, p.nodePort, p.protocol.lower()))
    return out


@pytest.mark.parametrize("version", [f"1.{m}" for m in range(OLDEST_NFT_MINOR, NEWEST_NFT_MINOR + 1)])
def test_kernel_listing_reads_back_equal_and_walks_alike(scratch: str, version: str) -> None:
    rich = load_topology(DATA / "rich.yaml")
    topo = rich.model_copy(update={"kubeProxy": rich.kubeProxy.model_copy(update={"mode": "nftables",
                                                                                    "version": version})})
    node = topo.nodes[0].name
    dump = parse_nft(_ruleset(scratch, topo, node), f"{node}.nft")
    assert [t.name for t in dump.beside] == ["inet filter", "ip flannel-ipv4"] and not dump.others
    drift = check_node_nft(topo, node, dump)
    assert drift.equal, [(g.key, g.missing, g.extra, g.changed) for g in drift.groups.values() if not g.empty]
    walked, generated = nft_node(topo, node, [], dump), nft_node(topo, node, [], None)
    for pkt in _flows(topo):
        a, b = run_nft_trace(walked, pkt), run_nft_trace(generated, pkt)
        assert [(o.probability, o.verdict, o.dnat, o.masquerade) for o in a.outcomes] == \
            [(o.probability, o.verdict, o.dnat, o.masquerade) for o in b.outcomes], pkt
