"""Chain hashes (reference 2.4) and the version toggles (sections 4 and 9.1)."""

from __future__ import annotations

import pytest

from kpemu.cli import main
from kpemu.model.topology import KubeProxy
from kpemu.proxy import naming
from kpemu.proxy.versions import flavour_for, flavour_for_minor


@pytest.mark.parametrize(
    ("s", "proto", "expected"),
    [
        ("ns1/svc1:p80", "tcp", "XPGD46QRK7WJZT7O"),
        ("default/kubernetes:https", "tcp", "NPX46M4PTMTKRN6Y"),
        ("kube-system/kube-dns:dns", "udp", "TCOU7JCQXEZGVUNU"),
        ("default/web", "tcp", "LOLE4ISW44XBNF3G"),
        ("default/web:", "tcp", "BIJGBSD4RZCCZX5R"),
        ("default/nginx:", "tcp", "4N57TFCL4MD7ZTDA"),
        ("default/nginx", "tcp", "2CMXP7HKUVJN7L6M"),
        ("default/web:http", "tcp", "CDGGSHYLG3RE2FKL"),
    ],
)
def test_port_proto_hash(s: str, proto: str, expected: str) -> None:
    assert naming.port_proto_hash(s, proto) == expected


@pytest.mark.parametrize(
    ("s", "ep", "expected"),
    [
        ("ns1/svc1:p80", "10.180.0.1:80", "SXIVWICOYRO3J4NJ"),
        ("default/nginx:", "172.17.0.4:80", "UZXILYFQQ2IZUWN5"),
        ("default/nginx:", "172.17.0.5:80", "43IWXJI557JKCKCF"),
        ("default/nginx", "172.17.0.4:80", "QST3VAMBSCRN7S4W"),
        ("default/web:http", "10.244.2.7:8080", "2RIJ5GIYXEFH6G4D"),
    ],
)
def test_sep_hash(s: str, ep: str, expected: str) -> None:
    assert naming.sep_chain(s, "tcp", ep) == "KUBE-SEP-" + expected


def test_service_port_name_colon_by_era() -> None:
    assert naming.service_port_name("default", "web", "", colon_when_unnamed=True) == "default/web:"
    assert naming.service_port_name("default", "web", "", colon_when_unnamed=False) == "default/web"
    assert naming.service_port_name("default", "web", "http", colon_when_unnamed=False) == "default/web:http"
    assert naming.join_host_port("fd00::1", 80) == "[fd00::1]:80"


def test_every_release_has_a_flavour_and_boundaries() -> None:
    for m in range(10, 38):
        assert flavour_for_minor(m).minor == m
    f = {m: flavour_for_minor(m) for m in (14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25, 26, 28, 29, 33)}
    assert f[18].port_name_colon and not f[19].port_name_colon  # T1
    assert f[16].probability(2) == "0.50000" and f[17].probability(3) == "0.3333333333"  # T2
    assert not f[18].xor_mark and f[19].xor_mark  # T3
    assert not f[18].kubelet_localnet_rule and f[19].kubelet_localnet_rule and f[28].kubelet_localnet_rule  # T21
    assert not f[20].ipvs_etp_local_fallback and f[21].ipvs_etp_local_fallback
    assert not f[24].proxy_firewall and f[25].proxy_firewall  # T5/T10
    assert not f[20].masq_in_svc_chain and f[21].masq_in_svc_chain  # T7
    assert not f[23].ext_chains and f[24].ext_chains  # T9
    assert f[14].input_services_jump and not f[20].input_services_jump and f[20].forward_external_services_jump
    assert not f[14].forward_invalid_drop and f[15].forward_invalid_drop
    assert not f[17].endpoint_comments and f[18].endpoint_comments
    assert not f[25].ipvs_filter and f[26].ipvs_filter and f[26].loopback_return
    assert not f[28].ipvs_out_filter and f[29].ipvs_out_filter
    assert not f[15].canary and f[16].canary and not f[15].random_fully and f[16].random_fully


def test_flavour_for_settings() -> None:
    assert flavour_for(KubeProxy(version="1.33", randomFully=False)).random_fully is False
    assert flavour_for(KubeProxy(version="1.33")).random_fully is True  # None = assume supported
    assert flavour_for(KubeProxy(version="1.15", randomFully=True)).random_fully is False  # pre-1.16
    assert flavour_for(KubeProxy(version="1.33", localhostNodePorts=False)).localhost_nodeports is False
    assert flavour_for(KubeProxy(version="1.20", localhostNodePorts=False)).localhost_nodeports is True
    with pytest.raises(ValueError):
        flavour_for(KubeProxy(version="1.9"))
    with pytest.raises(ValueError):
        flavour_for(KubeProxy(version="1.38"))  # not released: 1.37 is the newest


def test_nfacct_and_ipvs_deprecation_by_release() -> None:
    assert [flavour_for(KubeProxy(version=f"1.{m}")).nfacct for m in (29, 30, 37)] == [False, True, True]
    assert flavour_for(KubeProxy(version="1.37", nfacct=False)).nfacct is False
    assert flavour_for(KubeProxy(version="1.29", nfacct=True)).nfacct is False  # no counters before 1.30
    assert [flavour_for_minor(m).ipvs_deprecated for m in (34, 35, 37)] == [False, True, True]
    # 1.34-1.37 change no iptables/IPVS rule text: only the deprecation flag and the UDP conntrack
    # cleanup's eras (endpoint ports matched from 1.34, empty Services reconciled again in 1.37) differ.
    base = flavour_for_minor(33).as_dict()
    expected = {34: {"minor", "reconcile_endpoint_port"}, 35: {"minor", "reconcile_endpoint_port", "ipvs_deprecated"},
                36: {"minor", "reconcile_endpoint_port", "ipvs_deprecated"},
                37: {"minor", "reconcile_endpoint_port", "ipvs_deprecated", "reconcile_skips_empty"}}
    for m in (34, 35, 36, 37):
        diff = {k for k, v in flavour_for_minor(m).as_dict().items() if base[k] != v}
        assert diff == expected[m], m


@pytest.mark.parametrize(("mode", "version", "notice"), [("ipvs", "1.35", True), ("ipvs", "1.34", False),
                                                         ("iptables", "1.37", False)])
def test_rules_prints_kube_proxys_ipvs_deprecation_on_stderr(mode: str, version: str, notice: bool, tmp_path,
                                                             capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "t.yaml"
    f.write_text(f'name: dep\nkubeProxy: {{mode: {mode}, version: "{version}"}}\n'
                 "nodes: [{name: n1, ip: 10.246.0.2, podCIDR: 10.244.0.0/24}]\n")
    assert main(["rules", str(f), "--node", "n1", "--format", "iptables-restore"]) == 0
    out, err = capsys.readouterr()
    expected = (f"kube-proxy {version} logs at startup: The ipvs proxier is now deprecated and may be removed in a "
                "future release. Please use 'nftables' instead.\n")
    assert err == (expected if notice else "") and out.startswith("*")


@pytest.mark.parametrize(("version", "addresses", "allowed"), [
    ("1.37", [], True), ("1.37", ["0.0.0.0/0"], True), ("1.37", ["127.0.0.0/8", "192.168.0.0/24"], True),
    ("1.37", ["127.0.0.5/32"], True), ("1.37", ["192.168.0.2/32"], False), ("1.27", ["192.168.0.2/32"], False),
    ("1.26", ["192.168.0.2/32"], True),  # 1.26 gates only route_localnet on it
])
def test_localhost_nodeports_need_loopback_among_the_nodeport_addresses(version: str, addresses: list[str],
                                                                        allowed: bool) -> None:
    """pkg/proxy/iptables/proxier.go NewProxier (v1.27.16 .. v1.37.2): `if
    !nodePortAddresses.ContainsIPv4Loopback() { localhostNodePorts = false }` (seen in the rules of a
    real kube-proxy v1.37.2 with nodePortAddresses [192.168.0.2/32]: no `-d 127.0.0.0/8` NodePort rule)."""
    assert flavour_for(KubeProxy(version=version, nodePortAddresses=addresses)).localhost_nodeports is allowed
