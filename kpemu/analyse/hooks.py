"""The netfilter hook walk of a traced packet on one node (pure), and the common claim about it
checked against the trace.

The usual summary says "ClusterIP traffic goes PREROUTING -> INPUT" and "NodePort (and
LoadBalancer) traffic goes PREROUTING -> FORWARD". A trace shows the hooks (and the tables in each)
the packet really crossed on the node; `check_hook_claim` says whether the claim holds there and
why, in words that depend on the kube-proxy mode: each mode's package writes them (its registry
entry's `explain_hooks`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kpemu.analyse.attribution.xtables import TracedPacket
from kpemu.proxy.modes import MODES

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


def check_hook_claim(access: str, hooks: list[str], mode: str = "iptables") -> HookClaim:
    """Check the claim for `access` against the hooks a traced first packet crossed, explained for `mode`."""
    claim = CLAIMS[access]
    right = tuple(hooks[:2]) == claim
    entry = MODES.get(mode)
    explain = entry.explain_hooks if entry else None
    why = explain(access, hooks, right) if explain else f"(no explanation written for {mode} mode)"
    return HookClaim(access, " -> ".join(claim), " -> ".join(hooks) or "nothing", right, why.strip(), mode)
