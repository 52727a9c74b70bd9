"""Issue 13's done-when on this kernel: `kpemu import` of a kubectl List (3 nodes, 6 pods, 4
Services) gives a topology that `kpemu run` uses as is, and its flows pass (scenario k8s-import
with the freshly imported topology in place of the committed one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kpemu.kernel.netns import list_netns
from tests.helpers import SCENARIOS, kpemu, needs_root

pytestmark = [needs_root, pytest.mark.root]


def test_imported_kubectl_list_runs_as_is(tmp_path: Path) -> None:
    topo = tmp_path / "cluster-topology.yaml"
    imp = kpemu("import", "tests/data/k8s/cluster.yaml", "--out", str(topo), timeout=60)
    assert imp.returncode == 0, imp.stderr
    scenario = yaml.safe_load((SCENARIOS / "k8s-import.yaml").read_text())
    scenario["topology"] = str(topo)
    sc = tmp_path / "k8s-import.yaml"
    sc.write_text(yaml.safe_dump(scenario, sort_keys=False))
    res = kpemu("run", str(sc), "--runtime", "host", "--out", str(tmp_path / "out"), "--json", timeout=180)
    assert res.returncode == 0, res.stderr[-4000:]
    assert not list_netns("kp-k8s-import-"), "the lab was not destroyed"
    data = json.loads(res.stdout)
    flows = {f["name"]: f for f in data["flows"]}
    assert data["ok"] and set(flows) == {"external-to-web-nodeport", "web-to-api-clusterip", "api-to-dns-tcp"}
    assert flows["external-to-web-nodeport"]["backends"] == ["web-7d9c8f6b5-q2xkz", "web-7d9c8f6b5-w8mnb"]
    assert len(flows["web-to-api-clusterip"]["backends"]) == 1  # sessionAffinity ClientIP: one pod for all four
