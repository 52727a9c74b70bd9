"""What kube-proxy in IPVS mode programs on one node: ipsets, iptables, kube-ipvs0, IPVS, sysctls.

`ipvs_rules(topo, node)` is pure. Choices kpemu makes where kube-proxy has none or the reference
leaves it open:

- Node addresses (GetAllLocalAddressesExcept("kube-ipvs0"), minus loopback and link-local): the
  node's underlay IP plus the addresses its CNI puts on the node's devices (kpemu.cni.node_addresses,
  e.g. flannel.1's and cni0's, or tunl0's). Kube-proxy of 1.21 and
  older also created NodePort virtual servers on 127.0.0.1 (`Flavour.ipvs_localhost_nodeport_vs`).
  `nodePortAddresses` filters the list as kube-proxy does.
- ipsets are created in the order of reference 3.1 (kube-proxy iterates a Go map); members and
  kube-ipvs0 addresses are in numeric order.
- Jumps from built-in chains are rendered as `-A` lines in their final order (what the prepends
  produce on an empty chain); `IpvsState.jumps_prepend_order` has kube-proxy's call order.
- conn_reuse_mode depends on the kernel: pass `kernel=(major, minor)`; None means a kernel >= 5.9
  (value left alone, as kube-proxy does there).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from kpemu import cni as cni_registry
from kpemu.model.topology import Topology
from kpemu.proxy.endpoints import EndpointInfo, ServicePortInfo, service_ports
from kpemu.proxy.ipvs import ipset_text, ipvsadm_text
from kpemu.proxy.ipvs.ipset_text import IpSet
from kpemu.proxy.ipvs.iptables import IpvsIptables, ipvs_iptables
from kpemu.proxy.ipvs.ipvsadm_text import RealServer, VirtualServer
from kpemu.proxy.localdetect import local_detector
from kpemu.proxy.rules import JumpRule
from kpemu.proxy.versions import Flavour, flavour_for

DUMMY_DEVICE = "kube-ipvs0"

# Reference 3.1, in ipsetInfo order: (name, type, comment).
SET_INFO: tuple[tuple[str, str, str], ...] = (
    ("KUBE-LOOP-BACK", "hash:ip,port,ip", "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"),
    ("KUBE-CLUSTER-IP", "hash:ip,port", "Kubernetes service cluster ip + port for masquerade purpose"),
    ("KUBE-EXTERNAL-IP", "hash:ip,port", "Kubernetes service external ip + port for masquerade and filter purpose"),
    (
        "KUBE-EXTERNAL-IP-LOCAL",
        "hash:ip,port",
        "Kubernetes service external ip + port with externalTrafficPolicy=local",
    ),
    ("KUBE-LOAD-BALANCER", "hash:ip,port", "Kubernetes service lb portal"),
    (
        "KUBE-LOAD-BALANCER-FW",
        "hash:ip,port",
        "Kubernetes service load balancer ip + port for load balancer with sourceRange",
    ),
    (
        "KUBE-LOAD-BALANCER-LOCAL",
        "hash:ip,port",
        "Kubernetes service load balancer ip + port with externalTrafficPolicy=local",
    ),
    (
        "KUBE-LOAD-BALANCER-SOURCE-IP",
        "hash:ip,port,ip",
        "Kubernetes service load balancer ip + port + source IP for packet filter purpose",
    ),
    (
        "KUBE-LOAD-BALANCER-SOURCE-CIDR",
        "hash:ip,port,net",
        "Kubernetes service load balancer ip + port + source cidr for packet filter purpose",
    ),
    ("KUBE-NODE-PORT-TCP", "bitmap:port", "Kubernetes nodeport TCP port for masquerade purpose"),
    ("KUBE-NODE-PORT-LOCAL-TCP", "bitmap:port", "Kubernetes nodeport TCP port with externalTrafficPolicy=local"),
    ("KUBE-NODE-PORT-UDP", "bitmap:port", "Kubernetes nodeport UDP port for masquerade purpose"),
    ("KUBE-NODE-PORT-LOCAL-UDP", "bitmap:port", "Kubernetes nodeport UDP port with externalTrafficPolicy=local"),
    (
        "KUBE-NODE-PORT-SCTP-HASH",
        "hash:ip,port",
        "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'",
    ),
    (
        "KUBE-NODE-PORT-LOCAL-SCTP-HASH",
        "hash:ip,port",
        "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
    ),
    ("KUBE-HEALTH-CHECK-NODE-PORT", "bitmap:port", "Kubernetes health check node port"),
    ("KUBE-IPVS-IPS", "hash:ip", "Addresses on the ipvs interface"),
)


@dataclass(frozen=True)
class IpvsState:
    """Everything kube-proxy (IPVS mode) programs on one node, in canonical order."""

    node: str
    flavour: Flavour
    ipsets: tuple[IpSet, ...]
    iptables: IpvsIptables
    node_addresses: tuple[str, ...]  # the addresses NodePort virtual servers listen on
    bound_addresses: tuple[str, ...]  # /32s on kube-ipvs0
    virtual_servers: tuple[VirtualServer, ...]  # ipvsadm order
    sysctls: tuple[tuple[str, str], ...]  # (key below /proc/sys, value)

    @property
    def jumps(self) -> tuple[JumpRule, ...]:
        """Jumps from built-in chains, in their final order in each chain."""
        return self.iptables.jumps

    @property
    def jumps_prepend_order(self) -> tuple[JumpRule, ...]:
        """Jumps in the order kube-proxy prepends them (EnsureRule(Prepend, ...))."""
        return self.iptables.jumps_prepend_order

    def ipset(self, name: str) -> IpSet:
        """One set by name (KeyError if this release does not create it)."""
        return next(s for s in self.ipsets if s.name == name)

    def restore_text(self, jumps: bool = True) -> str:
        """iptables-restore input: *nat then *filter, chain lines, [jumps], rules, COMMIT."""
        ipt = self.iptables
        out: list[str] = []
        for table, chains, rules in (
            ("nat", ipt.nat_chains, ipt.nat_rules),
            ("filter", ipt.filter_chains, ipt.filter_rules),
        ):
            out.append(f"*{table}")
            out.extend(f":{c} - [0:0]" for c in chains)
            if jumps:
                out.extend(j.line for j in _by_builtin(ipt.jumps, table))
            out.extend(rules)
            out.append("COMMIT")
        return "\n".join(out) + "\n"

    def ipset_save_text(self) -> str:
        """What `ipset save` prints for these sets (canonical: no initval, members sorted)."""
        return ipset_text.save_text(self.ipsets)

    def ipvsadm_text(self) -> str:
        """What `ipvsadm -Sn` prints for the virtual servers."""
        return ipvsadm_text.ipvsadm_save(self.virtual_servers)


_BUILTIN_ORDER = {"PREROUTING": 0, "INPUT": 1, "FORWARD": 2, "OUTPUT": 3, "POSTROUTING": 4}


def _by_builtin(jumps: tuple[JumpRule, ...], table: str) -> list[JumpRule]:
    """Jumps of one table grouped by built-in chain (iptables-save order), order kept inside."""
    own = [j for j in jumps if j.table == table]
    return sorted(own, key=lambda j: _BUILTIN_ORDER[j.chain])


def node_addresses(topo: Topology, node: str, f: Flavour) -> tuple[str, ...]:
    """Addresses kube-proxy finds on the node for NodePort virtual servers (module docstring)."""
    addrs = list(cni_registry.node_addresses(topo, node))
    npa = [ipaddress.IPv4Network(c) for c in topo.kubeProxy.nodePortAddresses]
    if npa:
        return tuple(sorted({a for a in addrs if any(ipaddress.IPv4Address(a) in c for c in npa)}, key=_ipkey))
    if f.ipvs_localhost_nodeport_vs:
        addrs.append("127.0.0.1")
    return tuple(sorted(set(addrs), key=_ipkey))


def _ipkey(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


def _members(info: ServicePortInfo, node_ip: str, addrs: tuple[str, ...]) -> dict[str, set[str]]:
    """ipset members contributed by one service port (reference 3.1 'Entries')."""
    svc, port, proto = info.service, info.port, info.protocol
    local = svc.externalTrafficPolicy == "Local"
    m: dict[str, set[str]] = {name: set() for name, _, _ in SET_INFO}
    m["KUBE-CLUSTER-IP"].add(f"{svc.clusterIP},{proto}:{port.port}")
    for ep in info.endpoints:
        if ep.node == info.node:
            m["KUBE-LOOP-BACK"].add(f"{ep.ip},{proto}:{ep.port},{ep.ip}")
    for ip in svc.externalIPs:
        m["KUBE-EXTERNAL-IP-LOCAL" if local else "KUBE-EXTERNAL-IP"].add(f"{ip},{proto}:{port.port}")
    for ip in svc.loadBalancerIPs:
        entry = f"{ip},{proto}:{port.port}"
        m["KUBE-LOAD-BALANCER"].add(entry)
        if local:
            m["KUBE-LOAD-BALANCER-LOCAL"].add(entry)
        if svc.loadBalancerSourceRanges:
            m["KUBE-LOAD-BALANCER-FW"].add(entry)
            for cidr in svc.loadBalancerSourceRanges:
                m["KUBE-LOAD-BALANCER-SOURCE-CIDR"].add(f"{entry},{cidr}")
            if _allow_from_node(svc.loadBalancerSourceRanges, node_ip):
                m["KUBE-LOAD-BALANCER-SOURCE-IP"].add(f"{entry},{ip}")
    if port.nodePort and svc.type in ("NodePort", "LoadBalancer"):
        if proto == "sctp":
            for a in addrs:
                m["KUBE-NODE-PORT-SCTP-HASH"].add(f"{a},sctp:{port.nodePort}")
                if local:
                    m["KUBE-NODE-PORT-LOCAL-SCTP-HASH"].add(f"{a},sctp:{port.nodePort}")
        else:
            m[f"KUBE-NODE-PORT-{proto.upper()}"].add(str(port.nodePort))
            if local:
                m[f"KUBE-NODE-PORT-LOCAL-{proto.upper()}"].add(str(port.nodePort))
    if svc.healthCheckNodePort:
        m["KUBE-HEALTH-CHECK-NODE-PORT"].add(str(svc.healthCheckNodePort))
    return m


def _allow_from_node(ranges: list[str], node_ip: str) -> bool:
    return any(ipaddress.IPv4Address(node_ip) in ipaddress.IPv4Network(c) for c in ranges)


def _real_servers(eps: tuple[EndpointInfo, ...]) -> tuple[RealServer, ...]:
    return tuple(ipvsadm_text.sort_real_servers([RealServer(e.ip, e.port) for e in eps]))


def _virtual_servers(
    info: ServicePortInfo, addrs: tuple[str, ...], scheduler: str, etp_local_fallback: bool
) -> list[VirtualServer]:
    svc, port = info.service, info.port
    flags, timeout = 0, 0
    if svc.sessionAffinity == "ClientIP":
        flags, timeout = ipvsadm_text.FLAG_PERSISTENT, svc.sessionAffinityTimeout
    if scheduler == "mh":
        flags |= ipvsadm_text.FLAG_SCHED2
    internal = info.local_endpoints if svc.internalTrafficPolicy == "Local" else info.cluster_endpoints
    external = info.cluster_endpoints
    if svc.externalTrafficPolicy == "Local":
        external = info.local_endpoints
        if not external and etp_local_fallback:  # PR #97081 (1.21)
            external = info.cluster_endpoints

    def vs(address: str, p: int, eps: tuple[EndpointInfo, ...], kind: str) -> VirtualServer:
        return VirtualServer(port.protocol, address, p, scheduler, flags, timeout, _real_servers(eps), kind)

    out = [vs(svc.clusterIP, port.port, internal, "clusterIP")]
    out += [vs(ip, port.port, external, "externalIP") for ip in svc.externalIPs]
    out += [vs(ip, port.port, external, "loadBalancer") for ip in svc.loadBalancerIPs]
    if port.nodePort and svc.type in ("NodePort", "LoadBalancer"):
        out += [vs(a, port.nodePort, external, "nodePort") for a in addrs]
    return out


def _sysctls(f: Flavour, kernel: tuple[int, int] | None) -> tuple[tuple[str, str], ...]:
    """Reference 3.6; conn_reuse_mode only for 4.1 <= kernel < 5.9."""
    out = [("net/ipv4/vs/conntrack", "1")]
    if f.conn_reuse_mode_zero and kernel is not None and (4, 1) <= kernel < (5, 9):
        out.append(("net/ipv4/vs/conn_reuse_mode", "0"))
    if f.conn_reuse_mode_zero:  # expire_* arrived with conn_reuse_mode (PR #71114, 1.13)
        out += [("net/ipv4/vs/expire_nodest_conn", "1"), ("net/ipv4/vs/expire_quiescent_template", "1")]
    out.append(("net/ipv4/ip_forward", "1"))
    if f.ipvs_route_localnet:
        out.append(("net/ipv4/conf/all/route_localnet", "1"))
    return tuple(out)


def ipvs_rules(topo: Topology, node: str, kernel: tuple[int, int] | None = None) -> IpvsState:
    """The IPVS-mode state kube-proxy would program on `node` (pure; see the module docstring)."""
    kp = topo.kubeProxy
    f = flavour_for(kp)
    n = topo.node(node)
    addrs = node_addresses(topo, node, f)
    infos = service_ports(topo, node)

    members: dict[str, set[str]] = {name: set() for name, _, _ in SET_INFO}
    vss: list[VirtualServer] = []
    out_filter: list[tuple[str, str, int]] = []
    for info in infos:
        for name, entries in _members(info, n.ip, addrs).items():
            members[name] |= entries
        vss += _virtual_servers(info, addrs, kp.scheduler, etp_local_fallback=f.ipvs_etp_local_fallback)
        svc = info.service
        if svc.loadBalancerSourceRanges and not _allow_from_node(svc.loadBalancerSourceRanges, n.ip):
            out_filter += [(ip, info.protocol, info.port.port) for ip in svc.loadBalancerIPs]

    # Bound: every ClusterIP; external and LB IPs unless already a node address.
    bound = {s.clusterIP for s in topo.services}
    bound |= {ip for s in topo.services for ip in (*s.externalIPs, *s.loadBalancerIPs) if ip not in addrs}
    bound_sorted = tuple(sorted(bound, key=_ipkey))
    if f.ipvs_filter:
        members["KUBE-IPVS-IPS"] = set(bound_sorted)

    set_names = [name for name, _, _ in SET_INFO if f.ipvs_filter or name != "KUBE-IPVS-IPS"]
    info_by_name = {name: (t, c) for name, t, c in SET_INFO}
    sets = tuple(
        ipset_text.make_set(name, info_by_name[name][0], info_by_name[name][1], members[name]) for name in set_names
    )
    ipt = ipvs_iptables(
        f,
        {s.name: s for s in sets},
        cluster_cidr=kp.clusterCIDR,
        masquerade_all=kp.masqueradeAll,
        detector=local_detector(topo, node),
        masquerade_bit=kp.masqueradeBit,
        out_filter=tuple(dict.fromkeys(out_filter)),
    )
    return IpvsState(
        node=node,
        flavour=f,
        ipsets=sets,
        iptables=ipt,
        node_addresses=addrs,
        bound_addresses=bound_sorted,
        virtual_servers=tuple(ipvsadm_text.sort_services(_dedupe(vss))),
        sysctls=_sysctls(f, kernel),
    )


def _dedupe(vss: list[VirtualServer]) -> list[VirtualServer]:
    """One virtual server per (protocol, address, port): the first service port wins."""
    seen: dict[tuple[str, str, int], VirtualServer] = {}
    for v in vss:
        seen.setdefault((v.protocol, v.address, v.port), v)
    return list(seen.values())
