"""Issue 5 in IPVS mode (seed 000): the ledger of `nodeport-ipvs` names KUBE-NODE-PORT, KUBE-MARK-MASQ,
the IPVS real server and MASQUERADE, and the model oracle agrees with the kernel. Needs ip_vs, ipip
and dummy: inside the guest kernel on this host (tests/vm/conftest.py boots it once)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.vm


def test_nodeport_ipvs_is_explained_and_the_oracle_agrees(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "kpemu.cli", "run", "scenarios/nodeport-ipvs.yaml", "--runtime",
                          "host", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads((tmp_path / "hops.json").read_text())
    f = data["flows"][0]
    assert data["mode"] == "ipvs" and f["trace"]["available"], f["trace"]
    by = [b for c in f["connections"] for h in c["hops"] for ch in h["changed_by"] for b in ch["by"]]
    dnat = [ch for h in f["hops"] for ch in h["changed_by"] if ch["kind"] == "DNAT"]
    assert dnat and dnat[0]["node"] == "node1" and "IPVS rr -> 192.168.97.10:80" in dnat[0]["by"], dnat
    snat = [ch for h in f["hops"] for ch in h["changed_by"] if ch["kind"] == "SNAT"]
    assert snat and any(b.startswith("MASQUERADE in KUBE-POSTROUTING") for b in snat[0]["by"]), snat
    assert "KUBE-NODE-PORT" in f["chains"]["node1"] and "KUBE-MARK-MASQ" in f["chains"]["node1"], f["chains"]
    assert any(b.startswith("KUBE-MARK-MASQ from ") for b in by), by  # the trace attributes the mark
    assert f["oracle"]["agree"] is True and f["oracle"]["checked"] >= 1, f["oracle"]
    hooks = f["hooks"]["node1"]["text"]
    assert hooks.startswith("PREROUTING") and "INPUT" in hooks, hooks  # IPVS acts at LOCAL_IN
    md = (tmp_path / "report.md").read_text()
    assert "IPVS rr -> 192.168.97.10:80" in md and "KUBE-NODE-PORT" in md and "Model oracle vs kernel: **agree**" in md
    assert (tmp_path / "report.html").is_file()
