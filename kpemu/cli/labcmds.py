"""`deploy`, `destroy`, `inspect`, `exec`: the lab lifecycle."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kpemu.cli.base import add_command, add_output, emit, human_console
from kpemu.errors import InputError


def cmd_deploy(args: argparse.Namespace) -> int:
    from kpemu import lab
    from kpemu.examples import resolve
    from kpemu.model import load_topology
    from kpemu.runtime import choose_runtime

    topo = load_topology(resolve(args.file))
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

    emit(args, lab.inspect(args.name), render_inspect)
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    from kpemu import lab

    cmd = args.cmd
    if not cmd:
        raise InputError("kpemu exec: give a command after --, e.g. kpemu exec LAB node1 -- ip route")
    return lab.exec_in(args.name, args.member, cmd)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = add_command(sub, "deploy", "build a lab from a topology (root)",
                    ["sudo kpemu deploy topologies/flannel-vxlan.yaml",
                     "sudo kpemu deploy example:calico-ipip --runtime vm -- kpemu exec calico node1 -- ipvsadm -Ln"],
                    description="build a lab from a topology (root). On the host the lab stays up (kpemu exec, "
                                "kpemu destroy); with --runtime vm it lives while the guest runs -- CMD.")
    s.add_argument("file", metavar="TOPOLOGY", help="a YAML file, or example:NAME (see kpemu examples)")
    s.add_argument("--runtime", choices=["auto", "host", "vm"], default=None,
                   help="where to build it (default auto: this kernel when it can, else a guest kernel)")
    s.set_defaults(func=cmd_deploy, takes_command="with the vm runtime: -- CMD runs in the guest while the lab "
                                                  "is up (default: inspect)")

    s = add_command(sub, "destroy", "remove a lab, or every kpemu lab with --all (root)",
                    ["sudo kpemu destroy flannel", "sudo kpemu destroy --all"])
    s.add_argument("name", nargs="?")
    s.add_argument("--all", action="store_true")
    s.set_defaults(func=cmd_destroy)

    s = add_command(sub, "inspect", "namespaces, interfaces, addresses and routes of labs",
                    ["kpemu inspect", "kpemu inspect flannel -o json | jq '.labs[0].members[].member'"])
    s.add_argument("name", nargs="?")
    add_output(s)
    s.set_defaults(func=cmd_inspect)

    s = add_command(sub, "exec", "run a command in a lab member's namespace: kpemu exec LAB MEMBER -- CMD",
                    ["sudo kpemu exec flannel node1 -- iptables-save -t nat",
                     "sudo kpemu exec calico client -- curl -s 10.246.198.17:30080"])
    s.add_argument("name", metavar="LAB")
    s.add_argument("member", metavar="MEMBER")
    s.set_defaults(func=cmd_exec, takes_command="-- CMD to run")
