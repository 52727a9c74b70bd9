# ruff: noqa: E501  (expected texts are verbatim rule / ipset lines)
"""IPVS-mode state for reference 9.4's default/nginx example, in three kube-proxy eras.

Expected texts are written by hand from reference/kube-proxy.md sections 3.1-3.6, 4.1 and 9.3
(and the ipvsadm/ipset output formats documented in kpemu/proxy/ipvs/ipvsadm_text.py and
ipset_text.py), not copied from kpemu's output.
"""

from __future__ import annotations

import pytest

from kpemu.model import topology_from_data
from kpemu.proxy.ipvs import ipvs_rules


def nginx_topology(version: str, **kube_proxy: object) -> object:
    """Reference 9.4: default/nginx 8080/TCP -> 80, nodePort 30180, endpoints .4 and .5."""
    return topology_from_data(
        {
            "name": "ref",
            "cni": "calico-ipip",
            "kubeProxy": {"mode": "ipvs", "version": version, "clusterCIDR": "172.17.0.0/16", **kube_proxy},
            "underlay": "192.168.0.0/24",
            "nodes": [{"name": "node1", "ip": "192.168.0.2", "podCIDR": "172.17.0.0/24", "tunnelIP": "172.17.0.1"}],
            "pods": [
                {"name": "nginx-a", "node": "node1", "ip": "172.17.0.4", "labels": {"app": "nginx"}, "ports": [80]},
                {"name": "nginx-b", "node": "node1", "ip": "172.17.0.5", "labels": {"app": "nginx"}, "ports": [80]},
            ],
            "services": [
                {
                    "name": "nginx",
                    "type": "NodePort",
                    "clusterIP": "10.105.178.199",
                    "selector": {"app": "nginx"},
                    "ports": [{"port": 8080, "targetPort": 80, "nodePort": 30180}],
                }
            ],
        },
        "test",
    )


MASQ_CLUSTER = (
    '-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" '
    "-m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 172.17.0.0/16 -j KUBE-MARK-MASQ"
)
LOOP_BACK = (
    '-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin '
    'purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE'
)
NODE_PORT_TCP = (
    '-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" '
    "-m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ"
)
HC = (
    '-A KUBE-NODE-PORT -m comment --comment "Kubernetes health check node port" '
    "-m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT"
)
SNAT = '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT"'
NAT_JUMPS = """\
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
"""

RESTORE_133 = f"""\
*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
{NAT_JUMPS}-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN
{LOOP_BACK}
{NODE_PORT_TCP}
{MASQ_CLUSTER}
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
{SNAT} -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-A FORWARD -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
{HC}
-A KUBE-IPVS-FILTER -m set --match-set KUBE-LOAD-BALANCER dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT
COMMIT
"""

# 1.20: xor-mark era (seed 000): LOOP-BACK first in KUBE-POSTROUTING, nat KUBE-FIREWALL,
# two pod source/destination conntrack rules without CIDR, no IPVS filter chains.
RESTORE_120 = f"""\
*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-MARK-DROP - [0:0]
{NAT_JUMPS}-A KUBE-MARK-DROP -j MARK --set-xmark 0x00008000/0x00008000
{LOOP_BACK}
{NODE_PORT_TCP}
{MASQ_CLUSTER}
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-FIREWALL -j KUBE-MARK-DROP
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
{SNAT} -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
-A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack pod source rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack pod destination rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
{HC}
COMMIT
"""

# 1.15 (legacy, reference 9.3): mark MASQUERADE written before the LOOP-BACK rule, --set-xmark,
# no --random-fully (kube-proxy < 1.16), pod conntrack rules with the cluster CIDR (< 1.18).
RESTORE_115 = f"""\
*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-MARK-DROP - [0:0]
{NAT_JUMPS}{SNAT} -m mark --mark 0x00004000/0x00004000 -j MASQUERADE
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x00004000/0x00004000
-A KUBE-MARK-DROP -j MARK --set-xmark 0x00008000/0x00008000
{LOOP_BACK}
{NODE_PORT_TCP}
{MASQ_CLUSTER}
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-FIREWALL -j KUBE-MARK-DROP
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
-A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
-A KUBE-FORWARD -s 172.17.0.0/16 -m comment --comment "kubernetes forwarding conntrack pod source rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack pod destination rule" -d 172.17.0.0/16 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
{HC}
COMMIT
"""


@pytest.mark.parametrize(("version", "expected"), [("1.33", RESTORE_133), ("1.20", RESTORE_120), ("1.15", RESTORE_115)])
def test_restore_text_by_era(version: str, expected: str) -> None:
    assert ipvs_rules(nginx_topology(version), "node1").restore_text() == expected


def test_random_fully_off_drops_the_option() -> None:
    text = ipvs_rules(nginx_topology("1.33", randomFully=False), "node1").restore_text()
    assert f"{SNAT} -j MASQUERADE\n" in text


def test_without_cluster_cidr_masq_uses_src_dst() -> None:
    topo = nginx_topology("1.33").model_copy(update={"kubeProxy": nginx_topology("1.33", clusterCIDR=None).kubeProxy})
    text = ipvs_rules(topo, "node1").restore_text()
    assert "-m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ" in text


# Virtual servers (reference 9.4 IPVS variant): NodePort VS on each node address = underlay IP
# and the calico tunl0 address. Order: ipvsadm compares addresses as a wrapped 32-bit difference,
# so 172.17.0.1 < 192.168.0.2 < 10.105.178.199.
IPVSADM_133 = """\
-A -t 172.17.0.1:30180 -s rr
-a -t 172.17.0.1:30180 -r 172.17.0.4:80 -m -w 1
-a -t 172.17.0.1:30180 -r 172.17.0.5:80 -m -w 1
-A -t 192.168.0.2:30180 -s rr
-a -t 192.168.0.2:30180 -r 172.17.0.4:80 -m -w 1
-a -t 192.168.0.2:30180 -r 172.17.0.5:80 -m -w 1
-A -t 10.105.178.199:8080 -s rr
-a -t 10.105.178.199:8080 -r 172.17.0.4:80 -m -w 1
-a -t 10.105.178.199:8080 -r 172.17.0.5:80 -m -w 1
"""


def test_ipvsadm_text_133() -> None:
    assert ipvs_rules(nginx_topology("1.33"), "node1").ipvsadm_text() == IPVSADM_133


def test_legacy_adds_localhost_nodeport_vs() -> None:
    text = ipvs_rules(nginx_topology("1.15"), "node1").ipvsadm_text()
    # 127.x against 10.x/172.x/192.168.x is where the wrapped comparison stops being transitive;
    # only presence is asserted.
    assert "-A -t 127.0.0.1:30180 -s rr\n-a -t 127.0.0.1:30180 -r 172.17.0.4:80 -m -w 1\n" in text
    assert "127.0.0.1" not in ipvs_rules(nginx_topology("1.33"), "node1").ipvsadm_text()


def test_client_ip_affinity_and_mh_scheduler() -> None:
    topo = nginx_topology("1.33", scheduler="mh")
    svc = topo.services[0].model_copy(update={"sessionAffinity": "ClientIP", "sessionAffinityTimeout": 600})
    topo = topo.model_copy(update={"services": [svc]})
    text = ipvs_rules(topo, "node1").ipvsadm_text()
    assert "-A -t 10.105.178.199:8080 -s mh -p 600 -b mh-port\n" in text


ALL_SETS_133 = [
    ("KUBE-LOOP-BACK", "hash:ip,port,ip"),
    ("KUBE-CLUSTER-IP", "hash:ip,port"),
    ("KUBE-EXTERNAL-IP", "hash:ip,port"),
    ("KUBE-EXTERNAL-IP-LOCAL", "hash:ip,port"),
    ("KUBE-LOAD-BALANCER", "hash:ip,port"),
    ("KUBE-LOAD-BALANCER-FW", "hash:ip,port"),
    ("KUBE-LOAD-BALANCER-LOCAL", "hash:ip,port"),
    ("KUBE-LOAD-BALANCER-SOURCE-IP", "hash:ip,port,ip"),
    ("KUBE-LOAD-BALANCER-SOURCE-CIDR", "hash:ip,port,net"),
    ("KUBE-NODE-PORT-TCP", "bitmap:port"),
    ("KUBE-NODE-PORT-LOCAL-TCP", "bitmap:port"),
    ("KUBE-NODE-PORT-UDP", "bitmap:port"),
    ("KUBE-NODE-PORT-LOCAL-UDP", "bitmap:port"),
    ("KUBE-NODE-PORT-SCTP-HASH", "hash:ip,port"),
    ("KUBE-NODE-PORT-LOCAL-SCTP-HASH", "hash:ip,port"),
    ("KUBE-HEALTH-CHECK-NODE-PORT", "bitmap:port"),
    ("KUBE-IPVS-IPS", "hash:ip"),
]
MEMBERS = {
    "KUBE-LOOP-BACK": ["172.17.0.4,tcp:80,172.17.0.4", "172.17.0.5,tcp:80,172.17.0.5"],
    "KUBE-CLUSTER-IP": ["10.105.178.199,tcp:8080"],
    "KUBE-NODE-PORT-TCP": ["30180"],
    "KUBE-IPVS-IPS": ["10.105.178.199"],
}


def _expected_save(sets: list[tuple[str, str]]) -> str:
    lines = []
    for name, kind in sets:
        opts = "range 0-65535" if kind == "bitmap:port" else "family inet hashsize 1024 maxelem 65536 bucketsize 12"
        lines.append(f"create {name} {kind} {opts}")
        lines += [f"add {name} {m}" for m in MEMBERS.get(name, [])]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("version", ["1.33", "1.20", "1.15"])
def test_ipset_save_text(version: str) -> None:
    sets = ALL_SETS_133 if version == "1.33" else ALL_SETS_133[:-1]  # KUBE-IPVS-IPS from 1.26
    assert ipvs_rules(nginx_topology(version), "node1").ipset_save_text() == _expected_save(sets)


def test_bound_addresses_and_sysctls() -> None:
    new, old = ipvs_rules(nginx_topology("1.33"), "node1"), ipvs_rules(nginx_topology("1.15"), "node1", kernel=(4, 19))
    assert new.bound_addresses == ("10.105.178.199",)
    assert dict(new.sysctls) == {
        "net/ipv4/vs/conntrack": "1",
        "net/ipv4/vs/expire_nodest_conn": "1",
        "net/ipv4/vs/expire_quiescent_template": "1",
        "net/ipv4/ip_forward": "1",
    }
    assert dict(old.sysctls)["net/ipv4/vs/conn_reuse_mode"] == "0"
    assert dict(old.sysctls)["net/ipv4/conf/all/route_localnet"] == "1"
