"""What an xtables trace says of one connection, for its verdict (pure): the rules that dropped or
rejected its packets (kpemu.analyse.verdict.RuleDrop), the nodes that traced it and those where a
rule DNATed it."""

from __future__ import annotations

from collections.abc import Sequence

from kpemu.analyse.attribution.xtables import TracedPacket, comment_of, kernel_dnat
from kpemu.analyse.ledger import ConnLedger
from kpemu.analyse.verdict import WHY, ConnTrace, RuleDrop

REJECT_DEFAULT = "icmp-port-unreachable"  # what REJECT sends back unless told

# Which of the verdict's WHY a kube-proxy iptables rule is (matched on the rule's comment or chain).
WHY_RULE = (("has no local endpoints", "no local endpoints"), ("has no endpoints", "no endpoints"),
            ("ctstate INVALID", "invalid"), ("KUBE-MARK-DROP", "marked for drop"))


def why_rule(rule: str, chain: str) -> str:
    """Why kube-proxy's iptables rules hold a rule that drops (by its text or chain); "" for others. A
    policy-Local drop in KUBE-SERVICES is internal traffic's (external traffic's is in KUBE-EXTERNAL-SERVICES)."""
    if "has no local endpoints" in rule and chain == "KUBE-SERVICES":
        return WHY["no local endpoints (internal)"]
    for needle, why in WHY_RULE:
        if needle in rule or needle == chain:
            return WHY[why]
    return ""


def _reject_type(rule: str) -> str:
    toks = rule.split()
    return toks[toks.index("--reject-with") + 1] if "--reject-with" in toks[:-1] else REJECT_DEFAULT


def xtables_conn_trace(cl: ConnLedger, packets: Sequence[TracedPacket]) -> ConnTrace:
    """The connection's `packets` (attribution, in hop order) in the verdict's terms."""
    replies = {h.pkt.ip_id for h in cl.reply}
    drops = []
    for p in packets:
        for v in p.visits:
            for e in v.events:
                reject = e.target == "REJECT"
                if not (reject or e.verdict == "DROP" or e.target == "DROP"):
                    continue
                drops.append(RuleDrop(p.node, v.hook, e.table, e.chain, e.rule or None, reject,
                                      _reject_type(e.rule) if reject else None,
                                      "reply" if p.ip_id in replies else "request",
                                      e.rule or f"{e.chain} policy DROP",
                                      comment_of(e.rule) if e.rule else None, why_rule(e.rule, e.chain)))
    return ConnTrace(tuple(drops), frozenset(p.node for p in packets),
                     frozenset(p.node for p in packets if kernel_dnat(p)))
