"""A run's reports, written into its folder: run.pcapng, hops.json, report.md, report.html and each
flow's path picture (pictures/path-FLOW.svg; `kpemu runs picture` adds the PNGs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from kpemu.analyse.pipeline import Analysis, hops_document
from kpemu.model.scenario import Scenario
from kpemu.model.topology import Topology
from kpemu.report.html import PICTURES, picture_file, render_html
from kpemu.report.markdown import render_markdown
from kpemu.report.pcapng import write_run_pcapngs
from kpemu.report.picture import path_picture
from kpemu.report.runreport import RunReport


def write_reports(out: Path, sc: Scenario, a: Analysis, runtime: str, reason: str, kernel: str,
                  seconds: float, trace: bool, kube_proxy: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write run.pcapng (and one pcapng per flow, which numbers every hop's frames), then hops.json,
    report.md and report.html into `out`; the hops.json document. `kube_proxy`: the real kube-proxy's
    run (version, build, sync, model versus real), when it programmed the nodes."""
    write_run_pcapngs(out, a.infos, a.files, a.ledgers, a.packets)
    hops = hops_document(sc, a, runtime, reason, kernel)
    hops["seconds"] = round(seconds, 3)
    hops["trace"] = trace
    if kube_proxy is not None:
        hops["kubeProxy"] = kube_proxy
    (out / "hops.json").write_text(json.dumps(hops, indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(hops))
    write_pictures(out, hops, sc.topology)
    (out / "report.html").write_text(render_html(hops, sc.topology, a.details, files=run_files(out)))
    return hops


def write_pictures(out: Path, hops: RunReport, topo: Topology) -> list[Path]:
    """Each flow's path on the topology picture as pictures/path-FLOW.svg (a flow never seen has none);
    the pictures of an earlier run in `out` go first. The files written."""
    pics = out / PICTURES
    shutil.rmtree(pics, ignore_errors=True)
    written = []
    for f in hops["flows"]:
        if f.get("hops"):
            path = out / picture_file(f["name"], "svg")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(path_picture(topo, f))
            written.append(path)
    return written


def run_files(out: Path) -> list[str]:
    """The files of a run directory the report links to, relative to it."""
    subs = sorted(str(p.relative_to(out)) for d in ("pcaps", "capture", "rules", "trace", PICTURES)
                  for p in (out / d).glob("*") if p.is_file())
    top = [f for f in ("run.pcapng", "hops.json", "report.md") if (out / f).is_file()]
    return top + subs
