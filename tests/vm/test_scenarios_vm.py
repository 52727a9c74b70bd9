"""The IPVS / calico-IPIP scenarios of seed 000, through `kpemu run` as users run them (natively, or in the
warm guest of the session): captures at every hop, the ledger's attribution, and the model oracle."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import kpemu

pytestmark = pytest.mark.vm


def run_scenario(name: str, out: Path) -> dict:
    res = kpemu("run", f"scenarios/{name}.yaml", "--out", str(out), "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return json.loads(res.stdout)


def sightings(f: dict, point: str, direction: str = "request") -> list[dict]:
    member, iface = point.split("/")
    return [h for c in f["connections"] for h in c["hops"]
            if h["member"] == member and h["interface"] == iface and h["direction"] == direction]


@pytest.fixture(scope="module")
def nodeport_ipvs(runtime: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("nodeport-ipvs")
    return run_scenario("nodeport-ipvs", out), out


def test_nodeport_ipvs_seed_000(nodeport_ipvs: tuple[dict, Path]) -> None:
    data, out = nodeport_ipvs
    f = data["flows"][0]
    assert f["backends"] == ["nginx-0"]
    text = next((out / "capture").glob("*-nginx-0_eth0.txt")).read_text()
    assert re.search(r"IP 192\.168\.97\.1\.\d+ > 192\.168\.97\.10\.80: Flags \[S\]", text), text
    back = sightings(f, "client/eth0", "reply")
    assert back and (back[0]["src"], back[0]["sport"], back[0]["dst"]) == ("10.246.198.17", 30080, "10.242.72.50")
    assert f["ipvs"] and f["ipvs"][0]["destination"] == "192.168.97.10:80"
    ipset = (out / "rules" / "node1.ipset").read_text()
    assert "add KUBE-LOOP-BACK 192.168.97.5,tcp:9153,192.168.97.5" in ipset


def test_nodeport_ipvs_is_explained_and_the_oracle_agrees(nodeport_ipvs: tuple[dict, Path]) -> None:
    data, out = nodeport_ipvs
    f = data["flows"][0]
    assert data["mode"] == "ipvs" and f["trace"]["available"], f["trace"]
    dnat = [ch for h in f["hops"] for ch in h["changed_by"] if ch["kind"] == "DNAT"]
    assert dnat and dnat[0]["node"] == "node1" and "IPVS rr -> 192.168.97.10:80" in dnat[0]["by"], dnat
    snat = [ch for h in f["hops"] for ch in h["changed_by"] if ch["kind"] == "SNAT"]
    assert snat and any(b.startswith("MASQUERADE in KUBE-POSTROUTING") for b in snat[0]["by"]), snat
    assert "KUBE-NODE-PORT" in f["chains"]["node1"] and "KUBE-MARK-MASQ" in f["chains"]["node1"], f["chains"]
    by = [b for c in f["connections"] for h in c["hops"] for ch in h["changed_by"] for b in ch["by"]]
    assert any(b.startswith("KUBE-MARK-MASQ from ") for b in by), by  # the trace attributes the mark
    assert f["oracle"]["agree"] is True and f["oracle"]["checked"] >= 1, f["oracle"]
    hooks = f["hooks"]["node1"]["text"]
    assert hooks.startswith("PREROUTING") and "INPUT" in hooks, hooks  # IPVS acts at LOCAL_IN
    md = (out / "report.md").read_text()
    assert "IPVS rr -> 192.168.97.10:80" in md and "KUBE-NODE-PORT" in md and "Model oracle vs kernel: **agree**" in md
    assert (out / "report.html").is_file()


@pytest.mark.long
def test_nodeport_ipvs_remote_crosses_ipip(runtime: str, tmp_path: Path) -> None:
    f = run_scenario("nodeport-ipvs-remote", tmp_path)["flows"][0]
    # the underlay port of node1 sees the client's packet (plain) and node1's copy to node2 (IPIP)
    ipip = [h for h in sightings(f, "underlay/n-node1") if h["outer"]]
    assert ipip and ipip[0]["outer"]["type"] == "ipip" and ipip[0]["outer"]["dst"] == "10.246.198.18"
    assert (ipip[0]["src"], ipip[0]["dst"]) == ("192.168.97.1", "192.168.98.10")
    assert {h["src"] for h in sightings(f, "nginx-1/eth0")} == {"192.168.97.1"}


@pytest.mark.long
def test_hairpin_ipvs(runtime: str, tmp_path: Path) -> None:
    f = run_scenario("hairpin-ipvs", tmp_path)["flows"][0]
    assert f["backends"] == ["coredns-0"]
    srcs = {h["src"] for h in sightings(f, "coredns-0/eth0")}
    assert {"192.168.97.5", "192.168.97.1"} <= srcs  # out as itself, back in masqueraded


@pytest.mark.long
def test_conntrack_full_drops_the_new_connection_in_the_netfilter_hook(runtime: str, tmp_path: Path) -> None:
    data = run_scenario("faults/conntrack-full", tmp_path)
    assert data["runtime"] == "vm"  # nf_conntrack_max is set only in the guest, whatever this kernel has
    fill, more = data["flows"]
    assert [c["outcome"] for c in fill["connections"]] == ["reply"] * 4
    v = more["verdict"]  # by tuple (bpftrace) under KVM; by time window in a software-emulated guest
    assert (v["at"], v["reason"], v["action"]) == ("node1", "NETFILTER_DROP", "KERNEL-DROP"), v
    assert v["function"] in ("nf_hook_slow", "?") and v["evidence"].startswith("kfree_skb by ")
    assert "conntrack itself did" in v["text"] and more["drops"]["available"]
    assert next(c for c in data["checks"] if c["what"] == "died")["ok"]
    assert data["faults"][0]["done"][0].startswith("sysctl -w net.netfilter.nf_conntrack_max=4 (kernel-wide, was ")


def _attributions(hops: dict) -> list[str]:
    return [b for f in hops["flows"] for h in f["hops"] for c in h.get("changed_by") or [] for b in c.get("by") or []]


@pytest.mark.long
def test_compare_modes_runs_iptables_ipvs_and_nftables_side_by_side(runtime: str, tmp_path: Path) -> None:
    res = kpemu("run", "scenarios/nft-clusterip-vxlan.yaml", "--compare-modes", "--out", str(tmp_path))
    out = res.stdout + res.stderr
    runs = {m: json.loads((tmp_path / m / "hops.json").read_text()) for m in ("iptables", "ipvs", "nftables")}
    assert {m: (r["mode"], r["lab"], r["ok"]) for m, r in runs.items()} == {
        m: (m, f"nft-clusterip-vxlan-{m}", True) for m in runs}, out[-3000:]
    assert res.returncode == 0, out[-3000:]
    assert runs["ipvs"]["runtime"] == runtime and runs["iptables"]["runtime"] == runs["nftables"]["runtime"] == "host"
    assert "nft-clusterip-vxlan [iptables] / pod-to-clusterip" in out
    assert "iptables vs IPVS" in out and "iptables vs nftables" in out and "iptables: tuple" in out
    assert any(b.startswith("DNAT by KUBE-SEP-") for b in _attributions(runs["iptables"]))
    assert any(b.startswith("IPVS rr -> 10.244.") for b in _attributions(runs["ipvs"]))
    assert any("endpoint-" in b for b in _attributions(runs["nftables"])), _attributions(runs["nftables"])
