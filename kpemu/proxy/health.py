"""Which health-check servers kube-proxy runs on a node, and what they count (pure).

kube-proxy serves `/healthz` on every node and one check per Service that needs it
(`apiservice.NeedsHealthCheck`: type LoadBalancer with externalTrafficPolicy Local) on its
`healthCheckNodePort`. The check counts the node's local *ready* endpoints, by address, over all the
Service's ports (`EndpointsMap.LocalReadyEndpoints`): 10.0.0.1:80 and 10.0.0.1:443 are one endpoint, a
serving-terminating one is none. From 1.23 the checks listen on the node's addresses inside
`nodePortAddresses` (all addresses when none is inside or none is given).
"""

from __future__ import annotations

import ipaddress

from kpemu.model.topology import Service, Topology
from kpemu.plan.types import Plan
from kpemu.proxy.endpoints import service_port_info
from kpemu.traffic.health import HealthSpec, ServiceCheck, release_facts


def needs_health_check(svc: Service) -> bool:
    """apiservice.NeedsHealthCheck: a LoadBalancer Service with externalTrafficPolicy Local."""
    return svc.type == "LoadBalancer" and svc.externalTrafficPolicy == "Local"


def local_ready_endpoints(topo: Topology, svc: Service, node: str) -> int:
    """The distinct addresses of `svc`'s ready endpoints on `node`, over all its ports."""
    ips = {e.ip for port in svc.ports for e in service_port_info(topo, svc, port, node).endpoints
           if e.ready and e.node == node}
    return len(ips)


def _bind(topo: Topology, plan: Plan, node: str) -> tuple[str, ...]:
    """The addresses the service checks listen on: the node's addresses in nodePortAddresses, else all."""
    cidrs = [ipaddress.IPv4Network(c) for c in topo.kubeProxy.nodePortAddresses]
    if not cidrs or not release_facts(topo.kubeProxy.minor).node_addresses:
        return ("0.0.0.0",)
    ns = plan.netns(node)
    mine = sorted({a.cidr.split("/")[0] for a in plan.addresses if a.ns == ns},
                  key=lambda ip: ipaddress.IPv4Address(ip))
    inside = tuple(ip for ip in mine if any(ipaddress.IPv4Address(ip) in c for c in cidrs))
    return inside or ("0.0.0.0",)


def health_specs(topo: Topology, plan: Plan) -> tuple[HealthSpec, ...]:
    """kube-proxy's health servers on every node of the lab `plan` builds for `topo`."""
    out = []
    for node in topo.nodes:
        checks = tuple(ServiceCheck(s.namespace, s.name, s.healthCheckNodePort,
                                    local_ready_endpoints(topo, s, node.name))
                       for s in topo.services if needs_health_check(s) and s.healthCheckNodePort)
        out.append(HealthSpec(ns=plan.netns(node.name), node=node.name, minor=topo.kubeProxy.minor,
                              bind=_bind(topo, plan, node.name), services=checks))
    return tuple(out)
