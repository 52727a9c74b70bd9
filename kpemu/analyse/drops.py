"""The kernel's drop events of a run (pure): parse the drop tracer's text, keep a flow's window,
join a drop to a connection by tuple (or, without the packet, by time window and protocol), and say
what each drop reason means.

The text is what kernel/drops.py's bpftrace printed: `REASON <n> <NAME>` lines (the reason table
of this kernel's `skb:kfree_skb` format) and `DROP <ns> <netns inode> <ifindex> <reason> <function>
<proto> <src> <dst> <sport> <dport> <inner proto> <inner src> <inner dst> <inner sport> <inner dport> <length>`;
or, from its tracefs reader, `NOTE <why the packet could not be read>` and `TDROP <ns> <REASON> <function>`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

PROTOS = {1: "icmp", 6: "tcp", 17: "udp"}

# Drop reasons the kernel gives after a packet's last netfilter hook (local delivery found no socket, after
# INPUT): the packet's whole netfilter path ran, so the model's path can still be checked against the trace.
PAST_NETFILTER = frozenset({"NO_SOCKET"})

# What each drop reason means for a Service packet (the kernel's names; see include/net/dropreason-core.h).
MEANING = {
    "NETFILTER_DROP": "a netfilter rule or conntrack returned DROP",
    "NO_SOCKET": "no socket on this host owns the packet's tuple (nothing listens, or a reply nobody asked for)",
    "IP_RPFILTER": "strict reverse-path filtering: the route back to the source leaves by another interface",
    "PKT_TOO_BIG": "larger than the outgoing MTU with Don't Fragment set (the sender gets ICMP frag needed)",
    "NEIGH_FAILED": "the next hop never answered ARP",
    "NEIGH_QUEUEFULL": "too many packets waited for an ARP answer",
    "IP_INNOROUTES": "no route to the destination on input",
    "IP_OUTNOROUTES": "no route to the destination on output",
    "OTHERHOST": "the frame was addressed to another host's MAC",
    "VXLAN_VNI_NOT_FOUND": "no VXLAN device with the packet's VNI",
    "TCP_INVALID_SEQUENCE": "TCP segment outside the receive window",
    "TCP_OLD_ACK": "an acknowledgement for data not yet sent or already acknowledged",
    "SOCKET_RCVBUFF": "the receiving socket's buffer is full",
    "IP_NOPROTO": "no handler for the IP protocol",
    "IP_INADDRERRORS": "bad destination address (e.g. a broadcast or martian)",
    "IP_INHDR": "bad IP header (or a martian source)",
    "FRAG_REASM_TIMEOUT": "fragments never reassembled in time",
    "NOT_SPECIFIED": "dropped without a specific reason",
}


# Where a drop without a specific reason happens says what it was.
FUNCTION_MEANING = {
    "__dev_forward_skb2": "the frame is larger than the MTU of the receiving end of a veth pair, which drops it "
                          "silently (no ICMP goes back)",
    "__dev_forward_skb": "the frame is larger than the MTU of the receiving end of a veth pair, which drops it "
                         "silently (no ICMP goes back)",
}


@dataclass(frozen=True)
class DropEvent:
    """One dropped packet as the kernel reported it."""

    t_ns: int  # CLOCK_MONOTONIC
    netns_inode: int
    ifindex: int
    reason: str
    function: str
    proto: str
    src: str
    dst: str
    sport: int | None
    dport: int | None
    inner: tuple[str, str, int | None, str, int | None] | None = None  # proto, src, sport, dst, dport
    length: int | None = None  # bytes (skb->len where it was dropped)

    def tuples(self) -> list[tuple[str, str, int | None, str, int | None]]:
        """The packet's tuple (proto, src, sport, dst, dport), and its inner one when tunnelled."""
        out = [(self.proto, self.src, self.sport, self.dst, self.dport)]
        return out + ([self.inner] if self.inner else [])

    def to_json(self) -> dict:
        return asdict(self)


def _ports(proto: str, sp: str, dp: str) -> tuple[int | None, int | None]:
    return (int(sp), int(dp)) if proto in ("tcp", "udp") else (None, None)


def parse_drops(text: str) -> list[DropEvent]:
    """Every DROP line of the tracer's text, with reason numbers turned into this kernel's names; a TDROP
    line (no packet read) is an event of netns inode 0 with no tuple."""
    names: dict[int, str] = {}
    out: list[DropEvent] = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 3 and f[0] == "REASON" and f[1].isdigit():
            names[int(f[1])] = f[2]
        elif len(f) == 4 and f[0] == "TDROP" and f[1].isdigit():
            out.append(DropEvent(int(f[1]), 0, 0, f[2], f[3], "ip", "", "", None, None))
        elif len(f) in (16, 17) and f[0] == "DROP":
            try:
                proto = PROTOS.get(int(f[6]), f"ip/{f[6]}")
                sport, dport = _ports(proto, f[9], f[10])
                inner = None
                if f[11] != "0":
                    iproto = PROTOS.get(int(f[11]), f"ip/{f[11]}")
                    isp, idp = _ports(iproto, f[14], f[15])
                    inner = (iproto, f[12], isp, f[13], idp)
                out.append(DropEvent(int(f[1]), int(f[2]), int(f[3]), names.get(int(f[4]), f[4]), f[5], proto,
                                     f[7], f[8], sport, dport, inner, int(f[16]) if len(f) > 16 else None))
            except ValueError:
                continue
    return out


def window(text: str, start_ns: int, end_ns: int) -> str:
    """The tracer's text limited to one flow: the reason table and the drops inside [start, end]."""
    keep = []
    for line in text.splitlines():
        f = line.split()
        if f[:1] in (["REASON"], ["NOTE"]) or (f[:1] in (["DROP"], ["TDROP"]) and len(f) > 1 and f[1].isdigit()
                                               and start_ns <= int(f[1]) <= end_ns):
            keep.append(line)
    return "\n".join(keep) + ("\n" if keep else "")


def matching(events: Iterable[DropEvent], tuples: set[tuple], members: Mapping[int, str],
             ends: set[tuple] = frozenset()) -> list[tuple[DropEvent, str]]:
    """Drops of one connection in the lab's namespaces, earliest first: (event, member).

    A drop belongs to the connection when its tuple (or inner tuple) is one of `tuples`
    ((proto, src, sport, dst, dport); ICMP has no ports), or when one of its ends is one of `ends`
    ((proto, ip, port): the connection's own client-side address and port, which NAT in between
    leaves alone on the other side, e.g. a packet dropped right after DNAT, before any capture).
    """
    out = []
    for ev in sorted(events, key=lambda e: e.t_ns):
        if ev.netns_inode not in members:
            continue
        if any(t in tuples or (t[0], t[1], t[2]) in ends or (t[0], t[3], t[4]) in ends for t in ev.tuples()):
            out.append((ev, members[ev.netns_inode]))
    return out


def time_note(text: str) -> str | None:
    """Why the tracer could not read the dropped packets (its drops join by time window), or None."""
    return next((line[5:].strip() for line in text.splitlines() if line.startswith("NOTE ")), None)


# Functions that only ever drop the other transport's packets (a TCP flow's drop is not in UDP code).
_OTHER_PROTO = {"tcp": ("udp", "__udp"), "udp": ("tcp",)}


def by_time(events: Iterable[DropEvent], start_ns: int, end_ns: int, proto: str) -> list[DropEvent]:
    """Drops without a packet (TDROP) inside [start, end] that can belong to a `proto` connection, the
    likeliest first: a specific reason before NOT_SPECIFIED, then one in `proto`'s own code (tcp_v4_rcv for
    TCP), then the reason and function seen most often (a connection's retransmissions die the same way;
    another packet's drop rarely repeats), then the earliest."""
    skip = _OTHER_PROTO.get(proto, ())
    inside = [e for e in events if e.netns_inode == 0 and start_ns <= e.t_ns <= end_ns
              and not e.function.startswith(skip)]
    seen: dict[tuple[str, str], int] = {}
    for e in inside:
        seen[(e.reason, e.function)] = seen.get((e.reason, e.function), 0) + 1
    return sorted(inside, key=lambda e: (e.reason == "NOT_SPECIFIED", proto not in e.function,
                                         -seen[(e.reason, e.function)], e.t_ns))


def meaning(reason: str, function: str) -> str:
    """What a drop reason (or, for an unspecified one, the dropping function) means; "" when unknown."""
    said = FUNCTION_MEANING.get(function) if reason == "NOT_SPECIFIED" else None
    return said or MEANING.get(reason, "")


def describe(reason: str, function: str) -> str:
    """"IP_RPFILTER in ip_rcv_finish_core (strict reverse-path filtering: ...)" (no function when unknown: "?")."""
    said = meaning(reason, function)
    return reason + (f" in {function}" if function != "?" else "") + (f" ({said})" if said else "")
