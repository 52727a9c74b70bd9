"""`run`: scenarios end to end, and `--compare-modes`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from kpemu.cli.base import human_console
from kpemu.errors import InputError, KpemuError

if TYPE_CHECKING:
    from rich.console import Console


def cmd_run(args: argparse.Namespace) -> int:

    from kpemu.model.scenario import load_scenario
    from kpemu.report.terminal import print_summary
    from kpemu.run import (
        COLLECTED,
        analyse_scenario,
        choose_runtimes,
        collect_scenario,
        guest_argv,
        out_dir_for,
        run_scenario,
    )

    if args.compare_modes and (args.proxy_mode or args.update_goldens or args.json):
        raise InputError("kpemu run: --compare-modes runs both modes itself; it does not combine with "
                         "--proxy-mode, --update-goldens or --json")
    # every file valid before anything is built
    scenarios = [load_scenario(f, args.proxy_mode) for f in args.scenarios]
    names = [sc.name for sc in scenarios]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise InputError(f"kpemu run: scenario {', '.join(dups)} given twice")
    console = human_console(stderr=args.json)
    several = len(scenarios) > 1
    extra = ([] if args.trace else ["--no-trace"]) + (["--proxy-mode", args.proxy_mode] if args.proxy_mode else [])
    if args.compare_modes:
        return max(_compare_modes(args, f, console, out_dir_for(args.out, sc.name, several), extra)
                   for f, sc in zip(args.scenarios, scenarios, strict=True))
    decisions = choose_runtimes(args.runtime, scenarios)
    if args.collect_only:
        for sc in scenarios:
            seconds = collect_scenario(sc, out_dir_for(args.out, sc.name, several), args.trace)
            console.print(f"collected {sc.name} in {seconds:.1f}s")
        return 0
    worst, results = 0, []
    in_vm = [(f, sc) for f, sc, (rt, _) in zip(args.scenarios, scenarios, decisions, strict=True) if rt == "vm"]
    if in_vm:
        from kpemu.vm import run_in_guest

        reason = next(r for rt, r in decisions if rt == "vm")
        console.print(f"runtime: vm for {', '.join(sc.name for _, sc in in_vm)} ({reason})")
        out = out_dir_for(args.out, in_vm[0][1].name, several) if len(in_vm) == 1 else Path(args.out or "runs")
        # The guest only collects (deploy, traffic, captures): analysis is pure and much faster here.
        argv = guest_argv([f for f, _ in in_vm], str(out), [*extra, "--collect-only"])
        for _, sc in in_vm:  # a collection that fails in the guest must not leave an old one behind
            (out_dir_for(args.out, sc.name, several) / COLLECTED).unlink(missing_ok=True)
        worst = run_in_guest(argv, out / "guest", rw_dirs=[out], echo=console.file,
                             progress=lambda m: console.print(f"vm: {m}"))
        for _, sc in in_vm:
            try:
                results.append(analyse_scenario(sc, out_dir_for(args.out, sc.name, several), args.update_goldens,
                                                "vm", reason))
            except KpemuError as e:
                console.print(f"{sc.name}: {e}")
                worst = max(worst, e.exit_code)
    for sc, (rt, reason) in zip(scenarios, decisions, strict=True):
        if rt == "host":
            console.print(f"runtime: host for {sc.name} ({reason})")
            results.append(run_scenario(sc, out_dir_for(args.out, sc.name, several), args.update_goldens, rt,
                                        reason, trace=args.trace))
    reports = []
    for res in results:
        for p in res.goldens_written[:1]:
            console.print(f"goldens rewritten in {p.parent}")
        for f in res.hops.get("faults") or []:
            console.print(f"fault {f['kind']} on {f['member']}: {f['change']}", highlight=False, markup=False)
        print_summary(console, res.name, res.ledgers, res.checks, res.seconds, str(res.out_dir),
                      res.hops.get("flows"))
        reports.append(res.hops)
        worst = max(worst, res.exit_code)
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
    return worst


MODES = ("iptables", "ipvs")


def _compare_modes(args: argparse.Namespace, file: str, console: Console, base: Path, extra: list[str]) -> int:
    """`kpemu run FILE --compare-modes`: the flows under iptables and IPVS, ledgers side by side.

    Each mode's half runs where its kernel needs are met (`choose_runtimes`): on this kernel, or
    in the guest (one boot for both halves when neither can run here). Each half writes
    <base>/<mode>/; the comparison is printed from the two hops.json files.
    """
    from kpemu.analyse.expect import fixed_ports
    from kpemu.model.scenario import load_scenario
    from kpemu.report.compare import print_comparison
    from kpemu.report.terminal import print_summary
    from kpemu.run import choose_runtimes, guest_argv, run_scenario

    variants = [load_scenario(file, m) for m in MODES]
    decisions = choose_runtimes(args.runtime, variants)
    notes: dict[str, str] = {}
    rcs: dict[str, int] = {}
    for m in MODES:
        (base / m / "hops.json").unlink(missing_ok=True)
    in_vm = [m for m, (rt, _) in zip(MODES, decisions, strict=True) if rt == "vm"]
    if in_vm:
        from kpemu.vm import run_in_guest

        reason = next(r for rt, r in decisions if rt == "vm")
        console.print(f"runtime: vm for {variants[0].name} in {' and '.join(in_vm)} mode ({reason})")
        if len(in_vm) == 2:
            argv, out = guest_argv([file], str(base), [*extra, "--compare-modes"]), base
        else:
            argv, out = guest_argv([file], str(base / in_vm[0]), [*extra, "--proxy-mode", in_vm[0]]), \
                base / in_vm[0]
        out.mkdir(parents=True, exist_ok=True)
        try:
            rc = run_in_guest(argv, out / "guest", rw_dirs=[out], echo=console.file,
                              progress=lambda msg: console.print(f"vm: {msg}"))
        except KpemuError as e:
            rc = e.exit_code
            for m in in_vm:
                notes[m] = f"{m} mode needs the guest kernel ({reason}), and the guest could not run: {e}"
        for m in in_vm:
            rcs[m] = rc
    for sc, m, (rt, reason) in zip(variants, MODES, decisions, strict=True):
        if rt != "host":
            continue
        console.print(f"runtime: host for {sc.name} in {m} mode, lab {sc.topology.name} ({reason})")
        res = run_scenario(sc, base / m, False, rt, reason, trace=args.trace)
        print_summary(console, f"{sc.name} [{m}]", res.ledgers, res.checks, res.seconds, str(res.out_dir),
                      res.hops.get("flows"))
        rcs[m] = res.exit_code
    ledgers = {}
    for m in MODES:
        path = base / m / "hops.json"
        ledgers[m] = json.loads(path.read_text()) if path.is_file() else None
        if ledgers[m] is None and m not in notes:
            notes[m] = f"{m} mode left no {path} (exit {rcs.get(m)})"
    console.rule(f"{variants[0].name}: iptables vs IPVS")
    n = print_comparison(console, variants[0].name, MODES, ledgers["iptables"], ledgers["ipvs"],
                         fixed_ports(variants[0].topology), notes)
    if all(ledgers.values()):
        console.print(f"{n} row(s) differ between the modes; both runs under {base}")
    missing = [m for m in MODES if ledgers[m] is None]
    return max([*rcs.values(), 3 if missing else 0])


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = sub.add_parser("run", help="deploy, send traffic, capture every hop, explain, check, destroy (root)")
    s.add_argument("scenarios", nargs="+", metavar="SCENARIO")
    s.add_argument("--runtime", choices=["auto", "host", "vm"], default=None,
                   help="where to run: this kernel, the guest kernel, or whichever can (default auto)")
    s.add_argument("--out", default=None, help="output directory (default runs/<name>; with several "
                                               "scenarios, each goes to OUT/<name>)")
    s.add_argument("--json", action="store_true", help="print hops.json to stdout (summary to stderr)")
    s.add_argument("--update-goldens", action="store_true", help="rewrite scenarios/<name>/golden/ from this run")
    s.add_argument("--trace", action=argparse.BooleanOptionalAction, default=True,
                   help="trace each flow's packets through netfilter for rule attribution and the model "
                        "oracle (default on; --no-trace skips it)")
    s.add_argument("--proxy-mode", choices=["iptables", "ipvs"], default=None,
                   help="override the topology's kubeProxy.mode (the lab is named <lab>-<mode>)")
    s.add_argument("--collect-only", action="store_true", help=argparse.SUPPRESS)  # the guest's half of a vm run
    s.add_argument("--compare-modes", action="store_true",
                   help="run the flows under kube-proxy iptables and IPVS (OUT/iptables, OUT/ipvs) and print "
                        "the two ledgers side by side")
    s.set_defaults(func=cmd_run)
