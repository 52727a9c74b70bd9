"""The host scenarios of today's Service features (scenarios/lb-ipmode-proxy.yaml,
lb-no-nodeports.yaml, service-proxy-name.yaml, detect-local-nodecidr.yaml, detect-local-bridge.yaml):
each loads in both proxy modes it runs in, and what kube-proxy 1.33 writes (or does not write) for its
feature is in the rules, per mode. Expected rule text is literal and whole; where kube-proxy writes
nothing, the address is absent from every format."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpemu.inputs.scenario import load_scenario
from kpemu.model.topology import Topology
from kpemu.proxy.modes import node_state
from kpemu.proxy.render import render_rules
from kpemu.proxy.view import as_seen, unproxied
from tests.helpers import SCENARIOS

FEATURES = ("lb-ipmode-proxy", "lb-no-nodeports", "service-proxy-name", "detect-local-nodecidr",
            "detect-local-bridge")


def _topo(name: str, mode: str) -> Topology:
    return load_scenario(SCENARIOS / f"{name}.yaml", mode).topology


def _texts(name: str, mode: str, node: str = "node1") -> str:
    return "\n".join(node_state(_topo(name, mode), node).texts.values())


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
@pytest.mark.parametrize("name", FEATURES)
def test_each_feature_scenario_loads_in_both_modes(name: str, mode: str) -> None:
    sc = load_scenario(SCENARIOS / f"{name}.yaml", mode)
    assert sc.topology.kubeProxy.mode == mode and sc.topology.kubeProxy.version == "1.33"


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_an_ip_mode_proxy_ingress_gets_no_rule_from_1_30(mode: str) -> None:
    """pkg/proxy/serviceport.go (1.30+): only ingress IPs whose ipMode is VIP (or unset) are kept."""
    assert "10.242.72.100" not in _texts("lb-ipmode-proxy", mode)
    old = _topo("lb-ipmode-proxy", mode)
    old = old.model_copy(update={"kubeProxy": old.kubeProxy.model_copy(update={"version": "1.29"})})
    assert "10.242.72.100" in "\n".join(node_state(old, "node1").texts.values())


def test_a_loadbalancer_without_node_ports_has_its_ip_and_no_node_port() -> None:
    ipt = node_state(_topo("lb-no-nodeports", "iptables"), "node1").texts["iptables-save"]
    assert ('-A KUBE-SERVICES -d 10.240.0.100/32 -p tcp -m comment --comment "default/web:http loadbalancer IP" '
            "-m tcp --dport 80 -j KUBE-EXT-CDGGSHYLG3RE2FKL") in ipt.splitlines()
    assert not [ln for ln in ipt.splitlines() if ln.startswith("-A KUBE-NODEPORTS")]
    nft = node_state(_topo("lb-no-nodeports", "nftables"), "node1").texts["nft"]
    assert "add element ip kube-proxy service-ips { 10.240.0.100 . tcp . 80 : goto " \
           "external-SUSTUHLJ-default/web/tcp/http }" in nft.splitlines()
    assert not [ln for ln in nft.splitlines() if ln.startswith("add element ip kube-proxy service-nodeports")]


@pytest.mark.parametrize("mode", ["iptables", "ipvs", "nftables"])
def test_a_service_proxy_name_service_gets_no_rule_in_any_mode(mode: str) -> None:
    """cmd/kube-proxy/app/server.go: the informers' label selector !service.kubernetes.io/service-proxy-name."""
    topo = _topo("service-proxy-name", mode)
    text = _texts("service-proxy-name", mode)
    assert "10.96.0.30" not in text and "10.96.0.10" in text
    assert [s.name for s in as_seen(topo).services] == ["web"]
    assert unproxied(topo, "10.96.0.30") == (
        "kube-proxy writes no rule for 10.96.0.30: Service default/mesh is labelled "
        "service.kubernetes.io/service-proxy-name=mesh-proxy: another proxy serves it, so kube-proxy's informers "
        "(label selector !service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless) never list it")
    assert unproxied(topo, "10.96.0.10") is None


def test_a_headless_label_leaves_the_service_out_too() -> None:
    topo = _topo("service-proxy-name", "iptables")
    mesh = topo.services[1].model_copy(update={"labels": {"service.kubernetes.io/headless": ""}})
    topo = topo.model_copy(update={"services": [topo.services[0], mesh]})
    assert mesh.left_out == "labelled service.kubernetes.io/headless: it is headless"
    assert [s.name for s in as_seen(topo).services] == ["web"]


def test_node_cidr_detects_local_traffic_by_the_node_pod_cidr() -> None:
    """pkg/proxy/util/localdetector.go NewDetectLocalByCIDR with the node's podCIDR (server_linux.go)."""
    ipt = node_state(_topo("detect-local-nodecidr", "iptables"), "node2").texts["iptables-save"]
    assert ('-A KUBE-SVC-CDGGSHYLG3RE2FKL ! -s 10.244.1.0/24 -d 10.96.0.10/32 -p tcp -m comment --comment '
            '"default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ') in ipt.splitlines()
    nft = node_state(_topo("detect-local-nodecidr", "nftables"), "node1").texts["nft"]
    assert ("add rule ip kube-proxy service-SUSTUHLJ-default/web/tcp/http ip daddr 10.96.0.10 tcp dport 80 "
            "ip saddr != 10.244.0.0/24 jump mark-for-masquerade") in nft.splitlines()


def test_bridge_interface_detects_local_traffic_by_the_arrival_bridge() -> None:
    """localdetector.go NewDetectLocalByBridgeInterface: `-i cni0` (iptables), `iifname cni0` (nft), which
    nft lists as `iifname "cni0"`."""
    ipt = node_state(_topo("detect-local-bridge", "iptables"), "node1").texts["iptables-save"]
    assert ('-A KUBE-SVC-CDGGSHYLG3RE2FKL -d 10.96.0.10/32 ! -i cni0 -p tcp -m comment --comment '
            '"default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ') in ipt.splitlines()
    nft = node_state(_topo("detect-local-bridge", "nftables"), "node1").texts["nft"]
    assert ("add rule ip kube-proxy service-SUSTUHLJ-default/web/tcp/http ip daddr 10.96.0.10 tcp dport 80 "
            "iifname != cni0 jump mark-for-masquerade") in nft.splitlines()
    listed = render_rules(_topo("detect-local-bridge", "nftables"), "node1", "nft-list")
    assert ("\t\tip daddr 10.96.0.10 tcp dport 80 iifname != \"cni0\" jump mark-for-masquerade") in listed.splitlines()


def test_rules_expectations_follow_the_run_mode(tmp_path: Path) -> None:
    """`rules[].mode`: lines for one mode are checked only in a run of that mode; unset: the topology's own."""
    f = tmp_path / "s.yaml"
    f.write_text(f"""name: s
topology: {SCENARIOS.parent / 'topologies' / 'flannel-vxlan.yaml'}
flows:
  - {{name: t, from: client-0, to: {{service: default/web, via: clusterIP}}}}
expect:
  - flow: t
    rules:
      - {{node: node1, contains: [a]}}
      - {{node: node1, kind: nft, mode: nftables, contains: [b]}}
""")
    native = load_scenario(f).spec.expect[0].rules
    assert [r.contains for r in native] == [["a"]]
    nft = load_scenario(f, "nftables").spec.expect[0].rules
    assert [r.contains for r in nft] == [["b"]]
    assert load_scenario(f, "ipvs").spec.expect[0].rules == []
