"""The netfilter hook walk of a traced packet on one node (pure), and seed 002's claims checked
against it.

Seed 002's summary table says ClusterIP traffic goes PREROUTING -> INPUT and NodePort /
LoadBalancer traffic PREROUTING -> FORWARD. A trace shows the hooks (and the tables in each)
the packet really crossed on the node; `compare_with_seed002` says where the note is right and
where it is wrong, and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kpemu.analyse.attribution import TracedPacket

SEED_002 = {
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
class SeedVerdict:
    """One claim of seed 002 compared with a live trace."""

    access: str  # ClusterIP | NodePort | LoadBalancer
    claim: str
    observed: str
    right: bool
    explanation: str

    def describe(self) -> str:
        word = "right" if self.right else "wrong"
        return (f"seed 002 says {self.access}: {self.claim}; the trace on the node shows {self.observed}: "
                f"the note is {word}. {self.explanation}")


def compare_with_seed002(access: str, hooks: list[str], mode: str = "iptables") -> SeedVerdict:
    """Check the note's `access` row against the hooks a traced first packet crossed."""
    claim = SEED_002[access]
    observed = " -> ".join(hooks) or "nothing"
    right = tuple(hooks[:2]) == claim
    if right:
        tail = [h for h in hooks[2:]]
        why = ("The first two hooks match. " + (
            f"The note stops there, but the packet then crosses {' -> '.join(tail)}, where KUBE-POSTROUTING "
            "decides on MASQUERADE." if tail else ""))
        if claim[1] == "INPUT" and mode == "ipvs":
            why += " In IPVS mode the ClusterIP is bound to kube-ipvs0, so the node delivers it locally and IPVS " \
                   "(hooked at LOCAL_IN) rewrites it there."
    elif claim[1] == "INPUT" and "FORWARD" in hooks:
        why = ("In iptables mode KUBE-SEP's DNAT in nat PREROUTING rewrites the ClusterIP to a pod address before "
               "the routing decision, so the packet is forwarded (filter FORWARD, where KUBE-FORWARD and "
               "KUBE-SERVICES are consulted) and leaves through POSTROUTING; it never reaches INPUT. INPUT would "
               "only be right in IPVS mode, where the ClusterIP is a local address on kube-ipvs0.")
    elif claim[1] == "FORWARD" and "INPUT" in hooks:
        why = ("In IPVS mode the destination (node address or VIP on kube-ipvs0) is local, so the packet goes to "
               "INPUT, where IPVS (LOCAL_IN) picks the real server and sends it out through POSTROUTING; it is "
               "never seen in FORWARD on this node.")
    elif hooks[:1] != ["PREROUTING"]:
        why = "The packet was generated on the node itself, so it starts in OUTPUT, not PREROUTING."
    else:
        why = "The hooks differ from the note's."
    return SeedVerdict(access, " -> ".join(claim), observed, right, why.strip())
