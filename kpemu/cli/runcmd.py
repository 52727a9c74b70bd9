"""`run`: scenarios end to end, and `--compare-modes`."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kpemu.cli.base import add_command, add_kernel, guest_runtime, human_console, progress
from kpemu.cli.complete import attach, yaml_or_example
from kpemu.errors import InputError, KpemuError

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from rich.console import Console

    from kpemu.model.scenario import Scenario
    from kpemu.pipeline import Options, Outcome
    from kpemu.report.ci import ScenarioResult
    from kpemu.runtimes.base import Runtime


def cmd_run(args: argparse.Namespace) -> int:
    from kpemu import pipeline
    from kpemu.examples import refuse_writes_inside_package, resolve
    from kpemu.report.ci import ScenarioResult
    from kpemu.report.terminal import print_summary

    if args.compare_modes and (args.proxy_mode or args.update_goldens or args.json or args.keep or args.kube_proxy):
        raise InputError("kpemu run: --compare-modes runs every mode itself; it does not combine with "
                         "--proxy-mode, --update-goldens, --json, --keep or --kube-proxy")
    args.scenarios = [str(resolve(f)) for f in args.scenarios]  # example:NAME -> the shipped file
    if args.update_goldens:
        refuse_writes_inside_package(args.scenarios, "--update-goldens")
    if args.name and (len(args.scenarios) > 1 or args.compare_modes):
        raise InputError("kpemu run: --name names the lab of one scenario run in one mode; give one SCENARIO "
                         "without --compare-modes")
    scenarios = pipeline.load(args.scenarios, args.proxy_mode, args.name, args.kube_proxy)
    console = human_console(stderr=args.json)
    several = len(scenarios) > 1
    opts = pipeline.Options(guest_runtime(args.runtime, args.kernel, "run"), args.trace, args.update_goldens,
                            Path(args.out or "runs"), keep=args.keep)
    if args.compare_modes:
        return max(_compare_modes(f, pipeline.out_dir_for(args.out, sc.name, several), opts, console)
                   for f, sc in zip(args.scenarios, scenarios, strict=True))
    shown = _Shown(console)
    outcomes = pipeline.run([(sc, pipeline.out_dir_for(args.out, sc.name, several)) for sc in scenarios], opts, shown)
    worst, reports, results = 0, [], []
    for o in outcomes:
        if isinstance(o.result, KpemuError):
            worst = max(worst, o.result.exit_code)
            results.append(ScenarioResult(o.scenario.name, str(o.scenario.path), o.result.exit_code,
                                          error=str(o.result)))
            continue
        res = o.result
        for p in res.goldens_written[:1]:
            console.print(f"goldens rewritten in {p.parent}")
        for f in res.hops.get("faults") or []:
            console.print(f"fault {f['kind']} on {f['member']}: {f['change']}", highlight=False, markup=False)
        print_summary(console, res.hops, str(res.out_dir))
        console.print(f"  open {res.out_dir / 'report.html'}; every hop in Wireshark: {res.out_dir / 'run.pcapng'} "
                      "(report.md has the tshark command)", highlight=False, markup=False)
        if args.keep:
            lab = o.scenario.topology.name
            console.print(f"  lab {lab} kept, its pods serving: kpemu exec {lab} MEMBER -- CMD, kpemu capture {lab} "
                          f"MEMBER IFACE; kpemu destroy {lab} removes it", highlight=False, markup=False)
        reports.append(res.hops)
        results.append(ScenarioResult(o.scenario.name, str(o.scenario.path), res.exit_code,
                                      float(res.hops.get("seconds") or 0.0), list(res.hops["checks"])))
        worst = max(worst, res.exit_code)
    _tell_ci(args, console, results, shown.skipped_names, worst)
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
    return worst


def _tell_ci(args: argparse.Namespace, console: Console, results: list[ScenarioResult], skipped: list[str],
             worst: int) -> None:
    """The last line's tally (its PASS/FAIL is the exit code's), `--junit FILE`, and GitHub annotations when
    running in GitHub Actions."""
    from kpemu.report.ci import github_annotations, junit_xml, tally

    if args.junit:
        Path(args.junit).write_text(junit_xml(results))
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(results):
            print(line, flush=True)
    colour = "green" if worst == 0 else "red"
    console.print(f"[{colour}]{tally(results, skipped, worst)}[/{colour}]", highlight=False)


class _Shown:
    """What a run tells, on the console (kpemu.pipeline.Listener)."""

    def __init__(self, console: Console):
        self.console = console
        self.skipped_names: list[str] = []

    def placed(self, runtime: Runtime, reason: str, scenarios: list[Scenario]) -> None:
        self.console.print(f"runtime: {runtime.name} for {', '.join(sc.name for sc in scenarios)} ({reason})")

    def skipped(self, sc: Scenario, why: str, fix: str) -> None:
        self.skipped_names.append(sc.name)
        self.console.print(f"skipped {sc.name}: {why} (fix: {fix})")

    def progress(self) -> AbstractContextManager[Callable[[str], None]]:
        return progress(self.console)

    def notice(self, msg: str) -> None:
        """What a run must say for good, not as passing progress (a guest that hung)."""
        self.console.print(msg, markup=False, highlight=False)

    def failed(self, outcome: Outcome) -> None:
        self.console.print(f"{outcome.scenario.name}: {outcome.result}")


class _ShownPerMode(_Shown):
    """What `--compare-modes` tells: each batch's modes (and, on this kernel, its lab); failures become notes."""

    def placed(self, runtime: Runtime, reason: str, scenarios: list[Scenario]) -> None:
        modes = " and ".join(sc.topology.kubeProxy.mode for sc in scenarios)
        lab = "" if runtime.batched else f", lab {scenarios[0].topology.name}"
        self.console.print(f"runtime: {runtime.name} for {scenarios[0].name} in {modes} mode{lab} ({reason})")

    def failed(self, outcome: Outcome) -> None:
        pass


def _compare_modes(file: str, base: Path, opts: Options, console: Console) -> int:
    """`kpemu run FILE --compare-modes` (kpemu.pipeline.compare_modes): each mode's summary, then each other
    mode's ledger next to iptables mode's, from the hops.json files."""
    from kpemu.model.modes import MODE_FACTS
    from kpemu.pipeline import compare_modes
    from kpemu.report.compare import print_comparison
    from kpemu.report.terminal import print_summary

    cmp = compare_modes(file, base, opts, _ShownPerMode(console))
    for o in cmp.outcomes:
        if not isinstance(o.result, KpemuError):
            res = o.result
            print_summary(console, res.hops, str(res.out_dir), f"{res.name} [{o.scenario.topology.kubeProxy.mode}]")
    differ = 0
    for m in tuple(MODE_FACTS)[1:]:
        console.rule(f"{cmp.name}: {cmp.baseline} vs {MODE_FACTS[m].title}")
        differ += print_comparison(console, cmp.name, (cmp.baseline, m), cmp.ledgers[cmp.baseline], cmp.ledgers[m],
                                   cmp.fixed, cmp.notes)
    if all(cmp.ledgers.values()):
        console.print(f"{differ} row(s) differ from {cmp.baseline} mode; every run under {base}")
    return cmp.exit_code


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
    attach(s.add_argument("scenarios", nargs="+", metavar="SCENARIO",
                          help="a YAML file, or example:NAME (see kpemu examples)"), yaml_or_example("scenario"))
    s.add_argument("--runtime", choices=["auto", "host", "vm"], default=None,
                   help="where to run: this kernel, the guest kernel, or whichever can (default auto)")
    add_kernel(s)
    s.add_argument("--out", default=None, help="output directory (default runs/<name>; with several "
                                               "scenarios, each goes to OUT/<name>)")
    s.add_argument("--name", default=None, metavar="LAB",
                   help="the lab's name (namespaces kp-LAB-*) instead of the scenario's: run two copies at once")
    s.add_argument("--json", action="store_true", help="print hops.json to stdout (summary to stderr)")
    s.add_argument("--keep", action="store_true",
                   help="leave each lab up after its run, its pods serving, until kpemu destroy (this kernel only)")
    s.add_argument("--junit", metavar="FILE", default=None,
                   help="write a JUnit XML file: a testsuite per scenario, a testcase per check (for CI)")
    s.add_argument("--update-goldens", action="store_true", help="rewrite scenarios/<name>/golden/ from this run")
    s.add_argument("--trace", action=argparse.BooleanOptionalAction, default=True,
                   help="trace each flow's packets through netfilter for rule attribution and the model "
                        "oracle (default on; --no-trace skips it)")
    s.add_argument("--proxy-mode", choices=tuple(MODE_FACTS), default=None,
                   help="override the topology's kubeProxy.mode (the lab is named <lab>-<mode>)")
    s.add_argument("--kube-proxy", metavar="WHICH", default=None,
                   help="who programs the nodes: model (kpemu's model, the default), upstream (the real "
                        "kube-proxy of kubeProxy.version's newest patch, built from source when not cached), "
                        "upstream:1.36.3, or the PATH of a kube-proxy binary; the report compares its rules with "
                        "the model's")
    s.add_argument("--compare-modes", action="store_true",
                   help="run the flows under kube-proxy iptables, IPVS and nftables (OUT/<mode>) and print "
                        "each mode's ledger next to iptables mode's")
    s.set_defaults(func=cmd_run)
