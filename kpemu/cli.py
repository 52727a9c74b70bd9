"""The kpemu command line: the only module that parses arguments or prints for humans.

Exit codes: 0 ok, 1 an expectation failed, 2 bad input, 3 the environment cannot run it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kpemu.errors import InputError, KpemuError

if TYPE_CHECKING:
    from rich.console import Console


def human_console(stderr: bool = False) -> Console:
    """A rich console; when output is not a terminal (CI logs, pipes) tables get 140 columns, not 80."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, width=None if stream.isatty() else 140)


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as kpemu input errors (exit 2, one clear line)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(f"{self.prog}: {message} (see {self.prog} --help)")


def cmd_validate(args: argparse.Namespace) -> int:
    from kpemu.model import load_topology
    from kpemu.model.scenario import is_scenario_file, load_scenario

    for f in args.files:
        if is_scenario_file(Path(f)):
            load_scenario(f)
        else:
            load_topology(f)
        print(f"{f}: ok")
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    from kpemu.model import load_topology
    from kpemu.proxy.render import render_rules

    topo = load_topology(args.file)
    print(render_rules(topo, args.node, args.format), end="")
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    from kpemu import lab
    from kpemu.model import load_topology
    from kpemu.runtime import choose_runtime

    topo = load_topology(args.file)
    cmd = args.cmd
    runtime, reason = choose_runtime(args.runtime, [(topo.cni, topo.kubeProxy.mode)])
    if runtime == "vm":
        return _deploy_in_guest(args.file, topo.name, cmd, reason)
    if cmd:
        raise InputError("kpemu deploy: a command after -- is only for --runtime vm (on the host, the lab stays "
                         "up: use kpemu exec)")
    state = lab.deploy(topo, source=args.file)
    print(f"lab {state.lab} deployed: {len(state.namespaces)} namespaces in {state.deploy_seconds:.2f}s")
    return 0


def _deploy_in_guest(file: str, name: str, cmd: list[str], reason: str) -> int:
    """A lab in the guest lives as long as the guest: deploy, run `cmd` (default: inspect), destroy."""
    import shlex

    from kpemu.vm import run_in_guest

    console = human_console()
    console.print(f"runtime: vm ({reason}); the lab lives only while the guest runs `{shlex.join(cmd) or 'inspect'}`")
    kpemu = f"{shlex.quote(sys.executable)} -m kpemu.cli"
    then = shlex.join(cmd) if cmd else f"{kpemu} inspect {shlex.quote(name)}"
    script = (f"{kpemu} deploy {shlex.quote(file)} --runtime host || exit $?; {then}; rc=$?; "
              f"{kpemu} destroy {shlex.quote(name)} >/dev/null; exit $rc")
    return run_in_guest(["sh", "-c", script], Path("runs") / f"deploy-{name}" / "guest", echo=console.file,
                        progress=lambda m: console.print(f"vm: {m}"))


def cmd_destroy(args: argparse.Namespace) -> int:
    from kpemu import lab

    if args.all:
        removed = lab.destroy_all()
    elif args.name:
        removed = lab.destroy(args.name)
    else:
        raise InputError("kpemu destroy: give a lab NAME or --all")
    print(f"removed {len(removed)} namespaces" + (": " + " ".join(removed) if removed else ""))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from kpemu import lab
    from kpemu.report.inspect import render_inspect

    data = lab.inspect(args.name)
    print(json.dumps(data, indent=2) if args.json else render_inspect(data), end="\n" if args.json else "")
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    from kpemu import lab

    cmd = args.cmd
    if not cmd:
        raise InputError("kpemu exec: give a command after --, e.g. kpemu exec LAB node1 -- ip route")
    return lab.exec_in(args.name, args.member, cmd)


def cmd_doctor(args: argparse.Namespace) -> int:
    from rich.table import Table

    from kpemu.kernel.probe import CNIS, PROXY_MODES, can_run, probe

    caps = probe()
    combos = {f"{c}/{m}": can_run(caps, c, m) for c in CNIS for m in PROXY_MODES}
    vm_ready = caps.has("tool:qemu-system-x86_64") and caps.has("tool:vng")
    if args.json:
        data = caps.to_json()
        data["runs"] = {k: {"host": ok, "missing": missing, "runtime": "host" if ok else "vm"}
                        for k, (ok, missing) in combos.items()}
        print(json.dumps(data, indent=2))
        return 0
    con = human_console()
    t = Table(title=f"kpemu doctor: kernel {caps.kernel} (probed in {caps.seconds:.2f}s)")
    for col in ("feature", "status", "how probed", "detail"):
        t.add_column(col, overflow="fold")
    for f in caps.features.values():
        t.add_row(f.name, "[green]ok[/]" if f.ok else "[red]missing[/]", f.how, f.detail)
    con.print(t)
    r = Table(title="what can run where")
    for col in ("cni / kube-proxy mode", "runtime", "why"):
        r.add_column(col, overflow="fold")
    for k, (ok, missing) in combos.items():
        where = "host" if ok else ("vm" if vm_ready else "[red]vm (not installed)[/]")
        r.add_row(k, where, "this kernel has everything" if ok else "host lacks " + ", ".join(missing))
    con.print(r)
    if not caps.root:
        con.print("[yellow]not root: kernel features were not probed (run as root)[/]")
    return 0


def _print_kernel(k: object) -> None:
    print(f"  kernel  {k.version} ({k.origin})\n  image   {k.vmlinuz}\n  modules {k.moddir}")


def cmd_vm_setup(args: argparse.Namespace) -> int:
    from kpemu import vm

    res = vm.setup(if_needed=args.if_needed)
    if res.action == "not-needed":
        print(f"vm setup: not needed, {res.reason}")
    elif res.action == "reused":
        print(f"vm setup: guest kernel already present ({res.reason}):")
        _print_kernel(res.kernel)
    else:
        print(f"vm setup: downloaded {res.package} ({res.download_bytes / 1e6:.1f} MB, {res.reason}) "
              f"and unpacked it in {res.seconds:.1f}s into {res.kernel.root}:")  # type: ignore[union-attr]
        _print_kernel(res.kernel)
        print("  nothing was installed: /boot and the bootloader are untouched")
    return 0


def cmd_vm_status(args: argparse.Namespace) -> int:
    from kpemu import vm

    st = vm.status()
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    k = st["kernel"]
    print(f"cache:  {st['cache']}")
    if k:
        print(f"kernel: {k['version']} from {k['origin']}\n  image   {k['vmlinuz']}\n  modules {k['modules']}")
    else:
        print("kernel: none (run `kpemu vm setup`)")
    for c in st["candidates"]:
        if c["lacks"]:
            print(f"  skipped {c['vmlinuz']}: lacks {', '.join(c['lacks'])}")
    print(f"qemu:   {st['qemu'] or 'missing'}\nvng:    {st['vng'] or 'missing'}")
    print(f"accel:  {'KVM' if st['kvm'] else 'software emulation (TCG)'} ({st['kvm_detail']})")
    return 0


def cmd_vm_exec(args: argparse.Namespace) -> int:

    from kpemu import vm

    cmd = args.cmd
    if not cmd:
        raise InputError("kpemu vm exec: give a command after --, e.g. kpemu vm exec -- uname -r")
    err = human_console(stderr=True)
    with err.status("starting the guest") as status:
        res = vm.boot(cmd, Path(args.out), args.timeout, echo=sys.stdout,
                      progress=lambda msg: status.update(msg))
    err.print(f"guest: boot-to-command {res.boot_seconds:.1f}s, total {res.total_seconds:.1f}s, "
              f"exit {res.rc}; console in {res.console_log}")
    return res.rc


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


def cmd_graph(args: argparse.Namespace) -> int:
    from kpemu.model import load_topology
    from kpemu.report.graph import render_graph

    print(render_graph(load_topology(args.file), args.format), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kpemu", description="Emulated Kubernetes Service data path.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("validate", help="check a topology or scenario file")
    s.add_argument("files", nargs="+")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("rules", help="the exact state kube-proxy would program on a node")
    s.add_argument("file")
    s.add_argument("--node", required=True)
    s.add_argument("--format", default="all",
                   choices=["iptables-restore", "iptables-save", "ipset", "ipvs", "all"])
    s.set_defaults(func=cmd_rules)

    s = sub.add_parser("deploy", help="build a lab from a topology (root)")
    s.add_argument("file")
    s.add_argument("--runtime", choices=["auto", "host", "vm"], default=None,
                   help="where to build it (default auto: this kernel when it can, else a guest kernel)")
    s.set_defaults(func=cmd_deploy, takes_command="with the vm runtime: -- CMD runs in the guest while the lab "
                                                  "is up (default: inspect)")

    s = sub.add_parser("destroy", help="remove a lab, or every kpemu lab with --all (root)")
    s.add_argument("name", nargs="?")
    s.add_argument("--all", action="store_true")
    s.set_defaults(func=cmd_destroy)

    s = sub.add_parser("inspect", help="namespaces, interfaces, addresses and routes of labs")
    s.add_argument("name", nargs="?")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("exec", help="run a command in a lab member's namespace")
    s.add_argument("name")
    s.add_argument("member")
    s.set_defaults(func=cmd_exec, takes_command="-- CMD to run")

    # >>> doctor / vm subcommands (guest runtime)
    s = sub.add_parser("doctor", help="kernel and tool capabilities; what can run on the host, what needs the vm")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_doctor)

    s = sub.add_parser("vm", help="the guest-kernel runtime (virtme-ng)")
    vsub = s.add_subparsers(dest="vm_command", required=True, parser_class=_Parser)
    v = vsub.add_parser("setup", help="provide a guest kernel (download Debian's into the cache)")
    v.add_argument("--if-needed", action="store_true", help="do nothing when this kernel has everything")
    v.set_defaults(func=cmd_vm_setup)
    v = vsub.add_parser("status", help="which guest kernel would be used, QEMU, KVM")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_vm_status)
    v = vsub.add_parser("exec", help="boot the guest once and run a command in it")
    v.add_argument("--out", default="runs/vm-exec", help="shared directory for the console and output logs")
    v.add_argument("--timeout", type=float, default=1800.0)
    v.set_defaults(func=cmd_vm_exec, takes_command="-- CMD to run in the guest")
    # <<< doctor / vm subcommands
    # >>> run subcommand (scenarios)
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
    # <<< run subcommand
    # >>> graph subcommand (pictures)
    s = sub.add_parser("graph", help="the topology as a picture (Mermaid, Graphviz dot or HTML)")
    s.add_argument("file")
    s.add_argument("--format", default="mermaid", choices=["mermaid", "dot", "html"])
    s.set_defaults(func=cmd_graph)
    # <<< graph subcommand
    return p


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """kpemu's own arguments and the command after the first `--` (deploy, exec, vm exec), kept whole:
    `kpemu deploy F -- kpemu exec lab node1 -- ipvsadm -Sn` keeps the inner `--`."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kpemu` console script."""
    try:
        own, command = split_command(sys.argv[1:] if argv is None else argv)
        args = build_parser().parse_args(own)
        if command and not getattr(args, "takes_command", None):
            raise InputError(f"kpemu {args.command}: takes no command after --")
        args.cmd = command
        return int(args.func(args))
    except KpemuError as e:
        print(f"kpemu: {e}" if not isinstance(e, InputError) else str(e), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("kpemu: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
