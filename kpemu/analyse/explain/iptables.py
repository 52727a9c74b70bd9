"""Explain a flow traced by xtables-monitor (pure): rule attribution, hook walk and its claim, verdicts,
model vs kernel, for the modes whose rules are iptables rules (with IPVS balancing, or without).

Joins the building blocks for one flow of a run (what the kernel traced for it was chosen by
kpemu.plan.tracing.flow_match): `explain_iptables_flow` takes the ledger, the trace text of every
node and the counter snapshots taken around the flow, fills the ledger's `changed_by[].by`
(kpemu.analyse.attribution.xtables), walks the netfilter hooks of the first packet on each node
(kpemu.analyse.hooks), checks the common hook claim on the node where the Service is entered, and
checks every connection's first packet against the model oracle (kpemu.analyse.oracle). The result
is plain data for hops.json and the reports.
"""

from __future__ import annotations

from collections.abc import Mapping

from kpemu.analyse.attribution.xtables import (
    ConnAttribution,
    TracedPacket,
    attribute_flow,
    counter_deltas,
    ipvs_decisions,
    ipvs_schedulers,
    kernel_dnat,
    kernel_kube_path,
    kube_chain_path,
)
from kpemu.analyse.explain.types import FlowExplanation
from kpemu.analyse.explain.verdicts import balances_with_ipvs, cut_short_on, flow_verdicts
from kpemu.analyse.explain.xtables_trace import xtables_conn_trace
from kpemu.analyse.hooks import CLAIMS, check_hook_claim, hook_walk, hooks_only, walk_text
from kpemu.analyse.ledger import ConnLedger, FlowLedger
from kpemu.analyse.oracle import predict_for_topology
from kpemu.analyse.oracle.compare import compare_paths
from kpemu.analyse.oracle.types import Packet, Prediction
from kpemu.analyse.verdict import ConnTrace
from kpemu.model.scenario import ResolvedFlow
from kpemu.model.topology import Topology
from kpemu.plan.tracing import LOST_EVENTS, TraceData, load_balancer_of
from kpemu.proxy.state import ProxyState

MAX_COUNTER_RULES = 40


def access_kind(topo: Topology, flow: ResolvedFlow) -> str | None:
    """How a flow enters its Service: ClusterIP, NodePort, LoadBalancer (None: no Service)."""
    t = flow.flow.to
    if t.service is not None:
        return {"clusterIP": "ClusterIP", "nodePort": "NodePort", "loadBalancer": "LoadBalancer"}.get(
            t.via or "clusterIP")
    if t.node is not None and t.nodePort is not None:
        return "NodePort"
    if t.address is not None and load_balancer_of(topo, flow) is not None:
        return "LoadBalancer"
    return None


def _request_packets(cl: ConnLedger, att: ConnAttribution, ipvs: bool = False) -> list[TracedPacket]:
    """The connection's first packet (SYN / first datagram) as traced on each node, in hop order
    (with IPVS, its send through OUTPUT joined to it: `_with_ipvs_sends`)."""
    if not cl.request:
        return []
    first = cl.request[0].pkt
    mine = [p for p in att.packets if p.ip_id == first.ip_id and p.proto == first.proto]
    if first.proto == "tcp":
        mine = [p for p in mine if p.first.get("flags") == ["SYN"]]
    if ipvs:
        mine = _with_ipvs_sends(mine)
    order = list(dict.fromkeys(h.info.node for h in cl.request if h.info.node))
    mine.sort(key=lambda p: order.index(p.node) if p.node in order else len(order))
    return mine


def _with_ipvs_sends(packets: list[TracedPacket]) -> list[TracedPacket]:
    """Each packet IPVS took in INPUT joined with its send to the real server.

    IPVS transmits the real-server packet through the OUTPUT hook, where the raw OUTPUT trace rule
    (destination a backend) traces it again: `parse_trace` starts a new packet at that raw visit.
    That packet is not generated on the node; it is the same packet (same IP ID, client source and
    port) on the rest of its walk, so it is appended to the packet that ended in INPUT.
    """
    out: list[TracedPacket] = []
    for p in packets:
        prev = next((q for q in reversed(out) if q.node == p.node), None)
        if (prev is not None and hooks_only(prev)[-1:] == ["INPUT"] and hooks_only(p)[:1] == ["OUTPUT"]
                and (p.first.get("src"), p.first.get("sport")) == (prev.first.get("src"), prev.first.get("sport"))):
            out[out.index(prev)] = TracedPacket(prev.node, prev.trace_id, prev.visits + p.visits)
        else:
            out.append(p)
    return out


def routed_pass(p: TracedPacket) -> tuple[TracedPacket, list]:
    """The packet's routed pass through the node (up to its POSTROUTING) and any visits after it.

    On a flannel node (bridge-nf-call-iptables=1) a packet routed back out of cni0 towards a pod
    on the same bridge crosses filter FORWARD once more through br_netfilter; the model oracle
    walks the routed pass only, so the bridged visits are split off and reported separately.
    """
    end = None
    for i, v in enumerate(p.visits):
        if v.hook == "POSTROUTING":
            end = i
        elif end is not None:
            break
    if end is None or end == len(p.visits) - 1:
        return p, []
    return TracedPacket(p.node, p.trace_id, p.visits[:end + 1]), p.visits[end + 1:]


def _packet_for_model(p: TracedPacket) -> Packet | None:
    h = p.first
    if not isinstance(h.get("dport"), int) or not h.get("src") or not h.get("dst"):
        return None
    origin = "local" if p.visits and p.visits[0].hook == "OUTPUT" else "remote"
    sport = h.get("sport") if isinstance(h.get("sport"), int) else 40000
    iif = h.get("iif") or None if origin == "remote" else None
    oif = next((v.header["oif"] for v in reversed(p.visits) if v.header.get("oif")), None)
    # the lab's real interfaces, as the kernel's trace names them (the route the kernel took after its DNAT)
    return Packet(h["src"], h["dst"], h["dport"], p.proto, sport, origin, iif=iif, oif=oif)


def _until_ipvs_send(pred: Prediction) -> Prediction:
    """The prediction without the steps of IPVS's send (OUTPUT and nat POSTROUTING).

    IPVS (at LOCAL_IN) transmits the real-server packet itself; when no trace rule matches that
    packet again (or its visits were not joined), a kernel trace of an IPVS packet ends in INPUT and
    POSTROUTING is attributed from the rule counters instead.
    """
    from dataclasses import replace

    out = []
    for o in pred.outcomes:
        cut = next((i for i, st in enumerate(o.steps) if st.chain in ("OUTPUT", "POSTROUTING")), len(o.steps))
        out.append(replace(o, steps=o.steps[:cut]))
    return Prediction(pred.packet, pred.node, out)


def _counter_masquerade(ex: FlowExplanation, fl: FlowLedger) -> None:
    """SNAT changes no trace explained: name the MASQUERADE rule whose counter moved on that node."""
    for cl in fl.connections:
        for h in cl.hops:
            for ch in h.changed_by:
                if ch.kind != "SNAT" or ch.by or not ch.node:
                    continue
                for r in ex.counters.get(ch.node, []):
                    toks = r["rule"].split()
                    if r["table"] == "nat" and "-j MASQUERADE" in r["rule"]:
                        mark = " (mark 0x4000)" if "--mark 0x4000/0x4000" in r["rule"] else ""
                        ch.by.append(f"MASQUERADE in {toks[1]}{mark} (rule counter +{r['packets']})")
                        break


def _ipvs_dnat(cl: ConnLedger, node: str) -> str | None:
    return next((str(e["destination"]) for e in cl.ipvs if e.get("node") == node and e.get("destination")), None)


def explain_iptables_flow(topo: Topology, flow: ResolvedFlow, fl: FlowLedger, data: TraceData, proxy: ProxyState,
                          captures: Mapping[str, str], ipvs_services: Mapping[str, str],
                          altered: frozenset[str]) -> FlowExplanation:
    """Attribute, walk hooks, check the hook claim and the oracle for one flow (fills `fl`'s `by` in place).

    `ipvs_services` is each node's `ipvsadm -Sn` text (rules/<node>.ipvs), for schedulers and decisions;
    `altered`: nodes whose kube-proxy rules a fault changed (the model oracle knows only the generated rules);
    `proxy`: the run's generated kube-proxy state (the plan's), which the oracle walks.
    """
    services = ipvs_services
    ex = FlowExplanation(traced=bool(data.texts) and data.unavailable is None, reason=data.unavailable)
    nodes = [n.name for n in topo.nodes]
    sched: dict[str, str] = {}
    if data.before is not None and data.after is not None:
        for n in nodes:
            sched.update(ipvs_schedulers(services.get(n, "")))
            deltas = counter_deltas(data.before.iptables.get(n, ""), data.after.iptables.get(n, ""))
            rows = [{"table": t, "rule": r, "packets": k} for t, r, k in deltas if t != "raw"]
            if rows:
                ex.counters[n] = rows[:MAX_COUNTER_RULES]
            if data.after.ipvs_stats.get(n):
                dec = ipvs_decisions(data.before.ipvs_stats.get(n, ""), data.after.ipvs_stats[n],
                                     services.get(n, ""))
                if dec:
                    ex.ipvs_decisions[n] = dec
    atts = attribute_flow(fl, data.texts if ex.traced else {}, sched)
    ex.lossy = sorted(n for n, t in data.texts.items() if LOST_EVENTS in t) if ex.traced else []
    if not ex.traced and ex.reason is None:
        ex.reason = "tracing was off (--no-trace)"
    _counter_masquerade(ex, fl)
    cache: dict[tuple[str, Packet], Prediction] = {}
    ipvs = balances_with_ipvs(proxy)
    rep = fl.representative
    flow_verdicts(topo, fl, _conn_traces(fl, atts), data, ex, services, ipvs)
    for cl in fl.connections:
        att = atts.get(cl.index) or ConnAttribution()
        firsts = _request_packets(cl, att, ipvs)
        if cl is rep:
            _describe_rep(topo, flow, cl, att, firsts, ex, captures)
        died = ex.verdicts.get(cl.index)
        for whole in firsts:
            if whole.node in ex.lossy:
                ex.oracle_skipped += 1
                continue
            why = (f"a fault changed the rules on {whole.node}" if whole.node in altered else
                   f"connection {cl.index} died on {whole.node} outside netfilter ({died.reason or died.action}), "
                   "where the model's path goes on" if cut_short_on(died, whole.node) else None)
            if why is not None:
                if why not in ex.unchecked:
                    ex.unchecked.append(why)
                continue
            p, _bridged = routed_pass(whole)
            pkt = _packet_for_model(p)
            if pkt is None:
                continue
            key = (p.node, pkt)
            if key not in cache:
                cache[key] = predict_for_topology(topo, p.node, pkt, state=proxy.node(p.node))
            pred = cache[key]
            dnat = kernel_dnat(p) or (_ipvs_dnat(cl, p.node) if ipvs else None)
            if ipvs and "POSTROUTING" not in hooks_only(p):
                pred = _until_ipvs_send(pred)  # IPVS sent the packet on untraced
            for d in compare_paths(pred, kernel_kube_path(p), dnat):
                text = f"connection {cl.index}: {d.describe()}"
                if d.describe() not in {x.split(": ", 1)[1] for x in ex.disagreements}:
                    ex.disagreements.append(text)
            ex.oracle_checked += 1
            if p.node not in ex.oracle_nodes:
                ex.oracle_nodes.append(p.node)
    return ex


def _conn_traces(fl: FlowLedger, atts: Mapping[int, ConnAttribution]) -> dict[int, ConnTrace]:
    """Each connection's traced packets, in hop order, in the verdict's terms."""
    out = {}
    for cl in fl.connections:
        order = list(dict.fromkeys(h.info.node or h.info.member for h in cl.hops))
        pkts = sorted((atts.get(cl.index) or ConnAttribution()).packets,
                      key=lambda p: order.index(p.node) if p.node in order else len(order))
        out[cl.index] = xtables_conn_trace(cl, pkts)
    return out


def _describe_rep(topo: Topology, flow: ResolvedFlow, cl: ConnLedger, att: ConnAttribution,
                  firsts: list[TracedPacket], ex: FlowExplanation, captures: Mapping[str, str]) -> None:
    """Chains, hook walks, the hook claim and per-hop details from the representative connection."""
    routed = []
    for whole in firsts:
        if whole.node in ex.hooks:
            continue
        p, bridged = routed_pass(whole)
        routed.append(p)
        walk = hook_walk(p)
        text = walk_text(walk)
        if bridged:
            text += "; then bridged to the pod through br_netfilter: " + walk_text(
                hook_walk(TracedPacket(p.node, p.trace_id, bridged)))
        ex.hooks[p.node] = {"walk": [[h, t] for h, t in walk], "text": text,
                            "bridged": [[h, t] for h, t in hook_walk(TracedPacket(p.node, p.trace_id, bridged))]}
        ex.chains[p.node] = kube_chain_path(p)
    access = access_kind(topo, flow)
    entry = next((p for p in routed if kube_chain_path(p)), routed[0] if routed else None)
    if access in CLAIMS and entry is not None:
        v = check_hook_claim(access, hooks_only(entry), topo.kubeProxy.mode)
        ex.hook_claim = {"node": entry.node, "access": v.access, "claim": v.claim, "sentence": v.sentence,
                         "observed": v.observed, "right": v.right, "mode": v.mode, "explanation": v.explanation,
                         "text": v.describe()}
    for i, hop in enumerate(cl.hops):
        rules: list[str] = []
        for ch in hop.changed_by:
            for p in att.packets:
                if p.node == ch.node and p.ip_id == hop.pkt.ip_id:
                    rules += [e.describe() for e in p.events if e.describe() not in rules]
        pat = f"{hop.pkt.src}.{hop.pkt.sport} > {hop.pkt.dst}.{hop.pkt.dport}" if hop.pkt.sport is not None \
            else f"{hop.pkt.src} > {hop.pkt.dst}"
        text = captures.get(f"{hop.info.member}_{hop.info.interface}", "")
        lines = [ln for ln in text.splitlines() if pat in ln][:6]
        if rules or lines:
            ex.details[i] = {"rules": rules, "capture": lines}
