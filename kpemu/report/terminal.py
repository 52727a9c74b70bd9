"""The terminal summary (rich) of a run's hops.json (kpemu.report.runreport): hop tables, outcomes, oracle
and hook walk, each failed check with its diff."""

from __future__ import annotations

import textwrap

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kpemu.report.runreport import RunReport, representative
from kpemu.report.table import HEADERS, hop_rows, opened_line, verdict_lines, verdict_row


def word_widths(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[int]:
    """Per column, the narrowest it can be without splitting a word of a cell or its header (which rich
    does not wrap)."""
    return [max([len(h), *(len(w) for row in rows for w in row[i].split())]) for i, h in enumerate(headers)]


def hop_lines(rows: list[tuple[str, ...]], died: list[tuple[str, ...]], width: int) -> list[str]:
    """The hop table for a terminal too narrow for its columns: a line per hop (number, where, src > dst),
    and under it, indented, what changed and by what; words are never split (a word longer than the
    line runs past it, as the terminal then wraps it whole)."""
    out: list[str] = []
    for num, where, src, dst, what, by in rows:
        out += textwrap.wrap(f"{num:>3} {where}  {src} > {dst}", width, subsequent_indent="      ",
                             break_long_words=False, break_on_hyphens=False)
        for label, text in (("changed:", what), ("by:", by)):
            if text:
                out += textwrap.wrap(f"{label} {text}", width, initial_indent="      ", subsequent_indent="        ",
                                     break_long_words=False, break_on_hyphens=False)
    for mark, where, _, _, what, text in died:
        out += textwrap.wrap(f"{mark:>3} {where}  {what}: {text}", width, subsequent_indent="      ",
                             break_long_words=False, break_on_hyphens=False)
    return out


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
        rows = hop_rows(rep["hops"] if rep else [])
        verdict = fj.get("verdict")
        died = [verdict_row(verdict)] if verdict else []
        words = word_widths(HEADERS, [*rows, *died])
        if console.width >= sum(words) + 3 * len(words) + 1:  # rich's borders and padding: 3 a column, and 1
            table = Table(title=escape(heading), title_justify="left", show_lines=False)
            for h, w in zip(HEADERS, words, strict=True):
                table.add_column(h, overflow="fold", min_width=w)
            for row in rows:
                table.add_row(*(escape(c) for c in row))  # captured text is data, not rich markup
            for row in died:
                table.add_row(*(escape(c) for c in row), style="red")
            console.print(table)
        else:
            for line in [*textwrap.wrap(heading, console.width, break_long_words=False, break_on_hyphens=False),
                         *hop_lines(rows, died, console.width)]:
                console.print(line, highlight=False, markup=False, overflow="ignore", crop=False)
        for line in verdict_lines(verdict) if verdict else []:
            console.print(f"  [red]{escape(line)}[/red]", highlight=False)
        if rep and opened_line(rep):
            console.print(f"  {escape(str(opened_line(rep)))}", highlight=False)
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
            console.print(Text.assemble("  ", ("oracle", color), ": ", str(oracle.get("text"))), highlight=False)
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
