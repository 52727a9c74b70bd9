"""What changes in kube-proxy's nftables transaction from one release to the next (1.29 .. 1.37).

The generator reads an `Era`, never a version number. 1.36 (`hairpin_set`) is the hairpin and
inline-mark rework of #135800 / #136499; 1.37 DNATs a one-endpoint service with `dnat to A:P`,
cuts service-port comments to nft's 128 bytes and writes the localhost NodePort reject objects
(pkg/proxy/nftables/proxier.go at v1.37.2). The evidence for each era is in docs/provenance.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpemu.model.modes import NEWEST_NFT_MINOR as NEWEST_NFT
from kpemu.model.modes import OLDEST_NFT_MINOR as OLDEST_NFT
from kpemu.proxy.nftables.tx import BaseHook

# Chain names (pkg/proxy/nftables/proxier.go constants).
FILTER_PREROUTING = "filter-prerouting"
FILTER_PREROUTING_PRE_DNAT = "filter-prerouting-pre-dnat"
FILTER_OUTPUT_PRE_DNAT = "filter-output-pre-dnat"
FILTER_INPUT, FILTER_FORWARD, FILTER_OUTPUT = "filter-input", "filter-forward", "filter-output"
FILTER_OUTPUT_POST_DNAT = "filter-output-post-dnat"
NAT_PREROUTING, NAT_OUTPUT, NAT_POSTROUTING = "nat-prerouting", "nat-output", "nat-postrouting"
SERVICES = "services"
ENDPOINTS_CHECK = "endpoints-check"
SERVICE_ENDPOINTS_CHECK = "service-endpoints-check"
NODEPORT_ENDPOINTS_CHECK = "nodeport-endpoints-check"
FIREWALL_CHECK = "firewall-check"
CLUSTER_IPS_CHECK = "cluster-ips-check"
MASQUERADING = "masquerading"
MARK_MASQ = "mark-for-masquerade"  # <1.36
FORWARD = "forward"  # 1.29: INVALID drop
FIREWALL_ALLOW_CHECK = "firewall-allow-check"  # 1.29
REJECT_CHAIN = "reject-chain"
# Sets and maps.
CLUSTER_IPS, NODEPORT_IPS = "cluster-ips", "nodeport-ips"
NO_ENDPOINT_SERVICES, NO_ENDPOINT_NODEPORTS = "no-endpoint-services", "no-endpoint-nodeports"
FIREWALL_IPS, SERVICE_IPS, SERVICE_NODEPORTS = "firewall-ips", "service-ips", "service-nodeports"
FIREWALL, FIREWALL_ALLOW = "firewall", "firewall-allow"  # 1.29
HAIRPIN = "hairpin-connections"  # 1.36+
LOCALHOST_REJECT_MAP = "localhost-nodeport-reject-ports"  # 1.37+
LOCALHOST_REJECT_PROTOCOLS = ("tcp", "udp", "sctp")  # metrics.LocalhostNodePortRejectableProtocols
COMMENT_LENGTH_MAX = 128  # knftables.CommentLengthMax: nft refuses a longer comment


def localhost_reject_chain(protocol: str) -> str:
    """localhostNodePortRejectChainName (1.37+)."""
    return f"localhost-nodeport-reject-{protocol}"


def localhost_reject_counter(protocol: str) -> str:
    """metrics.LocalhostNodePortRejectedCounterName (1.37+)."""
    return f"localhost-nodeport-rejected-{protocol}"


CONTAINERS = (CLUSTER_IPS, FIREWALL_IPS, NO_ENDPOINT_SERVICES, NO_ENDPOINT_NODEPORTS, SERVICE_IPS,
              SERVICE_NODEPORTS)

_DNAT, _SNAT, _FILTER = -100, 100, 0


def _base(name: str, type_: str, hook: str, prio: int) -> tuple[str, BaseHook]:
    return name, BaseHook(type_, hook, prio)


_NAT_CHAINS = (
    _base(NAT_PREROUTING, "nat", "prerouting", _DNAT),
    _base(NAT_OUTPUT, "nat", "output", _DNAT),
    _base(NAT_POSTROUTING, "nat", "postrouting", _SNAT),
)
# 1.29: filter chains at dstnat-1, written as plain numbers.
BASE_1_29 = (
    _base(FILTER_INPUT, "filter", "input", _DNAT - 1),
    _base(FILTER_FORWARD, "filter", "forward", _DNAT - 1),
    _base(FILTER_OUTPUT, "filter", "output", _DNAT - 1),
    *_NAT_CHAINS,
)
# 1.30-1.33: filter chains at dstnat-10, plus output at dstnat+10 (#122692, #122296).
BASE_1_30 = (
    _base(FILTER_PREROUTING, "filter", "prerouting", _DNAT - 10),
    _base(FILTER_INPUT, "filter", "input", _DNAT - 10),
    _base(FILTER_FORWARD, "filter", "forward", _DNAT - 10),
    _base(FILTER_OUTPUT, "filter", "output", _DNAT - 10),
    _base(FILTER_OUTPUT_POST_DNAT, "filter", "output", _DNAT + 10),
    *_NAT_CHAINS,
)
# 1.34+: pre-DNAT filter chains for the firewall, the rest at filter priority (#132456).
BASE_1_34 = (
    _base(FILTER_PREROUTING_PRE_DNAT, "filter", "prerouting", _DNAT - 10),
    _base(FILTER_OUTPUT_PRE_DNAT, "filter", "output", _DNAT - 10),
    _base(FILTER_INPUT, "filter", "input", _FILTER),
    _base(FILTER_FORWARD, "filter", "forward", _FILTER),
    _base(FILTER_OUTPUT, "filter", "output", _FILTER),
    *_NAT_CHAINS,
)

_NEW = "ct state new"
# nftablesJumpChains: (destination, source, extra match), in the order kube-proxy writes them.
JUMPS_1_29 = (
    (ENDPOINTS_CHECK, FILTER_INPUT, _NEW), (ENDPOINTS_CHECK, FILTER_FORWARD, _NEW),
    (ENDPOINTS_CHECK, FILTER_OUTPUT, _NEW),
    (FORWARD, FILTER_FORWARD, ""),
    (FIREWALL_CHECK, FILTER_INPUT, _NEW), (FIREWALL_CHECK, FILTER_OUTPUT, _NEW), (FIREWALL_CHECK, FILTER_FORWARD, _NEW),
    (SERVICES, NAT_OUTPUT, ""), (SERVICES, NAT_PREROUTING, ""), (MASQUERADING, NAT_POSTROUTING, ""),
)
JUMPS_1_30 = (
    (ENDPOINTS_CHECK, FILTER_INPUT, _NEW), (ENDPOINTS_CHECK, FILTER_FORWARD, _NEW),
    (ENDPOINTS_CHECK, FILTER_OUTPUT, _NEW),
    (FIREWALL_CHECK, FILTER_PREROUTING, _NEW), (FIREWALL_CHECK, FILTER_OUTPUT, _NEW),
    (SERVICES, NAT_OUTPUT, ""), (SERVICES, NAT_PREROUTING, ""), (MASQUERADING, NAT_POSTROUTING, ""),
    (CLUSTER_IPS_CHECK, FILTER_FORWARD, _NEW), (CLUSTER_IPS_CHECK, FILTER_OUTPUT_POST_DNAT, _NEW),
)
JUMPS_1_31 = (
    (NODEPORT_ENDPOINTS_CHECK, FILTER_INPUT, _NEW),
    (SERVICE_ENDPOINTS_CHECK, FILTER_INPUT, _NEW), (SERVICE_ENDPOINTS_CHECK, FILTER_FORWARD, _NEW),
    (SERVICE_ENDPOINTS_CHECK, FILTER_OUTPUT, _NEW),
    (FIREWALL_CHECK, FILTER_PREROUTING, _NEW), (FIREWALL_CHECK, FILTER_OUTPUT, _NEW),
    (SERVICES, NAT_OUTPUT, ""), (SERVICES, NAT_PREROUTING, ""), (MASQUERADING, NAT_POSTROUTING, ""),
    (CLUSTER_IPS_CHECK, FILTER_FORWARD, _NEW), (CLUSTER_IPS_CHECK, FILTER_OUTPUT_POST_DNAT, _NEW),
)
JUMPS_1_34 = (
    (NODEPORT_ENDPOINTS_CHECK, FILTER_INPUT, _NEW),
    (SERVICE_ENDPOINTS_CHECK, FILTER_INPUT, _NEW), (SERVICE_ENDPOINTS_CHECK, FILTER_FORWARD, _NEW),
    (SERVICE_ENDPOINTS_CHECK, FILTER_OUTPUT, _NEW),
    (FIREWALL_CHECK, FILTER_PREROUTING_PRE_DNAT, _NEW), (FIREWALL_CHECK, FILTER_OUTPUT_PRE_DNAT, _NEW),
    (SERVICES, NAT_OUTPUT, ""), (SERVICES, NAT_PREROUTING, ""), (MASQUERADING, NAT_POSTROUTING, ""),
    (CLUSTER_IPS_CHECK, FILTER_FORWARD, _NEW), (CLUSTER_IPS_CHECK, FILTER_OUTPUT, _NEW),
)


@dataclass(frozen=True)
class Era:
    """The nftables-mode toggles of one kube-proxy release."""

    minor: int
    base_chains: tuple[tuple[str, BaseHook], ...]
    jumps: tuple[tuple[str, str, str], ...]
    object_comments: bool  # table/chain/set comments: knftables >= v0.0.15 (1.31+)
    recreate_base_chains: bool  # base chains added and deleted once per process (1.30+, #123162)
    cluster_ips: bool  # cluster-ips set and cluster-ips-check chain (1.30+, #122692)
    firewall_sets: bool  # 1.29: firewall / firewall-allow sets instead of the firewall-ips vmap
    forward_invalid_drop: bool  # 1.29: chain `forward` with `ct state invalid drop` (removed by #122663)
    split_endpoint_checks: bool  # service-/nodeport-endpoints-check instead of endpoints-check (1.31+)
    flush_containers: bool  # the six sets/maps flushed on every full sync (1.30-1.32; 1.33 readOrReset)
    firewall_element_comment: bool  # firewall-ips elements carry "ns/svc:port" (1.30 only)
    primary_nodeport_default: bool  # nodePortAddresses defaults to the node's primary IP (1.31+)
    service_cidr_drop: bool  # kube-proxy knows the ServiceCIDRs (MultiCIDRServiceAllocator GA, 1.33+)
    cip_masq_port: bool  # ClusterIP masquerade rule matches "<proto> dport <port>" (<1.34, #131492)
    hairpin_set: bool  # 1.36+: #135800 + #136499 (module docstring)
    single_endpoint_dnat: bool  # 1.37+: one endpoint is `dnat to A:P`, not a one-arm numgen map (#140723, #140960)
    comment_truncation: bool  # 1.37+: service-port comments cut to COMMENT_LENGTH_MAX (truncateNFTablesComment)
    localhost_rejects: bool  # 1.37+: the localhost NodePort reject map, chains and counters (added and deleted
    #                          again unless the KubeProxyNFTablesLocalhostNodePorts gate is on)

    @property
    def endpoints_check_chains(self) -> tuple[str, str]:
        """(services check chain, NodePort check chain)."""
        if self.split_endpoint_checks:
            return SERVICE_ENDPOINTS_CHECK, NODEPORT_ENDPOINTS_CHECK
        return ENDPOINTS_CHECK, ENDPOINTS_CHECK


def nftables_available(minor: int) -> bool:
    """Whether kpemu models nftables mode for release 1.<minor>."""
    return OLDEST_NFT <= minor <= NEWEST_NFT


def era_for(minor: int) -> Era:
    """The Era of release 1.<minor>; ValueError outside the modelled range."""
    if not nftables_available(minor):
        raise ValueError(f"nftables mode is modelled for kube-proxy 1.{OLDEST_NFT}..1.{NEWEST_NFT}, got 1.{minor}")
    m = minor
    return Era(
        minor=m,
        base_chains=BASE_1_34 if m >= 34 else BASE_1_30 if m >= 30 else BASE_1_29,
        jumps=JUMPS_1_34 if m >= 34 else JUMPS_1_31 if m >= 31 else JUMPS_1_30 if m >= 30 else JUMPS_1_29,
        object_comments=m >= 31,
        recreate_base_chains=m >= 30,
        cluster_ips=m >= 30,
        firewall_sets=m == 29,
        forward_invalid_drop=m == 29,
        split_endpoint_checks=m >= 31,
        flush_containers=m <= 32,
        firewall_element_comment=m == 30,
        primary_nodeport_default=m >= 31,
        service_cidr_drop=m >= 33,
        cip_masq_port=m < 34,
        hairpin_set=m >= 36,
        single_endpoint_dnat=m >= 37,
        comment_truncation=m >= 37,
        localhost_rejects=m >= 37,
    )
