"""The run's pcapng from crafted per-interface pcaps: named and described interfaces, nanosecond
times, hop comments in ledger order, other frames of the connection tagged, frame numbers set."""

from __future__ import annotations

from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import PcapNgReader, rdpcap, wrpcap

from kpemu.analyse.ledger import build_flow_ledger
from kpemu.capture.pcap import read_pcap
from kpemu.report.pcapng import write_run_pcapngs
from kpemu.report.wireshark import RUN_PCAPNG, commands, flow_pcapng
from tests.unit.test_ledger import CLIENT, MARK, NODE, nat_captures


def _read(path: Path) -> list[tuple[str, str, int]]:
    with PcapNgReader(str(path)) as r:
        return [(p.sniffed_on, b"".join(p.comments or []).decode(), int(p.time * 10**9)) for p in r]


def test_run_pcapng_names_points_and_comments_hops(tmp_path: Path) -> None:
    _, points = nat_captures(tmp_path)
    # an ACK of the same connection at the client: tagged with the connection, not a hop
    ack = Ether() / IP(src=CLIENT, dst=NODE, id=4243) / TCP(sport=40000, dport=30080, flags="A", seq=1001, ack=7001)
    ack.time = 1.0111111111
    files = {p: tmp_path / (p.replace("/", "_") + ".pcap") for p in points}
    wrpcap(str(files["client/eth0"]), [*rdpcap(str(files["client/eth0"])), ack], nano=True)
    packets = [p for point, path in files.items() for p in read_pcap(path, point)]
    conn = {"index": 0, "marker": MARK, "sport": 40000, "outcome": "reply", "backend": "nginx-0"}
    fl = build_flow_ledger("np", "client", NODE, 30080, "TCP", [conn], packets, points)
    written = write_run_pcapngs(tmp_path, points, files, [fl], packets)
    assert written == [tmp_path / RUN_PCAPNG, tmp_path / flow_pcapng("np")]
    frames = _read(tmp_path / RUN_PCAPNG)
    assert [f[0] for f in frames] == ["client/eth0", "node1/eth0", "nginx-0/eth0", "nginx-0/eth0", "node1/eth0",
                                      "client/eth0", "client/eth0"]
    assert frames[0][1] == "[np#0] hop 1 request at client/eth0"
    assert frames[2][1] == (f"[np#0] hop 3 request at nginx-0/eth0: DNAT dst {NODE}:30080 -> 192.168.97.10:80; "
                            f"SNAT src {CLIENT}:40000 -> 192.168.97.1:55555")
    assert frames[3][1].startswith("[np#0] hop r1 reply at nginx-0/eth0")
    assert frames[6][1] == "[np#0]" and frames[6][2] == 1_011_111_111
    c = fl.connections[0]
    assert [h.frame for h in c.hops] == [1, 2, 3, 4, 5, 6] == [h.flow_frame for h in c.hops]
    with PcapNgReader(str(tmp_path / RUN_PCAPNG)) as r:
        list(r)
        assert [i[2]["name"] for i in r.interfaces] == [b"client/eth0", b"node1/eth0", b"nginx-0/eth0"]
    raw = (tmp_path / RUN_PCAPNG).read_bytes()
    assert b"node1/eth0 in kp-t-node1" in raw  # if_description


def test_commands_filter_one_connection_and_decode_vxlan() -> None:
    tshark, wireshark = commands("run.pcapng", "np", 2)
    assert tshark == ("tshark -r run.pcapng -d udp.port==8472,vxlan -o tcp.analyze_sequence_numbers:FALSE "
                      "-Y 'frame.comment contains \"[np#2] hop\"' -T fields -e frame.number -e frame.interface_name "
                      "-e frame.comment")
    assert wireshark.startswith("wireshark -r run.pcapng -d udp.port==8472,vxlan")


def test_markdown_cells_keep_one_line_per_row() -> None:
    from kpemu.report.markdown import _md_row

    assert _md_row(["a|b", "seen\n--- x\n+++ y"]) == "| a\\|b | seen<br>--- x<br>+++ y |"
