"""Explain a run's flows (pure): one explainer per way a mode's packets are traced (`ProxyMode.trace`).

`xtables-monitor --trace` (kpemu.analyse.explain.iptables) and `nft monitor trace`
(kpemu.analyse.explain.nft) each attribute the ledger's changes to rules, walk the hooks and check
the model oracle; both take a `TraceData` and give a `FlowExplanation` (kpemu.analyse.explain.types).
Both read their trace into the same terms for the verdicts (xtables_trace, nft_trace), which one step
gives every unanswered connection (kpemu.analyse.explain.verdicts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kpemu.analyse.explain.iptables import explain_iptables_flow
from kpemu.analyse.explain.nft import explain_nft_flow
from kpemu.analyse.explain.types import FlowExplanation
from kpemu.analyse.ledger import FlowLedger
from kpemu.model.scenario import ResolvedFlow
from kpemu.model.topology import Topology
from kpemu.plan.tracing import TraceData
from kpemu.proxy.modes import mode_of
from kpemu.proxy.state import ProxyState

# (topology, flow, its ledger, the trace, the run's kube-proxy state, captures, ipvs_services, altered)
Explainer = Callable[[Topology, ResolvedFlow, FlowLedger, TraceData, ProxyState, Mapping[str, str],
                      Mapping[str, str], frozenset[str]], FlowExplanation]

# ProxyMode.trace -> its explainer
EXPLAINERS: dict[str, Explainer] = {"iptables-trace": explain_iptables_flow, "nft-monitor": explain_nft_flow}


def explain_flow(topo: Topology, flow: ResolvedFlow, fl: FlowLedger, data: TraceData, proxy: ProxyState,
                 captures: Mapping[str, str] | None = None,
                 ipvs_services: Mapping[str, str] | None = None,
                 altered: frozenset[str] = frozenset()) -> FlowExplanation:
    """Explain one flow with its mode's explainer (fills `fl`'s `changed_by[].by` in place).

    `captures`: each capture point's text; `ipvs_services`: each node's `ipvsadm -Sn` text;
    `altered`: nodes whose kube-proxy rules a fault changed (the model oracle knows only the generated rules);
    `proxy`: the run's generated kube-proxy state (its lab plan's), which the oracle walks.
    """
    explainer = EXPLAINERS[mode_of(topo).trace]
    return explainer(topo, flow, fl, data, proxy, captures or {}, ipvs_services or {}, altered)


def with_verdicts(flow: dict, ex: FlowExplanation) -> dict:
    """hops.json's flow with a `verdict` on every connection (null when answered) and on the flow
    (the shown connection's, else the first one's)."""
    for c in flow.get("connections") or []:
        v = ex.verdicts.get(c.get("index"))
        c["verdict"] = v.to_json() if v else None
    shown = next((c for c in flow.get("connections") or [] if c.get("hops") and c["hops"] == flow.get("hops")), None)
    first = next((v for v in ex.verdicts.values()), None)
    v = ex.verdicts.get(shown["index"]) if shown else first
    flow["verdict"] = (v or first).to_json() if (v or first) else None
    return flow
