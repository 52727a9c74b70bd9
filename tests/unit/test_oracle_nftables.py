"""The nftables-mode oracle as one packet-flow table, in the shape of upstream's runPacketFlowTests
(pkg/proxy/nftables/proxier_test.go): source, destination, port -> endpoints (or DROP / REJECT)
and whether the packet is masqueraded. Cases from reference/kube-proxy-nftables.md section 7 ("Checks
against the model") and from upstream's TestNoEndpointsReject / TestLoadBalancer semantics on the
TestOverallNFTablesRules services."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpemu.analyse.oracle import predict_for_topology
from kpemu.analyse.oracle.nft import predict_nft
from kpemu.analyse.oracle.types import Packet
from kpemu.inputs.topology import load_topology
from kpemu.proxy.modes import node_state
from kpemu.proxy.nftables import nftables_transaction
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "nftables"
NODE_IPS = {"192.168.0.2", "127.0.0.1"}

# (name, fixture, node, source, destination, port, origin, output, masquerade)
FLOWS = [
    ("external to eTP=Local NodePort: local endpoint only, source kept", "worked-1.33", "node-a",
     "203.0.113.2", "192.168.0.2", 30080, "remote", "10.0.1.6:8080", False),
    ("pod to eTP=Local NodePort: short-circuit to every endpoint", "worked-1.33", "node-a",
     "10.0.1.9", "192.168.0.2", 30080, "remote", "10.0.1.6:8080, 10.0.3.9:8080", False),
    ("node itself to eTP=Local NodePort: every endpoint, masqueraded", "worked-1.33", "node-a",
     "192.168.0.2", "192.168.0.2", 30080, "local", "10.0.1.6:8080, 10.0.3.9:8080", True),
    ("pod to ClusterIP", "worked-1.33", "node-a", "10.0.1.9", "172.30.0.10", 80, "remote",
     "10.0.1.5:8080, 10.0.2.7:8080", False),
    ("off-cluster source to ClusterIP is masqueraded", "worked-1.33", "node-a", "192.168.5.5", "172.30.0.10", 80,
     "remote", "10.0.1.5:8080, 10.0.2.7:8080", True),
    ("hairpin: endpoint to its own ClusterIP", "worked-1.33", "node-a", "10.0.1.5", "172.30.0.10", 80, "remote",
     "10.0.1.5:8080, 10.0.2.7:8080", None),
    ("invalid port of a ClusterIP", "worked-1.33", "node-a", "10.0.1.9", "172.30.0.10", 81, "remote", "REJECT", False),
    ("unallocated ClusterIP", "worked-1.33", "node-a", "10.0.1.9", "172.30.0.99", 80, "remote", "DROP", False),
    ("ClusterIP without endpoints", "overall", "test-node", "10.0.0.2", "172.30.0.46", 80, "remote", "REJECT", False),
    ("accepted external to LB with source ranges", "overall", "test-node", "203.0.113.2", "5.6.7.8", 80, "remote",
     "10.180.0.3:80", True),
    ("blocked external to LB with source ranges", "overall", "test-node", "203.0.113.130", "5.6.7.8", 80, "remote",
     "DROP", False),
    ("NodePort bypasses LoadBalancerSourceRanges", "overall", "test-node", "203.0.113.130", "192.168.0.2", 3002,
     "remote", "10.180.0.3:80", True),
    ("external to eTP=Local LB without local endpoints", "overall", "test-node", "203.0.113.2", "1.2.3.4", 80,
     "remote", "DROP", False),
    ("pod to eTP=Local LB without local endpoints: short-circuit", "overall", "test-node", "10.0.0.2", "1.2.3.4", 80,
     "remote", "10.180.0.2:80", False),
    ("external to externalIP, eTP=Cluster", "overall", "test-node", "203.0.113.2", "192.168.99.33", 80, "remote",
     "10.180.0.4:80, 10.180.0.5:80", True),
    # 1.36 (hairpin-connections, DNAT maps): upstream's TestClusterIPGeneral / TestLoadBalancer flows at
    # kubernetes@edca5633 on the TestOverallNFTablesRules services
    ("1.36 pod to ClusterIP", "overall-1.36", "test-node", "10.180.0.2", "172.30.0.41", 80, "remote",
     "10.180.0.1:80", False),
    ("1.36 hairpin to cluster IP is masqueraded by @hairpin-connections", "overall-1.36", "test-node",
     "10.180.0.1", "172.30.0.41", 80, "remote", "10.180.0.1:80", True),
    ("1.36 off-cluster source to ClusterIP is masqueraded", "overall-1.36", "test-node", "192.168.5.5",
     "172.30.0.44", 80, "remote", "10.180.0.4:80, 10.180.0.5:80", True),
    ("1.36 accepted external to LB with source ranges (affinity)", "overall-1.36", "test-node", "203.0.113.2",
     "5.6.7.8", 80, "remote", "10.180.0.3:80", True),
    ("1.36 blocked external to LB with source ranges", "overall-1.36", "test-node", "203.0.113.130", "5.6.7.8", 80,
     "remote", "DROP", False),
    ("1.36 pod to eTP=Local LB without local endpoints: short-circuit", "overall-1.36", "test-node", "10.0.0.2",
     "1.2.3.4", 80, "remote", "10.180.0.2:80", False),
    ("1.36 ClusterIP without endpoints", "overall-1.36", "test-node", "10.0.0.2", "172.30.0.46", 80, "remote",
     "REJECT", False),
]


def _output(pred) -> str:  # type: ignore[no-untyped-def]
    if pred.endpoints:
        return ", ".join(sorted(pred.endpoints))
    return "/".join(sorted(pred.verdicts))


@pytest.mark.parametrize(("name", "fixture", "node", "src", "dst", "port", "origin", "output", "masq"), FLOWS,
                         ids=[f[0] for f in FLOWS])
def test_packet_flow(name: str, fixture: str, node: str, src: str, dst: str, port: int, origin: str, output: str,
                     masq: bool | None) -> None:
    table = nftables_transaction(load_topology(DATA / f"{fixture}.yaml"), node).table()
    pred = predict_nft(table, Packet(src, dst, port, origin=origin), NODE_IPS, node)
    assert _output(pred) == output
    assert pred.masquerade is masq
    assert abs(sum(o.probability for o in pred.outcomes) - 1.0) < 1e-9


def test_steps_name_the_rule_and_the_verdict_map_element() -> None:
    topo = load_topology(DATA / "worked-1.33.yaml")
    pred = predict_for_topology(topo, "node-a", Packet("203.0.113.2", "192.168.0.2", 30080), node_state(topo, "node-a"))
    (only,) = pred.outcomes
    assert [(s.chain, s.target) for s in only.steps] == [
        ("filter-prerouting", "jump firewall-check"),
        ("nat-prerouting", "jump services"),
        ("services", "goto external-FKIP43JP-default/api/tcp/http"),
        ("external-FKIP43JP-default/api/tcp/http", "goto local-FKIP43JP-default/api/tcp/http"),
        ("local-FKIP43JP-default/api/tcp/http", "goto endpoint-QM5CVHIM-default/api/tcp/http__10.0.1.6/8080"),
        ("endpoint-QM5CVHIM-default/api/tcp/http__10.0.1.6/8080", "accept"),
        ("filter-forward", "jump service-endpoints-check"),
        ("filter-forward", "jump cluster-ips-check"),
        ("nat-postrouting", "jump masquerading"),
        ("masquerading", "return"),
    ]
    assert only.steps[2].rule.restore_line() == (  # type: ignore[union-attr]
        "add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports")
    assert only.endpoint_chain == "endpoint-QM5CVHIM-default/api/tcp/http__10.0.1.6/8080"


@pytest.mark.parametrize(("src", "dst", "port", "origin", "output"), [
    ("203.0.113.2", "5.6.7.8", 80, "remote", "10.0.1.5:8080"),
    # filter-forward (priority -101) runs after nat-prerouting has DNATed the packet, so the lookup of
    # (10.0.1.5 . tcp . 8080) in @firewall misses: the 1.29 firewall does not stop forwarded traffic
    # (why 1.30 moved firewall-check to a prerouting chain before DNAT, #122296).
    ("203.0.113.130", "5.6.7.8", 80, "remote", "10.0.1.5:8080"),
    # a node process: filter-output (-101) runs before nat-output (-100), on the LB IP itself
    ("192.168.0.2", "5.6.7.8", 80, "local", "10.0.1.5:8080"),
])
def test_1_29_firewall_sets(tmp_path: Path, src: str, dst: str, port: int, origin: str, output: str) -> None:
    """1.29's alpha layout: firewall-check looks the destination up in @firewall, firewall-allow-check
    returns for an allowed (destination . source) in the interval set @firewall-allow, else drops."""
    text = (DATA / "worked-1.33.yaml").read_text().replace('"1.33"', '"1.29"') + """\
  - name: lb
    type: LoadBalancer
    clusterIP: 172.30.0.30
    ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30090}]
    loadBalancerIPs: [5.6.7.8]
    loadBalancerSourceRanges: [203.0.113.0/25, 192.168.0.0/24]
    endpoints: [{ip: 10.0.1.5, node: node-a}]
"""
    (tmp_path / "t.yaml").write_text(text)
    tx = nftables_transaction(load_topology(tmp_path / "t.yaml"), "node-a")
    assert "add element ip kube-proxy firewall-allow { 5.6.7.8 . tcp . 80 . 5.6.7.8 }\n" in tx.text()
    pred = predict_nft(tx.table(), Packet(src, dst, port, origin=origin), NODE_IPS, "node-a")
    assert _output(pred) == output


def test_1_36_steps_dnat_in_the_service_chain_and_hairpin_masquerade() -> None:
    """1.36: the services chain marks nothing for a pod source, the service chain DNATs through its
    anonymous map (no endpoint chain), and masquerading's second rule (`ct status dnat` + the
    hairpin 4-tuple) masquerades the pod that reached itself."""
    table = nftables_transaction(load_topology(DATA / "overall-1.36.yaml"), "test-node").table()
    (only,) = predict_nft(table, Packet("10.180.0.1", "172.30.0.41", 80), NODE_IPS, "test-node").outcomes
    assert [(s.chain, s.target) for s in only.steps] == [
        ("filter-prerouting-pre-dnat", "jump firewall-check"),
        ("nat-prerouting", "jump services"),
        ("services", "goto service-ULMVA6XW-ns1/svc1/tcp/p80"),
        ("service-ULMVA6XW-ns1/svc1/tcp/p80", "accept"),
        ("filter-forward", "jump service-endpoints-check"),
        ("filter-forward", "jump cluster-ips-check"),
        ("nat-postrouting", "jump masquerading"),
        ("masquerading", "accept"),
    ]
    assert only.steps[-1].rule.text.startswith("ct status dnat ")  # type: ignore[union-attr]
    assert (only.endpoint_chain, only.masquerade_chain, only.marked_masq) == (
        "service-ULMVA6XW-ns1/svc1/tcp/p80", "masquerading", False)


# node1 of scenarios/lb-ipmode-proxy.yaml in nftables mode (a real `nft monitor trace`, trimmed): client-0's
# SYN to the load balancer leaves by eth0; flannel's iptables MASQUERADE in nat POSTROUTING binds the
# source NAT, so the kernel runs no kube-proxy NAT chain after it at that hook
NAT_FIRST = """\
trace id 5184d764 ip kube-proxy filter-prerouting packet: iif "cni0" ip saddr 10.244.0.3 ip daddr 10.242.72.100 \
ip ttl 64 ip id 1 ip length 60 tcp sport 39029 tcp dport 80 tcp flags == syn tcp window 64240
trace id 5184d764 ip kube-proxy filter-prerouting rule ct state new jump firewall-check (verdict jump firewall-check)
trace id 5184d764 ip kube-proxy nat-prerouting rule jump services (verdict jump services)
trace id 5184d764 ip nat FLANNEL-POSTRTG rule ip saddr 10.244.0.0/16 ip daddr != 224.0.0.0/4  counter packets 0 \
bytes 0 masquerade fully-random (verdict accept)
trace id 6a0e3bc1 ip kube-proxy filter-prerouting packet: iif "eth0" ip saddr 10.242.72.10 ip daddr 192.168.1.100 \
ip ttl 63 ip id 2 ip length 60 tcp sport 10977 tcp dport 30080 tcp flags == syn tcp window 64240
trace id 6a0e3bc1 ip nat FLANNEL-POSTRTG rule meta mark & 0x00004000 == 0x00004000  counter packets 13 bytes 780 \
return (verdict return)
trace id 6a0e3bc1 ip kube-proxy nat-postrouting rule jump masquerading (verdict jump masquerading)
"""


def test_a_packet_another_table_nated_first_is_not_checked_saying_why() -> None:
    """The kernel runs a hook's NAT chains only until one binds the connection (nf_nat_inet_fn); the model
    walks kube-proxy's table alone, so it says so instead of predicting kube-proxy's masquerading."""
    from kpemu.analyse.attribution.nft import journeys
    from kpemu.analyse.explain.nft import _nat_taken

    first, second = journeys(NAT_FIRST)
    assert _nat_taken("node1", first) == (
        "a packet on node1 was NATed by another table's rule first (nat FLANNEL-POSTRTG: ip saddr 10.244.0.0/16 "
        "ip daddr != 224.0.0.0/4 masquerade fully-random), so the kernel ran none of kube-proxy's NAT chains after "
        "it at that hook; the model walks kube-proxy's table alone")
    assert _nat_taken("node1", second) is None  # flannel returned; kube-proxy's nat-postrouting ran
