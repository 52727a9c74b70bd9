"""`deploy`, `destroy`, `inspect`, `exec`: the lab lifecycle."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kpemu.cli.base import human_console
from kpemu.errors import InputError


def cmd_deploy(args: argparse.Namespace) -> int:
    from kpemu import lab
    from kpemu.model import load_topology
    from kpemu.runtime import choose_runtime

    topo = load_topology(args.file)
    cmd = args.cmd
    runtime, reason = choose_runtime(args.runtime, [(topo.cni, topo.kubeProxy.mode)])
    if topo.containers():
        from kpemu.docker.engine import blocker
        from kpemu.errors import EnvironmentProblem

        if why := blocker(True, runtime):
            raise EnvironmentProblem(f"lab {topo.name}: {why[0]}", why[1])
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


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
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
