"""Rule attribution for `xtables-monitor --trace` (pure): which rule or IPVS decision changed the packet at each hop.

Inputs are texts the kernel printed: `xtables-monitor --trace` per node (kernel/trace.py),
`iptables-save -c` before/after (kernel/snapshot.py), `ipvsadm -Ln --stats` / `-Sn`, and the
conntrack / IPVS connection entries the ledger already attached. Trace events are grouped per
packet (every traced packet starts in the raw table, where the TRACE rule is), joined with the
ledger's hops by IP ID and tuple (NAT leaves the IP ID alone), and turned into short phrases on
the hop's `changed_by[].by`, e.g. "DNAT by KUBE-SEP-43IWXJI557JKCKCF (default/nginx:)".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise

from kpemu.analyse.attribution.phrases import conntrack_phrase, outer_phrase
from kpemu.analyse.ledger import ConnLedger, FlowLedger, Hop
from kpemu.proxy.rules import split_line

_VERDICTS = {"0xffffffff": "CONTINUE", "0xfffffffe": "BREAK", "0xfffffffd": "JUMP", "0xfffffffc": "GOTO",
             "0xfffffffb": "RETURN"}
_TCP_FLAGS = ("SYN", "ACK", "FIN", "RST", "PSH", "URG")
_HOOKS = ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING")
_TRACE = re.compile(r"^\s*TRACE:\s+\d+\s+([0-9a-f]+)\s+(\S+)\s*(.*)$")
_PACKET = re.compile(r"^\s*PACKET:\s+\d+\s+([0-9a-f]+)\s+(.*)$")


@dataclass(frozen=True)
class Event:
    """One trace event: a rule that matched (or a base chain's policy) in table/chain."""

    table: str
    chain: str
    kind: str  # rule | policy
    verdict: str  # JUMP | GOTO | ACCEPT | DROP | CONTINUE | RETURN | ...
    target: str | None  # jump target chain, or the rule's -j target
    rule: str  # "-A CHAIN ..." (empty for a policy)

    def describe(self) -> str:
        return f"{self.table} {self.rule}" if self.rule else f"{self.table} {self.chain} policy {self.verdict}"


@dataclass
class Visit:
    """The packet at one base chain of one table-set: header as the hook saw it, then events."""

    trace_id: str
    header: dict
    events: list[Event] = field(default_factory=list)

    @property
    def hook(self) -> str | None:
        return next((e.chain for e in self.events if e.chain in _HOOKS), None)

    @property
    def tables(self) -> list[str]:
        out: list[str] = []
        for e in self.events:
            if e.chain in _HOOKS and e.table not in out:
                out.append(e.table)
        return out

    @property
    def tuple4(self) -> tuple:
        h = self.header
        return (h.get("src"), h.get("sport"), h.get("dst"), h.get("dport"))


@dataclass
class TracedPacket:
    """One packet's whole walk through one node's netfilter, in order."""

    node: str
    trace_id: str
    visits: list[Visit] = field(default_factory=list)

    @property
    def ip_id(self) -> int | None:
        return self.visits[0].header.get("id") if self.visits else None

    @property
    def proto(self) -> str:
        return self.visits[0].header.get("proto", "ip") if self.visits else "ip"

    @property
    def events(self) -> list[Event]:
        return [e for v in self.visits for e in v.events]

    @property
    def tuples(self) -> set[tuple]:
        return {v.tuple4 for v in self.visits}

    @property
    def first(self) -> dict:
        return self.visits[0].header if self.visits else {}


def _header(text: str) -> dict:
    h: dict = {"flags": []}
    for w in text.split():
        if "=" in w:
            k, _, v = w.partition("=")
            key = k.lower()
            if key in ("sport", "dport", "id", "len", "ttl"):
                h[key] = int(v) if v.isdigit() else v
            elif key == "mark":
                h["mark"] = int(v, 16) if v.startswith("0x") else int(v)
            elif key in ("in", "out", "src", "dst"):
                h[{"in": "iif", "out": "oif"}.get(key, key)] = v
        elif w in _TCP_FLAGS:
            h["flags"].append(w)
    h["proto"] = "tcp" if h["flags"] else ("udp" if "sport" in h else "ip")
    return h


def _event(spec: str, rest: str) -> Event:
    parts = spec.split(":")
    table, chain, kind = parts[0], parts[1], parts[2]
    if kind == "policy":
        return Event(table, chain, "policy", parts[3] if len(parts) > 3 else "", None, "")
    raw = parts[4] if len(parts) > 4 else ""
    verdict = _VERDICTS.get(raw, raw)
    target = parts[5] if len(parts) > 5 else None
    rule = rest.strip()
    m = re.match(r"^-4\s+-t\s+\S+\s+", rule)
    if m:
        rule = rule[m.end():]
    if target is None and " -j " in f" {rule} ":
        toks = rule.split()
        target = toks[toks.index("-j") + 1] if "-j" in toks and toks.index("-j") + 1 < len(toks) else None
    return Event(table, chain, "rule", verdict, target, rule)


def parse_trace(text: str, node: str) -> list[TracedPacket]:
    """`xtables-monitor --trace` output of one node -> packets with their ordered visits."""
    packets: list[TracedPacket] = []
    current: dict[tuple, TracedPacket] = {}
    open_visit: dict[str, Visit] = {}
    for line in text.splitlines():
        m = _PACKET.match(line)
        if m:
            tid = m.group(1)
            open_visit[tid] = Visit(tid, _header(m.group(2)))
            continue
        m = _TRACE.match(line)
        if not m:
            continue
        tid, spec, rest = m.groups()
        visit = open_visit.get(tid)
        if visit is None:
            continue
        ev = _event(spec, rest)
        if not visit.events:
            # Every traced packet starts in raw (where the TRACE rule is); later visits belong to
            # the latest packet with the same IP ID and protocol. The trace id is not enough:
            # the kernel may give the same packet a new one after NAT, and reuses ids.
            key = (visit.header.get("id"), visit.header.get("proto"))
            pkt = current.get(key)
            if pkt is None or ev.table == "raw":
                pkt = TracedPacket(node, tid)
                packets.append(pkt)
                current[key] = pkt
            pkt.visits.append(visit)
        visit.events.append(ev)
    return packets


# -- joining with the ledger -----------------------------------------------------------------------
def packets_for(hops: Iterable[Hop], packets: Iterable[TracedPacket]) -> list[TracedPacket]:
    """Traced packets that are one of `hops`' packets: same IP ID and protocol, a tuple in common."""
    keys = {(h.pkt.ip_id, h.pkt.proto) for h in hops}
    tuples = {h.pkt.tuple4 for h in hops}
    return [p for p in packets if (p.ip_id, p.proto) in keys and p.tuples & tuples]


def comment_of(rule: str) -> str | None:
    """The `--comment` of a rule text."""
    try:
        toks = split_line(rule)
    except ValueError:
        return None
    return toks[toks.index("--comment") + 1] if "--comment" in toks[:-1] else None


def _mark_of(pkt: TracedPacket) -> int | None:
    marks = [v.header.get("mark") for v in pkt.visits if v.header.get("mark")]
    if marks:
        return marks[-1]
    for e in pkt.events:
        if e.chain == "KUBE-MARK-MASQ" and "--set-xmark" in e.rule:
            return int(e.rule.split("--set-xmark")[1].split()[0].split("/")[0], 16)
    return None


def kube_chain_path(pkt: TracedPacket, table: str = "nat") -> list[str]:
    """Chains entered in `table` by jumps up to the DNAT, e.g. [KUBE-SERVICES, KUBE-NODEPORTS, ...]."""
    out: list[str] = []
    for e in pkt.events:
        if e.table == table and e.verdict in ("JUMP", "GOTO") and e.target:
            out.append(e.target)
        if e.target == "DNAT":
            break
    return out


def phrases(pkt: TracedPacket) -> dict[str, list[str]]:
    """What the packet's rules did, by kind: DNAT, SNAT (MASQUERADE), MARK, FILTER (drop/reject)."""
    out: dict[str, list[str]] = {"DNAT": [], "SNAT": [], "MARK": [], "FILTER": []}
    path = kube_chain_path(pkt)
    for e in pkt.events:
        if e.kind != "rule":
            continue
        tgt = e.target or ""
        if tgt == "DNAT":
            c = comment_of(e.rule)
            out["DNAT"].append(f"DNAT by {e.chain}" + (f" ({c})" if c else ""))
        elif tgt in ("MASQUERADE", "SNAT"):
            mark = _mark_of(pkt)
            out["SNAT"].append(f"{tgt} in {e.chain}" + (f" (mark {mark:#x})" if mark and e.chain.startswith("KUBE")
                                                         else ""))
        elif tgt == "KUBE-MARK-MASQ":
            c = comment_of(e.rule)
            out["MARK"].append(f"KUBE-MARK-MASQ from {e.chain}" + (f" ({c})" if c else ""))
        elif tgt in ("DROP", "REJECT") or e.verdict == "DROP":
            out["FILTER"].append(f"{tgt or e.verdict} in {e.table} {e.chain}" +
                                 (f" ({comment_of(e.rule)})" if comment_of(e.rule) else ""))
    if out["DNAT"] and path:
        out["DNAT"].append(" -> ".join(path))
    return out


def _ipvs_phrase(entries: list[dict], node: str | None, schedulers: Mapping[str, str]) -> str | None:
    for e in entries:
        if node and e.get("node") != node:
            continue
        sched = schedulers.get(f"{str(e.get('proto', '')).upper()} {e.get('virtual')}", "")
        return f"IPVS {sched + ' ' if sched else ''}-> {e.get('destination')}"
    return None


@dataclass
class ConnAttribution:
    """Everything attribution learnt about one connection."""

    packets: list[TracedPacket] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def attribute_connection(cl: ConnLedger, traces: Mapping[str, list[TracedPacket]],
                         schedulers: Mapping[str, str] | None = None) -> ConnAttribution:
    """Fill `changed_by[].by` of the connection's hops from trace, conntrack and IPVS entries."""
    schedulers = schedulers or {}
    att = ConnAttribution()
    for pkts in traces.values():
        att.packets += packets_for(cl.hops, pkts)
    for hops in (cl.request, cl.reply):
        for prev, hop in pairwise(hops):
            for ch in hop.changed_by:
                node = ch.node
                mine = [p for p in att.packets if p.node == node and p.ip_id == hop.pkt.ip_id]
                said = {k: [] for k in ("DNAT", "SNAT", "MARK", "FILTER")}
                for p in mine:
                    for k, v in phrases(p).items():
                        said[k] += [x for x in v if x not in said[k]]
                if ch.kind == "DNAT":
                    ch.by += said["DNAT"] + said["MARK"]
                    if not said["DNAT"]:
                        ip = _ipvs_phrase(cl.ipvs, node, schedulers)
                        ct = conntrack_phrase(cl.conntrack, node) if mine and not ip and not schedulers else None
                        if ip or ct:  # traced there without a DNAT rule: the packet matched an older entry
                            ch.by.append(ip or f"an existing entry, no nat rule consulted: {ct}")
                elif ch.kind == "SNAT":
                    ch.by += said["SNAT"]
                elif ch.kind in ("encap", "decap"):
                    ph = outer_phrase(ch.kind, hop, prev)
                    if ph:
                        ch.by.append(ph)
                elif ch.kind in ("un-DNAT", "un-SNAT"):
                    ct = conntrack_phrase(cl.conntrack, node)
                    if ct:
                        ch.by.append(f"reverse NAT by {ct}")
    return att


def attribute_flow(fl: FlowLedger, trace_texts: Mapping[str, str],
                   schedulers: Mapping[str, str] | None = None) -> dict[int, ConnAttribution]:
    """Parse each node's trace once and attribute every connection of the flow."""
    traces = {node: parse_trace(text, node) for node, text in trace_texts.items()}
    return {cl.index: attribute_connection(cl, traces, schedulers) for cl in fl.connections}


# -- counters --------------------------------------------------------------------------------------
_COUNTED = re.compile(r"^\[(\d+):(\d+)\]\s+(-A\s+.*)$")


def parse_counters(save_c: str) -> dict[tuple[str, str, int], int]:
    """`iptables-save -c` -> {(table, rule line, occurrence): packets}."""
    out: dict[tuple[str, str, int], int] = {}
    seen: dict[tuple[str, str], int] = {}
    table = ""
    for line in save_c.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
            continue
        m = _COUNTED.match(line.strip())
        if not m:
            continue
        rule = m.group(3).rstrip()
        n = seen.get((table, rule), 0)
        seen[(table, rule)] = n + 1
        out[(table, rule, n)] = int(m.group(1))
    return out


def counter_deltas(before: str, after: str) -> list[tuple[str, str, int]]:
    """Rules whose packet counter grew between two snapshots: [(table, rule line, packets)]."""
    b, a = parse_counters(before), parse_counters(after)
    return [(t, rule, n - b.get((t, rule, i), 0)) for (t, rule, i), n in a.items() if n > b.get((t, rule, i), 0)]


_IPVS_SVC = re.compile(r"^(TCP|UDP|SCTP)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)")
_IPVS_RS = re.compile(r"^\s+->\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)")


def parse_ipvs_stats(text: str) -> dict[tuple[str, str | None], int]:
    """`ipvsadm -Ln --stats` -> {(\"TCP vip:port\", real or None): connections}."""
    out: dict[tuple[str, str | None], int] = {}
    svc = None
    for line in text.splitlines():
        m = _IPVS_SVC.match(line)
        if m:
            svc = f"{m.group(1)} {m.group(2)}"
            out[(svc, None)] = int(m.group(3))
            continue
        m = _IPVS_RS.match(line)
        if m and svc and m.group(1) != "RemoteAddress:Port":
            out[(svc, m.group(1))] = int(m.group(2))
    return out


def ipvs_schedulers(save_n: str) -> dict[str, str]:
    """`ipvsadm -Sn` -> {\"TCP vip:port\": scheduler}."""
    out = {}
    proto = {"-t": "TCP", "-u": "UDP", "--sctp-service": "SCTP"}
    for line in save_n.splitlines():
        toks = line.split()
        if len(toks) >= 3 and toks[0] == "-A" and toks[1] in proto:
            sched = toks[toks.index("-s") + 1] if "-s" in toks else "wlc"
            out[f"{proto[toks[1]]} {toks[2]}"] = sched
    return out


def ipvs_decisions(before: str, after: str, services: str) -> list[dict]:
    """Virtual server, scheduler and real server whose connection counters grew."""
    b, a = parse_ipvs_stats(before), parse_ipvs_stats(after)
    sched = ipvs_schedulers(services)
    out = []
    for (svc, real), n in a.items():
        grew = n - b.get((svc, real), 0)
        if real and grew > 0:
            out.append({"virtual": svc, "scheduler": sched.get(svc), "real": real, "connections": grew,
                        "text": f"IPVS {sched.get(svc, '?')} {svc} -> {real}"})
    return out


def kernel_kube_path(pkt: TracedPacket) -> list[tuple[str, str, str | None]]:
    """(table, chain, target) of the matched kube-proxy rules, as oracle.Outcome.kube_path()."""
    out = []
    for e in pkt.events:
        if e.kind != "rule" or e.table == "raw" or not e.rule:  # no rule text: a chain's implicit return
            continue
        if e.chain.startswith("KUBE-") or (e.target or "").startswith("KUBE-"):
            out.append((e.table, e.chain, e.target))
    return out


def kernel_dnat(pkt: TracedPacket) -> str | None:
    """The DNAT destination a traced packet got (from its DNAT rule)."""
    for e in pkt.events:
        if e.target == "DNAT" and "--to-destination" in e.rule:
            return e.rule.split("--to-destination")[1].split()[0]
    return None
