"""Flow resolution (pure): where each flow of a scenario goes, as an address, a port and a protocol, and
which pods could answer it; a flow that cannot be resolved becomes a `Problem` naming its field."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from kpemu.errors import Problem
from kpemu.model.scenario import Flow, ResolvedFlow
from kpemu.model.topology import Service, Topology
from kpemu.model.validate import selected_pods


def resolve_flows(topo: Topology, flows: list[Flow], file: str) -> tuple[tuple[ResolvedFlow, ...], list[Problem]]:
    """The scenario's flows resolved against its topology (those that resolve), and the problems of the rest."""
    problems: list[Problem] = []
    containers = topo.containers()
    resolved = tuple(replace(f, src_container=f.src_member in containers)
                     for i, fl in enumerate(flows) if (f := _resolve(topo, fl, i, file, problems)))
    return resolved, problems


def _resolve(topo: Topology, fl: Flow, i: int, file: str, problems: list[Problem]) -> ResolvedFlow | None:
    """Work out a flow's destination address, port and protocol, or add Problems."""
    base = f"flows[{i}]"
    members = topo.member_kinds()

    def bad(path: str, msg: str) -> None:
        problems.append(Problem(file, f"{base}.{path}", msg))

    if fl.from_ not in members:
        bad("from", f"unknown member {fl.from_!r}; expected a node, pod or external: {sorted(members)}")
        return None
    t = fl.to
    if t.pod is not None:
        pod = next((p for p in topo.pods if p.name == t.pod), None)
        if pod is None:
            bad("to.pod", f"unknown pod {t.pod!r}; expected one of {sorted(p.name for p in topo.pods)}")
            return None
        ports = [pp for pp in pod.ports if t.port is None or pp.port == t.port]
        if t.port is None and not ports:
            bad("to.port", f"pod {pod.name} serves no port; give port: P")
            return None
        port = t.port or ports[0].port
        proto = fl.protocol or (ports[0].protocol if ports else "TCP")
        return ResolvedFlow(fl, fl.from_, pod.ip, port, _proto(proto), (pod.name,))
    if t.address is not None:
        assert t.port is not None
        return ResolvedFlow(fl, fl.from_, t.address, t.port, _proto(fl.protocol or "TCP"), ())
    if t.service is None:  # {node: N, nodePort: P} or {node: N, port: P}
        if t.node not in {n.name for n in topo.nodes}:
            bad("to.node", f"unknown node {t.node!r}; expected one of {sorted(n.name for n in topo.nodes)}")
            return None
        node = topo.node(t.node)
        port = t.nodePort or t.port
        assert port is not None
        svc = next((s for s in topo.services for sp in s.ports if sp.nodePort == port), None)
        sp = next((sp for sp in svc.ports if sp.nodePort == port), None) if svc else None
        proto = fl.protocol or (sp.protocol if sp else "TCP")
        return ResolvedFlow(fl, fl.from_, node.ip, port, _proto(proto), _backends(topo, svc) if svc else ())
    key = t.service if "/" in t.service else f"default/{t.service}"
    svc = topo.service(key)
    if svc is None:
        bad("to.service", f"unknown service {key!r}; expected one of {sorted(s.key for s in topo.services)}")
        return None
    sp = next((p for p in svc.ports if t.port is None or p.port == t.port), None)
    if sp is None:
        bad("to.port", f"service {key} has no port {t.port}; expected one of {[p.port for p in svc.ports]}")
        return None
    via = t.via or "clusterIP"
    proto = _proto(fl.protocol or sp.protocol)
    cands = _backends(topo, svc)
    if via == "clusterIP":
        return ResolvedFlow(fl, fl.from_, svc.clusterIP, sp.port, proto, cands)
    if via == "nodePort":
        if sp.nodePort is None:
            bad("to.via", f"service {key} port {sp.port} has no nodePort; use via: clusterIP or give it type NodePort")
            return None
        node_name = t.node or topo.nodes[0].name
        if node_name not in {n.name for n in topo.nodes}:
            bad("to.node", f"unknown node {node_name!r}; expected one of {sorted(n.name for n in topo.nodes)}")
            return None
        return ResolvedFlow(fl, fl.from_, topo.node(node_name).ip, sp.nodePort, proto, cands)
    if via == "externalIP":
        if not svc.externalIPs:
            bad("to.via", f"service {key} has no externalIPs")
            return None
        return ResolvedFlow(fl, fl.from_, svc.externalIPs[0], sp.port, proto, cands)
    # loadBalancer: kube-proxy's own LB IP first, else an external load balancer in front of it
    if svc.loadBalancerIPs:
        return ResolvedFlow(fl, fl.from_, svc.loadBalancerIPs[0], sp.port, proto, cands)
    lb = next((e for e in topo.externals if e.role == "loadbalancer" and key in e.backends), None)
    if lb is None or lb.vip is None:
        bad("to.via", f"service {key} has no loadBalancerIPs and no external with role: loadbalancer, "
                      f"backends: [{key}]; add one of them")
        return None
    return ResolvedFlow(fl, fl.from_, lb.vip, sp.port, proto, cands)


def _proto(p: str) -> Literal["TCP", "UDP", "SCTP"]:
    """The flow's protocol as given (a Service port's SCTP stays SCTP: it is never sent as TCP)."""
    return "UDP" if p == "UDP" else "SCTP" if p == "SCTP" else "TCP"


def _backends(topo: Topology, svc: Service) -> tuple[str, ...]:
    """The pods that could answer for `svc`: those its selector picks, else those its endpoints name."""
    if svc.selector is not None:
        return tuple(p.name for p in selected_pods(topo, svc))
    ips = {e.ip for e in svc.endpoints or []}
    return tuple(p.name for p in topo.pods if p.ip in ips)
