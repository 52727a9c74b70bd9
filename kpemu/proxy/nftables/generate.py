"""kube-proxy's nftables proxier, one full sync on a clean node, as a pure function.

Follows setupNFTables() and syncProxyRules() of pkg/proxy/nftables/proxier.go (1.29 .. 1.37):
the table, base chains (added and deleted once per process so priority changes apply), the
jump chains, helper chains, sets and verdict maps, then per service port: endpoint chains,
service-/local-/external- chains, elements of cluster-ips / service-ips / service-nodeports /
no-endpoint-* / firewall-ips (and hairpin-connections, 1.36+), masquerade and dispatch rules,
affinity sets, endpoint DNAT rules (1.36+: DNAT maps in the policy chains; 1.37+: a one-endpoint
service DNATs directly, and the localhost NodePort reject objects; see eras.py).
Every chain is added before any rule or element that names it, so `nft -f` accepts the text.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from kpemu.model.topology import Topology
from kpemu.proxy.endpoints import EndpointInfo, ServicePortInfo, service_ports
from kpemu.proxy.localdetect import LocalDetector, local_detector
from kpemu.proxy.naming import go_hex, service_port_name
from kpemu.proxy.nftables import eras as E
from kpemu.proxy.nftables.naming import endpoint_base, service_base
from kpemu.proxy.nftables.tx import Transaction, quote

NO_LOCALHOST = "ip daddr != 127.0.0.0/8"
LOCALHOST = "ip daddr 127.0.0.0/8"
NODEPORT_MATCH = "meta l4proto . th dport"
DADDR_KEY = "ip daddr . meta l4proto . th dport"


@dataclass(frozen=True)
class NftSettings:
    """What one node's kube-proxy was started with (the parts that change the transaction)."""

    era: E.Era
    mark: str  # go_hex(1 << masqueradeBit)
    masquerade_all: bool
    detector: LocalDetector | None  # the local-traffic detector; None: no detector
    nodeport_ips: tuple[str, ...] | None  # None: nodePortAddresses match every address
    service_cidrs: tuple[str, ...]
    localhost_rejects: tuple[str, ...] = ()  # 1.37+ protocols whose localhost NodePorts are rejected


def settings_for(topo: Topology, node: str, mark: str | None = None) -> NftSettings:
    """Settings of kube-proxy on `node`. `mark` overrides the Go-rendered masquerade mark (upstream's
    unit tests inject "0x4000")."""
    kp = topo.kubeProxy
    era = E.era_for(kp.minor)
    node_ip = topo.node(node).ip
    npa = list(kp.nodePortAddresses)
    if not npa and era.primary_nodeport_default:
        npa = [f"{node_ip}/32"]  # nodePortAddresses: ["primary"]
    nets = [ipaddress.IPv4Network(c) for c in npa]
    if not nets or any(n.prefixlen == 0 for n in nets):
        nodeport_ips: tuple[str, ...] | None = None
    else:
        # Node addresses kpemu knows: the node IP (loopback matches are skipped by kube-proxy).
        nodeport_ips = tuple(a for a in (node_ip,) if any(ipaddress.IPv4Address(a) in n for n in nets))
    cidrs = (topo.serviceCIDR,) if era.service_cidr_drop and topo.serviceCIDR else ()
    rejects: tuple[str, ...] = ()
    if era.localhost_rejects and kp.featureGates.KubeProxyNFTablesLocalhostNodePorts:
        # localhostNodePortRejectProtocols: the userspace proxy (an explicit loopback network in
        # nodePortAddresses) serves TCP, so only UDP and SCTP are rejected then.
        loopback = any(n.network_address.is_loopback for n in nets)
        rejects = tuple(p for p in E.LOCALHOST_REJECT_PROTOCOLS if not (loopback and p == "tcp"))
    return NftSettings(
        era=era,
        mark=mark or go_hex(1 << kp.masqueradeBit),
        masquerade_all=kp.masqueradeAll,
        detector=local_detector(topo, node),
        nodeport_ips=nodeport_ips,
        service_cidrs=cidrs,
        localhost_rejects=rejects,
    )


def _names(info: ServicePortInfo) -> tuple[str, str, str, str, str]:
    """(base, service-, local-, external-, firewall- chain names) of a service port."""
    svc = info.service
    base = service_base(svc.namespace, svc.name, info.protocol, info.port.name)
    return base, f"service-{base}", f"local-{base}", f"external-{base}", f"firewall-{base}"


def _ep_base(info: ServicePortInfo, ep: EndpointInfo) -> str:
    svc = info.service
    return endpoint_base(svc.namespace, svc.name, info.protocol, info.port.name, ep.ip, ep.port)


class _Sync:
    def __init__(self, topo: Topology, node: str, st: NftSettings):
        self.topo, self.node, self.st, self.era = topo, node, st, st.era
        self.tx = Transaction()
        self.comments = self.era.object_comments
        self.hairpins: set[tuple[str, ...]] = set()  # nftElementStorage.ensureElem: each key once

    def c(self, text: str) -> str | None:
        """An object comment, when this release's knftables writes them."""
        return text if self.comments else None

    def ensure_chain(self, name: str, created: set[str]) -> None:
        if name in created:
            return
        self.tx.add_chain(name)
        self.tx.flush("chain", name)
        created.add(name)

    def masq(self) -> str:
        """The masquerade-marking action: a jump to mark-for-masquerade, inline from 1.36 (#135800)."""
        return f"mark set mark or {self.st.mark}" if self.era.hairpin_set else f"jump {E.MARK_MASQ}"

    def masq_comment(self, text: str) -> str | None:
        """1.36's inline masquerade rules carry a comment where the jump had none."""
        return text if self.era.hairpin_set else None

    # -- setupNFTables ------------------------------------------------------------------------
    def setup(self) -> None:
        tx, era, st = self.tx, self.era, self.st
        tx.add_table(self.c("rules for kube-proxy"))
        if era.recreate_base_chains:  # once per process, so priority changes apply
            for name, _ in era.base_chains:
                tx.add_chain(name)
                tx.delete("chain", name)
        for name, hook in era.base_chains:
            tx.add_chain(name, hook)
            tx.flush("chain", name)
        created: set[str] = set()
        for dst, src, extra in era.jumps:
            self.ensure_chain(dst, created)
            tx.add_rule(src, f"{extra} jump {dst}".strip())
        second = E.CLUSTER_IPS_CHECK if era.cluster_ips else E.FORWARD
        top = (E.SERVICES, second, E.MASQUERADING) + (() if era.hairpin_set else (E.MARK_MASQ,))
        for name in top:
            self.ensure_chain(name, created)
        m = st.mark
        if era.hairpin_set:
            tx.add_set("set", E.HAIRPIN, "ipv4_addr . ipv4_addr . inet_proto . inet_service",
                       comment=self.c("service hairpin connections"))
            tx.add_rule(E.MASQUERADING, f"mark and {m} != 0 mark set mark xor {m} masquerade fully-random")
            tx.add_rule(E.MASQUERADING, f"ct status dnat ip saddr . ip daddr . meta l4proto . th dport @{E.HAIRPIN} "
                                        "masquerade fully-random")
        else:
            tx.add_rule(E.MARK_MASQ, f"mark set mark or {m}")
            tx.add_rule(E.MASQUERADING, f"mark and {m} == 0 return")
            tx.add_rule(E.MASQUERADING, f"mark set mark xor {m}")
            tx.add_rule(E.MASQUERADING, "masquerade fully-random")
        if era.forward_invalid_drop:  # kpemu's nodes keep nf_conntrack_tcp_be_liberal at 0
            tx.add_rule(E.FORWARD, "ct state invalid drop")

        if era.cluster_ips:
            tx.add_set("set", E.CLUSTER_IPS, "ipv4_addr", comment=self.c("Active ClusterIPs"))
            tx.add_rule(E.CLUSTER_IPS_CHECK, f"ip daddr @{E.CLUSTER_IPS} reject",
                        "Reject traffic to invalid ports of ClusterIPs")
        if st.service_cidrs:
            tx.add_rule(E.CLUSTER_IPS_CHECK, f"ip daddr {{ {','.join(st.service_cidrs)} }} drop",
                        "Drop traffic to unallocated ClusterIPs")

        tx.add_set("set", E.NODEPORT_IPS, "ipv4_addr", comment=self.c("IPs that accept NodePort traffic"))
        if st.nodeport_ips is None:
            tx.delete("set", E.NODEPORT_IPS)
        else:
            tx.flush("set", E.NODEPORT_IPS)
            for ip in st.nodeport_ips:
                tx.add_element(E.NODEPORT_IPS, (ip,))

        tx.add_set("map", E.NO_ENDPOINT_SERVICES, "ipv4_addr . inet_proto . inet_service : verdict",
                   comment=self.c("vmap to drop or reject packets to services with no endpoints"))
        tx.add_set("map", E.NO_ENDPOINT_NODEPORTS, "inet_proto . inet_service : verdict",
                   comment=self.c("vmap to drop or reject packets to service nodeports with no endpoints"))
        tx.add_chain(E.REJECT_CHAIN, comment=self.c("helper for @no-endpoint-services / @no-endpoint-nodeports"))
        tx.flush("chain", E.REJECT_CHAIN)
        tx.add_rule(E.REJECT_CHAIN, "reject")

        svc_check, np_check = era.endpoints_check_chains
        tx.add_rule(svc_check, f"{DADDR_KEY} vmap @{E.NO_ENDPOINT_SERVICES}")
        if st.nodeport_ips is None:
            fib = "" if era.split_endpoint_checks else "fib daddr type local "
            tx.add_rule(np_check, f"{fib}{NO_LOCALHOST} {NODEPORT_MATCH} vmap @{E.NO_ENDPOINT_NODEPORTS}")
        else:
            tx.add_rule(np_check, f"ip daddr @{E.NODEPORT_IPS} {NODEPORT_MATCH} vmap @{E.NO_ENDPOINT_NODEPORTS}")

        if era.localhost_rejects:
            self.localhost_rejects(created)

        if era.firewall_sets:
            self.firewall_sets(created)
        else:
            tx.add_set("map", E.FIREWALL_IPS, "ipv4_addr . inet_proto . inet_service : verdict",
                       comment=self.c("destinations that are subject to LoadBalancerSourceRanges"))
            self.ensure_chain(E.FIREWALL_CHECK, created)
            tx.add_rule(E.FIREWALL_CHECK, f"{DADDR_KEY} vmap @{E.FIREWALL_IPS}")

        tx.add_set("map", E.SERVICE_IPS, "ipv4_addr . inet_proto . inet_service : verdict",
                   comment=self.c("ClusterIP, ExternalIP and LoadBalancer IP traffic"))
        tx.add_set("map", E.SERVICE_NODEPORTS, "inet_proto . inet_service : verdict",
                   comment=self.c("NodePort traffic"))
        if era.hairpin_set:  # one ClusterIP masquerade rule for every service (#136499)
            if st.masquerade_all:
                tx.add_rule(E.SERVICES, f"ip daddr @{E.CLUSTER_IPS} {self.masq()}", "masquerade all clusterIP traffic")
            elif st.detector:
                tx.add_rule(E.SERVICES, f"ip daddr @{E.CLUSTER_IPS} {st.detector.if_not_local_nft} {self.masq()}",
                            "masquerade clusterIP traffic from outside cluster")
        tx.add_rule(E.SERVICES, f"{DADDR_KEY} vmap @{E.SERVICE_IPS}")
        if st.nodeport_ips is None:
            tx.add_rule(E.SERVICES, f"fib daddr type local {NO_LOCALHOST} {NODEPORT_MATCH} "
                                    f"vmap @{E.SERVICE_NODEPORTS}")
        else:
            tx.add_rule(E.SERVICES, f"ip daddr @{E.NODEPORT_IPS} {NODEPORT_MATCH} vmap @{E.SERVICE_NODEPORTS}")

    def localhost_rejects(self, created: set[str]) -> None:
        """1.37+: the map of localhost NodePorts kube-proxy rejects, a counting reject chain per
        protocol rejected, and add-then-delete of the objects of the other protocols (so a sync
        after the gate was turned off removes them)."""
        tx, rejects = self.tx, self.st.localhost_rejects
        tx.add_set("map", E.LOCALHOST_REJECT_MAP, "inet_proto . inet_service : verdict",
                   comment=self.c("localhost NodePorts rejected by kube-proxy"))
        if rejects:
            for proto in rejects:
                counter, chain = E.localhost_reject_counter(proto), E.localhost_reject_chain(proto)
                tx.add_counter(counter)
                self.ensure_chain(chain, created)
                tx.add_rule(chain, f"counter name {quote(counter)} reject")
            tx.add_rule(E.NODEPORT_ENDPOINTS_CHECK, f"{LOCALHOST} {NODEPORT_MATCH} vmap @{E.LOCALHOST_REJECT_MAP}")
        else:
            tx.delete("map", E.LOCALHOST_REJECT_MAP)
        for proto in E.LOCALHOST_REJECT_PROTOCOLS:
            if proto not in rejects:
                tx.add_chain(E.localhost_reject_chain(proto))
                tx.delete("chain", E.localhost_reject_chain(proto))
                tx.add_counter(E.localhost_reject_counter(proto))
                tx.delete("counter", E.localhost_reject_counter(proto))

    def firewall_sets(self, created: set[str]) -> None:
        """1.29: LoadBalancerSourceRanges as a destination set and a destination+source set."""
        tx = self.tx
        tx.add_set("set", E.FIREWALL, "ipv4_addr . inet_proto . inet_service",
                   comment=self.c("destinations that are subject to LoadBalancerSourceRanges"))
        tx.add_set("set", E.FIREWALL_ALLOW, "ipv4_addr . inet_proto . inet_service . ipv4_addr", flags=("interval",),
                   comment=self.c("destinations+sources that are allowed by LoadBalancerSourceRanges"))
        self.ensure_chain(E.FIREWALL_CHECK, created)
        self.ensure_chain(E.FIREWALL_ALLOW_CHECK, created)
        tx.add_rule(E.FIREWALL_CHECK, f"{DADDR_KEY} @{E.FIREWALL} jump {E.FIREWALL_ALLOW_CHECK}")
        tx.add_rule(E.FIREWALL_ALLOW_CHECK, f"{DADDR_KEY} . ip saddr @{E.FIREWALL_ALLOW} return")
        tx.add_rule(E.FIREWALL_ALLOW_CHECK, "drop")

    # -- syncProxyRules -----------------------------------------------------------------------
    def run(self) -> Transaction:
        self.setup()
        if self.era.flush_containers:
            flushed = E.CONTAINERS if self.era.cluster_ips else (E.FIREWALL, E.FIREWALL_ALLOW, *E.CONTAINERS[2:])
            for name in flushed:
                self.tx.flush("set" if name in (E.CLUSTER_IPS, E.FIREWALL, E.FIREWALL_ALLOW) else "map", name)
        active: set[str] = set()
        for info in service_ports(self.topo, self.node):
            self.service_port(info, active)
        return self.tx

    def service_port(self, info: ServicePortInfo, active: set[str]) -> None:
        tx, svc, st = self.tx, info.service, self.st
        proto, port = info.protocol, info.port.port
        s_name = service_port_name(svc.namespace, svc.name, info.port.name, False)
        if self.era.comment_truncation:  # truncateNFTablesComment (1.37+)
            s_name = s_name.encode()[:E.COMMENT_LENGTH_MAX].decode(errors="ignore")
        _, cluster_chain, local_chain, ext_chain, fw_chain = _names(info)
        itp_local = svc.internalTrafficPolicy == "Local"
        etp_local = svc.externalTrafficPolicy == "Local"
        external = svc.external or bool(svc.loadBalancerIPs)
        cluster_eps, local_eps = info.cluster_endpoints, info.local_endpoints
        uses_cluster = bool(cluster_eps) and (not itp_local or (external and not etp_local))
        uses_local = bool(local_eps) and (itp_local or (external and etp_local))
        reachable = _reachable(info, uses_cluster, uses_local)
        has_endpoints = bool(cluster_eps) or bool(local_eps)

        affinity = svc.sessionAffinity == "ClientIP"
        endpoint_chains = affinity or not self.era.hairpin_set  # 1.36+: only for affinity
        for ep in reachable:
            if endpoint_chains:
                self.ensure_chain(f"endpoint-{_ep_base(info, ep)}", active)
            if self.era.hairpin_set and ep.node == self.node:
                self.hairpin((ep.ip, ep.ip, proto, str(ep.port)))
        if uses_cluster:
            self.ensure_chain(cluster_chain, active)
        if uses_local:
            self.ensure_chain(local_chain, active)
        internal_chain = local_chain if itp_local else cluster_chain
        has_internal = has_endpoints and not (itp_local and not local_eps)
        external_policy = local_chain if etp_local else cluster_chain
        has_external = has_endpoints and not (etp_local and not local_eps)
        uses_ext = has_endpoints and external
        if uses_ext:
            self.ensure_chain(ext_chain, active)
        # no endpoints anywhere: reject; none for this traffic policy on this node: drop
        verdict = f"goto {E.REJECT_CHAIN}" if not has_endpoints else "drop"

        if self.era.cluster_ips:
            tx.add_element(E.CLUSTER_IPS, (svc.clusterIP,))
        key = (svc.clusterIP, proto, str(port))
        if has_internal:
            tx.add_element(E.SERVICE_IPS, key, f"goto {internal_chain}", kind="map")
        else:
            tx.add_element(E.NO_ENDPOINT_SERVICES, key, verdict, s_name, kind="map")
        for ip in svc.externalIPs:
            if has_endpoints:
                tx.add_element(E.SERVICE_IPS, (ip, proto, str(port)), f"goto {ext_chain}", kind="map")
            if not has_external:
                tx.add_element(E.NO_ENDPOINT_SERVICES, (ip, proto, str(port)), verdict, s_name,
                               kind="map")

        node_ip = ipaddress.IPv4Address(self.topo.node(self.node).ip)
        allow_from_node = any(node_ip in ipaddress.IPv4Network(c) for c in svc.loadBalancerSourceRanges)
        uses_fw = bool(svc.loadBalancerIPs) and bool(svc.loadBalancerSourceRanges) and not self.era.firewall_sets
        if uses_fw:
            self.ensure_chain(fw_chain, active)
            sources = list(svc.loadBalancerSourceRanges)
            if allow_from_node:
                sources += svc.loadBalancerIPs
            tx.add_rule(fw_chain, f"ip saddr != {{ {' , '.join(sources)} }} drop")
        for ip in svc.loadBalancerIPs:
            if has_endpoints:
                tx.add_element(E.SERVICE_IPS, (ip, proto, str(port)), f"goto {ext_chain}", kind="map")
            if uses_fw:
                comment = s_name if self.era.firewall_element_comment else None
                tx.add_element(E.FIREWALL_IPS, (ip, proto, str(port)), f"goto {fw_chain}", comment, kind="map")
            elif self.era.firewall_sets and svc.loadBalancerSourceRanges:
                tx.add_element(E.FIREWALL, (ip, proto, str(port)), comment=s_name)
                for src in svc.loadBalancerSourceRanges:
                    tx.add_element(E.FIREWALL_ALLOW, (ip, proto, str(port), src), comment=s_name)
                if allow_from_node:
                    tx.add_element(E.FIREWALL_ALLOW, (ip, proto, str(port), ip))
        if not has_external:
            for ip in svc.loadBalancerIPs:
                tx.add_element(E.NO_ENDPOINT_SERVICES, (ip, proto, str(port)), verdict, s_name,
                               kind="map")
        node_port = info.port.nodePort if svc.type in ("NodePort", "LoadBalancer") else None
        if node_port:
            if proto in st.localhost_rejects:
                tx.add_element(E.LOCALHOST_REJECT_MAP, (proto, str(node_port)),
                               f"goto {E.localhost_reject_chain(proto)}", kind="map")
            if has_endpoints:
                tx.add_element(E.SERVICE_NODEPORTS, (proto, str(node_port)), f"goto {ext_chain}", kind="map")
            if not has_external:
                tx.add_element(E.NO_ENDPOINT_NODEPORTS, (proto, str(node_port)), verdict, s_name,
                               kind="map")

        if has_internal and not self.era.hairpin_set:
            match = f"ip daddr {svc.clusterIP}" + (f" {proto} dport {port}" if self.era.cip_masq_port else "")
            if st.masquerade_all:
                tx.add_rule(internal_chain, f"{match} {self.masq()}")
            elif st.detector:
                tx.add_rule(internal_chain, f"{match} {st.detector.if_not_local_nft} {self.masq()}")

        if uses_ext:
            if not etp_local:
                tx.add_rule(ext_chain, self.masq(), self.masq_comment("masquerade"))
            else:
                if st.detector:
                    tx.add_rule(ext_chain, f"{st.detector.if_local_nft} goto {cluster_chain}",
                                "short-circuit pod traffic")
                tx.add_rule(ext_chain, f"fib saddr type local {self.masq()}", "masquerade local traffic")
                tx.add_rule(ext_chain, f"fib saddr type local goto {cluster_chain}", "short-circuit local traffic")
            if has_external:
                tx.add_rule(ext_chain, f"goto {external_policy}")

        if affinity:
            for ep in reachable:
                tx.add_set("set", f"affinity-{_ep_base(info, ep)}", "ipv4_addr", flags=("dynamic", "timeout"),
                           timeout=svc.sessionAffinityTimeout)
        write = self.dispatch if endpoint_chains else self.dnat_map
        if uses_cluster:
            write(cluster_chain, cluster_eps, info, affinity)
        if uses_local:
            write(local_chain, local_eps, info, affinity)
        for ep in reachable if endpoint_chains else ():
            chain = f"endpoint-{_ep_base(info, ep)}"
            if not self.era.hairpin_set:  # 1.36+: the hairpin-connections set instead
                tx.add_rule(chain, f"ip saddr {ep.ip} {self.masq()}")
            if affinity:
                tx.add_rule(chain, f"update @affinity-{_ep_base(info, ep)} {{ ip saddr }}")
            tx.add_rule(chain, f"meta l4proto {proto} dnat to {ep.hostport}")

    def dispatch(self, chain: str, eps: tuple[EndpointInfo, ...], info: ServicePortInfo, affinity: bool) -> None:
        """writeServiceToEndpointRules: affinity lookups, then one numgen vmap over the endpoints."""
        if affinity:
            for ep in eps:
                b = _ep_base(info, ep)
                self.tx.add_rule(chain, f"ip saddr @affinity-{b} goto endpoint-{b}")
        arms = " , ".join(f"{i} : goto endpoint-{_ep_base(info, ep)}" for i, ep in enumerate(eps))
        self.tx.add_rule(chain, f"numgen random mod {len(eps)} vmap {{ {arms} }}")

    def dnat_map(self, chain: str, eps: tuple[EndpointInfo, ...], info: ServicePortInfo, _affinity: bool) -> None:
        """writeServiceToEndpointDNATs (1.36+): the policy chain DNATs through an anonymous map; 1.37+
        a single endpoint directly (`dnat to A:P`)."""
        if self.era.single_endpoint_dnat and len(eps) == 1:
            self.tx.add_rule(chain, f"meta l4proto {info.protocol} dnat to {eps[0].hostport}")
            return
        arms = " , ".join(f"{i} : {ep.ip} . {ep.port}" for i, ep in enumerate(eps))
        self.tx.add_rule(chain, f"meta l4proto {info.protocol} dnat ip addr . port to numgen random mod {len(eps)} "
                                f"map {{ {arms} }}")

    def hairpin(self, key: tuple[str, ...]) -> None:
        """A hairpin-connections element (1.36+), added once however many service ports share it."""
        if key not in self.hairpins:
            self.hairpins.add(key)
            self.tx.add_element(E.HAIRPIN, key)


def _reachable(info: ServicePortInfo, uses_cluster: bool, uses_local: bool) -> tuple[EndpointInfo, ...]:
    """allLocallyReachableEndpoints: cluster, local, or their union (endpoint-list order)."""
    keep = set()
    if uses_cluster:
        keep |= {e.hostport for e in info.cluster_endpoints}
    if uses_local:
        keep |= {e.hostport for e in info.local_endpoints}
    return tuple(e for e in info.endpoints if e.hostport in keep)


def nftables_transaction(topo: Topology, node: str, mark: str | None = None) -> Transaction:
    """The transaction kube-proxy (nftables mode) sends on its first sync on `node`."""
    return _Sync(topo, node, settings_for(topo, node, mark)).run()
