"""Explain a flow traced by `nft monitor trace` (pure): its hops against the nft oracle.

For every traced packet (its trace groups joined across NAT,
kpemu.analyse.attribution.nft.journeys) that enters kube-proxy's table as a new request (its first
kube-proxy `packet:` line is not a reply from the service or a backend; a backend reaching its own
service, hairpin, is a request), the kube-proxy rules the kernel reports are compared with the
outcomes kpemu.analyse.oracle.nft predicts for the same packet on the same node; each hop of the
first such packet per node is attributed to the rule, verdict-map element or numgen arm that acted
(kpemu.analyse.attribution.nft.attribute), and the ledger's DNAT / SNAT changes say which chain,
map element and numgen arm made them (`changed_by[].by`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import pairwise

from kpemu.analyse.attribution.nft import DNAT_MAP, KUBE_PROXY, NftHop, attribute, journeys, kube_path, packet_fields
from kpemu.analyse.attribution.phrases import conntrack_phrase, outer_phrase
from kpemu.analyse.explain.nft_trace import nft_conn_trace
from kpemu.analyse.explain.types import FlowExplanation
from kpemu.analyse.explain.verdicts import balances_with_ipvs, cut_short_on, flow_verdicts
from kpemu.analyse.ledger import FlowLedger, conn_tuples
from kpemu.analyse.oracle import predict_for_topology
from kpemu.analyse.oracle.compare import compare_paths
from kpemu.analyse.oracle.types import Packet
from kpemu.model.scenario import ResolvedFlow
from kpemu.model.topology import Topology
from kpemu.plan.tracing import TraceData, flow_match
from kpemu.proxy.nftables.tx import Table
from kpemu.proxy.state import ProxyState


def _packet(hop: NftHop, proto: str) -> Packet | None:
    """The oracle's Packet for a kube-proxy `packet:` line (None if its fields are missing)."""
    text = hop.packet or ""
    src, dst = re.search(r"\bip saddr (\S+)", text), re.search(r"\bip daddr (\S+)", text)
    sport, dport = re.search(rf"\b{proto} sport (\d+)", text), re.search(rf"\b{proto} dport (\d+)", text)
    if not (src and dst and sport and dport):
        return None
    origin = "remote" if re.search(r'\biif "', text) else "local"
    return Packet(src[1], dst[1], int(dport[1]), proto, int(sport[1]), origin)


def _kernel_dnat(hops: list[NftHop]) -> str | None:
    """Where kube-proxy DNATed the packet: the rule's target, or (1.36's DNAT map, whose rule does not
    say which arm acted) the destination of the next `packet:` line after the rule."""
    for i, h in enumerate(hops):
        if h.table != KUBE_PROXY or h.verdict != "accept":
            continue
        m = re.search(r"\bdnat (?:ip )?to (\S+)$", h.rule_text or "")
        if m:
            return m[1]
        if DNAT_MAP.search(h.rule_text or ""):
            f = packet_fields(next((x.packet for x in hops[i + 1:] if x.packet), "") or "")
            return f"{f['ip daddr']}:{f['dport']}" if "ip daddr" in f and "dport" in f else None
    return None


def explain_nft_flow(topo: Topology, flow: ResolvedFlow, fl: FlowLedger, data: TraceData, proxy: ProxyState,
                     captures: Mapping[str, str], ipvs_services: Mapping[str, str],
                     altered: frozenset[str]) -> FlowExplanation:
    """Model vs kernel and per-hop attribution for one flow from each node's `nft monitor trace`, against
    the run's generated tables (`proxy`), and a verdict for every connection that got no answer (from the
    trace's drops and rejects, the kernel's drop reasons and the captures: kpemu.analyse.explain.verdicts).
    The oracle checks no packet on a node whose rules a fault changed (`altered`), nor where its
    connection died outside netfilter. The trace names every rule that acted, so the captures the
    iptables explainer reads are not needed here."""
    ex = FlowExplanation(traced=bool(data.texts) and data.unavailable is None, reason=data.unavailable)
    _attribute_ledger(topo, fl, data.texts, proxy)
    tables = {n: t for n in data.texts if (t := proxy.node(n).walk.nft) is not None} if ex.traced else {}
    texts = data.texts if ex.traced else {}
    traces = {cl.index: nft_conn_trace(cl, texts, tables, list(dict.fromkeys(h.info.node or h.info.member
                                                                              for h in cl.hops)))
              for cl in fl.connections}
    flow_verdicts(topo, fl, traces, data, ex, ipvs_services, balances_with_ipvs(proxy))
    tuples = {cl.index: conn_tuples(cl) for cl in fl.connections}
    proto = flow.protocol.lower()
    replies_from = {flow.dst_ip} | {ip for ip, _ in _backends(topo, flow)}
    # what answers: every address:port the flow can be NATed to (an external balancer's nodes and pods too)
    served = set(flow_match(topo, flow).backends)
    for node, text in sorted(data.texts.items()):
        table = None
        seen: set[tuple] = set()  # the tuples whose first packet on this node was checked
        for hops in journeys(text):
            first = next((h for h in hops if h.table == KUBE_PROXY and h.packet is not None), None)
            pkt = _packet(first, proto) if first else None
            # a backend's reply is not a request; a hairpin request comes from a backend too, to the service
            if pkt is None or (pkt.src, pkt.sport) in served or \
                    (pkt.src in replies_from and (pkt.dst, pkt.dport) != (flow.dst_ip, flow.dst_port)):
                continue
            # a retransmission meets the conntrack entry its first packet made (no `ct state new` rule acts),
            # which the stateless model does not know: only a tuple's first packet on a node is checked
            key = (pkt.proto, pkt.src, pkt.sport, pkt.dst, pkt.dport)
            if key in seen:
                continue
            seen.add(key)
            why = _not_checked(node, pkt, altered, fl, ex, tuples) or _nat_taken(node, hops)
            if why is not None:
                if why not in ex.unchecked:
                    ex.unchecked.append(why)
            else:
                pred = predict_for_topology(topo, node, pkt, state=proxy.node(node))
                for d in compare_paths(pred, kube_path(hops), _kernel_dnat(hops)):
                    if d.describe() not in ex.disagreements:
                        ex.disagreements.append(d.describe())
                ex.oracle_checked += 1
                if node not in ex.oracle_nodes:
                    ex.oracle_nodes.append(node)
            if node not in ex.chains:
                table = table or proxy.node(node).walk.nft
                acted = [h for h in hops if h.table == KUBE_PROXY and h.rule is not None]
                ex.chains[node] = list(dict.fromkeys(h.chain for h in acted))
                dnat = _kernel_dnat(hops)
                walk = [[h.chain, f"{attribute(h, table, first.packet, dnat)} -> {h.verdict}"]  # type: ignore[union-attr]
                        for h in acted]
                ex.hooks[node] = {"walk": walk, "text": " -> ".join(ex.chains[node])}
    if ex.traced and not ex.oracle_checked and ex.reason is None:
        ex.reason = "no new request packet entered kube-proxy's table in the trace"
    if not ex.traced and ex.reason is None:
        ex.reason = "tracing was off (--no-trace)"
    return ex


def _not_checked(node: str, pkt: Packet, altered: frozenset[str], fl: FlowLedger, ex: FlowExplanation,
                 tuples: Mapping[int, set[tuple]]) -> str | None:
    """Why the oracle does not check `pkt` on `node`: a fault changed the rules there (the oracle knows
    the generated ones), or its connection died there outside netfilter, where the model's path goes on."""
    if node in altered:
        return f"a fault changed the rules on {node}"
    for cl in fl.connections:
        died = ex.verdicts.get(cl.index)
        if cut_short_on(died, node) and (pkt.proto, pkt.src, pkt.sport, pkt.dst, pkt.dport) in tuples[cl.index]:
            return (f"connection {cl.index} died on {node} outside netfilter ({died.reason or died.action}), "
                    "where the model's path goes on")
    return None


NAT_STATEMENT = re.compile(r"\b(masquerade|snat to|dnat to|redirect to)\b")
COUNTER = re.compile(r"\bcounter packets \d+ bytes \d+")


def _nat_taken(node: str, hops: list[NftHop]) -> str | None:
    """Why the oracle does not check a packet whose NAT another table made first: the kernel runs a hook's
    NAT chains in priority order only until one sets up the connection's binding, so after, say, flannel's
    iptables MASQUERADE in nat POSTROUTING kube-proxy's nat-postrouting does not run; the model walks
    kube-proxy's table alone and cannot say which comes first."""
    for i, h in enumerate(hops):
        if h.table != KUBE_PROXY and h.rule is not None and h.verdict == "accept" \
                and NAT_STATEMENT.search(h.rule_text or "") \
                and not [x for x in hops[i + 1:] if x.table == KUBE_PROXY and x.rule is not None]:
            rule = " ".join(COUNTER.sub("", h.rule_text or "").split())
            return (f"a packet on {node} was NATed by another table's rule first ({h.table} {h.chain}: {rule}), so "
                    "the kernel ran none of kube-proxy's NAT chains after it at that hook; the model walks "
                    "kube-proxy's table alone")
    return None


def _backends(topo: Topology, flow: ResolvedFlow) -> list[tuple[str, int]]:
    ips = {p.name: p.ip for p in topo.pods}
    return [(ips[c], 0) for c in flow.candidates if c in ips]


def _ip_id(hops: list[NftHop]) -> int | None:
    m = next((re.search(r"\bip id (\d+)", h.packet) for h in hops if h.packet), None)
    return int(m[1]) if m else None


def _nat_phrases(hops: list[NftHop], table: Table) -> dict[str, list[str]]:
    """What kube-proxy's rules did to one packet: the DNAT (chain and how it was chosen), the
    masquerade mark, the masquerade itself."""
    out: dict[str, list[str]] = {"DNAT": [], "SNAT": [], "MARK": []}
    pkt = next((h.packet for h in hops if h.packet), None)
    acted = [h for h in hops if h.table == KUBE_PROXY and h.rule is not None]
    choices = [h for h in acted if re.search(r"vmap (@|\{)", h.rule_text or "")
               or (h.rule_text or "").startswith("ip saddr @affinity-")]
    dnat = _kernel_dnat(hops)
    for h in acted:
        text = h.rule_text or ""
        if h.verdict == "accept" and (re.search(r"\bdnat (?:ip )?to \S+$", text) or DNAT_MAP.search(text)):
            via = "; ".join(attribute(x, table, pkt, dnat) for x in choices + ([h] if DNAT_MAP.search(text) else []))
            out["DNAT"].append(f"DNAT by {h.chain}" + (f" (via {via})" if via else ""))
        elif re.search(r"\bmasquerade\b", text) and h.verdict == "accept":
            hairpin = " (@hairpin-connections)" if "@hairpin-connections" in text else ""
            out["SNAT"].append(f"masquerade by {h.chain}{hairpin}")
        elif (h.verdict == "jump mark-for-masquerade" or "meta mark set meta mark |" in text) \
                and f"masquerade mark by {h.chain}" not in out["MARK"]:
            out["MARK"].append(f"masquerade mark by {h.chain}")
    return out


def _attribute_ledger(topo: Topology, fl: FlowLedger, texts: dict[str, str], proxy: ProxyState) -> None:
    """Fill `changed_by[].by` from each node's trace (packets matched by node and IP id)."""
    by_id = {(node, _ip_id(j)): j for node, text in texts.items() for j in journeys(text)}
    tables: dict[str, Table] = {}
    for cl in fl.connections:
        for hops in (cl.request, cl.reply):
            for prev, hop in pairwise(hops):
                for ch in hop.changed_by:
                    node = ch.node or ""
                    journey = by_id.get((node, hop.pkt.ip_id))
                    if ch.kind in ("DNAT", "SNAT") and journey and node in {n.name for n in topo.nodes}:
                        if node not in tables:
                            tables[node] = proxy.node(node).walk.nft  # type: ignore[assignment]
                        said = _nat_phrases(journey, tables[node])
                        ch.by += said["DNAT"] + said["MARK"] if ch.kind == "DNAT" else said["SNAT"]
                    elif ch.kind in ("encap", "decap"):
                        phrase = outer_phrase(ch.kind, hop, prev)
                        if phrase:
                            ch.by.append(phrase)
                    elif ch.kind in ("un-DNAT", "un-SNAT"):
                        ct = conntrack_phrase(cl.conntrack, ch.node)
                        if ct:
                            ch.by.append(f"reverse NAT by {ct}")
