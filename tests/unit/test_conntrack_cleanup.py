"""kube-proxy's UDP conntrack cleanup by release (pkg/proxy/conntrack/cleanup.go): the event-based
conntrack tool commands before 1.32, and the reconciler's selection from 1.32, on `conntrack -L`
text as conntrack-tools 1.4.7 prints it."""

from __future__ import annotations

from typing import Any

import pytest

from kpemu.model.topology import Topology
from kpemu.proxy.conntrack import Entry, parse_entries, stale
from kpemu.proxy.ctplan import cleanup, event_commands, reconcile_plan
from kpemu.proxy.versions import flavour_for_minor

LISTING = (
    "udp      17 27 src=10.244.0.3 dst=10.96.0.10 sport=40053 dport=53 src=10.244.1.5 dst=10.244.0.3 sport=53 "
    "dport=40053 mark=0 use=1\n"
    "udp      17 29 src=10.244.0.3 dst=10.96.0.10 sport=40054 dport=53 [UNREPLIED] src=10.244.0.2 dst=10.244.0.3 "
    "sport=5353 dport=40054 mark=0 use=1\n"
    "udp      17 29 src=10.244.0.3 dst=10.96.0.11 sport=40055 dport=53 [UNREPLIED] src=10.96.0.11 dst=10.244.0.3 "
    "sport=53 dport=40055 mark=0 use=1\n"
    "tcp      6 431999 ESTABLISHED src=10.244.0.3 dst=10.96.0.10 sport=1 dport=53 src=10.244.1.5 dst=10.244.0.3 "
    "sport=53 dport=1 [ASSURED] mark=0 use=1\n"
    "conntrack v1.4.7 (conntrack-tools): 4 flow entries have been shown.\n")


def test_parse_entries_reads_udp_original_and_reply_tuples() -> None:
    assert parse_entries(LISTING) == [
        Entry("10.244.0.3", "10.96.0.10", 40053, 53, "10.244.1.5", 53),
        Entry("10.244.0.3", "10.96.0.10", 40054, 53, "10.244.0.2", 5353),
        Entry("10.244.0.3", "10.96.0.11", 40055, 53, "10.96.0.11", 53)]
    assert Entry("10.244.0.3", "10.96.0.10", 40053, 53, "10.244.1.5", 53).delete_argv() == (
        "conntrack", "-D", "-p", "udp", "--orig-src", "10.244.0.3", "--orig-dst", "10.96.0.10",
        "--orig-port-src", "40053", "--orig-port-dst", "53")


def _selected(plan: dict[str, Any]) -> list[int]:
    return [e.sport for e in stale(parse_entries(LISTING), plan)]


def test_reconciler_deletes_what_points_at_no_serving_endpoint() -> None:
    """1.32/1.33 match the reply source by IP, 1.34+ by IP:port (so the 5353 reply is stale then)."""
    by_ip = {"frontends": {"10.96.0.10:53": ["10.244.0.2"]}, "nodePorts": {}, "endpointPort": False}
    by_port = {"frontends": {"10.96.0.10:53": ["10.244.0.2:53"]}, "nodePorts": {}, "endpointPort": True}
    assert _selected(by_ip) == [40053]
    assert _selected(by_port) == [40053, 40054]
    assert _selected({"frontends": {}, "nodePorts": {"53": ["10.244.0.2"]}, "endpointPort": False}) == [40053, 40055]


def _topo(version: str, dns: list[dict[str, Any]]) -> Topology:
    return Topology.model_validate({
        "name": "t", "kubeProxy": {"version": version}, "underlay": "192.168.1.0/24",
        "nodes": [{"name": "node1", "ip": "192.168.1.10", "podCIDR": "10.244.0.0/24"}],
        "services": [{"name": "dns", "clusterIP": "10.96.0.10", "type": "NodePort",
                      "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 30053}],
                      "endpoints": dns}]})


A = {"ip": "10.244.0.5", "node": "node1"}
B = {"ip": "10.244.0.6", "node": "node1"}


def test_before_1_32_the_commands_are_kube_proxys_own() -> None:
    """deleteStaleEndpointConntrackEntries for the endpoint that went (NodePort first, then the
    ClusterIP), deleteStaleServiceConntrackEntries for a Service that gains its first endpoint."""
    assert event_commands(_topo("1.31", [A]), _topo("1.31", [B]), "node1") == [
        ("conntrack", "-D", "-p", "udp", "--dport", "30053", "--dst-nat", "10.244.0.5"),
        ("conntrack", "-D", "--orig-dst", "10.96.0.10", "--dst-nat", "10.244.0.5", "-p", "udp")]
    assert event_commands(_topo("1.31", []), _topo("1.31", [B]), "node1") == [
        ("conntrack", "-D", "--orig-dst", "10.96.0.10", "-p", "udp"),
        ("conntrack", "-D", "-p", "udp", "--dport", "30053")]


@pytest.mark.parametrize(("minor", "frontends", "node_ports"), [
    (32, {}, {}),  # 1.32-1.36 skip a Service without serving endpoints (#139628)
    (36, {}, {}),
    (37, {"10.96.0.10:53": []}, {}),  # 1.37 (#139629): its entries go; a bare NodePort is not matched
])
def test_a_service_left_without_endpoints(minor: int, frontends: dict, node_ports: dict) -> None:
    f = flavour_for_minor(minor)
    assert reconcile_plan(_topo(f"1.{minor}", []), "node1", f) == {
        "frontends": frontends, "nodePorts": node_ports, "endpointPort": minor >= 34}


def test_no_udp_endpoint_change_means_no_cleanup() -> None:
    f = flavour_for_minor(37)
    assert cleanup(_topo("1.37", [A]), _topo("1.37", [A]), "node1", f, True) == {
        "skipped": "no UDP service's endpoints changed: kube-proxy runs no conntrack cleanup"}
