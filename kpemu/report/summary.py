"""A run directory tree as a short Markdown summary (pure): per scenario PASS/FAIL, where it ran, and
each flow's first hop table, taken from the report.md each run wrote (`kpemu runs summary`: what CI
writes to a GitHub job summary)."""

from __future__ import annotations

import json
from pathlib import Path


def _hop_tables(report: str) -> list[str]:
    """Each flow's heading and its first table, from a report.md."""
    out: list[str] = []
    lines = report.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("## flow "):
            out.append("#" + lines[i])
            while i < len(lines) and not lines[i].startswith("|"):
                i += 1
            while i < len(lines) and lines[i].startswith("|"):
                out.append(lines[i])
                i += 1
            out.append("")
        i += 1
    return out


def runs_summary(root: Path) -> str:
    """Markdown for every run under `root` (each directory holding a hops.json), sorted by name."""
    out = [f"# kpemu runs under {root}", ""]
    runs = sorted(p.parent for p in root.rglob("hops.json"))
    if not runs:
        return "\n".join([*out, "no run left a hops.json", ""])
    rows = ["| scenario | result | checks | runtime | seconds |", "| --- | --- | --- | --- | --- |"]
    for d in runs:
        hops = json.loads((d / "hops.json").read_text())
        checks = hops.get("checks") or []
        ok = sum(1 for c in checks if c.get("ok"))
        rows.append(f"| {hops.get('scenario')} | {'PASS' if hops.get('ok') else '**FAIL**'} | {ok}/{len(checks)} | "
                    f"{hops.get('runtime')} | {hops.get('seconds')} |")
    out += [*rows, ""]
    for d in runs:
        report = d / "report.md"
        if report.is_file():
            out += [f"## {d.relative_to(root) if d != root else d.name}", "", *_hop_tables(report.read_text())]
    return "\n".join(out) + "\n"

