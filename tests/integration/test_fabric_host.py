"""Deploy the flannel VXLAN lab on this kernel, send real TCP, check the underlay, destroy cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.all import IP, TCP, UDP, rdpcap
from scapy.layers.vxlan import VXLAN

from kpemu.kernel import lab
from kpemu.kernel import netns as nsmod
from kpemu.kernel.labstate import load_state
from kpemu.runtimes.host import deploy_lab
from tests.helpers import TOPOLOGIES, needs_root
from tests.integration.fabric_util import Capture, connect, deployed_lab, lab_topology, serve

pytestmark = [needs_root, pytest.mark.root]


@pytest.fixture
def flannel_lab():  # type: ignore[no-untyped-def]
    with deployed_lab(TOPOLOGIES / "flannel-vxlan.yaml", "itfab") as deployed:
        yield deployed


def test_pod_to_pod_crosses_underlay_as_vxlan(flannel_lab, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, state = flannel_lab
    ns = state.members
    server = serve(ns["web-1"], 80, "web-1")
    cap = Capture(ns["underlay"], "n-node1", tmp_path / "underlay.pcap", "udp port 8472")
    assert connect(ns["client-0"], "10.244.1.5", 80) == "web-1"
    text = cap.stop()
    server.wait(timeout=5)
    assert "192.168.1.100" in text and ".8472: OTV" in text  # tcpdump names port 8472 OTV
    syns = [p for p in rdpcap(str(cap.pcap)) if p.haslayer(VXLAN) and p[VXLAN].payload.haslayer(TCP)]
    assert syns, "no VXLAN-encapsulated TCP on the underlay"
    first = syns[0]
    assert (first[IP].src, first[IP].dst, first[UDP].dport) == ("192.168.1.100", "192.168.1.101", 8472)
    assert first[VXLAN].vni == 1
    inner = first[VXLAN].payload[IP]
    assert (inner.src, inner.dst, inner[TCP].dport) == ("10.244.0.3", "10.244.1.5", 80)
    assert inner[TCP].flags == "S"


def test_external_client_reaches_node_through_underlay_router(flannel_lab) -> None:  # type: ignore[no-untyped-def]
    _, state = flannel_lab
    ns = state.members
    server = serve(ns["node2"], 8080, "node2")
    assert connect(ns["client"], "192.168.1.101", 8080) == "node2"
    server.wait(timeout=5)


def test_destroy_is_idempotent_and_kills_processes(flannel_lab) -> None:  # type: ignore[no-untyped-def]
    topo, state = flannel_lab
    sleeper = nsmod.popen_in(state.members["web-0"], ["sleep", "30"])
    assert nsmod.pids_in(state.members["web-0"])
    removed = lab.destroy(topo.name)
    assert set(removed.namespaces) == set(state.namespaces)
    assert sleeper.wait(timeout=5) is not None
    assert lab.destroy(topo.name).namespaces == []


def test_deploy_twice_is_refused_without_touching_the_first(flannel_lab) -> None:  # type: ignore[no-untyped-def]
    from kpemu.errors import EnvironmentProblem

    topo, state = flannel_lab
    with pytest.raises(EnvironmentProblem, match=r"^lab 'itfab' is deployed \(kpemu deploy\)\n  fix: kpemu destroy "
                                                 r"itfab, or build this one under another lab name: --name itfab-2$"):
        deploy_lab(topo)
    assert set(nsmod.list_netns("kp-itfab-")) == set(state.namespaces)


def test_failed_deploy_rolls_back() -> None:
    import dataclasses

    from kpemu.cni import cni_of
    from kpemu.errors import ApplyError
    from kpemu.plan.fabric import plan_fabric
    from kpemu.plan.types import Address

    topo = lab_topology(TOPOLOGIES / "flannel-vxlan.yaml", "itroll")
    plan = plan_fabric(topo, cni_of(topo).plan)
    broken = dataclasses.replace(
        plan, addresses=(*plan.addresses, Address("kp-itroll-node2", "nosuchdev", "10.9.9.9/32"))
    )
    with pytest.raises(ApplyError, match="nosuchdev"):
        deploy_lab(topo, fabric=broken)
    assert not nsmod.list_netns("kp-itroll-")
    assert load_state("itroll") is None


def test_external_client_reaches_pods_through_nodeport(flannel_lab) -> None:  # type: ignore[no-untyped-def]
    _, state = flannel_lab
    ns = state.members
    servers = [serve(ns[p], 80, p, count=12) for p in ("web-0", "web-1", "web-2")]
    seen = {connect(ns["client"], "192.168.1.100", 30080) for _ in range(12)}
    for s in servers:
        s.kill()
    assert seen <= {"web-0", "web-1", "web-2"} and len(seen) >= 2, seen
