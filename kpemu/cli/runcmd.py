"""`run`: scenarios end to end, and `--compare-modes`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from kpemu.cli.base import add_command, human_console, progress
from kpemu.errors import InputError, KpemuError

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from kpemu.model.scenario import Scenario


def cmd_run(args: argparse.Namespace) -> int:
    from kpemu.inputs.scenario import load_scenario
    from kpemu.report.terminal import print_summary
    from kpemu.run import choose_runtimes, out_dir_for, resolved, run_in_guest, run_scenario

    if args.compare_modes and (args.proxy_mode or args.update_goldens or args.json):
        raise InputError("kpemu run: --compare-modes runs both modes itself; it does not combine with "
                         "--proxy-mode, --update-goldens or --json")
    from kpemu.examples import refuse_writes_inside_package, resolve

    args.scenarios = [str(resolve(f)) for f in args.scenarios]  # example:NAME -> the shipped file
    if args.update_goldens:
        refuse_writes_inside_package(args.scenarios, "--update-goldens")
    if args.name and (len(args.scenarios) > 1 or args.compare_modes):
        raise InputError("kpemu run: --name names the lab of one scenario run in one mode; give one SCENARIO "
                         "without --compare-modes")
    # every file valid before anything is built
    scenarios = [load_scenario(f, args.proxy_mode, args.name) for f in args.scenarios]
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
    scenarios, decisions = _without_blocked(scenarios, decisions, console)
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
                                        cold_root, args.update_goldens, reason, args.trace, step,
                                        _notice(console))
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
        for f in res.hops.get("faults") or []:
            console.print(f"fault {f['kind']} on {f['member']}: {f['change']}", highlight=False, markup=False)
        print_summary(console, res.hops, str(res.out_dir))
        console.print(f"  open {res.out_dir / 'report.html'}; every hop in Wireshark: {res.out_dir / 'run.pcapng'} "
                      "(report.md has the tshark command)", highlight=False, markup=False)
        reports.append(res.hops)
        worst = max(worst, res.exit_code)
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
    return worst


def _notice(console: Console) -> Callable[[str], None]:
    """What a run must say for good, not as passing progress (a guest that hung)."""
    return lambda msg: console.print(msg, markup=False, highlight=False)


def _without_blocked(scenarios: list[Scenario], decisions: list[tuple[str, str]],
                     console: Console) -> tuple[list[Scenario], list[tuple[str, str]]]:
    """Scenarios with container members that cannot run where they would (docker absent, or the
    guest kernel): one such scenario is an environment problem (exit 3); in a batch it is reported
    as skipped with the reason, and the others run."""
    from kpemu.docker.engine import blocker
    from kpemu.errors import EnvironmentProblem

    keep = []
    for sc, d in zip(scenarios, decisions, strict=True):
        why = blocker(bool(sc.topology.containers()), d[0])
        if why is None:
            keep.append((sc, d))
        elif len(scenarios) == 1:
            raise EnvironmentProblem(f"{sc.name}: {why[0]}", why[1])
        else:
            console.print(f"skipped {sc.name}: {why[0]} (fix: {why[1]})")
    return [sc for sc, _ in keep], [d for _, d in keep]


def _variants(file: str, notes: dict[str, str]) -> dict[str, Scenario]:
    """The scenario in every mode its kube-proxy release has (a mode it lacks gets a note); the first
    mode (iptables), the one every other is compared with, must load."""
    from kpemu.inputs.scenario import load_scenario
    from kpemu.model.modes import MODE_FACTS

    out = {}
    for m in MODE_FACTS:
        try:
            out[m] = load_scenario(file, m)
        except InputError as e:
            if not out:
                raise
            notes[m] = f"not run: {e}"
    return out


def _compare_modes(args: argparse.Namespace, file: str, console: Console, base: Path) -> int:
    """`kpemu run FILE --compare-modes`: the flows under iptables, IPVS and nftables, ledgers side by side.

    Each mode's part runs where its kernel needs are met (`choose_runtimes`): on this kernel, or
    in the guest (the warm one, else one boot for every mode that needs it). Each part writes
    <base>/<mode>/; each other mode's ledger is printed next to iptables mode's from the hops.json files.
    """
    from kpemu.analyse.expect import fixed_ports
    from kpemu.model.modes import MODE_FACTS
    from kpemu.report.compare import print_comparison
    from kpemu.report.terminal import print_summary
    from kpemu.run import choose_runtimes, resolved, run_in_guest, run_scenario

    notes: dict[str, str] = {}
    variants = _variants(file, notes)
    modes = tuple(variants)
    every, baseline = tuple(MODE_FACTS), modes[0]
    decisions = dict(zip(modes, choose_runtimes(args.runtime, list(variants.values())), strict=True))
    variants = {m: resolved(sc, decisions[m][0]) for m, sc in variants.items()}
    rcs: dict[str, int] = {}
    for m in every:
        (base / m / "hops.json").unlink(missing_ok=True)
    runs = []
    in_vm = [m for m in modes if decisions[m][0] == "vm"]
    if in_vm:
        reason = next(decisions[m][1] for m in in_vm)
        console.print(f"runtime: vm for {variants[baseline].name} in {' and '.join(in_vm)} mode ({reason})")
        try:
            with progress(console) as step:
                done, failed = run_in_guest([(variants[m], base / m) for m in in_vm], base / "guest", False,
                                            reason, args.trace, step, _notice(console))
        except KpemuError as e:
            done, failed = [], [(variants[m].name, e) for m in in_vm]
        errors = dict(failed)
        runs += list(zip([m for m in in_vm if variants[m].name not in errors], done, strict=True))
        for m in in_vm:
            if variants[m].name in errors:
                rcs[m] = errors[variants[m].name].exit_code
                notes[m] = f"{m} mode needs the guest kernel ({reason}), and the guest could not run: " \
                           f"{errors[variants[m].name]}"
    for m in modes:
        rt, reason = decisions[m]
        if rt != "host":
            continue
        sc = variants[m]
        console.print(f"runtime: host for {sc.name} in {m} mode, lab {sc.topology.name} ({reason})")
        try:
            with progress(console) as step:
                runs.append((m, run_scenario(sc, base / m, False, rt, reason, trace=args.trace, progress=step)))
        except KpemuError as e:  # one mode failing here must not hide the others
            notes[m], rcs[m] = f"{m} mode could not run on this kernel: {e}", e.exit_code
    for m, res in runs:
        print_summary(console, res.hops, str(res.out_dir), f"{res.name} [{m}]")
        rcs[m] = res.exit_code
    ledgers = {}
    for m in every:
        path = base / m / "hops.json"
        ledgers[m] = json.loads(path.read_text()) if path.is_file() else None
        if ledgers[m] is None and m not in notes:
            notes[m] = f"{m} mode left no {path} (exit {rcs.get(m)})"
    name, fixed = variants[baseline].name, fixed_ports(variants[baseline].topology)
    differ = 0
    for m in every[1:]:
        console.rule(f"{name}: {baseline} vs {MODE_FACTS[m].title}")
        differ += print_comparison(console, name, (baseline, m), ledgers[baseline], ledgers[m], fixed, notes)
    if all(ledgers.values()):
        console.print(f"{differ} row(s) differ from {baseline} mode; every run under {base}")
    ran = [m for m in modes if ledgers[m] is not None]
    return max([*rcs.values(), 3 if len(ran) < len(modes) else 0])


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    from kpemu.model.modes import MODE_FACTS

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
    s.add_argument("--name", default=None, metavar="LAB",
                   help="the lab's name (namespaces kp-LAB-*) instead of the scenario's: run two copies at once")
    s.add_argument("--json", action="store_true", help="print hops.json to stdout (summary to stderr)")
    s.add_argument("--update-goldens", action="store_true", help="rewrite scenarios/<name>/golden/ from this run")
    s.add_argument("--trace", action=argparse.BooleanOptionalAction, default=True,
                   help="trace each flow's packets through netfilter for rule attribution and the model "
                        "oracle (default on; --no-trace skips it)")
    s.add_argument("--proxy-mode", choices=tuple(MODE_FACTS), default=None,
                   help="override the topology's kubeProxy.mode (the lab is named <lab>-<mode>)")
    s.add_argument("--compare-modes", action="store_true",
                   help="run the flows under kube-proxy iptables, IPVS and nftables (OUT/<mode>) and print "
                        "each mode's ledger next to iptables mode's")
    s.set_defaults(func=cmd_run)
