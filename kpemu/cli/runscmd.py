"""`runs`: past runs (name, date, PASS/FAIL, duration, path) and `runs open NAME` (its report)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kpemu.cli.base import Parser, add_command, add_output, emit, human_console


def cmd_runs_list(args: argparse.Namespace) -> int:
    from kpemu.report.runs import list_runs

    runs = list_runs(Path(args.dir))

    def table(rs: list[dict[str, Any]]) -> None:
        from rich.table import Table

        if not rs:
            print(f"no runs under {args.dir} (kpemu run writes them there)")
            return
        t = Table(title=f"runs under {args.dir}")
        for col in ("name", "date", "result", "seconds", "runtime", "path"):
            t.add_column(col, overflow="fold")
        for r in rs:
            colour = "green" if r["result"] == "PASS" else "red"
            secs = f"{r['seconds']:.1f}" if isinstance(r["seconds"], int | float) else ""
            t.add_row(r["name"], r["date"], f"[{colour}]{r['result']}[/]", secs, r["runtime"] or "", r["path"])
        human_console().print(t)

    emit(args, runs, table)
    return 0


def cmd_runs_open(args: argparse.Namespace) -> int:
    from kpemu.report.runs import find_run

    run = find_run(Path(args.dir), args.name)
    if args.html:
        print((run / "report.html").resolve())
    else:
        print((run / "report.md").read_text(), end="")
    return 0


def cmd_runs_summary(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kpemu.report.summary import runs_summary

    print(runs_summary(Path(args.dir)), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = add_command(sub, "runs", "past runs: name, date, PASS/FAIL, duration, path (from RUNS/*/hops.json)",
                    ["kpemu runs", "kpemu runs -o json | jq -r '.[] | select(.result==\"FAIL\") | .name'",
                     "kpemu runs open nodeport-iptables", "xdg-open \"$(kpemu runs open nodeport-iptables --html)\""])
    s.add_argument("--dir", default="runs", help="where the runs are (default runs)")
    add_output(s)
    s.set_defaults(func=cmd_runs_list)
    rsub = s.add_subparsers(dest="runs_command", parser_class=Parser)
    o = add_command(rsub, "list", "list the runs (the default)", ["kpemu runs list --dir /tmp/runs"])
    o.add_argument("--dir", default=argparse.SUPPRESS, help="where the runs are (default runs)")
    add_output(o)
    o.set_defaults(func=cmd_runs_list)
    o = add_command(rsub, "open", "print a run's report.md (or the path of its report.html)",
                    ["kpemu runs open nodeport-iptables", "kpemu runs open compare/ipvs --html"])
    o.add_argument("name", metavar="NAME", help="the run's name as kpemu runs lists it, or its directory")
    o.add_argument("--dir", default=argparse.SUPPRESS, help="where the runs are (default runs)")
    o.add_argument("--html", action="store_true", help="print the path of report.html instead")
    o.set_defaults(func=cmd_runs_open)
    o = add_command(rsub, "summary", "every run as Markdown: PASS/FAIL, where it ran, each flow's hop table",
                    ["kpemu runs summary >> \"$GITHUB_STEP_SUMMARY\"", "kpemu runs summary --dir /tmp/runs"])
    o.add_argument("--dir", default=argparse.SUPPRESS, help="where the runs are (default runs)")
    o.set_defaults(func=cmd_runs_summary)
