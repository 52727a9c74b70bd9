"""kube-proxy's health-check servers: what kube-proxy's pkg/proxy/healthcheck answers, by release, byte for
byte (headers in Go net/http's order, as a Go 1.26 server sent them), and what each node's checks count."""

from __future__ import annotations

import socket

import pytest

from kpemu.inputs.scenario import load_scenario
from kpemu.labplan import lab_plan
from kpemu.model import topology_from_data
from kpemu.proxy.health import health_specs, local_ready_endpoints
from kpemu.traffic.health import HealthServers, HealthSpec, ServiceCheck, go_time_string, release_facts, respond

NOW = 1796222105_566146300  # 2026-12-02 14:35:05.566146... UTC
DATE = "Date: Wed, 02 Dec 2026 14:35:05 GMT"
GET_10 = b"GET / HTTP/1.0\r\nHost: 192.168.1.101:32000\r\nUser-Agent: m\r\nConnection: close\r\n\r\n"
CHECK = ServiceCheck("default", "web", 32000, 2)


def _answer(raw: bytes, check: ServiceCheck | None, minor: int) -> str:
    out, _ = respond(raw, check, release_facts(minor), NOW, 3_250_000_000, NOW - 1_000_000_000)
    return out.decode()


def test_service_check_at_1_33_is_go_net_http_with_the_weight_header() -> None:
    body = ('{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": 2,\n'
            '\t"serviceProxyHealthy": true\n}')
    assert _answer(GET_10, CHECK, 33) == (
        "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
        f"X-Load-Balancing-Endpoint-Weight: 2\r\n{DATE}\r\nContent-Length: {len(body)}\r\n\r\n{body}")


def test_service_check_without_local_ready_endpoints_is_503_and_1_1_close_is_echoed() -> None:
    raw = b"GET /anything?x=1 HTTP/1.1\r\nHost: n\r\nConnection: close\r\n\r\n"
    body = ('{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": 0,\n'
            '\t"serviceProxyHealthy": true\n}')
    assert _answer(raw, ServiceCheck("default", "web", 32000, 0), 30) == (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
        f"X-Load-Balancing-Endpoint-Weight: 0\r\n{DATE}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
        f"\r\n{body}")


def test_service_check_before_1_17_has_no_nosniff_and_before_1_27_no_proxy_health() -> None:
    body = '{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": 2\n}'
    assert _answer(GET_10, CHECK, 16) == (
        f"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n{DATE}\r\nContent-Length: {len(body)}\r\n\r\n{body}")
    assert _answer(GET_10, CHECK, 26).endswith('"localEndpoints": 2\n}')


def test_healthz_by_release() -> None:
    raw = b"GET /healthz HTTP/1.0\r\n\r\n"
    stamp = "2026-12-02 14:35:05.5661463 +0000 UTC m=+3.250000000"
    assert _answer(raw, None, 33).endswith(
        '\r\n\r\n{"lastUpdated":"2026-12-02T14:35:05.5661463Z","currentTime":"2026-12-02T14:35:05.5661463Z",'
        '"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-12-02T14:35:04.5661463Z",'
        '"healthy":true}}}')
    assert _answer(raw, None, 30).endswith(
        f'\r\n\r\n{{"lastUpdated": "{stamp}","currentTime": "{stamp}", "nodeEligible": true}}')
    assert _answer(raw, None, 20).endswith(f'\r\n\r\n{{"lastUpdated": "{stamp}","currentTime": "{stamp}"}}')


def test_livez_from_1_28_and_other_paths_are_go_s_404() -> None:
    raw = b"GET /livez HTTP/1.1\r\nHost: n\r\nConnection: close\r\n\r\n"
    assert _answer(raw, None, 33).startswith("HTTP/1.1 200 OK\r\n")
    assert '"nodeEligible"' not in _answer(raw, None, 33)
    assert _answer(raw, None, 27) == (
        "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"
        f"{DATE}\r\nContent-Length: 19\r\nConnection: close\r\n\r\n404 page not found\n")


def test_bad_requests_get_go_s_400() -> None:
    assert _answer(b"garbage\r\n\r\n", CHECK, 33) == (
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
        "400 Bad Request")
    assert _answer(b"GET / HTTP/1.1\r\n\r\n", CHECK, 33).startswith(
        "HTTP/1.1 400 Bad Request: missing required Host header\r\n")


def test_head_has_no_body_and_1_1_keeps_the_connection() -> None:
    out, keep = respond(b"HEAD / HTTP/1.1\r\nHost: n\r\n\r\n", CHECK, release_facts(33), NOW, 1, NOW)
    assert out.endswith(b"Content-Length: 114\r\n\r\n") and keep


def test_go_time_string_keeps_nine_monotonic_digits() -> None:
    assert go_time_string(1796222105_000000000, 500_000_000) == "2026-12-02 14:35:05 +0000 UTC m=+0.500000000"


def test_servers_answer_on_loopback_and_close() -> None:
    spec = HealthSpec(ns="", node="n", minor=33, bind=("127.0.0.1",), healthz="127.0.0.1:0",
                      services=(ServiceCheck("default", "web", 0, 1),))
    servers = HealthServers()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    servers.add(spec, [(spec.services[0], sock)])
    with socket.create_connection(sock.getsockname(), timeout=2) as c:
        c.sendall(b"GET / HTTP/1.0\r\n\r\n")
        got = b""
        while chunk := c.recv(4096):
            got += chunk
    assert got.startswith(b"HTTP/1.0 200 OK\r\n") and got.endswith(b'"serviceProxyHealthy": true\n}')
    servers.close()
    assert sock.fileno() == -1


TOPO = {
    "name": "hc", "kubeProxy": {"version": "1.33", "nodePortAddresses": ["192.168.1.0/24"]},
    "underlay": "192.168.1.0/24",
    "nodes": [{"name": "node1", "ip": "192.168.1.100", "podCIDR": "10.244.0.0/24"},
              {"name": "node2", "ip": "192.168.1.101", "podCIDR": "10.244.1.0/24"}],
    "pods": [{"name": "a", "node": "node1", "ip": "10.244.0.2", "labels": {"app": "web"}, "ports": [80, 443]},
             {"name": "b", "node": "node1", "ip": "10.244.0.3", "labels": {"app": "web"}, "ports": [80, 443],
              "ready": False},
             {"name": "c", "node": "node2", "ip": "10.244.1.2", "labels": {"app": "web"}, "ports": [80, 443],
              "terminating": True}],
    "services": [
        {"name": "web", "type": "LoadBalancer", "clusterIP": "10.96.0.10", "selector": {"app": "web"},
         "externalTrafficPolicy": "Local", "healthCheckNodePort": 32000,
         "ports": [{"name": "http", "port": 80, "nodePort": 30080}, {"name": "https", "port": 443, "nodePort": 30443}]},
        {"name": "cluster", "type": "LoadBalancer", "clusterIP": "10.96.0.11", "selector": {"app": "web"},
         "ports": [{"port": 80, "nodePort": 30081}]},
    ],
}


def test_checks_count_ready_local_addresses_once_and_listen_on_node_port_addresses() -> None:
    topo = topology_from_data(TOPO, "t.yaml")
    specs = health_specs(topo, lab_plan(topo, (6, 1)).fabric)
    assert [(s.node, s.bind, s.services) for s in specs] == [
        ("node1", ("192.168.1.100",), (ServiceCheck("default", "web", 32000, 1),)),
        ("node2", ("192.168.1.101",), (ServiceCheck("default", "web", 32000, 0),)),
    ]
    assert local_ready_endpoints(topo, topo.services[0], "node1") == 1  # a:80 and a:443 are one; b not ready


@pytest.mark.parametrize("minor,bind", [(22, ("0.0.0.0",)), (23, ("192.168.1.100",))])
def test_node_port_addresses_bind_the_checks_from_1_23(minor: int, bind: tuple[str, ...]) -> None:
    topo = topology_from_data({**TOPO, "kubeProxy": {**TOPO["kubeProxy"], "version": f"1.{minor}"}}, "t.yaml")
    assert health_specs(topo, lab_plan(topo, (6, 1)).fabric)[0].bind == bind


def test_the_shipped_scenario_s_job_carries_the_checks() -> None:
    from kpemu.jobs.build import collect_job

    sc = load_scenario("scenarios/health-check-local.yaml")
    job = collect_job(sc, lab_plan(sc.topology, (6, 1)))
    assert [(h.node, h.services) for h in job.health] == [
        ("node1", (ServiceCheck("default", "web", 32000, 1),)),
        ("node2", (ServiceCheck("default", "web", 32000, 0),)),
        ("node3", (ServiceCheck("default", "web", 32000, 0),)),
    ]
