"""Services the way the API server takes them (pkg/apis/core/validation ValidateService, the
registry's defaulting and allocators): what it rejects is rejected with the field path and words
Kubernetes uses; what it defaults (type, protocol, targetPort, sessionAffinity timeout, traffic
policies) is defaulted; clusterIP, nodePorts and healthCheckNodePort left out are allocated
deterministically (a hash of the Service's name picks the start of a linear probe) so a lab is
reproducible. Headless and ExternalName Services program nothing and are left out, with a note.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

from kpemu.errors import Problem
from kpemu.k8s.objects import K8sObject

TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
PROTOCOLS = ("TCP", "UDP", "SCTP")
_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")  # IANA_SVC_NAME
MAX_AFFINITY = 86400
IP_MODES = ("VIP", "Proxy")
TRAFFIC_DISTRIBUTIONS = ("PreferClose", "PreferSameZone", "PreferSameNode")


def _supported(value: object, allowed: tuple[str, ...]) -> str:
    return f"Unsupported value: {value!r}: supported values: {', '.join(repr(a) for a in sorted(allowed))}"


@dataclass
class ServiceIn:
    """A validated Service, with what is still to allocate (clusterIP / nodePort / health check
    None) and named targetPorts still names."""

    obj: K8sObject
    spec: dict[str, Any]  # topology form (kpemu.model.topology.Service fields)
    allocate_cluster_ip: bool = False
    allocate_health_check: bool = False
    notes: list[str] = field(default_factory=list)


def ipv4(v: object) -> bool:
    """Whether `v` is an IPv4 address."""
    try:
        ipaddress.IPv4Address(str(v))
        return True
    except ValueError:
        return False


def _ip(v: object) -> bool:
    try:
        ipaddress.ip_address(str(v))
        return True
    except ValueError:
        return False


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def read_service(obj: K8sObject, problems: list[Problem]) -> ServiceIn | None:
    """Validate and default one Service; None when kube-proxy programs nothing for it (headless,
    ExternalName) or when it has errors (added to `problems`)."""
    n = len(problems)

    def bad(path: str, msg: str) -> None:
        problems.append(obj.problem(path, msg))

    spec = obj.data.get("spec")
    if not isinstance(spec, dict):
        bad("spec", "Required value")
        return None
    stype = spec.get("type") or "ClusterIP"
    if stype not in TYPES:
        bad("spec.type", _supported(stype, TYPES))
        return None
    out: dict[str, Any] = {"name": obj.name, "namespace": obj.namespace, "type": stype}
    svc = ServiceIn(obj, out)
    if stype == "ExternalName":
        svc.notes.append("type ExternalName: a DNS name, kube-proxy programs nothing; left out")
        return svc
    cluster_ip = spec.get("clusterIP")
    cluster_ips = spec.get("clusterIPs") or []
    if cluster_ip == "None" or (not cluster_ip and cluster_ips[:1] == ["None"]):
        svc.notes.append("headless (clusterIP: None): kube-proxy programs nothing; left out")
        return svc
    _read_families(spec, bad, svc)
    if not isinstance(cluster_ips, list):
        bad("spec.clusterIPs", "Invalid value: expected a list of addresses")
        cluster_ips = []
    for i, ip in enumerate(cluster_ips):
        if not _ip(ip):
            bad(f"spec.clusterIPs[{i}]", f"Invalid value: {ip!r}: must be a valid IP address, (e.g. 10.9.8.7 or "
                                         "2001:db8::ffff)")
    if cluster_ip and not _ip(cluster_ip):
        bad("spec.clusterIP", f"Invalid value: {cluster_ip!r}: must be a valid IP address, (e.g. 10.9.8.7 or "
                              "2001:db8::ffff)")
    if cluster_ip and cluster_ips and cluster_ips[0] != cluster_ip:
        bad("spec.clusterIPs[0]", f"Invalid value: {cluster_ips[0]!r}: must match `clusterIP` when present")
    v4 = [ip for ip in [cluster_ip, *cluster_ips] if ip and ipv4(ip)]
    if v4:
        out["clusterIP"] = v4[0]
    elif cluster_ip or cluster_ips:
        bad("spec.clusterIPs", "kpemu models IPv4 Services only; this Service has no IPv4 clusterIP")
    else:
        svc.allocate_cluster_ip = True
    _read_ports(spec, stype, bad, svc)
    _read_policies(spec, stype, bad, svc)
    _read_addresses(obj, spec, stype, bad, svc)
    if spec.get("selector") is not None:
        if not isinstance(spec["selector"], dict):
            bad("spec.selector", "Invalid value: expected a map of labels")
        else:
            out["selector"] = {str(k): str(v) for k, v in spec["selector"].items()}
    return svc if len(problems) == n else None


def _read_families(spec: dict[str, Any], bad: Any, svc: ServiceIn) -> None:
    families = spec.get("ipFamilies") or []
    for i, f in enumerate(families):
        if f not in ("IPv4", "IPv6"):
            bad(f"spec.ipFamilies[{i}]", _supported(f, ("IPv4", "IPv6")))
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in ("SingleStack", "PreferDualStack", "RequireDualStack"):
        bad("spec.ipFamilyPolicy", _supported(policy, ("SingleStack", "PreferDualStack", "RequireDualStack")))
    if families and "IPv4" not in families:
        bad("spec.ipFamilies", "kpemu models IPv4 Services only; expected IPv4 among ipFamilies")
    elif "IPv6" in families:
        svc.notes.append("IPv6 family not modelled: only the IPv4 clusterIP is used")


def _read_ports(spec: dict[str, Any], stype: str, bad: Any, svc: ServiceIn) -> None:
    ports = spec.get("ports")
    if not isinstance(ports, list) or not ports:
        bad("spec.ports", "Required value")
        return
    names: set[str] = set()
    seen: set[tuple[int, str]] = set()
    out = []
    if stype == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is False:
        svc.spec["allocateLoadBalancerNodePorts"] = False  # nodePorts only where given
    for i, p in enumerate(ports):
        path = f"spec.ports[{i}]"
        if not isinstance(p, dict):
            bad(path, "Invalid value: expected a mapping with port, protocol, targetPort")
            continue
        name = str(p.get("name") or "")
        if len(ports) > 1 and not name:
            bad(f"{path}.name", "Required value")
        elif name and name in names:
            bad(f"{path}.name", f"Duplicate value: {name!r}")
        names.add(name)
        port = _int(p.get("port"))
        if p.get("port") is None:
            bad(f"{path}.port", "Required value")
        elif port is None or not 1 <= port <= 65535:
            bad(f"{path}.port", f"Invalid value: {p.get('port')!r}: must be between 1 and 65535, inclusive")
        proto = p.get("protocol") or "TCP"
        if proto not in PROTOCOLS:
            bad(f"{path}.protocol", _supported(proto, PROTOCOLS))
        if port and (port, proto) in seen:
            bad(path, f"Duplicate value: {{port: {port}, protocol: {proto}}}")
        seen.add((port or 0, proto))
        target = p.get("targetPort")
        if isinstance(target, str) and not target.isdigit():
            if not _SVC_NAME.match(target) or not re.search("[a-z]", target):
                bad(f"{path}.targetPort", f"Invalid value: {target!r}: must be a port name (at most 15 lower-case "
                                          "letters, digits and '-') or a number")
        elif target not in (None, 0, "0"):
            t = int(target)
            if not 1 <= t <= 65535:
                bad(f"{path}.targetPort", f"Invalid value: {target!r}: must be between 1 and 65535, inclusive")
            target = t
        else:
            target = port
        node_port = _int(p.get("nodePort")) or None
        if node_port and stype == "ClusterIP":
            bad(f"{path}.nodePort", "Forbidden: may not be used when `type` is 'ClusterIP'")
        out.append({"name": name, "port": port, "protocol": proto, "targetPort": target, "nodePort": node_port})
    svc.spec["ports"] = out


def _read_policies(spec: dict[str, Any], stype: str, bad: Any, svc: ServiceIn) -> None:
    out = svc.spec
    affinity = spec.get("sessionAffinity") or "None"
    if affinity not in ("None", "ClientIP"):
        bad("spec.sessionAffinity", _supported(affinity, ("None", "ClientIP")))
    config = spec.get("sessionAffinityConfig")
    if config and affinity == "None":
        bad("spec.sessionAffinityConfig", "Invalid value: must not be set when `sessionAffinity` is None")
    out["sessionAffinity"] = affinity
    if affinity == "ClientIP":
        timeout = ((config or {}).get("clientIP") or {}).get("timeoutSeconds", 10800)
        if _int(timeout) is None or not 0 < timeout <= MAX_AFFINITY:
            bad("spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                f"Invalid value: {timeout!r}: must be greater than 0 and less than {MAX_AFFINITY}")
        out["sessionAffinityTimeout"] = timeout
    external = stype in ("NodePort", "LoadBalancer") or bool(spec.get("externalIPs"))
    etp = spec.get("externalTrafficPolicy") or "Cluster"
    if etp not in ("Cluster", "Local"):
        bad("spec.externalTrafficPolicy", _supported(etp, ("Cluster", "Local")))
    elif etp == "Local" and not external:
        bad("spec.externalTrafficPolicy", "Invalid value: 'Local': may only be set for externally-accessible "
                                          "services")
    elif external:
        out["externalTrafficPolicy"] = etp
    itp = spec.get("internalTrafficPolicy") or "Cluster"
    if itp not in ("Cluster", "Local"):
        bad("spec.internalTrafficPolicy", _supported(itp, ("Cluster", "Local")))
    out["internalTrafficPolicy"] = itp
    hc = spec.get("healthCheckNodePort")
    needs_hc = stype == "LoadBalancer" and etp == "Local"
    if hc and not needs_hc:
        bad("spec.healthCheckNodePort", f"Invalid value: {hc!r}: may only be set when `type` is 'LoadBalancer' "
                                        "and `externalTrafficPolicy` is 'Local'")
    elif needs_hc:
        if hc:
            out["healthCheckNodePort"] = hc
        else:
            svc.allocate_health_check = True


def _read_addresses(obj: K8sObject, spec: dict[str, Any], stype: str, bad: Any, svc: ServiceIn) -> None:
    out = svc.spec
    ext = spec.get("externalIPs") or []
    for i, ip in enumerate(ext):
        if not _ip(ip):
            bad(f"spec.externalIPs[{i}]", f"Invalid value: {ip!r}: must be a valid IP address")
    out["externalIPs"] = [ip for ip in ext if ipv4(ip)]
    if len(out["externalIPs"]) < len(ext):
        svc.notes.append("IPv6 externalIPs not modelled")
    ranges = spec.get("loadBalancerSourceRanges") or []
    if ranges and stype != "LoadBalancer":
        bad("spec.loadBalancerSourceRanges", "Forbidden: may only be used when `type` is 'LoadBalancer'")
    for i, r in enumerate(ranges):
        if _cidr(r) is None:
            bad(f"spec.loadBalancerSourceRanges[{i}]", f"Invalid value: {r!r}: must be an IPv4 CIDR such as "
                                                       "203.0.113.0/24")
    out["loadBalancerSourceRanges"] = [c for r in ranges if (c := _cidr(r))]
    ingress = ((obj.data.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    for j, i in enumerate(ingress):
        ip_mode = i.get("ipMode") if isinstance(i, dict) else None
        if ip_mode is not None and ip_mode not in IP_MODES:
            bad(f"status.loadBalancer.ingress[{j}].ipMode", _supported(ip_mode, IP_MODES))
    vips = [i for i in ingress if isinstance(i, dict) and ipv4(i.get("ip"))]
    out["loadBalancerIPs"] = [i["ip"] for i in vips if i.get("ipMode") != "Proxy"]
    out["loadBalancerProxyIPs"] = [i["ip"] for i in vips if i.get("ipMode") == "Proxy"]
    dist = spec.get("trafficDistribution")
    if dist is not None and dist not in TRAFFIC_DISTRIBUTIONS:
        bad("spec.trafficDistribution", _supported(dist, TRAFFIC_DISTRIBUTIONS))
    elif dist is not None:
        out["trafficDistribution"] = dist
    ann = (obj.data.get("metadata") or {}).get("annotations") or {}
    for key, name in (("service.kubernetes.io/topology-mode", "topologyMode"),
                      ("service.kubernetes.io/topology-aware-hints", "topologyAwareHints")):
        if key in ann:
            out[name] = str(ann[key])
    if any(isinstance(i, dict) and i.get("hostname") for i in ingress):
        svc.notes.append("status.loadBalancer.ingress[].hostname not modelled (only ip)")
    if stype == "LoadBalancer" and not out["loadBalancerIPs"] and spec.get("loadBalancerIP"):
        svc.notes.append(f"spec.loadBalancerIP {spec['loadBalancerIP']} is only a request: no load balancer "
                         "assigned it (status.loadBalancer.ingress is empty)")


def _cidr(r: object) -> str | None:
    """The IPv4 network of a source range as the API server normalises it, or None."""
    try:
        return str(ipaddress.IPv4Network(str(r).strip(), strict=False))
    except ValueError:
        return None


class Allocator:
    """clusterIPs from the service CIDR and ports from the node-port range, as the API server's
    allocators hand them out, but deterministic: the probe starts at a hash of the Service key."""

    def __init__(self, service_cidr: str, node_ports: tuple[int, int]):
        self.net = ipaddress.IPv4Network(service_cidr)
        self.lo, self.hi = node_ports
        self.ips: set[str] = {str(self.net.network_address + 1)}  # the kubernetes Service's address
        self.ports: set[tuple[int, str]] = set()

    @staticmethod
    def _start(key: str, size: int) -> int:
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % size

    def cluster_ip(self, key: str) -> str:
        size = self.net.num_addresses - 2
        start = self._start(key, size)
        for i in range(size):
            ip = str(self.net.network_address + 1 + (start + i) % size)
            if ip not in self.ips:
                self.ips.add(ip)
                return ip
        raise ValueError(f"service CIDR {self.net} is full")

    def node_port(self, key: str, protocol: str) -> int:
        size = self.hi - self.lo + 1
        start = self._start(key, size)
        for i in range(size):
            port = self.lo + (start + i) % size
            if (port, protocol) not in self.ports:
                self.ports.add((port, protocol))
                return port
        raise ValueError(f"node port range {self.lo}-{self.hi} is full")
