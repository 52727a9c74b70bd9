"""Topology-aware routing as kube-proxy decides it per node, by release (pkg/proxy/topology.go).

kube-proxy reads only the EndpointSlice hints (the EndpointSlice controller writes them from
`trafficDistribution` or the topology-mode annotation). Which hints it honours changed:

- before 1.24: none (the TopologyAwareHints gate is off by default);
- 1.24-1.26: zone hints, when the Service's `service.kubernetes.io/topology-aware-hints`
  annotation is Auto/auto (`canUseTopology`);
- 1.27-1.30: zone hints, when that annotation (else `service.kubernetes.io/topology-mode`) is set
  and not disabled/Disabled;
- 1.31-1.32: zone hints whatever the annotation (ServiceTrafficDistribution on);
- 1.33: `topologyModeFromHints`, zone hints only (PreferSameTrafficDistribution is alpha, off);
- 1.34+: node hints first, then zone hints.

Each uses hints only when every ready endpoint has one and at least one is for this node (zone);
otherwise every endpoint (the fallback kube-proxy logs and applies).
"""

from __future__ import annotations

from collections.abc import Sequence

from kpemu.model.slicehints import SAME_NODE, SAME_ZONE, Hints, controller_hints

__all__ = ["SAME_NODE", "SAME_ZONE", "Hints", "controller_hints"]

def node_hints_read(minor: int) -> bool:
    """Whether kube-proxy 1.`minor` keeps an endpoint's forNodes hints (PreferSameTrafficDistribution on)."""
    return minor >= 34


def _annotation_allows(minor: int, topology_mode: str | None, aware_hints: str | None) -> bool:
    if minor >= 31:
        return True
    if minor <= 26:
        return aware_hints in ("Auto", "auto")
    value = aware_hints if aware_hints is not None else topology_mode
    return value not in (None, "", "disabled", "Disabled")


def topology_mode(minor: int, ready_hints: Sequence[Hints], node: str, zone: str | None,
                  topology_mode_annotation: str | None = None, aware_hints: str | None = None) -> str:
    """"" (no topology), PreferSameZone or PreferSameNode for kube-proxy 1.`minor` on `node` in `zone`,
    from the hints of the Service's ready endpoints."""
    if minor < 24 or not ready_hints or not _annotation_allows(minor, topology_mode_annotation, aware_hints):
        return ""
    if minor >= 34 and all(h.nodes for h in ready_hints) and any(node in h.nodes for h in ready_hints):
        return SAME_NODE
    if all(h.zones for h in ready_hints) and zone and any(zone in h.zones for h in ready_hints):
        return SAME_ZONE
    return ""


def available(h: Hints, prefer: str, node: str, zone: str | None) -> bool:
    """Whether an endpoint with hints `h` is used on `node` under topology mode `prefer` (availableForTopology)."""
    if prefer == SAME_NODE:
        return node in h.nodes
    if prefer == SAME_ZONE:
        return zone in h.zones
    return True


