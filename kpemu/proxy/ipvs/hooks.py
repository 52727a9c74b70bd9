"""Why a traced packet's hooks match a claim or not, in IPVS mode's words."""

from __future__ import annotations

from kpemu.proxy.hookprose import locally_generated, tail_after_claim


def explain_hooks(access: str, hooks: list[str], right: bool) -> str:
    """Why the claim holds or not when kube-proxy runs in IPVS mode (IPVS at LOCAL_IN)."""
    if (why := locally_generated(hooks)) is not None:
        return why
    if "INPUT" in hooks:
        why = ("In IPVS mode the destination (a node address, or a ClusterIP / load balancer IP bound to the "
               "kube-ipvs0 dummy device) is local, so the packet goes to INPUT, where IPVS (hooked at LOCAL_IN) "
               "picks the real server and sends the packet on itself, through OUTPUT and POSTROUTING.")
        return why + ("" if right else " It is never seen in FORWARD on this node.")
    return ("The packet was forwarded without IPVS: its destination is not one of the node's local addresses."
            + tail_after_claim(hooks))
