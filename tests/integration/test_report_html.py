"""report.html opens in headless Chromium (Debian's `chromium`, no network) without console
errors, and the rendered DOM holds the hop table and the sequence diagram. The screenshot is
kept in the run directory (runs/report-html/report.png)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile

import pytest

from kpemu.model import load_topology
from kpemu.report.html import render_html
from tests.conftest import ROOT, TOPOLOGIES
from tests.unit.test_mermaid import FLOW

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup.sh installs it)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


def _chromium(args: list[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="kpemu-chromium-") as profile:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=120)


def test_report_html_renders_with_hop_table_and_diagram() -> None:
    run = ROOT / "runs" / "report-html"
    run.mkdir(parents=True, exist_ok=True)
    hops = {"scenario": "report-html", "runtime": "host", "kernel": "test", "ok": True,
            "flows": [dict(FLOW, ok=True, backends=["web-1"])], "checks": []}
    (run / "hops.json").write_text(json.dumps(hops))
    page = run / "report.html"
    page.write_text(render_html(hops, load_topology(TOPOLOGIES / "flannel-vxlan.yaml"),
                                {"np": {1: {"rules": ["nat -A KUBE-SEP-THCUGE4PYEGQIHCR ... -j DNAT"]}}}))
    url = page.resolve().as_uri()
    shot = _chromium([f"--screenshot={run / 'report.png'}", "--window-size=1280,2000", url])
    assert (run / "report.png").stat().st_size > 10_000, shot.stderr[-2000:]
    dom = _chromium(["--dump-dom", url])
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert '<table class="hops">' in html and html.count("<tr>") >= 4
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="sequence"' in html
    assert html.count('class="msg"') == 3 and 'class="note"' in html
    assert 'class="topology"' in html and "mermaid-source" in html
    assert "DNAT by KUBE-SEP-THCUGE4PYEGQIHCR" in html and "<details>" in html
    for out in (shot.stderr, dom.stderr):
        assert "CONSOLE" not in out and "Uncaught" not in out, out[-2000:]
