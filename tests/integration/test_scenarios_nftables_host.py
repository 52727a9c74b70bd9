"""The nftables-mode scenarios end to end on this kernel through the real CLI: every expectation
holds and the nft oracle agrees with the kernel's `nft monitor trace` on every checked packet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kpemu.kernel.netns import list_netns
from tests.helpers import kpemu, needs_root

pytestmark = [needs_root, pytest.mark.root]


def _run(name: str, out: Path) -> dict:
    res = kpemu("run", f"scenarios/{name}.yaml", "--runtime", "host", "--out", str(out), "--json", timeout=180)
    assert res.returncode == 0, res.stderr[-4000:]
    assert not [n for n in list_netns("kp-") if n.startswith(("kp-nft-cip-", "kp-nft-np-", "kp-nft-lb-", "kp-nft-hp-"))]
    assert (out / "rules" / "node1.nft").read_text().startswith("table ip kube-proxy {\n")
    return json.loads(res.stdout)


def _oracle(data: dict) -> dict[str, dict]:
    return {f["name"]: f["oracle"] for f in data["flows"]}


def test_clusterip_across_vxlan(tmp_path: Path) -> None:
    o = _oracle(_run("nft-clusterip-vxlan", tmp_path))["pod-to-clusterip"]
    assert o["agree"] is True and o["checked"] >= 16 and o["nodes"] == ["node1", "node2"]


def test_nodeport_local_affinity_and_reject(tmp_path: Path) -> None:
    data = _run("nft-nodeport", tmp_path)
    for name, o in _oracle(data).items():
        assert o["agree"] is True and o["checked"] >= 1, (name, o)
    sticky = next(f for f in data["flows"] if f["name"] == "sticky-clusterip")
    assert len({c["backend"] for c in sticky["connections"]}) == 1  # ClientIP affinity: one backend


def test_loadbalancer_source_ranges(tmp_path: Path) -> None:
    data = _run("nft-loadbalancer", tmp_path)
    assert all(o["agree"] is True for o in _oracle(data).values())
    blocked = next(f for f in data["flows"] if f["name"] == "blocked-source")
    assert {c["outcome"] for c in blocked["connections"]} == {"dropped"}


def test_hairpin_and_inline_masquerade_at_1_36(tmp_path: Path) -> None:
    """1.36: web-0 reaching its own ClusterIP is masqueraded by masquerading's @hairpin-connections rule
    (the model walks the same rules as the kernel's trace); NodePort traffic marked inline."""
    data = _run("nft-hairpin", tmp_path)
    for name, o in _oracle(data).items():
        assert o["agree"] is True and o["checked"] >= 1, (name, o)
    rules = (tmp_path / "rules" / "node1.nft").read_text()
    assert "mark-for-masquerade" not in rules and "\tset hairpin-connections {\n" in rules
