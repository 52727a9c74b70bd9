"""The real kube-proxy's pure parts: the KubeProxyConfiguration and kubeconfig each node gets, the sync its
metrics tell, the API server's own Service, `--kube-proxy` as topology fields, and the model-versus-real
comparison and its report section."""

from __future__ import annotations

import re

import pytest

from kpemu.inputs.scenario import kube_proxy_choice, load_scenario
from kpemu.jobs.schema import Readback
from kpemu.realproxy import metrics
from kpemu.realproxy.binary import minor_of
from kpemu.realproxy.compare import differences
from kpemu.realproxy.config import apiserver_service, kube_proxy_configuration, kubeconfig, with_apiserver_service
from kpemu.report.markdown import render_markdown
from tests.helpers import ROOT

NFT = ROOT / "scenarios" / "nft-nodeport.yaml"


def test_each_node_gets_kubeadms_configuration_and_nothing_kernel_wide() -> None:
    topo = load_scenario(NFT, kube_proxy="upstream:1.37.2").topology
    assert kube_proxy_configuration(topo, "node2", "/s/node2/kubeconfig") == {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "mode": "nftables", "hostnameOverride": "node2", "bindAddress": "192.168.1.101",
        "clientConnection": {"kubeconfig": "/s/node2/kubeconfig"},
        "healthzBindAddress": "0.0.0.0:10256", "metricsBindAddress": "127.0.0.1:10249",
        "clusterCIDR": "10.244.0.0/16", "detectLocalMode": "ClusterCIDR",
        "detectLocal": {"bridgeInterface": "", "interfaceNamePrefix": ""},
        "nodePortAddresses": [],
        "iptables": {"masqueradeBit": 14, "masqueradeAll": False, "localhostNodePorts": True,
                     "syncPeriod": "1h0m0s", "minSyncPeriod": "0s"},
        "ipvs": {"scheduler": "rr", "syncPeriod": "1h0m0s", "minSyncPeriod": "0s"},
        "nftables": {"masqueradeBit": 14, "masqueradeAll": False, "syncPeriod": "1h0m0s", "minSyncPeriod": "0s"},
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpBeLiberal": False},
    }
    assert kubeconfig("/s/ca.crt", "t0k") == {
        "apiVersion": "v1", "kind": "Config", "current-context": "kpemu",
        "clusters": [{"name": "kpemu", "cluster": {"server": "https://127.0.0.1:6443",
                                                  "certificate-authority": "/s/ca.crt"}}],
        "users": [{"name": "kube-proxy", "user": {"token": "t0k"}}],
        "contexts": [{"name": "kpemu", "context": {"cluster": "kpemu", "user": "kube-proxy"}}]}


def test_kube_proxy_choice_names_a_release_a_binary_or_the_model() -> None:
    assert kube_proxy_choice("upstream") == {"implementation": "upstream"}
    assert kube_proxy_choice("upstream:1.36.3") == {"implementation": "upstream", "upstream": "1.36.3",
                                                    "version": "1.36"}
    assert kube_proxy_choice("/opt/k8s/_output/bin/kube-proxy") == {
        "implementation": "upstream", "upstream": "/opt/k8s/_output/bin/kube-proxy"}
    assert kube_proxy_choice("model") == {"implementation": "model", "upstream": None}
    kp = load_scenario(NFT, kube_proxy="upstream:1.37.2").topology.kubeProxy
    assert (kp.implementation, kp.upstream, kp.version) == ("upstream", "1.37.2", "1.37")
    assert load_scenario(NFT).topology.kubeProxy.implementation == "model"
    assert (minor_of("Kubernetes v1.37.2"), minor_of("Kubernetes v0.0.0-master+$Format:%H$")) == (37, None)


def test_the_api_servers_own_service_takes_the_first_address_of_the_range() -> None:
    topo = load_scenario(NFT).topology
    own = apiserver_service("10.96.0.0/12")
    assert (own.namespace, own.name, own.clusterIP, own.endpoints) == ("default", "kubernetes", "10.96.0.1", [])
    seen = with_apiserver_service(topo, "10.96.0.0/12")
    assert [s.name for s in seen.services] == [*(s.name for s in topo.services), "kubernetes"]
    clash = topo.model_copy(update={"services": [topo.services[0].model_copy(update={"clusterIP": "10.96.0.1"})]})
    with pytest.raises(ValueError, match=re.escape("Service default/web has clusterIP 10.96.0.1, the first address "
                                                   "of the service range 10.96.0.0/12, which kube-apiserver gives "
                                                   "default/kubernetes")):
        with_apiserver_service(clash, "10.96.0.0/12")


METRICS = """# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds [ALPHA] The last time proxy rules were synced
# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7647596e+09
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7647595e+09
# TYPE kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1.7647590e+09
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv6"} 1.7647596e+09
"""


def test_a_family_is_synced_when_it_wrote_and_nothing_was_asked_since() -> None:
    assert metrics.syncs(METRICS) == {"IPv4": metrics.Sync("IPv4", 1.7647596e9, 1.7647590e9),
                                      "IPv6": metrics.Sync("IPv6", 1.7647595e9, 1.7647596e9)}
    assert metrics.synced(METRICS) == metrics.Sync("IPv4", 1.7647596e9, 1.7647590e9)
    assert metrics.synced(METRICS, "IPv6") is None  # a change queued after its last write
    assert metrics.synced("# nothing synced yet\n") is None


MODEL_NFT = """table ip kube-proxy {
\tcomment "rules for kube-proxy"
\tchain services {
\t\tip daddr . meta l4proto . th dport vmap @service-ips
\t}
\tchain reject-chain {
\t\treject
\t}
}
"""
REAL_NFT = MODEL_NFT.replace("\t\treject\n", "\t\treject with icmp host-unreachable\n")
MODEL_IPT = "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-NODEPORTS\nCOMMIT\n"
REAL_IPT = ("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-PROXY-CANARY - [0:0]\n-A KUBE-SERVICES -j KUBE-NODEPORTS\nCOMMIT\n")


def test_model_versus_real_shows_every_differing_part_whole() -> None:
    expected = [Readback("node1", "nft", MODEL_NFT), Readback("node1", "iptables", MODEL_IPT,
                                                              chains={"nat": ("KUBE-SERVICES",)})]
    real = {("node1", "nft"): REAL_NFT, ("node1", "iptables"): REAL_IPT}
    found = differences(expected, lambda node, kind: real[(node, kind)])
    assert [d.to_json() for d in found] == [
        {"node": "node1", "what": "nft list table ip kube-proxy: chain reject-chain {",
         "diff": ["--- model", "+++ real", "@@ -1 +1 @@", "-reject", "+reject with icmp host-unreachable"]},
        {"node": "node1", "what": "iptables-save -t nat",
         "diff": ["--- model", "+++ real", "@@ -1,2 +1,3 @@", " :KUBE-SERVICES - [0:0]", "+:KUBE-PROXY-CANARY - [0:0]",
                  " -A KUBE-SERVICES -j KUBE-NODEPORTS"]}]
    assert differences([Readback("node1", "nft", MODEL_NFT)], lambda node, kind: MODEL_NFT) == []


def test_the_report_names_the_real_kube_proxy_and_its_differences() -> None:
    real = {"implementation": "upstream", "version": "Kubernetes v1.37.2", "binary": "/c/bin/v1.37.2/kube-proxy",
            "build": {"release": "v1.37.2", "go": "go1.26.8", "built_at": "2026-12-03T09:53:12Z"},
            "controlPlaneSeconds": 4.21, "syncSeconds": {"node1": 1.52, "node2": 1.71}, "resynced": [],
            "modelVsReal": [{"node": "node1", "what": "nft list table ip kube-proxy: chain reject-chain {",
                             "diff": ["--- model", "+++ real", "@@ -1 +1 @@", "-reject", "+reject with x"]}]}
    text = render_markdown({"scenario": "s", "runtime": "host", "reason": "r", "kernel": "6.1", "ok": True,
                            "flows": [], "checks": [], "seconds": 1.0, "mode": "nftables", "kubeProxy": real})
    start = text.index("- kube-proxy: the real one")
    assert text[start:text.index("```\n", text.index("```diff")) + 4] == (
        "- kube-proxy: the real one, Kubernetes v1.37.2 (built by kpemu from v1.37.2 with go1.26.8 at "
        "2026-12-03T09:53:12Z; /c/bin/v1.37.2/kube-proxy)\n"
        "- control plane ready in 4.2s; first sync per node: node1 1.5s, node2 1.7s\n\n"
        "## Model versus the real kube-proxy\n\n"
        "1 part(s) differ (`-` the model, `+` the real kube-proxy; whole in model-vs-real.txt):\n\n"
        "### node1: nft list table ip kube-proxy: chain reject-chain {\n\n"
        "```diff\n--- model\n+++ real\n@@ -1 +1 @@\n-reject\n+reject with x\n```\n")


def test_kubelets_rules_are_what_a_node_holds_before_kube_proxy_starts() -> None:
    from kpemu.proxy.iptables.generate import iptables_rules, kubelet_rules, restore_text

    topo = load_scenario(ROOT / "scenarios" / "nodeport-local.yaml").topology
    assert restore_text(kubelet_rules(iptables_rules(topo, "node1"))) == (
        "*filter\n:KUBE-FIREWALL - [0:0]\n-I INPUT 1 -j KUBE-FIREWALL\n-I OUTPUT 1 -j KUBE-FIREWALL\nCOMMIT\n")
    old = load_scenario(ROOT / "scenarios" / "nodeport-iptables.yaml").topology  # 1.14: kubelet's mark-drop too
    assert restore_text(kubelet_rules(iptables_rules(old, "minikube"))) == (
        "*filter\n:KUBE-FIREWALL - [0:0]\n"
        '-A KUBE-FIREWALL -m comment --comment "kubernetes firewall for dropping marked packets" -m mark --mark '
        "0x00008000/0x00008000 -j DROP\n-I INPUT 1 -j KUBE-FIREWALL\n-I OUTPUT 1 -j KUBE-FIREWALL\nCOMMIT\n"
        "*nat\n:KUBE-MARK-DROP - [0:0]\n-A KUBE-MARK-DROP -j MARK --set-xmark 0x00008000/0x00008000\nCOMMIT\n")


def test_a_release_without_the_family_label_syncs_by_its_plain_gauges() -> None:
    text = ("kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7647596e+09\n"
            "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds 1.7647590e+09\n")
    assert metrics.synced(text) == metrics.Sync("", 1.7647596e9, 1.7647590e9)


def test_rules_written_in_map_order_are_compared_by_service_port() -> None:
    from kpemu.realproxy.compare import by_service

    lines = ['-A KUBE-SERVICES -d 10.96.0.10/32 -p udp -m comment --comment "kube-system/kube-dns:dns cluster IP" -j A',
             '-A KUBE-SERVICES -d 10.96.0.9/32 -p tcp -m comment --comment "default/web:http cluster IP" -j B',
             '-A KUBE-SVC-X -m comment --comment "zz/last" -j C',
             '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule '
             'in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS']
    assert by_service("nat", lines) == [lines[1], lines[0], lines[2], lines[3]]
    assert by_service("mangle", lines) == lines


def test_a_known_difference_is_named_with_its_reason_and_others_are_not() -> None:
    from kpemu.realproxy.compare import Difference
    from kpemu.realproxy.known import known_reason

    iif = Difference("node1", "nft list table ip kube-proxy: chain service-X {",
                     ("--- model", "+++ real", "@@ -1 +1 @@", '-ip daddr 10.96.0.11 iifname != "cni0" jump m',
                      '+ip daddr 10.96.0.11 iif != "cni0" jump m'))
    assert "1.35.0 has `iifname`" in (known_reason(iif, "nftables", 29) or "")
    assert known_reason(iif, "nftables", 35) is None and known_reason(iif, "iptables", 29) is None

