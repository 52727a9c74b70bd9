"""Verdicts in nftables mode and the parts every mode shares (pure): the rule drops of real
`nft monitor trace` output (an eTP=Local NodePort without a local endpoint, a Service without
endpoints) named with hook, chain, rule and the verdict-map element behind them; the point where a
packet died; the hop table following the packet the kernel dropped, not the answered handshake; a
`died: by:` naming one mode's chain left out in another mode."""

from __future__ import annotations

from pathlib import Path

from kpemu.analyse.drops import parse_drops
from kpemu.analyse.explain.nft_trace import nft_conn_trace
from kpemu.analyse.ledger import ConnLedger, Hop, PointInfo, build_flow_ledger
from kpemu.analyse.verdict import NO_TRACE, RuleDrop, connection_verdict, death_point
from kpemu.capture.pcap import Outer, Pkt
from kpemu.inputs.scenario import load_scenario
from kpemu.model.modes import MODE_FACTS
from kpemu.proxy.modes import proxy_state
from kpemu.report.table import opened_line

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "trace"
NETNS = {"node1": "kp-t-node1", "node2": "kp-t-node2", "client": "kp-t-client"}
NFT = load_scenario(ROOT / "scenarios" / "nft-nodeport.yaml")
TABLES = {n: s.walk.nft for n, s in proxy_state(NFT.topology).nodes.items()}


def _hop(point: str, kind: str, node: str | None, src: str, sport: int | None, dst: str, dport: int | None,
         direction: str = "request", ip_id: int = 1, t: int = 0, seq: int = 1, flags: str = "S",
         payload: bytes = b"", outer: Outer | None = None, size: int | None = 60) -> Hop:
    member = point.split("/")[0]
    info = PointInfo(point, NETNS.get(member, f"kp-t-{member}"), member, point.split("/")[1], node, kind)
    return Hop(info, direction, Pkt(point, t, t, "tcp", src, dst, sport, dport, flags, ip_id, seq, 0, payload,
                                    outer, size))


def test_an_etp_local_nodeport_drop_is_named_with_its_hook_chain_rule_and_map_element() -> None:
    cl = ConnLedger(0, "m", 37733, "dropped", None)
    cl.request = [_hop("client/eth0", "external", None, "10.242.72.50", 37733, "192.168.1.101", 30081),
                  _hop("node2/eth0", "node", "node2", "10.242.72.50", 37733, "192.168.1.101", 30081, t=1)]
    trace = nft_conn_trace(cl, {"node2": (DATA / "nft_etp_local_no_endpoint_node2.txt").read_text()}, TABLES)
    rule = "ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"
    assert trace.traced == frozenset({"node2"}) and trace.dnat == frozenset()
    assert trace.drops[0] == RuleDrop(
        "node2", "INPUT", "kube-proxy", "nodeport-endpoints-check", rule, False, None, "request",
        f"nodeport-endpoints-check: {rule} (element {{ tcp . 30081 : drop }} of map no-endpoint-nodeports)",
        "default/local:http has no local endpoints",
        "the Service has externalTrafficPolicy: Local and this node runs none of its endpoints, so kube-proxy "
        "drops external traffic here instead of forwarding it to another node (which would hide the client's "
        "address)")
    v = connection_verdict(cl, trace, [], {}, NETNS)
    assert (v.at, v.netns, v.action, v.evidence, v.point, v.hook, v.table, v.chain, v.rule) == (
        "node2", "kp-t-node2", "DROP", "netfilter trace", "node2/eth0", "INPUT", "kube-proxy",
        "nodeport-endpoints-check", rule)
    assert v.text == ("DROP on node2 in INPUT: kube-proxy nodeport-endpoints-check: " + rule + " (element { tcp . "
                      "30081 : drop } of map no-endpoint-nodeports) (default/local:http has no local endpoints)")


def test_a_service_without_endpoints_is_rejected_by_reject_chain_through_the_no_endpoint_services_element() -> None:
    cl = ConnLedger(0, "m", 34703, "refused", None)
    cl.request = [_hop("client-0/eth0", "pod", "node1", "10.244.0.3", 34703, "10.96.0.40", 80),
                  _hop("node1/cni0", "node", "node1", "10.244.0.3", 34703, "10.96.0.40", 80, t=1)]
    trace = nft_conn_trace(cl, {"node1": (DATA / "nft_no_endpoints_node1.txt").read_text()}, TABLES)
    d = trace.drops[0]
    assert (d.node, d.hook, d.chain, d.rule, d.reject, d.icmp) == (
        "node1", "FORWARD", "reject-chain", "reject", True, "icmp-port-unreachable")
    assert d.note == "default/empty:http has no endpoints"
    assert d.what == ("reject-chain: reject (element { 10.96.0.40 . tcp . 80 : goto reject-chain } of map "
                      "no-endpoint-services)")
    assert d.why == "the Service has no ready endpoint: kube-proxy rejects the connection"
    v = connection_verdict(cl, trace, [], {}, NETNS)
    assert (v.action, v.icmp, v.point) == ("REJECT", "icmp-port-unreachable", "node1/cni0")


def test_another_connections_packets_in_the_same_trace_are_not_its_drops() -> None:
    cl = ConnLedger(0, "m", 50000, "dropped", None)
    cl.request = [_hop("client/eth0", "external", None, "10.242.72.50", 50000, "192.168.1.101", 30081)]
    trace = nft_conn_trace(cl, {"node2": (DATA / "nft_etp_local_no_endpoint_node2.txt").read_text()}, TABLES)
    assert trace.drops == () and trace.traced == frozenset()


def test_the_point_of_death_is_the_last_point_in_the_member_that_dropped_it() -> None:
    cl = ConnLedger(0, "m", 1, "no-reply", None)
    cl.request = [_hop("node1/eth0", "node", "node1", "a", 1, "b", 2), _hop("underlay/n-node1", "underlay", None,
                                                                            "a", 1, "b", 2, t=1),
                  _hop("underlay/n-node2", "underlay", None, "a", 1, "b", 2, t=2)]
    assert death_point(cl, "underlay", "request") == "underlay/n-node2"
    assert death_point(cl, "node1", "request") == "node1/eth0"
    assert death_point(cl, "web-1", "request") is None and death_point(cl, "underlay", "reply") is None
    v = connection_verdict(cl, NO_TRACE, [], {}, NETNS)  # nothing known: the last point that saw it
    assert (v.action, v.at, v.point) == ("UNKNOWN", "underlay", "underlay/n-node2")


def _infos(*points: tuple[str, str, str | None]) -> dict[str, PointInfo]:
    return {p: PointInfo(p, f"kp-t-{p.split('/')[0]}", p.split("/")[0], p.split("/")[1], node, kind)
            for p, kind, node in points}


def test_the_hop_table_follows_the_segment_the_kernel_dropped_not_the_answered_handshake() -> None:
    infos = _infos(("client/eth0", "external", None), ("underlay/n-node1", "underlay", None),
                   ("underlay/n-node2", "underlay", None), ("web-1/eth0", "pod", "node2"))
    vx = Outer("vxlan", "192.168.1.100", "192.168.1.101", 1, 42113, 8472)
    c, s = ("10.242.72.50", 34271), ("10.244.1.5", 80)

    def pkt(point: str, t: int, src: tuple, dst: tuple, flags: str, seq: int, size: int, outer: Outer | None = None,
            ip_id: int = 7) -> Pkt:
        return Pkt(point, t, t, "tcp", src[0], dst[0], src[1], dst[1], flags, ip_id, seq, 0, b"", outer, size)

    packets = [pkt("client/eth0", 1, c, s, "S", 1, 60), pkt("underlay/n-node1", 2, c, s, "S", 1, 60, vx),
               pkt("underlay/n-node2", 3, c, s, "S", 1, 60, vx), pkt("web-1/eth0", 4, c, s, "S", 1, 60),
               pkt("web-1/eth0", 5, s, c, "S.", 9, 60, ip_id=0), pkt("underlay/n-node2", 6, s, c, "S.", 9, 60, vx, 0),
               pkt("underlay/n-node1", 7, s, c, "S.", 9, 60, vx, 0), pkt("client/eth0", 8, s, c, "S.", 9, 60, ip_id=0),
               # the big segment: over the underlay and no further
               pkt("client/eth0", 9, c, s, ".", 2, 1450, ip_id=8),
               pkt("underlay/n-node1", 10, c, s, ".", 2, 1500, vx, 8),
               pkt("underlay/n-node2", 11, c, s, ".", 2, 1500, vx, 8)]
    drops = parse_drops("REASON 2 NOT_SPECIFIED\nDROP 50 4026532179 3 2 __dev_forward_skb2 17 192.168.1.100 "
                        "192.168.1.101 42113 8472 6 10.242.72.50 10.244.1.5 34271 80 1514\n")
    conn = {"index": 0, "marker": "m", "sport": 34271, "outcome": "no-reply"}
    fl = build_flow_ledger("f", "client", "10.244.1.5", 80, "TCP", [conn], packets, infos,
                           [(drops[0], "underlay")])
    cl = fl.connections[0]
    assert [(h.point, h.pkt.flags, h.pkt.seq) for h in cl.request] == [
        ("client/eth0", ".", 2), ("underlay/n-node1", ".", 2), ("underlay/n-node2", ".", 2)]
    assert cl.reply == []
    assert [h.point for h in cl.opened] == ["client/eth0", "underlay/n-node1", "underlay/n-node2", "web-1/eth0",
                                            "web-1/eth0", "underlay/n-node2", "underlay/n-node1", "client/eth0"]
    conn_json = {"opened": [h.to_json(0) for h in cl.opened]}
    assert opened_line(conn_json) == ("Its first packet reached web-1/eth0 and its answer came back to client/eth0; "
                                      "the hops above are the later packet the kernel reported dropped (opened in "
                                      "hops.json holds the first one's).")
    assert opened_line({"opened": []}) is None
    # without the kernel's word, with another length, or with one the shown SYN has (60 bytes of IP and an
    # Ethernet header), the handshake stays what the table shows
    line = "DROP 50 4026532179 3 2 __dev_forward_skb2 17 192.168.1.100 192.168.1.101 42113 8472 6 10.242.72.50 "
    other, syn = (parse_drops(f"REASON 2 NOT_SPECIFIED\n{line}10.244.1.5 34271 80 {n}\n")[0] for n in (900, 74))
    for given in ([], [(other, "underlay")], [(syn, "underlay"), (drops[0], "underlay")]):
        cl = build_flow_ledger("f", "client", "10.244.1.5", 80, "TCP", [conn], packets, infos, given).connections[0]
        assert cl.request[-1].point == "web-1/eth0" and cl.opened == []


def test_a_died_by_naming_the_files_modes_chain_is_left_out_in_another_mode_only() -> None:
    path = ROOT / "scenarios" / "nodeport-local.yaml"
    died = {m: next(e.died for e in load_scenario(path, m).spec.expect if e.died) for m in ("nftables", "ipvs")}
    assert (died["nftables"].at, died["nftables"].by, died["nftables"].reason) == ("node2", None,
                                                                                    "has no local endpoints")
    assert died["ipvs"].by == "KUBE-EXTERNAL-SERVICES"  # IPVS mode's chains are called the same
    mtu_file = ROOT / "scenarios" / "faults" / "mtu-mismatch.yaml"
    mtu = next(e.died for e in load_scenario(mtu_file, "nftables").spec.expect if e.died)
    assert mtu.by == "__dev_forward_skb2"  # a kernel function is every mode's
    assert MODE_FACTS["nftables"].names_a_chain("nodeport-endpoints-check")
    assert not MODE_FACTS["nftables"].names_a_chain("KUBE-EXTERNAL-SERVICES")
    assert not MODE_FACTS["iptables"].names_a_chain("tcp_v4_rcv")


def test_a_rejecting_rule_says_its_own_comment_and_another_tables_policy_drop_is_named_without_a_hook() -> None:
    pkt = ('packet: iif "cni0" ip saddr 10.244.0.3 ip daddr 10.96.0.10 ip id 5 ip length 60 tcp sport 40000 '
           'tcp dport 81 tcp flags == syn')
    text = (f"trace id aa ip kube-proxy filter-forward {pkt}\n"
            "trace id aa ip kube-proxy filter-forward rule jump cluster-ips-check (verdict jump cluster-ips-check)\n"
            'trace id aa ip kube-proxy cluster-ips-check rule ip daddr @cluster-ips reject with icmp type '
            'host-unreachable comment "Reject traffic to invalid ports of ClusterIPs" (verdict drop)\n')
    cl = ConnLedger(0, "m", 40000, "refused", None)
    cl.request = [_hop("client-0/eth0", "pod", "node1", "10.244.0.3", 40000, "10.96.0.10", 81)]
    d = nft_conn_trace(cl, {"node1": text}, TABLES).drops[0]
    assert (d.hook, d.chain, d.reject, d.icmp, d.note, d.why) == (
        "FORWARD", "cluster-ips-check", True, "icmp-host-unreachable",
        "Reject traffic to invalid ports of ClusterIPs", "")
    other = (f"trace id bb ip filter FORWARD {pkt}\ntrace id bb ip filter FORWARD policy drop\n")
    d = nft_conn_trace(cl, {"node1": other}, TABLES).drops[0]
    assert (d.table, d.chain, d.rule, d.hook, d.reject, d.what) == ("filter", "FORWARD", None, None, False,
                                                                      "FORWARD policy drop")
