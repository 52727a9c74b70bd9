"""What kube-proxy's UDP conntrack cleanup does on one node after a change of endpoints, by release
(pure): the plan a lab step carries out with the conntrack tool at the point kube-proxy runs it,
after the sync that programmed the new rules.

- Before 1.32 (pkg/proxy/conntrack/cleanup.go, event-based): for each UDP endpoint that served and
  is gone, kube-proxy runs the conntrack tool: `-D -p udp --dport NP --dst-nat EP` for a NodePort,
  then `-D --orig-dst F --dst-nat EP -p udp` for the ClusterIP, each externalIP and LoadBalancer IP;
  for a UDP service that goes from no serving endpoint to some, `-D --orig-dst F -p udp` and `-D -p
  udp --dport NP`. Without the tool it logs the error and deletes nothing, and the change is not
  seen again.
- 1.32+ (#127318): after a sync in which a UDP service's endpoints changed, it lists the table
  through netlink and deletes what kpemu.proxy.conntrack.stale selects; no tool is needed.
"""

from __future__ import annotations

from typing import Any

from kpemu.model.topology import Topology
from kpemu.proxy.endpoints import EndpointInfo, ServicePortInfo, service_ports
from kpemu.proxy.versions import Flavour

TOOL_MISSING = ('"Failed to delete endpoint connections" err="error looking for path of conntrack: '
                'exec: \\"conntrack\\": executable file not found in $PATH"')


def _frontends(info: ServicePortInfo) -> list[str]:
    svc = info.service
    return [svc.clusterIP, *svc.loadBalancerIPs, *svc.externalIPs]


def _node_port(info: ServicePortInfo) -> int | None:
    return info.port.nodePort if info.service.type in ("NodePort", "LoadBalancer") else None


def _serving(info: ServicePortInfo) -> list[EndpointInfo]:
    return [e for e in info.endpoints if e.serving]


def _udp(topo: Topology, node: str) -> dict[tuple[str, str], ServicePortInfo]:
    return {(i.service.key, i.port.name): i for i in service_ports(topo, node) if i.protocol == "udp"}


def _changed(before: dict[tuple[str, str], ServicePortInfo], after: dict[tuple[str, str], ServicePortInfo]) -> bool:
    """ConntrackCleanupRequired: some UDP service port's endpoints changed."""
    keys = set(before) | set(after)
    return any((before[k].endpoints if k in before else None) != (after[k].endpoints if k in after else None)
               for k in keys)


def event_commands(before: Topology, after: Topology, node: str) -> list[tuple[str, ...]]:
    """The conntrack tool commands of kube-proxy before 1.32 for the change `before` -> `after`."""
    old, new = _udp(before, node), _udp(after, node)
    service_ips: list[str] = []
    node_ports: list[int] = []
    for key, info in new.items():  # newly active: no serving endpoint before, some now
        if _serving(info) and not (key in old and _serving(old[key])):
            service_ips += [f for f in _frontends(info) if f not in service_ips]
            np = _node_port(info)
            if np and np not in node_ports:
                node_ports.append(np)
    out = [("conntrack", "-D", "--orig-dst", ip, "-p", "udp") for ip in service_ips]
    out += [("conntrack", "-D", "-p", "udp", "--dport", str(np)) for np in node_ports]
    for key, info in old.items():  # deleted: served before, not the same serving endpoint now
        now = new.get(key)
        if now is None:
            continue  # the service went away: its own cleanup, not an endpoint's
        for ep in _serving(info):
            if any(e.hostport == ep.hostport and e.serving for e in now.endpoints):
                continue
            np = _node_port(now)
            if np:
                out.append(("conntrack", "-D", "-p", "udp", "--dport", str(np), "--dst-nat", ep.ip))
            out += [("conntrack", "-D", "--orig-dst", f, "--dst-nat", ep.ip, "-p", "udp") for f in _frontends(now)]
    return out


def reconcile_plan(topo: Topology, node: str, flavour: Flavour) -> dict[str, Any]:
    """CleanStaleEntries' view of the services after the change (kpemu.proxy.conntrack.stale reads it)."""
    frontends: dict[str, list[str]] = {}
    node_ports: dict[str, list[str]] = {}
    for info in _udp(topo, node).values():
        keys = sorted({e.hostport if flavour.reconcile_endpoint_port else e.ip for e in _serving(info)})
        if not keys and flavour.reconcile_skips_empty:
            continue
        for f in _frontends(info):
            frontends[f"{f}:{info.port.port}"] = keys
        np = _node_port(info)
        if np and keys:  # 1.37: a NodePort is matched by port alone, so never with no endpoint
            node_ports[str(np)] = keys
    return {"frontends": frontends, "nodePorts": node_ports, "endpointPort": flavour.reconcile_endpoint_port}


def cleanup(before: Topology, after: Topology, node: str, flavour: Flavour, tool: bool) -> dict[str, Any]:
    """The node's cleanup as plain data: {"commands": [argv]} (before 1.32), {"reconcile": plan}
    (1.32+), or {"skipped": why} (nothing to do, or no conntrack tool before 1.32)."""
    if not _changed(_udp(before, node), _udp(after, node)):
        return {"skipped": "no UDP service's endpoints changed: kube-proxy runs no conntrack cleanup"}
    if flavour.conntrack_reconciler:
        return {"reconcile": reconcile_plan(after, node, flavour)}
    if not tool:
        return {"skipped": f"kube-proxy {flavour.version} logs {TOOL_MISSING}"}
    return {"commands": [list(c) for c in event_commands(before, after, node)]}
