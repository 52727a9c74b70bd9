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


def _pin_table(base: Path, run: str, flow: str | None) -> tuple[str, str, str]:
    """(the run's name as runs lists it, the flow's name, its stable Markdown hop table)."""
    import json

    from kpemu.report.pin import find_flow, flow_markdown
    from kpemu.report.runs import find_run

    d = find_run(base, run)
    report = json.loads((d / "hops.json").read_text())
    f = find_flow(report, flow)
    return run, f["name"], flow_markdown(report, f)


def _backends(base: Path, run: str, flow: str) -> list[str]:
    import json

    from kpemu.report.pin import find_flow
    from kpemu.report.runs import find_run

    f = find_flow(json.loads((find_run(base, run) / "hops.json").read_text()), flow)
    return sorted({c["backend"] for c in f["connections"] if c.get("backend")})


def cmd_runs_show(args: argparse.Namespace) -> int:
    """One flow's hop table: Markdown to pin in a document (`--write DOC` puts it there), or the flow's JSON."""
    import json

    from kpemu.report.pin import find_flow, write_block
    from kpemu.report.runs import find_run

    if args.output == "json":
        report = json.loads((find_run(Path(args.dir), args.name) / "hops.json").read_text())
        print(json.dumps(find_flow(report, args.flow), indent=2))
        return 0
    run, flow, table = _pin_table(Path(args.dir), args.name, args.flow)
    if args.write:
        doc = Path(args.write)
        before = doc.read_text() if doc.exists() else ""
        doc.write_text(write_block(before, run, flow, table))
        print(f"pinned {run} / {flow} in {doc} (kpemu runs check {doc} compares it with a later run)")
        backends = _backends(Path(args.dir), run, flow)
        if len(backends) > 1:
            print(f"note: this flow reached {len(backends)} backends ({', '.join(backends)}) and the table shows "
                  "one of them, chosen at random per run; pin a flow with one endpoint (or session affinity) "
                  "for a table that stays the same")
    else:
        print(table, end="")
    return 0


def cmd_runs_picture(args: argparse.Namespace) -> int:
    """Each flow's path picture of a run (pictures/path-FLOW.svg) drawn as PNG beside it, by headless Chromium."""
    import json

    from kpemu.errors import InputError
    from kpemu.report.html import picture_file
    from kpemu.report.pin import find_flow
    from kpemu.report.png import find_browser, render_png
    from kpemu.report.runs import find_run

    run = find_run(Path(args.dir), args.name)
    report = json.loads((run / "hops.json").read_text())
    flows = [find_flow(report, args.flow)] if args.flow else [f for f in report["flows"] if f.get("hops")]
    browser = find_browser()
    for f in flows:
        svg = run / picture_file(f["name"], "svg")
        if not svg.is_file():
            raise InputError(f"kpemu runs picture: {svg} does not exist (a run written by this kpemu has one per "
                             f"flow that was seen; run the scenario again)")
        png = render_png(svg, run / picture_file(f["name"], "png"), browser)
        print(f"{png} (drawn by {browser} from {svg.name})")
    return 0


def cmd_runs_check(args: argparse.Namespace) -> int:
    """Every hop table pinned in the documents against the runs under --dir; exit 1 with a diff on change."""
    from kpemu.errors import InputError
    from kpemu.report.pin import check_block, pinned_keys

    changed = 0
    for name in args.docs:
        doc = Path(name)
        if not doc.is_file():
            raise InputError(f"kpemu runs check: {name}: no such file")
        text = doc.read_text()
        keys = pinned_keys(text)
        if not keys:
            raise InputError(f"kpemu runs check: {name} pins no hop table (pin one with "
                             f"kpemu runs show RUN --flow FLOW --write {name})")
        for run, flow in keys:
            diff = check_block(text, name, run, flow, _pin_table(Path(args.dir), run, flow)[2])
            if diff:
                changed += 1
                print(f"{name}: the hop table of {run} / {flow} changed; if the change is meant, update it with "
                      f"kpemu runs show {run} --flow {flow} --dir {args.dir} --write {name}")
                print(diff, end="")
            else:
                print(f"{name}: {run} / {flow} as pinned")
    return 1 if changed else 0


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
    o = add_command(rsub, "show", "one flow's hop table as Markdown for a document (client ports masked)",
                    ["kpemu runs show nodeport-iptables --flow via-nodeport",
                     "kpemu runs show nodeport-iptables --flow via-nodeport --write docs/nodeport.md",
                     "kpemu runs show nodeport-iptables --flow via-nodeport -o json"])
    o.add_argument("name", metavar="NAME", help="the run's name as kpemu runs lists it, or its directory")
    o.add_argument("--flow", default=None, help="the flow's name (needed when the run has several)")
    o.add_argument("--dir", default=argparse.SUPPRESS, help="where the runs are (default runs)")
    o.add_argument("-o", "--output", "--format", choices=("md", "json"), default="md",
                   help="md: the hop table as Markdown (default); json: the flow as hops.json has it")
    o.add_argument("--write", metavar="DOC", default=None,
                   help="put the table into DOC between kpemu markers (replacing the pinned one)")
    o.set_defaults(func=cmd_runs_show)
    o = add_command(rsub, "picture", "draw each flow's path picture (pictures/path-FLOW.svg) as PNG beside it",
                    ["kpemu runs picture nodeport-iptables",
                     "kpemu runs picture nodeport-local --flow to-node-with-endpoint"])
    o.add_argument("name", metavar="NAME", help="the run's name as kpemu runs lists it, or its directory")
    o.add_argument("--flow", default=None, help="only this flow's picture")
    o.add_argument("--dir", default=argparse.SUPPRESS, help="where the runs are (default runs)")
    o.set_defaults(func=cmd_runs_picture)
    o = add_command(rsub, "check", "fail (exit 1, with a diff) when a hop table pinned in a document changed",
                    ["kpemu runs check docs/nodeport.md", "kpemu runs check --dir /tmp/runs docs/*.md"])
    o.add_argument("docs", nargs="+", metavar="DOC", help="Markdown files with pinned hop tables")
    o.add_argument("--dir", default=argparse.SUPPRESS, help="where the runs are (default runs)")
    o.set_defaults(func=cmd_runs_check)
