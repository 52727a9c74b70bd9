"""Reading pcaps into flat packet records (pure): inner tuple, TCP flags, IP ID, seq, payload,
and the outer header when the packet is VXLAN (a CNI's UDP port, or IANA's 4789) or IPIP (IP
protocol 4)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kpemu.cni import vxlan_ports

VXLAN_PORTS = tuple(dict.fromkeys((*vxlan_ports(), 4789)))  # the CNIs' ports, then IANA's
LINKTYPE_ETHERNET = 1
RAW_LINKTYPES = (12, 101, 228)  # raw IP (tunl0 is ARPHRD_TUNNEL: no link-layer header)
# tcpdump's order of TCP flag letters (print-tcp.c tcp_flag_values).
_FLAG_ORDER = (("F", 0x01), ("S", 0x02), ("R", 0x04), ("P", 0x08), (".", 0x10), ("U", 0x20), ("E", 0x40),
               ("W", 0x80))


@dataclass(frozen=True)
class Outer:
    """The encapsulating header of a tunnelled packet."""

    type: str  # "vxlan" | "ipip"
    src: str
    dst: str
    vni: int | None = None
    sport: int | None = None
    dport: int | None = None

    def to_json(self) -> dict:
        return {"type": self.type, "src": self.src, "dst": self.dst, "vni": self.vni}


@dataclass(frozen=True)
class Pkt:
    """One captured IPv4 packet at one capture point (inner headers when tunnelled)."""

    point: str  # member/iface
    index: int  # position in its capture
    ts_ns: int
    proto: str  # tcp | udp | icmp | ip
    src: str
    dst: str
    sport: int | None
    dport: int | None
    flags: str  # tcpdump style: S, S., P., F., R. ; "" for non-TCP
    ip_id: int
    seq: int | None
    ack: int | None
    payload: bytes
    outer: Outer | None = None
    size: int | None = None  # the outermost IP header's total length (bytes, without the link layer)

    @property
    def tuple4(self) -> tuple[str, int | None, str, int | None]:
        return (self.src, self.sport, self.dst, self.dport)


def tcp_flags(value: int) -> str:
    """TCP flag bits as tcpdump prints them ("S.", "FP.")."""
    return "".join(ch for ch, bit in _FLAG_ORDER if value & bit)


def _decode(ip: object, point: str, index: int, ts_ns: int) -> Pkt | None:
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.l2 import Ether
    from scapy.layers.sctp import SCTP
    from scapy.layers.vxlan import VXLAN

    if not isinstance(ip, IP):
        return None
    outer, size = None, int(ip.len) if ip.len is not None else None
    if ip.proto == 4 and isinstance(ip.payload, IP):
        outer, ip = Outer("ipip", ip.src, ip.dst), ip.payload
    elif isinstance(ip.payload, UDP) and (ip.payload.dport in VXLAN_PORTS or ip.payload.sport in VXLAN_PORTS):
        udp = ip.payload
        vx = udp.payload if isinstance(udp.payload, VXLAN) else VXLAN(bytes(udp.payload))
        inner = vx.payload
        if isinstance(inner, Ether) and isinstance(inner.payload, IP):
            outer = Outer("vxlan", ip.src, ip.dst, int(vx.vni), int(udp.sport), int(udp.dport))
            ip = inner.payload
    l4 = ip.payload
    sport = dport = seq = ack = None
    flags = ""
    if isinstance(l4, TCP):
        proto, sport, dport, seq, ack = "tcp", int(l4.sport), int(l4.dport), int(l4.seq), int(l4.ack)
        flags = tcp_flags(int(l4.flags))
        payload = bytes(l4.payload)
    elif isinstance(l4, UDP):
        proto, sport, dport = "udp", int(l4.sport), int(l4.dport)
        payload = bytes(l4.payload)
    elif isinstance(l4, SCTP):
        proto, sport, dport = "sctp", int(l4.sport), int(l4.dport)
        payload = bytes(l4.payload)
    elif isinstance(l4, ICMP):
        proto, payload = "icmp", bytes(l4)
    else:
        proto, payload = "ip", bytes(l4)
    return Pkt(point, index, ts_ns, proto, ip.src, ip.dst, sport, dport, flags, int(ip.id), seq, ack,
               payload, outer, size)


def read_pcap(path: Path, point: str) -> list[Pkt]:
    """Every IPv4 packet of a pcap (Ethernet or raw IP link type), as Pkt records in capture order."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether
    from scapy.utils import RawPcapReader

    out: list[Pkt] = []
    try:
        reader = RawPcapReader(str(path))
    except (OSError, EOFError):  # an empty or truncated file: no packets
        return out
    with reader:
        linktype = reader.linktype
        nano = getattr(reader, "nano", False)
        for index, (data, meta) in enumerate(reader):
            ts_ns = meta.sec * 1_000_000_000 + (meta.usec if nano else meta.usec * 1000)
            if linktype == LINKTYPE_ETHERNET:
                frame = Ether(data)
                ip = frame.payload
            elif linktype in RAW_LINKTYPES:
                ip = IP(data)
            else:
                continue
            pkt = _decode(ip, point, index, ts_ns)
            if pkt is not None:
                out.append(pkt)
    return out
