"""The hints the EndpointSlice controller writes (pure): what kube-proxy reads (kpemu.proxy.hints) and
what kpemu writes into the EndpointSlices it gives a real API server (kpemu.k8s.emit)."""

from __future__ import annotations

from dataclasses import dataclass

SAME_ZONE = "PreferSameZone"
SAME_NODE = "PreferSameNode"


@dataclass(frozen=True)
class Hints:
    """One endpoint's hints as kube-proxy keeps them (node hints dropped where its release ignores them)."""

    zones: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()


def controller_hints(distribution: str | None, minor: int, zone: str | None, node: str | None) -> Hints:
    """The hints the EndpointSlice controller of release 1.`minor` writes for an endpoint in `zone` on
    `node` under spec.trafficDistribution (trafficdist.go): PreferClose, and PreferSameZone (1.34+), the
    endpoint's own zone; PreferSameNode (1.34+) its node and zone; none before 1.31 (the gate was
    alpha in 1.30), for an endpoint without a zone, or for another value."""
    if minor < 31 or not zone:
        return Hints()
    if distribution == "PreferClose" or (distribution == SAME_ZONE and minor >= 34):
        return Hints(frozenset({zone}))
    if distribution == SAME_NODE and minor >= 34 and node:
        return Hints(frozenset({zone}), frozenset({node}))
    return Hints()
