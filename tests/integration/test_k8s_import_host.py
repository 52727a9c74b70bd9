"""Issue 13's done-when on this kernel: `kpemu import` of a kubectl List (3 nodes, 6 pods, 4
Services) gives a topology that `kpemu run` uses as is, and its flows pass (scenario k8s-import
with the freshly imported topology in place of the committed one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kpemu.kernel.netns import list_netns
from tests.conftest import ROOT, SCENARIOS

KPEMU = [sys.executable, "-m", "kpemu.cli"]
pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")]


def test_imported_kubectl_list_runs_as_is(tmp_path: Path) -> None:
    topo = tmp_path / "cluster-topology.yaml"
    imp = subprocess.run([*KPEMU, "import", "tests/data/k8s/cluster.yaml", "--out", str(topo)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert imp.returncode == 0, imp.stderr
    scenario = yaml.safe_load((SCENARIOS / "k8s-import.yaml").read_text())
    scenario["topology"] = str(topo)
    sc = tmp_path / "k8s-import.yaml"
    sc.write_text(yaml.safe_dump(scenario, sort_keys=False))
    res = subprocess.run([*KPEMU, "run", str(sc), "--runtime", "host", "--out", str(tmp_path / "out"), "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-4000:]
    assert not list_netns("kp-k8s-import-"), "the lab was not destroyed"
    data = json.loads(res.stdout)
    flows = {f["name"]: f for f in data["flows"]}
    assert data["ok"] and set(flows) == {"external-to-web-nodeport", "web-to-api-clusterip", "api-to-dns-tcp"}
    assert flows["external-to-web-nodeport"]["backends"] == ["web-7d9c8f6b5-q2xkz", "web-7d9c8f6b5-w8mnb"]
    assert len(flows["web-to-api-clusterip"]["backends"]) == 1  # sessionAffinity ClientIP: one pod for all four
