"""The small, constant iptables rule set of IPVS mode (reference 3.2, 3.3, 4.1 and 9.3).

Eras (toggles from kpemu.proxy.versions.Flavour):
- 1.10-1.18: nat KUBE-FIREWALL + KUBE-MARK-DROP for LB source ranges; KUBE-POSTROUTING is the
  single mark MASQUERADE rule, written before the KUBE-LOOP-BACK rule; mark written as
  `--set-xmark 0x00004000/0x00004000`; KUBE-FORWARD pod source/destination conntrack rules (with
  `-s`/`-d clusterCIDR` before 1.18).
- 1.19-1.24: LOOP-BACK rule first in KUBE-POSTROUTING, then RETURN / `--xor-mark` / MASQUERADE
  (seed 000); `--or-mark`; from 1.24 one "forwarding conntrack rule".
- 1.25: filter KUBE-PROXY-FIREWALL + KUBE-SOURCE-RANGES-FIREWALL replace nat KUBE-FIREWALL.
- 1.26-1.28: + filter KUBE-IPVS-FILTER (KUBE-IPVS-IPS set) and `-s 127.0.0.0/8 -j RETURN`.
- 1.29+: + filter KUBE-IPVS-OUT-FILTER.
1.10's own IPVS text (ipsets KUBE-FIRE-WALL / KUBE-LB-INGRESS-LOCAL, no KUBE-FORWARD, no `-j ACCEPT`
for the VIP sets) is not pinned by any source, so a 1.10 node gets 1.11's rules.
Rules are generated in the order of writeIptablesRules(); only the order inside a chain is
visible in iptables-save.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpemu.proxy.ipvs.ipset_text import IpSet
from kpemu.proxy.localdetect import LocalDetector
from kpemu.proxy.naming import go_hex
from kpemu.proxy.rules import JumpRule
from kpemu.proxy.versions import Flavour

SERVICES, POSTROUTING, NODE_PORT = "KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-NODE-PORT"
LOAD_BALANCER, MARK_MASQ, MARK_DROP = "KUBE-LOAD-BALANCER", "KUBE-MARK-MASQ", "KUBE-MARK-DROP"
NAT_FIREWALL, FORWARD = "KUBE-FIREWALL", "KUBE-FORWARD"
PROXY_FIREWALL, SOURCE_RANGES = "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL"
IPVS_FILTER, IPVS_OUT_FILTER = "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"
DROP_BIT = 15  # kubelet's --iptables-drop-bit default


@dataclass(frozen=True)
class IpvsIptables:
    """Chains (restore chain lines) and rules (restore input lines) for nat and filter."""

    nat_chains: tuple[str, ...]
    filter_chains: tuple[str, ...]
    nat_rules: tuple[str, ...]
    filter_rules: tuple[str, ...]
    jumps_prepend_order: tuple[JumpRule, ...]  # the order kube-proxy calls EnsureRule(Prepend)

    @property
    def jumps(self) -> tuple[JumpRule, ...]:
        """Jumps in the order they end up in each built-in chain (later prepends come first)."""
        return tuple(reversed(self.jumps_prepend_order))


# ipsetWithIptablesChain: (set, table, from chain, target, match type, protocol match).
_NAT, _FILTER = "nat", "filter"


def _set_chain_rules(f: Flavour) -> list[tuple[str, str, str, str, str, str]]:
    rows = [
        ("KUBE-LOOP-BACK", _NAT, POSTROUTING, "MASQUERADE", "dst,dst,src", ""),
        ("KUBE-LOAD-BALANCER", _NAT, SERVICES, LOAD_BALANCER, "dst,dst", ""),
    ]
    if f.ipvs_nat_firewall:
        rows += [
            ("KUBE-LOAD-BALANCER-FW", _NAT, LOAD_BALANCER, NAT_FIREWALL, "dst,dst", ""),
            ("KUBE-LOAD-BALANCER-SOURCE-CIDR", _NAT, NAT_FIREWALL, "RETURN", "dst,dst,src", ""),
            ("KUBE-LOAD-BALANCER-SOURCE-IP", _NAT, NAT_FIREWALL, "RETURN", "dst,dst,src", ""),
        ]
    rows += [
        ("KUBE-LOAD-BALANCER-LOCAL", _NAT, LOAD_BALANCER, "RETURN", "dst,dst", ""),
        ("KUBE-NODE-PORT-LOCAL-TCP", _NAT, NODE_PORT, "RETURN", "dst", "tcp"),
        ("KUBE-NODE-PORT-TCP", _NAT, NODE_PORT, MARK_MASQ, "dst", "tcp"),
        ("KUBE-NODE-PORT-LOCAL-UDP", _NAT, NODE_PORT, "RETURN", "dst", "udp"),
        ("KUBE-NODE-PORT-UDP", _NAT, NODE_PORT, MARK_MASQ, "dst", "udp"),
        ("KUBE-NODE-PORT-LOCAL-SCTP-HASH", _NAT, NODE_PORT, "RETURN", "dst,dst", "sctp"),
        ("KUBE-NODE-PORT-SCTP-HASH", _NAT, NODE_PORT, MARK_MASQ, "dst,dst", "sctp"),
    ]
    if f.ipvs_proxy_firewall:
        rows += [
            ("KUBE-LOAD-BALANCER-FW", _FILTER, PROXY_FIREWALL, SOURCE_RANGES, "dst,dst", ""),
            ("KUBE-LOAD-BALANCER-SOURCE-CIDR", _FILTER, SOURCE_RANGES, "RETURN", "dst,dst,src", ""),
            ("KUBE-LOAD-BALANCER-SOURCE-IP", _FILTER, SOURCE_RANGES, "RETURN", "dst,dst,src", ""),
        ]
    return rows


def _chains(f: Flavour) -> tuple[tuple[str, ...], tuple[str, ...]]:
    nat = [SERVICES, POSTROUTING]
    if f.ipvs_nat_firewall:
        nat.append(NAT_FIREWALL)
    nat += [NODE_PORT, LOAD_BALANCER, MARK_MASQ]
    if f.ipvs_nat_firewall:
        nat.append(MARK_DROP)  # EnsureChain'd by kube-proxy, its rule is kubelet's
    filt = [FORWARD, NODE_PORT]
    if f.ipvs_proxy_firewall:
        filt += [PROXY_FIREWALL, SOURCE_RANGES]
    if f.ipvs_filter:
        filt.append(IPVS_FILTER)
    if f.ipvs_out_filter:
        filt.append(IPVS_OUT_FILTER)
    return tuple(nat), tuple(filt)


def _jumps(f: Flavour) -> tuple[JumpRule, ...]:
    j = [
        JumpRule("nat", "OUTPUT", SERVICES, "kubernetes service portals"),
        JumpRule("nat", "PREROUTING", SERVICES, "kubernetes service portals"),
        JumpRule("nat", "POSTROUTING", POSTROUTING, "kubernetes postrouting rules"),
        JumpRule("filter", "FORWARD", FORWARD, "kubernetes forwarding rules"),
        JumpRule("filter", "INPUT", NODE_PORT, "kubernetes health check rules"),
    ]
    if f.ipvs_proxy_firewall:
        j += [
            JumpRule("filter", "INPUT", PROXY_FIREWALL, "kube-proxy firewall rules"),
            JumpRule("filter", "FORWARD", PROXY_FIREWALL, "kube-proxy firewall rules"),
        ]
    if f.ipvs_filter:
        j.append(JumpRule("filter", "INPUT", IPVS_FILTER, "kubernetes ipvs access filter"))
    if f.ipvs_out_filter:
        j.append(JumpRule("filter", "OUTPUT", IPVS_OUT_FILTER, "kubernetes ipvs access filter"))
    return tuple(j)


def ipvs_iptables(
    f: Flavour,
    sets: dict[str, IpSet],
    *,
    cluster_cidr: str | None,
    masquerade_all: bool,
    detector: LocalDetector | None = None,
    masquerade_bit: int,
    out_filter: tuple[tuple[str, str, int], ...] = (),
) -> IpvsIptables:
    """The IPVS-mode nat and filter rules for flavour `f`, given the node's ipsets.

    `out_filter` lists (lbIP, proto, port) whose source ranges exclude the node IP (1.29+).
    """
    nat: list[str] = []
    filt: list[str] = []
    m = go_hex(1 << masquerade_bit)

    def nonempty(name: str) -> bool:
        return name in sets and not sets[name].is_empty

    def comment(name: str) -> str:
        return f'"{sets[name].comment}"'

    if f.ipvs_postrouting_masq_first:
        masq = (
            f'-A {POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT" '
            f"-m mark --mark {m}/{m} -j MASQUERADE"
        )
        nat.append(masq + (" --random-fully" if f.random_fully else ""))
        nat.append(f"-A {MARK_MASQ} -j MARK --set-xmark {m}/{m}")
    if f.ipvs_nat_firewall:
        d = go_hex(1 << DROP_BIT)
        nat.append(f"-A {MARK_DROP} -j MARK --set-xmark {d}/{d}")

    if f.loopback_return:
        nat.append(f"-A {SERVICES} -s 127.0.0.0/8 -j RETURN")

    for name, table, src, target, match, proto in _set_chain_rules(f):
        if not nonempty(name):
            continue
        p = f" -p {proto}" if proto else ""
        rule = f"-A {src}{p} -m comment --comment {comment(name)} -m set --match-set {name} {match} -j {target}"
        (nat if table == _NAT else filt).append(rule)

    if nonempty("KUBE-CLUSTER-IP"):
        base = f"-A {SERVICES} -m comment --comment {comment('KUBE-CLUSTER-IP')} -m set --match-set KUBE-CLUSTER-IP"
        if masquerade_all:
            nat.append(f"{base} dst,dst -j {MARK_MASQ}")
        elif detector:
            nat.append(f"{base} dst,dst {' '.join(detector.if_not_local)} -j {MARK_MASQ}")
        else:
            nat.append(f"{base} src,dst -j {MARK_MASQ}")

    for name, masq in (("KUBE-EXTERNAL-IP", True), ("KUBE-EXTERNAL-IP-LOCAL", False)):
        if not nonempty(name):
            continue
        base = f"-A {SERVICES} -m comment --comment {comment(name)} -m set --match-set {name} dst,dst"
        if masq:
            nat.append(f"{base} -j {MARK_MASQ}")
        nat.append(f"{base} -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT")
        nat.append(f"{base} -m addrtype --dst-type LOCAL -j ACCEPT")

    nat.append(f"-A {SERVICES} -m addrtype --dst-type LOCAL -j {NODE_PORT}")
    nat.append(f"-A {LOAD_BALANCER} -j {MARK_MASQ}")
    if f.ipvs_nat_firewall:
        nat.append(f"-A {NAT_FIREWALL} -j {MARK_DROP}")
    if f.ipvs_proxy_firewall:
        filt.append(f"-A {SOURCE_RANGES} -j DROP")
    if f.ipvs_out_filter:
        for ip, proto, port in out_filter:
            filt.append(
                f"-A {IPVS_OUT_FILTER} -s {ip} -m ipvs --vaddr {ip} --vproto {proto} --vport {port} -j DROP"
            )

    for name in ("KUBE-CLUSTER-IP", "KUBE-LOAD-BALANCER"):
        if nonempty(name):
            nat.append(f"-A {SERVICES} -m set --match-set {name} dst,dst -j ACCEPT")

    filt.append(f'-A {FORWARD} -m comment --comment "kubernetes forwarding rules" -m mark --mark {m}/{m} -j ACCEPT')
    ct = "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
    if f.forward_single_conntrack:
        filt.append(f'-A {FORWARD} -m comment --comment "kubernetes forwarding conntrack rule" {ct}')
    elif not f.forward_pod_rules_cidr:
        filt.append(f'-A {FORWARD} -m comment --comment "kubernetes forwarding conntrack pod source rule" {ct}')
        filt.append(f'-A {FORWARD} -m comment --comment "kubernetes forwarding conntrack pod destination rule" {ct}')
    elif cluster_cidr:
        filt.append(
            f"-A {FORWARD} -s {cluster_cidr} "
            f'-m comment --comment "kubernetes forwarding conntrack pod source rule" {ct}'
        )
        filt.append(
            f'-A {FORWARD} -m comment --comment "kubernetes forwarding conntrack pod destination rule" '
            f"-d {cluster_cidr} {ct}"
        )

    hc = "KUBE-HEALTH-CHECK-NODE-PORT"
    filt.append(f'-A {NODE_PORT} -m comment --comment "{sets[hc].comment}" -m set --match-set {hc} dst -j ACCEPT')

    if f.ipvs_filter:
        for name, match in (
            ("KUBE-LOAD-BALANCER", "dst,dst"),
            ("KUBE-CLUSTER-IP", "dst,dst"),
            ("KUBE-EXTERNAL-IP", "dst,dst"),
            ("KUBE-EXTERNAL-IP-LOCAL", "dst,dst"),
            (hc, "dst"),
        ):
            filt.append(f"-A {IPVS_FILTER} -m set --match-set {name} {match} -j RETURN")
        filt.append(f"-A {IPVS_FILTER} -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT")

    if not f.ipvs_postrouting_masq_first:
        nat.append(f"-A {POSTROUTING} -m mark ! --mark {m}/{m} -j RETURN")
        nat.append(f"-A {POSTROUTING} -j MARK --xor-mark {m}")
        masq = f'-A {POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE'
        nat.append(masq + (" --random-fully" if f.random_fully else ""))
        nat.append(f"-A {MARK_MASQ} -j MARK --or-mark {m}")

    nat_chains, filter_chains = _chains(f)
    return IpvsIptables(nat_chains, filter_chains, tuple(nat), tuple(filt), _jumps(f))
