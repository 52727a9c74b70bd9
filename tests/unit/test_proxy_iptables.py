# ruff: noqa: E501  (expected rule lines are quoted verbatim from the reference)
"""iptables-mode rule generation against the reference's worked examples (kube-proxy.md 2.2, 2.3,
2.8, 4.1, 9.2, 9.4). Expected lines are copied from the reference, not from kpemu's output.

The reference's restore-input examples print the mark as 0x4000 (upstream unit tests inject it);
real kube-proxy formats it with Go's %#08x (0x00004000). `_restore` maps ours to the test form.
"""

from __future__ import annotations

from typing import Any

import pytest

from kpemu.errors import InputError
from kpemu.model.topology import Topology
from kpemu.proxy.iptables import iptables_rules, restore_text
from kpemu.proxy.render import render_rules
from kpemu.proxy.rules import parse_rule_line
from kpemu.proxy.save import canonical_line, save_text

H = "CDGGSHYLG3RE2FKL"
A, B, C = "AFGSLHOD2HFNCBX4", "2RIJ5GIYXEFH6G4D", "RBX5X5TOEG5GD3RO"


def topo(version: str = "1.33", svc: dict[str, Any] | None = None, eps: int = 2, **kp: Any) -> Topology:
    """Reference 2.8: default/web:http 80 -> 8080, endpoints on node-a / node-b / node-c."""
    endpoints = [{"ip": "10.244.1.5", "port": 8080, "node": "node-a"},
                 {"ip": "10.244.2.7", "port": 8080, "node": "node-b"},
                 {"ip": "10.244.3.9", "port": 8080, "node": "node-c"}][:eps]
    service = {"name": "web", "clusterIP": "10.96.100.10", "endpoints": endpoints,
               "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    service.update(svc or {})
    kube_proxy = {"version": version, "clusterCIDR": "10.244.0.0/16", "randomFully": True, "nfacct": False}
    kube_proxy.update(kp)
    return Topology.model_validate({
        "name": "ref", "kubeProxy": kube_proxy,
        "nodes": [{"name": "node-a", "ip": "192.168.0.2", "podCIDR": "10.244.1.0/24"},
                  {"name": "node-b", "ip": "192.168.0.3", "podCIDR": "10.244.2.0/24"},
                  {"name": "node-c", "ip": "192.168.0.4", "podCIDR": "10.244.3.0/24"}],
        "services": [service],
    })


def _restore(t: Topology, node: str = "node-a") -> dict[str, list[str]]:
    """Restore-input -A lines per table/chain (mark in the upstream-test spelling)."""
    out: dict[str, list[str]] = {}
    table = ""
    for line in restore_text(iptables_rules(t, node)).replace("0x00004000", "0x4000").splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith("-A "):
            out.setdefault(f"{table}/{line.split()[1]}", []).append(line)
    return out


def _chains(lines: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in lines.strip().splitlines():
        out.setdefault(line.split()[1], []).append(line.strip())
    return out


def assert_chains(got: dict[str, list[str]], table: str, expected: str) -> None:
    for chain, lines in _chains(expected).items():
        assert got.get(f"{table}/{chain}") == lines, chain


def test_current_clusterip_example_a() -> None:
    got = _restore(topo())
    assert_chains(got, "nat", f"""
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-SERVICES -m comment --comment "default/web:http cluster IP" -m tcp -p tcp -d 10.96.100.10 --dport 80 -j KUBE-SVC-{H}
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-{H} -m comment --comment "default/web:http cluster IP" -m tcp -p tcp -d 10.96.100.10 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVC-{H} -m comment --comment "default/web:http -> 10.244.1.5:8080" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-{A}
-A KUBE-SVC-{H} -m comment --comment "default/web:http -> 10.244.2.7:8080" -j KUBE-SEP-{B}
-A KUBE-SEP-{A} -m comment --comment default/web:http -s 10.244.1.5 -j KUBE-MARK-MASQ
-A KUBE-SEP-{A} -m comment --comment default/web:http -m tcp -p tcp -j DNAT --to-destination 10.244.1.5:8080
-A KUBE-SEP-{B} -m comment --comment default/web:http -s 10.244.2.7 -j KUBE-MARK-MASQ
-A KUBE-SEP-{B} -m comment --comment default/web:http -m tcp -p tcp -j DNAT --to-destination 10.244.2.7:8080
""")
    assert "nat/KUBE-NODEPORTS" not in got and "nat/KUBE-MARK-DROP" not in got


def test_current_three_endpoints_probabilities() -> None:
    svc = _restore(topo(eps=3))[f"nat/KUBE-SVC-{H}"]
    assert "--probability 0.3333333333 -j KUBE-SEP-" + A in svc[1]
    assert "--probability 0.5000000000 -j KUBE-SEP-" + B in svc[2]
    assert svc[3].endswith(f'"default/web:http -> 10.244.3.9:8080" -j KUBE-SEP-{C}')


def test_current_nodeport_example_b() -> None:
    got = _restore(topo(svc={"type": "NodePort", "ports": [{"name": "http", "port": 80, "targetPort": 8080,
                                                              "nodePort": 30080}]}))
    assert_chains(got, "nat", f"""
-A KUBE-NODEPORTS -m comment --comment default/web:http -m tcp -p tcp --dport 30080 -j KUBE-EXT-{H}
-A KUBE-EXT-{H} -m comment --comment "masquerade traffic for default/web:http external destinations" -j KUBE-MARK-MASQ
-A KUBE-EXT-{H} -j KUBE-SVC-{H}
""")


LB = {"type": "LoadBalancer", "loadBalancerIPs": ["203.0.113.10"],
      "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]}


def test_current_loadbalancer_example_c() -> None:
    got = _restore(topo(svc=LB))
    assert f'-A KUBE-SERVICES -m comment --comment "default/web:http loadbalancer IP" -m tcp -p tcp -d 203.0.113.10 --dport 80 -j KUBE-EXT-{H}' in got["nat/KUBE-SERVICES"]
    got = _restore(topo(svc={**LB, "loadBalancerSourceRanges": ["198.51.100.0/24"]}))
    assert f'-A KUBE-SERVICES -m comment --comment "default/web:http loadbalancer IP" -m tcp -p tcp -d 203.0.113.10 --dport 80 -j KUBE-FW-{H}' in got["nat/KUBE-SERVICES"]
    assert_chains(got, "nat", f"""
-A KUBE-FW-{H} -m comment --comment "default/web:http loadbalancer IP" -s 198.51.100.0/24 -j KUBE-EXT-{H}
-A KUBE-FW-{H} -m comment --comment "other traffic to default/web:http will be dropped by KUBE-PROXY-FIREWALL"
""")
    assert_chains(got, "filter", f"""
-A KUBE-PROXY-FIREWALL -m comment --comment "default/web:http traffic not accepted by KUBE-FW-{H}" -m tcp -p tcp -d 203.0.113.10 --dport 80 -j DROP
""")


def test_current_etp_local_example_d() -> None:
    svc = {**LB, "externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}
    got = _restore(topo(svc=svc), "node-a")
    assert_chains(got, "nat", f"""
-A KUBE-EXT-{H} -m comment --comment "pod traffic for default/web:http external destinations" -s 10.244.0.0/16 -j KUBE-SVC-{H}
-A KUBE-EXT-{H} -m comment --comment "masquerade LOCAL traffic for default/web:http external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
-A KUBE-EXT-{H} -m comment --comment "route LOCAL traffic for default/web:http external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-{H}
-A KUBE-EXT-{H} -j KUBE-SVL-{H}
-A KUBE-SVL-{H} -m comment --comment "default/web:http -> 10.244.1.5:8080" -j KUBE-SEP-{A}
""")
    assert_chains(got, "filter", """
-A KUBE-NODEPORTS -m comment --comment "default/web:http health check node port" -m tcp -p tcp --dport 32000 -j ACCEPT
""")
    other = _restore(topo(svc=svc, eps=1), "node-b")  # endpoint only on node-a
    assert len(other[f"nat/KUBE-EXT-{H}"]) == 3 and f"nat/KUBE-SVL-{H}" not in other
    assert_chains(other, "filter", """
-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web:http has no local endpoints" -m tcp -p tcp -d 203.0.113.10 --dport 80 -j DROP
-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web:http has no local endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j DROP
""")


def test_current_session_affinity_example_e() -> None:
    got = _restore(topo(svc={"sessionAffinity": "ClientIP"}))
    assert got[f"nat/KUBE-SVC-{H}"][1:] == [
        f'-A KUBE-SVC-{H} -m comment --comment "default/web:http -> 10.244.1.5:8080" -m recent --name KUBE-SEP-{A} --rcheck --seconds 10800 --reap -j KUBE-SEP-{A}',
        f'-A KUBE-SVC-{H} -m comment --comment "default/web:http -> 10.244.2.7:8080" -m recent --name KUBE-SEP-{B} --rcheck --seconds 10800 --reap -j KUBE-SEP-{B}',
        f'-A KUBE-SVC-{H} -m comment --comment "default/web:http -> 10.244.1.5:8080" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-{A}',
        f'-A KUBE-SVC-{H} -m comment --comment "default/web:http -> 10.244.2.7:8080" -j KUBE-SEP-{B}',
    ]
    assert got[f"nat/KUBE-SEP-{A}"][1] == (
        f"-A KUBE-SEP-{A} -m comment --comment default/web:http -m recent --name KUBE-SEP-{A} --set -m tcp -p tcp"
        " -j DNAT --to-destination 10.244.1.5:8080")


def test_current_no_endpoints_example_f() -> None:
    svc = {**LB, "endpoints": [], "externalIPs": ["203.0.113.5"]}
    got = _restore(topo(svc=svc))
    assert not any(k.startswith("nat/KUBE-SVC") or k.startswith("nat/KUBE-SEP") for k in got)
    assert_chains(got, "filter", """
-A KUBE-SERVICES -m comment --comment "default/web:http has no endpoints" -m tcp -p tcp -d 10.96.100.10 --dport 80 -j REJECT
-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web:http has no endpoints" -m tcp -p tcp -d 203.0.113.5 --dport 80 -j REJECT
-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web:http has no endpoints" -m tcp -p tcp -d 203.0.113.10 --dport 80 -j REJECT
-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web:http has no endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j REJECT
""")


def test_current_internal_traffic_policy_local_example_g() -> None:
    got = _restore(topo(svc={"internalTrafficPolicy": "Local"}), "node-a")
    assert got["nat/KUBE-SERVICES"][0].endswith(f"-j KUBE-SVL-{H}")
    assert got[f"nat/KUBE-SVL-{H}"][0].endswith("! -s 10.244.0.0/16 -j KUBE-MARK-MASQ")
    got = _restore(topo(svc={"internalTrafficPolicy": "Local"}, eps=1), "node-b")
    assert got["filter/KUBE-SERVICES"] == [
        '-A KUBE-SERVICES -m comment --comment "default/web:http has no local endpoints" -m tcp -p tcp'
        " -d 10.96.100.10 --dport 80 -j DROP"]


def test_current_global_rules_and_jumps_section_2_2() -> None:
    got = _restore(topo())
    assert got["filter/KUBE-FORWARD"] == [
        "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP",
        '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
        '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
    ]
    assert got["filter/KUBE-FIREWALL"] == [
        '-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP']
    saved = save_text(iptables_rules(topo(), "node-a"))
    builtin = [line for line in saved.split("*filter")[1].splitlines()
               if line.startswith(("-A INPUT", "-A FORWARD", "-A OUTPUT"))]
    assert builtin == """
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A INPUT -j KUBE-FIREWALL
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -j KUBE-FIREWALL""".strip().splitlines()


def test_knobs_masquerade_all_bit_random_fully_nodeport_addresses() -> None:
    got = _restore(topo(masqueradeAll=True, masqueradeBit=5, randomFully=False,
                        nodePortAddresses=["192.168.0.0/24"]))
    assert got[f"nat/KUBE-SVC-{H}"][0].endswith("--dport 80 -j KUBE-MARK-MASQ")
    assert got["nat/KUBE-MARK-MASQ"] == ["-A KUBE-MARK-MASQ -j MARK --or-mark 0x00000020"]
    assert got["nat/KUBE-POSTROUTING"][2].endswith("-j MASQUERADE")
    assert got["nat/KUBE-SERVICES"][-1] == (
        '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule'
        ' in this chain" -d 192.168.0.2 -j KUBE-NODEPORTS')
    got = _restore(topo(localhostNodePorts=False, clusterCIDR=None))
    assert got["nat/KUBE-SERVICES"][-1].endswith("-m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS")
    # kube-proxy writes no KUBE-FIREWALL without localhost NodePorts; kubelet's localnet rule is all it holds.
    assert got["filter/KUBE-FIREWALL"] == [
        '-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8'
        ' ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP']
    owners = {r.owner for r in iptables_rules(topo(localhostNodePorts=False, clusterCIDR=None), "node-a")
              .tables["filter"].chain("KUBE-FIREWALL").rules}
    assert owners == {"kubelet"}
    assert len(got[f"nat/KUBE-SVC-{H}"]) == 2  # no masquerade rule without cluster CIDR / masqueradeAll


def test_legacy_1_18_reference_example_9_4() -> None:
    t = Topology.model_validate({
        "name": "legacy", "kubeProxy": {"version": "1.18", "clusterCIDR": "10.244.0.0/16", "randomFully": False},
        "nodes": [{"name": "minikube", "ip": "192.168.49.2", "podCIDR": "172.17.0.0/24"}],
        "services": [{"name": "nginx", "type": "NodePort", "clusterIP": "10.105.178.199",
                      "endpoints": [{"ip": "172.17.0.5", "node": "minikube"}, {"ip": "172.17.0.4", "node": "minikube"}],
                      "ports": [{"port": 8080, "targetPort": 80, "nodePort": 30180}]}],
    })
    nat = save_text(iptables_rules(t, "minikube"), tables=("nat",))
    assert nat == """*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-MARK-DROP - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SEP-43IWXJI557JKCKCF - [0:0]
:KUBE-SEP-UZXILYFQQ2IZUWN5 - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-4N57TFCL4MD7ZTDA - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-DROP -j MARK --set-xmark 0x8000/0x8000
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-NODEPORTS -p tcp -m comment --comment "default/nginx:" -m tcp --dport 30180 -j KUBE-MARK-MASQ
-A KUBE-NODEPORTS -p tcp -m comment --comment "default/nginx:" -m tcp --dport 30180 -j KUBE-SVC-4N57TFCL4MD7ZTDA
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -m mark --mark 0x4000/0x4000 -j MASQUERADE
-A KUBE-SEP-43IWXJI557JKCKCF -s 172.17.0.5/32 -m comment --comment "default/nginx:" -j KUBE-MARK-MASQ
-A KUBE-SEP-43IWXJI557JKCKCF -p tcp -m comment --comment "default/nginx:" -m tcp -j DNAT --to-destination 172.17.0.5:80
-A KUBE-SEP-UZXILYFQQ2IZUWN5 -s 172.17.0.4/32 -m comment --comment "default/nginx:" -j KUBE-MARK-MASQ
-A KUBE-SEP-UZXILYFQQ2IZUWN5 -p tcp -m comment --comment "default/nginx:" -m tcp -j DNAT --to-destination 172.17.0.4:80
-A KUBE-SERVICES ! -s 10.244.0.0/16 -d 10.105.178.199/32 -p tcp -m comment --comment "default/nginx: cluster IP" -m tcp --dport 8080 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -d 10.105.178.199/32 -p tcp -m comment --comment "default/nginx: cluster IP" -m tcp --dport 8080 -j KUBE-SVC-4N57TFCL4MD7ZTDA
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-4N57TFCL4MD7ZTDA -m comment --comment "default/nginx:" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-UZXILYFQQ2IZUWN5
-A KUBE-SVC-4N57TFCL4MD7ZTDA -m comment --comment "default/nginx:" -j KUBE-SEP-43IWXJI557JKCKCF
COMMIT
"""


def test_legacy_xlb_and_firewall_shapes_section_9_2() -> None:
    svc = {**LB, "externalTrafficPolicy": "Local", "loadBalancerSourceRanges": ["198.51.100.0/24"]}
    t = topo("1.18", svc=svc)
    rs = iptables_rules(t, "node-a")
    lines = {c: [canonical_line(r) for r in ch.rules] for c, ch in rs.tables["nat"].chains.items()}
    xlb = next(c for c in lines if c.startswith("KUBE-XLB-"))
    fw = next(c for c in lines if c.startswith("KUBE-FW-"))
    assert lines[xlb][0] == (f'-A {xlb} -s 10.244.0.0/16 -m comment --comment "Redirect pods trying to reach external'
                             f' loadbalancer VIP to clusterIP" -j {xlb.replace("XLB", "SVC")}')
    assert lines[xlb][1].startswith(f'-A {xlb} -m comment --comment "Balancing rule 0 for default/web:http" -j KUBE-SEP-')
    assert lines["KUBE-NODEPORTS"][0] == (
        '-A KUBE-NODEPORTS -s 127.0.0.0/8 -p tcp -m comment --comment "default/web:http" -m tcp --dport 30080'
        " -j KUBE-MARK-MASQ")
    assert lines[fw][-1] == f'-A {fw} -m comment --comment "default/web:http loadbalancer IP" -j KUBE-MARK-DROP'
    other = iptables_rules(topo("1.18", svc=svc, eps=1), "node-b")
    assert [canonical_line(r) for r in other.rules("nat", xlb)][-1] == (
        f'-A {xlb} -m comment --comment "default/web:http has no local endpoints" -j KUBE-MARK-DROP')


def test_intermediate_1_22_masq_in_svc_section_4_1() -> None:
    svc = {"type": "NodePort", "externalIPs": ["203.0.113.5"],
           "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]}
    rs = iptables_rules(topo("1.22", svc=svc), "node-a")
    ref = f"""
-A KUBE-SERVICES -m comment --comment "default/web:http cluster IP" -m tcp -p tcp -d 10.96.100.10 --dport 80 -j KUBE-SVC-{H}
-A KUBE-SERVICES -m comment --comment "default/web:http external IP" -m tcp -p tcp -d 203.0.113.5 --dport 80 -j KUBE-SVC-{H}
-A KUBE-NODEPORTS -m comment --comment default/web:http -m tcp -p tcp --dport 30080 -j KUBE-SVC-{H}
-A KUBE-SVC-{H} -m comment --comment "default/web:http cluster IP" -m tcp -p tcp -d 10.96.100.10 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVC-{H} -m comment --comment "default/web:http external IP" -m tcp -p tcp -d 203.0.113.5 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVC-{H} -m comment --comment default/web:http -m tcp -p tcp --dport 30080 -j KUBE-MARK-MASQ
"""
    ours = {canonical_line(r) for t in ("nat",) for c in rs.tables[t].chains.values() for r in c.rules}
    for line in ref.strip().splitlines():
        assert canonical_line(parse_rule_line(line)) in ours, line
    svc_rules = [canonical_line(r) for r in rs.rules("nat", f"KUBE-SVC-{H}")]
    assert svc_rules[-1] == f'-A KUBE-SVC-{H} -m comment --comment "default/web:http" -j KUBE-SEP-{B}'  # no "->" yet


def test_render_formats_and_unknown_node() -> None:
    t = topo()
    assert render_rules(t, "node-a", "ipset").startswith("# kube-proxy mode iptables")
    assert "# --- iptables-save ---" in render_rules(t, "node-a", "all")
    with pytest.raises(InputError, match=r"--node.*node-a, node-b, node-c"):
        render_rules(t, "nope", "iptables-save")


def test_rule_structure_is_walkable() -> None:
    rs = iptables_rules(topo(svc={"sessionAffinity": "ClientIP"}), "node-a")
    first = rs.rules("nat", "KUBE-SERVICES")[0].parsed
    assert (first.dst, first.proto, first.dport, first.target) == (("10.96.100.10", False), "tcp", 80, f"KUBE-SVC-{H}")
    aff = rs.rules("nat", f"KUBE-SVC-{H}")[1].parsed
    assert aff.recent == {"name": f"KUBE-SEP-{A}", "action": "rcheck", "seconds": "10800", "reap": True}
    assert rs.rules("nat", f"KUBE-SVC-{H}")[3].parsed.probability == 0.5
    assert rs.rules("nat", f"KUBE-SEP-{A}")[1].parsed.dnat_to == "10.244.1.5:8080"
