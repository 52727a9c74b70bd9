# ruff: noqa: E501  (expected output is quoted verbatim, whole rule lines included)
"""`kpemu trace` on dumps that people posted from real nodes (tests/data/real-dumps/, each file naming its
source): a new SYN reaches firewalld's REJECT, not the RELATED,ESTABLISHED ACCEPT before it; a pod's packet
leaving by flannel.1 is not masqueraded by docker's rules; an interface nobody named makes the outcome
undecided, both ways shown with the rule's line; an anonymised address is refused naming its line."""

from __future__ import annotations

import json

from tests.helpers import ROOT, cli

DUMPS = ROOT / "tests" / "data" / "real-dumps"


def _trace(dump: str, *args: str):
    return cli("trace", "--iptables-save", f"tests/data/real-dumps/{dump}", "--node", "n", *args)


KUBEADM_139 = """\
packet tcp 10.244.1.32:40000 -> 192.168.122.11:6443 at node n from outside (in on cni0)
rules: tests/data/real-dumps/kubeadm-139-fedora-forward.iptables-save (iptables-save); node addresses 127.0.0.1, 192.168.122.10
1 outcome:
  p=1  no DNAT  verdict REJECT

outcome 1: probability 1
  filter FORWARD
    -A FORWARD -m comment --comment "kubernetes forward rules" -j KUBE-FORWARD
    -A FORWARD -j FORWARD_direct
    -A FORWARD -j FORWARD_IN_ZONES_SOURCE
    -A FORWARD -j FORWARD_IN_ZONES
    -A FORWARD -j FORWARD_OUT_ZONES_SOURCE
    -A FORWARD -j FORWARD_OUT_ZONES
    -A FORWARD -j REJECT --reject-with icmp-host-prohibited
  hooks PREROUTING -> FORWARD
  mark 0x0; no masquerade; verdict REJECT
"""


def test_every_real_dump_names_its_public_source() -> None:
    files = sorted(DUMPS.iterdir())
    assert len(files) >= 4
    for f in files:
        assert f.read_text().startswith("# Source: https://github.com/"), f


def test_kubeadm_139_a_pods_new_syn_is_rejected_by_firewalld_not_accepted_as_established() -> None:
    res = _trace("kubeadm-139-fedora-forward.iptables-save", "--node-ip", "192.168.122.10", "--src", "10.244.1.32",
                 "--dst", "192.168.122.11:6443", "--iif", "cni0")
    assert res.returncode == 0, res.stderr
    assert res.stdout == KUBEADM_139


def test_k8s_61944_input_policy_drop_takes_a_new_syn_past_the_established_rules() -> None:
    res = _trace("k8s-61944-centos.iptables-save", "--node-ip", "10.10.0.5", "--src", "10.10.0.9",
                 "--dst", "10.10.0.5:8080", "-o", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["decided"] is True
    assert [(o["verdict"], o["path"][-1]["rule"]) for o in doc["outcomes"]] == [("DROP", "INPUT policy DROP")]
    ssh = json.loads(_trace("k8s-61944-centos.iptables-save", "--node-ip", "10.10.0.5", "--src", "10.10.0.9",
                            "--dst", "10.10.0.5:22", "-o", "json").stdout)
    assert [o["path"][-1]["rule"] for o in ssh["outcomes"]] == [
        "-A INPUT -p tcp -m tcp --dport 22 -m state --state NEW -j ACCEPT"]


def test_k8s_61944_a_pod_to_another_nodes_pod_leaves_by_flannel_1_unmasqueraded_past_weaves_rules() -> None:
    res = _trace("k8s-61944-centos.iptables-save", "--node-ip", "10.10.0.5", "--src", "10.244.0.7",
                 "--dst", "10.244.2.9:80", "--iif", "cni0", "-o", "json")
    doc = json.loads(res.stdout)
    assert doc["decided"] is True
    (o,) = doc["outcomes"]
    assert (o["verdict"], o["masquerade"]) == ("ACCEPT", False)
    assert o["inferred"] == ["leaves by flannel.1 to 10.244.2.9: inferred from line 8: -A POSTROUTING -s 10.244.0.0/16 ! -d 224.0.0.0/4 -j MASQUERADE (flannel: other nodes' pods of 10.244.0.0/16, through its VXLAN device flannel.1; --oif for another backend)"]
    assert [p["rule"] for p in o["path"] if p["table"] == "filter"] == [
        "-A FORWARD -m comment --comment \"kubernetes forward rules\" -j KUBE-FORWARD", "-A FORWARD -s 10.244.0.0/16 -j ACCEPT"]


def test_flannel_1608_dockers_masquerade_is_not_on_a_pod_path_to_flannel_1() -> None:
    res = _trace("flannel-1608-docker.iptables-save", "--node-ip", "10.0.12.9", "--src", "10.244.0.5",
                 "--dst", "10.244.1.6:80", "--iif", "cni0", "-o", "json")
    doc = json.loads(res.stdout)
    (o,) = doc["outcomes"]
    assert doc["decided"] and o["masquerade"] is False
    assert [p["rule"] for p in o["path"] if p["hook"] == "POSTROUTING"][-2:] == [
        "-A POSTROUTING -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment \"flanneld masq\" -j RETURN",
        "POSTROUTING policy ACCEPT"]
    out = json.loads(_trace("flannel-1608-docker.iptables-save", "--node-ip", "10.0.12.9", "--src", "10.244.0.5",
                            "--dst", "8.8.8.8:53", "--iif", "cni0", "-o", "json").stdout)
    assert [(o["masquerade"], o["masqueradeChain"]) for o in out["outcomes"]] == [(True, "POSTROUTING")]


def test_flannel_835_without_oif_both_ways_of_docker0_are_shown_with_the_line() -> None:
    args = ("--node-ip", "192.168.1.10", "--src", "172.16.1.5", "--dst", "172.16.2.7:80", "--iif", "docker0")
    res = _trace("flannel-835-docker-forward.iptables-save", *args)
    assert res.returncode == 0, res.stderr
    assert "\n".join(res.stdout.splitlines()[2:6]) == """\
2 outcomes:
  p=1  no DNAT  verdict ACCEPT  if 1 assumption holds
  p=1  no DNAT  verdict ACCEPT  if 1 assumption holds
outcome undecided: 1 fact kpemu was not given decides which outcome happens (each outcome below says which way it takes them; its probability holds given them):"""
    assert "  -o docker0: needed by -A FORWARD -o docker0 -j DOCKER (line 14); kpemu was not told the interface a packet to 172.16.2.7 leaves by (give --oif IFACE), and the dump does not show it\n" in res.stdout
    given = json.loads(_trace("flannel-835-docker-forward.iptables-save", *args, "--oif", "flannel.1", "-o", "json").stdout)
    assert given["decided"] is True
    assert [p["rule"] for p in given["outcomes"][0]["path"] if p["table"] == "filter"][-1] == \
        "-A FORWARD -i docker0 ! -o docker0 -j ACCEPT"


def test_an_anonymised_address_is_refused_naming_the_line_not_a_traceback(tmp_path) -> None:
    dump = tmp_path / "anon.iptables-save"
    dump.write_text((DUMPS / "k8s-61944-centos.iptables-save").read_text().replace("10.244.0.14/32", "x.x.x.x/32"))
    res = cli("trace", "--iptables-save", str(dump), "--node", "n", "--node-ip", "10.10.0.5", "--src", "1.2.3.4",
                "--dst", "10.10.0.5:80")
    assert res.returncode == 2
    assert res.stderr == f"{dump}: line 6: POSTROUTING: -s: 'x.x.x.x/32' is not an IPv4 address or network (ADDR[/0-32])\n"
