"""`kpemu check-node`: seed 001's real dump against its Service (equal), against the objects with one
endpoint gone (one stale KUBE-SEP chain), against a deleted Service; an IPVS node's dumps."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import ROOT, cli

DUMP = ["--iptables-save", "tests/data/seed-001.iptables-save"]
IPVS = ["--iptables-save", "tests/data/seed-000-node1.iptables-save", "--ipvs", "tests/data/seed-000-node1.ipvs",
        "--ipset", "tests/data/seed-000-node1.ipset"]

STALE = """\
node minikube: kube-proxy 1.14 iptables mode; compared tests/data/seed-001.iptables-save (iptables-save)
drift in 1 group:
Service default/nginx
  stale endpoint 172.17.0.5:80: nat/KUBE-SEP-43IWXJI557JKCKCF is in the dump, but not among the Service's endpoints
  extra    nat/KUBE-SEP-43IWXJI557JKCKCF: -A KUBE-SEP-43IWXJI557JKCKCF -s 172.17.0.5/32 -j KUBE-MARK-MASQ
  extra    nat/KUBE-SEP-43IWXJI557JKCKCF: -A KUBE-SEP-43IWXJI557JKCKCF -p tcp -m tcp -j DNAT --to-destination \
172.17.0.5:80
  changed
    kube-proxy  nat/KUBE-SVC-4N57TFCL4MD7ZTDA: -A KUBE-SVC-4N57TFCL4MD7ZTDA -j KUBE-SEP-UZXILYFQQ2IZUWN5
    dump        nat/KUBE-SVC-4N57TFCL4MD7ZTDA: -A KUBE-SVC-4N57TFCL4MD7ZTDA -m statistic --mode random --probability \
0.50000000000 -j KUBE-SEP-UZXILYFQQ2IZUWN5
    dump        nat/KUBE-SVC-4N57TFCL4MD7ZTDA: -A KUBE-SVC-4N57TFCL4MD7ZTDA -j KUBE-SEP-43IWXJI557JKCKCF
"""


def test_seed_001_dump_equals_its_service() -> None:
    for topology in ("topologies/seed-001.yaml", "tests/data/k8s/seed-001.yaml"):  # kpemu topology, k8s objects
        res = cli("check-node", topology, "--node", "minikube", *DUMP)
        assert res.returncode == 0, res.stderr
        assert res.stdout == (
            "node minikube: kube-proxy 1.14 iptables mode; compared tests/data/seed-001.iptables-save (iptables-save)\n"
            "no drift: the 25 kube-proxy rules equal what kube-proxy would program\n")


def test_one_endpoint_removed_names_the_stale_sep_chain() -> None:
    res = cli("check-node", "tests/data/k8s/seed-001-one-endpoint.yaml", "--node", "minikube", *DUMP)
    assert res.returncode == 1, res.stderr
    assert res.stdout == STALE


def test_json_for_scripts() -> None:
    res = cli("check-node", "tests/data/k8s/seed-001-one-endpoint.yaml", "--node", "minikube", *DUMP, "-o", "json")
    assert res.returncode == 1
    data = json.loads(res.stdout)
    assert not data["equal"] and [g["service"] for g in data["groups"]] == ["default/nginx"]
    assert data["groups"][0]["staleEndpoints"] == [{"endpoint": "172.17.0.5:80",
                                                    "chain": "nat/KUBE-SEP-43IWXJI557JKCKCF"}]
    assert data["groups"][0]["missing"] == [] and len(data["groups"][0]["changed"]) == 1


def test_rules_of_a_deleted_service(tmp_path: Path) -> None:
    topo = tmp_path / "renamed.yaml"
    topo.write_text((ROOT / "topologies" / "seed-001.yaml").read_text().replace("  - name: nginx\n", "  - name: web\n"))
    res = cli("check-node", str(topo), "--node", "minikube", *DUMP, "-o", "json")
    assert res.returncode == 1
    groups = {g["service"]: g for g in json.loads(res.stdout)["groups"]}
    assert set(groups) == {"default/nginx", "default/web"}
    gone = groups["default/nginx"]
    assert gone["serviceExists"] is False
    assert sorted(e["chain"] for e in gone["staleEndpoints"]) == ["nat/KUBE-SEP-43IWXJI557JKCKCF",
                                                                  "nat/KUBE-SEP-UZXILYFQQ2IZUWN5"]
    assert groups["default/web"]["serviceExists"] and groups["default/web"]["missingEndpoints"]
    assert "Service default/nginx: the Service no longer exists, its rules remain" in \
        cli("check-node", str(topo), "--node", "minikube", *DUMP).stdout


def test_ipvs_node_equal_then_a_stale_real_server(tmp_path: Path) -> None:
    ok = cli("check-node", "topologies/calico-ipip.yaml", "--node", "node1", *IPVS)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.endswith("no drift: the 47 kube-proxy rules equal what kube-proxy would program\n")
    ipvs = tmp_path / "node1.ipvs"
    ipvs.write_text((ROOT / "tests/data/seed-000-node1.ipvs").read_text()
                    + "-a -t 10.246.198.17:30080 -r 192.168.97.99:80 -m -w 1\n")
    bad = cli("check-node", "topologies/calico-ipip.yaml", "--node", "node1", "--ipvs", str(ipvs), "--ipset",
                "tests/data/seed-000-node1.ipset")
    assert bad.returncode == 1
    assert "  stale endpoint 192.168.97.99:80: ipvs -t 10.246.198.17:30080 is in the dump, but not among the " \
           "Service's endpoints" in bad.stdout.splitlines()


def test_bad_input_exits_2(tmp_path: Path) -> None:
    none = cli("check-node", "topologies/seed-001.yaml", "--node", "minikube")
    assert none.returncode == 2 and "give the node's dumps to check" in none.stderr
    node = cli("check-node", "topologies/seed-001.yaml", "--node", "node9", *DUMP)
    assert node.returncode == 2 and "--node 'node9' is not a node of topology 'seed001'" in node.stderr
    ipvs = cli("check-node", "topologies/seed-001.yaml", "--node", "minikube", "--ipvs", "x")
    assert ipvs.returncode == 2 and "--ipvs/--ipset need kube-proxy in IPVS mode" in ipvs.stderr
    junk = tmp_path / "junk.ipvs"
    junk.write_text("-A -t 10.0.0.1:80 -s rr\nTCP  10.0.0.1:80 rr\n")
    res = cli("check-node", "topologies/calico-ipip.yaml", "--node", "node1", "--ipvs", str(junk))
    assert res.returncode == 2 and res.stderr.startswith(f"{junk}: line 2: not an ipvsadm -Sn line")


def test_rules_of_other_programs_are_not_drift(tmp_path: Path) -> None:
    """A real node also holds the CNI's and docker's rules; only kube-proxy's and kubelet's count."""
    text = (ROOT / "tests/data/seed-001.iptables-save").read_text()
    text = text.replace("*filter\n", "-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\n"
                                     "-A DOCKER -i docker0 -j RETURN\n*filter\n")
    text = text.replace("COMMIT\n", "-A FORWARD -s 10.244.0.0/16 -m comment --comment \"flanneld forward\" -j ACCEPT\n"
                                    "COMMIT\n")
    dump = tmp_path / "node.iptables-save"
    dump.write_text(text)
    res = cli("check-node", "topologies/seed-001.yaml", "--node", "minikube", "--iptables-save", str(dump))
    assert res.returncode == 0, res.stdout
