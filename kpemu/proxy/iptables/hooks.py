"""Why a traced packet's hooks match a claim or not, in iptables mode's words."""

from __future__ import annotations

from kpemu.proxy.hookprose import locally_generated, tail_after_claim


def explain_hooks(access: str, hooks: list[str], right: bool) -> str:
    """Why the claim holds or not when kube-proxy runs in iptables mode (DNAT in nat PREROUTING)."""
    if (why := locally_generated(hooks)) is not None:
        return why
    if right and access == "ClusterIP":
        return ("The Service's endpoint is the node itself, so after the DNAT in nat PREROUTING the packet is "
                "delivered locally." + tail_after_claim(hooks))
    if right:
        return ("KUBE-NODEPORTS (or the load balancer IP's KUBE-EXT chain) DNATs the packet to a pod address in nat "
                "PREROUTING, before the routing decision, so the node forwards it." + tail_after_claim(hooks))
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
