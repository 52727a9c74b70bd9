"""Cross-field checks on a topology: the things a schema cannot see."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable

from kpemu import cni as cni_registry
from kpemu.errors import Problem
from kpemu.model.limits import Machine, Need, descriptors_needed, limit_problems
from kpemu.model.modes import MODE_FACTS, NEWEST_MINOR, OLDEST_MINOR
from kpemu.model.names import NETNS_NAME_MAX, netns_name
from kpemu.model.topology import Container, KubeProxy, Pod, Service, Topology

Net = ipaddress.IPv4Network
Report = Callable[[str, str], None]


def _ip(s: str) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(s)


LabelIndex = dict[tuple[str, str, str], list[Pod]]  # (namespace, label, value) -> pods, in topology order
_index: tuple[list[Pod], LabelIndex] | None = None  # the last topology's (its pods list is the key)


def _label_index(topo: Topology) -> LabelIndex:
    global _index
    if _index is None or _index[0] is not topo.pods:
        index: LabelIndex = {}
        for p in topo.pods:
            for k, v in p.labels.items():
                index.setdefault((p.namespace, k, v), []).append(p)
        _index = (topo.pods, index)
    return _index[1]


def selected_pods(topo: Topology, svc: Service) -> list[Pod]:
    """Pods in the service's namespace whose labels include every selector label, in topology order.
    Looked up in an index of the topology's labels: kube-proxy's rules of every node ask for every
    service, so a scan of every pod each time would make a lab's cost nodes x services x pods."""
    if not svc.selector:
        return []
    index = _label_index(topo)
    candidates = min((index.get((svc.namespace, k, v), []) for k, v in svc.selector.items()), key=len)
    return [p for p in candidates if all(p.labels.get(k) == v for k, v in svc.selector.items())]


def lab_need(topo: Topology) -> Need:
    """What building and running `topo` costs in namespaces and descriptors (kpemu.model.limits)."""
    namespaces = 1 + len(topo.nodes) + len(topo.pods) + len(topo.externals)  # 1: the underlay router
    sockets = sum(len(p.ports) for p in topo.pods)
    return Need(namespaces, descriptors_needed(sockets, captures=2 * namespaces))


def check_limits(topo: Topology, file: str, machine: Machine | None = None) -> list[Problem]:
    """Why this machine (`Machine.here()` unless given) cannot build the lab, one Problem per resource
    it exceeds, on the field with the most members; empty when it can."""
    kinds = {"nodes": len(topo.nodes), "pods": len(topo.pods), "externals": len(topo.externals)}
    path = max(kinds, key=kinds.__getitem__)
    counts = ", ".join(f"{n:,} {k}" for k, n in kinds.items())
    return [Problem(file, path, f"{counts} are too large a lab for this machine: {why}")
            for why in limit_problems(lab_need(topo), machine or Machine.here())]


def check_topology(topo: Topology, file: str) -> list[Problem]:
    """Every semantic problem in `topo`, each naming its field path and what was expected."""
    problems: list[Problem] = check_limits(topo, file)
    if problems:
        return problems

    def bad(path: str, msg: str) -> None:
        problems.append(Problem(file, path, msg))

    underlay = Net(topo.underlay)
    node_names = {n.name for n in topo.nodes}

    # Names become namespaces (kp-<lab>-<name>), so they must be unique across kinds.
    seen_names: dict[str, str] = {"underlay": "the underlay router"}
    members: Iterable[tuple[str, str]] = (
        [(f"nodes[{i}].name", n.name) for i, n in enumerate(topo.nodes)]
        + [(f"pods[{i}].name", p.name) for i, p in enumerate(topo.pods)]
        + [(f"externals[{i}].name", e.name) for i, e in enumerate(topo.externals)]
    )
    for path, name in members:
        ns = netns_name(topo.name, name)
        if len(ns) > NETNS_NAME_MAX:
            bad(path, f"name is {len(name)} characters: its network namespace {ns[:40]}... would be {len(ns)}, over "
                      f"the kernel's {NETNS_NAME_MAX} (a file name under /run/netns); use at most "
                      f"{NETNS_NAME_MAX - len(netns_name(topo.name, ''))} characters")
        if name in seen_names:
            bad(path, f"name {name!r} is already used by {seen_names[name]}; every node, pod and external "
                      "needs its own name (it becomes a network namespace)")
        else:
            seen_names[name] = path

    seen_ips: dict[str, str] = {}

    def claim_ip(path: str, ip: str) -> None:
        if ip in seen_ips:
            bad(path, f"address {ip} is already used by {seen_ips[ip]}; expected a unique address")
        else:
            seen_ips[ip] = path

    if topo.underlayGateway:
        claim_ip("underlayGateway", topo.underlayGateway)
    pod_cidrs: list[tuple[str, Net]] = []
    for i, n in enumerate(topo.nodes):
        claim_ip(f"nodes[{i}].ip", n.ip)
        if _ip(n.ip) not in underlay or _ip(n.ip) in (underlay.network_address, underlay.broadcast_address):
            bad(f"nodes[{i}].ip", f"{n.ip} is not a host address of the underlay {topo.underlay}")
        cidr = Net(n.podCIDR)
        if cidr.prefixlen > 29:
            bad(f"nodes[{i}].podCIDR", f"{n.podCIDR} is too small; expected a /29 or larger (a /24 is usual)")
        for other_path, other in pod_cidrs:
            if cidr.overlaps(other):
                bad(f"nodes[{i}].podCIDR", f"{cidr} overlaps {other} ({other_path}); expected disjoint podCIDRs")
        pod_cidrs.append((f"nodes[{i}].podCIDR", cidr))
        if cidr.overlaps(underlay):
            bad(f"nodes[{i}].podCIDR", f"{cidr} overlaps the underlay {underlay}")
        if topo.serviceCIDR and cidr.overlaps(Net(topo.serviceCIDR)):
            bad(f"nodes[{i}].podCIDR", f"{cidr} overlaps the serviceCIDR {topo.serviceCIDR}")
        if topo.clusterCIDR and not cidr.subnet_of(Net(topo.clusterCIDR)):
            bad(f"nodes[{i}].podCIDR", f"{cidr} is not inside clusterCIDR {topo.clusterCIDR}")
        if n.tunnelIP:
            if not cni_registry.cni_of(topo).tunnel_ip:
                users = " or ".join(c.name for c in cni_registry.specs() if c.tunnel_ip)
                bad(f"nodes[{i}].tunnelIP", f"tunnelIP is only used with cni: {users}; remove it")
            elif _ip(n.tunnelIP) not in cidr:
                bad(f"nodes[{i}].tunnelIP", f"{n.tunnelIP} is outside the node's podCIDR {cidr}")
            claim_ip(f"nodes[{i}].tunnelIP", n.tunnelIP)

    if topo.serviceCIDR and Net(topo.serviceCIDR).overlaps(underlay):
        bad("serviceCIDR", f"{topo.serviceCIDR} overlaps the underlay {underlay}")

    for i, p in enumerate(topo.pods):
        claim_ip(f"pods[{i}].ip", p.ip)
        if p.node not in node_names:
            bad(f"pods[{i}].node", f"unknown node {p.node!r}; expected one of {sorted(node_names)}")
            continue
        node = topo.node(p.node)
        cidr = Net(node.podCIDR)
        if _ip(p.ip) not in cidr:
            bad(f"pods[{i}].ip", f"{p.ip} is outside podCIDR {cidr} of node {node.name}")
        elif _ip(p.ip) in (cidr.network_address, cidr.broadcast_address, cidr.network_address + 1):
            used = "the network address" if _ip(p.ip) == cidr.network_address else (
                "the broadcast address" if _ip(p.ip) == cidr.broadcast_address
                else f"the node's gateway ({' / '.join(c.pod_device for c in cni_registry.specs())}) address")
            bad(f"pods[{i}].ip", f"{p.ip} is {used} of {cidr}; expected a pod address from .2 upward")
        ports = [(pp.port, pp.protocol) for pp in p.ports]
        if len(set(ports)) != len(ports):
            bad(f"pods[{i}].ports", "a port/protocol is listed twice")

    for i, e in enumerate(topo.externals):
        claim_ip(f"externals[{i}].ip", e.ip)
        net = e.network
        if net.overlaps(underlay):
            bad(f"externals[{i}].ip", f"{e.ip} is inside or next to the underlay {underlay}; externals live "
                                      "in their own subnet behind the underlay router (e.g. 10.242.72.50)")
        for path, cidr in pod_cidrs:
            if net.overlaps(cidr):
                bad(f"externals[{i}].subnet", f"the external subnet {net} overlaps {path} {cidr}")
        if e.role == "loadbalancer":
            if not e.vip:
                bad(f"externals[{i}].vip", "a loadbalancer needs vip: the address clients connect to")
            else:
                claim_ip(f"externals[{i}].vip", e.vip)
                if _ip(e.vip) not in net:
                    bad(f"externals[{i}].vip", f"{e.vip} must be inside the external subnet {net}")
            if not e.backends:
                bad(f"externals[{i}].backends", "a loadbalancer needs backends: [namespace/service]")
            for j, key in enumerate(e.backends):
                svc = topo.service(key)
                if svc is None:
                    bad(f"externals[{i}].backends[{j}]", f"unknown service {key!r}; expected namespace/name")
                elif not any(p.nodePort for p in svc.ports):
                    bad(f"externals[{i}].backends[{j}]", f"service {key} has no nodePort to balance to")
        elif e.vip or e.backends:
            bad(f"externals[{i}].role", "vip and backends need role: loadbalancer")

    _check_containers(topo, bad)

    for i, r in enumerate(topo.routes):
        if r.via not in node_names:
            try:
                if _ip(r.via) not in underlay:
                    bad(f"routes[{i}].via", f"{r.via} is not on the underlay {underlay}")
            except ValueError:
                bad(f"routes[{i}].via", f"expected a node name or an underlay address, got {r.via!r}")

    _check_kube_proxy(topo, bad)
    used_node_ports: dict[tuple[int, str], str] = {}
    for i, s in enumerate(topo.services):
        _check_service(topo, i, s, bad, claim_ip, used_node_ports, node_names)
    keys = [s.key for s in topo.services]
    for i, k in enumerate(keys):
        if keys.index(k) != i:
            bad(f"services[{i}].name", f"service {k} is defined twice")
    return problems


def _check_kube_proxy(topo: Topology, bad: Report) -> None:
    kp = topo.kubeProxy
    if not OLDEST_MINOR <= kp.minor <= NEWEST_MINOR:
        bad("kubeProxy.version", f"kube-proxy {kp.version} is not modelled; expected 1.{OLDEST_MINOR} to "
                                 f"1.{NEWEST_MINOR}")
    facts = MODE_FACTS[kp.mode]
    if OLDEST_MINOR <= kp.minor <= NEWEST_MINOR and not facts.accepts(kp.minor):
        fix = (f"raise kubeProxy.version to 1.{facts.first_minor}" if kp.minor < facts.first_minor else
               f"lower kubeProxy.version to 1.{facts.last_minor}")
        bad("kubeProxy.mode", f"{facts.releases}; got {kp.version}: {fix} or use mode iptables")
    _check_feature_gates(kp, bad)
    if kp.scheduler != "rr" and not facts.scheduler:
        bad("kubeProxy.scheduler", "scheduler only applies to mode: "
            + " or ".join(f.name for f in MODE_FACTS.values() if f.scheduler))
    _check_detect_local(kp, bad)
    if kp.tcpBeLiberal and kp.minor < 29:
        bad("kubeProxy.tcpBeLiberal", f"conntrack.tcpBeLiberal is a kube-proxy 1.29+ setting; got {kp.version}: "
                                      "raise kubeProxy.version or drop it")
    elif kp.tcpBeLiberal and kp.minor == 29 and facts.config_section == "nftables":
        bad("kubeProxy.tcpBeLiberal", "kpemu does not model whether the 1.29 nftables forward chain honours "
                                      "tcpBeLiberal: use version 1.30+ or drop it")


# detectLocalMode -> (first release that has it, the kubeProxy field it needs)
DETECT_LOCAL = {"ClusterCIDR": (18, "clusterCIDR"), "NodeCIDR": (18, None),
                "BridgeInterface": (23, "bridgeInterface"), "InterfaceNamePrefix": (23, "interfaceNamePrefix")}


def _check_detect_local(kp: KubeProxy, bad: Report) -> None:
    """detectLocalMode by release (1.18: ClusterCIDR, NodeCIDR; 1.23: BridgeInterface,
    InterfaceNamePrefix) with the setting each reads (kube-proxy's validation requires them)."""
    if kp.detectLocalMode is None:
        return
    since, needs = DETECT_LOCAL[kp.detectLocalMode]
    if kp.minor < since:
        bad("kubeProxy.detectLocalMode", f"detectLocalMode {kp.detectLocalMode} is a kube-proxy 1.{since}+ "
                                         f"setting; got {kp.version}: raise kubeProxy.version or drop it")
    if needs and needs != "clusterCIDR" and not getattr(kp, needs):
        bad(f"kubeProxy.{needs}", f"Required value: detectLocalMode {kp.detectLocalMode} needs {needs}")


def _check_feature_gates(kp: KubeProxy, bad: Report) -> None:
    """A gate exists from the release that added it (an older kube-proxy refuses to start with it:
    "unrecognized feature gate"); a gate that turns on what kpemu does not model is refused."""
    if not kp.featureGates.KubeProxyNFTablesLocalhostNodePorts:
        return
    path = "kubeProxy.featureGates.KubeProxyNFTablesLocalhostNodePorts"
    if kp.minor < 37:
        bad(path, f"the gate exists from kube-proxy 1.37 (alpha); kube-proxy {kp.version} does not start with it: "
                  "raise kubeProxy.version to 1.37 or remove the gate")
    elif MODE_FACTS[kp.mode].localhost_nodeport_proxy and any(Net(c).network_address.is_loopback
                                                               for c in kp.nodePortAddresses):
        bad(path, "with 127.0.0.0/8 in nodePortAddresses kube-proxy serves TCP localhost NodePorts from a "
                  "userspace proxy, which kpemu does not model: remove the loopback network from "
                  "kubeProxy.nodePortAddresses or turn the gate off")


NFT_COMMENT_MAX = 128  # nft: "comment too long, 128 characters maximum allowed"


def _check_comment_length(topo: Topology, base: str, s: Service, bad: Report) -> None:
    """nftables mode before 1.37 writes "ns/name:port" whole as an element comment (where a service
    lacks endpoints); nft refuses one over 128 bytes and the whole sync fails, which kpemu does not
    model. 1.37 cuts it to 128 (truncateNFTablesComment)."""
    kp = topo.kubeProxy
    cut = MODE_FACTS[kp.mode].nft_comments_cut_from
    if cut is None or kp.minor >= cut:
        return
    for j, p in enumerate(s.ports):
        text = f"{s.namespace}/{s.name}:{p.name}" if p.name else f"{s.namespace}/{s.name}"
        if len(text.encode()) > NFT_COMMENT_MAX:
            bad(f"{base}.ports[{j}].name", f"kube-proxy {kp.version} (nftables mode) writes the comment {text!r} "
                f"({len(text.encode())} bytes) and nft refuses a comment over {NFT_COMMENT_MAX} bytes, failing every "
                f"sync; shorten the namespace, name or port name, or use kubeProxy.version 1.{cut}, which cuts it")


def _check_service(
    topo: Topology,
    i: int,
    s: Service,
    bad: Report,
    claim_ip: Report,
    used_node_ports: dict[tuple[int, str], str],
    node_names: set[str],
) -> None:
    base = f"services[{i}]"
    claim_ip(f"{base}.clusterIP", s.clusterIP)
    _check_comment_length(topo, base, s, bad)
    if topo.serviceCIDR and _ip(s.clusterIP) not in Net(topo.serviceCIDR):
        bad(f"{base}.clusterIP", f"{s.clusterIP} is outside serviceCIDR {topo.serviceCIDR}")
    for path, cidr in [(f"nodes[{j}].podCIDR", Net(n.podCIDR)) for j, n in enumerate(topo.nodes)]:
        if _ip(s.clusterIP) in cidr:
            bad(f"{base}.clusterIP", f"{s.clusterIP} is inside {path} {cidr}; expected a service address")
    if _ip(s.clusterIP) in Net(topo.underlay):
        bad(f"{base}.clusterIP", f"{s.clusterIP} is inside the underlay {topo.underlay}")
    if s.selector is not None and s.endpoints is not None:
        bad(f"{base}.endpoints", "give either selector or endpoints, not both")
    if s.selector is None and s.endpoints is None:
        bad(f"{base}.selector", "expected a selector (e.g. {app: nginx}) or an explicit endpoints list")
    if s.selector is not None and not selected_pods(topo, s):
        bad(f"{base}.selector", f"selector {s.selector} matches no pod in namespace {s.namespace}; "
                                "for a service without endpoints write endpoints: []")
    for j, ep in enumerate(s.endpoints or []):
        if ep.node is not None and ep.node not in node_names:
            bad(f"{base}.endpoints[{j}].node", f"unknown node {ep.node!r}; expected one of {sorted(node_names)}")
    lo, hi = topo.kubeProxy.node_port_bounds
    seen: set[tuple[int, str]] = set()
    names = [p.name for p in s.ports]
    for j, p in enumerate(s.ports):
        path = f"{base}.ports[{j}]"
        if (p.port, p.protocol) in seen:
            bad(f"{path}.port", f"{p.protocol} port {p.port} is listed twice")
        seen.add((p.port, p.protocol))
        if len(s.ports) > 1 and not p.name:
            bad(f"{path}.name", "a service with several ports needs a name on each port (Kubernetes rule)")
        if p.name and names.count(p.name) > 1:
            bad(f"{path}.name", f"port name {p.name!r} is used twice")
        if p.nodePort is not None:
            if s.type == "ClusterIP":
                bad(f"{path}.nodePort", "nodePort needs type: NodePort or LoadBalancer")
            elif not lo <= p.nodePort <= hi:
                bad(f"{path}.nodePort", f"{p.nodePort} is outside the node port range {lo}-{hi} "
                                        "(kubeProxy.nodePortRange)")
            key = (p.nodePort, p.protocol)
            if key in used_node_ports:
                bad(f"{path}.nodePort", f"{p.protocol} nodePort {p.nodePort} is already used by "
                                        f"{used_node_ports[key]}")
            used_node_ports[key] = path
        elif s.type != "ClusterIP" and s.allocateLoadBalancerNodePorts:
            bad(f"{path}.nodePort", f"type {s.type} needs a nodePort in {lo}-{hi} on every port"
                + (" (or allocateLoadBalancerNodePorts: false)" if s.type == "LoadBalancer" else ""))
        if s.selector is not None:
            for pod in selected_pods(topo, s):
                if pod.ports and not any(pp.port == p.target and pp.protocol == p.protocol for pp in pod.ports):
                    bad(f"{path}.targetPort", f"pod {pod.namespace}/{pod.name} does not serve {p.protocol} "
                                              f"{p.target}; add it to the pod's ports or fix targetPort")
                    break
    if s.type == "ClusterIP" and s.externalTrafficPolicy == "Local":
        bad(f"{base}.externalTrafficPolicy", "Local only applies to NodePort and LoadBalancer services")
    if s.loadBalancerIPs and s.type != "LoadBalancer":
        bad(f"{base}.loadBalancerIPs", "loadBalancerIPs need type: LoadBalancer")
    if s.loadBalancerProxyIPs and s.type != "LoadBalancer":
        bad(f"{base}.loadBalancerProxyIPs", "loadBalancerProxyIPs need type: LoadBalancer")
    if not s.allocateLoadBalancerNodePorts and s.type != "LoadBalancer":
        bad(f"{base}.allocateLoadBalancerNodePorts", "allocateLoadBalancerNodePorts applies to type: LoadBalancer")
    _check_topology_routing(topo, base, s, bad)
    if s.loadBalancerSourceRanges and s.type != "LoadBalancer":
        bad(f"{base}.loadBalancerSourceRanges", "loadBalancerSourceRanges need type: LoadBalancer")
    if s.healthCheckNodePort is not None and not (s.type == "LoadBalancer" and s.externalTrafficPolicy == "Local"):
        bad(f"{base}.healthCheckNodePort", "healthCheckNodePort needs type: LoadBalancer with "
                                           "externalTrafficPolicy: Local")
    for j, ip in enumerate(s.externalIPs):
        if ip == s.clusterIP:
            bad(f"{base}.externalIPs[{j}]", "an external IP cannot be the clusterIP")


# trafficDistribution value -> the first release whose API server keeps it (ServiceTrafficDistribution
# beta 1.31; PreferSameZone and PreferSameNode behind PreferSameTrafficDistribution, beta 1.34)
TRAFFIC_DISTRIBUTION_SINCE = {"PreferClose": 31, "PreferSameZone": 34, "PreferSameNode": 34}


def _check_topology_routing(topo: Topology, base: str, s: Service, bad: Report) -> None:
    kp = topo.kubeProxy
    if s.trafficDistribution is not None and kp.minor < TRAFFIC_DISTRIBUTION_SINCE[s.trafficDistribution]:
        since = TRAFFIC_DISTRIBUTION_SINCE[s.trafficDistribution]
        bad(f"{base}.trafficDistribution", f"trafficDistribution {s.trafficDistribution} is kept by the API server "
                                           f"from 1.{since} (feature gate default); got {kp.version}: raise "
                                           "kubeProxy.version or write the endpoints' hints")
    if s.trafficDistribution is not None and s.endpoints is not None and any(e.hints is None for e in s.endpoints):
        j = next(j for j, e in enumerate(s.endpoints) if e.hints is None)
        bad(f"{base}.endpoints[{j}].hints", "explicit endpoints carry their EndpointSlice hints: write hints "
                                            "({} for none) on each, or use a selector so the controller's hints "
                                            "for trafficDistribution apply")


def _check_containers(topo: Topology, bad: Report) -> None:
    """`command:` and `env:` only with `image:`; a load balancer stays a bare namespace (its NAT is
    kpemu's); environment names as a shell accepts them."""
    members: list[tuple[str, Container]] = [(f"pods[{i}]", p) for i, p in enumerate(topo.pods)]
    members += [(f"externals[{i}]", e) for i, e in enumerate(topo.externals)]
    for path, m in members:
        if not m.has_image:
            for key in ("command", "env"):
                if getattr(m, key):
                    bad(f"{path}.{key}", f"{key} applies only to a container; add image: NAME (e.g. "
                                         "kpemu/busybox:local) or drop it")
            continue
        if getattr(m, "role", "client") == "loadbalancer":
            bad(f"{path}.image", "a loadbalancer external is programmed by kpemu (its NAT rules); drop image:")
        for k in m.env:
            if not _ENV_NAME.match(k):
                bad(f"{path}.env.{k}", "expected an environment variable name such as PORT or HTTP_PROXY")


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
