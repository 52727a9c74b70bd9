"""Deploy the calico IPIP lab (seed 000 addresses): pod-to-pod TCP crosses the underlay as IPIP.

Needs the ipip module: runs natively where the kernel has it, otherwise inside the guest kernel.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.all import IP, TCP, rdpcap

from kpemu.kernel import netns as nsmod
from tests.conftest import TOPOLOGIES, needs_root
from tests.integration.fabric_util import Capture, connect, deployed_lab, serve

pytestmark = [needs_root, pytest.mark.vm]


@pytest.fixture
def calico_lab():  # type: ignore[no-untyped-def]
    with deployed_lab(TOPOLOGIES / "calico-ipip.yaml", "itcal") as (_, state):
        yield state


def test_pod_to_pod_crosses_underlay_as_ipip(calico_lab, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ns = calico_lab.members
    server = serve(ns["web-0"], 80, "web-0")  # node2, 192.168.98.11
    cap = Capture(ns["underlay"], "n-node1", tmp_path / "underlay.pcap", "ip proto 4")
    tun = Capture(ns["node2"], "tunl0", tmp_path / "tunl0.pcap")
    assert connect(ns["nginx-0"], "192.168.98.11", 80) == "web-0"  # from node1's pod 192.168.97.10
    text = cap.stop()
    tun_text = tun.stop()
    server.wait(timeout=5)
    # tcpdump prints the outer header, then the inner packet (older releases add "(ipip-proto-4)")
    assert "IP 10.246.198.17 > 10.246.198.18: IP 192.168.97.10." in text
    outer = [p for p in rdpcap(str(cap.pcap)) if p.haslayer(IP) and p[IP].proto == 4]
    assert outer, "no IPIP packet on the underlay"
    syn = next(p for p in outer if p[IP].payload.haslayer(TCP) and p[IP].payload[TCP].flags == "S")
    assert (syn[IP].src, syn[IP].dst) == ("10.246.198.17", "10.246.198.18")
    inner = syn[IP].payload
    assert (inner.src, inner.dst, inner[TCP].dport) == ("192.168.97.10", "192.168.98.11", 80)
    assert "IP 192.168.97.10." in tun_text and "> 192.168.98.11.80: Flags [S]" in tun_text


def test_pod_resolves_gateway_by_proxy_arp(calico_lab) -> None:  # type: ignore[no-untyped-def]
    ns = calico_lab.members
    server = serve(ns["node1"], 9000, "node1")
    assert connect(ns["nginx-0"], "10.246.198.17", 9000) == "node1"
    server.wait(timeout=5)
    neigh = nsmod.run_in(ns["nginx-0"], ["ip", "neigh", "show", "169.254.1.1"]).stdout
    assert "ee:ee:ee:ee:ee:ee" in neigh


def test_external_client_reaches_node(calico_lab) -> None:  # type: ignore[no-untyped-def]
    ns = calico_lab.members
    server = serve(ns["node1"], 9001, "node1")
    assert connect(ns["client"], "10.246.198.17", 9001) == "node1"
    server.wait(timeout=5)
