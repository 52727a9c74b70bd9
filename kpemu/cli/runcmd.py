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

    from kpemu.model.scenario import Scenario


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
        print_summary(console, res.name, res.ledgers, res.checks, res.seconds, str(res.out_dir),
                      res.hops.get("flows"))
        reports.append(res.hops)
        worst = max(worst, res.exit_code)
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
    return worst


MODES = ("iptables", "ipvs", "nftables")  # kpemu.proxy.modes.MODES, in comparison order


def _variants(file: str, notes: dict[str, str]) -> dict[str, Scenario]:
    """The scenario in every mode its kube-proxy release has (a mode it lacks gets a note)."""
    from kpemu.model.scenario import load_scenario

    out = {}
    for m in MODES:
        try:
            out[m] = load_scenario(file, m)
        except InputError as e:
            if m == "iptables":
                raise
            notes[m] = f"not run: {e}"
    return out


def _compare_modes(args: argparse.Namespace, file: str, console: Console, base: Path, extra: list[str]) -> int:
    """`kpemu run FILE --compare-modes`: the flows under iptables, IPVS and nftables, ledgers side by side.

    Each mode's part runs where its kernel needs are met (`choose_runtimes`): on this kernel, or
    in the guest (one boot for every mode when none can run here). Each part writes <base>/<mode>/;
    each other mode's ledger is printed next to iptables mode's from the hops.json files.
    """
    from kpemu.analyse.expect import fixed_ports
    from kpemu.report.compare import print_comparison
    from kpemu.report.terminal import print_summary
    from kpemu.run import choose_runtimes, guest_argv, run_scenario

    notes: dict[str, str] = {}
    variants = _variants(file, notes)
    modes = tuple(variants)
    decisions = dict(zip(modes, choose_runtimes(args.runtime, list(variants.values())), strict=True))
    rcs: dict[str, int] = {}
    for m in MODES:
        (base / m / "hops.json").unlink(missing_ok=True)
    in_vm = [m for m in modes if decisions[m][0] == "vm"]
    if in_vm:
        from kpemu.vm import run_in_guest

        reason = next(decisions[m][1] for m in in_vm)
        console.print(f"runtime: vm for {variants['iptables'].name} in {' and '.join(in_vm)} mode ({reason})")
        if len(in_vm) == len(modes):  # every mode in the guest: one boot
            runs = [(guest_argv([file], str(base), [*extra, "--compare-modes"]), base, in_vm)]
        else:
            runs = [(guest_argv([file], str(base / m), [*extra, "--proxy-mode", m]), base / m, [m]) for m in in_vm]
        for argv, out, ms in runs:
            out.mkdir(parents=True, exist_ok=True)
            try:
                rc = run_in_guest(argv, out / "guest", rw_dirs=[out], echo=console.file,
                                  progress=lambda msg: console.print(f"vm: {msg}"))
            except KpemuError as e:
                rc = e.exit_code
                for m in ms:
                    notes[m] = f"{m} mode needs the guest kernel ({reason}), and the guest could not run: {e}"
            rcs.update(dict.fromkeys(ms, rc))
    for m in modes:
        rt, reason = decisions[m]
        if rt != "host":
            continue
        sc = variants[m]
        console.print(f"runtime: host for {sc.name} in {m} mode, lab {sc.topology.name} ({reason})")
        try:
            res = run_scenario(sc, base / m, False, rt, reason, trace=args.trace)
        except KpemuError as e:  # one mode failing here must not hide the others
            notes[m], rcs[m] = f"{m} mode could not run on this kernel: {e}", e.exit_code
            continue
        print_summary(console, f"{sc.name} [{m}]", res.ledgers, res.checks, res.seconds, str(res.out_dir),
                      res.hops.get("flows"))
        rcs[m] = res.exit_code
    ledgers = {}
    for m in MODES:
        path = base / m / "hops.json"
        ledgers[m] = json.loads(path.read_text()) if path.is_file() else None
        if ledgers[m] is None and m not in notes:
            notes[m] = f"{m} mode left no {path} (exit {rcs.get(m)})"
    name, fixed = variants["iptables"].name, fixed_ports(variants["iptables"].topology)
    differ = 0
    for m in MODES[1:]:
        console.rule(f"{name}: iptables vs {'IPVS' if m == 'ipvs' else m}")
        differ += print_comparison(console, name, ("iptables", m), ledgers["iptables"], ledgers[m], fixed, notes)
    if all(ledgers.values()):
        console.print(f"{differ} row(s) differ from iptables mode; every run under {base}")
    ran = [m for m in modes if ledgers[m] is not None]
    return max([*rcs.values(), 3 if len(ran) < len(modes) else 0])


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
    s.add_argument("--proxy-mode", choices=MODES, default=None,
                   help="override the topology's kubeProxy.mode (the lab is named <lab>-<mode>)")
    s.add_argument("--collect-only", action="store_true", help=argparse.SUPPRESS)  # the guest's half of a vm run
    s.add_argument("--compare-modes", action="store_true",
                   help="run the flows under kube-proxy iptables, IPVS and nftables (OUT/<mode>) and print "
                        "each mode's ledger next to iptables mode's")
    s.set_defaults(func=cmd_run)
