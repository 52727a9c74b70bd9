"""The terminal summary (rich): hop tables, outcomes, and each failed check with its diff."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kpemu.analyse.expect import Check
from kpemu.analyse.ledger import FlowLedger
from kpemu.report.table import HEADERS, hop_rows


def print_summary(console: Console, scenario: str, ledgers: list[FlowLedger], checks: list[Check],
                  seconds: float, out_dir: str) -> None:
    """Print per flow the hop table, then PASS/FAIL and the diff of every failed check."""
    for fl in ledgers:
        rep = fl.representative
        outcomes = [c.outcome for c in fl.connections]
        backends = sorted({c.backend for c in fl.connections if c.backend})
        title = (f"{scenario} / {fl.name}: {fl.src_member} -> {fl.dst} ({fl.protocol}), "
                 + ", ".join(f"{o} x{outcomes.count(o)}" for o in sorted(set(outcomes)))
                 + (f", backends {', '.join(backends)}" if backends else ""))
        table = Table(title=title, title_justify="left", show_lines=False)
        for h in HEADERS:
            table.add_column(h, overflow="fold")
        for row in hop_rows(rep.hops if rep else []):
            table.add_row(*row)
        console.print(table)
        for e in (rep.conntrack if rep else []):
            console.print(f"  conntrack {e['node']}: {e['line']}", highlight=False)
        for e in (rep.ipvs if rep else []):
            console.print(f"  ipvs {e['node']}: {e['line']}", highlight=False)
    failed = [c for c in checks if not c.ok]
    for c in failed:
        console.print(f"[red]FAIL[/red] {c.flow}: {c.what}", highlight=False)
        if c.diff:
            console.print(c.diff, highlight=False, markup=False)
        else:
            console.print(f"  expected: {c.expected}\n  seen:     {c.seen}", highlight=False, markup=False)
    verdict = "[green]PASS[/green]" if not failed else "[red]FAIL[/red]"
    console.print(f"{verdict} {scenario}: {len(checks) - len(failed)}/{len(checks)} checks in {seconds:.2f}s "
                  f"-> {out_dir}", highlight=False)
