"""The offline oracle's cases as one packet-flow table, in the shape of upstream's
`runPacketFlowTests` (pkg/proxy/iptables/proxier_test.go): a packet (source, destination, port,
protocol) on one node, and what must happen to it: the endpoints it is DNATed to (comma-joined,
sorted), or a kube-proxy verdict (DROP / REJECT / ACCEPT), or "" when no kube-proxy rule acts;
and whether KUBE-MARK-MASQ marked it.

The first block is upstream's own `TestTracePacket` table, run on the rules kpemu generates for
upstream's `TestOverallIPTablesRules` services (tests/data/upstream/iptables-overall.yaml) with
upstream's tracer's local addresses (127.0.0.1 and the node IP). The other rows come from the
kube-proxy semantics in reference/kube-proxy.md (2.2 packet walk, 2.6 generation, 3.3 IPVS) for
tests/data/rich.yaml, in iptables and IPVS mode and at releases on both sides of the 1.24 rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kpemu.analyse.oracle import predict_for_topology
from kpemu.analyse.oracle.iptables import predict
from kpemu.analyse.oracle.types import Packet, Prediction
from kpemu.inputs.topology import load_topology
from kpemu.model.topology import Topology
from kpemu.proxy.iptables import iptables_rules
from kpemu.proxy.modes import node_state
from tests.helpers import DATA

UPSTREAM_NODE_IP, UPSTREAM_EXTERNAL_CLIENT = "192.168.0.2", "203.0.113.2"  # testNodeIP, testExternalClient
WEB = "10.244.0.2:80, 10.244.1.5:80, 10.244.1.6:80"
WEB_NODE2 = "10.244.1.5:80, 10.244.1.6:80"


@dataclass(frozen=True)
class Flow:
    name: str
    src: str
    dst: str
    dport: int
    output: str
    masq: bool = False
    proto: str = "tcp"
    topology: str = "rich"  # "upstream" or "rich"
    node: str = "node1"
    mode: str = "iptables"
    version: str = "1.37"
    origin: str = "remote"


FLOWS = [
    # upstream TestTracePacket, verbatim
    Flow("no match", "10.0.0.2", "10.0.0.3", 80, "", topology="upstream"),
    Flow("single endpoint", "10.0.0.2", "172.30.0.41", 80, "10.180.0.1:80", topology="upstream"),
    Flow("multiple endpoints", "10.0.0.2", "172.30.0.44", 80, "10.180.0.4:80, 10.180.0.5:80", topology="upstream"),
    Flow("LOCAL, KUBE-MARK-MASQ", UPSTREAM_NODE_IP, "192.168.99.22", 80, "10.180.0.2:80", masq=True,
         topology="upstream"),
    Flow("DROP", UPSTREAM_EXTERNAL_CLIENT, "192.168.99.22", 80, "DROP", topology="upstream"),
    Flow("ACCEPT (NodePortHealthCheck)", UPSTREAM_NODE_IP, UPSTREAM_NODE_IP, 30000, "ACCEPT", topology="upstream"),
    Flow("REJECT", "10.0.0.2", "172.30.0.46", 80, "REJECT", topology="upstream"),
    # the same services, beyond upstream's table: localhost NodePorts (through the nfacct twin rule)
    Flow("localhost NodePort from the node", "127.0.0.1", "127.0.0.1", 3003, "10.180.0.3:80", masq=True,
         topology="upstream", origin="local"),
    Flow("LB IP from inside the source range", "203.0.113.7", "5.6.7.8", 80, "10.180.0.3:80", masq=True,
         topology="upstream"),
    Flow("LB IP from outside the source range", "203.0.113.200", "5.6.7.8", 80,
         "DROP", topology="upstream"),
    # rich.yaml, iptables mode, newest release
    Flow("clusterIP from a pod: every endpoint, no mark", "10.244.0.3", "10.96.0.10", 80, WEB),
    Flow("clusterIP from outside the cluster CIDR is marked", "192.168.1.50", "10.96.0.10", 80, WEB, masq=True),
    Flow("second port of the service", "10.244.0.3", "10.96.0.10", 8080, WEB),
    Flow("nodePort from an external client is marked", "198.51.100.7", "192.168.1.100", 30080, WEB, masq=True),
    Flow("LB IP from an allowed source range", "198.51.100.7", "203.0.113.10", 80, WEB, masq=True),
    Flow("LB IP from outside the source ranges is dropped", "192.0.2.1", "203.0.113.10", 80, "DROP"),
    Flow("externalIP", "198.51.100.7", "203.0.113.5", 80, WEB, masq=True),
    Flow("eTP Local nodePort keeps the client address (node2 endpoints only)", "198.51.100.7", "192.168.1.101",
         30082, WEB_NODE2, node="node2"),
    Flow("eTP Local LB IP from outside", "198.51.100.7", "203.0.113.11", 80, WEB_NODE2, node="node2"),
    Flow("eTP Local healthCheckNodePort is accepted", "198.51.100.7", "192.168.1.100", 32000, "ACCEPT"),
    Flow("iTP Local without a local endpoint is dropped", "10.244.0.3", "10.96.0.53", 53, "DROP", proto="udp"),
    Flow("iTP Local with a local endpoint", "10.244.1.9", "10.96.0.53", 53, "10.244.1.7:53", proto="udp",
         node="node2"),
    Flow("clusterIP without endpoints is rejected", "10.244.0.3", "10.96.0.99", 80, "REJECT"),
    Flow("externalIP without endpoints is rejected", "198.51.100.7", "203.0.113.9", 80, "REJECT"),
    Flow("nodePort without endpoints is rejected", "198.51.100.7", "192.168.1.100", 30099, "REJECT"),
    Flow("a port the service does not have", "10.244.0.3", "10.96.0.10", 81, ""),
    # rich.yaml before the 1.24 rewrite (KUBE-XLB, KUBE-MARK-DROP)
    Flow("1.23 clusterIP from a pod", "10.244.0.3", "10.96.0.10", 80, WEB, version="1.23"),
    Flow("1.23 nodePort from an external client", "198.51.100.7", "192.168.1.100", 30080, WEB, masq=True,
         version="1.23"),
    Flow("1.23 clusterIP without endpoints is rejected", "10.244.0.3", "10.96.0.99", 80, "REJECT", version="1.23"),
    # rich.yaml, IPVS mode: IPVS picks the real server, KUBE-MARK-MASQ decides SNAT
    Flow("IPVS clusterIP from a pod", "10.244.0.3", "10.96.0.10", 80, WEB, mode="ipvs"),
    Flow("IPVS clusterIP from outside the cluster CIDR is marked", "192.168.1.50", "10.96.0.10", 80, WEB,
         masq=True, mode="ipvs"),
    Flow("IPVS nodePort from an external client is marked", "198.51.100.7", "192.168.1.100", 30080, WEB,
         masq=True, mode="ipvs"),
]


def _topology(flow: Flow) -> Topology:
    topo = load_topology(DATA / ("upstream/iptables-overall.yaml" if flow.topology == "upstream" else "rich.yaml"))
    kp = topo.kubeProxy.model_copy(update={"mode": flow.mode, "version": flow.version})
    return topo.model_copy(update={"kubeProxy": kp})


def _predict(flow: Flow) -> Prediction:
    pkt = Packet(flow.src, flow.dst, flow.dport, proto=flow.proto, origin=flow.origin)
    topo = _topology(flow)
    if flow.topology == "upstream":  # upstream's tracer: localIPs = 127.0.0.1 + the node IPs
        return predict(iptables_rules(topo, "test-node"), pkt, {"127.0.0.1", UPSTREAM_NODE_IP}, "test-node")
    return predict_for_topology(topo, flow.node, pkt, node_state(topo, flow.node))


def output(pred: Prediction) -> str:
    """tracePacket's output: DNAT destinations, else a kube-proxy verdict, else ""."""
    if pred.endpoints:
        return ", ".join(sorted(pred.endpoints))
    refused = sorted(pred.verdicts - {"ACCEPT"})
    if refused:
        return ", ".join(refused)
    kube_accept = any(s.rule is not None and s.verdict == "ACCEPT" and s.chain.startswith("KUBE-")
                      for o in pred.outcomes for s in o.steps)
    return "ACCEPT" if kube_accept else ""


@pytest.mark.parametrize("flow", FLOWS, ids=[f.name for f in FLOWS])
def test_packet_flow(flow: Flow) -> None:
    pred = _predict(flow)
    assert (output(pred), pred.marked) == (flow.output, flow.masq)
