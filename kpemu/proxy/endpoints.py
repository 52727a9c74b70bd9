"""What kube-proxy knows about one service port on one node: the endpoints, categorised.

This mirrors `proxy.CategorizeEndpoints`: ready endpoints are used; when a policy has no ready
endpoint, serving-and-terminating ones are the fallback. Endpoint order is lexical by "ip:port"
(EndpointSlice cache order), which is also the order of the KUBE-SEP jumps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kpemu.model.topology import Service, ServicePort, Topology
from kpemu.model.validate import selected_pods
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


def _all_endpoints(topo: Topology, svc: Service, port: ServicePort) -> list[EndpointInfo]:
    if svc.endpoints is not None:
        eps = [
            EndpointInfo(
                ip=e.ip,
                port=e.port or port.target,
                node=e.node,
                ready=e.ready and not e.terminating,
                serving=e.serving if e.serving is not None else e.ready,
                terminating=e.terminating,
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
            )
            for p in selected_pods(topo, svc)
        ]
    return sorted(eps, key=lambda e: e.hostport)


def _usable(eps: list[EndpointInfo]) -> list[EndpointInfo]:
    """Ready endpoints, else serving+terminating ones (KEP-1669 fallback)."""
    ready = [e for e in eps if e.ready]
    if ready:
        return ready
    return [e for e in eps if e.serving and e.terminating]


def service_port_info(topo: Topology, svc: Service, port: ServicePort, node: str) -> ServicePortInfo:
    """Categorise the endpoints of one service port for kube-proxy on `node`."""
    eps = _all_endpoints(topo, svc, port)
    cluster = _usable(eps)
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
