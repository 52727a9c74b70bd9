# ruff: noqa: E501  (expected output is quoted verbatim, whole rule lines included)
"""`kpemu trace`: a packet walked offline through seed 001's real iptables-save dump (the note's NodePort
walk: two KUBE-SEP chains with probability 0.5 each), an IPVS node's dumps, and bad inputs (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import DATA, cli

SEED_NODEPORT = """\
packet tcp 10.242.72.50:40000 -> 192.168.49.2:30180 at node minikube from outside
rules: tests/data/seed-001.iptables-save (iptables-save); node addresses 127.0.0.1, 192.168.49.2
2 outcomes:
  p=0.5  DNAT to 172.17.0.5:80 by KUBE-SEP-43IWXJI557JKCKCF  verdict ACCEPT
  p=0.5  DNAT to 172.17.0.4:80 by KUBE-SEP-UZXILYFQQ2IZUWN5  verdict ACCEPT

outcome 1: probability 0.5
  nat PREROUTING
    -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-NODEPORTS -p tcp -m comment --comment "default/nginx:" -m tcp --dport 30180 -j KUBE-MARK-MASQ
    -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
    -A KUBE-NODEPORTS -p tcp -m comment --comment "default/nginx:" -m tcp --dport 30180 -j KUBE-SVC-4N57TFCL4MD7ZTDA
    -A KUBE-SVC-4N57TFCL4MD7ZTDA -j KUBE-SEP-43IWXJI557JKCKCF
    -A KUBE-SEP-43IWXJI557JKCKCF -p tcp -m tcp -j DNAT --to-destination 172.17.0.5:80
  filter FORWARD
    -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
  nat POSTROUTING
    -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -m mark --mark 0x4000/0x4000 -j MASQUERADE
  hooks PREROUTING -> FORWARD -> POSTROUTING
  mark 0x4000 (KUBE-MARK-MASQ ran); masquerade by KUBE-POSTROUTING; verdict ACCEPT

outcome 2: probability 0.5
  nat PREROUTING
    -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-NODEPORTS -p tcp -m comment --comment "default/nginx:" -m tcp --dport 30180 -j KUBE-MARK-MASQ
    -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
    -A KUBE-NODEPORTS -p tcp -m comment --comment "default/nginx:" -m tcp --dport 30180 -j KUBE-SVC-4N57TFCL4MD7ZTDA
    -A KUBE-SVC-4N57TFCL4MD7ZTDA -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-UZXILYFQQ2IZUWN5   [statistic: taken with probability 0.5]
    -A KUBE-SEP-UZXILYFQQ2IZUWN5 -p tcp -m tcp -j DNAT --to-destination 172.17.0.4:80
  filter FORWARD
    -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
  nat POSTROUTING
    -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -m mark --mark 0x4000/0x4000 -j MASQUERADE
  hooks PREROUTING -> FORWARD -> POSTROUTING
  mark 0x4000 (KUBE-MARK-MASQ ran); masquerade by KUBE-POSTROUTING; verdict ACCEPT
"""

IPVS_NODEPORT = """\
packet tcp 10.242.72.50:40000 -> 10.246.198.17:30080 at node node1 from outside
rules: tests/data/seed-000-node1.iptables-save (iptables-save), tests/data/seed-000-node1.ipvs (ipvsadm -Sn), tests/data/seed-000-node1.ipset (ipset save); node addresses 10.246.198.17, 127.0.0.1, 192.168.96.1, 192.168.96.3, 192.168.96.69, 192.168.96.126, 192.168.96.165, 192.168.97.1
1 outcome:
  p=1  IPVS rr TCP 10.246.198.17:30080 -> 192.168.97.10:80  verdict ACCEPT

outcome 1: probability 1
  nat PREROUTING
    -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
    -A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
    -A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ   [ipset KUBE-NODE-PORT-TCP has 30080]
    -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
    PREROUTING policy ACCEPT
  nat INPUT
    INPUT policy ACCEPT
  filter INPUT
    -A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
    INPUT policy ACCEPT
  IPVS rr TCP 10.246.198.17:30080 -> 192.168.97.10:80
  filter OUTPUT
    OUTPUT policy ACCEPT
  nat POSTROUTING
    -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
    -A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
  hooks PREROUTING -> INPUT -> OUTPUT -> POSTROUTING
  mark 0x4000 (KUBE-MARK-MASQ ran); masquerade by KUBE-POSTROUTING; verdict ACCEPT
"""

SEED = ["--iptables-save", "tests/data/seed-001.iptables-save", "--node", "minikube"]
IPVS = ["--ipvs", "tests/data/seed-000-node1.ipvs", "--ipset", "tests/data/seed-000-node1.ipset",
        "--iptables-save", "tests/data/seed-000-node1.iptables-save", "--node", "node1"]


def test_seed_001_nodeport_syn_reaches_both_sep_chains_half_each() -> None:
    res = cli("trace", *SEED, "--node-ip", "192.168.49.2", "--src", "10.242.72.50", "--dst", "192.168.49.2:30180")
    assert res.returncode == 0, res.stderr
    assert res.stdout == SEED_NODEPORT


def test_seed_001_json_for_scripts() -> None:
    res = cli("trace", *SEED, "--node-ip", "192.168.49.2", "--src", "10.242.72.50", "--dst", "192.168.49.2:30180",
                "-o", "json")
    data = json.loads(res.stdout)
    assert data["endpointChains"] == {"KUBE-SEP-43IWXJI557JKCKCF": 0.5, "KUBE-SEP-UZXILYFQQ2IZUWN5": 0.5}
    assert data["endpoints"] == {"172.17.0.5:80": 0.5, "172.17.0.4:80": 0.5}
    assert {o["verdict"] for o in data["outcomes"]} == {"ACCEPT"}
    assert all(o["mark"] == "0x4000" and o["masquerade"] for o in data["outcomes"])
    assert [(p["table"], p["hook"]) for p in data["outcomes"][0]["path"]][:1] == [("nat", "PREROUTING")]


def test_seed_001_clusterip_from_a_pod_with_the_topology() -> None:
    """The topology gives the node's addresses and podCIDR: 172.17.0.6 is a pod, so no --node-ip."""
    res = cli("trace", "topologies/seed-001.yaml", *SEED, "--src", "172.17.0.6", "--dst", "10.105.178.199:8080")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[:5] == [
        "packet tcp 172.17.0.6:40000 -> 10.105.178.199:8080 at node minikube from a pod",
        "rules: tests/data/seed-001.iptables-save (iptables-save); node addresses 127.0.0.1, 172.17.0.0, "
        "172.17.0.1, 192.168.49.2",
        "2 outcomes:",
        "  p=0.5  DNAT to 172.17.0.5:80 by KUBE-SEP-43IWXJI557JKCKCF  verdict ACCEPT",
        "  p=0.5  DNAT to 172.17.0.4:80 by KUBE-SEP-UZXILYFQQ2IZUWN5  verdict ACCEPT",
    ]


def test_generated_rules_without_a_dump() -> None:
    res = cli("trace", "topologies/seed-001.yaml", "--node", "minikube", "--src", "192.168.49.2",
                "--dst", "10.105.178.199:8080", "-o", "json")
    data = json.loads(res.stdout)
    assert data["rules"] == "generated by kpemu for kube-proxy 1.14 iptables mode"
    assert data["packet"]["from"] == "node" and data["outcomes"][0]["hooks"] == ["OUTPUT", "POSTROUTING"]
    assert data["endpointChains"] == {"KUBE-SEP-43IWXJI557JKCKCF": 0.5, "KUBE-SEP-UZXILYFQQ2IZUWN5": 0.5}


def test_ipvs_dumps_show_ipset_matches_and_the_virtual_server() -> None:
    res = cli("trace", *IPVS, "--node-ip", "10.246.198.17", "192.168.97.1", "--src", "10.242.72.50",
                "--dst", "10.246.198.17:30080")
    assert res.returncode == 0, res.stderr
    assert res.stdout == IPVS_NODEPORT


def test_truncated_dump_exits_2_with_file_and_line(tmp_path: Path) -> None:
    lines = (DATA / "seed-001.iptables-save").read_text().splitlines()
    cut = tmp_path / "cut.iptables-save"
    cut.write_text("\n".join(lines[:12]) + "\n")
    res = cli("trace", "--iptables-save", str(cut), "--node", "minikube", "--node-ip", "192.168.49.2",
                "--src", "10.242.72.50", "--dst", "192.168.49.2:30180")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr == (f"{cut}: line 12: the dump is truncated: table *nat (line 3) has no COMMIT; save the "
                          "whole output of iptables-save\n")


def test_rule_cut_mid_line_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.iptables-save"
    bad.write_text('*nat\n-A KUBE-SEP-X -p tcp -m tcp -j DNAT\n-A KUBE-SVC-Y -m comment --comment "default/x\nCOMMIT\n')
    res = cli("trace", "--iptables-save", str(bad), "--node", "n", "--node-ip", "10.0.0.1", "--src", "10.0.0.9",
                "--dst", "10.0.0.1:80")
    assert res.returncode == 2
    assert res.stderr == f"{bad}: line 2: DNAT without --to-destination: the rule is cut short\n"


def test_bad_arguments_exit_2() -> None:
    no_ip = cli("trace", *SEED, "--src", "10.242.72.50", "--dst", "192.168.49.2:30180")
    assert no_ip.returncode == 2 and "needs the node's addresses: --node-ip IP" in no_ip.stderr
    no_port = cli("trace", *SEED, "--node-ip", "192.168.49.2", "--src", "10.242.72.50", "--dst", "192.168.49.2")
    assert no_port.returncode == 2 and "the destination needs a port" in no_port.stderr
    nft = cli("trace", "--nft", "x.nft", "--node", "n", "--node-ip", "10.0.0.1", "--src", "10.0.0.9",
                "--dst", "10.0.0.1:80")
    assert (nft.returncode, nft.stderr) == (2, "x.nft: cannot read the dump: No such file or directory\n")
    half = cli("trace", "--ipvs", "tests/data/seed-000-node1.ipvs", "--node", "node1", "--node-ip", "10.0.0.1",
                 "--src", "10.0.0.9", "--dst", "10.0.0.1:80")
    assert half.returncode == 2 and "needs both --ipvs FILE" in half.stderr


def test_ipvs_hairpin_is_matched_after_ipvs_picked_the_pod() -> None:
    """Seed 000's hairpin: a pod reaching its own Service through IPVS is masqueraded by
    KUBE-LOOP-BACK, whose key is the real server IPVS chose (dst,dst,src), not the virtual address."""
    res = cli("trace", "topologies/calico-ipip.yaml", "--node", "node1", "--src", "192.168.97.10",
                "--dst", "192.168.96.165:80")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "  p=1  IPVS rr TCP 192.168.96.165:80 -> 192.168.97.10:80  verdict ACCEPT" in lines
    assert "    -A KUBE-POSTROUTING -m comment --comment \"Kubernetes endpoints dst ip:port, source ip for solving " \
           "hairpin purpose\" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE   [ipset KUBE-LOOP-BACK " \
           "has 192.168.97.10,tcp:80,192.168.97.10]" in lines
    assert lines[-1] == "  mark 0x0; masquerade by KUBE-POSTROUTING; verdict ACCEPT"
