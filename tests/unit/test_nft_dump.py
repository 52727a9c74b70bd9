# ruff: noqa: E501  (expected output is quoted verbatim, whole rule lines included)
"""nftables dumps: `nft list ruleset` as the kernel printed it for tests/data/nft-dump/cluster.yaml's node1
(README there) read into the generator's structure, checked against the objects (equal; one endpoint
gone: its endpoint chain named stale; a deleted Service: all its objects), walked by the nft oracle (a NodePort SYN
reaches both endpoints with probability 0.5), and cut-short or garbled dumps (exit 2, file and line)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from kpemu.dumps.nft.read import listed, parse_nft
from kpemu.inputs.topology import load_topology
from kpemu.proxy.nftables import listing, nftables_transaction
from tests.helpers import ROOT, cli

DATA = ROOT / "tests" / "data" / "nft-dump"
TOPO = "tests/data/nft-dump/cluster.yaml"
OBJECTS = "tests/data/nft-dump/objects.yaml"  # the same cluster as kubectl prints it
DUMP = ["--nft", "tests/data/nft-dump/node1.nft"]
HEAD = ("node node1: kube-proxy 1.35 nftables mode; compared tests/data/nft-dump/node1.nft (nft list ruleset; "
        "beside it: table inet filter, table ip flannel-ipv4)\n")

STALE = """\
drift in 1 group:
Service shop/web
  stale endpoint 10.244.1.5:8080: chain endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080 is in the dump, but not among the Service's endpoints
  extra    chain endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080: ip saddr 10.244.1.5 jump mark-for-masquerade
  extra    chain endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080: meta l4proto tcp dnat to 10.244.1.5:8080
  changed
    kube-proxy  chain service-KHN6ECMT-shop/web/tcp/http: numgen random mod 1 vmap { 0 : goto endpoint-UB5UL6E4-shop/web/tcp/http__10.244.0.2/8080 }
    dump        chain service-KHN6ECMT-shop/web/tcp/http: numgen random mod 2 vmap { 0 : goto endpoint-UB5UL6E4-shop/web/tcp/http__10.244.0.2/8080, 1 : goto endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080 }
"""

DELETED = """\
drift in 1 group:
Service shop/api: the Service no longer exists, its rules remain
  stale endpoint 10.244.1.6:9000: chain endpoint-RPW2VP3I-shop/api/tcp/grpc__10.244.1.6/9000 is in the dump, but not among the Service's endpoints
  extra    set cluster-ips: { 10.96.0.20 }
  extra    map service-ips: { 10.96.0.20 . tcp . 9000 : goto service-R6NSGCUN-shop/api/tcp/grpc }
  extra    chain endpoint-RPW2VP3I-shop/api/tcp/grpc__10.244.1.6/9000: ip saddr 10.244.1.6 jump mark-for-masquerade
  extra    chain endpoint-RPW2VP3I-shop/api/tcp/grpc__10.244.1.6/9000: meta l4proto tcp dnat to 10.244.1.6:9000
  extra    chain service-R6NSGCUN-shop/api/tcp/grpc: ip daddr 10.96.0.20 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
  extra    chain service-R6NSGCUN-shop/api/tcp/grpc: numgen random mod 1 vmap { 0 : goto endpoint-RPW2VP3I-shop/api/tcp/grpc__10.244.1.6/9000 }
"""

NODEPORT = """\
packet tcp 10.242.72.50:40000 -> 192.168.1.100:30080 at node node1 from outside
rules: table ip kube-proxy of tests/data/nft-dump/node1.nft (nft list ruleset; beside it: table inet filter, table ip flannel-ipv4); node addresses 127.0.0.1, 192.168.1.100
2 outcomes:
  p=0.5  DNAT to 10.244.0.2:8080 by endpoint-UB5UL6E4-shop/web/tcp/http__10.244.0.2/8080  verdict ACCEPT
  p=0.5  DNAT to 10.244.1.5:8080 by endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080  verdict ACCEPT

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
  forward: ip flannel-ipv4 forward (type filter, priority filter)
    forward: ip daddr 10.244.0.0/16 accept  => accept
  postrouting: nat-postrouting (type nat, priority srcnat)
    nat-postrouting: jump masquerading  => jump masquerading
    masquerading: meta mark set meta mark ^ 0x00004000  => continue   [mark 0x0]
    masquerading: masquerade fully-random  => accept
  hooks PREROUTING -> FORWARD -> POSTROUTING
  mark 0x0 (mark-for-masquerade ran); masquerade by masquerading; verdict ACCEPT

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
  forward: ip flannel-ipv4 forward (type filter, priority filter)
    forward: ip daddr 10.244.0.0/16 accept  => accept
  postrouting: nat-postrouting (type nat, priority srcnat)
    nat-postrouting: jump masquerading  => jump masquerading
    masquerading: meta mark set meta mark ^ 0x00004000  => continue   [mark 0x0]
    masquerading: masquerade fully-random  => accept
  hooks PREROUTING -> FORWARD -> POSTROUTING
  mark 0x0 (mark-for-masquerade ran); masquerade by masquerading; verdict ACCEPT
"""


def _web_slice_without_web_1(tmp_path: Path) -> Path:
    """objects.yaml with web-1 gone from Service web's EndpointSlice (still in lb's)."""
    docs = list(yaml.safe_load_all((ROOT / OBJECTS).read_text()))
    for d in docs:
        if d["kind"] == "EndpointSlice" and d["metadata"]["name"] == "web-q9w4z":
            d["endpoints"] = [e for e in d["endpoints"] if e["targetRef"]["name"] != "web-1"]
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_dump_reads_into_the_generated_table() -> None:
    """The kernel's listing read back and listed again is the kernel's text, with or without -a handles."""
    want = listing(listed(nftables_transaction(load_topology(ROOT / TOPO), "node1").table()))
    for name in ("node1.nft", "node1-handles.nft"):
        dump = parse_nft((DATA / name).read_text(), name)
        assert dump.table is not None and listing(dump.table) == want
        assert [t.name for t in dump.beside] == ["inet filter", "ip flannel-ipv4"] and dump.before == 2
        assert not dump.others and set(dump.policies.values()) == {"accept"}
        assert [(t.policies, t.passed, t.unread) for t in dump.beside] == [
            ({"input": "accept", "forward": "accept", "output": "accept"}, (), ""), ({"forward": "accept",
                                                                                     "postrtg": "accept"}, (), "")]
    table_only = parse_nft(want + 'table ip6 kube-proxy {\n\tcomment "rules for kube-proxy"\n}\n', "node1.list")
    assert table_only.table is not None and listing(table_only.table) == want
    assert table_only.describe() == ("node1.list (nft list ruleset; not on an IPv4 packet's path: table ip6 kube-proxy "
                                     "(IPv6; kpemu models IPv4))")


def test_equal_dump_is_no_drift() -> None:
    for topology in (TOPO, OBJECTS):  # kpemu topology, Kubernetes objects
        res = cli("check-node", topology, "--node", "node1", *DUMP)
        assert res.returncode == 0, res.stderr
        assert res.stdout == HEAD + "no drift: the 72 kube-proxy rules and set/map elements equal what kube-proxy would program\n"


def test_one_endpoint_removed_names_the_stale_endpoint_chain(tmp_path: Path) -> None:
    res = cli("check-node", str(_web_slice_without_web_1(tmp_path)), "--node", "node1", *DUMP)
    assert res.returncode == 1, res.stderr
    assert res.stdout == HEAD + STALE


def test_every_object_of_a_deleted_service_is_named(tmp_path: Path) -> None:
    """Service api and its EndpointSlice deleted, its objects still in the node's table."""
    docs = [d for d in yaml.safe_load_all((ROOT / OBJECTS).read_text())
            if (d["kind"], d.get("metadata", {}).get("name")) not in (("Service", "api"), ("EndpointSlice", "api-x7k2p"))]
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump_all(docs))
    res = cli("check-node", str(objects), "--node", "node1", *DUMP)
    assert (res.returncode, res.stdout) == (1, HEAD + DELETED), res.stderr


def test_json_and_a_deleted_service(tmp_path: Path) -> None:
    topo = tmp_path / "renamed.yaml"
    topo.write_text((ROOT / TOPO).read_text().replace("  - name: empty\n", "  - name: void\n"))
    res = cli("check-node", str(topo), "--node", "node1", *DUMP, "-o", "json")
    assert res.returncode == 1, res.stderr
    groups = {g["service"]: g for g in json.loads(res.stdout)["groups"]}
    assert set(groups) == {"shop/empty", "shop/void"}
    assert groups["shop/empty"]["serviceExists"] is False
    assert groups["shop/empty"]["extra"] == [
        'map no-endpoint-services: { 10.96.0.40 . tcp . 80 comment "shop/empty:http" : goto reject-chain }']
    assert groups["shop/void"]["missing"] == [
        'map no-endpoint-services: { 10.96.0.40 . tcp . 80 comment "shop/void:http" : goto reject-chain }']


def test_trace_nodeport_syn_reaches_both_endpoints() -> None:
    res = cli("trace", *DUMP, "--node", "node1", "--node-ip", "192.168.1.100", "--src", "10.242.72.50",
                "--dst", "192.168.1.100:30080")
    assert res.returncode == 0, res.stderr
    assert res.stdout == NODEPORT
    js = json.loads(cli("trace", TOPO, *DUMP, "--node", "node1", "--src", "10.242.72.50", "--dst",
                          "192.168.1.100:30080", "-o", "json").stdout)
    assert js["endpoints"] == {"10.244.0.2:8080": 0.5, "10.244.1.5:8080": 0.5}


def test_trace_of_the_generated_table_walks_the_same_path() -> None:
    args = ["--node", "node1", "--src", "10.242.72.50", "--dst", "192.168.1.100:30080"]
    dumped, generated = cli("trace", TOPO, *DUMP, *args).stdout, cli("trace", TOPO, *args).stdout
    assert "rules: table ip kube-proxy generated by kpemu for kube-proxy 1.35 nftables mode;" in generated
    # the dump's other tables (flannel's forward and postrtg chains) add their steps, and change nothing else
    mine = [line for line in dumped.split("\n")[2:] if "flannel" not in line and "postrtg:" not in line and
            not line.startswith("    forward: ip daddr 10.244.0.0/16 accept")]
    assert mine == generated.split("\n")[2:]


INLINE_MARK = """\
packet tcp 192.168.1.100:40000 -> 10.96.0.20:9000 at node node1 from the node itself
rules: table ip kube-proxy generated by kpemu for kube-proxy 1.36 nftables mode; node addresses 10.244.0.0, 10.244.0.1, 127.0.0.1, 192.168.1.100
1 outcome:
  p=1  DNAT to 10.244.1.6:9000 by service-R6NSGCUN-shop/api/tcp/grpc  verdict ACCEPT

outcome 1: probability 1
  output: filter-output-pre-dnat (type filter, priority -110)
    filter-output-pre-dnat: ct state new jump firewall-check  => jump firewall-check
  output: nat-output (type nat, priority -100)
    nat-output: jump services  => jump services
    services: ip daddr @cluster-ips ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000 comment "masquerade clusterIP traffic from outside cluster"  => continue   [@cluster-ips has 10.96.0.20; mark 0x4000]
    services: ip daddr . meta l4proto . th dport vmap @service-ips  => goto service-R6NSGCUN-shop/api/tcp/grpc   [@service-ips element 10.96.0.20 . tcp . 9000 : goto service-R6NSGCUN-shop/api/tcp/grpc]
    service-R6NSGCUN-shop/api/tcp/grpc: meta l4proto tcp dnat ip to numgen random mod 1 map { 0 : 10.244.1.6 . 9000 }  => accept   [numgen arm 0 of 1, probability 1/1]
  output: filter-output (type filter, priority filter)
    filter-output: ct state new jump service-endpoints-check  => jump service-endpoints-check
    filter-output: ct state new jump cluster-ips-check  => jump cluster-ips-check
  postrouting: nat-postrouting (type nat, priority srcnat)
    nat-postrouting: jump masquerading  => jump masquerading
    masquerading: meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random  => accept   [mark 0x0]
  hooks OUTPUT -> POSTROUTING
  mark 0x0 (masquerade mark set inline); masquerade by masquerading; verdict ACCEPT
"""


def test_trace_of_a_1_36_table_names_the_inline_mark(tmp_path: Path) -> None:
    """1.36 (#135800) has no mark-for-masquerade chain: the mark is set inline, and the trace says so; its
    numgen DNAT map (#136499) names the arm taken."""
    topo = tmp_path / "cluster.yaml"
    topo.write_text((DATA / "cluster.yaml").read_text().replace('version: "1.35"', 'version: "1.36"'))
    args = ["--node", "node1", "--src", "192.168.1.100", "--dst", "10.96.0.20:9000"]
    res = cli("trace", str(topo), *args)
    assert res.returncode == 0, res.stderr
    assert res.stdout == INLINE_MARK
    # the same table as a listing (what `nft list ruleset` prints, read back equal by the kernel tests) walks
    # the same way, the masquerade bit read from the masquerading chain
    dump = tmp_path / "node1.nft"
    dump.write_text(cli("rules", str(topo), "--node", "node1", "--format", "nft-list").stdout)
    dumped = cli("trace", str(topo), "--nft", str(dump), *args)
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout.split("\n")[2:] == INLINE_MARK.split("\n")[2:]


def test_cut_short_or_garbled_dumps_exit_2_with_file_and_line(tmp_path: Path) -> None:
    text = (DATA / "node1.nft").read_text()
    cases = {
        "truncated.nft": ("\n".join(text.split("\n")[:46]),
                          "line 46: the dump is truncated: set nodeport-ips (line 44) is not closed by '}'; save the "
                          "whole output of nft list ruleset"),
        "element.nft": (text.replace("10.96.0.40 . tcp . 80 comment", "10.96.0.40 . tcp comment"),
                        "line 53: element '10.96.0.40 . tcp comment \"shop/empty:http\" : goto reject-cha' of map "
                        "no-endpoint-services is garbled; expected a 3-part key : verdict"),
        "quote.nft": (text.replace("\t\tjump services\n\t}\n\n\tchain nat-output", "\t\tjump services comment \"cut\n\t}\n\n\tchain nat-output"),
                      "line 130: rule of chain nat-prerouting is cut short (an unclosed quote): 'jump services comment \"cut'"),
        "reference.nft": (text.replace("goto endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080 }",
                                       "goto endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.9/8080 }"),
                          "line 202: goto endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.9/8080: no chain "
                          "endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.9/8080 in table ip kube-proxy (the dump is cut "
                          "short or edited)"),
        "iptables.nft": ((ROOT / "tests/data/seed-001.iptables-save").read_text(),
                         "line 3: not a line of nft list ruleset: '*nat'; expected 'table FAMILY NAME {'"),
    }
    for name, (body, message) in cases.items():
        path = tmp_path / name
        path.write_text(body)
        for cmd in (["check-node", TOPO], ["trace", TOPO, "--src", "1.2.3.4", "--dst", "10.96.0.10:80"]):
            res = cli(*cmd, "--node", "node1", "--nft", str(path))
            assert (res.returncode, res.stdout) == (2, ""), name
            assert res.stderr.strip().endswith(f"{path}: {message}"), res.stderr


def test_nft_goes_with_nftables_mode_and_alone() -> None:
    res = cli("check-node", "topologies/seed-001.yaml", "--node", "minikube", *DUMP)
    assert res.returncode == 2 and "topology topologies/seed-001.yaml has kubeProxy.mode iptables" in res.stderr
    res = cli("check-node", TOPO, "--node", "node1", *DUMP, "--iptables-save", "tests/data/seed-001.iptables-save")
    assert res.returncode == 2 and "give it alone, without --iptables-save, --ipvs or --ipset" in res.stderr
    res = cli("trace", *DUMP, "--node", "node1", "--src", "1.2.3.4", "--dst", "10.96.0.10:80")
    assert res.returncode == 2 and "a dump without a topology needs the node's addresses: --node-ip IP" in res.stderr


def test_a_counter_is_walked_past_and_an_expression_the_walker_does_not_model_is_undecided(tmp_path: Path) -> None:
    edited = tmp_path / "counter.nft"
    edited.write_text((DATA / "node1.nft").read_text().replace("\t\tjump services\n",
                                                               "\t\tcounter packets 0 bytes 0 jump services\n"))
    args = ("--node", "node1", "--node-ip", "192.168.1.100", "--src", "1.1.1.1", "--dst", "192.168.1.100:30080",
            "-o", "json")
    plain = json.loads(cli("trace", "--nft", str(DATA / "node1.nft"), *args).stdout)
    counted = json.loads(cli("trace", "--nft", str(edited), *args).stdout)
    assert counted["decided"] is True and counted["endpoints"] == plain["endpoints"]
    skuid = tmp_path / "skuid.nft"
    skuid.write_text((DATA / "node1.nft").read_text().replace("\t\tjump services\n", "\t\tmeta skuid 0 jump services\n"))
    res = cli("trace", "--nft", str(skuid), *args)
    doc = json.loads(res.stdout)
    assert doc["decided"] is False
    assert [(u["fact"], u["why"]) for u in doc["undecided"]] == [
        ("meta skuid 0", "kpemu's nft walker does not model 'meta' expressions")]
    assert {o["verdict"] for o in doc["outcomes"]} == {"ACCEPT"}
    assert set(doc["endpoints"]) > set() and {tuple((a["fact"], a["holds"]) for a in o["assumed"])
                                              for o in doc["outcomes"]} >= {(("meta skuid 0", False),)}
    drift = cli("check-node", TOPO, "--node", "node1", "--nft", str(edited), "-o", "json")
    assert drift.returncode == 1
    assert json.loads(drift.stdout)["groups"][0]["changed"] == [
        {"kubeProxy": [f"chain {c}: jump services"], "dump": [f"chain {c}: counter packets 0 bytes 0 jump services"]}
        for c in ("nat-prerouting", "nat-output")]


def test_live_affinity_elements_are_not_drift_and_steer_the_trace() -> None:
    dump = ["--nft", "tests/data/nft-dump/node1-affinity.nft"]
    res = cli("check-node", TOPO, "--node", "node1", *dump)
    assert res.returncode == 0 and res.stdout.endswith("no drift: the 72 kube-proxy rules and set/map elements equal "
                                                       "what kube-proxy would program\n"), res.stdout
    args = ["--node", "node1", "--dst", "192.168.1.200:443", "-o", "json"]
    sticky = json.loads(cli("trace", TOPO, *dump, "--src", "10.242.72.50", *args).stdout)
    assert sticky["endpoints"] == {"10.244.1.5:8080": 1.0}
    assert [s["notes"] for s in sticky["outcomes"][0]["path"] if s["chain"].startswith("service-")] == [
        ["@affinity-PGENPARY-shop/lb/tcp/http__10.244.1.5/8080 has 10.242.72.50"]]
    fresh = json.loads(cli("trace", TOPO, *dump, "--src", "10.242.72.100", *args).stdout)
    assert fresh["endpoints"] == {"10.244.0.2:8080": 0.5, "10.244.1.5:8080": 0.5}
    outside = json.loads(cli("trace", TOPO, *dump, "--src", "10.242.72.200", *args).stdout)
    assert [(o["verdict"], o["path"][-1]["rule"]) for o in outside["outcomes"]] == [
        ("DROP", "ip saddr != { 10.242.72.0/25, 203.0.113.0/24 } drop")]


def test_iifname_and_ct_state_established_are_decided_or_undecided_never_assumed(tmp_path: Path) -> None:
    edited = tmp_path / "iif.nft"
    edited.write_text((DATA / "node1.nft").read_text().replace(
        "\t\tjump services\n", '\t\tct state established,related accept\n\t\tiifname "eth9" drop\n\t\tjump services\n'))
    args = ("--nft", str(edited), "--node", "node1", "--node-ip", "192.168.1.100", "--src", "1.1.1.1",
            "--dst", "192.168.1.100:30080")
    unknown = cli("trace", *args)
    assert unknown.returncode == 0, unknown.stderr
    assert '  iifname "eth9": needed by add rule ip kube-proxy nat-prerouting iifname "eth9" drop; kpemu was not ' \
           "told the interface the packet arrives on (give --iif IFACE)\n" in unknown.stdout
    on_eth9 = json.loads(cli("trace", *args, "--iif", "eth9", "-o", "json").stdout)
    assert on_eth9["decided"] and [o["verdict"] for o in on_eth9["outcomes"]] == ["DROP"]
    on_eth0 = json.loads(cli("trace", *args, "--iif", "eth0", "-o", "json").stdout)
    assert on_eth0["decided"] and {o["verdict"] for o in on_eth0["outcomes"]} == {"ACCEPT"}


NFT = ROOT / "tests" / "data" / "nftables"


def test_a_1_37_node_with_the_localhost_gate_checks_and_traces(tmp_path: Path) -> None:
    """The kernel's listing of upstream's 1.37 fixture (overall-1.37.list: named counters, `counter name`
    reject chains): no drift; a counter the node lacks is named; a packet to 127.0.0.1:3001 goes to the
    TCP reject chain, one to a one-endpoint service is DNATed by `dnat to`."""
    topo, dump = str(NFT / "overall-1.37.yaml"), NFT / "overall-1.37.list"
    res = cli("check-node", topo, "--node", "test-node", "--nft", str(dump))
    assert res.returncode == 0, res.stderr
    assert res.stdout.endswith("no drift: the 74 kube-proxy rules and set/map elements equal what kube-proxy would "
                               "program\n")
    lacking = tmp_path / "node.nft"
    lacking.write_text(dump.read_text().replace("\tcounter localhost-nodeport-rejected-sctp {\n\t\tpackets 0 bytes 0"
                                                "\n\t}\n\n", ""))
    res = cli("check-node", topo, "--node", "test-node", "--nft", str(lacking))
    assert res.returncode == 1
    assert res.stdout.split("\n", 1)[1] == ("drift in 1 group:\nnode-wide rules (no single Service)\n"
                                           "  missing  counter localhost-nodeport-rejected-sctp\n")
    args = ["--node", "test-node", "--node-ip", "192.168.0.2", "--src", "10.180.0.9", "--nft", str(dump)]
    local = cli("trace", topo, *args, "--dst", "127.0.0.1:3001")
    assert local.returncode == 0, local.stderr
    assert ('    localhost-nodeport-reject-tcp: counter name "localhost-nodeport-rejected-tcp" reject  => drop\n'
            in local.stdout and "verdict REJECT" in local.stdout)
    one = cli("trace", topo, *args, "--dst", "172.30.0.41:80")
    assert "    service-ULMVA6XW-ns1/svc1/tcp/p80: meta l4proto tcp dnat to 10.180.0.1:80  => accept\n" in one.stdout
