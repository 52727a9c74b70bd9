"""An external load balancer that health-checks the nodes: its rules (unchanged for Services kube-proxy does
not health-check), the chain written again with the nodes that passed, and the probe against kube-proxy's
health server."""

from __future__ import annotations

import socket

from kpemu.inputs.scenario import load_scenario
from kpemu.jobs.balancers import probe
from kpemu.jobs.build import collect_job
from kpemu.labplan import lab_plan
from kpemu.plan.lbrules import LbTarget, balancer_rules, rebalanced_chain
from kpemu.traffic.health import HealthServers, HealthSpec, ServiceCheck

T = tuple(LbTarget("default/web", 80, "tcp", f"node{i}", f"192.168.1.10{i}", 30080, 32000) for i in (1, 2, 3))
DNAT = '-A KPEMU-LB -d 10.242.72.100/32 -p tcp -m tcp --dport 80 -m comment --comment "lb default/web:80 -> node{n}" '


def test_every_node_is_balanced_until_the_checks_ran() -> None:
    assert balancer_rules("10.242.72.100", T) == "\n".join([
        "*nat", ":KPEMU-LB - [0:0]", "-A PREROUTING -j KPEMU-LB",
        DNAT.format(n=1) + "-m statistic --mode random --probability 0.3333333333 -j DNAT --to-destination "
                           "192.168.1.101:30080",
        DNAT.format(n=2) + "-m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination "
                           "192.168.1.102:30080",
        DNAT.format(n=3) + "-j DNAT --to-destination 192.168.1.103:30080",
        "-A POSTROUTING -m conntrack --ctstate DNAT -j MASQUERADE", "COMMIT", ""])


def test_the_chain_is_written_again_with_the_nodes_that_passed() -> None:
    assert rebalanced_chain("10.242.72.100", T, frozenset({("node1", 32000), ("node3", 32000)})) == "\n".join([
        "*nat", ":KPEMU-LB - [0:0]",
        DNAT.format(n=1) + "-m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination "
                           "192.168.1.101:30080",
        DNAT.format(n=3) + "-j DNAT --to-destination 192.168.1.103:30080", "COMMIT", ""])
    unchecked = tuple(LbTarget(t.service, t.port, t.proto, t.node, t.node_ip, t.node_port) for t in T)
    assert rebalanced_chain("10.242.72.100", unchecked, frozenset()).count("-j DNAT") == 3


def test_the_shipped_scenario_health_checks_its_balancer() -> None:
    sc = load_scenario("scenarios/health-check-local.yaml")
    job = collect_job(sc, lab_plan(sc.topology, (6, 1)))
    assert [(b.name, b.vip, [(t.node, t.health_port) for t in b.targets], b.restore) for b in job.balancers] == [
        ("lb", "10.242.72.100", [("node1", 32000), ("node2", 32000), ("node3", 32000)],
         ("iptables-nft-restore", "--noflush", "--wait"))]
    plain = load_scenario("scenarios/loadbalancer-vxlan.yaml")
    assert collect_job(plain, lab_plan(plain.topology, (6, 1))).balancers == ()


def test_probe_reads_the_status_of_kube_proxy_s_health_server() -> None:
    servers = HealthServers()
    socks = []
    for endpoints in (1, 0):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        socks.append(s)
        spec = HealthSpec(ns="", node="n", minor=33, services=(ServiceCheck("default", "web", 0, endpoints),))
        servers.add(spec, [(spec.services[0], s)])
    try:
        assert [probe("127.0.0.1", s.getsockname()[1]) for s in socks] == [200, 503]
        free = socket.socket()
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
        free.close()
        assert probe("127.0.0.1", port) is None  # nothing listens: no answer
    finally:
        servers.close()

