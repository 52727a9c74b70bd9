"""Every connection's verdict for one flow, whichever way its packets were traced (pure).

Each explainer reads its own trace into a `ConnTrace` per connection (kpemu.analyse.explain.xtables_trace,
kpemu.analyse.explain.nft_trace); this joins them with the kernel's drop events (kpemu.analyse.drops),
the captures and the IPVS services into `FlowExplanation.verdicts` (kpemu.analyse.verdict), and
records the flow's drop events for hops.json.
"""

from __future__ import annotations

from collections.abc import Mapping

from kpemu.analyse.drops import PAST_NETFILTER, parse_drops, time_note
from kpemu.analyse.explain.types import FlowExplanation
from kpemu.analyse.ledger import FlowLedger
from kpemu.analyse.verdict import NO_TRACE, ConnTrace, Verdict, connection_verdict
from kpemu.model.names import netns_name
from kpemu.model.topology import Topology
from kpemu.plan.tracing import TraceData
from kpemu.proxy.state import ProxyState
from kpemu.proxy.view import unproxied

MAX_DROP_EVENTS = 40


def _unproxied(topo: Topology, fl: FlowLedger, v: Verdict) -> Verdict:
    """`v`, saying why kube-proxy had no rule for the flow's destination when it is an address of a Service
    kube-proxy leaves out (a service-proxy-name or headless label)."""
    why = unproxied(topo, fl.dst.rsplit(":", 1)[0])
    if why:
        v.why = f"{why}; {v.why}" if v.why else why
        v.text += f"; {why}"
    return v


def cut_short_on(died: Verdict | None, node: str) -> bool:
    """Whether a connection's death on `node` came outside netfilter before its netfilter path ended there
    (so the model's path, which goes on, cannot be checked against the trace)."""
    return bool(died and died.at == node and died.evidence != "netfilter trace"
                and died.reason not in PAST_NETFILTER)


def balances_with_ipvs(proxy: ProxyState) -> bool:
    """Whether the lab's kube-proxy balances with IPVS: its nodes' state has IPVS virtual servers to walk."""
    return any(n.walk.ipvs is not None for n in proxy.nodes.values())


def flow_verdicts(topo: Topology, fl: FlowLedger, traces: Mapping[int, ConnTrace], data: TraceData,
                  ex: FlowExplanation, services: Mapping[str, str], ipvs: bool) -> None:
    """A verdict for every connection of `fl` that got no answer (into `ex.verdicts`), from `traces`
    (connection index -> what its rule trace says) and the kernel's drops; `ex.drops` for hops.json."""
    events = parse_drops(data.drops)
    members = {int(k): m for k, m in data.drop_members.items()}
    note = time_note(data.drops)
    ex.drops = {"available": data.drops_unavailable is None and bool(data.drop_members),
                "reason": data.drops_unavailable, "joined": "time window" if note else "tuple", "note": note,
                "events": [{**e.to_json(), "member": members.get(e.netns_inode)} for e in events
                           if e.netns_inode in members or e.netns_inode == 0][:MAX_DROP_EVENTS]}
    unavailable = [f"rule trace: {ex.reason}"] if not ex.traced and ex.reason else []
    if data.drops_unavailable:
        unavailable.append(f"kernel drop reasons: {data.drops_unavailable}")
    netns = {m: netns_name(topo.name, m) for m in {*members.values(), *(n.name for n in topo.nodes)}}
    for cl in fl.connections:
        for h in cl.hops:
            netns.setdefault(h.info.member, h.info.netns)
        v = connection_verdict(cl, traces.get(cl.index, NO_TRACE), events, members, netns, ipvs, services,
                               unavailable, note)
        if v is not None:
            ex.verdicts[cl.index] = _unproxied(topo, fl, v)
