"""Where a destination leaves a node, inferred from its rules where they make it certain (pure).

flannel writes, in the nat table, `! -s NETWORK -d SUBNET -j RETURN` (SUBNET this node's share of the
cluster's NETWORK) beside `-s NETWORK ! -d 224.0.0.0/4 -j MASQUERADE`: with both there, a destination
in SUBNET is a local pod behind flannel's bridge `cni0`, and one in the rest of NETWORK another node's
pod, reached through flannel's VXLAN device `flannel.1` (its default backend; `--oif` says otherwise).
"""

from __future__ import annotations

import ipaddress

from kpemu.analyse.oracle.types import Route
from kpemu.proxy.rules import Rule, RuleSet

FLANNEL_BRIDGE = "cni0"
FLANNEL_VXLAN = "flannel.1"


def _net(value: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(value, strict=False)
    except ValueError:
        return None


def _where(rule: Rule) -> str:
    return f"line {rule.line}: {rule.restore_line()}" if rule.line else rule.restore_line()


def flannel_routes(rs: RuleSet) -> tuple[Route, ...]:
    """The routes flannel's nat rules make certain (empty when its rules are not all there)."""
    nat = rs.tables.get("nat")
    if nat is None:
        return ()
    rules = [r for c in nat.chains.values() for r in c.rules]
    masq = {}
    for r in rules:
        p = r.parsed
        if p.target == "MASQUERADE" and p.src and not p.src[1] and p.dst == ("224.0.0.0/4", True):
            net = _net(p.src[0])
            if net is not None:
                masq[net] = r
    for r in rules:
        p = r.parsed
        if p.target != "RETURN" or not p.src or not p.src[1] or not p.dst or p.dst[1]:
            continue
        net, subnet = _net(p.src[0]), _net(p.dst[0])
        if net is None or subnet is None or net not in masq or not subnet.subnet_of(net) or subnet == net:
            continue
        return (Route(str(subnet), FLANNEL_BRIDGE, f"{_where(r)} (flannel: this node's pod subnet, on its bridge "
                                                   f"{FLANNEL_BRIDGE})"),
                Route(str(net), FLANNEL_VXLAN, f"{_where(masq[net])} (flannel: other nodes' pods of {net}, "
                                               f"through its VXLAN device {FLANNEL_VXLAN}; --oif for another "
                                               "backend)"))
    return ()
