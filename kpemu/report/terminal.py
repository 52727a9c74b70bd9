"""The terminal summary (rich) of a run's hops.json (kpemu.report.runreport): hop tables, outcomes, oracle
and hook walk, each failed check with its diff."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kpemu.report.runreport import RunReport, representative
from kpemu.report.table import HEADERS, hop_rows, verdict_lines, verdict_row


def print_summary(console: Console, report: RunReport, out_dir: str, title: str | None = None) -> None:
    """Print per flow the hop table, oracle and hook walk, then PASS/FAIL and diffs; each line is headed by
    `title` (default: the scenario's name)."""
    scenario = title or report["scenario"]
    checks = report["checks"]
    for fj in report["flows"]:
        rep = representative(fj)
        outcomes = [c["outcome"] for c in fj["connections"]]
        backends = sorted({c["backend"] for c in fj["connections"] if c["backend"]})
        heading = (f"{scenario} / {fj['name']}: {fj['from']} -> {fj['to']} ({fj['protocol']}), "
                   + ", ".join(f"{o} x{outcomes.count(o)}" for o in sorted(set(outcomes)))
                   + (f", backends {', '.join(backends)}" if backends else ""))
        table = Table(title=escape(heading), title_justify="left", show_lines=False)
        for h in HEADERS:
            table.add_column(h, overflow="fold")
        for row in hop_rows(rep["hops"] if rep else []):
            table.add_row(*(escape(c) for c in row))  # captured text is data, not rich markup
        verdict = fj.get("verdict")
        if verdict:
            table.add_row(*(escape(c) for c in verdict_row(verdict)), style="red")
        console.print(table)
        for line in verdict_lines(verdict) if verdict else []:
            console.print(f"  [red]{escape(line)}[/red]", highlight=False)
        for e in (rep["conntrack"] if rep else []):
            console.print(f"  conntrack {e['node']}: {e['line']}", highlight=False)
        for e in (rep["ipvs"] if rep else []):
            console.print(f"  ipvs {e['node']}: {e['line']}", highlight=False)
        for node, h in (fj.get("hooks") or {}).items():
            console.print(f"  hooks {node}: {h.get('text')}", highlight=False, markup=False)
        if fj.get("hook_claim"):
            s = fj["hook_claim"]
            console.print(f"  claim \"{s['sentence']}\": {'holds' if s['right'] else 'does not hold'} on "
                          f"{s['node']}, observed {s['observed']}", highlight=False, markup=False)
        oracle = fj.get("oracle") or {}
        if oracle:
            color = {True: "green", False: "red", None: "yellow"}[oracle.get("agree")]
            console.print(f"  [{color}]oracle[/{color}]: ", end="", highlight=False)
            console.print(str(oracle.get("text")), highlight=False, markup=False)
    failed = [c for c in checks if not c["ok"]]
    for c in failed:
        console.print(f"[red]FAIL[/red] {c['flow']}: {c['what']}", highlight=False)
        if c["diff"]:
            console.print(c["diff"], highlight=False, markup=False)
        else:
            console.print(f"  expected: {c['expected']}\n  seen:     {c['seen']}", highlight=False, markup=False)
    verdict = "[green]PASS[/green]" if not failed else "[red]FAIL[/red]"
    console.print(f"{verdict} {scenario}: {len(checks) - len(failed)}/{len(checks)} checks in {report['seconds']:.2f}s "
                  f"-> {out_dir}", highlight=False)
