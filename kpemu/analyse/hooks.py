"""The netfilter hook walk of a traced packet on one node (pure), and the common claim about it
checked against the trace.

The usual summary says "ClusterIP traffic goes PREROUTING -> INPUT" and "NodePort (and
LoadBalancer) traffic goes PREROUTING -> FORWARD". A trace shows the hooks (and the tables in each)
the packet really crossed on the node; `check_hook_claim` says whether the claim holds there and
why, in words that depend on the kube-proxy mode: each mode registers its explainer in
`EXPLAINERS` (a new mode adds its own function there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kpemu.analyse.attribution import TracedPacket

CLAIMS = {
    "ClusterIP": ("PREROUTING", "INPUT"),
    "NodePort": ("PREROUTING", "FORWARD"),
    "LoadBalancer": ("PREROUTING", "FORWARD"),
}


def hook_walk(pkt: TracedPacket) -> list[tuple[str, list[str]]]:
    """[(hook, [tables...])] in traversal order, consecutive visits of one hook merged."""
    out: list[tuple[str, list[str]]] = []
    for v in pkt.visits:
        hook = v.hook
        if hook is None:
            continue
        if out and out[-1][0] == hook:
            out[-1][1].extend(t for t in v.tables if t not in out[-1][1])
        else:
            out.append((hook, list(v.tables)))
    return out


def hooks_only(pkt: TracedPacket) -> list[str]:
    return [h for h, _ in hook_walk(pkt)]


def walk_text(walk: Iterable[tuple[str, list[str]]]) -> str:
    """"PREROUTING (raw, nat) -> FORWARD (filter) -> POSTROUTING (nat)"."""
    return " -> ".join(f"{h} ({', '.join(t)})" if t else h for h, t in walk)


@dataclass(frozen=True)
class HookClaim:
    """One claim ("NodePort traffic goes PREROUTING -> FORWARD") compared with a live trace."""

    access: str  # ClusterIP | NodePort | LoadBalancer
    claim: str  # "PREROUTING -> FORWARD"
    observed: str
    right: bool
    explanation: str
    mode: str = "iptables"

    @property
    def sentence(self) -> str:
        return f"{self.access} traffic goes {self.claim}"

    def describe(self) -> str:
        word = "holds" if self.right else "does not hold"
        return (f"Claim: {self.sentence}. The trace on the node shows {self.observed}: the claim {word} in "
                f"{self.mode} mode. {self.explanation}").strip()


# (access, hooks observed, whether the claim held) -> why, in the words of one kube-proxy mode
Explainer = Callable[[str, list[str], bool], str]


def _tail(hooks: list[str], masq: str = "KUBE-POSTROUTING") -> str:
    tail = hooks[2:]
    return (f" The claim stops there, but the packet then crosses {' -> '.join(tail)}, where {masq} "
            "decides on masquerading." if tail else "")


def _local(hooks: list[str]) -> str | None:
    if hooks[:1] != ["PREROUTING"]:
        return "The packet was generated on the node itself, so it starts in OUTPUT, not PREROUTING."
    return None


def explain_iptables(access: str, hooks: list[str], right: bool) -> str:
    """Why the claim holds or not when kube-proxy runs in iptables mode (DNAT in nat PREROUTING)."""
    if (why := _local(hooks)) is not None:
        return why
    if right and access == "ClusterIP":
        return ("The Service's endpoint is the node itself, so after the DNAT in nat PREROUTING the packet is "
                "delivered locally." + _tail(hooks))
    if right:
        return ("KUBE-NODEPORTS (or the load balancer IP's KUBE-EXT chain) DNATs the packet to a pod address in nat "
                "PREROUTING, before the routing decision, so the node forwards it." + _tail(hooks))
    if access == "ClusterIP" and "FORWARD" in hooks:
        return ("KUBE-SEP's DNAT in nat PREROUTING rewrites the ClusterIP to a pod address before the routing "
                "decision, so the packet is forwarded (filter FORWARD, where KUBE-FORWARD and KUBE-SERVICES are "
                "consulted) and leaves through POSTROUTING; it never reaches INPUT. The ClusterIP is not an "
                "address of the node in this mode.")
    if "INPUT" in hooks:
        return ("No DNAT happened in nat PREROUTING (no endpoint was chosen for this node), so the packet still "
                "carries the node's own address and is delivered locally: filter INPUT, where kube-proxy's "
                "KUBE-EXTERNAL-SERVICES and KUBE-NODEPORTS chains decide what happens to it.")
    return "The hooks differ from the claim's."


def explain_ipvs(access: str, hooks: list[str], right: bool) -> str:
    """Why the claim holds or not when kube-proxy runs in IPVS mode (IPVS at LOCAL_IN)."""
    if (why := _local(hooks)) is not None:
        return why
    if "INPUT" in hooks:
        why = ("In IPVS mode the destination (a node address, or a ClusterIP / load balancer IP bound to the "
               "kube-ipvs0 dummy device) is local, so the packet goes to INPUT, where IPVS (hooked at LOCAL_IN) "
               "picks the real server and sends the packet out through POSTROUTING itself.")
        return why + ("" if right else " It is never seen in FORWARD on this node.")
    return ("The packet was forwarded without IPVS: its destination is not one of the node's local addresses."
            + _tail(hooks))


def explain_nftables(access: str, hooks: list[str], right: bool) -> str:
    """Why the claim holds or not when kube-proxy runs in nftables mode (table ip kube-proxy)."""
    if (why := _local(hooks)) is not None:
        return why
    masq = "the kube-proxy table's nat-postrouting chain"
    if right and access == "ClusterIP":
        return ("The Service's endpoint is the node itself, so after the DNAT in the kube-proxy table's "
                "nat-prerouting chain the packet is delivered locally." + _tail(hooks, masq))
    if right:
        return ("The kube-proxy table's nat-prerouting chain (hook prerouting, dstnat priority) finds the port in its "
                "service-nodeports verdict map and DNATs the packet to an endpoint before the routing decision, so "
                "the node forwards it." + _tail(hooks, masq))
    if access == "ClusterIP" and "FORWARD" in hooks:
        return ("The service-ips verdict map in the kube-proxy table's nat-prerouting chain DNATs the ClusterIP to an "
                "endpoint before the routing decision, so the packet is forwarded (filter-forward) and never reaches "
                "INPUT. The ClusterIP is not an address of the node in this mode.")
    if "INPUT" in hooks:
        return ("No DNAT happened in nat-prerouting (no endpoint was chosen for this node), so the packet keeps the "
                "node's own address and is delivered locally: the kube-proxy table's filter-input chain, whose "
                "no-endpoint-nodeports map decides what happens to it.")
    return "The hooks differ from the claim's."


EXPLAINERS: dict[str, Explainer] = {"iptables": explain_iptables, "ipvs": explain_ipvs, "nftables": explain_nftables}


def check_hook_claim(access: str, hooks: list[str], mode: str = "iptables") -> HookClaim:
    """Check the claim for `access` against the hooks a traced first packet crossed, explained for `mode`."""
    claim = CLAIMS[access]
    right = tuple(hooks[:2]) == claim
    explain = EXPLAINERS.get(mode)
    why = explain(access, hooks, right) if explain else f"(no explanation written for {mode} mode)"
    return HookClaim(access, " -> ".join(claim), " -> ".join(hooks) or "nothing", right, why.strip(), mode)
