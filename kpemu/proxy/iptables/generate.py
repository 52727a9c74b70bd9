"""kube-proxy iptables mode: the rules it (and kubelet) leave on one node, for a given release.

`iptables_rules(topo, node)` returns a `RuleSet` (tables -> chains -> `Rule`s). Tables are in
kube-proxy's write order (filter, nat), chains in the order of their `:CHAIN` lines, rules in
generation order; services in topology order (upstream iterates a Go map, i.e. random order).
`restore_text(ruleset)` is the iptables-restore input kpemu applies: kube-proxy's restore input
plus kubelet's chains and the built-in chain jumps (`-I CHAIN 1`, in the order kube-proxy's
`EnsureRule(Prepend)` calls run, kubelet's first, so the result matches a real node).

Version differences come only from `versions.Flavour`; rule shapes follow
reference/kube-proxy.md sections 2.2-2.8 (current), 4.1 (1.21-1.23) and 9.2 (legacy).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from kpemu.model.topology import Topology
from kpemu.proxy import naming
from kpemu.proxy.endpoints import EndpointInfo, ServicePortInfo, service_ports
from kpemu.proxy.localdetect import local_detector
from kpemu.proxy.naming import NFACCT_COUNTERS
from kpemu.proxy.rules import JumpRule, RuleSet, Table
from kpemu.proxy.versions import Flavour, flavour_for

MARK_MASQ, MARK_DROP = "KUBE-MARK-MASQ", "KUBE-MARK-DROP"
SERVICES, EXT_SERVICES, NODEPORTS = "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS"
POSTROUTING, FORWARD, PROXY_FIREWALL = "KUBE-POSTROUTING", "KUBE-FORWARD", "KUBE-PROXY-FIREWALL"
FIREWALL, CANARY = "KUBE-FIREWALL", "KUBE-PROXY-CANARY"
LARGE_CLUSTER_THRESHOLD = 1000
NODEPORTS_LAST = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"
LOCALNET_RULE = ("-m", "comment", "--comment", "block incoming localnet connections",
                 "-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8",
                 "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
MARK_DROP_FIREWALL = ("-m", "comment", "--comment", "kubernetes firewall for dropping marked packets",
                      "-m", "mark", "--mark", "0x00008000/0x00008000", "-j", "DROP")


def jump_list(fl: Flavour) -> list[JumpRule]:
    """kubelet's then kube-proxy's prepended jumps from built-in chains, in call order (2.2)."""
    new = ("-m", "conntrack", "--ctstate", "NEW")
    j = JumpRule
    out = [j("filter", "INPUT", FIREWALL, owner="kubelet"), j("filter", "OUTPUT", FIREWALL, owner="kubelet")]
    portals, ext = "kubernetes service portals", "kubernetes externally-visible service portals"
    out.append(j("filter", "INPUT", EXT_SERVICES, ext, new))
    if fl.forward_external_services_jump:
        out.append(j("filter", "FORWARD", EXT_SERVICES, ext, new))
    if fl.health_check_jump:
        out.append(j("filter", "INPUT", NODEPORTS, "kubernetes health check service ports"))
    if fl.forward_services_jump:
        out.append(j("filter", "FORWARD", SERVICES, portals, new))
    out.append(j("filter", "OUTPUT", SERVICES, portals, new))
    if fl.input_services_jump:
        out.append(j("filter", "INPUT", SERVICES, portals, new))
    out.append(j("filter", "FORWARD", FORWARD, "kubernetes forwarding rules"))
    if fl.proxy_firewall:
        for frm in ("INPUT", "OUTPUT", "FORWARD"):
            out.append(j("filter", frm, PROXY_FIREWALL, "kubernetes load balancer firewall", new))
    out.append(j("nat", "OUTPUT", SERVICES, portals))
    out.append(j("nat", "PREROUTING", SERVICES, portals))
    out.append(j("nat", "POSTROUTING", POSTROUTING, "kubernetes postrouting rules"))
    return out


def final_jump_order(jumps: Iterable[JumpRule]) -> dict[tuple[str, str], list[JumpRule]]:
    """What prepending each jump in turn leaves in every built-in chain (top first)."""
    out: dict[tuple[str, str], list[JumpRule]] = {}
    for jp in jumps:
        out.setdefault((jp.table, jp.chain), []).insert(0, jp)
    return out


class _Gen:
    """One sync of kube-proxy's syncProxyRules for one node."""

    def __init__(self, topo: Topology, node: str):
        self.topo, self.node = topo, node
        kp = topo.kubeProxy
        self.fl = flavour_for(kp)
        self.cidr = kp.clusterCIDR  # the pod rules of releases before 1.18, which had no detector
        self.det = local_detector(topo, node)
        self.masq_all = kp.masqueradeAll
        bit = 1 << kp.masqueradeBit
        self.mark = naming.go_hex(bit)
        self.node_ip = topo.require_node(node).ip
        self.rs = RuleSet()
        self.filter: Table = self.rs.table("filter")
        self.nat: Table = self.rs.table("nat")
        self.infos = service_ports(topo, node)
        total = sum(len(i.endpoints) for i in self.infos)
        self.large = self.fl.large_cluster_mode and total > LARGE_CLUSTER_THRESHOLD

    # -- helpers ----------------------------------------------------------------------------
    def host(self, ip: str) -> str:
        return f"{ip}/32" if self.fl.to_cidr else ip

    def s_name(self, info: ServicePortInfo) -> str:
        svc = info.service
        return naming.service_port_name(svc.namespace, svc.name, info.port.name, self.fl.port_name_colon)

    def ep_comment(self, text: str) -> tuple[str, ...]:
        if not self.fl.endpoint_comments or self.large:
            return ()
        return ("-m", "comment", "--comment", text)

    def masq_rule(self, chain: str, args: tuple[str, ...]) -> None:
        """The ClusterIP/externalIP masquerade rule (masqueradeAll / ! -s clusterCIDR / none)."""
        if self.masq_all:
            self.nat.add(chain, *args, "-j", MARK_MASQ)
        elif self.det:
            self.nat.add(chain, *args, *self.det.if_not_local, "-j", MARK_MASQ)

    # -- whole sync -------------------------------------------------------------------------
    def run(self) -> RuleSet:
        fl = self.fl
        for ch in (SERVICES, EXT_SERVICES, FORWARD):
            self.filter.chain(ch)
        if fl.health_check_jump:
            self.filter.chain(NODEPORTS)
        if fl.proxy_firewall:
            self.filter.chain(PROXY_FIREWALL)
        if fl.proxy_kube_firewall and fl.localhost_nodeports:
            self.filter.chain(FIREWALL)
        for ch in (SERVICES, NODEPORTS, POSTROUTING, MARK_MASQ):
            self.nat.chain(ch)
        m = self.mark
        if fl.xor_mark:
            self.nat.add(POSTROUTING, "-m", "mark", "!", "--mark", f"{m}/{m}", "-j", "RETURN")
            self.nat.add(POSTROUTING, "-j", "MARK", "--xor-mark", m)
            tail = ("--random-fully",) if fl.random_fully else ()
            self.nat.add(POSTROUTING, "-m", "comment", "--comment", "kubernetes service traffic requiring SNAT",
                         "-j", "MASQUERADE", *tail)
        else:
            tail = ("--random-fully",) if fl.random_fully else ()
            self.nat.add(POSTROUTING, "-m", "comment", "--comment", "kubernetes service traffic requiring SNAT",
                         "-m", "mark", "--mark", f"{m}/{m}", "-j", "MASQUERADE", *tail)
        if fl.or_mark:
            self.nat.add(MARK_MASQ, "-j", "MARK", "--or-mark", m)
        else:
            self.nat.add(MARK_MASQ, "-j", "MARK", "--set-xmark", f"{m}/{m}")
        if fl.proxy_kube_firewall and fl.localhost_nodeports:
            self.filter.add(FIREWALL, *LOCALNET_RULE)

        for info in self.infos:
            if fl.ext_chains:
                self.service_current(info)
            else:
                self.service_legacy(info)

        self.nodeports_last_rule()
        self.forward_rules()
        self.kubelet_and_canary()
        self.jumps()
        return self.rs

    def nodeports_last_rule(self) -> None:
        npa = self.topo.kubeProxy.nodePortAddresses
        head = ("-m", "comment", "--comment", NODEPORTS_LAST)
        if not npa:
            extra: tuple[str, ...] = ()
            if self.fl.localhost_nodeports_flag and not self.fl.localhost_nodeports:
                extra = ("!", "-d", "127.0.0.0/8")
            self.nat.add(SERVICES, *head, "-m", "addrtype", "--dst-type", "LOCAL", *extra, "-j", NODEPORTS)
            return
        nets = [ipaddress.IPv4Network(c) for c in npa]
        if any(n.prefixlen == 0 for n in nets):
            self.nat.add(SERVICES, *head, "-m", "addrtype", "--dst-type", "LOCAL", "-j", NODEPORTS)
            return
        # Node addresses kpemu knows: the node IP and loopback (sorted like sets.List()).
        addrs = sorted({a for a in (self.node_ip, "127.0.0.1")
                        if any(ipaddress.IPv4Address(a) in n for n in nets)})
        for a in addrs:
            self.nat.add(SERVICES, *head, "-d", a, "-j", NODEPORTS)

    def forward_rules(self) -> None:
        fl, m = self.fl, self.mark
        # 1.29+ omits it when nf_conntrack_tcp_be_liberal is set (kube-proxy sets it for conntrack.tcpBeLiberal)
        if fl.forward_invalid_drop and not (fl.minor >= 29 and self.topo.kubeProxy.tcpBeLiberal):
            acct = ("-m", "nfacct", "--nfacct-name", NFACCT_COUNTERS[0]) if fl.nfacct else ()
            self.filter.add(FORWARD, "-m", "conntrack", "--ctstate", "INVALID", *acct, "-j", "DROP")
        self.filter.add(FORWARD, "-m", "comment", "--comment", "kubernetes forwarding rules",
                        "-m", "mark", "--mark", f"{m}/{m}", "-j", "ACCEPT")
        ct = ("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
        if fl.forward_single_conntrack:
            self.filter.add(FORWARD, "-m", "comment", "--comment", "kubernetes forwarding conntrack rule", *ct)
        elif fl.forward_pod_rules_cidr:
            if self.cidr:
                self.filter.add(FORWARD, "-s", self.cidr, "-m", "comment", "--comment",
                                "kubernetes forwarding conntrack pod source rule", *ct)
                self.filter.add(FORWARD, "-m", "comment", "--comment",
                                "kubernetes forwarding conntrack pod destination rule", "-d", self.cidr, *ct)
        elif fl.forward_pod_rules:
            self.filter.add(FORWARD, "-m", "comment", "--comment",
                            "kubernetes forwarding conntrack pod source rule", *ct)
            self.filter.add(FORWARD, "-m", "comment", "--comment",
                            "kubernetes forwarding conntrack pod destination rule", *ct)

    def kubelet_and_canary(self) -> None:
        fl = self.fl
        if fl.kubelet_mark_drop:
            self.nat.add(MARK_DROP, "-j", "MARK", "--set-xmark", "0x00008000/0x00008000", owner="kubelet")
        fw = self.filter.chain(FIREWALL)
        if not fw.rules:  # kube-proxy did not write it (before 1.28 or localhost NodePorts off)
            if fl.kubelet_mark_drop:
                self.filter.add(FIREWALL, *MARK_DROP_FIREWALL, owner="kubelet")
            if fl.kubelet_localnet_rule:
                self.filter.add(FIREWALL, *LOCALNET_RULE, owner="kubelet")
        if fl.canary:
            for t in ("mangle", "nat", "filter"):
                self.rs.table(t).chain(CANARY)

    def jumps(self) -> None:
        for (table, chain), jumps in final_jump_order(jump_list(self.fl)).items():
            t = self.rs.table(table)
            for jp in jumps:
                t.add(chain, *jp.args, owner=jp.owner)

    # -- per service port ---------------------------------------------------------------------
    def reject(self, chain: str, comment: str, target: str, proto: str, dst: str | None,
               port: int, local: bool = False) -> None:
        addr = ("-m", "addrtype", "--dst-type", "LOCAL") if local else ()
        d = ("-d", dst) if dst else ()
        self.filter.add(chain, "-m", "comment", "--comment", comment, *addr,
                        "-m", proto, "-p", proto, *d, "--dport", str(port), "-j", target)

    def endpoint_rules(self, info: ServicePortInfo, s: str, chain: str, eps: list[EndpointInfo],
                       arrow: bool) -> None:
        """writeServiceToEndpointRules: affinity rules, then the probability ladder."""
        proto = info.protocol
        svc = info.service

        def com(ep: EndpointInfo) -> tuple[str, ...]:
            return self.ep_comment(f"{s} -> {ep.hostport}" if arrow else s)

        if svc.sessionAffinity == "ClientIP":
            for ep in eps:
                sep = naming.sep_chain(s, proto, ep.hostport)
                self.nat.add(chain, *com(ep), "-m", "recent", "--name", sep, "--rcheck",
                             "--seconds", str(svc.sessionAffinityTimeout), "--reap", "-j", sep)
        n = len(eps)
        for i, ep in enumerate(eps):
            sep = naming.sep_chain(s, proto, ep.hostport)
            stat = ("-m", "statistic", "--mode", "random", "--probability", self.fl.probability(n - i)) \
                if i < n - 1 else ()
            self.nat.add(chain, *com(ep), *stat, "-j", sep)

    def sep_rules(self, info: ServicePortInfo, s: str, eps: list[EndpointInfo]) -> None:
        proto = info.protocol
        for ep in eps:
            sep = naming.sep_chain(s, proto, ep.hostport)
            self.nat.chain(sep)
            c = self.ep_comment(s)
            self.nat.add(sep, *c, "-s", self.host(ep.ip), "-j", MARK_MASQ)
            rec = ("-m", "recent", "--name", sep, "--set") if info.service.sessionAffinity == "ClientIP" else ()
            self.nat.add(sep, *c, *rec, "-m", proto, "-p", proto, "-j", "DNAT", "--to-destination", ep.hostport)

    def service_current(self, info: ServicePortInfo) -> None:
        """v1.24+ (section 2.6): SVC / SVL / EXT / FW chains."""
        fl, svc, port = self.fl, info.service, info.port
        s, p = self.s_name(info), info.protocol
        ext_access = svc.external
        etp_local = ext_access and svc.externalTrafficPolicy == "Local"
        itp_local = svc.internalTrafficPolicy == "Local"
        uses_cluster = not itp_local or (ext_access and not etp_local)
        uses_local = itp_local or etp_local
        cluster = list(info.cluster_endpoints) if uses_cluster else []
        local = list(info.local_endpoints) if uses_local else []
        reach = {e.hostport for e in cluster} | {e.hostport for e in local}
        all_eps = [e for e in info.endpoints if e.hostport in reach]
        has_eps = bool(info.cluster_endpoints) or bool(info.local_endpoints)
        internal = local if itp_local else cluster
        external = local if etp_local else cluster
        svc_c, svl_c = naming.svc_chain(s, p), naming.svl_chain(s, p)
        ext_c, fw_c = naming.ext_chain(s, p), naming.fw_chain(s, p)
        internal_chain = svl_c if itp_local else svc_c
        external_chain = svl_c if etp_local else svc_c
        uses_svc = bool(cluster) and uses_cluster
        uses_svl = bool(local) and uses_local
        uses_ext = has_eps and ext_access
        lb_ips = svc.loadBalancerIPs if svc.type == "LoadBalancer" else []
        uses_fw = has_eps and bool(lb_ips) and bool(svc.loadBalancerSourceRanges)
        lb_chain = fw_c if uses_fw else ext_c
        if uses_svc:
            self.nat.chain(svc_c)
        if uses_svl:
            self.nat.chain(svl_c)
        if uses_ext:
            self.nat.chain(ext_c)
        if uses_fw:
            self.nat.chain(fw_c)
        for ep in all_eps:
            self.nat.chain(naming.sep_chain(s, p, ep.hostport))
        ext_target = "DROP" if has_eps else "REJECT"
        ext_comment = f"{s} has no local endpoints" if has_eps else f"{s} has no endpoints"
        dport = str(port.port)
        # ClusterIP
        cip = ("-m", "comment", "--comment", f"{s} cluster IP", "-m", p, "-p", p, "-d", svc.clusterIP,
               "--dport", dport)
        if internal:
            self.nat.add(SERVICES, *cip, "-j", internal_chain)
        else:
            self.reject(SERVICES, f"{s} has no local endpoints" if has_eps else f"{s} has no endpoints",
                        "DROP" if has_eps else "REJECT", p, svc.clusterIP, port.port)
        for eip in svc.externalIPs:
            if has_eps:
                self.nat.add(SERVICES, "-m", "comment", "--comment", f"{s} external IP", "-m", p, "-p", p,
                             "-d", eip, "--dport", dport, "-j", ext_c)
            if not external:
                self.reject(EXT_SERVICES, ext_comment, ext_target, p, eip, port.port)
        for lb in lb_ips:
            if has_eps:
                self.nat.add(SERVICES, "-m", "comment", "--comment", f"{s} loadbalancer IP", "-m", p, "-p", p,
                             "-d", lb, "--dport", dport, "-j", lb_chain)
            if uses_fw:
                self.filter.add(PROXY_FIREWALL, "-m", "comment", "--comment",
                                f"{s} traffic not accepted by {fw_c}", "-m", p, "-p", p, "-d", lb,
                                "--dport", dport, "-j", "DROP")
        if not external:
            for lb in lb_ips:
                self.reject(EXT_SERVICES, ext_comment, ext_target, p, lb, port.port)
        if port.nodePort and svc.type in ("NodePort", "LoadBalancer"):
            np = str(port.nodePort)
            if has_eps:
                if fl.nfacct_localhost_nodeports and fl.nfacct and fl.localhost_nodeports:
                    self.nat.add(NODEPORTS, "-m", "comment", "--comment", s, "-m", p, "-p", p,
                                 "-d", "127.0.0.0/8", "--dport", np, "-m", "nfacct", "--nfacct-name",
                                 NFACCT_COUNTERS[1], "-j", ext_c)
                self.nat.add(NODEPORTS, "-m", "comment", "--comment", s, "-m", p, "-p", p, "--dport", np,
                             "-j", ext_c)
            if not external:
                self.reject(EXT_SERVICES, ext_comment, ext_target, p, None, port.nodePort, local=True)
        if svc.healthCheckNodePort and etp_local and svc.type == "LoadBalancer":
            self.filter.add(NODEPORTS, "-m", "comment", "--comment", f"{s} health check node port",
                            "-m", "tcp", "-p", "tcp", "--dport", str(svc.healthCheckNodePort), "-j", "ACCEPT")
        if not has_eps:
            return
        if internal:
            self.masq_rule(internal_chain, cip[:])
        if uses_ext:
            if not etp_local:
                self.nat.add(ext_c, "-m", "comment", "--comment",
                             f"masquerade traffic for {s} external destinations", "-j", MARK_MASQ)
            else:
                if self.det:
                    self.nat.add(ext_c, "-m", "comment", "--comment", f"pod traffic for {s} external destinations",
                                 *self.det.if_local, "-j", svc_c)
                self.nat.add(ext_c, "-m", "comment", "--comment",
                             f"masquerade LOCAL traffic for {s} external destinations",
                             "-m", "addrtype", "--src-type", "LOCAL", "-j", MARK_MASQ)
                self.nat.add(ext_c, "-m", "comment", "--comment",
                             f"route LOCAL traffic for {s} external destinations",
                             "-m", "addrtype", "--src-type", "LOCAL", "-j", svc_c)
            if external:
                self.nat.add(ext_c, "-j", external_chain)
        if uses_fw:
            head = ("-m", "comment", "--comment", f"{s} loadbalancer IP")
            allow_node = False
            for src in svc.loadBalancerSourceRanges:
                self.nat.add(fw_c, *head, "-s", src, "-j", ext_c)
                if ipaddress.IPv4Address(self.node_ip) in ipaddress.IPv4Network(src):
                    allow_node = True
            if allow_node:
                for lb in lb_ips:
                    self.nat.add(fw_c, *head, "-s", lb, "-j", ext_c)
            if fl.proxy_firewall:
                self.nat.add(fw_c, "-m", "comment", "--comment",
                             f"other traffic to {s} will be dropped by KUBE-PROXY-FIREWALL")
            else:
                self.nat.add(fw_c, *head, "-j", MARK_DROP)
        if uses_svc:
            self.endpoint_rules(info, s, svc_c, cluster, fl.sep_arrow_comment)
        if uses_svl:
            self.endpoint_rules(info, s, svl_c, local, fl.sep_arrow_comment)
        self.sep_rules(info, s, all_eps)

    def service_legacy(self, info: ServicePortInfo) -> None:
        """v1.10-1.23: KUBE-SVC, KUBE-XLB for eTP=Local, KUBE-FW for LB IPs (sections 4.1, 9.2)."""
        fl, svc, port = self.fl, info.service, info.port
        s, p = self.s_name(info), info.protocol
        eps = list(info.cluster_endpoints)
        has_eps = bool(eps)
        only_local = svc.external and svc.externalTrafficPolicy == "Local"
        svc_c, xlb_c, fw_c = naming.svc_chain(s, p), naming.xlb_chain(s, p), naming.fw_chain(s, p)
        dport = str(port.port)
        if has_eps:
            self.nat.chain(svc_c)
        if only_local:
            self.nat.chain(xlb_c)
        cip = ("-m", "comment", "--comment", f"{s} cluster IP", "-m", p, "-p", p,
               "-d", self.host(svc.clusterIP), "--dport", dport)
        if has_eps:
            self.masq_rule(svc_c if fl.masq_in_svc_chain else SERVICES, cip)
            self.nat.add(SERVICES, *cip, "-j", svc_c)
        else:
            self.reject(SERVICES, f"{s} has no endpoints", "REJECT", p, self.host(svc.clusterIP), port.port)
        for eip in svc.externalIPs:
            if has_eps:
                a = ("-m", "comment", "--comment", f"{s} external IP", "-m", p, "-p", p,
                     "-d", self.host(eip), "--dport", dport)
                if fl.external_ip_legacy:
                    self.nat.add(SERVICES, *a, "-j", MARK_MASQ)
                    self.nat.add(SERVICES, *a, "-m", "physdev", "!", "--physdev-is-in",
                                 "-m", "addrtype", "!", "--src-type", "LOCAL", "-j", svc_c)
                    self.nat.add(SERVICES, *a, "-m", "addrtype", "--dst-type", "LOCAL", "-j", svc_c)
                else:
                    dest = xlb_c if only_local else svc_c
                    if not only_local:
                        if self.det:
                            self.nat.add(svc_c, *a, *self.det.if_not_local, "-j", MARK_MASQ)
                        else:
                            self.nat.add(svc_c, *a, "-j", MARK_MASQ)
                    self.nat.add(SERVICES, *a, "-j", dest)
            else:
                self.reject(EXT_SERVICES, f"{s} has no endpoints", "REJECT", p, self.host(eip), port.port)
        lb_ips = svc.loadBalancerIPs if svc.type == "LoadBalancer" else []
        for lb in lb_ips:
            if has_eps:
                self.nat.chain(fw_c)
                self.nat.add(SERVICES, "-m", "comment", "--comment", f"{s} loadbalancer IP", "-m", p, "-p", p,
                             "-d", self.host(lb), "--dport", dport, "-j", fw_c)
                head = ("-m", "comment", "--comment", f"{s} loadbalancer IP")
                chosen = xlb_c
                if not only_local:
                    self.nat.add(fw_c, *head, "-j", MARK_MASQ)
                    chosen = svc_c
                if not svc.loadBalancerSourceRanges:
                    self.nat.add(fw_c, *head, "-j", chosen)
                else:
                    allow = False
                    for src in svc.loadBalancerSourceRanges:
                        self.nat.add(fw_c, *head, "-s", src, "-j", chosen)
                        allow |= ipaddress.IPv4Address(self.node_ip) in ipaddress.IPv4Network(src)
                    if allow:
                        self.nat.add(fw_c, *head, "-s", self.host(lb), "-j", chosen)
                self.nat.add(fw_c, *head, "-j", MARK_DROP)
            else:
                chain = EXT_SERVICES if fl.lb_reject_external else SERVICES
                self.reject(chain, f"{s} has no endpoints", "REJECT", p, self.host(lb), port.port)
        if port.nodePort and svc.type in ("NodePort", "LoadBalancer"):
            a = ("-m", "comment", "--comment", s, "-m", p, "-p", p, "--dport", str(port.nodePort))
            if has_eps:
                if not only_local:
                    self.nat.add(svc_c if fl.masq_in_svc_chain else NODEPORTS, *a, "-j", MARK_MASQ)
                    self.nat.add(NODEPORTS, *a, "-j", svc_c)
                else:
                    if fl.localhost_nodeport_masq:
                        self.nat.add(NODEPORTS, *a, "-s", "127.0.0.0/8", "-j", MARK_MASQ)
                    self.nat.add(NODEPORTS, *a, "-j", xlb_c)
            else:
                self.filter.add(EXT_SERVICES, "-m", "comment", "--comment", f"{s} has no endpoints",
                                "-m", "addrtype", "--dst-type", "LOCAL", "-m", p, "-p", p,
                                "--dport", str(port.nodePort), "-j", "REJECT")
        if svc.healthCheckNodePort and only_local and svc.type == "LoadBalancer" and fl.health_check_jump:
            self.filter.add(NODEPORTS, "-m", "comment", "--comment", f"{s} health check node port",
                            "-m", "tcp", "-p", "tcp", "--dport", str(svc.healthCheckNodePort), "-j", "ACCEPT")
        if not has_eps:
            return
        for ep in eps:
            self.nat.chain(naming.sep_chain(s, p, ep.hostport))
        # SVC chain: legacy writes the affinity/balancing rules, then each SEP chain in one pass.
        self.endpoint_rules(info, s, svc_c, eps, arrow=False)
        self.sep_rules(info, s, eps)
        if not only_local:
            return
        if self.det:
            self.nat.add(xlb_c, "-m", "comment", "--comment",
                         "Redirect pods trying to reach external loadbalancer VIP to clusterIP",
                         *self.det.if_local, "-j", svc_c)
        if fl.xlb_local_rules:
            self.nat.add(xlb_c, "-m", "comment", "--comment", f"masquerade LOCAL traffic for {s} LB IP",
                         "-m", "addrtype", "--src-type", "LOCAL", "-j", MARK_MASQ)
            self.nat.add(xlb_c, "-m", "comment", "--comment", f"route LOCAL traffic for {s} LB IP to service chain",
                         "-m", "addrtype", "--src-type", "LOCAL", "-j", svc_c)
        local = list(info.local_endpoints)
        if not local:
            self.nat.add(xlb_c, "-m", "comment", "--comment", f"{s} has no local endpoints", "-j", MARK_DROP)
            return
        if svc.sessionAffinity == "ClientIP":
            for ep in local:
                sep = naming.sep_chain(s, p, ep.hostport)
                self.nat.add(xlb_c, "-m", "comment", "--comment", s, "-m", "recent", "--name", sep, "--rcheck",
                             "--seconds", str(svc.sessionAffinityTimeout), "--reap", "-j", sep)
        n = len(local)
        for i, ep in enumerate(local):
            sep = naming.sep_chain(s, p, ep.hostport)
            com = f"Balancing rule {i} for {s}" if fl.xlb_balancing_comment else s
            stat = ("-m", "statistic", "--mode", "random", "--probability", fl.probability(n - i)) \
                if i < n - 1 else ()
            self.nat.add(xlb_c, "-m", "comment", "--comment", com, *stat, "-j", sep)


def iptables_rules(topo: Topology, node: str) -> RuleSet:
    """Everything kube-proxy (and kubelet) program in iptables mode on `node`, structured."""
    return _Gen(topo, node).run()


def kubelet_rules(rs: RuleSet) -> RuleSet:
    """The rules of `rs` kubelet owns (pkg/kubelet/kubelet_network_linux.go: KUBE-FIREWALL, its jumps from
    INPUT and OUTPUT, the localnet rule; KUBE-MARK-DROP before 1.28), with the chains they are in or
    jump to: what a node holds before kube-proxy starts."""
    out = RuleSet()
    for name, t in rs.tables.items():
        for r in t.sequence:
            if r.owner != "kubelet":
                continue
            target = r.args[r.args.index("-j") + 1] if "-j" in r.args[:-1] else None
            if target in t.chains and not t.chains[target].builtin:
                out.table(name).chain(target)
            out.table(name).add(r.chain, *r.args, owner=r.owner)
    return out


def restore_text(rs: RuleSet) -> str:
    """iptables-restore input (use with --noflush): per table chain lines, rules, COMMIT.

    Built-in chain jumps are written as `-I CHAIN 1` in prepend-call order, which leaves them
    above any rule already in the chain exactly as kube-proxy's EnsureRule(Prepend) does.
    """
    out: list[str] = []
    order = ["filter", "nat", "mangle"]
    for name in sorted(rs.tables, key=lambda t: order.index(t) if t in order else 99):
        t = rs.tables[name]
        out.append(f"*{name}")
        out.extend(f":{c.name} - [0:0]" for c in t.user_chains)
        builtin = {c.name for c in t.builtin_chains}
        out.extend(r.restore_line() for r in t.sequence if r.chain not in builtin)
        for c in t.builtin_chains:
            for r in reversed(c.rules):
                out.append("-I " + c.name + " 1" + r.restore_line()[len("-A " + c.name):])
        out.append("COMMIT")
    return "\n".join(out) + "\n"


def uses_nfacct(topo: Topology) -> bool:
    """Whether the nodes' kube-proxy rules name nfacct counters (so they must exist first)."""
    return flavour_for(topo.kubeProxy).nfacct


def needs_route_localnet(topo: Topology) -> bool:
    """iptables mode: route_localnet=1 always before 1.24; since then only with localhostNodePorts and
    loopback among the nodePortAddresses (an empty list means all addresses)."""
    kp = topo.kubeProxy
    loopback = not kp.nodePortAddresses or any(
        ipaddress.IPv4Address("127.0.0.1") in ipaddress.IPv4Network(c) for c in kp.nodePortAddresses
    )
    return flavour_for(kp).route_localnet_always or (kp.localhostNodePorts and loopback)
