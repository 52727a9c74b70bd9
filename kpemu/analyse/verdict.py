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
from dataclasses import asdict, dataclass

from kpemu.analyse.attribution.xtables import TracedPacket, comment_of, kernel_dnat
from kpemu.analyse.drops import DropEvent, by_time, describe, matching, meaning
from kpemu.analyse.ledger import ConnLedger, Hop

ICMP_NAMES = {(3, 0): "net unreachable", (3, 1): "host unreachable", (3, 3): "port unreachable",
              (3, 4): "fragmentation needed", (3, 9): "net prohibited", (3, 10): "host prohibited",
              (3, 13): "administratively prohibited", (11, 0): "TTL exceeded"}
REJECT_DEFAULT = "icmp-port-unreachable"
NO_RULE_DROPPED = ("no rule dropped it (the rule trace of that node has none), so conntrack itself did: its table "
                   "is full (nf_conntrack_max) or it cannot track the packet")
TIME_SLACK_NS = 50_000_000  # a drop just after the client gave up (its last retransmission) is still its

# Why kube-proxy writes the rules that kill packets (matched on the rule's comment or chain); the first
# pairs are (comment, chain): kube-proxy drops internal traffic of a policy-Local Service in KUBE-SERVICES
# (the clusterIP) and external traffic in KUBE-EXTERNAL-SERVICES.
WHY_CHAIN_RULE = (
    (("has no local endpoints", "KUBE-SERVICES"),
     "the Service has internalTrafficPolicy: Local and this node runs none of its endpoints, so kube-proxy "
     "drops traffic from this node to its clusterIP instead of sending it to another node's endpoint"),
)
WHY_RULE = (
    ("has no local endpoints", "the Service has externalTrafficPolicy: Local and this node runs none of its "
                               "endpoints, so kube-proxy drops external traffic here instead of forwarding it "
                               "to another node (which would hide the client's address)"),
    ("has no endpoints", "the Service has no ready endpoint: kube-proxy rejects the connection"),
    ("ctstate INVALID", "conntrack does not know this packet's connection (it is INVALID): a reply that "
                        "arrived by a path its request did not take, or after its entry was gone"),
    ("KUBE-MARK-DROP", "kube-proxy marked the packet for dropping (0x8000) and KUBE-FIREWALL dropped it"),
)


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


def _why_rule(rule: str, chain: str) -> str:
    for (needle, where), why in WHY_CHAIN_RULE:
        if needle in rule and chain == where:
            return why
    for needle, why in WHY_RULE:
        if needle in rule or needle == chain:
            return why
    return ""


def _reject_type(rule: str) -> str:
    toks = rule.split()
    return toks[toks.index("--reject-with") + 1] if "--reject-with" in toks[:-1] else REJECT_DEFAULT


def _rule_verdict(cl: ConnLedger, packets: Sequence[TracedPacket], netns: Mapping[str, str]) -> Verdict | None:
    replies = {h.pkt.ip_id for h in cl.reply}
    for p in packets:
        for v in p.visits:
            for e in v.events:
                reject = e.target == "REJECT"
                if not (reject or e.verdict == "DROP" or e.target == "DROP"):
                    continue
                what = e.rule or f"{e.chain} policy DROP"
                direction = "reply" if p.ip_id in replies else "request"
                v_ = Verdict(p.node, netns.get(p.node), "REJECT" if reject else "DROP", "netfilter trace",
                             direction, hook=v.hook, table=e.table, chain=e.chain, rule=e.rule or None,
                             icmp=_reject_type(e.rule) if reject else None, why=_why_rule(e.rule, e.chain))
                c = comment_of(e.rule) if e.rule else None
                v_.text = (f"{v_.action}{' with ' + v_.icmp if v_.icmp else ''} on {p.node} in {v.hook or '?'}: "
                           f"{e.table} {what}" + (f" ({c})" if c and c not in what else ""))
                return v_
    return None


def _dnat_entry(cl: ConnLedger, packets: Sequence[TracedPacket], ipvs: bool) -> tuple[str, str] | None:
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
        traced = [p for p in packets if p.node == node]
        if ipvs:
            how = f"DNATed to {last.dst} by IPVS; conntrack entry on {node}"
        elif traced and not any(kernel_dnat(p) for p in traced):
            how = f"DNATed to {last.dst} by an existing conntrack entry on {node} (no nat rule was consulted)"
        else:
            how = f"DNATed to {last.dst}; conntrack entry on {node}"
        return f"{node}: {e.get('line')}", f"{how}: {e.get('line')}"
    return None


def _icmp_reply(cl: ConnLedger) -> Hop | None:
    return next((h for h in cl.reply if h.pkt.proto == "icmp"), None)


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


def ipvs_empty_services(save_n: str) -> set[str]:
    """Virtual services ("TCP vip:port") of an `ipvsadm -Sn` text that have no real server."""
    proto = {"-t": "TCP", "-u": "UDP", "--sctp-service": "SCTP"}
    virtual, real = set(), set()
    for line in save_n.splitlines():
        toks = line.split()
        if len(toks) >= 3 and toks[1] in proto:
            (virtual if toks[0] == "-A" else real if toks[0] == "-a" else set()).add(f"{proto[toks[1]]} {toks[2]}")
    return virtual - real


def connection_verdict(cl: ConnLedger, packets: Sequence[TracedPacket], drops: Sequence[DropEvent],
                       drop_members: Mapping[int, str], netns: Mapping[str, str], ipvs: bool = False,
                       ipvs_services: Mapping[str, str] | None = None,
                       unavailable: Sequence[str] = (), time_note: str | None = None) -> Verdict | None:
    """The verdict for a connection that got no answer (None when it was answered).

    `packets`: the connection's traced packets (attribution), in hop order; `drops`: the flow's
    kernel drop events; `drop_members`: netns inode -> member; `netns`: member -> namespace name;
    `ipvs`: kube-proxy balances with IPVS (an empty virtual service explains a silent drop);
    `unavailable`: why some evidence could not be collected, said when nothing was found; `time_note`: why
    the drops were read without their packets (they are joined by the connection's time window).
    """
    if cl.outcome == "reply":
        return None
    last = cl.request[-1] if cl.request else None
    point = last.point if last else None
    v = _rule_verdict(cl, packets, netns)
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
        return _with_entry(_no_rule(_time_verdict(cl, timed, netns, icmp, time_note), packets, ipvs), cl,
                           packets, ipvs)
    if kernel:
        ev, member = next(((e, m) for e, m in kernel if e.reason != "NOT_SPECIFIED"), kernel[0])
        direction = "reply" if any((ev.proto, ev.src, ev.sport, ev.dst, ev.dport) == (h.pkt.proto, h.pkt.src,
                                   h.pkt.sport, h.pkt.dst, h.pkt.dport) for h in cl.reply) else "request"
        v = Verdict(member, netns.get(member), "KERNEL-DROP", "kfree_skb by tuple", direction, point,
                    reason=ev.reason, joined="tuple", function=ev.function, why=meaning(ev.reason, ev.function))
        v.text = f"dropped by the kernel on {member} ({v.direction}): {describe(ev.reason, ev.function)}; " \
                 f"packet {packet_text(ev)}"
        _no_rule(v, packets, ipvs)
        if icmp is not None:
            v.icmp = _icmp_name(icmp)
            v.text += f"; {icmp.pkt.src} sent ICMP {v.icmp}"
        return _with_entry(v, cl, packets, ipvs)
    if icmp is not None:
        name = _icmp_name(icmp)
        sender = icmp.info.member
        v = Verdict(sender, netns.get(sender), "ICMP", "icmp reply", "request", point, icmp=name,
                    why=f"{icmp.pkt.src} answered with ICMP {name} instead of the service")
        v.text = f"refused on {sender}: ICMP {name} from {icmp.pkt.src}"
        return _with_entry(v, cl, packets, ipvs)
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


def _no_rule(v: Verdict, packets: Sequence[TracedPacket], ipvs: bool) -> Verdict:
    """A NETFILTER_DROP on a node whose rule trace has the packet and no DROP (else _rule_verdict would have
    named the rule): conntrack dropped it. Not with IPVS, which drops in the hook itself (no real server)."""
    if v.reason == "NETFILTER_DROP" and not ipvs and any(p.node == v.at for p in packets):
        v.why = NO_RULE_DROPPED
        v.text += f"; {NO_RULE_DROPPED}"
    return v


def _with_entry(v: Verdict, cl: ConnLedger, packets: Sequence[TracedPacket], ipvs: bool) -> Verdict:
    """Name the conntrack entry that sent the packet where it died, when one did."""
    got = _dnat_entry(cl, packets, ipvs)
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
