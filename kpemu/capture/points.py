"""Which interfaces a scenario's flows can cross (pure): the capture points."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kpemu.plan.types import Interface, Plan

if TYPE_CHECKING:  # the capture side of a run imports this module without the model (pydantic)
    from kpemu.model.scenario import ResolvedFlow
    from kpemu.model.topology import Topology

# Bridges in the underlay router show what their ports show; captures on the ports suffice.
SKIPPED_ROLES = {"underlay-bridge", "external-bridge"}


def capture_file_stem(iface: Interface) -> str:
    """`<netns>_<iface>`: the name of the pcap and text files of one capture point."""
    return f"{iface.ns}_{iface.name}"


def point_name(iface: Interface) -> str:
    """`member/iface`, as expectations name a capture point."""
    return f"{iface.member}/{iface.name}"


def capture_points(plan: Plan, topo: Topology, flows: Iterable[ResolvedFlow]) -> list[Interface]:
    """Interfaces in the namespaces the flows can touch: sources, nodes, underlay, candidate pods, LBs."""
    flows = list(flows)
    members = {"underlay"} | {n.name for n in topo.nodes}
    members |= {f.src_member for f in flows}
    members |= {e.name for e in topo.externals if e.role == "loadbalancer"}
    pods = {c for f in flows for c in f.candidates}
    if any(not f.candidates for f in flows):  # an address or unknown target: any pod may answer
        pods |= {p.name for p in topo.pods}
    members |= pods
    pod_veths = _pod_veths(plan, pods | {f.src_member for f in flows})
    out = []
    for i in plan.interfaces:
        if i.member not in members or i.role in SKIPPED_ROLES:
            continue
        if i.role == "pod-veth" and (i.ns, i.name) not in pod_veths:
            continue
        out.append(i)
    return out


def _pod_veths(plan: Plan, pods: set[str]) -> set[tuple[str, str]]:
    """(node netns, host-side veth) of the given pods."""
    pod_ns = {ns.name for ns in plan.namespaces if ns.member in pods}
    out = set()
    for v in plan.veths:
        if v.ns in pod_ns:
            out.add((v.peer_ns, v.peer_name))
        if v.peer_ns in pod_ns:
            out.add((v.ns, v.name))
    return out
