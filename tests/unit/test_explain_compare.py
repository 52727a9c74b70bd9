"""Pure parts of issue 5's wiring: what a flow traces, seed 002's row for a flow, the routed pass of a
bridged packet, the oracle per connection from a recorded trace, and the mode comparison rows."""

from __future__ import annotations

from kpemu.analyse.attribution.xtables import parse_trace
from kpemu.analyse.explain.iptables import access_kind, routed_pass
from kpemu.inputs.scenario import load_scenario
from kpemu.plan.tracing import flow_match, trace_rule_args
from kpemu.report.compare import compare_flow
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "trace"


def test_flow_match_nodeport_traces_client_to_node_and_every_backend_syn_only() -> None:
    sc = load_scenario(ROOT / "scenarios" / "nodeport-iptables.yaml")
    m = flow_match(sc.topology, sc.flows[0])
    assert (m.client, m.dst, m.dport, m.proto) == ("10.242.72.50", "192.168.49.2", 30180, "tcp")
    assert m.backends == (("172.17.0.4", 80), ("172.17.0.5", 80)) and m.syn_only
    assert all(a[a.index("--tcp-flags"):a.index("--tcp-flags") + 3] == ("--tcp-flags", "SYN", "SYN")
               for a in trace_rule_args(m))
    assert access_kind(sc.topology, sc.flows[0]) == "NodePort"


def test_flow_match_through_an_external_lb_adds_every_nodes_nodeport() -> None:
    sc = load_scenario(ROOT / "scenarios" / "loadbalancer-vxlan.yaml")
    lb, lbip = sc.flows
    m = flow_match(sc.topology, lb)
    assert ("192.168.1.100", 30080) in m.backends and ("192.168.1.101", 30080) in m.backends
    assert ("10.244.1.5", 80) in m.backends
    assert access_kind(sc.topology, lb) == "LoadBalancer" and access_kind(sc.topology, lbip) == "LoadBalancer"


def test_proxy_mode_override_renames_the_lab_and_drops_rule_expectations() -> None:
    sc = load_scenario(ROOT / "scenarios" / "nodeport-iptables.yaml", "ipvs")
    assert sc.topology.kubeProxy.mode == "ipvs" and sc.topology.name == "nodeport-iptables-ipvs"
    assert all(not e.rules and e.golden is None for e in sc.spec.expect) and sc.spec.expect[0].hops
    same = load_scenario(ROOT / "scenarios" / "nodeport-iptables.yaml", "iptables")
    assert same.topology.name == "nodeport-iptables-iptables" and same.spec.expect[0].rules


def test_routed_pass_keeps_a_plain_forwarded_packet_whole() -> None:
    syn = parse_trace((DATA / "nodeport_node1.txt").read_text(), "node1")[0]
    routed, bridged = routed_pass(syn)
    assert routed is syn and bridged == []


def _flow(backend: str, pod_ip: str, by: str, sport: int) -> dict:
    hops = [
        {"member": "client", "interface": "eth0", "direction": "request", "src": "10.242.72.50", "sport": sport,
         "dst": "192.168.49.2", "dport": 30180, "flags": "S", "outer": None, "changed_by": []},
        {"member": "minikube", "interface": "cni0", "direction": "request", "src": "172.17.0.1", "sport": sport,
         "dst": pod_ip, "dport": 80, "flags": "S", "outer": None,
         "changed_by": [{"kind": "DNAT", "field": "dst", "from": "192.168.49.2:30180", "to": f"{pod_ip}:80",
                         "node": "minikube", "by": [by]}]},
    ]
    return {"name": "f", "backends": [backend], "hops": hops,
            "connections": [{"backend": backend, "hops": hops}]}


def test_compare_rows_ignore_client_ports_and_mark_what_differs() -> None:
    a = _flow("nginx-0", "172.17.0.4", "DNAT by KUBE-SEP-UZXILYFQQ2IZUWN5 (default/nginx:)", 40001)
    b = _flow("nginx-0", "172.17.0.4", "IPVS rr -> 172.17.0.4:80", 51234)
    rows = compare_flow(a, b, {80, 30180})
    assert [r.point for r in rows] == ["client/eth0", "minikube/cni0"]
    assert rows[0].differs == () and rows[0].a.tuple == "10.242.72.50:* > 192.168.49.2:30180 [S]"
    assert rows[1].differs == ("by",) and rows[1].b.by == "IPVS rr -> 172.17.0.4:80"
    c = _flow("nginx-1", "172.17.0.5", "IPVS rr -> 172.17.0.5:80", 51234)
    assert compare_flow(a, c, {80, 30180})[1].differs == ("tuple", "changed", "by")
