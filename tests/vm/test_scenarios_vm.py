"""The IPVS / calico-IPIP scenarios (seed 000). They need ip_vs, ipip and dummy, so on this host they
run inside the guest kernel (tests/vm/conftest.py boots it once); each calls the real CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.vm


def run_scenario(name: str, out: Path) -> dict:
    res = subprocess.run([sys.executable, "-m", "kpemu.cli", "run", f"scenarios/{name}.yaml", "--runtime", "host",
                          "--out", str(out), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return json.loads(res.stdout)


def sightings(f: dict, point: str, direction: str = "request") -> list[dict]:
    member, iface = point.split("/")
    return [h for c in f["connections"] for h in c["hops"]
            if h["member"] == member and h["interface"] == iface and h["direction"] == direction]


def test_nodeport_ipvs_seed_000(tmp_path: Path) -> None:
    data = run_scenario("nodeport-ipvs", tmp_path)
    f = data["flows"][0]
    assert f["backends"] == ["nginx-0"]
    text = next((tmp_path / "capture").glob("*-nginx-0_eth0.txt")).read_text()
    assert re.search(r"IP 192\.168\.97\.1\.\d+ > 192\.168\.97\.10\.80: Flags \[S\]", text), text
    back = sightings(f, "client/eth0", "reply")
    assert back and (back[0]["src"], back[0]["sport"], back[0]["dst"]) == ("10.246.198.17", 30080, "10.242.72.50")
    assert f["ipvs"] and f["ipvs"][0]["destination"] == "192.168.97.10:80"
    ipset = (tmp_path / "rules" / "node1.ipset").read_text()
    assert "add KUBE-LOOP-BACK 192.168.97.5,tcp:9153,192.168.97.5" in ipset


def test_nodeport_ipvs_remote_crosses_ipip(tmp_path: Path) -> None:
    f = run_scenario("nodeport-ipvs-remote", tmp_path)["flows"][0]
    # the underlay port of node1 sees the client's packet (plain) and node1's copy to node2 (IPIP)
    ipip = [h for h in sightings(f, "underlay/n-node1") if h["outer"]]
    assert ipip and ipip[0]["outer"]["type"] == "ipip" and ipip[0]["outer"]["dst"] == "10.246.198.18"
    assert (ipip[0]["src"], ipip[0]["dst"]) == ("192.168.97.1", "192.168.98.10")
    assert {h["src"] for h in sightings(f, "nginx-1/eth0")} == {"192.168.97.1"}


def test_hairpin_ipvs(tmp_path: Path) -> None:
    f = run_scenario("hairpin-ipvs", tmp_path)["flows"][0]
    assert f["backends"] == ["coredns-0"]
    srcs = {h["src"] for h in sightings(f, "coredns-0/eth0")}
    assert {"192.168.97.5", "192.168.97.1"} <= srcs  # out as itself, back in masqueraded
