"""Verdicts (pure): the rule from a recorded trace, the kernel's drop reason joined by tuple, an ICMP
error, an empty IPVS service, nothing found; `died:` checks; the reports' cross and red mark."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpemu.analyse.attribution.xtables import packets_for, parse_trace
from kpemu.analyse.drops import parse_drops, window
from kpemu.analyse.expect import check_died
from kpemu.analyse.explain.xtables_trace import xtables_conn_trace
from kpemu.analyse.ledger import ConnLedger, Hop, PointInfo
from kpemu.analyse.verdict import NO_TRACE, WHY, connection_verdict, ipvs_empty_services
from kpemu.capture.pcap import Pkt
from kpemu.errors import InputError
from kpemu.inputs.scenario import load_scenario
from kpemu.model.scenario import DiedExpect, Expectation
from kpemu.report.html import render_html
from kpemu.report.mermaid import sequence_diagram
from kpemu.report.table import verdict_row
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "trace"
DROP_RULE = ('-A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "default/web:http has no local endpoints" '
             '-m addrtype --dst-type LOCAL -m tcp --dport 30080 -j DROP')
NETNS = {"node1": "kp-t-node1", "node2": "kp-t-node2", "client": "kp-t-client"}
MEMBERS = {4026532382: "node2", 4026532313: "node1", 4026532594: "client"}
REASONS = "REASON 2 NOT_SPECIFIED\nREASON 3 NO_SOCKET\nREASON 12 NETFILTER_DROP\nREASON 16 IP_RPFILTER\n"


def hop(point: str, kind: str, node: str | None, src: str, sport: int | None, dst: str, dport: int | None,
        direction: str = "request", ip_id: int = 22522, proto: str = "tcp", payload: bytes = b"", t: int = 0) -> Hop:
    member = point.split("/")[0]
    info = PointInfo(point, NETNS.get(member, f"kp-t-{member}"), member, point.split("/")[1], node, kind)
    return Hop(info, direction, Pkt(point, 0, t, proto, src, dst, sport, dport, "S" if proto == "tcp" else "",
                                    ip_id, 1, 0, payload))


def dropped_syn(sport: int = 41891, dst: str = "192.168.1.101") -> ConnLedger:
    cl = ConnLedger(0, "kpemu:f:000", sport, "dropped", None)
    cl.request = [hop("client/eth0", "external", None, "10.242.72.50", sport, dst, 30080),
                  hop("node2/eth0", "node", "node2", "10.242.72.50", sport, dst, 30080, t=1)]
    return cl


def test_the_rule_that_dropped_the_syn_is_named_from_the_trace_with_hook_table_chain_and_whole_rule() -> None:
    cl = dropped_syn()
    pkts = packets_for(cl.hops, parse_trace((DATA / "etp_local_no_endpoint_node2.txt").read_text(), "node2"))
    drops = parse_drops(REASONS + "DROP 100 4026532382 3 12 nft_do_chain 6 10.242.72.50 192.168.1.101 41891 30080 "
                                  "0 0.0.0.0 0.0.0.0 0 0 60\n")
    v = connection_verdict(cl, xtables_conn_trace(cl, pkts), drops, MEMBERS, NETNS)
    assert v is not None
    assert (v.at, v.netns, v.action, v.evidence, v.direction) == ("node2", "kp-t-node2", "DROP", "netfilter trace",
                                                                  "request")
    assert (v.hook, v.table, v.chain, v.rule, v.point) == ("INPUT", "filter", "KUBE-EXTERNAL-SERVICES", DROP_RULE,
                                                           "node2/eth0")
    assert (v.reason, v.function) == ("NETFILTER_DROP", "nft_do_chain")
    assert v.text == f"DROP on node2 in INPUT: filter {DROP_RULE}; the kernel confirms: NETFILTER_DROP in nft_do_chain"
    assert "externalTrafficPolicy: Local" in v.why


def test_an_answered_connection_has_no_verdict() -> None:
    cl = dropped_syn()
    cl.outcome = "reply"
    assert connection_verdict(cl, NO_TRACE, [], MEMBERS, NETNS) is None


def test_a_kernel_drop_after_dnat_joins_the_connection_by_the_clients_own_end() -> None:
    cl = dropped_syn(45201, "192.168.1.100")
    cl.request[1] = hop("node1/eth0", "node", "node1", "10.242.72.50", 45201, "192.168.1.100", 30080, t=1)
    text = REASONS + ("DROP 5 4026532313 3 16 ip_rcv_finish_core 6 10.242.72.50 10.244.0.2 45201 80 0 0.0.0.0 "
                      "0.0.0.0 0 0 60\n"
                      "DROP 6 4026532313 3 16 ip_rcv_finish_core 6 10.242.72.50 10.244.0.2 45999 80 0 0.0.0.0 "
                      "0.0.0.0 0 0 60\n")
    v = connection_verdict(cl, NO_TRACE, parse_drops(text), MEMBERS, NETNS)
    assert v is not None and (v.action, v.at, v.reason, v.function) == ("KERNEL-DROP", "node1", "IP_RPFILTER",
                                                                        "ip_rcv_finish_core")
    assert v.evidence == "kfree_skb by tuple" and "10.242.72.50:45201 > 10.244.0.2:80 (60 bytes)" in v.text
    assert "reverse-path" in v.why
    # a drop of another connection (other client port) in another namespace is not this one's
    other = dropped_syn(45999, "192.168.1.100")
    assert connection_verdict(other, NO_TRACE, parse_drops(text), {4026532382: "node2"}, NETNS).action == "UNKNOWN"


def test_a_vxlan_drop_is_joined_by_its_inner_tuple_and_the_reply_direction_is_told() -> None:
    cl = dropped_syn()
    cl.outcome = "no-reply"
    cl.request.append(hop("underlay/n-node2", "underlay", None, "10.244.0.0", 37292, "10.244.1.5", 80, t=2))
    cl.reply = [hop("client/eth0", "external", None, "10.244.1.5", 80, "10.242.72.50", 41891, "reply", 7, t=3)]
    text = REASONS + "DROP 9 4026532177 5 2 __dev_forward_skb2 17 192.168.1.100 192.168.1.101 51724 8472 6 " \
                     "10.244.0.0 10.244.1.5 37292 80 1514\n"
    v = connection_verdict(cl, NO_TRACE, parse_drops(text), {4026532177: "underlay"}, NETNS)
    assert (v.at, v.reason, v.direction) == ("underlay", "NOT_SPECIFIED", "request")
    assert "10.244.0.0:37292 > 10.244.1.5:80 inside VXLAN 192.168.1.100:51724 > 192.168.1.101:8472 (1514 bytes)" in \
        v.text and "larger than the MTU" in v.why
    client_drop = REASONS + "DROP 9 4026532594 2 3 tcp_v4_rcv 6 10.244.1.5 10.242.72.50 80 41891 0 0.0.0.0 " \
                            "0.0.0.0 0 0 52\n"
    v = connection_verdict(cl, NO_TRACE, parse_drops(client_drop), MEMBERS, NETNS)
    assert (v.at, v.reason, v.function, v.direction) == ("client", "NO_SOCKET", "tcp_v4_rcv", "reply")


def test_an_icmp_error_instead_of_an_answer_is_the_verdict() -> None:
    cl = dropped_syn()
    cl.outcome = "refused"
    cl.reply = [hop("node2/eth0", "node", "node2", "192.168.1.101", None, "10.242.72.50", None, "reply", 9, "icmp",
                    bytes([3, 3, 0, 0]), 2)]
    v = connection_verdict(cl, NO_TRACE, [], MEMBERS, NETNS)
    assert (v.action, v.at, v.icmp, v.evidence) == ("ICMP", "node2", "port unreachable", "icmp reply")
    assert v.text == "refused on node2: ICMP port unreachable from 192.168.1.101"


def test_ipvs_without_a_real_server_and_nothing_found_say_so() -> None:
    save = "-A -t 10.96.0.10:80 -s rr\n-A -t 192.168.1.101:30080 -s rr\n-a -t 10.96.0.10:80 -r 10.244.1.5:80 -m -w 1\n"
    assert ipvs_empty_services(save) == {"TCP 192.168.1.101:30080"}
    v = connection_verdict(dropped_syn(), NO_TRACE, [], MEMBERS, NETNS, "ipvs", {"node2": save})
    assert (v.action, v.at, v.hook) == ("IPVS-NO-REAL-SERVER", "node2", "INPUT")
    v = connection_verdict(dropped_syn(), NO_TRACE, [], MEMBERS, NETNS,
                           unavailable=["kernel drop reasons: no bpftrace"])
    assert v.action == "UNKNOWN"
    assert v.text == ("last seen at node2/eth0; no rule dropped it in the trace and the kernel reported no drop for "
                      "its tuple (kernel drop reasons: no bpftrace)")


def test_drop_text_parses_reason_names_and_a_window_keeps_only_its_flow() -> None:
    text = REASONS + "DROP 100 1 2 16 f 6 1.1.1.1 2.2.2.2 1 2 0 0.0.0.0 0.0.0.0 0 0 60\n" \
                     "DROP 300 1 2 99 g 1 1.1.1.1 2.2.2.2 3 3 0 0.0.0.0 0.0.0.0 0 0 60\nAttaching 2 probes...\n"
    evs = parse_drops(text)
    assert [(e.reason, e.proto, e.sport) for e in evs] == [("IP_RPFILTER", "tcp", 1), ("99", "icmp", None)]
    assert [e.t_ns for e in parse_drops(window(text, 50, 200))] == [100]
    assert window(text, 50, 200).count("REASON") == 4


def test_died_expectation_passes_and_a_wrong_one_prints_expected_and_seen() -> None:
    cl = dropped_syn()
    pkts = packets_for(cl.hops, parse_trace((DATA / "etp_local_no_endpoint_node2.txt").read_text(), "node2"))
    v = connection_verdict(cl, xtables_conn_trace(cl, pkts), [], MEMBERS, NETNS)
    ok = Expectation(flow="f", outcome="dropped",
                     died=DiedExpect(at="node2", by="KUBE-EXTERNAL-SERVICES", reason="has no local endpoints"))
    [c] = check_died(ok, "f", {0: v})
    assert c.ok and c.expected == "at node2; by KUBE-EXTERNAL-SERVICES; reason has no local endpoints"
    bad = Expectation(flow="f", died=DiedExpect(at="node1", reason="IP_RPFILTER"))
    [c] = check_died(bad, "f", {0: v})
    assert not c.ok and c.expected == "at node1; reason IP_RPFILTER"
    assert c.seen.startswith("connection 0: DROP on node2")
    [c] = check_died(bad, "f", {})
    assert not c.ok and c.seen == "no connection died (every one was answered)"


def test_the_diagram_ends_in_a_cross_and_the_page_shows_a_red_mark() -> None:
    cl = dropped_syn()
    pkts = packets_for(cl.hops, parse_trace((DATA / "etp_local_no_endpoint_node2.txt").read_text(), "node2"))
    v = connection_verdict(cl, xtables_conn_trace(cl, pkts), [], MEMBERS, NETNS).to_json()
    flow = {"name": "f", "from": "client", "to": "192.168.1.101:30080", "protocol": "TCP", "ok": True, "verdict": v,
            "hops": [h.to_json(0) for h in cl.hops]}
    mer = sequence_diagram(flow)
    assert "    client_eth0-xnode2_eth0: 10.242.72.50:41891 > 192.168.1.101:30080 [S]" in mer
    assert "Note over node2_eth0: died: DROP on node2 in INPUT: filter -A KUBE-EXTERNAL-SERVICES" in mer
    assert verdict_row(v)[:2] == ("✗", "node2 (kp-t-node2)") and verdict_row(v)[4] == "died: DROP"
    page = render_html({"scenario": "s", "ok": True, "flows": [flow]})
    # it died as the flow expected: the heading says ok, and where it died, not in red
    assert '(TCP) <span class="ok">ok</span> <span class="died">✗ died on node2</span></h2>' in page
    assert page.count('<text class="died"') == 1
    page = render_html({"scenario": "s", "ok": False, "flows": [{**flow, "ok": False}]})
    assert '(TCP) <span class="fail">failed</span> <span class="fail">✗ died on node2</span></h2>' in page
    assert ">ok</span>" not in page
    page = render_html({"scenario": "s", "ok": True, "flows": [{**flow, "ok": None}]})
    assert '(TCP) <span class="">no expectation</span> <span class="died">✗ died on node2</span></h2>' in page
    assert ">ok</span>" not in page


def _scenario(tmp_path: Path, faults: str, expect: str) -> Path:
    f = tmp_path / "s.yaml"
    f.write_text(f"name: s\ntopology: {ROOT / 'topologies' / 'flannel-vxlan.yaml'}\n"
                 f"faults:\n{faults}flows:\n  - {{name: a, from: client, to: {{node: node1, nodePort: 30080}}}}\n"
                 f"expect:\n{expect}")
    return f


def test_fault_input_errors_name_the_field_and_the_fix(tmp_path: Path) -> None:
    f = _scenario(tmp_path, "  - {kind: rp-filter, node: node9}\n  - {kind: stale-rules}\n",
                  "  - {flow: a, died: {at: nobody}}\n")
    with pytest.raises(InputError) as e:
        load_scenario(f)
    text = str(e.value)
    assert "faults[0].source: fault rp-filter needs source: (e.g. source: 10.242.72.0/24)" in text
    assert "faults[0].node: unknown node 'node9'" in text and "faults[1].pod: fault stale-rules needs pod:" in text
    assert "expect[0].died.at: unknown member 'nobody'" in text


def test_died_contradicting_a_reply_and_an_unknown_fault_kind_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="died: contradicts reply: true"):
        load_scenario(_scenario(tmp_path, "  - {kind: rp-filter, node: node1, source: 10.0.0.0/8}\n",
                                "  - {flow: a, reply: true, died: {at: node2}}\n"))
    with pytest.raises(InputError, match=r"faults\[0\]\.kind"):
        load_scenario(_scenario(tmp_path, "  - {kind: conntrack-empty, node: node1}\n", "  - {flow: a}\n"))
    with pytest.raises(InputError, match=r"faults\[0\]\.limit: fault conntrack-full needs limit: \(e\.g\. limit: 4\)"):
        load_scenario(_scenario(tmp_path, "  - {kind: conntrack-full, node: node1}\n", "  - {flow: a}\n"))


# a UDP request whose conntrack entry on node1 DNATed the ClusterIP 10.96.0.10:53 to 10.244.1.5:53
CT_LINE = ("udp      17 24 src=10.244.0.3 dst=10.96.0.10 sport=40053 dport=53 src=10.244.1.5 dst=10.244.0.3 "
           "sport=53 dport=40053 mark=0 use=1")


def _udp_through_entry(second: str, node: str) -> ConnLedger:
    """The request as seen at client-0/eth0 and then, DNATed, at `second` (on `node`); node1's entry."""
    from kpemu.analyse.kstate import parse_conntrack

    cl = ConnLedger(0, "kpemu:f:000", 40053, "unreachable", None)
    cl.request = [hop("client-0/eth0", "pod", "node1", "10.244.0.3", 40053, "10.96.0.10", 53, proto="udp"),
                  hop(second, "node", node, "10.244.0.3", 40053, "10.244.1.5", 53, proto="udp", t=1)]
    cl.conntrack = [{"node": "node1", **e} for e in parse_conntrack(CT_LINE)]
    return cl


def test_a_drop_at_an_address_a_conntrack_entry_dnated_to_names_the_entry_and_whether_rules_were_consulted() -> None:
    from kpemu.analyse.attribution.xtables import Event, TracedPacket, Visit

    cl = _udp_through_entry("node2/flannel.1", "node2")
    drops = parse_drops("REASON 70 NEIGH_FAILED\nDROP 9 4026532382 4 70 neigh_invalidate 17 10.244.0.3 10.244.1.5 "
                        "40053 53 0 0.0.0.0 0.0.0.0 0 0 55\n")
    v = connection_verdict(cl, NO_TRACE, drops, MEMBERS, NETNS)
    assert (v.at, v.reason, v.conntrack) == ("node2", "NEIGH_FAILED", f"node1: {CT_LINE}")
    assert v.text.endswith(f"; DNATed to 10.244.1.5; conntrack entry on node1: {CT_LINE}")
    # traced on node1 without any DNAT rule: the packet matched the entry, the nat rules were not consulted
    raw = TracedPacket("node1", "1", [Visit("1", {}, [Event("raw", "PREROUTING", "policy", "ACCEPT", None, "")])])
    v = connection_verdict(cl, xtables_conn_trace(cl, [raw]), drops, MEMBERS, NETNS)
    assert v.text.endswith(f"; DNATed to 10.244.1.5 by an existing conntrack entry on node1 (no nat rule was "
                           f"consulted): {CT_LINE}")
    assert "conntrack" in v.words() and "NEIGH_FAILED" in v.words()


def test_with_ipvs_a_drop_in_the_hook_is_not_blamed_on_conntrack_and_ipvs_made_the_entry() -> None:
    from kpemu.analyse.attribution.xtables import Event, TracedPacket, Visit
    from kpemu.analyse.verdict import NO_RULE_DROPPED

    cl = _udp_through_entry("node2/flannel.1", "node2")
    drops = parse_drops("REASON 12 NETFILTER_DROP\nDROP 9 4026532382 4 12 nf_hook_slow 17 10.244.0.3 10.244.1.5 "
                        "40053 53 0 0.0.0.0 0.0.0.0 0 0 55\n")
    traced = [TracedPacket(n, "1", [Visit("1", {}, [Event("raw", "PREROUTING", "policy", "ACCEPT", None, "")])])
              for n in ("node1", "node2")]
    # iptables mode: no DROP rule traced on node2
    v = connection_verdict(cl, xtables_conn_trace(cl, traced), drops, MEMBERS, NETNS)
    assert v.text.endswith(f"; {NO_RULE_DROPPED}; DNATed to 10.244.1.5 by an existing conntrack entry on node1 "
                           f"(no nat rule was consulted): {CT_LINE}")
    v = connection_verdict(cl, xtables_conn_trace(cl, traced), drops, MEMBERS, NETNS, ipvs=True)
    assert v.text.endswith(f"(55 bytes); DNATed to 10.244.1.5 by IPVS; conntrack entry on node1: {CT_LINE}")
    assert NO_RULE_DROPPED not in v.text


TRACEFS = """KPEMU-DROPS-READY
          <idle>-0       [001] ..s2. 10988.744605: kfree_skb: skbaddr=00000000b0a0f8b8 rx_sk=0000000000000000 \
protocol=2048 location=ip_rcv_finish_core+0x8e/0x4c0 reason: NOT_SPECIFIED
          <idle>-0       [001] ..s2. 10989.100000: kfree_skb: skbaddr=00000000c1 rx_sk=0000000000000000 \
protocol=2048 location=tcp_v4_rcv+0x8e/0xf60 reason: NO_SOCKET
          <idle>-0       [000] ..s2. 10989.250000: kfree_skb: skbaddr=00000000c2 rx_sk=0000000000000000 \
protocol=2048 location=nft_do_chain+0x2a/0x500 reason: NETFILTER_DROP
          <idle>-0       [001] ..s2. 10990.100000: kfree_skb: skbaddr=00000000c3 rx_sk=0000000000000000 \
protocol=2048 location=tcp_v4_rcv+0x8e/0xf60 reason: NO_SOCKET
          <idle>-0       [001] ..s2. 10990.200000: kfree_skb: skbaddr=00000000c4 protocol=2048 \
location=0xffffffffa1b2c3d4 reason: NO_SOCKET
          <idle>-0       [001] ..s2. 10990.300000: kfree_skb: skbaddr=00000000c5 protocol=2048 \
location=00000000d2854c3b reason: NETFILTER_DROP
"""


def test_the_tracefs_reader_text_becomes_drops_without_a_packet_and_keeps_why() -> None:
    from kpemu.kernel.drops import tracefs_drops

    text = tracefs_drops(TRACEFS, "bpftrace is not installed")
    assert text.splitlines() == ["NOTE bpftrace is not installed",
                                 "TDROP 10988744605000 NOT_SPECIFIED ip_rcv_finish_core",
                                 "TDROP 10989100000000 NO_SOCKET tcp_v4_rcv",
                                 "TDROP 10989250000000 NETFILTER_DROP nft_do_chain",
                                 "TDROP 10990100000000 NO_SOCKET tcp_v4_rcv", "TDROP 10990200000000 NO_SOCKET ?",
                                 "TDROP 10990300000000 NETFILTER_DROP ?"]
    assert window(text, 10989_000_000_000, 10989_300_000_000).splitlines() == [
        "NOTE bpftrace is not installed", "TDROP 10989100000000 NO_SOCKET tcp_v4_rcv",
        "TDROP 10989250000000 NETFILTER_DROP nft_do_chain"]
    events = parse_drops(text)
    assert {(e.netns_inode, e.src, e.sport) for e in events} == {(0, "", None)}


def test_a_drop_read_without_its_packet_is_joined_by_time_window_and_protocol_and_says_so() -> None:
    from kpemu.analyse.drops import by_time
    from kpemu.kernel.drops import tracefs_drops

    events = parse_drops(tracefs_drops(TRACEFS, "KPEMU_DROP_TRACE=tracefs"))
    # the reason seen twice (the SYN-ACK and its retransmission) before a single other drop; UDP code is not TCP's
    assert [(e.reason, e.function) for e in by_time(events, 10988_000_000_000, 10991_000_000_000, "tcp")][:3] == [
        ("NO_SOCKET", "tcp_v4_rcv"), ("NO_SOCKET", "tcp_v4_rcv"), ("NETFILTER_DROP", "nft_do_chain")]
    assert by_time(events, 10988_000_000_000, 10991_000_000_000, "udp")[0].reason == "NETFILTER_DROP"
    # another packet's drops, however many, rank below one in the connection's own transport code
    noise = parse_drops("TDROP 1 QDISC_DROP __dev_queue_xmit\nTDROP 2 QDISC_DROP __dev_queue_xmit\n"
                        "TDROP 3 NO_SOCKET tcp_v4_rcv\nTDROP 4 QDISC_DROP __dev_queue_xmit\n")
    assert [e.t_ns for e in by_time(noise, 0, 10, "tcp")] == [3, 1, 2, 4]
    cl = dropped_syn()
    cl.outcome = "no-reply"
    cl.reply = [hop("client/eth0", "external", None, "10.244.1.5", 80, "10.242.72.50", 41891, "reply", 7, t=3)]
    cl.window = (10989_000_000_000, 10990_100_000_000)
    v = connection_verdict(cl, NO_TRACE, events, MEMBERS, NETNS, time_note="KPEMU_DROP_TRACE=tracefs")
    assert (v.action, v.evidence, v.joined, v.reason, v.function) == (
        "KERNEL-DROP", "kfree_skb by time window", "time window", "NO_SOCKET", "tcp_v4_rcv")
    assert (v.at, v.direction, v.point) == ("client", "reply", "client/eth0")
    assert v.text == ("dropped by the kernel: NO_SOCKET in tcp_v4_rcv (no socket on this host owns the packet's tuple "
                      "(nothing listens, or a reply nobody asked for)); joined by time window: the kernel dropped it "
                      "while this connection ran, its packet and namespace unread (KPEMU_DROP_TRACE=tracefs); 2 other "
                      "IPv4 drop(s) in that time; last seen at client/eth0")
    # outside the connection's window nothing is joined
    cl.window = (10991_000_000_000, 10992_000_000_000)
    assert connection_verdict(cl, NO_TRACE, events, MEMBERS, NETNS).action == "UNKNOWN"


def test_a_rule_verdict_is_confirmed_by_a_netfilter_drop_in_its_time_window() -> None:
    cl = dropped_syn()
    cl.window = (100, 200)
    pkts = packets_for(cl.hops, parse_trace((DATA / "etp_local_no_endpoint_node2.txt").read_text(), "node2"))
    drops = parse_drops("NOTE no bpftrace\nTDROP 150 NETFILTER_DROP ?\n")
    v = connection_verdict(cl, xtables_conn_trace(cl, pkts), drops, MEMBERS, NETNS)
    assert (v.action, v.chain, v.reason, v.joined) == ("DROP", "KUBE-EXTERNAL-SERVICES", "NETFILTER_DROP",
                                                       "time window")
    assert v.text.endswith("; the kernel confirms: NETFILTER_DROP (joined by time window)")


def test_a_dnat_no_traced_rule_made_is_put_on_the_conntrack_entry_the_packet_matched() -> None:
    from kpemu.analyse.attribution.xtables import Event, TracedPacket, Visit, attribute_connection
    from kpemu.analyse.ledger import Change

    cl = _udp_through_entry("node1/cni0", "node1")
    cl.request[1].changed_by.append(Change("DNAT", "dst", "10.96.0.10:53", "10.244.1.5:53", "node1"))
    header = {"id": 22522, "proto": "udp", "src": "10.244.0.3", "dst": "10.96.0.10", "sport": 40053, "dport": 53}
    raw_only = TracedPacket("node1", "1", [Visit("1", header, [Event("raw", "PREROUTING", "policy", "ACCEPT", None,
                                                                      "")])])
    attribute_connection(cl, {"node1": [raw_only]})
    assert cl.request[1].changed_by[0].by == [
        "an existing entry, no nat rule consulted: conntrack udp 10.244.0.3:40053 -> 10.96.0.10:53 reply "
        "10.244.1.5:53 -> 10.244.0.3:40053"]
    # not traced on that node: nothing is claimed
    cl.request[1].changed_by[0].by = []
    attribute_connection(cl, {})
    assert cl.request[1].changed_by[0].by == []


def test_internal_traffic_policy_local_drop_is_explained_as_internal_not_external() -> None:
    """Recorded from scenarios/internal-traffic-local.yaml (iptables 1.33): cl-1 on node1 to db's clusterIP."""
    cl = ConnLedger(0, "kpemu:node1-to-db:000", 35731, "dropped", None)
    cl.request = [hop("cl-1/eth0", "pod", None, "10.244.0.10", 35731, "10.96.0.20", 5432, ip_id=8100),
                  hop("node1/cni0", "node", "node1", "10.244.0.10", 35731, "10.96.0.20", 5432, ip_id=8100, t=1)]
    pkts = packets_for(cl.hops, parse_trace((DATA / "itp_local_no_endpoint_node1.txt").read_text(), "node1"))
    v = connection_verdict(cl, xtables_conn_trace(cl, pkts), [], MEMBERS, NETNS)
    assert v is not None
    assert (v.at, v.action, v.hook, v.table, v.chain) == ("node1", "DROP", "FORWARD", "filter", "KUBE-SERVICES")
    assert v.rule == ('-A KUBE-SERVICES -d 10.96.0.20/32 -p tcp -m comment --comment "default/db:pg has no local '
                      'endpoints" -m tcp --dport 5432 -j DROP')
    assert v.why == WHY["no local endpoints (internal)"] and v.why.startswith("the Service's traffic policy is Local")
