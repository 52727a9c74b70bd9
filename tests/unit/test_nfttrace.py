# ruff: noqa: E501  (trace lines are long)
"""`nft monitor trace` parsing and hop attribution (pure), and the trace table's rules."""

from __future__ import annotations

from kpemu.analyse.attribution.nft import attribute, journeys, kube_path, parse_trace
from kpemu.analyse.explain.nft import _kernel_dnat, _nat_phrases
from kpemu.analyse.oracle import predict_for_topology
from kpemu.analyse.oracle.types import Packet
from kpemu.inputs.scenario import load_scenario
from kpemu.inputs.topology import load_topology
from kpemu.kernel.nfttrace import trace_table_text
from kpemu.plan.tracing import FlowMatch
from kpemu.proxy.modes import node_state
from kpemu.proxy.nftables import nftables_transaction
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "nftables"
API = "FKIP43JP-default/api/tcp/http"
EP = "QM5CVHIM-default/api/tcp/http__10.0.1.6/8080"
# The event lines nft prints for an external client's SYN to the eTP=Local NodePort of the worked
# example (format: nftables src/netlink.c trace printing: "trace id ID FAMILY TABLE CHAIN ...").
TRACE = f"""\
trace id 1a2b3c4d ip kpemu-trace pre packet: iif "eth0" ip saddr 203.0.113.2 ip daddr 192.168.0.2 tcp sport 40000 tcp dport 30080 tcp flags == syn
trace id 1a2b3c4d ip kpemu-trace pre rule ip daddr 192.168.0.2 tcp dport 30080 meta nftrace set 1 (verdict continue)
trace id 1a2b3c4d ip kpemu-trace pre verdict continue
trace id 1a2b3c4d ip kpemu-trace pre policy accept
trace id 1a2b3c4d ip kube-proxy filter-prerouting packet: iif "eth0" ip saddr 203.0.113.2 ip daddr 192.168.0.2 tcp sport 40000 tcp dport 30080
trace id 1a2b3c4d ip kube-proxy filter-prerouting rule ct state new jump firewall-check (verdict jump firewall-check)
trace id 1a2b3c4d ip kube-proxy firewall-check verdict continue
trace id 1a2b3c4d ip kube-proxy filter-prerouting verdict continue
trace id 1a2b3c4d ip kube-proxy filter-prerouting policy accept
trace id 1a2b3c4d ip kube-proxy nat-prerouting rule jump services (verdict jump services)
trace id 1a2b3c4d ip kube-proxy services rule ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports (verdict goto external-{API})
trace id 1a2b3c4d ip kube-proxy external-{API} rule goto local-{API} (verdict goto local-{API})
trace id 1a2b3c4d ip kube-proxy local-{API} rule numgen random mod 1 vmap {{ 0 : goto endpoint-{EP} }} (verdict goto endpoint-{EP})
trace id 1a2b3c4d ip kube-proxy endpoint-{EP} rule meta l4proto tcp dnat to 10.0.1.6:8080 (verdict accept)
trace id 1a2b3c4d ip kube-proxy filter-forward rule ct state new jump service-endpoints-check (verdict jump service-endpoints-check)
trace id 1a2b3c4d ip kube-proxy service-endpoints-check verdict continue
trace id 1a2b3c4d ip kube-proxy filter-forward rule ct state new jump cluster-ips-check (verdict jump cluster-ips-check)
trace id 1a2b3c4d ip kube-proxy cluster-ips-check verdict continue
trace id 1a2b3c4d ip kube-proxy filter-forward policy accept
trace id 1a2b3c4d ip kube-proxy nat-postrouting rule jump masquerading (verdict jump masquerading)
trace id 1a2b3c4d ip kube-proxy masquerading rule meta mark & 0x00004000 == 0x00000000 return (verdict return)
"""


def test_parse_and_compare_with_the_oracle() -> None:
    hops = parse_trace(TRACE)["1a2b3c4d"]
    path = kube_path(hops)
    assert path[2] == ("kube-proxy", "services", f"goto external-{API}")
    topo = load_topology(DATA / "worked-1.33.yaml")
    (only,) = predict_for_topology(topo, "node-a", Packet("203.0.113.2", "192.168.0.2", 30080),
                                   node_state(topo, "node-a")).outcomes
    assert only.kube_path() == path


def test_attribution_names_the_map_element_and_numgen_arm() -> None:
    hops = parse_trace(TRACE)["1a2b3c4d"]
    table = nftables_transaction(load_topology(DATA / "worked-1.33.yaml"), "node-a").table()
    services = next(h for h in hops if h.chain == "services")
    pkt = hops[0].packet
    assert attribute(services, table, pkt) == f"element {{ tcp . 30080 : goto external-{API} }} of map service-nodeports"
    local = next(h for h in hops if h.chain == f"local-{API}")
    assert attribute(local, table, pkt) == f"numgen arm 0 : goto endpoint-{EP} (1 in 1)"
    dnat = next(h for h in hops if h.chain == f"endpoint-{EP}")
    assert attribute(dnat, table, pkt) == "rule meta l4proto tcp dnat to 10.0.1.6:8080"


def test_trace_table_matches_only_the_flow() -> None:
    text = trace_table_text(FlowMatch("tcp", "203.0.113.2", "192.168.0.2", 30080, (("10.0.1.6", 8080),),
                                      syn_only=True))
    assert text.splitlines()[:4] == [
        "add table ip kpemu-trace",
        "add chain ip kpemu-trace pre { type filter hook prerouting priority -350 ; }",
        "add rule ip kpemu-trace pre ip saddr 203.0.113.2 ip daddr 192.168.0.2 tcp dport 30080 tcp flags & syn == syn meta nftrace set 1",
        "add rule ip kpemu-trace pre ip saddr 192.168.0.2 ip daddr 203.0.113.2 tcp sport 30080 tcp flags & syn == syn meta nftrace set 1",
    ]
    assert len(text.splitlines()) == 1 + 2 * (1 + 4)


def test_journeys_join_trace_ids_across_nat() -> None:
    """After DNAT the kernel reports the same packet under a new trace id (seen on this host's
    kernel): the groups are joined by source, IP id and source port."""
    pre = ('trace id aaaa0001 ip kube-proxy nat-prerouting packet: iif "cni0" ip saddr 10.244.0.3 ip daddr 10.96.0.10 '
           "ip id 44652 ip length 60 tcp sport 44145 tcp dport 80\n"
           "trace id aaaa0001 ip kube-proxy nat-prerouting rule jump services (verdict jump services)\n")
    fwd = ('trace id bbbb0002 ip kube-proxy filter-forward packet: iif "cni0" oif "flannel.1" ip saddr 10.244.0.3 '
           "ip daddr 10.244.1.6 ip id 44652 ip length 60 tcp sport 44145 tcp dport 80\n"
           "trace id bbbb0002 ip kube-proxy filter-forward rule ct state new jump service-endpoints-check "
           "(verdict jump service-endpoints-check)\n")
    other = fwd.replace("bbbb0002", "cccc0003").replace("ip id 44652", "ip id 7")
    (one, two) = journeys(pre + fwd + other)
    assert [h.chain for h in kube_path_hops(one)] == ["nat-prerouting", "filter-forward"]
    assert [h.trace_id for h in two] == ["cccc0003", "cccc0003"]


def kube_path_hops(hops):  # type: ignore[no-untyped-def]
    return [h for h in hops if h.rule is not None]


def test_ledger_phrases_name_the_dnat_chain_element_and_arm() -> None:
    from kpemu.analyse.explain.nft import _nat_phrases

    table = nftables_transaction(load_topology(DATA / "worked-1.33.yaml"), "node-a").table()
    said = _nat_phrases(parse_trace(TRACE)["1a2b3c4d"], table)
    assert said == {
        "DNAT": [f"DNAT by endpoint-{EP} (via element {{ tcp . 30080 : goto external-{API} }} of map "
                 f"service-nodeports; numgen arm 0 : goto endpoint-{EP} (1 in 1))"],
        "SNAT": [], "MARK": []}


# 1.36 (DNAT maps, inline masquerade marks): an external client's SYN to the eTP=Cluster NodePort of
# scenarios/nft-nodeport.yaml at 1.36, as this host's kernel traced it (packet fields shortened).
WEB = "SUSTUHLJ-default/web/tcp/http"
TRACE_136 = f"""\
trace id 6c4b4c46 ip kube-proxy filter-prerouting-pre-dnat packet: iif "eth0" ip saddr 10.242.72.50 ip daddr 192.168.1.100 ip id 5744 tcp sport 42515 tcp dport 30080
trace id 6c4b4c46 ip kube-proxy filter-prerouting-pre-dnat rule ct state new jump firewall-check (verdict jump firewall-check)
trace id 6c4b4c46 ip kube-proxy filter-prerouting-pre-dnat policy accept
trace id 6c4b4c46 ip kube-proxy nat-prerouting rule jump services (verdict jump services)
trace id 6c4b4c46 ip kube-proxy services rule ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports (verdict goto external-{WEB})
trace id 6c4b4c46 ip kube-proxy external-{WEB} rule meta mark set meta mark | 0x00004000 comment "masquerade" (verdict continue)
trace id 6c4b4c46 ip kube-proxy external-{WEB} rule goto service-{WEB} (verdict goto service-{WEB})
trace id 6c4b4c46 ip kube-proxy service-{WEB} rule meta l4proto tcp dnat ip to numgen random mod 2 map {{ 0 : 10.244.0.2 . 80, 1 : 10.244.1.5 . 80 }} (verdict accept)
trace id 6c4b4c46 ip filter FORWARD packet: iif "eth0" oif "flannel.1" ip saddr 10.242.72.50 ip daddr 10.244.1.5 ip id 5744 tcp sport 42515 tcp dport 80
trace id 6c4b4c46 ip kube-proxy filter-forward rule ct state new jump service-endpoints-check (verdict jump service-endpoints-check)
trace id 6c4b4c46 ip kube-proxy filter-forward rule ct state new jump cluster-ips-check (verdict jump cluster-ips-check)
trace id 6c4b4c46 ip kube-proxy filter-forward policy accept meta mark 0x00004000
trace id 6c4b4c46 ip kube-proxy nat-postrouting rule jump masquerading (verdict jump masquerading)
trace id 6c4b4c46 ip kube-proxy masquerading rule meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random (verdict accept)
"""


def test_1_36_dnat_map_is_attributed_to_the_arm_the_packet_took() -> None:
    """The DNAT map rule does not say which arm acted: the next packet line's destination does."""
    topo = load_scenario(ROOT / "scenarios" / "nft-nodeport.yaml").topology
    topo = topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update={"version": "1.36"})})
    table = nftables_transaction(topo, "node1").table()
    hops = parse_trace(TRACE_136)["6c4b4c46"]
    assert _kernel_dnat(hops) == "10.244.1.5:80"
    dnat = next(h for h in hops if h.chain == f"service-{WEB}")
    assert attribute(dnat, table, hops[0].packet, "10.244.1.5:80") == "numgen map arm 1 : 10.244.1.5 . 80 (1 in 2)"
    assert _nat_phrases(hops, table) == {
        "DNAT": [f"DNAT by service-{WEB} (via element {{ tcp . 30080 : goto external-{WEB} }} of map service-nodeports; "
                 "numgen map arm 1 : 10.244.1.5 . 80 (1 in 2))"],
        "SNAT": ["masquerade by masquerading"],
        "MARK": [f"masquerade mark by external-{WEB}"],
    }
    pred = predict_for_topology(topo, "node1", Packet("10.242.72.50", "192.168.1.100", 30080),
                                node_state(topo, "node1"))
    assert {o.dnat for o in pred.outcomes} == {"10.244.0.2:80", "10.244.1.5:80"}
    assert all(o.kube_path() == kube_path(hops) for o in pred.outcomes)


def test_replies_through_an_external_balancer_are_not_taken_for_requests() -> None:
    """Recorded from scenarios/health-check-local.yaml --proxy-mode nftables (1.33), flow via-load-balancer on
    node1: web-0's SYN-ACKs go to the balancer's address (it masquerades), which the flow does not name; they
    are replies, and the 16 SYNs are the requests the oracle checks."""
    from pathlib import Path

    from kpemu.analyse.explain.nft import explain_nft_flow
    from kpemu.analyse.ledger import FlowLedger
    from kpemu.inputs.scenario import load_scenario
    from kpemu.labplan import lab_plan
    from kpemu.plan.tracing import TraceData

    sc = load_scenario("scenarios/health-check-local.yaml", proxy_mode="nftables")
    flow = next(f for f in sc.flows if f.flow.name == "via-load-balancer")
    text = (Path(__file__).resolve().parents[1] / "data" / "trace" / "nft_external_lb_node1.txt").read_text()
    ex = explain_nft_flow(sc.topology, flow, FlowLedger(flow.flow.name, "prober", flow.dst_ip, "tcp"),
                          TraceData(texts={"node1": text}), lab_plan(sc.topology, (6, 1)).proxy, {}, {}, frozenset())
    assert (ex.disagreements, ex.oracle_checked, ex.oracle_nodes) == ([], 16, ["node1"])
