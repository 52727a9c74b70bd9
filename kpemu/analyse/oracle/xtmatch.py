"""Every match of an iptables rule, evaluated for the first packet of a connection, or declared
undecidable (pure).

The packet is what kpemu.analyse.oracle.types.Packet says, the first packet of a new connection (a
TCP SYN with no options known, a first UDP or SCTP datagram, conntrack state NEW, mark 0, no earlier
connection from the client, so no recent-list entry), seen at the hook the walk is in. A match is
decided from that, from the node's addresses, from the ipsets the walk was given, from the interfaces
given or inferred, or from what earlier rules on the same path did; a match whose answer depends on
anything else (an interface nobody named, a set without its members, a rate limit, a packet's length
or payload, another connection's history) is `Unknown`, naming the fact and what would decide it,
and the walker takes both ways (kpemu.analyse.oracle.iptables). No match is assumed to match.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from kpemu.analyse.oracle.types import Route, WalkState, in_network, is_local
from kpemu.proxy.rules import Match, Option, Rule
from kpemu.proxy.state import IpvsModel

_PROTO_NUMBERS = {"tcp": "6", "udp": "17", "sctp": "132", "icmp": "1"}
_FIRST_FLAGS = frozenset(("SYN",))  # the first packet of a TCP connection
_TCP_FLAGS = ("FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR")
_NO_INPUT = ("OUTPUT",)  # hooks where a locally generated packet has no input device
_NO_OUTPUT = ("PREROUTING", "INPUT")  # hooks before the routing decision or after local delivery


@dataclass(frozen=True)
class Unknown:
    """A fact a rule needs that the walk was not given: `fact` is what would have to hold (e.g.
    "-o docker0"), `why` what would decide it."""

    fact: str
    why: str


@dataclass(frozen=True)
class Context:
    """What the walk knows of the node beyond the packet: its own addresses, its IPVS sets and
    virtual servers (or a dump's ipsets), and where destinations leave it."""

    local: frozenset[str]
    ipvs: IpvsModel | None = None
    routes: tuple[Route, ...] = ()


Decision = float | Unknown  # the probability the rule matches (0, 1, a statistic's p), or what is not known


def option_text(module: str, o: Option) -> str:
    """One option as iptables-save prints it, with its module: `-m limit --limit 5/min`."""
    neg = "! " if o.negated else ""
    head = f"-m {module} " if module and not module.startswith("-") else ""
    return f"{head}{neg}{o.name}{''.join(' ' + v for v in o.values)}"


def match_text(m: Match) -> str:
    """A whole match as iptables-save prints it: `-m statistic --mode nth --every 2 --packet 0`."""
    return " ".join([f"-m {m.module}", *(option_text("", o) for o in m.options)])


# -- interfaces ------------------------------------------------------------------------------------
def iface_matches(name: str, pattern: str) -> bool:
    """iptables' interface match: `pattern` ending in `+` is a prefix, else the whole name."""
    return name.startswith(pattern[:-1]) if pattern.endswith("+") else name == pattern


def _iface_from_facts(st: WalkState, flag: str, pattern: str) -> bool | None:
    """Whether `pattern` holds given what this path already took for the same interface."""
    for a in st.assumed:
        if not a.fact.startswith(f"{flag} "):
            continue
        q = a.fact[len(flag) + 1:]
        if q == pattern:
            return a.holds
        q_wild, p_wild = q.endswith("+"), pattern.endswith("+")
        if a.holds and not q_wild:
            return iface_matches(q, pattern)
        if a.holds and q_wild and not p_wild and not pattern.startswith(q[:-1]):
            return False
        if a.holds and q_wild and p_wild and q[:-1].startswith(pattern[:-1]):
            return True
        if not a.holds and q_wild and pattern.startswith(q[:-1]):
            return False
    return None


def out_interface(st: WalkState, ctx: Context) -> tuple[str | None, str | None]:
    """(the interface the packet leaves by at this hook, what it was inferred from): "" where it has
    none (before routing, local delivery), None when not known."""
    if st.hook in _NO_OUTPUT:
        return "", None
    if st.pkt.oif is not None:
        return st.pkt.oif, None
    if st.pkt.origin == "local" and is_local(st.dst, set(ctx.local)):
        return "lo", None
    best: Route | None = None
    for r in ctx.routes:
        if in_network(st.dst, r.net) and (best is None or _prefix(r.net) > _prefix(best.net)):
            best = r
    if best is None:
        return None, None
    return best.iface, f"leaves by {best.iface} to {st.dst}: inferred from {best.why}"


def in_interface(st: WalkState) -> str | None:
    """The interface the packet arrived on: "" for a locally generated one, None when not known."""
    if st.pkt.origin == "local":
        return ""
    return st.pkt.iif


def _prefix(net: str) -> int:
    return ipaddress.ip_network(net, strict=False).prefixlen


def _iface(st: WalkState, ctx: Context, o: Option) -> Decision:
    pattern = o.values[0] if o.values else ""
    if o.name == "-i":
        name = in_interface(st)
        why = "kpemu was not told the interface the packet arrives on (give --iif IFACE)"
    else:
        name, _ = out_interface(st, ctx)
        why = (f"kpemu was not told the interface a packet to {st.dst} leaves by (give --oif IFACE), "
               "and the dump does not show it")
    if name is None and o.name == "-i" and pattern == "lo" and not is_local(st.src, set(ctx.local)):
        return 1.0 if o.negated else 0.0  # a packet from another host's address does not arrive on lo
    if name is None:
        known = _iface_from_facts(st, o.name, pattern)
        if known is None:
            return Unknown(f"{o.name} {pattern}", why)
        return 1.0 if known != o.negated else 0.0
    return 1.0 if iface_matches(name, pattern) != o.negated else 0.0


# -- addresses -------------------------------------------------------------------------------------
def _subnet_broadcast_of(addr: str, local: Iterable[str]) -> str | None:
    """A node address whose subnet's broadcast address `addr` could be (its prefix is not known)."""
    a = int(ipaddress.IPv4Address(addr))
    for ip in local:
        n = int(ipaddress.IPv4Address(ip))
        if ipaddress.IPv4Address(ip).is_loopback:
            continue
        for plen in range(8, 31):
            host = (1 << (32 - plen)) - 1
            if n & ~host == a & ~host and a & host == host:
                return ip
    return None


def addr_types(addr: str, local: frozenset[str]) -> set[str] | Unknown:
    """The kernel's address type of `addr` on the node (inet_addr_type: the local routing table)."""
    a = ipaddress.IPv4Address(addr)
    if a in ipaddress.IPv4Network("0.0.0.0/8") or addr == "255.255.255.255":
        return {"BROADCAST"}
    if a.is_multicast:
        return {"MULTICAST"}
    if is_local(addr, set(local)):
        return {"LOCAL"}
    owner = _subnet_broadcast_of(addr, local)
    if owner is not None:
        return Unknown(f"{addr} is not a subnet broadcast address of the node",
                       f"{addr} is the broadcast address of {owner}'s subnet for some prefix length, and the "
                       "node's prefixes are not known")
    return {"UNICAST"}


def _addrtype(m: Match, st: WalkState, ctx: Context) -> Decision:
    limited = any(o.name in ("--limit-iface-in", "--limit-iface-out") for o in m.options)
    for o in m.options:
        if o.name not in ("--src-type", "--dst-type"):
            if o.name in ("--limit-iface-in", "--limit-iface-out"):
                continue
            return _not_modelled("addrtype", o)
        addr = st.src if o.name == "--src-type" else st.dst
        types = addr_types(addr, ctx.local)
        if isinstance(types, Unknown):
            return types
        if limited and "LOCAL" in types:
            return Unknown(option_text("addrtype", o) + " on the interface only",
                           f"with --limit-iface-in/out the type depends on which interface holds {addr}, "
                           "which kpemu was not told")
        if bool(types & set(o.values[0].split(","))) == o.negated:
            return 0.0
    return 1.0


# -- conntrack -------------------------------------------------------------------------------------
def ct_states(st: WalkState) -> set[str]:
    """The conntrack states of the first packet where the walk is: NEW (or UNTRACKED), and DNAT/SNAT
    once a NAT rule on the path changed the tuple."""
    if st.untracked:
        return {"UNTRACKED"}
    return {"NEW"} | ({"DNAT"} if st.dnat else set()) | ({"SNAT"} if st.masq else set())


def _addr_opt(value: str, addr: str | None) -> bool | None:
    return None if addr is None else in_network(addr, value)


def _port_opt(value: str, port: int | None) -> bool | None:
    return None if port is None else port_in(value, port)


def _conntrack(m: Match, st: WalkState) -> Decision:
    pkt = st.pkt
    reply_dst = None if st.masq else pkt.src  # a masquerade's address is the outgoing interface's
    reply_dport = None if st.masq else pkt.sport
    for o in m.options:
        v = o.values[0] if o.values else ""
        if o.name in ("--ctstate", "--state"):
            ok: bool | None = bool(ct_states(st) & set(v.split(",")))
        elif st.untracked:
            ok = False  # no conntrack entry: only the state UNTRACKED is known about it
        elif o.name == "--ctproto":
            ok = v in (pkt.proto, _PROTO_NUMBERS.get(pkt.proto), "all")
        elif o.name == "--ctorigsrc":
            ok = in_network(pkt.src, v)
        elif o.name == "--ctorigdst":
            ok = in_network(pkt.dst, v)
        elif o.name == "--ctreplsrc":
            ok = in_network(st.dst, v)
        elif o.name == "--ctrepldst":
            ok = _addr_opt(v, reply_dst)
        elif o.name == "--ctorigsrcport":
            ok = port_in(v, pkt.sport)
        elif o.name == "--ctorigdstport":
            ok = port_in(v, pkt.dport)
        elif o.name == "--ctreplsrcport":
            ok = port_in(v, st.dport)
        elif o.name == "--ctrepldstport":
            ok = _port_opt(v, reply_dport)
        elif o.name == "--ctstatus":
            ok = "NONE" in v.split(",")  # a connection's first packet: not confirmed, no reply seen
        elif o.name == "--ctdir":
            ok = v == "ORIGINAL"
        else:
            return _not_modelled(m.module, o)
        if ok is None:
            return Unknown(option_text(m.module, o), "the reply's destination is the masquerade address, the "
                                                     "outgoing interface's, which kpemu was not told")
        if ok == o.negated:
            return 0.0
    return 1.0


# -- ports, marks, sets ----------------------------------------------------------------------------
def port_in(value: str, port: int) -> bool:
    """`PORT` or `LO:HI` (iptables' port range) holds `port`."""
    lo, sep, hi = value.partition(":")
    return (int(lo or 0) <= port <= int(hi or 65535)) if sep else port == int(value)


# The port options of tcp/udp/sctp (one port or LO:HI) and of multiport (a comma list of them) -> which of
# the packet's ports each tests: the destination port where the walk is, the source port, or either
_PORTS = {"--dport": "dst", "--destination-port": "dst", "--sport": "src", "--source-port": "src"}
_MULTIPORTS = {"--dports": "dst", "--destination-ports": "dst", "--sports": "src", "--source-ports": "src",
               "--ports": "either"}


def _ports_hold(values: Iterable[str], which: str, st: WalkState) -> bool:
    """Whether one of the port `values` holds the packet's port that `which` names (dst | src | either)."""
    ports = {"dst": (st.dport,), "src": (st.pkt.sport,), "either": (st.dport, st.pkt.sport)}[which]
    return any(port_in(v, p) for v in values for p in ports)


def mark_match(value: str, mark: int) -> bool:
    """`VALUE[/MASK]` matches `mark`."""
    v, _, m = value.partition("/")
    mask = int(m, 0) if m else 0xFFFFFFFF
    return (mark & mask) == int(v, 0)


def _tcp_flags(names: str) -> set[str]:
    if names == "ALL":
        return set(_TCP_FLAGS)
    return set() if names == "NONE" else set(names.split(","))


def _l4(m: Match, st: WalkState) -> Decision:
    """tcp/udp/sctp (explicit or implied by -p) and multiport: one loop, the options told apart by module."""
    listed = m.module == "multiport"
    proto = m.module if m.module in ("tcp", "udp", "sctp") else None
    if proto is not None and proto != st.pkt.proto:
        return 0.0
    ports = _MULTIPORTS if listed else _PORTS
    for o in m.options:
        v = o.values[0] if o.values else ""
        if o.name in ports:
            ok = _ports_hold(v.split(",") if listed else (v,), ports[o.name], st)
        elif listed:
            return _not_modelled(m.module, o)
        elif o.name == "--syn" and st.pkt.proto == "tcp":
            ok = True
        elif o.name == "--tcp-flags" and st.pkt.proto == "tcp" and len(o.values) == 2:
            ok = _FIRST_FLAGS & _tcp_flags(o.values[0]) == _tcp_flags(o.values[1])
        elif o.name == "--tcp-option":
            return Unknown(option_text(m.module, o), "the options of the client's SYN are not known")
        else:
            return _not_modelled(m.module, o)
        if ok == o.negated:
            return 0.0
    return 1.0


def set_key_match(set_type: str, members: Iterable[str], flags: str, st: WalkState) -> bool:
    """Whether the packet's key (per `flags`, e.g. "dst,dst") is in a set of `set_type`."""
    dirs = flags.split(",")
    proto = st.pkt.proto
    kinds = set_type.split(":", 1)[1].split(",")
    if set_type.startswith("bitmap:port"):
        return str(st.dport if dirs[0] == "dst" else st.pkt.sport) in set(members)
    for member in members:
        fields = member.split(",")
        if len(fields) != len(kinds):
            continue
        ok = True
        for i, (kind, want) in enumerate(zip(kinds, fields, strict=True)):
            d = dirs[min(i, len(dirs) - 1)]
            have = st.src if d == "src" else st.dst
            if kind == "ip":
                ok = have == want if "/" not in want else in_network(have, want)
            elif kind == "port":
                p = st.dport if d == "dst" else st.pkt.sport
                ok = want == f"{proto}:{p}" or want == str(p)
            elif kind == "net":
                ok = in_network(have, want)
            else:
                ok = False
            if not ok:
                break
        if ok:
            return True
    return False


def _set(m: Match, st: WalkState, ctx: Context) -> Decision:
    for o in m.options:
        if o.name in ("--return-nomatch", "--update-counters", "--update-subcounters", "--no-update-counters",
                      "--no-update-subcounters"):
            continue
        if o.name != "--match-set" or not o.values:
            return _not_modelled("set", o)
        name, flags = o.values[0], o.values[1] if len(o.values) > 1 else "dst"
        known = ctx.ipvs.sets.get(name) if ctx.ipvs is not None else None
        if known is None or known[0].split(":", 1)[-1] not in _SET_KINDS:
            what = "its members" if known is None else f"how to look up a {known[0]} set"
            return Unknown(option_text("set", o), f"kpemu was not given {what} (give the node's ipset save)")
        if set_key_match(known[0], known[1], flags, st) == o.negated:
            return 0.0
    return 1.0


_SET_KINDS = frozenset(("ip", "ip,port", "ip,port,ip", "ip,port,net", "net", "net,port", "port"))


# -- the rest --------------------------------------------------------------------------------------
def _statistic(m: Match) -> Decision:
    kind = next((o.values[0] for o in m.options if o.name == "--mode" and o.values), "random")
    prob = next((o for o in m.options if o.name == "--probability"), None)
    if kind == "random" and prob is not None:
        return 1.0 - float(prob.values[0]) if prob.negated else float(prob.values[0])
    return Unknown(match_text(m),
                   "which packet of the rule's counter this is (--mode nth counts every packet before it)")


def _recent(m: Match, st: WalkState) -> Decision:
    opts = {o.name: o for o in m.options}
    name = opts["--name"].values[0] if "--name" in opts and opts["--name"].values else "DEFAULT"
    addr = st.dst if "--rdest" in opts else st.src
    action = next((o for o in m.options if o.name in ("--set", "--rcheck", "--update", "--remove")), None)
    if action is None:
        return _not_modelled("recent", m.options[0]) if m.options else 1.0
    present = (name, addr) in st.recent  # set earlier on this path; none from another connection
    if action.name == "--set":
        ok = True
    else:
        hits = opts.get("--hitcount")
        ok = present and (hits is None or int(hits.values[0]) <= 1)
    return 1.0 if ok != action.negated else 0.0


def _physdev(m: Match, st: WalkState) -> Decision:
    bridged = st.pkt.bridged
    for o in m.options:
        if bridged is None:
            return Unknown(option_text("physdev", o), "kpemu was not told whether the packet came through a "
                                                      "bridge port with br_netfilter on")
        if o.name == "--physdev-is-in":
            ok = bridged
        elif not bridged:
            ok = False  # not from a bridge port: no physical device in or out
        elif o.name == "--physdev-is-bridged":
            ok = False  # the routed pass, not a bridged one
        else:
            return Unknown(option_text("physdev", o), "the bridge port the packet uses is not known")
        if ok == o.negated:
            return 0.0
    return 1.0


def _iprange(m: Match, st: WalkState) -> Decision:
    for o in m.options:
        if o.name not in ("--src-range", "--dst-range") or not o.values:
            return _not_modelled("iprange", o)
        lo, _, hi = o.values[0].partition("-")
        a = ipaddress.IPv4Address(st.src if o.name == "--src-range" else st.dst)
        ok = ipaddress.IPv4Address(lo) <= a <= ipaddress.IPv4Address(hi or lo)
        if ok == o.negated:
            return 0.0
    return 1.0


def _owner(m: Match, st: WalkState) -> Decision:
    if st.pkt.origin == "local":
        return Unknown(match_text(m),
                       "the process that sent the packet is not known")
    for o in m.options:  # a packet from elsewhere has no local socket: xt_owner matches only the negations
        if not o.negated:
            return 0.0
    return 1.0


def _ipvs_match(m: Match, st: WalkState) -> Decision:
    if st.ipvs is None:  # IPVS has not handled the packet (yet)
        return 1.0 if all(o.negated for o in m.options if o.name == "--ipvs") and any(
            o.name == "--ipvs" for o in m.options) else 0.0
    words = st.ipvs.split()  # "IPVS rr TCP vip:port -> rip:port"
    vip, _, vport = words[3].rpartition(":")
    for o in m.options:
        v = o.values[0] if o.values else ""
        if o.name == "--ipvs":
            ok = True
        elif o.name == "--vaddr":
            ok = in_network(vip, v)
        elif o.name == "--vport":
            ok = v == vport
        elif o.name == "--vproto":
            ok = v.lower() in (words[2].lower(), _PROTO_NUMBERS.get(words[2].lower()))
        elif o.name == "--vdir":
            ok = v == "ORIGINAL"
        else:
            return _not_modelled("ipvs", o)
        if ok == o.negated:
            return 0.0
    return 1.0


def _not_modelled(module: str, o: Option) -> Unknown:
    return Unknown(option_text(module, o), f"kpemu does not model {o.name} of -m {module}")


_UNDECIDABLE = {  # modules whose answer depends on what the walk is never given
    "limit": "a rate limit depends on the packets before this one",
    "hashlimit": "a rate limit depends on the packets before this one",
    "connlimit": "it depends on the node's other connections",
    "connbytes": "it counts the connection's earlier packets",
    "quota": "a quota depends on the packets before this one",
    "length": "the packet's length is not known (a SYN's options vary)",
    "ttl": "the packet's TTL is not known", "hl": "the packet's hop limit is not known",
    "tos": "the packet's TOS is not known", "dscp": "the packet's DSCP is not known",
    "ecn": "the packet's ECN bits are not known",
    "string": "the payload is not known", "u32": "the packet's bytes are not known",
    "bpf": "a BPF program's answer is not known", "socket": "the node's sockets are not known",
    "rpfilter": "the node's routes back to the source are not known", "time": "the time of day is not known",
    "helper": "the connection's helper is not known", "cgroup": "the sending process is not known",
    "mac": "the source MAC address is not known", "pkttype": "the link-layer packet type is not known",
    "policy": "the packet's IPsec policy is not known", "realm": "the route's realm is not known",
    "devgroup": "the interfaces' groups are not known", "cpu": "the CPU that handles it is not known",
    "geoip": "the address's country is not known", "nfacct": "it counts earlier packets",
    "cluster": "the cluster hash is not known", "osf": "the sender's OS is not known",
    "connlabel": "the connection's labels are not known", "ipcomp": "not modelled", "esp": "not modelled",
    "ah": "not modelled", "ipv4options": "the IP options are not known", "dccp": "not modelled",
    "frag": "not modelled", "state_ext": "not modelled", "sctp_chunks": "the SCTP chunks are not known",
}


def evaluate(rule: Rule, st: WalkState, ctx: Context) -> Decision:
    """Whether `rule` matches the packet in state `st`: 0 (decided: no) as soon as one of its
    matches surely fails, else the first match it cannot decide (Unknown, this path's earlier
    assumptions applied), else the probability (1, or a statistic's p)."""
    p = rule.parsed
    unknown: Unknown | None = None
    prob = 1.0
    for o in p.base:
        v = o.values[0] if o.values else ""
        if o.name in ("-i", "-o"):
            d: Decision = _iface(st, ctx, o)
        elif o.name == "-s":
            d = 1.0 if in_network(st.src, v) != o.negated else 0.0
        elif o.name == "-d":
            d = 1.0 if in_network(st.dst, v) != o.negated else 0.0
        elif o.name == "-p":
            ok = v.lower() in ("all", "0", st.pkt.proto, _PROTO_NUMBERS.get(st.pkt.proto))
            d = 1.0 if ok != o.negated else 0.0
        elif o.name == "-f":
            d = 1.0 if o.negated else 0.0  # the first packet of a connection is not a later fragment
        else:
            d = _not_modelled("", o)
        if isinstance(d, Unknown):
            unknown = unknown or d
        elif d <= 0.0:
            return 0.0
    for m in p.matches:
        d = _module(m, st, ctx)
        if isinstance(d, Unknown):
            known = st.fact(d.fact)
            if known is None:
                unknown = unknown or d
                continue
            d = 1.0 if known else 0.0
        if d <= 0.0:
            return 0.0
        prob *= d
    return unknown if unknown is not None else prob


def _module(m: Match, st: WalkState, ctx: Context) -> Decision:
    mod = m.module
    if m.implicit or mod in ("tcp", "udp", "sctp", "multiport"):
        return _l4(m, st)
    if mod == "comment":
        return 1.0
    if mod in ("conntrack", "state"):
        return _conntrack(m, st)
    if mod == "addrtype":
        return _addrtype(m, st, ctx)
    if mod in ("mark", "connmark"):
        o = m.get("--mark")
        if o is None or len(m.options) != 1 or not o.values:
            return _not_modelled(mod, m.options[0]) if m.options else 1.0
        return 1.0 if mark_match(o.values[0], st.mark if mod == "mark" else st.ctmark) != o.negated else 0.0
    if mod == "set":
        return _set(m, st, ctx)
    if mod == "statistic":
        return _statistic(m)
    if mod == "recent":
        return _recent(m, st)
    if mod == "physdev":
        return _physdev(m, st)
    if mod in ("icmp", "icmp6", "icmpv6"):
        return 0.0 if st.pkt.proto not in ("icmp", "icmpv6") else Unknown(f"-m {mod}", "not modelled")
    if mod == "iprange":
        return _iprange(m, st)
    if mod == "owner":
        return _owner(m, st)
    if mod == "ipvs":
        return _ipvs_match(m, st)
    return Unknown(match_text(m), _UNDECIDABLE.get(mod, f"kpemu does not model -m {mod}"))
