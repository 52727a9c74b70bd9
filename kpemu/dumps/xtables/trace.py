"""`kpemu trace` for a node of iptables or IPVS mode: one packet walked offline through its rules (a
real dump or kpemu's own), by the oracle that checks live packets (kpemu.analyse.oracle.iptables),
printed per table and hook."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kpemu.analyse.oracle import node_local_addresses
from kpemu.analyse.oracle.iptables import predict
from kpemu.analyse.oracle.routes import flannel_routes
from kpemu.analyse.oracle.types import Assumption, Outcome, Packet, Prediction, Step, WalkLimit
from kpemu.dumps.files import DumpFiles, read_text
from kpemu.dumps.trace import assumption_lines, result_line, trace_document, trace_header
from kpemu.dumps.xtables.forms import read_iptables
from kpemu.dumps.xtables.listed import is_ipset_listing
from kpemu.dumps.xtables.read import parse_ipset_save, read_ipvs
from kpemu.errors import InputError
from kpemu.proxy.modes import node_state
from kpemu.proxy.rules import BUILTIN_CHAINS, RuleSet
from kpemu.proxy.save import canonical_line
from kpemu.proxy.state import IpvsModel


@dataclass(frozen=True)
class NodeRules:
    """What the packet is walked through: the rules, the node's own addresses, IPVS state, and
    a line saying where they came from."""

    node: str
    rules: RuleSet
    local: frozenset[str]
    ipvs: IpvsModel | None
    source: str
    missing: dict[tuple[str, str], int] = field(default_factory=dict)  # a fragment's absent chains -> line


def run_trace(nr: NodeRules, pkt: Packet) -> Prediction:
    """Every outcome of `pkt` on the node (the oracle's walk); a walk past the oracle's stated limits
    is an InputError naming the rules."""
    try:
        pred = predict(nr.rules, pkt, nr.local, nr.node, nr.ipvs, flannel_routes(nr.rules))
    except WalkLimit as e:
        raise InputError(f"kpemu trace: {nr.source}: {e}") from None
    pred.outcomes = [_stopped(nr, o) for o in pred.outcomes]
    return pred


def _stopped(nr: NodeRules, o: Outcome) -> Outcome:
    """An outcome whose walk jumped into a chain the dump lacks: undecided, the missing chain one of the
    facts it was not given (the walk stopped there)."""
    for s in o.steps:
        if s.verdict.startswith("JUMP:") and (s.table, s.verdict[5:]) in nr.missing:
            chain = s.verdict[5:]
            fact = Assumption(f"what chain {s.table}/{chain} does (not in the dump; the walk stops at its jump)", True,
                              f"-j {chain}", f"line {nr.missing[(s.table, chain)]}",
                              "the dump is a fragment: paste the whole iptables-save (or iptables -S) output")
            return replace(o, verdict=UNDECIDED, assumed=(*o.assumed, fact))
    return o


UNDECIDED = "UNDECIDED"


def undecided_at(nr: NodeRules, o: Outcome) -> str | None:
    """Where an outcome's walk jumped into a chain the dump does not hold (a fragment), or None."""
    for s in o.steps:
        if s.verdict.startswith("JUMP:") and (s.table, s.verdict[5:]) in nr.missing:
            chain = s.verdict[5:]
            return (f"undecided at line {nr.missing[(s.table, chain)]}: -j {chain}, and chain {s.table}/{chain} is not "
                    "in the dump (a fragment); the walk stops there")
    return None


def _hook_groups(steps: tuple[Step, ...]) -> list[tuple[str, str, list[Step]]]:
    """Steps grouped under the built-in chain (hook) they were reached from, in order."""
    groups: list[tuple[str, str, list[Step]]] = []
    for s in steps:
        if s.chain in BUILTIN_CHAINS.get(s.table, ()) and (not groups or groups[-1][:2] != (s.table, s.chain)):
            groups.append((s.table, s.chain, []))
        elif not groups:
            groups.append((s.table, "?", []))
        groups[-1][2].append(s)
    return groups


def _line(s: Step) -> str:
    return canonical_line(s.rule) if s.rule is not None else s.text()


def _set_key(set_type: str, flags: str, pkt: Packet) -> str:
    """The key an ipset match looks up for the packet, as `ipset save` prints members."""
    if set_type.startswith("bitmap:port"):
        return str(pkt.dport)
    parts = []
    for i, f in enumerate(flags.split(",")):
        ip = pkt.src if f == "src" else pkt.dst
        parts.append(f"{pkt.proto}:{pkt.dport if f == 'dst' else pkt.sport}" if i == 1 else ip)
    return ",".join(parts)


def _note(s: Step, pkt: Packet, ipvs: IpvsModel | None) -> str:
    if s.rule is None:
        return ""
    p = s.rule.parsed
    notes = []
    if p.probability is not None:
        notes.append(f"statistic: taken with probability {p.probability:g}")
    st = p.match("set")
    for o in st.options if st else ():
        if o.name == "--match-set":
            name, flags = o.values[0], o.values[1] if len(o.values) > 1 else "dst"
            set_type = ipvs.sets[name][0] if ipvs and name in ipvs.sets else ""
            notes.append(f"ipset {name} {'lacks' if o.negated else 'has'} {_set_key(set_type, flags, pkt)}")
    return f"   [{'; '.join(notes)}]" if notes else ""


_IPVS_SENDS = ("OUTPUT", "POSTROUTING")  # the hooks IPVS sends the real-server packet through


def _seen(pkt: Packet, o: Outcome, table: str, hook: str, dnat_done: bool) -> Packet:
    """The packet as a hook sees it: after kube-proxy's DNAT (nat PREROUTING/OUTPUT), or after IPVS
    (LOCAL_IN) for the OUTPUT and POSTROUTING hooks it sends the packet through."""
    if o.dnat and (dnat_done or (o.ipvs and hook in _IPVS_SENDS)):
        ips, _, ports = o.dnat.partition(":")  # a range: its first address and port, as the walk assumed
        ip, port = ips.split("-")[0], ports.split("-")[0]
        return replace(pkt, dst=ip, dport=int(port) if port.isdigit() else pkt.dport)
    return pkt


def render_trace(nr: NodeRules, pred: Prediction, origin: str) -> str:
    """The trace as text: summary of DNAT choices, then each outcome's rule path per table/hook."""
    pkt = pred.packet
    out = trace_header(nr.node, nr.source, nr.local, pred, origin)
    for i, o in enumerate(pred.outcomes, 1):
        out.append("")
        out.append(f"outcome {i}: probability {o.probability:g}")
        out.extend(assumption_lines(o))
        dnat_done = sent = False
        for table, hook, steps in _hook_groups(o.steps):
            if o.ipvs and hook in _IPVS_SENDS and not sent:  # IPVS chose the real server in LOCAL_IN, before
                out.append(f"  {o.ipvs}")
                sent = True
            out.append(f"  {table} {hook}")
            seen = _seen(pkt, o, table, hook, dnat_done)
            out.extend(f"    {_line(s)}{_note(s, seen, nr.ipvs)}" for s in steps)
            dnat_done = dnat_done or bool(o.endpoint_chain and table == "nat" and hook in ("PREROUTING", "OUTPUT"))
        out.append(f"  hooks {' -> '.join(o.hooks)}")
        if (why := undecided_at(nr, o)) is not None:
            out.append(f"  {why}")
        out.append(f"  {result_line(o, 'KUBE-MARK-MASQ ran')}")
    return "\n".join(out) + "\n"


def trace_json(nr: NodeRules, pred: Prediction, origin: str) -> dict[str, Any]:
    """The trace of iptables rules (and IPVS) for scripts (`-o json`)."""
    doc = trace_document(nr.node, nr.source, nr.local, pred, origin, lambda o: [
        {"table": t, "hook": h, "chain": s.chain, "rule": _line(s), "verdict": s.verdict}
        for t, h, steps in _hook_groups(o.steps) for s in steps])
    for o, out in zip(pred.outcomes, doc["outcomes"], strict=True):
        if (why := undecided_at(nr, o)) is not None:
            out["undecided"] = why
    return doc


def generated_rules(topo: Any, node: str) -> NodeRules:
    """The rules kpemu generates for `node` of a topology (iptables or IPVS mode)."""
    kp = topo.kubeProxy
    walk = node_state(topo, node).walk
    if walk.rules is None:
        raise InputError(f"kpemu trace walks iptables rules (iptables and IPVS mode); kube-proxy {kp.mode} mode "
                         "programs none: trace its nft table instead (--nft FILE, or no dump for kpemu's)")
    local = node_local_addresses(topo, node) | walk.local
    source = f"generated by kpemu for kube-proxy {kp.version} {kp.mode} mode"
    return NodeRules(node, walk.rules, frozenset(local), walk.ipvs, source)


def dumped_rules(node: str, local: set[str], iptables_save: str | None, ipvs: str | None,
                 ipset: str | None, fallback: NodeRules | None = None, table: str | None = None) -> NodeRules:
    """The rules of a node's real dumps (files; `-` is standard input). Without an iptables-save
    dump, the iptables rules of `fallback` (kpemu's generated ones) go with the IPVS dumps."""
    missing: dict[tuple[str, str], int] = {}
    if iptables_save:
        dump = read_iptables(read_text(iptables_save), iptables_save, table)
        rs, sources, missing = dump.rules, [dump.describe(iptables_save)], dump.missing
    elif fallback is not None:
        rs, sources = fallback.rules, [f"iptables rules {fallback.source}"]
    else:
        rs, sources = RuleSet(), ["no iptables rules"]
    model = None
    if ipvs or ipset:
        if not (ipvs and ipset):
            raise InputError("an IPVS dump needs both --ipvs FILE (ipvsadm -Sn or -Ln) and --ipset FILE (ipset save "
                             "or list)")
        listing = read_ipvs(read_text(ipvs), ipvs)
        vss = listing.servers
        text = read_text(ipset)
        sets = parse_ipset_save(text, ipset)
        model = IpvsModel(sets.sets, tuple(vss))
        local = local | {v.address for v in vss}  # kube-proxy binds every virtual address to kube-ipvs0
        odds = "" if listing.form in ("ipvsadm -Sn", "ipvsadm -Ln") else \
            "; it lists no scheduler and no weight: the odds below share each service's real servers equally"
        set_form = "ipset list" if is_ipset_listing(text) else "ipset save"
        sources += [f"{ipvs} ({listing.form}{odds})", f"{ipset} ({set_form})"]
    return NodeRules(node, rs, frozenset(local | {"127.0.0.1"}), model, ", ".join(sources), missing)


def node_rules(topo: Any, node: str, node_ips: list[str], files: DumpFiles) -> NodeRules:
    """What to walk: the dumps given (their iptables rules, else the topology's generated ones, go
    with IPVS dumps), else the topology's generated rules; the node's addresses from the topology
    and `node_ips`."""
    iptables_save, ipvs, ipset = files.iptables_save, files.ipvs, files.ipset
    generated = generated_rules(topo, node) if topo is not None else None
    if not (iptables_save or ipvs or ipset):
        if generated is None:
            raise InputError("kpemu trace: give a TOPOLOGY (kpemu's generated rules) or a dump (--iptables-save "
                             "FILE, or --ipvs FILE --ipset FILE)")
        return replace(generated, local=generated.local | set(node_ips))
    if generated is None and not node_ips:
        raise InputError("kpemu trace: a dump without a topology needs the node's addresses: --node-ip IP "
                         "(e.g. its InternalIP)")
    local = set(generated.local) if generated else set()
    return dumped_rules(node, local | set(node_ips), iptables_save, ipvs, ipset, generated, files.table)
