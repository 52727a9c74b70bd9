"""The hop ledger (pure): the same packet followed across every capture point.

A connection's first packet (the SYN, or the first UDP datagram) is found at its source by the
client's local port; NAT rewrites addresses and ports but not the IP ID, the TCP sequence number
or the payload, so those identify the same packet at every other capture point, before and after
DNAT, SNAT and encapsulation. The first answer (SYN-ACK, RST, the UDP reply or an ICMP error) is
taken at the furthest point the request reached and followed the same way. A connection that got no
answer although its first packet was answered is followed by the later packet the kernel reported
dropped instead (the handshake is kept as `opened`). Hops are ordered by
capture timestamp (all captures share one clock). Between consecutive hops, what changed is
recorded in `changed_by` (kind, field, from, to, where); `by` is left for rule attribution.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from kpemu.analyse.drops import DropEvent, matching
from kpemu.capture.pcap import Outer, Pkt


@dataclass(frozen=True)
class PointInfo:
    """What the ledger knows about a capture point: namespace, member, the node it lives on."""

    point: str  # member/iface
    netns: str
    member: str
    interface: str
    node: str | None  # node name for node and pod interfaces, else None
    kind: str  # node | pod | external | underlay
    peer: str | None = None  # member/iface at the other end of a veth, with the member's kind

    @property
    def description(self) -> str:
        """How Wireshark describes the capture point: `node1/veth0ab in kp-lab-node1, veth to web-0/eth0 (pod)`."""
        return f"{self.point} in {self.netns}" + (f", veth to {self.peer}" if self.peer else "")


@dataclass
class Change:
    """One thing that changed between two hops; `by` is filled in by rule attribution."""

    kind: str  # DNAT | SNAT | un-DNAT | un-SNAT | encap | decap
    field: str  # dst | src | outer
    before: str
    after: str
    node: str | None  # the member where it happened
    by: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"kind": self.kind, "field": self.field, "from": self.before, "to": self.after,
                "node": self.node, "by": list(self.by)}


@dataclass
class Hop:
    """The packet as seen at one capture point."""

    info: PointInfo
    direction: str  # request | reply
    pkt: Pkt
    changed_by: list[Change] = field(default_factory=list)
    frame: int | None = None  # its frame number in the run's pcapng (set when that is written)
    flow_frame: int | None = None  # and in its flow's pcapng

    @property
    def point(self) -> str:
        return self.info.point

    @property
    def src(self) -> str:
        return _ep(self.pkt.src, self.pkt.sport)

    @property
    def dst(self) -> str:
        return _ep(self.pkt.dst, self.pkt.dport)

    def to_json(self, t0: int) -> dict:
        p = self.pkt
        return {
            "node": self.info.node, "netns": self.info.netns, "member": self.info.member,
            "interface": self.info.interface, "direction": self.direction, "proto": p.proto,
            "src": p.src, "sport": p.sport, "dst": p.dst, "dport": p.dport, "flags": p.flags,
            "outer": p.outer.to_json() if p.outer else None,
            "t_us": round((p.ts_ns - t0) / 1000, 3),
            "changed_by": [c.to_json() for c in self.changed_by],
            "frame": self.frame, "flow_frame": self.flow_frame,
        }


@dataclass
class ConnLedger:
    """One connection of a flow: the client's view and the hops both ways."""

    index: int
    marker: str
    sport: int | None
    outcome: str
    backend: str | None
    request: list[Hop] = field(default_factory=list)
    reply: list[Hop] = field(default_factory=list)
    conntrack: list[dict] = field(default_factory=list)  # {node, entry}
    ipvs: list[dict] = field(default_factory=list)  # {node, entry}
    answer: str | None = None  # what the client read (an HTTP body for HTTP flows)
    status: int | None = None  # the HTTP status, for HTTP flows
    window: tuple[int, int] | None = None  # CLOCK_MONOTONIC ns from the client's send to its giving up
    opened: list[Hop] = field(default_factory=list)  # the answered first packet, when a later one died

    @property
    def hops(self) -> list[Hop]:
        return self.request + self.reply


@dataclass
class FlowLedger:
    """Every connection of one flow."""

    name: str
    src_member: str
    dst: str
    protocol: str
    connections: list[ConnLedger] = field(default_factory=list)

    @property
    def representative(self) -> ConnLedger | None:
        """The connection the hop table shows: the first one that was seen at all."""
        return next((c for c in self.connections if c.request), self.connections[0] if self.connections else None)


def _ep(ip: str, port: int | None) -> str:
    return f"{ip}:{port}" if port is not None else ip


def _outer_str(o: Outer | None) -> str:
    if o is None:
        return ""
    vni = f" vni {o.vni}" if o.vni is not None else ""
    return f"{o.type}{vni} {o.src} > {o.dst}"


def _key(p: Pkt) -> tuple:
    """What NAT and tunnels leave alone: protocol, IP ID, TCP seq/ack/flags or the payload."""
    if p.proto == "tcp":
        return ("tcp", p.ip_id, p.seq, p.ack, p.flags, p.payload)
    return (p.proto, p.ip_id, p.payload)


def _follow(seed: Pkt, packets: Iterable[Pkt], points: Mapping[str, PointInfo], direction: str) -> list[Hop]:
    """Every sighting of `seed`'s packet (one per point and tuple), ordered by time."""
    key = _key(seed)
    seen: set[tuple] = set()
    hops = []
    for p in packets:
        if _key(p) != key or p.point not in points:
            continue
        ident = (p.point, p.tuple4, p.outer)
        if ident in seen:
            continue
        seen.add(ident)
        hops.append(Hop(points[p.point], direction, p))
    hops = _in_path_order(hops)
    _annotate(hops, direction)
    return hops


def _changes(a: Pkt, b: Pkt) -> int:
    return ((a.src, a.sport) != (b.src, b.sport)) + ((a.dst, a.dport) != (b.dst, b.dport)) + (a.outer != b.outer)


def _in_path_order(hops: list[Hop]) -> list[Hop]:
    """Hops by capture time. Sightings of one packet inside one node often carry the same timestamp (the
    kernel stamps it once, on receive): within such a tie the next hop is the one that changed least from
    the hop before (NAT and encapsulation happen once on the way), so a veth never comes after the bridge
    that saw the packet already DNATed."""
    timed = sorted(hops, key=lambda h: (h.pkt.ts_ns, h.pkt.index))
    out: list[Hop] = []
    while timed:
        tie = [h for h in timed if h.pkt.ts_ns == timed[0].pkt.ts_ns]
        while tie:
            nxt = min(tie, key=lambda h: _changes(out[-1].pkt, h.pkt)) if out else tie[0]
            tie.remove(nxt)
            timed.remove(nxt)
            out.append(nxt)
    return out


def _where(prev: Hop, cur: Hop) -> str | None:
    """The member where a change between two hops happened (NAT runs in a node, LB or router)."""
    if prev.info.netns == cur.info.netns:
        return prev.info.member
    for h in (prev, cur):
        if h.info.kind in ("node", "external") and h.info.member != "underlay":
            return h.info.member if h.info.kind == "external" else h.info.node
    return cur.info.node or cur.info.member


def _annotate(hops: list[Hop], direction: str) -> None:
    nat_dst, nat_src = ("DNAT", "SNAT") if direction == "request" else ("un-SNAT", "un-DNAT")
    for prev, cur in pairwise(hops):
        a, b = prev.pkt, cur.pkt
        where = _where(prev, cur)
        if (a.dst, a.dport) != (b.dst, b.dport):
            cur.changed_by.append(Change(nat_dst, "dst", prev.dst, cur.dst, where))
        if (a.src, a.sport) != (b.src, b.sport):
            cur.changed_by.append(Change(nat_src, "src", prev.src, cur.src, where))
        if a.outer != b.outer:
            if a.outer is None:
                cur.changed_by.append(Change("encap", "outer", "", _outer_str(b.outer), where))
            elif b.outer is None:
                cur.changed_by.append(Change("decap", "outer", _outer_str(a.outer), "", where))
            else:
                cur.changed_by.append(Change("re-encap", "outer", _outer_str(a.outer), _outer_str(b.outer), where))


def _seed(packets: list[Pkt], src_points: set[str], conn: Mapping, dst_ip: str, dst_port: int,
          proto: str) -> Pkt | None:
    """The connection's first packet at its source (by the client's local port and destination)."""
    sport = conn.get("sport")
    marker = str(conn.get("marker", "")).encode()
    if sport is None:  # a container client's own command: its local port is unknown
        return _nth_opening(packets, src_points, int(conn.get("index", 0)), dst_ip, dst_port, proto)

    def match(p: Pkt) -> bool:
        if p.proto != proto or p.sport != sport or p.dst != dst_ip or p.dport != dst_port:
            return False
        return "S" in p.flags and "." not in p.flags if proto == "tcp" else marker in p.payload

    for restrict in (True, False):
        cands = [p for p in packets if (p.point in src_points or not restrict) and match(p)]
        if cands:
            return min(cands, key=lambda p: (p.ts_ns, p.index))
    return None


def _nth_opening(packets: list[Pkt], src_points: set[str], n: int, dst_ip: str, dst_port: int,
                 proto: str) -> Pkt | None:
    """The first packet of the n-th distinct source port towards dst at the source (connections of
    one flow run one after another, so their order on the wire is their order in the flow)."""
    seen: dict[int | None, Pkt] = {}
    for p in sorted((p for p in packets if p.point in src_points), key=lambda p: (p.ts_ns, p.index)):
        if p.proto == proto and p.dst == dst_ip and p.dport == dst_port and p.sport not in seen \
                and (proto != "tcp" or ("S" in p.flags and "." not in p.flags)):
            seen[p.sport] = p
    opened = list(seen.values())
    return opened[n] if n < len(opened) else None


def _answer(packets: list[Pkt], last: Hop) -> Pkt | None:
    """The first packet answering `last` at its point: reversed tuple, or an ICMP error to its source."""
    q = last.pkt
    later = [p for p in packets if p.point == q.point and p.ts_ns >= q.ts_ns and p is not q]
    for p in sorted(later, key=lambda p: (p.ts_ns, p.index)):
        if p.proto == q.proto and p.tuple4 == (q.dst, q.dport, q.src, q.sport):
            return p
        if p.proto == "icmp" and p.dst == q.src:
            return p
    return None


def build_flow_ledger(name: str, src_member: str, dst_ip: str, dst_port: int, protocol: str,
                      connections: list[Mapping], packets: list[Pkt], points: Mapping[str, PointInfo],
                      drops: Sequence[tuple[DropEvent, str]] = ()) -> FlowLedger:
    """Follow every connection of one flow through the captured packets; `drops`: the kernel's drop events
    in the flow's window, each with the member that dropped it (the packet that died is followed)."""
    proto = protocol.lower()
    src_points = {p for p, info in points.items() if info.member == src_member}
    fl = FlowLedger(name, src_member, _ep(dst_ip, dst_port), protocol)
    for conn in connections:
        cl = ConnLedger(int(conn.get("index", 0)), str(conn.get("marker", "")), conn.get("sport"),
                        str(conn.get("outcome", "")), conn.get("backend"), answer=conn.get("reply"),
                        status=conn.get("status"), window=tuple(conn["window"]) if conn.get("window") else None)
        fl.connections.append(cl)
        seed = _seed(packets, src_points, conn, dst_ip, dst_port, proto)
        if seed is None:
            continue
        cl.request = _follow(seed, packets, points, "request")
        if not cl.request:
            continue
        answer = _answer(packets, cl.request[-1])
        if answer is not None:
            cl.reply = _follow(answer, packets, points, "reply")
        if cl.outcome != "reply" and cl.reply:
            _follow_the_dead(cl, drops, packets, points)
    return fl


# What the kernel may count in a dropped skb's length besides the IP packet: the Ethernet header (a
# drop at the link layer), nothing (IP), or minus the IP header (once TCP or UDP pulled it).
SKB_OFFSETS = (14, 0, -20)


def conn_tuples(cl: ConnLedger) -> set[tuple]:
    """Every (proto, src, sport, dst, dport) the connection's packets carried at any hop."""
    out = set()
    for h in cl.hops:
        p = h.pkt
        out.add((p.proto, p.src, p.sport, p.dst, p.dport))
        if p.proto in ("tcp", "udp"):  # the other direction too: a reply the capture never saw
            out.add((p.proto, p.dst, p.dport, p.src, p.sport))
    return out


def client_ends(cl: ConnLedger) -> set[tuple]:
    """(proto, ip, port) of the connection's client side as it left the client (its own ephemeral port)."""
    first = cl.request[0].pkt if cl.request else None
    return {(first.proto, first.src, first.sport)} if first is not None and first.sport is not None else set()


def _is_dropped(p: Pkt, ev: DropEvent) -> bool:
    """Whether the captured `p` carries the tuples and the length of the kernel's dropped packet `ev`."""
    if ev.inner is not None:
        if p.outer is None or (p.outer.src, p.outer.dst) != (ev.src, ev.dst) \
                or (p.outer.sport is not None and (p.outer.sport, p.outer.dport) != (ev.sport, ev.dport)):
            return False
        tup = ev.inner
    else:
        if p.outer is not None:
            return False
        tup = (ev.proto, ev.src, ev.sport, ev.dst, ev.dport)
    return (p.proto, p.src, p.sport, p.dst, p.dport) == tup and p.size is not None \
        and ev.length in {p.size + k for k in SKB_OFFSETS}


def _follow_the_dead(cl: ConnLedger, drops: Sequence[tuple[DropEvent, str]], packets: list[Pkt],
                     points: Mapping[str, PointInfo]) -> None:
    """A connection that got no answer although its first packet was answered (the handshake went
    through, a later packet died): its hops become those of the packet the kernel reported dropped (by
    its tuples and length, seen at a capture point of the member that dropped it and no further), and
    the handshake is kept in `opened`. Nothing changes when the table may show the dropped packet
    already (a hop in that member with its tuples and a length it can have), or when no captured
    packet is the dropped one (a drop read without its packet, or one no capture point saw)."""
    found = matching((ev for ev, _ in drops), conn_tuples(cl), {ev.netns_inode: m for ev, m in drops},
                     client_ends(cl))
    for ev, member in found:
        if ev.length is None or any(h.info.member == member and _is_dropped(h.pkt, ev) for h in cl.hops):
            return  # the packet the kernel dropped may be one the table shows already
        seen = sorted((p for p in packets if p.point in points and points[p.point].member == member
                       and _is_dropped(p, ev)), key=lambda p: (p.ts_ns, p.index))
        for p in seen:
            hops = _follow(p, packets, points, "request")
            if hops and hops[-1].info.member == member:  # it went no further than where it was dropped
                cl.opened = cl.request + cl.reply
                cl.request, cl.reply = hops, []
                return


def attach_state(fl: FlowLedger, conntrack: Mapping[str, list[dict]], ipvs: Mapping[str, list[dict]]) -> None:
    """Attach each node's conntrack entries (and IPVS connections) whose original tuple a request hop shows."""
    for cl in fl.connections:
        seen = {(h.pkt.proto, h.pkt.src, h.pkt.sport, h.pkt.dst, h.pkt.dport) for h in cl.request}
        for node, entries in conntrack.items():
            for e in entries:
                o = e.get("original") or {}
                if (e.get("proto"), o.get("src"), o.get("sport"), o.get("dst"), o.get("dport")) in seen:
                    cl.conntrack.append({"node": node, **e})
        for node, entries in ipvs.items():
            for e in entries:
                sip, _, sp = str(e.get("source", "")).rpartition(":")
                vip, _, vp = str(e.get("virtual", "")).rpartition(":")
                if (str(e.get("proto", "")).lower(), sip, _int(sp), vip, _int(vp)) in seen:
                    cl.ipvs.append({"node": node, **e})


def _int(s: str) -> int | None:
    return int(s) if s.isdigit() else None


def hops_json(fl: FlowLedger, ok: bool | None) -> dict:
    """One flow for hops.json: the representative connection's hops plus every connection (`ok`: every
    expectation on the flow held; None: it had none)."""
    rep = fl.representative
    t0 = min((h.pkt.ts_ns for c in fl.connections for h in c.hops), default=0)

    def conn_json(c: ConnLedger) -> dict:
        return {"index": c.index, "marker": c.marker, "sport": c.sport, "outcome": c.outcome,
                "backend": c.backend, "status": c.status, "reply": c.answer, "hops": [h.to_json(t0) for h in c.hops],
                "conntrack": c.conntrack, "ipvs": c.ipvs, "opened": [h.to_json(t0) for h in c.opened]}

    return {
        "name": fl.name, "ok": ok, "from": fl.src_member, "to": fl.dst, "protocol": fl.protocol,
        "backends": sorted({c.backend for c in fl.connections if c.backend}),
        "hops": [h.to_json(t0) for h in rep.hops] if rep else [],
        "conntrack": rep.conntrack if rep else [], "ipvs": rep.ipvs if rep else [],
        "connections": [conn_json(c) for c in fl.connections],
    }
