"""Why a traced packet's hooks match a claim or not, in nftables mode's words."""

from __future__ import annotations

from kpemu.proxy.hookprose import locally_generated, tail_after_claim


def explain_hooks(access: str, hooks: list[str], right: bool) -> str:
    """Why the claim holds or not when kube-proxy runs in nftables mode (table ip kube-proxy)."""
    if (why := locally_generated(hooks)) is not None:
        return why
    masq = "the kube-proxy table's nat-postrouting chain"
    if right and access == "ClusterIP":
        return ("The Service's endpoint is the node itself, so after the DNAT in the kube-proxy table's "
                "nat-prerouting chain the packet is delivered locally." + tail_after_claim(hooks, masq))
    if right:
        return ("The kube-proxy table's nat-prerouting chain (hook prerouting, dstnat priority) finds the port in its "
                "service-nodeports verdict map and DNATs the packet to an endpoint before the routing decision, so "
                "the node forwards it." + tail_after_claim(hooks, masq))
    if access == "ClusterIP" and "FORWARD" in hooks:
        return ("The service-ips verdict map in the kube-proxy table's nat-prerouting chain DNATs the ClusterIP to an "
                "endpoint before the routing decision, so the packet is forwarded (filter-forward) and never reaches "
                "INPUT. The ClusterIP is not an address of the node in this mode.")
    if "INPUT" in hooks:
        return ("No DNAT happened in nat-prerouting (no endpoint was chosen for this node), so the packet keeps the "
                "node's own address and is delivered locally: the kube-proxy table's filter-input chain, whose "
                "no-endpoint-nodeports map decides what happens to it.")
    return "The hooks differ from the claim's."
