"""`run`: scenarios end to end, and `--compare-modes`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from kpemu.cli.base import add_command, human_console, progress
from kpemu.errors import InputError, KpemuError

if TYPE_CHECKING:
    from rich.console import Console


def cmd_run(args: argparse.Namespace) -> int:
    from kpemu.model.scenario import load_scenario
    from kpemu.report.terminal import print_summary
    from kpemu.run import choose_runtimes, out_dir_for, resolved, run_in_guest, run_scenario

    if args.compare_modes and (args.proxy_mode or args.update_goldens or args.json):
        raise InputError("kpemu run: --compare-modes runs both modes itself; it does not combine with "
                         "--proxy-mode, --update-goldens or --json")
    from kpemu.examples import resolve

    args.scenarios = [str(resolve(f)) for f in args.scenarios]  # example:NAME -> the shipped file
    # every file valid before anything is built
    scenarios = [load_scenario(f, args.proxy_mode) for f in args.scenarios]
    names = [sc.name for sc in scenarios]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise InputError(f"kpemu run: scenario {', '.join(dups)} given twice")
    from kpemu.lab import require_root

    require_root()
    console = human_console(stderr=args.json)
    several = len(scenarios) > 1
    if args.compare_modes:
        return max(_compare_modes(args, f, console, out_dir_for(args.out, sc.name, several))
                   for f, sc in zip(args.scenarios, scenarios, strict=True))
    decisions = choose_runtimes(args.runtime, scenarios)
    scenarios = [resolved(sc, rt) for sc, (rt, _) in zip(scenarios, decisions, strict=True)]
    worst, results = 0, []
    in_vm = [sc for sc, (rt, _) in zip(scenarios, decisions, strict=True) if rt == "vm"]
    if in_vm:
        reason = next(r for rt, r in decisions if rt == "vm")
        console.print(f"runtime: vm for {', '.join(sc.name for sc in in_vm)} ({reason})")
        cold_root = (out_dir_for(args.out, in_vm[0].name, several) if len(in_vm) == 1
                     else Path(args.out or "runs")) / "guest"
        # The guest only collects (deploy, traffic, captures): analysis is pure and much faster here.
        with progress(console) as step:
            done, failed = run_in_guest([(sc, out_dir_for(args.out, sc.name, several)) for sc in in_vm],
                                        cold_root, args.update_goldens, reason, args.trace, step)
        results += done
        for name, e in failed:
            console.print(f"{name}: {e}")
            worst = max(worst, e.exit_code)
    for sc, (rt, reason) in zip(scenarios, decisions, strict=True):
        if rt == "host":
            console.print(f"runtime: host for {sc.name} ({reason})")
            with progress(console) as step:
                results.append(run_scenario(sc, out_dir_for(args.out, sc.name, several), args.update_goldens, rt,
                                            reason, trace=args.trace, progress=step))
    reports = []
    for res in results:
        for p in res.goldens_written[:1]:
            console.print(f"goldens rewritten in {p.parent}")
        print_summary(console, res.name, res.ledgers, res.checks, res.seconds, str(res.out_dir),
                      res.hops.get("flows"))
        console.print(f"  open {res.out_dir / 'report.html'}; every hop in Wireshark: {res.out_dir / 'run.pcapng'} "
                      "(report.md has the tshark command)", highlight=False, markup=False)
        reports.append(res.hops)
        worst = max(worst, res.exit_code)
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
    return worst


MODES = ("iptables", "ipvs")


def _compare_modes(args: argparse.Namespace, file: str, console: Console, base: Path) -> int:
    """`kpemu run FILE --compare-modes`: the flows under iptables and IPVS, ledgers side by side.

    Each mode's half runs where its kernel needs are met (`choose_runtimes`): on this kernel, or
    in the guest. Each half writes <base>/<mode>/; the comparison is printed from the two hops.json
    files.
    """
    from kpemu.analyse.expect import fixed_ports
    from kpemu.model.scenario import load_scenario
    from kpemu.report.compare import print_comparison
    from kpemu.report.terminal import print_summary
    from kpemu.run import choose_runtimes, resolved, run_in_guest, run_scenario

    variants = [load_scenario(file, m) for m in MODES]
    decisions = choose_runtimes(args.runtime, variants)
    variants = [resolved(sc, rt) for sc, (rt, _) in zip(variants, decisions, strict=True)]
    notes: dict[str, str] = {}
    rcs: dict[str, int] = {}
    for m in MODES:
        (base / m / "hops.json").unlink(missing_ok=True)
    runs = []
    in_vm = [(sc, m) for sc, m, (rt, _) in zip(variants, MODES, decisions, strict=True) if rt == "vm"]
    if in_vm:
        reason = next(r for rt, r in decisions if rt == "vm")
        console.print(f"runtime: vm for {variants[0].name} in {' and '.join(m for _, m in in_vm)} mode ({reason})")
        try:
            done, failed = run_in_guest([(sc, base / m) for sc, m in in_vm], base / "guest", False, reason,
                                        args.trace, lambda msg: console.print(f"vm: {msg}"))
        except KpemuError as e:
            done, failed = [], [(sc.name, e) for sc, _ in in_vm]
        runs += [(m, r) for (_, m), r in zip([x for x in in_vm if x[0].name not in dict(failed)], done,
                                             strict=True)]
        for (sc, m) in in_vm:
            if sc.name in dict(failed):
                rcs[m] = dict(failed)[sc.name].exit_code
                notes[m] = f"{m} mode needs the guest kernel ({reason}), and the guest could not run: " \
                           f"{dict(failed)[sc.name]}"
    for sc, m, (rt, reason) in zip(variants, MODES, decisions, strict=True):
        if rt == "host":
            console.print(f"runtime: host for {sc.name} in {m} mode, lab {sc.topology.name} ({reason})")
            with progress(console) as step:
                runs.append((m, run_scenario(sc, base / m, False, rt, reason, trace=args.trace, progress=step)))
    for m, res in runs:
        print_summary(console, f"{res.name} [{m}]", res.ledgers, res.checks, res.seconds, str(res.out_dir),
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
    s = add_command(sub, "run", "deploy, send traffic, capture every hop, explain, check, destroy (root)",
                    ["sudo kpemu run example:nodeport-iptables",
                     "sudo kpemu run scenarios/*.yaml --out runs          # each into runs/<name>",
                     "sudo kpemu run example:nodeport-ipvs --runtime vm --json > hops.json",
                     "sudo kpemu run example:clusterip-vxlan --compare-modes --out runs/compare"],
                    description="deploy, send traffic, capture every hop, explain, check, destroy (root). Writes "
                                "report.md, report.html, hops.json, run.pcapng and pcaps/, capture/, rules/, trace/.")
    s.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="a YAML file, or example:NAME (see kpemu examples)")
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
    s.add_argument("--compare-modes", action="store_true",
                   help="run the flows under kube-proxy iptables and IPVS (OUT/iptables, OUT/ipvs) and print "
                        "the two ledgers side by side")
    s.set_defaults(func=cmd_run)
