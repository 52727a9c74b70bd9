"""What changes in kube-proxy's rule text from one release to the next (1.10 through 1.37).

`flavour_for(settings)` turns the topology's `kubeProxy` block into a frozen `Flavour`: one
boolean / value per change, so the generators (kpemu.proxy.iptables, kpemu.proxy.ipvs) never
compare version numbers themselves. Toggle names follow the research notes' T1..T21; the evidence
for each boundary (seed 001 as 1.14, nfacct in 1.30/1.31, no iptables or IPVS change in 1.34-1.37,
IPVS deprecated in 1.35, the UDP conntrack cleanup's eras) and what the toggles leave out are in
docs/provenance.md.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, fields
from typing import Protocol

from kpemu.model.modes import NEWEST_MINOR as NEWEST
from kpemu.model.modes import OLDEST_MINOR as OLDEST


class _Settings(Protocol):
    """The parts of kpemu.model.topology.KubeProxy that select a flavour."""

    version: str
    randomFully: bool | None
    localhostNodePorts: bool
    nfacct: bool | None
    nodePortAddresses: list[str]


@dataclass(frozen=True)
class Flavour:
    """Rule-text toggles for one kube-proxy release (plus the settings that alter them)."""

    minor: int

    # --- iptables mode ------------------------------------------------------------------
    port_name_colon: bool  # T1: unnamed port S = "ns/svc:" (<1.19)
    probability_fmt: str  # T2: "%0.5f" (<1.17) or "%0.10f"
    xor_mark: bool  # T3: KUBE-POSTROUTING RETURN / --xor-mark / MASQUERADE (1.19+)
    random_fully: bool  # T4 resolved: capable and (settings.randomFully, default: assume supported)
    kubelet_mark_drop: bool  # T5/T6: kubelet's nat KUBE-MARK-DROP + filter KUBE-FIREWALL mark-drop rule (<1.28)
    kubelet_localnet_rule: bool  # T21: kubelet KUBE-FIREWALL "block incoming localnet connections" (1.19+)
    proxy_kube_firewall: bool  # T6: kube-proxy writes filter KUBE-FIREWALL itself (1.28+)
    masq_in_svc_chain: bool  # T7: ClusterIP masq rule is the first rule of KUBE-SVC (1.21+)
    ext_chains: bool  # T8/T9/T18: KUBE-EXT + KUBE-SVL instead of KUBE-XLB (1.24+)
    proxy_firewall: bool  # T10/T18: filter KUBE-PROXY-FIREWALL, FW chain ends in a no-target rule (1.25+)
    sep_arrow_comment: bool  # T11: SVC->SEP comment "S -> ip:port" (1.24+)
    endpoint_comments: bool  # SVC->SEP and SEP rules carry "-m comment" (not 1.12-1.17: PR #65755 bug)
    forward_invalid_drop: bool  # T12: KUBE-FORWARD INVALID DROP (1.15+, PR #74840)
    forward_pod_rules_cidr: bool  # T12: "pod source/destination rule" with -s/-d clusterCIDR (<1.18)
    forward_pod_rules: bool  # T12: the two pod source/destination conntrack rules (<1.24)
    forward_single_conntrack: bool  # T12: single "forwarding conntrack rule" (1.24+)
    nfacct: bool  # resolved: nfacct counters in use (capable, and settings.nfacct not False)
    nfacct_capable: bool  # 1.30+: -m nfacct on the INVALID drop (and 1.31+ localhost NodePorts)
    nfacct_localhost_nodeports: bool  # T15: 1.31+ "-d 127.0.0.0/8 ... -m nfacct" twin NodePort rule
    input_services_jump: bool  # T13: filter INPUT -> KUBE-SERVICES (1.14-1.19; PR #74394 / #95252)
    forward_services_jump: bool  # T13: filter FORWARD -> KUBE-SERVICES (1.14+)
    lb_reject_external: bool  # LB IPs without endpoints REJECTed in KUBE-EXTERNAL-SERVICES (1.20+, else KUBE-SERVICES)
    or_mark: bool  # KUBE-MARK-MASQ written as --or-mark (1.19+; before: --set-xmark M/M)
    xlb_local_rules: bool  # KUBE-XLB "masquerade/route LOCAL traffic for S LB IP" rules (1.22-1.23)
    xlb_balancing_comment: bool  # KUBE-XLB rules commented "Balancing rule i for S" (<1.23)
    to_cidr: bool  # restore input writes /32 on -d/-s host addresses (utilproxy.ToCIDR, <1.23)
    forward_external_services_jump: bool  # T13: filter FORWARD -> KUBE-EXTERNAL-SERVICES (1.20+)
    health_check_jump: bool  # filter INPUT -> KUBE-NODEPORTS "health check service ports" (1.22+)
    external_ip_legacy: bool  # T14: pre-1.21 externalIP form (MARK-MASQ + physdev/addrtype jumps)
    localhost_nodeport_masq: bool  # T15: "-s 127.0.0.0/8 ... -j KUBE-MARK-MASQ" for eTP=Local (<1.24)
    route_localnet_always: bool  # T16: route_localnet=1 unconditionally (<1.24)
    canary: bool  # T17: KUBE-PROXY-CANARY chains in mangle/nat/filter (1.16+)
    large_cluster_mode: bool  # T20: >1000 endpoints drops per-endpoint comments (1.23+)
    localhost_nodeports_flag: bool  # --iptables-localhost-nodeports honoured (1.25+; earlier always on)
    localhost_nodeports: bool  # resolved: localhost NodePorts allowed (flag, or always before 1.25; 1.27+ only
    #                            when nodePortAddresses takes 127.0.0.1, ContainsIPv4Loopback)

    # --- IPVS mode ----------------------------------------------------------------------
    ipvs_nat_firewall: bool  # LB source ranges via nat KUBE-FIREWALL + KUBE-MARK-DROP (1.11-1.24)
    ipvs_proxy_firewall: bool  # filter KUBE-PROXY-FIREWALL / KUBE-SOURCE-RANGES-FIREWALL (1.25+)
    ipvs_filter: bool  # filter KUBE-IPVS-FILTER + KUBE-IPVS-IPS ipset (1.26+)
    loopback_return: bool  # "-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN" in IPVS nat (1.26+)
    ipvs_out_filter: bool  # filter KUBE-IPVS-OUT-FILTER (1.29+)
    ipvs_postrouting_masq_first: bool  # legacy IPVS: mark MASQUERADE before the LOOP-BACK rule (<1.19)
    ipvs_localhost_nodeport_vs: bool  # IPVS NodePort VS on 127.0.0.1 too (<1.22)
    ipvs_etp_local_fallback: bool  # IPVS eTP=Local VS without local endpoints uses all of them (1.21+, PR #97081)
    ipvs_route_localnet: bool  # IPVS sets route_localnet=1 (<1.22)
    conn_reuse_mode_zero: bool  # IPVS sets net/ipv4/vs/conn_reuse_mode=0 (1.13+, only kernel < 5.9)
    ipvs_deprecated: bool  # 1.35+: kube-proxy logs IPVS_DEPRECATION at startup (KEP-5495)

    # --- UDP conntrack cleanup (pkg/proxy/conntrack, every mode) ----------------------------
    conntrack_reconciler: bool  # 1.32+: netlink reconciler (#127318); before: the conntrack tool, per change seen
    reconcile_endpoint_port: bool  # 1.34+: a serving endpoint is matched by reply source IP:port (before: IP)
    reconcile_skips_empty: bool  # 1.32-1.36: services without serving endpoints are skipped (#139628, #139629)

    @property
    def version(self) -> str:
        return f"1.{self.minor}"

    def probability(self, n: int) -> str:
        """computeProbability(n): 1/n in this release's format."""
        return self.probability_fmt % (1.0 / n)

    def as_dict(self) -> dict[str, object]:
        """Every toggle by name (for reports and debugging)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


IPVS_DEPRECATION = ("The ipvs proxier is now deprecated and may be removed in a future release. "
                    "Please use 'nftables' instead.")


def minor_of(version: str) -> int:
    """"1.18" / "v1.18.3" -> 18; raises ValueError outside the modelled releases."""
    parts = str(version).lstrip("v").split(".")
    minor = int(parts[1])
    if parts[0] != "1" or not OLDEST <= minor <= NEWEST:
        raise ValueError(f"kube-proxy release 1.{OLDEST}..1.{NEWEST} expected, got {version!r}")
    return minor


def flavour_for_minor(
    minor: int, *, random_fully: bool | None = None, localhost_nodeports: bool = True,
    nfacct: bool | None = None, loopback_nodeports: bool = True,
) -> Flavour:
    """The toggles of release 1.<minor>; `random_fully` / `nfacct` None = assume the node supports it."""
    if not OLDEST <= minor <= NEWEST:
        raise ValueError(f"kube-proxy release 1.{OLDEST}..1.{NEWEST} expected, got 1.{minor}")
    m = minor
    capable = m >= 16
    return Flavour(
        minor=m,
        port_name_colon=m < 19,
        probability_fmt="%0.5f" if m < 17 else "%0.10f",
        xor_mark=m >= 19,
        random_fully=capable and (True if random_fully is None else random_fully),
        kubelet_mark_drop=m < 28,
        kubelet_localnet_rule=m >= 19,
        proxy_kube_firewall=m >= 28,
        masq_in_svc_chain=m >= 21,
        ext_chains=m >= 24,
        proxy_firewall=m >= 25,
        sep_arrow_comment=m >= 24,
        endpoint_comments=not 12 <= m <= 17,
        forward_invalid_drop=m >= 15,
        forward_pod_rules_cidr=m < 18,
        forward_pod_rules=m < 24,
        forward_single_conntrack=m >= 24,
        nfacct=m >= 30 and nfacct is not False,
        nfacct_capable=m >= 30,
        nfacct_localhost_nodeports=m >= 31,
        input_services_jump=14 <= m < 20,
        forward_services_jump=m >= 14,
        lb_reject_external=m >= 20,
        or_mark=m >= 19,
        xlb_local_rules=22 <= m < 24,
        xlb_balancing_comment=m < 23,
        to_cidr=m < 23,
        forward_external_services_jump=m >= 20,
        health_check_jump=m >= 22,
        external_ip_legacy=m < 21,
        localhost_nodeport_masq=m < 24,
        route_localnet_always=m < 24,
        canary=m >= 16,
        large_cluster_mode=m >= 23,
        localhost_nodeports_flag=m >= 25,
        localhost_nodeports=(localhost_nodeports and (m < 27 or loopback_nodeports)) if m >= 25 else True,
        ipvs_nat_firewall=m < 25,
        ipvs_proxy_firewall=m >= 25,
        ipvs_filter=m >= 26,
        loopback_return=m >= 26,
        ipvs_out_filter=m >= 29,
        ipvs_postrouting_masq_first=m < 19,
        ipvs_localhost_nodeport_vs=m < 22,
        ipvs_etp_local_fallback=m >= 21,
        ipvs_route_localnet=m < 22,
        conn_reuse_mode_zero=m >= 13,
        ipvs_deprecated=m >= 35,
        conntrack_reconciler=m >= 32,
        reconcile_endpoint_port=m >= 34,
        reconcile_skips_empty=32 <= m <= 36,
    )


def flavour_for(settings: _Settings) -> Flavour:
    """The Flavour for a topology's `kubeProxy` block (version, randomFully, localhostNodePorts, nfacct,
    nodePortAddresses: an empty list, or one holding 127.0.0.1, takes loopback NodePorts)."""
    nets = [ipaddress.IPv4Network(c) for c in settings.nodePortAddresses]
    # NodePortAddresses.ContainsIPv4Loopback: a loopback network, or one that holds 127.0.0.0
    loopback = not nets or any(n.network_address.is_loopback or ipaddress.IPv4Address("127.0.0.0") in n for n in nets)
    return flavour_for_minor(
        minor_of(settings.version),
        random_fully=settings.randomFully,
        localhost_nodeports=settings.localhostNodePorts,
        nfacct=settings.nfacct,
        loopback_nodeports=loopback,
    )
