"""Why a connection got no reply (pure): the hop where it died and what killed it.

Evidence, strongest first, all of it printed by the kernel during the flow:
1. the netfilter trace: a rule (or a base chain's policy) whose verdict was DROP, or a REJECT
   rule, on one of the connection's packets: node, hook, table, chain and the rule's text;
2. the kernel's `skb:kfree_skb` drop reason for a packet with one of the connection's tuples
   (analyse/drops.py): the namespace, the reason and the function that dropped it;
3. an ICMP error that came back instead of an answer (port unreachable, fragmentation needed);
4. in IPVS mode, a virtual service with no real server on the node where the packet ended.
Without any of these the verdict says where the packet was last seen and what was not available.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from kpemu.analyse.drops import DropEvent, by_time, describe, matching, meaning
from kpemu.analyse.ledger import ConnLedger, Hop, client_ends, conn_tuples

ICMP_NAMES = {(3, 0): "net unreachable", (3, 1): "host unreachable", (3, 3): "port unreachable",
              (3, 4): "fragmentation needed", (3, 9): "net prohibited", (3, 10): "host prohibited",
              (3, 13): "administratively prohibited", (11, 0): "TTL exceeded"}
NO_RULE_DROPPED = ("no rule dropped it (the rule trace of that node has none), so conntrack itself did: its table "
                   "is full (nf_conntrack_max) or it cannot track the packet")
TIME_SLACK_NS = 50_000_000  # a drop just after the client gave up (its last retransmission) is still its

@dataclass
class Verdict:
    """Where and why one connection died (hops.json `verdict`)."""

    at: str | None  # the member (node, pod, external) where it died
    netns: str | None
    action: str  # DROP | REJECT | ICMP | KERNEL-DROP | IPVS-NO-REAL-SERVER | UNKNOWN
    evidence: str  # netfilter trace | kfree_skb by tuple | kfree_skb by time window | icmp reply | ipvs services
    #                | capture only
    direction: str = "request"  # which way the dying packet was going
    point: str | None = None  # the last capture point where the packet was seen
    hook: str | None = None
    table: str | None = None
    chain: str | None = None
    rule: str | None = None
    icmp: str | None = None  # the ICMP error a REJECT or the kernel sent back
    reason: str | None = None  # kernel drop reason (IP_RPFILTER, NO_SOCKET, ...)
    joined: str | None = None  # how the kernel's drop was tied to this connection: "tuple" | "time window"
    function: str | None = None  # the kernel function that dropped it
    conntrack: str | None = None  # "node: entry" of the conntrack entry whose DNAT sent it where it died
    why: str = ""  # what this means, in words
    text: str = ""  # one line for tables and terminals

    def to_json(self) -> dict:
        return asdict(self)

    def words(self) -> str:
        """Every field a `died:` expectation may name, joined (for substring matching)."""
        return " ".join(str(v) for v in asdict(self).values() if v)


# Why kube-proxy writes the rules that kill packets, whichever mode wrote them (each mode's trace
# reader says which of these a rule is: kpemu.analyse.explain.xtables_trace, .nft_trace).
WHY = {
    "no local endpoints": "the Service has externalTrafficPolicy: Local and this node runs none of its endpoints, "
                          "so kube-proxy drops external traffic here instead of forwarding it to another node "
                          "(which would hide the client's address)",
    "no local endpoints (internal)": "the Service's traffic policy is Local (internalTrafficPolicy for cluster "
                                     "traffic, externalTrafficPolicy for external addresses) and this node runs "
                                     "none of its endpoints, so kube-proxy drops the packet here",
    "no endpoints": "the Service has no ready endpoint: kube-proxy rejects the connection",
    "invalid": "conntrack does not know this packet's connection (it is INVALID): a reply that arrived by a path "
               "its request did not take, or after its entry was gone",
    "marked for drop": "kube-proxy marked the packet for dropping (0x8000) and KUBE-FIREWALL dropped it",
    "source ranges": "the Service's loadBalancerSourceRanges do not include the client's address",
}


@dataclass(frozen=True)
class RuleDrop:
    """A rule (or a base chain's policy) that dropped or rejected one of a connection's packets, as the
    node's trace reported it, in words every proxy mode's trace can give."""

    node: str
    hook: str | None  # the netfilter hook (PREROUTING, INPUT, FORWARD, OUTPUT, POSTROUTING)
    table: str
    chain: str
    rule: str | None  # the whole rule (None: the chain's policy)
    reject: bool  # REJECT (an ICMP error goes back) rather than DROP
    icmp: str | None = None  # what a REJECT sends back
    direction: str = "request"
    what: str = ""  # the rule (or policy) as the verdict names it
    note: str | None = None  # what the rule says of itself (its comment, its map element's comment)
    why: str = ""  # why kube-proxy writes it, in words


@dataclass(frozen=True)
class ConnTrace:
    """What one connection's rule trace says, whichever way it was traced: the rule drops in the order
    the packets met them, the nodes where its packets were traced, and those where a rule DNATed one."""

    drops: tuple[RuleDrop, ...] = ()
    traced: frozenset[str] = field(default_factory=frozenset)
    dnat: frozenset[str] = field(default_factory=frozenset)


NO_TRACE = ConnTrace()


def _rule_verdict(trace: ConnTrace, netns: Mapping[str, str]) -> Verdict | None:
    d = next(iter(trace.drops), None)
    if d is None:
        return None
    v = Verdict(d.node, netns.get(d.node), "REJECT" if d.reject else "DROP", "netfilter trace", d.direction,
                hook=d.hook, table=d.table, chain=d.chain, rule=d.rule, icmp=d.icmp if d.reject else None, why=d.why)
    v.text = (f"{v.action}{' with ' + v.icmp if v.icmp else ''} on {d.node} in {d.hook or '?'}: "
              f"{d.table} {d.what}" + (f" ({d.note})" if d.note and d.note not in d.what else ""))
    return v


def _dnat_entry(cl: ConnLedger, trace: ConnTrace, ipvs: bool) -> tuple[str, str] | None:
    """(conntrack entry as "node: line", how it decided) when a conntrack entry DNATed the connection to
    the address its last request hop went to. Traced packets without a DNAT rule on that node mean the
    packet matched an entry that existed before it (the nat rules were not consulted), except with IPVS,
    which DNATs without a rule."""
    last = cl.request[-1].pkt if cl.request else None
    for e in cl.conntrack if last is not None else []:
        o, r = e.get("original") or {}, e.get("reply") or {}
        if r.get("src") != last.dst or o.get("dst") == r.get("src"):
            continue
        node = e.get("node")
        if ipvs:
            how = f"DNATed to {last.dst} by IPVS; conntrack entry on {node}"
        elif node in trace.traced and node not in trace.dnat:
            how = f"DNATed to {last.dst} by an existing conntrack entry on {node} (no nat rule was consulted)"
        else:
            how = f"DNATed to {last.dst}; conntrack entry on {node}"
        return f"{node}: {e.get('line')}", f"{how}: {e.get('line')}"
    return None


def _icmp_reply(cl: ConnLedger) -> Hop | None:
    return next((h for h in cl.reply if h.pkt.proto == "icmp"), None)


def ipvs_empty_services(save_n: str) -> set[str]:
    """Virtual services ("TCP vip:port") of an `ipvsadm -Sn` text that have no real server."""
    proto = {"-t": "TCP", "-u": "UDP", "--sctp-service": "SCTP"}
    virtual, real = set(), set()
    for line in save_n.splitlines():
        toks = line.split()
        if len(toks) >= 3 and toks[1] in proto:
            (virtual if toks[0] == "-A" else real if toks[0] == "-a" else set()).add(f"{proto[toks[1]]} {toks[2]}")
    return virtual - real


def connection_verdict(cl: ConnLedger, trace: ConnTrace, drops: Sequence[DropEvent],
                       drop_members: Mapping[int, str], netns: Mapping[str, str], ipvs: bool = False,
                       ipvs_services: Mapping[str, str] | None = None,
                       unavailable: Sequence[str] = (), time_note: str | None = None) -> Verdict | None:
    """The verdict for a connection that got no answer (None when it was answered).

    `trace`: what the connection's rule trace says (its mode's explainer reads it); `drops`: the flow's
    kernel drop events; `drop_members`: netns inode -> member; `netns`: member -> namespace name;
    `ipvs`: kube-proxy balances with IPVS (an empty virtual service explains a silent drop);
    `unavailable`: why some evidence could not be collected, said when nothing was found; `time_note`: why
    the drops were read without their packets (they are joined by the connection's time window).
    """
    if cl.outcome == "reply":
        return None
    v = _verdict(cl, trace, drops, drop_members, netns, ipvs, ipvs_services, unavailable, time_note)
    v.point = death_point(cl, v.at, v.direction) or v.point
    return v


def death_point(cl: ConnLedger, at: str | None, direction: str) -> str | None:
    """Where the packet died: the last capture point in the member `at` that saw it going `direction`
    (None when no point of that member saw it: the verdict keeps the last point that did)."""
    hops = cl.request if direction == "request" else cl.reply
    return next((h.point for h in reversed(hops) if at is not None and h.info.member == at), None)


def _verdict(cl: ConnLedger, trace: ConnTrace, drops: Sequence[DropEvent], drop_members: Mapping[int, str],
             netns: Mapping[str, str], ipvs: bool, ipvs_services: Mapping[str, str] | None,
             unavailable: Sequence[str], time_note: str | None) -> Verdict:
    last = cl.request[-1] if cl.request else None
    point = last.point if last else None
    v = _rule_verdict(trace, netns)
    kernel = matching(drops, conn_tuples(cl), drop_members, client_ends(cl))
    timed = by_time(drops, cl.window[0], cl.window[1] + TIME_SLACK_NS, cl.request[0].pkt.proto) \
        if cl.window and cl.request and not kernel else []
    if v is not None:
        v.point = point
        nf = next((ev for ev, m in kernel if m == v.at and ev.reason == "NETFILTER_DROP"), None)
        joined = "tuple"
        if nf is None:
            nf, joined = next((ev for ev in timed if ev.reason == "NETFILTER_DROP"), None), "time window"
        if nf is not None:
            v.reason, v.function, v.joined = nf.reason, nf.function, joined
            v.text += f"; the kernel confirms: {nf.reason}" + (f" in {nf.function}" if nf.function != "?" else "") \
                + (" (joined by time window)" if joined != "tuple" else "")
        return v
    icmp = _icmp_reply(cl)
    if timed:  # only read when no drop matched the tuple
        return _with_entry(_no_rule(_time_verdict(cl, timed, netns, icmp, time_note), trace, ipvs), cl,
                           trace, ipvs)
    if kernel:
        ev, member = next(((e, m) for e, m in kernel if e.reason != "NOT_SPECIFIED"), kernel[0])
        direction = "reply" if any((ev.proto, ev.src, ev.sport, ev.dst, ev.dport) == (h.pkt.proto, h.pkt.src,
                                   h.pkt.sport, h.pkt.dst, h.pkt.dport) for h in cl.reply) else "request"
        v = Verdict(member, netns.get(member), "KERNEL-DROP", "kfree_skb by tuple", direction, point,
                    reason=ev.reason, joined="tuple", function=ev.function, why=meaning(ev.reason, ev.function))
        v.text = f"dropped by the kernel on {member} ({v.direction}): {describe(ev.reason, ev.function)}; " \
                 f"packet {packet_text(ev)}"
        _no_rule(v, trace, ipvs)
        if icmp is not None:
            v.icmp = _icmp_name(icmp)
            v.text += f"; {icmp.pkt.src} sent ICMP {v.icmp}"
        return _with_entry(v, cl, trace, ipvs)
    if icmp is not None:
        name = _icmp_name(icmp)
        sender = icmp.info.member
        v = Verdict(sender, netns.get(sender), "ICMP", "icmp reply", "request", point, icmp=name,
                    why=f"{icmp.pkt.src} answered with ICMP {name} instead of the service")
        v.text = f"refused on {sender}: ICMP {name} from {icmp.pkt.src}"
        return _with_entry(v, cl, trace, ipvs)
    if ipvs and last is not None and last.info.node:
        empty = ipvs_empty_services((ipvs_services or {}).get(last.info.node, ""))
        svc = f"{last.pkt.proto.upper()} {last.pkt.dst}:{last.pkt.dport}"
        if svc in empty:
            node = last.info.node
            v = Verdict(node, netns.get(node), "IPVS-NO-REAL-SERVER", "ipvs services", "request", point,
                        hook="INPUT", why=f"IPVS virtual service {svc} has no real server (no endpoint)")
            v.text = f"no real server on {node}: IPVS virtual service {svc} is empty"
            return v
    where = last.info.member if last else None
    v = Verdict(where, netns.get(where or ""), "UNKNOWN", "capture only", "request", point)
    missing = "; ".join(unavailable)
    v.text = (f"last seen at {point or 'no capture point'}; no rule dropped it in the trace and the kernel reported "
              f"no drop for its tuple" + (f" ({missing})" if missing else ""))
    return v


def _time_verdict(cl: ConnLedger, timed: Sequence[DropEvent], netns: Mapping[str, str], icmp: Hop | None,
                  note: str | None) -> Verdict:
    """A kernel drop read without its packet, tied to the connection by time window and protocol: where it
    died is where the packet was last seen (the request's last hop when an ICMP error came back)."""
    ev = timed[0]
    last = cl.reply[-1] if cl.reply and icmp is None else cl.request[-1]
    where = last.info.member
    v = Verdict(where, netns.get(where), "KERNEL-DROP", "kfree_skb by time window", last.direction, last.point,
                reason=ev.reason, joined="time window", function=ev.function, why=meaning(ev.reason, ev.function))
    others = f"; {len(timed) - 1} other IPv4 drop(s) in that time" if len(timed) > 1 else ""
    v.text = (f"dropped by the kernel: {describe(ev.reason, ev.function)}; joined by time window: the kernel "
              f"dropped it while this connection ran, its packet and namespace unread"
              f"{' (' + note + ')' if note else ''}{others}; last seen at {last.point}")
    if icmp is not None:
        v.icmp = _icmp_name(icmp)
        v.text += f"; {icmp.pkt.src} sent ICMP {v.icmp}"
    return v


def _no_rule(v: Verdict, trace: ConnTrace, ipvs: bool) -> Verdict:
    """A NETFILTER_DROP on a node whose rule trace has the packet and no DROP (else _rule_verdict would have
    named the rule): conntrack dropped it. Not with IPVS, which drops in the hook itself (no real server)."""
    if v.reason == "NETFILTER_DROP" and not ipvs and v.at in trace.traced:
        v.why = NO_RULE_DROPPED
        v.text += f"; {NO_RULE_DROPPED}"
    return v


def _with_entry(v: Verdict, cl: ConnLedger, trace: ConnTrace, ipvs: bool) -> Verdict:
    """Name the conntrack entry that sent the packet where it died, when one did."""
    got = _dnat_entry(cl, trace, ipvs)
    if got is not None:
        v.conntrack = got[0]
        v.text += f"; {got[1]}"
    return v


def packet_text(ev: DropEvent) -> str:
    """"10.242.72.50:41234 > 10.244.0.2:80 (60 bytes)", the inner tuple first when tunnelled."""
    def ep(ip: str, port: int | None) -> str:
        return f"{ip}:{port}" if port is not None else ip

    size = f" ({ev.length} bytes)" if ev.length else ""
    outer = f"{ep(ev.src, ev.sport)} > {ep(ev.dst, ev.dport)}"
    if ev.inner:
        _, isrc, isp, idst, idp = ev.inner
        return f"{ep(isrc, isp)} > {ep(idst, idp)} inside VXLAN {outer}{size}"
    return outer + size


def _icmp_name(h: Hop) -> str:
    b = h.pkt.payload
    key = (b[0], b[1]) if len(b) >= 2 else (-1, -1)
    return ICMP_NAMES.get(key, f"type {key[0]} code {key[1]}")
