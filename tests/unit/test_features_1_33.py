"""A kubectl List of a kube-proxy 1.33 cluster that uses today's Service features
(tests/data/k8s/features-1.33.yaml: the kube-proxy ConfigMap with detectLocalMode NodeCIDR and
conntrack.tcpBeLiberal, EndpointSlice zone hints, ingress ipMode Proxy, a LoadBalancer without
NodePorts, a Service for another proxy, an SCTP port) imports, and `kpemu rules` gives, per mode and
node, the whole text in tests/data/features/. What each feature makes of the text is asserted
line by line beside it, with the upstream source the line follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers import cli as kpemu

FIXTURE = ROOT / "tests" / "data" / "k8s" / "features-1.33.yaml"
EXPECTED = ROOT / "tests" / "data" / "features"


def _in_mode(tmp_path: Path, mode: str, **replace: str) -> Path:
    text = FIXTURE.read_text().replace("      mode: iptables", f"      mode: {mode}")
    for old, new in replace.items():
        text = text.replace(old, new)
    f = tmp_path / f"features-{mode}.yaml"
    f.write_text(text)
    return f


def _rules(f: Path, node: str, fmt: str = "all") -> str:
    res = kpemu("rules", str(f), "--node", node, "--format", fmt)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_the_list_imports_saying_what_it_left_out() -> None:
    res = kpemu("import", str(FIXTURE))
    assert res.returncode == 0, res.stderr
    notes = res.stdout[res.stdout.index("# Notes:\n"):res.stdout.index("# Not modelled")]
    assert notes == (
        "# Notes:\n"
        "#   cni flannel-vxlan inferred from the node annotations\n"
        "#   Service default/mesh: labelled service.kubernetes.io/service-proxy-name: kube-proxy does not watch it; "
        "left out\n"
        "#   Service default/web: EndpointSlice default/web-x2 endpoints[0] repeats EndpointSlice default/web-x1 "
        "endpoints[1] (10.244.2.10); kube-proxy keeps one\n"
        "#   Service default/web: explicit endpoints (the EndpointSlices' hints are kube-proxy's input)\n")
    assert res.stdout[res.stdout.index("\nkubeProxy:\n") + 1:res.stdout.index("underlay:")] == (
        "kubeProxy:\n  version: '1.33'\n  mode: iptables\n  clusterCIDR: 10.244.0.0/16\n  masqueradeBit: 14\n"
        "  detectLocalMode: NodeCIDR\n  tcpBeLiberal: true\n  nodePortAddresses: []\n")
    assert "\n- {name: zn1, ip: 10.246.33.11, podCIDR: 10.244.1.0/24, zone: zone-a}\n" in res.stdout
    assert ("  allocateLoadBalancerNodePorts: false\n  loadBalancerIPs: [203.0.113.20]\n"
            "  loadBalancerProxyIPs: [203.0.113.21]\n") in res.stdout


@pytest.mark.parametrize("mode", ["iptables", "ipvs", "nftables"])
@pytest.mark.parametrize("node", ["zn1", "zn2"])
def test_rules_are_the_whole_expected_text(tmp_path: Path, mode: str, node: str) -> None:
    expected = EXPECTED / f"features-1.33-{mode}-{node}.txt"
    assert _rules(_in_mode(tmp_path, mode), node) == expected.read_text(), f"compare with {expected}"


def test_iptables_lines_per_feature(tmp_path: Path) -> None:
    zn1 = _rules(_in_mode(tmp_path, "iptables"), "zn1", "iptables-restore").splitlines()
    # detectLocalMode NodeCIDR: NewDetectLocalByCIDR(node podCIDR).IfNotLocal() (pkg/proxy/util/localdetector.go)
    assert ('-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http cluster IP" -m tcp -p tcp '
            "-d 10.96.10.10 --dport 80 ! -s 10.244.1.0/24 -j KUBE-MARK-MASQ") in zn1
    # zone hints: zn1 (zone-a) balances web over its zone's endpoint only (topology.go)
    web = [x for x in zn1 if x.startswith("-A KUBE-SVC-CDGGSHYLG3RE2FKL ") and "KUBE-SEP" in x]
    assert web == ['-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.10:8080" '
                   "-j KUBE-SEP-GWQABTP5GBYXHJY5"]
    # tcpBeLiberal: no INVALID drop (iptables/proxier.go, conntrackTCPLiberal)
    assert not [x for x in zn1 if "INVALID" in x]
    # ipMode Proxy: nothing for 203.0.113.21; allocateLoadBalancerNodePorts false: no KUBE-NODEPORTS rule
    assert not [x for x in zn1 if "203.0.113.21" in x]
    assert not [x for x in zn1 if x.startswith("-A KUBE-NODEPORTS")]
    assert ('-A KUBE-SERVICES -m comment --comment "default/edge:http loadbalancer IP" -m tcp -p tcp '
            "-d 203.0.113.20 --dport 80 -j KUBE-EXT-IYL3DV2YHJIYW6RN") in zn1
    # service-proxy-name: no chain for default/mesh
    assert not [x for x in zn1 if "default/mesh" in x]


def test_without_tcp_be_liberal_the_invalid_drop_is_back(tmp_path: Path) -> None:
    f = _in_mode(tmp_path, "iptables", **{"        tcpBeLiberal: true": "        tcpBeLiberal: false"})
    lines = _rules(f, "zn1", "iptables-restore").splitlines()
    # TestOverallIPTablesRules (v1.33.6 pkg/proxy/iptables/proxier_test.go)
    assert [x for x in lines if "INVALID" in x] == [
        "-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP"]


def test_ip_mode_proxy_is_a_vip_before_1_30(tmp_path: Path) -> None:
    f = _in_mode(tmp_path, "iptables", **{"v1.33.6": "v1.29.4", "    trafficDistribution: PreferClose\n": ""})
    lines = _rules(f, "zn1", "iptables-restore").splitlines()
    assert ('-A KUBE-SERVICES -m comment --comment "default/edge:http loadbalancer IP" -m tcp -p tcp '
            "-d 203.0.113.21 --dport 80 -j KUBE-EXT-IYL3DV2YHJIYW6RN") in lines


@pytest.mark.parametrize(("config", "ipt", "ipvs", "nft"), [
    ("detectLocalMode: InterfaceNamePrefix\n      detectLocal: {interfaceNamePrefix: veth}",
     "! -i veth+ -j KUBE-MARK-MASQ", "dst,dst ! -i veth+ -j KUBE-MARK-MASQ",
     "iifname != veth* jump mark-for-masquerade"),
    ("detectLocalMode: BridgeInterface\n      detectLocal: {bridgeInterface: cni0}",
     "! -i cni0 -j KUBE-MARK-MASQ", "dst,dst ! -i cni0 -j KUBE-MARK-MASQ", "iifname != cni0 jump mark-for-masquerade"),
    ("detectLocalMode: ClusterCIDR",
     "! -s 10.244.0.0/16 -j KUBE-MARK-MASQ", "dst,dst ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ",
     "ip saddr != 10.244.0.0/16 jump mark-for-masquerade"),
])
def test_each_detect_local_mode_in_each_mode(tmp_path: Path, config: str, ipt: str, ipvs: str, nft: str) -> None:
    """IfNotLocal / IfNotLocalNFT of localdetector.go, where each proxier writes it for a ClusterIP."""
    def text(mode: str, fmt: str) -> str:
        return _rules(_in_mode(tmp_path, mode, **{"detectLocalMode: NodeCIDR": config}), "zn1", fmt)

    assert ('-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http cluster IP" -m tcp -p tcp '
            f"-d 10.96.10.10 --dport 80 {ipt}") in text("iptables", "iptables-restore").splitlines()
    assert ('-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" '
            f"-m set --match-set KUBE-CLUSTER-IP {ipvs}") in text("ipvs", "iptables-restore").splitlines()
    assert (f"add rule ip kube-proxy service-SUSTUHLJ-default/web/tcp/http ip daddr 10.96.10.10 tcp dport 80 {nft}"
            in text("nftables", "nft").splitlines())


def test_hostile_configmaps_and_slices_are_refused_naming_the_field(tmp_path: Path) -> None:
    node = ("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {podCIDR: 10.244.0.0/24}\n"
            "status: {addresses: [{type: InternalIP, address: 192.168.58.2}]}\n---\n")
    cases = {
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-proxy, namespace: kube-system}\n"
        "data: {config.conf: 5}\n": 'data["config.conf"]: Invalid value: must be a string',
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-proxy, namespace: kube-system}\n"
        'data: {config.conf: "{{"}\n': 'data["config.conf"]: not YAML line 1 of the embedded file',
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: coredns, namespace: kube-system}\ndata: {}\n":
            "kpemu reads only the kube-proxy ConfigMap",
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, labels: "
        "{kubernetes.io/service-name: web}}\nendpoints: [{addresses: [10.244.0.5], hints: {forZones: [a]}}]\n":
            "endpoints[0].hints.forZones[0]: Invalid value: 'a': must be a mapping",
    }
    for i, (doc, said) in enumerate(cases.items()):
        f = tmp_path / f"h{i}.yaml"
        f.write_text(node + doc)
        res = kpemu("import", str(f))
        assert res.returncode == 2 and not res.stdout and "Traceback" not in res.stderr, res.stderr
        assert said in res.stderr
