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


def _rich_save(tmp_path: Path, edit) -> str:
    """kube-proxy 1.33's rules for rich.yaml's node1 as iptables-save prints them, the lines of each chain
    passed through `edit(table, chain, lines)`, written to a file; its path."""
    res = cli("rules", "tests/data/rich.yaml", "--node", "node1", "--format", "iptables-save")
    assert res.returncode == 0, res.stderr
    out, table, chains = [], "", {}
    for line in res.stdout.splitlines():
        if line.startswith("*"):
            table, chains = line[1:], {}
        if line.startswith("-A "):
            chains.setdefault(line.split()[1], []).append(line)
            continue
        if line == "COMMIT":
            for chain, lines in chains.items():
                out += edit(table, chain, lines)
        out.append(line)
    path = tmp_path / "node1.iptables-save"
    path.write_text("\n".join(out) + "\n")
    return str(path)


def _blocks_reversed(lines: list[str]) -> list[str]:
    """Service ports in the reverse order (each one's rules kept in order), the last-rule jump last."""
    last = [x for x in lines if "must be the last rule" in x]
    blocks: dict[str, list[str]] = {}
    for x in lines:
        if x not in last:
            blocks.setdefault(x.split('--comment "')[1].split(" ")[0].rstrip('"'), []).append(x)
    return [x for key in reversed(blocks) for x in blocks[key]] + last


def test_map_ordered_chains_in_another_service_order_are_not_drift_but_noted(tmp_path: Path) -> None:
    """kube-proxy writes KUBE-SERVICES and KUBE-NODEPORTS (nat and filter), KUBE-EXTERNAL-SERVICES and
    KUBE-PROXY-FIREWALL Service port by Service port in Go map order (pkg/proxy/iptables/proxier.go,
    `for svcName, svc := range proxier.svcPortMap`; upstream's tests sort them, sortIPTablesRules)."""
    unordered = {"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES", "KUBE-PROXY-FIREWALL"}
    dump = _rich_save(tmp_path, lambda t, c, lines: _blocks_reversed(lines) if c in unordered else lines)
    res = cli("check-node", "tests/data/rich.yaml", "--node", "node1", "--iptables-save", dump)
    assert res.returncode == 0, res.stdout
    why = ("the rules are in another order than kpemu writes them; kube-proxy writes this chain's rules Service "
           "port by Service port in Go map order (random from sync to sync), so only each Service port's own order "
           "is compared")
    assert res.stdout.splitlines()[1:-1] == [f"note: {t}/{c}: {why}" for t, c in (  # one Service: same order
        ("filter", "KUBE-PROXY-FIREWALL"), ("filter", "KUBE-SERVICES"), ("nat", "KUBE-NODEPORTS"),
        ("nat", "KUBE-SERVICES"))]
    assert res.stdout.splitlines()[-1] == "no drift: the 108 kube-proxy rules equal what kube-proxy would program"


def test_order_kube_proxy_defines_is_still_drift(tmp_path: Path) -> None:
    """One Service port's own rules swapped, the last-rule jump moved up, a KUBE-SVC chain reordered: drift."""
    def swap_first_two(lines: list[str]) -> list[str]:
        return [lines[1], lines[0], *lines[2:]]

    for table, chain in (("nat", "KUBE-NODEPORTS"), ("nat", "KUBE-SERVICES"), ("nat", "KUBE-SVC-CDGGSHYLG3RE2FKL")):
        def edit(t, c, lines, want=(table, chain)):
            if (t, c) != want:
                return lines
            if c == "KUBE-SERVICES":
                return [lines[-1], *lines[:-1]]
            return swap_first_two(lines)

        res = cli("check-node", "tests/data/rich.yaml", "--node", "node1", "--iptables-save",
                  _rich_save(tmp_path, edit), "-o", "json")
        assert res.returncode == 1, (chain, res.stdout)
        doc = json.loads(res.stdout)
        assert doc["notes"] == [] and any(g["changed"] or g["missing"] for g in doc["groups"]), chain
