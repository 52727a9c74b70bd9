"""Attribution from a recorded xtables-monitor trace (external -> NodePort 30080 on the flannel
topology, backend web-1 10.244.1.5 on node2), joined with a synthetic ledger."""

from __future__ import annotations

from kpemu.analyse.attribution.xtables import (
    attribute_connection,
    counter_deltas,
    ipvs_decisions,
    kernel_dnat,
    kube_chain_path,
    parse_trace,
    phrases,
)
from kpemu.analyse.ledger import Change, ConnLedger, Hop, PointInfo
from kpemu.capture.pcap import Outer, Pkt
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "trace"
SVC = "CDGGSHYLG3RE2FKL"


def node1():
    return parse_trace((DATA / "nodeport_node1.txt").read_text(), "node1")


def test_packets_are_grouped_from_the_raw_visit_and_keep_their_ip_id() -> None:
    pkts = node1()
    syn = pkts[0]
    assert (syn.ip_id, syn.proto, syn.first["flags"]) == (9937, "tcp", ["SYN"])
    assert [v.hook for v in syn.visits] == ["PREROUTING", "PREROUTING", "FORWARD", "POSTROUTING"]
    assert syn.visits[2].header["mark"] == 0x4000 and syn.visits[2].header["oif"] == "flannel.1"
    assert [p.first["flags"] for p in pkts][:3] == [["SYN"], ["ACK"], ["ACK", "FIN"]]
    assert [p.ip_id for p in pkts][:3] == [9937, 9938, 9939]


def test_syn_phrases_name_the_rules_that_acted() -> None:
    syn = node1()[0]
    said = phrases(syn)
    assert said["DNAT"][0] == "DNAT by KUBE-SEP-THCUGE4PYEGQIHCR (default/web:http)"
    assert said["SNAT"] == ["MASQUERADE in KUBE-POSTROUTING (mark 0x4000)"]
    assert said["MARK"][0].startswith(f"KUBE-MARK-MASQ from KUBE-EXT-{SVC}")
    assert kube_chain_path(syn) == ["KUBE-SERVICES", "KUBE-NODEPORTS", f"KUBE-EXT-{SVC}", "KUBE-MARK-MASQ",
                                    f"KUBE-SVC-{SVC}", "KUBE-SEP-THCUGE4PYEGQIHCR"]
    assert kernel_dnat(syn) == "10.244.1.5:80"
    # the established ACK only crosses raw and filter: nat sees the first packet of a connection only
    ack = node1()[1]
    assert phrases(ack)["DNAT"] == [] and [v.hook for v in ack.visits] == ["PREROUTING", "FORWARD"]


def _info(member: str, iface: str, kind: str, node: str | None) -> PointInfo:
    return PointInfo(f"{member}/{iface}", f"kp-x-{member}", member, iface, node, kind)


def _pkt(point: str, src: str, sport: int, dst: str, dport: int, outer: Outer | None = None) -> Pkt:
    return Pkt(point, 0, 0, "tcp", src, dst, sport, dport, "S", 9937, 1, 0, b"", outer)


def test_ledger_changes_get_their_by_from_the_trace() -> None:
    h_in = Hop(_info("node1", "eth0", "node", "node1"), "request",
               _pkt("node1/eth0", "10.242.72.50", 34410, "192.168.1.100", 30080))
    h_out = Hop(_info("node1", "flannel.1", "node", "node1"), "request",
                _pkt("node1/flannel.1", "10.244.0.0", 47419, "10.244.1.5", 80))
    h_out.changed_by = [Change("DNAT", "dst", "192.168.1.100:30080", "10.244.1.5:80", "node1"),
                        Change("SNAT", "src", "10.242.72.50:34410", "10.244.0.0:47419", "node1")]
    outer = Outer("vxlan", "192.168.1.100", "192.168.1.101", 1)
    h_wire = Hop(_info("node1", "eth0", "node", "node1"), "request",
                 _pkt("node1/eth0", "10.244.0.0", 47419, "10.244.1.5", 80, outer))
    h_wire.changed_by = [Change("encap", "outer", "", "vxlan vni 1", "node1")]
    cl = ConnLedger(0, "m", 34410, "reply", "web-1", request=[h_in, h_out, h_wire])
    att = attribute_connection(cl, {"node1": node1()})
    assert [p.ip_id for p in att.packets] == [9937]
    dnat, snat = h_out.changed_by
    assert dnat.by[0] == "DNAT by KUBE-SEP-THCUGE4PYEGQIHCR (default/web:http)"
    assert any(b.startswith("KUBE-MARK-MASQ from KUBE-EXT-") for b in dnat.by)
    assert snat.by == ["MASQUERADE in KUBE-POSTROUTING (mark 0x4000)"]
    assert h_wire.changed_by[0].by == ["encapsulated VXLAN VNI 1 to 192.168.1.101"]


def test_reply_un_nat_is_attributed_to_the_conntrack_entry() -> None:
    a = Hop(_info("node1", "flannel.1", "node", "node1"), "reply",
            _pkt("node1/flannel.1", "10.244.1.5", 80, "10.244.0.0", 47419))
    b = Hop(_info("node1", "eth0", "node", "node1"), "reply",
            _pkt("node1/eth0", "192.168.1.100", 30080, "10.242.72.50", 34410))
    b.changed_by = [Change("un-SNAT", "src", "10.244.1.5:80", "192.168.1.100:30080", "node1")]
    ct = {"node": "node1", "proto": "tcp", "mark": "0",
          "original": {"src": "10.242.72.50", "sport": 34410, "dst": "192.168.1.100", "dport": 30080},
          "reply": {"src": "10.244.1.5", "sport": 80, "dst": "10.244.0.0", "dport": 47419}}
    cl = ConnLedger(0, "m", 34410, "reply", "web-1", reply=[a, b], conntrack=[ct])
    attribute_connection(cl, {})
    assert b.changed_by[0].by == ["reverse NAT by conntrack tcp 10.242.72.50:34410 -> 192.168.1.100:30080 "
                                  "reply 10.244.1.5:80 -> 10.244.0.0:47419"]


def test_ipvs_dnat_without_an_iptables_dnat_is_the_ipvs_decision() -> None:
    a = Hop(_info("client", "eth0", "external", None), "request",
            _pkt("client/eth0", "10.242.72.50", 5000, "10.246.198.17", 30080))
    b = Hop(_info("node1", "tunl0", "node", "node1"), "request",
            _pkt("node1/tunl0", "192.168.97.1", 6000, "192.168.97.10", 80))
    b.changed_by = [Change("DNAT", "dst", "10.246.198.17:30080", "192.168.97.10:80", "node1")]
    ipvs = [{"node": "node1", "proto": "TCP", "source": "10.242.72.50:5000", "virtual": "10.246.198.17:30080",
             "destination": "192.168.97.10:80"}]
    cl = ConnLedger(0, "m", 5000, "reply", "nginx-0", request=[a, b], ipvs=ipvs)
    attribute_connection(cl, {}, {"TCP 10.246.198.17:30080": "rr"})
    assert b.changed_by[0].by == ["IPVS rr -> 192.168.97.10:80"]


def test_counter_deltas_and_ipvs_stats() -> None:
    before = "*nat\n[0:0] -A KUBE-NODEPORTS -j X\n[3:180] -A KUBE-SEP-A -j DNAT --to-destination 1.2.3.4:80\n"
    after = "*nat\n[0:0] -A KUBE-NODEPORTS -j X\n[4:240] -A KUBE-SEP-A -j DNAT --to-destination 1.2.3.4:80\n"
    assert counter_deltas(before, after) == [("nat", "-A KUBE-SEP-A -j DNAT --to-destination 1.2.3.4:80", 1)]
    head = "Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes\n  -> RemoteAddress:Port\n"
    s0 = head + "TCP  10.246.198.17:30080  0 0 0 0 0\n  -> 192.168.97.10:80  0 0 0 0 0\n"
    s1 = head + "TCP  10.246.198.17:30080  1 6 4 300 200\n  -> 192.168.97.10:80  1 6 4 300 200\n"
    d = ipvs_decisions(s0, s1, "-A -t 10.246.198.17:30080 -s rr\n-a -t 10.246.198.17:30080 -r 192.168.97.10:80 -m\n")
    assert d == [{"virtual": "TCP 10.246.198.17:30080", "scheduler": "rr", "real": "192.168.97.10:80",
                  "connections": 1, "text": "IPVS rr TCP 10.246.198.17:30080 -> 192.168.97.10:80"}]
