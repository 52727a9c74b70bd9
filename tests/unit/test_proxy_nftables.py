# ruff: noqa: E501  (expected lines are quoted verbatim from upstream and the reference)
"""nftables-mode generation against upstream's test of record and the reference's worked example.

Expected texts live in tests/data/nftables and were copied, not produced by kpemu:
overall-expected.nft is TestOverallNFTablesRules (kubernetes/kubernetes
pkg/proxy/nftables/proxier_test.go, 1.34/1.35), overall-1.36-expected.nft the same test at
kubernetes/kubernetes@edca5633 (the 1.36 rule set: hairpin-connections, DNAT maps) and
overall-1.36.list the host's nft 1.0.6 listing of it (that text is also the test's at v1.37.2's
predecessor v1.36.3), overall-1.37-expected.nft the same test at v1.37.2 (module
k8s.io/kubernetes@v1.37.2: one-endpoint `dnat to A:P`, the localhost NodePort rejects) and
overall-1.37.list the host's nft 1.0.6 listing of it; worked-1.33.nft / .list are the transaction
and the nft 1.0.6 listing of reference/kube-proxy-nftables.md section 7.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kpemu.errors import InputError
from kpemu.inputs.topology import load_topology
from kpemu.model.topology import Topology
from kpemu.proxy.modes import mode
from kpemu.proxy.nftables import listing, nftables_transaction, sort_transaction
from kpemu.proxy.nftables.eras import era_for
from kpemu.proxy.nftables.listing import duration_text, priority_text, rule_text, without_interval_order
from kpemu.proxy.nftables.naming import endpoint_base, service_base
from kpemu.proxy.nftables.tx import BaseHook
from kpemu.proxy.render import render_rules
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "nftables"


@pytest.mark.parametrize(("fixture", "expected_file", "lines"), [
    ("overall.yaml", "overall-expected.nft", 122),
    ("overall-1.36.yaml", "overall-1.36-expected.nft", 103),
    ("overall-1.37.yaml", "overall-1.37-expected.nft", 117),
])
def test_overall_nftables_rules_equal_upstream(fixture: str, expected_file: str, lines: int) -> None:
    """TestOverallNFTablesRules: every object equal after upstream's sortNFTablesTransaction.
    Upstream's fake proxier injects masqueradeMark "0x4000", so the mark is passed the same way."""
    topo = load_topology(DATA / fixture)
    got = nftables_transaction(topo, "test-node", mark="0x4000").table().dump()
    expected = sort_transaction((DATA / expected_file).read_text())
    assert sort_transaction(got) == expected
    assert len(expected.splitlines()) == lines


def test_1_36_listing_is_the_kernels() -> None:
    """overall-1.36.list is what nft 1.0.6 printed after loading the 1.36 fixture's transaction in a
    namespace on this host (tests/integration/test_nftables_host.py loads it again): inline marks
    list as `meta mark set meta mark | M`, `dnat ip addr . port to <map>` as `dnat ip to <map>`."""
    tx = nftables_transaction(load_topology(DATA / "overall-1.36.yaml"), "test-node")
    assert listing(tx.table()) == (DATA / "overall-1.36.list").read_text()


def test_1_37_listing_is_the_kernels() -> None:
    """overall-1.37.list is what nft 1.0.6 printed after loading the 1.37 fixture's transaction in a
    namespace on this host: named counters list first, as loaded (`packets 0 bytes 0`), and
    `dnat to A:P` as written."""
    tx = nftables_transaction(load_topology(DATA / "overall-1.37.yaml"), "test-node")
    assert listing(tx.table()) == (DATA / "overall-1.37.list").read_text()


def _gate_off(topo: Topology) -> Topology:
    kp = topo.kubeProxy
    gates = kp.featureGates.model_copy(update={"KubeProxyNFTablesLocalhostNodePorts": False})
    return topo.model_copy(update={"kubeProxy": kp.model_copy(update={"featureGates": gates})})


def test_1_37_without_the_gate_is_upstream_without_its_localhost_block() -> None:
    """KubeProxyNFTablesLocalhostNodePorts is alpha and off by default in 1.37: the table is
    upstream's expected text without the "# localhost NodePort rejects" block, and the transaction
    adds and deletes the map, then each protocol's chain and counter (proxier.go setupNFTables)."""
    topo = _gate_off(load_topology(DATA / "overall-1.37.yaml"))
    expected = [ln for ln in (DATA / "overall-1.37-expected.nft").read_text().splitlines()
                if "localhost-nodeport-re" not in ln]
    tx = nftables_transaction(topo, "test-node", mark="0x4000")
    assert sort_transaction(tx.table().dump()) == sort_transaction("\n".join(expected))
    text = tx.text()
    block = text[text.index("add map ip kube-proxy localhost-nodeport-reject-ports"):]
    assert block.splitlines()[:14] == [
        'add map ip kube-proxy localhost-nodeport-reject-ports { type inet_proto . inet_service : verdict ; comment "localhost NodePorts rejected by kube-proxy" ; }',
        "delete map ip kube-proxy localhost-nodeport-reject-ports",
        "add chain ip kube-proxy localhost-nodeport-reject-tcp",
        "delete chain ip kube-proxy localhost-nodeport-reject-tcp",
        "add counter ip kube-proxy localhost-nodeport-rejected-tcp",
        "delete counter ip kube-proxy localhost-nodeport-rejected-tcp",
        "add chain ip kube-proxy localhost-nodeport-reject-udp",
        "delete chain ip kube-proxy localhost-nodeport-reject-udp",
        "add counter ip kube-proxy localhost-nodeport-rejected-udp",
        "delete counter ip kube-proxy localhost-nodeport-rejected-udp",
        "add chain ip kube-proxy localhost-nodeport-reject-sctp",
        "delete chain ip kube-proxy localhost-nodeport-reject-sctp",
        "add counter ip kube-proxy localhost-nodeport-rejected-sctp",
        "delete counter ip kube-proxy localhost-nodeport-rejected-sctp",
    ]
    assert block.splitlines()[14].startswith("add map ip kube-proxy firewall-ips ")


def _svc1(version: str, eps: list[str]) -> Topology:
    """TestEndpointDNATRules' service: ns1/svc1 172.30.0.41 port p80, its endpoints on test-node."""
    return Topology.model_validate({
        "name": "t", "kubeProxy": {"mode": "nftables", "version": version, "clusterCIDR": "10.0.0.0/8"},
        "underlay": "192.168.0.0/16", "nodes": [{"name": "test-node", "ip": "192.168.0.2", "podCIDR": "10.180.0.0/24"}],
        "services": [{"name": "svc1", "namespace": "ns1", "clusterIP": "172.30.0.41", "ports": [{"name": "p80", "port": 80}],
                      "endpoints": [{"ip": ip, "node": "test-node"} for ip in eps]}]})


@pytest.mark.parametrize(("version", "eps", "rule"), [
    ("1.37", ["10.180.0.1"], "meta l4proto tcp dnat to 10.180.0.1:80"),
    ("1.37", ["10.180.0.1", "10.180.0.2"],
     "meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.1 . 80 , 1 : 10.180.0.2 . 80 }"),
    ("1.36", ["10.180.0.1"], "meta l4proto tcp dnat ip addr . port to numgen random mod 1 map { 0 : 10.180.0.1 . 80 }"),
])
def test_endpoint_dnat_rules(version: str, eps: list[str], rule: str) -> None:
    """TestEndpointDNATRules at v1.37.2 (its IPv4 cases; kpemu's nftables mode is IPv4): the service
    chain holds exactly one rule; 1.36 still maps a single endpoint through numgen (v1.36.3)."""
    t = nftables_transaction(_svc1(version, eps), "test-node").table()
    assert [r.commented() for r in t.chains["service-ULMVA6XW-ns1/svc1/tcp/p80"].rules] == [rule]


_LONG_NS = "loft-acme-platform-services-team-dev-v-shared-workloads-ns-001"
_LONG_SVC = "my-api-svc-x-my-api-namespace-x-acme-shared-vcluster--a1b2c3d4e"


def _long(version: str) -> dict[str, Any]:
    return {"name": "t", "kubeProxy": {"mode": "nftables", "version": version},
            "underlay": "192.168.0.0/16", "nodes": [{"name": "test-node", "ip": "192.168.0.2", "podCIDR": "10.180.0.0/24"}],
            "services": [{"name": _LONG_SVC, "namespace": _LONG_NS, "clusterIP": "172.30.0.47",
                          "ports": [{"name": "http", "port": 80}], "endpoints": []}]}


def test_1_37_cuts_a_long_comment_to_128_bytes() -> None:
    """TestSyncProxyRulesTruncatesNoEndpointServiceComment (v1.37.2): the no-endpoint element's
    comment is the service port's name cut to knftables.CommentLengthMax (TestTruncateNFTablesComment's
    "realistic long service name truncated" case)."""
    t = nftables_transaction(Topology.model_validate(_long("1.37")), "test-node").table()
    [elem] = t.sets["no-endpoint-services"].elements
    assert elem.comment == ("loft-acme-platform-services-team-dev-v-shared-workloads-ns-001/"
                            "my-api-svc-x-my-api-namespace-x-acme-shared-vcluster--a1b2c3d4e:h")
    assert len(elem.comment) == 128


def test_before_1_37_a_comment_nft_refuses_is_an_input_error(tmp_path: Path) -> None:
    """nft refuses a comment over 128 bytes ("comment too long, 128 characters maximum allowed"), so
    1.36's sync would fail: kpemu says so instead of writing it."""
    import yaml
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(_long("1.36")))
    with pytest.raises(InputError, match=r"services\[0\]\.ports\[0\]\.name: kube-proxy 1.36 \(nftables mode\) writes the "
                                         r"comment '.*:http' \(131 bytes\) and nft refuses a comment over 128 bytes"):
        load_topology(f)


def test_the_localhost_gate_needs_1_37_and_no_loopback_nodeport_address(tmp_path: Path) -> None:
    worked = (DATA / "worked-1.33.yaml").read_text()
    f = tmp_path / "t.yaml"
    f.write_text(worked.replace('version: "1.33"', 'version: "1.36"\n  featureGates: {KubeProxyNFTablesLocalhostNodePorts: true}'))
    with pytest.raises(InputError, match=r"kubeProxy.featureGates.KubeProxyNFTablesLocalhostNodePorts: the gate exists from "
                                         r"kube-proxy 1.37 \(alpha\); kube-proxy 1.36 does not start with it"):
        load_topology(f)
    f.write_text(worked.replace('version: "1.33"', 'version: "1.37"\n  nodePortAddresses: [127.0.0.0/8]\n'
                                '  featureGates: {KubeProxyNFTablesLocalhostNodePorts: true}'))
    with pytest.raises(InputError, match=r"userspace proxy, which kpemu does not model"):
        load_topology(f)
    f.write_text(worked.replace('version: "1.33"', 'version: "1.37"\n  featureGates: {NoSuchGate: true}'))
    with pytest.raises(InputError, match=r"NoSuchGate"):
        load_topology(f)


def test_1_36_transaction_adds_each_hairpin_element_once() -> None:
    """nftElementStorage.ensureElem: svc3 and svc5 share the local endpoint 10.180.0.3:80, so the
    transaction adds its hairpin-connections element once (upstream's comment in the fixture)."""
    text = nftables_transaction(load_topology(DATA / "overall-1.36.yaml"), "test-node").text()
    assert text.count("add element ip kube-proxy hairpin-connections { 10.180.0.3 . 10.180.0.3 . tcp . 80 }\n") == 1
    assert "mark-for-masquerade" not in text


def test_cli_rules_prints_the_go_rendered_mark() -> None:
    text = render_rules(load_topology(DATA / "overall.yaml"), "test-node", "nft")
    assert "add rule ip kube-proxy mark-for-masquerade mark set mark or 0x00004000\n" in text
    assert "0x4000 " not in text


def test_worked_example_1_33_transaction_and_listing() -> None:
    """Whole transaction text (order included) and whole nft 1.0.6 listing of reference section 7."""
    tx = nftables_transaction(load_topology(DATA / "worked-1.33.yaml"), "node-a")
    assert tx.text() == (DATA / "worked-1.33.nft").read_text()
    assert listing(tx.table()) == (DATA / "worked-1.33.list").read_text()


@pytest.mark.parametrize("fixture", ["overall.yaml", "overall-1.36.yaml"])
def test_every_chain_is_added_before_it_is_named(fixture: str) -> None:
    """`nft -f` resolves names in file order: no rule or element may name a chain not yet added."""
    text = nftables_transaction(load_topology(DATA / fixture), "test-node").text()
    added: set[str] = set()
    for line in text.splitlines():
        w = line.split(" ")
        if w[:2] == ["add", "chain"]:
            added.add(w[4])
        targets = [w[i + 1] for i, t in enumerate(w[:-1]) if t in ("goto", "jump")]
        if w[1] == "rule":
            targets.append(w[4])
        for t in targets:
            assert t.rstrip(",") in added, line


@pytest.mark.parametrize(("name", "expected"), [
    (("ns1", "svc1", "tcp", "p80"), "ULMVA6XW-ns1/svc1/tcp/p80"),
    (("default", "kubernetes", "tcp", "https"), "2QRHZV4L-default/kubernetes/tcp/https"),
    (("ns", "svc", "TCP", ""), "W4L2TFLV-ns/svc/tcp/"),
])
def test_service_chain_hash(name: tuple[str, str, str, str], expected: str) -> None:
    assert service_base(*name) == expected


def test_endpoint_chain_hash() -> None:
    assert endpoint_base("ns1", "svc1", "tcp", "p80", "10.180.0.1", 80) == "5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"
    assert endpoint_base("ns5", "svc5", "tcp", "p80", "10.180.0.3", 80) == "GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"
    assert endpoint_base("ns1", "svc1", "tcp", "p80", "fd00:10::5", 8080) == "FHMZALBJ-ns1/svc1/tcp/p80__fd00.10..5/8080"
    long = endpoint_base("n" * 63, "s" * 63, "sctp", "p" * 63, "fd00:1111:2222:3333:4444:5555:6666:7777", 65535)
    assert len(long) == 240 and long.endswith("...")


def _topo(version: str = "1.35", **svc: Any) -> Topology:
    service = {"name": "web", "clusterIP": "172.30.0.10", "ports": [{"name": "http", "port": 80, "targetPort": 8080,
                                                                       "nodePort": 30080}],
               "endpoints": [{"ip": "10.0.1.5", "node": "node-a"}, {"ip": "10.0.2.7", "node": "node-b"}]}
    service.update(svc)
    return Topology.model_validate({
        "name": "t", "kubeProxy": {"mode": "nftables", "version": version, "clusterCIDR": "10.0.0.0/8"},
        "underlay": "192.168.0.0/16",
        "nodes": [{"name": "node-a", "ip": "192.168.0.2", "podCIDR": "10.0.1.0/24"},
                  {"name": "node-b", "ip": "192.168.0.3", "podCIDR": "10.0.2.0/24"}],
        "services": [service]})


def _rules(topo: Topology, chain_prefix: str) -> list[str]:
    t = nftables_transaction(topo, "node-a").table()
    return [r.line() for c in t.chains.values() if c.name.startswith(chain_prefix) for r in c.rules]


def test_load_balancer_source_range_containing_the_node_allows_the_lb_ips() -> None:
    topo = _topo(type="LoadBalancer", loadBalancerIPs=["5.6.7.8", "1.2.3.4"],
                 loadBalancerSourceRanges=["203.0.113.0/25", "192.168.0.0/24"])
    assert _rules(topo, "firewall-S") == [
        "add rule ip kube-proxy firewall-SUSTUHLJ-default/web/tcp/http ip saddr != { 203.0.113.0/25 , 192.168.0.0/24 , 5.6.7.8 , 1.2.3.4 } drop"]
    assert rule_text("ip saddr != { 203.0.113.0/25 , 192.168.0.0/24 , 5.6.7.8 , 1.2.3.4 } drop") == \
        "ip saddr != { 1.2.3.4, 5.6.7.8, 192.168.0.0/24, 203.0.113.0/25 } drop"


def test_internal_traffic_policy_local_without_local_endpoint_drops_cluster_ip() -> None:
    topo = _topo(internalTrafficPolicy="Local", endpoints=[{"ip": "10.0.2.7", "node": "node-b"}])
    dump = nftables_transaction(topo, "node-a").table().dump()
    assert 'add element ip kube-proxy no-endpoint-services { 172.30.0.10 . tcp . 80 comment "default/web:http" : drop }' in dump
    assert "local-SUSTUHLJ" not in dump and "service-SUSTUHLJ" not in dump


def test_eras() -> None:
    """1.30 writes no object comments and one endpoints-check chain; 1.31 splits it; 1.34 moves the
    firewall to pre-DNAT chains and drops the port from the ClusterIP masquerade rule."""
    t30 = nftables_transaction(_topo("1.30"), "node-a").text()
    assert t30.startswith("add table ip kube-proxy\n")
    assert "add rule ip kube-proxy filter-input ct state new jump endpoints-check\n" in t30
    assert "flush map ip kube-proxy service-ips\n" in t30
    assert "drop comment \"Drop traffic to unallocated ClusterIPs\"" not in t30
    t33 = nftables_transaction(_topo("1.33"), "node-a").text()
    assert "flush map ip kube-proxy service-ips\n" not in t33
    assert "ip daddr 172.30.0.10 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade" in t33
    t35 = nftables_transaction(_topo("1.35"), "node-a").text()
    assert "ip daddr 172.30.0.10 ip saddr != 10.0.0.0/8 jump mark-for-masquerade" in t35
    assert [b.hook for _, b in era_for(35).base_chains[:2]] == ["prerouting", "output"]


def test_1_36_masquerade_all_and_no_detector() -> None:
    """1.36's one ClusterIP masquerade rule in `services`: masqueradeAll marks all ClusterIP
    traffic; without a local-traffic detector there is none (proxier.go setupNFTables)."""
    topo = _topo("1.36")
    kp = topo.kubeProxy
    every = topo.model_copy(update={"kubeProxy": kp.model_copy(update={"masqueradeAll": True})})
    none = topo.model_copy(update={"kubeProxy": kp.model_copy(update={"clusterCIDR": None})})
    assert _rules(every, "services") == [
        'add rule ip kube-proxy services ip daddr @cluster-ips mark set mark or 0x00004000 comment "masquerade all clusterIP traffic"',
        "add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips",
        "add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports"]
    assert [r for r in _rules(none, "services") if "cluster-ips" in r] == []


def test_listing_formats() -> None:
    assert priority_text(BaseHook("filter", "prerouting", -110)) == "dstnat - 10"
    assert priority_text(BaseHook("filter", "output", -110)) == "-110"
    assert priority_text(BaseHook("filter", "input", 0)) == "filter"
    assert priority_text(BaseHook("nat", "postrouting", 100)) == "srcnat"
    assert (duration_text(10800), duration_text(90)) == ("3h", "1m30s")


@pytest.mark.parametrize(("version", "message"), [
    ("1.28", r"kubeProxy.mode: nftables mode exists from kube-proxy 1.29 \(alpha\); kpemu models 1.29 to 1.37; "
             r"got 1.28: raise kubeProxy.version to 1.29 or use mode iptables"),
    ("1.38", r"kubeProxy.version: kube-proxy 1.38 is not modelled; expected 1.10 to 1.37"),
    ("1.10", r"kubeProxy.mode: nftables mode exists from kube-proxy 1.29"),
])
def test_nftables_mode_needs_a_release_that_has_it(tmp_path: Path, version: str, message: str) -> None:
    f = tmp_path / "t.yaml"
    f.write_text((DATA / "worked-1.33.yaml").read_text().replace('"1.33"', f'"{version}"'))
    with pytest.raises(InputError, match=message):
        load_topology(f)


def test_without_a_version_each_mode_gets_the_newest_release_kpemu_models(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    worked = (DATA / "worked-1.33.yaml").read_text()
    f.write_text(worked.replace('version: "1.33"', ""))
    assert load_topology(f).kubeProxy.version == "1.37"
    f.write_text(worked.replace('version: "1.33"', "").replace("mode: nftables", "mode: iptables"))
    assert load_topology(f).kubeProxy.version == "1.37"


def test_unknown_mode_is_an_error() -> None:
    with pytest.raises(InputError, match=r"kubeProxy\.mode 'userspace' is not a kube-proxy mode"):
        mode("userspace")


def test_rules_formats_of_other_modes_say_there_is_none() -> None:
    topo = load_topology(DATA / "worked-1.33.yaml")
    assert render_rules(topo, "node-a", "iptables-save") == "# kube-proxy mode nftables: node node-a has no iptables-save state\n"
    assert render_rules(topo, "node-a", "nft-list") == (DATA / "worked-1.33.list").read_text()


def test_listing_element_order_and_duplicates() -> None:
    """Kernel order (seen with nft 1.0.6): concatenations sort by their register bytes read
    little-endian (the port's low byte decides first, then the address's last octet), single
    addresses numerically, two per line; an element added twice (one ClusterIP, two ports) is
    listed once."""
    topo = _topo(ports=[{"name": "a", "port": 80}, {"name": "b", "port": 81}], externalIPs=["192.168.99.22"],
                 clusterIP="172.30.0.46")
    text = listing(nftables_transaction(topo, "node-a").table())
    assert "\t\telements = { 172.30.0.46 }\n" in text
    assert ("\t\telements = { 192.168.99.22 . tcp . 80 : goto external-H3CJDWFG-default/web/tcp/a,\n"
            "\t\t\t     172.30.0.46 . tcp . 80 : goto service-H3CJDWFG-default/web/tcp/a,\n"
            "\t\t\t     192.168.99.22 . tcp . 81 : goto external-J6M5MCOQ-default/web/tcp/b,\n"
            "\t\t\t     172.30.0.46 . tcp . 81 : goto service-J6M5MCOQ-default/web/tcp/b }\n") in text


def test_interval_set_elements_compare_as_a_set() -> None:
    kernel = "\tset firewall-allow {\n\t\tflags interval\n\t\telements = { b . 2,\n\t\t\t     a . 1 }\n\t}"
    ours = "\tset firewall-allow {\n\t\tflags interval\n\t\telements = { a . 1,\n\t\t\t     b . 2 }\n\t}"
    assert without_interval_order(kernel) == without_interval_order(ours) == ours
