"""report.html in headless Chromium (Debian's `chromium`, or Google Chrome where that is what is
installed), no network: no console errors, the rendered DOM holds what report.md has, and for every
shipped scenario no text is clipped, cut or spills out of its box (clip_check.js, evaluated in the
page). A screenshot of each is kept in runs/report-html/<scenario>/report.png.

Each flow opens with its path on the topology picture (path_check.js measures it in the page): request
and reply arrows, every NAT label inside the box of the member that made it, the red cross nearest the
member of the capture point the verdict names, on that point's lane in the sequence diagram, and the
diagram no wider than its box (no sideways scrolling in the 1,240 px page). The pictures are kept as
runs/report-html/<scenario>/pictures/path-FLOW.svg, and as PNG (drawn by headless Chromium, as
`kpemu runs picture` draws them) for the first flow and every flow that died.

The reports are rendered from tests/data/reports/<scenario>.json.gz: real runs' hops.json (each flow
trimmed to its first three connections; `python scripts/report_fixture.py runs/<name>` writes one).
The IPVS scenarios' are guest runs'. nodeport-ipvs-docker's is nodeport-iptables-docker's run under its
name: it needs native IPVS and docker together, which the development machine lacks.
"""

from __future__ import annotations

import gzip
import html
import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from kpemu.inputs.scenario import load_scenario
from kpemu.inputs.topology import load_topology
from kpemu.report.html import picture_file, render_html
from kpemu.report.mermaid import dying_index, hop_point
from kpemu.report.png import find_browser, render_png
from kpemu.report.write import write_pictures
from tests.helpers import ROOT, SCENARIOS, TOPOLOGIES
from tests.unit.test_mermaid import FLOW

BROWSER = find_browser()
pytestmark = pytest.mark.skipif(BROWSER is None, reason="neither chromium nor Google Chrome is installed "
                                                        "(scripts/setup.sh installs chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--window-size=1280,2000", "--hide-scrollbars"]
CHECK = (Path(__file__).parent / "clip_check.js").read_text()
PATH_CHECK = (Path(__file__).parent / "path_check.js").read_text()
DATA = ROOT / "tests" / "data" / "reports"
SHIPPED = sorted(p.stem for p in SCENARIOS.glob("*.yaml"))


def _browser(args: list[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="kpemu-chromium-") as profile:
        return subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=120)


def _render(page: Path) -> tuple[list[str], str]:
    """Render `page` with clip_check.js and path_check.js added, keep its screenshot beside it as
    report.png; (the problems clip_check.js found, the dumped DOM)."""
    checked = page.with_name("clip-check.html")
    checked.write_text(page.read_text().replace("</body>", f"<script>{CHECK}</script><script>{PATH_CHECK}</script>"
                                                           "</body>"))
    shot = page.with_name("report.png")
    res = _browser([f"--screenshot={shot}", "--dump-dom", checked.resolve().as_uri()])
    checked.unlink()
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.stat().st_size > 10_000, res.stderr[-2000:]
    assert "Uncaught" not in res.stderr and "CONSOLE" not in res.stderr, res.stderr[-2000:]
    found = re.findall(r'<pre id="clip-check">(.*?)</pre>', res.stdout, re.S)
    assert found, "clip_check.js did not run: " + res.stderr[-2000:]
    return json.loads(html.unescape(found[-1])), res.stdout


def _drawn(dom: str) -> dict[str, dict]:
    """What path_check.js measured, per flow."""
    found = re.findall(r'<pre id="path-check">(.*?)</pre>', dom, re.S)
    assert found, "path_check.js did not run"
    return json.loads(html.unescape(found[-1]))


def _check_paths(hops: dict, dom: str) -> None:
    """Every flow seen opens with its path on the picture; its cross and NAT labels are where they belong
    and its sequence diagram fits its box."""
    drawn = _drawn(dom)
    for f in hops["flows"]:
        d = drawn[f["name"]]
        if not f.get("hops"):
            assert not d["picture"], f["name"]
            continue
        assert d["picture"] and d["picture_before_table"], (f["name"], d)
        assert d["sightings"] >= 1 and d["scale"] >= 0.8, (f["name"], d)
        if any(h["direction"] == "request" for h in f["hops"]) and len({hop_point(h) for h in f["hops"]}) > 1:
            assert d["request"] >= 1, (f["name"], d)
        if sum(h["direction"] == "reply" for h in f["hops"]) > 1:
            assert d["reply"] >= 1, (f["name"], d)
        for label in d["nat"]:
            assert label["inside"], (f["name"], label)
        makers = {c.get("node") or h.get("node") or h["member"] for h in f["hops"] for c in h["changed_by"]
                  if c["field"] != "outer"}  # the member each NAT change is labelled at
        assert {n["member"] for n in d["nat"]} == makers, (f["name"], d["nat"])
        assert d["diagram"]["scrollWidth"] <= d["diagram"]["clientWidth"], (f["name"], d["diagram"])
        assert d["diagram"]["width"] <= d["diagram"]["clientWidth"], (f["name"], d["diagram"])
        i = dying_index(f)
        if i is None:
            assert "cross" not in d and "seq_cross" not in d, (f["name"], d)
            continue
        point = (f["verdict"] or {}).get("point") or hop_point(f["hops"][i])
        assert d["cross"] == {"point": point, "nearest": point.split("/")[0]}, (f["name"], d)
        assert d["seq_cross"] == {"point": point, "lane": point}, (f["name"], d)


def _keep_pictures(run: Path, hops: dict, topo) -> None:
    """The path pictures as SVG in `run`, and as PNG for the first flow and every flow that died."""
    written = write_pictures(run, hops, topo)
    assert [p.name for p in written] == [f"path-{f['name']}.svg" for f in hops["flows"] if f.get("hops")]
    for f in [f for f in hops["flows"] if f.get("hops")][:1] + [f for f in hops["flows"][1:] if f.get("verdict")]:
        png = render_png(run / picture_file(f["name"], "svg"), run / picture_file(f["name"], "png"), BROWSER)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000


def test_report_html_renders_with_hop_table_and_diagram() -> None:
    run = ROOT / "runs" / "report-html" / "synthetic"
    run.mkdir(parents=True, exist_ok=True)
    hops = {"scenario": "report-html", "runtime": "host", "kernel": "test", "ok": True,
            "flows": [dict(FLOW, ok=True, backends=["web-1"])], "checks": []}
    page = run / "report.html"
    page.write_text(render_html(hops, load_topology(TOPOLOGIES / "flannel-vxlan.yaml"),
                                {"np": {1: {"rules": ["nat -A KUBE-SEP-THCUGE4PYEGQIHCR ... -j DNAT"]}}}))
    problems, dom = _render(page)
    assert problems == []
    assert '<table class="hops">' in dom and dom.count("<tr>") >= 4
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="sequence"' in dom
    assert dom.count('class="msg"') == 3 and 'class="note"' in dom
    assert 'class="topology"' in dom and "mermaid-source" in dom
    assert "DNAT by KUBE-SEP-THCUGE4PYEGQIHCR" in dom and "<details>" in dom
    _check_paths(hops, dom)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenario_report_has_no_clipped_text(name: str) -> None:
    data = DATA / f"{name}.json.gz"
    assert data.is_file(), f"no saved run of {name}: python scripts/report_fixture.py runs/{name}"
    hops = json.loads(gzip.decompress(data.read_bytes()))
    run = ROOT / "runs" / "report-html" / name
    run.mkdir(parents=True, exist_ok=True)
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    files = ["run.pcapng", "hops.json", "report.md", *(f"pcaps/flow-{f['name']}.pcapng" for f in hops["flows"])]
    page = run / "report.html"
    page.write_text(render_html(hops, sc.topology, files=files))
    problems, dom = _render(page)
    assert problems == [], "\n".join(problems)
    # everything report.md has, and the way into Wireshark
    for f in hops["flows"]:
        assert f'id="flow-{f["name"]}"' in dom and f'href="#flow-{f["name"]}"' in dom
        if f.get("hooks"):
            assert "hook walk" in dom and f["hooks"][next(iter(f["hooks"]))]["text"].split(" ")[0] in dom
        if f.get("oracle"):
            assert "Model oracle vs kernel" in dom
        if any(r["rule"].find("KUBE-") >= 0 for rows in (f.get("counters") or {}).values() for r in rows):
            assert "Rule counters that moved" in dom
        if f.get("ipvs_decisions"):
            assert "IPVS decisions on" in dom
        if any(c["hops"] for c in f["connections"]):
            assert f"[{f['name']}#" in dom and "-d udp.port==8472,vxlan" in dom
    assert '<a href="run.pcapng">' in dom and 'href="#expectations"' in dom
    members = {m.name for m in (*sc.topology.nodes, *sc.topology.pods, *sc.topology.externals)} | {"underlay"}
    strangers = sorted({str(h["member"]) for f in hops["flows"] for h in f.get("hops") or []} - members)
    if strangers:  # the picture draws the scenario's topology: a fixture of another one cannot be placed on it
        pytest.skip(f"{name}'s report fixture was recorded with members its topology no longer has "
                    f"({', '.join(strangers)}): path picture not checked; rerun the scenario where it runs "
                    f"and `python scripts/report_fixture.py runs/{name}`")
    _check_paths(hops, dom)
    _keep_pictures(run, hops, sc.topology)
