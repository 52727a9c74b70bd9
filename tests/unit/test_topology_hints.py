"""Topology-aware routing as kube-proxy decides it: the cases of upstream's pkg/proxy/topology_test.go
(TestCategorizeEndpoints, v1.33.6) that are about hints, run through kpemu.proxy.hints, and the
release differences (kube_features.go: TopologyAwareHints, ServiceTrafficDistribution,
PreferSameTrafficDistribution)."""

from __future__ import annotations

import pytest

from kpemu.proxy.hints import Hints, available, controller_hints, topology_mode


def _h(zones: str = "", nodes: str = "") -> Hints:
    return Hints(frozenset(z for z in zones.split(",") if z), frozenset(n for n in nodes.split(",") if n))


def _cluster(minor: int, eps: list[tuple[str, Hints, bool]], node: str, zone: str | None) -> set[str]:
    """CategorizeEndpoints' clusterEndpoints (before the terminating fallback)."""
    mode = topology_mode(minor, [h for _, h, ready in eps if ready], node, zone)
    return {ep for ep, h, ready in eps if ready and available(h, mode, node, zone)}


FOUR = [("10.1.2.3:80", _h("zone-a"), True), ("10.1.2.4:80", _h("zone-b"), True),
        ("10.1.2.5:80", _h("zone-c"), True), ("10.1.2.6:80", _h("zone-a"), True)]
NODE_HINTED = [("10.1.2.3:80", _h("zone-a", "node-1"), True), ("10.1.2.4:80", _h("zone-b", "node-2"), True),
               ("10.1.2.5:80", _h("zone-c", "node-3"), True), ("10.1.2.6:80", _h("zone-a", "node-4"), True)]
ALL4 = {"10.1.2.3:80", "10.1.2.4:80", "10.1.2.5:80", "10.1.2.6:80"}

CASES = [
    ("should use topology since all endpoints have hints, node has a zone label and and there are endpoints for "
     "the node's zone", 33, FOUR, "n", "zone-a", {"10.1.2.3:80", "10.1.2.6:80"}),
    ("empty node labels", 33, [("10.1.2.3:80", _h("zone-a"), True)], "n", None, {"10.1.2.3:80"}),
    ("empty zone label", 33, [("10.1.2.3:80", _h("zone-a"), True)], "n", "", {"10.1.2.3:80"}),
    ("node in different zone, no endpoint filtering", 33, [("10.1.2.3:80", _h("zone-a"), True)], "n", "zone-b",
     {"10.1.2.3:80"}),
    ("unready endpoint", 33, [*FOUR[:3], ("10.1.2.6:80", _h("zone-a"), False)], "n", "zone-a", {"10.1.2.3:80"}),
    ("only unready endpoints in same zone (should not filter)", 33,
     [("10.1.2.3:80", _h("zone-a"), False), *FOUR[1:3], ("10.1.2.6:80", _h("zone-a"), False)], "n", "zone-a",
     {"10.1.2.4:80", "10.1.2.5:80"}),
    ("missing hints, no filtering applied", 33, [*FOUR[:2], ("10.1.2.5:80", _h(), True), FOUR[3]], "n", "zone-a",
     ALL4),
    ("multiple hints per endpoint, filtering includes any endpoint with zone included", 33,
     [("10.1.2.3:80", _h("zone-a,zone-b,zone-c"), True), ("10.1.2.4:80", _h("zone-b,zone-c"), True),
      ("10.1.2.5:80", _h("zone-b,zone-d"), True), ("10.1.2.6:80", _h("zone-c"), True)], "n", "zone-c",
     {"10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"}),
    # 1.33: PreferSameTrafficDistribution is alpha (off): "falls back to same-zone when feature gate disabled"
    ("PreferSameNode falls back to same-zone when feature gate disabled", 33, NODE_HINTED, "node-1", "zone-a",
     {"10.1.2.3:80", "10.1.2.6:80"}),
    # 1.34+: the gate is on by default (beta)
    ("PreferSameNode available", 34, NODE_HINTED, "node-1", "zone-a", {"10.1.2.3:80"}),
    ("PreferSameNode ignored if some endpoints unhinted", 34,
     [NODE_HINTED[0], ("10.1.2.4:80", _h(), True), *NODE_HINTED[2:]], "node-1", "zone-a", ALL4),
    ("PreferSameNode falls back to PreferSameZone if no endpoint for node", 34, NODE_HINTED, "node-0", "zone-a",
     {"10.1.2.3:80", "10.1.2.6:80"}),
]


@pytest.mark.parametrize(("name", "minor", "eps", "node", "zone", "expected"), CASES, ids=[c[0] for c in CASES])
def test_upstream_categorize_endpoints_cases(name: str, minor: int, eps: list, node: str, zone: str | None,
                                             expected: set[str]) -> None:
    assert _cluster(minor, eps, node, zone) == expected


def test_releases_before_1_31_need_the_annotation_and_before_1_24_ignore_hints() -> None:
    ready = [h for _, h, _ in FOUR]
    assert topology_mode(23, ready, "n", "zone-a", None, "Auto") == ""
    assert topology_mode(26, ready, "n", "zone-a", "Auto", None) == ""  # topology-mode is read from 1.27
    assert topology_mode(26, ready, "n", "zone-a", None, "auto") == "PreferSameZone"
    assert topology_mode(27, ready, "n", "zone-a", "Auto", None) == "PreferSameZone"
    assert topology_mode(30, ready, "n", "zone-a", "Disabled", None) == ""
    assert topology_mode(30, ready, "n", "zone-a", None, None) == ""
    assert topology_mode(31, ready, "n", "zone-a", None, None) == "PreferSameZone"


def test_the_controller_hints_for_traffic_distribution() -> None:
    assert controller_hints("PreferClose", 33, "zone-a", "n1") == _h("zone-a")
    assert controller_hints("PreferClose", 30, "zone-a", "n1") == _h()  # ServiceTrafficDistribution alpha, off
    assert controller_hints("PreferClose", 33, None, "n1") == _h()  # an endpoint without a zone gets none
    assert controller_hints("PreferSameNode", 33, "zone-a", "n1") == _h()
    assert controller_hints("PreferSameNode", 34, "zone-a", "n1") == _h("zone-a", "n1")
    assert controller_hints("PreferSameZone", 34, "zone-a", "n1") == _h("zone-a")
