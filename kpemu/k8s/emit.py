"""A topology as the Kubernetes objects a real API server holds for it (pure): Namespaces, Nodes,
Services and EndpointSlices, and each Service's load-balancer status, in the order they must be
created (a namespace before what lives in it).

Only what the topology says is written: a Node's labels are the ones every kubelet sets from what
kpemu knows (hostname, os), its addresses the node IP and its name. The EndpointSlices are what the
EndpointSlice controller would make from the selector and the pods (kpemu runs no controller): one
slice per service and endpoint port, labelled managed-by kpemu so no controller ever takes them over.
"""

from __future__ import annotations

from typing import Any

from kpemu.model.slicehints import Hints, controller_hints
from kpemu.model.topology import Service, Topology
from kpemu.model.validate import selected_pods

MANAGED_BY = "kpemu"
ZONE_LABEL = "topology.kubernetes.io/zone"
TOPOLOGY_MODE = "service.kubernetes.io/topology-mode"
TOPOLOGY_AWARE_HINTS = "service.kubernetes.io/topology-aware-hints"
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")  # the API server makes these

Object = dict[str, Any]


def collection(obj: Object) -> str:
    """The API path an object is created at (POST)."""
    kind = obj["kind"]
    ns = obj["metadata"].get("namespace")
    if kind == "Namespace":
        return "/api/v1/namespaces"
    if kind == "Node":
        return "/api/v1/nodes"
    if kind == "Service":
        return f"/api/v1/namespaces/{ns}/services"
    if kind == "EndpointSlice":
        return f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
    raise ValueError(f"no API path known for kind {kind!r}")


def path_of(obj: Object) -> str:
    """The API path of one object (GET, PUT)."""
    return f"{collection(obj)}/{obj['metadata']['name']}"


def namespaces(topo: Topology) -> list[Object]:
    used = dict.fromkeys([*(p.namespace for p in topo.pods), *(s.namespace for s in topo.services)])
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            for ns in used if ns not in BUILTIN_NAMESPACES]


def nodes(topo: Topology) -> list[Object]:
    return [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n.name, "labels": {"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux",
                                                **({ZONE_LABEL: n.zone} if n.zone else {})}},
        "spec": {"podCIDR": n.podCIDR, "podCIDRs": [n.podCIDR]},
        "status": {"addresses": [{"type": "InternalIP", "address": n.ip}, {"type": "Hostname", "address": n.name}]},
    } for n in topo.nodes]


def service(s: Service) -> Object:
    """One Service with its IPs and ports as the topology gives them (the API server allocates nothing)."""
    ports = []
    for p in s.ports:
        port: Object = {"name": p.name, "protocol": p.protocol, "port": p.port, "targetPort": p.target}
        if p.nodePort is not None and s.type != "ClusterIP":
            port["nodePort"] = p.nodePort
        ports.append(port)
    spec: Object = {"type": s.type, "clusterIP": s.clusterIP, "clusterIPs": [s.clusterIP],
                    "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "ports": ports,
                    "sessionAffinity": s.sessionAffinity, "internalTrafficPolicy": s.internalTrafficPolicy}
    if s.selector:
        spec["selector"] = dict(s.selector)
    if s.external:
        spec["externalTrafficPolicy"] = s.externalTrafficPolicy
    if s.externalIPs:
        spec["externalIPs"] = list(s.externalIPs)
    if s.loadBalancerSourceRanges:
        spec["loadBalancerSourceRanges"] = list(s.loadBalancerSourceRanges)
    if s.sessionAffinity == "ClientIP":
        spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": s.sessionAffinityTimeout}}
    if s.healthCheckNodePort is not None and s.type == "LoadBalancer" and s.externalTrafficPolicy == "Local":
        spec["healthCheckNodePort"] = s.healthCheckNodePort
    if s.type == "LoadBalancer" and not s.allocateLoadBalancerNodePorts:
        spec["allocateLoadBalancerNodePorts"] = False
    if s.trafficDistribution:
        spec["trafficDistribution"] = s.trafficDistribution
    meta: Object = {"name": s.name, "namespace": s.namespace}
    if s.labels:
        meta["labels"] = dict(s.labels)
    notes = {k: v for k, v in ((TOPOLOGY_MODE, s.topologyMode), (TOPOLOGY_AWARE_HINTS, s.topologyAwareHints)) if v}
    if notes:
        meta["annotations"] = notes
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def load_balancer_status(s: Service) -> Object | None:
    """The status a load-balancer controller would write (through /status), or None when there is none."""
    if not s.loadBalancerIPs and not s.loadBalancerProxyIPs:
        return None
    ingress = [{"ip": ip, "ipMode": "VIP"} for ip in s.loadBalancerIPs]
    ingress += [{"ip": ip, "ipMode": "Proxy"} for ip in s.loadBalancerProxyIPs]
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": s.name, "namespace": s.namespace},
            "status": {"loadBalancer": {"ingress": ingress}}}


def _endpoints(topo: Topology, s: Service) -> list[tuple[int | None, Object]]:
    """(the endpoint's own port or None, its EndpointSlice entry), in topology order."""
    out: list[tuple[int | None, Object]] = []
    if s.endpoints is not None:
        for e in s.endpoints:
            entry: Object = {"addresses": [e.ip], "conditions": {
                "ready": e.ready and not e.terminating, "serving": e.serving if e.serving is not None else e.ready,
                "terminating": e.terminating}}
            if e.node is not None:
                entry["nodeName"] = e.node
            hints = Hints(frozenset(e.hints.forZones), frozenset(e.hints.forNodes)) if e.hints is not None \
                else _controller_hints(topo, s, e.node)
            out.append((e.port, _placed(topo, entry, e.node, hints)))
        return out
    for p in selected_pods(topo, s):
        entry = {"addresses": [p.ip], "nodeName": p.node,
                 "conditions": {"ready": p.ready and not p.terminating, "serving": p.ready,
                                "terminating": p.terminating},
                 "targetRef": {"kind": "Pod", "namespace": p.namespace, "name": p.name}}
        out.append((None, _placed(topo, entry, p.node, _controller_hints(topo, s, p.node))))
    return out


def _zone(topo: Topology, node: str | None) -> str | None:
    return next((n.zone for n in topo.nodes if n.name == node), None)


def _controller_hints(topo: Topology, s: Service, node: str | None) -> Hints:
    return controller_hints(s.trafficDistribution, topo.kubeProxy.minor, _zone(topo, node), node)


def _placed(topo: Topology, entry: Object, node: str | None, hints: Hints) -> Object:
    """An endpoint entry with its node's zone and its hints, as the EndpointSlice controller writes them."""
    if (zone := _zone(topo, node)) is not None:
        entry["zone"] = zone
    if hints.zones or hints.nodes:
        entry["hints"] = {**({"forZones": [{"name": z} for z in sorted(hints.zones)]} if hints.zones else {}),
                          **({"forNodes": [{"name": n} for n in sorted(hints.nodes)]} if hints.nodes else {})}
    return entry


def endpoint_slices(topo: Topology, s: Service) -> list[Object]:
    """The service's EndpointSlices: one per endpoint port (an endpoint's own port replaces every
    service port's target, as kube-proxy reads it), none for a service without endpoints."""
    groups: dict[int | None, list[Object]] = {}
    for port, entry in _endpoints(topo, s):
        groups.setdefault(port, []).append(entry)
    slices = []
    for i, (own, entries) in enumerate(groups.items()):
        slices.append({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{s.name}-kpemu-{i}", "namespace": s.namespace,
                         "labels": {"kubernetes.io/service-name": s.name,
                                    "endpointslice.kubernetes.io/managed-by": MANAGED_BY}},
            "addressType": "IPv4",
            "endpoints": entries,
            "ports": [{"name": p.name, "protocol": p.protocol, "port": own or p.target} for p in s.ports],
        })
    return slices


def objects(topo: Topology) -> list[Object]:
    """Every object of the topology, in creation order."""
    out = namespaces(topo) + nodes(topo)
    for s in topo.services:
        out.append(service(s))
        out += endpoint_slices(topo, s)
    return out


def statuses(topo: Topology) -> list[Object]:
    """The load-balancer statuses to write after the Services exist."""
    return [st for s in topo.services if (st := load_balancer_status(s)) is not None]
