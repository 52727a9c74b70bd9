"""A run's reports, written into its folder: run.pcapng, hops.json, report.md and report.html."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kpemu.analyse.pipeline import Analysis, hops_document
from kpemu.model.scenario import Scenario
from kpemu.report.html import render_html
from kpemu.report.markdown import render_markdown
from kpemu.report.pcapng import write_run_pcapngs


def write_reports(out: Path, sc: Scenario, a: Analysis, runtime: str, reason: str, kernel: str,
                  seconds: float, trace: bool) -> dict[str, Any]:
    """Write run.pcapng (and one pcapng per flow, which numbers every hop's frames), then hops.json,
    report.md and report.html into `out`; the hops.json document."""
    write_run_pcapngs(out, a.infos, a.files, a.ledgers, a.packets)
    hops = hops_document(sc, a, runtime, reason, kernel)
    hops["seconds"] = round(seconds, 3)
    hops["trace"] = trace
    (out / "hops.json").write_text(json.dumps(hops, indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(hops))
    (out / "report.html").write_text(render_html(hops, sc.topology, a.details, files=run_files(out)))
    return hops


def run_files(out: Path) -> list[str]:
    """The files of a run directory the report links to, relative to it."""
    subs = sorted(str(p.relative_to(out)) for d in ("pcaps", "capture", "rules", "trace")
                  for p in (out / d).glob("*") if p.is_file())
    top = [f for f in ("run.pcapng", "hops.json", "report.md") if (out / f).is_file()]
    return top + subs
