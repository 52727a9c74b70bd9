"""What kube-proxy knows about one service port on one node: the endpoints, categorised.

This mirrors `proxy.CategorizeEndpoints`: ready endpoints are used (for Cluster policy only those
the node's topology allows, kpemu.proxy.hints); when a policy has no ready endpoint,
serving-and-terminating ones are the fallback. Endpoint order is lexical by "ip:port"
(EndpointSlice cache order), which is also the order of the KUBE-SEP jumps. An explicit endpoint's
unset `serving` reads as true, as endpointslicecache reads a nil condition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kpemu.model.topology import Endpoint, Service, ServicePort, Topology
from kpemu.model.validate import selected_pods
from kpemu.proxy import hints as topo_hints
from kpemu.proxy.naming import join_host_port


@dataclass(frozen=True)
class EndpointInfo:
    """One endpoint address of a service port."""

    ip: str
    port: int
    node: str | None  # None: not attached to a node (e.g. an external apiserver)
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    hints: topo_hints.Hints = field(default_factory=topo_hints.Hints)

    @property
    def hostport(self) -> str:
        """net.JoinHostPort(ip, port)."""
        return join_host_port(self.ip, self.port)


@dataclass(frozen=True)
class ServicePortInfo:
    """One (service, port) as kube-proxy on `node` sees it."""

    service: Service
    port: ServicePort
    node: str
    endpoints: tuple[EndpointInfo, ...]  # all known endpoints, lexical "ip:port" order
    cluster_endpoints: tuple[EndpointInfo, ...] = field(default=())
    local_endpoints: tuple[EndpointInfo, ...] = field(default=())

    @property
    def protocol(self) -> str:
        """Lower-case protocol as used in iptables (tcp, udp, sctp)."""
        return self.port.protocol.lower()


def _zone(topo: Topology, node: str | None) -> str | None:
    return next((n.zone for n in topo.nodes if n.name == node), None)


def _hints(topo: Topology, svc: Service, e: Endpoint | None, node: str | None) -> topo_hints.Hints:
    """An endpoint's hints as kube-proxy keeps them: the written ones, else the controller's for
    trafficDistribution; node hints only where the release reads them."""
    minor = topo.kubeProxy.minor
    if e is not None and e.hints is not None:
        h = topo_hints.Hints(frozenset(e.hints.forZones), frozenset(e.hints.forNodes))
    else:
        h = topo_hints.controller_hints(svc.trafficDistribution, minor, _zone(topo, node), node)
    return h if topo_hints.node_hints_read(minor) else topo_hints.Hints(h.zones)


def _all_endpoints(topo: Topology, svc: Service, port: ServicePort) -> list[EndpointInfo]:
    if svc.endpoints is not None:
        eps = [
            EndpointInfo(
                ip=e.ip,
                port=e.port or port.target,
                node=e.node,
                ready=e.ready and not e.terminating,
                serving=e.serving if e.serving is not None else True,
                terminating=e.terminating,
                hints=_hints(topo, svc, e, e.node),
            )
            for e in svc.endpoints
        ]
    else:
        eps = [
            EndpointInfo(
                ip=p.ip,
                port=port.target,
                node=p.node,
                ready=p.ready and not p.terminating,
                serving=p.ready,
                terminating=p.terminating,
                hints=_hints(topo, svc, None, p.node),
            )
            for p in selected_pods(topo, svc)
        ]
    return sorted(eps, key=lambda e: e.hostport)


def topology_mode(topo: Topology, svc: Service, eps: list[EndpointInfo], node: str) -> str:
    """The topology mode kube-proxy on `node` uses for the Service ("" when none)."""
    return topo_hints.topology_mode(topo.kubeProxy.minor, [e.hints for e in eps if e.ready], node,
                                    _zone(topo, node), svc.topologyMode, svc.topologyAwareHints)


def _usable(eps: list[EndpointInfo]) -> list[EndpointInfo]:
    """Ready endpoints, else serving+terminating ones (KEP-1669 fallback)."""
    ready = [e for e in eps if e.ready]
    if ready:
        return ready
    return [e for e in eps if e.serving and e.terminating]


def service_port_info(topo: Topology, svc: Service, port: ServicePort, node: str) -> ServicePortInfo:
    """Categorise the endpoints of one service port for kube-proxy on `node`."""
    eps = _all_endpoints(topo, svc, port)
    prefer = topology_mode(topo, svc, eps, node)
    zone = _zone(topo, node)
    cluster = [e for e in eps if e.ready and topo_hints.available(e.hints, prefer, node, zone)]
    if not cluster:
        cluster = [e for e in eps if e.serving and e.terminating]
    local = _usable([e for e in eps if e.node == node])
    return ServicePortInfo(
        service=svc,
        port=port,
        node=node,
        endpoints=tuple(eps),
        cluster_endpoints=tuple(cluster),
        local_endpoints=tuple(local),
    )


def service_ports(topo: Topology, node: str) -> list[ServicePortInfo]:
    """Every service port of the topology as seen from `node`, in topology order."""
    return [service_port_info(topo, s, p, node) for s in topo.services for p in s.ports]
