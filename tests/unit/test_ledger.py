"""The hop ledger from pcaps crafted with scapy: NAT, VXLAN and IPIP decoding, hop order, changes."""

from __future__ import annotations

from pathlib import Path

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.vxlan import VXLAN
from scapy.utils import wrpcap

from kpemu.analyse.kstate import parse_conntrack, parse_ipvs_connections
from kpemu.analyse.ledger import PointInfo, attach_state, build_flow_ledger, hops_json
from kpemu.capture.pcap import read_pcap, tcp_flags

CLIENT, NODE, POD, TUN = "10.242.72.50", "10.246.198.17", "192.168.97.10", "192.168.97.1"
MARK = "kpemu:f:000"


def info(point: str, kind: str, node: str | None) -> PointInfo:
    member, iface = point.split("/")
    return PointInfo(point, f"kp-t-{member}", member, iface, node, kind)


def syn(src: str, sport: int, dst: str, dport: int, t: float) -> Ether:
    p = Ether() / IP(src=src, dst=dst, id=4242) / TCP(sport=sport, dport=dport, flags="S", seq=1000)
    p.time = t
    return p


def synack(src: str, sport: int, dst: str, dport: int, t: float) -> Ether:
    p = Ether() / IP(src=src, dst=dst, id=0) / TCP(sport=sport, dport=dport, flags="SA", seq=7000, ack=1001)
    p.time = t
    return p


def nat_captures(tmp: Path) -> tuple[list, dict]:
    """Seed 000's path: client -> node eth0 (DNAT+SNAT by the node) -> pod, and the reply back."""
    files = {
        "client/eth0": [syn(CLIENT, 40000, NODE, 30080, 1.000), synack(NODE, 30080, CLIENT, 40000, 1.010)],
        "node1/eth0": [syn(CLIENT, 40000, NODE, 30080, 1.002), synack(NODE, 30080, CLIENT, 40000, 1.008)],
        "nginx-0/eth0": [syn(TUN, 55555, POD, 80, 1.004), synack(POD, 80, TUN, 55555, 1.005)],
    }
    packets = []
    for point, pkts in files.items():
        path = tmp / (point.replace("/", "_") + ".pcap")
        wrpcap(str(path), pkts)
        packets += read_pcap(path, point)
    points = {"client/eth0": info("client/eth0", "external", None), "node1/eth0": info("node1/eth0", "node", "node1"),
              "nginx-0/eth0": info("nginx-0/eth0", "pod", "node1")}
    return packets, points


def test_nat_is_followed_by_ip_id_and_seq(tmp_path: Path) -> None:
    packets, points = nat_captures(tmp_path)
    conn = {"index": 0, "marker": MARK, "sport": 40000, "outcome": "reply", "backend": "nginx-0"}
    fl = build_flow_ledger("f", "client", NODE, 30080, "TCP", [conn], packets, points)
    c = fl.connections[0]
    assert [h.point for h in c.request] == ["client/eth0", "node1/eth0", "nginx-0/eth0"]
    assert [h.point for h in c.reply] == ["nginx-0/eth0", "node1/eth0", "client/eth0"]
    at_pod = c.request[-1]
    assert (at_pod.src, at_pod.dst, at_pod.pkt.flags) == (f"{TUN}:55555", f"{POD}:80", "S")
    kinds = [(ch.kind, ch.before, ch.after, ch.node) for ch in at_pod.changed_by]
    assert ("DNAT", f"{NODE}:30080", f"{POD}:80", "node1") in kinds
    assert ("SNAT", f"{CLIENT}:40000", f"{TUN}:55555", "node1") in kinds
    back = c.reply[1]  # node1/eth0 on the way back: both NATs reversed
    assert {ch.kind for ch in back.changed_by} == {"un-SNAT", "un-DNAT"}
    assert (back.src, back.dst) == (f"{NODE}:30080", f"{CLIENT}:40000")


def test_unknown_client_port_gives_no_hops(tmp_path: Path) -> None:
    packets, points = nat_captures(tmp_path)
    conn = {"index": 0, "marker": MARK, "sport": 41111, "outcome": "dropped"}
    fl = build_flow_ledger("f", "client", NODE, 30080, "TCP", [conn], packets, points)
    assert fl.connections[0].request == [] and fl.connections[0].reply == []


def test_hops_json_shape(tmp_path: Path) -> None:
    packets, points = nat_captures(tmp_path)
    conn = {"index": 0, "marker": MARK, "sport": 40000, "outcome": "reply", "backend": "nginx-0"}
    fl = build_flow_ledger("f", "client", NODE, 30080, "TCP", [conn], packets, points)
    data = hops_json(fl, True)
    hop = data["hops"][2]
    assert set(hop) >= {"node", "netns", "interface", "direction", "proto", "src", "sport", "dst", "dport",
                        "flags", "outer", "changed_by"}
    assert (hop["node"], hop["interface"], hop["direction"], hop["dport"], hop["outer"]) == (
        "node1", "eth0", "request", 80, None)
    assert [c["kind"] for c in hop["changed_by"]] == ["DNAT", "SNAT"]
    assert all(c["by"] == [] for c in hop["changed_by"])  # the place rule attribution fills in


def test_vxlan_decoded_inner_and_outer(tmp_path: Path) -> None:
    inner = IP(src="10.244.0.3", dst="10.244.1.5", id=99) / TCP(sport=45000, dport=80, flags="S", seq=5)
    outer = (Ether() / IP(src="192.168.1.100", dst="192.168.1.101") / UDP(sport=51000, dport=8472)
             / VXLAN(vni=1, flags=0x08) / Ether() / inner)
    outer.time = 2.001
    plain = Ether() / inner
    plain.time = 2.000
    decap = Ether() / inner
    decap.time = 2.002
    for name, pkts in (("a", [plain]), ("b", [outer]), ("c", [decap])):
        wrpcap(str(tmp_path / f"{name}.pcap"), pkts)
    packets = (read_pcap(tmp_path / "a.pcap", "node1/flannel.1") + read_pcap(tmp_path / "b.pcap", "underlay/n-node1")
               + read_pcap(tmp_path / "c.pcap", "node2/flannel.1"))
    o = packets[1].outer
    assert o is not None and (o.type, o.src, o.dst, o.vni, o.dport) == ("vxlan", "192.168.1.100", "192.168.1.101",
                                                                        1, 8472)
    assert packets[1].tuple4 == ("10.244.0.3", 45000, "10.244.1.5", 80)
    points = {"node1/flannel.1": info("node1/flannel.1", "node", "node1"),
              "underlay/n-node1": info("underlay/n-node1", "underlay", None),
              "node2/flannel.1": info("node2/flannel.1", "node", "node2")}
    fl = build_flow_ledger("f", "node1", "10.244.1.5", 80, "TCP", [{"index": 0, "sport": 45000}], packets, points)
    hops = fl.connections[0].request
    assert [h.point for h in hops] == ["node1/flannel.1", "underlay/n-node1", "node2/flannel.1"]
    assert [c.kind for c in hops[1].changed_by] == ["encap"] and "vni 1" in hops[1].changed_by[0].after
    assert [c.kind for c in hops[2].changed_by] == ["decap"]


def test_ipip_on_raw_and_ethernet_links(tmp_path: Path) -> None:
    inner = IP(src=TUN, dst="192.168.98.10", id=77) / TCP(sport=50000, dport=80, flags="S", seq=9)
    wrpcap(str(tmp_path / "tunl0.pcap"), [inner], linktype=101)  # tunl0: raw IP, no link layer
    wrpcap(str(tmp_path / "eth0.pcap"), [Ether() / IP(src=NODE, dst="10.246.198.18", proto=4) / inner])
    raw = read_pcap(tmp_path / "tunl0.pcap", "node1/tunl0")
    enc = read_pcap(tmp_path / "eth0.pcap", "node1/eth0")
    assert raw[0].outer is None and raw[0].tuple4 == (TUN, 50000, "192.168.98.10", 80)
    assert enc[0].outer is not None and (enc[0].outer.type, enc[0].outer.dst) == ("ipip", "10.246.198.18")
    assert enc[0].tuple4 == raw[0].tuple4 and enc[0].ip_id == 77


def test_tcp_flags_like_tcpdump() -> None:
    assert [tcp_flags(v) for v in (0x02, 0x12, 0x18, 0x11, 0x19, 0x04, 0x10)] == ["S", "S.", "P.", "F.", "FP.",
                                                                                 "R", "."]


def test_conntrack_and_ipvs_entries_attach(tmp_path: Path) -> None:
    packets, points = nat_captures(tmp_path)
    conn = {"index": 0, "marker": MARK, "sport": 40000, "outcome": "reply", "backend": "nginx-0"}
    fl = build_flow_ledger("f", "client", NODE, 30080, "TCP", [conn], packets, points)
    ct = parse_conntrack(
        f"tcp      6 119 TIME_WAIT src={CLIENT} dst={NODE} sport=40000 dport=30080 src={POD} dst={TUN} "
        "sport=80 dport=55555 [ASSURED] mark=0 use=1\n"
        f"tcp      6 119 TIME_WAIT src={CLIENT} dst={NODE} sport=40001 dport=30080 src={POD} dst={TUN} "
        "sport=80 dport=40001 [ASSURED] mark=0 use=1\n")
    assert ct[0]["reply"] == {"src": POD, "dst": TUN, "sport": 80, "dport": 55555} and ct[0]["state"] == "TIME_WAIT"
    ipvs = parse_ipvs_connections("IPVS connection entries\npro expire state       source             virtual"
                                  f"            destination\nTCP 01:58  TIME_WAIT   {CLIENT}:40000 {NODE}:30080 "
                                  f"{POD}:80\n")
    attach_state(fl, {"node1": ct}, {"node1": ipvs})
    c = fl.connections[0]
    assert [e["original"]["sport"] for e in c.conntrack] == [40000]
    assert [e["destination"] for e in c.ipvs] == [f"{POD}:80"]


def test_sightings_with_one_timestamp_are_ordered_along_the_path(tmp_path: Path) -> None:
    # the node stamps the SYN once as its veth receives it: the bridge (after DNAT) and the tunnel carry the
    # same time; the bridge's capture file lists it first
    files = {"client-0/eth0": [syn(CLIENT, 40000, "10.96.0.10", 80, 1.000)],
             "node1/cni0": [syn(CLIENT, 40000, POD, 80, 1.002)],
             "node1/veth0": [syn(CLIENT, 40000, "10.96.0.10", 80, 1.002)],
             "node1/flannel.1": [syn(CLIENT, 40000, POD, 80, 1.002)]}
    packets = []
    for point, pkts in files.items():
        path = tmp_path / (point.replace("/", "_") + ".pcap")
        wrpcap(str(path), pkts)
        packets += read_pcap(path, point)
    points = {p: info(p, "pod" if p.startswith("client") else "node", "node1") for p in files}
    conn = {"index": 0, "marker": MARK, "sport": 40000, "outcome": "dropped"}
    c = build_flow_ledger("f", "client-0", "10.96.0.10", 80, "TCP", [conn], packets, points).connections[0]
    assert [h.point for h in c.request] == ["client-0/eth0", "node1/veth0", "node1/cni0", "node1/flannel.1"]
    assert [ch.kind for h in c.request for ch in h.changed_by] == ["DNAT"]
