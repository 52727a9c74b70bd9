# ruff: noqa: E501  (expected texts are verbatim rule / ipset lines)
"""ipset save / ipvsadm -Sn text helpers, and LoadBalancer / externalIP / eTP=Local handling."""

from __future__ import annotations

from kpemu.model import topology_from_data
from kpemu.proxy.ipvs import ipvs_rules
from kpemu.proxy.ipvs.ipset_text import canonical_save, make_set, save_text
from kpemu.proxy.ipvs.ipvsadm_text import RealServer, VirtualServer, canonical_ipvsadm, ipvsadm_save

# Captured from `ipset save` (ipset 7.17, kernel 6.18) in a throwaway namespace.
REAL_SAVE = """\
create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0xe8f2cabe
add KUBE-CLUSTER-IP 192.168.96.3,udp:53
add KUBE-CLUSTER-IP 192.168.96.3,tcp:9153
add KUBE-CLUSTER-IP 192.168.96.1,tcp:443
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-NODE-PORT-TCP 30080
add KUBE-NODE-PORT-TCP 30081
create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0xc59a32e9
add KUBE-LOAD-BALANCER-SOURCE-CIDR 203.0.113.10,tcp:80,198.51.100.7
add KUBE-LOAD-BALANCER-SOURCE-CIDR 203.0.113.10,tcp:80,198.51.100.0/24
"""


def test_canonical_save_drops_initval_and_sorts_members() -> None:
    sets = [
        make_set("KUBE-CLUSTER-IP", "hash:ip,port", "c", ["192.168.96.3,tcp:9153", "192.168.96.1,tcp:443",
                                                          "192.168.96.3,udp:53"]),
        make_set("KUBE-NODE-PORT-TCP", "bitmap:port", "c", ["30081", "30080"]),
        make_set("KUBE-LOAD-BALANCER-SOURCE-CIDR", "hash:ip,port,net", "c",
                 ["203.0.113.10,tcp:80,198.51.100.7/32", "203.0.113.10,tcp:80,198.51.100.0/24"]),
    ]
    assert canonical_save(REAL_SAVE) == save_text(sets)
    assert "initval" not in canonical_save(REAL_SAVE)


def test_bitmap_members_sort_numerically() -> None:
    assert make_set("S", "bitmap:port", "c", ["30081", "8080", "443"]).members == ("443", "8080", "30081")


def test_ipvsadm_wrapped_address_order_and_round_trip() -> None:
    rs = (RealServer("10.0.0.2", 80), RealServer("10.0.0.1", 80))
    vss = [VirtualServer("UDP", "10.96.0.10", 53, real_servers=rs), VirtualServer("TCP", "10.96.0.1", 443),
           VirtualServer("TCP", "192.168.1.1", 443, flags=1, timeout=10800)]
    text = ipvsadm_save(vss)
    assert text == (
        "-A -t 192.168.1.1:443 -s rr -p 10800\n"  # 192.168.x before 10.x: (int)(a - b) wraps
        "-A -t 10.96.0.1:443 -s rr\n"
        "-A -u 10.96.0.10:53 -s rr\n"
        "-a -u 10.96.0.10:53 -r 10.0.0.1:80 -m -w 1\n"
        "-a -u 10.96.0.10:53 -r 10.0.0.2:80 -m -w 1\n"
    )
    lines = text.splitlines(keepends=True)
    kernel_order = lines[2:3] + lines[4:5] + lines[3:4] + lines[0:2]  # blocks and dests shuffled
    assert canonical_ipvsadm("".join(kernel_order)) == text
    assert canonical_ipvsadm("".join(kernel_order[:-1])) != text


def lb_topology(version: str = "1.33", policy: str = "Local", ranges: list[str] | None = None) -> object:
    return topology_from_data(
        {
            "name": "lb",
            "cni": "flannel-vxlan",
            "kubeProxy": {"mode": "ipvs", "version": version, "clusterCIDR": "10.244.0.0/16"},
            "underlay": "10.246.0.0/16",
            "nodes": [
                {"name": "node1", "ip": "10.246.0.11", "podCIDR": "10.244.1.0/24"},
                {"name": "node2", "ip": "10.246.0.12", "podCIDR": "10.244.2.0/24"},
            ],
            "pods": [{"name": "web-0", "node": "node2", "ip": "10.244.2.7", "labels": {"app": "web"}, "ports": [8080]}],
            "services": [
                {
                    "name": "web",
                    "type": "LoadBalancer",
                    "clusterIP": "10.96.100.10",
                    "selector": {"app": "web"},
                    "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}],
                    "externalIPs": ["198.51.100.5"],
                    "loadBalancerIPs": ["203.0.113.10"],
                    "loadBalancerSourceRanges": ranges or [],
                    "externalTrafficPolicy": policy,
                    "healthCheckNodePort": 32000 if policy == "Local" else None,
                }
            ],
        },
        "test",
    )


def test_etp_local_sets_and_fallback_of_pr_97081() -> None:
    state = ipvs_rules(lb_topology(), "node1")  # the only endpoint is on node2
    assert state.ipset("KUBE-EXTERNAL-IP-LOCAL").members == ("198.51.100.5,tcp:80",)
    assert state.ipset("KUBE-EXTERNAL-IP").members == ()
    assert state.ipset("KUBE-LOAD-BALANCER-LOCAL").members == ("203.0.113.10,tcp:80",)
    assert state.ipset("KUBE-NODE-PORT-TCP").members == ("30080",)
    assert state.ipset("KUBE-NODE-PORT-LOCAL-TCP").members == ("30080",)
    assert state.ipset("KUBE-HEALTH-CHECK-NODE-PORT").members == ("32000",)
    assert state.ipset("KUBE-LOOP-BACK").members == ()
    # flannel node addresses: underlay IP, flannel.1 (.0) and cni0 (.1)
    assert state.node_addresses == ("10.244.1.0", "10.244.1.1", "10.246.0.11")
    assert state.bound_addresses == ("10.96.100.10", "198.51.100.5", "203.0.113.10")
    lb = next(v for v in state.virtual_servers if v.address == "203.0.113.10")
    assert lb.real_servers == (RealServer("10.244.2.7", 8080),)  # fallback to cluster endpoints (1.21+)
    old = ipvs_rules(lb_topology("1.20"), "node1")
    assert next(v for v in old.virtual_servers if v.address == "203.0.113.10").real_servers == ()
    text = state.restore_text()
    assert (
        '-A KUBE-LOAD-BALANCER -m comment --comment "Kubernetes service load balancer ip + port with '
        'externalTrafficPolicy=local" -m set --match-set KUBE-LOAD-BALANCER-LOCAL dst,dst -j RETURN' in text
    )
    assert "-A KUBE-SERVICES -m set --match-set KUBE-LOAD-BALANCER dst,dst -j ACCEPT" in text
    assert "KUBE-EXTERNAL-IP-LOCAL dst,dst -j KUBE-MARK-MASQ" not in text


def test_source_ranges_by_era() -> None:
    new = ipvs_rules(lb_topology(policy="Cluster", ranges=["192.0.2.0/24"]), "node1")
    assert new.ipset("KUBE-LOAD-BALANCER-SOURCE-CIDR").members == ("203.0.113.10,tcp:80,192.0.2.0/24",)
    assert new.ipset("KUBE-LOAD-BALANCER-SOURCE-IP").members == ()  # node IP not in the range
    text = new.restore_text()
    assert "-A KUBE-IPVS-OUT-FILTER -s 203.0.113.10 -m ipvs --vaddr 203.0.113.10 --vproto tcp --vport 80 -j DROP" in text
    assert "--match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL" in text
    old = ipvs_rules(lb_topology("1.20", policy="Cluster", ranges=["10.246.0.0/16"]), "node1").restore_text()
    assert "--match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-FIREWALL" in old
    assert "-A KUBE-FIREWALL -j KUBE-MARK-DROP" in old
    old_state = ipvs_rules(lb_topology("1.20", policy="Cluster", ranges=["10.246.0.0/16"]), "node1")
    assert old_state.ipset("KUBE-LOAD-BALANCER-SOURCE-IP").members == ("203.0.113.10,tcp:80,203.0.113.10",)
