# ruff: noqa: E501  (expected output is quoted verbatim, whole rule lines included)
"""A node's other IPv4 tables walked beside kube-proxy's (kpemu.analyse.oracle.nft): docker's iptables-nft
FORWARD policy drop kills a forwarded NodePort SYN that kube-proxy's table lets through; a distribution's
firewall accepts it or drops it by the interface it leaves by; a dormant table is not walked; what the
walker does not model there (`limit`, `queue`) is undecided, both ways; a JSON dump, whose other tables'
rules kpemu does not read, leaves each of their base chains undecided.

beside-docker.nft and beside-firewall.nft were printed by the kernel (tests/data/nft-dump/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

from kpemu.dumps.nft.read import parse_nft
from tests.helpers import ROOT, cli

DATA = ROOT / "tests" / "data" / "nft-dump"
NODEPORT = ("--node", "node1", "--node-ip", "192.168.1.100", "--src", "10.242.72.50", "--dst", "192.168.1.100:30080")

FIREWALL_CNI0 = """\
packet tcp 10.242.72.50:40000 -> 192.168.1.100:30080 at node node1 from outside (in on eth0, out by cni0)
rules: table ip kube-proxy of tests/data/nft-dump/beside-firewall.nft (nft list ruleset; beside it: table inet filter; dormant: table ip quiet); node addresses 127.0.0.1, 192.168.1.100
2 outcomes:
  p=0.5  DNAT to 10.244.0.2:8080 by endpoint-UB5UL6E4-shop/web/tcp/http__10.244.0.2/8080  verdict DROP
  p=0.5  DNAT to 10.244.1.5:8080 by endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080  verdict DROP

outcome 1: probability 0.5
  prerouting: filter-prerouting-pre-dnat (type filter, priority dstnat - 10)
    filter-prerouting-pre-dnat: ct state new jump firewall-check  => jump firewall-check
  prerouting: nat-prerouting (type nat, priority dstnat)
    nat-prerouting: jump services  => jump services
    services: ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports  => goto external-KHN6ECMT-shop/web/tcp/http   [@nodeport-ips has 192.168.1.100; @service-nodeports element tcp . 30080 : goto external-KHN6ECMT-shop/web/tcp/http]
    external-KHN6ECMT-shop/web/tcp/http: jump mark-for-masquerade  => jump mark-for-masquerade
    mark-for-masquerade: meta mark set meta mark | 0x00004000  => continue   [mark 0x4000]
    external-KHN6ECMT-shop/web/tcp/http: goto service-KHN6ECMT-shop/web/tcp/http  => goto service-KHN6ECMT-shop/web/tcp/http
    service-KHN6ECMT-shop/web/tcp/http: numgen random mod 2 vmap { 0 : goto endpoint-UB5UL6E4-shop/web/tcp/http__10.244.0.2/8080, 1 : goto endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080 }  => goto endpoint-UB5UL6E4-shop/web/tcp/http__10.244.0.2/8080   [numgen arm 0 of 2, probability 1/2]
    endpoint-UB5UL6E4-shop/web/tcp/http__10.244.0.2/8080: meta l4proto tcp dnat to 10.244.0.2:8080  => accept
  forward: filter-forward (type filter, priority filter)
    filter-forward: ct state new jump service-endpoints-check  => jump service-endpoints-check
    filter-forward: ct state new jump cluster-ips-check  => jump cluster-ips-check
  forward: inet filter forward (type filter, priority filter)
    forward: policy drop  => drop
  hooks (dropped)
  mark 0x4000 (mark-for-masquerade ran); no masquerade; verdict DROP

outcome 2: probability 0.5
  prerouting: filter-prerouting-pre-dnat (type filter, priority dstnat - 10)
    filter-prerouting-pre-dnat: ct state new jump firewall-check  => jump firewall-check
  prerouting: nat-prerouting (type nat, priority dstnat)
    nat-prerouting: jump services  => jump services
    services: ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports  => goto external-KHN6ECMT-shop/web/tcp/http   [@nodeport-ips has 192.168.1.100; @service-nodeports element tcp . 30080 : goto external-KHN6ECMT-shop/web/tcp/http]
    external-KHN6ECMT-shop/web/tcp/http: jump mark-for-masquerade  => jump mark-for-masquerade
    mark-for-masquerade: meta mark set meta mark | 0x00004000  => continue   [mark 0x4000]
    external-KHN6ECMT-shop/web/tcp/http: goto service-KHN6ECMT-shop/web/tcp/http  => goto service-KHN6ECMT-shop/web/tcp/http
    service-KHN6ECMT-shop/web/tcp/http: numgen random mod 2 vmap { 0 : goto endpoint-UB5UL6E4-shop/web/tcp/http__10.244.0.2/8080, 1 : goto endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080 }  => goto endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080   [numgen arm 1 of 2, probability 1/2]
    endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080: meta l4proto tcp dnat to 10.244.1.5:8080  => accept
  forward: filter-forward (type filter, priority filter)
    filter-forward: ct state new jump service-endpoints-check  => jump service-endpoints-check
    filter-forward: ct state new jump cluster-ips-check  => jump cluster-ips-check
  forward: inet filter forward (type filter, priority filter)
    forward: policy drop  => drop
  hooks (dropped)
  mark 0x4000 (mark-for-masquerade ran); no masquerade; verdict DROP
"""


def _trace(dump: Path | str, *more: str) -> dict:
    res = cli("trace", "--nft", str(dump), *NODEPORT, *more, "-o", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_docker_forward_policy_drop_kills_a_forwarded_nodeport_syn() -> None:
    doc = _trace(DATA / "beside-docker.nft", "--iif", "eth0", "--oif", "flannel.1")
    assert doc["decided"] is True and doc["endpoints"] == {"10.244.0.2:8080": 0.5, "10.244.1.5:8080": 0.5}
    assert [o["verdict"] for o in doc["outcomes"]] == ["DROP", "DROP"]
    for o in doc["outcomes"]:
        assert o["path"][-5:] == [
            {"baseChain": "ip filter FORWARD", "chain": "FORWARD", "rule": "counter packets 0 bytes 0 jump DOCKER-USER", "verdict": "jump DOCKER-USER", "notes": []},
            {"baseChain": "ip filter FORWARD", "chain": "DOCKER-USER", "rule": "counter packets 0 bytes 0 return", "verdict": "return", "notes": []},
            {"baseChain": "ip filter FORWARD", "chain": "FORWARD", "rule": "counter packets 0 bytes 0 jump DOCKER-ISOLATION-STAGE-1", "verdict": "jump DOCKER-ISOLATION-STAGE-1", "notes": []},
            {"baseChain": "ip filter FORWARD", "chain": "DOCKER-ISOLATION-STAGE-1", "rule": "counter packets 0 bytes 0 return", "verdict": "return", "notes": []},
            {"baseChain": "ip filter FORWARD", "chain": "FORWARD", "rule": "policy drop", "verdict": "drop", "notes": []}]
    unknown = _trace(DATA / "beside-docker.nft")
    assert unknown["decided"] is False
    assert [u["fact"] for u in unknown["undecided"]] == ['iifname "docker0"', 'oifname "docker0"']


def test_a_firewall_beside_kube_proxy_decides_by_the_interface_the_packet_leaves_by() -> None:
    res = cli("trace", "--nft", str(DATA / "beside-firewall.nft"), *NODEPORT, "--iif", "eth0", "--oif", "cni0")
    assert res.returncode == 0, res.stderr
    assert res.stdout == FIREWALL_CNI0.replace("tests/data/nft-dump/", f"{DATA}/")
    doc = _trace(DATA / "beside-firewall.nft", "--iif", "eth0", "--oif", "flannel.1")
    assert doc["decided"] is True and [o["verdict"] for o in doc["outcomes"]] == ["ACCEPT", "ACCEPT"]
    assert [s["rule"] for s in doc["outcomes"][0]["path"] if s["baseChain"] == "inet filter forward"] == [
        'oifname "flannel.1" tcp dport 8080 accept']
    dump = parse_nft((DATA / "beside-firewall.nft").read_text(), "f")
    assert [t.name for t in dump.beside] == ["inet filter"] and dump.dormant == ["ip quiet"]
    assert dump.beside[0].passed == ("quota q",) and dump.beside[0].policies == {"forward": "drop"}


def test_what_the_walker_does_not_model_in_another_table_is_undecided(tmp_path: Path) -> None:
    text = (DATA / "beside-firewall.nft").read_text()
    limited = tmp_path / "limit.nft"
    limited.write_text(text.replace('\t\tiif "lo" accept\n', "\t\tlimit rate 10/second accept\n"))
    doc = _trace(limited, "--iif", "eth0", "--oif", "cni0")
    assert doc["decided"] is False
    assert [(u["fact"], u["why"]) for u in doc["undecided"]] == [
        ("limit rate 10/second", "kpemu's nft walker does not model 'limit' expressions")]
    assert sorted(o["verdict"] for o in doc["outcomes"]) == ["ACCEPT", "ACCEPT", "DROP", "DROP"]
    queued = tmp_path / "queue.nft"
    queued.write_text(text.replace('\t\tiif "lo" accept\n', "\t\ttcp dport 8080 queue num 1\n"))
    doc = _trace(queued, "--iif", "eth0", "--oif", "cni0")
    assert [(u["fact"], u["why"]) for u in doc["undecided"]] == [
        ("queue num 1 lets the packet on", "a userspace program decides the verdict")]
    assert sorted(o["verdict"] for o in doc["outcomes"]) == ["ACCEPT", "ACCEPT", "DROP", "DROP"]


def test_a_json_dump_leaves_the_other_tables_base_chains_undecided() -> None:
    doc = _trace(DATA / "beside-docker.json", "--iif", "eth0", "--oif", "flannel.1")
    why = "kpemu reads only table ip kube-proxy's rules from nft -j list ruleset; give nft list ruleset to walk this table's"
    assert [(u["fact"], u["why"]) for u in doc["undecided"]] == [
        ("table ip nat chain PREROUTING (hook prerouting) lets the packet on without NAT", why),
        ("table ip filter chain FORWARD (hook forward) lets the packet on", why),
        ("table ip flannel-ipv4 chain forward (hook forward) lets the packet on", why),
        ("table inet filter chain forward (hook forward) lets the packet on", why),
        ("table ip nat chain POSTROUTING (hook postrouting) lets the packet on without NAT", why)]
    accepted = [o for o in doc["outcomes"] if o["verdict"] == "ACCEPT"]
    assert len(accepted) == 2 and all(len(o["assumed"]) == 5 and all(a["holds"] for a in o["assumed"]) for o in accepted)


def test_another_tables_objects_besides_chains_and_sets_are_passed_over_and_named() -> None:
    """A flowtable (this kernel has no nf_flow_table to print one: the block is nft's syntax) is named, not read."""
    text = ("table inet filter {\n\tflowtable ft {\n\t\thook ingress priority filter\n\t\tdevices = { eth0 }\n\t}\n\n"
            "\tchain forward {\n\t\ttype filter hook forward priority filter; policy accept;\n"
            "\t\tip protocol tcp flow add @ft\n\t}\n}\n")
    dump = parse_nft(text, "ft.nft")
    assert dump.table is None and [(t.name, t.passed) for t in dump.beside] == [("inet filter", ("flowtable ft",))]
